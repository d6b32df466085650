//! The shared-memory matrix transpose study: a plain copy, a copy through shared memory, a naive
//! transpose, a coalesced transpose through a shared tile, and the same without shared-memory
//! bank conflicts (32x32 tiles, 32x8 thread blocks). Each result is checked on the CPU and its
//! effective bandwidth (bytes read + written per second) timed with events, at 1024x1024 and at
//! 8192x8192; a 256 MiB device-to-device copy measured in the same run gives the ceiling.
//!
//! `cargo run --release --example transpose`

use std::process::ExitCode;

use cuda_runtime::{kernels, DeviceBuffer, Event, LaunchConfig, Stream};

const TILE_DIM: u32 = 32;
const BLOCK_ROWS: u32 = 8;

type Kernel = fn(
    &Stream,
    &LaunchConfig,
    &mut DeviceBuffer<f32>,
    &DeviceBuffer<f32>,
    i32,
    i32,
) -> cuda_runtime::Result<()>;

fn kernels() -> [(&'static str, Kernel, bool); 5] {
    use kernels::transpose as t;
    [
        ("copy", |s, c, o, i, w, h| t::copy(s, c, o, i, w, h), false),
        (
            "shared memory copy",
            |s, c, o, i, w, h| t::copy_shared_mem(s, c, o, i, w, h),
            false,
        ),
        (
            "naive transpose",
            |s, c, o, i, w, h| t::transpose_naive(s, c, o, i, w, h),
            true,
        ),
        (
            "coalesced transpose",
            |s, c, o, i, w, h| t::transpose_coalesced(s, c, o, i, w, h),
            true,
        ),
        (
            "conflict-free transpose",
            |s, c, o, i, w, h| t::transpose_no_bank_conflicts(s, c, o, i, w, h),
            true,
        ),
    ]
}

/// Times `reps` runs of `f` on `stream` with events; milliseconds per run.
fn time_ms(
    stream: &Stream,
    reps: u32,
    mut f: impl FnMut() -> cuda_runtime::Result<()>,
) -> cuda_runtime::Result<f32> {
    f()?; // warm-up
    let (start, stop) = (Event::new()?, Event::new()?);
    start.record(stream)?;
    for _ in 0..reps {
        f()?;
    }
    stop.record(stream)?;
    stop.synchronize()?;
    Ok(Event::elapsed_time(&start, &stop)? / reps as f32)
}

fn d2d_bandwidth(stream: &Stream) -> cuda_runtime::Result<f64> {
    let n = (256 << 20) / 4;
    let src = DeviceBuffer::<f32>::zeroed(n)?;
    let mut dst = DeviceBuffer::<f32>::new(n)?;
    let ms = time_ms(stream, 20, || dst.copy_from_device_async(&src, stream))?;
    Ok(2.0 * (n * 4) as f64 / (ms as f64 * 1e6))
}

fn check(name: &str, out: &[f32], input: &[f32], w: usize, h: usize, transposed: bool) -> bool {
    for y in 0..h {
        for x in 0..w {
            let (got, want) = if transposed {
                (out[x * h + y], input[y * w + x])
            } else {
                (out[y * w + x], input[y * w + x])
            };
            if got != want {
                eprintln!("{name} {w}x{h}: mismatch at ({x}, {y}): got {got}, expected {want}");
                return false;
            }
        }
    }
    true
}

fn study(stream: &Stream, w: usize, h: usize, reps: u32) -> cuda_runtime::Result<(bool, f64)> {
    println!("\nmatrix {w}x{h}, tile {TILE_DIM}x{TILE_DIM}, block {TILE_DIM}x{BLOCK_ROWS}, {reps} repetitions");
    println!("{:<26} {:>12} {:>12}", "routine", "GB/s", "ms");
    let input: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
    let din = DeviceBuffer::from_slice(&input)?;
    let mut dout = DeviceBuffer::<f32>::new(w * h)?;
    let cfg = LaunchConfig::new(
        ((w as u32) / TILE_DIM, (h as u32) / TILE_DIM),
        (TILE_DIM, BLOCK_ROWS),
    );
    let mut all_ok = true;
    let mut conflict_free = 0.0;
    let mut host = vec![0f32; w * h];
    for (name, kernel, transposed) in kernels() {
        dout.fill(-1.0)?; // poison, so a kernel that writes nothing fails the check
        let ms = time_ms(stream, reps, || {
            kernel(stream, &cfg, &mut dout, &din, w as i32, h as i32)
        })?;
        stream.synchronize()?;
        dout.copy_to_host(&mut host)?;
        let ok = check(name, &host, &input, w, h, transposed);
        all_ok &= ok;
        let gbs = 2.0 * (w * h * 4) as f64 / (ms as f64 * 1e6);
        if name == "conflict-free transpose" {
            conflict_free = gbs;
        }
        println!(
            "{name:<26} {gbs:>12.1} {ms:>12.4}{}",
            if ok { "" } else { "   WRONG" }
        );
    }
    Ok((all_ok, conflict_free))
}

fn run() -> cuda_runtime::Result<bool> {
    let dev = cuda_runtime::Device::current()?;
    println!("device 0: {}", dev.name()?);
    let stream = Stream::new()?;
    let (ok_small, _) = study(&stream, 1024, 1024, 100)?;
    let (ok_large, conflict_free) = study(&stream, 8192, 8192, 20)?;
    let d2d = d2d_bandwidth(&stream)?;
    println!("\ndevice-to-device copy, 256 MiB: {d2d:.1} GB/s");
    println!(
        "conflict-free transpose at 8192x8192 reaches {:.1}% of the device-to-device copy (target: at least 90%)",
        100.0 * conflict_free / d2d
    );
    Ok(ok_small && ok_large)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("transpose: some results were wrong");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("transpose: {e}");
            ExitCode::FAILURE
        }
    }
}
