//! The raw driver layer: the only code in the crate that names `cudarc`.
//!
//! Everything above this module speaks in the crate's own types. This layer
//!
//! * finds libcuda without panicking (cudarc panics on every call when it is missing),
//! * checks once that the driver is new enough for the symbols the crate uses,
//! * turns every `CUresult` into a plain number at the call site, so that a code unknown to the
//!   bindings (a newer driver's) is never matched or printed as cudarc's enum.

use std::sync::OnceLock;

use crate::error::Error;

pub(crate) use cudarc::driver::sys;

/// The oldest driver this crate runs on: CUDA 13.0, as reported by `cuDriverGetVersion`.
pub(crate) const REQUIRED_DRIVER_VERSION: i32 = 13000;

/// Turns a driver return value into its number without matching on cudarc's enum.
#[inline(always)]
pub(crate) fn rc(r: sys::CUresult) -> u32 {
    r as u32
}

/// Checks a driver return value; `call` names the driver function for the error message.
#[inline(always)]
pub(crate) fn check(r: sys::CUresult, call: &'static str) -> Result<(), Error> {
    match rc(r) {
        0 => Ok(()),
        code => Err(Error::from_driver(code, call)),
    }
}

/// Whether libcuda can be loaded. cudarc's probe is uncached and opens the library each time,
/// so the answer is kept.
pub(crate) fn library_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to open the library by name and drops the handle;
    // it has no preconditions.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// `cuDriverGetVersion`, without initialising the driver. `None` when there is no libcuda.
pub(crate) fn driver_version() -> Option<i32> {
    if !library_present() {
        return None;
    }
    let mut v = 0i32;
    // SAFETY: libcuda is present (checked above), `cuDriverGetVersion` exists in every driver and
    // writes one int through a valid pointer.
    let r = rc(unsafe { sys::cuDriverGetVersion(&mut v) });
    (r == 0).then_some(v)
}

/// Checks a driver version against [`REQUIRED_DRIVER_VERSION`].
pub(crate) fn check_version(found: i32) -> Result<(), Error> {
    if found >= REQUIRED_DRIVER_VERSION {
        Ok(())
    } else {
        Err(Error::DriverTooOld {
            found,
            required: REQUIRED_DRIVER_VERSION,
        })
    }
}

/// Loads and initialises the driver once (`cuInit`). Every call that needs the driver goes
/// through here first; the outcome, success or error, is kept for the life of the process.
pub(crate) fn init() -> Result<(), Error> {
    static INIT: OnceLock<Result<(), Error>> = OnceLock::new();
    INIT.get_or_init(|| {
        if !library_present() {
            return Err(Error::NoDriver);
        }
        let found = driver_version().ok_or(Error::NoDriver)?;
        check_version(found)?;
        // SAFETY: the library is present and new enough to export every symbol the crate uses.
        check(unsafe { sys::cuInit(0) }, "cuInit")
    })
    .clone()
}

/// A raw handle that may cross threads. Driver handles are plain identifiers that the driver
/// lets any thread use; the wrapper only exists because raw pointers are not `Send`/`Sync`.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct Raw<T>(pub(crate) *mut T);

impl<T> Clone for Raw<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Raw<T> {}
impl<T> PartialEq for Raw<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<T> Eq for Raw<T> {}

// SAFETY: the driver's handles (contexts, streams, events, modules, functions) are usable from any
// host thread; the driver synchronises its own state. The crate never dereferences them.
unsafe impl<T> Send for Raw<T> {}
// SAFETY: as above; shared references only copy the handle value.
unsafe impl<T> Sync for Raw<T> {}

impl<T> Raw<T> {
    pub(crate) const fn null() -> Self {
        Raw(std::ptr::null_mut())
    }
    /// The pointer (a method, so that closures capture the `Send` wrapper, not the field).
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
    pub(crate) fn is_null(self) -> bool {
        self.0.is_null()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn old_driver_is_refused_with_both_versions() {
        let e = check_version(12080).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InsufficientDriver);
        let msg = e.to_string();
        assert!(msg.contains("12.8") && msg.contains("13.0"), "{msg}");
        assert!(check_version(13000).is_ok());
        assert!(check_version(13020).is_ok());
    }

    #[test]
    fn missing_driver_is_an_error_not_a_panic() {
        // This path is reachable only where libcuda is absent (the development machines and CI).
        if library_present() {
            eprintln!("libcuda is present here: the no-driver path is not reachable");
            return;
        }
        assert_eq!(driver_version(), None);
        let e = init().unwrap_err();
        assert_eq!(e, Error::NoDriver);
        assert_eq!(e.code(), ErrorCode::InsufficientDriver);
        assert!(e.to_string().contains("no NVIDIA driver"), "{e}");
    }

    #[test]
    fn unknown_driver_code_keeps_its_number() {
        // 917 is not a CUresult the bindings know: it must never be turned into cudarc's enum.
        let e = Error::from_driver(917, "cuFoo");
        assert_eq!(e.driver_code(), Some(917));
        assert_eq!(e.code(), ErrorCode::Unknown);
        let msg = e.to_string();
        assert!(msg.contains("917") && msg.contains("cuFoo"), "{msg}");
    }
}
