//! Streams, events and host functions.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{assert_same, random_u32, rng};
use cuda_runtime::{DeviceBuffer, Error, Event, EventFlags, Stream, StreamFlags};

crate::tests![
    stream_flags_and_priorities,
    default_streams_are_usable,
    host_function_panic_is_reported,
    host_function_panic_is_reported_through_any_handle,
    events_time_and_order,
    wait_event_orders_streams;
    // Exclusive: it asserts the device has no deferred errors, which other tests could add.
    exclusive: host_functions_run_in_stream_order
];

fn stream_flags_and_priorities() {
    let dev = cuda_runtime::Device::current().unwrap();
    let (least, greatest) = dev.stream_priority_range().unwrap();
    let s = Stream::new().unwrap();
    assert_eq!(s.flags().unwrap(), StreamFlags::empty());
    assert_eq!(s.priority().unwrap(), 0);
    let nb = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    assert_eq!(nb.flags().unwrap(), StreamFlags::NON_BLOCKING);
    let hi = Stream::with_priority(StreamFlags::NON_BLOCKING, greatest).unwrap();
    assert_eq!(hi.priority().unwrap(), greatest);
    // Out-of-range priorities are clamped, as libcudart does.
    let clamped = Stream::with_priority(StreamFlags::empty(), greatest - 100).unwrap();
    assert_eq!(clamped.priority().unwrap(), greatest);
    let low = Stream::with_priority(StreamFlags::empty(), least + 100).unwrap();
    assert_eq!(low.priority().unwrap(), least);
    assert_eq!(s.device(), dev);
    assert!(s.query().unwrap());
}

fn default_streams_are_usable() {
    let mut r = rng();
    for s in [Stream::legacy().unwrap(), Stream::per_thread().unwrap()] {
        let host = random_u32(&mut r, 5000);
        let mut d = DeviceBuffer::<u32>::new(5000).unwrap();
        d.copy_from_host_async(&host, &s).unwrap();
        let mut back = vec![0; 5000];
        d.copy_to_host_async(&mut back, &s).unwrap();
        assert_same("default stream copy", &back, &host);
        s.synchronize().unwrap();
    }
    assert_eq!(Stream::legacy().unwrap().as_raw() as usize, 1);
    assert_eq!(Stream::per_thread().unwrap().as_raw() as usize, 2);
}

fn host_functions_run_in_stream_order() {
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut r = rng();
    let host = random_u32(&mut r, 1 << 16);
    let mut d = DeviceBuffer::<u32>::new(host.len()).unwrap();
    for i in 0..50u32 {
        let l = log.clone();
        s.launch_host_fn(move || l.lock().unwrap().push(i)).unwrap();
        if i % 10 == 0 {
            d.memset_u32_async(i, &s).unwrap();
        }
    }
    // A host function dropping a device buffer must not call CUDA from the callback thread.
    let captured = DeviceBuffer::from_slice(&host).unwrap();
    s.launch_host_fn(move || drop(captured)).unwrap();
    s.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..50).collect::<Vec<_>>());
    assert_same(
        "after host fns",
        &d.to_vec().unwrap(),
        &vec![40u32; host.len()],
    );
    // The deferred free ran on a later call without error.
    let _ = DeviceBuffer::<u8>::new(1).unwrap();
    assert!(cuda_runtime::Device::current()
        .unwrap()
        .take_deferred_errors()
        .is_empty());
}

fn host_function_panic_is_reported() {
    let s = Stream::new().unwrap();
    s.launch_host_fn(|| panic!("boom {}", 42)).unwrap();
    let ran = Arc::new(Mutex::new(false));
    let r2 = ran.clone();
    s.launch_host_fn(move || *r2.lock().unwrap() = true)
        .unwrap();
    let e = s.synchronize().unwrap_err();
    assert_eq!(
        e,
        Error::HostFnPanicked {
            message: "boom 42".into()
        }
    );
    assert!(*ran.lock().unwrap(), "later work still ran");
    s.synchronize().unwrap();
}

/// Review rev-c14 (NOT yet run on a GPU): the panic is the stream's, not the handle's: a second
/// `Stream::legacy()` reports it, and a created stream dropped unsynchronized leaves it as a
/// deferred error of the device (both were lost).
fn host_function_panic_is_reported_through_any_handle() {
    let dev = cuda_runtime::Device::current().unwrap();
    Stream::legacy()
        .unwrap()
        .launch_host_fn(|| panic!("legacy"))
        .unwrap();
    let e = Stream::legacy().unwrap().synchronize().unwrap_err();
    assert_eq!(
        e,
        Error::HostFnPanicked {
            message: "legacy".into()
        }
    );
    let _ = dev.take_deferred_errors();
    let s = Stream::new().unwrap();
    s.launch_host_fn(|| panic!("gone")).unwrap();
    drop(s);
    dev.synchronize().unwrap();
    let deferred = dev.take_deferred_errors();
    assert!(
        deferred.iter().any(|d| d.error
            == Error::HostFnPanicked {
                message: "gone".into()
            }),
        "{deferred:?}"
    );
}

fn events_time_and_order() {
    let s = Stream::new().unwrap();
    let (a, b) = (Event::new().unwrap(), Event::new().unwrap());
    assert!(a.query().unwrap(), "an unrecorded event is complete");
    let mut d = DeviceBuffer::<u8>::new(256 << 20).unwrap();
    a.record(&s).unwrap();
    for i in 0..8 {
        d.memset_u8_async(i, &s).unwrap();
    }
    b.record(&s).unwrap();
    b.synchronize().unwrap();
    assert!(b.query().unwrap());
    let ms = Event::elapsed_time(&a, &b).unwrap();
    assert!(ms > 0.0 && ms < 10_000.0, "{ms}");
    let blocking = Event::with_flags(EventFlags::BLOCKING_SYNC).unwrap();
    blocking.record(&s).unwrap();
    blocking.synchronize().unwrap();
}

fn wait_event_orders_streams() {
    // A host function holds stream A; B waits on an event recorded after it, so B's copy runs
    // only after A's host function has finished.
    let a = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let b = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    a.launch_host_fn(move || {
        std::thread::sleep(Duration::from_millis(50));
        o.lock().unwrap().push("a");
    })
    .unwrap();
    let ev = Event::with_flags(EventFlags::DISABLE_TIMING).unwrap();
    ev.record(&a).unwrap();
    b.wait_event(&ev).unwrap();
    let o = order.clone();
    b.launch_host_fn(move || o.lock().unwrap().push("b"))
        .unwrap();
    b.synchronize().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["a", "b"]);
}
