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

/// Runs the child test `name` in a new process of this binary, as [`run_in_child`], with a
/// watchdog: a child still running after `limit` is killed and the test fails saying so (for
/// tests whose failure on a broken library is a hang). Prints the child's output.
pub fn run_in_child_within(name: &str, limit: std::time::Duration) -> String {
    use std::io::Read;
    use std::process::Stdio;
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = std::process::Command::new(exe)
        .env(CHILD_VAR, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the child process");
    // Both pipes are drained on threads, so that a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait().expect("waiting for the child process") {
            Some(status) => break Some(status),
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.join().unwrap_or_default()),
        String::from_utf8_lossy(&err.join().unwrap_or_default())
    );
    match status {
        None => panic!(
            "child test {name} did not finish within {limit:?} and was killed: it hung \
             (deadlock?). Its output until then:\n{text}"
        ),
        Some(status) if !status.success() => {
            panic!("child test {name} failed ({status}):\n{text}")
        }
        Some(_) => {
            eprint!("{text}");
            text
        }
    }
}
