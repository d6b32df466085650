//! The rest of the graph API: node queries, destruction and dependency removal, parameter
//! setters on graphs, kernel-node attributes (L2 access policy window, priority), event and
//! child-graph nodes, copies to and from module variables, user objects, executable flags, and
//! capture dependency updates; each against a CPU reference on fresh random input.
//!
//! External semaphore nodes are not run here: a semaphore needs a descriptor exported by
//! another API (Vulkan) or process, which this suite does not have.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::common::{
    assert_close, assert_same, eventually, random_ints_f32, random_u32, rng, vadd_module,
};
use cuda_runtime::graph::{
    CaptureDependencies, CaptureMode, Graph, GraphNodeType, InstantiateFlags, InstantiateOptions,
    MemsetValue, UserObject,
};
use cuda_runtime::{
    kernel_args, kernels, AccessPolicyWindow, AccessProperty, Device, DeviceBuffer, DeviceRead,
    Error, ErrorCode, Event, LaunchConfig, Module, Stream,
};

// Exclusive tests capture: a `Device::synchronize` of another test meanwhile fails
// (StreamCaptureUnsupported) and invalidates the capture, whatever its mode (seen on the H200).
crate::tests![
    node_queries_removal_and_find_in_clone,
    graph_setters_change_new_executables_and_keep_operands,
    kernel_node_access_policy_window_and_priority,
    event_nodes_get_and_set_on_graphs_and_executables,
    child_graph_copy_and_executable_child_update,
    symbol_copy_nodes_round_trip_through_constant_memory,
    user_objects_live_until_graphs_executables_and_handles_are_gone,
    a_long_line_of_clones_drops_and_runs,
    ;
    exclusive:
    capture_dependencies_added_and_replaced,
];

fn node_queries_removal_and_find_in_clone() {
    let mut r = rng();
    let n = 5000;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let pattern = r.u32(..);
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut d = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut e = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();

    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    let cp = g.add_memcpy_node(&[k], &mut d, &c).unwrap();
    let set = g
        .add_memset_node(&[k], &mut e, MemsetValue::U32(pattern))
        .unwrap();
    let extra = g.add_empty_node(&[cp, set]).unwrap();

    // Parameters read back.
    let kp = g.kernel_node_params(k).unwrap();
    assert_eq!(kp.function, vadd.as_raw());
    assert_eq!(kp.config, cfg);
    let mp = g.memset_node_params(set).unwrap();
    assert_eq!(mp.dst, e.device_ptr());
    assert_eq!(mp.value, MemsetValue::U32(pattern));
    assert_eq!((mp.width, mp.height), (n, 1));
    let cpp = g.memcpy_node_params(cp).unwrap();
    assert_eq!(cpp.srcDevice, c.device_ptr());
    assert_eq!(cpp.dstDevice, d.device_ptr());
    assert_eq!(cpp.WidthInBytes, 4 * n);
    // The wrong kind of node is refused by the crate, naming it.
    let err = g.memset_node_params(k).unwrap_err();
    assert!(err.to_string().contains("Kernel"), "{err}");

    // Removing an edge and destroying a node.
    assert_eq!(g.edges().unwrap().len(), 4);
    g.remove_dependencies(&[k], &[set]).unwrap();
    let edges = g.edges().unwrap();
    assert_eq!(edges.len(), 3);
    assert!(!edges.contains(&(k, set)));
    let mut roots = g.root_nodes().unwrap();
    roots.sort_by_key(|n| n.as_raw() as usize);
    let mut want = vec![k, set];
    want.sort_by_key(|n| n.as_raw() as usize);
    assert_eq!(roots, want);
    let before = g.instantiate().unwrap();
    assert!(before.node_enabled(set).unwrap());
    g.destroy_node(extra).unwrap();
    // The executable made before keeps its copy, but the destroyed node cannot be named.
    let err = before.node_enabled(extra).unwrap_err();
    assert!(err.to_string().contains("destroyed"), "{err}");
    drop(before);
    assert_eq!(g.nodes().unwrap().len(), 3);
    assert_eq!(g.dependents(cp).unwrap(), vec![]);
    let err = g.node_type(extra).unwrap_err();
    assert!(err.to_string().contains("destroyed"), "{err}");
    assert!(g.destroy_node(extra).is_err());

    // Find in a clone.
    let clone = g.try_clone().unwrap();
    let kc = g.find_in_clone(k, &clone).unwrap();
    assert_ne!(kc, k);
    assert_eq!(clone.node_type(kc).unwrap(), GraphNodeType::Kernel);
    assert_eq!(clone.kernel_node_params(kc).unwrap().config, cfg);
    let other = Graph::new().unwrap();
    assert!(g.find_in_clone(k, &other).is_err());

    // The graph still runs its three nodes.
    let exec = g
        .instantiate_with(&InstantiateOptions {
            use_node_priority: true,
            auto_free_on_launch: true,
            ..Default::default()
        })
        .unwrap();
    // The driver reports auto-free; it drops the node-priority flag from the report (seen on
    // the H200, driver 580), as it drops `UPLOAD`.
    let flags = exec.flags().unwrap();
    assert!(
        flags.contains(InstantiateFlags::AUTO_FREE_ON_LAUNCH)
            && (InstantiateFlags::AUTO_FREE_ON_LAUNCH | InstantiateFlags::USE_NODE_PRIORITY)
                .contains(flags),
        "{flags:?}"
    );
    assert_eq!(
        clone.instantiate().unwrap().flags().unwrap(),
        InstantiateFlags::empty()
    );
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let sum: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("c", &c.to_vec().unwrap(), &sum);
    assert_same("d", &d.to_vec().unwrap(), &sum);
    assert_same("e", &e.to_vec().unwrap(), &vec![pattern; n]);

    // Memory node parameters.
    let mut gm = Graph::new().unwrap();
    let len = 1000 + r.usize(..1000);
    let (alloc, mem) = gm.add_mem_alloc_node::<u32>(&[], len).unwrap();
    let ptr = mem.device_ptr();
    assert_eq!(gm.mem_alloc_node_params(alloc).unwrap(), (ptr, 4 * len));
    let free = gm.add_mem_free_node(&[], mem).unwrap();
    assert_eq!(gm.mem_free_node_params(free).unwrap(), ptr);
    // Memory nodes are not destroyed alone, and their graph's edges are not removed.
    assert!(gm.destroy_node(alloc).is_err());
    assert!(gm.remove_dependencies(&[alloc], &[free]).is_err());
}

fn graph_setters_change_new_executables_and_keep_operands() {
    let mut r = rng();
    let n = 3000;
    let (ha, hb, hb2) = (
        random_ints_f32(&mut r, n),
        random_ints_f32(&mut r, n),
        random_ints_f32(&mut r, n),
    );
    let (v1, v2) = (r.u32(..), r.u32(..));
    let (hs1, hs2) = (random_u32(&mut r, n), random_u32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut set1 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let src1 = DeviceBuffer::from_slice(&hs1).unwrap();
    let mut dst1 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let (calls1, calls2) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    let ms = g
        .add_memset_node(&[], &mut set1, MemsetValue::U32(v1))
        .unwrap();
    let mc = g.add_memcpy_node(&[], &mut dst1, &src1).unwrap();
    let c1 = calls1.clone();
    let h = g
        .add_host_node(&[k, ms, mc], move || {
            c1.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let old = g.instantiate().unwrap();

    // New operands, each dropped by us right after the setter: the graph keeps them.
    let b2 = DeviceBuffer::from_slice(&hb2).unwrap();
    let mut c2 = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut set2 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let src2 = DeviceBuffer::from_slice(&hs2).unwrap();
    let mut dst2 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    // SAFETY: as above.
    unsafe { g.set_kernel_node_params(k, &vadd, &cfg, &kernel_args![&a, n, &b2, n, &mut c2, n]) }
        .unwrap();
    drop(b2);
    g.set_memset_node_params(ms, &mut set2, MemsetValue::U32(v2))
        .unwrap();
    g.set_memcpy_node_params(mc, &mut dst2, &src2).unwrap();
    drop(src2);
    let c2c = calls2.clone();
    g.set_host_node_params(h, move || {
        c2c.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    assert_eq!(
        g.memset_node_params(ms).unwrap().value,
        MemsetValue::U32(v2)
    );
    let hp = g.host_node_params(h).unwrap();
    assert!(hp.fn_.is_some() && !hp.userData.is_null());
    // Wrong kinds are refused before the driver.
    assert!(g
        .set_memset_node_params(mc, &mut set2, MemsetValue::U8(1))
        .is_err());
    assert!(g.set_host_node_params(k, || {}).is_err());

    let new = g.instantiate().unwrap();
    drop(g);
    let s = Stream::new().unwrap();
    new.launch(&s).unwrap();
    new.launch(&s).unwrap();
    s.synchronize().unwrap();
    let sum2: Vec<f32> = ha.iter().zip(&hb2).map(|(x, y)| x + y).collect();
    assert_same("c2", &c2.to_vec().unwrap(), &sum2);
    assert_same("set2", &set2.to_vec().unwrap(), &vec![v2; n]);
    assert_same("dst2", &dst2.to_vec().unwrap(), &hs2);
    assert!(
        c.to_vec().unwrap().iter().all(|x| x.is_nan()),
        "old output untouched"
    );
    assert_eq!(calls2.load(Ordering::SeqCst), 2);
    assert_eq!(calls1.load(Ordering::SeqCst), 0);

    // The executable made before still has the old parameters.
    old.launch(&s).unwrap();
    s.synchronize().unwrap();
    let sum: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("c", &c.to_vec().unwrap(), &sum);
    assert_same("set1", &set1.to_vec().unwrap(), &vec![v1; n]);
    assert_same("dst1", &dst1.to_vec().unwrap(), &hs1);
    assert_eq!(calls1.load(Ordering::SeqCst), 1);
}

fn kernel_node_access_policy_window_and_priority() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let n = 1 << 16;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut d = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k1 = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    // SAFETY: as above.
    let k2 = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&b, n, &a, n, &mut d, n]) }
        .unwrap();
    assert_eq!(
        g.kernel_node_access_policy_window(k1).unwrap().num_bytes,
        0,
        "no window by default"
    );
    let ratio = 0.25 + 0.5 * r.f32();
    let w = AccessPolicyWindow::over(
        &a,
        ratio,
        AccessProperty::Persisting,
        AccessProperty::Streaming,
    );
    g.set_kernel_node_access_policy_window(k1, &w).unwrap();
    assert_eq!(g.kernel_node_access_policy_window(k1).unwrap(), w);
    let (least, greatest) = dev.stream_priority_range().unwrap();
    g.set_kernel_node_priority(k1, greatest).unwrap();
    assert_eq!(g.kernel_node_priority(k1).unwrap(), greatest);
    g.copy_kernel_node_attributes(k2, k1).unwrap();
    assert_eq!(g.kernel_node_access_policy_window(k2).unwrap(), w);
    assert_eq!(g.kernel_node_priority(k2).unwrap(), greatest);

    // Bad values are the crate's errors, naming them.
    let bad = AccessPolicyWindow {
        hit_ratio: 1.5,
        ..w
    };
    let e = g
        .set_kernel_node_access_policy_window(k1, &bad)
        .unwrap_err();
    assert!(e.to_string().contains("1.5"), "{e}");
    let e = g.set_kernel_node_priority(k1, least + 1).unwrap_err();
    assert!(e.to_string().contains(&(least + 1).to_string()), "{e}");
    let empty = g.add_empty_node(&[]).unwrap();
    assert!(g.kernel_node_priority(empty).is_err());
    assert!(g.copy_kernel_node_attributes(empty, k1).is_err());

    // The hints change no result.
    let exec = g
        .instantiate_with(&InstantiateOptions {
            use_node_priority: true,
            ..Default::default()
        })
        .unwrap();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let sum: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    assert_same("c", &c.to_vec().unwrap(), &sum);
    assert_same("d", &d.to_vec().unwrap(), &sum);
}

fn event_nodes_get_and_set_on_graphs_and_executables() {
    let mut r = rng();
    let n = 4096;
    let pattern = r.u32(..);
    let mut x = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let e1 = Arc::new(Event::new().unwrap());
    let e2 = Arc::new(Event::new().unwrap());
    let w1 = Arc::new(Event::new().unwrap());
    let w2 = Arc::new(Event::new().unwrap());
    let s = Stream::new().unwrap();
    w1.record(&s).unwrap();
    w2.record(&s).unwrap();
    let mut g = Graph::new().unwrap();
    let wait = g.add_event_wait_node(&[], &w1).unwrap();
    let set = g
        .add_memset_node(&[wait], &mut x, MemsetValue::U32(pattern))
        .unwrap();
    let rec = g.add_event_record_node(&[set], &e1).unwrap();
    assert_eq!(g.event_record_node_event(rec).unwrap(), e1.as_raw());
    assert_eq!(g.event_wait_node_event(wait).unwrap(), w1.as_raw());
    assert!(g.event_record_node_event(wait).is_err());
    g.set_event_record_node_event(rec, &e2).unwrap();
    g.set_event_wait_node_event(wait, &w2).unwrap();
    assert_eq!(g.event_record_node_event(rec).unwrap(), e2.as_raw());
    assert_eq!(g.event_wait_node_event(wait).unwrap(), w2.as_raw());
    let weak2 = Arc::downgrade(&e2);
    drop(e2);
    assert!(weak2.upgrade().is_some(), "the graph keeps the new event");

    let mut exec = g.instantiate().unwrap();
    exec.launch(&s).unwrap();
    let e2 = weak2.upgrade().unwrap();
    e2.synchronize().unwrap();
    assert!(e2.query().unwrap());
    assert_same("x", &x.to_vec().unwrap(), &vec![pattern; n]);

    // Per-executable: a third event, dropped by us; the executable records it.
    let e3 = Arc::new(Event::new().unwrap());
    exec.set_event_record_node_event(rec, &e3).unwrap();
    exec.set_event_wait_node_event(wait, &w1).unwrap();
    let weak3 = Arc::downgrade(&e3);
    let s2 = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s2.wait_event(&e3).unwrap();
    drop(e3);
    s2.synchronize().unwrap();
    s.synchronize().unwrap();
    assert!(weak3.upgrade().is_some(), "the executable keeps its event");
    drop((exec, g));
    drop(e2);
    eventually("the events released", || {
        weak3.upgrade().is_none() && weak2.upgrade().is_none()
    });
}

fn child_graph_copy_and_executable_child_update() {
    let mut r = rng();
    let n = 2048;
    let (p1, p2) = (r.u32(..), r.u32(..));
    let poison = random_u32(&mut r, n);
    let mut x = DeviceBuffer::from_slice(&poison).unwrap();
    let mut y = DeviceBuffer::from_slice(&poison).unwrap();
    let mut child = Graph::new().unwrap();
    let cs = child
        .add_memset_node(&[], &mut x, MemsetValue::U32(p1))
        .unwrap();
    let mut parent = Graph::new().unwrap();
    let ch = parent.add_child_graph_node(&[], &child).unwrap();
    drop(child);
    let copy = parent.child_graph(ch).unwrap();
    let nodes = copy.nodes().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_ne!(nodes[0], cs, "a copy has nodes of its own");
    let mp = copy.memset_node_params(nodes[0]).unwrap();
    assert_eq!((mp.dst, mp.value), (x.device_ptr(), MemsetValue::U32(p1)));
    let empty = parent.add_empty_node(&[]).unwrap();
    assert!(parent.child_graph(empty).is_err());

    let mut exec = parent.instantiate().unwrap();
    // The copy is independent: it outlives the parent and runs alone.
    drop(parent);
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("x", &x.to_vec().unwrap(), &vec![p1; n]);
    x.copy_from_host(&poison).unwrap();
    copy.instantiate().unwrap().launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("x by the copy", &x.to_vec().unwrap(), &vec![p1; n]);

    // The executable's child updated to write y with p2; the new child dropped by us.
    x.copy_from_host(&poison).unwrap();
    let mut child2 = Graph::new().unwrap();
    child2
        .add_memset_node(&[], &mut y, MemsetValue::U32(p2))
        .unwrap();
    exec.set_child_graph_node_params(ch, &child2).unwrap();
    drop(child2);
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("y", &y.to_vec().unwrap(), &vec![p2; n]);
    assert_same("x untouched", &x.to_vec().unwrap(), &poison);
    // Another topology is the driver's refusal.
    let mut two = Graph::new().unwrap();
    let e = two.add_empty_node(&[]).unwrap();
    two.add_empty_node(&[e]).unwrap();
    assert!(exec.set_child_graph_node_params(ch, &two).is_err());
}

fn symbol_copy_nodes_round_trip_through_constant_memory() {
    let mut r = rng();
    let n = 3000;
    let coeffs = |r: &mut fastrand::Rng| {
        let mut c = [0f32; 16];
        for k in c.iter_mut() {
            *k = r.f32() - 0.5;
        }
        c
    };
    let (c1, c2) = (coeffs(&mut r), coeffs(&mut r));
    let x: Vec<f32> = (0..n).map(|_| r.f32() * 2.0 - 1.0).collect();
    let horner = |c: &[f32; 16]| -> Vec<f32> {
        x.iter()
            .map(|&v| c.iter().rev().fold(0f32, |acc, &k| acc * v + k))
            .collect()
    };
    // A module of our own: its variables are not shared with other tests.
    let m = Module::from_ptx(kernels::constant_memory::PTX).unwrap();
    let poly = m.function("poly_eval").unwrap();
    let sym = m.global::<[f32; 16]>("coeffs").unwrap();
    let src1 = DeviceBuffer::from_slice(&[c1]).unwrap();
    let src2 = DeviceBuffer::from_slice(&[c2]).unwrap();
    let dx = DeviceBuffer::from_slice(&x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut back = DeviceBuffer::from_slice(&[[f32::NAN; 16]]).unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();

    let mut g = Graph::new().unwrap();
    let to = g.add_memcpy_node_to_symbol(&[], &sym, &src1).unwrap();
    // SAFETY: poly_eval stays below the lengths given.
    let k =
        unsafe { g.add_kernel_node(&[to], &poly, &cfg, &kernel_args![&dx, n, &mut dy, n, 15i32]) }
            .unwrap();
    let from = g
        .add_memcpy_node_from_symbol(&[k], &mut back, &sym)
        .unwrap();
    let p = g.memcpy_node_params(to).unwrap();
    assert_eq!((p.dstDevice, p.WidthInBytes), (sym.as_raw(), 64));
    // One element only.
    let two = DeviceBuffer::from_slice(&[c1, c2]).unwrap();
    assert!(matches!(
        g.add_memcpy_node_to_symbol(&[], &sym, &two).unwrap_err(),
        Error::LengthMismatch { .. }
    ));
    let mut exec = g.instantiate().unwrap();
    // The module, its function and the variable's handle dropped: the graph keeps the module.
    drop((poly, sym));
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_close("y with c1", &dy.to_vec().unwrap(), &horner(&c1), 1e-4);
    assert_eq!(back.to_vec().unwrap(), vec![c1]);

    // The executable's copy node pointed at the second coefficients.
    let sym = m.global::<[f32; 16]>("coeffs").unwrap();
    exec.set_memcpy_node_to_symbol(to, &sym, &src2).unwrap();
    let mut back2 = DeviceBuffer::from_slice(&[[f32::NAN; 16]]).unwrap();
    exec.set_memcpy_node_from_symbol(from, &mut back2, &sym)
        .unwrap();
    drop(m);
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_close("y with c2", &dy.to_vec().unwrap(), &horner(&c2), 1e-4);
    assert_eq!(back2.to_vec().unwrap(), vec![c2]);
    assert_eq!(back.to_vec().unwrap(), vec![c1], "old target untouched");

    // And on the graph: a new executable copies c2 in and back out to `back`.
    g.set_memcpy_node_to_symbol(to, &sym, &src2).unwrap();
    g.set_memcpy_node_from_symbol(from, &mut back, &sym)
        .unwrap();
    drop(sym);
    let exec2 = g.instantiate().unwrap();
    drop(g);
    exec2.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(back.to_vec().unwrap(), vec![c2]);
}

struct Flag(Arc<AtomicBool>, u64);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn user_objects_live_until_graphs_executables_and_handles_are_gone() {
    let mut r = rng();
    let tag = r.u64(..);
    let dropped = Arc::new(AtomicBool::new(false));
    let obj = UserObject::new(Flag(dropped.clone(), tag)).unwrap();
    assert_eq!(obj.get().1, tag);
    let obj2 = obj.try_clone().unwrap();
    assert_eq!(obj2.get().1, tag);
    assert_eq!(obj2.as_raw(), obj.as_raw());
    let mut g = Graph::new().unwrap();
    g.add_empty_node(&[]).unwrap();
    g.retain_user_object(&obj).unwrap();
    g.retain_user_object(&obj).unwrap();
    g.release_user_object(&obj).unwrap();
    g.release_user_object(&obj).unwrap();
    let e = g.release_user_object(&obj).unwrap_err();
    assert!(e.to_string().contains("retain_user_object"), "{e}");
    g.retain_user_object(&obj).unwrap();
    let exec = g.instantiate().unwrap();
    drop((obj, obj2, g));
    Device::current().unwrap().synchronize().unwrap();
    assert!(
        !dropped.load(Ordering::SeqCst),
        "the executable holds a reference"
    );
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    drop(exec);
    s.synchronize().unwrap();
    eventually("the value dropped after the last reference", || {
        dropped.load(Ordering::SeqCst)
    });

    // An object no graph holds goes with its last handle.
    let gone = Arc::new(AtomicBool::new(false));
    let o = UserObject::new(Flag(gone.clone(), tag)).unwrap();
    let o2 = o.try_clone().unwrap();
    drop(o);
    Device::current().unwrap().synchronize().unwrap();
    assert!(!gone.load(Ordering::SeqCst));
    drop(o2);
    eventually("the value dropped with its last handle", || {
        gone.load(Ordering::SeqCst)
    });
}

fn capture_dependencies_added_and_replaced() {
    let mut r = rng();
    let n = 4000;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let poison = vec![f32::NAN; n];
    let mut c = DeviceBuffer::from_slice(&poison).unwrap();
    let mut d = DeviceBuffer::from_slice(&poison).unwrap();
    let mut e = DeviceBuffer::from_slice(&poison).unwrap();
    // Non-blocking: a capture on a blocking stream makes other tests' legacy-stream work fail
    // (cudaErrorStreamCaptureImplicit), whatever the capture mode.
    let s = Stream::with_flags(cuda_runtime::StreamFlags::NON_BLOCKING).unwrap();
    // Outside a capture: refused.
    let err = s
        .update_capture_dependencies(&[], CaptureDependencies::Set)
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidValue, "{err}");
    let foreign = Graph::new().unwrap().add_empty_node(&[]).unwrap();
    let g = s
        .capture(CaptureMode::ThreadLocal, |s| {
            // SAFETY: vadd stays below the lengths given.
            unsafe { vadd.launch(s, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }?;
            let first = s.capture_info()?.dependencies;
            assert_eq!(first.len(), 1);
            // SAFETY: as above.
            unsafe { vadd.launch(s, &cfg, &kernel_args![&b, n, &a, n, &mut d, n]) }?;
            // The third kernel depends on nothing: a second root.
            s.update_capture_dependencies(&[], CaptureDependencies::Set)?;
            // SAFETY: as above.
            unsafe { vadd.launch(s, &cfg, &kernel_args![&a, n, &a, n, &mut e, n]) }?;
            // Then a join of everything so far: an empty node after both branches.
            s.update_capture_dependencies(&first, CaptureDependencies::Add)?;
            assert_eq!(s.capture_info()?.dependencies.len(), 2);
            Ok(())
        })
        .unwrap();
    assert_eq!(g.nodes().unwrap().len(), 3);
    assert_eq!(g.root_nodes().unwrap().len(), 2);
    assert_eq!(g.edges().unwrap().len(), 1);
    // A node of another graph fails the call and the capture's end.
    let failed = s.capture(CaptureMode::ThreadLocal, |s| {
        // SAFETY: as above.
        unsafe { vadd.launch(s, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }?;
        let e = s
            .update_capture_dependencies(&[foreign], CaptureDependencies::Add)
            .unwrap_err();
        assert!(e.to_string().contains("not a node"), "{e}");
        Ok(())
    });
    assert!(failed.is_err());
    let exec = g.instantiate().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let sum: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    let double: Vec<f32> = ha.iter().map(|x| x + x).collect();
    assert_same("c", &c.to_vec().unwrap(), &sum);
    assert_same("d", &d.to_vec().unwrap(), &sum);
    assert_same("e", &e.to_vec().unwrap(), &double);
}

/// Review rev-e15: each clone keeps its source's references as a nested chain, so a program
/// that clones its latest graph and drops the older one nests them as deep as the number of
/// clones; dropping the last recursed once per level and overflowed the stack (shown on the
/// null driver's unit test `deeply_nested_chains_drop_without_recursion`). NOT yet run on a
/// GPU.
fn a_long_line_of_clones_drops_and_runs() {
    let mut r = rng();
    let n = 4096;
    let pattern = r.u32(..);
    let mut out = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut g = Graph::new().unwrap();
    g.add_memset_node(&[], &mut out, MemsetValue::U32(pattern))
        .unwrap();
    for _ in 0..100_000 {
        let next = g.try_clone().unwrap();
        g = next;
    }
    let exec = g.instantiate().unwrap();
    // The test thread's stack (2 MiB) held a recursion per clone before the fix.
    drop(g);
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    drop(exec);
    Device::current().unwrap().synchronize().unwrap();
    assert_same(
        "the last clone's memset",
        &out.to_vec().unwrap(),
        &vec![pattern; n],
    );
}
