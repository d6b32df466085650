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

/// In a child process: on `SIGUSR1` (sent by [`run_in_child_within`]'s watchdog) every thread
/// prints its stack to stderr, so that a hang's failure message shows where each thread waits.
/// Best effort (capturing a backtrace in a signal handler is not async-signal-safe: a thread
/// interrupted inside the allocator may not print); the watchdog kills the child soon after.
pub fn dump_stacks_on_signal() {
    extern "C" fn one_thread(_: libc::c_int) {
        // SAFETY: plain syscall.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let bt = std::backtrace::Backtrace::force_capture();
        // The raw frames too, with the nearest exported symbol of their module (the driver's
        // library has no others).
        let mut ips = [std::ptr::null_mut::<libc::c_void>(); 48];
        extern "C" {
            fn backtrace(buf: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
        }
        // SAFETY: the buffer holds 48 entries.
        let n = unsafe { backtrace(ips.as_mut_ptr(), 48) }.max(0) as usize;
        let mut raw = String::new();
        for ip in &ips[..n] {
            // SAFETY: `dladdr` only reads the loader's tables; `info` is a valid out-parameter.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            if unsafe { libc::dladdr(*ip, &mut info) } != 0 {
                let c = |p: *const libc::c_char| {
                    if p.is_null() {
                        String::from("?")
                    } else {
                        // SAFETY: the loader's NUL-terminated strings.
                        unsafe { std::ffi::CStr::from_ptr(p) }
                            .to_string_lossy()
                            .into_owned()
                    }
                };
                let file = c(info.dli_fname);
                let file = file.rsplit('/').next().unwrap_or("?").to_string();
                raw.push_str(&format!(
                    "    {ip:?} {file}+{:#x} {}+{:#x}\n",
                    *ip as usize - info.dli_fbase as usize,
                    c(info.dli_sname),
                    (*ip as usize).wrapping_sub(info.dli_saddr as usize)
                ));
            }
        }
        eprintln!("---- stack of thread {tid}:\n{bt}\n  raw:\n{raw}");
    }
    extern "C" fn all_threads(_: libc::c_int) {
        // SAFETY: plain syscalls on this process's own threads.
        let pid = unsafe { libc::getpid() };
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            for e in dir.flatten() {
                if let Ok(tid) = e.file_name().to_string_lossy().parse::<libc::c_int>() {
                    // SAFETY: as above.
                    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR2) };
                }
            }
        }
    }
    // SAFETY: installs handlers for two signals nothing else in the test binary uses.
    unsafe {
        libc::signal(libc::SIGUSR2, one_thread as *const () as libc::sighandler_t);
        libc::signal(
            libc::SIGUSR1,
            all_threads as *const () as libc::sighandler_t,
        );
    }
}

/// How many times longer than usual the tests may take (`CUDA_RUNTIME_TEST_SLOW`, default 1):
/// watchdogs are stretched by it, for runs under compute-sanitizer, which slows every driver call
/// and kernel.
pub fn slow_factor() -> u32 {
    std::env::var("CUDA_RUNTIME_TEST_SLOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&f| f >= 1)
        .unwrap_or(1)
}

/// Whether other processes share the GPU (`CUDA_RUNTIME_TEST_GPU_SHARED` set, as the scripts
/// that run several compute-sanitizer processes side by side do): the device's free memory then
/// moves with theirs, so the checks that compare it with a baseline report instead of failing
/// ([`memory_check`]). Every other check of those tests still asserts; the plain suite sets
/// nothing and asserts all.
pub fn gpu_shared() -> bool {
    std::env::var_os("CUDA_RUNTIME_TEST_GPU_SHARED").is_some()
}

/// Asserts `ok`, a check of the device's free memory against a baseline, with the message
/// `msg` gives; on a shared GPU ([`gpu_shared`]) prints the message instead.
pub fn memory_check(ok: bool, msg: impl FnOnce() -> String) {
    if ok {
        return;
    }
    let msg = msg();
    if gpu_shared() {
        eprintln!("(GPU shared with other processes: not asserted) {msg}");
    } else {
        panic!("{msg}");
    }
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
    let limit = limit * slow_factor();
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait().expect("waiting for the child process") {
            Some(status) => break Some(status),
            None if start.elapsed() > limit => {
                // Ask the child for every thread's stack first (see `dump_stacks_on_signal`).
                // SAFETY: plain syscall on a process id this function started.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGUSR1) };
                std::thread::sleep(std::time::Duration::from_secs(3));
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

/// Small integers as floats, so that sums are exact.
pub fn random_ints_f32(r: &mut fastrand::Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.i32(-100..100) as f32).collect()
}

/// The crate's `vadd` kernel as a user module (`vadd(a, a_len, b, b_len, c, c_len)`).
pub fn vadd_module() -> cuda_runtime::Module {
    cuda_runtime::Module::from_ptx(cuda_runtime::kernels::vector_add::PTX).unwrap()
}

/// The crate's spinning kernels as a user module (`spin_read_sum` and the others).
pub fn spin_module() -> cuda_runtime::Module {
    cuda_runtime::Module::from_ptx(cuda_runtime::kernels::spin::PTX).unwrap()
}

/// Polls `done`, calling the crate between polls (which releases what finished graphs held),
/// for up to 10 s.
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < end, "{what}: not within 10 s");
        cuda_runtime::Device::current()
            .unwrap()
            .synchronize()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
