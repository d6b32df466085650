// (Third review of the per-thread branch, eleventh session.) A uses a buffer on its per-thread stream and hands it to C, which drops it (another
// thread: the reclaimer must ask A). A then waits for B, whose allocation needs that memory.
// NULLDRV_CTXSYNC_MS models unrelated long work elsewhere on the device.
use cuda_runtime::{Device, DeviceBuffer, Stream};
use std::time::Instant;
fn main() {
    Device::current().unwrap();
    let a = std::thread::spawn(move || {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        std::thread::spawn(move || drop(b)).join().unwrap(); // dropped on C
        std::thread::sleep(std::time::Duration::from_millis(50));
        let bt = std::thread::spawn(move || {
            let t = Instant::now();
            let r = DeviceBuffer::<u32>::new(64);
            println!(
                "B: allocation {:?} after {:?}",
                r.as_ref().map(|_| ()).map_err(|e| e.code()),
                t.elapsed()
            );
            let t = Instant::now();
            let r2 = DeviceBuffer::<u32>::new(64); // a true out-of-memory now (one live allocation allowed)
            println!(
                "B: second (true OOM) {:?} after {:?}",
                r2.as_ref().map(|_| ()).map_err(|e| e.code()),
                t.elapsed()
            );
        });
        bt.join().unwrap(); // A waits for B
    });
    a.join().unwrap();
}
