//! The GPU test binary: every test that needs a GPU, one module per runtime area.
//!
//! Without a usable driver and device every test is reported as *ignored*, and the reason is
//! printed first. With `CUDA_RUNTIME_REQUIRE_GPU=1` they run anyway, so a missing GPU fails them.
//! Tests marked exclusive (device reset, device flags) run while no other test runs.

mod common;
mod device;
mod driver_errors;
mod host_memory;
mod launch;
mod memory;
mod peer;
mod pitched;
mod safety;
mod stream;
mod texture;

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
            .chain(host_memory::CHILDREN)
            .chain(safety::CHILDREN)
            .chain(texture::CHILDREN)
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
    let args = Arguments::from_args();
    let require = std::env::var("CUDA_RUNTIME_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let skip = if require { None } else { gpu_unavailable() };
    if let Some(reason) = &skip {
        eprintln!("GPU tests ignored: {reason} (set CUDA_RUNTIME_REQUIRE_GPU=1 to fail instead)");
    }
    let all: Vec<&GpuTest> = [
        device::TESTS,
        driver_errors::TESTS,
        host_memory::TESTS,
        launch::TESTS,
        memory::TESTS,
        peer::TESTS,
        pitched::TESTS,
        safety::TESTS,
        stream::TESTS,
        texture::TESTS,
    ]
    .into_iter()
    .flatten()
    .collect();
    let devices = cuda_runtime::device_count().unwrap_or(0);
    if skip.is_none() && all.iter().any(|t| t.min_devices > devices) {
        eprintln!(
            "multi-GPU tests ignored: this machine has {devices} GPU(s); they run on a machine \
             with two"
        );
    }
    let trials = all
        .into_iter()
        .map(|t| {
            let (f, exclusive) = (t.run, t.exclusive);
            let ignored = skip.is_some() || t.min_devices > devices;
            Trial::test(t.name, move || -> Result<(), Failed> {
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
                f();
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
