// Review rev-c14: `DeviceBuffer::import_from_pool` refusing an import after the driver mapped it
// (too few elements, another device) freed the mapping with a bare `cuMemFree` on the calling
// thread, in its capture mode and with the result ignored: while a capture of the crate is open
// in global mode (on any thread), that is a capture-unsafe call, which invalidates the capture
// (its end fails) and fails, leaving the mapping in place. Every other free of the crate runs
// relaxed (`context::release`). Now it goes through `context::release`.
use std::os::fd::AsFd;

use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Error, MemPool, PoolPtrExport, Stream};

use ptask::{finish, violations};

fn main() {
    let dev = Device::current().unwrap();
    let before = violations();
    let stdin = std::io::stdin();
    let pool = MemPool::import_fd(stdin.as_fd(), dev).unwrap();
    let s = Stream::new().unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(4).unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    buf.fill_async(1, &s).unwrap();
    // 1000 elements of a 16-byte allocation: refused after the import. On another thread (a
    // failure on the capturing thread fails the capture's end by design).
    let r = std::thread::scope(|t| {
        t.spawn(|| {
            dev.set_current().unwrap();
            DeviceBuffer::<u32>::import_from_pool(&pool, &PoolPtrExport([7; 64]), 1000)
        })
        .join()
        .unwrap()
    });
    println!("oversized import: {:?}", r.as_ref().map(|_| ()));
    let later = buf.fill_async(2, &s);
    println!("later work in the capture: {later:?}");
    let g = cap.end();
    println!("capture end: {:?}", g.as_ref().map(|_| ()));
    let mut bad = 0;
    if later.is_err() {
        println!("BAD: the capture refused later work");
        bad += 1;
    }
    if !matches!(r, Err(Error::OutOfRange { .. })) {
        println!("BAD: expected OutOfRange");
        bad += 1;
    }
    if g.is_err() {
        println!("BAD: the refused import broke the capture");
        bad += 1;
    }
    finish(bad, before);
}
