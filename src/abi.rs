//! Handle-level entry points for the C ABI crate (`cudart/`, which builds a drop-in
//! `libcudart.so.13`). Not for Rust programs: C programs own raw handles and mix them with driver
//! calls, so this layer hands out no RAII types; what it shares with the safe API is the semantic
//! core — devices, primary contexts and the current device, resets, error numbers, names and
//! strings, per-thread last errors and sticky errors.

use crate::context::{self, Active};
use crate::error::{record, set_last_error, Error, Result};

/// cudarc's raw driver bindings, the same instance the crate uses.
pub use cudarc::driver::sys;

/// Runs `f` with the calling thread's stream-capture mode relaxed
/// (`cuThreadExchangeStreamCaptureMode`, restored afterwards), for the library's own
/// housekeeping, such as loading a program's kernels lazily on their first launch: made in
/// global mode during a capture (the program's own, or another thread's), such a call would
/// fail and invalidate the capture, where NVIDIA's library loads them without doing so.
pub fn relaxed<R>(f: impl FnOnce() -> R) -> R {
    crate::queue::relaxed(f)
}

/// The current device's primary context, active and current on the calling thread, kept from a
/// reset while this lives (as every call of the crate holds it).
pub struct Entered(Active);

impl Entered {
    /// Enters the calling thread's current device (making its primary context if needed).
    /// Errors are recorded as the thread's last error.
    pub fn current() -> Result<Entered> {
        record(context::enter_current().map(Entered))
    }

    /// Enters device `ordinal`.
    pub fn device(ordinal: i32) -> Result<Entered> {
        record(context::enter(ordinal).map(Entered))
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> i32 {
        self.0.dev.ordinal
    }

    /// Checks the result of a driver call made in this context: a failure becomes the
    /// runtime's error (sticky errors are kept on the device) and the thread's last error.
    pub fn check(&self, r: sys::CUresult, call: &'static str) -> Result<()> {
        record(self.0.check(r, call))
    }
}

/// Records `e` as the calling thread's last error (`cudaGetLastError` returns it).
pub fn record_error(e: &Error) {
    set_last_error(e);
}

/// The runtime's error number of a driver result (`cudaError_t` from `CUresult`).
pub fn code_of_driver(r: sys::CUresult) -> u32 {
    crate::ErrorCode::from_driver(crate::driver::rc(r)).number()
}

impl Entered {
    /// Checks a launch shape against the device's limits, as every launch of the crate does
    /// (`cudaErrorInvalidConfiguration` naming the offending dimension).
    pub fn validate_launch(&self, config: &crate::LaunchConfig) -> Result<()> {
        record(
            self.0
                .dev
                .launch_limits()
                .and_then(|l| crate::launch::validate(config, l)),
        )
    }
}

impl Entered {
    /// The raw handle of the entered primary context.
    pub fn context(&self) -> sys::CUcontext {
        self.0.ctx_raw()
    }
}
