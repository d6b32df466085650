//! Extended launches (`cudaLaunchKernelEx`): thread-block clusters and distributed shared memory
//! (the crate's sm_90 histogram against a CPU histogram), cluster attributes and occupancy,
//! launch attributes on typed and user launches, programmatic dependent launch and events, and
//! every refusal before the driver. On a device below compute capability 9.0 the cluster tests
//! check the clear errors instead.

use crate::common::{assert_same, random_f32, random_u32, rng};
use cuda_runtime::{
    kernel_args, kernels, AccessPolicyWindow, AccessProperty, ClusterSchedulingPolicy, Device,
    DeviceBuffer, Dim3, Error, ErrorCode, Event, EventFlags, LaunchConfig, MemSyncDomain,
    MemSyncDomainMap, Module, OccupancyFlags, Stream, StreamFlags,
};

crate::tests![
    cluster_histogram_matches_cpu,
    cluster_refusals_name_values_and_queue_nothing,
    non_portable_clusters_and_cluster_occupancy,
    required_cluster_dims_are_enforced,
    attributes_on_typed_and_user_launches_match_cpu,
    cooperative_attribute_checks_residency,
    programmatic_dependent_launch_orders_producer_and_consumer,
    programmatic_event_orders_another_stream,
    typed_wrappers_refuse_programmatic_serialization,
    occupancy_with_flags,
];

/// The device's compute capability, `major * 10 + minor`.
fn cc() -> u32 {
    let p = Device::current().unwrap().properties().unwrap();
    (p.major * 10 + p.minor) as u32
}

fn has_clusters() -> bool {
    let p = Device::current().unwrap().properties().unwrap();
    p.cluster_launch && cc() >= 90
}

/// On a device without clusters, `r` must be the clear refusal, naming the device's capability.
fn expect_too_old<T: std::fmt::Debug>(r: cuda_runtime::Result<T>) {
    match r {
        Err(Error::ComputeCapability {
            needs: 90, found, ..
        }) => assert_eq!(found, cc()),
        other => panic!("expected Error::ComputeCapability on a pre-sm_90 device, got {other:?}"),
    }
}

fn cpu_histogram(data: &[u32], bins: u32, hist_len: usize, start: &[u32]) -> Vec<u32> {
    let mut h = start.to_vec();
    for &v in data {
        let b = (v % bins) as usize;
        if b < hist_len {
            h[b] += 1;
        }
    }
    h
}

fn cluster_histogram_matches_cpu() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    if !has_clusters() {
        let data = DeviceBuffer::from_slice(&[1u32, 2, 3]).unwrap();
        let mut hist = DeviceBuffer::<u32>::zeroed(4).unwrap();
        let cfg = LaunchConfig::new(2, 32).with_shared_mem(16);
        expect_too_old(kernels::cluster::cluster_histogram(
            &s, &cfg, &data, &mut hist, 4,
        ));
        expect_too_old(kernels::cluster::cluster_histogram(
            &s,
            &cfg.with_cluster(2),
            &data,
            &mut hist,
            4,
        ));
        return;
    }
    let shapes: [(u32, u32, u32); 7] = [
        (1, 1, 1),
        (2, 1, 1),
        (4, 1, 1),
        (8, 1, 1),
        (2, 2, 1),
        (1, 2, 2),
        (2, 2, 2),
    ];
    for round in 0..24 {
        let n = r.usize(1..300_000);
        let data = random_u32(&mut r, n);
        let bins = r.u32(1..4000);
        // Sometimes fewer histogram slots than bins: the rest are dropped, as the CPU does.
        let hist_len = if r.bool() {
            bins as usize
        } else {
            r.usize(1..=bins as usize)
        };
        let start = random_u32(&mut r, hist_len)
            .into_iter()
            .map(|v| v % 1000)
            .collect::<Vec<_>>();
        let cl = shapes[r.usize(..shapes.len())];
        let grid = (cl.0 * r.u32(1..20), cl.1 * r.u32(1..4), cl.2 * r.u32(1..3));
        let block = [(128u32, 1u32, 1u32), (256, 1, 1), (32, 4, 2), (1024, 1, 1)][r.usize(..4)];
        let cfg = LaunchConfig::new(grid, block).with_shared_mem(4 * bins);
        let d_data = DeviceBuffer::from_slice(&data).unwrap();
        let mut d_hist = DeviceBuffer::from_slice(&start).unwrap();
        if round % 4 == 0 {
            // Without clusters: a cluster of one block.
            kernels::cluster::cluster_histogram(&s, &cfg, &d_data, &mut d_hist, bins).unwrap();
        } else {
            let ex = cfg
                .with_cluster(cl)
                .cluster_scheduling_policy(ClusterSchedulingPolicy::Spread);
            kernels::cluster::cluster_histogram(&s, &ex, &d_data, &mut d_hist, bins).unwrap();
        }
        s.synchronize().unwrap();
        let want = cpu_histogram(&data, bins, hist_len, &start);
        assert_same(
            &format!("cluster histogram, {n} values, {bins} bins, grid {grid:?}, block {block:?}, cluster {cl:?}"),
            &d_hist.to_vec().unwrap(),
            &want,
        );
    }
}

fn cluster_refusals_name_values_and_queue_nothing() {
    let s = Stream::new().unwrap();
    let data = DeviceBuffer::from_slice(&random_u32(&mut rng(), 1000)).unwrap();
    let mut hist = DeviceBuffer::<u32>::zeroed(16).unwrap();
    hist.fill(5).unwrap();
    let base = LaunchConfig::new(6, 64).with_shared_mem(64);
    if !has_clusters() {
        expect_too_old(kernels::cluster::cluster_histogram(
            &s,
            &base.with_cluster(2),
            &data,
            &mut hist,
            16,
        ));
        return;
    }
    let cases: [(cuda_runtime::LaunchConfigEx<'static>, &str); 4] = [
        (
            base.with_cluster(4),
            "grid.x 6 is not a multiple of cluster.x 4 (grid (6, 1, 1), cluster (4, 1, 1))",
        ),
        (
            LaunchConfig::new((4, 3, 1), 64)
                .with_shared_mem(64)
                .with_cluster((2, 2, 1)),
            "grid.y 3 is not a multiple of cluster.y 2 (grid (4, 3, 1), cluster (2, 2, 1))",
        ),
        (
            LaunchConfig::new(32, 64)
                .with_shared_mem(64)
                .with_cluster(16),
            "a cluster of 16 blocks (16, 1, 1) exceeds the portable maximum of 8",
        ),
        (
            base.with_cluster((2, 0, 1)),
            "cluster.y is 0 in cluster (2, 0, 1)",
        ),
    ];
    for (cfg, want) in cases {
        let e = kernels::cluster::cluster_histogram(&s, &cfg, &data, &mut hist, 16).unwrap_err();
        let Error::LaunchAttribute { code, detail, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(*code, ErrorCode::InvalidClusterSize);
        assert!(detail.starts_with(want), "{detail}");
        assert_eq!(cuda_runtime::get_last_error(), Some(e));
    }
    // The precondition is checked before the attributes, and nothing ran.
    let e = kernels::cluster::cluster_histogram(&s, &base.with_cluster(2), &data, &mut hist, 17)
        .unwrap_err();
    assert!(matches!(e, Error::KernelPrecondition { .. }), "{e:?}");
    s.synchronize().unwrap();
    assert_eq!(hist.to_vec().unwrap(), vec![5u32; 16]);
}

/// A user module of the crate's cluster kernel: its attributes are its own, so setting them
/// does not touch the crate's kernel that other tests launch.
fn own_histogram() -> (Module, cuda_runtime::Function) {
    let m = Module::from_ptx(kernels::cluster::PTX).unwrap();
    let f = m.function("cluster_histogram").unwrap();
    (m, f)
}

fn launch_histogram(
    f: &cuda_runtime::Function,
    s: &Stream,
    cfg: &impl cuda_runtime::launch::Launch,
    data: &DeviceBuffer<u32>,
    hist: &mut DeviceBuffer<u32>,
    bins: u32,
) -> cuda_runtime::Result<()> {
    let (dl, hl) = (data.len(), hist.len());
    // SAFETY: the parameters are (const unsigned*, size_t, unsigned*, size_t, unsigned), given
    // as the buffers with their lengths; callers give 4 * bins bytes of dynamic shared memory
    // (the kernel's precondition), and the kernel stays below both lengths.
    unsafe { f.launch(s, cfg, &kernel_args![data, dl, hist, hl, bins]) }
}

fn non_portable_clusters_and_cluster_occupancy() {
    if !has_clusters() {
        // The sm_90 PTX does not load, and a compute_75 kernel has no cluster occupancy here.
        assert!(Module::from_ptx(kernels::cluster::PTX).is_err());
        let f = kernels::vector_add::VADD.function().unwrap();
        let cfg = LaunchConfig::new(4, 128);
        expect_too_old(f.max_potential_cluster_size(&cfg));
        expect_too_old(f.max_active_clusters(&cfg.with_cluster(2)));
        return;
    }
    let (_m, f) = own_histogram();
    let s = Stream::new().unwrap();
    let bins = 1024u32;
    let cfg = LaunchConfig::new(32, 256).with_shared_mem(4 * bins);
    let portable = f.max_potential_cluster_size(&cfg).unwrap();
    assert!((1..=8).contains(&portable), "{portable}");
    let active = f.max_active_clusters(&cfg.with_cluster(2)).unwrap();
    let sms = Device::current()
        .unwrap()
        .properties()
        .unwrap()
        .multi_processor_count as u32;
    // Several blocks fit an SM: at most as many clusters as the blocks that fit, halved.
    let per_sm = f
        .max_active_blocks_per_multiprocessor(256, 4 * bins as usize)
        .unwrap();
    assert!(
        active >= 1 && active * 2 <= sms * per_sm,
        "{active} clusters of 2 on {sms} SMs of {per_sm} blocks each"
    );
    // Without cluster dimensions (and none required), the query is refused.
    let e = f.max_active_clusters(&cfg.extended()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidClusterSize);

    f.set_non_portable_cluster_size_allowed(true).unwrap();
    assert!(f.attributes().unwrap().non_portable_cluster_size_allowed);
    let largest = f.max_potential_cluster_size(&cfg).unwrap();
    assert!(largest >= portable, "{largest} < {portable}");
    if largest >= 16 {
        let mut r = rng();
        let data = random_u32(&mut r, 200_000);
        let d_data = DeviceBuffer::from_slice(&data).unwrap();
        let mut d_hist = DeviceBuffer::<u32>::zeroed(bins as usize).unwrap();
        launch_histogram(&f, &s, &cfg.with_cluster(16), &d_data, &mut d_hist, bins).unwrap();
        s.synchronize().unwrap();
        let want = cpu_histogram(&data, bins, bins as usize, &vec![0; bins as usize]);
        assert_same("16-block clusters", &d_hist.to_vec().unwrap(), &want);
        assert!(f.max_active_clusters(&cfg.with_cluster(16)).unwrap() >= 1);
    } else {
        eprintln!("the device runs clusters of at most {largest} blocks: 16 not tried");
    }
    f.set_cluster_scheduling_policy_preference(ClusterSchedulingPolicy::LoadBalancing)
        .unwrap();
    assert_eq!(
        f.attributes().unwrap().cluster_scheduling_policy_preference,
        ClusterSchedulingPolicy::LoadBalancing
    );
}

fn required_cluster_dims_are_enforced() {
    if !has_clusters() {
        let f = kernels::vector_add::VADD.function().unwrap();
        let (da, mut dc) = (
            DeviceBuffer::<f32>::zeroed(4).unwrap(),
            DeviceBuffer::<f32>::zeroed(4).unwrap(),
        );
        let cfg = LaunchConfig::new(4, 32).with_cluster(2);
        // SAFETY: refused before launching.
        let r = unsafe {
            f.launch(
                &Stream::new().unwrap(),
                &cfg,
                &kernel_args![&da, 4usize, &da, 4usize, &mut dc, 4usize],
            )
        };
        return expect_too_old(r);
    }
    let (_m, f) = own_histogram();
    let s = Stream::new().unwrap();
    assert_eq!(f.attributes().unwrap().required_cluster_dim, None);
    let e = f
        .set_required_cluster_dims(Some(Dim3::new(4, 0, 1)))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    f.set_required_cluster_dims(Some(Dim3::new(4, 1, 1)))
        .unwrap();
    assert_eq!(
        f.attributes().unwrap().required_cluster_dim,
        Some(Dim3::new(4, 1, 1))
    );
    let mut r = rng();
    let data = random_u32(&mut r, 50_000);
    let bins = r.u32(1..500);
    let d_data = DeviceBuffer::from_slice(&data).unwrap();
    let mut d_hist = DeviceBuffer::<u32>::zeroed(bins as usize).unwrap();
    let cfg = LaunchConfig::new(8, 128).with_shared_mem(4 * bins);
    let e = launch_histogram(&f, &s, &cfg.with_cluster(2), &d_data, &mut d_hist, bins).unwrap_err();
    let Error::LaunchAttribute { detail, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        detail.starts_with("the kernel requires clusters of (4, 1, 1)"),
        "{detail}"
    );
    // The same dimensions given at launch are accepted; a plain launch takes the required ones.
    launch_histogram(&f, &s, &cfg.with_cluster(4), &d_data, &mut d_hist, bins).unwrap();
    let mut d_plain = DeviceBuffer::<u32>::zeroed(bins as usize).unwrap();
    launch_histogram(&f, &s, &cfg, &d_data, &mut d_plain, bins).unwrap();
    // The required size applies to a cluster occupancy query without dimensions.
    assert!(f.max_active_clusters(&cfg.extended()).unwrap() >= 1);
    s.synchronize().unwrap();
    let want = cpu_histogram(&data, bins, bins as usize, &vec![0; bins as usize]);
    assert_same("required clusters, given", &d_hist.to_vec().unwrap(), &want);
    assert_same(
        "required clusters, plain launch",
        &d_plain.to_vec().unwrap(),
        &want,
    );
    f.set_required_cluster_dims(None).unwrap();
    assert_eq!(f.attributes().unwrap().required_cluster_dim, None);
}

fn attributes_on_typed_and_user_launches_match_cpu() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let (least, greatest) = dev.stream_priority_range().unwrap();
    let domains = dev
        .attribute(cuda_runtime::DeviceAttribute::MemSyncDomainCount)
        .unwrap()
        .clamp(1, 255) as u8;
    let s = Stream::with_priority(StreamFlags::NON_BLOCKING, least).unwrap();
    for _ in 0..8 {
        let n = r.usize(1..200_000);
        let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
        let (da, db) = (
            DeviceBuffer::from_slice(&a).unwrap(),
            DeviceBuffer::from_slice(&b).unwrap(),
        );
        let mut dc = DeviceBuffer::<f32>::new(n).unwrap();
        // On `s`: a memset on the legacy stream is not ordered before work on a non-blocking
        // stream (as in libcudart).
        dc.fill_async(f32::NAN, &s).unwrap();
        let window = AccessPolicyWindow::over(
            &da,
            r.f32(),
            AccessProperty::Persisting,
            AccessProperty::Streaming,
        );
        let mut cfg = LaunchConfig::for_elements(n, 256)
            .unwrap()
            .extended()
            .priority(r.i32(greatest..=least))
            .mem_sync_domain(if r.bool() {
                MemSyncDomain::Remote
            } else {
                MemSyncDomain::Default
            })
            .mem_sync_domain_map(MemSyncDomainMap {
                default: r.u8(..domains),
                remote: r.u8(..domains),
            })
            .access_policy_window(window);
        if has_clusters() {
            // vadd is compute_75 PTX: clusters of any kernel, on a device that has them.
            cfg.config.grid.x = cfg.config.grid.x.div_ceil(2) * 2;
            cfg = cfg.cluster(2);
        }
        kernels::vector_add::vadd(&s, &cfg, &da, &db, &mut dc).unwrap();
        s.synchronize().unwrap();
        let want: Vec<u32> = a.iter().zip(&b).map(|(x, y)| (x + y).to_bits()).collect();
        let got: Vec<u32> = dc.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
        assert_same("vadd with launch attributes", &got, &want);
        // The same through a user launch of the same PTX.
        let m = Module::from_ptx(kernels::vector_add::PTX).unwrap();
        let f = m.function("vadd").unwrap();
        dc.fill_async(f32::NAN, &s).unwrap();
        // SAFETY: vadd(const float*, size_t, const float*, size_t, float*, size_t), given the
        // buffers with their lengths; it stays below each.
        unsafe { f.launch(&s, &cfg, &kernel_args![&da, n, &db, n, &mut dc, n]) }.unwrap();
        s.synchronize().unwrap();
        let got: Vec<u32> = dc.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
        assert_same("user vadd with launch attributes", &got, &want);
    }
    // Refusals before the driver: a priority out of range, a domain beyond the device's.
    let (da, mut dc) = (
        DeviceBuffer::<f32>::zeroed(4).unwrap(),
        DeviceBuffer::<f32>::zeroed(4).unwrap(),
    );
    let c = LaunchConfig::new(1, 32);
    let e = kernels::vector_add::vadd(&s, &c.extended().priority(least + 1), &da, &da, &mut dc)
        .unwrap_err();
    assert!(
        e.to_string().contains(&format!("priority {}", least + 1)),
        "{e}"
    );
    let m = MemSyncDomainMap {
        default: 0,
        remote: domains,
    };
    let e = kernels::vector_add::vadd(&s, &c.extended().mem_sync_domain_map(m), &da, &da, &mut dc)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn cooperative_attribute_checks_residency() {
    let f = kernels::spin::WRITE_INDEX.function().unwrap();
    let props = Device::current().unwrap().properties().unwrap();
    let fit = f.max_active_blocks_per_multiprocessor(128, 0).unwrap()
        * props.multi_processor_count as u32;
    let n = fit as usize * 128;
    let mut out = DeviceBuffer::<u32>::new(n).unwrap();
    out.fill(7).unwrap();
    let s = Stream::new().unwrap();
    let cfg = LaunchConfig::new(fit, 128u32).extended().cooperative();
    kernels::spin::write_index(&s, &cfg, &mut out).unwrap();
    s.synchronize().unwrap();
    let want: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    assert_same("cooperative attribute", &out.to_vec().unwrap(), &want);
    let too_many = LaunchConfig::new(fit + 1, 128u32).extended().cooperative();
    let e = kernels::spin::write_index(&s, &too_many, &mut out).unwrap_err();
    assert_eq!(
        e,
        Error::CooperativeLaunchTooLarge {
            blocks: fit as u64 + 1,
            max: fit as u64
        }
    );
}

fn programmatic_dependent_launch_orders_producer_and_consumer() {
    let s = Stream::new().unwrap();
    let consume = kernels::launch_ex::PDL_CONSUME.function();
    if cc() < 90 {
        return expect_too_old(consume);
    }
    let consume = consume.unwrap();
    let mut r = rng();
    for _ in 0..10 {
        let n = r.usize(1..2_000_000);
        let seed = r.u32(..);
        let mut mid = DeviceBuffer::<u32>::new(n).unwrap();
        let mut out = DeviceBuffer::<u32>::new(n).unwrap();
        mid.fill(0xdead_beef).unwrap();
        out.fill(0xdead_beef).unwrap();
        let cfg = LaunchConfig::for_elements(n, 256).unwrap();
        kernels::launch_ex::pdl_produce(&s, &cfg, &mut mid, seed).unwrap();
        let pdl = LaunchConfig::new(r.u32(1..512), 256)
            .extended()
            .programmatic_stream_serialization();
        // SAFETY: pdl_consume(const unsigned*, size_t, unsigned*, size_t), given the buffers
        // with their lengths; every thread waits for the producer (griddepcontrol.wait) before
        // touching memory, and stays below both lengths.
        unsafe { consume.launch(&s, &pdl, &kernel_args![&mid, n, &mut out, n]) }.unwrap();
        // The same through the safe wrapper: pdl_consume declares that it waits.
        let mut out2 = DeviceBuffer::<u32>::new(n).unwrap();
        out2.fill(0xdead_beef).unwrap();
        kernels::launch_ex::pdl_produce(&s, &cfg, &mut mid, seed).unwrap();
        kernels::launch_ex::pdl_consume(&s, &pdl, &mid, &mut out2).unwrap();
        s.synchronize().unwrap();
        let want: Vec<u32> = (0..n)
            .map(|i| (seed.wrapping_mul(i as u32 + 1) ^ (i >> 3) as u32).wrapping_add(1))
            .collect();
        assert_same(
            "programmatic dependent launch",
            &out.to_vec().unwrap(),
            &want,
        );
        assert_same(
            "programmatic dependent launch, safe wrapper",
            &out2.to_vec().unwrap(),
            &want,
        );
    }
}

fn programmatic_event_orders_another_stream() {
    let (s1, s2) = (Stream::new().unwrap(), Stream::new().unwrap());
    let ev = Event::with_flags(EventFlags::DISABLE_TIMING).unwrap();
    let mut mid = DeviceBuffer::<u32>::new(1000).unwrap();
    if cc() < 90 {
        let cfg = LaunchConfig::new(4, 256)
            .extended()
            .programmatic_event(&ev, false);
        return expect_too_old(kernels::launch_ex::pdl_produce(&s1, &cfg, &mut mid, 3));
    }
    // An event with timing is refused before the driver.
    let timed = Event::new().unwrap();
    let e = kernels::launch_ex::pdl_produce(
        &s1,
        &LaunchConfig::new(4, 256)
            .extended()
            .programmatic_event(&timed, false),
        &mut mid,
        3,
    )
    .unwrap_err();
    assert!(matches!(e, Error::LaunchAttribute { .. }), "{e:?}");
    let mut r = rng();
    for _ in 0..10 {
        let n = r.usize(1..1_000_000);
        let seed = r.u32(..);
        let mut mid = DeviceBuffer::<u32>::new(n).unwrap();
        let mut out = DeviceBuffer::<u32>::new(n).unwrap();
        mid.fill(0).unwrap();
        out.fill(0).unwrap();
        let cfg = LaunchConfig::for_elements(n, 256)
            .unwrap()
            .extended()
            .programmatic_event(&ev, false);
        kernels::launch_ex::pdl_produce(&s1, &cfg, &mut mid, seed).unwrap();
        s2.wait_event(&ev).unwrap();
        kernels::launch_ex::pdl_consume(
            &s2,
            &LaunchConfig::for_elements(n, 256).unwrap(),
            &mid,
            &mut out,
        )
        .unwrap();
        s2.synchronize().unwrap();
        s1.synchronize().unwrap();
        let want: Vec<u32> = (0..n)
            .map(|i| (seed.wrapping_mul(i as u32 + 1) ^ (i >> 3) as u32).wrapping_add(1))
            .collect();
        assert_same("programmatic event", &out.to_vec().unwrap(), &want);
    }
}

fn typed_wrappers_refuse_programmatic_serialization() {
    let s = Stream::new().unwrap();
    let mut out = DeviceBuffer::<u32>::new(64).unwrap();
    out.fill(9).unwrap();
    let cfg = LaunchConfig::new(1, 64)
        .extended()
        .programmatic_stream_serialization();
    let e = kernels::spin::write_index(&s, &cfg, &mut out).unwrap_err();
    if cc() < 90 {
        return expect_too_old::<()>(Err(e));
    }
    let Error::LaunchAttribute {
        attribute, detail, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(*attribute, "programmatic stream serialization");
    assert!(detail.contains("cudaGridDependencySynchronize"), "{detail}");
    s.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![9u32; 64]);
}

fn occupancy_with_flags() {
    let f = kernels::vector_add::VADD.function().unwrap();
    for block in [32u32, 128, 256, 1024] {
        let plain = f.max_active_blocks_per_multiprocessor(block, 0).unwrap();
        let none = f
            .max_active_blocks_per_multiprocessor_with_flags(block, 0, OccupancyFlags::empty())
            .unwrap();
        assert_eq!(plain, none);
        let no_override = f
            .max_active_blocks_per_multiprocessor_with_flags(
                block,
                0,
                OccupancyFlags::DISABLE_CACHING_OVERRIDE,
            )
            .unwrap();
        assert!(
            no_override >= 1 && no_override * block <= 2048,
            "{block}: {no_override}"
        );
    }
    let (g, b) = f.max_potential_block_size(|_| 0, 0).unwrap();
    let (g2, b2) = f
        .max_potential_block_size_with_flags(|_| 0, 0, OccupancyFlags::empty())
        .unwrap();
    assert_eq!((g, b), (g2, b2));
    let (_, b3) = f
        .max_potential_block_size_with_flags(|_| 0, 96, OccupancyFlags::DISABLE_CACHING_OVERRIDE)
        .unwrap();
    assert!(b3 <= 96 && b3 > 0, "{b3}");
}
