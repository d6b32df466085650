// (Second review of the per-thread fixes, eleventh session.) allocations failing for lack of memory on several threads at once, with per-thread
// uses, idle owners and resets (NULLDRV_MAX_ALLOCS small). Reports failures, the longest
// allocation, violations; a hang shows as the timeout.
use cuda_runtime::{Device, DeviceBuffer, Stream};
use ptask::violations;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
fn main() {
    let dev = Device::current().unwrap();
    let v0 = violations();
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let resets = std::env::args().nth(2).is_some_and(|s| s == "reset");
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, fail, worst_ns) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut hs = Vec::new();
    for i in 0..6u64 {
        let (stop, ok, fail, worst) = (stop.clone(), ok.clone(), fail.clone(), worst_ns.clone());
        hs.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let s = Stream::per_thread().unwrap();
                let t = Instant::now();
                let r = DeviceBuffer::<u32>::new(64);
                worst.fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                match r {
                    Ok(mut b) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        let _ = b.memset_u8_async(1, &s);
                        drop(b);
                        // idle owner for a while (nobody answers the ask meanwhile)
                        std::thread::sleep(Duration::from_millis((n * 7 + i * 13) % 40));
                    }
                    Err(_) => {
                        fail.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let t0 = Instant::now();
    let mut nres = 0;
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(150));
        if resets {
            if dev.reset().is_ok() {
                nres += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    println!(
        "ok {} failed {} worst allocation {:?} resets {} violations {}",
        ok.load(Ordering::Relaxed),
        fail.load(Ordering::Relaxed),
        Duration::from_nanos(worst_ns.load(Ordering::Relaxed)),
        nres,
        violations() - v0
    );
}
