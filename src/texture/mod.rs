//! Texture and surface objects: `cudaCreateTextureObject`, `cudaDestroyTextureObject`,
//! `cudaCreateSurfaceObject`, `cudaDestroySurfaceObject`, channel descriptions, and a CPU model
//! of the texture unit ([`cpu`]).
//!
//! # Resources
//!
//! A [`TextureObject`] reads one of:
//!
//! * a CUDA [`Array`] ([`TextureObject::from_array`]) or one level of a mipmapped array;
//! * a [`MipmappedArray`] ([`TextureObject::from_mipmapped`]), sampled between levels;
//! * linear device memory, read with `tex1Dfetch` ([`TextureObject::from_linear`]);
//! * a [`PitchedBuffer`] as a 2-D texture ([`TextureObject::from_pitched`]).
//!
//! Linear and pitched textures are made from a borrowed buffer or view, never from a size or
//! pitch the caller types: the driver does not check them against the allocation (a 256 MiB
//! linear texture over a 1 MiB buffer is accepted, and reads past the buffer), so the crate
//! derives them from the memory itself. Their base address must be a multiple of the device's
//! `textureAlignment` (512 bytes on the H100) and the pitch of `texturePitchAlignment` (32
//! bytes): views at arbitrary offsets are an error, not a crash.
//!
//! # The description
//!
//! [`TextureDesc`] is `cudaTextureDesc`. Combinations the driver refuses or silently changes are
//! refused before the driver is called, each with its own error naming the values
//! ([`Error::TextureDesc`]):
//!
//! * wrap and mirror addressing need normalised coordinates (without, the hardware clamps);
//! * linear filtering needs a float result: float texels, or 8- and 16-bit integers read as
//!   normalised floats (`cudaErrorInvalidFilterSetting` otherwise);
//! * normalised-float reads exist for 8- and 16-bit integers only (`cudaErrorInvalidNormSetting`);
//! * sRGB conversion applies to 8-bit unsigned texels read as normalised floats only;
//! * a seamless cubemap needs a cubemap array; mipmap settings need a mipmapped array, which in
//!   turn needs normalised coordinates;
//! * linear (1-D) resources ignore addressing, filtering and normalised coordinates (a fetch
//!   outside reads zero), so only the defaults are accepted there;
//! * anisotropy is at most 16.
//!
//! # Lifetime
//!
//! The driver keeps nothing alive: it destroys a texture object in 3 µs while a queued kernel
//! still needs it, and hands the same handle number to the next object at once. Here a texture
//! or surface object keeps what it reads alive (an array or mipmapped array by reference count;
//! linear and pitched memory by a borrow, so that the memory cannot be dropped first), and
//! kernels take it as a typed argument whose use (of the object and of its memory) is noted
//! through the crate's one enqueue path, as for buffers. Dropping the object never waits: it
//! is destroyed, and what it holds released, once the work that used it is done.
//!
//! ```no_run
//! use cuda_runtime::{Array, ArrayFlags, FilterMode, ReadMode, TextureDesc, TextureObject};
//! # fn main() -> cuda_runtime::Result<()> {
//! let mut img = Array::<[u8; 4]>::new_2d(256, 256, ArrayFlags::empty())?;
//! img.copy_from_host(&vec![[10, 20, 30, 255]; 256 * 256])?;
//! let desc = TextureDesc {
//!     filter_mode: FilterMode::Linear,
//!     read_mode: ReadMode::NormalizedFloat,
//!     normalized_coords: true,
//!     ..TextureDesc::default()
//! };
//! let tex = TextureObject::from_array(&img, &desc)?;
//! drop(img); // the texture keeps the array alive
//! # drop(tex);
//! # Ok(()) }
//! ```

pub mod cpu;
pub(crate) mod format;
mod resource;
mod surface;

use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::Arc;

pub use format::{ArrayFormat, ChannelDesc, ChannelFormatKind, Texel, TexelScalar};
pub use resource::ResourceDesc;
pub use surface::SurfaceObject;

use crate::context::{self, Active};
use crate::driver::sys;
use crate::error::{record, Error, ErrorCode, Result};
use crate::memory::{
    sealed, Alloc, Array, ArrayInner, ArrayShape, DeviceRead, MipmappedArray, MipmappedInner,
    PitchedBuffer, TexLimits,
};
use crate::queue::{self, Use, Uses};

/// How coordinates outside the texture are mapped (`cudaTextureAddressMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AddressMode {
    /// Repeat the texture (`cudaAddressModeWrap`); needs normalised coordinates.
    Wrap,
    /// Clamp to the edge texel (`cudaAddressModeClamp`). The crate's default: it is what the
    /// hardware does with the zeroed C struct's wrap mode and unnormalised coordinates.
    #[default]
    Clamp,
    /// Repeat mirrored (`cudaAddressModeMirror`); needs normalised coordinates.
    Mirror,
    /// Read the border colour outside (`cudaAddressModeBorder`).
    Border,
}

impl AddressMode {
    fn to_sys(self) -> sys::CUaddress_mode {
        use sys::CUaddress_mode::*;
        match self {
            AddressMode::Wrap => CU_TR_ADDRESS_MODE_WRAP,
            AddressMode::Clamp => CU_TR_ADDRESS_MODE_CLAMP,
            AddressMode::Mirror => CU_TR_ADDRESS_MODE_MIRROR,
            AddressMode::Border => CU_TR_ADDRESS_MODE_BORDER,
        }
    }
}

/// How texels are combined (`cudaTextureFilterMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FilterMode {
    /// The nearest texel (`cudaFilterModePoint`).
    #[default]
    Point,
    /// Linear interpolation of the 2, 4 or 8 nearest texels with 8-bit fractional weights
    /// (`cudaFilterModeLinear`); needs a float result.
    Linear,
}

impl FilterMode {
    fn to_sys(self) -> sys::CUfilter_mode {
        match self {
            FilterMode::Point => sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
            FilterMode::Linear => sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR,
        }
    }
}

/// How texels are returned (`cudaTextureReadMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ReadMode {
    /// As stored (`cudaReadModeElementType`): integers as integers, fp16 promoted to float.
    #[default]
    ElementType,
    /// 8- and 16-bit integers as floats in \[0, 1\] (unsigned) or \[-1, 1\] (signed)
    /// (`cudaReadModeNormalizedFloat`).
    NormalizedFloat,
}

/// A texture description (`cudaTextureDesc`): plain data, validated when a texture object is
/// made (see the [module docs](self)).
///
/// `Default` is the zeroed C struct except for two fields, so that the default is accepted
/// everywhere and means what it does: addressing clamps ([`AddressMode::Clamp`]), and the
/// largest mipmap level is not clamped (`max_mipmap_level_clamp` = `f32::MAX`, passed to the
/// driver as the last level).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TextureDesc {
    /// Addressing per dimension (x, y, z).
    pub address_mode: [AddressMode; 3],
    /// Filtering.
    pub filter_mode: FilterMode,
    /// Element type or normalised float.
    pub read_mode: ReadMode,
    /// Convert sRGB to linear before filtering (`sRGB`); 8-bit unsigned texels read as
    /// normalised floats only.
    pub srgb: bool,
    /// The colour read outside with [`AddressMode::Border`]. Four floats, as in the driver;
    /// for element-type integer reads the border's bits are those of the floats.
    pub border_color: [f32; 4],
    /// Coordinates in \[0, 1) instead of texels (`normalizedCoords`).
    pub normalized_coords: bool,
    /// Anisotropy, 0 to 16 (`maxAnisotropy`).
    pub max_anisotropy: u32,
    /// Filtering between mipmap levels (`mipmapFilterMode`).
    pub mipmap_filter_mode: FilterMode,
    /// Added to the level of detail (`mipmapLevelBias`).
    pub mipmap_level_bias: f32,
    /// The lowest level used (`minMipmapLevelClamp`).
    pub min_mipmap_level_clamp: f32,
    /// The highest level used (`maxMipmapLevelClamp`).
    pub max_mipmap_level_clamp: f32,
    /// `disableTrilinearOptimization`.
    pub disable_trilinear_optimization: bool,
    /// Filter across cubemap faces (`seamlessCubemap`); cubemap arrays only.
    pub seamless_cubemap: bool,
}

impl Default for TextureDesc {
    fn default() -> Self {
        TextureDesc {
            address_mode: [AddressMode::Clamp; 3],
            filter_mode: FilterMode::Point,
            read_mode: ReadMode::ElementType,
            srgb: false,
            border_color: [0.0; 4],
            normalized_coords: false,
            max_anisotropy: 0,
            mipmap_filter_mode: FilterMode::Point,
            mipmap_level_bias: 0.0,
            min_mipmap_level_clamp: 0.0,
            max_mipmap_level_clamp: f32::MAX,
            disable_trilinear_optimization: false,
            seamless_cubemap: false,
        }
    }
}

/// An array shape as kernels' texture and surface directives name it.
pub(crate) fn shape_name(shape: ArrayShape) -> &'static str {
    match shape {
        ArrayShape::D1 { .. } => "1d",
        ArrayShape::D2 { .. } => "2d",
        ArrayShape::D3 { .. } => "3d",
        ArrayShape::Layered1D { .. } => "1d-layered",
        ArrayShape::Layered2D { .. } => "2d-layered",
        ArrayShape::Cubemap { .. } => "cubemap",
        ArrayShape::LayeredCubemap { .. } => "cubemap-layered",
    }
}

/// What a texture reads, for validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResKind {
    Linear,
    Pitch2D,
    Array(ArrayShape),
    Mipmapped(ArrayShape, u32),
}

impl ResKind {
    /// The coordinates' dimensions whose addressing applies.
    fn dims(self) -> usize {
        match self {
            ResKind::Linear => 1,
            ResKind::Pitch2D => 2,
            ResKind::Array(s) | ResKind::Mipmapped(s, _) => match s {
                ArrayShape::D1 { .. } | ArrayShape::Layered1D { .. } => 1,
                ArrayShape::D3 { .. } => 3,
                _ => 2,
            },
        }
    }

    fn is_cubemap(self) -> bool {
        matches!(
            self,
            ResKind::Array(ArrayShape::Cubemap { .. } | ArrayShape::LayeredCubemap { .. })
                | ResKind::Mipmapped(
                    ArrayShape::Cubemap { .. } | ArrayShape::LayeredCubemap { .. },
                    _
                )
        )
    }
}

fn bad(code: ErrorCode, what: &'static str, value: String, reason: &'static str) -> Error {
    Error::TextureDesc {
        code,
        what,
        value,
        reason,
    }
}

/// Validates `d` for a resource of `kind` holding `channels` channels of `format`, and
/// converts it to the driver's struct. Every refusal happens here, before the driver.
///
/// A description that [`plainly_valid`] accepts (any valid one over a resource that is not
/// mipmapped, but for seamless filtering) is converted at once; every other one goes through
/// the full checks of [`texture_desc_checked`], which give the refusals their reasons. The
/// result is the same either way (a unit test compares them over many descriptions).
#[inline]
pub(crate) fn texture_desc(
    d: &TextureDesc,
    kind: ResKind,
    format: ArrayFormat,
    channels: u32,
) -> Result<sys::CUDA_TEXTURE_DESC> {
    if plainly_valid(d, kind, format) {
        // Not mipmapped: the driver gets a max clamp of 0 (as `texture_desc_checked`).
        return Ok(to_sys(d, 0.0));
    }
    texture_desc_checked(d, kind, format, channels)
}

/// A conservative, branch-light form of [`texture_desc_checked`]'s checks: `true` only for a
/// description that those checks accept, over a resource that is not mipmapped (with the max
/// clamp they pass on then, 0). Seamless filtering and mipmapped resources always take the
/// full checks; address modes are checked on all three axes, whatever the resource's
/// dimensions (a wrap or mirror on an unused axis takes the full checks, which accept it).
#[inline]
fn plainly_valid(d: &TextureDesc, kind: ResKind, format: ArrayFormat) -> bool {
    let clamps = |m: &AddressMode| !matches!(m, AddressMode::Wrap | AddressMode::Mirror);
    let normalized_read = d.read_mode == ReadMode::NormalizedFloat;
    let float_result = format.is_float() || normalized_read;
    let linear_ok = match kind {
        ResKind::Mipmapped(..) => return false,
        // Linear textures: only the default addressing, filtering, coordinates, sRGB, border.
        ResKind::Linear => {
            d.address_mode == [AddressMode::Clamp; 3]
                && d.filter_mode == FilterMode::Point
                && !d.normalized_coords
                && !d.srgb
                && d.border_color == [0.0; 4]
        }
        _ => true,
    };
    // Non-strict `&`: one flag test at the end instead of a branch per check.
    linear_ok
        & (d.normalized_coords || d.address_mode.iter().all(clamps))
        & (!normalized_read || format.normalizable())
        & (float_result || d.filter_mode == FilterMode::Point)
        & (!d.srgb || (format == ArrayFormat::U8 && normalized_read))
        & !d.seamless_cubemap
        & (d.max_anisotropy <= 16)
        & (d.mipmap_filter_mode == FilterMode::Point)
        & (d.mipmap_level_bias == 0.0)
        & (d.min_mipmap_level_clamp == 0.0)
        & (d.max_mipmap_level_clamp == f32::MAX || d.max_mipmap_level_clamp == 0.0)
        & !d.disable_trilinear_optimization
}

/// The driver's struct for a validated `d`, with the max mipmap level clamp `max_clamp`.
#[inline]
fn to_sys(d: &TextureDesc, max_clamp: f32) -> sys::CUDA_TEXTURE_DESC {
    let mut flags = 0;
    if d.read_mode == ReadMode::ElementType {
        // The runtime's element-type reads are the driver's integer reads (the driver's default
        // is the opposite: promote).
        flags |= sys::CU_TRSF_READ_AS_INTEGER;
    }
    if d.normalized_coords {
        flags |= sys::CU_TRSF_NORMALIZED_COORDINATES;
    }
    if d.srgb {
        flags |= sys::CU_TRSF_SRGB;
    }
    if d.seamless_cubemap {
        flags |= sys::CU_TRSF_SEAMLESS_CUBEMAP;
    }
    if d.disable_trilinear_optimization {
        flags |= sys::CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
    }
    sys::CUDA_TEXTURE_DESC {
        addressMode: d.address_mode.map(AddressMode::to_sys),
        filterMode: d.filter_mode.to_sys(),
        flags,
        maxAnisotropy: d.max_anisotropy,
        mipmapFilterMode: d.mipmap_filter_mode.to_sys(),
        mipmapLevelBias: d.mipmap_level_bias,
        minMipmapLevelClamp: d.min_mipmap_level_clamp,
        maxMipmapLevelClamp: max_clamp,
        borderColor: d.border_color,
        reserved: [0; 12],
    }
}

/// [`texture_desc`] with every check in full, each refusal with its reason.
#[cold]
#[inline(never)]
fn texture_desc_checked(
    d: &TextureDesc,
    kind: ResKind,
    format: ArrayFormat,
    channels: u32,
) -> Result<sys::CUDA_TEXTURE_DESC> {
    let TextureDesc {
        address_mode,
        filter_mode,
        read_mode,
        srgb,
        border_color,
        normalized_coords,
        max_anisotropy,
        mipmap_filter_mode,
        mipmap_level_bias,
        min_mipmap_level_clamp,
        max_mipmap_level_clamp,
        disable_trilinear_optimization,
        seamless_cubemap,
    } = *d;
    let inval = ErrorCode::InvalidValue;
    // Named in errors only (not formatted on the success path).
    let texel = || format!("{channels} x {format:?}");
    if kind == ResKind::Linear {
        let default = TextureDesc::default();
        if address_mode != default.address_mode
            || filter_mode != FilterMode::Point
            || normalized_coords
            || srgb
            || border_color != default.border_color
        {
            return Err(bad(
                inval,
                "a linear texture's addressing, filtering, coordinates or sRGB",
                format!("{d:?}"),
                "linear (tex1Dfetch) textures take integer indices, read zero outside and never \
                 filter: only the defaults are accepted",
            ));
        }
    }
    if !normalized_coords {
        for (i, m) in address_mode.iter().enumerate().take(kind.dims()) {
            if matches!(m, AddressMode::Wrap | AddressMode::Mirror) {
                const AXES: [&str; 3] = ["address_mode[0]", "address_mode[1]", "address_mode[2]"];
                return Err(bad(
                    inval,
                    AXES[i],
                    format!("{m:?} with normalized_coords false"),
                    "wrap and mirror need normalised coordinates (the hardware clamps otherwise)",
                ));
            }
        }
    }
    if read_mode == ReadMode::NormalizedFloat && !format.normalizable() {
        return Err(bad(
            ErrorCode::InvalidNormSetting,
            "read_mode",
            format!("NormalizedFloat for {} texels", texel()),
            "only 8- and 16-bit integer texels can be read as normalised floats",
        ));
    }
    let float_result = format.is_float() || read_mode == ReadMode::NormalizedFloat;
    for (what, m) in [
        ("filter_mode", filter_mode),
        ("mipmap_filter_mode", mipmap_filter_mode),
    ] {
        if m == FilterMode::Linear && !float_result {
            return Err(bad(
                ErrorCode::InvalidFilterSetting,
                what,
                format!("Linear for {} texels read as {read_mode:?}", texel()),
                "linear filtering needs a float result: float texels, or 8- and 16-bit \
                 integers read as normalised floats",
            ));
        }
    }
    if srgb && !(format == ArrayFormat::U8 && read_mode == ReadMode::NormalizedFloat) {
        return Err(bad(
            inval,
            "srgb",
            format!("true for {} texels read as {read_mode:?}", texel()),
            "sRGB conversion applies to 8-bit unsigned texels read as normalised floats only",
        ));
    }
    if seamless_cubemap && !kind.is_cubemap() {
        return Err(bad(
            inval,
            "seamless_cubemap",
            format!("true for a {kind:?} resource"),
            "seamless filtering is for cubemap arrays only",
        ));
    }
    if max_anisotropy > 16 {
        return Err(bad(
            inval,
            "max_anisotropy",
            max_anisotropy.to_string(),
            "at most 16",
        ));
    }
    let mut max_clamp = max_mipmap_level_clamp;
    match kind {
        ResKind::Mipmapped(_, levels) => {
            if !normalized_coords {
                return Err(bad(
                    inval,
                    "normalized_coords",
                    "false for a mipmapped array".into(),
                    "mipmapped textures need normalised coordinates",
                ));
            }
            let finite = [
                mipmap_level_bias,
                min_mipmap_level_clamp,
                max_mipmap_level_clamp,
            ]
            .iter()
            .all(|v| v.is_finite());
            // The driver gets the max clamp limited to the last level: the min is checked
            // against that (review finding: 10 with 5 levels passed, min 10 > max 4).
            max_clamp = max_clamp.min((levels.max(1) - 1) as f32);
            if !finite || min_mipmap_level_clamp < 0.0 || min_mipmap_level_clamp > max_clamp {
                return Err(bad(
                    inval,
                    "mipmap level bias and clamps",
                    format!(
                        "bias {mipmap_level_bias}, clamps {min_mipmap_level_clamp}..{max_mipmap_level_clamp}"
                    ),
                    "finite, with 0 <= min clamp <= max clamp (at most the last level)",
                ));
            }
        }
        _ => {
            let default_max = max_mipmap_level_clamp == f32::MAX || max_mipmap_level_clamp == 0.0;
            if mipmap_filter_mode != FilterMode::Point
                || mipmap_level_bias != 0.0
                || min_mipmap_level_clamp != 0.0
                || !default_max
                || disable_trilinear_optimization
            {
                return Err(bad(
                    inval,
                    "mipmap settings",
                    format!(
                        "filter {mipmap_filter_mode:?}, bias {mipmap_level_bias}, clamps \
                         {min_mipmap_level_clamp}..{max_mipmap_level_clamp}, trilinear \
                         optimisation disabled {disable_trilinear_optimization}"
                    ),
                    "mipmap settings apply to mipmapped arrays only",
                ));
            }
            max_clamp = 0.0;
        }
    }
    Ok(to_sys(d, max_clamp))
}

/// What a texture object keeps alive.
#[derive(Debug)]
enum Backing<'a> {
    Array(Arc<ArrayInner>),
    Mipmapped(Arc<MipmappedInner>),
    /// Linear memory, borrowed for the texture's life.
    Linear(&'a Alloc),
    /// Pitched memory, borrowed for the texture's life.
    Pitched(&'a Alloc),
}

impl Backing<'_> {
    fn tracker(&self) -> &Alloc {
        match self {
            Backing::Array(a) => &a.track,
            Backing::Mipmapped(m) => &m.track,
            Backing::Linear(a) | Backing::Pitched(a) => a,
        }
    }
}

/// A texture object (`cudaTextureObject_t`): an immutable sampler over an array, a mipmapped
/// array, or linear or pitched device memory, which kernels receive as an argument. It keeps
/// what it reads alive; `'a` is the borrow of linear or pitched memory (`'static` for arrays).
/// See the [module docs](self).
// Kept small (120 bytes): a larger value is moved with calls to `memcpy`, twice on the way out
// of the constructor; see the size check below the `Drop` impl.
#[derive(Debug)]
pub struct TextureObject<'a> {
    raw: u64,
    /// The context it was made in (its memory's): its destroy goes there.
    generation: u64,
    device: i32,
    /// The kernels that received the handle (noted through [`Use::object`]): its destroy
    /// waits for them.
    uses: Uses,
    /// `None` only while it is dropped.
    backing: Option<Backing<'a>>,
    desc: TextureDesc,
    format: ArrayFormat,
    /// At most 4.
    channels: u8,
    _borrow: PhantomData<&'a ()>,
}

fn resource(kind: sys::CUresourcetype) -> sys::CUDA_RESOURCE_DESC {
    sys::CUDA_RESOURCE_DESC {
        resType: kind,
        res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
            reserved: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_5 { reserved: [0; 32] },
        },
        flags: 0,
    }
}

fn aligned(
    what: &'static str,
    value: u64,
    alignment: usize,
    attribute: &'static str,
) -> Result<()> {
    if alignment > 0 && !value.is_multiple_of(alignment as u64) {
        return Err(Error::TextureAlignment {
            what,
            value,
            alignment: alignment as u64,
            attribute,
        });
    }
    Ok(())
}

impl TextureObject<'static> {
    /// A texture over a CUDA array (`cudaCreateTextureObject` with `cudaResourceTypeArray`),
    /// made on the array's device. The texture keeps the array alive.
    ///
    /// # Errors
    /// [`Error::TextureDesc`] for a description the driver would refuse or silently change
    /// (see the [module docs](self)); [`Error::ContextDestroyed`] after a reset.
    #[doc(alias = "cudaCreateTextureObject")]
    pub fn from_array<T: Texel>(
        array: &Array<T>,
        desc: &TextureDesc,
    ) -> Result<TextureObject<'static>> {
        record((|| {
            let inner = &array.inner;
            let raw_desc = texture_desc(
                desc,
                ResKind::Array(inner.shape),
                inner.format,
                inner.channels,
            )?;
            let a = context::enter_handle(inner.device(), inner.generation(), "array")?;
            let mut res = resource(sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY);
            res.res.array = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 {
                hArray: inner.raw(),
            };
            let raw = create(&a, &res, &raw_desc)?;
            Ok(TextureObject::wrap(
                &a,
                raw,
                Backing::Array(inner.clone()),
                desc,
                inner.format,
                inner.channels,
            ))
        })())
    }

    /// A texture over a mipmapped array (`cudaCreateTextureObject` with
    /// `cudaResourceTypeMipmappedArray`); needs normalised coordinates. Keeps the mipmapped
    /// array alive.
    #[doc(alias = "cudaCreateTextureObject")]
    pub fn from_mipmapped<T: Texel>(
        array: &MipmappedArray<T>,
        desc: &TextureDesc,
    ) -> Result<TextureObject<'static>> {
        record((|| {
            let inner = &array.inner;
            let kind = ResKind::Mipmapped(inner.shape, inner.levels);
            let raw_desc = texture_desc(desc, kind, inner.format, inner.channels)?;
            let a = context::enter_handle(
                inner.track.device,
                inner.track.generation,
                "mipmapped array",
            )?;
            let mut res = resource(sys::CUresourcetype::CU_RESOURCE_TYPE_MIPMAPPED_ARRAY);
            res.res.mipmap = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_2 {
                hMipmappedArray: inner.raw(),
            };
            let raw = create(&a, &res, &raw_desc)?;
            Ok(TextureObject::wrap(
                &a,
                raw,
                Backing::Mipmapped(inner.clone()),
                desc,
                inner.format,
                inner.channels,
            ))
        })())
    }
}

/// Enters the context of device memory a texture is made over, refusing host memory.
fn enter_memory(alloc: &Alloc) -> Result<Active> {
    if alloc.host.is_some() {
        return Err(Error::InvalidValue {
            what: "texture memory",
            value: format!("host memory at {:#x}", alloc.ptr),
            reason: "textures over linear or pitched memory are made over device memory only",
        });
    }
    context::enter_handle(alloc.device, alloc.generation, "device buffer")
}

impl<'a> TextureObject<'a> {
    /// A texture over linear device memory, read in kernels with `tex1Dfetch`
    /// (`cudaCreateTextureObject` with `cudaResourceTypeLinear`). Its size and address come from
    /// `memory`, which stays borrowed while the texture lives.
    ///
    /// # Errors
    /// [`Error::TextureAlignment`] when the address is not a multiple of `textureAlignment`;
    /// [`Error::SizeLimit`] beyond `cudaDeviceGetTexture1DLinearMaxWidth` for the texel size;
    /// [`Error::InvalidValue`] for empty memory or host memory; [`Error::TextureDesc`] for a
    /// description other than the defaults in addressing, filtering, coordinates and sRGB.
    ///
    /// The memory cannot be dropped (or written) while the texture lives:
    ///
    /// ```compile_fail
    /// use cuda_runtime::{DeviceBuffer, TextureDesc, TextureObject};
    /// # fn main() -> cuda_runtime::Result<()> {
    /// let buf = DeviceBuffer::<f32>::new(1024)?;
    /// let tex = TextureObject::from_linear(&buf, &TextureDesc::default())?;
    /// drop(buf); // error: `buf` is borrowed by `tex`
    /// # drop(tex);
    /// # Ok(()) }
    /// ```
    ///
    /// Nor can a view it reads:
    ///
    /// ```compile_fail
    /// use cuda_runtime::{DeviceBuffer, TextureDesc, TextureObject};
    /// # fn main() -> cuda_runtime::Result<()> {
    /// let buf = DeviceBuffer::<f32>::new(1024)?;
    /// let tex = {
    ///     let view = buf.slice(128..)?;
    ///     TextureObject::from_linear(&view, &TextureDesc::default())?
    /// }; // error: `view` does not live long enough
    /// # drop(tex);
    /// # Ok(()) }
    /// ```
    #[doc(alias = "cudaCreateTextureObject")]
    pub fn from_linear<T: Texel>(
        memory: &'a (impl DeviceRead<T> + ?Sized),
        desc: &TextureDesc,
    ) -> Result<TextureObject<'a>> {
        record((|| {
            let raw_desc = texture_desc(desc, ResKind::Linear, T::FORMAT, T::CHANNELS)?;
            let alloc = sealed::Sealed::allocation(memory);
            let a = enter_memory(alloc)?;
            let (ptr, len) = (memory.device_ptr(), memory.len());
            if len == 0 {
                return Err(Error::InvalidValue {
                    what: "linear texture memory",
                    value: "0 elements".into(),
                    reason: "a texture needs at least one texel",
                });
            }
            let l = TexLimits::of(&a)?;
            aligned(
                "texture base address",
                ptr,
                l.texture_alignment,
                "cudaDevAttrTextureAlignment",
            )?;
            let max = linear_max_width(&a, T::FORMAT, T::CHANNELS)?;
            if len > max {
                return Err(Error::SizeLimit {
                    what: "linear texture width (texels)",
                    value: len,
                    limit: max,
                    limit_name: "cudaDeviceGetTexture1DLinearMaxWidth",
                });
            }
            let mut res = resource(sys::CUresourcetype::CU_RESOURCE_TYPE_LINEAR);
            res.res.linear = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_3 {
                devPtr: ptr,
                format: T::FORMAT.to_sys(),
                numChannels: T::CHANNELS,
                sizeInBytes: len * size_of::<T>(),
            };
            let raw = create(&a, &res, &raw_desc)?;
            Ok(TextureObject::wrap(
                &a,
                raw,
                Backing::Linear(alloc),
                desc,
                T::FORMAT,
                T::CHANNELS,
            ))
        })())
    }

    /// A 2-D texture over a pitched allocation (`cudaCreateTextureObject` with
    /// `cudaResourceTypePitch2D`): its width, height and pitch come from the buffer (a 2-D
    /// one: depth 1), which stays borrowed while the texture lives.
    ///
    /// # Errors
    /// [`Error::TextureAlignment`] for an address or pitch off the device's alignments;
    /// [`Error::SizeLimit`] beyond `maxTexture2DLinear`; [`Error::InvalidValue`] for a 3-D
    /// buffer; [`Error::TextureDesc`] as for arrays.
    #[doc(alias = "cudaCreateTextureObject")]
    pub fn from_pitched<T: Texel>(
        memory: &'a PitchedBuffer<T>,
        desc: &TextureDesc,
    ) -> Result<TextureObject<'a>> {
        record((|| {
            let e = memory.extent();
            let raw_desc = texture_desc(desc, ResKind::Pitch2D, T::FORMAT, T::CHANNELS)?;
            if e.depth != 1 {
                return Err(Error::InvalidValue {
                    what: "pitched texture memory",
                    value: format!("{e:?}"),
                    reason: "a pitch-2D texture reads a 2-D buffer (depth 1)",
                });
            }
            let alloc = sealed::Sealed::allocation(memory);
            let a = enter_memory(alloc)?;
            let l = TexLimits::of(&a)?;
            let (ptr, pitch) = (memory.as_raw(), memory.pitch());
            aligned(
                "texture base address",
                ptr,
                l.texture_alignment,
                "cudaDevAttrTextureAlignment",
            )?;
            aligned(
                "texture pitch",
                pitch as u64,
                l.pitch_alignment,
                "cudaDevAttrTexturePitchAlignment",
            )?;
            limit2d(e.width, e.height, pitch, &l)?;
            let mut res = resource(sys::CUresourcetype::CU_RESOURCE_TYPE_PITCH2D);
            res.res.pitch2D = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_4 {
                devPtr: ptr,
                format: T::FORMAT.to_sys(),
                numChannels: T::CHANNELS,
                width: e.width,
                height: e.height,
                pitchInBytes: pitch,
            };
            let raw = create(&a, &res, &raw_desc)?;
            Ok(TextureObject::wrap(
                &a,
                raw,
                Backing::Pitched(alloc),
                desc,
                T::FORMAT,
                T::CHANNELS,
            ))
        })())
    }

    fn wrap(
        a: &Active,
        raw: u64,
        backing: Backing<'a>,
        desc: &TextureDesc,
        format: ArrayFormat,
        channels: u32,
    ) -> TextureObject<'a> {
        debug_assert!(channels <= 4);
        TextureObject {
            raw,
            generation: a.generation(),
            device: a.dev.ordinal,
            uses: Uses::default(),
            backing: Some(backing),
            desc: *desc,
            format,
            channels: channels as u8,
            _borrow: PhantomData,
        }
    }

    /// The raw handle (`CUtexObject`, the runtime's `cudaTextureObject_t`). Passing it to a
    /// kernel by value bypasses the crate's tracking: use the typed kernel arguments.
    pub fn as_raw(&self) -> u64 {
        self.raw
    }

    /// The description it was made with (`cudaGetTextureObjectTextureDesc`).
    #[doc(alias = "cudaGetTextureObjectTextureDesc")]
    pub fn desc(&self) -> &TextureDesc {
        &self.desc
    }

    /// The texel format and channel count it reads.
    pub fn format(&self) -> (ArrayFormat, u32) {
        (self.format, u32::from(self.channels))
    }

    /// The resource's shape as kernels' texture directives name it (`linear`, `pitch2d`, `2d`,
    /// `mipmapped-2d`, ...).
    fn shape_name(&self) -> String {
        match &self.backing {
            Some(Backing::Array(a)) => shape_name(a.shape).to_string(),
            Some(Backing::Mipmapped(m)) => format!("mipmapped-{}", shape_name(m.shape)),
            Some(Backing::Linear(_)) => "linear".to_string(),
            Some(Backing::Pitched(_)) | None => "pitch2d".to_string(),
        }
    }

    /// How fetches read the texels: `float` (float texels, or integers read as normalised
    /// floats), `int` or `uint` (integers read as stored).
    fn element_name(&self) -> &'static str {
        if self.format.is_float() || self.desc.read_mode == ReadMode::NormalizedFloat {
            "float"
        } else if matches!(
            self.format,
            ArrayFormat::I8 | ArrayFormat::I16 | ArrayFormat::I32
        ) {
            "int"
        } else {
            "uint"
        }
    }

    /// As [`kernel_arg`](Self::kernel_arg), for a parameter whose kernel declares what it reads
    /// (`// cuda-runtime: texture <param> <shapes> <element>`): a texture of another shape or
    /// element type is refused (a fetch of the wrong kind returns garbage, silently).
    #[doc(hidden)]
    pub fn kernel_arg_expect(
        &self,
        kernel: &'static str,
        param: &'static str,
        shapes: &[&str],
        element: &str,
    ) -> Result<(u64, Use<'_>, Use<'_>)> {
        let (shape, elem) = (self.shape_name(), self.element_name());
        if !shapes.contains(&shape.as_str()) || elem != element {
            return record(Err(Error::InvalidValue {
                what: "texture argument",
                value: format!("{param} of {kernel}: a {shape} texture read as {elem}"),
                reason: "the kernel fetches another kind of texture (see its declaration)",
            }));
        }
        Ok(self.kernel_arg())
    }

    /// For the crate's kernel wrappers: the handle, and the uses to hand to the launch (of the
    /// object, and of the memory it reads), which the launch checks and notes.
    #[doc(hidden)]
    #[inline]
    pub fn kernel_arg(&self) -> (u64, Use<'_>, Use<'_>) {
        let memory = self
            .backing
            .as_ref()
            .expect("a texture object's backing is taken only by its drop")
            .tracker();
        (
            self.raw,
            Use::object(&self.uses, memory),
            Use::device(memory, false),
        )
    }
}

fn limit2d(width: usize, height: usize, pitch: usize, l: &TexLimits) -> Result<()> {
    for (what, v, max, name) in [
        (
            "pitched texture width (texels)",
            width,
            l.tex2d_linear[0],
            "cudaDevAttrMaxTexture2DLinearWidth",
        ),
        (
            "pitched texture height",
            height,
            l.tex2d_linear[1],
            "cudaDevAttrMaxTexture2DLinearHeight",
        ),
        (
            "pitched texture pitch (bytes)",
            pitch,
            l.tex2d_linear[2],
            "cudaDevAttrMaxTexture2DLinearPitch",
        ),
    ] {
        if v > max {
            return Err(Error::SizeLimit {
                what,
                value: v,
                limit: max,
                limit_name: name,
            });
        }
    }
    Ok(())
}

/// `cudaDeviceGetTexture1DLinearMaxWidth`: the most texels of a linear texture of this format
/// on the entered device (it depends on the texel size).
fn linear_max_width(a: &Active, format: ArrayFormat, channels: u32) -> Result<usize> {
    let mut max = 0usize;
    // SAFETY: valid out-parameter and device handle; a known format.
    a.check(
        unsafe {
            sys::cuDeviceGetTexture1DLinearMaxWidth(&mut max, format.to_sys(), channels, a.dev.raw)
        },
        "cuDeviceGetTexture1DLinearMaxWidth",
    )?;
    Ok(max)
}

#[inline]
fn create(a: &Active, res: &sys::CUDA_RESOURCE_DESC, desc: &sys::CUDA_TEXTURE_DESC) -> Result<u64> {
    let mut raw: sys::CUtexObject = 0;
    // SAFETY: the context is current; the resource names a live array, mipmapped array or
    // device memory of this context whose size, pitch and alignment were checked against the
    // memory itself; the description was validated; no resource view.
    a.check(
        unsafe { sys::cuTexObjectCreate(&mut raw, res, desc, std::ptr::null()) },
        "cuTexObjectCreate",
    )?;
    Ok(raw)
}

impl Drop for TextureObject<'_> {
    fn drop(&mut self) {
        let (device, generation) = (self.device, self.generation);
        let waits = self.uses.take_points();
        let raw = self.raw;
        // What the object holds is released after it is destroyed (borrowed memory is the
        // borrow's: its own drop waits for the uses noted on it).
        let keep = match self.backing.take() {
            Some(Backing::Array(a)) => Some(Ok(a)),
            Some(Backing::Mipmapped(m)) => Some(Err(m)),
            _ => None,
        };
        let destroy = move |a: Option<&Active>| {
            // SAFETY: a live texture object of this context; every queued use of it is done.
            let r = a.map_or(Ok(()), |a| {
                a.check(
                    unsafe { sys::cuTexObjectDestroy(raw) },
                    "cuTexObjectDestroy",
                )
            });
            drop(keep);
            r
        };
        if waits.is_empty() {
            // Destroying an object queues nothing and waits for nothing: the capture-mode
            // swap is skipped while no capture of the crate is open (`release_async`).
            context::release_async(
                device,
                generation,
                "destroying a texture object",
                move |a| destroy(Some(a)),
            );
        } else {
            queue::defer_free(
                device,
                generation,
                waits,
                "destroying a texture object",
                destroy,
            );
        }
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<TextureObject<'static>>();
    send_sync::<SurfaceObject>();
    // Moved inline, not through `memcpy`: at most 128 bytes, the result included (LLVM copies
    // larger values with a call, twice per create: measured against the null driver).
    assert!(std::mem::size_of::<TextureObject<'static>>() <= 128);
    assert!(std::mem::size_of::<Result<TextureObject<'static>>>() <= 128);
};

#[cfg(test)]
mod tests {
    use super::*;

    fn d2_shape() -> ArrayShape {
        ArrayShape::D2 {
            width: 4,
            height: 4,
        }
    }

    fn d2() -> ResKind {
        ResKind::Array(d2_shape())
    }

    fn check(d: &TextureDesc, k: ResKind, f: ArrayFormat) -> Result<sys::CUDA_TEXTURE_DESC> {
        texture_desc(d, k, f, 1)
    }

    #[test]
    fn the_default_is_accepted_everywhere_and_reads_element_type() {
        let d = TextureDesc::default();
        for k in [
            ResKind::Linear,
            ResKind::Pitch2D,
            d2(),
            ResKind::Array(ArrayShape::Cubemap { width: 4 }),
        ] {
            for f in ArrayFormat::ALL {
                let raw = check(&d, k, f).unwrap();
                assert_eq!(raw.flags, sys::CU_TRSF_READ_AS_INTEGER);
                assert_eq!(raw.addressMode[0] as u32, 1, "clamp");
                assert_eq!(raw.maxMipmapLevelClamp, 0.0);
            }
        }
    }

    #[test]
    fn combinations_the_driver_refuses_or_changes_are_refused_with_their_codes() {
        use ArrayFormat::*;
        let base = TextureDesc::default();
        let code = |d: TextureDesc, k: ResKind, f: ArrayFormat| {
            check(&d, k, f).map(|_| ()).map_err(|e| e.code())
        };
        // Wrap / mirror without normalised coordinates, on the dimensions the resource has.
        let wrap = TextureDesc {
            address_mode: [AddressMode::Clamp, AddressMode::Wrap, AddressMode::Clamp],
            ..base
        };
        assert_eq!(code(wrap, d2(), F32), Err(ErrorCode::InvalidValue));
        assert_eq!(
            code(wrap, ResKind::Array(ArrayShape::D1 { width: 4 }), F32),
            Ok(()),
            "the y mode of a 1-D texture is unused"
        );
        assert_eq!(
            code(
                TextureDesc {
                    normalized_coords: true,
                    ..wrap
                },
                d2(),
                F32
            ),
            Ok(())
        );
        let mirror = TextureDesc {
            address_mode: [AddressMode::Mirror; 3],
            ..base
        };
        let e = check(&mirror, d2(), F32).unwrap_err();
        assert!(e.to_string().contains("address_mode[0]"), "{e}");
        // Linear filtering needs a float result.
        let lin = TextureDesc {
            filter_mode: FilterMode::Linear,
            ..base
        };
        for f in [U8, U16, I8, I16, U32, I32] {
            assert_eq!(
                code(lin, d2(), f),
                Err(ErrorCode::InvalidFilterSetting),
                "{f:?}"
            );
        }
        for f in [F16, F32] {
            assert_eq!(code(lin, d2(), f), Ok(()));
        }
        let norm = TextureDesc {
            read_mode: ReadMode::NormalizedFloat,
            ..lin
        };
        for f in [U8, U16, I8, I16] {
            assert_eq!(code(norm, d2(), f), Ok(()), "{f:?}");
        }
        // 32-bit integers are never normalised; floats are floats already.
        for f in [U32, I32, F16, F32] {
            assert_eq!(
                code(
                    TextureDesc {
                        filter_mode: FilterMode::Point,
                        ..norm
                    },
                    d2(),
                    f
                ),
                Err(ErrorCode::InvalidNormSetting),
                "{f:?}"
            );
        }
        let e = check(&lin, d2(), I32).unwrap_err();
        assert!(
            e.to_string().contains("I32") && e.to_string().contains("filter_mode"),
            "{e}"
        );
        // sRGB: 8-bit unsigned read as normalised floats only.
        let srgb = TextureDesc { srgb: true, ..norm };
        assert_eq!(code(srgb, d2(), U8), Ok(()));
        assert_eq!(code(srgb, d2(), U16), Err(ErrorCode::InvalidValue));
        assert_eq!(
            code(TextureDesc { srgb: true, ..base }, d2(), U8),
            Err(ErrorCode::InvalidValue)
        );
        // Seamless cubemaps on cubemaps only.
        let seamless = TextureDesc {
            seamless_cubemap: true,
            ..base
        };
        assert_eq!(code(seamless, d2(), F32), Err(ErrorCode::InvalidValue));
        assert_eq!(
            code(
                seamless,
                ResKind::Array(ArrayShape::Cubemap { width: 4 }),
                F32
            ),
            Ok(())
        );
        assert_eq!(
            code(
                seamless,
                ResKind::Array(ArrayShape::LayeredCubemap { width: 4, cubes: 2 }),
                F32
            ),
            Ok(())
        );
        // Mipmaps: normalised coordinates, sane clamps; mipmap settings on mipmaps only.
        let mip = ResKind::Mipmapped(
            ArrayShape::D2 {
                width: 16,
                height: 16,
            },
            5,
        );
        assert_eq!(code(base, mip, F32), Err(ErrorCode::InvalidValue));
        let nc = TextureDesc {
            normalized_coords: true,
            ..base
        };
        let raw = check(&nc, mip, F32).unwrap();
        assert_eq!(raw.maxMipmapLevelClamp, 4.0, "clamped to the last level");
        assert_eq!(
            code(
                TextureDesc {
                    min_mipmap_level_clamp: 3.0,
                    max_mipmap_level_clamp: 2.0,
                    ..nc
                },
                mip,
                F32
            ),
            Err(ErrorCode::InvalidValue)
        );
        assert_eq!(
            code(
                TextureDesc {
                    mipmap_level_bias: f32::NAN,
                    ..nc
                },
                mip,
                F32
            ),
            Err(ErrorCode::InvalidValue)
        );
        assert_eq!(
            code(
                TextureDesc {
                    mipmap_filter_mode: FilterMode::Linear,
                    ..nc
                },
                mip,
                U8
            ),
            Err(ErrorCode::InvalidFilterSetting)
        );
        assert_eq!(
            code(
                TextureDesc {
                    mipmap_level_bias: 1.0,
                    ..base
                },
                d2(),
                F32
            ),
            Err(ErrorCode::InvalidValue)
        );
        // The zeroed C struct's max clamp (0) is accepted on arrays too.
        assert_eq!(
            code(
                TextureDesc {
                    max_mipmap_level_clamp: 0.0,
                    ..base
                },
                d2(),
                F32
            ),
            Ok(())
        );
        // Linear resources: only the defaults.
        for d in [
            lin,
            nc,
            TextureDesc {
                address_mode: [AddressMode::Border; 3],
                ..base
            },
        ] {
            assert_eq!(
                code(d, ResKind::Linear, F32),
                Err(ErrorCode::InvalidValue),
                "{d:?}"
            );
        }
        assert_eq!(
            code(
                TextureDesc {
                    read_mode: ReadMode::NormalizedFloat,
                    ..base
                },
                ResKind::Linear,
                U8
            ),
            Ok(())
        );
        assert_eq!(
            code(
                TextureDesc {
                    max_anisotropy: 17,
                    ..base
                },
                d2(),
                F32
            ),
            Err(ErrorCode::InvalidValue)
        );
    }

    #[test]
    fn flags_follow_the_runtime() {
        let d = TextureDesc {
            read_mode: ReadMode::NormalizedFloat,
            normalized_coords: true,
            srgb: true,
            filter_mode: FilterMode::Linear,
            address_mode: [AddressMode::Wrap, AddressMode::Mirror, AddressMode::Border],
            border_color: [0.25, 0.5, 0.75, 1.0],
            ..TextureDesc::default()
        };
        let raw = texture_desc(
            &d,
            ResKind::Array(ArrayShape::D3 {
                width: 2,
                height: 2,
                depth: 2,
            }),
            ArrayFormat::U8,
            4,
        )
        .unwrap();
        assert_eq!(
            raw.flags,
            sys::CU_TRSF_NORMALIZED_COORDINATES | sys::CU_TRSF_SRGB
        );
        assert_eq!(raw.addressMode.map(|m| m as u32), [0, 2, 3]);
        assert_eq!(raw.filterMode as u32, 1);
        assert_eq!(raw.borderColor, [0.25, 0.5, 0.75, 1.0]);
    }

    /// The quick acceptance of `texture_desc` gives what the full checks give: over a few
    /// hundred thousand pseudo-random descriptions (each field from its interesting values),
    /// resources and formats, every quickly accepted one is accepted by the full checks with
    /// the same bits, and `texture_desc` answers as the full checks do for all of them.
    #[test]
    fn quick_acceptance_agrees_with_the_full_checks() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let modes = [
            AddressMode::Wrap,
            AddressMode::Clamp,
            AddressMode::Mirror,
            AddressMode::Border,
        ];
        let filters = [FilterMode::Point, FilterMode::Linear];
        let reads = [ReadMode::ElementType, ReadMode::NormalizedFloat];
        let floats = [0.0, -0.0, 1.0, -1.0, 4.0, f32::MAX, f32::NAN, f32::INFINITY];
        let shapes = [
            ArrayShape::D1 { width: 4 },
            d2_shape(),
            ArrayShape::D3 {
                width: 2,
                height: 2,
                depth: 2,
            },
            ArrayShape::Layered1D {
                width: 4,
                layers: 2,
            },
            ArrayShape::Layered2D {
                width: 4,
                height: 4,
                layers: 2,
            },
            ArrayShape::Cubemap { width: 4 },
            ArrayShape::LayeredCubemap { width: 4, cubes: 2 },
        ];
        let bits = |r: &sys::CUDA_TEXTURE_DESC| {
            (
                r.addressMode.map(|m| m as u32),
                r.filterMode as u32,
                r.flags,
                r.maxAnisotropy,
                r.mipmapFilterMode as u32,
                [
                    r.mipmapLevelBias.to_bits(),
                    r.minMipmapLevelClamp.to_bits(),
                    r.maxMipmapLevelClamp.to_bits(),
                ],
                r.borderColor.map(f32::to_bits),
                r.reserved,
            )
        };
        let mut quick = 0;
        for i in 0..400_000 {
            // Half start from the default, changing one to three fields, so that many are valid.
            let mut d = TextureDesc::default();
            let changes = if i % 2 == 0 { 1 + next(3) } else { 13 };
            for _ in 0..changes {
                match next(13) {
                    0 => d.address_mode = [0; 3].map(|_| modes[next(4)]),
                    1 => d.filter_mode = filters[next(2)],
                    2 => d.read_mode = reads[next(2)],
                    3 => d.srgb = next(2) == 0,
                    4 => d.border_color = [0; 4].map(|_| floats[next(4)]),
                    5 => d.normalized_coords = next(2) == 0,
                    6 => d.max_anisotropy = [0, 1, 16, 17][next(4)],
                    7 => d.mipmap_filter_mode = filters[next(2)],
                    8 => d.mipmap_level_bias = floats[next(floats.len())],
                    9 => d.min_mipmap_level_clamp = floats[next(floats.len())],
                    10 => d.max_mipmap_level_clamp = floats[next(floats.len())],
                    11 => d.disable_trilinear_optimization = next(2) == 0,
                    _ => d.seamless_cubemap = next(2) == 0,
                }
            }
            let kind = match next(4) {
                0 => ResKind::Linear,
                1 => ResKind::Pitch2D,
                2 => ResKind::Array(shapes[next(shapes.len())]),
                _ => ResKind::Mipmapped(shapes[next(shapes.len())], 1 + next(5) as u32),
            };
            let format = ArrayFormat::ALL[next(8)];
            let full = texture_desc_checked(&d, kind, format, 1);
            if plainly_valid(&d, kind, format) {
                quick += 1;
                let full = full
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{d:?} {kind:?} {e}"));
                assert_eq!(bits(&to_sys(&d, 0.0)), bits(full), "{d:?} {kind:?}");
            }
            match (texture_desc(&d, kind, format, 1), full) {
                (Ok(a), Ok(b)) => assert_eq!(bits(&a), bits(&b), "{d:?} {kind:?}"),
                (Err(a), Err(b)) => assert_eq!(a, b),
                (a, b) => panic!("{d:?} {kind:?} {format:?}: {a:?} against {b:?}"),
            }
        }
        assert!(quick > 30_000, "{quick} quickly accepted");
    }
}
