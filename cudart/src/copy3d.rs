//! 3-D copies and sets (`cudaMemcpy3D*`, `cudaMemset3D*`, `cudaMalloc3D`), the copies with a
//! CUDA array on one or both sides that `texture.rs` does not cover, and array queries.
//!
//! The runtime's units are kept: when a CUDA array takes part, x positions (on both sides) and
//! the extent's width count the array's elements; between linear memory, bytes (rows and slices
//! are rows and slices everywhere). The driver's descriptors count bytes, so those are scaled by
//! the array's element size.
use std::ffi::c_void;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};

use crate::memory::cudaChannelFormatDesc;
use crate::texture::{cudaArray_t, cudaExtent};
use crate::{code, cudaError_t, cudaStream_t, dptr, driver, export, fail, out, stream_of};

/// `struct cudaPos`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cudaPos {
    /// x (elements of an array, bytes of linear memory).
    pub x: usize,
    /// y (rows).
    pub y: usize,
    /// z (slices).
    pub z: usize,
}

/// `struct cudaPitchedPtr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaPitchedPtr {
    /// Start of the allocation.
    pub ptr: *mut c_void,
    /// Bytes from one row to the next.
    pub pitch: usize,
    /// Logical width of a row.
    pub xsize: usize,
    /// Rows per slice.
    pub ysize: usize,
}

/// `struct cudaMemcpy3DParms` (160 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpy3DParms {
    /// Source array, or null.
    pub srcArray: cudaArray_t,
    /// Source offset.
    pub srcPos: cudaPos,
    /// Source linear memory, when `srcArray` is null.
    pub srcPtr: cudaPitchedPtr,
    /// Destination array, or null.
    pub dstArray: cudaArray_t,
    /// Destination offset.
    pub dstPos: cudaPos,
    /// Destination linear memory, when `dstArray` is null.
    pub dstPtr: cudaPitchedPtr,
    /// Size of the copy.
    pub extent: cudaExtent,
    /// `cudaMemcpyKind`.
    pub kind: i32,
}

/// `struct cudaMemcpy3DPeerParms` (168 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemcpy3DPeerParms {
    /// Source array, or null.
    pub srcArray: cudaArray_t,
    /// Source offset.
    pub srcPos: cudaPos,
    /// Source linear memory.
    pub srcPtr: cudaPitchedPtr,
    /// Source device.
    pub srcDevice: i32,
    /// Destination array, or null.
    pub dstArray: cudaArray_t,
    /// Destination offset.
    pub dstPos: cudaPos,
    /// Destination linear memory.
    pub dstPtr: cudaPitchedPtr,
    /// Destination device.
    pub dstDevice: i32,
    /// Size of the copy.
    pub extent: cudaExtent,
}

/// Bytes per element of an array, with its driver descriptor.
fn array_desc(
    a: cudaArray_t,
    call: &'static str,
) -> Result<(sys::CUDA_ARRAY3D_DESCRIPTOR, usize), Error> {
    use sys::CUarray_format as F;
    let en = Entered::current()?;
    let mut d = sys::CUDA_ARRAY3D_DESCRIPTOR {
        Width: 0,
        Height: 0,
        Depth: 0,
        Format: sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
        NumChannels: 0,
        Flags: 0,
    };
    // SAFETY: valid out-parameter; the caller's array (the driver checks the handle).
    en.check(
        unsafe { sys::cuArray3DGetDescriptor_v2(&mut d, a) },
        "cuArray3DGetDescriptor",
    )?;
    let bytes = match d.Format {
        F::CU_AD_FORMAT_SIGNED_INT8 | F::CU_AD_FORMAT_UNSIGNED_INT8 => 1,
        F::CU_AD_FORMAT_SIGNED_INT16 | F::CU_AD_FORMAT_UNSIGNED_INT16 | F::CU_AD_FORMAT_HALF => 2,
        F::CU_AD_FORMAT_SIGNED_INT32 | F::CU_AD_FORMAT_UNSIGNED_INT32 | F::CU_AD_FORMAT_FLOAT => 4,
        _ => return Err(fail(ErrorCode::InvalidChannelDescriptor, call)),
    };
    Ok((d, bytes * d.NumChannels as usize))
}

/// One side of a 3-D copy: its driver fields, and the element size that scales the extent's
/// width when it is an array.
struct Side {
    ty: sys::CUmemorytype,
    x_bytes: usize,
    y: usize,
    z: usize,
    device: sys::CUdeviceptr,
    array: sys::CUarray,
    pitch: usize,
    height: usize,
    elem: Option<usize>,
}

fn side(
    array: cudaArray_t,
    pos: cudaPos,
    ptr: cudaPitchedPtr,
    call: &'static str,
) -> Result<Side, Error> {
    match (array.is_null(), ptr.ptr.is_null()) {
        (false, true) => {
            let (_, elem) = array_desc(array, call)?;
            let x_bytes = pos
                .x
                .checked_mul(elem)
                .ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
            Ok(Side {
                ty: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
                x_bytes,
                y: pos.y,
                z: pos.z,
                device: 0,
                array,
                pitch: 0,
                height: 0,
                elem: Some(elem),
            })
        }
        (true, false) => Ok(Side {
            ty: sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED,
            x_bytes: pos.x,
            y: pos.y,
            z: pos.z,
            device: dptr(ptr.ptr),
            array: std::ptr::null_mut(),
            pitch: ptr.pitch,
            height: ptr.ysize,
            elem: None,
        }),
        // Neither or both: the runtime requires exactly one.
        _ => Err(fail(ErrorCode::InvalidValue, call)),
    }
}

/// The driver's descriptor of a runtime 3-D copy.
fn descriptor(
    mut src: Side,
    mut dst: Side,
    extent: cudaExtent,
    call: &'static str,
) -> Result<sys::CUDA_MEMCPY3D, Error> {
    let elem = match (src.elem, dst.elem) {
        (Some(a), Some(b)) if a != b => return Err(fail(ErrorCode::InvalidValue, call)),
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => 1,
    };
    // With an array on the other side, the pointer side's x position counts the array's
    // elements too (NVIDIA's library on the H200: x = 2 on the host side of an array copy
    // started 16 bytes in for 8-byte elements, and x = 8 did not fit a row of the box).
    for s in [&mut src, &mut dst] {
        if s.elem.is_none() {
            s.x_bytes = s
                .x_bytes
                .checked_mul(elem)
                .ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
        }
    }
    let width = extent
        .width
        .checked_mul(elem)
        .ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
    for s in [&src, &dst] {
        // Invalid value, not invalid pitch, for cudaMemcpy3D (seen on the GPU; cudaMemcpy2D
        // answers invalid pitch).
        if s.elem.is_none() && width > s.pitch {
            return Err(fail(ErrorCode::InvalidValue, call));
        }
    }
    let mut p = crate::blank_copy_3d();
    p.srcMemoryType = src.ty;
    p.srcXInBytes = src.x_bytes;
    p.srcY = src.y;
    p.srcZ = src.z;
    p.srcDevice = src.device;
    p.srcArray = src.array;
    p.srcPitch = src.pitch;
    p.srcHeight = src.height;
    p.dstMemoryType = dst.ty;
    p.dstXInBytes = dst.x_bytes;
    p.dstY = dst.y;
    p.dstZ = dst.z;
    p.dstDevice = dst.device;
    p.dstArray = dst.array;
    p.dstPitch = dst.pitch;
    p.dstHeight = dst.height;
    p.WidthInBytes = width;
    p.Height = extent.height;
    p.Depth = extent.depth;
    Ok(p)
}

/// The driver's descriptor of a runtime parameter block (checked: one side each, kind, units).
pub(crate) fn params_3d(
    p: &cudaMemcpy3DParms,
    call: &'static str,
) -> Result<sys::CUDA_MEMCPY3D, Error> {
    if !(0..=4).contains(&p.kind) {
        return Err(fail(ErrorCode::InvalidMemcpyDirection, call));
    }
    let src = side(p.srcArray, p.srcPos, p.srcPtr, call)?;
    let dst = side(p.dstArray, p.dstPos, p.dstPtr, call)?;
    descriptor(src, dst, p.extent, call)
}

/// The runtime's parameter block of a driver descriptor (array sides back in elements; the
/// kind is `cudaMemcpyDefault`, the direction being the addresses').
pub(crate) fn params_of(d: &sys::CUDA_MEMCPY3D) -> Result<cudaMemcpy3DParms, Error> {
    use sys::CUmemorytype as M;
    let call = "cudaGraphMemcpyNodeGetParams";
    let elem = |a: sys::CUarray| array_desc(a, call).map(|(_, e)| e);
    let mut width_elem = 1;
    let mut side = |ty: M,
                    array: sys::CUarray,
                    x: usize,
                    y: usize,
                    z: usize,
                    host: *const c_void,
                    dev: sys::CUdeviceptr,
                    pitch: usize,
                    height: usize|
     -> Result<(cudaArray_t, cudaPos, cudaPitchedPtr), Error> {
        let none = cudaPitchedPtr {
            ptr: std::ptr::null_mut(),
            pitch: 0,
            xsize: 0,
            ysize: 0,
        };
        Ok(match ty {
            M::CU_MEMORYTYPE_ARRAY => {
                let e = elem(array)?;
                width_elem = e;
                (array, cudaPos { x: x / e, y, z }, none)
            }
            M::CU_MEMORYTYPE_HOST => (
                std::ptr::null_mut(),
                cudaPos { x, y, z },
                cudaPitchedPtr {
                    ptr: host.cast_mut(),
                    pitch,
                    xsize: d.WidthInBytes,
                    ysize: height,
                },
            ),
            _ => (
                std::ptr::null_mut(),
                cudaPos { x, y, z },
                cudaPitchedPtr {
                    ptr: dev as usize as *mut c_void,
                    pitch,
                    xsize: d.WidthInBytes,
                    ysize: height,
                },
            ),
        })
    };
    let (sa, sp, sptr) = side(
        d.srcMemoryType,
        d.srcArray,
        d.srcXInBytes,
        d.srcY,
        d.srcZ,
        d.srcHost,
        d.srcDevice,
        d.srcPitch,
        d.srcHeight,
    )?;
    let (da, dp, dptr_) = side(
        d.dstMemoryType,
        d.dstArray,
        d.dstXInBytes,
        d.dstY,
        d.dstZ,
        d.dstHost.cast_const(),
        d.dstDevice,
        d.dstPitch,
        d.dstHeight,
    )?;
    // Pointer sides' x positions back in elements when an array takes part (see `descriptor`).
    let (mut sp, mut dp) = (sp, dp);
    for (a, pos) in [(sa, &mut sp), (da, &mut dp)] {
        if a.is_null() {
            pos.x /= width_elem;
        }
    }
    Ok(cudaMemcpy3DParms {
        srcArray: sa,
        srcPos: sp,
        srcPtr: sptr,
        dstArray: da,
        dstPos: dp,
        dstPtr: dptr_,
        extent: cudaExtent {
            width: d.WidthInBytes / width_elem,
            height: d.Height,
            depth: d.Depth,
        },
        kind: 4,
    })
}

fn empty(e: cudaExtent) -> bool {
    e.width == 0 || e.height == 0 || e.depth == 0
}

/// How a copy or set is queued: synchronously on the legacy stream, on a stream, or on the
/// per-thread stream followed by a wait (`_ptds`).
#[derive(Clone, Copy)]
enum On {
    Sync,
    Stream(cudaStream_t, bool),
    PerThreadSync,
}

fn run_3d(p: &sys::CUDA_MEMCPY3D, on: On) -> cudaError_t {
    match on {
        // SAFETY: the caller's memory and arrays, described by `p` (the driver checks ranges
        // against arrays and allocations).
        On::Sync => driver("cuMemcpy3D", || unsafe { sys::cuMemcpy3D_v2(p) }),
        // SAFETY: as above, on the caller's stream.
        On::Stream(s, pt) => driver("cuMemcpy3DAsync", || unsafe {
            sys::cuMemcpy3DAsync_v2(p, stream_of(s, pt))
        }),
        On::PerThreadSync => {
            let s = stream_of(std::ptr::null_mut(), true);
            // SAFETY: as above, on the calling thread's per-thread stream.
            crate::memory::then_sync_per_thread(driver("cuMemcpy3DAsync", || unsafe {
                sys::cuMemcpy3DAsync_v2(p, s)
            }))
        }
    }
}

fn memcpy_3d(p: *const cudaMemcpy3DParms, on: On) -> cudaError_t {
    const CALL: &str = "cudaMemcpy3D";
    // SAFETY: C callers pass a readable parameter block or null (refused).
    let Some(p) = (unsafe { p.as_ref() }) else {
        return code(Err(fail(ErrorCode::InvalidValue, CALL)));
    };
    if !(0..=4).contains(&p.kind) {
        return code(Err(fail(ErrorCode::InvalidMemcpyDirection, CALL)));
    }
    let d = (|| {
        let src = side(p.srcArray, p.srcPos, p.srcPtr, CALL)?;
        let dst = side(p.dstArray, p.dstPos, p.dstPtr, CALL)?;
        descriptor(src, dst, p.extent, CALL)
    })();
    match d {
        Err(e) => code(Err(e)),
        Ok(_) if empty(p.extent) => 0,
        Ok(d) => run_3d(&d, on),
    }
}

export! {
    /// `cudaMemcpy3D`.
    fn cudaMemcpy3D(p: *const cudaMemcpy3DParms) -> cudaError_t {
        memcpy_3d(p, On::Sync)
    }
}

export! {
    /// `cudaMemcpy3D` on the per-thread default stream.
    fn cudaMemcpy3D_ptds(p: *const cudaMemcpy3DParms) -> cudaError_t {
        memcpy_3d(p, On::PerThreadSync)
    }
}

export! {
    /// `cudaMemcpy3DAsync`.
    fn cudaMemcpy3DAsync(p: *const cudaMemcpy3DParms, stream: cudaStream_t) -> cudaError_t {
        memcpy_3d(p, On::Stream(stream, false))
    }
}

export! {
    /// `cudaMemcpy3DAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpy3DAsync_ptsz(p: *const cudaMemcpy3DParms, stream: cudaStream_t) -> cudaError_t {
        memcpy_3d(p, On::Stream(stream, true))
    }
}

fn memcpy_3d_peer(p: *const cudaMemcpy3DPeerParms, on: On) -> cudaError_t {
    const CALL: &str = "cudaMemcpy3DPeer";
    // SAFETY: C callers pass a readable parameter block or null (refused).
    let Some(p) = (unsafe { p.as_ref() }) else {
        return code(Err(fail(ErrorCode::InvalidValue, CALL)));
    };
    code((|| {
        let s = Entered::device(p.srcDevice)?;
        let d = Entered::device(p.dstDevice)?;
        let src = side(p.srcArray, p.srcPos, p.srcPtr, CALL)?;
        let dst = side(p.dstArray, p.dstPos, p.dstPtr, CALL)?;
        let c = descriptor(src, dst, p.extent, CALL)?;
        if empty(p.extent) {
            return Ok(());
        }
        let q = sys::CUDA_MEMCPY3D_PEER {
            srcXInBytes: c.srcXInBytes,
            srcY: c.srcY,
            srcZ: c.srcZ,
            srcLOD: 0,
            srcMemoryType: c.srcMemoryType,
            srcHost: std::ptr::null(),
            srcDevice: c.srcDevice,
            srcArray: c.srcArray,
            srcContext: s.context(),
            srcPitch: c.srcPitch,
            srcHeight: c.srcHeight,
            dstXInBytes: c.dstXInBytes,
            dstY: c.dstY,
            dstZ: c.dstZ,
            dstLOD: 0,
            dstMemoryType: c.dstMemoryType,
            dstHost: std::ptr::null_mut(),
            dstDevice: c.dstDevice,
            dstArray: c.dstArray,
            dstContext: d.context(),
            dstPitch: c.dstPitch,
            dstHeight: c.dstHeight,
            WidthInBytes: c.WidthInBytes,
            Height: c.Height,
            Depth: c.Depth,
        };
        let a = Entered::current()?;
        // SAFETY: the caller's memory on the two devices, whose contexts are kept from a reset
        // by `s` and `d` for the call.
        let r = unsafe {
            match on {
                On::Sync => sys::cuMemcpy3DPeer(&q),
                On::Stream(st, pt) => sys::cuMemcpy3DPeerAsync(&q, stream_of(st, pt)),
                On::PerThreadSync => {
                    sys::cuMemcpy3DPeerAsync(&q, stream_of(std::ptr::null_mut(), true))
                }
            }
        };
        let _keep = (s, d);
        a.check(r, "cuMemcpy3DPeer")?;
        if let On::PerThreadSync = on {
            // SAFETY: the calling thread's per-thread stream.
            let r = unsafe { sys::cuStreamSynchronize(stream_of(std::ptr::null_mut(), true)) };
            a.check(r, "cuStreamSynchronize")?;
        }
        Ok(())
    })())
}

export! {
    /// `cudaMemcpy3DPeer`.
    fn cudaMemcpy3DPeer(p: *const cudaMemcpy3DPeerParms) -> cudaError_t {
        memcpy_3d_peer(p, On::Sync)
    }
}

export! {
    /// `cudaMemcpy3DPeer` on the per-thread default stream.
    fn cudaMemcpy3DPeer_ptds(p: *const cudaMemcpy3DPeerParms) -> cudaError_t {
        memcpy_3d_peer(p, On::PerThreadSync)
    }
}

export! {
    /// `cudaMemcpy3DPeerAsync`.
    fn cudaMemcpy3DPeerAsync(p: *const cudaMemcpy3DPeerParms, stream: cudaStream_t) -> cudaError_t {
        memcpy_3d_peer(p, On::Stream(stream, false))
    }
}

export! {
    /// `cudaMemcpy3DPeerAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpy3DPeerAsync_ptsz(p: *const cudaMemcpy3DPeerParms, stream: cudaStream_t) -> cudaError_t {
        memcpy_3d_peer(p, On::Stream(stream, true))
    }
}

export! {
    /// `cudaMalloc3D`: `depth` slices of `height` rows of `width` bytes, rows padded to the
    /// driver's pitch. An empty extent gives a null pointer.
    fn cudaMalloc3D(pitchedDevPtr: *mut cudaPitchedPtr, extent: cudaExtent) -> cudaError_t {
        code((|| {
            let o = out(pitchedDevPtr, "cudaMalloc3D")?;
            let rows = extent
                .height
                .checked_mul(extent.depth)
                .ok_or_else(|| fail(ErrorCode::MemoryAllocation, "cudaMalloc3D"))?;
            if extent.width == 0 || rows == 0 {
                *o = cudaPitchedPtr {
                    ptr: std::ptr::null_mut(),
                    pitch: 0,
                    xsize: extent.width,
                    ysize: extent.height,
                };
                return Ok(());
            }
            let en = Entered::current()?;
            let mut p: sys::CUdeviceptr = 0;
            let mut pitch = 0usize;
            // SAFETY: valid out-parameters; context current.
            en.check(
                unsafe { sys::cuMemAllocPitch_v2(&mut p, &mut pitch, extent.width, rows, 16) },
                "cuMemAllocPitch",
            )?;
            *o = cudaPitchedPtr {
                ptr: p as usize as *mut c_void,
                pitch,
                xsize: extent.width,
                ysize: extent.height,
            };
            Ok(())
        })())
    }
}

fn memset_3d(p: cudaPitchedPtr, value: i32, e: cudaExtent, on: On) -> cudaError_t {
    const CALL: &str = "cudaMemset3D";
    if e.width == 0 || e.height == 0 || e.depth == 0 {
        return 0;
    }
    if e.width > p.pitch || (e.depth > 1 && e.height > p.ysize) {
        return code(Err(fail(ErrorCode::InvalidValue, CALL)));
    }
    // Slices that follow each other without a gap are one 2-D set.
    let (slices, rows) = if e.depth == 1 || e.height == p.ysize {
        match e.height.checked_mul(e.depth) {
            Some(r) => (1, r),
            None => return code(Err(fail(ErrorCode::InvalidValue, CALL))),
        }
    } else {
        (e.depth, e.height)
    };
    let Some(slice_pitch) = p.pitch.checked_mul(p.ysize) else {
        return code(Err(fail(ErrorCode::InvalidValue, CALL)));
    };
    for z in 0..slices {
        let at = dptr(p.ptr) + (z * slice_pitch) as sys::CUdeviceptr;
        let r = match on {
            // SAFETY: the caller's pitched allocation (the driver checks the range).
            On::Sync => driver("cuMemsetD2D8", || unsafe {
                sys::cuMemsetD2D8_v2(at, p.pitch, value as u8, e.width, rows)
            }),
            // SAFETY: as above, on the caller's stream.
            On::Stream(s, pt) => driver("cuMemsetD2D8Async", || unsafe {
                sys::cuMemsetD2D8Async(at, p.pitch, value as u8, e.width, rows, stream_of(s, pt))
            }),
            // SAFETY: as above, on the calling thread's per-thread stream.
            On::PerThreadSync => driver("cuMemsetD2D8Async", || unsafe {
                sys::cuMemsetD2D8Async(
                    at,
                    p.pitch,
                    value as u8,
                    e.width,
                    rows,
                    stream_of(std::ptr::null_mut(), true),
                )
            }),
        };
        if r != 0 {
            return r;
        }
    }
    if let On::PerThreadSync = on {
        return crate::memory::then_sync_per_thread(0);
    }
    0
}

export! {
    /// `cudaMemset3D` (width in bytes).
    fn cudaMemset3D(pitchedDevPtr: cudaPitchedPtr, value: i32, extent: cudaExtent) -> cudaError_t {
        memset_3d(pitchedDevPtr, value, extent, On::Sync)
    }
}

export! {
    /// `cudaMemset3D` on the per-thread default stream.
    fn cudaMemset3D_ptds(pitchedDevPtr: cudaPitchedPtr, value: i32, extent: cudaExtent) -> cudaError_t {
        memset_3d(pitchedDevPtr, value, extent, On::PerThreadSync)
    }
}

export! {
    /// `cudaMemset3DAsync`.
    fn cudaMemset3DAsync(pitchedDevPtr: cudaPitchedPtr, value: i32, extent: cudaExtent, stream: cudaStream_t) -> cudaError_t {
        memset_3d(pitchedDevPtr, value, extent, On::Stream(stream, false))
    }
}

export! {
    /// `cudaMemset3DAsync` with stream 0 as the per-thread stream.
    fn cudaMemset3DAsync_ptsz(pitchedDevPtr: cudaPitchedPtr, value: i32, extent: cudaExtent, stream: cudaStream_t) -> cudaError_t {
        memset_3d(pitchedDevPtr, value, extent, On::Stream(stream, true))
    }
}

/// A 2-D copy with arrays or linear memory on either side, in the runtime's units of the 2-D
/// array calls: byte offsets `x` and row offsets `y` on both sides, `width` in bytes.
#[allow(clippy::too_many_arguments)]
fn copy_2d_any(
    src: (cudaArray_t, *const c_void, usize),
    src_at: (usize, usize),
    dst: (cudaArray_t, *mut c_void, usize),
    dst_at: (usize, usize),
    width: usize,
    height: usize,
    kind: i32,
    on: On,
    call: &'static str,
) -> cudaError_t {
    if !(0..=4).contains(&kind) {
        return code(Err(fail(ErrorCode::InvalidMemcpyDirection, call)));
    }
    if (src.0.is_null() && width > src.2) || (dst.0.is_null() && width > dst.2) {
        return code(Err(fail(ErrorCode::InvalidPitchValue, call)));
    }
    if width == 0 || height == 0 {
        return 0;
    }
    let mut p = crate::blank_copy_3d();
    if src.0.is_null() {
        p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
        p.srcDevice = dptr(src.1);
        p.srcPitch = src.2;
    } else {
        p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
        p.srcArray = src.0;
    }
    p.srcXInBytes = src_at.0;
    p.srcY = src_at.1;
    if dst.0.is_null() {
        p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
        p.dstDevice = dptr(dst.1);
        p.dstPitch = dst.2;
    } else {
        p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
        p.dstArray = dst.0;
    }
    p.dstXInBytes = dst_at.0;
    p.dstY = dst_at.1;
    p.WidthInBytes = width;
    p.Height = height;
    p.Depth = 1;
    run_3d(&p, on)
}

export! {
    /// `cudaMemcpy2DToArrayAsync`.
    fn cudaMemcpy2DToArrayAsync(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        copy_2d_any((std::ptr::null_mut(), src, spitch), (0, 0), (dst, std::ptr::null_mut(), 0), (wOffset, hOffset), width, height, kind, On::Stream(stream, false), "cudaMemcpy2DToArrayAsync")
    }
}

export! {
    /// `cudaMemcpy2DToArrayAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpy2DToArrayAsync_ptsz(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        copy_2d_any((std::ptr::null_mut(), src, spitch), (0, 0), (dst, std::ptr::null_mut(), 0), (wOffset, hOffset), width, height, kind, On::Stream(stream, true), "cudaMemcpy2DToArrayAsync")
    }
}

export! {
    /// `cudaMemcpy2DFromArrayAsync`.
    fn cudaMemcpy2DFromArrayAsync(dst: *mut c_void, dpitch: usize, src: cudaArray_t, wOffset: usize, hOffset: usize, width: usize, height: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        copy_2d_any((src, std::ptr::null(), 0), (wOffset, hOffset), (std::ptr::null_mut(), dst, dpitch), (0, 0), width, height, kind, On::Stream(stream, false), "cudaMemcpy2DFromArrayAsync")
    }
}

export! {
    /// `cudaMemcpy2DFromArrayAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpy2DFromArrayAsync_ptsz(dst: *mut c_void, dpitch: usize, src: cudaArray_t, wOffset: usize, hOffset: usize, width: usize, height: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        copy_2d_any((src, std::ptr::null(), 0), (wOffset, hOffset), (std::ptr::null_mut(), dst, dpitch), (0, 0), width, height, kind, On::Stream(stream, true), "cudaMemcpy2DFromArrayAsync")
    }
}

#[allow(clippy::too_many_arguments)]
fn array_to_array_2d(
    dst: cudaArray_t,
    dst_at: (usize, usize),
    src: cudaArray_t,
    src_at: (usize, usize),
    width: usize,
    height: usize,
    kind: i32,
    on: On,
) -> cudaError_t {
    const CALL: &str = "cudaMemcpy2DArrayToArray";
    if src.is_null() || dst.is_null() {
        return code(Err(fail(ErrorCode::InvalidValue, CALL)));
    }
    copy_2d_any(
        (src, std::ptr::null(), 0),
        src_at,
        (dst, std::ptr::null_mut(), 0),
        dst_at,
        width,
        height,
        kind,
        on,
        CALL,
    )
}

export! {
    /// `cudaMemcpy2DArrayToArray` (offsets and width in bytes).
    fn cudaMemcpy2DArrayToArray(dst: cudaArray_t, wOffsetDst: usize, hOffsetDst: usize, src: cudaArray_t, wOffsetSrc: usize, hOffsetSrc: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        array_to_array_2d(dst, (wOffsetDst, hOffsetDst), src, (wOffsetSrc, hOffsetSrc), width, height, kind, On::Sync)
    }
}

export! {
    /// `cudaMemcpy2DArrayToArray` on the per-thread default stream.
    fn cudaMemcpy2DArrayToArray_ptds(dst: cudaArray_t, wOffsetDst: usize, hOffsetDst: usize, src: cudaArray_t, wOffsetSrc: usize, hOffsetSrc: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        array_to_array_2d(dst, (wOffsetDst, hOffsetDst), src, (wOffsetSrc, hOffsetSrc), width, height, kind, On::PerThreadSync)
    }
}

/// The rows of a legacy linear copy of `count` bytes into or out of an array starting at byte
/// `x` of row `y`: it fills the rest of that row, then whole rows, then the head of the last
/// (the array's row is `row_bytes` long).
fn linear_runs(x: usize, y: usize, count: usize, row_bytes: usize) -> Vec<(usize, usize, usize)> {
    // (x, y, bytes) per run; a run of whole rows is split into rows by the caller's copy.
    let mut runs = Vec::new();
    let (mut x, mut y, mut left) = (x, y, count);
    while left > 0 {
        let n = left.min(row_bytes.saturating_sub(x));
        if n == 0 {
            break;
        }
        runs.push((x, y, n));
        left -= n;
        x = 0;
        y += 1;
    }
    if left > 0 {
        // Past the array's rows: the driver refuses the run.
        runs.push((x, y, left));
    }
    runs
}

/// `cudaMemcpyToArray` / `FromArray` (deprecated): `count` bytes between linear memory and the
/// array from byte `w` of row `h` on, wrapping at the end of each row.
#[allow(clippy::too_many_arguments)]
fn legacy_array_copy(
    array: cudaArray_t,
    to_array: bool,
    w: usize,
    h: usize,
    linear: *mut c_void,
    count: usize,
    kind: i32,
    on: On,
) -> cudaError_t {
    let call = if to_array {
        "cudaMemcpyToArray"
    } else {
        "cudaMemcpyFromArray"
    };
    if count == 0 {
        return if (0..=4).contains(&kind) {
            0
        } else {
            code(Err(fail(ErrorCode::InvalidMemcpyDirection, call)))
        };
    }
    let (d, elem) = match array_desc(array, call) {
        Ok(x) => x,
        Err(e) => return code(Err(e)),
    };
    let row = d.Width.saturating_mul(elem);
    let mut done = 0usize;
    for (x, y, n) in linear_runs(w, h, count, row) {
        let at = (linear as usize + done) as *mut c_void;
        let r = if to_array {
            copy_2d_any(
                (std::ptr::null_mut(), at, n),
                (0, 0),
                (array, std::ptr::null_mut(), 0),
                (x, y),
                n,
                1,
                kind,
                on,
                call,
            )
        } else {
            copy_2d_any(
                (array, std::ptr::null(), 0),
                (x, y),
                (std::ptr::null_mut(), at, n),
                (0, 0),
                n,
                1,
                kind,
                on,
                call,
            )
        };
        if r != 0 {
            return r;
        }
        done += n;
    }
    0
}

export! {
    /// `cudaMemcpyToArray` (deprecated in the runtime, still exported).
    fn cudaMemcpyToArray(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        legacy_array_copy(dst, true, wOffset, hOffset, src.cast_mut(), count, kind, On::Sync)
    }
}

export! {
    /// `cudaMemcpyToArray` on the per-thread default stream.
    fn cudaMemcpyToArray_ptds(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        legacy_array_copy(dst, true, wOffset, hOffset, src.cast_mut(), count, kind, On::PerThreadSync)
    }
}

export! {
    /// `cudaMemcpyToArrayAsync` (deprecated).
    fn cudaMemcpyToArrayAsync(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, count: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        legacy_array_copy(dst, true, wOffset, hOffset, src.cast_mut(), count, kind, On::Stream(stream, false))
    }
}

export! {
    /// `cudaMemcpyToArrayAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpyToArrayAsync_ptsz(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, count: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        legacy_array_copy(dst, true, wOffset, hOffset, src.cast_mut(), count, kind, On::Stream(stream, true))
    }
}

export! {
    /// `cudaMemcpyFromArray` (deprecated).
    fn cudaMemcpyFromArray(dst: *mut c_void, src: cudaArray_t, wOffset: usize, hOffset: usize, count: usize, kind: i32) -> cudaError_t {
        legacy_array_copy(src, false, wOffset, hOffset, dst, count, kind, On::Sync)
    }
}

export! {
    /// `cudaMemcpyFromArray` on the per-thread default stream.
    fn cudaMemcpyFromArray_ptds(dst: *mut c_void, src: cudaArray_t, wOffset: usize, hOffset: usize, count: usize, kind: i32) -> cudaError_t {
        legacy_array_copy(src, false, wOffset, hOffset, dst, count, kind, On::PerThreadSync)
    }
}

export! {
    /// `cudaMemcpyFromArrayAsync` (deprecated).
    fn cudaMemcpyFromArrayAsync(dst: *mut c_void, src: cudaArray_t, wOffset: usize, hOffset: usize, count: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        legacy_array_copy(src, false, wOffset, hOffset, dst, count, kind, On::Stream(stream, false))
    }
}

export! {
    /// `cudaMemcpyFromArrayAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpyFromArrayAsync_ptsz(dst: *mut c_void, src: cudaArray_t, wOffset: usize, hOffset: usize, count: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        legacy_array_copy(src, false, wOffset, hOffset, dst, count, kind, On::Stream(stream, true))
    }
}

/// `cudaMemcpyArrayToArray` (deprecated): `count` bytes from byte `ws` of row `hs` of `src` to
/// byte `wd` of row `hd` of `dst`, both wrapping at their row ends: each run is cut where
/// either side's row ends.
#[allow(clippy::too_many_arguments)]
fn legacy_array_to_array(
    dst: cudaArray_t,
    wd: usize,
    hd: usize,
    src: cudaArray_t,
    ws: usize,
    hs: usize,
    count: usize,
    kind: i32,
    on: On,
) -> cudaError_t {
    const CALL: &str = "cudaMemcpyArrayToArray";
    if count == 0 {
        return if (0..=4).contains(&kind) {
            0
        } else {
            code(Err(fail(ErrorCode::InvalidMemcpyDirection, CALL)))
        };
    }
    let rows = (|| -> Result<(usize, usize), Error> {
        let (sd, se) = array_desc(src, CALL)?;
        let (dd, de) = array_desc(dst, CALL)?;
        Ok((sd.Width.saturating_mul(se), dd.Width.saturating_mul(de)))
    })();
    let (srow, drow) = match rows {
        Ok(x) => x,
        Err(e) => return code(Err(e)),
    };
    let (mut sx, mut sy, mut dx, mut dy, mut left) = (ws, hs, wd, hd, count);
    while left > 0 {
        // An offset past a row's end leaves the rest as one run, which the driver refuses.
        let n = match left
            .min(srow.saturating_sub(sx))
            .min(drow.saturating_sub(dx))
        {
            0 => left,
            n => n,
        };
        let r = copy_2d_any(
            (src, std::ptr::null(), 0),
            (sx, sy),
            (dst, std::ptr::null_mut(), 0),
            (dx, dy),
            n,
            1,
            kind,
            on,
            CALL,
        );
        if r != 0 {
            return r;
        }
        left -= n;
        sx += n;
        dx += n;
        if sx >= srow {
            sx = 0;
            sy += 1;
        }
        if dx >= drow {
            dx = 0;
            dy += 1;
        }
    }
    0
}

export! {
    /// `cudaMemcpyArrayToArray` (deprecated).
    fn cudaMemcpyArrayToArray(dst: cudaArray_t, wOffsetDst: usize, hOffsetDst: usize, src: cudaArray_t, wOffsetSrc: usize, hOffsetSrc: usize, count: usize, kind: i32) -> cudaError_t {
        legacy_array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, On::Sync)
    }
}

export! {
    /// `cudaMemcpyArrayToArray` on the per-thread default stream.
    fn cudaMemcpyArrayToArray_ptds(dst: cudaArray_t, wOffsetDst: usize, hOffsetDst: usize, src: cudaArray_t, wOffsetSrc: usize, hOffsetSrc: usize, count: usize, kind: i32) -> cudaError_t {
        legacy_array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, On::PerThreadSync)
    }
}

/// The runtime's channel description of a driver array format.
fn channel_desc(d: &sys::CUDA_ARRAY3D_DESCRIPTOR) -> Option<cudaChannelFormatDesc> {
    use sys::CUarray_format as F;
    let (bits, kind) = match d.Format {
        F::CU_AD_FORMAT_SIGNED_INT8 => (8, 0),
        F::CU_AD_FORMAT_SIGNED_INT16 => (16, 0),
        F::CU_AD_FORMAT_SIGNED_INT32 => (32, 0),
        F::CU_AD_FORMAT_UNSIGNED_INT8 => (8, 1),
        F::CU_AD_FORMAT_UNSIGNED_INT16 => (16, 1),
        F::CU_AD_FORMAT_UNSIGNED_INT32 => (32, 1),
        F::CU_AD_FORMAT_HALF => (16, 2),
        F::CU_AD_FORMAT_FLOAT => (32, 2),
        _ => return None,
    };
    let n = d.NumChannels as usize;
    let ch = |i: usize| if i < n { bits } else { 0 };
    Some(cudaChannelFormatDesc {
        x: ch(0),
        y: ch(1),
        z: ch(2),
        w: ch(3),
        f: kind,
    })
}

export! {
    /// `cudaGetChannelDesc`: the texel format an array was created with.
    fn cudaGetChannelDesc(desc: *mut cudaChannelFormatDesc, array: cudaArray_t) -> cudaError_t {
        code((|| {
            let o = out(desc, "cudaGetChannelDesc")?;
            let (d, _) = array_desc(array, "cudaGetChannelDesc")?;
            *o = channel_desc(&d)
                .ok_or_else(|| fail(ErrorCode::InvalidChannelDescriptor, "cudaGetChannelDesc"))?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaArrayGetInfo`: format, extent (0 for absent dimensions) and flags of an array;
    /// each out-parameter may be null.
    fn cudaArrayGetInfo(desc: *mut cudaChannelFormatDesc, extent: *mut cudaExtent, flags: *mut u32, array: cudaArray_t) -> cudaError_t {
        code((|| {
            let (d, _) = array_desc(array, "cudaArrayGetInfo")?;
            // SAFETY: C callers pass writable out-parameters or null (skipped).
            unsafe {
                if let Some(o) = desc.as_mut() {
                    *o = channel_desc(&d).ok_or_else(|| {
                        fail(ErrorCode::InvalidChannelDescriptor, "cudaArrayGetInfo")
                    })?;
                }
                if let Some(o) = extent.as_mut() {
                    *o = cudaExtent { width: d.Width, height: d.Height, depth: d.Depth };
                }
                if let Some(o) = flags.as_mut() {
                    *o = d.Flags;
                }
            }
            Ok(())
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_are_the_headers() {
        assert_eq!(size_of::<cudaPos>(), 24);
        assert_eq!(size_of::<cudaPitchedPtr>(), 32);
        assert_eq!(size_of::<cudaMemcpy3DParms>(), 160);
        assert_eq!(offset_of!(cudaMemcpy3DParms, srcPos), 8);
        assert_eq!(offset_of!(cudaMemcpy3DParms, srcPtr), 32);
        assert_eq!(offset_of!(cudaMemcpy3DParms, dstArray), 64);
        assert_eq!(offset_of!(cudaMemcpy3DParms, dstPos), 72);
        assert_eq!(offset_of!(cudaMemcpy3DParms, dstPtr), 96);
        assert_eq!(offset_of!(cudaMemcpy3DParms, extent), 128);
        assert_eq!(offset_of!(cudaMemcpy3DParms, kind), 152);
        assert_eq!(size_of::<cudaMemcpy3DPeerParms>(), 168);
        assert_eq!(offset_of!(cudaMemcpy3DPeerParms, srcDevice), 64);
        assert_eq!(offset_of!(cudaMemcpy3DPeerParms, dstArray), 72);
        assert_eq!(offset_of!(cudaMemcpy3DPeerParms, dstDevice), 136);
        assert_eq!(offset_of!(cudaMemcpy3DPeerParms, extent), 144);
    }

    #[test]
    fn legacy_runs_wrap_at_row_ends() {
        // Random-ish starts and counts against a direct byte-by-byte model.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..500 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let row = 1 + (seed >> 40) as usize % 37;
            let x = (seed >> 20) as usize % row;
            let y = (seed >> 10) as usize % 5;
            let count = (seed >> 50) as usize % 200;
            let runs = linear_runs(x, y, count, row);
            let mut model = Vec::new();
            let (mut cx, mut cy) = (x, y);
            for _ in 0..count {
                model.push((cx, cy));
                cx += 1;
                if cx == row {
                    cx = 0;
                    cy += 1;
                }
            }
            let got: Vec<_> = runs
                .iter()
                .flat_map(|&(rx, ry, n)| (0..n).map(move |i| (rx + i, ry)))
                .collect();
            assert_eq!(got, model, "row {row} x {x} y {y} count {count}");
        }
    }

    #[test]
    fn copies_name_one_side_each() {
        let none = cudaPitchedPtr {
            ptr: std::ptr::null_mut(),
            pitch: 0,
            xsize: 0,
            ysize: 0,
        };
        // Neither an array nor a pointer.
        let e = side(std::ptr::null_mut(), cudaPos::default(), none, "t").err();
        assert_eq!(e.map(|e| e.code()), Some(ErrorCode::InvalidValue));
        // Both an array and a pointer.
        let both = cudaPitchedPtr {
            ptr: 16 as *mut c_void,
            ..none
        };
        let e = side(8 as cudaArray_t, cudaPos::default(), both, "t").err();
        assert_eq!(e.map(|e| e.code()), Some(ErrorCode::InvalidValue));
    }

    #[test]
    fn linear_copies_check_pitches() {
        let lin = |pitch| Side {
            ty: sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED,
            x_bytes: 0,
            y: 0,
            z: 0,
            device: 256,
            array: std::ptr::null_mut(),
            pitch,
            height: 4,
            elem: None,
        };
        let ext = |w| cudaExtent {
            width: w,
            height: 3,
            depth: 2,
        };
        let d = descriptor(lin(64), lin(128), ext(64), "t").unwrap();
        assert_eq!((d.WidthInBytes, d.Height, d.Depth), (64, 3, 2));
        assert_eq!((d.srcPitch, d.dstPitch, d.srcHeight), (64, 128, 4));
        let e = descriptor(lin(64), lin(128), ext(65), "t").err();
        assert_eq!(e.map(|e| e.code()), Some(ErrorCode::InvalidValue));
        assert!(empty(ext(0)) && !empty(ext(1)));
    }

    #[test]
    fn linear_parameters_round_trip() {
        // Random linear boxes: runtime block -> driver descriptor -> runtime block.
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut next = |m: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 33) as usize % m
        };
        for _ in 0..200 {
            let w = 1 + next(300);
            let (sp, dp) = (w + next(64), w + next(64));
            let p = cudaMemcpy3DParms {
                srcArray: std::ptr::null_mut(),
                srcPos: cudaPos {
                    x: next(50),
                    y: next(9),
                    z: next(4),
                },
                srcPtr: cudaPitchedPtr {
                    ptr: (4096 * (1 + next(1000))) as *mut c_void,
                    pitch: sp,
                    xsize: w,
                    ysize: 10 + next(5),
                },
                dstArray: std::ptr::null_mut(),
                dstPos: cudaPos {
                    x: next(50),
                    y: next(9),
                    z: next(4),
                },
                dstPtr: cudaPitchedPtr {
                    ptr: (4096 * (1 + next(1000))) as *mut c_void,
                    pitch: dp,
                    xsize: w,
                    ysize: 10 + next(5),
                },
                extent: cudaExtent {
                    width: w,
                    height: 1 + next(9),
                    depth: 1 + next(4),
                },
                kind: 3,
            };
            let d = params_3d(&p, "t").unwrap();
            let q = params_of(&d).unwrap();
            assert_eq!(
                (q.srcPos.x, q.srcPos.y, q.srcPos.z),
                (p.srcPos.x, p.srcPos.y, p.srcPos.z)
            );
            assert_eq!(
                (q.dstPos.x, q.dstPos.y, q.dstPos.z),
                (p.dstPos.x, p.dstPos.y, p.dstPos.z)
            );
            assert_eq!(
                (q.srcPtr.ptr, q.srcPtr.pitch, q.srcPtr.ysize),
                (p.srcPtr.ptr, sp, p.srcPtr.ysize)
            );
            assert_eq!(
                (q.dstPtr.ptr, q.dstPtr.pitch, q.dstPtr.ysize),
                (p.dstPtr.ptr, dp, p.dstPtr.ysize)
            );
            assert_eq!(
                (q.extent.width, q.extent.height, q.extent.depth),
                (w, p.extent.height, p.extent.depth)
            );
            assert_eq!(q.kind, 4);
        }
        let bad = cudaMemcpy3DParms {
            kind: 9,
            ..cudaMemcpy3DParms {
                srcArray: std::ptr::null_mut(),
                srcPos: cudaPos::default(),
                srcPtr: cudaPitchedPtr {
                    ptr: 64 as *mut c_void,
                    pitch: 8,
                    xsize: 8,
                    ysize: 1,
                },
                dstArray: std::ptr::null_mut(),
                dstPos: cudaPos::default(),
                dstPtr: cudaPitchedPtr {
                    ptr: 128 as *mut c_void,
                    pitch: 8,
                    xsize: 8,
                    ysize: 1,
                },
                extent: cudaExtent {
                    width: 8,
                    height: 1,
                    depth: 1,
                },
                kind: 1,
            }
        };
        assert_eq!(
            params_3d(&bad, "t").err().map(|e| e.code()),
            Some(ErrorCode::InvalidMemcpyDirection)
        );
    }
}
