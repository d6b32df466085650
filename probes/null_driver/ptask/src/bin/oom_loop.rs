// (Second review of the per-thread fixes, eleventh session.) the `oom` scenario repeated (NULLDRV_MAX_ALLOCS=K): K-1 idle owner threads keep a
// dropped buffer each waiting for their ask (more graves for the reclaimer to pass over), one more
// owner A blocks on B, B allocates. Counts B's failures.
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::mpsc;
use std::time::{Duration, Instant};
fn main() {
    Device::current().unwrap();
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let extra: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (mut fails, mut worst) = (0, Duration::ZERO);
    for _ in 0..iters {
        let mut idle = Vec::new();
        for _ in 0..extra {
            let (r, rr) = mpsc::channel::<()>();
            let (g, gr) = mpsc::channel::<()>();
            idle.push((
                g,
                std::thread::spawn(move || {
                    let s = Stream::per_thread().unwrap();
                    let mut b = DeviceBuffer::<u32>::new(64).unwrap();
                    b.memset_u8_async(1, &s).unwrap();
                    drop(b);
                    r.send(()).unwrap();
                    gr.recv().unwrap();
                }),
            ));
            rr.recv().unwrap();
        }
        let a = std::thread::spawn(move || {
            let s = Stream::per_thread().unwrap();
            let mut b = DeviceBuffer::<u32>::new(64).unwrap();
            b.memset_u8_async(1, &s).unwrap();
            drop(b);
            std::thread::spawn(move || {
                let t = Instant::now();
                let r = DeviceBuffer::<u32>::new(64).map(|_| ());
                (r.is_ok(), t.elapsed())
            })
            .join()
            .unwrap()
        });
        let (ok, t) = a.join().unwrap();
        if !ok {
            fails += 1;
            println!("  B failed after {t:?}");
        }
        worst = worst.max(t);
        for (g, h) in idle {
            g.send(()).unwrap();
            h.join().unwrap();
        }
        Device::current().unwrap().synchronize().unwrap();
    }
    println!("iterations {iters}, extra idle owners {extra}: B failed {fails}, worst {worst:?}");
}
