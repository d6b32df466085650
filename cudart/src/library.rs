//! Libraries (context-independent modules), their kernels and globals; user objects; capture
//! information. Option arrays and out-parameters with the driver's layout are passed through.
use std::ffi::{c_char, c_void};

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::ErrorCode;

use crate::register::KERNELS;
use crate::stream::cudaHostFn_t;
use crate::{code, cudaError_t, cudaStream_t, driver, export, fail, out, stream_of};

/// `cudaLibrary_t`.
pub type cudaLibrary_t = sys::CUlibrary;

/// Kernels handed out here may be launched as `cudaKernel_t` by `cudaLaunchKernel`.
fn remember(k: sys::CUkernel) {
    use std::collections::HashMap;
    KERNELS
        .write()
        .get_or_insert_with(HashMap::new)
        .insert(k as usize, ());
}

export! {
    /// `cudaLibraryLoadData` (JIT and library options in the driver's numbering, passed through).
    fn cudaLibraryLoadData(library: *mut cudaLibrary_t, code_: *const c_void, jitOptions: *mut c_void, jitOptionsValues: *mut *mut c_void, numJitOptions: u32, libraryOptions: *mut c_void, libraryOptionValues: *mut *mut c_void, numLibraryOptions: u32) -> cudaError_t {
        code((|| {
            let l = out(library, "cudaLibraryLoadData")?;
            if code_.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaLibraryLoadData"));
            }
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's image and option arrays of the given
            // lengths, read by the driver only.
            a.check(unsafe { sys::cuLibraryLoadData(l, code_, jitOptions.cast(), jitOptionsValues, numJitOptions, libraryOptions.cast(), libraryOptionValues, numLibraryOptions) }, "cuLibraryLoadData")
        })())
    }
}

export! {
    /// `cudaLibraryLoadFromFile`.
    fn cudaLibraryLoadFromFile(library: *mut cudaLibrary_t, fileName: *const c_char, jitOptions: *mut c_void, jitOptionsValues: *mut *mut c_void, numJitOptions: u32, libraryOptions: *mut c_void, libraryOptionValues: *mut *mut c_void, numLibraryOptions: u32) -> cudaError_t {
        code((|| {
            let l = out(library, "cudaLibraryLoadFromFile")?;
            if fileName.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaLibraryLoadFromFile"));
            }
            let a = Entered::current()?;
            // SAFETY: as above, with the caller's NUL-terminated path.
            a.check(unsafe { sys::cuLibraryLoadFromFile(l, fileName, jitOptions.cast(), jitOptionsValues, numJitOptions, libraryOptions.cast(), libraryOptionValues, numLibraryOptions) }, "cuLibraryLoadFromFile")
        })())
    }
}

export! {
    /// `cudaLibraryUnload`.
    fn cudaLibraryUnload(library: cudaLibrary_t) -> cudaError_t {
        // SAFETY: the caller's library.
        driver("cuLibraryUnload", || unsafe { sys::cuLibraryUnload(library) })
    }
}

export! {
    /// `cudaLibraryGetKernel` (the kernel may then be launched with `cudaLaunchKernel`).
    fn cudaLibraryGetKernel(pKernel: *mut sys::CUkernel, library: cudaLibrary_t, name: *const c_char) -> cudaError_t {
        code((|| {
            let k = out(pKernel, "cudaLibraryGetKernel")?;
            if name.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaLibraryGetKernel"));
            }
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's library and NUL-terminated name.
            a.check(unsafe { sys::cuLibraryGetKernel(k, library, name) }, "cuLibraryGetKernel")?;
            remember(*k);
            Ok(())
        })())
    }
}

fn global(
    dptr: *mut *mut c_void,
    bytes: *mut usize,
    library: cudaLibrary_t,
    name: *const c_char,
    managed: bool,
) -> cudaError_t {
    let call = if managed {
        "cudaLibraryGetManaged"
    } else {
        "cudaLibraryGetGlobal"
    };
    code((|| {
        if name.is_null() {
            return Err(fail(ErrorCode::InvalidValue, call));
        }
        let a = Entered::current()?;
        let (mut d, mut n): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: valid out-parameters; the caller's library and NUL-terminated name.
        let r = unsafe {
            if managed {
                sys::cuLibraryGetManaged(&mut d, &mut n, library, name)
            } else {
                sys::cuLibraryGetGlobal(&mut d, &mut n, library, name)
            }
        };
        a.check(r, call)?;
        // SAFETY: C callers pass writable pointers or null (skipped).
        unsafe {
            if let Some(p) = dptr.as_mut() {
                *p = d as usize as *mut c_void;
            }
            if let Some(p) = bytes.as_mut() {
                *p = n;
            }
        }
        Ok(())
    })())
}

export! {
    /// `cudaLibraryGetGlobal`.
    fn cudaLibraryGetGlobal(dptr: *mut *mut c_void, bytes: *mut usize, library: cudaLibrary_t, name: *const c_char) -> cudaError_t {
        global(dptr, bytes, library, name, false)
    }
}

export! {
    /// `cudaLibraryGetManaged`.
    fn cudaLibraryGetManaged(dptr: *mut *mut c_void, bytes: *mut usize, library: cudaLibrary_t, name: *const c_char) -> cudaError_t {
        global(dptr, bytes, library, name, true)
    }
}

export! {
    /// `cudaLibraryGetUnifiedFunction`.
    fn cudaLibraryGetUnifiedFunction(fptr: *mut *mut c_void, library: cudaLibrary_t, symbol: *const c_char) -> cudaError_t {
        if fptr.is_null() || symbol.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLibraryGetUnifiedFunction")));
        }
        // SAFETY: the caller's out-parameter, library and NUL-terminated name.
        driver("cuLibraryGetUnifiedFunction", || unsafe { sys::cuLibraryGetUnifiedFunction(fptr, library, symbol) })
    }
}

export! {
    /// `cudaLibraryGetKernelCount`.
    fn cudaLibraryGetKernelCount(count: *mut u32, lib: cudaLibrary_t) -> cudaError_t {
        if count.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLibraryGetKernelCount")));
        }
        // SAFETY: the caller's out-parameter and library.
        driver("cuLibraryGetKernelCount", || unsafe { sys::cuLibraryGetKernelCount(count, lib) })
    }
}

export! {
    /// `cudaLibraryEnumerateKernels`.
    fn cudaLibraryEnumerateKernels(kernels: *mut sys::CUkernel, numKernels: u32, lib: cudaLibrary_t) -> cudaError_t {
        if kernels.is_null() && numKernels > 0 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLibraryEnumerateKernels")));
        }
        // SAFETY: the caller's array of `numKernels` entries and library.
        let r = driver("cuLibraryEnumerateKernels", || unsafe { sys::cuLibraryEnumerateKernels(kernels, numKernels, lib) });
        if r == 0 {
            for i in 0..numKernels as usize {
                // SAFETY: the driver filled `numKernels` entries.
                remember(unsafe { *kernels.add(i) });
            }
        }
        r
    }
}

/// `cudaUserObject_t`.
pub type cudaUserObject_t = sys::CUuserObject;

export! {
    /// `cudaUserObjectCreate` (the destructor runs on a driver thread and must not call CUDA).
    fn cudaUserObjectCreate(object_out: *mut cudaUserObject_t, ptr: *mut c_void, destroy: cudaHostFn_t, initialRefcount: u32, flags: u32) -> cudaError_t {
        code((|| {
            let o = out(object_out, "cudaUserObjectCreate")?;
            if destroy.is_none() {
                return Err(fail(ErrorCode::InvalidValue, "cudaUserObjectCreate"));
            }
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's object pointer and destructor.
            a.check(unsafe { sys::cuUserObjectCreate(o, ptr, destroy, initialRefcount, flags) }, "cuUserObjectCreate")
        })())
    }
}

export! {
    /// `cudaUserObjectRetain`.
    fn cudaUserObjectRetain(object: cudaUserObject_t, count: u32) -> cudaError_t {
        // SAFETY: the caller's user object.
        driver("cuUserObjectRetain", || unsafe { sys::cuUserObjectRetain(object, count) })
    }
}

export! {
    /// `cudaUserObjectRelease`.
    fn cudaUserObjectRelease(object: cudaUserObject_t, count: u32) -> cudaError_t {
        // SAFETY: the caller's user object.
        driver("cuUserObjectRelease", || unsafe { sys::cuUserObjectRelease(object, count) })
    }
}

export! {
    /// `cudaGraphRetainUserObject`.
    fn cudaGraphRetainUserObject(graph: sys::CUgraph, object: cudaUserObject_t, count: u32, flags: u32) -> cudaError_t {
        // SAFETY: the caller's graph and user object.
        driver("cuGraphRetainUserObject", || unsafe { sys::cuGraphRetainUserObject(graph, object, count, flags) })
    }
}

export! {
    /// `cudaGraphReleaseUserObject`.
    fn cudaGraphReleaseUserObject(graph: sys::CUgraph, object: cudaUserObject_t, count: u32) -> cudaError_t {
        // SAFETY: the caller's graph and user object.
        driver("cuGraphReleaseUserObject", || unsafe { sys::cuGraphReleaseUserObject(graph, object, count) })
    }
}

#[allow(clippy::too_many_arguments)] // The runtime call's own parameter list.
fn capture_info(
    s: cudaStream_t,
    status: *mut i32,
    id: *mut u64,
    graph: *mut sys::CUgraph,
    deps: *mut *const sys::CUgraphNode,
    edges: *mut *const c_void,
    n: *mut usize,
    pt: bool,
) -> cudaError_t {
    if status.is_null() {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaStreamGetCaptureInfo",
        )));
    }
    // SAFETY: the caller's stream and out-parameters (optional ones may be null; the status is
    // an enum the driver writes and Rust does not read).
    driver("cuStreamGetCaptureInfo", || unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            stream_of(s, pt),
            status.cast(),
            id,
            graph,
            deps,
            edges.cast(),
            n,
        )
    })
}

export! {
    /// `cudaStreamGetCaptureInfo` (13.0: with edge data).
    fn cudaStreamGetCaptureInfo(stream: cudaStream_t, captureStatus_out: *mut i32, id_out: *mut u64, graph_out: *mut sys::CUgraph, dependencies_out: *mut *const sys::CUgraphNode, edgeData_out: *mut *const c_void, numDependencies_out: *mut usize) -> cudaError_t {
        capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out, false)
    }
}

export! {
    /// `cudaStreamGetCaptureInfo` with stream 0 as the per-thread stream.
    fn cudaStreamGetCaptureInfo_ptsz(stream: cudaStream_t, captureStatus_out: *mut i32, id_out: *mut u64, graph_out: *mut sys::CUgraph, dependencies_out: *mut *const sys::CUgraphNode, edgeData_out: *mut *const c_void, numDependencies_out: *mut usize) -> cudaError_t {
        capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out, true)
    }
}
