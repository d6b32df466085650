//! Launches the crate's own kernels through their generated safe wrappers and checks each
//! result against a CPU reference. Exits non-zero on a mismatch, or with a one-line
//! explanation when there is no driver or GPU.

use std::process::ExitCode;

use cuda_runtime::{DeviceBuffer, LaunchConfig, Stream};
use user_kernels::{block_sums_cpu, reduce, saxpy, saxpy_cpu, tile_reverse_cpu};

fn run() -> cuda_runtime::Result<bool> {
    let stream = Stream::new()?;
    let n = 1_000_003;
    let mut rng = fastrand_lite(0x5eed);
    // Integer-valued inputs: every sum below is exact in any order.
    let x: Vec<f32> = (0..n).map(|_| (rng() % 1000) as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| (rng() % 1000) as f32 - 500.0).collect();
    let a = 0.5f32;

    // saxpy: y = a * x + y.
    let dx = DeviceBuffer::from_slice(&x)?;
    let mut dy = DeviceBuffer::from_slice(&y)?;
    saxpy::saxpy(
        &stream,
        &LaunchConfig::for_elements(n, 256)?,
        &mut dy,
        &dx,
        a,
    )?;
    let mut want = y.clone();
    saxpy_cpu(&mut want, &x, a);
    let saxpy_ok = dy.to_vec()? == want;

    // block_sums: one sum per 256 elements; the wrapper refuses any block but 256 threads.
    let mut sums = DeviceBuffer::<f32>::new(n.div_ceil(256))?;
    let refused = reduce::block_sums(&stream, &LaunchConfig::new(64u32, 128u32), &dx, &mut sums);
    reduce::block_sums(&stream, &LaunchConfig::new(120u32, 256u32), &dx, &mut sums)?;
    let sums_ok = refused.is_err() && sums.to_vec()? == block_sums_cpu(&x);

    // tile_reverse: tiles of 100 ints through 400 bytes of dynamic shared memory.
    let ints: Vec<i32> = (0..n).map(|_| rng() as i32).collect();
    let din = DeviceBuffer::from_slice(&ints)?;
    let mut dout = DeviceBuffer::<i32>::new(n)?;
    let cfg = LaunchConfig::new(500u32, 128u32).with_shared_mem(400);
    reduce::tile_reverse(&stream, &cfg, &din, &mut dout, 100)?;
    let reverse_ok = dout.to_vec()? == tile_reverse_cpu(&ints, 100);

    println!("saxpy ({n} elements): {}", verdict(saxpy_ok));
    println!(
        "block_sums (256-thread blocks; 128 refused): {}",
        verdict(sums_ok)
    );
    println!("tile_reverse (tiles of 100): {}", verdict(reverse_ok));
    Ok(saxpy_ok && sums_ok && reverse_ok)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "matches the CPU"
    } else {
        "MISMATCH"
    }
}

/// A small xorshift generator (the example needs no dependency for its inputs).
fn fastrand_lite(mut s: u64) -> impl FnMut() -> u32 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 32) as u32
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("user-kernels: {e}");
            ExitCode::FAILURE
        }
    }
}
