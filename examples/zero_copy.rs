//! Zero-copy: a kernel reads and writes mapped page-locked host memory directly (no
//! `cudaMemcpy`), and the CPU sees its result through the same allocation once the kernel is
//! done. Verifies every element.

use std::process::ExitCode;

use cuda_runtime::{kernels, HostAllocFlags, LaunchConfig, PinnedBuffer, Stream};

fn run() -> Result<bool, cuda_runtime::Error> {
    let n = 1 << 20;
    let flags = HostAllocFlags::MAPPED;
    let mut a = PinnedBuffer::<f32>::with_flags(n, flags)?;
    let mut b = PinnedBuffer::<f32>::with_flags(n, flags)?;
    let mut c = PinnedBuffer::<f32>::with_flags(n, flags)?;
    for (i, (x, y)) in a
        .as_mut_slice()?
        .iter_mut()
        .zip(b.as_mut_slice()?.iter_mut())
        .enumerate()
    {
        *x = i as f32 * 0.25;
        *y = 1000.0 - i as f32;
    }
    c.as_mut_slice()?.fill(f32::NAN);
    println!(
        "zero_copy: host buffers at {:p}, device sees c at {:#x}",
        c.as_host_ptr(),
        c.device_ptr()?
    );

    let stream = Stream::new()?;
    kernels::vector_add::vadd(
        &stream,
        &LaunchConfig::for_elements(n, 256)?,
        &a,
        &b,
        &mut c,
    )?;
    // No synchronize needed: the CPU view waits for the kernel that writes `c`.
    let (a, b, c) = (a.as_slice()?, b.as_slice()?, c.as_slice()?);
    let bad = (0..n).filter(|&i| c[i] != a[i] + b[i]).count();
    println!("zero_copy: {n} elements written by the GPU into host memory, {bad} mismatches");
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("zero_copy: {e}");
            ExitCode::FAILURE
        }
    }
}
