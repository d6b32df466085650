// Thread A: one buffer, used on its per-thread stream, dropped; A then blocks on B.
// Thread B: allocates (the device holds one buffer: NULLDRV_MAX_ALLOCS=1).
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::sync::mpsc;
use std::time::Instant;
fn main() {
    Device::current().unwrap();
    let (tx, rx) = mpsc::channel::<bool>();
    let a = std::thread::spawn(move || {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        drop(b); // cudaFree in the runtime
        let (btx, brx) = mpsc::channel::<bool>();
        let bt = std::thread::spawn(move || {
            let t = Instant::now();
            let r = DeviceBuffer::<u32>::new(64);
            println!(
                "B: allocation {:?} after {:?}",
                r.as_ref().map(|_| ()),
                t.elapsed()
            );
            btx.send(r.is_ok()).unwrap();
        });
        let ok = brx.recv().unwrap(); // A waits for B
        bt.join().unwrap();
        tx.send(ok).unwrap();
    });
    let ok = rx.recv().unwrap();
    a.join().unwrap();
    println!("B's allocation succeeded: {ok}");
}
