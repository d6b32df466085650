//! Dynamic parallelism (kernels launching kernels, `kernels::cdp`), run from the image linked
//! ahead of time with the device runtime (cuda-runtime-devrt): the rules of the device runtime's
//! programming model, each against a CPU reference on fresh random input.
//!
//! Every parent splits the first `n` elements (the shortest buffer) into one segment per block,
//! of as many elements as the block has threads, in linear block order; only the blocks whose
//! segment starts below `n` launch. A refused device-side launch adds 1 to `failures[0]`.

use crate::common::{assert_same, random_f32, random_u32, rng};
use cuda_runtime::{
    kernels, Device, DeviceAttribute, DeviceBuffer, Dim3, Error, LaunchConfig, Limit, Stream,
};

crate::tests![
    the_module_is_the_linked_image,
    child_sees_what_its_parent_block_wrote_before_the_launch,
    launches_into_one_stream_from_one_block_run_in_order,
    children_in_two_named_streams_both_complete,
    tail_launch_sees_the_children_writes_and_is_part_of_the_launch,
    preconditions_are_checked_before_launching,
    hostile_shapes_stay_inside_the_views_in_a_child_process,
    pending_launch_limit_in_a_child_process,
];

/// Tests that run in a process of their own (see `main.rs`), under a watchdog: a device-side
/// fault or hang there cannot take the other tests with it.
pub const CHILDREN: &[(&str, fn())] = &[
    ("cdp_hostile_shapes", hostile_shapes_stay_inside_the_views),
    (
        "cdp_pending_limit",
        pending_launch_limit_is_honoured_or_reported,
    ),
];

fn hostile_shapes_stay_inside_the_views_in_a_child_process() {
    let out = crate::common::run_in_child_within(
        "cdp_hostile_shapes",
        std::time::Duration::from_secs(120),
    );
    assert!(out.contains("cdp hostile shapes passed"), "{out}");
}

fn pending_launch_limit_in_a_child_process() {
    let out = crate::common::run_in_child_within(
        "cdp_pending_limit",
        std::time::Duration::from_secs(120),
    );
    assert!(out.contains("cdp pending limit passed"), "{out}");
}

/// The segments `(begin, count)` of the first `n` elements for blocks of `threads` threads, in a
/// grid of `blocks` blocks.
fn segments(n: usize, threads: usize, blocks: usize) -> Vec<(usize, usize)> {
    (0..blocks)
        .map(|b| b * threads)
        .take_while(|&begin| begin < n)
        .map(|begin| (begin, threads.min(n - begin)))
        .collect()
}

/// Launch shapes: (grid, block), all of whose blocks have segments or some do not, 3-D blocks
/// and grids included. `n` elements.
fn shapes(r: &mut fastrand::Rng, n: usize) -> Vec<LaunchConfig> {
    let mut v = Vec::new();
    for block in [
        Dim3::new(256, 1, 1),
        Dim3::new(8, 4, 2),
        Dim3::new(1024, 1, 1),
        Dim3::new(33, 1, 1),
    ] {
        let t = block.x as usize * block.y as usize * block.z as usize;
        let need = n.div_ceil(t);
        // Exactly enough blocks in x; more than enough in a 2-D grid; fewer than needed.
        v.push(LaunchConfig::new(Dim3::new(need as u32, 1, 1), block));
        let gx = (need as u32).div_ceil(3) + r.u32(0..3);
        v.push(LaunchConfig::new(Dim3::new(gx, 3, 1), block));
        if need > 1 {
            v.push(LaunchConfig::new(Dim3::new((need / 2) as u32, 1, 1), block));
        }
    }
    v
}

fn threads(c: &LaunchConfig) -> usize {
    c.block.x as usize * c.block.y as usize * c.block.z as usize
}

fn blocks_of(c: &LaunchConfig) -> usize {
    c.grid.x as usize * c.grid.y as usize * c.grid.z as usize
}

fn the_module_is_the_linked_image() {
    let m = &kernels::cdp::MODULE;
    assert!(m.uses_device_runtime());
    let image = m
        .linked_image()
        .expect("built with the device-runtime feature");
    assert_eq!(
        cuda_runtime::classify_image(image).unwrap(),
        cuda_runtime::ImageKind::Fatbin
    );
    // Loads on this device (the H100: sm_90 machine code) with the driver alone.
    let f = kernels::cdp::CDP_TAIL_SUMS.function().unwrap();
    let attrs = f.attributes().unwrap();
    let dev = Device::current().unwrap();
    let major = dev
        .attribute(DeviceAttribute::ComputeCapabilityMajor)
        .unwrap();
    let minor = dev
        .attribute(DeviceAttribute::ComputeCapabilityMinor)
        .unwrap();
    eprintln!(
        "cdp_tail_sums: binary version {}, device {major}.{minor}",
        attrs.binary_version
    );
    // Machine code of the device's family, as linked ahead of time (no PTX was JIT-compiled).
    assert_eq!(
        attrs.binary_version / 10,
        major,
        "binary version {}",
        attrs.binary_version
    );
    assert!(attrs.binary_version <= major * 10 + minor);
}

fn child_sees_what_its_parent_block_wrote_before_the_launch() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let n = r.usize(1..40_000);
    for cfg in shapes(&mut r, n) {
        // The shortest buffer sets n; the others are longer by a random amount.
        let extra = r.usize(0..100);
        let src_h = random_f32(&mut r, n + extra);
        let extra = r.usize(0..100);
        let stage_h = random_f32(&mut r, n + extra);
        let out_h = random_f32(&mut r, n);
        let src = DeviceBuffer::from_slice(&src_h).unwrap();
        let mut stage = DeviceBuffer::from_slice(&stage_h).unwrap();
        let mut out = DeviceBuffer::from_slice(&out_h).unwrap();
        let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
        kernels::cdp::cdp_child_sees_parent(&s, &cfg, &src, &mut stage, &mut out, &mut failures)
            .unwrap();
        s.synchronize().unwrap();
        let (mut want_stage, mut want_out) = (stage_h.clone(), out_h.clone());
        for (begin, count) in segments(n, threads(&cfg), blocks_of(&cfg)) {
            for j in 0..count {
                want_stage[begin + j] = 2.0 * src_h[begin + j] + 1.0;
                // Written by another thread of the parent block than the launching one.
                want_out[begin + j] = 2.0 * src_h[begin + count - 1 - j] + 1.0;
            }
        }
        let what = format!("n {n}, grid {:?}, block {:?}", cfg.grid, cfg.block);
        assert_eq!(failures.to_vec().unwrap(), [0], "{what}: refused launches");
        assert_same(
            &format!("{what}: stage"),
            &stage.to_vec().unwrap(),
            &want_stage,
        );
        assert_same(
            &format!("{what}: child output"),
            &out.to_vec().unwrap(),
            &want_out,
        );
    }
}

/// v = src * 33 + 1, then v = v * 33 + k for k in 2..=steps (wrapping).
fn steps_reference(x: u32, steps: u32) -> u32 {
    (1..=steps).fold(x, |v, k| v.wrapping_mul(33).wrapping_add(k))
}

fn launches_into_one_stream_from_one_block_run_in_order() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    for named in [false, true] {
        // Up to 16 launches per block: at most about 100 launching blocks, so that the launches
        // stay within the default pool of 2048 pending ones.
        let n = r.usize(1..6_000);
        for cfg in shapes(&mut r, n)
            .into_iter()
            .filter(|c| threads(c) >= 64)
            .step_by(2)
        {
            let steps = r.u32(2..=16);
            let extra = r.usize(0..50);
            let src_h = random_u32(&mut r, n + extra);
            let out_h = random_u32(&mut r, n);
            let src = DeviceBuffer::from_slice(&src_h).unwrap();
            let mut out = DeviceBuffer::from_slice(&out_h).unwrap();
            let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
            kernels::cdp::cdp_in_order(&s, &cfg, &src, &mut out, steps, named, &mut failures)
                .unwrap();
            s.synchronize().unwrap();
            let mut want = out_h.clone();
            for (begin, count) in segments(n, threads(&cfg), blocks_of(&cfg)) {
                for i in begin..begin + count {
                    want[i] = steps_reference(src_h[i], steps);
                }
            }
            let what = format!(
                "{} stream, {steps} steps, n {n}, grid {:?}, block {:?}",
                if named {
                    "a created"
                } else {
                    "the block's implicit"
                },
                cfg.grid,
                cfg.block
            );
            assert_eq!(failures.to_vec().unwrap(), [0], "{what}: refused launches");
            assert_same(&what, &out.to_vec().unwrap(), &want);
        }
    }
}

/// The mixing of `cdp_mix_child`.
fn mix(x: u32, salt: u32, rounds: u32) -> u32 {
    (0..rounds).fold(x, |v, _| {
        (v ^ salt).wrapping_mul(2654435761).wrapping_add(v >> 13)
    })
}

fn children_in_two_named_streams_both_complete() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    // Two streams and two launches per block: at most about 250 launching blocks.
    let n = r.usize(1..8_000);
    for cfg in shapes(&mut r, n).into_iter().step_by(3) {
        let rounds = r.u32(1..300);
        let extra = r.usize(0..50);
        let src_h = random_u32(&mut r, n + extra);
        let extra = r.usize(0..50);
        let a_h = random_u32(&mut r, n + extra);
        let b_h = random_u32(&mut r, n);
        let src = DeviceBuffer::from_slice(&src_h).unwrap();
        let mut a = DeviceBuffer::from_slice(&a_h).unwrap();
        let mut b = DeviceBuffer::from_slice(&b_h).unwrap();
        let mut times = DeviceBuffer::from_slice(&[u64::MAX, 0, u64::MAX, 0]).unwrap();
        let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
        kernels::cdp::cdp_two_streams(
            &s,
            &cfg,
            &src,
            &mut a,
            &mut b,
            rounds,
            &mut times,
            &mut failures,
        )
        .unwrap();
        s.synchronize().unwrap();
        let (mut want_a, mut want_b) = (a_h.clone(), b_h.clone());
        for (begin, count) in segments(n, threads(&cfg), blocks_of(&cfg)) {
            for i in begin..begin + count {
                want_a[i] = mix(src_h[i], 1, rounds);
                want_b[i] = mix(src_h[i], 2, rounds);
            }
        }
        let what = format!(
            "{rounds} rounds, n {n}, grid {:?}, block {:?}",
            cfg.grid, cfg.block
        );
        assert_eq!(failures.to_vec().unwrap(), [0], "{what}: refused launches");
        assert_same(
            &format!("{what}: first stream"),
            &a.to_vec().unwrap(),
            &want_a,
        );
        assert_same(
            &format!("{what}: second stream"),
            &b.to_vec().unwrap(),
            &want_b,
        );
        let t = times.to_vec().unwrap();
        // Both streams' children ran and recorded a start no later than their end.
        assert!(
            t[0] <= t[1] && t[2] <= t[3] && t[1] > 0 && t[3] > 0,
            "{what}: times {t:?}"
        );
        // An observation, not a rule: whether the two streams' grids overlapped in time.
        let overlap = t[1].min(t[3]) as i128 - t[0].max(t[2]) as i128;
        eprintln!("{what}: the streams' grids overlapped for {overlap} ns (negative: apart)");
    }
}

fn tail_launch_sees_the_children_writes_and_is_part_of_the_launch() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let n = r.usize(1..40_000);
    for cfg in shapes(&mut r, n) {
        let t = threads(&cfg);
        let segs = segments(n, t, blocks_of(&cfg));
        let all_segments = n.div_ceil(t);
        // Fewer sums than segments, or more (the rest untouched).
        let sums_len = match r.u8(0..3) {
            0 => r.usize(1..=all_segments),
            _ => all_segments + r.usize(0..20),
        };
        let extra = r.usize(0..50);
        let src_h = random_u32(&mut r, n + extra);
        let out_h = random_u32(&mut r, n);
        let sums_h: Vec<u64> = (0..sums_len).map(|_| r.u64(..)).collect();
        let src = DeviceBuffer::from_slice(&src_h).unwrap();
        let mut out = DeviceBuffer::from_slice(&out_h).unwrap();
        let mut sums = DeviceBuffer::from_slice(&sums_h).unwrap();
        let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
        kernels::cdp::cdp_tail_sums(&s, &cfg, &src, &mut out, &mut sums, &mut failures).unwrap();
        // Read in stream order, without synchronising first: the copy follows the whole launch,
        // tail grid included.
        let mut got_sums = vec![0u64; sums_len];
        sums.copy_to_host_async(&mut got_sums, &s).unwrap();
        s.synchronize().unwrap();
        let mut want_out = out_h.clone();
        for &(begin, count) in &segs {
            for i in begin..begin + count {
                want_out[i] = src_h[i].wrapping_mul(src_h[i]).wrapping_add(7);
            }
        }
        // The tail sums every segment of out (children's writes where blocks ran, the old
        // contents past the grid), for segments below sums_len.
        let mut want_sums = sums_h.clone();
        for (k, w) in want_sums.iter_mut().enumerate().take(all_segments) {
            let (from, to) = (k * t, ((k + 1) * t).min(n));
            *w = want_out[from..to].iter().map(|&x| x as u64).sum();
        }
        let what = format!(
            "n {n}, {sums_len} sums, grid {:?}, block {:?}",
            cfg.grid, cfg.block
        );
        assert_eq!(failures.to_vec().unwrap(), [0], "{what}: refused launches");
        assert_same(
            &format!("{what}: children"),
            &out.to_vec().unwrap(),
            &want_out,
        );
        assert_same(&format!("{what}: tail sums"), &got_sums, &want_sums);
    }
}

fn preconditions_are_checked_before_launching() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let src = DeviceBuffer::from_slice(&random_u32(&mut r, 64)).unwrap();
    let before = random_u32(&mut r, 64);
    let mut out = DeviceBuffer::from_slice(&before).unwrap();
    let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
    let cfg = LaunchConfig::new(1u32, 64u32);
    let e =
        kernels::cdp::cdp_in_order(&s, &cfg, &src, &mut out, 17, false, &mut failures).unwrap_err();
    assert!(matches!(e, Error::KernelPrecondition { .. }), "{e}");
    let mut b = DeviceBuffer::from_slice(&before).unwrap();
    let mut times = DeviceBuffer::<u64>::zeroed(4).unwrap();
    let e = kernels::cdp::cdp_two_streams(
        &s,
        &cfg,
        &src,
        &mut out,
        &mut b,
        100_001,
        &mut times,
        &mut failures,
    )
    .unwrap_err();
    assert!(matches!(e, Error::KernelPrecondition { .. }), "{e}");
    s.synchronize().unwrap();
    assert_same("nothing ran", &out.to_vec().unwrap(), &before);
}

/// Guard elements on each side of every view.
const PAD: usize = 64;

/// A buffer of `len` random elements between random guards, and the view's range in it.
fn guarded(r: &mut fastrand::Rng, len: usize) -> (Vec<u32>, std::ops::Range<usize>) {
    (random_u32(r, len + 2 * PAD), PAD..PAD + len)
}

/// Every parent with every block shape of the launch tests' hostile list, small and large
/// grids, and views of mismatched lengths (0 included) between guard elements: nothing outside
/// a view changes, and inside every result is exact (or, for a launch the device runtime
/// refused, counted in `failures`: then only its segment may be stale).
fn hostile_shapes_stay_inside_the_views() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let blocks = [
        (1u32, 1u32, 1u32),
        (7, 3, 2),
        (1024, 1, 1),
        (32, 32, 1),
        (1, 1, 64),
    ];
    let grids = [(1u32, 1u32, 1u32), (3, 2, 2), (700, 1, 1)];
    let lengths = [
        (0usize, 10usize),
        (10, 0),
        (1, 1),
        (3000, 2500),
        (2500, 3000),
    ];
    for block in blocks {
        for grid in grids {
            let cfg = LaunchConfig::new(grid, block);
            let (t, nb) = (threads(&cfg), blocks_of(&cfg));
            for (la, lb) in lengths {
                let shape = format!("block {block:?} grid {grid:?} lengths {la} {lb}");
                let n = la.min(lb);
                let segs = segments(n, t, nb);
                let (src_h, src_r) = guarded(&mut r, la);
                let (out_h, out_r) = guarded(&mut r, lb);
                let src = DeviceBuffer::from_slice(&src_h).unwrap();
                let mut out = DeviceBuffer::from_slice(&out_h).unwrap();
                let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
                let in_view = |i: usize| src_h[src_r.start + i];

                // In order, in the block's stream and a created one.
                for named in [false, true] {
                    out.copy_from_host(&out_h).unwrap();
                    failures.copy_from_host(&[0]).unwrap();
                    kernels::cdp::cdp_in_order(
                        &s,
                        &cfg,
                        &src.slice(src_r.clone()).unwrap(),
                        &mut out.slice_mut(out_r.clone()).unwrap(),
                        3,
                        named,
                        &mut failures,
                    )
                    .unwrap();
                    s.synchronize().unwrap();
                    let mut want = out_h.clone();
                    for &(b, c) in &segs {
                        for i in b..b + c {
                            want[out_r.start + i] = steps_reference(in_view(i), 3);
                        }
                    }
                    check_or_refused(
                        &format!("cdp_in_order {shape} named {named}"),
                        &out.to_vec().unwrap(),
                        &want,
                        out_r.start,
                        &segs,
                        failures.to_vec().unwrap()[0],
                    );
                }

                // Two streams: both outputs the same view length; times in a guarded view of
                // 0 to 5 elements (timed only from 4).
                let (b_h, _) = guarded(&mut r, lb);
                let mut b = DeviceBuffer::from_slice(&b_h).unwrap();
                out.copy_from_host(&out_h).unwrap();
                failures.copy_from_host(&[0]).unwrap();
                let times_len = r.usize(0..6);
                let mut times_h = vec![u64::MAX; times_len + 2 * PAD];
                for (k, x) in times_h[PAD..PAD + times_len].iter_mut().enumerate() {
                    *x = if k % 2 == 0 { u64::MAX } else { 0 };
                }
                let mut times = DeviceBuffer::from_slice(&times_h).unwrap();
                kernels::cdp::cdp_two_streams(
                    &s,
                    &cfg,
                    &src.slice(src_r.clone()).unwrap(),
                    &mut out.slice_mut(out_r.clone()).unwrap(),
                    &mut b.slice_mut(out_r.clone()).unwrap(),
                    3,
                    &mut times.slice_mut(PAD..PAD + times_len).unwrap(),
                    &mut failures,
                )
                .unwrap();
                s.synchronize().unwrap();
                let refused = failures.to_vec().unwrap()[0];
                for (salt, got, old) in [
                    (1, out.to_vec().unwrap(), &out_h),
                    (2, b.to_vec().unwrap(), &b_h),
                ] {
                    let mut want = old.clone();
                    for &(sb, c) in &segs {
                        for i in sb..sb + c {
                            want[out_r.start + i] = mix(in_view(i), salt, 3);
                        }
                    }
                    check_or_refused(
                        &format!("cdp_two_streams {shape} stream {salt}"),
                        &got,
                        &want,
                        out_r.start,
                        &segs,
                        refused,
                    );
                }
                let got_times = times.to_vec().unwrap();
                assert_same(
                    &format!("cdp_two_streams {shape}: guards of times"),
                    &[&got_times[..PAD], &got_times[PAD + times_len..]].concat(),
                    &[&times_h[..PAD], &times_h[PAD + times_len..]].concat(),
                );
                if times_len < 4 {
                    assert_same(
                        &format!("cdp_two_streams {shape}: times untouched below 4"),
                        &got_times,
                        &times_h,
                    );
                }

                // Tail sums over the view, into a guarded view of sums.
                out.copy_from_host(&out_h).unwrap();
                failures.copy_from_host(&[0]).unwrap();
                let sums_len = r.usize(0..8);
                let sums_h: Vec<u64> = (0..sums_len + 2 * PAD).map(|_| r.u64(..)).collect();
                let mut sums = DeviceBuffer::from_slice(&sums_h).unwrap();
                kernels::cdp::cdp_tail_sums(
                    &s,
                    &cfg,
                    &src.slice(src_r.clone()).unwrap(),
                    &mut out.slice_mut(out_r.clone()).unwrap(),
                    &mut sums.slice_mut(PAD..PAD + sums_len).unwrap(),
                    &mut failures,
                )
                .unwrap();
                s.synchronize().unwrap();
                let mut want = out_h.clone();
                for &(b, c) in &segs {
                    for i in b..b + c {
                        let x = in_view(i);
                        want[out_r.start + i] = x.wrapping_mul(x).wrapping_add(7);
                    }
                }
                let refused = failures.to_vec().unwrap()[0];
                let got = out.to_vec().unwrap();
                check_or_refused(
                    &format!("cdp_tail_sums {shape}"),
                    &got,
                    &want,
                    out_r.start,
                    &segs,
                    refused,
                );
                let got_sums = sums.to_vec().unwrap();
                let mut want_sums = sums_h.clone();
                for (k, w) in want_sums[PAD..PAD + sums_len]
                    .iter_mut()
                    .enumerate()
                    .take(n.div_ceil(t))
                {
                    let (from, to) = (k * t, ((k + 1) * t).min(n));
                    *w = got[out_r.start + from..out_r.start + to]
                        .iter()
                        .map(|&x| x as u64)
                        .sum();
                }
                if refused == 0 {
                    assert_same(
                        &format!("cdp_tail_sums {shape}: sums"),
                        &got_sums,
                        &want_sums,
                    );
                } else {
                    assert_same(
                        &format!("cdp_tail_sums {shape}: guards"),
                        &[&got_sums[..PAD], &got_sums[PAD + sums_len..]].concat(),
                        &[&sums_h[..PAD], &sums_h[PAD + sums_len..]].concat(),
                    );
                }
            }
        }
    }
    println!("cdp hostile shapes passed");
}

/// `got` equals `want`, except that when `refused` launches were counted, up to that many
/// segments (at `base`) may hold anything (the work of a refused launch is not done; the
/// segment stays inside the view): everything else, guards included, must be exact.
fn check_or_refused(
    what: &str,
    got: &[u32],
    want: &[u32],
    base: usize,
    segs: &[(usize, usize)],
    refused: u32,
) {
    if refused == 0 {
        assert_same(what, got, want);
        return;
    }
    let mut stale = 0;
    let mut fixed = want.to_vec();
    for &(b, c) in segs {
        let r = base + b..base + b + c;
        if got[r.clone()] != want[r.clone()] {
            fixed[r.clone()].copy_from_slice(&got[r]);
            stale += 1;
        }
    }
    assert!(
        stale <= refused as usize,
        "{what}: {stale} stale segments, {refused} refused launches"
    );
    assert_same(what, got, &fixed);
}

/// `cudaLimitDevRuntimePendingLaunchCount`: set and read back; then, with a small pool and many
/// launching blocks, every block either ran its child (its segment is right) or counted a
/// refused launch (its segment is untouched): never a wrong or partial answer.
fn pending_launch_limit_is_honoured_or_reported() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let original = dev.limit(Limit::DevRuntimePendingLaunchCount).unwrap();
    eprintln!("pending launch limit: {original}");
    dev.set_limit(Limit::DevRuntimePendingLaunchCount, 4096)
        .unwrap();
    assert!(dev.limit(Limit::DevRuntimePendingLaunchCount).unwrap() >= 4096);
    dev.set_limit(Limit::DevRuntimePendingLaunchCount, 32)
        .unwrap();
    let small = dev.limit(Limit::DevRuntimePendingLaunchCount).unwrap();
    let s = Stream::new().unwrap();
    let n = 32 * 3000;
    let cfg = LaunchConfig::new(3000u32, 32u32);
    let src_h = random_f32(&mut r, n);
    let out_h = random_f32(&mut r, n);
    let src = DeviceBuffer::from_slice(&src_h).unwrap();
    let mut stage = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut out = DeviceBuffer::from_slice(&out_h).unwrap();
    let mut failures = DeviceBuffer::from_slice(&[0u32]).unwrap();
    let run =
        kernels::cdp::cdp_child_sees_parent(&s, &cfg, &src, &mut stage, &mut out, &mut failures)
            .and_then(|()| s.synchronize());
    dev.set_limit(Limit::DevRuntimePendingLaunchCount, original)
        .unwrap();
    run.unwrap();
    let got = out.to_vec().unwrap();
    let mut untouched = 0;
    for (begin, count) in segments(n, 32, 3000) {
        let seg = &got[begin..begin + count];
        if seg == &out_h[begin..begin + count] {
            untouched += 1;
            continue;
        }
        let want: Vec<f32> = (0..count)
            .map(|j| 2.0 * src_h[begin + count - 1 - j] + 1.0)
            .collect();
        assert_same(&format!("segment at {begin}"), seg, &want);
    }
    let refused = failures.to_vec().unwrap()[0];
    eprintln!("limit {small}: 3000 launching blocks, {refused} launches refused");
    assert_eq!(refused as usize, untouched);
    println!("cdp pending limit passed");
}
