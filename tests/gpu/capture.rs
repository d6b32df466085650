//! Stream capture: captured kernels, copies, memsets and host functions replayed against a CPU
//! reference; fork and join across streams; capture into an existing graph; what captured
//! graphs keep alive (buffers dropped inside the open capture, graphs and executables dropped
//! while launched); the traps measured on the H100 (captured events, pageable copies, failures
//! that do not invalidate a capture); modes across threads; the default streams.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::common::{assert_same, eventually, random_ints_f32, random_u32, rng, vadd_module};
use cuda_runtime::graph::{
    CaptureMode, CaptureModeGuard, CaptureStatus, Graph, GraphNodeType, MemsetValue,
};
use cuda_runtime::{
    kernel_args, kernels, Device, DeviceBuffer, Error, ErrorCode, Event, EventFlags,
    EventRecordFlags, LaunchConfig, Module, PinnedBuffer, Stream, StreamFlags,
};

// Exclusive: a capture changes what other threads may do meanwhile (a global capture refuses
// their `cudaMalloc`; legacy-stream work while a blocking stream captures is refused), so these
// tests run while no other test runs.
crate::tests![
    ;
    exclusive:
    captured_work_replays_and_matches_a_cpu_reference,
    fork_and_join_across_streams,
    an_unjoined_stream_makes_the_end_fail,
    capture_into_an_existing_graph_after_its_nodes,
    buffers_dropped_inside_an_open_capture_stay_alive,
    stream_ordered_buffer_dropped_inside_its_capture_is_freed_elsewhere,
    graph_and_exec_dropped_while_launched_keep_what_they_use,
    event_recorded_in_a_capture_is_refused_until_recorded_again,
    external_event_records_are_refused_in_captures,
    host_copies_and_fnonce_host_functions_are_refused_and_poison_the_capture,
    a_failed_call_inside_a_capture_makes_the_end_fail,
    forbidden_calls_return_the_runtime_error,
    thread_local_captures_on_two_threads,
    global_capture_refuses_other_threads_until_they_relax,
    housekeeping_never_breaks_a_global_capture,
    legacy_stream_memory_dropped_during_a_blocking_capture,
    a_graph_released_during_a_capture_does_not_hang_its_end,
    legacy_stream_capture_is_refused_and_the_per_thread_stream_captures,
    status_and_info_during_a_capture,
    per_thread_capture_in_a_late_thread_local_destructor_is_refused,
];

fn code(r: Result<impl std::fmt::Debug, Error>) -> ErrorCode {
    r.expect_err("expected an error").code()
}

/// c = a + b, then a = c (a kernel and a copy), e = pattern (a memset), f filled (a typed fill)
/// and a host function counting: replayed `launches` times, a = a0 + launches * b.
fn captured_work_replays_and_matches_a_cpu_reference() {
    let mut r = rng();
    let n = 50_000;
    let (h0, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let (pattern, fill) = (r.u32(..), r.u16(..));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let mut a = DeviceBuffer::from_slice(&h0).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut e = DeviceBuffer::<u32>::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut f = DeviceBuffer::<u16>::from_slice(&vec![0; n]).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let s = Stream::new().unwrap();
    let counter = count.clone();
    let graph = s
        .capture(CaptureMode::Global, |s| {
            // SAFETY: vadd stays below the lengths given with each buffer.
            unsafe { vadd.launch(s, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }?;
            a.copy_from_device_async(&c, s)?;
            e.memset_u32_async(pattern, s)?;
            f.fill_async(fill, s)?;
            s.launch_host_fn_replayable(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
        })
        .unwrap();
    // Nothing ran: the capture only recorded.
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_same("a before any launch", &a.to_vec().unwrap(), &h0);
    let mut kinds: Vec<GraphNodeType> = graph
        .nodes()
        .unwrap()
        .iter()
        .map(|&n| graph.node_type(n).unwrap())
        .collect();
    kinds.sort_by_key(|k| format!("{k:?}"));
    assert!(kinds.contains(&GraphNodeType::Kernel), "{kinds:?}");
    assert!(kinds.contains(&GraphNodeType::Memcpy), "{kinds:?}");
    assert!(kinds.contains(&GraphNodeType::Memset), "{kinds:?}");
    assert!(kinds.contains(&GraphNodeType::Host), "{kinds:?}");
    let exec = graph.instantiate().unwrap();
    let launches = 1 + r.usize(5..40);
    for _ in 0..launches {
        exec.launch(&s).unwrap();
    }
    s.synchronize().unwrap();
    let want: Vec<f32> = h0
        .iter()
        .zip(&hb)
        .map(|(x, y)| x + launches as f32 * y)
        .collect();
    assert_same("a after replays", &a.to_vec().unwrap(), &want);
    assert_same("e", &e.to_vec().unwrap(), &vec![pattern; n]);
    assert_same("f", &f.to_vec().unwrap(), &vec![fill; n]);
    assert_eq!(
        count.load(Ordering::SeqCst),
        launches,
        "one host call per replay"
    );
    drop((graph, exec));
    eventually("the host closure released with the graph", || {
        Arc::strong_count(&count) == 1
    });
}

/// The origin stream forks to two streams by an event, each computes half, and both join back.
fn fork_and_join_across_streams() {
    let mut r = rng();
    let n = 1 << 16;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let half = n / 2;
    let cfg = LaunchConfig::for_elements(half, 128).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c_lo = DeviceBuffer::from_slice(&vec![f32::NAN; half]).unwrap();
    let mut c_hi = DeviceBuffer::from_slice(&vec![f32::NAN; half]).unwrap();
    let mut d_lo = DeviceBuffer::from_slice(&vec![f32::NAN; half]).unwrap();
    let mut d_hi = DeviceBuffer::from_slice(&vec![f32::NAN; half]).unwrap();
    let origin = Stream::new().unwrap();
    let (s1, s2) = (
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
        Stream::new().unwrap(),
    );
    let fork = Event::with_flags(EventFlags::DISABLE_TIMING).unwrap();
    let (j1, j2) = (Event::new().unwrap(), Event::new().unwrap());
    let graph = origin
        .capture(CaptureMode::Global, |o| {
            fork.record(o)?;
            s1.wait_event(&fork)?;
            s2.wait_event(&fork)?;
            assert_eq!(s1.is_capturing()?, CaptureStatus::Active, "s1 joined");
            let (a_lo, a_hi) = (a.slice(..half)?, a.slice(half..)?);
            let (b_lo, b_hi) = (b.slice(..half)?, b.slice(half..)?);
            // SAFETY: vadd stays below the lengths given.
            unsafe {
                vadd.launch(
                    &s1,
                    &cfg,
                    &kernel_args![&a_lo, half, &b_lo, half, &mut c_lo, half],
                )?;
                vadd.launch(
                    &s2,
                    &cfg,
                    &kernel_args![&a_hi, half, &b_hi, half, &mut c_hi, half],
                )?;
            }
            j1.record(&s1)?;
            j2.record(&s2)?;
            o.wait_event(&j1)?;
            o.wait_event(&j2)?;
            d_lo.copy_from_device_async(&c_lo, o)?;
            d_hi.copy_from_device_async(&c_hi, o)
        })
        .unwrap();
    assert_eq!(s1.is_capturing().unwrap(), CaptureStatus::None);
    assert_eq!(s2.is_capturing().unwrap(), CaptureStatus::None);
    let kernels_in = graph
        .nodes()
        .unwrap()
        .into_iter()
        .filter(|&x| graph.node_type(x).unwrap() == GraphNodeType::Kernel)
        .count();
    assert_eq!(kernels_in, 2);
    let exec = graph.instantiate().unwrap();
    for _ in 0..3 {
        exec.launch(&origin).unwrap();
    }
    origin.synchronize().unwrap();
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("d_lo", &d_lo.to_vec().unwrap(), &want[..half]);
    assert_same("d_hi", &d_hi.to_vec().unwrap(), &want[half..]);
    // The streams work normally afterwards (not captured any more).
    let mut e = DeviceBuffer::<u32>::new(16).unwrap();
    e.memset_u32_async(9, &s1).unwrap();
    s1.synchronize().unwrap();
    assert_eq!(e.to_vec().unwrap(), vec![9; 16]);
}

fn an_unjoined_stream_makes_the_end_fail() {
    let origin = Stream::new().unwrap();
    let side = Stream::new().unwrap();
    let fork = Event::new().unwrap();
    let mut x = DeviceBuffer::<u32>::new(64).unwrap();
    let cap = origin.begin_capture(CaptureMode::Relaxed).unwrap();
    fork.record(&origin).unwrap();
    side.wait_event(&fork).unwrap();
    x.memset_u32_async(1, &side).unwrap();
    // No join back.
    assert_eq!(code(cap.end()), ErrorCode::StreamCaptureUnjoined);
    // Both streams left the capture; the side stream works again.
    assert_eq!(side.is_capturing().unwrap(), CaptureStatus::None);
    x.memset_u32_async(5, &side).unwrap();
    side.synchronize().unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![5; 64]);
}

fn capture_into_an_existing_graph_after_its_nodes() {
    let mut r = rng();
    let n = 4096;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    let mut a = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let src = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut g = Graph::new().unwrap();
    let first = g.add_memcpy_node(&[], &mut a, &src).unwrap();
    let s = Stream::new().unwrap();
    let leaves = s
        .capture_into(&mut g, &[first], CaptureMode::ThreadLocal, |s| {
            // SAFETY: vadd stays below the lengths given.
            unsafe { vadd.launch(s, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        })
        .unwrap();
    assert_eq!(leaves.len(), 1);
    assert_eq!(g.node_type(leaves[0]).unwrap(), GraphNodeType::Kernel);
    assert_eq!(g.dependencies(leaves[0]).unwrap(), vec![first]);
    // The returned nodes are the graph's: more nodes can follow them.
    let mut e = DeviceBuffer::<u32>::new(n).unwrap();
    let tail = g
        .add_memset_node(&leaves, &mut e, MemsetValue::U32(3))
        .unwrap();
    assert_eq!(g.dependencies(tail).unwrap(), leaves);
    let exec = g.instantiate().unwrap();
    // The graph keeps what the captured kernel uses.
    drop((b, src, m, vadd));
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("c", &c.to_vec().unwrap(), &want);
    assert_eq!(e.to_vec().unwrap(), vec![3; n]);
}

fn buffers_dropped_inside_an_open_capture_stay_alive() {
    let mut r = rng();
    let n = 1 << 18;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let s = Stream::new().unwrap();
    let graph = {
        let a = DeviceBuffer::from_slice(&ha).unwrap();
        let b = DeviceBuffer::from_slice(&hb).unwrap();
        let cap = s.begin_capture(CaptureMode::Global).unwrap();
        // SAFETY: vadd stays below the lengths given.
        unsafe { vadd.launch(&s, &cfg, &kernel_args![&a, n, &b, n, &mut out, n]) }.unwrap();
        // Dropped while the capture is open: kept by the capture, then by the graph.
        drop((a, b));
        drop((m, vadd));
        cap.end().unwrap()
    };
    // Fresh allocations would take the freed memory if it had been freed.
    let decoys: Vec<DeviceBuffer<f32>> = (0..4)
        .map(|_| DeviceBuffer::from_slice(&vec![1e9f32; n]).unwrap())
        .collect();
    let exec = graph.instantiate().unwrap();
    drop(graph);
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("out", &out.to_vec().unwrap(), &want);
    drop(decoys);
}

/// A stream-ordered buffer of the capturing stream, used and dropped inside the capture: the
/// runtime would fail a `cudaFreeAsync` of it on the capturing stream without invalidating the
/// capture (and free nothing); the crate frees it elsewhere after the graph is gone, and the
/// capture stays clean.
fn stream_ordered_buffer_dropped_inside_its_capture_is_freed_elsewhere() {
    let dev = Device::current().unwrap();
    let _ = dev.take_deferred_errors();
    let mut r = rng();
    let n = 1 << 16;
    let hx = random_u32(&mut r, n);
    let s = Stream::new().unwrap();
    let mut x = DeviceBuffer::<u32>::new_async(n, &s).unwrap();
    x.copy_from_host_async(&hx, &s).unwrap();
    let mut y = DeviceBuffer::<u32>::from_slice(&vec![0; n]).unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    y.copy_from_device_async(&x, &s).unwrap();
    drop(x);
    // A second one, allocated before the capture and never used: dropped inside it too.
    let graph = cap.end().unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("y", &y.to_vec().unwrap(), &hx);
    drop((exec, graph));
    dev.synchronize().unwrap();
    let errs = dev.take_deferred_errors();
    assert!(errs.is_empty(), "a free or release failed: {errs:?}");
    // A buffer of the stream dropped inside a capture without any use: its free waits for its
    // allocation and goes elsewhere too.
    let unused = DeviceBuffer::<u32>::new_async(n, &s).unwrap();
    let graph = s
        .capture(CaptureMode::Global, |_| {
            drop(unused);
            Ok(())
        })
        .unwrap();
    assert!(graph.nodes().unwrap().is_empty());
    drop(graph);
    dev.synchronize().unwrap();
    let errs = dev.take_deferred_errors();
    assert!(errs.is_empty(), "{errs:?}");
}

fn graph_and_exec_dropped_while_launched_keep_what_they_use() {
    let mut r = rng();
    let n = 1024;
    let hsrc = random_ints_f32(&mut r, n);
    let want: f32 = hsrc.iter().sum();
    let m = Module::from_ptx(kernels::spin::PTX).unwrap();
    let spin_sum = m.function("spin_read_sum").unwrap();
    let src = DeviceBuffer::from_slice(&hsrc).unwrap();
    let mut out = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    // Non-blocking: the decoy's copy on the legacy stream must not wait for the held launch.
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let token = Arc::new(());
    let held = token.clone();
    let graph = s
        .capture(CaptureMode::ThreadLocal, |s| {
            // SAFETY: spin_read_sum reads src[..n] and writes out[0].
            unsafe {
                spin_sum.launch(
                    s,
                    &LaunchConfig::new(1u32, 1u32),
                    &kernel_args![&src, n, &mut out, 1usize, 200_000_000u64],
                )
            }?;
            s.launch_host_fn_replayable(move || {
                let _ = &held;
            })
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    // The launch waits behind a host function held until `release` (or 20 s passed).
    let (release, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    {
        let (release, done) = (release.clone(), done.clone());
        s.launch_host_fn(move || {
            let t = Instant::now();
            while !release.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(1));
            }
            done.store(true, Ordering::SeqCst);
        })
        .unwrap();
    }
    exec.launch(&s).unwrap();
    drop((exec, graph, src, spin_sum, m));
    assert!(
        !done.load(Ordering::SeqCst),
        "dropping the executable, the graph and a buffer must not wait for the launch"
    );
    assert!(
        Arc::strong_count(&token) > 1,
        "the launch still holds the closure"
    );
    // Fresh allocations would take the source's memory if it had been freed.
    let decoy = DeviceBuffer::from_slice(&vec![1e6f32; n]).unwrap();
    release.store(true, Ordering::SeqCst);
    s.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![want]);
    drop(decoy);
    eventually("the capture's tokens released after the launch", || {
        Arc::strong_count(&token) == 1
    });
}

fn event_recorded_in_a_capture_is_refused_until_recorded_again() {
    let s = Stream::new().unwrap();
    let other = Stream::new().unwrap();
    let ev = Event::new().unwrap();
    let mut x = DeviceBuffer::<u32>::new(8).unwrap();
    let graph = s
        .capture(CaptureMode::Global, |s| {
            x.memset_u32_async(1, s)?;
            ev.record(s)
        })
        .unwrap();
    for r in [
        ev.query().map(drop),
        ev.synchronize(),
        other.wait_event(&ev),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::CapturedEvent { .. }), "{e:?}");
        assert_eq!(e.code(), ErrorCode::CapturedEvent);
    }
    // Also after the graph ran and died.
    let exec = graph.instantiate().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    drop((exec, graph));
    assert_eq!(code(ev.query()), ErrorCode::CapturedEvent);
    // Recorded again outside a capture: usable.
    ev.record(&s).unwrap();
    ev.synchronize().unwrap();
    assert!(ev.query().unwrap());
    other.wait_event(&ev).unwrap();
    other.synchronize().unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![1; 8]);
}

/// An external event record on a capturing stream (`cudaEventRecordExternal`) would be an
/// event record node naming an event the graph does not keep (review rev-a14: dropping the
/// event destroyed it while the executable still recorded it). Refused; the end fails; outside
/// a capture the same record works.
fn external_event_records_are_refused_in_captures() {
    let s = Stream::new().unwrap();
    let ev = Event::new().unwrap();
    let mut x = DeviceBuffer::<u32>::new(8).unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    x.memset_u32_async(1, &s).unwrap();
    let e = ev
        .record_with_flags(&s, EventRecordFlags::EXTERNAL)
        .unwrap_err();
    assert!(matches!(e, Error::NotCapturable { .. }), "{e:?}");
    assert!(cap.end().is_err(), "the capture's end must fail");
    ev.record_with_flags(&s, EventRecordFlags::EXTERNAL)
        .unwrap();
    ev.synchronize().unwrap();
}

fn host_copies_and_fnonce_host_functions_are_refused_and_poison_the_capture() {
    let mut r = rng();
    let n = 1 << 20; // above the staging threshold too
    let host = random_u32(&mut r, n);
    let mut back = vec![0u32; n];
    let mut d = DeviceBuffer::<u32>::new(n).unwrap();
    let s = Stream::new().unwrap();
    let pinned = PinnedBuffer::from_slice(&host).unwrap();
    type Attempt<'a> = Box<dyn FnOnce(&Stream, &mut DeviceBuffer<u32>) -> Result<(), Error> + 'a>;
    let attempts: Vec<(&str, Attempt)> = vec![
        (
            "pageable to device",
            Box::new(|s, d| d.copy_from_host_async(&host, s)),
        ),
        (
            "device to pageable",
            Box::new(|s, d| d.copy_to_host_async(&mut back, s)),
        ),
        (
            "page-locked to device",
            Box::new(|s, d| d.copy_from_pinned_async(&pinned, s)),
        ),
        (
            "FnOnce host function",
            Box::new(|s, _| s.launch_host_fn(|| {})),
        ),
        (
            "stream-ordered allocation",
            Box::new(|s, _| DeviceBuffer::<u32>::new_async(16, s).map(drop)),
        ),
    ];
    for (what, attempt) in attempts {
        let cap = s.begin_capture(CaptureMode::Global).unwrap();
        let e = attempt(&s, &mut d).unwrap_err();
        assert!(
            matches!(e, Error::NotCapturable { .. }),
            "{what}: {e:?} instead of NotCapturable"
        );
        assert_eq!(e.code(), ErrorCode::StreamCaptureUnsupported, "{what}");
        // The refusal left the stream capturing, but the end fails.
        assert_eq!(s.is_capturing().unwrap(), CaptureStatus::Active, "{what}");
        let end = cap.end().unwrap_err();
        assert!(
            matches!(end, Error::CaptureFailed { .. }),
            "{what}: {end:?}"
        );
        assert_eq!(end.code(), ErrorCode::StreamCaptureInvalidated, "{what}");
    }
    // The same copies work outside a capture.
    d.copy_from_host_async(&host, &s).unwrap();
    s.synchronize().unwrap();
    assert_same("d", &d.to_vec().unwrap(), &host);
}

fn a_failed_call_inside_a_capture_makes_the_end_fail() {
    let n = 256;
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let a = DeviceBuffer::<f32>::new(n).unwrap();
    let mut c = DeviceBuffer::<f32>::new(n).unwrap();
    let s = Stream::new().unwrap();
    // A launch configuration the device refuses: the error is ignored by the closure.
    let bad = LaunchConfig::new(1u32, 4096u32);
    let r = s.capture(CaptureMode::Global, |s| {
        // SAFETY: never launched (refused); vadd would stay below the lengths given.
        let ignored = unsafe { vadd.launch(s, &bad, &kernel_args![&a, n, &a, n, &mut c, n]) };
        assert!(ignored.is_err());
        c.fill_async(1.0, s)
    });
    let e = r.unwrap_err();
    assert!(matches!(e, Error::CaptureFailed { .. }), "{e:?}");
    // A length mismatch, ignored.
    let mut short = DeviceBuffer::<f32>::new(n / 2).unwrap();
    let r = s.capture(CaptureMode::Relaxed, |s| {
        let _ = short.copy_from_device_async(&a, s);
        Ok(())
    });
    assert_eq!(code(r), ErrorCode::StreamCaptureInvalidated);
    // A clean capture afterwards works.
    let g = s
        .capture(CaptureMode::Global, |s| c.fill_async(2.5, s))
        .unwrap();
    g.instantiate().unwrap().launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(c.to_vec().unwrap(), vec![2.5; n]);
}

fn forbidden_calls_return_the_runtime_error() {
    let s = Stream::new().unwrap();
    let mut x = DeviceBuffer::<u32>::new(32).unwrap();
    // Synchronising the capturing stream.
    let cap = s.begin_capture(CaptureMode::Relaxed).unwrap();
    x.memset_u32_async(1, &s).unwrap();
    assert_eq!(code(s.synchronize()), ErrorCode::StreamCaptureUnsupported);
    assert_eq!(code(cap.end()), ErrorCode::StreamCaptureInvalidated);
    // Querying it.
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(code(s.query()), ErrorCode::StreamCaptureUnsupported);
    assert!(cap.end().is_err());
    // Work on the legacy stream while a blocking stream captures (an implicit dependency on
    // the capture): `cudaErrorStreamCaptureImplicit`.
    let legacy = Stream::legacy().unwrap();
    let mut y = DeviceBuffer::<u32>::new(32).unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    let c = code(y.memset_u32_async(7, &legacy));
    assert!(
        matches!(
            c,
            ErrorCode::StreamCaptureImplicit | ErrorCode::StreamCaptureUnsupported
        ),
        "{c:?}"
    );
    assert!(cap.end().is_err());
    // A graph launch inside a capture.
    let g = Stream::new()
        .unwrap()
        .capture(CaptureMode::Global, |o| x.memset_u32_async(4, o))
        .unwrap();
    let exec = g.instantiate().unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    let e = exec.launch(&s).unwrap_err();
    assert!(matches!(e, Error::NotCapturable { .. }), "{e:?}");
    assert!(cap.end().is_err());
    // Everything works again.
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![4; 32]);
}

/// Two threads capture their own streams at once in thread-local mode, each its own work: the
/// captures interleave and neither sees the other's work.
fn thread_local_captures_on_two_threads() {
    let mut r = rng();
    let n = 10_000;
    let inputs: Vec<Vec<u32>> = (0..2).map(|_| random_u32(&mut r, n)).collect();
    let dev = Device::current().unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let threads: Vec<_> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, input)| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                dev.set_current().unwrap();
                // Non-blocking: the other thread's legacy-stream copies before and after its
                // capture do not depend on this one's capture.
                let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
                let src = DeviceBuffer::from_slice(&input).unwrap();
                let mut dst = DeviceBuffer::<u32>::new(n).unwrap();
                let mut tag = DeviceBuffer::<u32>::new(n).unwrap();
                barrier.wait(); // both made their buffers
                let cap = s.begin_capture(CaptureMode::ThreadLocal).unwrap();
                barrier.wait(); // both captures open
                dst.copy_from_device_async(&src, &s).unwrap();
                tag.memset_u32_async(i as u32 + 10, &s).unwrap();
                barrier.wait(); // both captured their work
                let graph = cap.end().unwrap();
                let exec = graph.instantiate().unwrap();
                exec.launch(&s).unwrap();
                s.synchronize().unwrap();
                assert_same("dst", &dst.to_vec().unwrap(), &input);
                assert_eq!(tag.to_vec().unwrap(), vec![i as u32 + 10; n]);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// A global capture on one thread: another thread's `cudaMalloc` is refused (and invalidates the
/// capture), unless that thread relaxed its mode first.
fn global_capture_refuses_other_threads_until_they_relax() {
    let dev = Device::current().unwrap();
    for relax in [false, true] {
        let s = Stream::new().unwrap();
        let mut x = DeviceBuffer::<u32>::new(16).unwrap();
        let cap = s.begin_capture(CaptureMode::Global).unwrap();
        x.memset_u32_async(3, &s).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            dev.set_current().unwrap();
            let guard = relax.then(|| CaptureModeGuard::new(CaptureMode::Relaxed).unwrap());
            if let Some(g) = &guard {
                assert_eq!(g.previous(), Some(CaptureMode::Global));
            }
            tx.send(
                DeviceBuffer::<u32>::new(1024)
                    .map(drop)
                    .map_err(|e| e.code()),
            )
            .unwrap();
        })
        .join()
        .unwrap();
        let other = rx.recv().unwrap();
        if relax {
            assert_eq!(other, Ok(()));
            let g = cap.end().unwrap();
            g.instantiate().unwrap().launch(&s).unwrap();
            s.synchronize().unwrap();
            assert_eq!(x.to_vec().unwrap(), vec![3; 16]);
        } else {
            assert_eq!(other, Err(ErrorCode::StreamCaptureUnsupported));
            assert!(cap.end().is_err(), "the runtime invalidated the capture");
        }
    }
}

/// While a global capture is open, another thread drops buffers with pending uses, events and a
/// stream, and reads page-locked memory after a copy (a wait for its fence): the crate's frees,
/// fences and waits run relaxed and never invalidate the capture. The capturing thread drops a
/// buffer used on another stream before the capture, too.
fn housekeeping_never_breaks_a_global_capture() {
    let mut r = rng();
    let n = 1 << 16;
    let input = random_u32(&mut r, n);
    let dev = Device::current().unwrap();
    let s = Stream::new().unwrap();
    let other = Stream::new().unwrap();
    let mut used = DeviceBuffer::<u32>::new(n).unwrap();
    used.memset_u32_async(1, &other).unwrap();
    let src = DeviceBuffer::from_slice(&input).unwrap();
    let mut dst = DeviceBuffer::<u32>::new(n).unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let expect = input.clone();
    let helper = std::thread::spawn(move || {
        dev.set_current().unwrap();
        // Made before the capture: everything the crate will release during it.
        let t = Stream::new().unwrap();
        let mut bufs = Vec::new();
        for k in 0..8u32 {
            let mut b = DeviceBuffer::<u32>::new_async(4096, &t).unwrap();
            b.memset_u32_async(k, &t).unwrap();
            bufs.push(b);
            let mut p = DeviceBuffer::<u32>::new(4096).unwrap();
            p.memset_u32_async(k, &t).unwrap();
            bufs.push(p);
        }
        let events: Vec<Event> = (0..4)
            .map(|_| {
                let e = Event::new().unwrap();
                e.record(&t).unwrap();
                e
            })
            .collect();
        let d = DeviceBuffer::from_slice(&expect).unwrap();
        let mut pinned = PinnedBuffer::<u32>::new(n).unwrap();
        d.copy_to_pinned_async(&mut pinned, &t).unwrap();
        let pts = Stream::per_thread().unwrap();
        let mut out = DeviceBuffer::<f32>::new(16).unwrap();
        // (The kernels' module loaded before the capture.)
        kernels::params::four_args(&pts, &LaunchConfig::new(1u32, 1u32), &mut out, -1, 0.0, 0.0)
            .unwrap();
        ready_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // During the capture: only the crate's housekeeping, and launches that use memory on
        // this thread's per-thread stream, each fenced: past 16 fences one is queried to prune
        // them, which must not break the capture either (review finding).
        drop(bufs);
        drop(events);
        for a in 0..24 {
            kernels::params::four_args(
                &pts,
                &LaunchConfig::new(1u32, 1u32),
                &mut out,
                a,
                0.5,
                0.25,
            )
            .unwrap();
        }
        let seen = pinned.as_slice().unwrap().to_vec();
        drop(t);
        drop((pinned, d));
        (seen, out)
    });
    ready_rx.recv().unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    go_tx.send(()).unwrap();
    dst.copy_from_device_async(&src, &s).unwrap();
    drop(used); // its use on `other` may still be pending: a deferred free
    let (seen, out) = helper.join().unwrap();
    let graph = cap
        .end()
        .expect("the crate's housekeeping invalidated the capture");
    assert_same("pinned read during the capture", &seen, &input);
    // The last of the helper's launches: out[0] = 23 + 0.5 + 0.25.
    assert_eq!(out.to_vec().unwrap()[0], 23.75);
    graph.instantiate().unwrap().launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("dst", &dst.to_vec().unwrap(), &input);
}

/// Memory last used in the legacy stream, and a stream-ordered allocation of the legacy
/// stream, dropped while a blocking stream is captured (review finding): a fence or a free in
/// the legacy stream then would depend on the capture, which the driver refuses with
/// `cudaErrorStreamCaptureImplicit` and which invalidates the capture. The crate defers them
/// to the capture's end: the capture ends cleanly, the graph replays right, and the frees
/// happen afterwards without a deferred error.
fn legacy_stream_memory_dropped_during_a_blocking_capture() {
    let dev = Device::current().unwrap();
    let _ = dev.take_deferred_errors();
    let mut r = rng();
    let n = 1 << 16;
    let input = random_u32(&mut r, n);
    let legacy = Stream::legacy().unwrap();
    let src = DeviceBuffer::from_slice(&input).unwrap();
    let mut used = DeviceBuffer::<u32>::new(n).unwrap();
    used.copy_from_device_async(&src, &legacy).unwrap();
    let mut home = DeviceBuffer::<u32>::new_async(n, &legacy).unwrap();
    home.copy_from_device_async(&src, &legacy).unwrap();
    let s = Stream::new().unwrap();
    let mut dst = DeviceBuffer::<u32>::from_slice(&vec![0; n]).unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    dst.copy_from_device_async(&src, &s).unwrap();
    drop(used);
    drop(home);
    let graph = cap
        .end()
        .expect("a drop of legacy-stream memory invalidated the capture");
    graph.instantiate().unwrap().launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("dst", &dst.to_vec().unwrap(), &input);
    dev.synchronize().unwrap();
    let errs = dev.take_deferred_errors();
    assert!(errs.is_empty(), "a deferred fence or free failed: {errs:?}");
}

/// A graph and its executable dropped while a capture of another graph is open, the only
/// holders of a stream-ordered buffer of the capturing stream (review finding): the driver
/// hands their bundle to the crate, which releases it at the next call that enters the device;
/// that was the capture's end, with the capturing queue locked, and the buffer's free entered
/// the queue again: the end never returned. A watchdog turns a hang into a failure (it ends the
/// test binary). The captured graph still replays right.
fn a_graph_released_during_a_capture_does_not_hang_its_end() {
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !done.load(Ordering::SeqCst) {
                if t.elapsed() > Duration::from_secs(60) {
                    eprintln!("a capture's end hung after a graph was released during it");
                    std::process::exit(1);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut r = rng();
    let n = 1 << 12;
    for round in 0..10u32 {
        let input = random_u32(&mut r, n);
        let s = Stream::new().unwrap();
        let mut b = DeviceBuffer::<u32>::new_async(n, &s).unwrap();
        let mut g = Graph::new().unwrap();
        g.add_memset_node(&[], &mut b, MemsetValue::U32(round))
            .unwrap();
        let exec = g.instantiate().unwrap();
        exec.launch(&s).unwrap();
        drop(b);
        let src = DeviceBuffer::from_slice(&input).unwrap();
        let mut dst = DeviceBuffer::<u32>::from_slice(&vec![0; n]).unwrap();
        let cap = s.begin_capture(CaptureMode::Global).unwrap();
        dst.copy_from_device_async(&src, &s).unwrap();
        drop(exec);
        drop(g);
        // Time for the driver to run the user objects' destructors.
        std::thread::sleep(Duration::from_millis(20));
        let graph = cap.end().unwrap();
        graph.instantiate().unwrap().launch(&s).unwrap();
        s.synchronize().unwrap();
        assert_same("dst", &dst.to_vec().unwrap(), &input);
    }
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
}

fn legacy_stream_capture_is_refused_and_the_per_thread_stream_captures() {
    let legacy = Stream::legacy().unwrap();
    let e = legacy.begin_capture(CaptureMode::Global).unwrap_err();
    assert!(matches!(e, Error::NotCapturable { .. }), "{e:?}");
    assert_eq!(e.code(), ErrorCode::StreamCaptureUnsupported);
    assert_eq!(legacy.is_capturing().unwrap(), CaptureStatus::None);
    let mut r = rng();
    let n = 5000;
    let input = random_u32(&mut r, n);
    let src = DeviceBuffer::from_slice(&input).unwrap();
    let mut dst = DeviceBuffer::from_slice(&vec![0u32; n]).unwrap();
    let pt = Stream::per_thread().unwrap();
    let graph = pt
        .capture(CaptureMode::ThreadLocal, |s| {
            assert_eq!(s.is_capturing()?, CaptureStatus::Active);
            dst.copy_from_device_async(&src, s)
        })
        .unwrap();
    assert_eq!(pt.is_capturing().unwrap(), CaptureStatus::None);
    let exec = graph.instantiate().unwrap();
    exec.launch(&pt).unwrap();
    pt.synchronize().unwrap();
    assert_same("dst", &dst.to_vec().unwrap(), &input);
}

fn status_and_info_during_a_capture() {
    let s = Stream::new().unwrap();
    assert_eq!(s.is_capturing().unwrap(), CaptureStatus::None);
    let info = s.capture_info().unwrap();
    assert_eq!((info.status, info.id), (CaptureStatus::None, 0));
    assert!(info.dependencies.is_empty());
    let mut x = DeviceBuffer::<u32>::new(128).unwrap();
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(s.is_capturing().unwrap(), CaptureStatus::Active);
    let info = s.capture_info().unwrap();
    assert_eq!(info.status, CaptureStatus::Active);
    assert_eq!(info.id, cap.id());
    assert_ne!(info.id, 0);
    assert!(!info.graph.is_null());
    assert!(info.dependencies.is_empty(), "nothing captured yet");
    x.memset_u32_async(6, &s).unwrap();
    let deps = s.capture_info().unwrap().dependencies;
    assert_eq!(deps.len(), 1);
    // A second begin on the same stream is the runtime's error, and poisons nothing it cannot.
    assert!(s.begin_capture(CaptureMode::Global).is_err());
    let graph = cap.end();
    // The second begin failed on the capturing thread: the end reports it.
    assert!(
        matches!(graph, Err(Error::CaptureFailed { .. })),
        "{graph:?}"
    );
    let cap = s.begin_capture(CaptureMode::Global).unwrap();
    x.memset_u32_async(6, &s).unwrap();
    let deps = s.capture_info().unwrap().dependencies;
    let graph = cap.end().unwrap();
    // The nodes reported during the capture are the graph's.
    assert_eq!(graph.nodes().unwrap(), deps);
    assert_eq!(graph.node_type(deps[0]).unwrap(), GraphNodeType::Memset);
    assert_eq!(s.is_capturing().unwrap(), CaptureStatus::None);
    let prev = cuda_runtime::graph::exchange_capture_mode(CaptureMode::Relaxed).unwrap();
    assert_eq!(prev, CaptureMode::Global);
    assert_eq!(
        cuda_runtime::graph::exchange_capture_mode(prev).unwrap(),
        CaptureMode::Relaxed
    );
}

/// A thread-local destructor that runs after the crate's own (its key was first used before any
/// crate call, so it is torn down last) cannot capture the thread's per-thread stream, nor
/// have it join another stream's capture (which then fails at its end): the
/// crate's per-thread queues are gone, every submission would resolve to a new queue and escape
/// the capture's checks and keep-alive (review finding). Work queued there still runs; a
/// pageable copy into the buffer is then seen on the device.
fn per_thread_capture_in_a_late_thread_local_destructor_is_refused() {
    struct Late(mpsc::Sender<(Option<ErrorCode>, Vec<u32>, Vec<u32>)>);
    impl Drop for Late {
        fn drop(&mut self) {
            let mut r = rng();
            let s = Stream::per_thread().unwrap();
            let host = random_u32(&mut r, 1000);
            let mut b = DeviceBuffer::<u32>::new(host.len()).unwrap();
            let begun = s.begin_capture(CaptureMode::ThreadLocal);
            let mut refused = begun.as_ref().err().map(Error::code);
            drop(begun);
            // Nor can it join another stream's capture (the same hole through a fork).
            let other = Stream::new().unwrap();
            let cap = other.begin_capture(CaptureMode::ThreadLocal).unwrap();
            let e = Event::new().unwrap();
            e.record(&other).unwrap();
            let joined = s.wait_event(&e).err().map(|e| e.code());
            let ended = cap.end().is_ok();
            if joined != refused || ended {
                refused = None;
            }
            b.copy_from_host(&host).unwrap();
            let got = b.to_vec().unwrap();
            let _ = self.0.send((refused, host, got));
        }
    }
    thread_local! {
        static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) };
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        LATE.with(|l| *l.borrow_mut() = Some(Late(tx)));
        // The crate's thread-locals from here on: torn down before `LATE`.
        let s = Stream::per_thread().unwrap();
        let mut b = DeviceBuffer::<u32>::new(64).unwrap();
        b.memset_u8_async(1, &s).unwrap();
        s.synchronize().unwrap();
    })
    .join()
    .unwrap();
    let (refused, host, got) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(
        refused,
        Some(ErrorCode::StreamCaptureUnsupported),
        "capture begun"
    );
    assert_same("copy after the refused capture", &got, &host);
}
