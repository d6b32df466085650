// 9b57e10 refused begin_capture on the per-thread stream in a late TLS destructor,
// but the per-thread stream can still *join* a capture (wait_event on an event recorded in a
// capturing created stream). Each later submission on it resolves to a fresh, unwatched queue,
// so its work is captured without the crate knowing (no admission, no tokens).
use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Event, Stream};

use ptask::violations;

fn scenario(tag: &str) {
    let before = violations();
    let s = Stream::new().unwrap();
    let pt = Stream::per_thread().unwrap();
    let mut b = DeviceBuffer::<u32>::new(64).unwrap();
    let cap = s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let e = Event::new().unwrap();
    e.record(&s).unwrap();
    let j = pt.wait_event(&e);
    let m = b.memset_u8_async(3, &pt);
    let e2 = Event::new().unwrap();
    let r2 = e2.record(&pt);
    let w2 = s.wait_event(&e2);
    let g = cap.end();
    println!(
        "{tag}: join {:?}, memset on joined per-thread stream {:?}, rejoin {:?}/{:?}, end ok={}, violations {}",
        j.map(|_| ()), m.map(|_| ()), r2.map(|_| ()), w2.map(|_| ()), g.is_ok(), violations() - before
    );
}

struct Later;
impl Drop for Later {
    fn drop(&mut self) {
        scenario("late TLS dtor");
    }
}
thread_local! { static LATER: Later = const { Later }; }

fn main() {
    Device::current().unwrap();
    std::thread::spawn(|| {
        LATER.with(|_| {});
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        s.synchronize().unwrap();
        scenario("normal thread");
    })
    .join()
    .unwrap();
}
