//! Driver entry points (`cudaGetDriverEntryPointByVersion`): the address of a driver API
//! function, for driver features the crate does not wrap (`cuTensorMapEncodeTiled` for TMA
//! descriptors, say) without linking libcuda.
//!
//! Getting the address is safe; calling it is not: the caller must cast it to the function's
//! exact C signature, for the CUDA version asked, and keep every rule of the driver API (the
//! crate's contexts and handles may be passed, but work queued that way bypasses the crate's
//! tracking of memory uses, see the crate docs "How queued work is tracked").
//!
//! ```no_run
//! use cuda_runtime::entry_point::{driver_entry_point, EntryPointFlags};
//! # fn main() -> cuda_runtime::Result<()> {
//! let p = driver_entry_point("cuDriverGetVersion", 13000, EntryPointFlags::Default)?;
//! type GetVersion = unsafe extern "C" fn(*mut i32) -> u32;
//! // SAFETY: `cuDriverGetVersion` has this signature in CUDA 13.0 and writes one int.
//! let f: GetVersion = unsafe { std::mem::transmute(p.as_ptr()) };
//! let mut v = 0;
//! assert_eq!(unsafe { f(&mut v) }, 0);
//! assert_eq!(v, cuda_runtime::driver_version());
//! # Ok(()) }
//! ```

use std::ffi::{c_void, CString};
use std::ptr::NonNull;

use crate::driver::{self, sys};
use crate::error::{record, Error, Result};
use crate::stream::{default_stream_mode, DefaultStreamMode};

/// Which variant of a function that takes a stream to return (`cudaGetDriverEntryPointFlags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum EntryPointFlags {
    /// The variant matching the process's default-stream mode ([`default_stream_mode`]), as
    /// `cudaEnableDefault` matches the program's compilation mode.
    #[default]
    Default,
    /// The legacy-default-stream variant (`cudaEnableLegacyStream`).
    LegacyStream,
    /// The per-thread-default-stream variant (`_ptsz` / `_ptds`,
    /// `cudaEnablePerThreadDefaultStream`).
    PerThreadDefaultStream,
}

impl EntryPointFlags {
    fn to_driver(self) -> u64 {
        let per_thread = match self {
            EntryPointFlags::Default => default_stream_mode() == DefaultStreamMode::PerThread,
            EntryPointFlags::LegacyStream => false,
            EntryPointFlags::PerThreadDefaultStream => true,
        };
        if per_thread {
            sys::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM as u64
        } else {
            sys::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_LEGACY_STREAM as u64
        }
    }
}

/// The address of a driver function. Plain data: holding it is harmless, calling it needs
/// `unsafe` (cast with `std::mem::transmute` to the exact C signature).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DriverEntryPoint {
    ptr: NonNull<c_void>,
}

// SAFETY: a code address; it refers to no data.
unsafe impl Send for DriverEntryPoint {}
// SAFETY: as above.
unsafe impl Sync for DriverEntryPoint {}

impl DriverEntryPoint {
    /// The function's address, never null.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }
}

/// The driver function `symbol` (its base name, without `_v2` or `_ptsz`: `"cuMemAlloc"`) as
/// it was in CUDA `cuda_version` (1000 * major + 10 * minor)
/// (`cudaGetDriverEntryPointByVersion`; `cudaGetDriverEntryPoint` is this with the runtime's
/// version, [`RUNTIME_VERSION`](crate::device::RUNTIME_VERSION)).
///
/// # Errors
/// [`Error::NotFound`] when the driver has no such function
/// (`cudaDriverEntryPointSymbolNotFound`); [`Error::InvalidValue`] when it has one, but not in
/// a version as old as `cuda_version` asks (`cudaDriverEntryPointVersionNotSufficent`), or
/// for a name with a NUL byte or a version below CUDA 2.0.
#[doc(alias = "cudaGetDriverEntryPointByVersion")]
#[doc(alias = "cudaGetDriverEntryPoint")]
pub fn driver_entry_point(
    symbol: &str,
    cuda_version: i32,
    flags: EntryPointFlags,
) -> Result<DriverEntryPoint> {
    record((|| {
        if cuda_version < 2000 {
            return Err(Error::InvalidValue {
                what: "CUDA version of a driver entry point",
                value: cuda_version.to_string(),
                reason: "versions are 1000 * major + 10 * minor, CUDA 2.0 (2000) or newer",
            });
        }
        let c = CString::new(symbol).map_err(|_| Error::InvalidValue {
            what: "driver symbol name",
            value: format!("{symbol:?}"),
            reason: "contains a NUL byte",
        })?;
        driver::init()?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // Read as a plain number: a value the bindings' enum lacks must not be materialised.
        let mut status = 0u32;
        // SAFETY: NUL-terminated name; valid out-parameters (`status` has the enum's size and
        // is read as an integer).
        driver::check(
            unsafe {
                sys::cuGetProcAddress_v2(
                    c.as_ptr(),
                    &mut p,
                    cuda_version,
                    flags.to_driver(),
                    (&mut status as *mut u32).cast(),
                )
            },
            "cuGetProcAddress",
        )?;
        entry_from(symbol, cuda_version, status, p)
    })())
}

/// The outcome of `cuGetProcAddress` as the crate reports it.
fn entry_from(
    symbol: &str,
    cuda_version: i32,
    status: u32,
    p: *mut c_void,
) -> Result<DriverEntryPoint> {
    match (status, NonNull::new(p)) {
        (0, Some(ptr)) => Ok(DriverEntryPoint { ptr }),
        (2, _) => Err(Error::InvalidValue {
            what: "driver entry point",
            value: format!("{symbol} for CUDA version {cuda_version}"),
            reason: "the driver has the function only in a newer version than the one asked \
                     (cudaDriverEntryPointVersionNotSufficent)",
        }),
        _ => Err(Error::NotFound {
            what: "driver function",
            name: symbol.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_become_errors() {
        let mut x = 0u8;
        let p = (&mut x as *mut u8).cast::<c_void>();
        assert!(entry_from("cuFoo", 13000, 0, p).is_ok());
        let e = entry_from("cuFoo", 13000, 1, std::ptr::null_mut()).unwrap_err();
        assert!(e.to_string().contains("cuFoo"), "{e}");
        let e = entry_from("cuBar", 12000, 2, std::ptr::null_mut()).unwrap_err();
        assert!(
            e.to_string().contains("cuBar for CUDA version 12000"),
            "{e}"
        );
        // Success without an address is treated as not found, never as a null function.
        assert!(entry_from("cuFoo", 13000, 0, std::ptr::null_mut()).is_err());
    }

    #[test]
    fn bad_arguments_are_refused_before_the_driver() {
        let e = driver_entry_point("cuMemAlloc", 1000, EntryPointFlags::Default).unwrap_err();
        assert!(e.to_string().contains("1000"), "{e}");
        let e = driver_entry_point("cu\0x", 13000, EntryPointFlags::Default).unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
    }
}
