// A thread-local destructor that runs after the crate's per-thread queues are gone (registered
// before them) tries to capture the per-thread stream: refused; work queued there still runs.
// On a normal thread the same pageable copy under capture is refused (NotCapturable).
use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Stream};

use ptask::violations;

struct Later;
impl Drop for Later {
    fn drop(&mut self) {
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        // The crate's per-thread queues are gone: the capture is refused (review finding: each
        // submission resolved to a new queue, so the captured copy escaped the capture's checks
        // and keep-alive).
        match s.begin_capture(CaptureMode::ThreadLocal) {
            Err(e) => println!("in TLS dtor: capture begin refused: {e}"),
            Ok(cap) => {
                let host = vec![7u32; 64];
                let r = b.copy_from_host_async(&host, &s);
                let g = cap.end();
                println!(
                    "in TLS dtor: BAD: capture begun; pageable copy under it {:?}, end {:?}",
                    r.map(|_| ()),
                    g.map(|_| ())
                );
            }
        }
        b.memset_u8_async(2, &s).unwrap();
        b.copy_from_host(&[5u32; 64]).unwrap();
        println!(
            "in TLS dtor: copies after the refusal: {} values read back",
            b.to_vec().unwrap().len()
        );
    }
}
thread_local! { static LATER: Later = const { Later }; }

fn main() {
    Device::current().unwrap();
    let before = violations();
    std::thread::spawn(|| {
        LATER.with(|_| {}); // registered first: destroyed after the crate's per-thread queues
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        s.synchronize().unwrap();
        let cap = s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        let host = vec![7u32; 64];
        let r = b.copy_from_host_async(&host, &s);
        let g = cap.end();
        println!(
            "normal thread: pageable copy under capture {:?}, end {:?}",
            r.map(|_| ()),
            g.map(|_| ())
        );
    })
    .join()
    .unwrap();
    println!("null-driver violations: {}", violations() - before);
}
