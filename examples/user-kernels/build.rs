fn main() {
    // kernels/*.cu -> PTX (nvcc, or the committed kernels/ptx/) -> typed wrappers in OUT_DIR.
    cuda_runtime_build::Kernels::new().build();
}
