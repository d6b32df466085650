//! The rest of the runtime (issue 14, item 5): device queries and settings, stream ids and
//! callbacks, external event records, library kernel counts and managed variables, driver entry
//! points, the error log, batched copies / prefetches / discards, range attributes, pool access
//! and the device's current pool.

use std::sync::{Arc, Mutex};

use crate::common::{assert_same, random_f32, random_u32, rng};
use cuda_runtime::entry_point::{driver_entry_point, EntryPointFlags};
use cuda_runtime::memory::{CopyBatch, DiscardBatch, PrefetchBatch};
use cuda_runtime::{
    choose_device, device_count, get_device, kernel_args, logs, set_device, set_valid_devices,
    AtomicOperation, ComputeMode, Device, DeviceAttribute, DeviceBuffer, DeviceFlags,
    DeviceRequirements, Error, ErrorCode, Event, EventRecordFlags, FlushScope, LaunchConfig,
    Library, Location, ManagedBuffer, MemAdvice, MemPool, MemPoolProps, P2PAttribute, PoolAccess,
    Stream, StreamFlags,
};

/// Child tests (run in a process of their own by the tests below).
pub const CHILDREN: &[(&str, fn())] = &[
    ("pool_ipc_child", pool_ipc_child),
    ("external_memory_child", external_memory_child),
];

// Exclusive tests capture: a `Device::synchronize` of another test meanwhile fails
// (StreamCaptureUnsupported) and invalidates the capture, whatever its mode (seen on the H200).
crate::tests![
    device_identity_queries,
    choose_device_picks_a_matching_device,
    valid_devices_set_the_current_device,
    atomic_capabilities_and_rdma_flush,
    async_notifications_register_and_unregister,
    stream_ids_are_unique_and_stable,
    stream_callbacks_run_in_order_with_status,
    library_kernel_count_and_managed_variables,
    kernel_attributes_per_device_and_unified_functions,
    driver_entry_point_is_callable,
    batched_copies_move_random_data,
    batched_3d_copies_match_a_cpu_model,
    texture_and_surface_resources_are_reported,
    batched_prefetch_and_discard_of_managed_memory,
    range_attributes_follow_advice_and_prefetch,
    pool_and_pointer_shared_with_a_second_process,
    external_memory_from_another_process,
    external_semaphore_import_errors;
    // Exclusive: the device flags and current pool are device-wide; the driver's log is
    // process-wide, and other tests' refused calls would write into it.
    exclusive:
    external_event_records_order_streams,
    sync_memops_flag_reaches_the_context,
    driver_log_reports_a_failed_call,
    crate_calls_inside_a_log_callback_are_refused,
    current_pool_is_the_pool_that_was_set,
    ;
    two_gpus:
    peer_attributes_and_pool_access_between_two_gpus,
];

fn device_identity_queries() {
    for d in Device::all().unwrap() {
        let id = d.pci_bus_id().unwrap();
        assert_eq!(Device::by_pci_bus_id(&id).unwrap(), d, "bus id {id}");
        // The short form (no domain) names the same device.
        let short = id.split_once(':').map(|(_, rest)| rest).unwrap();
        assert_eq!(Device::by_pci_bus_id(short).unwrap(), d, "bus id {short}");
        let mode = d.compute_mode().unwrap();
        assert_eq!(
            mode.to_raw(),
            d.attribute(DeviceAttribute::ComputeMode).unwrap()
        );
        assert_ne!(mode, ComputeMode::Prohibited, "a test device is usable");
        d.init(None).unwrap();
        // A device is not its own peer.
        let e = d
            .p2p_attribute(d, P2PAttribute::AccessSupported)
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidDevice);
    }
    // No device has this bus id: the driver's refusal, not a panic or a wrong device.
    assert!(Device::by_pci_bus_id("ffff:ff:1f.7").is_err());
    let e = Device::by_pci_bus_id("00\0:1").unwrap_err();
    assert!(e.to_string().contains("NUL"), "{e}");
}

fn choose_device_picks_a_matching_device() {
    let d0 = Device::new(0).unwrap();
    let cc = (
        d0.attribute(DeviceAttribute::ComputeCapabilityMajor)
            .unwrap(),
        d0.attribute(DeviceAttribute::ComputeCapabilityMinor)
            .unwrap(),
    );
    let want = DeviceRequirements {
        compute_capability: cc,
        total_global_mem: d0.total_memory().unwrap(),
        ..Default::default()
    };
    let got = choose_device(&want).unwrap();
    let got_cc = (
        got.attribute(DeviceAttribute::ComputeCapabilityMajor)
            .unwrap(),
        got.attribute(DeviceAttribute::ComputeCapabilityMinor)
            .unwrap(),
    );
    assert!(got_cc >= cc, "{got_cc:?} < {cc:?}");
    assert!(got.total_memory().unwrap() >= want.total_global_mem);
    let e = choose_device(&DeviceRequirements {
        compute_capability: (-1, 0),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn valid_devices_set_the_current_device() {
    let n = device_count().unwrap();
    let last = n - 1;
    set_valid_devices(&[last]).unwrap();
    assert_eq!(get_device().unwrap(), last);
    assert_eq!(cuda_runtime::device::valid_devices(), vec![last]);
    let e = set_valid_devices(&[0, 0]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    let e = set_valid_devices(&[n]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidDevice);
    // The failed calls changed nothing.
    assert_eq!(cuda_runtime::device::valid_devices(), vec![last]);
    set_valid_devices(&[]).unwrap();
    set_device(0).unwrap();
    assert_eq!(get_device().unwrap(), 0);
}

fn atomic_capabilities_and_rdma_flush() {
    let d = Device::current().unwrap();
    let caps = d.host_atomic_capabilities(&AtomicOperation::ALL).unwrap();
    assert_eq!(caps.len(), AtomicOperation::ALL.len());
    // Without native host atomics, no operation is native over the link.
    if d.attribute(DeviceAttribute::HostNativeAtomicSupported)
        .unwrap()
        == 0
    {
        assert!(caps.iter().all(|c| c.is_empty()), "{caps:?}");
    }
    assert!(d.host_atomic_capabilities(&[]).unwrap().is_empty());
    let e = d
        .p2p_atomic_capabilities(d, &[AtomicOperation::IntegerAdd])
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidDevice);
    let options = d
        .attribute(DeviceAttribute::GPUDirectRDMAFlushWritesOptions)
        .unwrap();
    let r = d.flush_gpu_direct_rdma_writes(FlushScope::ToOwner);
    if options != 0 {
        r.unwrap();
    } else if let Err(e) = r {
        assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
    }
}

fn async_notifications_register_and_unregister() {
    let d = Device::current().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    match d.register_async_notification(move |n| s2.lock().unwrap().push(n)) {
        Ok(reg) => {
            assert_eq!(reg.device(), d);
            // Two registrations at once are independent.
            let second = d.register_async_notification(|_| {}).unwrap();
            drop(reg);
            drop(second);
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::NotSupported, "{e}"),
    }
    // Work after the unregistration is unaffected.
    let mut r = rng();
    let data = random_u32(&mut r, 4096);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    assert_same("after notifications", &buf.to_vec().unwrap(), &data);
}

fn sync_memops_flag_reaches_the_context() {
    let dev = Device::current().unwrap();
    let before = dev.flags().unwrap();
    dev.set_flags(DeviceFlags::SYNC_MEMOPS | DeviceFlags::SCHEDULE_BLOCKING_SYNC)
        .unwrap();
    let now = dev.flags().unwrap();
    assert!(now.contains(DeviceFlags::SYNC_MEMOPS), "{now:?}");
    assert!(now.contains(DeviceFlags::SCHEDULE_BLOCKING_SYNC), "{now:?}");
    // Copies still move the right data with the flag on.
    let mut r = rng();
    let data = random_f32(&mut r, 1 << 16);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    assert_same("with sync memops", &buf.to_vec().unwrap(), &data);
    dev.set_flags(before - DeviceFlags::MAP_HOST).unwrap();
    assert_eq!(dev.flags().unwrap(), before);
}

fn stream_ids_are_unique_and_stable() {
    let (a, b) = (Stream::new().unwrap(), Stream::new().unwrap());
    let (ia, ib) = (a.id().unwrap(), b.id().unwrap());
    assert_ne!(ia, ib);
    assert_eq!(a.id().unwrap(), ia);
    let legacy = Stream::legacy().unwrap().id().unwrap();
    assert_eq!(Stream::legacy().unwrap().id().unwrap(), legacy);
    assert!(legacy != ia && legacy != ib);
    let here = Stream::per_thread().unwrap().id().unwrap();
    let there = std::thread::spawn(|| Stream::per_thread().unwrap().id().unwrap())
        .join()
        .unwrap();
    assert_ne!(here, there, "each thread has its own per-thread stream");
    assert_eq!(Stream::per_thread().unwrap().id().unwrap(), here);
}

fn stream_callbacks_run_in_order_with_status() {
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut r = rng();
    let data = random_u32(&mut r, 1 << 16);
    let mut d = DeviceBuffer::<u32>::new(data.len()).unwrap();
    for i in 0..20u32 {
        let l = log.clone();
        s.add_callback(move |status| l.lock().unwrap().push((i, status.is_ok())))
            .unwrap();
        if i % 5 == 0 {
            d.copy_from_host_async(&data, &s).unwrap();
            d.memset_u32_async(i, &s).unwrap();
        }
    }
    // A callback runs after the earlier copy: it can see the stream's data is complete.
    let done = Arc::new(Mutex::new(false));
    let d2 = done.clone();
    s.add_callback(move |st| *d2.lock().unwrap() = st.is_ok())
        .unwrap();
    s.synchronize().unwrap();
    let want: Vec<(u32, bool)> = (0..20).map(|i| (i, true)).collect();
    assert_eq!(*log.lock().unwrap(), want);
    assert!(*done.lock().unwrap());
    assert_same(
        "after callbacks",
        &d.to_vec().unwrap(),
        &vec![15u32; data.len()],
    );
    // A panicking callback is reported by the next synchronize.
    s.add_callback(|_| panic!("callback boom")).unwrap();
    let e = s.synchronize().unwrap_err();
    assert!(matches!(e, Error::HostFnPanicked { .. }), "{e}");
}

fn external_event_records_order_streams() {
    let mut r = rng();
    let data = random_f32(&mut r, 1 << 20);
    let (a, b) = (
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
    );
    let src = DeviceBuffer::from_slice(&data).unwrap();
    let mut x = DeviceBuffer::<f32>::new(data.len()).unwrap();
    let mut y = DeviceBuffer::<f32>::new(data.len()).unwrap();
    let ev = Event::new().unwrap();
    // Outside a capture the driver refuses the flag (`cudaErrorIllegalState`, as libcudart).
    let e = ev
        .record_with_flags(&a, EventRecordFlags::EXTERNAL)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::IllegalState, "{e}");
    // In a capture the record would be an event-record node naming an event the graph cannot
    // keep: refused, and the capture's end fails (explicit graphs have kept event nodes).
    let r = a.capture(cuda_runtime::graph::CaptureMode::ThreadLocal, |a| {
        x.copy_from_device_async(&src, a)?;
        ev.record_with_flags(a, EventRecordFlags::EXTERNAL)
    });
    assert!(
        matches!(r, Err(Error::NotCapturable { .. })),
        "{:?}",
        r.map(|_| ())
    );
    // A plain record orders the other stream after the copy.
    x.copy_from_device_async(&src, &a).unwrap();
    ev.record_with_flags(&a, EventRecordFlags::empty()).unwrap();
    b.wait_event(&ev).unwrap();
    y.copy_from_device_async(&x, &b).unwrap();
    b.synchronize().unwrap();
    assert_same("ordered by the record", &y.to_vec().unwrap(), &data);
    ev.record_with_flags(&a, EventRecordFlags::empty()).unwrap();
    let e = ev
        .record_with_flags(&a, EventRecordFlags::from_bits_retain(0x8))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

/// `tests/gpu/kernels/library.ptx`: six kernels (see `library.rs`).
const LIBRARY_PTX: &str = include_str!("kernels/library.ptx");
/// `tests/gpu/kernels/managed_var.ptx`: `__managed__ unsigned mvals[8]` and `bump_managed(k)`.
const MANAGED_PTX: &str = include_str!("kernels/managed_var.ptx");

fn library_kernel_count_and_managed_variables() {
    let lib = Library::from_ptx(LIBRARY_PTX).unwrap();
    assert_eq!(lib.kernel_count(), 6);
    assert_eq!(lib.kernel_names().len(), 6);
    let ks = lib.kernels().unwrap();
    let mut names: Vec<&str> = ks.iter().map(|k| k.name()).collect();
    let mut want = lib.kernel_names();
    names.sort();
    want.sort();
    assert_eq!(names, want);

    let mut r = rng();
    let m = Library::from_ptx(MANAGED_PTX).unwrap();
    let vals = m.managed::<[u32; 8]>("mvals").unwrap();
    let init: [u32; 8] = std::array::from_fn(|_| r.u32(..));
    let k = r.u32(..);
    vals.copy_from_host(&init).unwrap();
    let s = Stream::new().unwrap();
    let bump = m.kernel("bump_managed").unwrap();
    // SAFETY: bump_managed(unsigned k) touches mvals[0..8] only, with threads 0..8.
    unsafe { bump.launch(&s, &LaunchConfig::new(1u32, 32u32), &kernel_args![k]) }.unwrap();
    s.synchronize().unwrap();
    let want: [u32; 8] = std::array::from_fn(|i| init[i].wrapping_mul(k).wrapping_add(i as u32));
    assert_eq!(vals.copy_to_host().unwrap(), want);
    // Wrong size and missing names are refused.
    assert!(matches!(
        m.managed::<[u32; 4]>("mvals").unwrap_err(),
        Error::SymbolSize { .. }
    ));
    assert!(matches!(
        m.managed::<u32>("nothing").unwrap_err(),
        Error::NotFound { .. }
    ));
}

fn driver_entry_point_is_callable() {
    let p = driver_entry_point("cuDriverGetVersion", 13000, EntryPointFlags::Default).unwrap();
    type GetVersion = unsafe extern "C" fn(*mut i32) -> u32;
    // SAFETY: cuDriverGetVersion has this signature in CUDA 13.0 and writes one int.
    let f: GetVersion = unsafe { std::mem::transmute(p.as_ptr()) };
    let mut v = 0i32;
    // SAFETY: a valid out-parameter.
    assert_eq!(unsafe { f(&mut v) }, 0);
    assert_eq!(v, cuda_runtime::driver_version());
    let e = driver_entry_point("cuNoSuchFunction", 13000, EntryPointFlags::Default).unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    // The per-thread variant of a stream function is another address than the legacy one.
    let legacy = driver_entry_point("cuStreamQuery", 13000, EntryPointFlags::LegacyStream).unwrap();
    let ptsz = driver_entry_point(
        "cuStreamQuery",
        13000,
        EntryPointFlags::PerThreadDefaultStream,
    )
    .unwrap();
    assert_ne!(legacy.as_ptr(), ptsz.as_ptr());
}

/// Review rev-g15: the driver calls a log callback inside the call that failed, so inside the
/// crate's call; a crate call made from the callback (an allocation failing again, logging
/// again) recursed until the stack overflowed against the null driver. Such calls are refused
/// with `InHostFunction`. NOT yet run on a GPU.
fn crate_calls_inside_a_log_callback_are_refused() {
    let inner = Arc::new(Mutex::new(Vec::<String>::new()));
    let i2 = inner.clone();
    let cb = logs::register_callback(move |_, msg| {
        let r = DeviceBuffer::<u8>::zeroed(16).map(drop);
        i2.lock().unwrap().push(format!("{msg}: {r:?}"));
    })
    .unwrap();
    let dev = Device::current().unwrap();
    // Calls the driver refuses (which of them it logs is the driver's choice).
    let refused = [
        dev.set_limit(cuda_runtime::Limit::StackSize, usize::MAX / 2)
            .is_err(),
        DeviceBuffer::<u8>::zeroed(usize::MAX / 4).is_err(),
    ];
    drop(cb);
    let inner = inner.lock().unwrap().clone();
    eprintln!("refused by the driver: {refused:?}; inside the callback: {inner:?}");
    for m in &inner {
        assert!(m.contains("InHostFunction"), "{m}");
    }
    // The crate works as before afterwards.
    DeviceBuffer::<u8>::zeroed(16).unwrap();
}

fn driver_log_reports_a_failed_call() {
    let got = Arc::new(Mutex::new(Vec::<String>::new()));
    let g2 = got.clone();
    let cb =
        logs::register_callback(move |_, msg| g2.lock().unwrap().push(msg.to_string())).unwrap();
    let mut from = logs::current().unwrap();
    // Calls the driver refuses (which of them it logs is the driver's choice).
    let dev = Device::current().unwrap();
    let refused = [
        dev.set_limit(cuda_runtime::Limit::StackSize, usize::MAX / 2)
            .is_err(),
        dev.set_limit(cuda_runtime::Limit::MaxL2FetchGranularity, 1 << 40)
            .is_err(),
    ];
    eprintln!("refused by the driver: {refused:?}");
    let text = logs::dump_to_memory(Some(&mut from)).unwrap();
    drop(cb);
    let seen = got.lock().unwrap().clone();
    eprintln!("callback saw {seen:?}; dump since the position: {text:?}");
    // Every message the callback received is in the log since the position, and nothing was
    // logged that the callback missed.
    for m in &seen {
        assert!(
            text.contains(m.as_str()),
            "callback line {m:?} not in the dump {text:?}"
        );
    }
    assert_eq!(
        seen.is_empty(),
        text.trim().is_empty(),
        "dump {text:?}, callback {seen:?}"
    );
    // Reading again from the advanced position returns nothing new (the test runs alone).
    assert_eq!(logs::dump_to_memory(Some(&mut from)).unwrap(), "");
    // After unregistering, the callback hears nothing more.
    let _ = dev.set_limit(cuda_runtime::Limit::StackSize, usize::MAX / 2);
    assert_eq!(got.lock().unwrap().len(), seen.len());
    let path = std::env::temp_dir().join(format!("cuda-runtime-logs-{}.txt", std::process::id()));
    logs::dump_to_file(None, &path).unwrap();
    let _ = std::fs::remove_file(&path);
}

fn batched_copies_move_random_data() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let lens = [1usize, 1000, 65_536, 3, 0, 250_001];
    let srcs: Vec<Vec<u32>> = lens.iter().map(|&n| random_u32(&mut r, n)).collect();
    let dsrc: Vec<DeviceBuffer<u32>> = srcs
        .iter()
        .map(|v| DeviceBuffer::from_slice(v).unwrap())
        .collect();
    let mut dst: Vec<DeviceBuffer<u32>> = lens
        .iter()
        .map(|&n| DeviceBuffer::<u32>::zeroed(n).unwrap())
        .collect();
    // A managed destination and a view as a source take part too.
    let mut managed = ManagedBuffer::<u32>::new(500).unwrap();
    let view = dsrc[5].slice(1000..1500).unwrap();
    let mut batch = CopyBatch::new();
    for (d, s) in dst.iter_mut().zip(&dsrc) {
        batch.copy(d, s);
    }
    batch.copy(&mut managed, &view);
    assert_eq!(batch.len(), lens.len() + 1);
    batch.submit(&s).unwrap();
    // The read-backs below run in the default stream, which a non-blocking stream does not
    // synchronise with: wait for the batch first, as a CUDA program must (without it the first
    // read-back overtook the batch under memcheck, eighth session).
    s.synchronize().unwrap();
    for (i, d) in dst.iter().enumerate() {
        assert_same(&format!("batch copy {i}"), &d.to_vec().unwrap(), &srcs[i]);
    }
    assert_same(
        "batch copy into managed",
        &managed.as_slice().unwrap(),
        &srcs[5][1000..1500],
    );
    // Mismatched lengths name the copy; the legacy stream is refused.
    let mut short = DeviceBuffer::<u32>::zeroed(10).unwrap();
    let mut b = CopyBatch::new();
    b.copy(&mut short, &dsrc[1]);
    let e = b.submit(&s).unwrap_err();
    assert!(e.to_string().contains("copy 0"), "{e}");
    let mut b = CopyBatch::new();
    b.copy(&mut dst[1], &dsrc[1]);
    let e = b.submit(&Stream::legacy().unwrap()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn batched_prefetch_and_discard_of_managed_memory() {
    let mut r = rng();
    let n = 1 << 20;
    let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
    let ma = ManagedBuffer::from_slice(&a).unwrap();
    let mb = ManagedBuffer::from_slice(&b).unwrap();
    let mut mc = ManagedBuffer::<f32>::new(n).unwrap();
    let dev = Device::current().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    // Discard the output first (its old contents do not matter), then prefetch everything.
    let mut d = DiscardBatch::new();
    d.discard(&mut mc, ..).unwrap();
    d.submit_and_prefetch(Location::Device(dev), &s).unwrap();
    let mut p = PrefetchBatch::new();
    p.prefetch(&ma, ..n / 2, Location::Device(dev)).unwrap();
    p.prefetch(&ma, n / 2.., Location::Device(dev)).unwrap();
    p.prefetch(&mb, .., Location::Device(dev)).unwrap();
    p.submit(&s).unwrap();
    cuda_runtime::kernels::vector_add::vadd(
        &s,
        &LaunchConfig::for_elements(n, 256).unwrap(),
        &ma,
        &mb,
        &mut mc,
    )
    .unwrap();
    let mut back = PrefetchBatch::new();
    back.prefetch(&mc, .., Location::Host).unwrap();
    back.submit(&s).unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_same("after batched prefetches", &mc.as_slice().unwrap(), &want);
    // A plain discard, then a write: the written values are what is read back.
    let mut d = DiscardBatch::new();
    d.discard(&mut mc, ..).unwrap();
    d.submit(&s).unwrap();
    mc.as_mut_slice().unwrap().copy_from_slice(&b);
    assert_same("rewritten after discard", &mc.as_slice().unwrap(), &b);
    let mut p = PrefetchBatch::new();
    let e = p.prefetch(&ma, 0..n + 1, Location::Host).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn range_attributes_follow_advice_and_prefetch() {
    let mut r = rng();
    let n = 1 << 20;
    let data = random_u32(&mut r, n);
    let m = ManagedBuffer::from_slice(&data).unwrap();
    let dev = Device::current().unwrap();
    let s = Stream::new().unwrap();
    assert!(!m.read_mostly(..).unwrap());
    m.advise(MemAdvice::SetReadMostly).unwrap();
    assert!(m.read_mostly(..).unwrap());
    m.advise(MemAdvice::SetPreferredLocation(Location::Device(dev)))
        .unwrap();
    m.advise(MemAdvice::SetAccessedBy(Location::Device(dev)))
        .unwrap();
    m.prefetch_async(Location::Device(dev), &s).unwrap();
    s.synchronize().unwrap();
    let at = m.range_attributes(..).unwrap();
    assert!(at.read_mostly);
    assert_eq!(at.preferred_location, Some(Location::Device(dev)));
    assert_eq!(at.accessed_by, vec![dev]);
    assert_eq!(at.last_prefetch_location, Some(Location::Device(dev)));
    m.advise(MemAdvice::UnsetReadMostly).unwrap();
    assert!(!m.read_mostly(10..20).unwrap());
    assert_same("data kept", &m.as_slice().unwrap(), &data);
    let e = m.read_mostly(5..5).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn current_pool_is_the_pool_that_was_set() {
    // Runs on the last device so that tests using device 0's current pool are undisturbed.
    let dev = Device::new(device_count().unwrap() - 1).unwrap();
    let default = MemPool::default_for(dev).unwrap();
    assert_eq!(dev.mem_pool().unwrap().as_raw(), default.as_raw());
    let pool = MemPool::new(dev, MemPoolProps::default()).unwrap();
    dev.set_mem_pool(&pool).unwrap();
    let cur = dev.mem_pool().unwrap();
    assert_eq!(cur.as_raw(), pool.as_raw());
    assert_eq!(pool.access(dev).unwrap(), PoolAccess::ReadWrite);
    let e = pool.set_access(dev, PoolAccess::Read).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    // A stream-ordered allocation takes the current pool, also one made current behind the
    // crate's back through the driver (the crate reads the current pool at every allocation,
    // never caches it). Only `pool`'s use is compared: no other test allocates from it (the
    // default pool's use moves with other tests' allocations on this device).
    use cudarc::driver::sys;
    let prev = get_device().unwrap();
    dev.set_current().unwrap();
    let s = Stream::new().unwrap();
    let mut r = rng();
    let mut raw_dev = 0;
    // SAFETY: valid out-parameter; an existing ordinal.
    let rc = unsafe { sys::cuDeviceGet(&mut raw_dev, dev.ordinal()) };
    assert_eq!(rc, sys::CUresult::CUDA_SUCCESS);
    for current in [&default, &pool, &default] {
        // SAFETY: a live pool of this device.
        let rc = unsafe { sys::cuDeviceSetMemPool(raw_dev, current.as_raw()) };
        assert_eq!(rc, sys::CUresult::CUDA_SUCCESS);
        s.synchronize().unwrap();
        let before = pool.stats().unwrap().used_current;
        let n = r.usize(1 << 16..1 << 20);
        let b = DeviceBuffer::<u32>::new_async(n, &s).unwrap();
        s.synchronize().unwrap();
        let after = pool.stats().unwrap().used_current;
        if current.as_raw() == pool.as_raw() {
            assert!(
                after >= before + 4 * n as u64,
                "{before} -> {after} for {n} u32"
            );
        } else {
            assert_eq!(after, before, "allocated from the pool no longer current");
        }
        drop(b);
    }
    s.synchronize().unwrap();
    drop(s);
    set_device(prev).unwrap();
    dev.set_mem_pool(&default).unwrap();
    drop((cur, pool));
    assert_eq!(dev.mem_pool().unwrap().as_raw(), default.as_raw());
}

fn peer_attributes_and_pool_access_between_two_gpus() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let access = d0.p2p_attribute(d1, P2PAttribute::AccessSupported).unwrap();
    assert_eq!(access != 0, d0.can_access_peer(d1).unwrap());
    let _rank = d0.p2p_attribute(d1, P2PAttribute::PerformanceRank).unwrap();
    let caps = d0
        .p2p_atomic_capabilities(d1, &AtomicOperation::ALL)
        .unwrap();
    assert_eq!(caps.len(), AtomicOperation::ALL.len());
    if access == 0 {
        return;
    }
    let pool = MemPool::new(d0, MemPoolProps::default()).unwrap();
    assert_eq!(pool.access(d1).unwrap(), PoolAccess::None);
    pool.set_access(d1, PoolAccess::ReadWrite).unwrap();
    assert_eq!(pool.access(d1).unwrap(), PoolAccess::ReadWrite);
    // Memory of the pool, now reachable from device 1, copied there and back.
    let mut r = rng();
    let data = random_u32(&mut r, 1 << 18);
    set_device(0).unwrap();
    let s0 = Stream::new().unwrap();
    let mut src = DeviceBuffer::<u32>::new_from_pool_async(data.len(), &pool, &s0).unwrap();
    src.copy_from_host_async(&data, &s0).unwrap();
    s0.synchronize().unwrap();
    set_device(1).unwrap();
    let mut dst = DeviceBuffer::<u32>::new(data.len()).unwrap();
    dst.copy_from_device(&src).unwrap();
    assert_same(
        "pool memory seen from device 1",
        &dst.to_vec().unwrap(),
        &data,
    );
    pool.set_access(d1, PoolAccess::None).unwrap();
    assert_eq!(pool.access(d1).unwrap(), PoolAccess::None);
    set_device(0).unwrap();
}

const POOL_FD: &str = "CUDA_RUNTIME_TEST_POOL_FD";
const POOL_PTR: &str = "CUDA_RUNTIME_TEST_POOL_PTR";
const POOL_SEED: &str = "CUDA_RUNTIME_TEST_POOL_SEED";
const POOL_LEN: usize = 100_000;

fn pool_data(seed: u64) -> Vec<u32> {
    let mut r = fastrand::Rng::with_seed(seed);
    random_u32(&mut r, POOL_LEN)
}

/// A pool made shareable, one allocation of it filled with random data, exported (the pool as a
/// file descriptor the child inherits, the pointer as text); the child imports both, checks the
/// data, writes `3x + 1` back; the parent sees the child's writes.
fn pool_and_pointer_shared_with_a_second_process() {
    use std::os::fd::AsRawFd;
    let seed = fastrand::u64(..);
    let data = pool_data(seed);
    let dev = Device::current().unwrap();
    let pool = MemPool::new(
        dev,
        MemPoolProps {
            handle_type: cuda_runtime::ShareableHandle::PosixFileDescriptor,
            ..Default::default()
        },
    )
    .unwrap();
    let s = Stream::new().unwrap();
    let mut buf = DeviceBuffer::<u32>::new_from_pool_async(POOL_LEN, &pool, &s).unwrap();
    buf.copy_from_host_async(&data, &s).unwrap();
    s.synchronize().unwrap();
    let export = match buf.pool_export() {
        Ok(x) => x,
        Err(e) => {
            // libcudart refuses the same export on this machine (probes/pool_ipc/export.cu:
            // cudaMemPoolExportPointer gave cudaErrorInvalidValue on the H200 pair, driver
            // 580): the same error, nothing to share.
            assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
            eprintln!("pool pointer export unavailable here (libcudart too): {e}");
            return;
        }
    };
    let fd = pool.export_fd().unwrap();
    // A copy without close-on-exec, for the child to inherit.
    // SAFETY: duplicates a descriptor this test owns.
    let inherit = unsafe { libc::dup(fd.as_raw_fd()) };
    assert!(inherit >= 0);
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .env(crate::common::CHILD_VAR, "pool_ipc_child")
        .env(POOL_FD, inherit.to_string())
        .env(POOL_PTR, export.to_hex())
        .env(POOL_SEED, seed.to_string())
        .output()
        .unwrap();
    // SAFETY: closes the duplicate made above, which nothing else uses.
    unsafe { libc::close(inherit) };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pool IPC child failed:\n{text}");
    assert!(text.contains("pool ipc child ok"), "{text}");
    let want: Vec<u32> = data
        .iter()
        .map(|x| x.wrapping_mul(3).wrapping_add(1))
        .collect();
    assert_same(
        "written by the other process",
        &buf.to_vec().unwrap(),
        &want,
    );
    // A pool without a shareable handle type has nothing to export.
    let plain = MemPool::new(dev, MemPoolProps::default()).unwrap();
    assert!(plain.export_fd().is_err());
}

fn pool_ipc_child() {
    use std::os::fd::BorrowedFd;
    let fd: i32 = std::env::var(POOL_FD).unwrap().parse().unwrap();
    let export = cuda_runtime::PoolPtrExport::from_hex(&std::env::var(POOL_PTR).unwrap()).unwrap();
    let seed: u64 = std::env::var(POOL_SEED).unwrap().parse().unwrap();
    let data = pool_data(seed);
    // SAFETY: the parent passed an open descriptor this process inherited; it stays open for
    // the whole child.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let pool = MemPool::import_fd(fd, Device::current().unwrap()).unwrap();
    // More elements than the allocation holds: refused, and nothing stays imported.
    let e =
        DeviceBuffer::<u32>::import_from_pool(&pool, &export, POOL_LEN + (1 << 22)).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    let mut shared = DeviceBuffer::<u32>::import_from_pool(&pool, &export, POOL_LEN).unwrap();
    assert_same(
        "read through the imported pool",
        &shared.to_vec().unwrap(),
        &data,
    );
    // A second buffer of the same allocation would alias the first: refused.
    let e = DeviceBuffer::<u32>::import_from_pool(&pool, &export, POOL_LEN).unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    let new: Vec<u32> = data
        .iter()
        .map(|x| x.wrapping_mul(3).wrapping_add(1))
        .collect();
    shared.copy_from_host(&new).unwrap();
    // Freed (the import, before the exporter frees) once the copy is done.
    drop(shared);
    cuda_runtime::device::synchronize().unwrap();
    println!("pool ipc child ok");
}

const EXT_FD: &str = "CUDA_RUNTIME_TEST_EXT_FD";
const EXT_SIZE: &str = "CUDA_RUNTIME_TEST_EXT_SIZE";
const EXT_SEED: &str = "CUDA_RUNTIME_TEST_EXT_SEED";
const EXT_LEN: usize = 300_000;

/// `CUmemAllocationProp` of CUDA 13.0 (cuda.h), for the raw allocation the test exports.
#[repr(C)]
struct AllocationProp {
    kind: u32,
    handle_types: u32,
    location_type: u32,
    location_id: i32,
    win32_metadata: *mut std::ffi::c_void,
    compression: u8,
    rdma_capable: u8,
    usage: u16,
    reserved: [u8; 4],
}

/// Makes `bytes` (rounded up to the granularity) of device memory with `cuMemCreate`,
/// exportable as a POSIX file descriptor, exports it, and releases the allocation handle (the
/// descriptor keeps the memory). Returns the descriptor and the rounded size. Driver calls
/// through the crate's driver entry points.
fn exported_allocation(device: i32, bytes: usize) -> (std::os::fd::OwnedFd, usize) {
    use std::os::fd::FromRawFd;
    let f = |name| driver_entry_point(name, 13000, EntryPointFlags::Default).unwrap();
    type Granularity = unsafe extern "C" fn(*mut usize, *const AllocationProp, u32) -> u32;
    type Create = unsafe extern "C" fn(*mut u64, usize, *const AllocationProp, u64) -> u32;
    type Export = unsafe extern "C" fn(*mut std::ffi::c_void, u64, u32, u64) -> u32;
    type Release = unsafe extern "C" fn(u64) -> u32;
    // SAFETY: the CUDA 13.0 signatures of these four driver functions.
    let (granularity, create, export, release) = unsafe {
        (
            std::mem::transmute::<*mut std::ffi::c_void, Granularity>(
                f("cuMemGetAllocationGranularity").as_ptr(),
            ),
            std::mem::transmute::<*mut std::ffi::c_void, Create>(f("cuMemCreate").as_ptr()),
            std::mem::transmute::<*mut std::ffi::c_void, Export>(
                f("cuMemExportToShareableHandle").as_ptr(),
            ),
            std::mem::transmute::<*mut std::ffi::c_void, Release>(f("cuMemRelease").as_ptr()),
        )
    };
    let prop = AllocationProp {
        kind: 1,          // CU_MEM_ALLOCATION_TYPE_PINNED
        handle_types: 1,  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        location_type: 1, // CU_MEM_LOCATION_TYPE_DEVICE
        location_id: device,
        win32_metadata: std::ptr::null_mut(),
        compression: 0,
        rdma_capable: 0,
        usage: 0,
        reserved: [0; 4],
    };
    let mut g = 0usize;
    // SAFETY: valid out-parameter and properties; 0 = CU_MEM_ALLOC_GRANULARITY_MINIMUM.
    assert_eq!(unsafe { granularity(&mut g, &prop, 0) }, 0);
    let size = bytes.div_ceil(g) * g;
    let mut handle = 0u64;
    // SAFETY: valid out-parameter and properties; flags 0.
    assert_eq!(unsafe { create(&mut handle, size, &prop, 0) }, 0);
    let mut fd: i32 = -1;
    // SAFETY: a live allocation handle; for this handle type the driver writes one int.
    assert_eq!(
        unsafe { export((&mut fd as *mut i32).cast(), handle, 1, 0) },
        0
    );
    // SAFETY: the handle is ours; the exported descriptor keeps the memory.
    assert_eq!(unsafe { release(handle) }, 0);
    assert!(fd >= 0);
    // SAFETY: a descriptor the driver just opened for this process.
    (unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, size)
}

/// Device memory made with `cuMemCreate` and exported as a POSIX descriptor; this process
/// imports it as external memory and fills it with random data, a second process (inheriting a
/// copy of the descriptor) imports it, checks the data and writes `x ^ 0x5a5a5a5a` back, which
/// this process then reads. A mipmapped array mapped from the same memory round-trips texels.
fn external_memory_from_another_process() {
    use cuda_runtime::external::{ExternalMemory, ExternalMemoryKind};
    use std::os::fd::AsRawFd;
    let seed = fastrand::u64(..);
    let data = ext_data(seed);
    let dev = Device::current().unwrap();
    // The raw driver calls below run in the device's primary context.
    dev.set_current().unwrap();
    assert_eq!(
        std::mem::size_of::<AllocationProp>(),
        32,
        "CUmemAllocationProp's size"
    );
    let (fd, size) = exported_allocation(dev.ordinal(), EXT_LEN * 4 + (1 << 20));
    // SAFETY: duplicates a descriptor this test owns; the copy has no close-on-exec.
    let inherit = unsafe { libc::dup(fd.as_raw_fd()) };
    assert!(inherit >= 0);
    let ext = ExternalMemory::import(ExternalMemoryKind::OpaqueFd, fd, size as u64, false).unwrap();
    assert_eq!(ext.size(), size as u64);
    let mut buf = ext.mapped_buffer::<u32>(0, EXT_LEN).unwrap();
    buf.copy_from_host(&data).unwrap();
    // Mappings past the end, or empty, are refused before the driver.
    assert!(ext.mapped_buffer::<u32>(size as u64 - 4, 2).is_err());
    assert!(ext.mapped_buffer::<u32>(0, 0).is_err());
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .env(crate::common::CHILD_VAR, "external_memory_child")
        .env(EXT_FD, inherit.to_string())
        .env(EXT_SIZE, size.to_string())
        .env(EXT_SEED, seed.to_string())
        .output()
        .unwrap();
    // SAFETY: closes the copy made for the child, which nothing else uses.
    unsafe { libc::close(inherit) };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "external memory child failed:\n{text}"
    );
    assert!(text.contains("external memory child ok"), "{text}");
    let want: Vec<u32> = data.iter().map(|x| x ^ 0x5a5a_5a5a).collect();
    assert_same(
        "written by the other process",
        &buf.to_vec().unwrap(),
        &want,
    );
    // A second mapping of the same bytes sees them too.
    let view = ext.mapped_buffer::<u32>(4 * 1000, 1000).unwrap();
    assert_same("second mapping", &view.to_vec().unwrap(), &want[1000..2000]);
    // A mipmapped array over the memory past the buffer: texels round-trip.
    let mip = ext
        .mapped_mipmapped_array::<u32>(
            (EXT_LEN * 4).next_multiple_of(1 << 16) as u64,
            cuda_runtime::ArrayShape::D2 {
                width: 64,
                height: 64,
            },
            1,
            cuda_runtime::ArrayFlags::empty(),
        )
        .unwrap();
    let texels = random_u32(&mut rng(), 64 * 64);
    let mut level = mip.level(0).unwrap();
    level.copy_from_host(&texels).unwrap();
    assert_same("mapped mipmapped array", &level.to_vec().unwrap(), &texels);
    // The external memory outlives its handle while the mappings live.
    drop(ext);
    assert_same(
        "after the handle's drop",
        &view.to_vec().unwrap(),
        &want[1000..2000],
    );
    drop((buf, view, level, mip));
    Device::current().unwrap().synchronize().unwrap();
    assert!(Device::current().unwrap().take_deferred_errors().is_empty());
}

fn ext_data(seed: u64) -> Vec<u32> {
    let mut r = fastrand::Rng::with_seed(seed);
    random_u32(&mut r, EXT_LEN)
}

fn external_memory_child() {
    use cuda_runtime::external::{ExternalMemory, ExternalMemoryKind};
    use std::os::fd::FromRawFd;
    let fd: i32 = std::env::var(EXT_FD).unwrap().parse().unwrap();
    let size: u64 = std::env::var(EXT_SIZE).unwrap().parse().unwrap();
    let seed: u64 = std::env::var(EXT_SEED).unwrap().parse().unwrap();
    let data = ext_data(seed);
    // SAFETY: the parent passed an open descriptor this process inherited and nothing else in
    // this process uses; ownership goes to the import.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let ext = ExternalMemory::import(ExternalMemoryKind::OpaqueFd, fd, size, false).unwrap();
    let mut buf = ext.mapped_buffer::<u32>(0, EXT_LEN).unwrap();
    assert_same(
        "read through external memory",
        &buf.to_vec().unwrap(),
        &data,
    );
    let new: Vec<u32> = data.iter().map(|x| x ^ 0x5a5a_5a5a).collect();
    buf.copy_from_host(&new).unwrap();
    drop(buf);
    drop(ext);
    cuda_runtime::device::synchronize().unwrap();
    println!("external memory child ok");
}

fn external_semaphore_import_errors() {
    use cuda_runtime::external::{
        ExternalMemory, ExternalMemoryKind, ExternalSemaphore, ExternalSemaphoreKind,
    };
    // Descriptors the driver cannot import: errors, never a panic; the descriptor is closed.
    let f = std::fs::File::open("/dev/null").unwrap();
    let e = ExternalSemaphore::import(ExternalSemaphoreKind::OpaqueFd, f.into()).unwrap_err();
    assert!(matches!(e, Error::Cuda { .. }), "{e}");
    let f = std::fs::File::open("/dev/null").unwrap();
    assert!(ExternalMemory::import(ExternalMemoryKind::OpaqueFd, f.into(), 4096, false).is_err());
    // The device still works.
    let mut r = rng();
    let data = random_u32(&mut r, 1000);
    let b = DeviceBuffer::from_slice(&data).unwrap();
    assert_same("after refused imports", &b.to_vec().unwrap(), &data);
}

fn kernel_attributes_per_device_and_unified_functions() {
    let lib = Library::from_ptx(LIBRARY_PTX).unwrap();
    let k = lib.kernel("scale<float>").unwrap();
    for d in Device::all().unwrap() {
        let optin = d
            .attribute(DeviceAttribute::MaxSharedMemoryPerBlockOptin)
            .unwrap() as u32;
        let want = 48 * 1024 + (optin - 48 * 1024) / 2;
        k.set_max_dynamic_shared_size_for(d, want).unwrap();
        k.set_preferred_shared_memory_carveout_for(d, 50).unwrap();
        d.set_current().unwrap();
        let at = k.function().unwrap().attributes().unwrap();
        assert_eq!(
            at.max_dynamic_shared_size_bytes as u32, want,
            "device {d:?}"
        );
        assert_eq!(at.preferred_shmem_carveout, 50, "device {d:?}");
        // Above the device's opt-in limit: the driver refuses.
        assert!(k.set_max_dynamic_shared_size_for(d, optin + 1).is_err());
        let e = k
            .set_preferred_shared_memory_carveout_for(d, 101)
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidValue);
    }
    set_device(0).unwrap();
    // A PTX library has no unified functions.
    let e = lib.unified_function("scale").unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
}

/// Copies `e` from `src` (pitch `sp` elements, `sr` rows per slice) at `a` into `dst` (pitch
/// `dp`, `dr` rows) at `b`: the CPU reference of a 3-D copy.
#[allow(clippy::too_many_arguments)]
fn model_3d(
    dst: &mut [u32],
    dp: usize,
    dr: usize,
    b: cuda_runtime::Pos,
    src: &[u32],
    sp: usize,
    sr: usize,
    a: cuda_runtime::Pos,
    e: cuda_runtime::Extent,
) {
    for z in 0..e.depth {
        for y in 0..e.height {
            for x in 0..e.width {
                dst[((b.z + z) * dr + b.y + y) * dp + b.x + x] =
                    src[((a.z + z) * sr + a.y + y) * sp + a.x + x];
            }
        }
    }
}

fn batched_3d_copies_match_a_cpu_model() {
    use cuda_runtime::{
        copy_3d, Array, ArrayFlags, Copy3D, Extent, HostPitched, HostPitchedMut, PitchedBuffer, Pos,
    };
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    for round in 0..6 {
        let full = Extent::new(r.usize(8..200), r.usize(4..40), r.usize(1..5));
        let host = random_u32(&mut r, full.width * full.height * full.depth);
        let mut a = PitchedBuffer::<u32>::new_3d(full).unwrap();
        copy_3d(
            &mut a,
            &HostPitched::new(&host, full.width, full.height).unwrap(),
            &Copy3D::new(full),
        )
        .unwrap();
        let mut b = PitchedBuffer::<u32>::new_3d(full).unwrap();
        let mut arr = Array::<u32>::new_3d(full, ArrayFlags::empty()).unwrap();
        let mut back = PitchedBuffer::<u32>::new_3d(full).unwrap();
        // Zero the destinations so that untouched parts are known.
        let zeros = vec![0u32; host.len()];
        for d in [&mut b, &mut back] {
            copy_3d(
                d,
                &HostPitched::new(&zeros, full.width, full.height).unwrap(),
                &Copy3D::new(full),
            )
            .unwrap();
        }
        arr.copy_from_host(&zeros).unwrap();
        // A random sub-region, random positions on both sides.
        let e = Extent::new(
            r.usize(1..=full.width),
            r.usize(1..=full.height),
            r.usize(1..=full.depth),
        );
        let pos = |r: &mut fastrand::Rng| {
            Pos::new(
                r.usize(0..=full.width - e.width),
                r.usize(0..=full.height - e.height),
                r.usize(0..=full.depth - e.depth),
            )
        };
        let (p1, p2, p3, p4) = (pos(&mut r), pos(&mut r), pos(&mut r), pos(&mut r));
        let mut batch = cuda_runtime::Copy3DBatch::new();
        // pitched -> pitched, pitched -> array, in one batch (independent destinations).
        batch.copy(&mut b, &a, Copy3D::new(e).src_pos(p1).dst_pos(p2));
        batch.copy(&mut arr, &a, Copy3D::new(e).src_pos(p3).dst_pos(p4));
        batch.submit(&s).unwrap();
        // array -> pitched in a second batch.
        let mut second = cuda_runtime::Copy3DBatch::new();
        second.copy(&mut back, &arr, Copy3D::new(full));
        second.submit(&s).unwrap();
        s.synchronize().unwrap();
        let (w, h) = (full.width, full.height);
        let mut want_b = zeros.clone();
        model_3d(&mut want_b, w, h, p2, &host, w, h, p1, e);
        let mut want_arr = zeros.clone();
        model_3d(&mut want_arr, w, h, p4, &host, w, h, p3, e);
        let mut got = vec![0u32; host.len()];
        copy_3d(
            &mut HostPitchedMut::new(&mut got, w, h).unwrap(),
            &b,
            &Copy3D::new(full),
        )
        .unwrap();
        assert_same(&format!("round {round}: pitched to pitched"), &got, &want_b);
        copy_3d(
            &mut HostPitchedMut::new(&mut got, w, h).unwrap(),
            &back,
            &Copy3D::new(full),
        )
        .unwrap();
        assert_same(
            &format!("round {round}: through the array"),
            &got,
            &want_arr,
        );
    }
    // A region past the side names the copy; host sides are refused.
    let full = Extent::new(16, 16, 1);
    let src = PitchedBuffer::<u32>::new_3d(full).unwrap();
    let mut dst = PitchedBuffer::<u32>::new_3d(full).unwrap();
    let mut batch = cuda_runtime::Copy3DBatch::new();
    batch.copy(
        &mut dst,
        &src,
        // Rows 12..20 of 16: past the allocation (a row past the width but within the pitch
        // is allowed, as cudaMemcpy3D allows it).
        Copy3D::new(Extent::new(8, 8, 1)).src_pos(Pos::new(0, 12, 0)),
    );
    let e = batch.submit(&s).unwrap_err();
    assert!(e.to_string().contains("copy 0"), "{e}");
    let host = vec![1u32; 256];
    let hp = HostPitched::new(&host, 16, 16).unwrap();
    let mut batch = cuda_runtime::Copy3DBatch::new();
    batch.copy(&mut dst, &hp, Copy3D::new(full));
    let e = batch.submit(&s).unwrap_err();
    assert!(e.to_string().contains("host"), "{e}");
}

fn texture_and_surface_resources_are_reported() {
    use cuda_runtime::{
        Array, ArrayFlags, ArrayFormat, PitchedBuffer, ResourceDesc, SurfaceObject, TextureDesc,
        TextureObject,
    };
    let desc = TextureDesc::default();
    let arr = Array::<f32>::new_2d(64, 32, ArrayFlags::SURFACE_LOAD_STORE).unwrap();
    let t = TextureObject::from_array(&arr, &desc).unwrap();
    assert_eq!(
        t.resource_desc().unwrap(),
        ResourceDesc::Array {
            handle: arr.as_raw() as u64
        }
    );
    let surf = SurfaceObject::new(&arr).unwrap();
    assert_eq!(
        surf.resource_desc().unwrap(),
        ResourceDesc::Array {
            handle: arr.as_raw() as u64
        }
    );
    let mut r = rng();
    let data = random_f32(&mut r, 4096);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    let lin = TextureObject::from_linear(&buf, &desc).unwrap();
    match lin.resource_desc().unwrap() {
        ResourceDesc::Linear {
            device_ptr,
            format,
            channels,
            size_bytes,
        } => {
            assert_eq!(device_ptr, buf.as_raw());
            assert_eq!(format, ArrayFormat::from_raw(0x20).unwrap());
            assert_eq!(channels, 1);
            assert_eq!(size_bytes, 4096 * 4);
        }
        other => panic!("expected a linear resource, got {other:?}"),
    }
    let pitched = PitchedBuffer::<f32>::new_2d(100, 20).unwrap();
    let pt = TextureObject::from_pitched(&pitched, &desc).unwrap();
    match pt.resource_desc().unwrap() {
        ResourceDesc::Pitch2D {
            device_ptr,
            width,
            height,
            pitch_bytes,
            ..
        } => {
            assert_eq!(device_ptr, pitched.as_raw());
            assert_eq!((width, height), (100, 20));
            assert_eq!(pitch_bytes, pitched.pitch());
        }
        other => panic!("expected a pitched resource, got {other:?}"),
    }
}
