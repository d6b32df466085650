//! CUDA arrays: `cudaMallocArray`, `cudaMalloc3DArray`, `cudaMallocMipmappedArray`,
//! `cudaGetMipmappedArrayLevel`, `cudaArrayGetInfo`, `cudaFreeArray`, and copies to and from
//! them.
//!
//! An [`Array<T>`] holds texels of type `T` ([`Texel`]: the Rust type decides the format and the
//! channel count) in the layout the texture hardware reads. Its shape ([`ArrayShape`]) is one
//! of 1-D, 2-D, 3-D, layered 1-D and 2-D, cubemap and layered cubemap; [`ArrayFlags`] add surface
//! load/store and texture gather. Every size is checked against the device's limits for the
//! kind (its `maxTexture*` / `maxSurface*` attributes) before the driver is asked.
//!
//! # Units
//!
//! Everywhere in this crate, array positions and extents count **elements of `T`** (texels) in
//! x, rows in y, and slices, layers or cubemap faces in z. (The runtime mixes units:
//! `cudaMemcpy2DToArray` takes its x offset and width in bytes, `cudaMemcpy3D` in elements when
//! an array takes part.) Copies are [`copy_3d`](crate::copy_3d) with an array as either side, or
//! the whole-array helpers on [`Array`].
//!
//! # Lifetime
//!
//! Work that uses an array (a copy, a kernel through a texture or surface object) notes its use
//! through the crate's one enqueue path, as for device buffers. Dropping an array never waits:
//! the driver's `cuArrayDestroy` waits for the whole device (measured: 200 ms behind an
//! unrelated kernel, as `cudaFreeArray` does), so the array joins the crate's cache of arrays
//! once the work that used it is done (mipmapped arrays are destroyed by the next
//! synchronising call of the crate once that work is done and the device is idle). Texture and surface objects keep their array
//! alive; a mipmap level keeps its mipmapped array alive.

use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::{Arc, OnceLock};

use super::device::Alloc;
use super::pitched::{copy_3d_impl, Copy3D, Extent, HostPitched, HostPitchedMut};
use super::{DeviceRead, DeviceWrite};
use crate::context::{self, Active, DeviceState};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};
use crate::queue;
use crate::stream::Stream;
use crate::texture::format::{ArrayFormat, ChannelDesc, Texel};

bitflags::bitflags! {
    /// Flags of a CUDA array (`cudaMalloc3DArray` flags). The layered and cubemap flags are
    /// part of the [`ArrayShape`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ArrayFlags: u32 {
        /// Surface objects may read and write the array (`cudaArraySurfaceLoadStore`). Sizes
        /// are then also checked against the device's `maxSurface*` limits.
        const SURFACE_LOAD_STORE = 0x02;
        /// Textures may gather from it (`tex2Dgather`; `cudaArrayTextureGather`). 2-D arrays
        /// only.
        const TEXTURE_GATHER = 0x08;
    }
}

/// The runtime's `cudaArrayLayered`.
const LAYERED: u32 = 0x01;
/// The runtime's `cudaArrayCubemap`.
const CUBEMAP: u32 = 0x04;

/// The shape of a CUDA array, in texels (and layers, faces).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrayShape {
    /// A 1-D array (`cudaMallocArray` with height 0).
    D1 {
        /// Texels.
        width: usize,
    },
    /// A 2-D array.
    D2 {
        /// Texels per row.
        width: usize,
        /// Rows.
        height: usize,
    },
    /// A 3-D array.
    D3 {
        /// Texels per row.
        width: usize,
        /// Rows per slice.
        height: usize,
        /// Slices.
        depth: usize,
    },
    /// A layered 1-D array (`cudaArrayLayered`, height 0): `layers` 1-D layers.
    Layered1D {
        /// Texels per layer.
        width: usize,
        /// Layers.
        layers: usize,
    },
    /// A layered 2-D array (`cudaArrayLayered`).
    Layered2D {
        /// Texels per row.
        width: usize,
        /// Rows per layer.
        height: usize,
        /// Layers.
        layers: usize,
    },
    /// A cubemap (`cudaArrayCubemap`): six square faces of `width` by `width` texels, in the
    /// order +x, -x, +y, -y, +z, -z.
    Cubemap {
        /// Texels per face row (= rows per face).
        width: usize,
    },
    /// A layered cubemap (`cudaArrayCubemap | cudaArrayLayered`): `cubes` cubemaps, face
    /// `6 * cube + face`.
    LayeredCubemap {
        /// Texels per face row (= rows per face).
        width: usize,
        /// Cubemaps.
        cubes: usize,
    },
}

impl ArrayShape {
    /// The extent copies see: texels, rows (1 for 1-D kinds) and slices, layers or faces.
    pub fn extent(&self) -> Extent {
        match *self {
            ArrayShape::D1 { width } => Extent::new(width, 1, 1),
            ArrayShape::D2 { width, height } => Extent::new(width, height, 1),
            ArrayShape::D3 {
                width,
                height,
                depth,
            } => Extent::new(width, height, depth),
            ArrayShape::Layered1D { width, layers } => Extent::new(width, 1, layers),
            ArrayShape::Layered2D {
                width,
                height,
                layers,
            } => Extent::new(width, height, layers),
            ArrayShape::Cubemap { width } => Extent::new(width, width, 6),
            ArrayShape::LayeredCubemap { width, cubes } => {
                Extent::new(width, width, cubes.saturating_mul(6))
            }
        }
    }

    /// The runtime's extent and layered/cubemap flags for this shape (`cudaExtent` of
    /// `cudaMalloc3DArray`, 0 for absent dimensions).
    pub fn raw(&self) -> (Extent, u32) {
        match *self {
            ArrayShape::D1 { width } => (Extent::new(width, 0, 0), 0),
            ArrayShape::D2 { width, height } => (Extent::new(width, height, 0), 0),
            ArrayShape::D3 {
                width,
                height,
                depth,
            } => (Extent::new(width, height, depth), 0),
            ArrayShape::Layered1D { width, layers } => (Extent::new(width, 0, layers), LAYERED),
            ArrayShape::Layered2D {
                width,
                height,
                layers,
            } => (Extent::new(width, height, layers), LAYERED),
            ArrayShape::Cubemap { width } => (Extent::new(width, width, 6), CUBEMAP),
            ArrayShape::LayeredCubemap { width, cubes } => (
                Extent::new(width, width, cubes.saturating_mul(6)),
                CUBEMAP | LAYERED,
            ),
        }
    }

    /// The shape of a runtime extent with its layered/cubemap flags, as `cudaArrayGetInfo`
    /// reports them.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for combinations that are no array (a cubemap that is not
    /// square with 6 faces, a 3-D extent with a zero height...).
    pub fn from_raw(e: Extent, flags: u32) -> Result<ArrayShape> {
        let bad = |reason| Error::InvalidValue {
            what: "array extent and flags",
            value: format!("{e:?}, flags {flags:#x}"),
            reason,
        };
        let (w, h, d) = (e.width, e.height, e.depth);
        Ok(match (flags & (LAYERED | CUBEMAP), h, d) {
            (0, 0, 0) => ArrayShape::D1 { width: w },
            (0, h, 0) => ArrayShape::D2 {
                width: w,
                height: h,
            },
            (0, 0, _) => return Err(bad("a 3-D extent needs a height")),
            (0, h, d) => ArrayShape::D3 {
                width: w,
                height: h,
                depth: d,
            },
            (LAYERED, 0, l) => ArrayShape::Layered1D {
                width: w,
                layers: l,
            },
            (LAYERED, h, l) => ArrayShape::Layered2D {
                width: w,
                height: h,
                layers: l,
            },
            (CUBEMAP, h, 6) if h == w => ArrayShape::Cubemap { width: w },
            (f, h, d) if f == CUBEMAP | LAYERED && h == w && d % 6 == 0 => {
                ArrayShape::LayeredCubemap {
                    width: w,
                    cubes: d / 6,
                }
            }
            _ => return Err(bad("a cubemap is square with 6 faces per cube")),
        })
    }

    fn name(&self) -> &'static str {
        match self {
            ArrayShape::D1 { .. } => "1-D array",
            ArrayShape::D2 { .. } => "2-D array",
            ArrayShape::D3 { .. } => "3-D array",
            ArrayShape::Layered1D { .. } => "layered 1-D array",
            ArrayShape::Layered2D { .. } => "layered 2-D array",
            ArrayShape::Cubemap { .. } => "cubemap array",
            ArrayShape::LayeredCubemap { .. } => "layered cubemap array",
        }
    }

    /// The shape of mipmap level `level` of an array of this shape: each dimension halved
    /// `level` times, at least 1; layers and faces kept.
    pub fn level(&self, level: u32) -> ArrayShape {
        let h = |v: usize| v.checked_shr(level).unwrap_or(0).max(1);
        match *self {
            ArrayShape::D1 { width } => ArrayShape::D1 { width: h(width) },
            ArrayShape::D2 { width, height } => ArrayShape::D2 {
                width: h(width),
                height: h(height),
            },
            ArrayShape::D3 {
                width,
                height,
                depth,
            } => ArrayShape::D3 {
                width: h(width),
                height: h(height),
                depth: h(depth),
            },
            ArrayShape::Layered1D { width, layers } => ArrayShape::Layered1D {
                width: h(width),
                layers,
            },
            ArrayShape::Layered2D {
                width,
                height,
                layers,
            } => ArrayShape::Layered2D {
                width: h(width),
                height: h(height),
                layers,
            },
            ArrayShape::Cubemap { width } => ArrayShape::Cubemap { width: h(width) },
            ArrayShape::LayeredCubemap { width, cubes } => ArrayShape::LayeredCubemap {
                width: h(width),
                cubes,
            },
        }
    }

    /// The most mipmap levels an array of this shape has: `1 + floor(log2(largest
    /// dimension))`, layers and faces not counted.
    pub fn max_levels(&self) -> u32 {
        let e = self.extent();
        let largest = match self {
            ArrayShape::D1 { .. } | ArrayShape::Layered1D { .. } => e.width,
            ArrayShape::D2 { .. }
            | ArrayShape::Layered2D { .. }
            | ArrayShape::Cubemap { .. }
            | ArrayShape::LayeredCubemap { .. } => e.width.max(e.height),
            ArrayShape::D3 { .. } => e.width.max(e.height).max(e.depth),
        };
        usize::BITS - largest.max(1).leading_zeros()
    }
}

/// The device's limits for arrays, textures and surfaces (its `maxTexture*` and `maxSurface*`
/// attributes), read once per device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TexLimits {
    pub tex1d: usize,
    pub tex2d: [usize; 2],
    pub tex3d: [usize; 3],
    pub tex3d_alt: [usize; 3],
    pub tex1d_layered: [usize; 2],
    pub tex2d_layered: [usize; 3],
    pub cubemap: usize,
    pub cubemap_layered: [usize; 2],
    pub gather: [usize; 2],
    pub tex1d_mipmapped: usize,
    pub tex2d_mipmapped: [usize; 2],
    pub surf1d: usize,
    pub surf2d: [usize; 2],
    pub surf3d: [usize; 3],
    pub surf1d_layered: [usize; 2],
    pub surf2d_layered: [usize; 3],
    pub surf_cubemap: usize,
    pub surf_cubemap_layered: [usize; 2],
    /// `textureAlignment`, bytes.
    pub texture_alignment: usize,
    /// `texturePitchAlignment`, bytes.
    pub pitch_alignment: usize,
    /// `maxTexture2DLinear`: width, height (texels) and pitch (bytes).
    pub tex2d_linear: [usize; 3],
}

impl TexLimits {
    fn read(dev: &DeviceState) -> Result<TexLimits> {
        use sys::CUdevice_attribute::*;
        let g = |a| dev.attribute(a).map(|v| v as usize);
        Ok(TexLimits {
            tex1d: g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH)?,
            tex2d: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT)?,
            ],
            tex3d: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH)?,
            ],
            tex3d_alt: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE)?,
            ],
            tex1d_layered: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS)?,
            ],
            tex2d_layered: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS)?,
            ],
            cubemap: g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH)?,
            cubemap_layered: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS)?,
            ],
            gather: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT)?,
            ],
            tex1d_mipmapped: g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH)?,
            tex2d_mipmapped: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT)?,
            ],
            surf1d: g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH)?,
            surf2d: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT)?,
            ],
            surf3d: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH)?,
            ],
            surf1d_layered: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS)?,
            ],
            surf2d_layered: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS)?,
            ],
            surf_cubemap: g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH)?,
            surf_cubemap_layered: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS)?,
            ],
            texture_alignment: g(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT)?,
            pitch_alignment: g(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)?,
            tex2d_linear: [
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT)?,
                g(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH)?,
            ],
        })
    }

    /// The limits of the entered device, cached.
    pub(crate) fn of(a: &Active) -> Result<TexLimits> {
        const CACHED: usize = 64;
        static CACHE: [OnceLock<TexLimits>; CACHED] = [const { OnceLock::new() }; CACHED];
        let slot = CACHE.get(a.dev.ordinal as usize);
        if let Some(l) = slot.and_then(|s| s.get()) {
            return Ok(*l);
        }
        let l = TexLimits::read(a.dev)?;
        Ok(slot.map_or(l, |s| *s.get_or_init(|| l)))
    }

    /// The H100's figures (as measured on the project's GPU machine), for unit tests.
    #[cfg(test)]
    pub(crate) const H100: TexLimits = TexLimits {
        tex1d: 131072,
        tex2d: [131072, 65536],
        tex3d: [16384, 16384, 16384],
        tex3d_alt: [8192, 8192, 32768],
        tex1d_layered: [32768, 2048],
        tex2d_layered: [32768, 32768, 2048],
        cubemap: 32768,
        cubemap_layered: [32768, 2046],
        gather: [32768, 32768],
        tex1d_mipmapped: 32768,
        tex2d_mipmapped: [32768, 32768],
        surf1d: 32768,
        surf2d: [131072, 65536],
        surf3d: [16384, 16384, 16384],
        surf1d_layered: [32768, 2048],
        surf2d_layered: [32768, 32768, 2048],
        surf_cubemap: 32768,
        surf_cubemap_layered: [32768, 2046],
        texture_alignment: 512,
        pitch_alignment: 32,
        tex2d_linear: [131072, 65000, 2097120],
    };
}

fn limit(what: &'static str, value: usize, max: usize, name: &'static str) -> Result<()> {
    if value > max {
        return Err(Error::SizeLimit {
            what,
            value,
            limit: max,
            limit_name: name,
        });
    }
    Ok(())
}

/// Checks an array's shape and flags against the device's limits (the table of
/// `cudaMalloc3DArray`), and returns the driver's descriptor extent and flags.
pub(crate) fn check_shape(
    shape: ArrayShape,
    flags: ArrayFlags,
    mipmapped: bool,
    l: &TexLimits,
) -> Result<(Extent, u32)> {
    let unknown = flags.bits() & !ArrayFlags::all().bits();
    if unknown != 0 {
        return Err(Error::InvalidFlags {
            call: "cudaMalloc3DArray",
            flags: flags.bits(),
            allowed: ArrayFlags::all().bits(),
        });
    }
    let e = shape.extent();
    if e.width == 0 || e.height == 0 || e.depth == 0 {
        return Err(Error::InvalidValue {
            what: shape.name(),
            value: format!("{shape:?}"),
            reason: "every dimension, layer count and cube count must be at least 1",
        });
    }
    let gather = flags.contains(ArrayFlags::TEXTURE_GATHER);
    if gather && (mipmapped || !matches!(shape, ArrayShape::D2 { .. })) {
        return Err(Error::InvalidValue {
            what: "ArrayFlags::TEXTURE_GATHER",
            value: format!("{shape:?}{}", if mipmapped { ", mipmapped" } else { "" }),
            reason: "texture gather is for 2-D arrays only (not mipmapped)",
        });
    }
    let surf = flags.contains(ArrayFlags::SURFACE_LOAD_STORE);
    match shape {
        ArrayShape::D1 { width } => {
            if mipmapped {
                limit(
                    "mipmapped 1-D array width",
                    width,
                    l.tex1d_mipmapped,
                    "cudaDevAttrMaxTexture1DMipmappedWidth",
                )?;
            }
            limit(
                "1-D array width",
                width,
                l.tex1d,
                "cudaDevAttrMaxTexture1DWidth",
            )?;
            if surf {
                limit(
                    "1-D surface array width",
                    width,
                    l.surf1d,
                    "cudaDevAttrMaxSurface1DWidth",
                )?;
            }
        }
        ArrayShape::D2 { width, height } => {
            if gather {
                limit(
                    "2-D gather array width",
                    width,
                    l.gather[0],
                    "cudaDevAttrMaxTexture2DGatherWidth",
                )?;
                limit(
                    "2-D gather array height",
                    height,
                    l.gather[1],
                    "cudaDevAttrMaxTexture2DGatherHeight",
                )?;
            }
            if mipmapped {
                limit(
                    "mipmapped 2-D array width",
                    width,
                    l.tex2d_mipmapped[0],
                    "cudaDevAttrMaxTexture2DMipmappedWidth",
                )?;
                limit(
                    "mipmapped 2-D array height",
                    height,
                    l.tex2d_mipmapped[1],
                    "cudaDevAttrMaxTexture2DMipmappedHeight",
                )?;
            }
            limit(
                "2-D array width",
                width,
                l.tex2d[0],
                "cudaDevAttrMaxTexture2DWidth",
            )?;
            limit(
                "2-D array height",
                height,
                l.tex2d[1],
                "cudaDevAttrMaxTexture2DHeight",
            )?;
            if surf {
                limit(
                    "2-D surface array width",
                    width,
                    l.surf2d[0],
                    "cudaDevAttrMaxSurface2DWidth",
                )?;
                limit(
                    "2-D surface array height",
                    height,
                    l.surf2d[1],
                    "cudaDevAttrMaxSurface2DHeight",
                )?;
            }
        }
        ArrayShape::D3 {
            width,
            height,
            depth,
        } => {
            let d = [width, height, depth];
            let fits = |m: [usize; 3]| d.iter().zip(m).all(|(&v, m)| v <= m);
            if !fits(l.tex3d) && !fits(l.tex3d_alt) {
                // Reported against the primary limits (the alternate ones trade width and
                // height for depth).
                limit(
                    "3-D array width",
                    width,
                    l.tex3d[0],
                    "cudaDevAttrMaxTexture3DWidth",
                )?;
                limit(
                    "3-D array height",
                    height,
                    l.tex3d[1],
                    "cudaDevAttrMaxTexture3DHeight",
                )?;
                limit(
                    "3-D array depth (beyond the alternate limits too)",
                    depth,
                    l.tex3d[2],
                    "cudaDevAttrMaxTexture3DDepth",
                )?;
                // Within the primary limits in every dimension but out of the alternate ones
                // cannot happen (then it fits the primary ones).
            }
            if surf {
                limit(
                    "3-D surface array width",
                    width,
                    l.surf3d[0],
                    "cudaDevAttrMaxSurface3DWidth",
                )?;
                limit(
                    "3-D surface array height",
                    height,
                    l.surf3d[1],
                    "cudaDevAttrMaxSurface3DHeight",
                )?;
                limit(
                    "3-D surface array depth",
                    depth,
                    l.surf3d[2],
                    "cudaDevAttrMaxSurface3DDepth",
                )?;
            }
        }
        ArrayShape::Layered1D { width, layers } => {
            limit(
                "layered 1-D array width",
                width,
                l.tex1d_layered[0],
                "cudaDevAttrMaxTexture1DLayeredWidth",
            )?;
            limit(
                "layered 1-D array layers",
                layers,
                l.tex1d_layered[1],
                "cudaDevAttrMaxTexture1DLayeredLayers",
            )?;
            if surf {
                limit(
                    "layered 1-D surface array width",
                    width,
                    l.surf1d_layered[0],
                    "cudaDevAttrMaxSurface1DLayeredWidth",
                )?;
                limit(
                    "layered 1-D surface array layers",
                    layers,
                    l.surf1d_layered[1],
                    "cudaDevAttrMaxSurface1DLayeredLayers",
                )?;
            }
        }
        ArrayShape::Layered2D {
            width,
            height,
            layers,
        } => {
            limit(
                "layered 2-D array width",
                width,
                l.tex2d_layered[0],
                "cudaDevAttrMaxTexture2DLayeredWidth",
            )?;
            limit(
                "layered 2-D array height",
                height,
                l.tex2d_layered[1],
                "cudaDevAttrMaxTexture2DLayeredHeight",
            )?;
            limit(
                "layered 2-D array layers",
                layers,
                l.tex2d_layered[2],
                "cudaDevAttrMaxTexture2DLayeredLayers",
            )?;
            if surf {
                limit(
                    "layered 2-D surface array width",
                    width,
                    l.surf2d_layered[0],
                    "cudaDevAttrMaxSurface2DLayeredWidth",
                )?;
                limit(
                    "layered 2-D surface array height",
                    height,
                    l.surf2d_layered[1],
                    "cudaDevAttrMaxSurface2DLayeredHeight",
                )?;
                limit(
                    "layered 2-D surface array layers",
                    layers,
                    l.surf2d_layered[2],
                    "cudaDevAttrMaxSurface2DLayeredLayers",
                )?;
            }
        }
        ArrayShape::Cubemap { width } => {
            limit(
                "cubemap array width",
                width,
                l.cubemap,
                "cudaDevAttrMaxTextureCubemapWidth",
            )?;
            if surf {
                limit(
                    "cubemap surface array width",
                    width,
                    l.surf_cubemap,
                    "cudaDevAttrMaxSurfaceCubemapWidth",
                )?;
            }
        }
        ArrayShape::LayeredCubemap { width, .. } => {
            let layers = e.depth;
            limit(
                "layered cubemap array width",
                width,
                l.cubemap_layered[0],
                "cudaDevAttrMaxTextureCubemapLayeredWidth",
            )?;
            limit(
                "layered cubemap array layers (6 per cube)",
                layers,
                l.cubemap_layered[1],
                "cudaDevAttrMaxTextureCubemapLayeredLayers",
            )?;
            if surf {
                limit(
                    "layered cubemap surface array width",
                    width,
                    l.surf_cubemap_layered[0],
                    "cudaDevAttrMaxSurfaceCubemapLayeredWidth",
                )?;
                limit(
                    "layered cubemap surface array layers (6 per cube)",
                    layers,
                    l.surf_cubemap_layered[1],
                    "cudaDevAttrMaxSurfaceCubemapLayeredLayers",
                )?;
            }
        }
    }
    let (raw, kind_flags) = shape.raw();
    Ok((raw, kind_flags | flags.bits()))
}

/// `CUDA_ARRAY3D_DESCRIPTOR` with its format read as a number (a newer driver's format must
/// never become an invalid Rust enum).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct Array3DDesc {
    width: usize,
    height: usize,
    depth: usize,
    format: u32,
    channels: u32,
    flags: u32,
}

const _: () = assert!(
    size_of::<Array3DDesc>() == size_of::<sys::CUDA_ARRAY3D_DESCRIPTOR>()
        && std::mem::align_of::<Array3DDesc>()
            == std::mem::align_of::<sys::CUDA_ARRAY3D_DESCRIPTOR>()
);

/// `cuArray3DGetDescriptor` of a live array of the current context.
fn read_desc(a: &Active, raw: sys::CUarray) -> Result<Array3DDesc> {
    let mut d = Array3DDesc::default();
    // SAFETY: `raw` is a live array of the current context; `Array3DDesc` has the layout of
    // `CUDA_ARRAY3D_DESCRIPTOR` (asserted above) with the enum field as a `u32`, so any value
    // the driver writes is valid.
    a.check(
        unsafe {
            sys::cuArray3DGetDescriptor_v2(
                (&mut d as *mut Array3DDesc).cast::<sys::CUDA_ARRAY3D_DESCRIPTOR>(),
                raw,
            )
        },
        "cuArray3DGetDescriptor",
    )?;
    Ok(d)
}

/// What `cudaArrayGetInfo` reports of an array, as the driver describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayInfo {
    /// The texel format (`cudaChannelFormatDesc`).
    pub desc: ChannelDesc,
    /// The extent in the runtime's convention: 0 for absent dimensions; layers or faces in
    /// `depth` for layered and cubemap arrays.
    pub extent: Extent,
    /// The runtime's flags (`cudaArrayLayered` 0x1, `cudaArraySurfaceLoadStore` 0x2,
    /// `cudaArrayCubemap` 0x4, `cudaArrayTextureGather` 0x8, ...).
    pub flags: u32,
}

/// The array behind [`Array`] handles, shared with texture and surface objects. (Public in a
/// private module: unnameable outside the crate.)
#[derive(Debug)]
pub struct ArrayInner {
    raw: Raw<sys::CUarray_st>,
    /// Notes the uses of the array by queued work (an allocation of no bytes: never freed).
    pub(crate) track: Alloc,
    pub(crate) format: ArrayFormat,
    pub(crate) channels: u32,
    pub(crate) shape: ArrayShape,
    /// The runtime's flags, layered and cubemap included.
    pub(crate) flags: u32,
    /// For a mipmap level: its mipmapped array, which owns the memory.
    parent: Option<Arc<MipmappedInner>>,
    /// For an array made by [`Array::new`]: what it was made with, for the crate's cache of
    /// arrays, which it joins when dropped.
    cache_key: Option<crate::cache::ArrayKey>,
}

impl ArrayInner {
    pub(crate) fn raw(&self) -> sys::CUarray {
        self.raw.0
    }
    pub(crate) fn device(&self) -> i32 {
        self.track.device
    }
    pub(crate) fn generation(&self) -> u64 {
        self.track.generation
    }
}

impl Drop for ArrayInner {
    fn drop(&mut self) {
        let (device, generation) = (self.track.device, self.track.generation);
        let waits = self.track.uses.take_points();
        if let Some(parent) = self.parent.take() {
            // A level: its memory is the mipmapped array's, kept until the level's uses are
            // done.
            if !waits.is_empty() {
                queue::defer_free(
                    device,
                    generation,
                    waits,
                    "releasing a mipmap level",
                    |_| {
                        drop(parent);
                        Ok(())
                    },
                );
            }
            return;
        }
        let raw = self.raw;
        if let Some(key) = self
            .cache_key
            .filter(|_| crate::cache::caches_arrays(device))
        {
            // To the cache of arrays once its uses are done: `cuArrayDestroy` waits for the
            // whole device.
            crate::cache::give_back_array(device, generation, key, raw, waits);
            return;
        }
        // Always in the background, even with no use pending: `cuArrayDestroy` waits for the
        // whole device.
        queue::defer_free_blocking(
            device,
            generation,
            waits,
            "destroying a CUDA array",
            move |a| {
                // After a reset the array died with its context.
                let Some(a) = a else { return Ok(()) };
                // SAFETY: a live array of this context, not a mipmap level; every use of it
                // (copies, kernels through textures and surfaces, which also keep it alive) is
                // done.
                a.check(unsafe { sys::cuArrayDestroy(raw.get()) }, "cuArrayDestroy")
            },
        );
    }
}

/// A CUDA array of texels of type `T` (`cudaArray_t`), made by `cudaMallocArray` /
/// `cudaMalloc3DArray`, or a level of a [`MipmappedArray`].
///
/// It holds texels in the layout the texture hardware reads. Its shape ([`ArrayShape`]) is one
/// of 1-D, 2-D, 3-D, layered 1-D and 2-D, cubemap and layered cubemap; [`ArrayFlags`] add
/// surface load/store and texture gather. Every size is checked against the device's limits for
/// the kind (its `maxTexture*` / `maxSurface*` attributes) before the driver is asked.
///
/// # Units
///
/// Everywhere in this crate, array positions and extents count **elements of `T`** (texels) in
/// x, rows in y, and slices, layers or cubemap faces in z. (The runtime mixes units:
/// `cudaMemcpy2DToArray` takes its x offset and width in bytes, `cudaMemcpy3D` in elements when
/// an array takes part.) Copies are [`copy_3d`](crate::copy_3d) / [`copy_3d_async`](crate::copy_3d_async)
/// with an array as either side (`cudaMemcpy2DToArray`, `cudaMemcpy2DFromArray`,
/// `cudaMemcpy2DArrayToArray`, `cudaMemcpy3D` with arrays, and their `Async` forms), or the
/// whole-array helpers below.
///
/// # Lifetime
///
/// Work that uses an array (a copy, a kernel through a texture or surface object) notes its use
/// through the crate's one enqueue path, as for device buffers. Dropping an array never waits:
/// the driver's `cuArrayDestroy` waits for the whole device (measured: 200 ms behind an
/// unrelated kernel, as `cudaFreeArray` does), so the array joins the crate's cache of arrays
/// once the work that used it is done, and a later array of the same descriptor reuses it
/// (`cudaFreeArray`; see [`Device::release_cached_memory`](crate::Device::release_cached_memory)).
/// Texture and surface objects keep their array alive; a mipmap level keeps its mipmapped array
/// alive.
///
/// ```no_run
/// use cuda_runtime::{Array, ArrayFlags};
/// # fn main() -> cuda_runtime::Result<()> {
/// let (w, h) = (64, 32);
/// let image: Vec<[u8; 4]> = (0..w * h).map(|i| [i as u8, 0, 0, 255]).collect();
/// let mut arr = Array::<[u8; 4]>::new_2d(w, h, ArrayFlags::empty())?;
/// arr.copy_from_host(&image)?;
/// assert_eq!(arr.to_vec()?, image);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Array<T: Texel> {
    pub(crate) inner: Arc<ArrayInner>,
    _t: PhantomData<T>,
}

/// An array of the crate's cache made with the same descriptor, or a new one; returns its key
/// in the cache too.
fn create_array(
    a: &Active,
    extent: Extent,
    flags: u32,
    format: ArrayFormat,
    channels: u32,
) -> Result<(sys::CUarray, crate::cache::ArrayKey)> {
    let key = crate::cache::ArrayKey {
        width: extent.width,
        height: extent.height,
        depth: extent.depth,
        format: format.to_sys() as u32,
        channels,
        flags,
    };
    if let Some(raw) = crate::cache::take_array(a, &key) {
        return Ok((raw, key));
    }
    let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
        Width: extent.width,
        Height: extent.height,
        Depth: extent.depth,
        Format: format.to_sys(),
        NumChannels: channels,
        Flags: flags,
    };
    let mut raw: sys::CUarray = std::ptr::null_mut();
    queue::alloc_retry(a, || {
        // SAFETY: the context is current; valid descriptor (checked against the device's
        // limits) and out-parameter.
        a.check(
            unsafe { sys::cuArray3DCreate_v2(&mut raw, &desc) },
            "cuArray3DCreate",
        )
    })?;
    Ok((raw, key))
}

impl<T: Texel> Array<T> {
    /// Allocates an array of `shape` on the current device (`cudaMalloc3DArray`; the 1-D and
    /// 2-D shapes are `cudaMallocArray`'s). The contents are unspecified (any bit pattern is a
    /// valid `T`).
    ///
    /// # Errors
    /// [`Error::SizeLimit`] naming the dimension, its value and the device's limit for the
    /// kind (and its surface or gather limits when those flags are set);
    /// [`Error::InvalidValue`] for a zero dimension or gather on another kind than 2-D;
    /// `cudaErrorMemoryAllocation` when the device is out of memory.
    #[doc(alias = "cudaMalloc3DArray")]
    #[doc(alias = "cudaMallocArray")]
    pub fn new(shape: ArrayShape, flags: ArrayFlags) -> Result<Array<T>> {
        record((|| {
            let a = context::enter_current()?;
            let (extent, raw_flags) = check_shape(shape, flags, false, &TexLimits::of(&a)?)?;
            let (raw, key) = create_array(&a, extent, raw_flags, T::FORMAT, T::CHANNELS)?;
            Ok(Array::wrap(ArrayInner {
                raw: Raw(raw),
                track: Alloc::plain(0, 0, a.dev.ordinal, a.generation()),
                format: T::FORMAT,
                channels: T::CHANNELS,
                shape,
                flags: raw_flags,
                parent: None,
                cache_key: Some(key),
            }))
        })())
    }

    fn wrap(inner: ArrayInner) -> Array<T> {
        Array {
            inner: Arc::new(inner),
            _t: PhantomData,
        }
    }

    /// A 1-D array of `width` texels (`cudaMallocArray` with height 0).
    pub fn new_1d(width: usize, flags: ArrayFlags) -> Result<Array<T>> {
        Self::new(ArrayShape::D1 { width }, flags)
    }

    /// A 2-D array (`cudaMallocArray`).
    pub fn new_2d(width: usize, height: usize, flags: ArrayFlags) -> Result<Array<T>> {
        Self::new(ArrayShape::D2 { width, height }, flags)
    }

    /// A 3-D array (`cudaMalloc3DArray`).
    pub fn new_3d(extent: Extent, flags: ArrayFlags) -> Result<Array<T>> {
        Self::new(
            ArrayShape::D3 {
                width: extent.width,
                height: extent.height,
                depth: extent.depth,
            },
            flags,
        )
    }

    /// A layered 1-D array (`cudaMalloc3DArray` with `cudaArrayLayered`).
    pub fn new_layered_1d(width: usize, layers: usize, flags: ArrayFlags) -> Result<Array<T>> {
        Self::new(ArrayShape::Layered1D { width, layers }, flags)
    }

    /// A layered 2-D array (`cudaMalloc3DArray` with `cudaArrayLayered`).
    pub fn new_layered_2d(
        width: usize,
        height: usize,
        layers: usize,
        flags: ArrayFlags,
    ) -> Result<Array<T>> {
        Self::new(
            ArrayShape::Layered2D {
                width,
                height,
                layers,
            },
            flags,
        )
    }

    /// A cubemap of six `width` x `width` faces (`cudaMalloc3DArray` with `cudaArrayCubemap`).
    pub fn new_cubemap(width: usize, flags: ArrayFlags) -> Result<Array<T>> {
        Self::new(ArrayShape::Cubemap { width }, flags)
    }

    /// `cubes` cubemaps (`cudaArrayCubemap | cudaArrayLayered`).
    pub fn new_layered_cubemap(width: usize, cubes: usize, flags: ArrayFlags) -> Result<Array<T>> {
        Self::new(ArrayShape::LayeredCubemap { width, cubes }, flags)
    }

    /// The shape.
    pub fn shape(&self) -> ArrayShape {
        self.inner.shape
    }

    /// The extent copies see (texels, rows, and slices, layers or faces; see
    /// [`ArrayShape::extent`]).
    pub fn extent(&self) -> Extent {
        self.inner.shape.extent()
    }

    /// The number of texels (every layer and face included).
    pub fn len(&self) -> usize {
        let e = self.extent();
        e.width * e.height * e.depth
    }

    /// Whether the array holds no texel (never: every dimension is at least 1).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The flags it was made with (surface load/store, texture gather).
    pub fn flags(&self) -> ArrayFlags {
        ArrayFlags::from_bits_truncate(self.inner.flags)
    }

    /// The texel format (`cudaGetChannelDesc`, from the type: no driver call).
    #[doc(alias = "cudaGetChannelDesc")]
    pub fn channel_desc(&self) -> ChannelDesc {
        ChannelDesc::of::<T>()
    }

    /// The driver's description of the array (`cudaArrayGetInfo`).
    ///
    /// # Errors
    /// [`Error::ContextDestroyed`] after a reset of its device.
    #[doc(alias = "cudaArrayGetInfo")]
    pub fn info(&self) -> Result<ArrayInfo> {
        record((|| {
            let a = context::enter_handle(self.inner.device(), self.inner.generation(), "array")?;
            let d = read_desc(&a, self.inner.raw())?;
            let format = ArrayFormat::from_raw(d.format).ok_or_else(|| Error::InvalidValue {
                what: "array format reported by the driver",
                value: format!("{:#x}", d.format),
                reason: "not a format this crate knows",
            })?;
            Ok(ArrayInfo {
                desc: ChannelDesc::from_format(format, d.channels),
                extent: Extent::new(d.width, d.height, d.depth),
                flags: d.flags,
            })
        })())
    }

    /// The raw handle (`CUarray`, the runtime's `cudaArray_t`).
    pub fn as_raw(&self) -> sys::CUarray {
        self.inner.raw()
    }

    /// The device the array is on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.inner.device())
    }

    fn whole(&self) -> Copy3D {
        Copy3D::new(self.extent())
    }

    /// Copies `src` (every texel, row by row, layer by layer) into the array (`cudaMemcpy3D`;
    /// for 2-D arrays `cudaMemcpy2DToArray` with a dense source). Blocks until done.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `src` does not have [`len`](Self::len) texels.
    #[doc(alias = "cudaMemcpy2DToArray")]
    #[doc(alias = "cudaMemcpyToArray")]
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.host_to_array(src, None)
    }

    /// As [`copy_from_host`](Self::copy_from_host) on `stream` (`cudaMemcpy2DToArrayAsync`);
    /// returns once `src` has been read.
    #[doc(alias = "cudaMemcpy2DToArrayAsync")]
    pub fn copy_from_host_async(&mut self, src: &[T], stream: &Stream) -> Result<()> {
        self.host_to_array(src, Some(stream))
    }

    fn host_to_array(&mut self, src: &[T], stream: Option<&Stream>) -> Result<()> {
        record((|| {
            self.check_len(src.len(), "Array::copy_from_host")?;
            let e = self.extent();
            let side = HostPitched::new(src, e.width, e.height)?;
            copy_3d_impl::<T>(&*self, &side, &self.whole(), stream)
        })())
    }

    /// Copies the whole array into `dst` (row by row, layer by layer) (`cudaMemcpy3D`;
    /// `cudaMemcpy2DFromArray`). Blocks until done.
    #[doc(alias = "cudaMemcpy2DFromArray")]
    #[doc(alias = "cudaMemcpyFromArray")]
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.array_to_host(dst, None)
    }

    /// As [`copy_to_host`](Self::copy_to_host) on `stream` (`cudaMemcpy2DFromArrayAsync`);
    /// returns once `dst` holds the data.
    #[doc(alias = "cudaMemcpy2DFromArrayAsync")]
    pub fn copy_to_host_async(&self, dst: &mut [T], stream: &Stream) -> Result<()> {
        self.array_to_host(dst, Some(stream))
    }

    fn array_to_host(&self, dst: &mut [T], stream: Option<&Stream>) -> Result<()> {
        record((|| {
            self.check_len(dst.len(), "Array::copy_to_host")?;
            let e = self.extent();
            let side = HostPitchedMut::new(dst, e.width, e.height)?;
            copy_3d_impl::<T>(&side, self, &self.whole(), stream)
        })())
    }

    /// The whole array in a new `Vec` (`cudaMemcpy3D`, array to host).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len()];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Copies dense device memory (every texel, row by row) into the array
    /// (`cudaMemcpy2DToArray`, device to array). Does not block the host: runs in "stream 0".
    #[doc(alias = "cudaMemcpy2DToArray")]
    pub fn copy_from_device(&mut self, src: &(impl DeviceRead<T> + ?Sized)) -> Result<()> {
        self.device_to_array(src, None)
    }

    /// As [`copy_from_device`](Self::copy_from_device) on `stream`
    /// (`cudaMemcpy2DToArrayAsync`).
    #[doc(alias = "cudaMemcpy2DToArrayAsync")]
    pub fn copy_from_device_async(
        &mut self,
        src: &(impl DeviceRead<T> + ?Sized),
        stream: &Stream,
    ) -> Result<()> {
        self.device_to_array(src, Some(stream))
    }

    fn device_to_array(
        &mut self,
        src: &(impl DeviceRead<T> + ?Sized),
        stream: Option<&Stream>,
    ) -> Result<()> {
        record((|| {
            self.check_len(src.len(), "Array::copy_from_device")?;
            let side = super::pitched::DeviceSide::<T>::dense(src, self.extent());
            copy_3d_impl::<T>(&*self, &side, &self.whole(), stream)
        })())
    }

    /// Copies the whole array into dense device memory (`cudaMemcpy2DFromArray`, array to
    /// device). Does not block the host.
    #[doc(alias = "cudaMemcpy2DFromArray")]
    pub fn copy_to_device(&self, dst: &mut (impl DeviceWrite<T> + ?Sized)) -> Result<()> {
        self.array_to_device(dst, None)
    }

    /// As [`copy_to_device`](Self::copy_to_device) on `stream`
    /// (`cudaMemcpy2DFromArrayAsync`).
    #[doc(alias = "cudaMemcpy2DFromArrayAsync")]
    pub fn copy_to_device_async(
        &self,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        stream: &Stream,
    ) -> Result<()> {
        self.array_to_device(dst, Some(stream))
    }

    fn array_to_device(
        &self,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        stream: Option<&Stream>,
    ) -> Result<()> {
        record((|| {
            self.check_len(dst.len(), "Array::copy_to_device")?;
            let side = super::pitched::DeviceSide::<T>::dense(&*dst, self.extent());
            copy_3d_impl::<T>(&side, self, &self.whole(), stream)
        })())
    }

    /// Copies the whole of `src`, an array of the same extent, into this one
    /// (`cudaMemcpy2DArrayToArray` / `cudaMemcpy3D`). Does not block the host.
    #[doc(alias = "cudaMemcpy2DArrayToArray")]
    #[doc(alias = "cudaMemcpyArrayToArray")]
    pub fn copy_from_array(&mut self, src: &Array<T>) -> Result<()> {
        record((|| {
            if src.extent() != self.extent() {
                return Err(Error::InvalidValue {
                    what: "Array::copy_from_array",
                    value: format!("{:?} into {:?}", src.extent(), self.extent()),
                    reason: "the arrays' extents differ (use copy_3d for a region)",
                });
            }
            copy_3d_impl::<T>(&*self, src, &self.whole(), None)
        })())
    }

    fn check_len(&self, len: usize, what: &'static str) -> Result<()> {
        if len != self.len() {
            return Err(Error::LengthMismatch {
                what,
                expected: self.len(),
                actual: len,
            });
        }
        Ok(())
    }
}

/// The mipmapped array behind [`MipmappedArray`] handles. (Public in a private module:
/// unnameable outside the crate.)
#[derive(Debug)]
pub struct MipmappedInner {
    raw: Raw<sys::CUmipmappedArray_st>,
    pub(crate) track: Alloc,
    pub(crate) format: ArrayFormat,
    pub(crate) channels: u32,
    pub(crate) shape: ArrayShape,
    pub(crate) flags: u32,
    pub(crate) levels: u32,
    /// For an array mapped from external memory: the memory, released after the destroy.
    external: Option<Arc<crate::external::ExtMemInner>>,
}

impl MipmappedInner {
    pub(crate) fn raw(&self) -> sys::CUmipmappedArray {
        self.raw.0
    }
}

impl Drop for MipmappedInner {
    fn drop(&mut self) {
        let (device, generation) = (self.track.device, self.track.generation);
        let waits = self.track.uses.take_points();
        let raw = self.raw;
        let external = self.external.take();
        queue::defer_free_blocking(
            device,
            generation,
            waits,
            "destroying a mipmapped array",
            move |a| {
                let Some(a) = a else { return Ok(()) };
                // SAFETY: a live mipmapped array of this context; its levels (which keep it
                // alive) and every use of it are gone.
                let r = a.check(
                    unsafe { sys::cuMipmappedArrayDestroy(raw.get()) },
                    "cuMipmappedArrayDestroy",
                );
                // External memory it was mapped from may be destroyed only now.
                drop(external);
                r
            },
        );
    }
}

/// A mipmapped CUDA array (`cudaMallocMipmappedArray`): `levels` arrays, each half the size of
/// the one before. Textures made from it sample between levels; [`level`](Self::level) gives
/// one level as an [`Array`] (for copies and surfaces), which keeps the mipmapped array alive.
#[derive(Debug)]
pub struct MipmappedArray<T: Texel> {
    pub(crate) inner: Arc<MipmappedInner>,
    _t: PhantomData<T>,
}

impl<T: Texel> MipmappedArray<T> {
    /// Allocates a mipmapped array of `levels` levels whose level 0 has `shape`
    /// (`cudaMallocMipmappedArray`).
    ///
    /// # Errors
    /// As [`Array::new`], and [`Error::InvalidValue`] when `levels` is 0 or more than
    /// [`ArrayShape::max_levels`] (the driver would clamp it).
    #[doc(alias = "cudaMallocMipmappedArray")]
    pub fn new(shape: ArrayShape, levels: u32, flags: ArrayFlags) -> Result<MipmappedArray<T>> {
        record((|| {
            let a = context::enter_current()?;
            let (extent, raw_flags) = check_shape(shape, flags, true, &TexLimits::of(&a)?)?;
            if levels == 0 || levels > shape.max_levels() {
                return Err(Error::InvalidValue {
                    what: "mipmap levels",
                    value: format!("{levels} for {shape:?}"),
                    reason: "between 1 and 1 + floor(log2(largest dimension))",
                });
            }
            let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
                Width: extent.width,
                Height: extent.height,
                Depth: extent.depth,
                Format: T::FORMAT.to_sys(),
                NumChannels: T::CHANNELS,
                Flags: raw_flags,
            };
            let mut raw: sys::CUmipmappedArray = std::ptr::null_mut();
            queue::alloc_retry(&a, || {
                // SAFETY: the context is current; checked descriptor; valid out-parameter.
                a.check(
                    unsafe { sys::cuMipmappedArrayCreate(&mut raw, &desc, levels) },
                    "cuMipmappedArrayCreate",
                )
            })?;
            Ok(MipmappedArray {
                inner: Arc::new(MipmappedInner {
                    raw: Raw(raw),
                    track: Alloc::plain(0, 0, a.dev.ordinal, a.generation()),
                    format: T::FORMAT,
                    channels: T::CHANNELS,
                    shape,
                    flags: raw_flags,
                    levels,
                    external: None,
                }),
                _t: PhantomData,
            })
        })())
    }

    /// A mipmapped array mapped from external memory by `map` (given the checked descriptor),
    /// which keeps the external memory alive.
    pub(crate) fn from_external(
        a: &Active,
        shape: ArrayShape,
        levels: u32,
        flags: ArrayFlags,
        map: impl FnOnce(
            &sys::CUDA_ARRAY3D_DESCRIPTOR,
        ) -> Result<(sys::CUmipmappedArray, Arc<crate::external::ExtMemInner>)>,
    ) -> Result<MipmappedArray<T>> {
        let (extent, raw_flags) = check_shape(shape, flags, true, &TexLimits::of(a)?)?;
        if levels == 0 || levels > shape.max_levels() {
            return Err(Error::InvalidValue {
                what: "mipmap levels",
                value: format!("{levels} for {shape:?}"),
                reason: "between 1 and 1 + floor(log2(largest dimension))",
            });
        }
        let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: extent.width,
            Height: extent.height,
            Depth: extent.depth,
            Format: T::FORMAT.to_sys(),
            NumChannels: T::CHANNELS,
            Flags: raw_flags,
        };
        let (raw, keep) = map(&desc)?;
        Ok(MipmappedArray {
            inner: Arc::new(MipmappedInner {
                raw: Raw(raw),
                track: Alloc::plain(0, 0, a.dev.ordinal, a.generation()),
                format: T::FORMAT,
                channels: T::CHANNELS,
                shape,
                flags: raw_flags,
                levels,
                external: Some(keep),
            }),
            _t: PhantomData,
        })
    }

    /// The number of levels.
    pub fn levels(&self) -> u32 {
        self.inner.levels
    }

    /// The shape of level 0.
    pub fn shape(&self) -> ArrayShape {
        self.inner.shape
    }

    /// Level `level` as an array (`cudaGetMipmappedArrayLevel`). The level's memory belongs to
    /// the mipmapped array, which the returned array keeps alive.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when `level` is not below [`levels`](Self::levels).
    #[doc(alias = "cudaGetMipmappedArrayLevel")]
    pub fn level(&self, level: u32) -> Result<Array<T>> {
        record((|| {
            if level >= self.inner.levels {
                return Err(Error::OutOfRange {
                    what: "mipmap levels",
                    start: level as usize,
                    end: level as usize + 1,
                    len: self.inner.levels as usize,
                });
            }
            let (device, generation) = (self.inner.track.device, self.inner.track.generation);
            let a = context::enter_handle(device, generation, "mipmapped array")?;
            let mut raw: sys::CUarray = std::ptr::null_mut();
            // SAFETY: a live mipmapped array of the current context; `level` is below its level
            // count; valid out-parameter.
            a.check(
                unsafe { sys::cuMipmappedArrayGetLevel(&mut raw, self.inner.raw(), level) },
                "cuMipmappedArrayGetLevel",
            )?;
            Ok(Array::wrap(ArrayInner {
                raw: Raw(raw),
                track: Alloc::plain(0, 0, device, generation),
                format: T::FORMAT,
                channels: T::CHANNELS,
                shape: self.inner.shape.level(level),
                flags: self.inner.flags,
                parent: Some(self.inner.clone()),
                cache_key: None,
            }))
        })())
    }

    /// The raw handle (`CUmipmappedArray`, the runtime's `cudaMipmappedArray_t`).
    pub fn as_raw(&self) -> sys::CUmipmappedArray {
        self.inner.raw()
    }
}

// Raw handles inside are plain numbers; ownership follows Rust's rules.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Array<f32>>();
    send_sync::<MipmappedArray<[u8; 4]>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    const L: TexLimits = TexLimits::H100;

    #[test]
    fn shapes_map_to_the_runtime_extents_and_back() {
        let cases = [
            (ArrayShape::D1 { width: 7 }, (Extent::new(7, 0, 0), 0)),
            (
                ArrayShape::D2 {
                    width: 7,
                    height: 3,
                },
                (Extent::new(7, 3, 0), 0),
            ),
            (
                ArrayShape::D3 {
                    width: 7,
                    height: 3,
                    depth: 2,
                },
                (Extent::new(7, 3, 2), 0),
            ),
            (
                ArrayShape::Layered1D {
                    width: 7,
                    layers: 5,
                },
                (Extent::new(7, 0, 5), 1),
            ),
            (
                ArrayShape::Layered2D {
                    width: 7,
                    height: 3,
                    layers: 5,
                },
                (Extent::new(7, 3, 5), 1),
            ),
            (ArrayShape::Cubemap { width: 8 }, (Extent::new(8, 8, 6), 4)),
            (
                ArrayShape::LayeredCubemap { width: 8, cubes: 3 },
                (Extent::new(8, 8, 18), 5),
            ),
        ];
        for (shape, raw) in cases {
            assert_eq!(shape.raw(), raw);
            assert_eq!(ArrayShape::from_raw(raw.0, raw.1).unwrap(), shape);
            let e = shape.extent();
            assert!(e.width >= 1 && e.height >= 1 && e.depth >= 1);
        }
        assert!(ArrayShape::from_raw(Extent::new(8, 7, 6), CUBEMAP).is_err());
        assert!(ArrayShape::from_raw(Extent::new(8, 8, 7), CUBEMAP | LAYERED).is_err());
        assert!(ArrayShape::from_raw(Extent::new(8, 0, 7), 0).is_err());
    }

    #[test]
    fn limits_are_checked_per_kind_naming_value_limit_and_attribute() {
        let ok = |s, f| check_shape(s, f, false, &L).unwrap();
        let err = |s, f| check_shape(s, f, false, &L).unwrap_err();
        let none = ArrayFlags::empty();
        let surf = ArrayFlags::SURFACE_LOAD_STORE;
        assert_eq!(ok(ArrayShape::D1 { width: 131072 }, none).0.width, 131072);
        let e = err(ArrayShape::D1 { width: 131073 }, none);
        assert_eq!(
            e,
            Error::SizeLimit {
                what: "1-D array width",
                value: 131073,
                limit: 131072,
                limit_name: "cudaDevAttrMaxTexture1DWidth"
            }
        );
        assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
        let msg = e.to_string();
        assert!(msg.contains("131073") && msg.contains("131072"), "{msg}");
        // The surface flag adds the surface limits.
        ok(ArrayShape::D1 { width: 32768 }, surf);
        assert!(matches!(
            err(ArrayShape::D1 { width: 32769 }, surf),
            Error::SizeLimit {
                limit: 32768,
                limit_name: "cudaDevAttrMaxSurface1DWidth",
                ..
            }
        ));
        ok(
            ArrayShape::D2 {
                width: 131072,
                height: 65536,
            },
            surf,
        );
        assert!(matches!(
            err(
                ArrayShape::D2 {
                    width: 1,
                    height: 65537
                },
                none
            ),
            Error::SizeLimit {
                what: "2-D array height",
                value: 65537,
                ..
            }
        ));
        // Gather: 2-D only, with its own limits.
        let g = ArrayFlags::TEXTURE_GATHER;
        ok(
            ArrayShape::D2 {
                width: 32768,
                height: 32768,
            },
            g,
        );
        assert!(matches!(
            err(
                ArrayShape::D2 {
                    width: 32769,
                    height: 1
                },
                g
            ),
            Error::SizeLimit {
                limit_name: "cudaDevAttrMaxTexture2DGatherWidth",
                ..
            }
        ));
        assert_eq!(
            err(ArrayShape::D1 { width: 4 }, g).code(),
            crate::ErrorCode::InvalidValue
        );
        // 3-D: the primary or the alternate limits.
        ok(
            ArrayShape::D3 {
                width: 16384,
                height: 16384,
                depth: 16384,
            },
            none,
        );
        ok(
            ArrayShape::D3 {
                width: 8192,
                height: 8192,
                depth: 32768,
            },
            none,
        );
        assert!(matches!(
            err(
                ArrayShape::D3 {
                    width: 8193,
                    height: 1,
                    depth: 32768
                },
                none
            ),
            Error::SizeLimit {
                what: "3-D array depth (beyond the alternate limits too)",
                ..
            }
        ));
        // Layers and cubes.
        ok(
            ArrayShape::Layered2D {
                width: 32768,
                height: 32768,
                layers: 2048,
            },
            none,
        );
        assert!(matches!(
            err(
                ArrayShape::Layered2D {
                    width: 1,
                    height: 1,
                    layers: 2049
                },
                none
            ),
            Error::SizeLimit {
                value: 2049,
                limit: 2048,
                ..
            }
        ));
        assert!(matches!(
            err(
                ArrayShape::Layered1D {
                    width: 32769,
                    layers: 1
                },
                none
            ),
            Error::SizeLimit { value: 32769, .. }
        ));
        assert!(matches!(
            err(ArrayShape::Cubemap { width: 32769 }, none),
            Error::SizeLimit {
                limit_name: "cudaDevAttrMaxTextureCubemapWidth",
                ..
            }
        ));
        assert!(matches!(
            err(
                ArrayShape::LayeredCubemap {
                    width: 4,
                    cubes: 342
                },
                none
            ),
            Error::SizeLimit {
                value: 2052,
                limit: 2046,
                ..
            }
        ));
        assert_eq!(
            ok(ArrayShape::LayeredCubemap { width: 4, cubes: 2 }, surf),
            (Extent::new(4, 4, 12), 0x7)
        );
        // Zeroes and unknown flags.
        for s in [
            ArrayShape::D1 { width: 0 },
            ArrayShape::D2 {
                width: 3,
                height: 0,
            },
            ArrayShape::Layered2D {
                width: 3,
                height: 3,
                layers: 0,
            },
            ArrayShape::LayeredCubemap { width: 3, cubes: 0 },
        ] {
            assert_eq!(err(s, none).code(), crate::ErrorCode::InvalidValue);
        }
        let e = err(
            ArrayShape::D1 { width: 4 },
            ArrayFlags::from_bits_retain(0x40),
        );
        assert!(matches!(e, Error::InvalidFlags { flags: 0x40, .. }));
        // Mipmapped arrays have their own limits.
        assert!(matches!(
            check_shape(
                ArrayShape::D2 {
                    width: 32769,
                    height: 4
                },
                none,
                true,
                &L
            )
            .unwrap_err(),
            Error::SizeLimit {
                limit_name: "cudaDevAttrMaxTexture2DMipmappedWidth",
                ..
            }
        ));
    }

    #[test]
    fn mipmap_levels_halve_and_count() {
        let s = ArrayShape::D2 {
            width: 100,
            height: 7,
        };
        assert_eq!(s.max_levels(), 7); // 100 -> 50 25 12 6 3 1
        assert_eq!(
            s.level(3),
            ArrayShape::D2 {
                width: 12,
                height: 1
            }
        );
        assert_eq!(
            s.level(200),
            ArrayShape::D2 {
                width: 1,
                height: 1
            }
        );
        assert_eq!(ArrayShape::D1 { width: 1 }.max_levels(), 1);
        assert_eq!(
            ArrayShape::Layered2D {
                width: 16,
                height: 16,
                layers: 9
            }
            .level(2),
            ArrayShape::Layered2D {
                width: 4,
                height: 4,
                layers: 9
            }
        );
    }
}
