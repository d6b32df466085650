//! Dynamic parallelism: kernels that launch kernels (the CUDA device runtime), with only the
//! driver installed. The crate's `kernels::cdp` run from an image linked ahead of time with
//! NVIDIA's device runtime (the cuda-runtime-devrt crate, feature `device-runtime`).
//!
//! Shows the programming model's rules, each checked against a CPU computation:
//!
//! 1. a child grid sees what its parent wrote before launching it: after the parent block's
//!    barrier, everything the block wrote;
//! 2. launches into one stream from one block run in order;
//! 3. grids in two streams a block created run concurrently (printed as an observation: the
//!    device runtime allows it, it does not promise it);
//! 4. the parent's work sees its children's writes only after they complete, which since CUDA 12
//!    (no device-side `cudaDeviceSynchronize`) is a tail launch: a grid launched into
//!    `cudaStreamTailLaunch` starts after the launching grid and all its children are done.
//!
//! Run: `cargo run --release --example dynamic_parallelism`

use std::process::ExitCode;

use cuda_runtime::{kernels, Device, DeviceBuffer, LaunchConfig, Limit, Stream};

fn rng_u32(state: &mut u64) -> u32 {
    // xorshift64*: fresh input from the clock's seed.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
}

fn check(what: &str, ok: bool) -> bool {
    println!("  {what}: {}", if ok { "ok" } else { "WRONG" });
    ok
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> cuda_runtime::Result<bool> {
    let dev = Device::current()?;
    let props = dev.properties()?;
    println!(
        "{} (compute capability {}.{}); pending device launches allowed: {}",
        props.name,
        props.major,
        props.minor,
        dev.limit(Limit::DevRuntimePendingLaunchCount)?
    );
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    let s = Stream::new()?;
    let block = 256u32;
    let n = 1 << 16;
    let cfg = LaunchConfig::for_elements(n, block)?;
    let mut all = true;

    println!("1. a child sees its parent block's writes (after the barrier)");
    let src: Vec<f32> = (0..n)
        .map(|_| (rng_u32(&mut seed) % 2000) as f32 - 1000.0)
        .collect();
    let d_src = DeviceBuffer::from_slice(&src)?;
    let mut stage = DeviceBuffer::<f32>::zeroed(n)?;
    let mut out = DeviceBuffer::<f32>::zeroed(n)?;
    let mut failures = DeviceBuffer::from_slice(&[0u32])?;
    kernels::cdp::cdp_child_sees_parent(&s, &cfg, &d_src, &mut stage, &mut out, &mut failures)?;
    s.synchronize()?;
    let got = out.to_vec()?;
    let b = block as usize;
    let want: Vec<f32> = (0..n)
        .map(|i| {
            let (begin, count) = (i / b * b, b.min(n - i / b * b));
            2.0 * src[begin + count - 1 - (i - begin)] + 1.0
        })
        .collect();
    all &= check(
        &format!(
            "{} children each reversed what 256 parent threads wrote",
            n / b
        ),
        got == want && failures.to_vec()? == [0],
    );

    println!("2. launches into one stream from one block run in order");
    let srcu: Vec<u32> = (0..n).map(|_| rng_u32(&mut seed)).collect();
    let d_srcu = DeviceBuffer::from_slice(&srcu)?;
    for named in [false, true] {
        let steps = 8;
        let mut v = DeviceBuffer::<u32>::zeroed(n)?;
        let mut failures = DeviceBuffer::from_slice(&[0u32])?;
        kernels::cdp::cdp_in_order(&s, &cfg, &d_srcu, &mut v, steps, named, &mut failures)?;
        s.synchronize()?;
        let want: Vec<u32> = srcu
            .iter()
            .map(|&x| (1..=steps).fold(x, |v, k| v.wrapping_mul(33).wrapping_add(k)))
            .collect();
        all &= check(
            &format!(
                "{steps} dependent children per block in {}",
                if named {
                    "a stream the block created"
                } else {
                    "the block's implicit stream"
                }
            ),
            v.to_vec()? == want && failures.to_vec()? == [0],
        );
    }

    println!("3. grids in two streams a block created (an observation of concurrency)");
    let one = LaunchConfig::new(1u32, 1024u32);
    let rounds = 20_000;
    let mut a = DeviceBuffer::<u32>::zeroed(1024)?;
    let mut bb = DeviceBuffer::<u32>::zeroed(1024)?;
    let mut times = DeviceBuffer::from_slice(&[u64::MAX, 0, u64::MAX, 0])?;
    let mut failures = DeviceBuffer::from_slice(&[0u32])?;
    let first = DeviceBuffer::from_slice(&srcu[..1024])?;
    kernels::cdp::cdp_two_streams(
        &s,
        &one,
        &first,
        &mut a,
        &mut bb,
        rounds,
        &mut times,
        &mut failures,
    )?;
    s.synchronize()?;
    let mix = |x: u32, salt: u32| {
        (0..rounds).fold(x, |v, _| {
            (v ^ salt).wrapping_mul(2654435761).wrapping_add(v >> 13)
        })
    };
    let ok = a.to_vec()? == srcu[..1024].iter().map(|&x| mix(x, 1)).collect::<Vec<_>>()
        && bb.to_vec()? == srcu[..1024].iter().map(|&x| mix(x, 2)).collect::<Vec<_>>()
        && failures.to_vec()? == [0];
    all &= check(
        "both streams' children completed with the right results",
        ok,
    );
    let t = times.to_vec()?;
    let overlap = t[1].min(t[3]) as i128 - t[0].max(t[2]) as i128;
    println!(
        "  stream 1 ran {:.1} us, stream 2 ran {:.1} us; {}",
        (t[1] - t[0]) as f64 / 1e3,
        (t[3] - t[2]) as f64 / 1e3,
        if overlap > 0 {
            format!("they overlapped for {:.1} us", overlap as f64 / 1e3)
        } else {
            format!(
                "they did not overlap ({:.1} us apart)",
                -overlap as f64 / 1e3
            )
        }
    );

    println!("4. the parent's continuation sees its children's writes: a tail launch");
    let mut sq = DeviceBuffer::<u32>::zeroed(n)?;
    let segments = n / b;
    let mut sums = DeviceBuffer::<u64>::zeroed(segments)?;
    let mut failures = DeviceBuffer::from_slice(&[0u32])?;
    kernels::cdp::cdp_tail_sums(&s, &cfg, &d_srcu, &mut sq, &mut sums, &mut failures)?;
    let mut got = vec![0u64; segments];
    sums.copy_to_host_async(&mut got, &s)?;
    s.synchronize()?;
    let want: Vec<u64> = srcu
        .chunks(b)
        .map(|c| {
            c.iter()
                .map(|&x| x.wrapping_mul(x).wrapping_add(7) as u64)
                .sum()
        })
        .collect();
    all &= check(
        &format!("{segments} segment sums by the tail grid, read in stream order"),
        got == want && failures.to_vec()? == [0],
    );
    println!(
        "{}",
        if all {
            "all rules held"
        } else {
            "SOME RESULTS WERE WRONG"
        }
    );
    Ok(all)
}
