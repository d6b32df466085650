// (Third review of the per-thread branch, eleventh session.) as reset_settle, but the buffer is dropped on another thread (the reclaimer asks A,
// only the settle thread can complete it), and the reset lands while B is in alloc_retry.
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::mpsc;
use std::time::{Duration, Instant};
fn round(delay: Option<u64>) {
    let dev = Device::current().unwrap();
    let (ready, ready_rx) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let a = std::thread::spawn(move || {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        std::thread::spawn(move || drop(b)).join().unwrap();
        ready.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    ready_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let b = std::thread::spawn(move || {
        let t = Instant::now();
        let r = DeviceBuffer::<u32>::new(64).map(|_| ());
        (r.map_err(|e| e.code()), t.elapsed())
    });
    if let Some(d) = delay {
        std::thread::sleep(Duration::from_millis(d));
        let tr = Instant::now();
        let r = dev.reset();
        println!(
            "  reset at {d} ms: {:?}, took {:?}",
            r.map_err(|e| e.code()),
            tr.elapsed()
        );
    }
    let (r, took) = b.join().unwrap();
    go.send(()).unwrap();
    a.join().unwrap();
    println!("  B: {r:?} after {took:?}");
}
fn main() {
    Device::current().unwrap();
    for d in [
        None,
        Some(1),
        Some(5),
        Some(10),
        Some(15),
        Some(19),
        Some(22),
        None,
    ] {
        println!("round, reset delay {d:?}");
        round(d);
    }
}
