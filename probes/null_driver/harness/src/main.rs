//! Runs the crate against the null driver (`../nulldrv.c`): threads that make and drop
//! streams, events and buffers (stream-ordered and not, kept across resets and dropped later)
//! while another thread resets the device again and again. The null driver counts every call
//! made while a reset runs, in a context that was reset, or with a handle or pointer of a reset
//! context. Exits non-zero on any violation, panic or hang (run.sh adds a timeout).
//!
//! First, `graph_checks` runs the crate's graph rules against the null driver's graph
//! stand-ins: graph memory refused outside its graph and ordered by the edges the crate adds,
//! device-launch and conditional-body refusals, per-node updates, and every user object and
//! host closure released once nothing refers to it.
//!
//! First, a capture phase: stream captures (global, thread-local, relaxed; fork and join;
//! buffers dropped inside the open capture; refused operations) while other threads drop
//! buffers, events and streams and read page-locked memory. The null driver simulates capture
//! and counts every call of the crate's own housekeeping that would break a user's capture on
//! the real driver (a fence recorded in a capturing stream, a free in a capturing stream, an
//! "unsafe" call not relaxed during a global capture).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuda_runtime::graph::{
    CaptureMode, CaptureModeGuard, CaptureStatus, ConditionalKind, Graph, InstantiateOptions,
    MemsetValue, UserObject,
};
use cuda_runtime::{
    kernel_args, kernels, Device, DeviceBuffer, Error, Event, LaunchConfig, Module, PinnedBuffer,
    Stream, StreamFlags,
};

fn null_driver_count(name: &str) -> u64 {
    let lib = std::ffi::CString::new("libcuda.so.1").unwrap();
    let sym = std::ffi::CString::new(name).unwrap();
    // SAFETY: dlopen/dlsym of the null driver, already loaded by the crate; the symbol is a
    // `uint64_t (void)` function (see nulldrv.c).
    unsafe {
        let h = libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!h.is_null(), "the null driver is not loaded");
        let f = libc::dlsym(h, sym.as_ptr());
        assert!(!f.is_null(), "not the null driver: no {name}");
        let f: extern "C" fn() -> u64 = std::mem::transmute(f);
        f()
    }
}

fn invalid<T: std::fmt::Debug>(what: &str, r: cuda_runtime::Result<T>) {
    match r {
        Err(Error::InvalidValue { .. }) => {}
        other => panic!("{what}: expected Error::InvalidValue, got {other:?}"),
    }
}

/// The crate's own graph rules, checked against the null driver's graph stand-ins (nodes do
/// nothing; what counts is what the crate refuses, the edges it adds and the user objects it
/// releases).
fn graph_checks() {
    use std::sync::atomic::AtomicUsize;
    // Loads the driver.
    Device::current().unwrap();
    let objects_before = null_driver_count("nulldrv_user_objects_live");
    let calls = Arc::new(AtomicUsize::new(0));
    {
        // Graph memory.
        let mut g = Graph::new().unwrap();
        let mut other = Graph::new().unwrap();
        invalid(
            "a zero-length allocation",
            g.add_mem_alloc_node::<u32>(&[], 0),
        );
        let (alloc, mut tmp) = g.add_mem_alloc_node::<u32>(&[], 64).unwrap();
        invalid(
            "graph memory in another graph",
            other.add_graph_mem_memset_node(&[], &mut tmp, MemsetValue::U32(1)),
        );
        invalid("an unfreed allocation", g.instantiate());
        let mut out = DeviceBuffer::<u32>::new(64).unwrap();
        let cp = g
            .add_memcpy_node_from_graph_mem(&[], &mut out, &tmp)
            .unwrap();
        assert_eq!(
            g.dependencies(cp).unwrap(),
            vec![alloc],
            "copy after the allocation"
        );
        let set = g
            .add_graph_mem_memset_node(&[cp], &mut tmp, MemsetValue::U32(3))
            .unwrap();
        let free = g.add_mem_free_node(&[], tmp).unwrap();
        let deps = g.dependencies(free).unwrap();
        assert!(
            deps.contains(&alloc) && deps.contains(&cp) && deps.contains(&set),
            "the free after every use: {deps:?}"
        );
        // Kernel arguments: a node of the graph gets the edge from the allocation; a stream
        // launch and a node of another graph refuse the memory.
        let m = Module::from_ptx(kernels::vector_add::PTX).unwrap();
        let vadd = m.function("vadd").unwrap();
        let cfg = LaunchConfig::new(1u32, 64u32);
        let src = DeviceBuffer::<f32>::new(64).unwrap();
        let mut dst = DeviceBuffer::<f32>::new(64).unwrap();
        let (alloc_f, mut tmp_f) = g.add_mem_alloc_node::<f32>(&[], 64).unwrap();
        // SAFETY: the null driver runs nothing.
        let k = unsafe {
            g.add_kernel_node(
                &[],
                &vadd,
                &cfg,
                &kernel_args![&src, 64usize, &src, 64usize, &mut tmp_f, 64usize],
            )
        }
        .unwrap();
        assert_eq!(
            g.dependencies(k).unwrap(),
            vec![alloc_f],
            "kernel after the allocation"
        );
        let s = Stream::new().unwrap();
        // SAFETY: refused before the driver.
        invalid("graph memory in a stream launch", unsafe {
            vadd.launch(
                &s,
                &cfg,
                &kernel_args![&src, 64usize, &src, 64usize, &mut tmp_f, 64usize],
            )
        });
        // SAFETY: refused before the driver.
        invalid("graph memory in another graph's kernel node", unsafe {
            other.add_kernel_node(
                &[],
                &vadd,
                &cfg,
                &kernel_args![&tmp_f, 64usize, &src, 64usize, &mut dst, 64usize],
            )
        });
        // A per-node update of another graph's executable.
        // SAFETY: the null driver runs nothing.
        let k2 = unsafe {
            other.add_kernel_node(
                &[],
                &vadd,
                &cfg,
                &kernel_args![&src, 64usize, &src, 64usize, &mut dst, 64usize],
            )
        }
        .unwrap();
        let mut exec_k = other.instantiate().unwrap();
        // SAFETY: refused before the driver.
        invalid("graph memory in a kernel-node update", unsafe {
            exec_k.set_kernel_node_params(
                k2,
                &vadd,
                &cfg,
                &kernel_args![&tmp_f, 64usize, &src, 64usize, &mut dst, 64usize],
            )
        });
        // Per-node updates of memset, copy and host nodes keep what they are given: the
        // closure until the executable goes.
        let mut u = Graph::new().unwrap();
        let mut b1 = DeviceBuffer::<u32>::new(64).unwrap();
        let b2 = DeviceBuffer::<u32>::new(64).unwrap();
        let ms = u
            .add_memset_node(&[], &mut b1, MemsetValue::U32(1))
            .unwrap();
        let mc = u.add_memcpy_node(&[], &mut b1, &b2).unwrap();
        let hn = u.add_host_node(&[], || {}).unwrap();
        let mut eu = u.instantiate().unwrap();
        let mut b3 = DeviceBuffer::<u32>::new(64).unwrap();
        eu.set_memset_node_params(ms, &mut b3, MemsetValue::U16(2))
            .unwrap();
        eu.set_memcpy_node_params(mc, &mut b3, &b2).unwrap();
        let mut odd = DeviceBuffer::<u8>::new(3).unwrap();
        invalid(
            "a memset update of 3 bytes in u32 elements",
            eu.set_memset_node_params(ms, &mut odd, MemsetValue::U32(2)),
        );
        let c = calls.clone();
        eu.set_host_node_params(hn, move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        assert_eq!(
            Arc::strong_count(&calls),
            2,
            "the executable holds the new closure"
        );
        drop((eu, u, b1, b2, b3, exec_k));
        let free_f = g.add_mem_free_node(&[], tmp_f).unwrap();
        assert!(
            g.dependencies(free_f).unwrap().contains(&k),
            "the free after the kernel"
        );
        drop((out, src, dst, m));
        let exec = g.instantiate().unwrap();
        other.add_empty_node(&[]).unwrap();
        let mut exec_other = other.instantiate().unwrap();
        invalid(
            "a whole update from a graph with memory nodes",
            exec_other.update(&g),
        );
        drop((exec, exec_other));

        // Device launch.
        let mut h = Graph::new().unwrap();
        let c = calls.clone();
        h.add_host_node(&[], move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let dl = InstantiateOptions {
            device_launch: true,
            ..Default::default()
        };
        match h.instantiate_with(&dl) {
            Err(Error::InvalidValue { value, .. }) if value.contains("Host") => {}
            other => panic!("device launch with a host node: {other:?}"),
        }
        let both = InstantiateOptions {
            device_launch: true,
            auto_free_on_launch: true,
            ..Default::default()
        };
        invalid(
            "device launch with auto-free",
            other.instantiate_with(&both),
        );

        // Conditional bodies.
        let mut g2 = Graph::new().unwrap();
        let handle = g2.conditional_handle(Some(1)).unwrap();
        let (_, mut body) = g2
            .add_conditional_node(&[], handle, ConditionalKind::While)
            .unwrap();
        invalid("instantiating a body", body.instantiate());
        invalid("cloning a body", body.try_clone());
        invalid("a body as a child", g2.add_child_graph_node(&[], &body));
        invalid(
            "an allocation in a body",
            body.add_mem_alloc_node::<u8>(&[], 8),
        );
        invalid(
            "another graph's handle",
            other.add_conditional_node(&[], handle, ConditionalKind::If),
        );
        let c = calls.clone();
        body.add_host_node(&[], move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        // Only a kernel can end a while loop.
        invalid("a while body without a kernel", g2.instantiate());
        let m2 = Module::from_ptx(kernels::vector_add::PTX).unwrap();
        let vadd2 = m2.function("vadd").unwrap();
        let (x, mut y) = (
            DeviceBuffer::<f32>::new(8).unwrap(),
            DeviceBuffer::<f32>::new(8).unwrap(),
        );
        // SAFETY: the null driver runs nothing.
        unsafe {
            body.add_kernel_node(
                &[],
                &vadd2,
                &LaunchConfig::new(1u32, 8u32),
                &kernel_args![&x, 8usize, &x, 8usize, &mut y, 8usize],
            )
        }
        .unwrap();
        drop((m2, vadd2, x, y));
        // The body's nodes are kept by the root graph: drop the root first, then the body.
        let exec2 = g2.instantiate().unwrap();
        drop(g2);
        drop(body);
        drop(exec2);
    }
    {
        // Node destruction, dependency removal and user objects: a destroyed node's handle
        // never reaches the driver (the null driver counts it), and a graph never releases a
        // user-object reference it does not hold.
        let mut g = Graph::new().unwrap();
        let a = g.add_empty_node(&[]).unwrap();
        let b = g.add_empty_node(&[a]).unwrap();
        g.remove_dependencies(&[a], &[b]).unwrap();
        assert!(g.dependencies(b).unwrap().is_empty(), "edge removed");
        g.add_dependencies(&[a], &[b]).unwrap();
        g.destroy_node(a).unwrap();
        assert!(
            g.dependencies(b).unwrap().is_empty(),
            "edges go with the node"
        );
        assert_eq!(g.nodes().unwrap(), vec![b]);
        invalid("a destroyed node", g.node_type(a));
        invalid("a destroyed node as a dependency", g.add_empty_node(&[a]));
        invalid("a destroyed node destroyed again", g.destroy_node(a));
        invalid(
            "a destroyed node in an edge removal",
            g.remove_dependencies(&[a], &[b]),
        );
        // Setters keep what they are given (released with the graph, checked at the end).
        let c = calls.clone();
        let h = g
            .add_host_node(&[b], move || {
                c.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let c = calls.clone();
        g.set_host_node_params(h, move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        invalid(
            "a host closure for an empty node",
            g.set_host_node_params(b, || {}),
        );
        let mut buf = DeviceBuffer::<u32>::new(32).unwrap();
        let ms = g
            .add_memset_node(&[], &mut buf, MemsetValue::U32(1))
            .unwrap();
        let mut buf2 = DeviceBuffer::<u32>::new(32).unwrap();
        g.set_memset_node_params(ms, &mut buf2, MemsetValue::U32(2))
            .unwrap();
        drop((buf, buf2));
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let obj = UserObject::new(Flag(dropped.clone())).unwrap();
        g.retain_user_object(&obj).unwrap();
        g.release_user_object(&obj).unwrap();
        invalid(
            "a reference the graph does not hold",
            g.release_user_object(&obj),
        );
        g.retain_user_object(&obj).unwrap();
        let obj2 = obj.try_clone().unwrap();
        let exec = g.instantiate().unwrap();
        drop((obj, g));
        Device::current().unwrap().synchronize().unwrap();
        assert!(
            !dropped.load(Ordering::SeqCst),
            "a handle and the executable hold it"
        );
        drop(obj2);
        Device::current().unwrap().synchronize().unwrap();
        assert!(!dropped.load(Ordering::SeqCst), "the executable holds it");
        drop(exec);
        Device::current().unwrap().synchronize().unwrap();
        assert!(
            dropped.load(Ordering::SeqCst),
            "dropped with the last reference"
        );
        // Graph memory's edges and nodes are not removed.
        let mut gm = Graph::new().unwrap();
        let (al, mem) = gm.add_mem_alloc_node::<u32>(&[], 16).unwrap();
        let fr = gm.add_mem_free_node(&[], mem).unwrap();
        invalid(
            "an edge of a graph with memory nodes",
            gm.remove_dependencies(&[al], &[fr]),
        );
        invalid("an allocation node destroyed", gm.destroy_node(al));
        invalid("a free node destroyed", gm.destroy_node(fr));
    }
    // Everything released: the user objects' destructors ran and the next crate call
    // released the bundles (the closures' clones of `calls` among them).
    Device::current().unwrap().synchronize().unwrap();
    assert_eq!(Arc::strong_count(&calls), 1, "host closures released");
    assert_eq!(
        null_driver_count("nulldrv_user_objects_live"),
        objects_before,
        "user objects released"
    );
    assert_eq!(
        null_driver_count("nulldrv_graphs_live"),
        0,
        "graphs destroyed"
    );
    println!("null-driver harness: graph checks passed");
}

/// Captures against the null driver's simulation (see the module docs); panics on a wrong
/// result of the crate, and the driver counts violations.
fn capture_phase() {
    let dev = Device::current().unwrap();
    for round in 0..50u32 {
        let mode = [
            CaptureMode::Global,
            CaptureMode::ThreadLocal,
            CaptureMode::Relaxed,
        ][round as usize % 3];
        // Made before the capture: what the helper thread releases during it.
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            dev.set_current().unwrap();
            let t = Stream::new().unwrap();
            let mut bufs = Vec::new();
            for k in 0..6u32 {
                let mut b = DeviceBuffer::<u32>::new_async(256, &t).unwrap();
                b.fill_async(k, &t).unwrap();
                bufs.push(b);
                let mut p = DeviceBuffer::<u32>::new(256).unwrap();
                p.fill_async(k, &t).unwrap();
                bufs.push(p);
            }
            let events: Vec<Event> = (0..3)
                .map(|_| {
                    let e = Event::new().unwrap();
                    e.record(&t).unwrap();
                    e
                })
                .collect();
            let mut pinned = PinnedBuffer::<u32>::new(256).unwrap();
            bufs[1].copy_to_pinned_async(&mut pinned, &t).unwrap();
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            drop(bufs);
            drop(events);
            let _ = pinned.as_slice().unwrap().len();
            drop(t);
            drop(pinned);
            // A user allocation during a global capture needs the thread relaxed.
            let _relaxed = CaptureModeGuard::new(CaptureMode::Relaxed).unwrap();
            drop(DeviceBuffer::<u32>::new(64).unwrap());
        });
        ready_rx.recv().unwrap();
        let s = Stream::new().unwrap();
        let side = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
        let mut home = DeviceBuffer::<u32>::new_async(512, &s).unwrap();
        home.fill_async(1, &s).unwrap();
        let unused = DeviceBuffer::<u32>::new_async(512, &s).unwrap();
        let mut a = DeviceBuffer::<u32>::new(512).unwrap();
        let mut used_elsewhere = DeviceBuffer::<u32>::new(512).unwrap();
        used_elsewhere.fill_async(5, &side).unwrap();
        let (fork, join) = (Event::new().unwrap(), Event::new().unwrap());
        let graph = s
            .capture(mode, |s| {
                go_tx.send(()).unwrap();
                assert_eq!(s.is_capturing()?, CaptureStatus::Active);
                a.copy_from_device_async(&home, s)?;
                // Dropped inside the open capture: kept, and never freed in the capturing
                // stream.
                drop(home);
                drop(unused);
                drop(used_elsewhere);
                fork.record(s)?;
                side.wait_event(&fork)?;
                a.fill_async(round, &side)?;
                side.launch_host_fn_replayable(|| {})?;
                join.record(&side)?;
                s.wait_event(&join)?;
                Ok(())
            })
            .unwrap_or_else(|e| panic!("round {round} ({mode:?}): {e}"));
        helper.join().unwrap();
        assert_eq!(side.is_capturing().unwrap(), CaptureStatus::None);
        // The captured event is refused outside its capture.
        assert!(matches!(fork.query(), Err(Error::CapturedEvent { .. })));
        drop(graph);
        // Refusals poison the capture.
        let mut b = DeviceBuffer::<u32>::new(16).unwrap();
        let r = s.capture(mode, |s| {
            let refused = b.copy_from_host_async(&[1; 16], s);
            assert!(
                matches!(refused, Err(Error::NotCapturable { .. })),
                "{refused:?}"
            );
            let refused = s.launch_host_fn(|| {});
            assert!(
                matches!(refused, Err(Error::NotCapturable { .. })),
                "{refused:?}"
            );
            Ok(())
        });
        assert!(matches!(r, Err(Error::CaptureFailed { .. })), "{r:?}");
        // A clean stream afterwards.
        b.fill_async(2, &s).unwrap();
        s.synchronize().unwrap();
    }
    assert!(matches!(
        Stream::legacy().unwrap().begin_capture(CaptureMode::Global),
        Err(Error::NotCapturable { .. })
    ));
    // Submissions racing captures of the stream they go to: each is queued (before the begin or
    // after the end) or captured with the crate knowing it (the null driver checks that the
    // submitting thread asked for the capture status in that very capture).
    let shared = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racers: Vec<_> = (0..3u32)
        .map(|k| {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                dev.set_current().unwrap();
                let mut b = DeviceBuffer::<u32>::new(256).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    b.fill_async(k, &shared).unwrap();
                    let e = Event::new().unwrap();
                    e.record(&shared).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut x = DeviceBuffer::<u32>::new(256).unwrap();
    for _ in 0..300 {
        drop(
            shared
                .capture(CaptureMode::Relaxed, |s| x.fill_async(1, s))
                .unwrap(),
        );
    }
    stop.store(true, Ordering::Relaxed);
    let raced: u64 = racers.into_iter().map(|t| t.join().unwrap()).sum();
    println!("null-driver harness: {raced} submissions raced 300 captures of their stream");
    // Graphs and their tokens are released at the next call of the crate.
    dev.synchronize().unwrap();
    let objects = null_driver_count("nulldrv_user_objects");
    assert_eq!(objects, 0, "user objects of dropped graphs still alive");
    let v = null_driver_count("nulldrv_violations");
    println!("null-driver harness: 50 capture rounds, {v} violations");
    if v != 0 {
        std::process::exit(1);
    }
}

fn main() {
    graph_checks();
    capture_phase();
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let dev = Device::current().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..6)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut r = fastrand::Rng::with_seed(t);
                let mut kept_streams: Vec<Stream> = Vec::new();
                let mut kept: Vec<DeviceBuffer<u32>> = Vec::new();
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let flags = if r.bool() {
                        StreamFlags::NON_BLOCKING
                    } else {
                        StreamFlags::empty()
                    };
                    let Ok(s) = Stream::with_flags(flags) else {
                        continue;
                    };
                    for _ in 0..20 {
                        match r.u32(0..6) {
                            0 => {
                                if let Ok(b) = DeviceBuffer::<u32>::new_async(1024, &s) {
                                    kept.push(b);
                                }
                            }
                            1 => {
                                if let Ok(mut b) = DeviceBuffer::<u32>::new(1024) {
                                    let _ = b.fill_async(7, &s);
                                    kept.push(b);
                                }
                            }
                            2 => {
                                if let Ok(e) = Event::new() {
                                    let _ = e.record(&s);
                                    let _ = s.wait_event(&e);
                                }
                            }
                            3 => {
                                let _ = s.synchronize();
                            }
                            4 => {
                                if !kept.is_empty() {
                                    let i = r.usize(..kept.len());
                                    let b = kept.swap_remove(i);
                                    if r.bool() {
                                        let _ = b.to_vec();
                                    }
                                    drop(b);
                                }
                            }
                            _ => {
                                if let Some(mut b) = kept.pop() {
                                    let _ = b.fill_async(1, &s);
                                    kept.push(b);
                                }
                            }
                        }
                        ops += 1;
                    }
                    if r.u32(0..4) == 0 {
                        kept_streams.push(s);
                    }
                    if kept_streams.len() > 8 {
                        kept_streams.remove(0);
                    }
                    if kept.len() > 64 {
                        kept.drain(..32);
                    }
                }
                ops
            })
        })
        .collect();
    // Short-lived threads that queue work on their per-thread stream and exit at once: their
    // thread-exit paths (the per-thread queue's drain, the context lock's slot hand-back) run
    // beside the resets.
    let exiting = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::spawn(|| {
                    if let (Ok(s), Ok(mut b)) =
                        (Stream::per_thread(), DeviceBuffer::<u32>::new(256))
                    {
                        let _ = b.fill_async(3, &s);
                        let _ = Event::new().and_then(|e| e.record(&s));
                    }
                })
                .join()
                .expect("a short-lived thread panicked");
                n += 1;
            }
            n
        })
    };
    let t = Instant::now();
    let mut resets = 0u64;
    while t.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_micros(300));
        match dev.reset() {
            Ok(()) => resets += 1,
            Err(e) => eprintln!("reset: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = workers
        .into_iter()
        .map(|w| w.join().expect("a worker panicked"))
        .sum();
    let threads = exiting.join().expect("the thread spawner panicked");
    let v = null_driver_count("nulldrv_violations");
    println!(
        "null-driver harness: {ops} operations on 6 threads, {threads} short-lived threads, \
         {resets} resets ({} seen by the driver), {v} violations",
        null_driver_count("nulldrv_resets")
    );
    if v != 0 {
        std::process::exit(1);
    }
}
