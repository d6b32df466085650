// Review rev-a14: `Event::record_with_flags(EventRecordFlags::EXTERNAL)` on a capturing stream
// (`cudaEventRecordExternal`) makes an event record node in the captured graph: the graph refers
// to the event handle. The capture must keep the event alive for the graph, its executables and
// their launches (or refuse the record). Were it captured with nothing kept, dropping the event
// destroys its handle while the executable still records it at every launch.
use std::time::{Duration, Instant};

use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{Device, DeviceBuffer, Error, Event, EventRecordFlags, Stream};

use ptask::{count, finish, violations};

fn main() {
    Device::current().unwrap();
    let before = violations();
    let s = Stream::new().unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(64).unwrap();
    let d0 = count("nulldrv_node_event_destroys");
    let ev = Event::new().unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    buf.fill_async(1, &s).unwrap();
    let r = ev.record_with_flags(&s, EventRecordFlags::EXTERNAL);
    buf.fill_async(2, &s).unwrap();
    let g = cap.end();
    println!(
        "external record in a capture: {:?}, capture end {:?}",
        r,
        g.as_ref().map(|_| ())
    );
    let mut bad = 0;
    match (&r, g) {
        (Err(Error::NotCapturable { .. }), Err(_)) => println!("refused, capture end failed"),
        (_, Ok(g)) => {
            let exec = g.instantiate().unwrap();
            drop(g);
            // The program is done with the event: the executable still records it.
            drop(ev);
            let end = Instant::now() + Duration::from_millis(500);
            while count("nulldrv_node_event_destroys") == d0 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            let destroyed = count("nulldrv_node_event_destroys") - d0;
            let launched = exec.launch(&s);
            println!(
                "with the executable alive, event record node events destroyed: {destroyed}; \
                 a launch of it then: {launched:?}"
            );
            if destroyed != 0 {
                println!("BAD: the event was destroyed while the executable refers to it");
                bad += 1;
            }
            s.synchronize().unwrap();
            drop(exec);
            Device::current().unwrap().synchronize().unwrap();
            let after = count("nulldrv_node_event_destroys") - d0;
            println!("after the executable is gone: destroyed {after}");
            if after != 1 {
                println!("BAD: the event was never destroyed");
                bad += 1;
            }
        }
        (_, Err(e)) => {
            println!("BAD: unexpected capture failure {e}");
            bad += 1;
        }
    }
    finish(bad, before);
}
