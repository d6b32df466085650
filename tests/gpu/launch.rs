//! Kernel launch: typed launches of the crate's kernels, validation, user PTX with argument
//! checks, attributes, occupancy, cooperative launch, module globals, sticky errors, and the
//! stream-ordered safety of dropped buffers.

use crate::common::{assert_close, assert_same, check_against_cpu, random_f32, random_u32, rng};
use cuda_runtime::{
    classify_image, get_last_error, kernels, Device, DeviceBuffer, Error, ErrorCode, ImageKind,
    KernelArg, LaunchConfig, Module, Stream, StreamFlags,
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
];

/// Tests that run in a process of their own (see `main.rs`).
pub const CHILDREN: &[(&str, fn())] = &[("sticky_error", sticky_error)];

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
                &LaunchConfig::for_elements(a.len(), 256),
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
        kernels::vector_add::vadd(&s, &LaunchConfig::for_elements(n, 128), &da, &db, &mut out)
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
    kernels::spin::write_index(&s, &LaunchConfig::for_elements(16, 32), &mut out).unwrap();
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
        let e = kernels::spin::write_index(&s1, &LaunchConfig::for_elements(16, 32), &mut out)
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
    let cfg = LaunchConfig::for_elements(n, 256);
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
        let cfg = LaunchConfig::for_elements(n, 256);
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
    rev.set_max_dynamic_shared_size(64 * 1024).unwrap();
    assert_eq!(
        rev.attributes().unwrap().max_dynamic_shared_size_bytes,
        64 * 1024
    );
    rev.set_max_dynamic_shared_size(48 * 1024).unwrap();
    rev.set_preferred_shared_memory_carveout(50).unwrap();
    assert!(rev.set_preferred_shared_memory_carveout(101).is_err());
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
        &LaunchConfig::for_elements(x.len(), 128),
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
                        &LaunchConfig::for_elements(n, 256),
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
    // Reset succeeds; on driver 580 the device stays unusable for this process afterwards, as
    // with libcudart (which reports cudaErrorDevicesUnavailable): later calls fail cleanly.
    dev.reset().unwrap();
    match DeviceBuffer::from_slice(&[1u32, 2, 3]) {
        Ok(d) => assert_eq!(d.to_vec().unwrap(), vec![1, 2, 3]),
        Err(e) => eprintln!("after reset: {e}"),
    }
    println!("sticky checks passed");
}
