// Review rev-c14: a panic in a host function (`launch_host_fn`, `add_callback`) is kept for
// "the next synchronize or query of this stream". It was kept in the *handle*: the legacy and
// per-thread default streams get a fresh handle at every `Stream::legacy()` /
// `Stream::per_thread()` / `Stream::default_stream()`, so a synchronize through another handle
// of the same stream returned Ok, and a created stream dropped before its synchronize lost the
// panic altogether (graph host nodes report theirs as a deferred error of the device). The
// closure's work silently did not happen.
use cuda_runtime::{Device, Error, Stream};

use ptask::{finish, violations};

fn panicked(r: &cuda_runtime::Result<()>) -> bool {
    matches!(r, Err(Error::HostFnPanicked { .. }))
}

fn main() {
    let dev = Device::current().unwrap();
    let before = violations();
    let mut bad = 0;

    // The legacy stream, through two handles.
    Stream::legacy()
        .unwrap()
        .launch_host_fn(|| panic!("legacy"))
        .unwrap();
    let r = Stream::legacy().unwrap().synchronize();
    println!("legacy stream, synchronize through another handle: {r:?}");
    if !panicked(&r) {
        println!("BAD: the host function's panic was lost");
        bad += 1;
    }

    // The per-thread stream, through two handles (query this time).
    Stream::per_thread()
        .unwrap()
        .add_callback(|_| panic!("per-thread"))
        .unwrap();
    let r = Stream::per_thread().unwrap().query().map(drop);
    println!("per-thread stream, query through another handle: {r:?}");
    if !panicked(&r) {
        println!("BAD: the callback's panic was lost");
        bad += 1;
    }

    // A created stream dropped before anyone synchronised it: the device's deferred errors.
    let _ = dev.take_deferred_errors();
    let s = Stream::new().unwrap();
    s.launch_host_fn(|| panic!("created")).unwrap();
    drop(s);
    dev.synchronize().unwrap();
    let deferred = dev.take_deferred_errors();
    println!("created stream dropped: deferred errors {deferred:?}");
    if !deferred
        .iter()
        .any(|d| matches!(d.error, Error::HostFnPanicked { .. }))
    {
        println!("BAD: the host function's panic was lost with its stream");
        bad += 1;
    }

    // Still reported once only, on the stream itself.
    let s = Stream::new().unwrap();
    let s2 = s.clone();
    s.launch_host_fn(|| panic!("once")).unwrap();
    let (r1, r2) = (s2.synchronize(), s.synchronize());
    println!("created stream, twice: {r1:?} then {r2:?}");
    if !panicked(&r1) || r2.is_err() {
        println!("BAD: reported {r1:?} then {r2:?}");
        bad += 1;
    }

    finish(bad, before);
}
