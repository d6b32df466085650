// (Second review of the per-thread fixes, eleventh session.) a device reset racing the settle thread (NULLDRV_MAX_ALLOCS=1, NULLDRV_CTXSYNC_MS=500).
// Round k: A uses a buffer on its per-thread stream, drops it, blocks; B allocates (OOM -> settle);
// main resets the device `delay` ms after B starts. Then a clean round checks settles still work.
use cuda_runtime::{Device, DeviceBuffer, Stream};
use ptask::violations;
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
        drop(b);
        ready.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    ready_rx.recv().unwrap();
    let t = Instant::now();
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
    let ts = Instant::now();
    dev.synchronize().unwrap();
    println!(
        "  B: {r:?} after {took:?}; round {:?}; later Device::synchronize {:?}",
        t.elapsed(),
        ts.elapsed()
    );
}
fn main() {
    Device::current().unwrap();
    let v0 = violations();
    for d in [
        None,
        Some(5),
        Some(50),
        Some(300),
        Some(700),
        Some(2100),
        None,
    ] {
        println!("round, reset delay {d:?}");
        round(d);
    }
    println!("null-driver violations: {}", violations() - v0);
}
