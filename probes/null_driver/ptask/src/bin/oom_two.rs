// (Second review of the per-thread fixes, eleventh session.) two allocations fail for lack of memory at about the same time (NULLDRV_MAX_ALLOCS=2,
// NULLDRV_CTXSYNC_MS=1000). B1's settle thread runs (SETTLING set); the memory B2 needs was used on
// A2's per-thread stream after B1's settle took its marks. B2's settle_asked returns at once.
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::mpsc;
use std::time::{Duration, Instant};
fn main() {
    Device::current().unwrap();
    let t0 = Instant::now();
    let (a1_ready, a1_ready_rx) = mpsc::channel::<()>();
    let (a1_go, a1_go_rx) = mpsc::channel::<()>();
    let a1 = std::thread::spawn(move || {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        drop(b);
        a1_ready.send(()).unwrap();
        a1_go_rx.recv().unwrap();
    });
    a1_ready_rx.recv().unwrap();
    let (a2_alloc, a2_alloc_rx) = mpsc::channel::<()>();
    let (a2_use, a2_use_rx) = mpsc::channel::<()>();
    let (a2_used, a2_used_rx) = mpsc::channel::<()>();
    let (a2_go, a2_go_rx) = mpsc::channel::<()>();
    let a2 = std::thread::spawn(move || {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        a2_alloc.send(()).unwrap();
        a2_use_rx.recv().unwrap();
        b.memset_u8_async(1, &s).unwrap();
        drop(b);
        a2_used.send(()).unwrap();
        a2_go_rx.recv().unwrap();
    });
    a2_alloc_rx.recv().unwrap();
    let b1 = std::thread::spawn(move || {
        let t = Instant::now();
        let r = DeviceBuffer::<u32>::new(64);
        println!(
            "B1: allocation {:?} after {:?}",
            r.as_ref().map(|_| ()).map_err(|e| e.code()),
            t.elapsed()
        );
        r
    });
    std::thread::sleep(Duration::from_millis(200)); // B1's settle is in its cuCtxSynchronize
    a2_use.send(()).unwrap();
    a2_used_rx.recv().unwrap();
    let b2 = std::thread::spawn(move || {
        let t = Instant::now();
        let r = DeviceBuffer::<u32>::new(64);
        println!(
            "B2: allocation {:?} after {:?}",
            r.as_ref().map(|_| ()).map_err(|e| e.code()),
            t.elapsed()
        );
        r
    });
    let r1 = b1.join().unwrap();
    let r2 = b2.join().unwrap();
    println!(
        "B1 ok={} B2 ok={} (total {:?})",
        r1.is_ok(),
        r2.is_ok(),
        t0.elapsed()
    );
    a1_go.send(()).unwrap();
    a2_go.send(()).unwrap();
    a1.join().unwrap();
    a2.join().unwrap();
}
