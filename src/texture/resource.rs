//! What a texture or surface object reads (`cudaGetTextureObjectResourceDesc`,
//! `cudaGetSurfaceObjectResourceDesc`), as the driver reports it.

use std::mem::{offset_of, size_of, MaybeUninit};

use super::{ArrayFormat, SurfaceObject, TextureObject};
use crate::context::Active;
use crate::driver::sys;
use crate::error::{record, Error, Result};

/// The resource of a texture or surface object (`cudaResourceDesc`). Handles are reported as
/// the numbers they are (the objects stay owned by the crate's types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceDesc {
    /// A CUDA array (`cudaResourceTypeArray`).
    Array {
        /// The raw `CUarray` handle.
        handle: u64,
    },
    /// A mipmapped array (`cudaResourceTypeMipmappedArray`).
    MipmappedArray {
        /// The raw `CUmipmappedArray` handle.
        handle: u64,
    },
    /// Linear device memory (`cudaResourceTypeLinear`).
    Linear {
        /// Device address of the first texel.
        device_ptr: u64,
        /// Texel format.
        format: ArrayFormat,
        /// Channels per texel.
        channels: u32,
        /// Bytes.
        size_bytes: usize,
    },
    /// Pitched 2-D device memory (`cudaResourceTypePitch2D`).
    Pitch2D {
        /// Device address of the first texel.
        device_ptr: u64,
        /// Texel format.
        format: ArrayFormat,
        /// Channels per texel.
        channels: u32,
        /// Texels per row.
        width: usize,
        /// Rows.
        height: usize,
        /// Bytes from one row to the next.
        pitch_bytes: usize,
    },
}

/// Bytes of a `CUDA_RESOURCE_DESC` the driver filled, read field by field as integers (an enum
/// value the bindings lack must never be materialised as the enum).
struct RawDesc(MaybeUninit<sys::CUDA_RESOURCE_DESC>);

impl RawDesc {
    fn new() -> RawDesc {
        RawDesc(MaybeUninit::zeroed())
    }
    fn ptr(&mut self) -> *mut sys::CUDA_RESOURCE_DESC {
        self.0.as_mut_ptr()
    }
    fn read<T: Copy>(&self, offset: usize) -> T {
        assert!(offset + size_of::<T>() <= size_of::<sys::CUDA_RESOURCE_DESC>());
        // SAFETY: within the (zero-initialised, then driver-written) descriptor; `T` is a
        // plain integer type for which every bit pattern is valid.
        unsafe {
            self.0
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<T>()
                .read_unaligned()
        }
    }

    fn decode(&self) -> Result<ResourceDesc> {
        let res = offset_of!(sys::CUDA_RESOURCE_DESC, res);
        let kind: u32 = self.read(offset_of!(sys::CUDA_RESOURCE_DESC, resType));
        let format = |off: usize| -> Result<ArrayFormat> {
            let raw: u32 = self.read(res + off);
            ArrayFormat::from_raw(raw).ok_or_else(|| Error::InvalidValue {
                what: "texel format from the driver",
                value: format!("{raw:#x}"),
                reason: "not a CUarray_format this crate knows",
            })
        };
        type Lin = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_3;
        type Pitch = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_4;
        Ok(match kind {
            0 => ResourceDesc::Array {
                handle: self.read::<u64>(res),
            },
            1 => ResourceDesc::MipmappedArray {
                handle: self.read::<u64>(res),
            },
            2 => ResourceDesc::Linear {
                device_ptr: self.read(res + offset_of!(Lin, devPtr)),
                format: format(offset_of!(Lin, format))?,
                channels: self.read(res + offset_of!(Lin, numChannels)),
                size_bytes: self.read(res + offset_of!(Lin, sizeInBytes)),
            },
            3 => ResourceDesc::Pitch2D {
                device_ptr: self.read(res + offset_of!(Pitch, devPtr)),
                format: format(offset_of!(Pitch, format))?,
                channels: self.read(res + offset_of!(Pitch, numChannels)),
                width: self.read(res + offset_of!(Pitch, width)),
                height: self.read(res + offset_of!(Pitch, height)),
                pitch_bytes: self.read(res + offset_of!(Pitch, pitchInBytes)),
            },
            n => {
                return Err(Error::InvalidValue {
                    what: "resource type from the driver",
                    value: n.to_string(),
                    reason: "not a CUresourcetype this crate knows",
                })
            }
        })
    }
}

fn query(
    a: &Active,
    f: impl FnOnce(*mut sys::CUDA_RESOURCE_DESC) -> sys::CUresult,
    call: &'static str,
) -> Result<ResourceDesc> {
    let mut d = RawDesc::new();
    a.check(f(d.ptr()), call)?;
    d.decode()
}

impl TextureObject<'_> {
    /// What the texture reads (`cudaGetTextureObjectResourceDesc`), as the driver reports it.
    #[doc(alias = "cudaGetTextureObjectResourceDesc")]
    pub fn resource_desc(&self) -> Result<ResourceDesc> {
        record((|| {
            let a = crate::context::enter_handle(self.device, self.generation, "texture object")?;
            let raw = self.as_raw();
            query(
                &a,
                // SAFETY: a live texture object of the current context; the descriptor is
                // written in full by the driver.
                |p| unsafe { sys::cuTexObjectGetResourceDesc(p, raw) },
                "cuTexObjectGetResourceDesc",
            )
        })())
    }
}

impl SurfaceObject {
    /// The array the surface writes (`cudaGetSurfaceObjectResourceDesc`), as the driver
    /// reports it.
    #[doc(alias = "cudaGetSurfaceObjectResourceDesc")]
    pub fn resource_desc(&self) -> Result<ResourceDesc> {
        record((|| {
            let a = self.enter_ctx()?;
            let raw = self.as_raw();
            query(
                &a,
                // SAFETY: a live surface object of the current context; the descriptor is
                // written in full by the driver.
                |p| unsafe { sys::cuSurfObjectGetResourceDesc(p, raw) },
                "cuSurfObjectGetResourceDesc",
            )
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(*mut u8)) -> RawDesc {
        let mut d = RawDesc::new();
        f(d.ptr().cast());
        d
    }

    #[test]
    fn descriptors_decode_field_by_field() {
        type Pitch = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_4;
        let res = offset_of!(sys::CUDA_RESOURCE_DESC, res);
        let put = |p: *mut u8, off: usize, v: u64, n: usize| {
            // SAFETY: within the descriptor.
            unsafe { std::ptr::copy_nonoverlapping(v.to_le_bytes().as_ptr(), p.add(off), n) }
        };
        let d = with(|p| {
            put(p, 0, 3, 4);
            put(p, res + offset_of!(Pitch, devPtr), 0xdead_0000, 8);
            put(p, res + offset_of!(Pitch, format), 0x20, 4); // FLOAT
            put(p, res + offset_of!(Pitch, numChannels), 2, 4);
            put(p, res + offset_of!(Pitch, width), 640, 8);
            put(p, res + offset_of!(Pitch, height), 480, 8);
            put(p, res + offset_of!(Pitch, pitchInBytes), 5120, 8);
        });
        assert_eq!(
            d.decode().unwrap(),
            ResourceDesc::Pitch2D {
                device_ptr: 0xdead_0000,
                format: ArrayFormat::from_raw(0x20).unwrap(),
                channels: 2,
                width: 640,
                height: 480,
                pitch_bytes: 5120,
            }
        );
        let d = with(|p| put(p, 0, 9, 4));
        assert!(d.decode().unwrap_err().to_string().contains("9"));
        let d = with(|p| {
            put(p, 0, 2, 4);
            put(p, res + 8, 0x77, 4);
        });
        assert!(d.decode().unwrap_err().to_string().contains("0x77"));
    }
}
