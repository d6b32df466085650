//! What the benches share: stopping with a message, checking the driver's and libcudart's
//! status codes, and loading NVIDIA's libcudart at run time (`CUDA_RUNTIME_LIBCUDART`, default
//! `/usr/local/cuda/lib64/libcudart.so`) for its column of each figure.

// Each bench uses some of these.
#![allow(dead_code)]

use cudarc::driver::sys;

/// libcudart's `cudaError_t`.
pub type CudaError = i32;

/// Stops the bench with `what` (a failure in the bench itself, never a figure).
pub fn die(what: &str) -> ! {
    eprintln!("{} bench failed: {what}", env!("CARGO_CRATE_NAME"));
    std::process::exit(1);
}

/// Stops the bench unless the driver call succeeded.
pub fn ck(r: sys::CUresult, what: &str) {
    if r != sys::CUresult::CUDA_SUCCESS {
        die(&format!("{what} returned {r:?}"));
    }
}

/// Stops the bench unless the libcudart call succeeded.
pub fn ok(e: CudaError, what: &str) {
    if e != 0 {
        die(&format!("libcudart {what} returned cudaError {e}"));
    }
}

/// NVIDIA's libcudart, or `None` (said on stdout: the figures' libcudart column stays empty).
pub fn open_libcudart() -> Option<libloading::Library> {
    let path = std::env::var("CUDA_RUNTIME_LIBCUDART")
        .unwrap_or_else(|_| "/usr/local/cuda/lib64/libcudart.so".into());
    // SAFETY: loading NVIDIA's runtime library runs its initialisers, which only register with
    // the driver.
    match unsafe { libloading::Library::new(&path) } {
        Ok(l) => Some(l),
        Err(e) => {
            println!("libcudart not loaded ({path}: {e}): its column is left empty");
            None
        }
    }
}

/// The symbol `name` (NUL-terminated) of `lib` as a `T`; stops the bench when it is missing.
///
/// # Safety
/// `T` must be the symbol's type: a function pointer with its C signature (the CUDA 13.0
/// headers) or a pointer to its data.
pub unsafe fn sym<T: Copy>(lib: &libloading::Library, name: &[u8]) -> T {
    // SAFETY: the caller gives the symbol's type.
    match unsafe { lib.get::<T>(name) } {
        Ok(f) => *f,
        Err(e) => die(&format!("libcudart lacks a symbol: {e}")),
    }
}

/// The order in which `k` ways take their turn in round `round` of interleaved batches: each
/// round starts with the next way, so every way goes first, second, ... equally often and no
/// way always follows the same other (the batch right after another way's batch and its
/// synchronize can run slower or faster: 2026-11-27, where the crate, always first, came out up
/// to 5% behind in the graph-launch figure while the same launches timed in the other order,
/// the keep-alive figure, were within 2%).
pub fn turns(round: usize, k: usize) -> impl Iterator<Item = usize> {
    (0..k).map(move |j| (j + round) % k)
}
