//! Builds the crate's kernels with the same pipeline users' build scripts get from
//! `cuda-runtime-build`: `kernels/*.cu` to PTX (compute_75) with nvcc when one is found (and
//! works), otherwise the committed `kernels/ptx/*.ptx` (checked against the sources' SHA-256);
//! then the typed launch wrappers, checked against the PTX. See README "Kernels".

fn main() {
    cuda_runtime_build::Kernels::new()
        // The generated code is compiled inside this crate.
        .crate_path("crate")
        // Kernels for the crate's tests, benchmarks and demonstrations: not API.
        .hidden(&["cdp", "faults", "graph_cond", "launch_ex", "params", "spin"])
        // Files marked `// cuda-runtime: device-runtime` load their images linked with the
        // device runtime, from cuda-runtime-devrt (feature `device-runtime`).
        .device_runtime_images("::cuda_runtime_devrt", "device-runtime")
        .regenerate_hint("scripts/install-nvcc && scripts/update-ptx")
        .build();
}
