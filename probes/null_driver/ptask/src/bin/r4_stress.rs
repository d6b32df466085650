// Fourth review: a hostile mix on per-thread streams (drops on other threads, pinned CPU views on
// other threads, thread exits, OOM, resets, device synchronizes); reports errors other than
// out-of-memory / context-destroyed, the slowest call, and null-driver violations.
// Run: NULLDRV_MAX_ALLOCS=6 LD_LIBRARY_PATH=<nulldrv> r4_stress [seconds]
use cuda_runtime::{Device, DeviceBuffer, ErrorCode, PinnedBuffer, Stream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

enum Item {
    Dev(DeviceBuffer<u32>),
    Pin(PinnedBuffer<u32>),
}

static SLOW_US: AtomicU64 = AtomicU64::new(0);
static ODD: AtomicU64 = AtomicU64::new(0);
fn timed<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    let us = t.elapsed().as_micros() as u64;
    if us > SLOW_US.fetch_max(us, Ordering::Relaxed) && us > 2_500_000 {
        println!("slow: {what} took {us} us");
    }
    r
}
fn odd(what: &str, e: &cuda_runtime::Error) {
    match e.code() {
        ErrorCode::MemoryAllocation | ErrorCode::ContextIsDestroyed => {}
        _ => {
            if ODD.fetch_add(1, Ordering::Relaxed) < 10 {
                println!("odd error in {what}: {e}");
            }
        }
    }
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let dev = Device::current().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Item>();
    let rx = Arc::new(Mutex::new(rx));
    let mut rng_seed = 1u64;
    let mut workers = Vec::new();
    for w in 0..3u64 {
        let (stop, tx, rx) = (stop.clone(), tx.clone(), rx.clone());
        workers.push(std::thread::spawn(move || {
            let mut seed = 0x9e3779b97f4a7c15u64 ^ w;
            let mut rnd = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            while !stop.load(Ordering::Relaxed) {
                // A generation of this worker: a thread that lives for a while, then exits.
                let (stop2, tx2, rx2) = (stop.clone(), tx.clone(), rx.clone());
                let n = 50 + rnd() % 300;
                let s2 = rnd();
                std::thread::spawn(move || {
                    let mut seed = s2 | 1;
                    let mut rnd = move || {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed
                    };
                    let mut keep: Vec<Item> = Vec::new();
                    for _ in 0..n {
                        if stop2.load(Ordering::Relaxed) {
                            break;
                        }
                        let pt = match Stream::per_thread() {
                            Ok(s) => s,
                            Err(e) => {
                                odd("per_thread", &e);
                                continue;
                            }
                        };
                        match rnd() % 10 {
                            0..=3 => match timed("alloc", || DeviceBuffer::<u32>::new(64)) {
                                Ok(mut b) => {
                                    if let Err(e) = b.memset_u8_async(1, &pt) {
                                        odd("memset", &e);
                                    }
                                    match rnd() % 3 {
                                        0 => drop(b),
                                        1 => {
                                            let _ = tx2.send(Item::Dev(b));
                                        }
                                        _ => keep.push(Item::Dev(b)),
                                    }
                                }
                                Err(e) => odd("alloc", &e),
                            },
                            4..=5 => match PinnedBuffer::<u32>::new(64) {
                                Ok(mut p) => {
                                    if let Some(Item::Dev(b)) =
                                        keep.iter().find(|i| matches!(i, Item::Dev(_)))
                                    {
                                        if let Err(e) = b.copy_to_pinned_async(&mut p, &pt) {
                                            odd("copy_to_pinned", &e);
                                        }
                                    }
                                    if rnd() % 2 == 0 {
                                        let _ = tx2.send(Item::Pin(p));
                                    } else {
                                        keep.push(Item::Pin(p));
                                    }
                                }
                                Err(e) => odd("pinned", &e),
                            },
                            6 => {
                                if let Ok(it) = rx2.lock().unwrap().try_recv() {
                                    match it {
                                        Item::Pin(p) => {
                                            if let Err(e) =
                                                timed("as_slice", || p.as_slice().map(|s| s.len()))
                                            {
                                                odd("as_slice (other thread)", &e);
                                            }
                                        }
                                        Item::Dev(b) => drop(b),
                                    }
                                }
                            }
                            7 => {
                                if let Err(e) = timed("pt sync", || pt.synchronize()) {
                                    odd("per-thread sync", &e);
                                }
                            }
                            8 => {
                                keep.clear();
                            }
                            _ => {
                                if let Some(Item::Dev(b)) = keep.pop() {
                                    let _ = tx2.send(Item::Dev(b));
                                }
                            }
                        }
                        std::thread::yield_now();
                    }
                    // exits with `keep` dropped here (thread-exit with queued work)
                })
                .join()
                .unwrap();
            }
        }));
    }
    let t0 = Instant::now();
    let mut resets = 0;
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(100));
        rng_seed = rng_seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        if (rng_seed >> 33) % 4 == 0 {
            match timed("reset", || dev.reset()) {
                Ok(()) => resets += 1,
                Err(e) => odd("reset", &e),
            }
        } else if let Err(e) = timed("device sync", || dev.synchronize()) {
            odd("device sync", &e);
        }
        // drain some cross-thread drops on main
        while let Ok(it) = rx.lock().unwrap().try_recv() {
            drop(it);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    println!(
        "done: resets {resets}, slowest call {} us, odd errors {}, violations {}",
        SLOW_US.load(Ordering::Relaxed),
        ODD.load(Ordering::Relaxed),
        ptask::violations()
    );
}
