//! The GPU test binary: every test that needs a GPU, one module per runtime area.
//!
//! Without a usable driver and device every test is reported as *ignored*, and the reason is
//! printed first. With `CUDA_RUNTIME_REQUIRE_GPU=1` they run anyway, so a missing GPU fails them.
//! Tests marked exclusive (device reset, device flags) run while no other test runs.
//!
//! Under compute-sanitizer, stretch the watchdogs of the child-process tests and leave out the
//! one test that faults on purpose (its illegal address is the point of it):
//! `CUDA_RUNTIME_TEST_SLOW=10 GPU_TIMEOUT=560 SANITIZE_TOOLS=memcheck bash .gpu/run.sh sanitize --
//! --skip sticky_error_in_a_child_process` (one tool per run: each takes minutes). Or every test
//! alone in its own process under each of memcheck, racecheck and synccheck, many side by side:
//! `bash scripts/gpu-verify sanitize-each` (about 400 s on four H200s). Under the tools:
//! `CUDA_RUNTIME_TEST_GPU_SHARED=1` makes the checks of free memory against a baseline report
//! instead of failing (other processes share the GPU), and `CUDA_RUNTIME_TEST_TOOL=racecheck`
//! leaves out the transpose test's 2^27-block grid (too slow under that tool).

mod allocation;
mod callbacks;
mod capture;
mod common;
mod device;
mod driver_errors;
mod dynamic_parallelism;
mod graph_hostile;
mod graph_more;
mod graph_nodes;
mod graphs;
mod host_chunks;
mod host_memory;
mod l2;
mod launch;
mod launch_ex;
mod library;
mod memory;
mod ownership;
mod peer;
mod pitched;
mod runtime_rest;
mod safety;
mod stream;
mod symbols;
mod texture;
mod user_kernels;

use std::sync::RwLock;

use common::GpuTest;
use libtest_mimic::{Arguments, Failed, Trial};

static EXCLUSIVE: RwLock<()> = RwLock::new(());

fn gpu_unavailable() -> Option<String> {
    match cuda_runtime::device_count() {
        Err(e) => Some(e.to_string()),
        Ok(0) => Some("the driver reports no CUDA device".into()),
        Ok(_) => None,
    }
}

fn main() {
    // A test that must run in a process of its own (it leaves the GPU unusable for the process)
    // re-runs this binary with the child's name in this variable.
    if let Ok(name) = std::env::var(common::CHILD_VAR) {
        let child = launch::CHILDREN
            .iter()
            .chain(allocation::CHILDREN)
            .chain(dynamic_parallelism::CHILDREN)
            .chain(host_memory::CHILDREN)
            .chain(safety::CHILDREN)
            .chain(runtime_rest::CHILDREN)
            .chain(texture::CHILDREN)
            .chain(peer::CHILDREN)
            .chain(callbacks::CHILDREN)
            .chain(ownership::CHILDREN)
            .chain(graph_hostile::CHILDREN)
            .find(|(n, _)| *n == name);
        match child {
            Some((_, f)) => {
                common::dump_stacks_on_signal();
                f();
                std::process::exit(0);
            }
            None => {
                eprintln!("no child test named {name}");
                std::process::exit(2);
            }
        }
    }
    // SIGUSR1 prints every thread's stack (for a run that stalls); with
    // CUDA_RUNTIME_TEST_TRACE=1 each test's start and end are printed.
    common::dump_stacks_on_signal();
    let trace = std::env::var("CUDA_RUNTIME_TEST_TRACE").is_ok_and(|v| v == "1");
    let args = Arguments::from_args();
    // CUDA_RUNTIME_TEST_ONLY: the exact names of the tests to run, separated by white space or
    // commas (libtest-mimic takes one filter; a sanitizer run that stopped half-way is finished
    // with the rest of the list).
    let only: Option<Vec<String>> = std::env::var("CUDA_RUNTIME_TEST_ONLY").ok().map(|v| {
        v.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|n| !n.is_empty())
            .map(|n| {
                if n.starts_with("gpu::") {
                    n.to_string()
                } else {
                    format!("gpu::{n}")
                }
            })
            .collect()
    });
    let require = std::env::var("CUDA_RUNTIME_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let unavailable = gpu_unavailable();
    // Without a GPU: ignored, or failed (each test, with the reason) when one is required.
    let (skip, missing) = match (&unavailable, require) {
        (Some(reason), false) => {
            eprintln!(
                "GPU tests ignored: {reason} (set CUDA_RUNTIME_REQUIRE_GPU=1 to fail instead)"
            );
            (true, None)
        }
        (Some(reason), true) => {
            eprintln!("GPU tests fail: CUDA_RUNTIME_REQUIRE_GPU=1 but {reason}");
            (false, Some(reason.clone()))
        }
        (None, _) => (false, None),
    };
    let all: Vec<&GpuTest> = [
        allocation::TESTS,
        callbacks::TESTS,
        capture::TESTS,
        device::TESTS,
        driver_errors::TESTS,
        dynamic_parallelism::TESTS,
        graph_hostile::TESTS,
        graph_more::TESTS,
        graph_nodes::TESTS,
        graphs::TESTS,
        host_chunks::TESTS,
        host_memory::TESTS,
        l2::TESTS,
        launch::TESTS,
        launch_ex::TESTS,
        library::TESTS,
        memory::TESTS,
        ownership::TESTS,
        peer::TESTS,
        pitched::TESTS,
        runtime_rest::TESTS,
        safety::TESTS,
        stream::TESTS,
        symbols::TESTS,
        user_kernels::TESTS,
        texture::TESTS,
    ]
    .into_iter()
    .flatten()
    .filter(|t| only.as_ref().is_none_or(|o| o.iter().any(|n| n == t.name)))
    .collect();
    let devices = cuda_runtime::device_count().unwrap_or(0);
    if unavailable.is_none() && all.iter().any(|t| t.min_devices > devices) {
        eprintln!(
            "multi-GPU tests ignored: this machine has {devices} GPU(s); they run on a machine \
             with two"
        );
    }
    let trials = all
        .into_iter()
        .map(|t| {
            let (f, exclusive, name) = (t.run, t.exclusive, t.name);
            // A missing GPU is a failure when one is required; a missing second GPU is not
            // (the multi-GPU tests run on a machine with two).
            let ignored = skip || (missing.is_none() && t.min_devices > devices);
            let missing = missing.clone();
            Trial::test(t.name, move || -> Result<(), Failed> {
                if let Some(reason) = missing {
                    return Err(format!("CUDA_RUNTIME_REQUIRE_GPU=1, but {reason}").into());
                }
                let _guard = if exclusive {
                    (
                        None,
                        Some(EXCLUSIVE.write().unwrap_or_else(|p| p.into_inner())),
                    )
                } else {
                    (
                        Some(EXCLUSIVE.read().unwrap_or_else(|p| p.into_inner())),
                        None,
                    )
                };
                // Each test starts on device 0, whatever a test before it on this worker thread
                // left current (a two-GPU test that failed half-way leaves device 1 current).
                if missing.is_none() {
                    let _ = cuda_runtime::set_device(0);
                }
                let t = std::time::Instant::now();
                if trace {
                    eprintln!("[start] {name}");
                }
                f();
                if trace {
                    eprintln!("[end] {name} {:?}", t.elapsed());
                }
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
