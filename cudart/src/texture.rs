//! CUDA arrays, texture and surface objects at the handle level: the runtime's descriptors are
//! translated field by field into the driver's (never by reinterpreting enumerations).
use std::ffi::c_void;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};

use crate::memory::cudaChannelFormatDesc;
use crate::{code, cudaError_t, dptr, driver, export, fail, out};

/// `cudaArray_t`.
pub type cudaArray_t = sys::CUarray;

/// `struct cudaExtent` (by value: width in bytes for linear memory, elements for arrays).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaExtent {
    /// Width.
    pub width: usize,
    /// Height.
    pub height: usize,
    /// Depth.
    pub depth: usize,
}

/// The driver's format and channel count of a runtime channel description: 1, 2 or 4 channels
/// of the same width, signed / unsigned 8, 16, 32 bits or float 16, 32 bits.
pub(crate) fn format(
    d: &cudaChannelFormatDesc,
    call: &'static str,
) -> Result<(sys::CUarray_format, u32), Error> {
    use sys::CUarray_format as F;
    let bad = || fail(ErrorCode::InvalidChannelDescriptor, call);
    let bits = [d.x, d.y, d.z, d.w];
    let n = bits.iter().take_while(|b| **b != 0).count();
    if !matches!(n, 1 | 2 | 4)
        || bits[n..].iter().any(|b| *b != 0)
        || bits[..n].iter().any(|b| *b != d.x)
    {
        return Err(bad());
    }
    let f = match (d.f, d.x) {
        (0, 8) => F::CU_AD_FORMAT_SIGNED_INT8,
        (0, 16) => F::CU_AD_FORMAT_SIGNED_INT16,
        (0, 32) => F::CU_AD_FORMAT_SIGNED_INT32,
        (1, 8) => F::CU_AD_FORMAT_UNSIGNED_INT8,
        (1, 16) => F::CU_AD_FORMAT_UNSIGNED_INT16,
        (1, 32) => F::CU_AD_FORMAT_UNSIGNED_INT32,
        (2, 16) => F::CU_AD_FORMAT_HALF,
        (2, 32) => F::CU_AD_FORMAT_FLOAT,
        _ => return Err(bad()),
    };
    Ok((f, n as u32))
}

fn create_array(
    a: *mut cudaArray_t,
    d: *const cudaChannelFormatDesc,
    e: cudaExtent,
    flags: u32,
    call: &'static str,
) -> cudaError_t {
    code((|| {
        let dst = out(a, call)?;
        // SAFETY: C callers pass a readable description or null (refused).
        let d = unsafe { d.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
        if flags & !0xf != 0 {
            return Err(fail(ErrorCode::InvalidValue, call));
        }
        let (f, n) = format(d, call)?;
        let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: e.width,
            Height: e.height,
            Depth: e.depth,
            Format: f,
            NumChannels: n,
            Flags: flags,
        };
        let en = Entered::current()?;
        // SAFETY: valid out-parameter and descriptor; context current.
        en.check(
            unsafe { sys::cuArray3DCreate_v2(dst, &desc) },
            "cuArray3DCreate",
        )
    })())
}

export! {
    /// `cudaMallocArray` (a height of 0 makes a 1-D array).
    fn cudaMallocArray(array: *mut cudaArray_t, desc: *const cudaChannelFormatDesc, width: usize, height: usize, flags: u32) -> cudaError_t {
        create_array(array, desc, cudaExtent { width, height, depth: 0 }, flags, "cudaMallocArray")
    }
}

export! {
    /// `cudaMalloc3DArray` (flags `cudaArrayLayered`, `SurfaceLoadStore`, `Cubemap`,
    /// `TextureGather`: the driver's numbers).
    fn cudaMalloc3DArray(array: *mut cudaArray_t, desc: *const cudaChannelFormatDesc, extent: cudaExtent, flags: u32) -> cudaError_t {
        create_array(array, desc, extent, flags, "cudaMalloc3DArray")
    }
}

export! {
    /// `cudaFreeArray` (null is allowed).
    fn cudaFreeArray(array: cudaArray_t) -> cudaError_t {
        if array.is_null() {
            return 0;
        }
        // SAFETY: the caller's array.
        driver("cuArrayDestroy", || unsafe { sys::cuArrayDestroy(array) })
    }
}

/// A 2-D copy with an array on one side (offsets in bytes and rows, as the runtime's).
#[allow(clippy::too_many_arguments)]
fn array_copy_2d(
    array: cudaArray_t,
    to_array: bool,
    w_offset: usize,
    h_offset: usize,
    other: *const c_void,
    pitch: usize,
    width: usize,
    height: usize,
    kind: i32,
    per_thread: bool,
) -> cudaError_t {
    let call = if to_array {
        "cudaMemcpy2DToArray"
    } else {
        "cudaMemcpy2DFromArray"
    };
    if !(0..=4).contains(&kind) {
        return code(Err(fail(ErrorCode::InvalidMemcpyDirection, call)));
    }
    if width > pitch {
        return code(Err(fail(ErrorCode::InvalidPitchValue, call)));
    }
    if width == 0 || height == 0 {
        return 0;
    }
    let mut p = crate::blank_copy_2d();
    if to_array {
        p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
        p.srcDevice = dptr(other);
        p.srcPitch = pitch;
        p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
        p.dstArray = array;
        p.dstXInBytes = w_offset;
        p.dstY = h_offset;
    } else {
        p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
        p.srcArray = array;
        p.srcXInBytes = w_offset;
        p.srcY = h_offset;
        p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
        p.dstDevice = dptr(other);
        p.dstPitch = pitch;
    }
    p.WidthInBytes = width;
    p.Height = height;
    if per_thread {
        let s = crate::stream_of(std::ptr::null_mut(), true);
        // SAFETY: as below, on the per-thread stream.
        return crate::memory::then_sync_per_thread(driver("cuMemcpy2DAsync", || unsafe {
            sys::cuMemcpy2DAsync_v2(&p, s)
        }));
    }
    // SAFETY: the caller's array and memory; the driver checks the region against the array.
    driver("cuMemcpy2D", || unsafe { sys::cuMemcpy2DUnaligned_v2(&p) })
}

export! {
    /// `cudaMemcpy2DToArray` (offset `wOffset` bytes, `hOffset` rows; widths in bytes).
    fn cudaMemcpy2DToArray(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        array_copy_2d(dst, true, wOffset, hOffset, src, spitch, width, height, kind, false)
    }
}

export! {
    /// `cudaMemcpy2DToArray` on the per-thread default stream.
    fn cudaMemcpy2DToArray_ptds(dst: cudaArray_t, wOffset: usize, hOffset: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        array_copy_2d(dst, true, wOffset, hOffset, src, spitch, width, height, kind, true)
    }
}

export! {
    /// `cudaMemcpy2DFromArray`.
    fn cudaMemcpy2DFromArray(dst: *mut c_void, dpitch: usize, src: cudaArray_t, wOffset: usize, hOffset: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        array_copy_2d(src, false, wOffset, hOffset, dst, dpitch, width, height, kind, false)
    }
}

export! {
    /// `cudaMemcpy2DFromArray` on the per-thread default stream.
    fn cudaMemcpy2DFromArray_ptds(dst: *mut c_void, dpitch: usize, src: cudaArray_t, wOffset: usize, hOffset: usize, width: usize, height: usize, kind: i32) -> cudaError_t {
        array_copy_2d(src, false, wOffset, hOffset, dst, dpitch, width, height, kind, true)
    }
}

/// `struct cudaResourceDesc` (144 bytes): the resource type, then the largest union member
/// (pitch-2D: pointer, channel description, width, height, pitch), padded to 32 ints.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaResourceDesc {
    /// `cudaResourceType`: array 0, mipmapped array 1, linear 2, pitch-2D 3.
    pub resType: i32,
    /// The union, as its largest member.
    pub res: ResUnion,
    /// Must be 0.
    pub flags: u32,
}

/// The union of `cudaResourceDesc`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ResUnion {
    /// Array or mipmapped array: the handle.
    pub handle: *mut c_void,
    /// Linear memory.
    pub linear: Linear,
    /// Pitched 2-D memory.
    pub pitch2d: Pitch2D,
    /// Size of the union.
    pub reserved: [i32; 32],
}

/// `res.linear`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Linear {
    /// Device pointer.
    pub devPtr: *mut c_void,
    /// Texel format.
    pub desc: cudaChannelFormatDesc,
    /// Bytes.
    pub sizeInBytes: usize,
}

/// `res.pitch2D`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Pitch2D {
    /// Device pointer.
    pub devPtr: *mut c_void,
    /// Texel format.
    pub desc: cudaChannelFormatDesc,
    /// Width, texels.
    pub width: usize,
    /// Height, rows.
    pub height: usize,
    /// Pitch, bytes.
    pub pitchInBytes: usize,
}

/// `struct cudaTextureDesc` (72 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cudaTextureDesc {
    /// Per dimension: wrap 0, clamp 1, mirror 2, border 3.
    pub addressMode: [i32; 3],
    /// Point 0, linear 1.
    pub filterMode: i32,
    /// Element type 0, normalised float 1.
    pub readMode: i32,
    /// sRGB conversion.
    pub sRGB: i32,
    /// Border colour.
    pub borderColor: [f32; 4],
    /// Normalised coordinates.
    pub normalizedCoords: i32,
    /// Anisotropy.
    pub maxAnisotropy: u32,
    /// Mipmap filter.
    pub mipmapFilterMode: i32,
    /// Mipmap level bias.
    pub mipmapLevelBias: f32,
    /// Lowest level.
    pub minMipmapLevelClamp: f32,
    /// Highest level.
    pub maxMipmapLevelClamp: f32,
    /// Disable trilinear optimisation.
    pub disableTrilinearOptimization: i32,
    /// Seamless cubemap filtering.
    pub seamlessCubemap: i32,
}

fn address(m: i32) -> Result<sys::CUaddress_mode, Error> {
    use sys::CUaddress_mode as A;
    Ok(match m {
        0 => A::CU_TR_ADDRESS_MODE_WRAP,
        1 => A::CU_TR_ADDRESS_MODE_CLAMP,
        2 => A::CU_TR_ADDRESS_MODE_MIRROR,
        3 => A::CU_TR_ADDRESS_MODE_BORDER,
        _ => return Err(fail(ErrorCode::InvalidValue, "cudaCreateTextureObject")),
    })
}

fn filter(m: i32) -> Result<sys::CUfilter_mode, Error> {
    use sys::CUfilter_mode as M;
    Ok(match m {
        0 => M::CU_TR_FILTER_MODE_POINT,
        1 => M::CU_TR_FILTER_MODE_LINEAR,
        _ => return Err(fail(ErrorCode::InvalidValue, "cudaCreateTextureObject")),
    })
}

/// The driver's resource description of the runtime's.
fn resource(r: &cudaResourceDesc, call: &'static str) -> Result<sys::CUDA_RESOURCE_DESC, Error> {
    use sys::CUresourcetype as R;
    // SAFETY: all-zero is a valid description (array type, null handle), filled below.
    let mut d: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
    d.flags = r.flags;
    // SAFETY (each union read): the member `resType` says is in use, as the runtime's contract
    // requires of the caller; every member is plain data.
    match r.resType {
        0 => {
            d.resType = R::CU_RESOURCE_TYPE_ARRAY;
            d.res.array.hArray = unsafe { r.res.handle } as sys::CUarray;
        }
        1 => {
            d.resType = R::CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
            d.res.mipmap.hMipmappedArray = unsafe { r.res.handle } as sys::CUmipmappedArray;
        }
        2 => {
            let l = unsafe { r.res.linear };
            let (f, n) = format(&l.desc, call)?;
            d.resType = R::CU_RESOURCE_TYPE_LINEAR;
            d.res.linear.devPtr = dptr(l.devPtr);
            d.res.linear.format = f;
            d.res.linear.numChannels = n;
            d.res.linear.sizeInBytes = l.sizeInBytes;
        }
        3 => {
            let p = unsafe { r.res.pitch2d };
            let (f, n) = format(&p.desc, call)?;
            d.resType = R::CU_RESOURCE_TYPE_PITCH2D;
            d.res.pitch2D.devPtr = dptr(p.devPtr);
            d.res.pitch2D.format = f;
            d.res.pitch2D.numChannels = n;
            d.res.pitch2D.width = p.width;
            d.res.pitch2D.height = p.height;
            d.res.pitch2D.pitchInBytes = p.pitchInBytes;
        }
        _ => return Err(fail(ErrorCode::InvalidValue, call)),
    }
    Ok(d)
}

/// `cudaTextureObject_t` / `cudaSurfaceObject_t`.
pub type cudaTextureObject_t = u64;

export! {
    /// `cudaCreateTextureObject` (resource views are not supported yet: non-null is
    /// `cudaErrorNotSupported`).
    fn cudaCreateTextureObject(pTexObject: *mut cudaTextureObject_t, pResDesc: *const cudaResourceDesc, pTexDesc: *const cudaTextureDesc, pResViewDesc: *const c_void) -> cudaError_t {
        code((|| {
            let call = "cudaCreateTextureObject";
            let dst = out(pTexObject, call)?;
            if !pResViewDesc.is_null() {
                return Err(fail(ErrorCode::NotSupported, call));
            }
            // SAFETY: C callers pass readable descriptions or null (refused).
            let (r, t) = unsafe { (pResDesc.as_ref(), pTexDesc.as_ref()) };
            let (r, t) = (r.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?, t.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?);
            let res = resource(r, call)?;
            let mut flags = 0u32;
            if t.readMode == 0 {
                flags |= 0x1; // CU_TRSF_READ_AS_INTEGER
            }
            if t.normalizedCoords != 0 {
                flags |= 0x2; // CU_TRSF_NORMALIZED_COORDINATES
            }
            if t.sRGB != 0 {
                flags |= 0x10; // CU_TRSF_SRGB
            }
            if t.disableTrilinearOptimization != 0 {
                flags |= 0x20; // CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION
            }
            if t.seamlessCubemap != 0 {
                flags |= 0x40; // CU_TRSF_SEAMLESS_CUBEMAP
            }
            let tex = sys::CUDA_TEXTURE_DESC {
                addressMode: [address(t.addressMode[0])?, address(t.addressMode[1])?, address(t.addressMode[2])?],
                filterMode: filter(t.filterMode)?,
                flags,
                maxAnisotropy: t.maxAnisotropy,
                mipmapFilterMode: filter(t.mipmapFilterMode)?,
                mipmapLevelBias: t.mipmapLevelBias,
                minMipmapLevelClamp: t.minMipmapLevelClamp,
                maxMipmapLevelClamp: t.maxMipmapLevelClamp,
                borderColor: t.borderColor,
                reserved: [0; 12],
            };
            let a = Entered::current()?;
            let mut obj: sys::CUtexObject = 0;
            // SAFETY: valid out-parameter and descriptions; no view.
            a.check(unsafe { sys::cuTexObjectCreate(&mut obj, &res, &tex, std::ptr::null()) }, "cuTexObjectCreate")?;
            BORDERS.lock().insert(obj, t.borderColor);
            *dst = obj;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDestroyTextureObject` (0 is allowed).
    fn cudaDestroyTextureObject(texObject: cudaTextureObject_t) -> cudaError_t {
        if texObject == 0 {
            return 0;
        }
        // SAFETY: the caller's texture object.
        let r = driver("cuTexObjectDestroy", || unsafe { sys::cuTexObjectDestroy(texObject) });
        if r == 0 {
            BORDERS.lock().remove(&texObject);
        }
        r
    }
}

/// The border colour each live texture object was made with: the driver's description does
/// not give it back, libcudart's does (seen on the GPU), so
/// `cudaGetTextureObjectTextureDesc` takes it from here.
static BORDERS: parking_lot::Mutex<std::collections::BTreeMap<u64, [f32; 4]>> =
    parking_lot::Mutex::new(std::collections::BTreeMap::new());

/// The border colour texture object `t` was made with here, if it was.
pub(crate) fn border_of(t: cudaTextureObject_t) -> Option<[f32; 4]> {
    BORDERS.lock().get(&t).copied()
}

export! {
    /// `cudaCreateSurfaceObject` (an array resource).
    fn cudaCreateSurfaceObject(pSurfObject: *mut cudaTextureObject_t, pResDesc: *const cudaResourceDesc) -> cudaError_t {
        code((|| {
            let call = "cudaCreateSurfaceObject";
            let dst = out(pSurfObject, call)?;
            // SAFETY: a readable description or null (refused).
            let r = unsafe { pResDesc.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
            if r.resType != 0 {
                return Err(fail(ErrorCode::InvalidValue, call));
            }
            let res = resource(r, call)?;
            let a = Entered::current()?;
            let mut obj: sys::CUsurfObject = 0;
            // SAFETY: valid out-parameter and description.
            a.check(unsafe { sys::cuSurfObjectCreate(&mut obj, &res) }, "cuSurfObjectCreate")?;
            *dst = obj;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDestroySurfaceObject` (0 is allowed).
    fn cudaDestroySurfaceObject(surfObject: cudaTextureObject_t) -> cudaError_t {
        if surfObject == 0 {
            return 0;
        }
        // SAFETY: the caller's surface object.
        driver("cuSurfObjectDestroy", || unsafe { sys::cuSurfObjectDestroy(surfObject) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_headers() {
        assert_eq!(std::mem::size_of::<cudaResourceDesc>(), 144);
        assert_eq!(std::mem::size_of::<cudaTextureDesc>(), 72);
        assert_eq!(std::mem::size_of::<cudaExtent>(), 24);
        assert_eq!(std::mem::size_of::<cudaChannelFormatDesc>(), 20);
        assert_eq!(std::mem::offset_of!(cudaResourceDesc, res), 8);
        assert_eq!(std::mem::offset_of!(cudaResourceDesc, flags), 136);
        assert_eq!(std::mem::offset_of!(cudaTextureDesc, borderColor), 24);
        assert_eq!(std::mem::offset_of!(cudaTextureDesc, seamlessCubemap), 68);
    }

    #[test]
    fn channel_descriptions_map_like_the_runtime() {
        let d = |x, y, z, w, f| cudaChannelFormatDesc { x, y, z, w, f };
        let ok = |c| format(&c, "t").map(|(f, n)| (f as u32, n)).ok();
        assert_eq!(ok(d(32, 0, 0, 0, 2)), Some((0x20, 1)));
        assert_eq!(ok(d(16, 16, 16, 16, 2)), Some((0x10, 4)));
        assert_eq!(ok(d(8, 8, 0, 0, 1)), Some((0x01, 2)));
        assert_eq!(ok(d(32, 32, 0, 0, 0)), Some((0x0a, 2)));
        // Three channels, mixed widths, gaps and unknown kinds are refused.
        assert_eq!(ok(d(8, 8, 8, 0, 1)), None);
        assert_eq!(ok(d(8, 16, 0, 0, 1)), None);
        assert_eq!(ok(d(8, 0, 8, 0, 1)), None);
        assert_eq!(ok(d(8, 0, 0, 0, 2)), None);
        assert_eq!(ok(d(64, 0, 0, 0, 1)), None);
    }
}
