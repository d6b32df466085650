//! Graph nodes beyond the basics: per-node executable updates of memset, copy and host nodes,
//! memory allocation and free nodes (graph memory), instantiate options, 3-D copy nodes and
//! conditional nodes; each against a CPU reference on fresh random input.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::common::{assert_same, random_ints_f32, random_u32, rng, vadd_module};
use cuda_runtime::graph::{
    ConditionalKind, Graph, GraphMemAttribute, InstantiateOptions, MemsetValue,
};
use cuda_runtime::{
    copy_3d, kernel_args, kernels, Array, ArrayFlags, Copy3D, Device, DeviceBuffer, Error, Extent,
    Function, HostAllocFlags, HostPitched, HostPitchedMut, KernelArg, LaunchConfig, Module,
    PinnedBuffer, PitchedBuffer, Pos, Stream,
};

// Exclusive tests capture: a `Device::synchronize` of another test meanwhile fails
// (StreamCaptureUnsupported) and invalidates the capture, whatever its mode (seen on the H200).
crate::tests![
    memset_memcpy_and_host_node_updates_change_future_launches,
    node_updates_keep_new_operands_alive,
    graph_memory_round_trip_through_kernel_and_copies,
    graph_memory_is_refused_outside_its_graph,
    graph_memory_attributes_and_trim,
    instantiate_options_upload_priority_and_device_launch,
    copy_3d_nodes_through_an_array_match_a_cpu_reference,
    if_nodes_follow_the_default_and_a_device_decision,
    while_node_runs_its_body_until_the_counter_reaches_the_limit,
    while_node_with_the_device_runtime_linked_at_run_time,
    conditional_bodies_are_refused_alone_and_keep_their_buffers,
    a_copy_cannot_bypass_the_while_body_check,
    kernel_node_updates_pass_every_parameter_size_and_padding,
    kernel_node_updates_check_in_full_what_no_earlier_update_kept,
    executable_updates_on_one_thread_while_another_changes_the_graph,
    ;
    exclusive:
    while_bodies_of_child_graphs_only_are_refused,
];

fn memset_memcpy_and_host_node_updates_change_future_launches() {
    let mut r = rng();
    let n = 4099;
    let (v1, v2) = (r.u32(..), r.u32(..));
    let (h_src1, h_src2) = (random_u32(&mut r, n), random_u32(&mut r, n));
    let mut set1 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut set2 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let src1 = DeviceBuffer::from_slice(&h_src1).unwrap();
    let src2 = DeviceBuffer::from_slice(&h_src2).unwrap();
    let mut dst1 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut dst2 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let (c1, c2) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

    let mut g = Graph::new().unwrap();
    let ms = g
        .add_memset_node(&[], &mut set1, MemsetValue::U32(v1))
        .unwrap();
    let mc = g.add_memcpy_node(&[], &mut dst1, &src1).unwrap();
    let c = c1.clone();
    let h = g
        .add_host_node(&[ms, mc], move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let _ = h;
    let mut exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("memset 1", &set1.to_vec().unwrap(), &vec![v1; n]);
    assert_same("memcpy 1", &dst1.to_vec().unwrap(), &h_src1);
    assert_eq!(c1.load(Ordering::SeqCst), 1);

    // Poison the first operands, point the nodes at the second ones.
    let poison1 = random_u32(&mut r, n);
    set1.copy_from_host(&poison1).unwrap();
    dst1.copy_from_host(&poison1).unwrap();
    exec.set_memset_node_params(ms, &mut set2, MemsetValue::U32(v2))
        .unwrap();
    exec.set_memcpy_node_params(mc, &mut dst2, &src2).unwrap();
    let c = c2.clone();
    exec.set_host_node_params(h, move || {
        c.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    for _ in 0..3 {
        exec.launch(&s).unwrap();
    }
    s.synchronize().unwrap();
    assert_same("memset 2", &set2.to_vec().unwrap(), &vec![v2; n]);
    assert_same("memcpy 2", &dst2.to_vec().unwrap(), &h_src2);
    assert_same(
        "old memset target untouched",
        &set1.to_vec().unwrap(),
        &poison1,
    );
    assert_same(
        "old copy target untouched",
        &dst1.to_vec().unwrap(),
        &poison1,
    );
    assert_eq!(
        c1.load(Ordering::SeqCst),
        1,
        "the old closure is not called"
    );
    assert_eq!(
        c2.load(Ordering::SeqCst),
        3,
        "the new closure at every launch"
    );

    // The wrong kind of node is the driver's error; a foreign node is the crate's.
    let e = exec
        .set_memset_node_params(mc, &mut set2, MemsetValue::U32(1))
        .unwrap_err();
    assert_eq!(e.code(), cuda_runtime::ErrorCode::InvalidValue, "{e}");
    let mut other = Graph::new().unwrap();
    let foreign = other.add_empty_node(&[]).unwrap();
    assert!(matches!(
        exec.set_host_node_params(foreign, || {}).unwrap_err(),
        Error::ForeignGraphNode { .. }
    ));
    // Shape errors are caught before the driver: a 3-byte memset of u32 elements.
    let mut odd = DeviceBuffer::<u8>::new(3).unwrap();
    assert!(matches!(
        exec.set_memset_node_params(ms, &mut odd, MemsetValue::U32(1))
            .unwrap_err(),
        Error::InvalidValue { .. }
    ));
}

fn node_updates_keep_new_operands_alive() {
    let mut r = rng();
    let n = 1 << 16;
    let h_new = random_u32(&mut r, n);
    let src0 = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut dst = DeviceBuffer::<u32>::new(n).unwrap();
    let mut g = Graph::new().unwrap();
    let mc = g.add_memcpy_node(&[], &mut dst, &src0).unwrap();
    let mut exec = g.instantiate().unwrap();
    {
        // The new source exists only inside this block: the executable keeps it.
        let src_new = DeviceBuffer::from_slice(&h_new).unwrap();
        exec.set_memcpy_node_params(mc, &mut dst, &src_new).unwrap();
    }
    // Allocations made now must not take the dropped source's memory.
    let junk: Vec<DeviceBuffer<u32>> = (0..8)
        .map(|_| DeviceBuffer::from_slice(&vec![0xdead_beef; n]).unwrap())
        .collect();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("copy from the kept source", &dst.to_vec().unwrap(), &h_new);
    // Many updates with the same operands, then one more launch.
    for _ in 0..1000 {
        exec.set_memcpy_node_params(mc, &mut dst, &src0).unwrap();
    }
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same(
        "copy from src0",
        &dst.to_vec().unwrap(),
        &src0.to_vec().unwrap(),
    );
    drop(junk);
}

fn graph_memory_round_trip_through_kernel_and_copies() {
    let mut r = rng();
    let n = 12_345;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut sum = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut back = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();

    let mut g = Graph::new().unwrap();
    let (alloc, mut tmp) = g.add_mem_alloc_node::<f32>(&[], n).unwrap();
    assert_eq!(tmp.len(), n);
    assert_eq!(tmp.alloc_node(), alloc);
    // No dependency given: the crate orders the copy after the allocation.
    let fill = g.add_memcpy_node_to_graph_mem(&[], &mut tmp, &a).unwrap();
    assert!(g.dependencies(fill).unwrap().contains(&alloc));
    // SAFETY: vadd stays below the lengths given; tmp holds n floats inside the launch.
    let k = unsafe {
        g.add_kernel_node(
            &[fill],
            &vadd,
            &cfg,
            &kernel_args![&tmp, n, &b, n, &mut sum, n],
        )
    }
    .unwrap();
    let out = g
        .add_memcpy_node_from_graph_mem(&[fill], &mut back, &tmp)
        .unwrap();
    // The free depends on every user, though only `out` is named.
    let free = g.add_mem_free_node(&[out], tmp).unwrap();
    let free_deps = g.dependencies(free).unwrap();
    assert!(
        free_deps.contains(&k) && free_deps.contains(&out),
        "{free_deps:?}"
    );
    assert_eq!(
        g.node_type(alloc).unwrap(),
        cuda_runtime::graph::GraphNodeType::MemAlloc
    );
    assert_eq!(
        g.node_type(free).unwrap(),
        cuda_runtime::graph::GraphNodeType::MemFree
    );

    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    // Relaunches work: each launch frees what it allocated.
    for round in 0..3 {
        sum.fill(f32::NAN).unwrap();
        back.fill(f32::NAN).unwrap();
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        assert_same(
            &format!("sum, round {round}"),
            &sum.to_vec().unwrap(),
            &want,
        );
        assert_same(
            &format!("back, round {round}"),
            &back.to_vec().unwrap(),
            &ha,
        );
    }
}

fn graph_memory_is_refused_outside_its_graph() {
    let n = 256;
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut g = Graph::new().unwrap();
    let (_, tmp) = g.add_mem_alloc_node::<f32>(&[], n).unwrap();
    let s = Stream::new().unwrap();

    // A stream launch.
    // SAFETY: refused before anything runs.
    let e = unsafe { vadd.launch(&s, &cfg, &kernel_args![&tmp, n, &a, n, &mut c, n]) }.unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    // A node of another graph.
    let mut other = Graph::new().unwrap();
    // SAFETY: refused before the driver sees it.
    let e = unsafe {
        other.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&tmp, n, &a, n, &mut c, n])
    }
    .unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    let mut back = DeviceBuffer::<f32>::zeroed(n).unwrap();
    assert!(matches!(
        other
            .add_memcpy_node_from_graph_mem(&[], &mut back, &tmp)
            .unwrap_err(),
        Error::InvalidValue { .. }
    ));
    // Instantiating while the allocation is not freed.
    let e = g.instantiate().unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    // A per-node update of another executable.
    // SAFETY: vadd stays below the lengths given.
    let k =
        unsafe { other.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &a, n, &mut c, n]) }
            .unwrap();
    let mut exec = other.instantiate().unwrap();
    // SAFETY: refused before the driver sees it.
    let e = unsafe {
        exec.set_kernel_node_params(k, &vadd, &cfg, &kernel_args![&tmp, n, &a, n, &mut c, n])
    }
    .unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    // A whole update from a graph with memory nodes.
    g.add_mem_free_node(&[], tmp).unwrap();
    assert!(matches!(
        exec.update(&g).unwrap_err(),
        Error::InvalidValue { .. }
    ));
    // Freed: now it instantiates.
    let e2 = g.instantiate().unwrap();
    e2.launch(&s).unwrap();
    s.synchronize().unwrap();
}

fn graph_memory_attributes_and_trim() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    dev.graph_mem_trim().unwrap();
    dev.reset_graph_mem_high(GraphMemAttribute::UsedMemHigh)
        .unwrap();
    dev.reset_graph_mem_high(GraphMemAttribute::ReservedMemHigh)
        .unwrap();
    assert!(matches!(
        dev.reset_graph_mem_high(GraphMemAttribute::UsedMemCurrent)
            .unwrap_err(),
        Error::InvalidValue { .. }
    ));
    let n = (8 << 20) + r.usize(0..1024);
    let h = random_u32(&mut r, 1024);
    let src = DeviceBuffer::from_slice(&h).unwrap();
    let mut back = DeviceBuffer::<u32>::new(1024).unwrap();
    let mut g = Graph::new().unwrap();
    let (_, mut big) = g.add_mem_alloc_node::<u32>(&[], n).unwrap();
    let set = g
        .add_graph_mem_memset_node(&[], &mut big, MemsetValue::U32(1))
        .unwrap();
    let (_, mut small) = g.add_mem_alloc_node::<u32>(&[], 1024).unwrap();
    let cp = g
        .add_memcpy_node_to_graph_mem(&[set], &mut small, &src)
        .unwrap();
    let out = g
        .add_memcpy_node_from_graph_mem(&[cp], &mut back, &small)
        .unwrap();
    g.add_mem_free_node(&[out], small).unwrap();
    g.add_mem_free_node(&[out], big).unwrap();
    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("through graph memory", &back.to_vec().unwrap(), &h);
    let used_high = dev
        .graph_mem_attribute(GraphMemAttribute::UsedMemHigh)
        .unwrap();
    let reserved_high = dev
        .graph_mem_attribute(GraphMemAttribute::ReservedMemHigh)
        .unwrap();
    // Both allocations were live at once in the launch.
    let both = ((n + 1024) * 4) as u64;
    assert!(used_high >= both, "used high {used_high} < {both}");
    assert!(
        reserved_high >= used_high,
        "reserved high {reserved_high} < used high {used_high}"
    );
    let used_now = dev
        .graph_mem_attribute(GraphMemAttribute::UsedMemCurrent)
        .unwrap();
    assert!(
        used_now <= used_high,
        "used {used_now} > its high {used_high}"
    );
    drop(exec);
    s.synchronize().unwrap();
    dev.synchronize().unwrap();
    dev.graph_mem_trim().unwrap();
}

fn instantiate_options_upload_priority_and_device_launch() {
    let mut r = rng();
    let n = 5000;
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let want: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }.unwrap();
    let s = Stream::new().unwrap();

    let opts = InstantiateOptions {
        upload: Some(&s),
        use_node_priority: true,
        auto_free_on_launch: true,
        ..Default::default()
    };
    let exec = g.instantiate_with(&opts).unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("uploaded, priority, auto-free", &c.to_vec().unwrap(), &want);

    // Device launch: refused with auto-free; otherwise instantiated (and launched from the
    // host) or refused by the driver with its reason.
    let both = InstantiateOptions {
        device_launch: true,
        auto_free_on_launch: true,
        ..Default::default()
    };
    assert!(matches!(
        g.instantiate_with(&both).unwrap_err(),
        Error::InvalidValue { .. }
    ));
    drop(exec);
    let dl = InstantiateOptions {
        device_launch: true,
        ..Default::default()
    };
    c.fill(f32::NAN).unwrap();
    match g.instantiate_with(&dl) {
        Ok(exec) => {
            exec.upload(&s).unwrap();
            exec.launch(&s).unwrap();
            s.synchronize().unwrap();
            assert_same("device-launch executable", &c.to_vec().unwrap(), &want);
        }
        Err(e) => assert!(
            matches!(e, Error::GraphInstantiate { .. }),
            "device launch refused without the driver's reason: {e}"
        ),
    }
    // A host node cannot be launched from the device: the crate says which node.
    let mut h = Graph::new().unwrap();
    h.add_host_node(&[], || {}).unwrap();
    let e = h.instantiate_with(&dl).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue { value, .. } if value.contains("Host")),
        "{e}"
    );
}

fn copy_3d_nodes_through_an_array_match_a_cpu_reference() {
    let mut r = rng();
    let (w, h, d) = (37, 19, 5);
    let host = random_u32(&mut r, w * h * d);
    let mut src = PitchedBuffer::<u32>::new_3d(Extent::new(w, h, d)).unwrap();
    copy_3d(
        &mut src,
        &HostPitched::new(&host, w, h).unwrap(),
        &Copy3D::new(Extent::new(w, h, d)),
    )
    .unwrap();
    let mut arr = Array::<u32>::new_3d(Extent::new(w, h, d), ArrayFlags::empty()).unwrap();
    arr.copy_from_host(&random_u32(&mut r, w * h * d)).unwrap();
    let mut out = PitchedBuffer::<u32>::new_3d(Extent::new(w, h, d)).unwrap();
    out.memset(0xab).unwrap();
    // A sub-box: from (3, 2, 1) in the buffer to (1, 4, 0) in the array, then the whole array
    // out to `out`.
    let sub = Extent::new(20, 11, 3);
    let (sp, dp) = (Pos::new(3, 2, 1), Pos::new(1, 4, 0));
    let mut g = Graph::new().unwrap();
    let before = arr.to_vec().unwrap();
    let n1 = g
        .add_memcpy_3d_node(
            &[],
            &mut arr,
            &src,
            &Copy3D::new(sub).src_pos(sp).dst_pos(dp),
        )
        .unwrap();
    g.add_memcpy_3d_node(&[n1], &mut out, &arr, &Copy3D::new(Extent::new(w, h, d)))
        .unwrap();
    // Checks before the driver: a region leaving the array, host memory, an empty region.
    let mut spare = Array::<u32>::new_3d(Extent::new(w, h, d), ArrayFlags::empty()).unwrap();
    assert!(matches!(
        g.add_memcpy_3d_node(
            &[],
            &mut spare,
            &src,
            &Copy3D::new(sub).dst_pos(Pos::new(w - 5, 0, 0))
        )
        .unwrap_err(),
        Error::OutOfRange { .. }
    ));
    assert!(matches!(
        g.add_memcpy_3d_node(
            &[],
            &mut spare,
            &HostPitched::new(&host, w, h).unwrap(),
            &Copy3D::new(sub)
        )
        .unwrap_err(),
        Error::InvalidValue { .. }
    ));
    assert!(matches!(
        g.add_memcpy_3d_node(&[], &mut spare, &src, &Copy3D::new(Extent::new(0, 1, 1)))
            .unwrap_err(),
        Error::InvalidValue { .. }
    ));
    let mut exec = g.instantiate().unwrap();
    // The source is dropped: the graph keeps it.
    drop(src);
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let mut want = before;
    for z in 0..sub.depth {
        for y in 0..sub.height {
            for x in 0..sub.width {
                let si = ((sp.z + z) * h + sp.y + y) * w + sp.x + x;
                let di = ((dp.z + z) * h + dp.y + y) * w + dp.x + x;
                want[di] = host[si];
            }
        }
    }
    let mut got = vec![0u32; w * h * d];
    copy_3d(
        &mut HostPitchedMut::new(&mut got, w, h).unwrap(),
        &out,
        &Copy3D::new(Extent::new(w, h, d)),
    )
    .unwrap();
    assert_same("3-D copy nodes", &got, &want);
    assert_same("the array itself", &arr.to_vec().unwrap(), &want);

    // A per-node update of the executable takes one-row copies only (the driver's rule):
    // refused before the driver. The graph's node is changed instead (another source and
    // other positions; the new source is dropped at once: the graph keeps it).
    let host2 = random_u32(&mut r, w * h * d);
    let (sp2, dp2) = (Pos::new(0, 5, 2), Pos::new(10, 0, 1));
    let sub2 = Extent::new(25, 9, 2);
    {
        let mut src2 = PitchedBuffer::<u32>::new_3d(Extent::new(w, h, d)).unwrap();
        copy_3d(
            &mut src2,
            &HostPitched::new(&host2, w, h).unwrap(),
            &Copy3D::new(Extent::new(w, h, d)),
        )
        .unwrap();
        let region = Copy3D::new(sub2).src_pos(sp2).dst_pos(dp2);
        let e = exec
            .set_memcpy_3d_node_params(n1, &mut arr, &src2, &region)
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidValue { value, .. } if value.contains("25 x 9 x 2")),
            "{e}"
        );
        g.set_memcpy_3d_node_params(n1, &mut arr, &src2, &region)
            .unwrap();
        // The driver's whole-graph update has the same one-row rule: refused with its reason,
        // the executable unchanged; a new instantiation takes the changed node.
        let e = exec.update(&g).unwrap_err();
        assert!(matches!(e, Error::GraphExecUpdate { .. }), "{e}");
        exec = g.instantiate().unwrap();
    }
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    for z in 0..sub2.depth {
        for y in 0..sub2.height {
            for x in 0..sub2.width {
                let si = ((sp2.z + z) * h + sp2.y + y) * w + sp2.x + x;
                let di = ((dp2.z + z) * h + dp2.y + y) * w + dp2.x + x;
                want[di] = host2[si];
            }
        }
    }
    copy_3d(
        &mut HostPitchedMut::new(&mut got, w, h).unwrap(),
        &out,
        &Copy3D::new(Extent::new(w, h, d)),
    )
    .unwrap();
    assert_same("3-D copy node after the update", &got, &want);
}

/// A conditional kernel (`cudaGraphSetConditional`), from the crate's image linked ahead of
/// time with the device runtime (cuda-runtime-devrt): no toolkit needed.
fn cond_kernel(k: &'static cuda_runtime::EmbeddedKernel) -> Function {
    assert!(kernels::graph_cond::MODULE.uses_device_runtime());
    k.function().unwrap()
}

fn if_nodes_follow_the_default_and_a_device_decision() {
    let mut r = rng();
    let n = 3001;
    let set = cond_kernel(&kernels::graph_cond::COND_SET);
    let s = Stream::new().unwrap();
    for default in [Some(0u32), Some(1), None] {
        // With no default the value comes from the kernel before the node.
        let decided = r.bool();
        let runs = match default {
            Some(v) => v != 0,
            None => decided,
        };
        let v = r.u32(..);
        let before = random_u32(&mut r, n);
        let mut buf = DeviceBuffer::from_slice(&before).unwrap();
        let mut g = Graph::new().unwrap();
        let h = g.conditional_handle(default).unwrap();
        let mut deps = Vec::new();
        if default.is_none() {
            // SAFETY: cond_set takes the handle of a conditional of this graph and a value.
            let k = unsafe {
                g.add_kernel_node(
                    &[],
                    &set,
                    &LaunchConfig::new(1u32, 1u32),
                    &kernel_args![h, decided as u32],
                )
            }
            .unwrap();
            deps.push(k);
        }
        let (_, mut body) = g
            .add_conditional_node(&deps, h, ConditionalKind::If)
            .unwrap();
        body.add_memset_node(&[], &mut buf, MemsetValue::U32(v))
            .unwrap();
        let exec = g.instantiate().unwrap();
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        let want = if runs { vec![v; n] } else { before };
        assert_same(
            &format!("if node, default {default:?}, decided {decided}"),
            &buf.to_vec().unwrap(),
            &want,
        );
    }
}

fn while_node_runs_its_body_until_the_counter_reaches_the_limit() {
    while_node_counts(cond_kernel(&kernels::graph_cond::COND_COUNT_TO));
}

/// The same through the user API that links PTX with a toolkit's `libcudadevrt.a` at run time
/// (`Module::from_ptx_with_device_runtime`; the GPU machine has a toolkit in /usr/local/cuda).
fn while_node_with_the_device_runtime_linked_at_run_time() {
    let m = Module::from_ptx_with_device_runtime(kernels::graph_cond::PTX).unwrap();
    while_node_counts(m.function("cond_count_to").unwrap());
}

fn while_node_counts(step: Function) {
    let mut r = rng();
    let n = 10_007;
    let limit = r.u32(1..60);
    let h0 = random_ints_f32(&mut r, n);
    let mut data = DeviceBuffer::from_slice(&h0).unwrap();
    let mut counter = DeviceBuffer::from_slice(&[r.u32(..)]).unwrap();
    let mut g = Graph::new().unwrap();
    let reset = g
        .add_memset_node(&[], &mut counter, MemsetValue::U32(0))
        .unwrap();
    let h = g.conditional_handle(Some(1)).unwrap();
    let (node, mut body) = g
        .add_conditional_node(&[reset], h, ConditionalKind::While)
        .unwrap();
    // SAFETY: cond_count_to stays below the lengths given and sets this node's handle.
    unsafe {
        body.add_kernel_node(
            &[],
            &step,
            &LaunchConfig::for_elements(n, 256).unwrap(),
            &kernel_args![h, &mut counter, 1usize, &mut data, n, limit],
        )
    }
    .unwrap();
    assert_eq!(
        g.node_type(node).unwrap(),
        cuda_runtime::graph::GraphNodeType::Conditional
    );
    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    let launches = 3;
    for _ in 0..launches {
        exec.launch(&s).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(counter.to_vec().unwrap(), [limit]);
    let want: Vec<f32> = h0.iter().map(|x| x + (launches * limit) as f32).collect();
    assert_same("while body runs", &data.to_vec().unwrap(), &want);
}

fn conditional_bodies_are_refused_alone_and_keep_their_buffers() {
    let mut r = rng();
    let n = 2048;
    let h_src = random_u32(&mut r, n);
    let mut dst = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut g = Graph::new().unwrap();
    let h = g.conditional_handle(Some(1)).unwrap();
    let (_, mut body) = g.add_conditional_node(&[], h, ConditionalKind::If).unwrap();
    {
        let src = DeviceBuffer::from_slice(&h_src).unwrap();
        body.add_memcpy_node(&[], &mut dst, &src).unwrap();
    }
    for e in [
        body.instantiate().unwrap_err(),
        body.try_clone().unwrap_err(),
        g.add_child_graph_node(&[], &body).unwrap_err(),
        // Review rev-e15: a root embedded in its own body took the root's lock twice and hung
        // (shown on the null driver, `child_lock_order`); a graph with conditional nodes is
        // refused as a child, as the driver refuses it. NOT yet run on a GPU.
        body.add_child_graph_node(&[], &g).unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    }
    // A handle of another graph.
    let mut other = Graph::new().unwrap();
    let e = other.add_child_graph_node(&[], &g).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    let foreign = other.conditional_handle(None).unwrap();
    assert!(matches!(
        g.add_conditional_node(&[], foreign, ConditionalKind::While)
            .unwrap_err(),
        Error::InvalidValue { .. }
    ));
    let exec = g.instantiate().unwrap();
    // The parent graph value and the body handle go; the executable still has it all.
    drop(g);
    drop(body);
    let junk: Vec<DeviceBuffer<u32>> = (0..8)
        .map(|_| DeviceBuffer::from_slice(&vec![7u32; n]).unwrap())
        .collect();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same("copy in the body", &dst.to_vec().unwrap(), &h_src);
    drop(junk);
}

/// A graph whose while body holds no kernel is refused at instantiation (its launches would
/// never end); its copy too (review finding: the copy's bodies were not checked, so the copy
/// instantiated and its launch hung). Nothing here is launched. With a kernel in the body, the
/// copy is made.
fn a_copy_cannot_bypass_the_while_body_check() {
    let mut g = Graph::new().unwrap();
    let h = g.conditional_handle(Some(1)).unwrap();
    let (_, mut body) = g
        .add_conditional_node(&[], h, ConditionalKind::While)
        .unwrap();
    let mut buf = DeviceBuffer::<u32>::new(64).unwrap();
    body.add_memset_node(&[], &mut buf, MemsetValue::U32(1))
        .unwrap();
    assert!(matches!(g.instantiate(), Err(Error::InvalidValue { .. })));
    match g.try_clone() {
        Err(Error::InvalidValue { reason, .. }) => assert!(reason.contains("while"), "{reason}"),
        other => panic!("the copy of a never-ending graph: {other:?}"),
    }
    let m = vadd_module();
    let f = m.function("vadd").unwrap();
    let x = DeviceBuffer::<f32>::new(8).unwrap();
    let mut y = DeviceBuffer::<f32>::new(8).unwrap();
    // SAFETY: vadd reads 8 elements of `x` twice and writes 8 of `y` (never launched here).
    unsafe {
        body.add_kernel_node(
            &[],
            &f,
            &LaunchConfig::new(1u32, 8u32),
            &kernel_args![&x, 8usize, &x, 8usize, &mut y, 8usize],
        )
    }
    .unwrap();
    // Now the loop can end: no refusal of the crate's. The driver itself may not clone graphs
    // with conditional nodes (driver 580: `cudaErrorNotSupported`, as libcudart reports it).
    match g.try_clone() {
        Ok(c) => drop(c),
        Err(e) => assert!(
            matches!(
                e,
                Error::Cuda {
                    code: cuda_runtime::ErrorCode::NotSupported,
                    ..
                }
            ),
            "{e}"
        ),
    }
}

/// A while body whose only node is a child graph cannot end its loop, whether the child holds
/// no kernel or a kernel captured from a safe launch (which sets no conditional value): refused
/// at instantiation (review finding: a child graph counted as able to end it, and the launch
/// never ended); a graph holding such a loop is not embedded as a child either. Nothing is
/// launched.
fn while_bodies_of_child_graphs_only_are_refused() {
    let mut g = Graph::new().unwrap();
    let h = g.conditional_handle(Some(1)).unwrap();
    let (_, mut body) = g
        .add_conditional_node(&[], h, ConditionalKind::While)
        .unwrap();
    let mut buf = DeviceBuffer::<u32>::new(64).unwrap();
    let mut child = Graph::new().unwrap();
    child
        .add_memset_node(&[], &mut buf, MemsetValue::U32(3))
        .unwrap();
    body.add_child_graph_node(&[], &child).unwrap();
    match g.instantiate() {
        Err(Error::InvalidValue { reason, .. }) => assert!(reason.contains("while"), "{reason}"),
        other => panic!("a never-ending while loop: {other:?}"),
    }
    let mut outer = Graph::new().unwrap();
    assert!(matches!(
        outer.add_child_graph_node(&[], &g),
        Err(Error::InvalidValue { .. })
    ));
    // A child graph captured from a safe kernel launch: its kernel sets no conditional value.
    let n = 256;
    let a = DeviceBuffer::<f32>::new(n).unwrap();
    let mut c = DeviceBuffer::<f32>::new(n).unwrap();
    // Non-blocking: a capture on a blocking stream makes other tests' legacy-stream work fail
    // (cudaErrorStreamCaptureImplicit), whatever the capture mode.
    let s = Stream::with_flags(cuda_runtime::StreamFlags::NON_BLOCKING).unwrap();
    let captured = s
        .capture(cuda_runtime::graph::CaptureMode::ThreadLocal, |s| {
            kernels::vector_add::vadd(
                s,
                &LaunchConfig::for_elements(n, 128).unwrap(),
                &a,
                &a,
                &mut c,
            )
        })
        .unwrap();
    let mut g2 = Graph::new().unwrap();
    let h2 = g2.conditional_handle(Some(1)).unwrap();
    let (_, mut body2) = g2
        .add_conditional_node(&[], h2, ConditionalKind::While)
        .unwrap();
    body2.add_child_graph_node(&[], &captured).unwrap();
    assert!(matches!(g2.instantiate(), Err(Error::InvalidValue { .. })));
}

/// Kernels whose parameters have every size, alignment padding between them, and (`pack_big`) a
/// parameter buffer larger than the per-node update packs into one buffer (256 bytes): each
/// writes what it was given to `out`, as 64-bit words.
const PACK_PTX: &str = r#"
.version 8.0
.target sm_75
.address_size 64
.visible .entry pack_args(.param .u64 out, .param .u8 a, .param .u16 b, .param .u32 c,
    .param .u64 d, .param .align 16 .b8 e[16], .param .f64 f, .param .u8 g)
{
    .reg .b16 %h<4>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<10>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u8 %h1, [a];
    cvt.u64.u16 %rd2, %h1;
    st.global.u64 [%rd1], %rd2;
    ld.param.u16 %h2, [b];
    cvt.u64.u16 %rd3, %h2;
    st.global.u64 [%rd1+8], %rd3;
    ld.param.u32 %r1, [c];
    cvt.u64.u32 %rd4, %r1;
    st.global.u64 [%rd1+16], %rd4;
    ld.param.u64 %rd5, [d];
    st.global.u64 [%rd1+24], %rd5;
    ld.param.u64 %rd6, [e];
    st.global.u64 [%rd1+32], %rd6;
    ld.param.u64 %rd7, [e+8];
    st.global.u64 [%rd1+40], %rd7;
    ld.param.f64 %fd1, [f];
    st.global.f64 [%rd1+48], %fd1;
    ld.param.u8 %h3, [g];
    cvt.u64.u16 %rd8, %h3;
    st.global.u64 [%rd1+56], %rd8;
    ret;
}
.visible .entry pack_big(.param .u64 out, .param .align 8 .b8 big[264], .param .u32 tail)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [big];
    st.global.u64 [%rd1], %rd2;
    ld.param.u64 %rd3, [big+128];
    st.global.u64 [%rd1+8], %rd3;
    ld.param.u64 %rd4, [big+256];
    st.global.u64 [%rd1+16], %rd4;
    ld.param.u32 %r1, [tail];
    cvt.u64.u32 %rd5, %r1;
    st.global.u64 [%rd1+24], %rd5;
    ret;
}
"#;

/// One random set of `pack_args`'s parameters, and the words the kernel writes for them.
#[derive(Clone, Copy)]
struct PackVals {
    a: u8,
    b: u16,
    c: u32,
    d: u64,
    e: [u64; 2],
    f: f64,
    g: u8,
}

impl PackVals {
    fn random(r: &mut fastrand::Rng) -> PackVals {
        PackVals {
            a: r.u8(..),
            b: r.u16(..),
            c: r.u32(..),
            d: r.u64(..),
            e: [r.u64(..), r.u64(..)],
            f: r.f64() * 1e6 - 5e5,
            g: r.u8(..),
        }
    }
    /// The arguments of `pack_args` for these values, writing to `out`.
    fn args<'a>(&'a self, out: &'a mut DeviceBuffer<u64>) -> [KernelArg<'a>; 8] {
        kernel_args![
            out,
            self.a,
            self.b,
            self.c,
            self.d,
            KernelArg::new(&self.e),
            self.f,
            self.g
        ]
    }
    fn words(&self) -> Vec<u64> {
        vec![
            self.a as u64,
            self.b as u64,
            self.c as u64,
            self.d,
            self.e[0],
            self.e[1],
            self.f.to_bits(),
            self.g as u64,
        ]
    }
}

fn kernel_node_updates_pass_every_parameter_size_and_padding() {
    let mut r = rng();
    let module = Module::from_ptx(PACK_PTX).unwrap();
    let (small, big) = (
        module.function("pack_args").unwrap(),
        module.function("pack_big").unwrap(),
    );
    // The layout the updates pack by: padding after `a` (b is 2-aligned), before `e`
    // (16-aligned) and at the end.
    assert_eq!(
        small
            .params()
            .iter()
            .map(|p| (p.offset, p.size))
            .collect::<Vec<_>>(),
        vec![
            (0, 8),
            (8, 1),
            (10, 2),
            (12, 4),
            (16, 8),
            (32, 16),
            (48, 8),
            (56, 1)
        ]
    );
    let last = big.params().last().unwrap();
    assert!(last.offset + last.size > 256, "{:?}", big.params());
    let cfg = LaunchConfig::new(1u32, 1u32);
    let s = Stream::new().unwrap();
    let mut out_small = DeviceBuffer::from_slice(&[r.u64(..); 8]).unwrap();
    let mut out_big = DeviceBuffer::from_slice(&[r.u64(..); 4]).unwrap();
    let first = PackVals::random(&mut r);
    let big_first: [u64; 33] = std::array::from_fn(|_| r.u64(..));
    let tail_first = r.u32(..);
    let mut g = Graph::new().unwrap();
    // SAFETY: each kernel writes 8 (4) words of its `out`, which has that many.
    let (ks, kb) = unsafe {
        let ks = g
            .add_kernel_node(&[], &small, &cfg, &first.args(&mut out_small))
            .unwrap();
        let kb = g
            .add_kernel_node(
                &[],
                &big,
                &cfg,
                &kernel_args![&mut out_big, KernelArg::new(&big_first), tail_first],
            )
            .unwrap();
        (ks, kb)
    };
    let mut exec = g.instantiate().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same(
        "first launch, every size",
        &out_small.to_vec().unwrap(),
        &first.words(),
    );
    let big_words = |b: &[u64; 33], t: u32| vec![b[0], b[16], b[32], t as u64];
    assert_same(
        "first launch, large buffer",
        &out_big.to_vec().unwrap(),
        &big_words(&big_first, tail_first),
    );
    // Several updates (packed into one buffer for the small kernel, pointer per argument for
    // the large one), each launched and checked.
    for round in 0..4 {
        let v = PackVals::random(&mut r);
        let b: [u64; 33] = std::array::from_fn(|_| r.u64(..));
        let t = r.u32(..);
        // SAFETY: as at the add above.
        unsafe {
            exec.set_kernel_node_params(ks, &small, &cfg, &v.args(&mut out_small))
                .unwrap();
            exec.set_kernel_node_params(
                kb,
                &big,
                &cfg,
                &kernel_args![&mut out_big, KernelArg::new(&b), t],
            )
            .unwrap();
        }
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        assert_same(
            &format!("update {round}, every size"),
            &out_small.to_vec().unwrap(),
            &v.words(),
        );
        assert_same(
            &format!("update {round}, large buffer"),
            &out_big.to_vec().unwrap(),
            &big_words(&b, t),
        );
    }
    // A wrong size is refused by the update, before the driver, and the node keeps its last
    // parameters.
    let before = out_small.to_vec().unwrap();
    let wide = 7u32;
    // SAFETY: refused before the driver sees it (asserted).
    let e = unsafe {
        exec.set_kernel_node_params(
            ks,
            &small,
            &cfg,
            &kernel_args![
                &mut out_small,
                wide,
                1u16,
                2u32,
                3u64,
                KernelArg::new(&[0u64; 2]),
                1.0f64,
                0u8
            ],
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e}");
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same(
        "after a refused update",
        &out_small.to_vec().unwrap(),
        &before,
    );
}

/// Updates that name the function and memory an earlier update of the executable checked and
/// kept take a shorter path (those checks still hold); this sweeps through it, checking each
/// launch against the CPU, and then makes sure that whatever no update kept (or what the short
/// path does not check again: the configuration, the argument sizes, the calling context) is
/// still checked in full, with the node keeping its last parameters after each refusal.
fn kernel_node_updates_check_in_full_what_no_earlier_update_kept() {
    let mut r = rng();
    let n = 5000;
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    let s = Stream::new().unwrap();
    let ha = random_ints_f32(&mut r, n);
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let mut c0 = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &a, n, &mut c0, n]) }
        .unwrap();
    let mut exec = g.instantiate().unwrap();
    // c[i] = a[i] + b[i] below `len`, NaN (as filled) after.
    let expected = |hb: &[f32], len: usize| -> Vec<f32> {
        (0..n)
            .map(|i| if i < len { ha[i] + hb[i] } else { f32::NAN })
            .collect()
    };
    let same = |what: &str, got: Vec<f32>, want: &[f32]| {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert_same(what, &bits(&got), &bits(want));
    };
    let mut b = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut want = Vec::new();
    // The sweep: the first update keeps `b` and `c`, the later ones only change `len`.
    for round in 0..5 {
        let hb = random_ints_f32(&mut r, n);
        b.copy_from_host(&hb).unwrap();
        c.copy_from_host(&vec![f32::NAN; n]).unwrap();
        let len = r.usize(n / 2..=n);
        // SAFETY: vadd stays below the lengths given (`len <= n`).
        unsafe {
            exec.set_kernel_node_params(k, &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, len])
        }
        .unwrap();
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        want = expected(&hb, len);
        same(
            &format!("sweep round {round}, len {len}"),
            c.to_vec().unwrap(),
            &want,
        );
    }
    // Each refusal leaves the node as it was: relaunched, it writes what the last round did.
    let relaunch_unchanged = |exec: &cuda_runtime::GraphExec, c: &mut DeviceBuffer<f32>, what| {
        c.copy_from_host(&vec![f32::NAN; n]).unwrap();
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        same(what, c.to_vec().unwrap(), &want);
    };
    // A configuration past the device's limits, with the function and memory known.
    let wide = LaunchConfig::new(1u32, 4096u32);
    // SAFETY: refused before the driver sees it (asserted).
    let e = unsafe {
        exec.set_kernel_node_params(k, &vadd, &wide, &kernel_args![&a, n, &b, n, &mut c, n])
    }
    .unwrap_err();
    assert!(
        matches!(e, Error::InvalidConfiguration { value: 4096, .. }),
        "{e:?}"
    );
    relaunch_unchanged(&exec, &mut c, "after a refused configuration");
    // An argument of the wrong size (u32 for size_t).
    // SAFETY: refused before the driver sees it (asserted).
    let e = unsafe {
        exec.set_kernel_node_params(
            k,
            &vadd,
            &cfg,
            &kernel_args![&a, n, &b, n, &mut c, n as u32],
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
    relaunch_unchanged(&exec, &mut c, "after a refused argument size");
    // Memory no update kept, of a kind graphs refuse: mapped page-locked memory.
    let pinned = PinnedBuffer::<f32>::with_flags(n, HostAllocFlags::MAPPED).unwrap();
    // SAFETY: refused before the driver sees it (asserted).
    let e = unsafe {
        exec.set_kernel_node_params(k, &vadd, &cfg, &kernel_args![&a, n, &pinned, n, &mut c, n])
    }
    .unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e:?}");
    relaunch_unchanged(&exec, &mut c, "after refused host memory");
    // From inside a host function (everything moved in, and sent back).
    let (tx, rx) = std::sync::mpsc::channel();
    let moved = (exec, vadd, a, b, c);
    s.launch_host_fn(move || {
        let (mut exec, vadd, a, b, mut c) = moved;
        // SAFETY: refused before the driver sees it (asserted below).
        let e = unsafe {
            exec.set_kernel_node_params(k, &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n])
        };
        let _ = tx.send((e, (exec, vadd, a, b, c)));
    })
    .unwrap();
    s.synchronize().unwrap();
    let (e, (mut exec, vadd, a, b, mut c)) = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the host function ran");
    assert!(matches!(e, Err(Error::InHostFunction { .. })), "{e:?}");
    relaunch_unchanged(&exec, &mut c, "after a refusal inside a host function");
    // New memory (checked in full, then kept) and a second function of another module load
    // (the same kernel): accepted, and then swept on the short path.
    let m2 = vadd_module();
    let vadd2 = m2.function("vadd").unwrap();
    let mut c2 = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let hb = b.to_vec().unwrap();
    let mut len = n;
    for (round, f) in [&vadd2, &vadd2, &vadd, &vadd2].into_iter().enumerate() {
        c2.copy_from_host(&vec![f32::NAN; n]).unwrap();
        len = r.usize(1..=n);
        // SAFETY: vadd stays below the lengths given.
        unsafe {
            exec.set_kernel_node_params(k, f, &cfg, &kernel_args![&a, n, &b, n, &mut c2, len])
        }
        .unwrap();
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        same(
            &format!("new output, round {round}, len {len}"),
            c2.to_vec().unwrap(),
            &expected(&hb, len),
        );
    }
    // The executable keeps what it was updated with: the input dropped, its launch still reads
    // it (the memory is freed only after the executable).
    drop((b, m2, vadd2));
    c2.copy_from_host(&vec![f32::NAN; n]).unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    same("input dropped", c2.to_vec().unwrap(), &expected(&hb, len));
    drop((exec, g, c, c0, a, vadd, m));
}

/// One thread sweeps an executable's kernel node (its short update path) and launches it,
/// checking every launch against the CPU, while another thread keeps changing the graph the
/// executable came from: adding and destroying nodes, reading its nodes, updating its kernel
/// node. The graph's lock, taken by both threads, keeps their driver calls apart: every launch
/// is right, and the graph ends with the nodes the second thread left.
fn executable_updates_on_one_thread_while_another_changes_the_graph() {
    let mut r = rng();
    let n = 3000;
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    let ha = random_ints_f32(&mut r, n);
    let hb = random_ints_f32(&mut r, n);
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let k = unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
        .unwrap();
    let mut exec = g.instantiate().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let lens: Vec<usize> = (0..300).map(|_| r.usize(1..=n)).collect();
    let (kept, added) = std::thread::scope(|sc| {
        let changer = sc.spawn(|| {
            let mut kept = Vec::new();
            let mut added = 0usize;
            let mut other = DeviceBuffer::<f32>::zeroed(n).unwrap();
            while !done.load(Ordering::Acquire) {
                let e = g.add_empty_node(&[k]).unwrap();
                added += 1;
                if added.is_multiple_of(3) {
                    kept.push(e);
                } else {
                    g.destroy_node(e).unwrap();
                }
                assert_eq!(g.nodes().unwrap().len(), 1 + kept.len());
                // The graph's own node (the executable keeps its parameters).
                // SAFETY: vadd stays below the lengths given.
                unsafe {
                    g.set_kernel_node_params(
                        k,
                        &vadd,
                        &cfg,
                        &kernel_args![&a, n, &b, n, &mut other, n],
                    )
                }
                .unwrap();
            }
            (kept, added)
        });
        // Stops the second thread however this one ends (a failed check panics: without this,
        // the scope would wait for the second thread forever).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let stop = Stop(&done);
        let s = Stream::new().unwrap();
        for (round, &len) in lens.iter().enumerate() {
            c.copy_from_host(&vec![f32::NAN; n]).unwrap();
            // SAFETY: vadd stays below the lengths given (`len <= n`).
            unsafe {
                exec.set_kernel_node_params(
                    k,
                    &vadd,
                    &cfg,
                    &kernel_args![&a, n, &b, n, &mut c, len],
                )
            }
            .unwrap();
            exec.launch(&s).unwrap();
            s.synchronize().unwrap();
            let want: Vec<u32> = (0..n)
                .map(|i| if i < len { ha[i] + hb[i] } else { f32::NAN }.to_bits())
                .collect();
            let got: Vec<u32> = c.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
            assert_same(&format!("round {round}, len {len}"), &got, &want);
        }
        drop(stop);
        changer.join().unwrap()
    });
    assert!(added > 0, "the graph was changed meanwhile");
    let nodes = g.nodes().unwrap();
    assert_eq!(nodes.len(), 1 + kept.len());
    for e in kept {
        assert!(nodes.contains(&e));
    }
}
