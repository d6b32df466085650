//! Adds two vectors on the GPU and checks the sum on the CPU: the CUDA programming guide's first
//! example, `vadd<<<blocks, 256>>>(a, b, c)`.

use std::process::ExitCode;

use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};

fn run() -> Result<bool, cuda_runtime::Error> {
    let n = 1 << 20;
    let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos() * 3.0).collect();

    let da = DeviceBuffer::from_slice(&a)?;
    let db = DeviceBuffer::from_slice(&b)?;
    let mut dc = DeviceBuffer::<f32>::new(n)?;
    dc.fill(f32::NAN)?;

    let stream = Stream::new()?;
    kernels::vector_add::vadd(
        &stream,
        &LaunchConfig::for_elements(n, 256)?,
        &da,
        &db,
        &mut dc,
    )?;
    stream.synchronize()?;
    let c = dc.to_vec()?;

    let bad = (0..n).filter(|&i| c[i] != a[i] + b[i]).count();
    println!("vector_add: {n} elements, {bad} mismatches");
    if let Some(i) = (0..n).find(|&i| c[i] != a[i] + b[i]) {
        eprintln!("first mismatch at {i}: {} + {} gave {}", a[i], b[i], c[i]);
    }
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("vector_add: {e}");
            ExitCode::FAILURE
        }
    }
}
