//! Kernel launch: typed launches of the crate's kernels, validation, user PTX with argument
//! checks, attributes, occupancy, cooperative launch, module globals, sticky errors, and the
//! stream-ordered safety of dropped buffers.

use crate::common::{assert_close, assert_same, check_against_cpu, random_f32, random_u32, rng};
use cuda_runtime::{
    classify_image, get_last_error, kernels, Device, DeviceBuffer, DeviceView, DeviceViewMut,
    Error, ErrorCode, ImageKind, KernelArg, LaunchConfig, Module, Stream, StreamFlags,
};

crate::tests![
    vadd_matches_cpu,
    vadd_on_views_and_short_outputs_stays_in_bounds,
    launch_validation_names_values,
    launch_on_another_devices_stream_fails,
    user_ptx_arguments_are_checked,
    fake_entries_in_ptx_comments_do_not_change_the_parameter_list,
    crafted_elf_is_refused_by_the_safe_loaders,
    attributes_and_occupancy,
    cooperative_launch_limits,
    module_globals_round_trip,
    dropped_buffer_is_not_reused_while_a_kernel_reads_it,
    async_buffer_used_on_another_stream_waits_for_its_allocation,
    threads_launch_concurrently,
    sticky_error_in_a_child_process,
    transpose_hostile_shapes_in_a_child_process,
    shared_reverse_hostile_shapes_in_a_child_process,
    scale_rows_hostile_shapes_in_a_child_process,
    other_kernels_hostile_shapes_in_a_child_process;
    exclusive:
    occupancy_closure_may_reset_the_device,
];

/// Tests that run in a process of their own (see `main.rs`).
pub const CHILDREN: &[(&str, fn())] = &[
    ("sticky_error", sticky_error),
    ("transpose_hostile_shapes", transpose_hostile_shapes),
    (
        "shared_reverse_hostile_shapes",
        shared_reverse_hostile_shapes,
    ),
    ("scale_rows_hostile_shapes", scale_rows_hostile_shapes),
    ("other_kernels_hostile_shapes", other_kernels_hostile_shapes),
];

fn sticky_error_in_a_child_process() {
    let out = crate::common::run_in_child("sticky_error");
    assert!(out.contains("sticky checks passed"), "{out}");
}

fn vadd_matches_cpu() {
    check_against_cpu(
        "vadd",
        |r| {
            let n = r.usize(1..200_000);
            (random_f32(r, n), random_f32(r, n))
        },
        |(a, b)| {
            let s = Stream::new().unwrap();
            let (da, db) = (
                DeviceBuffer::from_slice(a).unwrap(),
                DeviceBuffer::from_slice(b).unwrap(),
            );
            let mut dc = DeviceBuffer::<f32>::new(a.len()).unwrap();
            dc.fill(f32::NAN).unwrap();
            kernels::vector_add::vadd(
                &s,
                &LaunchConfig::for_elements(a.len(), 256).unwrap(),
                &da,
                &db,
                &mut dc,
            )
            .unwrap();
            s.synchronize().unwrap();
            dc.to_vec().unwrap().iter().map(|x| x.to_bits()).collect()
        },
        |(a, b)| a.iter().zip(b).map(|(x, y)| (x + y).to_bits()).collect(),
    );
}

fn vadd_on_views_and_short_outputs_stays_in_bounds() {
    let mut r = rng();
    let n = 10_000;
    let (a, b) = (random_f32(&mut r, n), random_f32(&mut r, n));
    let (da, db) = (
        DeviceBuffer::from_slice(&a).unwrap(),
        DeviceBuffer::from_slice(&b).unwrap(),
    );
    let sentinel = random_f32(&mut r, n);
    let mut dc = DeviceBuffer::from_slice(&sentinel).unwrap();
    let s = Stream::new().unwrap();
    // Output view shorter than the inputs: the kernel bounds itself by the shortest length.
    {
        let mut out = dc.slice_mut(100..600).unwrap();
        kernels::vector_add::vadd(
            &s,
            &LaunchConfig::for_elements(n, 128).unwrap(),
            &da,
            &db,
            &mut out,
        )
        .unwrap();
    }
    s.synchronize().unwrap();
    let got = dc.to_vec().unwrap();
    let mut want = sentinel.clone();
    for i in 0..500 {
        want[100 + i] = a[i] + b[i];
    }
    assert_same("vadd into a view", &got, &want);
}

fn launch_validation_names_values() {
    let dev = Device::current().unwrap();
    let max_threads = dev.properties().unwrap().max_threads_per_block as u32;
    let s = Stream::new().unwrap();
    let mut out = DeviceBuffer::<u32>::new(16).unwrap();
    let bad = [
        (LaunchConfig::new(1u32, max_threads + 1), "block.x"),
        (LaunchConfig::new(0u32, 32u32), "grid.x"),
        (LaunchConfig::new((1u32, 70_000u32), 32u32), "grid.y"),
        (
            LaunchConfig::new(1u32, (32u32, 32u32, 2u32)),
            "threads per block",
        ),
        (
            LaunchConfig::new(1u32, 32u32).with_shared_mem(u32::MAX),
            "dynamic shared memory per block (bytes)",
        ),
    ];
    for (cfg, what) in bad {
        let e = kernels::spin::write_index(&s, &cfg, &mut out).unwrap_err();
        match &e {
            Error::InvalidConfiguration { what: w, .. } => assert_eq!(w, &what, "{e}"),
            other => panic!("expected InvalidConfiguration for {what}, got {other}"),
        }
        assert_eq!(e.code(), ErrorCode::InvalidValue);
        assert_eq!(
            get_last_error().map(|e| e.code()),
            Some(ErrorCode::InvalidValue)
        );
    }
    // The stream is still fine.
    kernels::spin::write_index(&s, &LaunchConfig::for_elements(16, 32).unwrap(), &mut out).unwrap();
    s.synchronize().unwrap();
}

fn launch_on_another_devices_stream_fails() {
    let n = cuda_runtime::device_count().unwrap();
    if n < 2 {
        eprintln!(
            "one device: the cross-device launch rule needs two (checked on the 2-GPU machine)"
        );
        return;
    }
    std::thread::spawn(|| {
        cuda_runtime::set_device(1).unwrap();
        let s1 = Stream::new().unwrap();
        let mut out = DeviceBuffer::<u32>::new(16).unwrap();
        cuda_runtime::set_device(0).unwrap();
        let e =
            kernels::spin::write_index(&s1, &LaunchConfig::for_elements(16, 32).unwrap(), &mut out)
                .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidResourceHandle, "{e}");
    })
    .join()
    .unwrap();
}

pub(crate) const USER_PTX: &str = r#"
.version 8.0
.target sm_75
.address_size 64
.visible .entry axpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [y];
    ld.param.u64 %rd2, [x];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd7];
    ld.global.f32 %f3, [%rd6];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd6], %f4;
DONE:
    ret;
}
"#;

fn user_ptx_arguments_are_checked() {
    let mut r = rng();
    let n = 50_000usize;
    let (x, y) = (random_f32(&mut r, n), random_f32(&mut r, n));
    let a = r.f32() * 4.0 - 2.0;
    let module = Module::from_ptx(USER_PTX).unwrap();
    let f = module.function("axpy").unwrap();
    assert_eq!(f.params().len(), 4);
    assert_eq!(
        f.params().iter().map(|p| p.size).collect::<Vec<_>>(),
        vec![8, 8, 4, 4]
    );
    let dx = DeviceBuffer::from_slice(&x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&y).unwrap();
    let s = Stream::new().unwrap();
    let (py, px, nn) = (dy.as_raw(), dx.as_raw(), n as u32);
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    // Too few arguments, and a wrong size: errors, no launch.
    // SAFETY: these calls are refused before launching (checked below).
    let e = unsafe { f.launch(&s, &cfg, &[KernelArg::new(&py), KernelArg::new(&px)]) }.unwrap_err();
    assert!(
        matches!(&e, Error::KernelArguments { detail, .. } if detail.contains("2 arguments") && detail.contains("4 parameters")),
        "{e}"
    );
    let wide = a as f64;
    // SAFETY: refused before launching.
    let e = unsafe {
        f.launch(
            &s,
            &cfg,
            &[
                KernelArg::new(&py),
                KernelArg::new(&px),
                KernelArg::new(&wide),
                KernelArg::new(&nn),
            ],
        )
    }
    .unwrap_err();
    assert!(
        matches!(&e, Error::KernelArguments { detail, .. } if detail.contains("argument 2 is 8 bytes")),
        "{e}"
    );
    // SAFETY: y and x are live buffers of n floats, synchronised before they are read or dropped;
    // the kernel checks i < n.
    unsafe {
        f.launch(
            &s,
            &cfg,
            &[
                KernelArg::new(&py),
                KernelArg::new(&px),
                KernelArg::new(&a),
                KernelArg::new(&nn),
            ],
        )
        .unwrap()
    };
    s.synchronize().unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(&x, &y)| a.mul_add(x, y)).collect();
    assert_close("axpy", &dy.to_vec().unwrap(), &want, 1e-6);
    dy.fill(0.0).unwrap();
}

/// `USER_PTX` with fake `axpy` entries in line and block comments before the real one, each
/// with another parameter list.
fn commented_user_ptx() -> String {
    let head = ".visible .entry axpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)";
    let commented = "// .visible .entry axpy(.param .u64 y)
/* An earlier version, kept for reference:
.visible .entry axpy(
    .param .u64 y,
    .param .u32 n
)
{ ret; }
*/
.visible .entry axpy(.param .u64 y, /* .param .u64 z, */ .param .u64 x, // .entry axpy(
    .param .f32 a, .param .u32 n)";
    assert!(USER_PTX.contains(head));
    USER_PTX.replace(head, commented)
}

/// A file under the temporary directory, removed on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "cuda-runtime-{}-{}-{name}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn fake_entries_in_ptx_comments_do_not_change_the_parameter_list() {
    let ptx = commented_user_ptx();
    // From text, and from files with and without a final NUL.
    let with_nul = TempFile::new("axpy0.ptx", format!("{ptx}\0").as_bytes());
    let without_nul = TempFile::new("axpy.ptx", ptx.as_bytes());
    let modules = [
        Module::from_ptx(&ptx).unwrap(),
        Module::from_file(&with_nul.0).unwrap(),
        Module::from_file(&without_nul.0).unwrap(),
    ];
    let mut r = rng();
    for module in &modules {
        let f = module.function("axpy").unwrap();
        assert_eq!(
            f.params().iter().map(|p| p.size).collect::<Vec<_>>(),
            vec![8, 8, 4, 4],
            "the parameter list of the real entry, not of a commented one"
        );
        let n = r.usize(1..100_000);
        let (x, y) = (random_f32(&mut r, n), random_f32(&mut r, n));
        let a = r.f32() * 4.0 - 2.0;
        let dx = DeviceBuffer::from_slice(&x).unwrap();
        let dy = DeviceBuffer::from_slice(&y).unwrap();
        let s = Stream::new().unwrap();
        let (py, px, nn) = (dy.as_raw(), dx.as_raw(), n as u32);
        let cfg = LaunchConfig::for_elements(n, 256).unwrap();
        // What the commented entries declare is refused before launching.
        // SAFETY: refused before launching (checked below).
        let e = unsafe { f.launch(&s, &cfg, &[KernelArg::new(&py)]) }.unwrap_err();
        assert!(
            matches!(&e, Error::KernelArguments { detail, .. } if detail.contains("1 arguments") && detail.contains("4 parameters")),
            "{e}"
        );
        // SAFETY: y and x are live buffers of n floats, synchronised before they are read or
        // dropped; the kernel checks i < n.
        unsafe {
            f.launch(
                &s,
                &cfg,
                &[
                    KernelArg::new(&py),
                    KernelArg::new(&px),
                    KernelArg::new(&a),
                    KernelArg::new(&nn),
                ],
            )
            .unwrap()
        };
        s.synchronize().unwrap();
        let want: Vec<f32> = x.iter().zip(&y).map(|(&x, &y)| a.mul_add(x, y)).collect();
        assert_close(
            "axpy from commented PTX",
            &dy.to_vec().unwrap(),
            &want,
            1e-6,
        );
    }
}

/// An ELF64 header like the one that crashed the driver from safe code on an H100: a
/// section header table at an offset far past the end of the bytes.
fn crafted_elf() -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..9].copy_from_slice(b"\x7fELF\x02\x01\x01\x33\x07");
    b[16..18].copy_from_slice(&2u16.to_le_bytes());
    b[18..20].copy_from_slice(&190u16.to_le_bytes()); // EM_CUDA
    b[20..24].copy_from_slice(&1u32.to_le_bytes());
    b[40..48].copy_from_slice(&0xffff_ffff_ffff_ff00u64.to_le_bytes()); // e_shoff
    b[52..54].copy_from_slice(&64u16.to_le_bytes());
    b[58..60].copy_from_slice(&64u16.to_le_bytes());
    b[60..62].copy_from_slice(&4u16.to_le_bytes());
    b
}

fn crafted_elf_is_refused_by_the_safe_loaders() {
    let is_binary_refusal = |e: &Error, kind| {
        matches!(e, Error::InvalidModuleImage { kind: Some(k), .. } if *k == kind)
            && e.code() == ErrorCode::InvalidValue
    };
    let elf = crafted_elf();
    let file = TempFile::new("crafted.cubin", &elf);
    let e = Module::from_file(&file.0).unwrap_err();
    assert!(is_binary_refusal(&e, ImageKind::Cubin), "{e}");
    assert_eq!(
        get_last_error().map(|e| e.code()),
        Some(ErrorCode::InvalidValue)
    );
    // The same header as a `&str` (no NUL, valid UTF-8), which `from_ptx` must not hand over.
    let text = format!("\x7fELF\x02\x01{}", "A".repeat(58));
    let e = Module::from_ptx(&text).unwrap_err();
    assert!(is_binary_refusal(&e, ImageKind::Cubin), "{e}");
    // A fatbin file too.
    let mut fatbin = 0xBA55_ED50u32.to_le_bytes().to_vec();
    fatbin.extend(1u16.to_le_bytes());
    fatbin.extend(16u16.to_le_bytes());
    fatbin.extend((1u64 << 40).to_le_bytes());
    let file = TempFile::new("crafted.fatbin", &fatbin);
    let e = Module::from_file(&file.0).unwrap_err();
    assert!(is_binary_refusal(&e, ImageKind::Fatbin), "{e}");
    // The unsafe loader checks the headers before the driver sees them.
    let e = classify_image(&elf).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidModuleImage {
                at: Some(0xffff_ffff_ffff_ff00),
                ..
            }
        ),
        "{e}"
    );
    // SAFETY: deliberately malformed bytes, to check that the header check refuses them before
    // the driver is called (the `classify_image` refusal above is what `from_image` runs first).
    let e = unsafe { Module::from_image(&elf) }.unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidModuleImage {
                kind: Some(ImageKind::Cubin),
                ..
            }
        ),
        "{e}"
    );
    // The device is fine afterwards.
    Module::from_ptx(USER_PTX)
        .unwrap()
        .function("axpy")
        .unwrap();
}

fn attributes_and_occupancy() {
    let f = kernels::transpose::TRANSPOSE_NO_BANK_CONFLICTS
        .function()
        .unwrap();
    let at = f.attributes().unwrap();
    assert_eq!(at.shared_size_bytes, 32 * 33 * 4, "{at:?}");
    assert_eq!(at.ptx_version, 75);
    assert!(at.num_regs > 0 && at.max_threads_per_block >= 256, "{at:?}");
    let per_sm = f.max_active_blocks_per_multiprocessor(256, 0).unwrap();
    assert!(per_sm >= 1);
    let props = Device::current().unwrap().properties().unwrap();
    let by_smem = props.shared_mem_per_multiprocessor / (at.shared_size_bytes + 1024).max(1);
    assert!(per_sm as usize <= by_smem.max(1) + 1, "{per_sm} {by_smem}");
    // Dynamic shared memory: the reversal kernel needs 4 bytes per thread.
    let rev = kernels::shared_reverse::DYNAMIC_REVERSE.function().unwrap();
    let (grid, block) = rev.max_potential_block_size(|b| b as usize * 4, 0).unwrap();
    assert!(block > 0 && block % 32 == 0 && block <= 1024, "{block}");
    assert!(grid >= props.multi_processor_count as u32, "{grid}");
    let avail = rev
        .available_dynamic_shared_memory_per_block(2, 256)
        .unwrap();
    assert!(avail > 0);
    // Review rev-d15 (NOT yet run on a GPU): values above i32::MAX were passed on negative.
    let e = rev
        .max_active_blocks_per_multiprocessor(u32::MAX, 0)
        .unwrap_err();
    assert!(e.to_string().contains("4294967295"), "{e}");
    let e = rev
        .available_dynamic_shared_memory_per_block(1 << 31, 256)
        .unwrap_err();
    assert!(e.to_string().contains("2147483648"), "{e}");
    rev.set_max_dynamic_shared_size(64 * 1024).unwrap();
    assert_eq!(
        rev.attributes().unwrap().max_dynamic_shared_size_bytes,
        64 * 1024
    );
    rev.set_max_dynamic_shared_size(48 * 1024).unwrap();
    rev.set_preferred_shared_memory_carveout(50).unwrap();
    assert!(rev.set_preferred_shared_memory_carveout(101).is_err());
}

/// Review rev-d15: the dynamic shared memory closure of `max_potential_block_size` runs outside
/// the crate's entry of the device, so a reset made in it is a reset like any other: the search
/// reports it (`ContextDestroyed`) instead of asking the driver about the reset context's
/// function; a closure that calls the crate works. NOT yet run on a GPU (the null driver's
/// scenario `occupancy_reset` shows it).
fn occupancy_closure_may_reset_the_device() {
    let dev = Device::current().unwrap();
    let m = Module::from_ptx(kernels::shared_reverse::PTX).unwrap();
    let rev = m.function("dynamic_reverse").unwrap();
    let (grid, block) = rev
        .max_potential_block_size(
            |b| {
                rev.attributes().unwrap();
                b as usize * 4
            },
            0,
        )
        .unwrap();
    assert!(block > 0 && block % 32 == 0 && grid > 0, "{grid} {block}");
    let calls = std::cell::Cell::new(0u32);
    let r = rev.max_potential_block_size(
        |b| {
            if calls.replace(calls.get() + 1) == 0 {
                dev.reset().unwrap();
            }
            b as usize * 4
        },
        0,
    );
    assert!(matches!(r, Err(Error::ContextDestroyed { .. })), "{r:?}");
    assert!(calls.get() > 1, "{}", calls.get());
    // The device works on, with the module loaded again.
    let m = Module::from_ptx(kernels::shared_reverse::PTX).unwrap();
    let rev = m.function("dynamic_reverse").unwrap();
    assert!(rev.max_potential_block_size(|b| b as usize * 4, 0).is_ok());
}

fn cooperative_launch_limits() {
    let f = kernels::spin::WRITE_INDEX.function().unwrap();
    let props = Device::current().unwrap().properties().unwrap();
    let per_sm = f.max_active_blocks_per_multiprocessor(128, 0).unwrap();
    let fit = per_sm * props.multi_processor_count as u32;
    let n = (fit * 128) as usize;
    let mut out = DeviceBuffer::<u32>::new(n).unwrap();
    out.fill(7).unwrap();
    let s = Stream::new().unwrap();
    let (p, len) = (out.as_raw(), n);
    // SAFETY: `out` holds `len` u32s and outlives the kernel (synchronised below); the kernel
    // writes only below `len`.
    unsafe {
        f.launch_cooperative(
            &s,
            &LaunchConfig::new(fit, 128u32),
            &[KernelArg::new(&p), KernelArg::new(&len)],
        )
        .unwrap()
    };
    s.synchronize().unwrap();
    let want: Vec<u32> = (0..n as u32)
        .map(|i: u32| i.wrapping_mul(2654435761))
        .collect();
    assert_same("cooperative write_index", &out.to_vec().unwrap(), &want);
    // SAFETY: refused before launching.
    let e = unsafe {
        f.launch_cooperative(
            &s,
            &LaunchConfig::new(fit + 1, 128u32),
            &[KernelArg::new(&p), KernelArg::new(&len)],
        )
    }
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::CooperativeLaunchTooLarge, "{e}");
}

fn module_globals_round_trip() {
    let mut r = rng();
    let m = &kernels::constant_memory::MODULE;
    let table = m.global::<[f32; 16]>("coeffs").unwrap();
    assert_eq!(table.size(), 64);
    let mut c = [0f32; 16];
    for x in c.iter_mut() {
        *x = r.f32() - 0.5;
    }
    table.copy_from_host(&c).unwrap();
    assert_eq!(table.copy_to_host().unwrap(), c);
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    c[3] = 42.0;
    table.copy_from_host_async(&c, &s).unwrap();
    assert_eq!(table.copy_to_host_async(&s).unwrap(), c);
    // The kernel sees the table.
    let x = random_f32(&mut r, 1000)
        .iter()
        .map(|v| v / 1000.0)
        .collect::<Vec<_>>();
    let dx = DeviceBuffer::from_slice(&x).unwrap();
    let mut dy = DeviceBuffer::<f32>::new(x.len()).unwrap();
    kernels::constant_memory::poly_eval(
        &s,
        &LaunchConfig::for_elements(x.len(), 128).unwrap(),
        &dx,
        &mut dy,
        15,
    )
    .unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&x| c.iter().rev().fold(0f32, |acc, &k| acc * x + k))
        .collect();
    assert_close("poly_eval", &dy.to_vec().unwrap(), &want, 1e-4);
    // Wrong name and wrong size.
    let e = m.global::<[f32; 8]>("coeffs").unwrap_err();
    assert_eq!(
        e,
        Error::SymbolSize {
            name: "coeffs".into(),
            symbol_size: 64,
            host_size: 32
        }
    );
}

fn dropped_buffer_is_not_reused_while_a_kernel_reads_it() {
    // A long kernel on stream B reads `src` (allocated for stream A); `src` is dropped at once and
    // a new buffer of the same size is allocated and overwritten. The kernel must still sum the
    // original data.
    let mut r = rng();
    let n = 1 << 20;
    let data: Vec<f32> = (0..n).map(|_| (r.u32(0..8)) as f32).collect();
    let a = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let b = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    for async_alloc in [false, true] {
        let mut src = if async_alloc {
            DeviceBuffer::<f32>::new_async(n, &a).unwrap()
        } else {
            DeviceBuffer::<f32>::new(n).unwrap()
        };
        src.copy_from_host_async(&data, &a).unwrap();
        a.synchronize().unwrap();
        let mut out = DeviceBuffer::<f32>::zeroed(1).unwrap();
        kernels::spin::spin_read_sum(
            &b,
            &LaunchConfig::new(1u32, 1u32),
            &src,
            &mut out,
            100_000_000,
        )
        .unwrap();
        drop(src);
        let mut reuse = if async_alloc {
            DeviceBuffer::<f32>::new_async(n, &a).unwrap()
        } else {
            DeviceBuffer::<f32>::new(n).unwrap()
        };
        reuse.fill_async(-1.0, &a).unwrap();
        a.synchronize().unwrap();
        b.synchronize().unwrap();
        let want: f32 = data.iter().sum();
        let got = out.to_vec().unwrap()[0];
        assert_eq!(
            got, want,
            "async_alloc={async_alloc}: the kernel read reused memory"
        );
    }
}

/// A stream-ordered buffer is freed on stream A while a slow kernel there still writes it; a
/// new buffer from the same pool on A (very likely the same memory) is then filled through the
/// default stream or another stream B. That work must wait for the allocation point on A, or
/// the old kernel's late write would land in the new buffer.
fn async_buffer_used_on_another_stream_waits_for_its_allocation() {
    let mut r = rng();
    let n = 1 << 16;
    let a = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let b = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let addend = random_f32(&mut r, 1000);
    let dsrc = DeviceBuffer::from_slice(&addend).unwrap();
    for via_b in [false, true] {
        let data: Vec<f32> = random_f32(&mut r, n);
        let mut old = DeviceBuffer::<f32>::new_async(n, &a).unwrap();
        let old_addr = old.as_raw();
        // Spins ~50 ms on A, then writes the sum of `addend` into old[0].
        kernels::spin::spin_read_sum(
            &a,
            &LaunchConfig::new(1u32, 1u32),
            &dsrc,
            &mut old.slice_mut(..1).unwrap(),
            50_000_000,
        )
        .unwrap();
        drop(old);
        let mut new = DeviceBuffer::<f32>::new_async(n, &a).unwrap();
        if new.as_raw() != old_addr {
            eprintln!("the pool did not hand back the same memory; the test is weaker");
        }
        if via_b {
            new.copy_from_host_async(&data, &b).unwrap();
            b.synchronize().unwrap();
        } else {
            new.copy_from_host(&data).unwrap();
        }
        a.synchronize().unwrap();
        let got = new.to_vec().unwrap();
        assert_eq!(
            got[0].to_bits(),
            data[0].to_bits(),
            "via_b={via_b}: the freed buffer's kernel wrote into the new one"
        );
        assert_eq!(got, data, "via_b={via_b}");
    }
}

fn threads_launch_concurrently() {
    let handles: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut r = rng();
                let n = 10_000 + t * 17;
                let (a, b) = (random_u32(&mut r, n), random_u32(&mut r, n));
                let (a, b): (Vec<f32>, Vec<f32>) = (
                    a.iter().map(|&x| (x % 1000) as f32).collect(),
                    b.iter().map(|&x| (x % 1000) as f32).collect(),
                );
                let s = Stream::per_thread().unwrap();
                let (da, db) = (
                    DeviceBuffer::from_slice(&a).unwrap(),
                    DeviceBuffer::from_slice(&b).unwrap(),
                );
                let mut dc = DeviceBuffer::<f32>::new(n).unwrap();
                for _ in 0..20 {
                    kernels::vector_add::vadd(
                        &s,
                        &LaunchConfig::for_elements(n, 256).unwrap(),
                        &da,
                        &db,
                        &mut dc,
                    )
                    .unwrap();
                }
                s.synchronize().unwrap();
                let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                assert_same("threaded vadd", &dc.to_vec().unwrap(), &want);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

fn sticky_error() {
    let dev = Device::current().unwrap();
    let s = Stream::new().unwrap();
    let keep = DeviceBuffer::<u32>::zeroed(16).unwrap();
    // SAFETY: deliberately faulting: the write goes to an address no allocation covers, which the
    // GPU reports as an illegal address; no host memory is involved. This runs in a child process.
    unsafe {
        kernels::faults::write_address(&s, &LaunchConfig::new(1u32, 1u32), 0x10, 1).unwrap();
    }
    let e = s.synchronize().unwrap_err();
    assert_eq!(e.code(), ErrorCode::IllegalAddress, "{e}");
    assert!(e.is_sticky());
    // Every later call on the device reports it.
    let e = DeviceBuffer::<u32>::new(4).unwrap_err();
    assert_eq!(e.code(), ErrorCode::IllegalAddress, "{e}");
    assert!(matches!(e, Error::Sticky { device: 0, .. }), "{e}");
    assert!(keep.to_vec().is_err());
    assert!(Stream::new().is_err());
    // As libcudart: get_last_error returns it once and clears it; peek then sees nothing.
    assert_eq!(
        get_last_error().map(|e| e.code()),
        Some(ErrorCode::IllegalAddress)
    );
    assert_eq!(get_last_error(), None);
    assert_eq!(cuda_runtime::peek_at_last_error(), None);
    drop(keep);
    drop(s);
    // Reset succeeds; on driver 580 the device stays unusable for this process afterwards:
    // later calls fail cleanly with cudaErrorDevicesUnavailable, as libcudart's do (a driver
    // that recovers would give the data back instead).
    dev.reset().unwrap();
    match DeviceBuffer::from_slice(&[1u32, 2, 3]) {
        Ok(d) => assert_eq!(d.to_vec().unwrap(), vec![1, 2, 3]),
        Err(e) => {
            eprintln!("after reset: {e}");
            assert_eq!(e.code(), ErrorCode::DevicesUnavailable, "{e}");
            assert!(!e.is_sticky(), "{e}");
        }
    }
    println!("sticky checks passed");
}

// Hostile launch shapes. A safe launch of one of the crate's kernels, with any shape and any
// arguments the wrapper accepts, must either be refused with `Error::KernelPrecondition` (the
// preconditions declared in `kernels/*.cu`) or give the CPU reference's result, never fault.
// Outputs are views into larger buffers of random sentinels, so a write outside a view is caught
// even where it would not fault. Each area runs in a child process, so that a fault fails that
// test alone instead of making the device unusable for the rest of the suite.

/// Block shapes a wrapper's validation accepts (all within 1024 threads).
const HOSTILE_BLOCKS: [(u32, u32, u32); 9] = [
    (1, 1, 1),
    (7, 3, 2),
    (1024, 1, 1),
    (32, 32, 1),
    (32, 8, 1),
    (1, 1, 64),
    (16, 16, 4),
    (2, 512, 1),
    (8, 32, 1),
];

/// Guard elements on each side of every view.
const PAD: usize = 64;

fn transpose_hostile_shapes_in_a_child_process() {
    let out = crate::common::run_in_child("transpose_hostile_shapes");
    assert!(out.contains("transpose shapes passed"), "{out}");
}

fn shared_reverse_hostile_shapes_in_a_child_process() {
    let out = crate::common::run_in_child("shared_reverse_hostile_shapes");
    assert!(out.contains("shared_reverse shapes passed"), "{out}");
}

fn scale_rows_hostile_shapes_in_a_child_process() {
    let out = crate::common::run_in_child("scale_rows_hostile_shapes");
    assert!(out.contains("scale_rows shapes passed"), "{out}");
}

fn other_kernels_hostile_shapes_in_a_child_process() {
    let out = crate::common::run_in_child("other_kernels_hostile_shapes");
    assert!(out.contains("other kernel shapes passed"), "{out}");
}

/// Asserts that a launch was refused by the precondition check of `kernel`, and that the refusal
/// is the thread's last error.
fn expect_refused(r: cuda_runtime::Result<()>, kernel: &str, what: &str) {
    match &r {
        Err(Error::KernelPrecondition { kernel: k, .. }) if *k == kernel => {}
        other => panic!("{what}: expected a precondition error of {kernel}, got {other:?}"),
    }
    let e = r.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    assert_eq!(get_last_error(), Some(e), "{what}");
}

/// The device is still usable: no launch faulted.
fn assert_device_healthy(s: &Stream) {
    s.synchronize().unwrap();
    let b = DeviceBuffer::from_slice(&[1u32, 2, 3]).unwrap();
    assert_eq!(b.to_vec().unwrap(), [1, 2, 3]);
}

fn random_i32(r: &mut fastrand::Rng, n: usize) -> Vec<i32> {
    (0..n).map(|_| r.i32(..)).collect()
}

/// `n` random integer-valued floats in [-1000, 1000]: sums and products by small powers of two
/// are exact, so GPU and CPU agree bit for bit whatever the operation order or contraction.
fn random_whole_f32(r: &mut fastrand::Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.i32(-1000..=1000) as f32).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Width, height, grid, input length, output length.
type TransposeCase = (i32, i32, (u32, u32, u32), usize, usize);

type TransposeFn = for<'a, 'b> fn(
    &Stream,
    &LaunchConfig,
    &mut DeviceViewMut<'a, f32>,
    &DeviceView<'b, f32>,
    i32,
    i32,
) -> cuda_runtime::Result<()>;

/// What the transpose kernels compute: for each element (x, y) of the width x height matrix that
/// the grid's 32x32 tiles cover, out[o] = in[i] with i = y * width + x and o = i (copies) or
/// x * height + y (transposes), where both are inside their buffers.
fn transpose_reference(
    transposed: bool,
    input: &[f32],
    out: &mut [f32],
    w: i32,
    h: i32,
    grid: (u32, u32, u32),
) {
    if w <= 0 || h <= 0 {
        return;
    }
    let (w, h) = (w as u64, h as u64);
    for y in 0..h.min(grid.1 as u64 * 32) {
        for x in 0..w.min(grid.0 as u64 * 32) {
            let i = y * w + x;
            let o = if transposed { x * h + y } else { i };
            if (i as usize) < input.len() && (o as usize) < out.len() {
                out[o as usize] = input[i as usize];
            }
        }
    }
}

fn transpose_hostile_shapes() {
    use kernels::transpose as t;
    let kinds: [(&str, TransposeFn, bool); 5] = [
        ("copy", |s, c, o, i, w, h| t::copy(s, c, o, i, w, h), false),
        (
            "copy_shared_mem",
            |s, c, o, i, w, h| t::copy_shared_mem(s, c, o, i, w, h),
            false,
        ),
        (
            "transpose_naive",
            |s, c, o, i, w, h| t::transpose_naive(s, c, o, i, w, h),
            true,
        ),
        (
            "transpose_coalesced",
            |s, c, o, i, w, h| t::transpose_coalesced(s, c, o, i, w, h),
            true,
        ),
        (
            "transpose_no_bank_conflicts",
            |s, c, o, i, w, h| t::transpose_no_bank_conflicts(s, c, o, i, w, h),
            true,
        ),
    ];
    let mut r = rng();
    let s = Stream::new().unwrap();
    let (w0, h0) = (r.i32(1..150), r.i32(1..150));
    let n0 = (w0 * h0) as usize;
    let (gx, gy) = ((w0 as u32).div_ceil(32), (h0 as u32).div_ceil(32));
    let cases: Vec<TransposeCase> = vec![
        (w0, h0, (gx, gy, 1), n0, n0),
        (w0, h0, (gx + 3, gy + 2, 2), n0, n0),
        (w0, h0, (gx, gy, 1), n0 - r.usize(1..=n0), n0),
        (w0, h0, (gx, gy, 1), n0, n0 - r.usize(1..=n0)),
        (w0, h0, (gx, gy, 1), 0, n0),
        (w0, h0, (gx, gy, 1), n0, 0),
        (w0, h0, (gx, gy, 1), n0 + 100, n0 + 77),
        (w0, h0, (1, 1, 1), n0, n0),
        (-w0, h0, (gx, gy, 1), n0, n0),
        (w0, 0, (gx, gy, 1), n0, n0),
        (i32::MIN, i32::MIN, (2, 2, 1), n0, n0),
        (i32::MAX, 3, (2, 1, 1), n0, n0),
        (5, i32::MAX, (1, 3, 1), n0, n0),
        // blockIdx.x * 32 wraps in 32 bits past block 2^27: those blocks redo tiles 0 and 1.
        (40, 40, ((1 << 27) + 2, 2, 1), 1600, 1600),
    ];
    // Under racecheck (the scripts set CUDA_RUNTIME_TEST_TOOL) the 2^27-block grid is left out:
    // the tool checks each of its 268 million blocks' shared memory, each the same as a small
    // grid's block (more than 320 s, thirteenth session); memcheck runs it (about 120 s).
    let racecheck = std::env::var("CUDA_RUNTIME_TEST_TOOL").is_ok_and(|t| t == "racecheck");
    for (name, launch, transposed) in kinds {
        for &(w, h, grid, in_len, out_len) in &cases {
            if racecheck && grid.0 > 1 << 20 {
                println!("{name}: grid {grid:?} left out under racecheck");
                continue;
            }
            let what = format!("{name} {w}x{h}, grid {grid:?}, lengths {in_len} and {out_len}");
            let input = random_f32(&mut r, in_len + 2 * PAD);
            let sentinel = random_f32(&mut r, out_len + 2 * PAD);
            let din = DeviceBuffer::from_slice(&input).unwrap();
            let mut dout = DeviceBuffer::from_slice(&sentinel).unwrap();
            {
                let iv = din.slice(PAD..PAD + in_len).unwrap();
                let mut ov = dout.slice_mut(PAD..PAD + out_len).unwrap();
                let cfg = LaunchConfig::new(grid, (32u32, 8u32, 1u32));
                launch(&s, &cfg, &mut ov, &iv, w, h).unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            s.synchronize().unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut want = sentinel.clone();
            transpose_reference(
                transposed,
                &input[PAD..PAD + in_len],
                &mut want[PAD..PAD + out_len],
                w,
                h,
                grid,
            );
            assert_same(&what, &bits(&dout.to_vec().unwrap()), &bits(&want));
        }
        // Every other block shape is refused before anything runs.
        let input = random_f32(&mut r, n0);
        let sentinel = random_f32(&mut r, n0);
        let din = DeviceBuffer::from_slice(&input).unwrap();
        let mut dout = DeviceBuffer::from_slice(&sentinel).unwrap();
        for block in HOSTILE_BLOCKS.into_iter().filter(|&b| b != (32, 8, 1)) {
            let what = format!("{name} with block {block:?}");
            let cfg = LaunchConfig::new((gx, gy, 1u32), block);
            let iv = din.slice(..).unwrap();
            let mut ov = dout.slice_mut(..).unwrap();
            expect_refused(launch(&s, &cfg, &mut ov, &iv, w0, h0), name, &what);
        }
        s.synchronize().unwrap();
        assert_same(
            &format!("{name}: refused launches wrote nothing"),
            &bits(&dout.to_vec().unwrap()),
            &bits(&sentinel),
        );
    }
    assert_device_healthy(&s);
    println!("transpose shapes passed");
}

/// What the reversal kernels compute: the first min(n, block.x, len, cap) elements reversed.
fn reverse_reference(d: &mut [i32], n: i32, block_x: u32, cap: usize) {
    let m = (n.max(0) as usize)
        .min(block_x as usize)
        .min(d.len())
        .min(cap);
    d[..m].reverse();
}

fn shared_reverse_hostile_shapes() {
    use kernels::shared_reverse as sr;
    let mut r = rng();
    let s = Stream::new().unwrap();
    let lens = [0usize, 1, 50, 64, 65, 2000];
    let grids = [(1u32, 1u32, 1u32), (5, 3, 2)];
    let ns = [0, -5, i32::MIN, 1, 63, 64, 65, 100, 1000, 4096, i32::MAX];
    let mut buf = DeviceBuffer::<i32>::new(2000 + 2 * PAD).unwrap();
    // Runs one launch on a fresh random buffer; returns the result, the buffer's contents
    // before and after.
    let mut run = |len: usize,
                   f: &dyn Fn(&mut DeviceViewMut<'_, i32>) -> cuda_runtime::Result<()>|
     -> (cuda_runtime::Result<()>, Vec<i32>, Vec<i32>) {
        let host = random_i32(&mut r, 2000 + 2 * PAD);
        buf.copy_from_host(&host).unwrap();
        let res = {
            let mut v = buf.slice_mut(PAD..PAD + len).unwrap();
            f(&mut v)
        };
        s.synchronize().unwrap();
        (res, host, buf.to_vec().unwrap())
    };
    for len in lens {
        for block in HOSTILE_BLOCKS {
            for grid in grids {
                for n in ns {
                    // Static shared memory: always accepted.
                    let what =
                        format!("static_reverse len {len} block {block:?} grid {grid:?} n {n}");
                    let cfg = LaunchConfig::new(grid, block);
                    let (res, host, got) = run(len, &|v| sr::static_reverse(&s, &cfg, v, n));
                    res.unwrap_or_else(|e| panic!("{what}: {e}"));
                    let mut want = host.clone();
                    reverse_reference(&mut want[PAD..PAD + len], n, block.0, 64);
                    assert_same(&what, &got, &want);
                    // Dynamic shared memory: accepted with at least 4 * n bytes.
                    let need = 4 * n as i64;
                    let smems = [0, need - 1, need, need + 100, 48 * 1024];
                    for smem in smems.into_iter().filter(|&b| (0..=48 * 1024).contains(&b)) {
                        let what = format!(
                            "dynamic_reverse len {len} block {block:?} grid {grid:?} n {n} shared {smem}"
                        );
                        let cfg = LaunchConfig::new(grid, block).with_shared_mem(smem as u32);
                        let (res, host, got) = run(len, &|v| sr::dynamic_reverse(&s, &cfg, v, n));
                        let mut want = host.clone();
                        if smem < need {
                            expect_refused(res, "dynamic_reverse", &what);
                        } else {
                            res.unwrap_or_else(|e| panic!("{what}: {e}"));
                            reverse_reference(&mut want[PAD..PAD + len], n, block.0, usize::MAX);
                        }
                        assert_same(&what, &got, &want);
                    }
                }
            }
        }
    }
    assert_device_healthy(&s);
    println!("shared_reverse shapes passed");
}

/// What `scale_rows` computes: img[y * pitch + x] = img[..] * factor + y for each (x, y) of the
/// width x height image the launch covers, with x < pitch, no wrap of the row offset past 2^64,
/// and the index inside the buffer.
fn scale_rows_reference(
    img: &mut [f32],
    pitch: usize,
    w: i32,
    h: i32,
    factor: f32,
    cover: (u64, u64),
) {
    if w <= 0 || h <= 0 {
        return;
    }
    for y in 0..(h as u64).min(cover.1) {
        for x in 0..(w as u64).min(cover.0) {
            if x >= pitch as u64 || (y as u128 + 1) * pitch as u128 >= 1u128 << 64 {
                continue;
            }
            let i = (y * pitch as u64 + x) as usize;
            if i < img.len() {
                img[i] = img[i] * factor + y as f32;
            }
        }
    }
}

fn scale_rows_hostile_shapes() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let (w0, h0) = (r.i32(1..100), r.i32(1..60));
    let pitch0 = w0 as usize + r.usize(0..8);
    let full = pitch0 * h0 as usize;
    // (width, height, pitch in elements, buffer length)
    let cases: [(i32, i32, usize, usize); 12] = [
        (w0, h0, pitch0, full),
        (w0, h0, pitch0, full - r.usize(1..=full)),
        (w0, h0, pitch0, 0),
        (w0, h0, pitch0, full + 50),
        (w0, h0, (w0 / 2) as usize, full),
        (w0, h0, 0, full),
        (w0, h0, 1 << 63, full),
        (w0, h0, usize::MAX / 3 + 1, full),
        (w0, h0, usize::MAX, full),
        (-w0, h0, pitch0, full),
        (w0, i32::MIN, pitch0, full),
        (i32::MAX, 2, pitch0, full),
    ];
    let factors = [2.0f32, -0.5, 4.0];
    for (w, h, pitch, len) in cases {
        for block in HOSTILE_BLOCKS {
            for z in [1u32, 3] {
                let grid = (
                    (w0 as u32).div_ceil(block.0) + 1,
                    (h0 as u32).div_ceil(block.1) + 1,
                    z,
                );
                let factor = factors[r.usize(..factors.len())];
                let what = format!(
                    "scale_rows {w}x{h} pitch {pitch} len {len} block {block:?} grid {grid:?}"
                );
                let host = random_whole_f32(&mut r, len + 2 * PAD);
                let mut img = DeviceBuffer::from_slice(&host).unwrap();
                {
                    let mut v = img.slice_mut(PAD..PAD + len).unwrap();
                    kernels::pitched::scale_rows(
                        &s,
                        &LaunchConfig::new(grid, block),
                        &mut v,
                        pitch,
                        w,
                        h,
                        factor,
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                }
                s.synchronize().unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut want = host.clone();
                let cover = (
                    grid.0 as u64 * block.0 as u64,
                    grid.1 as u64 * block.1 as u64,
                );
                scale_rows_reference(&mut want[PAD..PAD + len], pitch, w, h, factor, cover);
                assert_same(&what, &bits(&img.to_vec().unwrap()), &bits(&want));
            }
        }
    }
    assert_device_healthy(&s);
    println!("scale_rows shapes passed");
}

/// The grid-stride and one-thread kernels need no precondition: any shape gives the result.
fn other_kernels_hostile_shapes() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let grids = [(1u32, 1u32, 1u32), (3, 2, 2), (1000, 1, 1)];
    for block in HOSTILE_BLOCKS {
        for grid in grids {
            let cfg = LaunchConfig::new(grid, block);
            let shape = format!("block {block:?} grid {grid:?}");
            kernels::params::empty(&s, &cfg).unwrap();

            // write_index: out[i] = i * 2654435761 below the view's length.
            for len in [0usize, 1, 5000] {
                let sentinel = random_u32(&mut r, len + 2 * PAD);
                let mut d = DeviceBuffer::from_slice(&sentinel).unwrap();
                kernels::spin::write_index(&s, &cfg, &mut d.slice_mut(PAD..PAD + len).unwrap())
                    .unwrap();
                s.synchronize().unwrap();
                let mut want = sentinel.clone();
                for i in 0..len {
                    want[PAD + i] = (i as u32).wrapping_mul(2654435761);
                }
                assert_same(
                    &format!("write_index {shape} len {len}"),
                    &d.to_vec().unwrap(),
                    &want,
                );
            }

            // vadd: below the shortest of three mismatched lengths.
            for (la, lb, lc) in [
                (100usize, 50usize, 80usize),
                (0, 10, 10),
                (10, 10, 0),
                (3000, 3000, 3000),
            ] {
                let (a, b) = (random_whole_f32(&mut r, la), random_whole_f32(&mut r, lb));
                let sentinel = random_f32(&mut r, lc + 2 * PAD);
                let (da, db) = (
                    DeviceBuffer::from_slice(&a).unwrap(),
                    DeviceBuffer::from_slice(&b).unwrap(),
                );
                let mut dc = DeviceBuffer::from_slice(&sentinel).unwrap();
                kernels::vector_add::vadd(
                    &s,
                    &cfg,
                    &da,
                    &db,
                    &mut dc.slice_mut(PAD..PAD + lc).unwrap(),
                )
                .unwrap();
                s.synchronize().unwrap();
                let mut want = sentinel.clone();
                for i in 0..la.min(lb).min(lc) {
                    want[PAD + i] = a[i] + b[i];
                }
                assert_same(
                    &format!("vadd {shape} lengths {la} {lb} {lc}"),
                    &bits(&dc.to_vec().unwrap()),
                    &bits(&want),
                );
            }

            // four_args: out[0] only, and only if there is one.
            for len in [0usize, 1, 3] {
                let (a, b, c) = (r.i32(-1000..1000), r.f32() * 100.0, r.f64() * 100.0);
                let sentinel = random_f32(&mut r, len + 2 * PAD);
                let mut d = DeviceBuffer::from_slice(&sentinel).unwrap();
                kernels::params::four_args(
                    &s,
                    &cfg,
                    &mut d.slice_mut(PAD..PAD + len).unwrap(),
                    a,
                    b,
                    c,
                )
                .unwrap();
                s.synchronize().unwrap();
                let mut want = sentinel.clone();
                if len > 0 {
                    want[PAD] = ((a as f32 + b) as f64 + c) as f32;
                }
                assert_same(
                    &format!("four_args {shape} len {len}"),
                    &bits(&d.to_vec().unwrap()),
                    &bits(&want),
                );
            }

            // spin: one thread stamps slot `slot` if it is inside the buffer.
            for slot in [1, 3, -1, 4, i32::MAX, i32::MIN] {
                let sentinel: Vec<u64> = (0..8 + 2 * PAD).map(|_| r.u64(..)).collect();
                let mut d = DeviceBuffer::from_slice(&sentinel).unwrap();
                kernels::spin::spin(
                    &s,
                    &cfg,
                    &mut d.slice_mut(PAD..PAD + 8).unwrap(),
                    2_000,
                    slot,
                )
                .unwrap();
                s.synchronize().unwrap();
                let got = d.to_vec().unwrap();
                let what = format!("spin {shape} slot {slot}");
                let mut want = sentinel.clone();
                if (0..4).contains(&slot) {
                    let i = PAD + 2 * slot as usize;
                    let (start, end) = (got[i], got[i + 1]);
                    assert!(end >= start + 2_000, "{what}: stamps {start} {end}");
                    want[i] = start;
                    want[i + 1] = end;
                }
                assert_same(&what, &got, &want);
            }

            // spin_read_sum: one thread sums the source in order into out[0].
            for (ls, lo) in [(0usize, 1usize), (1, 1), (1000, 4), (1000, 0)] {
                let src = random_whole_f32(&mut r, ls);
                let sentinel = random_f32(&mut r, lo + 2 * PAD);
                let dsrc = DeviceBuffer::from_slice(&src).unwrap();
                let mut d = DeviceBuffer::from_slice(&sentinel).unwrap();
                kernels::spin::spin_read_sum(
                    &s,
                    &cfg,
                    &dsrc,
                    &mut d.slice_mut(PAD..PAD + lo).unwrap(),
                    0,
                )
                .unwrap();
                s.synchronize().unwrap();
                let mut want = sentinel.clone();
                if lo > 0 {
                    want[PAD] = src.iter().fold(0.0f32, |acc, &x| acc + x);
                }
                assert_same(
                    &format!("spin_read_sum {shape} lengths {ls} {lo}"),
                    &bits(&d.to_vec().unwrap()),
                    &bits(&want),
                );
            }
        }
    }

    // poly_eval: the degree is clamped to 0..=15; below the shorter length.
    let table = kernels::constant_memory::MODULE
        .global::<[f32; 16]>("coeffs")
        .unwrap();
    let mut c = [0f32; 16];
    for x in c.iter_mut() {
        *x = r.f32() - 0.5;
    }
    table.copy_from_host(&c).unwrap();
    for block in [(1u32, 1u32, 1u32), (7, 3, 2), (1024, 1, 1)] {
        for degree in [-5, 0, 3, 15, 100, i32::MIN, i32::MAX] {
            for (lx, ly) in [(100usize, 60usize), (0, 5), (500, 500), (7, 0)] {
                let x: Vec<f32> = (0..lx).map(|_| r.f32() * 2.0 - 1.0).collect();
                let sentinel = random_f32(&mut r, ly + 2 * PAD);
                let dx = DeviceBuffer::from_slice(&x).unwrap();
                let mut dy = DeviceBuffer::from_slice(&sentinel).unwrap();
                kernels::constant_memory::poly_eval(
                    &s,
                    &LaunchConfig::new((2u32, 2u32, 1u32), block),
                    &dx,
                    &mut dy.slice_mut(PAD..PAD + ly).unwrap(),
                    degree,
                )
                .unwrap();
                s.synchronize().unwrap();
                let d = degree.clamp(0, 15) as usize;
                let mut want = sentinel.clone();
                for i in 0..lx.min(ly) {
                    want[PAD + i] = c[..=d]
                        .iter()
                        .rev()
                        .fold(0f32, |acc, &k| acc.mul_add(x[i], k));
                }
                assert_close(
                    &format!("poly_eval block {block:?} degree {degree} lengths {lx} {ly}"),
                    &dy.to_vec().unwrap(),
                    &want,
                    1e-5,
                );
            }
        }
    }
    assert_device_healthy(&s);
    println!("other kernel shapes passed");
}
