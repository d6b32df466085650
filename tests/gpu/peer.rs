//! Two devices: peer access, peer copies, cross-device events. Ignored with fewer than two GPUs.

use crate::common::{assert_close, assert_same, random_ints_f32, random_u32, rng, vadd_module};
use cuda_runtime::graph::{Graph, MemsetValue};
use cuda_runtime::{
    kernel_args, Device, DeviceBuffer, Error, ErrorCode, Event, LaunchConfig, Stream, StreamFlags,
};

crate::tests![; two_gpus:
    peer_access_rules_and_copies,
    cross_device_event_wait,
    peer_3d_copies,
    portable_mapped_memory_on_the_other_device,
    host_memory_of_one_device_used_by_the_other,
    reset_of_the_source_waits_for_peer_copies,
    graph_nodes_refuse_another_devices_memory,
    revoking_peer_access_waits_for_queued_peer_copies,
    peer_access_toggled_while_another_thread_copies,
];

/// A graph of device 0 refuses nodes over device 1's memory (a memset, a kernel argument), with
/// an error naming both devices, before the driver sees them (a graph could not keep the other
/// device's memory and its reset apart); the graph stays usable: a node over device 0's memory
/// added after the refusals replays and matches the CPU.
fn graph_nodes_refuse_another_devices_memory() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let mut r = rng();
    let n = r.usize(1000..5000);
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    d1.set_current().unwrap();
    let mut far = DeviceBuffer::from_slice(&hb).unwrap();
    d0.set_current().unwrap();
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut g = Graph::new().unwrap();
    let e = g
        .add_memset_node(&[], &mut far, MemsetValue::U32(7))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::DeviceMismatch {
                found: 1,
                expected: 0,
                ..
            }
        ),
        "{e}"
    );
    // SAFETY: vadd touches its three buffers below the smallest of their lengths.
    let e =
        unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &far, n, &mut c, n]) }
            .unwrap_err();
    assert!(
        matches!(
            e,
            Error::DeviceMismatch {
                found: 1,
                expected: 0,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(g.nodes().unwrap().len(), 0, "a refused node was added");
    // SAFETY: as above.
    unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }.unwrap();
    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same(
        "graph on device 0 after the refusals",
        &c.to_vec().unwrap(),
        &want,
    );
    // The other device's buffer is untouched.
    assert_same("device 1's buffer", &far.to_vec().unwrap(), &hb);
}

/// A large peer copy out of device 1's memory, queued on device 0, then device 1 reset at once:
/// the reset waits for device 0's copy before freeing the source.
fn reset_of_the_source_waits_for_peer_copies() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let mut r = rng();
    let n = 64 << 20;
    let data = random_u32(&mut r, n);
    d1.set_current().unwrap();
    let src = DeviceBuffer::from_slice(&data).unwrap();
    d0.set_current().unwrap();
    // A blocking stream: ordered after the legacy-stream memset below.
    let s0 = Stream::new().unwrap();
    let mut dst = DeviceBuffer::<u32>::new(n).unwrap();
    for round in 0..2 {
        dst.memset_u8(0).unwrap();
        dst.copy_from_device_async(&src, &s0).unwrap();
        if round == 1 {
            d1.reset().unwrap();
        }
        s0.synchronize().unwrap();
        assert_eq!(dst.to_vec().unwrap(), data, "round {round}");
    }
    // The source died with device 1's context.
    let e = dst.copy_from_device(&src).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ContextIsDestroyed, "{e}");
}

/// Managed and mapped memory of device 0 used by work of device 1: dropping it waits for that
/// work, and a reset of device 0 (which frees or unmaps it) waits for device 1 first.
fn host_memory_of_one_device_used_by_the_other() {
    use crate::common::random_f32;
    use cuda_runtime::{kernels, HostAllocFlags, LaunchConfig, ManagedBuffer, PinnedBuffer};
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let mut r = rng();
    let n = 16 << 20;
    let data = random_u32(&mut r, n);
    d0.set_current().unwrap();
    let managed = ManagedBuffer::from_slice(&data).unwrap();
    d1.set_current().unwrap();
    let mut on1 = DeviceBuffer::<u32>::new(n).unwrap();
    // A default-stream copy on device 1 (asynchronous for the host), then the source dropped
    // at once: the drop waits for device 1's work before freeing.
    on1.copy_from_device(&managed).unwrap();
    drop(managed);
    assert_eq!(
        on1.to_vec().unwrap(),
        data,
        "copy out of managed memory of device 0"
    );

    // Write-combined memory belongs to device 0's context: its reset frees it.
    d0.set_current().unwrap();
    let flags = HostAllocFlags::MAPPED | HostAllocFlags::PORTABLE | HostAllocFlags::WRITE_COMBINED;
    let mut wc = PinnedBuffer::<u32>::with_flags(n, flags).unwrap();
    wc.as_mut_slice().unwrap().copy_from_slice(&data);
    let m = 4096;
    let small = random_f32(&mut r, m);
    let mut wc_small = PinnedBuffer::<f32>::with_flags(m, flags).unwrap();
    wc_small.as_mut_slice().unwrap().copy_from_slice(&small);
    // A CPU view of it keeps the reset away.
    {
        let view = wc_small.as_slice().unwrap();
        let e = d0.reset().unwrap_err();
        assert!(
            matches!(e, cuda_runtime::Error::ResetWhileBorrowed { device: 0, .. }),
            "{e}"
        );
        assert_eq!(e.code(), ErrorCode::NotPermitted);
        assert_eq!(&view[..], &small[..], "view survives the refused reset");
    }
    d1.set_current().unwrap();
    let s1 = Stream::new().unwrap();
    // Device 1 spins 300 ms, then sums device 0's mapped memory; a copy out of the large buffer
    // follows on the same stream. The reset of device 0 must wait for both.
    let mut sum = DeviceBuffer::<f32>::from_slice(&[f32::NAN]).unwrap();
    kernels::spin::spin_read_sum(
        &s1,
        &LaunchConfig::new(1u32, 1u32),
        &wc_small,
        &mut sum,
        300_000_000,
    )
    .unwrap();
    let mut back = DeviceBuffer::<u32>::new(n).unwrap();
    back.copy_from_device_async(&wc, &s1).unwrap();
    let t = std::time::Instant::now();
    d0.reset().unwrap();
    let waited = t.elapsed();
    assert!(
        s1.query().unwrap(),
        "device 1's work still ran after the reset returned ({waited:?})"
    );
    s1.synchronize().unwrap();
    let want: f32 = small.iter().sum();
    assert_close(
        "device 1's sum (the memory freed under it?)",
        &sum.to_vec().unwrap(),
        &[want],
        1e-3,
    );
    assert_eq!(
        back.to_vec().unwrap(),
        data,
        "copy out of device 0's mapped memory"
    );
    // The memory died with device 0's context.
    let e = wc.as_slice().unwrap_err();
    assert_eq!(e.code(), ErrorCode::ContextIsDestroyed, "{e}");
    drop((wc, wc_small));
    assert_eq!(
        back.to_vec().unwrap(),
        data,
        "device 1 unaffected by device 0's reset"
    );
}

/// Mapped memory allocated on device 0 with `PORTABLE`, read and written by a kernel of
/// device 1 through the address `device_ptr_on(1)` gives; without `PORTABLE` it is refused.
fn portable_mapped_memory_on_the_other_device() {
    use crate::common::random_f32;
    use cuda_runtime::{kernels, HostAllocFlags, LaunchConfig, PinnedBuffer};
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let mut r = rng();
    let n = 70_001;
    let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
    d0.set_current().unwrap();
    let flags = HostAllocFlags::MAPPED | HostAllocFlags::PORTABLE;
    let ma = PinnedBuffer::from_slice(&a).unwrap();
    let mut mb = PinnedBuffer::<f32>::with_flags(n, flags).unwrap();
    mb.as_mut_slice().unwrap().copy_from_slice(&b);
    let mut mc = PinnedBuffer::<f32>::with_flags(n, flags).unwrap();
    mc.as_mut_slice().unwrap().fill(f32::NAN);
    let lone = PinnedBuffer::<f32>::with_flags(n, HostAllocFlags::MAPPED).unwrap();
    let p1 = mc.device_ptr_on(d1).unwrap();
    assert_eq!(
        p1,
        mc.as_host_ptr() as u64,
        "portable mapped memory under UVA"
    );
    let e = lone.device_ptr_on(d1).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    assert!(lone.device_ptr_on(d0).is_ok());
    d1.set_current().unwrap();
    let s1 = Stream::new().unwrap();
    // `ma` is page-locked but not mapped: the kernel reads a device copy of it.
    let mut da = DeviceBuffer::<f32>::new(n).unwrap();
    da.copy_from_pinned_async(&ma, &s1).unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    kernels::vector_add::vadd(&s1, &cfg, &da, &mb, &mut mc).unwrap();
    // The non-portable buffer is refused for device 1's stream before the launch.
    let mut out = DeviceBuffer::<f32>::new(n).unwrap();
    let e = kernels::vector_add::vadd(&s1, &cfg, &da, &lone, &mut out).unwrap_err();
    assert!(
        matches!(e, cuda_runtime::Error::DeviceMismatch { .. }),
        "{e}"
    );
    // CPU access waits for device 1's kernel.
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_same(
        "vadd on device 1 over device 0's mapped memory",
        &mc.as_slice().unwrap(),
        &want,
    );
}

fn peer_3d_copies() {
    use cuda_runtime::{
        copy_3d, copy_3d_async, Copy3D, Extent, HostPitched, HostPitchedMut, PitchedBuffer, Pos,
    };
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let mut r = rng();
    let full = Extent::new(300, 20, 4);
    let host = random_u32(&mut r, full.count().unwrap());
    d0.set_current().unwrap();
    let mut a = PitchedBuffer::<u32>::new_3d(full).unwrap();
    copy_3d(
        &mut a,
        &HostPitched::new(&host, 300, 20).unwrap(),
        &Copy3D::new(full),
    )
    .unwrap();
    d1.set_current().unwrap();
    let mut b = PitchedBuffer::<u32>::new_3d(full).unwrap();
    b.memset(0).unwrap();
    let e = Extent::new(100, 10, 2);
    let (sp, dp) = (Pos::new(7, 3, 1), Pos::new(50, 9, 2));
    // Synchronous 3-D peer copy, device 0 -> device 1.
    copy_3d(&mut b, &a, &Copy3D::new(e).src_pos(sp).dst_pos(dp)).unwrap();
    // The memset and the copy ran in device 1's legacy stream, which no stream of device 0 is
    // ordered after: wait for them before device 0 reads `b`.
    d1.synchronize().unwrap();
    // And on a stream of device 1, device 1 -> device 0.
    let s1 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    d0.set_current().unwrap();
    let mut c = PitchedBuffer::<u32>::new_3d(full).unwrap();
    c.memset(0xFF).unwrap();
    d1.set_current().unwrap();
    copy_3d_async(&mut c, &b, &Copy3D::new(full), &s1).unwrap_err();
    // Blocking, so that it orders after the memset of `c` on the legacy stream.
    let s0 = {
        d0.set_current().unwrap();
        Stream::new().unwrap()
    };
    copy_3d_async(&mut c, &b, &Copy3D::new(full), &s0).unwrap();
    s0.synchronize().unwrap();
    let mut got = vec![1u32; host.len()];
    copy_3d(
        &mut HostPitchedMut::new(&mut got, 300, 20).unwrap(),
        &c,
        &Copy3D::new(full),
    )
    .unwrap();
    let mut want = vec![0u32; host.len()];
    for z in 0..e.depth {
        for y in 0..e.height {
            for x in 0..e.width {
                want[((dp.z + z) * 20 + dp.y + y) * 300 + dp.x + x] =
                    host[((sp.z + z) * 20 + sp.y + y) * 300 + sp.x + x];
            }
        }
    }
    assert_same("3-D peer copies", &got, &want);
}

fn peer_access_rules_and_copies() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let can = d0.can_access_peer(d1).unwrap();
    eprintln!("device 0 can access device 1: {can}");
    if can {
        d0.enable_peer_access(d1).unwrap();
        let e = d0.enable_peer_access(d1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::PeerAccessAlreadyEnabled, "{e}");
        d0.disable_peer_access(d1).unwrap();
        let e = d0.disable_peer_access(d1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::PeerAccessNotEnabled, "{e}");
        d0.enable_peer_access(d1).unwrap();
    }
    let e = d0.enable_peer_access(d0).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidDevice, "{e}");
    let mut r = rng();
    let n = (3 << 20) + 5;
    let data = random_u32(&mut r, n);
    d0.set_current().unwrap();
    let a = DeviceBuffer::from_slice(&data).unwrap();
    d1.set_current().unwrap();
    let mut b = DeviceBuffer::<u32>::new(n).unwrap();
    b.memset_u32(0xFFFF_FFFF).unwrap();
    // Synchronous peer copy, device 0 -> device 1 (cudaMemcpyPeer).
    b.copy_from_device(&a).unwrap();
    assert_same("peer copy 0 -> 1", &b.to_vec().unwrap(), &data);
    // On a stream of device 0, device 1 -> device 0, into a sub-range.
    d0.set_current().unwrap();
    let s0 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut c = DeviceBuffer::<u32>::zeroed(n).unwrap();
    c.slice_mut(100..n)
        .unwrap()
        .copy_from_device_async(&b.slice(0..n - 100).unwrap(), &s0)
        .unwrap();
    // Drop the source on device 1 right away: its drop waits for device 0's copy.
    drop(b);
    s0.synchronize().unwrap();
    let got = c.to_vec().unwrap();
    assert!(got[..100].iter().all(|&x| x == 0));
    assert_same(
        "peer copy 1 -> 0 on a stream",
        &got[100..],
        &data[..n - 100],
    );
    if can {
        d0.disable_peer_access(d1).unwrap();
    }
}

fn cross_device_event_wait() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    d0.set_current().unwrap();
    let s0 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut stamps = DeviceBuffer::<u64>::zeroed(2).unwrap();
    cuda_runtime::kernels::spin::spin(
        &s0,
        &cuda_runtime::LaunchConfig::new(1u32, 1u32),
        &mut stamps,
        50_000_000,
        0,
    )
    .unwrap();
    let ev = Event::new().unwrap();
    ev.record(&s0).unwrap();
    d1.set_current().unwrap();
    let s1 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    s1.wait_event(&ev).unwrap();
    let mark = Event::new().unwrap();
    mark.record(&s1).unwrap();
    mark.synchronize().unwrap();
    // Device 1's stream could only pass the wait once device 0's kernel finished.
    assert!(
        ev.query().unwrap(),
        "device 1 passed the wait before device 0's event"
    );
    d0.set_current().unwrap();
    let st = stamps.to_vec().unwrap();
    assert!(st[1] > st[0] && st[1] - st[0] >= 50_000_000, "{st:?}");
}

/// What the two revocation tests copy from: `n` random words in device 1's memory and as many
/// other ones in memory of a new pool of device 1; device 0 current afterwards, with peer
/// access to device 1 on (`was_enabled`: it was on already).
struct PeerSources {
    plain: Vec<u32>,
    pooled: Vec<u32>,
    src: DeviceBuffer<u32>,
    pool: cuda_runtime::MemPool,
    psrc: DeviceBuffer<u32>,
    was_enabled: bool,
}

fn peer_sources(n: usize) -> PeerSources {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let mut r = rng();
    let (plain, pooled) = (random_u32(&mut r, n), random_u32(&mut r, n));
    d1.set_current().unwrap();
    let src = DeviceBuffer::from_slice(&plain).unwrap();
    let pool = cuda_runtime::MemPool::new(d1, cuda_runtime::MemPoolProps::default()).unwrap();
    let s1 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut psrc = DeviceBuffer::<u32>::new_from_pool_async(n, &pool, &s1).unwrap();
    psrc.copy_from_host_async(&pooled, &s1).unwrap();
    s1.synchronize().unwrap();
    d0.set_current().unwrap();
    let was_enabled = match d0.enable_peer_access(d1) {
        Ok(()) => false,
        Err(e) if e.code() == ErrorCode::PeerAccessAlreadyEnabled => true,
        Err(e) => panic!("{e}"),
    };
    PeerSources {
        plain,
        pooled,
        src,
        pool,
        psrc,
        was_enabled,
    }
}

/// A peer copy out of device 1's memory held on device 0 behind a 300 ms spin, then device 0's
/// peer access to device 1 disabled at once; then the same with memory of a pool of device 1
/// and device 0's access to the pool taken away. Each revocation waits for the queued copy,
/// which completes with the right bytes and no error (the driver alone revokes under it: the
/// copy fails with `cudaErrorLaunchFailure`, sticky for both devices; probe
/// `peer_revoke_queued.cu`).
fn revoking_peer_access_waits_for_queued_peer_copies() {
    use crate::host_chunks::stall;
    use cuda_runtime::PoolAccess;
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    if !d0.can_access_peer(d1).unwrap() {
        eprintln!("device 0 cannot access device 1: nothing to revoke");
        return;
    }
    let n = 16 << 20;
    let PeerSources {
        plain,
        pooled,
        src,
        pool,
        psrc,
        was_enabled,
    } = peer_sources(n);
    pool.set_access(d0, PoolAccess::ReadWrite).unwrap();
    let s0 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut dst = DeviceBuffer::<u32>::new(n).unwrap();
    for round in 0..2 {
        dst.memset_u32_async(0xFFFF_FFFF, &s0).unwrap();
        stall(&s0, 300);
        let want = if round == 0 {
            dst.copy_from_device_async(&src, &s0).unwrap();
            d0.disable_peer_access(d1).unwrap();
            &plain
        } else {
            dst.copy_from_device_async(&psrc, &s0).unwrap();
            pool.set_access(d0, PoolAccess::None).unwrap();
            assert_eq!(pool.access(d0).unwrap(), PoolAccess::None);
            &pooled
        };
        s0.synchronize().unwrap();
        assert_same(
            &format!("peer copy under a revocation, round {round}"),
            &dst.to_vec().unwrap(),
            want,
        );
    }
    // Both devices still work.
    d1.set_current().unwrap();
    assert_same("device 1 after", &src.to_vec().unwrap(), &plain);
    d0.set_current().unwrap();
    if was_enabled {
        d0.enable_peer_access(d1).unwrap();
    }
}

/// Children run by `run_in_child_within`.
pub const CHILDREN: &[(&str, fn())] = &[("peer_toggle", peer_toggle_child)];

/// One thread copies out of device 1's memory (plain and pool) into device 0's, 40 times, each
/// checked against the CPU; another thread meanwhile turns device 0's peer access to device 1
/// and its access to the pool on and off as fast as it can. Every copy should be right, no call
/// should fail but with the runtime's already-enabled / not-enabled errors, and nothing should
/// hang.
///
/// In a child process (a failure is sticky for both devices). When only revocations waited for
/// queued copies it failed (ea015a3, 7b7112a; H200 x2, driver 580): a copy's synchronisation
/// returned `cudaErrorLaunchFailure` within 0.4 s with pool access toggled
/// (`CUDA_RUNTIME_TEST_TOGGLE=pool`; `=peer` alone passed); granting now waits too.
fn peer_access_toggled_while_another_thread_copies() {
    let out = crate::common::run_in_child_within("peer_toggle", std::time::Duration::from_secs(60));
    assert!(out.contains("peer toggle child ok"), "{out}");
}

fn peer_toggle_child() {
    use cuda_runtime::PoolAccess;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    if !d0.can_access_peer(d1).unwrap() {
        eprintln!("device 0 cannot access device 1: nothing to toggle");
        println!("peer toggle child ok");
        return;
    }
    let n = 1 << 20;
    let PeerSources {
        plain,
        pooled,
        src,
        pool,
        psrc,
        was_enabled,
    } = peer_sources(n);
    let done = AtomicBool::new(false);
    let toggles = std::thread::scope(|sc| {
        let toggler = sc.spawn(|| {
            d0.set_current().unwrap();
            let mut k = 0u32;
            // CUDA_RUNTIME_TEST_TOGGLE=peer or pool: toggle only that (for narrowing down).
            let only = std::env::var("CUDA_RUNTIME_TEST_TOGGLE").unwrap_or_default();
            while !done.load(Ordering::Acquire) {
                if only != "pool" {
                    match d0.disable_peer_access(d1) {
                        Ok(()) => {}
                        Err(e) => assert_eq!(e.code(), ErrorCode::PeerAccessNotEnabled, "{e}"),
                    }
                }
                if only != "peer" {
                    pool.set_access(d0, PoolAccess::None).unwrap();
                }
                if only != "pool" {
                    match d0.enable_peer_access(d1) {
                        Ok(()) => {}
                        Err(e) => {
                            assert_eq!(e.code(), ErrorCode::PeerAccessAlreadyEnabled, "{e}")
                        }
                    }
                }
                if only != "peer" {
                    pool.set_access(d0, PoolAccess::ReadWrite).unwrap();
                }
                k += 1;
            }
            k
        });
        let s0 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
        let mut dst = DeviceBuffer::<u32>::new(n).unwrap();
        for i in 0..40 {
            dst.memset_u32_async(0xFFFF_FFFF, &s0).unwrap();
            let want = if i % 2 == 0 {
                dst.copy_from_device_async(&src, &s0).unwrap();
                &plain
            } else {
                dst.copy_from_device_async(&psrc, &s0).unwrap();
                &pooled
            };
            s0.synchronize().unwrap();
            assert_same(&format!("copy {i}"), &dst.to_vec().unwrap(), want);
        }
        done.store(true, Ordering::Release);
        toggler.join().unwrap()
    });
    eprintln!("{toggles} rounds of revocations beside 40 checked copies");
    // Both devices still work.
    d1.set_current().unwrap();
    assert_same("device 1 after", &src.to_vec().unwrap(), &plain);
    d0.set_current().unwrap();
    // The toggler ended with access on: left as found.
    pool.set_access(d0, PoolAccess::None).unwrap();
    if !was_enabled {
        d0.disable_peer_access(d1).unwrap();
    }
    println!("peer toggle child ok");
}
