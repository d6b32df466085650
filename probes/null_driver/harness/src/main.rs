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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuda_runtime::graph::{ConditionalKind, Graph, InstantiateOptions, MemsetValue};
use cuda_runtime::{
    kernel_args, kernels, Device, DeviceBuffer, Error, Event, LaunchConfig, Module, Stream,
    StreamFlags,
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

fn main() {
    graph_checks();
    device_runtime_checks();
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
