//! `__constant__` and `__device__` variables set from the host: a polynomial's coefficients in
//! constant memory (`cudaMemcpyToSymbol`), and a `__device__` pointer to a buffer that a kernel
//! scales through.

use std::process::ExitCode;

use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};

fn run() -> Result<bool, cuda_runtime::Error> {
    let stream = Stream::new()?;
    let module = &kernels::constant_memory::MODULE;

    // Polynomial evaluation with coefficients in constant memory.
    let degree = 5;
    let mut coeffs = [0f32; 16];
    for (i, c) in coeffs.iter_mut().enumerate().take(degree + 1) {
        *c = 0.5 - i as f32 * 0.25;
    }
    let table = module.global::<[f32; 16]>("coeffs")?;
    table.copy_from_host(&coeffs)?;
    let read_back_ok = table.copy_to_host()? == coeffs;
    println!(
        "constant table read back: {}",
        if read_back_ok { "correct" } else { "WRONG" }
    );

    let n = 100_000;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 / n as f32) * 2.0 - 1.0).collect();
    let dx = DeviceBuffer::from_slice(&x)?;
    let mut dy = DeviceBuffer::<f32>::new(n)?;
    kernels::constant_memory::poly_eval(
        &stream,
        &LaunchConfig::for_elements(n, 256)?,
        &dx,
        &mut dy,
        degree as i32,
    )?;
    stream.synchronize()?;
    let y = dy.to_vec()?;
    let cpu = |x: f32| {
        coeffs[..=degree]
            .iter()
            .rev()
            .fold(0f32, |acc, &c| acc * x + c)
    };
    let worst = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| (cpu(x) - y).abs())
        .fold(0f32, f32::max);
    let poly_ok = worst < 1e-5;
    println!(
        "constant-memory polynomial: max error {worst:e} ({})",
        if poly_ok { "correct" } else { "WRONG" }
    );

    // A `__device__` pointer and length set from the host, used by a kernel.
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut dd = DeviceBuffer::from_slice(&data)?;
    module
        .global::<u64>("data_ptr")?
        .copy_from_host(&dd.as_raw())?;
    module
        .global::<u64>("data_len")?
        .copy_from_host(&(n as u64))?;
    // SAFETY: `data_ptr`/`data_len` name `dd`, which outlives the kernel (synchronised below
    // before `dd` is read or dropped), and the kernel stays below `data_len`.
    unsafe {
        kernels::constant_memory::scale_through_pointer(
            &stream,
            &LaunchConfig::new(64u32, 256u32),
            3.0,
        )?
    };
    stream.synchronize()?;
    let got = dd.to_vec()?;
    let ptr_ok = got.iter().zip(&data).all(|(&g, &d)| g == d * 3.0);
    println!(
        "device pointer scaling: {}",
        if ptr_ok { "correct" } else { "WRONG" }
    );
    dd.fill(0.0)?;
    Ok(read_back_ok && poly_ok && ptr_ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("constant_memory: {e}");
            ExitCode::FAILURE
        }
    }
}
