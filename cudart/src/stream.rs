//! Streams: created streams are the driver's, handed to C unboxed; stream 0 is the legacy
//! default stream, or the thread's per-thread stream in the `_ptsz` variants.
use cuda_runtime::abi::sys;
use cuda_runtime::ErrorCode;

use crate::{
    code, cudaError_t, cudaEvent_t, cudaStream_t, driver, driver_query, export, fail, out,
    stream_of,
};

fn create(p: *mut cudaStream_t, flags: u32, priority: i32) -> cudaError_t {
    if flags & !0x1 != 0 {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaStreamCreateWithFlags",
        )));
    }
    let p = match out(p, "cudaStreamCreate") {
        Ok(p) => p,
        Err(e) => return code(Err(e)),
    };
    let mut s: sys::CUstream = std::ptr::null_mut();
    // SAFETY: valid out-parameter, context current.
    let r = driver("cuStreamCreateWithPriority", || unsafe {
        sys::cuStreamCreateWithPriority(&mut s, flags, priority)
    });
    if r == 0 {
        *p = s;
    }
    r
}

export! {
    /// `cudaStreamCreate` (blocking).
    fn cudaStreamCreate(pStream: *mut cudaStream_t) -> cudaError_t {
        create(pStream, 0, 0)
    }
}

export! {
    /// `cudaStreamCreateWithFlags` (`cudaStreamNonBlocking` = 1).
    fn cudaStreamCreateWithFlags(pStream: *mut cudaStream_t, flags: u32) -> cudaError_t {
        create(pStream, flags, 0)
    }
}

export! {
    /// `cudaStreamCreateWithPriority`.
    fn cudaStreamCreateWithPriority(pStream: *mut cudaStream_t, flags: u32, priority: i32) -> cudaError_t {
        create(pStream, flags, priority)
    }
}

export! {
    /// `cudaStreamDestroy` (the default streams cannot be destroyed).
    fn cudaStreamDestroy(stream: cudaStream_t) -> cudaError_t {
        let raw = stream as usize;
        if raw <= 2 {
            return code(Err(fail(ErrorCode::InvalidResourceHandle, "cudaStreamDestroy")));
        }
        // SAFETY: a stream of the caller's (the driver checks the handle).
        driver("cuStreamDestroy", || unsafe { sys::cuStreamDestroy_v2(stream) })
    }
}

fn synchronize(s: cudaStream_t, pt: bool) -> cudaError_t {
    // SAFETY: a stream of the caller's, or a default stream.
    driver("cuStreamSynchronize", || unsafe {
        sys::cuStreamSynchronize(stream_of(s, pt))
    })
}

export! {
    /// `cudaStreamSynchronize`.
    fn cudaStreamSynchronize(stream: cudaStream_t) -> cudaError_t {
        synchronize(stream, false)
    }
}

export! {
    /// `cudaStreamSynchronize` with stream 0 as the per-thread stream.
    fn cudaStreamSynchronize_ptsz(stream: cudaStream_t) -> cudaError_t {
        synchronize(stream, true)
    }
}

fn query(s: cudaStream_t, pt: bool) -> cudaError_t {
    // SAFETY: as above.
    driver_query("cuStreamQuery", || unsafe {
        sys::cuStreamQuery(stream_of(s, pt))
    })
}

export! {
    /// `cudaStreamQuery` (`cudaErrorNotReady` while work is queued).
    fn cudaStreamQuery(stream: cudaStream_t) -> cudaError_t {
        query(stream, false)
    }
}

export! {
    /// `cudaStreamQuery` with stream 0 as the per-thread stream.
    fn cudaStreamQuery_ptsz(stream: cudaStream_t) -> cudaError_t {
        query(stream, true)
    }
}

fn wait_event(s: cudaStream_t, e: cudaEvent_t, flags: u32, pt: bool) -> cudaError_t {
    // SAFETY: the caller's stream and event (the driver checks them).
    driver("cuStreamWaitEvent", || unsafe {
        sys::cuStreamWaitEvent(stream_of(s, pt), e, flags)
    })
}

export! {
    /// `cudaStreamWaitEvent`.
    fn cudaStreamWaitEvent(stream: cudaStream_t, event: cudaEvent_t, flags: u32) -> cudaError_t {
        wait_event(stream, event, flags, false)
    }
}

export! {
    /// `cudaStreamWaitEvent` with stream 0 as the per-thread stream.
    fn cudaStreamWaitEvent_ptsz(stream: cudaStream_t, event: cudaEvent_t, flags: u32) -> cudaError_t {
        wait_event(stream, event, flags, true)
    }
}

/// `cudaHostFn_t`.
pub type cudaHostFn_t = Option<unsafe extern "C" fn(*mut std::ffi::c_void)>;

export! {
    /// `cudaLaunchHostFunc` (the driver's host function: same signature).
    fn cudaLaunchHostFunc(stream: cudaStream_t, func: cudaHostFn_t, userData: *mut std::ffi::c_void) -> cudaError_t {
        if func.is_none() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLaunchHostFunc")));
        }
        // SAFETY: the caller's function and data, called once by the driver; the caller's stream.
        driver("cuLaunchHostFunc", || unsafe {
            sys::cuLaunchHostFunc(stream_of(stream, false), func, userData)
        })
    }
}

export! {
    /// `cudaLaunchHostFunc` with stream 0 as the per-thread stream.
    fn cudaLaunchHostFunc_ptsz(stream: cudaStream_t, func: cudaHostFn_t, userData: *mut std::ffi::c_void) -> cudaError_t {
        if func.is_none() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLaunchHostFunc")));
        }
        // SAFETY: as above.
        driver("cuLaunchHostFunc", || unsafe {
            sys::cuLaunchHostFunc(stream_of(stream, true), func, userData)
        })
    }
}

/// `cudaStreamCallback_t`: (stream, status, user data); the driver's callback has the same
/// layout (`CUresult` and `cudaError_t` are both C ints).
pub type cudaStreamCallback_t =
    Option<unsafe extern "C" fn(cudaStream_t, cudaError_t, *mut std::ffi::c_void)>;

export! {
    /// `cudaStreamAddCallback` (flags must be 0).
    fn cudaStreamAddCallback(stream: cudaStream_t, callback: cudaStreamCallback_t, userData: *mut std::ffi::c_void, flags: u32) -> cudaError_t {
        if flags != 0 || callback.is_none() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamAddCallback")));
        }
        // SAFETY: only the driver calls it, through the C ABI, where both status types are
        // 4-byte integers; it passes `CUresult` numbers, which equal the runtime's for the
        // statuses a callback sees (measured on driver 580 by probes/driver_map.sh).
        let cb: sys::CUstreamCallback = unsafe { std::mem::transmute(callback) };
        // SAFETY: the caller's callback, data and stream.
        driver("cuStreamAddCallback", || unsafe {
            sys::cuStreamAddCallback(stream_of(stream, false), cb, userData, 0)
        })
    }
}

export! {
    /// `cudaStreamGetFlags`.
    fn cudaStreamGetFlags(hStream: cudaStream_t, flags: *mut u32) -> cudaError_t {
        code((|| {
            let p = out(flags, "cudaStreamGetFlags")?;
            let mut f = 0u32;
            let a = cuda_runtime::abi::Entered::current()?;
            // SAFETY: valid out-parameter; the caller's stream.
            a.check(unsafe { sys::cuStreamGetFlags(stream_of(hStream, false), &mut f) }, "cuStreamGetFlags")?;
            *p = f;
            Ok(())
        })())
    }
}

export! {
    /// `cudaStreamGetPriority`.
    fn cudaStreamGetPriority(hStream: cudaStream_t, priority: *mut i32) -> cudaError_t {
        code((|| {
            let p = out(priority, "cudaStreamGetPriority")?;
            let mut v = 0i32;
            let a = cuda_runtime::abi::Entered::current()?;
            // SAFETY: valid out-parameter; the caller's stream.
            a.check(unsafe { sys::cuStreamGetPriority(stream_of(hStream, false), &mut v) }, "cuStreamGetPriority")?;
            *p = v;
            Ok(())
        })())
    }
}

export! {
    /// `cudaStreamAttachMemAsync` (flags `cudaMemAttach*`, the driver's).
    fn cudaStreamAttachMemAsync(stream: cudaStream_t, devPtr: *mut std::ffi::c_void, length: usize, flags: u32) -> cudaError_t {
        // SAFETY: the caller's managed allocation and stream (the driver checks them).
        driver("cuStreamAttachMemAsync", || unsafe {
            sys::cuStreamAttachMemAsync(stream_of(stream, false), crate::dptr(devPtr), length, flags)
        })
    }
}

export! {
    /// `cudaStreamAddCallback` with stream 0 as the per-thread stream.
    fn cudaStreamAddCallback_ptsz(stream: cudaStream_t, callback: cudaStreamCallback_t, userData: *mut std::ffi::c_void, flags: u32) -> cudaError_t {
        if flags != 0 || callback.is_none() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamAddCallback")));
        }
        // SAFETY: as in `cudaStreamAddCallback`.
        let cb: sys::CUstreamCallback = unsafe { std::mem::transmute(callback) };
        // SAFETY: the caller's callback and data; the per-thread stream or the caller's.
        driver("cuStreamAddCallback", || unsafe {
            sys::cuStreamAddCallback(stream_of(stream, true), cb, userData, 0)
        })
    }
}

export! {
    /// `cudaStreamAttachMemAsync` with stream 0 as the per-thread stream.
    fn cudaStreamAttachMemAsync_ptsz(stream: cudaStream_t, devPtr: *mut std::ffi::c_void, length: usize, flags: u32) -> cudaError_t {
        // SAFETY: the caller's managed allocation and stream.
        driver("cuStreamAttachMemAsync", || unsafe {
            sys::cuStreamAttachMemAsync(stream_of(stream, true), crate::dptr(devPtr), length, flags)
        })
    }
}

export! {
    /// `cudaStreamGetFlags` with stream 0 as the per-thread stream.
    fn cudaStreamGetFlags_ptsz(hStream: cudaStream_t, flags: *mut u32) -> cudaError_t {
        if flags.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamGetFlags")));
        }
        // SAFETY: the caller's out-parameter and stream.
        driver("cuStreamGetFlags", || unsafe { sys::cuStreamGetFlags(stream_of(hStream, true), flags) })
    }
}

export! {
    /// `cudaStreamGetPriority` with stream 0 as the per-thread stream.
    fn cudaStreamGetPriority_ptsz(hStream: cudaStream_t, priority: *mut i32) -> cudaError_t {
        if priority.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamGetPriority")));
        }
        // SAFETY: the caller's out-parameter and stream.
        driver("cuStreamGetPriority", || unsafe { sys::cuStreamGetPriority(stream_of(hStream, true), priority) })
    }
}

export! {
    /// `cudaStreamGetId` with stream 0 as the per-thread stream.
    fn cudaStreamGetId_ptsz(hStream: cudaStream_t, streamId: *mut u64) -> cudaError_t {
        if streamId.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamGetId")));
        }
        // SAFETY: the caller's out-parameter and stream.
        driver("cuStreamGetId", || unsafe { sys::cuStreamGetId(stream_of(hStream, true), streamId) })
    }
}
