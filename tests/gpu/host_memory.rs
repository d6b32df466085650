//! Page-locked, registered, mapped and managed memory; staged pageable copies; pools; pointer
//! attributes; IPC.

use crate::common::{assert_close, assert_same, random_bytes, random_f32, random_u32, rng};
use cuda_runtime::{
    kernels, pointer_attributes, Device, DeviceBuffer, Error, ErrorCode, Event, EventFlags,
    HostAllocFlags, HostRegisterFlags, HostRegistration, IpcEventHandle, IpcMemHandle,
    LaunchConfig, Location, ManagedBuffer, MemAdvice, MemPool, MemPoolProps, MemoryType,
    PinnedBuffer, ReusePolicy, Stream, StreamFlags,
};

crate::tests![
    pinned_async_round_trip_all_flags,
    pinned_cpu_access_waits_for_the_kernel,
    concurrent_cpu_views_all_wait_for_the_writer,
    registration_inside_a_host_function_is_refused,
    zero_copy_kernel_on_mapped_memory,
    registration_round_trip_and_read_only_rules,
    read_only_flag_through_with_is_read_only_for_the_device,
    staged_pageable_copies_match_for_any_length_and_alignment,
    staged_async_copies_on_streams,
    managed_memory_kernels_prefetch_advice,
    managed_allocation_over_free_memory_is_refused,
    pools_allocate_reuse_and_report,
    pointer_attributes_match_libcudart,
    ipc_memory_and_event_in_a_second_process,
    ;
    exclusive:
    reset_refused_while_context_owned_memory_is_borrowed,
];

/// Children run by `run_in_child`.
pub const CHILDREN: &[(&str, fn())] = &[("ipc_child", ipc_child)];

fn pinned_async_round_trip_all_flags() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    for flags in [
        HostAllocFlags::empty(),
        HostAllocFlags::PORTABLE,
        HostAllocFlags::MAPPED,
        HostAllocFlags::WRITE_COMBINED,
        HostAllocFlags::all(),
    ] {
        for n in [0usize, 1, 4097, 3 << 20] {
            let data = random_u32(&mut r, n);
            let src = PinnedBuffer::from_slice(&data).unwrap();
            let mut dst = PinnedBuffer::<u32>::with_flags(n, flags).unwrap();
            assert_eq!(dst.flags(), flags);
            dst.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
            let mut dev = DeviceBuffer::<u32>::new(n).unwrap();
            dev.copy_from_pinned_async(&src, &s).unwrap();
            dev.copy_to_pinned_async(&mut dst, &s).unwrap();
            // No stream synchronisation: the CPU view waits for the copy.
            assert_same(&format!("{flags:?} n={n}"), &dst.as_slice().unwrap(), &data);
            // The sync path from a page-locked slice.
            let mut dev2 = DeviceBuffer::<u32>::new(n).unwrap();
            dev2.copy_from_host(&src.as_slice().unwrap()).unwrap();
            assert_same("sync from pinned", &dev2.to_vec().unwrap(), &data);
        }
    }
    let mut short = PinnedBuffer::<u32>::new(3).unwrap();
    let dev = DeviceBuffer::<u32>::new(4).unwrap();
    let e = dev.copy_to_pinned_async(&mut short, &s).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 4,
                actual: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = PinnedBuffer::<u8>::with_flags(1, HostAllocFlags::from_bits_retain(0x40)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn pinned_cpu_access_waits_for_the_kernel() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let src = random_f32(&mut r, 1000);
    let dsrc = DeviceBuffer::from_slice(&src).unwrap();
    let mut out = PinnedBuffer::<f32>::with_flags(1, HostAllocFlags::MAPPED).unwrap();
    out.as_mut_slice().unwrap()[0] = f32::NAN;
    // The kernel spins 100 ms, then writes the sum into the mapped page-locked memory.
    kernels::spin::spin_read_sum(
        &s,
        &LaunchConfig::new(1u32, 1u32),
        &dsrc,
        &mut out,
        100_000_000,
    )
    .unwrap();
    let got = out.as_slice().unwrap()[0];
    let want: f32 = src.iter().sum();
    assert_close(
        "the CPU read before the kernel wrote",
        &[got],
        &[want],
        1e-3,
    );
    // Unmapped page-locked memory cannot be a kernel argument.
    let mut plain = PinnedBuffer::<u32>::new(16).unwrap();
    let e =
        kernels::spin::write_index(&s, &LaunchConfig::for_elements(16, 32).unwrap(), &mut plain)
            .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
}

/// Two threads read mapped memory a slow kernel still has to write: each view waits for the
/// kernel, also the one that finds the other thread already waiting.
fn concurrent_cpu_views_all_wait_for_the_writer() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let src = random_f32(&mut r, 1000);
    let dsrc = DeviceBuffer::from_slice(&src).unwrap();
    let want: f32 = src.iter().sum();
    for _ in 0..3 {
        let mut out = PinnedBuffer::<f32>::with_flags(1, HostAllocFlags::MAPPED).unwrap();
        out.as_mut_slice().unwrap()[0] = f32::NAN;
        kernels::spin::spin_read_sum(
            &s,
            &LaunchConfig::new(1u32, 1u32),
            &dsrc,
            &mut out,
            50_000_000,
        )
        .unwrap();
        let start = std::sync::Barrier::new(4);
        let got: Vec<f32> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    sc.spawn(|| {
                        start.wait();
                        out.as_slice().unwrap()[0]
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let wants = vec![want; got.len()];
        assert_close("a thread read before the kernel wrote", &got, &wants, 1e-3);
    }
}

/// `cudaHostRegister` inside a host function is refused: the scope could neither wait for its
/// work nor unregister there.
fn registration_inside_a_host_function_is_refused() {
    let s = Stream::new().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    s.launch_host_fn(move || {
        let mut v = vec![7u32; 4096];
        let r = HostRegistration::with(&mut v, HostRegisterFlags::empty(), |reg| reg.len());
        tx.send(r.map_err(|e| (e.code(), e.to_string()))).unwrap();
    })
    .unwrap();
    s.synchronize().unwrap();
    let (code, text) = rx.recv().unwrap().unwrap_err();
    assert_eq!(code, ErrorCode::NotPermitted, "{text}");
    assert!(text.contains("host function"), "{text}");
    // Outside a host function the same registration works.
    let mut v = vec![7u32; 4096];
    let n = HostRegistration::with(&mut v, HostRegisterFlags::empty(), |reg| reg.len()).unwrap();
    assert_eq!(n, 4096);

    // A CPU view that would have to wait for device work is refused inside a host function
    // (waiting there could never finish: the copy's stream runs the host function).
    let mut rand = rng();
    let data = random_u32(&mut rand, 1 << 20);
    let d = DeviceBuffer::from_slice(&data).unwrap();
    let mut pinned = PinnedBuffer::<u32>::new(data.len()).unwrap();
    d.copy_to_pinned_async(&mut pinned, &s).unwrap();
    let pinned = std::sync::Arc::new(pinned);
    let (tx, rx) = std::sync::mpsc::channel();
    let p = pinned.clone();
    s.launch_host_fn(move || {
        let r = p.as_slice().map(|v| v[0]);
        tx.send(r.map_err(|e| (e.code(), e.to_string()))).unwrap();
    })
    .unwrap();
    s.synchronize().unwrap();
    // Refused while the crate does not know the copy complete; granted once it knows (the
    // copy precedes the host function on its stream, so it is complete when the function
    // runs, and something may have observed that first: under racecheck the reclaimer did,
    // twelfth session). Either way the view shows the copied data, never a copy in progress.
    match rx.recv().unwrap() {
        Err((code, text)) => {
            assert_eq!(code, ErrorCode::NotPermitted, "{text}");
            assert!(text.contains("host function"), "{text}");
        }
        Ok(first) => assert_eq!(first, data[0], "a view granted inside the host function"),
    }
    assert_same(
        "pinned after the host function",
        &pinned.as_slice().unwrap(),
        &data,
    );

    // So is a device reset (it waits for device work, possibly the host function's own).
    let dev = cuda_runtime::Device::current().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    s.launch_host_fn(move || {
        tx.send(dev.reset().map_err(|e| e.code())).unwrap();
    })
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(rx.recv().unwrap(), Err(ErrorCode::NotPermitted));
    assert_same(
        "pinned after the refused reset",
        &pinned.as_slice().unwrap(),
        &data,
    );
}

fn zero_copy_kernel_on_mapped_memory() {
    let mut r = rng();
    let n = 100_003;
    let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
    let flags = HostAllocFlags::MAPPED | HostAllocFlags::PORTABLE;
    let pa = PinnedBuffer::from_slice(&a).unwrap();
    let mut ma = PinnedBuffer::<f32>::with_flags(n, flags).unwrap();
    ma.as_mut_slice()
        .unwrap()
        .copy_from_slice(&pa.as_slice().unwrap());
    let mut mb = PinnedBuffer::<f32>::with_flags(n, flags).unwrap();
    mb.as_mut_slice().unwrap().copy_from_slice(&b);
    let mut mc = PinnedBuffer::<f32>::with_flags(n, HostAllocFlags::MAPPED).unwrap();
    mc.as_mut_slice().unwrap().fill(f32::NAN);
    assert!(mc.device_ptr().is_ok());
    let here = cuda_runtime::Device::current().unwrap();
    assert_eq!(ma.device_ptr_on(here).unwrap(), ma.device_ptr().unwrap());
    let s = Stream::new().unwrap();
    kernels::vector_add::vadd(
        &s,
        &LaunchConfig::for_elements(n, 256).unwrap(),
        &ma,
        &mb,
        &mut mc,
    )
    .unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_same("zero-copy vadd", &mc.as_slice().unwrap(), &want);
    let e = PinnedBuffer::<f32>::new(4)
        .unwrap()
        .device_ptr()
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn registration_round_trip_and_read_only_rules() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let n = (1 << 20) + 13;
    let data = random_u32(&mut r, n);
    let mut host = data.clone();
    let mut dev = DeviceBuffer::<u32>::new(n).unwrap();
    HostRegistration::with(&mut host, HostRegisterFlags::MAPPED, |reg| {
        dev.copy_from_pinned_async(reg, &s).unwrap();
        // Overwrite through the registration once the copy is done (the view waits).
        reg.as_mut_slice().unwrap().fill(7);
        dev.copy_to_pinned_async(reg, &s).unwrap();
        assert!(reg.device_ptr().is_ok());
    })
    .unwrap();
    // The copy back wrote the original data over the 7s before the scope ended.
    assert_same("registered round trip", &host, &data);
    // A kernel writes registered mapped memory.
    let mut out = vec![0u32; 5000];
    HostRegistration::with(&mut out, HostRegisterFlags::MAPPED, |reg| {
        kernels::spin::write_index(&s, &LaunchConfig::for_elements(5000, 128).unwrap(), reg)
            .unwrap();
    })
    .unwrap();
    let want: Vec<u32> = (0..5000u32).map(|i| i.wrapping_mul(2654435761)).collect();
    assert_same("kernel into registered memory", &out, &want);
    // Read-only: no kernel writes, no copies into it.
    // On a page of its own (see host_chunks' bad_chunks test).
    let mut backing = vec![0u32; 3 * 1024];
    let skip = backing.as_ptr().align_offset(4096);
    backing[skip..skip + 64].copy_from_slice(&random_u32(&mut r, 64));
    let ro = &backing[skip..skip + 64];
    HostRegistration::with_read_only(ro, HostRegisterFlags::MAPPED, |reg| {
        let e = kernels::spin::write_index(&s, &LaunchConfig::for_elements(64, 64).unwrap(), reg)
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
        let d = DeviceBuffer::<u32>::new(64).unwrap();
        assert!(d.copy_to_pinned_async(reg, &s).is_err());
        let mut d2 = DeviceBuffer::<u32>::new(64).unwrap();
        d2.copy_from_pinned_async(reg, &s).unwrap();
        // `s` is non-blocking: the legacy-stream read below does not wait for it by itself.
        s.synchronize().unwrap();
        assert_same("from read-only registration", &d2.to_vec().unwrap(), ro);
    })
    .unwrap();
    // Registering memory twice is the runtime's error.
    let mut twice = vec![0u8; 1 << 16];
    HostRegistration::with(&mut twice[..], HostRegisterFlags::empty(), |reg| {
        let p = reg.len();
        assert_eq!(p, 1 << 16);
    })
    .unwrap();
    let e = HostRegistration::with(
        &mut [0u8; 16],
        HostRegisterFlags::from_bits_retain(0x100),
        |_| (),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

/// Review rev-f15: `HostRegistration::with` given `HostRegisterFlags::READ_ONLY` registers the
/// slice read-only with the driver; copies into it and kernels writing it were accepted by the
/// crate (only `with_read_only` marked the registration read-only) and reached the device. Now
/// they are refused, and the CPU may still write it (its slice is borrowed exclusively). NOT
/// yet run on a GPU.
fn read_only_flag_through_with_is_read_only_for_the_device() {
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let supported = Device::current()
        .unwrap()
        .attribute(cuda_runtime::DeviceAttribute::HostRegisterReadOnlySupported)
        .unwrap()
        != 0;
    // A whole page of its own (see symbols' read-only test).
    let mut backing = vec![3u32; 3 * 1024];
    let skip = backing.as_ptr().align_offset(4096);
    let host = &mut backing[skip..skip + 1024];
    let d = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let flags = HostRegisterFlags::READ_ONLY | HostRegisterFlags::MAPPED;
    let r = HostRegistration::with(host, flags, |reg| {
        let e = d.copy_to_pinned_async(reg, &s).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
        let cfg = LaunchConfig::for_elements(1024, 128).unwrap();
        let e = kernels::spin::write_index(&s, &cfg, reg).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
        reg.as_mut_slice().unwrap()[0] = 9;
        let mut back = DeviceBuffer::<u32>::zeroed(1024).unwrap();
        back.copy_from_pinned_async(reg, &s).unwrap();
        s.synchronize().unwrap();
        back.to_vec().unwrap()
    });
    match r {
        Ok(back) => {
            assert!(supported);
            assert_eq!(back[0], 9);
            assert!(back[1..].iter().all(|&x| x == 3));
        }
        Err(e) => {
            assert!(!supported, "{e}");
            assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
        }
    }
    assert!(
        host[1..].iter().all(|&x| x == 3),
        "the device wrote the read-only slice"
    );
}

fn staged_pageable_copies_match_for_any_length_and_alignment() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let max = 40 << 20;
    let base = random_bytes(&mut r, max + 64);
    let mut dev = DeviceBuffer::<u8>::new(max).unwrap();
    let mut lens = vec![
        1 << 20,
        (1 << 20) - 1,
        8 << 20,
        (8 << 20) + 1,
        33 << 20,
        max,
    ];
    lens.extend((0..6).map(|_| r.usize(1..=max)));
    for n in lens {
        let off = r.usize(0..64);
        let src = &base[off..off + n];
        // Staged host to device; checked through the driver's direct path from page-locked
        // memory (an independent route).
        dev.slice_mut(..n).unwrap().copy_from_host(src).unwrap();
        let mut check = PinnedBuffer::<u8>::new(n).unwrap();
        dev.slice(..n)
            .unwrap()
            .copy_to_pinned_async(&mut check, &s)
            .unwrap();
        assert_same(
            &format!("staged H2D n={n} off={off}"),
            &check.as_slice().unwrap(),
            src,
        );
        // Staged device to host into an unaligned, poisoned destination.
        let mut back = vec![0xA5u8; n + 64];
        let doff = r.usize(0..64);
        dev.slice(..n)
            .unwrap()
            .copy_to_host(&mut back[doff..doff + n])
            .unwrap();
        assert_same(&format!("staged D2H n={n}"), &back[doff..doff + n], src);
        assert!(
            back[..doff].iter().all(|&b| b == 0xA5),
            "bytes before the copy changed"
        );
        assert!(
            back[doff + n..].iter().all(|&b| b == 0xA5),
            "bytes after the copy changed"
        );
    }
    // Typed data through the staged path.
    let f = random_f32(&mut r, 3_000_001);
    let d = DeviceBuffer::from_slice(&f).unwrap();
    assert_same("staged f32", &d.to_vec().unwrap(), &f);
}

fn staged_async_copies_on_streams() {
    let mut r = rng();
    let streams: Vec<Stream> = (0..3)
        .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
        .collect();
    let n = (5 << 20) + 3;
    std::thread::scope(|sc| {
        for (k, s) in streams.iter().enumerate() {
            let data = random_u32(&mut r, n);
            sc.spawn(move || {
                let mut d = DeviceBuffer::<u32>::new_async(n, s).unwrap();
                for round in 0..3u32 {
                    let v: Vec<u32> = data.iter().map(|x| x ^ round).collect();
                    d.copy_from_host_async(&v, s).unwrap();
                    let mut back = vec![0u32; n];
                    d.copy_to_host_async(&mut back, s).unwrap();
                    assert_same(&format!("stream {k} round {round}"), &back, &v);
                }
            });
        }
    });
}

fn managed_memory_kernels_prefetch_advice() {
    let mut r = rng();
    let n = 1 << 18;
    let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
    let ma = ManagedBuffer::from_slice(&a).unwrap();
    let mb = ManagedBuffer::from_slice(&b).unwrap();
    let mut mc = ManagedBuffer::<f32>::new(n).unwrap();
    mc.as_mut_slice().unwrap().fill(f32::NAN);
    let dev = Device::current().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    ma.advise(MemAdvice::SetReadMostly).unwrap();
    mb.advise(MemAdvice::SetPreferredLocation(Location::Device(dev)))
        .unwrap();
    mc.advise(MemAdvice::SetAccessedBy(Location::Device(dev)))
        .unwrap();
    ma.prefetch_async(Location::Device(dev), &s).unwrap();
    mb.prefetch_async(Location::Device(dev), &s).unwrap();
    kernels::vector_add::vadd(
        &s,
        &LaunchConfig::for_elements(n, 256).unwrap(),
        &ma,
        &mb,
        &mut mc,
    )
    .unwrap();
    mc.prefetch_async(Location::Host, &s).unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_same("managed vadd", &mc.as_slice().unwrap(), &want);
    // Managed memory also works with copies, both ways.
    let mut d = DeviceBuffer::<f32>::new(n).unwrap();
    d.copy_from_device(&mc).unwrap();
    assert_close("device copy of managed", &d.to_vec().unwrap(), &want, 0.0);
    let mut back = ManagedBuffer::<f32>::new(n).unwrap();
    d.copy_to_pinned_async(&mut back, &s).unwrap();
    assert_same("copy into managed", &back.as_slice().unwrap(), &want);
    ma.advise(MemAdvice::UnsetReadMostly).unwrap();
}

fn managed_allocation_over_free_memory_is_refused() {
    let (free, _) = Device::current().unwrap().memory_info().unwrap();
    let too_many = free / 4 + (1 << 30);
    let e = ManagedBuffer::<u32>::new(too_many).unwrap_err();
    match &e {
        Error::ManagedTooLarge {
            requested, free: f, ..
        } => {
            assert_eq!(*requested, too_many * 4);
            assert!(*f < *requested);
        }
        other => panic!("expected ManagedTooLarge, got {other}"),
    }
    assert_eq!(e.code(), ErrorCode::MemoryAllocation);
    assert_eq!(
        cuda_runtime::get_last_error().map(|e| e.code()),
        Some(ErrorCode::MemoryAllocation)
    );
}

fn pools_allocate_reuse_and_report() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let pool = MemPool::new(dev, MemPoolProps::default()).unwrap();
    pool.set_release_threshold(u64::MAX).unwrap();
    assert_eq!(pool.release_threshold().unwrap(), u64::MAX);
    let policy = ReusePolicy::FOLLOW_EVENT_DEPENDENCIES | ReusePolicy::ALLOW_OPPORTUNISTIC;
    pool.set_reuse_policy(policy).unwrap();
    assert_eq!(pool.reuse_policy().unwrap(), policy);
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let n = 1 << 18;
    let data = random_u32(&mut r, n);
    {
        let mut b = DeviceBuffer::<u32>::new_from_pool_async(n, &pool, &s).unwrap();
        b.copy_from_host_async(&data, &s).unwrap();
        let mut back = vec![0u32; n];
        b.copy_to_host_async(&mut back, &s).unwrap();
        assert_same("pool allocation", &back, &data);
        let st = pool.stats().unwrap();
        assert!(st.used_current >= (n * 4) as u64, "{st:?}");
        assert!(st.reserved_current >= st.used_current, "{st:?}");
    }
    for _ in 0..100 {
        drop(DeviceBuffer::<u8>::new_from_pool_async(1 << 20, &pool, &s).unwrap());
    }
    s.synchronize().unwrap();
    let st = pool.stats().unwrap();
    assert_eq!(st.used_current, 0, "{st:?}");
    assert!(
        st.reserved_current > 0,
        "freed memory is kept below the threshold: {st:?}"
    );
    assert!(st.used_high >= (n * 4) as u64, "{st:?}");
    pool.trim_to(0).unwrap();
    assert_eq!(pool.stats().unwrap().reserved_current, 0);
    pool.reset_high_watermarks().unwrap();
    assert_eq!(pool.stats().unwrap().used_high, 0);
    // The default pool and the device's current pool.
    let def = MemPool::default_for(dev).unwrap();
    def.set_release_threshold(1 << 20).unwrap();
    assert_eq!(def.release_threshold().unwrap(), 1 << 20);
    def.set_release_threshold(0).unwrap();
    dev.set_mem_pool(&pool).unwrap();
    let b = DeviceBuffer::<u32>::new_async(1000, &s).unwrap();
    s.synchronize().unwrap();
    assert!(pool.stats().unwrap().used_current >= 4000);
    drop(b);
    dev.set_mem_pool(&def).unwrap();
    // Pool allocations have no legacy IPC handle.
    let pb = DeviceBuffer::<u32>::new_from_pool_async(16, &pool, &s).unwrap();
    let e = pb.ipc_handle().unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
}

/// `cudaPointerAttributes` as libcudart 13.0 lays it out.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct CudartPointerAttributes {
    ty: u32,
    device: i32,
    device_pointer: u64,
    host_pointer: u64,
    reserved: [u64; 8],
}

fn pointer_attributes_match_libcudart() {
    type F = unsafe extern "C" fn(*mut CudartPointerAttributes, *const std::ffi::c_void) -> i32;
    let lib = [
        "/usr/local/cuda/lib64/libcudart.so",
        "libcudart.so.13",
        "libcudart.so",
    ]
    .iter()
    // SAFETY: loading NVIDIA's runtime library, whose initialisers are benign.
    .find_map(|p| unsafe { libloading::Library::new(*p) }.ok());
    let mut r = rng();
    let dev = DeviceBuffer::from_slice(&random_u32(&mut r, 1000)).unwrap();
    let pinned = PinnedBuffer::<u32>::new(1000).unwrap();
    let mapped = PinnedBuffer::<u32>::with_flags(1000, HostAllocFlags::MAPPED).unwrap();
    let wc = PinnedBuffer::<u32>::with_flags(100, HostAllocFlags::WRITE_COMBINED).unwrap();
    let managed = ManagedBuffer::<u32>::new(1000).unwrap();
    let pageable = random_u32(&mut r, 1000);
    let mut cases: Vec<(&str, u64, MemoryType)> = vec![
        ("device", dev.as_raw() + 8, MemoryType::Device),
        ("pinned", pinned.as_host_ptr() as u64, MemoryType::Host),
        ("mapped", mapped.as_host_ptr() as u64, MemoryType::Host),
        ("write-combined", wc.as_host_ptr() as u64, MemoryType::Host),
        ("managed", managed.as_raw(), MemoryType::Managed),
        (
            "pageable",
            pageable.as_ptr() as u64,
            MemoryType::Unregistered,
        ),
    ];
    let mut reg_data = random_u32(&mut r, 5000);
    let reg_ptr = reg_data.as_ptr() as u64;
    let compare = |cases: &Vec<(&str, u64, MemoryType)>| {
        for &(what, p, ty) in cases {
            let ours = pointer_attributes(p).unwrap();
            assert_eq!(ours.memory_type, ty, "{what}: {ours:?}");
            if let Some(lib) = &lib {
                // SAFETY: the symbol has this C signature in libcudart 13.
                let f = unsafe { lib.get::<F>(b"cudaPointerGetAttributes") }.unwrap();
                let mut a = CudartPointerAttributes::default();
                // SAFETY: valid out-parameter (with room to spare); any address may be asked.
                let rc = unsafe { f(&mut a, p as *const std::ffi::c_void) };
                assert_eq!(rc, 0, "{what}: libcudart returned {rc}");
                assert_eq!(
                    ours.memory_type as u32, a.ty,
                    "{what}: type {ours:?} vs {a:?}"
                );
                assert_eq!(ours.device, a.device, "{what}: device {ours:?} vs {a:?}");
                assert_eq!(
                    ours.device_pointer.unwrap_or(0),
                    a.device_pointer,
                    "{what}: device pointer {ours:?} vs {a:?}"
                );
                assert_eq!(
                    ours.host_pointer.unwrap_or(0),
                    a.host_pointer,
                    "{what}: host pointer {ours:?} vs {a:?}"
                );
            }
        }
    };
    compare(&cases);
    HostRegistration::with(&mut reg_data, HostRegisterFlags::MAPPED, |_| {
        cases.push(("registered", reg_ptr + 4, MemoryType::Host));
        compare(&cases);
    })
    .unwrap();
    if lib.is_none() {
        eprintln!("libcudart not found: compared with the expected memory types only");
    }
}

const IPC_HANDLE: &str = "CUDA_RUNTIME_TEST_IPC_HANDLE";
const IPC_EVENT: &str = "CUDA_RUNTIME_TEST_IPC_EVENT";
const IPC_SEED: &str = "CUDA_RUNTIME_TEST_IPC_SEED";
const IPC_LEN: usize = 100_000;

fn ipc_data(seed: u64) -> Vec<u32> {
    let mut r = fastrand::Rng::with_seed(seed);
    random_u32(&mut r, IPC_LEN)
}

fn ipc_memory_and_event_in_a_second_process() {
    let seed = fastrand::u64(..);
    let data = ipc_data(seed);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    let h = buf.ipc_handle().unwrap();
    let ev = Event::with_flags(EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING).unwrap();
    let eh = ev.ipc_handle().unwrap();
    assert!(Event::new().unwrap().ipc_handle().is_err());
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .env(crate::common::CHILD_VAR, "ipc_child")
        .env(IPC_HANDLE, h.to_hex())
        .env(IPC_EVENT, eh.to_hex())
        .env(IPC_SEED, seed.to_string())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "IPC child failed:\n{text}");
    assert!(text.contains("ipc child ok"), "{text}");
    // The child's event was recorded after its kernel-free update; waiting on it orders us.
    let s = Stream::new().unwrap();
    s.wait_event(&ev).unwrap();
    let want: Vec<u32> = data.iter().map(|x| !x).collect();
    // The child wrote !x into the first half through the opened handle.
    let got = buf.to_vec().unwrap();
    assert_same(
        "written by the other process",
        &got[..IPC_LEN / 2],
        &want[..IPC_LEN / 2],
    );
    assert_same("untouched half", &got[IPC_LEN / 2..], &data[IPC_LEN / 2..]);
}

fn ipc_child() {
    let h = IpcMemHandle::from_hex(&std::env::var(IPC_HANDLE).unwrap()).unwrap();
    let eh = IpcEventHandle::from_hex(&std::env::var(IPC_EVENT).unwrap()).unwrap();
    let seed: u64 = std::env::var(IPC_SEED).unwrap().parse().unwrap();
    let data = ipc_data(seed);
    let e = DeviceBuffer::<u32>::open_ipc(&h, IPC_LEN + 1).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    let mut shared = DeviceBuffer::<u32>::open_ipc(&h, IPC_LEN).unwrap();
    assert_same("read through IPC", &shared.to_vec().unwrap(), &data);
    // A second buffer over the same mapping would alias the first: refused.
    let e = DeviceBuffer::<u32>::open_ipc(&h, IPC_LEN).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    assert!(e.to_string().contains("open already"), "{e}");
    let flipped: Vec<u32> = data[..IPC_LEN / 2].iter().map(|x| !x).collect();
    shared
        .slice_mut(..IPC_LEN / 2)
        .unwrap()
        .copy_from_host(&flipped)
        .unwrap();
    let ev = Event::open_ipc(&eh).unwrap();
    let s = Stream::new().unwrap();
    ev.record(&s).unwrap();
    ev.synchronize().unwrap();
    drop(shared);
    // Closed: it may be opened again, and shows the child's writes.
    let again = DeviceBuffer::<u32>::open_ipc(&h, IPC_LEN).unwrap();
    let mut want = flipped.clone();
    want.extend_from_slice(&data[IPC_LEN / 2..]);
    assert_same("reopened through IPC", &again.to_vec().unwrap(), &want);
    drop(again);
    println!("ipc child ok");
}

fn reset_refused_while_context_owned_memory_is_borrowed() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let data = random_u32(&mut r, 4096);
    let managed = ManagedBuffer::from_slice(&data).unwrap();
    let pinned = PinnedBuffer::from_slice(&data).unwrap();
    {
        let view = managed.as_slice().unwrap();
        let e = dev.reset().unwrap_err();
        assert!(
            matches!(e, Error::ResetWhileBorrowed { borrows: 1, .. }),
            "{e}"
        );
        assert_eq!(e.code(), ErrorCode::NotPermitted);
        assert_same("managed view survives the refused reset", &view, &data);
    }
    dev.reset().unwrap();
    // Context-owned memory is gone; the crate's registered page-locked memory is not.
    let e = managed.as_slice().unwrap_err();
    assert_eq!(e.code(), ErrorCode::ContextIsDestroyed, "{e}");
    assert_same("pinned after reset", &pinned.as_slice().unwrap(), &data);
    // Its page locking died with the context: asynchronous copies refuse it.
    let s = Stream::new().unwrap();
    let mut d = DeviceBuffer::<u32>::new(data.len()).unwrap();
    let e = d.copy_from_pinned_async(&pinned, &s).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ContextIsDestroyed, "{e}");
    drop(managed);
    drop(pinned);
    // Staged copies work in the fresh context (the staging ring is remade).
    let big = random_u32(&mut r, 3 << 20);
    let d = DeviceBuffer::from_slice(&big).unwrap();
    assert_same("staged after reset", &d.to_vec().unwrap(), &big);
}
