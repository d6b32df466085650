//! One page-locked host array copied to the device in chunks on 4 streams, a kernel per chunk,
//! and each chunk copied back on its stream, against the same work issued without streams
//! (NVIDIA's simpleStreams sample). With streams, one chunk's copy overlaps another chunk's
//! kernel and the copy back of a third, so the streamed version should take less time.
//!
//! The chunks are views of the page-locked buffers (`PinnedBuffer::slice` / `slice_mut`): the
//! copies return at once, and reading the output buffer waits for every chunk's copy back.
//!
//! `cargo run --release --example simple_streams [ELEMENTS] [ITERATIONS]`

use std::process::ExitCode;

use cuda_runtime::kernels::simple_streams::mix_repeat;
use cuda_runtime::{Device, DeviceBuffer, Event, LaunchConfig, PinnedBuffer, Stream};
use rayon::prelude::*;

const STREAMS: usize = 4;
const REPEATS: usize = 10;

/// The kernel's arithmetic, on the CPU.
fn mix(mut x: u32, factor: u32, iterations: i32) -> u32 {
    for _ in 0..iterations {
        x = x.wrapping_mul(1_664_525).wrapping_add(factor);
    }
    x
}

struct Work {
    input: PinnedBuffer<u32>,
    output: PinnedBuffer<u32>,
    dev: DeviceBuffer<u32>,
    factor: u32,
    iterations: i32,
}

/// Runs the whole pipeline once and returns its time in ms, measured on the legacy default
/// stream (which every created blocking stream synchronises with, so `stop` follows all of it).
fn pass(w: &mut Work, streams: Option<&[Stream]>, legacy: &Stream) -> cuda_runtime::Result<f32> {
    w.output.as_mut_slice()?.fill(0xDEAD_BEEF);
    let (start, stop) = (Event::new()?, Event::new()?);
    start.record(legacy)?;
    match streams {
        Some(streams) => {
            let chunk = w.dev.len() / streams.len();
            let cfg = LaunchConfig::for_elements(chunk, 256)?;
            for (i, s) in streams.iter().enumerate() {
                let r = i * chunk..(i + 1) * chunk;
                let mut d = w.dev.slice_mut(r.clone())?;
                d.copy_from_pinned_async(&w.input.slice(r.clone())?, s)?;
                mix_repeat(s, &cfg, &mut d, w.factor, w.iterations)?;
                d.copy_to_pinned_async(&mut w.output.slice_mut(r)?, s)?;
            }
        }
        None => {
            let cfg = LaunchConfig::for_elements(w.dev.len(), 256)?;
            w.dev.copy_from_pinned_async(&w.input, legacy)?;
            mix_repeat(legacy, &cfg, &mut w.dev, w.factor, w.iterations)?;
            w.dev.copy_to_pinned_async(&mut w.output, legacy)?;
        }
    }
    stop.record(legacy)?;
    stop.synchronize()?;
    Event::elapsed_time(&start, &stop)
}

fn run() -> Result<bool, cuda_runtime::Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 24);
    let iterations: i32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let n = n / STREAMS * STREAMS;
    let props = Device::current()?.properties()?;
    println!(
        "simple_streams: {} ({} copy engines), {n} elements of u32 in {STREAMS} chunks, \
         {iterations} iterations per element",
        props.name, props.async_engine_count
    );

    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    let input: Vec<u32> = (0..n).map(|_| rng.u32(..)).collect();
    let factor = rng.u32(..) | 1;
    let expected: Vec<u32> = input
        .par_iter()
        .map(|&x| mix(x, factor, iterations))
        .collect();

    let mut w = Work {
        input: PinnedBuffer::from_slice(&input)?,
        output: PinnedBuffer::new(n)?,
        dev: DeviceBuffer::new(n)?,
        factor,
        iterations,
    };
    let streams: Vec<Stream> = (0..STREAMS)
        .map(|_| Stream::new())
        .collect::<Result<_, _>>()?;
    let legacy = Stream::legacy()?;

    let mut ok = true;
    let mut check = |w: &Work, what: &str| -> cuda_runtime::Result<()> {
        // Waits for the copies back (all chunks: the views noted their use on the buffer).
        let out = w.output.as_slice()?;
        let bad = (0..n).filter(|&i| out[i] != expected[i]).count();
        if let Some(i) = (0..n).find(|&i| out[i] != expected[i]) {
            eprintln!(
                "{what}: {bad} mismatches (seed {seed}); first at {i}: got {:#x}, expected {:#x}",
                out[i], expected[i]
            );
            ok = false;
        }
        Ok(())
    };
    // Warm up both paths (module load, first-touch costs), checking each result.
    pass(&mut w, Some(&streams), &legacy)?;
    check(&w, "4 streams")?;
    pass(&mut w, None, &legacy)?;
    check(&w, "without streams")?;
    let (mut streamed, mut serial) = (0.0f32, 0.0f32);
    for _ in 0..REPEATS {
        streamed += pass(&mut w, Some(&streams), &legacy)?;
        check(&w, "4 streams")?;
        serial += pass(&mut w, None, &legacy)?;
        check(&w, "without streams")?;
    }
    let (streamed, serial) = (streamed / REPEATS as f32, serial / REPEATS as f32);
    println!("time with {STREAMS} streams:  {streamed:.3} ms (mean of {REPEATS})");
    println!("time without streams: {serial:.3} ms (mean of {REPEATS})");
    println!(
        "overlap: {} ({:.2}x)",
        if streamed < serial { "yes" } else { "no" },
        serial / streamed
    );
    println!("results: {}", if ok { "match the CPU" } else { "MISMATCH" });
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("simple_streams: {e}");
            ExitCode::FAILURE
        }
    }
}
