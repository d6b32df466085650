//! Reverses 64 integers inside one block through shared memory, once with a statically sized
//! `__shared__` array and once with dynamic (`extern __shared__`) shared memory sized at launch.

use std::process::ExitCode;

use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};

fn run() -> Result<bool, cuda_runtime::Error> {
    const N: usize = 64;
    let input: Vec<i32> = (0..N as i32).map(|i| i * 7 - 100).collect();
    let expected: Vec<i32> = input.iter().rev().copied().collect();
    let stream = Stream::new()?;
    let mut ok = true;

    let mut d = DeviceBuffer::from_slice(&input)?;
    kernels::shared_reverse::static_reverse(
        &stream,
        &LaunchConfig::new(1u32, N as u32),
        &mut d,
        N as i32,
    )?;
    let got = {
        stream.synchronize()?;
        d.to_vec()?
    };
    println!(
        "static shared memory:  {}",
        if got == expected { "correct" } else { "WRONG" }
    );
    ok &= got == expected;

    let mut d = DeviceBuffer::from_slice(&input)?;
    let cfg =
        LaunchConfig::new(1u32, N as u32).with_shared_mem((N * std::mem::size_of::<i32>()) as u32);
    kernels::shared_reverse::dynamic_reverse(&stream, &cfg, &mut d, N as i32)?;
    let got = {
        stream.synchronize()?;
        d.to_vec()?
    };
    println!(
        "dynamic shared memory: {}",
        if got == expected { "correct" } else { "WRONG" }
    );
    ok &= got == expected;
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("shared_reverse: {e}");
            ExitCode::FAILURE
        }
    }
}
