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
    kernel_args, AccessPolicyWindow, AccessProperty, MemSyncDomain, kernels, Array, ArrayFlags, Device, DeviceBuffer, Error, Event, LaunchConfig, Module, PinnedBuffer,
    Stream, StreamFlags, SurfaceObject, TextureDesc, TextureObject,
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
        // Capturing into a body is refused (review finding: the tokens would be the body's,
        // not the root's, and captured work would change the nesting beside the root's lock).
        let cs = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
        let mut fill = DeviceBuffer::<u32>::new(8).unwrap();
        invalid(
            "capturing into a body",
            cs.capture_into(&mut body, &[], CaptureMode::Relaxed, |s| {
                fill.fill_async(1, s)
            }),
        );
        assert_eq!(cs.is_capturing().unwrap(), CaptureStatus::None);
        drop((cs, fill));
        // Only a kernel can end a while loop.
        invalid("a while body without a kernel", g2.instantiate());
        // Nor through a copy, whose bodies the crate cannot reach (review finding).
        invalid(
            "a copy of a graph whose while body has no kernel",
            g2.try_clone(),
        );
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
        // With a kernel in the body, copies are fine.
        drop(g2.try_clone().unwrap());

        // A while body whose only nodes are a child graph and a nested conditional without any
        // kernel inside cannot end its loop either (review finding: they counted as if they
        // could); a kernel in the nested body can.
        let mut g3 = Graph::new().unwrap();
        let h3 = g3.conditional_handle(Some(1)).unwrap();
        let (_, mut body3) = g3
            .add_conditional_node(&[], h3, ConditionalKind::While)
            .unwrap();
        let mut child = Graph::new().unwrap();
        child.add_empty_node(&[]).unwrap();
        body3.add_child_graph_node(&[], &child).unwrap();
        invalid(
            "a while body holding an empty child graph",
            g3.instantiate(),
        );
        let inner_h = body3.conditional_handle(Some(1)).unwrap();
        let (_, mut inner) = body3
            .add_conditional_node(&[], inner_h, ConditionalKind::If)
            .unwrap();
        let mut z = DeviceBuffer::<u32>::new(8).unwrap();
        inner
            .add_memset_node(&[], &mut z, MemsetValue::U32(0))
            .unwrap();
        invalid(
            "a while body holding a conditional without a kernel",
            g3.instantiate(),
        );
        // Nor can a graph holding such a loop be embedded as a child.
        let mut outer = Graph::new().unwrap();
        invalid(
            "a child holding a never-ending loop",
            outer.add_child_graph_node(&[], &g3),
        );
        let m3 = Module::from_ptx(kernels::vector_add::PTX).unwrap();
        let vadd3 = m3.function("vadd").unwrap();
        let (x3, mut y3) = (
            DeviceBuffer::<f32>::new(8).unwrap(),
            DeviceBuffer::<f32>::new(8).unwrap(),
        );
        // SAFETY: the null driver runs nothing.
        unsafe {
            inner.add_kernel_node(
                &[],
                &vadd3,
                &LaunchConfig::new(1u32, 8u32),
                &kernel_args![&x3, 8usize, &x3, 8usize, &mut y3, 8usize],
            )
        }
        .unwrap();
        drop(g3.instantiate().unwrap());
        // A child graph's kernels never count (they may be captured safe launches).
        let mut g4 = Graph::new().unwrap();
        let h4 = g4.conditional_handle(Some(1)).unwrap();
        let (_, mut body4) = g4
            .add_conditional_node(&[], h4, ConditionalKind::While)
            .unwrap();
        let mut kchild = Graph::new().unwrap();
        // SAFETY: the null driver runs nothing.
        unsafe {
            kchild.add_kernel_node(
                &[],
                &vadd3,
                &LaunchConfig::new(1u32, 8u32),
                &kernel_args![&x3, 8usize, &x3, 8usize, &mut y3, 8usize],
            )
        }
        .unwrap();
        body4.add_child_graph_node(&[], &kchild).unwrap();
        invalid("a while body holding only a child graph", g4.instantiate());
        drop((g4, body4, kchild));
        drop((g3, body3, inner, child, outer, z, m3, vadd3, x3, y3));
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

/// A stream waiting for an event while another thread records that event in a capture (review
/// finding): the wait either joins the capture with the crate knowing it, or waits for the
/// event's earlier (uncaptured) record; never joins it behind the crate's back (the null
/// driver counts the waiting stream's next fill, captured without the crate asking, as a
/// violation).
fn event_record_races_wait() {
    let dev = Device::current().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let e = Arc::new(Event::new().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let waited = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let waiter = {
        let (e, stop, waited) = (e.clone(), stop.clone(), waited.clone());
        std::thread::spawn(move || {
            dev.set_current().unwrap();
            let d = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
            let mut b = DeviceBuffer::<u32>::new(64).unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Joins the capture (then the fill is captured), fails (a capture that has
                // ended), or waits for an uncaptured record.
                let _ = d.wait_event(&e);
                let _ = b.fill_async(1, &d);
                n += 1;
                waited.store(n, Ordering::Relaxed);
            }
            n
        })
    };
    let mut x = DeviceBuffer::<u32>::new(64).unwrap();
    // At least 2000 captures, and until the waiter has raced 500 of them (at most 20 s).
    let t = Instant::now();
    let mut rounds = 0u64;
    while rounds < 2000
        || (waited.load(Ordering::Relaxed) < 500 && t.elapsed() < Duration::from_secs(20))
    {
        rounds += 1;
        e.record(&s).unwrap();
        let c = s.begin_capture(CaptureMode::Relaxed).unwrap();
        x.fill_async(2, &s).unwrap();
        e.record(&s).unwrap();
        x.fill_async(3, &s).unwrap();
        // The waiter's stream may have joined without being joined back: the null driver ends
        // it with the capture either way.
        drop(c.end());
    }
    stop.store(true, Ordering::Relaxed);
    let waits = waiter.join().unwrap();
    assert!(waits > 0, "no wait raced the records");
    println!(
        "null-driver harness: {waits} waits raced {rounds} records of their event in a capture"
    );
}

/// Memory last used in the legacy stream, and a stream-ordered allocation of the legacy
/// stream, dropped while a blocking stream (or the per-thread stream) is captured, on the
/// capturing thread and on another (review finding): their fences and frees would be legacy
/// work depending on the capture, which the driver refuses and which invalidates the capture
/// (the null driver counts each as a violation). They wait for the capture's end instead.
fn legacy_housekeeping_during_blocking_captures() {
    let dev = Device::current().unwrap();
    for round in 0..20u32 {
        let legacy = Stream::legacy().unwrap();
        let mut used = DeviceBuffer::<u32>::new(64).unwrap();
        used.fill_async(round, &legacy).unwrap();
        let mut home = DeviceBuffer::<u32>::new_async(64, &legacy).unwrap();
        home.fill_async(round, &legacy).unwrap();
        let untouched = DeviceBuffer::<u32>::new_async(64, &legacy).unwrap();
        let mut elsewhere = DeviceBuffer::<u32>::new(64).unwrap();
        elsewhere.fill_async(round, &legacy).unwrap();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            dev.set_current().unwrap();
            go_rx.recv().unwrap();
            drop(elsewhere);
            done_tx.send(()).unwrap();
        });
        let s = if round % 2 == 0 {
            Stream::new().unwrap()
        } else {
            Stream::per_thread().unwrap()
        };
        let mode = [CaptureMode::Global, CaptureMode::Relaxed][round as usize % 2];
        let mut x = DeviceBuffer::<u32>::new(64).unwrap();
        let graph = s
            .capture(mode, |s| {
                x.fill_async(round, s)?;
                drop(used);
                drop(home);
                drop(untouched);
                go_tx.send(()).unwrap();
                done_rx.recv().unwrap();
                x.fill_async(round + 1, s)
            })
            .unwrap_or_else(|e| panic!("legacy round {round}: {e}"));
        other.join().unwrap();
        drop(graph);
        // The deferred fences and frees go ahead once the capture is over.
        dev.synchronize().unwrap();
    }
    println!("null-driver harness: legacy-stream memory dropped during 20 blocking captures");
}

/// Captures into an existing graph while another thread updates a node of that graph's
/// executable (review finding): the captured work changes the graph, and the update reads the
/// graph's node, which the driver does not synchronise; the graph's lock must serialise them
/// (the null driver counts overlapping calls on one graph).
fn capture_into_beside_node_updates() {
    let dev = Device::current().unwrap();
    let mut g = Graph::new().unwrap();
    let mut target = DeviceBuffer::<u32>::new(64).unwrap();
    let node = g
        .add_memset_node(&[], &mut target, MemsetValue::U32(1))
        .unwrap();
    let mut exec = g.instantiate().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let updater = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            dev.set_current().unwrap();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                exec.set_memset_node_params(node, &mut target, MemsetValue::U32(n))
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut x = DeviceBuffer::<u32>::new(64).unwrap();
    for k in 0..300u32 {
        s.capture_into(&mut g, &[], CaptureMode::Relaxed, |s| {
            x.fill_async(k, s)?;
            x.fill_async(k + 1, s)
        })
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let updates = updater.join().unwrap();
    println!("null-driver harness: {updates} node updates beside 300 captures into their graph");
}

/// A graph's bundle released (its user object's destructor ran) while a capture is open, and
/// whose buffer is a stream-ordered allocation of the capturing stream (review finding): the
/// crate runs such releases at the next call that enters a device, which was the capture's end
/// while it held the capturing queue's lock, and the buffer's free entered that queue again: the
/// end never returned. A watchdog turns a hang into a failure.
fn released_bundle_at_a_capture_end() {
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !done.load(Ordering::SeqCst) {
                if t.elapsed() > Duration::from_secs(20) {
                    eprintln!("null-driver harness: a capture's end hung (released bundle)");
                    std::process::exit(1);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    for round in 0..20u32 {
        let s = Stream::new().unwrap();
        let mut b = DeviceBuffer::<u32>::new_async(64, &s).unwrap();
        let mut g = Graph::new().unwrap();
        g.add_memset_node(&[], &mut b, MemsetValue::U32(round))
            .unwrap();
        let exec = g.instantiate().unwrap();
        // Only the graph and its executable keep the buffer now.
        drop(b);
        let mut x = DeviceBuffer::<u32>::new(64).unwrap();
        let cap = s.begin_capture(CaptureMode::Relaxed).unwrap();
        x.fill_async(round, &s).unwrap();
        // Their user objects go: the bundle waits for the next call that enters the device.
        drop(exec);
        drop(g);
        drop(cap.end().unwrap());
    }
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
    println!("null-driver harness: bundles released at 20 capture ends");
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
    // At least 300 captures, and until the racers made 1000 submissions (at most 20 s; review:
    // some runs raced none, on a busy machine).
    let made = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let racers: Vec<_> = (0..3u32)
        .map(|k| {
            let (shared, stop, made) = (shared.clone(), stop.clone(), made.clone());
            std::thread::spawn(move || {
                dev.set_current().unwrap();
                let mut b = DeviceBuffer::<u32>::new(256).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    b.fill_async(k, &shared).unwrap();
                    let e = Event::new().unwrap();
                    e.record(&shared).unwrap();
                    n += 1;
                    made.fetch_add(1, Ordering::Relaxed);
                }
                n
            })
        })
        .collect();
    let mut x = DeviceBuffer::<u32>::new(256).unwrap();
    let t = Instant::now();
    let mut captures = 0u64;
    while captures < 300
        || (made.load(Ordering::Relaxed) < 1000 && t.elapsed() < Duration::from_secs(20))
    {
        captures += 1;
        drop(
            shared
                .capture(CaptureMode::Relaxed, |s| x.fill_async(1, s))
                .unwrap(),
        );
    }
    stop.store(true, Ordering::Relaxed);
    let raced: u64 = racers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(raced > 0, "no submission raced the captures");
    println!("null-driver harness: {raced} submissions raced {captures} captures of their stream");
    event_record_races_wait();
    legacy_housekeeping_during_blocking_captures();
    capture_into_beside_node_updates();
    released_bundle_at_a_capture_end();
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

/// The crate's device-runtime kernels (feature `device-runtime`, default) load their image
/// linked ahead of time (a fat binary from cuda-runtime-devrt), not their relocatable PTX, and
/// launch through the safe wrappers.
fn device_runtime_checks() {
    let before = null_driver_count("nulldrv_fatbin_loads");
    let image = kernels::cdp::MODULE
        .linked_image()
        .expect("built with the device-runtime feature");
    let s = Stream::new().unwrap();
    let src = DeviceBuffer::from_slice(&[1u32; 256]).unwrap();
    let mut out = DeviceBuffer::<u32>::new(256).unwrap();
    let mut sums = DeviceBuffer::<u64>::new(1).unwrap();
    let mut failures = DeviceBuffer::<u32>::new(1).unwrap();
    kernels::cdp::cdp_tail_sums(
        &s,
        &LaunchConfig::new(1u32, 256u32),
        &src,
        &mut out,
        &mut sums,
        &mut failures,
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(null_driver_count("nulldrv_fatbin_loads"), before + 1);
    assert_eq!(
        null_driver_count("nulldrv_last_fatbin"),
        image.as_ptr() as u64,
        "the cdp module loaded another image than cuda-runtime-devrt's"
    );
    kernels::graph_cond::COND_SET.function().unwrap();
    assert_eq!(
        null_driver_count("nulldrv_last_fatbin"),
        kernels::graph_cond::MODULE.linked_image().unwrap().as_ptr() as u64
    );
    // A PTX module is not a fat binary.
    kernels::vector_add::VADD.function().unwrap();
    assert_eq!(null_driver_count("nulldrv_fatbin_loads"), before + 2);
    println!("null-driver harness: device-runtime checks passed");
}

/// `overhead`: the crate's own CPU cost per operation against the null driver (whose calls
/// cost a few nanoseconds), for profiling with `perf` on a machine without a GPU:
/// `LD_LIBRARY_PATH=<dir of the null driver> null-driver-harness overhead [name part]`.
fn overhead() {
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let n = 2_000_000u32;
    let only = std::env::args().nth(2).unwrap_or_default();
    let time = |what: &str, f: &mut dyn FnMut()| {
        if !what.contains(only.as_str()) {
            return;
        }
        for _ in 0..n / 10 {
            f();
        }
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        println!(
            "{what:<44} {:>8.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    };
    time("mallocAsync + freeAsync (1 MiB)", &mut || {
        drop(DeviceBuffer::<u8>::new_async(1 << 20, &s).unwrap());
    });
    let cfg = LaunchConfig::new(1u32, 1u32);
    time("empty kernel launch", &mut || {
        kernels::params::empty(&s, &cfg).unwrap();
    });
    let mut out = DeviceBuffer::<f32>::new(16).unwrap();
    time("4-argument kernel launch (1 buffer)", &mut || {
        kernels::params::four_args(&s, &cfg, &mut out, 1, 2.0, 3.0).unwrap();
    });
    // On the per-thread stream each launch that uses memory is fenced (an event recorded).
    let pts = cuda_runtime::Stream::per_thread().unwrap();
    time("4-argument launch, per-thread stream", &mut || {
        kernels::params::four_args(&pts, &cfg, &mut out, 1, 2.0, 3.0).unwrap();
    });
    let x = DeviceBuffer::<f32>::new(16).unwrap();
    let mut y = DeviceBuffer::<f32>::new(16).unwrap();
    time("2-buffer kernel launch (spin_read_sum)", &mut || {
        kernels::spin::spin_read_sum(&s, &cfg, &x, &mut y, 0).unwrap();
    });
    time("3-buffer kernel launch (hot_cold)", &mut || {
        kernels::l2::hot_cold(&s, &cfg, &x, &out, &mut y).unwrap();
    });
    let cluster = LaunchConfig::new(2u32, 1u32).with_cluster(2);
    time("cluster launch (2-block clusters)", &mut || {
        kernels::launch_ex::empty90(&s, &cluster).unwrap();
    });
    let ev = Event::new().unwrap();
    time("event record", &mut || {
        ev.record(&s).unwrap();
    });
    let ex_out = DeviceBuffer::<f32>::new(1 << 10).unwrap();
    time("extended launch, 3 attributes", &mut || {
        let ex = cfg
            .extended()
            .priority(0)
            .mem_sync_domain(MemSyncDomain::Remote)
            .access_policy_window(AccessPolicyWindow::over(
                &ex_out,
                1.0,
                AccessProperty::Normal,
                AccessProperty::Normal,
            ));
        kernels::params::empty(&s, &ex).unwrap();
    });
    // A chain of 10 kernel nodes of `four_args`, as the graph bench builds 100 (the null
    // driver reports 8-byte parameters only).
    let module = Module::from_ptx(kernels::params::PTX).unwrap();
    let four = module.function("four_args").unwrap();
    let mut g = Graph::new().unwrap();
    let mut nodes = Vec::new();
    for i in 0..10u32 {
        let deps: Vec<_> = nodes.last().copied().into_iter().collect();
        // SAFETY: four_args writes out[0] of a 16-element buffer (the null driver runs nothing).
        let node = unsafe {
            g.add_kernel_node(
                &deps,
                &four,
                &cfg,
                &kernel_args![&mut out, 1usize, u64::from(i), 2.0f64, 3.0f64],
            )
        }
        .unwrap();
        nodes.push(node);
    }
    let mut exec = g.instantiate().unwrap();
    time("graph launch (10 kernel nodes)", &mut || {
        exec.launch(&s).unwrap();
    });
    let array = cuda_runtime::Array::<f32>::new_2d(4096, 4096, Default::default()).unwrap();
    let tdesc = cuda_runtime::TextureDesc::default();
    time("texture object create + destroy", &mut || {
        drop(cuda_runtime::TextureObject::from_array(&array, &tdesc).unwrap());
    });
    let mut turn = 0u32;
    time("one kernel-node update", &mut || {
        turn ^= 1;
        // SAFETY: as the nodes above.
        unsafe {
            exec.set_kernel_node_params(
                nodes[5],
                &four,
                &cfg,
                &kernel_args![&mut out, 1usize, u64::from(turn), 2.0f64, 3.0f64],
            )
        }
        .unwrap();
    });
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("overhead") {
        overhead();
        return;
    }
    graph_checks();
    capture_phase();
    device_runtime_checks();
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let dev = Device::current().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Buffers handed from one worker to another, used on the first one's per-thread stream and
    // dropped by the second (the per-thread stream's uses waited for from another thread).
    let handoff: Arc<std::sync::Mutex<Vec<DeviceBuffer<u32>>>> = Arc::default();
    let workers: Vec<_> = (0..6)
        .map(|t| {
            let stop = stop.clone();
            let handoff = handoff.clone();
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
                        match r.u32(0..10) {
                            9 => {
                                // A texture and a surface over a fresh array, used by kernels
                                // on this stream or this thread's per-thread stream, and dropped
                                // with the kernels queued: their destroys wait for the uses
                                // noted on the objects, and must never reach the driver after
                                // a reset (a stale handle is a violation).
                                let pt = if r.bool() { Stream::per_thread().ok() } else { None };
                                let st = pt.as_ref().unwrap_or(&s);
                                let cfg = LaunchConfig::new(1u32, 32u32);
                                // (1 x 1: the null driver's surface limits are 1.)
                                if let Ok(arr) =
                                    Array::<f32>::new_2d(1, 1, ArrayFlags::SURFACE_LOAD_STORE)
                                {
                                    if let (Ok(src), Ok(mut out)) =
                                        (DeviceBuffer::<f32>::zeroed(32), DeviceBuffer::<f32>::zeroed(64))
                                    {
                                        if let Ok(mut surf) = SurfaceObject::new(&arr) {
                                            let _ = kernels::texture::surf_write_2d(
                                                st, &cfg, &mut surf, &src, 1, 1,
                                            );
                                            drop(surf);
                                        }
                                        if let Ok(tex) =
                                            TextureObject::from_array(&arr, &TextureDesc::default())
                                        {
                                            let _ = kernels::texture::sample_2d(
                                                st, &cfg, &tex, &src, &mut out,
                                            );
                                            if r.bool() {
                                                let _ = st.synchronize();
                                            }
                                            drop(tex);
                                        }
                                    }
                                }
                            }
                            6 => {
                                // Used on this thread's per-thread stream, then handed over.
                                if let Some(mut b) = kept.pop() {
                                    if let Ok(pt) = Stream::per_thread() {
                                        let _ = b.fill_async(5, &pt);
                                    }
                                    handoff.lock().unwrap().push(b);
                                }
                            }
                            7 => {
                                // Another worker's buffer dropped here.
                                let b = handoff.lock().unwrap().pop();
                                drop(b);
                            }
                            8 => {
                                if r.u32(0..4) == 0 {
                                    if let Ok(pt) = Stream::per_thread() {
                                        let _ = pt.synchronize();
                                    }
                                }
                            }
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
    drop(std::mem::take(&mut *handoff.lock().unwrap()));
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
