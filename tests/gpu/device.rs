//! Devices: current device, properties, flags, limits, reset.

use crate::common::{assert_same, random_u32, rng};
use cuda_runtime::{
    get_device, get_last_error, peek_at_last_error, set_device, CacheConfig, Device,
    DeviceAttribute, DeviceBuffer, DeviceFlags, Error, ErrorCode, Event, Limit, Stream,
};

crate::tests![
    current_device_is_per_thread_and_defaults_to_zero,
    invalid_ordinal_is_invalid_device_and_recorded,
    properties_agree_with_attributes,
    limits_set_and_read_back,
    cache_config_and_priority_range,
    versions,
    profiler_start_and_stop_bracket_work;
    exclusive: device_flags_follow_the_runtime, reset_invalidates_every_handle
];

fn current_device_is_per_thread_and_defaults_to_zero() {
    let n = cuda_runtime::device_count().unwrap();
    assert!(n >= 1);
    std::thread::spawn(move || {
        assert_eq!(get_device().unwrap(), 0);
        set_device(n - 1).unwrap();
        assert_eq!(get_device().unwrap(), n - 1);
        std::thread::spawn(|| assert_eq!(get_device().unwrap(), 0))
            .join()
            .unwrap();
    })
    .join()
    .unwrap();
}

fn invalid_ordinal_is_invalid_device_and_recorded() {
    let n = cuda_runtime::device_count().unwrap();
    std::thread::spawn(move || {
        let _ = get_last_error();
        for bad in [n, -1, i32::MAX] {
            let e = set_device(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidDevice);
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
            assert_eq!(
                peek_at_last_error().map(|e| e.code()),
                Some(ErrorCode::InvalidDevice)
            );
            assert_eq!(
                get_last_error().map(|e| e.code()),
                Some(ErrorCode::InvalidDevice)
            );
            assert_eq!(get_last_error(), None);
        }
        // A failed set leaves the current device unchanged.
        assert_eq!(get_device().unwrap(), 0);
    })
    .join()
    .unwrap();
}

fn properties_agree_with_attributes() {
    for dev in Device::all().unwrap() {
        let p = dev.properties().unwrap();
        assert_eq!(p.name, dev.name().unwrap());
        assert!(!p.name.is_empty());
        assert_eq!(
            p.max_threads_per_block,
            dev.attribute(DeviceAttribute::MaxThreadsPerBlock).unwrap()
        );
        assert_eq!(
            p.multi_processor_count,
            dev.attribute(DeviceAttribute::MultiProcessorCount).unwrap()
        );
        assert!(p.multi_processor_count > 0);
        let (free, total) = dev.memory_info().unwrap();
        assert_eq!(total, dev.total_memory().unwrap());
        assert!(free > 0 && free <= total);
        let bus = dev.pci_bus_id().unwrap();
        assert_eq!(bus.matches(':').count(), 2, "{bus}");
        assert_ne!(dev.uuid().unwrap(), [0u8; 16]);
    }
}

fn limits_set_and_read_back() {
    let dev = Device::current().unwrap();
    let old = dev.limit(Limit::StackSize).unwrap();
    assert!(old > 0);
    let want = old + 1024;
    dev.set_limit(Limit::StackSize, want).unwrap();
    assert!(dev.limit(Limit::StackSize).unwrap() >= want);
    dev.set_limit(Limit::StackSize, old).unwrap();
    let heap = dev.limit(Limit::MallocHeapSize).unwrap();
    dev.set_limit(Limit::MallocHeapSize, heap * 2).unwrap();
    assert_eq!(dev.limit(Limit::MallocHeapSize).unwrap(), heap * 2);
    let fifo = dev.limit(Limit::PrintfFifoSize).unwrap();
    assert!(fifo > 0);
    let g = dev.limit(Limit::MaxL2FetchGranularity).unwrap();
    assert!(g <= 128, "{g}");
    let pending = dev.limit(Limit::DevRuntimePendingLaunchCount).unwrap();
    dev.set_limit(Limit::DevRuntimePendingLaunchCount, pending * 2)
        .unwrap();
    assert_eq!(
        dev.limit(Limit::DevRuntimePendingLaunchCount).unwrap(),
        pending * 2
    );
    dev.set_limit(Limit::DevRuntimePendingLaunchCount, pending)
        .unwrap();
    dev.limit(Limit::PersistingL2CacheSize).unwrap();
}

fn cache_config_and_priority_range() {
    let dev = Device::current().unwrap();
    let before = dev.cache_config().unwrap();
    dev.set_cache_config(CacheConfig::PreferShared).unwrap();
    let _ = dev.cache_config().unwrap();
    dev.set_cache_config(before).unwrap();
    let (least, greatest) = dev.stream_priority_range().unwrap();
    assert!(greatest <= least, "{greatest} {least}");
    assert!(!dev.can_access_peer(dev).unwrap());
}

fn versions() {
    assert!(cuda_runtime::driver_version() >= 13000);
    assert_eq!(cuda_runtime::runtime_version(), 13000);
}

fn device_flags_follow_the_runtime() {
    let dev = Device::current().unwrap();
    let before = dev.flags().unwrap();
    assert!(before.contains(DeviceFlags::MAP_HOST));
    dev.set_flags(DeviceFlags::SCHEDULE_BLOCKING_SYNC).unwrap();
    let now = dev.flags().unwrap();
    assert!(now.contains(DeviceFlags::SCHEDULE_BLOCKING_SYNC), "{now:?}");
    let e = dev
        .set_flags(DeviceFlags::SCHEDULE_SPIN | DeviceFlags::SCHEDULE_YIELD)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    dev.set_flags(before & DeviceFlags::SCHEDULE_MASK).unwrap();
}

fn reset_invalidates_every_handle() {
    let dev = Device::current().unwrap();
    let mut r = rng();
    let data = random_u32(&mut r, 100_000);
    let s = Stream::new().unwrap();
    let ev = Event::new().unwrap();
    let mut buf = DeviceBuffer::from_slice(&data).unwrap();
    let async_buf = DeviceBuffer::<u32>::new_async(1000, &s).unwrap();
    ev.record(&s).unwrap();
    dev.reset().unwrap();
    let stale = |e: Error| assert!(matches!(e, Error::ContextDestroyed { .. }), "{e}");
    stale(s.synchronize().unwrap_err());
    stale(s.query().unwrap_err());
    stale(s.flags().unwrap_err());
    stale(ev.query().unwrap_err());
    stale(ev.record(&s).unwrap_err());
    stale(buf.to_vec().unwrap_err());
    stale(buf.copy_from_host(&data).unwrap_err());
    stale(buf.memset_u8(0).unwrap_err());
    stale(s.launch_host_fn(|| ()).unwrap_err());
    assert_eq!(
        get_last_error().map(|e| e.code()),
        Some(ErrorCode::ContextIsDestroyed)
    );
    // Dropping stale handles frees nothing twice and reports nothing.
    drop((buf, async_buf, ev, s));
    assert!(dev.take_deferred_errors().is_empty());
    // The next call gets a fresh context.
    let fresh = DeviceBuffer::from_slice(&data).unwrap();
    assert_same("after reset", &fresh.to_vec().unwrap(), &data);
    let s2 = Stream::new().unwrap();
    s2.synchronize().unwrap();
}

fn profiler_start_and_stop_bracket_work() {
    use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};
    let mut r = crate::common::rng();
    cuda_runtime::get_last_error(); // this thread may have run another test
                                    // Stopping or starting twice has no effect, as in libcudart.
    cuda_runtime::profiler_stop().unwrap();
    cuda_runtime::profiler_start().unwrap();
    cuda_runtime::profiler_start().unwrap();
    let n = r.usize(1..100_000);
    let (a, b) = (
        crate::common::random_f32(&mut r, n),
        crate::common::random_f32(&mut r, n),
    );
    let (da, db) = (
        DeviceBuffer::from_slice(&a).unwrap(),
        DeviceBuffer::from_slice(&b).unwrap(),
    );
    let mut dc = DeviceBuffer::<f32>::new(n).unwrap();
    let s = Stream::new().unwrap();
    kernels::vector_add::vadd(
        &s,
        &LaunchConfig::for_elements(n, 256).unwrap(),
        &da,
        &db,
        &mut dc,
    )
    .unwrap();
    cuda_runtime::profiler_stop().unwrap();
    cuda_runtime::profiler_stop().unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    crate::common::assert_same("vadd between profiler calls", &dc.to_vec().unwrap(), &want);
    assert_eq!(cuda_runtime::get_last_error(), None);
}
