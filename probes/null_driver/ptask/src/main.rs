use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::mpsc;
use std::time::Instant;

fn timed_syncs(tag: &str) {
    for _ in 0..3 {
        let t = Instant::now();
        Device::current().unwrap().synchronize().unwrap();
        println!("{tag}: Device::synchronize took {:?}", t.elapsed());
    }
}

fn main() {
    let dev = Device::current().unwrap();
    timed_syncs("baseline");
    // Thread A: a use on its per-thread stream, the buffer dropped, then A idles (alive).
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let a = std::thread::spawn(move || {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        drop(b);
        done_tx.send(()).unwrap();
        go_rx.recv().unwrap(); // A blocks: never submits on its per-thread stream again
    });
    done_rx.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    println!("graves pending: A alive, ask raised by the reclaimer; no sync");
    // Use case 2: reset from main while A's ask is pending.
    dev.reset().unwrap();
    let _ = DeviceBuffer::<u32>::new(1).unwrap(); // new context
    timed_syncs("after reset (A alive)");
    go_tx.send(()).unwrap();
    a.join().unwrap();
    timed_syncs("after reset, A exited");
}
