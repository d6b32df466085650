// Fourth review. An unrelated capture held open by another thread (thread-local mode, on a
// created stream) stops the settle thread (`queue::no_capture`), so memory dropped on another
// thread after a use on an idle owner's per-thread stream is never freed: the allocation that
// needs it fails after its 2 s patience. Before the change the use was fenced at submission and
// the reclaimer freed it at once (the allocation succeeds in microseconds). A second case,
// besides the documented one, where an allocation fails where cudaFree would not.
// Run: NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH=<nulldrv> r4_oom_capture
use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
    let (open, open_rx) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // An unrelated capture, open for 3 s (a user building a graph).
        let s = Stream::new().unwrap();
        let c = s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        open.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(3));
        c.end().map(drop)
    });
    open_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let r = DeviceBuffer::<u32>::new(64).map(drop);
    println!(
        "allocation while the capture is open: {:?} after {:?}",
        r.map_err(|e| e.code()),
        t0.elapsed()
    );
    println!(
        "user's capture end: {:?}",
        t.join().unwrap().map_err(|e| e.code())
    );
    go.send(()).unwrap();
    a.join().unwrap();
    println!("violations {}", ptask::violations());
}
