// (Second review of the per-thread fixes, eleventh session.) as `oom`, with NULLDRV_CTXSYNC_MS modelling unrelated long work in the context
// (every cuCtxSynchronize lasts that long). A's use on its per-thread stream is long done; B's
// allocation needs A's dropped buffer.
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
        drop(b);
        let bt = std::thread::spawn(move || {
            let t = Instant::now();
            let r = DeviceBuffer::<u32>::new(64);
            println!(
                "B: allocation {:?} after {:?}",
                r.as_ref().map(|_| ()).map_err(|e| e.code()),
                t.elapsed()
            );
            r.is_ok()
        });
        let ok = bt.join().unwrap(); // A waits for B
        tx.send(ok).unwrap();
    });
    let ok = rx.recv().unwrap();
    a.join().unwrap();
    println!("B's allocation succeeded: {ok}");
}
