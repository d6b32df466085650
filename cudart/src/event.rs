//! Events: the driver's, handed to C unboxed.
use cuda_runtime::abi::sys;
use cuda_runtime::ErrorCode;

use crate::{
    code, cudaError_t, cudaEvent_t, cudaStream_t, driver, driver_query, export, fail, out,
    stream_of,
};

fn create(p: *mut cudaEvent_t, flags: u32) -> cudaError_t {
    // cudaEventDefault 0, BlockingSync 1, DisableTiming 2, Interprocess 4: the driver's.
    if flags & !0x7 != 0 {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaEventCreateWithFlags",
        )));
    }
    let p = match out(p, "cudaEventCreate") {
        Ok(p) => p,
        Err(e) => return code(Err(e)),
    };
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: valid out-parameter, context current.
    let r = driver("cuEventCreate", || unsafe {
        sys::cuEventCreate(&mut e, flags)
    });
    if r == 0 {
        *p = e;
    }
    r
}

export! {
    /// `cudaEventCreate`.
    fn cudaEventCreate(event: *mut cudaEvent_t) -> cudaError_t {
        create(event, 0)
    }
}

export! {
    /// `cudaEventCreateWithFlags`.
    fn cudaEventCreateWithFlags(event: *mut cudaEvent_t, flags: u32) -> cudaError_t {
        create(event, flags)
    }
}

fn record(e: cudaEvent_t, s: cudaStream_t, pt: bool) -> cudaError_t {
    // SAFETY: the caller's event and stream (the driver checks them).
    driver("cuEventRecord", || unsafe {
        sys::cuEventRecord(e, stream_of(s, pt))
    })
}

export! {
    /// `cudaEventRecord`.
    fn cudaEventRecord(event: cudaEvent_t, stream: cudaStream_t) -> cudaError_t {
        record(event, stream, false)
    }
}

export! {
    /// `cudaEventRecord` with stream 0 as the per-thread stream.
    fn cudaEventRecord_ptsz(event: cudaEvent_t, stream: cudaStream_t) -> cudaError_t {
        record(event, stream, true)
    }
}

export! {
    /// `cudaEventSynchronize`.
    fn cudaEventSynchronize(event: cudaEvent_t) -> cudaError_t {
        // SAFETY: the caller's event.
        driver("cuEventSynchronize", || unsafe { sys::cuEventSynchronize(event) })
    }
}

export! {
    /// `cudaEventQuery` (`cudaErrorNotReady` until it completes).
    fn cudaEventQuery(event: cudaEvent_t) -> cudaError_t {
        // SAFETY: the caller's event.
        driver_query("cuEventQuery", || unsafe { sys::cuEventQuery(event) })
    }
}

export! {
    /// `cudaEventElapsedTime` (milliseconds).
    fn cudaEventElapsedTime(ms: *mut f32, start: cudaEvent_t, end: cudaEvent_t) -> cudaError_t {
        let p = match out(ms, "cudaEventElapsedTime") {
            Ok(p) => p,
            Err(e) => return code(Err(e)),
        };
        let mut t = 0f32;
        // SAFETY: valid out-parameter; the caller's events.
        let r = driver("cuEventElapsedTime", || unsafe {
            sys::cuEventElapsedTime_v2(&mut t, start, end)
        });
        if r == 0 {
            *p = t;
        }
        r
    }
}

export! {
    /// `cudaEventDestroy`.
    fn cudaEventDestroy(event: cudaEvent_t) -> cudaError_t {
        // SAFETY: the caller's event.
        driver("cuEventDestroy", || unsafe { sys::cuEventDestroy_v2(event) })
    }
}
