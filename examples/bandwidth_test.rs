//! Bandwidth test in the spirit of NVIDIA's bandwidthTest sample: host-to-device,
//! device-to-host and device-to-device copies from pageable, page-locked and write-combined
//! memory, in GB/s, beside the same copies through NVIDIA's libcudart when it is installed
//! (`/usr/local/cuda/lib64/libcudart.so`, or `CUDA_RUNTIME_LIBCUDART`). Every copy's data is
//! verified.

use std::ffi::c_void;
use std::process::ExitCode;
use std::time::Instant;

use cuda_runtime::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};

const BYTES: usize = 64 << 20;
const REPS: usize = 10;

type Memcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, i32) -> i32;
type Sync = unsafe extern "C" fn() -> i32;

fn libcudart() -> Option<(libloading::Library, Memcpy, Sync)> {
    let path = std::env::var("CUDA_RUNTIME_LIBCUDART")
        .unwrap_or_else(|_| "/usr/local/cuda/lib64/libcudart.so".into());
    // SAFETY: NVIDIA's runtime library; its initialisers only register with the driver.
    let lib = unsafe { libloading::Library::new(path) }.ok()?;
    // SAFETY: cudaMemcpy has this C signature in CUDA 13.
    let f: Memcpy = *unsafe { lib.get::<Memcpy>(b"cudaMemcpy\0") }.ok()?;
    // SAFETY: cudaDeviceSynchronize has this C signature.
    let sync: Sync = *unsafe { lib.get::<Sync>(b"cudaDeviceSynchronize\0") }.ok()?;
    Some((lib, f, sync))
}

/// Median GB/s of `REPS` runs of `f` moving `BYTES` bytes.
fn gbps(
    mut f: impl FnMut() -> Result<(), cuda_runtime::Error>,
) -> Result<f64, cuda_runtime::Error> {
    f()?;
    let mut v: Vec<f64> = (0..REPS)
        .map(|_| {
            let t = Instant::now();
            f().map(|()| BYTES as f64 / t.elapsed().as_secs_f64() / 1e9)
        })
        .collect::<Result<_, _>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[REPS / 2])
}

fn run() -> Result<bool, cuda_runtime::Error> {
    let rt = libcudart();
    let stream = Stream::new()?;
    let pattern: Vec<u8> = (0..BYTES).map(|i| (i * 31 % 251) as u8).collect();
    let mut dev = DeviceBuffer::<u8>::new(BYTES)?;
    let mut dev2 = DeviceBuffer::<u8>::new(BYTES)?;
    let mut pageable = pattern.clone();
    let mut pinned = PinnedBuffer::from_slice(&pattern)?;
    let mut wc = PinnedBuffer::<u8>::with_flags(BYTES, HostAllocFlags::WRITE_COMBINED)?;
    wc.as_mut_slice()?.copy_from_slice(&pattern);
    let mut ok = true;
    let mut check = |what: &str, got: &[u8]| {
        if got != pattern.as_slice() {
            eprintln!("bandwidth_test: {what}: data mismatch");
            ok = false;
        }
    };

    println!(
        "bandwidth_test: {} MiB per copy, median of {REPS}",
        BYTES >> 20
    );
    println!("{:<34} {:>14} {:>14}", "copy", "cuda-runtime", "libcudart");
    let cudart = |dst: *mut c_void, src: *const c_void, kind: i32| -> Option<f64> {
        let (_, f, sync) = rt.as_ref()?;
        gbps(|| {
            // SAFETY: `dst` and `src` are live allocations of at least BYTES bytes; a device
            // to device cudaMemcpy may return early, so the device is synchronised after.
            let e = unsafe { f(dst, src, BYTES, kind) };
            assert_eq!(e, 0, "cudaMemcpy returned {e}");
            // SAFETY: no arguments.
            let e = unsafe { sync() };
            assert_eq!(e, 0, "cudaDeviceSynchronize returned {e}");
            Ok(())
        })
        .ok()
    };
    let row = |what: &str, ours: f64, theirs: Option<f64>| {
        let t = theirs.map_or("-".to_string(), |v| format!("{v:.2}"));
        println!("{what:<34} {ours:>14.2} {t:>14}");
    };

    let d = dev.as_raw() as *mut c_void;
    let ours = gbps(|| dev.copy_from_host(&pageable))?;
    check("pageable H2D", &dev.to_vec()?);
    row(
        "host to device, pageable",
        ours,
        cudart(d, pageable.as_ptr().cast(), 1),
    );
    let ours = gbps(|| {
        dev.copy_from_pinned_async(&pinned, &stream)?;
        stream.synchronize()
    })?;
    check("page-locked H2D", &dev.to_vec()?);
    row(
        "host to device, page-locked",
        ours,
        cudart(d, pinned.as_host_ptr().cast(), 1),
    );
    let ours = gbps(|| {
        dev.copy_from_pinned_async(&wc, &stream)?;
        stream.synchronize()
    })?;
    check("write-combined H2D", &dev.to_vec()?);
    row(
        "host to device, write-combined",
        ours,
        cudart(d, wc.as_host_ptr().cast(), 1),
    );

    let ours = gbps(|| dev.copy_to_host(&mut pageable))?;
    check("pageable D2H", &pageable);
    let p = pageable.as_mut_ptr().cast();
    row("device to host, pageable", ours, cudart(p, d, 2));
    let ours = gbps(|| {
        dev.copy_to_pinned_async(&mut pinned, &stream)?;
        pinned.synchronize()
    })?;
    check("page-locked D2H", &pinned.as_slice()?);
    let p = pinned.as_host_ptr() as *mut c_void;
    row("device to host, page-locked", ours, cudart(p, d, 2));

    // Device to device counts bytes read and written, as bandwidthTest does.
    let d2 = dev2.as_raw() as *mut c_void;
    let ours = gbps(|| {
        dev2.copy_from_device_async(&dev, &stream)?;
        stream.synchronize()
    })? * 2.0;
    check("D2D", &dev2.to_vec()?);
    row(
        "device to device (read + write)",
        ours,
        cudart(d2, d, 3).map(|v| v * 2.0),
    );
    if rt.is_none() {
        println!("(libcudart not found: its column is empty)");
    }
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bandwidth_test: {e}");
            ExitCode::FAILURE
        }
    }
}
