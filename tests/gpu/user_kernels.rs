//! User kernels launched through `Function::launch` with typed arguments (`kernel_args!`): the
//! launch notes the use of every buffer it is given, so drops, CPU views and other streams wait
//! for the kernel exactly as for the crate's own kernels.
//!
//! The kernels are the crate's test kernels loaded as user PTX (`Module::from_ptx`), so the
//! launches below go through the user path only.

use crate::common::{assert_close, assert_same, random_f32, rng, spin_module};
use cuda_runtime::{
    kernel_args, kernels, Device, DeviceBuffer, Error, HostAllocFlags, KernelArg, LaunchConfig,
    ManagedBuffer, Module, PinnedBuffer, Stream, StreamFlags,
};

crate::tests![
    typed_arguments_launch_and_match_cpu,
    typed_arguments_are_checked_against_the_parameter_list,
    dropped_buffer_waits_for_the_user_kernel,
    cpu_views_wait_for_user_kernels_on_mapped_and_managed_memory,
    async_buffer_used_by_a_user_kernel_on_another_stream_waits_for_its_allocation,
    user_launches_from_many_threads,
];

/// The expected output of `write_index`.
fn index_hash(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect()
}

fn typed_arguments_launch_and_match_cpu() {
    let mut r = rng();
    // four_args(float* out, size_t out_len, int a, float b, double c): out[0] = a + b + c.
    let params = Module::from_ptx(kernels::params::PTX).unwrap();
    let four = params.function("four_args").unwrap();
    let vadd_m = Module::from_ptx(kernels::vector_add::PTX).unwrap();
    // vadd(const float* a, size_t a_len, const float* b, size_t b_len, float* c, size_t c_len)
    let vadd = vadd_m.function("vadd").unwrap();
    let s = Stream::new().unwrap();
    for _ in 0..3 {
        let (ia, fb, dc) = (
            r.i32(-1000..1000),
            r.f32() * 100.0,
            r.f64() * 1000.0 - 500.0,
        );
        let mut out = DeviceBuffer::from_slice(&[f32::NAN; 3]).unwrap();
        let len = out.len();
        // SAFETY: four_args writes out[0] only when out_len (= out's length) > 0.
        unsafe {
            four.launch(
                &s,
                &LaunchConfig::new(1u32, 32u32),
                &kernel_args![&mut out, len, ia, fb, dc],
            )
        }
        .unwrap();
        let got = out.to_vec().unwrap();
        let want = (ia as f32 + fb) as f64 + dc;
        assert!(
            (got[0] as f64 - want).abs() <= 1e-3 * want.abs().max(1.0),
            "four_args: got {}, expected {want}",
            got[0]
        );
        assert!(got[1].is_nan() && got[2].is_nan(), "wrote past out[0]");

        // Views by value and by reference: c[k..] = a[k..] + b[k..] on a sub-range.
        let n = r.usize(1..200_000);
        let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
        let (da, db) = (
            DeviceBuffer::from_slice(&a).unwrap(),
            DeviceBuffer::from_slice(&b).unwrap(),
        );
        let mut dc = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
        let k = r.usize(0..n);
        let m = n - k;
        let av = da.slice(k..).unwrap();
        let cfg = LaunchConfig::for_elements(m, 256).unwrap();
        // SAFETY: vadd reads a[i], b[i] and writes c[i] for i below each length, passed beside
        // each pointer: the views' lengths.
        unsafe {
            vadd.launch(
                &s,
                &cfg,
                &kernel_args![
                    &av,
                    m,
                    db.slice(k..).unwrap(),
                    m,
                    dc.slice_mut(k..).unwrap(),
                    m
                ],
            )
        }
        .unwrap();
        let got = dc.to_vec().unwrap();
        let want: Vec<f32> = a[k..].iter().zip(&b[k..]).map(|(x, y)| x + y).collect();
        assert_same("vadd on views", &got[k..], &want);
        assert!(got[..k].iter().all(|v| v.is_nan()), "wrote before the view");
    }
}

fn typed_arguments_are_checked_against_the_parameter_list() {
    let params = Module::from_ptx(kernels::params::PTX).unwrap();
    let four = params.function("four_args").unwrap();
    let mut out = DeviceBuffer::from_slice(&[7.0f32]).unwrap();
    let s = Stream::new().unwrap();
    let cfg = LaunchConfig::new(1u32, 1u32);
    // Each mismatch is refused before launching, with the argument's position and sizes.
    let cases: Vec<(Vec<KernelArg<'_>>, &str)> = vec![
        // 4 arguments for 5 parameters.
        (
            kernel_args![&out, 1usize, 3i32, 1.0f32].to_vec(),
            "4 arguments",
        ),
        // An f32 where the double is.
        (
            kernel_args![&out, 1usize, 3i32, 1.0f32, 2.0f32].to_vec(),
            "argument 4 is 4 bytes",
        ),
        // A u32 for the size_t length.
        (
            kernel_args![&out, 1u32, 3i32, 1.0f32, 2.0f64].to_vec(),
            "argument 1 is 4 bytes",
        ),
        // A bool (one byte) for the int.
        (
            kernel_args![&out, 1usize, true, 1.0f32, 2.0f64].to_vec(),
            "argument 2 is 1 bytes",
        ),
    ];
    for (args, want) in cases {
        // SAFETY: refused before launching (checked below).
        let e = unsafe { four.launch(&s, &cfg, &args) }.unwrap_err();
        assert!(
            matches!(&e, Error::KernelArguments { kernel, detail } if kernel == "four_args" && detail.contains(want)),
            "{want}: {e}"
        );
    }
    s.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), [7.0], "a refused launch ran");
    // The sizes each typed argument has.
    let sizes: Vec<usize> =
        kernel_args![&out, 1u8, 1i16, 1u32, 1i64, 1usize, 1.0f32, 1.0f64, false]
            .iter()
            .map(KernelArg::size)
            .collect();
    assert_eq!(sizes, [8, 1, 2, 4, 8, 8, 4, 8, 1]);
    let access: Vec<Option<bool>> = kernel_args![&out, 1u64]
        .iter()
        .map(KernelArg::memory_access)
        .collect();
    assert_eq!(access, [Some(false), None]);
    assert_eq!(KernelArg::from(&mut out).memory_access(), Some(true));
}

fn dropped_buffer_waits_for_the_user_kernel() {
    let mut r = rng();
    let m = spin_module();
    // spin_read_sum(const float* src, size_t src_len, float* out, size_t out_len, u64 ns)
    let f = m.function("spin_read_sum").unwrap();
    for stream in [
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
        Stream::legacy().unwrap(),
        Stream::per_thread().unwrap(),
    ] {
        let n = r.usize(1..4096);
        let src: Vec<f32> = (0..n).map(|_| r.u32(0..1000) as f32).collect();
        let want: f32 = src.iter().sum();
        let dsrc = DeviceBuffer::from_slice(&src).unwrap();
        let mut out = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
        // SAFETY: spin_read_sum reads src below src_len and writes out[0] when out_len > 0.
        unsafe {
            f.launch(
                &stream,
                &LaunchConfig::new(1u32, 1u32),
                &kernel_args![&dsrc, n, &mut out, 1usize, 50_000_000u64],
            )
        }
        .unwrap();
        // Dropped while the kernel spins; new buffers of the same size are then filled with
        // other values: had the memory been freed at once, the kernel would sum those.
        drop(dsrc);
        let junk: Vec<DeviceBuffer<f32>> = (0..8)
            .map(|_| {
                let mut b = DeviceBuffer::<f32>::new(n).unwrap();
                b.fill(-1.0e6).unwrap();
                b
            })
            .collect();
        // `to_vec` is on the legacy stream, which does not wait for a non-blocking one.
        stream.synchronize().unwrap();
        assert_eq!(
            out.to_vec().unwrap(),
            [want],
            "the kernel read freed memory"
        );
        drop(junk);
    }
}

fn cpu_views_wait_for_user_kernels_on_mapped_and_managed_memory() {
    if !Device::current()
        .unwrap()
        .properties()
        .unwrap()
        .can_map_host_memory
    {
        eprintln!("mapped memory is not supported here: skipped");
        return;
    }
    let m = spin_module();
    let spin = m.function("spin").unwrap();
    let write_index = m.function("write_index").unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut stamps = DeviceBuffer::<u64>::new(2).unwrap();
    let n = 1 << 16;
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let mut pinned = PinnedBuffer::<u32>::with_flags(n, HostAllocFlags::MAPPED).unwrap();
    pinned.as_mut_slice().unwrap().fill(0);
    // SAFETY: spin writes stamps[0..2] (below stamps_len); write_index writes out[i] for
    // i < out_len, the buffer's length.
    unsafe {
        spin.launch(
            &s,
            &LaunchConfig::new(1u32, 1u32),
            &kernel_args![&mut stamps, 2usize, 50_000_000u64, 0i32],
        )
        .unwrap();
        write_index
            .launch(&s, &cfg, &kernel_args![&mut pinned, n])
            .unwrap();
    }
    // No synchronisation: the view waits for exactly the noted write.
    assert_same(
        "mapped memory after a user kernel",
        &pinned.as_slice().unwrap(),
        &index_hash(n),
    );

    if Device::current()
        .unwrap()
        .properties()
        .unwrap()
        .concurrent_managed_access
    {
        let mut managed = ManagedBuffer::<u32>::new(n).unwrap();
        managed.as_mut_slice().unwrap().fill(0);
        // SAFETY: as above.
        unsafe {
            spin.launch(
                &s,
                &LaunchConfig::new(1u32, 1u32),
                &kernel_args![&mut stamps, 2usize, 50_000_000u64, 0i32],
            )
            .unwrap();
            write_index
                .launch(&s, &cfg, &kernel_args![&mut managed, n])
                .unwrap();
        }
        assert_same(
            "managed memory after a user kernel",
            &managed.as_slice().unwrap(),
            &index_hash(n),
        );
    }
}

fn async_buffer_used_by_a_user_kernel_on_another_stream_waits_for_its_allocation() {
    let m = spin_module();
    let read_sum = m.function("spin_read_sum").unwrap();
    let write_index = m.function("write_index").unwrap();
    let a = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let b = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let n = 1 << 16;
    let mut result = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    // `old` is read by a kernel spinning ~50 ms on A, then freed on A; `new`, allocated on A
    // after it, may be the same memory; a user kernel on B writes all of `new` at once.
    let mut old = DeviceBuffer::<f32>::new_async(n, &a).unwrap();
    old.fill_async(1.0, &a).unwrap();
    // SAFETY: spin_read_sum reads src below src_len and writes out[0] when out_len > 0.
    unsafe {
        read_sum
            .launch(
                &a,
                &LaunchConfig::new(1u32, 1u32),
                &kernel_args![&old, n, &mut result, 1usize, 50_000_000u64],
            )
            .unwrap();
    }
    drop(old);
    let mut new = DeviceBuffer::<u32>::new_async(n, &a).unwrap();
    // SAFETY: write_index writes out[i] for i < out_len, the buffer's length.
    unsafe {
        write_index
            .launch(
                &b,
                &LaunchConfig::for_elements(n, 256).unwrap(),
                &kernel_args![&mut new, n],
            )
            .unwrap();
    }
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    // Had B's kernel run before A's reader, the sum would be of hashes, not of ones.
    assert_eq!(
        result.to_vec().unwrap(),
        [n as f32],
        "the reader saw the new buffer's data"
    );
    assert_same("new", &new.to_vec().unwrap(), &index_hash(n));
}

fn user_launches_from_many_threads() {
    let m = std::sync::Arc::new(Module::from_ptx(kernels::vector_add::PTX).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut r = rng();
                let f = m.function("vadd").unwrap();
                let n = 1000 + 37 * t;
                let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
                let (da, db) = (
                    DeviceBuffer::from_slice(&a).unwrap(),
                    DeviceBuffer::from_slice(&b).unwrap(),
                );
                let s = Stream::per_thread().unwrap();
                for _ in 0..20 {
                    let mut dc = DeviceBuffer::<f32>::new(n).unwrap();
                    // SAFETY: vadd stays below each length, passed beside each pointer.
                    unsafe {
                        f.launch(
                            &s,
                            &LaunchConfig::for_elements(n, 128).unwrap(),
                            &kernel_args![&da, n, &db, n, &mut dc, n],
                        )
                    }
                    .unwrap();
                    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                    assert_close("vadd per thread", &dc.to_vec().unwrap(), &want, 0.0);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
