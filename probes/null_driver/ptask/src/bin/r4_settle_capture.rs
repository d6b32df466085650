// Fourth review. The settle thread's capture check races with a capture's begin: settle_asked
// checks `no_capture()` on the allocating thread, then spawns a thread that enters the context,
// takes marks and calls cuCtxSynchronize (relaxed). A capture begun by another thread in
// between is invalidated (on the GPU a relaxed cuCtxSynchronize from another thread fails with
// 900 and the capture's end with 901, in every mode: probes/per_thread_settle_gpu.cu result
// (2); the null driver copy models that with NULLDRV_CTXSYNC_STRICT=1).
// Run: NULLDRV_MAX_ALLOCS=2 NULLDRV_CTXSYNC_STRICT=1 LD_LIBRARY_PATH=<nulldrv> r4_settle_capture [rounds open_us gap_us]
use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

fn spin(us: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(us) {
        std::hint::spin_loop();
    }
}

fn main() {
    let arg = |i: usize, d: u64| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let rounds = arg(1, 50) as usize;
    let (open_us, gap_us) = (arg(2, 100), arg(3, 100));
    Device::current().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (caps, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let t = {
        let (stop, caps, failed) = (stop.clone(), caps.clone(), failed.clone());
        std::thread::spawn(move || {
            // The user's capture thread: short captures of a created stream, back to back.
            let s = Stream::new().unwrap();
            let mut z = DeviceBuffer::<u32>::new(64).unwrap(); // 1 of NULLDRV_MAX_ALLOCS=2
            while !stop.load(Ordering::Relaxed) {
                let c = s.begin_capture(CaptureMode::ThreadLocal).unwrap();
                let m = z.memset_u8_async(0, &s);
                spin(open_us);
                let r = m.and_then(|()| c.end().map(drop));
                caps.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = r {
                    if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                        println!("  user's capture end failed: {e}");
                    }
                }
                spin(gap_us);
            }
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let mut alloc_fail = 0;
    for _ in 0..rounds {
        // Owner A: a use on its per-thread stream; the buffer goes to main; A idles.
        let (tx, rx) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let a = std::thread::spawn(move || {
            let mut x = DeviceBuffer::<u32>::new(64).unwrap();
            x.memset_u8_async(1, &Stream::per_thread().unwrap())
                .unwrap();
            tx.send(x).unwrap();
            go_rx.recv().unwrap();
        });
        let x = rx.recv().unwrap();
        drop(x); // on main: the reclaimer must ask A, which never answers
                 // Out of memory (Z and X live): alloc_retry settles A's work from a thread of its own.
        match DeviceBuffer::<u32>::new(64) {
            Ok(y) => drop(y),
            Err(_) => alloc_fail += 1,
        }
        go.send(()).unwrap();
        a.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    println!(
        "rounds {rounds}: allocations failed {alloc_fail}; user's captures {} of which ended in error {}; violations {}",
        caps.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        ptask::violations()
    );
}
