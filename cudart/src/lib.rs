//! A drop-in `libcudart.so.13`: NVIDIA's CUDA runtime library rebuilt on the `cuda-runtime`
//! crate, so that programs compiled by nvcc with `-cudart shared` run on it unchanged
//! (`LD_LIBRARY_PATH=<dir with our libcudart.so.13> ./program`).
//!
//! Every one of the 422 functions libcudart 13.0.96 exports is exported here, under the same
//! version node (`libcudart.so.13`), so that programs and libraries that bind every symbol at load
//! time start. Functions not implemented yet return `cudaErrorNotSupported` (and record it as
//! the thread's last error); [`IMPLEMENTED`] counts the others. The runtime's rules (devices,
//! primary contexts, the current device, resets, per-thread and sticky errors, error numbers and
//! strings) come from the crate's semantic core, not from a second implementation.
//!
//! No panic crosses the C boundary: each export catches it and returns `cudaErrorUnknown`.
#![deny(unsafe_op_in_unsafe_fn)]
// The exports keep the C runtime's names and contracts: their safety requirements are those of
// libcudart's function of the same name.
#![allow(non_snake_case, non_camel_case_types, clippy::missing_safety_doc)]

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cuda_runtime::abi::{self, sys, Entered};
use cuda_runtime::{Error, ErrorCode};

include!(concat!(env!("OUT_DIR"), "/counts.rs"));

mod copy3d;
mod device;
mod errors;
mod event;
mod extra;
pub(crate) mod func;
pub(crate) mod graph;
mod graphics;
pub(crate) mod interop;
mod library;
pub(crate) mod memory;
mod more;
mod nodes;
mod pools;
pub(crate) mod props;
mod register;
pub(crate) mod stream;
pub(crate) mod texture;

/// `cudaError_t`.
pub type cudaError_t = i32;
/// `cudaStream_t` (the driver's `CUstream`).
pub type cudaStream_t = sys::CUstream;
/// `cudaEvent_t` (the driver's `CUevent`).
pub type cudaEvent_t = sys::CUevent;

/// `dim3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dim3 {
    /// x.
    pub x: u32,
    /// y.
    pub y: u32,
    /// z.
    pub z: u32,
}

/// Binds an export to the version node `libcudart.so.13` (as `name@@libcudart.so.13`).
macro_rules! symver {
    ($name:ident) => {
        // Not in the crate's unit-test binary: an executable has no version script, so a
        // versioned definition there leaves its own references unresolved (seen in release).
        #[cfg(not(test))]
        core::arch::global_asm!(concat!(
            ".symver ",
            stringify!($name),
            ", ",
            stringify!($name),
            "@@@libcudart.so.13"
        ));
    };
}
pub(crate) use symver;

/// Defines an exported function returning `cudaError_t`: unmangled, versioned, and returning
/// `cudaErrorUnknown` instead of unwinding into C.
macro_rules! export {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),* $(,)?) -> cudaError_t $body:block) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $crate::cudaError_t {
            $crate::guard(|| $body)
        }
        $crate::symver!($name);
    };
}
pub(crate) use export;

/// An export not implemented yet.
macro_rules! stub {
    ($name:ident) => {
        /// Not implemented yet: returns `cudaErrorNotSupported`.
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> $crate::cudaError_t {
            $crate::not_supported(stringify!($name))
        }
        $crate::symver!($name);
    };
}

mod stubs {
    include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
}

/// Runs an export's body; a panic becomes `cudaErrorUnknown`.
#[inline]
pub(crate) fn guard(f: impl FnOnce() -> cudaError_t) -> cudaError_t {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(ErrorCode::Unknown.number() as cudaError_t)
}

/// The code of a result, recording an error as the thread's last error.
pub(crate) fn code(r: Result<(), Error>) -> cudaError_t {
    match r {
        Ok(()) => 0,
        Err(e) => {
            abi::record_error(&e);
            e.code().number() as cudaError_t
        }
    }
}

/// A runtime error of the C interface's own checks.
pub(crate) fn fail(code: ErrorCode, call: &'static str) -> Error {
    Error::Cuda {
        code,
        driver: None,
        call,
    }
}

fn not_supported(name: &'static str) -> cudaError_t {
    code(Err(fail(ErrorCode::NotSupported, name)))
}

/// Enters the current device and runs one driver call in it.
pub(crate) fn driver(call: &'static str, f: impl FnOnce() -> sys::CUresult) -> cudaError_t {
    code(Entered::current().and_then(|a| a.check(f(), call)))
}

/// As [`driver`], for a query: `cudaErrorNotReady` is an answer, not an error, and is not
/// recorded as the thread's last error (as libcudart).
pub(crate) fn driver_query(call: &'static str, f: impl FnOnce() -> sys::CUresult) -> cudaError_t {
    let a = match Entered::current() {
        Ok(a) => a,
        Err(e) => return code(Err(e)),
    };
    let r = f();
    if abi::code_of_driver(r) == ErrorCode::NotReady.number() {
        return ErrorCode::NotReady.number() as cudaError_t;
    }
    code(a.check(r, call))
}

/// An out-parameter the caller must supply.
pub(crate) fn out<'a, T>(p: *mut T, call: &'static str) -> Result<&'a mut T, Error> {
    // SAFETY: C callers pass either null (refused here) or a pointer to writable storage of T,
    // as the runtime's documentation of every out-parameter requires.
    unsafe { p.as_mut() }.ok_or_else(|| fail(ErrorCode::InvalidValue, call))
}

/// The driver's handle for a runtime stream: 0 is the legacy default stream, or the calling
/// thread's per-thread stream in the `_ptsz` / `_ptds` variants.
pub(crate) fn stream_of(s: cudaStream_t, per_thread: bool) -> sys::CUstream {
    if s.is_null() {
        (if per_thread { 0x2usize } else { 0x1usize }) as sys::CUstream
    } else {
        s
    }
}

/// A host address as the driver's device pointer type (unified addressing).
pub(crate) fn dptr(p: *const c_void) -> sys::CUdeviceptr {
    p as usize as sys::CUdeviceptr
}

/// An empty 2-D copy descriptor, filled in by the caller. (`mem::zeroed` is not one: the
/// driver's memory-type enumeration has no zero value.)
pub(crate) fn blank_copy_2d() -> sys::CUDA_MEMCPY2D {
    let unified = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: unified,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: unified,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: 0,
        Height: 0,
    }
}

/// An empty 3-D copy descriptor, filled in by the caller (see [`blank_copy_2d`]).
pub(crate) fn blank_copy_3d() -> sys::CUDA_MEMCPY3D {
    let unified = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
    sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: unified,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: 0,
        srcHeight: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: unified,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: 0,
        dstHeight: 0,
        WidthInBytes: 0,
        Height: 0,
        Depth: 0,
    }
}
