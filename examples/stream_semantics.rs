//! The legacy default stream against blocking and non-blocking streams: three 20 ms spin kernels,
//! each stamping its start and end with the GPU's `%globaltimer`, launched in three scenarios.
//! The timeline shows which ran together; the order is checked against the runtime's rules:
//!
//! 1. legacy, blocking, blocking: the legacy kernel runs first, the two blocking streams then
//!    overlap each other;
//! 2. blocking, legacy, blocking: the legacy kernel waits for the first and holds back the third,
//!    so all three run one after another;
//! 3. non-blocking, legacy, non-blocking: nothing waits, all three overlap.

use std::process::ExitCode;

use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream, StreamFlags};

const SPIN_NS: u64 = 20_000_000;

/// Stream kinds, the expected order in words, and its check on (start, end) times.
type Scenario = ([Kind; 3], &'static str, fn(&[(f64, f64); 3]) -> bool);

#[derive(Clone, Copy)]
enum Kind {
    Legacy,
    Blocking,
    NonBlocking,
}

fn stream_of(kind: Kind) -> cuda_runtime::Result<Stream> {
    match kind {
        Kind::Legacy => Stream::legacy(),
        Kind::Blocking => Stream::new(),
        Kind::NonBlocking => Stream::with_flags(StreamFlags::NON_BLOCKING),
    }
}

fn name(kind: Kind) -> &'static str {
    match kind {
        Kind::Legacy => "legacy",
        Kind::Blocking => "blocking",
        Kind::NonBlocking => "non-blocking",
    }
}

/// Runs three spin kernels on streams of the given kinds; returns (start, end) in ms from the
/// first start.
fn scenario(kinds: [Kind; 3]) -> cuda_runtime::Result<[(f64, f64); 3]> {
    let streams = [
        stream_of(kinds[0])?,
        stream_of(kinds[1])?,
        stream_of(kinds[2])?,
    ];
    let mut stamps = DeviceBuffer::<u64>::zeroed(6)?;
    cuda_runtime::device::synchronize()?;
    for (slot, s) in streams.iter().enumerate() {
        kernels::spin::spin(
            s,
            &LaunchConfig::new(1u32, 1u32),
            &mut stamps,
            SPIN_NS,
            slot as i32,
        )?;
    }
    cuda_runtime::device::synchronize()?;
    let t = stamps.to_vec()?;
    let t0 = t.iter().step_by(2).copied().min().unwrap_or(0);
    let ms = |v: u64| v.saturating_sub(t0) as f64 / 1e6;
    Ok([
        (ms(t[0]), ms(t[1])),
        (ms(t[2]), ms(t[3])),
        (ms(t[4]), ms(t[5])),
    ])
}

fn timeline(kinds: [Kind; 3], t: &[(f64, f64); 3]) {
    let end = t.iter().map(|x| x.1).fold(0.0, f64::max);
    for (i, (k, (s, e))) in kinds.iter().zip(t).enumerate() {
        let cols = 60.0 / end.max(1.0);
        let bar: String = (0..60)
            .map(|c| {
                if (c as f64) >= s * cols && (c as f64) < e * cols {
                    '#'
                } else {
                    '.'
                }
            })
            .collect();
        println!(
            "  kernel {} on {:<13} {bar} {s:6.1} - {e:6.1} ms",
            i + 1,
            name(*k)
        );
    }
}

fn run() -> cuda_runtime::Result<bool> {
    use Kind::*;
    let checks: [Scenario; 3] = [
        (
            [Legacy, Blocking, Blocking],
            "1 first, then 2 and 3 together",
            |t| t[0].1 <= t[1].0 && t[0].1 <= t[2].0 && t[1].0 < t[2].1 && t[2].0 < t[1].1,
        ),
        (
            [Blocking, Legacy, Blocking],
            "1, 2, 3 one after another",
            |t| t[0].1 <= t[1].0 && t[1].1 <= t[2].0,
        ),
        (
            [NonBlocking, Legacy, NonBlocking],
            "all three together",
            |t| {
                let latest_start = t.iter().map(|x| x.0).fold(0.0, f64::max);
                let earliest_end = t.iter().map(|x| x.1).fold(f64::MAX, f64::min);
                latest_start < earliest_end
            },
        ),
    ];
    let mut ok = true;
    for (i, (kinds, expect, check)) in checks.into_iter().enumerate() {
        let t = scenario(kinds)?;
        let pass = check(&t);
        ok &= pass;
        println!(
            "scenario {}: {} / {} / {}: expected {expect}: {}",
            i + 1,
            name(kinds[0]),
            name(kinds[1]),
            name(kinds[2]),
            if pass { "as expected" } else { "WRONG ORDER" }
        );
        timeline(kinds, &t);
    }
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("stream_semantics: {e}");
            ExitCode::FAILURE
        }
    }
}
