//! Device, page-locked, managed and stream-ordered memory; copies and memsets. Pointers are the
//! driver's (unified addressing), handed to C unboxed: C programs own them.
use std::ffi::c_void;

use cuda_runtime::abi::sys;
use cuda_runtime::ErrorCode;

use crate::{code, cudaError_t, cudaStream_t, dptr, driver, export, fail, out, stream_of};

/// Writes an allocation's address into the caller's pointer (after a successful driver call).
fn allocate(
    ptr: *mut *mut c_void,
    call: &'static str,
    f: impl FnOnce(&mut sys::CUdeviceptr) -> sys::CUresult,
) -> cudaError_t {
    let p = match out(ptr, call) {
        Ok(p) => p,
        Err(e) => return code(Err(e)),
    };
    let mut d: sys::CUdeviceptr = 0;
    let r = driver(call, || f(&mut d));
    if r == 0 {
        *p = d as usize as *mut c_void;
    }
    r
}

export! {
    /// `cudaMalloc`. A size of 0 gives a null pointer and success, as libcudart.
    fn cudaMalloc(devPtr: *mut *mut c_void, size: usize) -> cudaError_t {
        if size == 0 {
            return code(out(devPtr, "cudaMalloc").map(|p| *p = std::ptr::null_mut()));
        }
        // SAFETY: valid out-parameter, context current (`driver`).
        allocate(devPtr, "cuMemAlloc", |d| unsafe { sys::cuMemAlloc_v2(d, size) })
    }
}

export! {
    /// `cudaFree`: null is allowed (and initialises the context, as libcudart).
    fn cudaFree(devPtr: *mut c_void) -> cudaError_t {
        if devPtr.is_null() {
            return driver("cudaFree", || sys::CUresult::CUDA_SUCCESS);
        }
        // SAFETY: the caller's allocation (the driver checks it).
        driver("cuMemFree", || unsafe { sys::cuMemFree_v2(dptr(devPtr)) })
    }
}

export! {
    /// `cudaMallocHost`: page-locked, portable to every device and mapped.
    fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> cudaError_t {
        host_alloc(ptr, size, 0)
    }
}

export! {
    /// `cudaHostAlloc` (flags as `cudaHostAlloc*`, equal to the driver's; memory is portable).
    fn cudaHostAlloc(pHost: *mut *mut c_void, size: usize, flags: u32) -> cudaError_t {
        if flags & !0x7 != 0 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaHostAlloc")));
        }
        host_alloc(pHost, size, flags)
    }
}

fn host_alloc(ptr: *mut *mut c_void, size: usize, flags: u32) -> cudaError_t {
    let p = match out(ptr, "cudaHostAlloc") {
        Ok(p) => p,
        Err(e) => return code(Err(e)),
    };
    let mut h: *mut c_void = std::ptr::null_mut();
    // Portable (0x1) and mapped (0x2) as libcudart's page-locked memory.
    // SAFETY: valid out-parameter, context current.
    let r = driver("cuMemHostAlloc", || unsafe {
        sys::cuMemHostAlloc(&mut h, size, flags | 0x1 | 0x2)
    });
    if r == 0 {
        *p = h;
        // Reported with mapped (0x2) added, as libcudart reports it (seen on the H200:
        // write-combined | portable reads 7, mapped alone 2).
        HOST_FLAGS
            .lock()
            .insert(h as usize, (size.max(1), flags | 0x2));
    }
    r
}

/// The flags each `cudaHostAlloc` / `cudaMallocHost` allocation was asked for, by base address
/// and size: the driver is given portable and mapped always, but `cudaHostGetFlags` reports
/// what the caller asked for plus mapped, as libcudart does (seen on the GPU: mapped alone reads
/// 2, write-combined and portable 7).
static HOST_FLAGS: parking_lot::Mutex<std::collections::BTreeMap<usize, (usize, u32)>> =
    parking_lot::Mutex::new(std::collections::BTreeMap::new());

/// The flags asked for the allocation holding `p`, if this library made it.
pub(crate) fn asked_host_flags(p: *const c_void) -> Option<u32> {
    let p = p as usize;
    let map = HOST_FLAGS.lock();
    let (&base, &(size, flags)) = map.range(..=p).next_back()?;
    (p - base < size).then_some(flags)
}

export! {
    /// `cudaFreeHost`.
    fn cudaFreeHost(ptr: *mut c_void) -> cudaError_t {
        // SAFETY: the caller's page-locked allocation (the driver checks it).
        let r = driver("cuMemFreeHost", || unsafe { sys::cuMemFreeHost(ptr) });
        if r == 0 {
            HOST_FLAGS.lock().remove(&(ptr as usize));
        }
        r
    }
}

export! {
    /// `cudaMallocManaged` (flags `cudaMemAttachGlobal` / `cudaMemAttachHost`, the driver's).
    fn cudaMallocManaged(devPtr: *mut *mut c_void, size: usize, flags: u32) -> cudaError_t {
        // SAFETY: valid out-parameter, context current.
        allocate(devPtr, "cuMemAllocManaged", |d| unsafe {
            sys::cuMemAllocManaged(d, size, flags)
        })
    }
}

fn malloc_async(ptr: *mut *mut c_void, size: usize, s: cudaStream_t, pt: bool) -> cudaError_t {
    // SAFETY: valid out-parameter, a stream of the caller's (the driver checks it).
    allocate(ptr, "cuMemAllocAsync", |d| unsafe {
        sys::cuMemAllocAsync(d, size, stream_of(s, pt))
    })
}

fn free_async(p: *mut c_void, s: cudaStream_t, pt: bool) -> cudaError_t {
    // SAFETY: the caller's allocation and stream (the driver checks them).
    driver("cuMemFreeAsync", || unsafe {
        sys::cuMemFreeAsync(dptr(p), stream_of(s, pt))
    })
}

export! {
    /// `cudaMallocAsync`.
    fn cudaMallocAsync(devPtr: *mut *mut c_void, size: usize, hStream: cudaStream_t) -> cudaError_t {
        malloc_async(devPtr, size, hStream, false)
    }
}

export! {
    /// `cudaMallocAsync` with stream 0 as the per-thread stream.
    fn cudaMallocAsync_ptsz(devPtr: *mut *mut c_void, size: usize, hStream: cudaStream_t) -> cudaError_t {
        malloc_async(devPtr, size, hStream, true)
    }
}

export! {
    /// `cudaFreeAsync`.
    fn cudaFreeAsync(devPtr: *mut c_void, hStream: cudaStream_t) -> cudaError_t {
        free_async(devPtr, hStream, false)
    }
}

export! {
    /// `cudaFreeAsync` with stream 0 as the per-thread stream.
    fn cudaFreeAsync_ptsz(devPtr: *mut c_void, hStream: cudaStream_t) -> cudaError_t {
        free_async(devPtr, hStream, true)
    }
}

/// `cudaMemcpyKind` values 0..=4; others are `cudaErrorInvalidMemcpyDirection`.
fn check_kind(kind: i32, call: &'static str) -> Result<(), cuda_runtime::Error> {
    if (0..=4).contains(&kind) {
        Ok(())
    } else {
        Err(fail(ErrorCode::InvalidMemcpyDirection, call))
    }
}

fn memcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: i32, pt: bool) -> cudaError_t {
    if let Err(e) = check_kind(kind, "cudaMemcpy") {
        return code(Err(e));
    }
    if n == 0 {
        return 0;
    }
    if pt {
        let s = stream_of(std::ptr::null_mut(), true);
        // SAFETY: the caller's pointers, valid for `n` bytes (the driver checks device sides).
        let r = driver("cuMemcpyAsync", || unsafe {
            sys::cuMemcpyAsync(dptr(dst), dptr(src), n, s)
        });
        if r != 0 {
            return r;
        }
        // SAFETY: the calling thread's per-thread stream.
        return driver("cuStreamSynchronize", || unsafe {
            sys::cuStreamSynchronize(s)
        });
    }
    // SAFETY: as above; synchronous on the legacy default stream, as cudaMemcpy.
    driver("cuMemcpy", || unsafe {
        sys::cuMemcpy(dptr(dst), dptr(src), n)
    })
}

export! {
    /// `cudaMemcpy` (unified addressing: the kind is checked, the driver finds the direction).
    fn cudaMemcpy(dst: *mut c_void, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        memcpy(dst, src, count, kind, false)
    }
}

export! {
    /// `cudaMemcpy` on the per-thread default stream.
    fn cudaMemcpy_ptds(dst: *mut c_void, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        memcpy(dst, src, count, kind, true)
    }
}

fn memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    n: usize,
    kind: i32,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    if let Err(e) = check_kind(kind, "cudaMemcpyAsync") {
        return code(Err(e));
    }
    if n == 0 {
        return 0;
    }
    // SAFETY: the caller's pointers and stream.
    driver("cuMemcpyAsync", || unsafe {
        sys::cuMemcpyAsync(dptr(dst), dptr(src), n, stream_of(s, pt))
    })
}

export! {
    /// `cudaMemcpyAsync`.
    fn cudaMemcpyAsync(dst: *mut c_void, src: *const c_void, count: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        memcpy_async(dst, src, count, kind, stream, false)
    }
}

export! {
    /// `cudaMemcpyAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpyAsync_ptsz(dst: *mut c_void, src: *const c_void, count: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        memcpy_async(dst, src, count, kind, stream, true)
    }
}

fn memset(p: *mut c_void, value: i32, n: usize, s: Option<cudaStream_t>, pt: bool) -> cudaError_t {
    if n == 0 {
        return 0;
    }
    match s {
        // SAFETY: the caller's allocation, valid for `n` bytes (the driver checks it).
        None if !pt => driver("cuMemsetD8", || unsafe {
            sys::cuMemsetD8_v2(dptr(p), value as u8, n)
        }),
        _ => {
            let st = stream_of(s.unwrap_or(std::ptr::null_mut()), pt);
            // SAFETY: as above, on the caller's stream.
            let r = driver("cuMemsetD8Async", || unsafe {
                sys::cuMemsetD8Async(dptr(p), value as u8, n, st)
            });
            if r != 0 || s.is_some() {
                return r;
            }
            // `cudaMemset_ptds`: synchronous on the per-thread stream.
            // SAFETY: the calling thread's per-thread stream.
            driver("cuStreamSynchronize", || unsafe {
                sys::cuStreamSynchronize(st)
            })
        }
    }
}

export! {
    /// `cudaMemset` (bytes).
    fn cudaMemset(devPtr: *mut c_void, value: i32, count: usize) -> cudaError_t {
        memset(devPtr, value, count, None, false)
    }
}

export! {
    /// `cudaMemset` on the per-thread default stream.
    fn cudaMemset_ptds(devPtr: *mut c_void, value: i32, count: usize) -> cudaError_t {
        memset(devPtr, value, count, None, true)
    }
}

export! {
    /// `cudaMemsetAsync` (bytes).
    fn cudaMemsetAsync(devPtr: *mut c_void, value: i32, count: usize, stream: cudaStream_t) -> cudaError_t {
        memset(devPtr, value, count, Some(stream), false)
    }
}

export! {
    /// `cudaMemsetAsync` with stream 0 as the per-thread stream.
    fn cudaMemsetAsync_ptsz(devPtr: *mut c_void, value: i32, count: usize, stream: cudaStream_t) -> cudaError_t {
        memset(devPtr, value, count, Some(stream), true)
    }
}

/// `cudaChannelFormatDesc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct cudaChannelFormatDesc {
    /// Bits of x.
    pub x: i32,
    /// Bits of y.
    pub y: i32,
    /// Bits of z.
    pub z: i32,
    /// Bits of w.
    pub w: i32,
    /// `cudaChannelFormatKind`.
    pub f: i32,
}

/// `cudaCreateChannelDesc`: the descriptor of the given bits and kind (returned by value).
#[no_mangle]
pub extern "C" fn cudaCreateChannelDesc(
    x: i32,
    y: i32,
    z: i32,
    w: i32,
    f: i32,
) -> cudaChannelFormatDesc {
    cudaChannelFormatDesc { x, y, z, w, f }
}
crate::symver!(cudaCreateChannelDesc);

export! {
    /// `cudaHostRegister` (flags `cudaHostRegister*`, the driver's).
    fn cudaHostRegister(ptr: *mut c_void, size: usize, flags: u32) -> cudaError_t {
        if flags & !0xf != 0 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaHostRegister")));
        }
        // SAFETY: the caller's host range (the driver checks it); context current.
        driver("cuMemHostRegister", || unsafe { sys::cuMemHostRegister_v2(ptr, size, flags) })
    }
}

export! {
    /// `cudaHostUnregister`.
    fn cudaHostUnregister(ptr: *mut c_void) -> cudaError_t {
        // SAFETY: a range the caller registered (the driver checks it).
        driver("cuMemHostUnregister", || unsafe { sys::cuMemHostUnregister(ptr) })
    }
}

export! {
    /// `cudaHostGetDevicePointer` (flags must be 0).
    fn cudaHostGetDevicePointer(pDevice: *mut *mut c_void, pHost: *mut c_void, flags: u32) -> cudaError_t {
        if flags != 0 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaHostGetDevicePointer")));
        }
        // SAFETY: valid out-parameter; the caller's page-locked pointer (checked by the driver).
        allocate(pDevice, "cuMemHostGetDevicePointer", |d| unsafe {
            sys::cuMemHostGetDevicePointer_v2(d, pHost, 0)
        })
    }
}

export! {
    /// `cudaMallocPitch` (rows padded to the driver's pitch for 16-byte elements).
    fn cudaMallocPitch(devPtr: *mut *mut c_void, pitch: *mut usize, width: usize, height: usize) -> cudaError_t {
        let pp = match out(pitch, "cudaMallocPitch") {
            Ok(p) => p,
            Err(e) => return code(Err(e)),
        };
        let mut pv = 0usize;
        // SAFETY: valid out-parameters; context current.
        let r = allocate(devPtr, "cuMemAllocPitch", |d| unsafe {
            sys::cuMemAllocPitch_v2(d, &mut pv, width, height, 16)
        });
        if r == 0 {
            *pp = pv;
        }
        r
    }
}

/// A 2-D copy between any two unified addresses (the runtime call's own parameter list).
#[allow(clippy::too_many_arguments)]
fn copy_2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
    stream: Option<(cudaStream_t, bool)>,
) -> cudaError_t {
    if let Err(e) = check_kind(kind, "cudaMemcpy2D") {
        return code(Err(e));
    }
    if width > dpitch || width > spitch {
        return code(Err(fail(ErrorCode::InvalidPitchValue, "cudaMemcpy2D")));
    }
    if width == 0 || height == 0 {
        return 0;
    }
    let mut p = crate::blank_copy_2d();
    p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
    p.srcDevice = dptr(src);
    p.srcPitch = spitch;
    p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
    p.dstDevice = dptr(dst);
    p.dstPitch = dpitch;
    p.WidthInBytes = width;
    p.Height = height;
    match stream {
        // SAFETY: the caller's memory, `height` rows of `width` bytes at the given pitches.
        None => driver("cuMemcpy2D", || unsafe { sys::cuMemcpy2DUnaligned_v2(&p) }),
        // SAFETY: as above, on the caller's stream.
        Some((s, pt)) => driver("cuMemcpy2DAsync", || unsafe {
            sys::cuMemcpy2DAsync_v2(&p, stream_of(s, pt))
        }),
    }
}

/// After a synchronous call's work was queued on the per-thread stream (`_ptds`): waits for it.
pub(crate) fn then_sync_per_thread(r: cudaError_t) -> cudaError_t {
    if r != 0 {
        return r;
    }
    let s = stream_of(std::ptr::null_mut(), true);
    // SAFETY: the calling thread's per-thread stream.
    driver("cuStreamSynchronize", || unsafe {
        sys::cuStreamSynchronize(s)
    })
}

export! {
    /// `cudaMemcpy2DAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpy2DAsync_ptsz(dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        copy_2d(dst, dpitch, src, spitch, width, height, kind, Some((stream, true)))
    }
}

export! {
    /// `cudaMemcpy2D` on the per-thread default stream.
    fn cudaMemcpy2D_ptds(dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        then_sync_per_thread(copy_2d(dst, dpitch, src, spitch, width, height, kind, Some((std::ptr::null_mut(), true))))
    }
}

export! {
    /// `cudaMemcpy2D` (bytes, pitches in bytes).
    fn cudaMemcpy2D(dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        copy_2d(dst, dpitch, src, spitch, width, height, kind, None)
    }
}

export! {
    /// `cudaMemcpy2DAsync`.
    fn cudaMemcpy2DAsync(dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        copy_2d(dst, dpitch, src, spitch, width, height, kind, Some((stream, false)))
    }
}

fn memset_2d(
    p: *mut c_void,
    pitch: usize,
    value: i32,
    width: usize,
    height: usize,
    pt: bool,
) -> cudaError_t {
    if width > pitch {
        return code(Err(fail(ErrorCode::InvalidValue, "cudaMemset2D")));
    }
    if width == 0 || height == 0 {
        return 0;
    }
    if pt {
        let s = stream_of(std::ptr::null_mut(), true);
        // SAFETY: the caller's pitched allocation, on the per-thread stream.
        return then_sync_per_thread(driver("cuMemsetD2D8Async", || unsafe {
            sys::cuMemsetD2D8Async(dptr(p), pitch, value as u8, width, height, s)
        }));
    }
    // SAFETY: the caller's pitched allocation (the driver checks it).
    driver("cuMemsetD2D8", || unsafe {
        sys::cuMemsetD2D8_v2(dptr(p), pitch, value as u8, width, height)
    })
}

export! {
    /// `cudaMemset2D` (bytes).
    fn cudaMemset2D(devPtr: *mut c_void, pitch: usize, value: i32, width: usize, height: usize) -> cudaError_t {
        memset_2d(devPtr, pitch, value, width, height, false)
    }
}

export! {
    /// `cudaMemset2D` on the per-thread default stream.
    fn cudaMemset2D_ptds(devPtr: *mut c_void, pitch: usize, value: i32, width: usize, height: usize) -> cudaError_t {
        memset_2d(devPtr, pitch, value, width, height, true)
    }
}
