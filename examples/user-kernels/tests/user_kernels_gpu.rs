//! GPU tests of the example user crate: its kernels, launched through the wrappers
//! cuda-runtime-build generated, against CPU references on fresh random input; and the
//! preconditions its kernels declare, refused before anything is queued.
//!
//! Without a usable GPU the tests are reported as ignored; with `CUDA_RUNTIME_REQUIRE_GPU=1`
//! they fail instead.

use cuda_runtime::{DeviceBuffer, Error, LaunchConfig, Stream, StreamFlags};
use libtest_mimic::{Arguments, Failed, Trial};
use user_kernels::{block_sums_cpu, reduce, saxpy, saxpy_cpu, tile_reverse_cpu};

fn rng() -> fastrand::Rng {
    let seed = std::env::var("GPU_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("seed {seed}");
    fastrand::Rng::with_seed(seed)
}

/// Integer-valued floats in [-1000, 1000): sums of up to 2^14 of them are exact in any order.
fn ints_as_f32(r: &mut fastrand::Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.i32(-1000..1000) as f32).collect()
}

fn saxpy_matches_cpu_for_any_shape() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    for _ in 0..20 {
        let n = r.usize(0..300_000);
        // Lengths may differ: the kernel covers the shorter one.
        let xn = if r.bool() { n } else { r.usize(0..300_000) };
        let (x, y) = (ints_as_f32(&mut r, xn), ints_as_f32(&mut r, n));
        let a = r.i32(-8..8) as f32 * 0.25;
        let dx = DeviceBuffer::from_slice(&x).unwrap();
        let mut dy = DeviceBuffer::from_slice(&y).unwrap();
        // Any launch shape: small grids stride, odd blocks, 2-D grids and 3-D blocks (threads
        // and blocks with a y or z index above 0 idle: they must not apply the update again).
        let cfg = LaunchConfig::new(
            (r.u32(1..200), r.u32(1..3), 1),
            (r.u32(1..64), r.u32(1..3), r.u32(1..3)),
        );
        saxpy::saxpy(&s, &cfg, &mut dy, &dx, a).unwrap();
        let mut want = y.clone();
        saxpy_cpu(&mut want, &x, a);
        assert_eq!(dy.to_vec().unwrap(), want, "n {n}, x {xn}, {cfg:?}");
    }
}

fn block_sums_match_cpu_and_refuse_other_blocks() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    for _ in 0..10 {
        let n = r.usize(1..200_000);
        let x = ints_as_f32(&mut r, n);
        let dx = DeviceBuffer::from_slice(&x).unwrap();
        let want = block_sums_cpu(&x);
        let mut sums = DeviceBuffer::from_slice(&vec![f32::NAN; want.len() + 3]).unwrap();
        for block in [
            (128, 1, 1),
            (256, 2, 1),
            (32, 8, 1),
            (1024, 1, 1),
            (1, 1, 1),
        ] {
            let e = reduce::block_sums(&s, &LaunchConfig::new(4u32, block), &dx, &mut sums)
                .unwrap_err();
            assert!(
                matches!(&e, Error::KernelPrecondition { kernel: "block_sums", precondition, .. } if precondition == "block = (256, 1, 1)"),
                "{e}"
            );
        }
        let grid = r.u32(1..100);
        reduce::block_sums(&s, &LaunchConfig::new(grid, 256u32), &dx, &mut sums).unwrap();
        // `to_vec` is `cudaMemcpy` on the legacy stream, which (as in libcudart) does not wait
        // for a non-blocking stream: read on `s` instead.
        let mut got = vec![0.0f32; sums.len()];
        sums.copy_to_host_async(&mut got, &s).unwrap();
        assert_eq!(&got[..want.len()], &want[..], "grid {grid}");
        assert!(
            got[want.len()..].iter().all(|v| v.is_nan()),
            "wrote past the chunks"
        );
    }
}

fn tile_reverse_matches_cpu_and_enforces_its_declared_preconditions() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    for _ in 0..20 {
        let n = r.usize(1..100_000);
        let tile = r.usize(1..=1024);
        let input: Vec<i32> = (0..n).map(|_| r.i32(..)).collect();
        let din = DeviceBuffer::from_slice(&input).unwrap();
        let mut dout = DeviceBuffer::from_slice(&vec![i32::MIN; n]).unwrap();
        let block = r.u32(tile as u32..=1024);
        let smem = 4 * tile as u32 + r.u32(0..64);
        let cfg = LaunchConfig::new((r.u32(1..64), r.u32(1..3), 1), block).with_shared_mem(smem);
        reduce::tile_reverse(&s, &cfg, &din, &mut dout, tile as i32).unwrap();
        assert_eq!(
            dout.to_vec().unwrap(),
            tile_reverse_cpu(&input, tile),
            "n {n}, tile {tile}, {cfg:?}"
        );
    }
    // Each declared precondition, broken alone, is refused with its values; nothing runs.
    let din = DeviceBuffer::from_slice(&[1, 2, 3, 4]).unwrap();
    let mut dout = DeviceBuffer::from_slice(&[9; 4]).unwrap();
    let cases = [
        (64, 256, 0, "tile >= 1", "tile = 0"),
        (64, 256, -5, "tile >= 1", "tile = -5"),
        (32, 256, 64, "block.x >= tile", "block.x = 32, tile = 64"),
        (
            64,
            255,
            64,
            "dynamic_shared >= 4 * tile",
            "dynamic_shared = 255, tile = 64",
        ),
        (
            1024,
            0,
            i32::MAX,
            "block.x >= tile",
            "block.x = 1024, tile = 2147483647",
        ),
    ];
    for (block, smem, tile, rule, values) in cases {
        let cfg = LaunchConfig::new(1u32, block as u32).with_shared_mem(smem);
        let e = reduce::tile_reverse(&s, &cfg, &din, &mut dout, tile).unwrap_err();
        assert_eq!(
            e,
            Error::KernelPrecondition {
                kernel: "tile_reverse",
                precondition: rule.into(),
                values: values.into(),
            }
        );
    }
    assert_eq!(dout.to_vec().unwrap(), [9; 4], "a refused launch ran");
}

fn gpu_unavailable() -> Option<String> {
    match cuda_runtime::device_count() {
        Err(e) => Some(e.to_string()),
        Ok(0) => Some("the driver reports no CUDA device".into()),
        Ok(_) => None,
    }
}

fn main() {
    let args = Arguments::from_args();
    let require = std::env::var("CUDA_RUNTIME_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let missing = gpu_unavailable();
    if let Some(reason) = &missing {
        if require {
            eprintln!("GPU tests fail: CUDA_RUNTIME_REQUIRE_GPU=1 but {reason}");
        } else {
            eprintln!(
                "GPU tests ignored: {reason} (set CUDA_RUNTIME_REQUIRE_GPU=1 to fail instead)"
            );
        }
    }
    let tests: [(&str, fn()); 3] = [
        (
            "saxpy_matches_cpu_for_any_shape",
            saxpy_matches_cpu_for_any_shape,
        ),
        (
            "block_sums_match_cpu_and_refuse_other_blocks",
            block_sums_match_cpu_and_refuse_other_blocks,
        ),
        (
            "tile_reverse_matches_cpu_and_enforces_its_declared_preconditions",
            tile_reverse_matches_cpu_and_enforces_its_declared_preconditions,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, f)| {
            let ignored = missing.is_some() && !require;
            let missing = missing.clone();
            Trial::test(name, move || -> Result<(), Failed> {
                if let Some(reason) = missing {
                    return Err(format!("CUDA_RUNTIME_REQUIRE_GPU=1, but {reason}").into());
                }
                f();
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
