// Review 5. A settle thread's cuCtxSynchronize that outlasts SETTLE_WAIT (a long or persistent
// kernel elsewhere; NULLDRV_CTXSYNC_MS stands in): every later capture begin AND every join
// waits the full 2 s again, for as long as that synchronize runs, then goes ahead during it.
// Run: NULLDRV_MAX_ALLOCS=1 NULLDRV_CTXSYNC_MS=20000 NULLDRV_CTXSYNC_STRICT=1 LD_LIBRARY_PATH=<drv> r5_stuck
use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Event, Stream};
use std::sync::mpsc;
use std::time::Instant;

fn main() {
    Device::current().unwrap();
    let (ready, ready_rx) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let a = std::thread::spawn(move || {
        let mut x = DeviceBuffer::<u32>::new(64).unwrap();
        x.memset_u8_async(1, &Stream::per_thread().unwrap())
            .unwrap();
        std::thread::spawn(move || drop(x)).join().unwrap(); // dropped on another thread
        ready.send(()).unwrap();
        go_rx.recv().unwrap(); // A idles
    });
    ready_rx.recv().unwrap();
    let t0 = Instant::now();
    let r = DeviceBuffer::<u32>::new(64).map(drop);
    println!(
        "[{:>6.2?}] allocation: {:?}",
        t0.elapsed(),
        r.map_err(|e| e.code())
    );
    // The settle thread is now inside its cuCtxSynchronize (NULLDRV_CTXSYNC_MS long).
    let (s1, s2) = (Stream::new().unwrap(), Stream::new().unwrap());
    let ev = Event::new().unwrap();
    for i in 0..3 {
        let t = Instant::now();
        let c = s1.begin_capture(CaptureMode::ThreadLocal).unwrap();
        let begin = t.elapsed();
        ev.record(&s1).unwrap();
        let t = Instant::now();
        let j = s2.wait_event(&ev);
        let join = t.elapsed();
        ev.record(&s2).unwrap();
        s1.wait_event(&ev).unwrap();
        let end = c.end().map(drop);
        println!(
            "[{:>6.2?}] capture {i}: begin took {begin:?}, join took {join:?} ({:?}), end {:?}",
            t0.elapsed(),
            j.map_err(|e| e.code()),
            end.map_err(|e| e.code())
        );
    }
    go.send(()).unwrap();
    a.join().unwrap();
    println!("violations {}", ptask::violations());
}
