//! The programming guide's L2 persistence experiment: a small "hot" array is read again and
//! again while a large "cold" one streams through the cache. With part of L2 set aside for
//! persisting accesses and an access policy window over the hot array on the stream, the hot
//! lines stay in L2. Prints the kernel time without and with the window (median of 15 runs
//! each) and checks the results against the CPU.

use std::process::ExitCode;

use cuda_runtime::{
    kernels, AccessPolicyWindow, AccessProperty, Device, DeviceAttribute, DeviceBuffer, Event,
    LaunchConfig, Limit, Stream,
};

fn median_ms(
    stream: &Stream,
    mut launch: impl FnMut() -> cuda_runtime::Result<()>,
) -> cuda_runtime::Result<f32> {
    let (start, end) = (Event::new()?, Event::new()?);
    let mut times = Vec::new();
    for _ in 0..15 {
        start.record(stream)?;
        launch()?;
        end.record(stream)?;
        end.synchronize()?;
        times.push(Event::elapsed_time(&start, &end)?);
    }
    times.sort_by(f32::total_cmp);
    Ok(times[times.len() / 2])
}

fn run() -> Result<bool, cuda_runtime::Error> {
    let dev = Device::current()?;
    let set_aside_max = dev.attribute(DeviceAttribute::MaxPersistingL2CacheSize)? as usize;
    let window_max = dev.attribute(DeviceAttribute::MaxAccessPolicyWindowSize)? as usize;
    if set_aside_max == 0 || window_max == 0 {
        println!("l2_persistence: this device has no persisting L2; nothing to show");
        return Ok(true);
    }
    let old_limit = dev.limit(Limit::PersistingL2CacheSize)?;
    dev.set_limit(Limit::PersistingL2CacheSize, set_aside_max)?;
    let set_aside = dev.limit(Limit::PersistingL2CacheSize)?;
    // Hot: what fits the set-aside part (and a window); cold: 64 M floats streamed.
    let hot_len = set_aside.min(window_max) / 4;
    let cold_len = 64 << 20;
    let hot: Vec<f32> = (0..hot_len).map(|i| (i % 1000) as f32 * 0.5).collect();
    let cold: Vec<f32> = (0..cold_len).map(|i| (i % 777) as f32).collect();
    let (dh, dc) = (
        DeviceBuffer::from_slice(&hot)?,
        DeviceBuffer::from_slice(&cold)?,
    );
    let mut out = DeviceBuffer::<f32>::new(cold_len)?;
    let stream = Stream::new()?;
    let cfg = LaunchConfig::for_elements(cold_len, 256)?;

    let plain = median_ms(&stream, || {
        kernels::l2::hot_cold(&stream, &cfg, &dh, &dc, &mut out)
    })?;
    let window = AccessPolicyWindow::over(
        &dh,
        (set_aside as f32 / (hot_len * 4) as f32).min(1.0),
        AccessProperty::Persisting,
        AccessProperty::Streaming,
    );
    let persisting = {
        let _guard = stream.set_access_policy_window(&window)?;
        median_ms(&stream, || {
            kernels::l2::hot_cold(&stream, &cfg, &dh, &dc, &mut out)
        })?
    };
    dev.reset_persisting_l2_cache()?;
    dev.set_limit(Limit::PersistingL2CacheSize, old_limit)?;

    let got = out.to_vec()?;
    let bad = (0..cold_len)
        .filter(|&i| got[i] != cold[i] + hot[i % hot_len])
        .count();
    println!(
        "l2_persistence: set-aside {} KiB, hot {} KiB, cold {} MiB",
        set_aside >> 10,
        (hot_len * 4) >> 10,
        (cold_len * 4) >> 20
    );
    println!(
        "  without a window {plain:.3} ms, with a persisting window {persisting:.3} ms ({:.2}x)",
        plain / persisting
    );
    println!("  {bad} mismatches");
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("l2_persistence: {e}");
            ExitCode::FAILURE
        }
    }
}
