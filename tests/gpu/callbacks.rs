//! Callbacks the driver runs on its own threads (log callbacks, asynchronous notifications) and
//! copies of plain slices whose pages another thread registers and unregisters meanwhile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{assert_same, random_u32, rng, run_in_child_within};
use cuda_runtime::{
    logs, Device, DeviceBuffer, ErrorCode, HostRegisterFlags, HostRegistration, Stream, StreamFlags,
};

crate::tests![
    copies_of_a_slice_registered_meanwhile_in_a_child_process,
    log_callback_dropping_itself_in_a_child_process,
    notification_registration_dropped_in_a_host_function_in_a_child_process,
];

/// Tests that run in a process of their own (see `main.rs`), under a watchdog: a context
/// ended by a copy engine, or a driver deadlocked inside a callback, cannot take the other
/// tests with it.
pub const CHILDREN: &[(&str, fn())] = &[
    ("cb_copies_under_registration", copies_under_registration),
    ("cb_log_callback_drops_itself", log_callback_drops_itself),
    (
        "cb_notification_dropped_in_host_fn",
        notification_dropped_in_host_fn,
    ),
];

fn copies_of_a_slice_registered_meanwhile_in_a_child_process() {
    let out = run_in_child_within("cb_copies_under_registration", Duration::from_secs(120));
    assert!(out.contains("copies under registration passed"), "{out}");
}

fn log_callback_dropping_itself_in_a_child_process() {
    let out = run_in_child_within("cb_log_callback_drops_itself", Duration::from_secs(60));
    assert!(out.contains("log callback drop passed"), "{out}");
}

fn notification_registration_dropped_in_a_host_function_in_a_child_process() {
    let out = run_in_child_within(
        "cb_notification_dropped_in_host_fn",
        Duration::from_secs(60),
    );
    assert!(out.contains("notification drop passed"), "{out}");
}

/// Sets the flag when dropped: the other thread stops also when a check here panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Small asynchronous copies (under the staging ring's 1 MiB) of a slice that another thread
/// keeps registering and unregistering (`with_read_only` on a shared borrow), and copies back
/// into a slice that shares its first page with memory that thread registers. The driver
/// transfers page-locked memory directly, after its call returns: pages unlocked under such a
/// transfer ended the context with a sticky `cudaErrorLaunchFailure`. Every copy must match
/// the CPU's data and the context must survive.
fn copies_under_registration() {
    let mut r = rng();
    let mut seeds = fastrand::Rng::with_seed(r.u64(..));
    const N: usize = 64 << 10; // 256 KiB of u32
    let data = random_u32(&mut r, N);
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut dev = DeviceBuffer::<u32>::zeroed(N).unwrap();
    // What `dev` holds: random ranges are copied, so elements near the ends may stay zero.
    let mut expected = vec![0u32; N];
    let stop = AtomicBool::new(false);
    let registrations = AtomicUsize::new(0);
    let mut copies = 0usize;

    // Host to device, from the very slice being registered.
    std::thread::scope(|sc| {
        let (data, stop, registrations) = (&data, &stop, &registrations);
        let registrar = sc.spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                HostRegistration::with_read_only(data, HostRegisterFlags::empty(), |_| ()).unwrap();
                registrations.fetch_add(1, Ordering::Relaxed);
            }
        });
        let _stop = StopOnDrop(stop);
        let end = Instant::now() + Duration::from_secs(3);
        let mut back = vec![0u32; N];
        while Instant::now() < end {
            let len = seeds.usize(1..=N);
            let off = seeds.usize(0..=N - len);
            let mut view = dev.slice_mut(off..off + len).unwrap();
            view.copy_from_host_async(&data[off..off + len], &s)
                .unwrap();
            let view = dev.slice(off..off + len).unwrap();
            view.copy_to_host_async(&mut back[..len], &s).unwrap();
            assert_same("host to device", &back[..len], &data[off..off + len]);
            expected[off..off + len].copy_from_slice(&data[off..off + len]);
            copies += 1;
        }
        drop(_stop);
        registrar.join().unwrap();
    });
    let first = registrations.swap(0, Ordering::Relaxed);

    // Device to host, into a slice whose first page also holds the tail of memory the other
    // thread registers: `left` ends 16 bytes into a page.
    let page = 4096 / 4;
    let mut host = vec![0u32; 3 * page + 64];
    let skip = (page - (host.as_ptr() as usize / 4) % page) % page;
    let split = skip + page + 4;
    let (left, right) = host.split_at_mut(split);
    stop.store(false, Ordering::SeqCst);
    std::thread::scope(|sc| {
        let (left, stop, registrations) = (&*left, &stop, &registrations);
        let registrar = sc.spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                HostRegistration::with_read_only(left, HostRegisterFlags::empty(), |_| ()).unwrap();
                registrations.fetch_add(1, Ordering::Relaxed);
            }
        });
        let _stop = StopOnDrop(stop);
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            let len = seeds.usize(1..=page - 4);
            let off = seeds.usize(0..=N - len);
            let view = dev.slice(off..off + len).unwrap();
            view.copy_to_host_async(&mut right[..len], &s).unwrap();
            assert_same("device to host", &right[..len], &expected[off..off + len]);
            copies += 1;
        }
        drop(_stop);
        registrar.join().unwrap();
    });
    let second = registrations.load(Ordering::Relaxed);
    assert!(first > 0 && second > 0, "registrations: {first}, {second}");

    // The context is alive: the whole buffer holds the data, and nothing went wrong in a drop.
    s.synchronize().unwrap();
    let d = Device::current().unwrap();
    d.synchronize().unwrap();
    assert_same("whole buffer", &dev.to_vec().unwrap(), &expected);
    let deferred = d.take_deferred_errors();
    assert!(deferred.is_empty(), "{deferred:?}");
    println!("copies under registration passed: {copies} copies, {first} + {second} registrations");
}

/// A log callback that drops its own registration from inside the call: the callback is
/// disarmed at once (no second message reaches it), the driver is not called from inside its
/// own callback (the unregistration waits for the crate's next call: no deadlock), and the
/// crate works afterwards.
fn log_callback_drops_itself() {
    let own: Arc<Mutex<Option<logs::LogCallback>>> = Arc::new(Mutex::new(None));
    let calls = Arc::new(AtomicUsize::new(0));
    let (own2, calls2) = (own.clone(), calls.clone());
    let cb = logs::register_callback(move |_, msg| {
        calls2.fetch_add(1, Ordering::SeqCst);
        eprintln!("log callback got {msg:?}");
        let mine = own2.lock().unwrap().take();
        drop(mine);
    })
    .unwrap();
    *own.lock().unwrap() = Some(cb);
    let dev = Device::current().unwrap();
    // Calls the driver refuses (which of them it logs is the driver's choice), twice over.
    let mut refused = Vec::new();
    for _ in 0..2 {
        refused.push(
            dev.set_limit(cuda_runtime::Limit::StackSize, usize::MAX / 2)
                .is_err(),
        );
        refused.push(DeviceBuffer::<u8>::zeroed(usize::MAX / 4).is_err());
    }
    let n = calls.load(Ordering::SeqCst);
    eprintln!("refused by the driver: {refused:?}; callback calls: {n}");
    assert!(n <= 1, "the callback ran {n} times after dropping itself");
    if n == 0 {
        // The driver logged nothing: the registration was never dropped from inside.
        assert!(own.lock().unwrap().take().is_some());
    } else {
        assert!(own.lock().unwrap().is_none());
    }
    // The crate works afterwards (its next calls unregister the callback).
    let mut r = rng();
    let data = random_u32(&mut r, 4096);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    assert_same("after the callback", &buf.to_vec().unwrap(), &data);
    let _ = dev.set_limit(cuda_runtime::Limit::StackSize, usize::MAX / 2);
    assert_eq!(calls.load(Ordering::SeqCst), n);
    println!("log callback drop passed ({n} call)");
}

/// An asynchronous-notification registration dropped inside a host function: no CUDA call may
/// be made there, so the unregistration waits for the crate's next call; nothing is reported as
/// failed and the crate works afterwards.
fn notification_dropped_in_host_fn() {
    let d = Device::current().unwrap();
    let reg = match d.register_async_notification(|n| eprintln!("notification {n:?}")) {
        Ok(reg) => reg,
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
            println!("notification drop passed (not supported here)");
            return;
        }
    };
    let s = Stream::new().unwrap();
    let (tx, rx) = mpsc::channel();
    s.launch_host_fn(move || {
        drop(reg);
        // A crate call here is refused, as in any host function.
        let refused = DeviceBuffer::<u8>::zeroed(16).is_err();
        tx.send(refused).unwrap();
    })
    .unwrap();
    s.synchronize().unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    let mut r = rng();
    let data = random_u32(&mut r, 4096);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    assert_same("after the drop", &buf.to_vec().unwrap(), &data);
    let deferred = d.take_deferred_errors();
    assert!(deferred.is_empty(), "{deferred:?}");
    println!("notification drop passed");
}
