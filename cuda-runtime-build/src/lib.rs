//! Build helper for [cuda-runtime](https://crates.io/crates/cuda-runtime): your crate's CUDA
//! kernels, launched through safe, typed wrappers.
//!
//! Called from your `build.rs`, it compiles each `kernels/*.cu` to PTX (`compute_75`, or a
//! newer target a file names: `// cuda-runtime: arch = sm_90`) with
//! `nvcc` when one is found, and otherwise embeds the PTX committed beside the sources in
//! `kernels/ptx/`, checked against the sources' SHA-256, so that your crate builds on machines
//! without a CUDA toolkit. An nvcc that is found but fails (an unsupported host compiler, a
//! toolkit newer than the driver) falls back to the committed PTX with a warning. It then
//! generates a module per source file with a launch function per `extern "C" __global__` kernel,
//! checked against the PTX's parameter list (a mismatch fails the build): the same wrappers
//! cuda-runtime generates for its own kernels.
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     cuda_runtime_build::Kernels::new().build();
//! }
//! ```
//!
//! ```text
//! // src/lib.rs (or main.rs)
//! cuda_runtime::include_kernels!();   // a module per kernels/<stem>.cu
//! ```
//!
//! # Writing kernels for safe wrappers
//!
//! In a wrapper, a `const T*` parameter takes any `cuda_runtime::DeviceRead<T>` (buffers, views,
//! mapped and managed memory; the launch notes a read), a `T*` any `DeviceWrite<T>` (a write).
//! Each pointer must be followed by a `size_t <name>_len` parameter, which the wrapper fills
//! from the buffer's length: the kernel must never access the pointer at or beyond it. Scalars
//! (`int`, `unsigned`, `float`, `double`, `size_t`, `bool`, the fixed-width integers) are passed
//! by value.
//!
//! A safe wrapper accepts every launch shape the device accepts and any argument values, so a
//! kernel must be correct for all of them — and for any values of its module's `__device__` and
//! `__constant__` variables, which safe code can set through `Symbol` — or declare what it
//! needs in the comment lines right above it; the wrapper then refuses every other launch with
//! `Error::KernelPrecondition` before anything is borrowed or queued:
//!
//! ```text
//! // cuda-runtime: block = (256, 1, 1)              exactly this block shape
//! // cuda-runtime: require dynamic_shared >= 4 * n  A OP B: OP one of == != < <= > >=; A and B
//! //                                                an integer, a quantity or N * quantity;
//! //                                                quantities: block.x|y|z, grid.x|y|z,
//! //                                                dynamic_shared (bytes) and integer
//! //                                                parameters (a pointer's *_len included)
//! // cuda-runtime: unsafe                           an `unsafe fn` taking raw addresses
//! // cuda-runtime: arch = sm_90                     needs compute capability 9.0 (clusters)
//! // cuda-runtime: waits-for-previous-kernel        every thread waits for the previous kernel
//! //                                                (cudaGridDependencySynchronize) before
//! //                                                touching memory: programmatic dependent
//! //                                                launch accepted
//! ```
//!
//! (cuda-runtime's own kernels may also mark a file `// cuda-runtime: device-runtime`: kernels
//! that launch kernels, linked ahead of time with NVIDIA's device runtime into images of the
//! separately licensed cuda-runtime-devrt crate. The directive is refused in other crates: load
//! such PTX with `Module::from_ptx_with_device_runtime`, which links `libcudadevrt.a` from a CUDA
//! toolkit at run time.)
//!
//! A file is compiled for `compute_75`, or for the newest architecture an `arch` directive in it
//! names (so keep kernels that need sm_90 in a file of their own); its wrappers then fail with
//! `Error::ComputeCapability` on an older GPU instead of failing to load the PTX.
//!
//! # Environment
//!
//! * `NVCC`: the nvcc to use. Otherwise nvcc is looked up in your crate's `.nvcc/nvidia/cu13`
//!   (the layout of the PyPI packages `nvidia-cuda-nvcc` and friends installed with
//!   `pip install --target .nvcc`), `CUDA_HOME` / `CUDA_PATH`, `/usr/local/cuda`, then `PATH`.
//! * `CUDA_RUNTIME_NO_NVCC=1`: use the committed PTX without looking for nvcc.
//! * `CUDA_RUNTIME_UPDATE_PTX=1`: after compiling with nvcc, write the result, headed by the
//!   sources' hash, to `kernels/ptx/<stem>.ptx`, to be committed. Use nvcc 13.0 for PTX that
//!   every driver from 580 on loads (newer nvcc versions write PTX that driver 580 refuses).
//!
//! The build script reruns when the kernels, their local headers (`#include "x.h"`), the
//! committed PTX or one of these variables change (not when `PATH` does).

#![deny(unsafe_code)]
// The examples show whole build scripts, `fn main` included.
#![allow(clippy::needless_doctest_main)]
#![warn(missing_docs)]

#[doc(hidden)]
pub mod kernel_sig;

#[cfg(feature = "build")]
mod pipeline;

#[cfg(feature = "build")]
pub use pipeline::{sources_hash, Kernels};
