// Fourth review. Memory dropped on another thread after a use on an idle owner's per-thread
// stream is kept until the owner submits there again, synchronizes, or exits. Only allocations
// through queue::alloc_retry (cuMemAlloc, cuMemAllocAsync, arrays, external) settle that work;
// PitchedBuffer (cuMemAllocPitch) does not retry at all, so it fails with out-of-memory for as
// long as the owner idles (before the change the use was fenced at submission and the
// reclaimer freed the memory within microseconds of the drop).
// Run: NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH=<nulldrv copy with cuMemAllocPitch> r4_pitched
use cuda_runtime::{Device, DeviceBuffer, PitchedBuffer, Stream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn main() {
    let dev = Device::current().unwrap();
    let (ready, ready_rx) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let a = std::thread::spawn(move || {
        let mut x = DeviceBuffer::<u32>::new(64).unwrap();
        x.memset_u8_async(1, &Stream::per_thread().unwrap())
            .unwrap();
        std::thread::spawn(move || drop(x)).join().unwrap(); // dropped on another thread
        ready.send(()).unwrap();
        go_rx.recv().unwrap(); // A idles (e.g. waits for the main thread's result)
    });
    ready_rx.recv().unwrap();
    let t = Instant::now();
    let mut ok_after = None;
    while t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(p) = PitchedBuffer::<u32>::new_2d(16, 16) {
            ok_after = Some(t.elapsed());
            drop(p);
            break;
        }
    }
    match ok_after {
        Some(d) => println!("pitched allocation succeeded after {d:?}"),
        None => println!(
            "pitched allocation: out of memory for 3 s after the drop (A idle, memory never freed)"
        ),
    }
    let t = Instant::now();
    let r = DeviceBuffer::<u32>::new(64).map(drop);
    println!(
        "DeviceBuffer::new (alloc_retry + settle): {:?} after {:?}",
        r.map_err(|e| e.code()),
        t.elapsed()
    );
    let _ = dev;
    go.send(()).unwrap();
    a.join().unwrap();
    println!("violations {}", ptask::violations());
}
