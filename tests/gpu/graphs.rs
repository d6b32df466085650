//! Explicit graphs and executable graphs: results against the same work on a stream and a CPU
//! reference, and the keep-alive rules (buffers, modules, events, host closures, executables
//! and graphs dropped while a graph or a launch still uses them).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{
    assert_same, eventually, random_ints_f32, random_u32, rng, spin_module, vadd_module,
};
use cuda_runtime::graph::{DotFlags, Graph, GraphNodeType, MemsetValue};
use cuda_runtime::{
    kernel_args, DeviceBuffer, Error, ErrorCode, Event, HostAllocFlags, LaunchConfig, PinnedBuffer,
    Stream,
};

crate::tests![
    explicit_graph_matches_the_same_work_on_a_stream,
    buffers_and_module_dropped_after_instantiate_and_after_launch_stay_alive,
    exec_and_graph_dropped_while_a_launch_runs,
    host_closure_runs_at_every_replay_and_is_released_after,
    relaunch_many_times_accumulates,
    whole_update_with_wrong_topology_is_a_typed_error_and_a_right_one_works,
    kernel_node_update_and_node_enable,
    bad_nodes_are_refused_with_typed_errors,
    child_graph_clone_and_event_nodes,
];

fn explicit_graph_matches_the_same_work_on_a_stream() {
    let mut r = rng();
    let n = 1 << 16;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let pattern = r.u32(..);
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let poison = vec![f32::NAN; n];
    let mut c = DeviceBuffer::from_slice(&poison).unwrap();
    let mut d = DeviceBuffer::from_slice(&poison).unwrap();
    let mut e = DeviceBuffer::<u32>::from_slice(&random_u32(&mut r, n)).unwrap();

    let mut g = Graph::new().unwrap();
    // SAFETY: vadd touches a, b, c below the smallest of their lengths (passed with them).
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    let cp = g.add_memcpy_node(&[k], &mut d, &c).unwrap();
    let set = g
        .add_memset_node(&[], &mut e, MemsetValue::U32(pattern))
        .unwrap();
    let join = g.add_empty_node(&[cp, set]).unwrap();

    assert_eq!(g.nodes().unwrap().len(), 4);
    let mut roots = g.root_nodes().unwrap();
    roots.sort_by_key(|x| x.as_raw() as usize);
    let mut want_roots = vec![k, set];
    want_roots.sort_by_key(|x| x.as_raw() as usize);
    assert_eq!(roots, want_roots);
    let edges = g.edges().unwrap();
    assert_eq!(edges.len(), 3);
    assert!(
        edges.contains(&(k, cp)) && edges.contains(&(cp, join)) && edges.contains(&(set, join))
    );
    assert_eq!(g.dependencies(cp).unwrap(), vec![k]);
    assert_eq!(g.dependents(k).unwrap(), vec![cp]);
    assert_eq!(g.node_type(k).unwrap(), GraphNodeType::Kernel);
    assert_eq!(g.node_type(cp).unwrap(), GraphNodeType::Memcpy);
    assert_eq!(g.node_type(set).unwrap(), GraphNodeType::Memset);
    assert_eq!(g.node_type(join).unwrap(), GraphNodeType::Empty);
    let dot = g.to_dot(DotFlags::VERBOSE).unwrap();
    assert!(dot.contains("digraph"), "{dot}");

    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();

    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("graph c", &c.to_vec().unwrap(), &want);
    assert_same("graph d", &d.to_vec().unwrap(), &want);
    assert_same("graph e", &e.to_vec().unwrap(), &vec![pattern; n]);

    // The same work on a stream gives the same bytes.
    let mut c2 = DeviceBuffer::from_slice(&poison).unwrap();
    let mut d2 = DeviceBuffer::from_slice(&poison).unwrap();
    // SAFETY: as above.
    unsafe { vadd.launch(&s, &cfg, &kernel_args![&a, n, &b, n, &mut c2, n]) }.unwrap();
    d2.copy_from_device_async(&c2, &s).unwrap();
    assert_same("stream d", &d2.to_vec().unwrap(), &d.to_vec().unwrap());
}

fn buffers_and_module_dropped_after_instantiate_and_after_launch_stay_alive() {
    let mut r = rng();
    let n = 4096;
    let hsrc = random_ints_f32(&mut r, n);
    let want: f32 = hsrc.iter().sum();
    let m = spin_module();
    let spin_sum = m.function("spin_read_sum").unwrap();
    let src = DeviceBuffer::from_slice(&hsrc).unwrap();
    let mut out = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    let mut result = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    let mut g = Graph::new().unwrap();
    let ns: u64 = 100_000_000;
    // SAFETY: spin_read_sum reads src below src_len and writes out[0] when out_len > 0.
    let k = unsafe {
        g.add_kernel_node(
            &[],
            &spin_sum,
            &LaunchConfig::new(1u32, 1u32),
            &kernel_args![&src, n, &mut out, 1usize, ns],
        )
    }
    .unwrap();
    g.add_memcpy_node(&[k], &mut result, &out).unwrap();
    let exec = g.instantiate().unwrap();
    // Right after instantiation: the source buffer, the function, its module and the graph go.
    drop((src, spin_sum, m, g));
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    // Right after the launch: the intermediate buffer goes while the kernel spins.
    drop(out);
    // Fresh allocations while the launch runs must not get the memory it still uses.
    let junk: Vec<DeviceBuffer<f32>> = (0..8)
        .map(|_| DeviceBuffer::from_slice(&vec![1.0e30f32; n]).unwrap())
        .collect();
    s.synchronize().unwrap();
    assert_eq!(result.to_vec().unwrap(), [want]);
    // Relaunch: still alive (the executable holds them).
    result.fill(f32::NAN).unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(result.to_vec().unwrap(), [want]);
    drop(junk);
}

fn exec_and_graph_dropped_while_a_launch_runs() {
    let mut r = rng();
    let n = 1024;
    let hsrc = random_ints_f32(&mut r, n);
    let want: f32 = hsrc.iter().sum();
    let m = spin_module();
    let spin_sum = m.function("spin_read_sum").unwrap();
    let src = DeviceBuffer::from_slice(&hsrc).unwrap();
    let mut out = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: as in the test above.
    unsafe {
        g.add_kernel_node(
            &[],
            &spin_sum,
            &LaunchConfig::new(1u32, 1u32),
            &kernel_args![&src, n, &mut out, 1usize, 200_000_000u64],
        )
    }
    .unwrap();
    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    // The launch waits behind a host function held until `release` (or 120 s passed): while
    // `done` is unset, the launch has not run. (With 20 s, under memcheck beside five other
    // memcheck processes, the function ended on its own before the check, twelfth session:
    // the drops had taken 13 us, so the 20 s went by in the graph's launch or before it.)
    let (release, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    {
        let (release, done) = (release.clone(), done.clone());
        s.launch_host_fn(move || {
            let t = Instant::now();
            while !release.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(1));
            }
            done.store(true, Ordering::SeqCst);
        })
        .unwrap();
    }
    exec.launch(&s).unwrap();
    let t = Instant::now();
    drop(exec);
    let t_exec = t.elapsed();
    drop(g);
    let t_graph = t.elapsed();
    drop(src);
    let t_src = t.elapsed();
    assert!(
        !done.load(Ordering::SeqCst),
        "dropping the executable, the graph and a buffer must not wait for the launch \
         (after {t_exec:?}, {t_graph:?}, {t_src:?})"
    );
    release.store(true, Ordering::SeqCst);
    s.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), [want]);
}

fn host_closure_runs_at_every_replay_and_is_released_after() {
    let count = Arc::new(AtomicUsize::new(0));
    let mut g = Graph::new().unwrap();
    let c = count.clone();
    g.add_host_node(&[], move || {
        c.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    // A second executable of a clone shares the closure.
    let clone = g.try_clone().unwrap();
    let exec = g.instantiate().unwrap();
    let exec2 = clone.instantiate().unwrap();
    let s = Stream::new().unwrap();
    let n = 37;
    for _ in 0..n {
        exec.launch(&s).unwrap();
    }
    exec2.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), n + 1);
    assert!(Arc::strong_count(&count) > 1, "the graph holds the closure");
    drop((g, clone, exec, exec2));
    eventually("the closure released once no graph refers to it", || {
        Arc::strong_count(&count) == 1
    });
}

fn relaunch_many_times_accumulates() {
    let mut r = rng();
    let n = 10_000;
    let (h0, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let mut a = DeviceBuffer::from_slice(&h0).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::<f32>::new(n).unwrap();
    let mut g = Graph::new().unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    g.add_memcpy_node(&[k], &mut a, &c).unwrap();
    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    exec.upload(&s).unwrap();
    let launches = 200;
    for _ in 0..launches {
        exec.launch(&s).unwrap();
    }
    s.synchronize().unwrap();
    let want: Vec<f32> = h0
        .iter()
        .zip(&hb)
        .map(|(x, y)| x + launches as f32 * y)
        .collect();
    assert_same("a after relaunches", &a.to_vec().unwrap(), &want);
}

fn whole_update_with_wrong_topology_is_a_typed_error_and_a_right_one_works() {
    let mut r = rng();
    let n = 2048;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c1 = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut c2 = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let build = |out: &mut DeviceBuffer<f32>, extra: bool| {
        let mut g = Graph::new().unwrap();
        // SAFETY: vadd stays below the lengths given.
        let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, out, n]) }
            .unwrap();
        if extra {
            g.add_empty_node(&[k]).unwrap();
        }
        g
    };
    let g1 = build(&mut c1, false);
    let mut exec = g1.instantiate().unwrap();
    let wrong = build(&mut c2, true);
    let e = exec.update(&wrong).unwrap_err();
    assert!(
        matches!(e, Error::GraphExecUpdate { result, .. } if result != 0),
        "{e:?}"
    );
    assert_eq!(e.code(), ErrorCode::GraphExecUpdateFailure);
    // The executable is unchanged: it still writes c1.
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("c1", &c1.to_vec().unwrap(), &want);
    assert!(c2.to_vec().unwrap().iter().all(|x| x.is_nan()));

    // Same topology, new output: the update takes, and the new graph may go at once.
    let right = build(&mut c2, false);
    exec.update(&right).unwrap();
    drop((right, wrong, g1));
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("c2", &c2.to_vec().unwrap(), &want);
}

fn kernel_node_update_and_node_enable() {
    let mut r = rng();
    let n = 3000;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut flag = DeviceBuffer::from_slice(&[0u32; 16]).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    let set = g
        .add_memset_node(&[k], &mut flag, MemsetValue::U32(0xABCD_0123))
        .unwrap();
    let host = g.add_host_node(&[set], || {}).unwrap();
    let mut exec = g.instantiate().unwrap();

    // Point the kernel at a new output (a fresh buffer, dropped by us right after).
    let mut c_new = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let b2 = DeviceBuffer::from_slice(&ha).unwrap();
    // SAFETY: as above.
    unsafe {
        exec.set_kernel_node_params(k, &vadd, &cfg, &kernel_args![&a, n, &b2, n, &mut c_new, n])
    }
    .unwrap();
    drop(b2);
    assert!(exec.node_enabled(set).unwrap());
    exec.set_node_enabled(set, false).unwrap();
    assert!(!exec.node_enabled(set).unwrap());
    let e = exec.set_node_enabled(host, false).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let doubled: Vec<f32> = ha.iter().map(|x| x + x).collect();
    assert_same("c_new", &c_new.to_vec().unwrap(), &doubled);
    assert!(
        c.to_vec().unwrap().iter().all(|x| x.is_nan()),
        "old output untouched"
    );
    assert_eq!(
        flag.to_vec().unwrap(),
        [0u32; 16],
        "the disabled memset did nothing"
    );
    exec.set_node_enabled(set, true).unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(flag.to_vec().unwrap(), [0xABCD_0123u32; 16]);
}

fn bad_nodes_are_refused_with_typed_errors() {
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(64, 64).unwrap();
    let mut g = Graph::new().unwrap();
    let mut other = Graph::new().unwrap();
    let foreign = other.add_empty_node(&[]).unwrap();
    let e = g.add_empty_node(&[foreign]).unwrap_err();
    assert!(matches!(e, Error::ForeignGraphNode { .. }), "{e:?}");
    // Mapped page-locked memory is refused in graphs (a launch would not keep CPU views away).
    let pinned = PinnedBuffer::<f32>::with_flags(64, HostAllocFlags::MAPPED).unwrap();
    let mut c = DeviceBuffer::<f32>::new(64).unwrap();
    let b = DeviceBuffer::<f32>::new(64).unwrap();
    // SAFETY: refused before any launch could happen.
    let e = unsafe {
        g.add_kernel_node(
            &[],
            &vadd,
            &cfg,
            &kernel_args![&pinned, 64usize, &b, 64usize, &mut c, 64usize],
        )
    }
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    // Wrong argument count, bad shape.
    // SAFETY: refused before any launch.
    let e = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&b, 64usize]) }.unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
    // SAFETY: refused before any launch.
    let e = unsafe {
        g.add_kernel_node(
            &[],
            &vadd,
            &LaunchConfig::new(1u32, 4096u32),
            &kernel_args![&b, 64usize, &b, 64usize, &mut c, 64usize],
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::InvalidConfiguration { .. }), "{e:?}");
    // Memsets whose size is not a multiple of the element size; empty copies.
    let mut bytes = DeviceBuffer::<u8>::new(6).unwrap();
    let e = g
        .add_memset_node(&[], &mut bytes, MemsetValue::U32(1))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    let mut empty = DeviceBuffer::<u8>::new(0).unwrap();
    let empty2 = DeviceBuffer::<u8>::new(0).unwrap();
    assert!(g.add_memcpy_node(&[], &mut empty, &empty2).is_err());
    let short = DeviceBuffer::<f32>::new(3).unwrap();
    let e = g.add_memcpy_node(&[], &mut c, &short).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    // Nothing was added by the refused calls.
    assert_eq!(g.nodes().unwrap().len(), 0);
    let exec = other.instantiate().unwrap();
    let mut exec = exec;
    let e = exec
        .set_node_enabled(g.add_empty_node(&[]).unwrap(), false)
        .unwrap_err();
    assert!(matches!(e, Error::ForeignGraphNode { .. }), "{e:?}");
}

fn child_graph_clone_and_event_nodes() {
    let mut r = rng();
    let n = 4096;
    let pattern = r.u32(..);
    let mut x = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut y = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut child = Graph::new().unwrap();
    child
        .add_memset_node(&[], &mut x, MemsetValue::U32(pattern))
        .unwrap();
    let mut parent = Graph::new().unwrap();
    let ch = parent.add_child_graph_node(&[], &child).unwrap();
    assert_eq!(parent.node_type(ch).unwrap(), GraphNodeType::ChildGraph);
    let cp = parent.add_memcpy_node(&[ch], &mut y, &x).unwrap();
    let ev = Arc::new(Event::new().unwrap());
    let rec = parent.add_event_record_node(&[cp], &ev).unwrap();
    assert_eq!(parent.node_type(rec).unwrap(), GraphNodeType::EventRecord);
    let clone = parent.try_clone().unwrap();
    assert_eq!(clone.nodes().unwrap().len(), 3);
    // Only the clone is left; the buffer the child writes is dropped by us too.
    drop((child, parent));
    drop(x);
    let exec = clone.instantiate().unwrap();
    drop(clone);
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    // The event the graph records is a normal event: another stream can wait for it.
    let s2 = Stream::new().unwrap();
    s2.wait_event(&ev).unwrap();
    ev.synchronize().unwrap();
    s2.synchronize().unwrap();
    assert_same("y", &y.to_vec().unwrap(), &vec![pattern; n]);
    let weak = Arc::downgrade(&ev);
    drop(ev);
    assert!(weak.upgrade().is_some(), "the executable holds the event");
    drop(exec);
    s.synchronize().unwrap();
    eventually("the event released after the executable", || {
        weak.upgrade().is_none()
    });
}
