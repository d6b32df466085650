//! Helpers for GPU tests: fresh random inputs, and comparison with a CPU reference.
#![allow(dead_code)] // some helpers serve only part of the suite at a time

use std::fmt::Debug;

/// One GPU test.
pub struct GpuTest {
    pub name: &'static str,
    pub run: fn(),
    /// Runs while no other test runs (device reset, device-wide settings).
    pub exclusive: bool,
    /// Devices the test needs; with fewer it is reported as ignored.
    pub min_devices: i32,
}

/// Registers tests: `tests![a, b; exclusive: c]`.
#[macro_export]
macro_rules! tests {
    ($($name:ident),* $(,)? $(; exclusive: $($x:ident),* $(,)?)? $(; two_gpus: $($t:ident),* $(,)?)?) => {
        pub const TESTS: &[$crate::common::GpuTest] = &[
            $($crate::common::GpuTest {
                name: concat!(module_path!(), "::", stringify!($name)),
                run: $name,
                exclusive: false,
                min_devices: 1,
            },)*
            $($($crate::common::GpuTest {
                name: concat!(module_path!(), "::", stringify!($x)),
                run: $x,
                exclusive: true,
                min_devices: 1,
            },)*)?
            $($($crate::common::GpuTest {
                name: concat!(module_path!(), "::", stringify!($t)),
                run: $t,
                exclusive: true,
                min_devices: 2,
            },)*)?
        ];
    };
}

/// A random generator seeded afresh for every test (printed, so a failure can be replayed with
/// `GPU_TEST_SEED=<seed>`).
pub fn rng() -> fastrand::Rng {
    let seed = std::env::var("GPU_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("seed {seed}");
    fastrand::Rng::with_seed(seed)
}

/// `n` random floats in [-1000, 1000), never all zero.
pub fn random_f32(rng: &mut fastrand::Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.f32() * 2000.0 - 1000.0).collect()
}

/// `n` random u32 values.
pub fn random_u32(rng: &mut fastrand::Rng, n: usize) -> Vec<u32> {
    (0..n).map(|_| rng.u32(..)).collect()
}

/// `n` random bytes.
pub fn random_bytes(rng: &mut fastrand::Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.u8(..)).collect()
}

/// Asserts two sequences are equal, reporting the first difference and how many there are.
pub fn assert_same<T: PartialEq + Debug>(what: &str, actual: &[T], expected: &[T]) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    let bad: Vec<usize> = (0..actual.len())
        .filter(|&i| actual[i] != expected[i])
        .collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{what}: {} of {} elements differ; first at {i}: got {:?}, expected {:?}",
            bad.len(),
            actual.len(),
            actual[i],
            expected[i]
        );
    }
}

/// Asserts floats agree within `rel` relative tolerance (absolute near zero).
pub fn assert_close(what: &str, actual: &[f32], expected: &[f32], rel: f32) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let tol = rel * e.abs().max(1.0);
        assert!(
            (a - e).abs() <= tol,
            "{what}: element {i}: got {a}, expected {e} (tolerance {tol})"
        );
    }
}

/// Runs `gpu` and `cpu` on the same fresh random input and compares their outputs exactly:
/// the usual shape of a GPU test.
pub fn check_against_cpu<I, O: PartialEq + Debug>(
    what: &str,
    input: impl FnOnce(&mut fastrand::Rng) -> I,
    gpu: impl FnOnce(&I) -> Vec<O>,
    cpu: impl FnOnce(&I) -> Vec<O>,
) {
    let mut rng = rng();
    let input = input(&mut rng);
    let expected = cpu(&input);
    let actual = gpu(&input);
    assert_same(what, &actual, &expected);
}

/// The environment variable that makes the test binary run one child test.
pub const CHILD_VAR: &str = "CUDA_RUNTIME_GPU_TEST_CHILD";

/// Runs the child test `name` in a new process of this binary and returns its output; panics
/// with the child's output if it fails.
pub fn run_in_child(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .env(CHILD_VAR, name)
        .output()
        .expect("starting the child process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "child test {name} failed ({}):\n{text}",
        out.status
    );
    text
}
