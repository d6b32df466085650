// Review rev-g15: a driver log callback (`logs::register_callback`) runs on the thread whose
// driver call failed, inside that call, so inside the crate's call that made it (its entry of
// the device and whatever it holds). Its closure is safe code and could call the crate: an
// allocation in the callback of a failed allocation failed again, logged again, and recursed
// until the stack overflowed (SIGSEGV/abort). Crate calls inside a log callback must be refused
// as they are in host functions, and a panic in the callback must not reach the driver.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use cuda_runtime::{logs, Device, DeviceBuffer, Error};

use ptask::{finish, violations};

fn main() {
    Device::current().unwrap();
    let before = violations();
    let mut bad = 0;
    // NULLDRV_MAX_ALLOCS=1: this one is live, every other allocation fails (and is logged).
    let _held = DeviceBuffer::<u8>::zeroed(16).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let inner: Arc<Mutex<Vec<String>>> = Arc::default();
    let (c2, i2) = (calls.clone(), inner.clone());
    let cb = logs::register_callback(move |_, msg| {
        let n = c2.fetch_add(1, Ordering::SeqCst);
        if n < 100_000 {
            // A crate call from the callback: an allocation, which fails again here.
            let r = DeviceBuffer::<u8>::zeroed(16).map(drop);
            i2.lock().unwrap().push(format!("{msg}: {r:?}"));
        }
    })
    .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = DeviceBuffer::<u8>::zeroed(16).map(drop);
        tx.send(r.map_err(|e| e.to_string())).unwrap();
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(r) => println!("allocation with a re-entering log callback: {r:?}"),
        Err(_) => {
            println!("BAD: the allocation did not return in 30 s");
            bad += 1;
        }
    }
    let n = calls.load(Ordering::SeqCst);
    let inner = inner.lock().unwrap().clone();
    println!(
        "callback calls: {n}; first inner results: {:?}",
        &inner[..inner.len().min(2)]
    );
    if n > 1000 {
        println!("BAD: the callback re-entered itself {n} times");
        bad += 1;
    }
    if !inner.iter().all(|s| s.contains("InHostFunction")) {
        println!("BAD: a crate call inside a log callback was not refused");
        bad += 1;
    }
    // A panic in the callback, with a payload whose drop panics too, must not unwind into the
    // driver (an abort).
    drop(cb);
    struct Boom;
    impl Drop for Boom {
        fn drop(&mut self) {
            panic!("payload drop");
        }
    }
    let _cb = logs::register_callback(|_, _| std::panic::panic_any(Boom)).unwrap();
    let r = DeviceBuffer::<u8>::zeroed(16).map(drop);
    println!("allocation with a panicking log callback: {r:?}");
    if r.as_ref().map_err(Error::code) != Err(cuda_runtime::ErrorCode::MemoryAllocation) {
        println!("BAD: expected the allocation's own out-of-memory error");
        bad += 1;
    }
    finish(bad, before);
}
