//! Error queries: per-thread last error, names and strings (the crate's tables, identical to
//! libcudart 13.0's).
use std::ffi::{c_char, CStr};

use crate::{cudaError_t, export, guard};

/// NUL-terminated copies of the crate's names and strings, made once per code (C callers keep
/// the pointer forever).
fn c_text(code: cudaError_t, name: bool) -> *const c_char {
    use parking_lot::Mutex;
    use std::collections::HashMap;
    use std::ffi::CString;
    static CACHE: Mutex<Option<HashMap<(i32, bool), &'static CStr>>> = Mutex::new(None);
    let mut c = CACHE.lock();
    let map = c.get_or_insert_with(HashMap::new);
    map.entry((code, name))
        .or_insert_with(|| {
            let n = u32::try_from(code).unwrap_or(u32::MAX);
            let s = if name {
                cuda_runtime::error_name(n)
            } else {
                cuda_runtime::error_string(n)
            };
            // The crate's tables hold no NUL bytes.
            Box::leak(CString::new(s).unwrap_or_default().into_boxed_c_str())
        })
        .as_ptr()
}

export! {
    /// `cudaGetLastError`: the thread's last error, cleared.
    fn cudaGetLastError() -> cudaError_t {
        cuda_runtime::get_last_error().map_or(0, |e| e.code().number() as cudaError_t)
    }
}

export! {
    /// `cudaPeekAtLastError`: the thread's last error, kept.
    fn cudaPeekAtLastError() -> cudaError_t {
        cuda_runtime::peek_at_last_error().map_or(0, |e| e.code().number() as cudaError_t)
    }
}

/// `cudaGetErrorName`.
#[no_mangle]
pub extern "C" fn cudaGetErrorName(error: cudaError_t) -> *const c_char {
    let mut p = std::ptr::null();
    guard(|| {
        p = c_text(error, true);
        0
    });
    p
}
crate::symver!(cudaGetErrorName);

/// `cudaGetErrorString`.
#[no_mangle]
pub extern "C" fn cudaGetErrorString(error: cudaError_t) -> *const c_char {
    let mut p = std::ptr::null();
    guard(|| {
        p = c_text(error, false);
        0
    });
    p
}
crate::symver!(cudaGetErrorString);

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_runtime::ErrorCode;

    #[test]
    fn names_and_strings_are_the_runtimes() {
        let name = |c| {
            unsafe { CStr::from_ptr(cudaGetErrorName(c)) }
                .to_str()
                .unwrap()
                .to_string()
        };
        let text = |c| {
            unsafe { CStr::from_ptr(cudaGetErrorString(c)) }
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(name(0), "cudaSuccess");
        assert_eq!(name(2), "cudaErrorMemoryAllocation");
        assert_eq!(text(1), "invalid argument");
        assert_eq!(
            name(ErrorCode::NotSupported.number() as i32),
            "cudaErrorNotSupported"
        );
        // The pointer is stable (C callers keep it).
        assert_eq!(cudaGetErrorName(700), cudaGetErrorName(700));
    }
}
