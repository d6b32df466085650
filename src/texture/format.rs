//! Texel formats: the Rust types a CUDA array or texture holds, and channel descriptions
//! (`cudaChannelFormatDesc`, `cudaCreateChannelDesc`, `cudaGetChannelDesc`).
//!
//! A texel type is one of the scalars `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, [`half::f16`] and
//! `f32`, or a 2- or 4-element array of one of them (`[u8; 4]` is CUDA's `uchar4`, `[f32; 2]` its
//! `float2`). Three channels do not exist for CUDA arrays (libcudart refuses them with
//! `cudaErrorInvalidChannelDescriptor`): `[T; 3]` is not a texel type, and a three-channel
//! [`ChannelDesc`] is refused.

use crate::driver::sys;
use crate::error::{Error, Result};
use crate::memory::DeviceRepr;

/// The format of one channel of a texel (`CUarray_format`; the runtime's channel kind and bit
/// count together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayFormat {
    /// 8-bit unsigned integer (`CU_AD_FORMAT_UNSIGNED_INT8`).
    U8,
    /// 16-bit unsigned integer (`CU_AD_FORMAT_UNSIGNED_INT16`).
    U16,
    /// 32-bit unsigned integer (`CU_AD_FORMAT_UNSIGNED_INT32`).
    U32,
    /// 8-bit signed integer (`CU_AD_FORMAT_SIGNED_INT8`).
    I8,
    /// 16-bit signed integer (`CU_AD_FORMAT_SIGNED_INT16`).
    I16,
    /// 32-bit signed integer (`CU_AD_FORMAT_SIGNED_INT32`).
    I32,
    /// 16-bit IEEE float (`CU_AD_FORMAT_HALF`): read by kernels as 32-bit floats.
    F16,
    /// 32-bit IEEE float (`CU_AD_FORMAT_FLOAT`).
    F32,
}

impl ArrayFormat {
    /// Every format, in the driver's numbering order.
    pub const ALL: [ArrayFormat; 8] = [
        ArrayFormat::U8,
        ArrayFormat::U16,
        ArrayFormat::U32,
        ArrayFormat::I8,
        ArrayFormat::I16,
        ArrayFormat::I32,
        ArrayFormat::F16,
        ArrayFormat::F32,
    ];

    /// The driver's number (`CUarray_format`).
    pub const fn raw(self) -> u32 {
        match self {
            ArrayFormat::U8 => 0x01,
            ArrayFormat::U16 => 0x02,
            ArrayFormat::U32 => 0x03,
            ArrayFormat::I8 => 0x08,
            ArrayFormat::I16 => 0x09,
            ArrayFormat::I32 => 0x0a,
            ArrayFormat::F16 => 0x10,
            ArrayFormat::F32 => 0x20,
        }
    }

    /// The format with the driver's number `raw`, if it is one of these.
    pub fn from_raw(raw: u32) -> Option<ArrayFormat> {
        ArrayFormat::ALL.into_iter().find(|f| f.raw() == raw)
    }

    /// The driver's enum value. Only ever built from [`ArrayFormat::raw`]'s known values.
    pub(crate) fn to_sys(self) -> sys::CUarray_format {
        use sys::CUarray_format::*;
        match self {
            ArrayFormat::U8 => CU_AD_FORMAT_UNSIGNED_INT8,
            ArrayFormat::U16 => CU_AD_FORMAT_UNSIGNED_INT16,
            ArrayFormat::U32 => CU_AD_FORMAT_UNSIGNED_INT32,
            ArrayFormat::I8 => CU_AD_FORMAT_SIGNED_INT8,
            ArrayFormat::I16 => CU_AD_FORMAT_SIGNED_INT16,
            ArrayFormat::I32 => CU_AD_FORMAT_SIGNED_INT32,
            ArrayFormat::F16 => CU_AD_FORMAT_HALF,
            ArrayFormat::F32 => CU_AD_FORMAT_FLOAT,
        }
    }

    /// Bytes of one channel.
    pub const fn bytes(self) -> usize {
        match self {
            ArrayFormat::U8 | ArrayFormat::I8 => 1,
            ArrayFormat::U16 | ArrayFormat::I16 | ArrayFormat::F16 => 2,
            ArrayFormat::U32 | ArrayFormat::I32 | ArrayFormat::F32 => 4,
        }
    }

    /// The runtime's channel kind.
    pub const fn kind(self) -> ChannelFormatKind {
        match self {
            ArrayFormat::U8 | ArrayFormat::U16 | ArrayFormat::U32 => ChannelFormatKind::Unsigned,
            ArrayFormat::I8 | ArrayFormat::I16 | ArrayFormat::I32 => ChannelFormatKind::Signed,
            ArrayFormat::F16 | ArrayFormat::F32 => ChannelFormatKind::Float,
        }
    }

    /// Whether a texture may read it as normalised floats (8- and 16-bit integers only: 32-bit
    /// integers are never promoted, and floats are floats already).
    pub const fn normalizable(self) -> bool {
        matches!(
            self,
            ArrayFormat::U8 | ArrayFormat::U16 | ArrayFormat::I8 | ArrayFormat::I16
        )
    }

    /// Whether it is a float format.
    pub const fn is_float(self) -> bool {
        matches!(self, ArrayFormat::F16 | ArrayFormat::F32)
    }
}

/// The kind of a channel (`cudaChannelFormatKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelFormatKind {
    /// `cudaChannelFormatKindSigned` (0).
    Signed,
    /// `cudaChannelFormatKindUnsigned` (1).
    Unsigned,
    /// `cudaChannelFormatKindFloat` (2).
    Float,
    /// `cudaChannelFormatKindNone` (3): no channels.
    None,
}

impl ChannelFormatKind {
    /// The runtime's number.
    pub const fn raw(self) -> u32 {
        match self {
            ChannelFormatKind::Signed => 0,
            ChannelFormatKind::Unsigned => 1,
            ChannelFormatKind::Float => 2,
            ChannelFormatKind::None => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ChannelFormatKind::Signed => "signed",
            ChannelFormatKind::Unsigned => "unsigned",
            ChannelFormatKind::Float => "float",
            ChannelFormatKind::None => "none",
        }
    }
}

/// A channel description (`cudaChannelFormatDesc`): bits per channel and the channels' kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChannelDesc {
    /// Bits of the first channel.
    pub x: i32,
    /// Bits of the second channel (0: absent).
    pub y: i32,
    /// Bits of the third channel (0: absent).
    pub z: i32,
    /// Bits of the fourth channel (0: absent).
    pub w: i32,
    /// The channels' kind.
    pub kind: ChannelFormatKind,
}

impl ChannelDesc {
    /// A channel description from its parts (`cudaCreateChannelDesc(x, y, z, w, f)`). Any values
    /// are accepted here; [`format`](Self::format) says whether an array can hold them.
    #[doc(alias = "cudaCreateChannelDesc")]
    pub const fn new(x: i32, y: i32, z: i32, w: i32, kind: ChannelFormatKind) -> ChannelDesc {
        ChannelDesc { x, y, z, w, kind }
    }

    /// The description of texel type `T` (`cudaCreateChannelDesc<T>()`).
    ///
    /// ```
    /// use cuda_runtime::{ChannelDesc, ChannelFormatKind};
    /// assert_eq!(
    ///     ChannelDesc::of::<[u8; 4]>(),
    ///     ChannelDesc::new(8, 8, 8, 8, ChannelFormatKind::Unsigned)
    /// );
    /// assert_eq!(ChannelDesc::of::<f32>(), ChannelDesc::new(32, 0, 0, 0, ChannelFormatKind::Float));
    /// ```
    #[doc(alias = "cudaCreateChannelDesc")]
    pub fn of<T: Texel>() -> ChannelDesc {
        ChannelDesc::from_format(T::FORMAT, T::CHANNELS)
    }

    /// The description of `channels` channels of `format` (as `cudaGetChannelDesc` reports an
    /// array's).
    pub fn from_format(format: ArrayFormat, channels: u32) -> ChannelDesc {
        let bits = 8 * format.bytes() as i32;
        let b = |i: u32| if channels > i { bits } else { 0 };
        ChannelDesc::new(b(0), b(1), b(2), b(3), format.kind())
    }

    /// The array format and channel count this describes.
    ///
    /// # Errors
    /// [`Error::InvalidChannelDesc`] (`cudaErrorInvalidChannelDescriptor`) for three channels,
    /// channels of different sizes, gaps (a `w` without `z`), sizes the kind has no format for
    /// (such as 64 bits, or 8-bit floats), and the kind `None`.
    pub fn format(&self) -> Result<(ArrayFormat, u32)> {
        let bad = |reason| Error::InvalidChannelDesc {
            x: self.x,
            y: self.y,
            z: self.z,
            w: self.w,
            kind: self.kind.name().into(),
            reason,
        };
        let bits = [self.x, self.y, self.z, self.w];
        let channels = bits.iter().take_while(|&&b| b != 0).count();
        if bits[channels..].iter().any(|&b| b != 0) {
            return Err(bad(
                "the channels present must be the first ones, without gaps",
            ));
        }
        if bits.iter().any(|&b| b < 0) {
            return Err(bad("a channel cannot have a negative size"));
        }
        match channels {
            0 => return Err(bad("no channel has a size")),
            3 => return Err(bad("CUDA arrays have 1, 2 or 4 channels, never 3")),
            _ => {}
        }
        if bits[..channels].iter().any(|&b| b != self.x) {
            return Err(bad("every channel must have the same size"));
        }
        use ArrayFormat::*;
        let format = match (self.kind, self.x) {
            (ChannelFormatKind::Unsigned, 8) => U8,
            (ChannelFormatKind::Unsigned, 16) => U16,
            (ChannelFormatKind::Unsigned, 32) => U32,
            (ChannelFormatKind::Signed, 8) => I8,
            (ChannelFormatKind::Signed, 16) => I16,
            (ChannelFormatKind::Signed, 32) => I32,
            (ChannelFormatKind::Float, 16) => F16,
            (ChannelFormatKind::Float, 32) => F32,
            (ChannelFormatKind::None, _) => return Err(bad("the kind None has no format")),
            _ => {
                return Err(bad(
                    "no CUDA array format has channels of this kind and size",
                ))
            }
        };
        Ok((format, channels as u32))
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// One channel of a texel: `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, [`half::f16`] or `f32`
/// (sealed).
pub trait TexelScalar: DeviceRepr + Default + PartialEq + std::fmt::Debug + sealed::Sealed {
    /// The channel's format.
    const FORMAT: ArrayFormat;
    /// The value as a float: exact for every type but `u32` and `i32` beyond 2^24.
    fn to_f32(self) -> f32;
    /// The value read as a normalised float, as a texture with
    /// [`ReadMode::NormalizedFloat`](crate::ReadMode::NormalizedFloat) reads it: unsigned
    /// integers map to \[0, 1\] (`v / MAX`), signed ones to \[-1, 1\] (`max(v / MAX, -1)`); floats
    /// and 32-bit integers are not normalised (their [`to_f32`](Self::to_f32)).
    fn to_normalized(self) -> f32;
    /// A value from a float, for tests and examples: rounded and saturated for integers.
    fn from_f32(v: f32) -> Self;
}

/// A texel type: a [`TexelScalar`] or a 2- or 4-element array of one (sealed). Its size is the
/// element size of the array (channels times channel bytes).
pub trait Texel: DeviceRepr + PartialEq + std::fmt::Debug + sealed::Sealed {
    /// The channels' type.
    type Scalar: TexelScalar;
    /// The channels' format.
    const FORMAT: ArrayFormat;
    /// 1, 2 or 4.
    const CHANNELS: u32;
    /// The channels, in order.
    fn channels(&self) -> &[Self::Scalar];
    /// A texel from its channels (missing ones are zero, extra ones ignored).
    fn from_channels(c: &[Self::Scalar]) -> Self;
}

macro_rules! scalar {
    ($t:ty, $f:ident, |$v:ident| $norm:expr, |$x:ident| $from:expr) => {
        impl sealed::Sealed for $t {}
        impl TexelScalar for $t {
            const FORMAT: ArrayFormat = ArrayFormat::$f;
            #[inline]
            fn to_f32(self) -> f32 {
                #[allow(clippy::unnecessary_cast)]
                let r = self as f32;
                r
            }
            #[inline]
            fn to_normalized(self) -> f32 {
                let $v = self;
                $norm
            }
            #[inline]
            fn from_f32($x: f32) -> Self {
                $from
            }
        }
        impl sealed::Sealed for [$t; 2] {}
        impl sealed::Sealed for [$t; 4] {}
        texel!($t, 1, $f);
        texel!([$t; 2], 2, $f);
        texel!([$t; 4], 4, $f);
    };
}

macro_rules! texel {
    ([$t:ty; $n:literal], $_n:literal, $f:ident) => {
        impl Texel for [$t; $n] {
            type Scalar = $t;
            const FORMAT: ArrayFormat = ArrayFormat::$f;
            const CHANNELS: u32 = $n;
            fn channels(&self) -> &[$t] {
                self
            }
            fn from_channels(c: &[$t]) -> Self {
                let mut out = [<$t>::default(); $n];
                for (o, v) in out.iter_mut().zip(c) {
                    *o = *v;
                }
                out
            }
        }
    };
    ($t:ty, 1, $f:ident) => {
        impl Texel for $t {
            type Scalar = $t;
            const FORMAT: ArrayFormat = ArrayFormat::$f;
            const CHANNELS: u32 = 1;
            fn channels(&self) -> &[$t] {
                std::slice::from_ref(self)
            }
            fn from_channels(c: &[$t]) -> Self {
                c.first().copied().unwrap_or_default()
            }
        }
    };
}

scalar!(
    u8,
    U8,
    |v| v as f32 / 255.0,
    |x| x.round().clamp(0.0, 255.0) as u8
);
scalar!(
    u16,
    U16,
    |v| v as f32 / 65535.0,
    |x| x.round().clamp(0.0, 65535.0) as u16
);
scalar!(u32, U32, |v| v as f32, |x| x.round().max(0.0) as u32);
scalar!(
    i8,
    I8,
    |v| (v as f32 / 127.0).max(-1.0),
    |x| x.round().clamp(-128.0, 127.0) as i8
);
scalar!(
    i16,
    I16,
    |v| (v as f32 / 32767.0).max(-1.0),
    |x| x.round().clamp(-32768.0, 32767.0) as i16
);
scalar!(i32, I32, |v| v as f32, |x| x.round() as i32);
scalar!(f32, F32, |v| v, |x| x);

impl sealed::Sealed for half::f16 {}
impl TexelScalar for half::f16 {
    const FORMAT: ArrayFormat = ArrayFormat::F16;
    #[inline]
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    #[inline]
    fn to_normalized(self) -> f32 {
        half::f16::to_f32(self)
    }
    #[inline]
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
}
impl sealed::Sealed for [half::f16; 2] {}
impl sealed::Sealed for [half::f16; 4] {}
texel!(half::f16, 1, F16);
texel!([half::f16; 2], 2, F16);
texel!([half::f16; 4], 4, F16);

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    fn row<T: Texel>() -> (ArrayFormat, u32, usize, ChannelDesc) {
        (
            T::FORMAT,
            T::CHANNELS,
            size_of::<T>(),
            ChannelDesc::of::<T>(),
        )
    }

    /// Every texel type against its format, channel count, element size and channel
    /// description, written out by hand (cust maps f32 to half: never that).
    #[test]
    fn every_texel_type_is_pinned_to_its_format() {
        use ArrayFormat::*;
        use ChannelFormatKind::*;
        let d = ChannelDesc::new;
        type Row = (ArrayFormat, u32, usize, ChannelDesc);
        let table: Vec<(Row, Row)> = vec![
            (row::<u8>(), (U8, 1, 1, d(8, 0, 0, 0, Unsigned))),
            (row::<[u8; 2]>(), (U8, 2, 2, d(8, 8, 0, 0, Unsigned))),
            (row::<[u8; 4]>(), (U8, 4, 4, d(8, 8, 8, 8, Unsigned))),
            (row::<i8>(), (I8, 1, 1, d(8, 0, 0, 0, Signed))),
            (row::<[i8; 2]>(), (I8, 2, 2, d(8, 8, 0, 0, Signed))),
            (row::<[i8; 4]>(), (I8, 4, 4, d(8, 8, 8, 8, Signed))),
            (row::<u16>(), (U16, 1, 2, d(16, 0, 0, 0, Unsigned))),
            (row::<[u16; 2]>(), (U16, 2, 4, d(16, 16, 0, 0, Unsigned))),
            (row::<[u16; 4]>(), (U16, 4, 8, d(16, 16, 16, 16, Unsigned))),
            (row::<i16>(), (I16, 1, 2, d(16, 0, 0, 0, Signed))),
            (row::<[i16; 2]>(), (I16, 2, 4, d(16, 16, 0, 0, Signed))),
            (row::<[i16; 4]>(), (I16, 4, 8, d(16, 16, 16, 16, Signed))),
            (row::<u32>(), (U32, 1, 4, d(32, 0, 0, 0, Unsigned))),
            (row::<[u32; 2]>(), (U32, 2, 8, d(32, 32, 0, 0, Unsigned))),
            (row::<[u32; 4]>(), (U32, 4, 16, d(32, 32, 32, 32, Unsigned))),
            (row::<i32>(), (I32, 1, 4, d(32, 0, 0, 0, Signed))),
            (row::<[i32; 2]>(), (I32, 2, 8, d(32, 32, 0, 0, Signed))),
            (row::<[i32; 4]>(), (I32, 4, 16, d(32, 32, 32, 32, Signed))),
            (row::<half::f16>(), (F16, 1, 2, d(16, 0, 0, 0, Float))),
            (row::<[half::f16; 2]>(), (F16, 2, 4, d(16, 16, 0, 0, Float))),
            (
                row::<[half::f16; 4]>(),
                (F16, 4, 8, d(16, 16, 16, 16, Float)),
            ),
            (row::<f32>(), (F32, 1, 4, d(32, 0, 0, 0, Float))),
            (row::<[f32; 2]>(), (F32, 2, 8, d(32, 32, 0, 0, Float))),
            (row::<[f32; 4]>(), (F32, 4, 16, d(32, 32, 32, 32, Float))),
        ];
        for (got, want) in &table {
            assert_eq!(got, want);
            // The element size is the channels' bytes.
            assert_eq!(got.2, got.0.bytes() * got.1 as usize);
            // The description round-trips to the format.
            assert_eq!(got.3.format().unwrap(), (got.0, got.1));
            assert_eq!(ChannelDesc::from_format(got.0, got.1), got.3);
        }
        // The driver's numbers (cuda.h, CUarray_format).
        let raw: Vec<u32> = ArrayFormat::ALL.iter().map(|f| f.raw()).collect();
        assert_eq!(raw, [1, 2, 3, 8, 9, 10, 16, 32]);
        for f in ArrayFormat::ALL {
            assert_eq!(f.to_sys() as u32, f.raw());
            assert_eq!(ArrayFormat::from_raw(f.raw()), Some(f));
        }
        assert_eq!(ArrayFormat::from_raw(0xb0), Option::None);
    }

    #[test]
    fn channel_descriptions_the_runtime_refuses_are_errors_naming_them() {
        use ChannelFormatKind::*;
        for (desc, why) in [
            (ChannelDesc::new(32, 32, 32, 0, Float), "never 3"),
            (ChannelDesc::new(8, 8, 8, 0, Unsigned), "never 3"),
            (ChannelDesc::new(8, 0, 8, 0, Unsigned), "gaps"),
            (ChannelDesc::new(8, 16, 0, 0, Unsigned), "same size"),
            (ChannelDesc::new(64, 0, 0, 0, Float), "kind and size"),
            (ChannelDesc::new(8, 0, 0, 0, Float), "kind and size"),
            (ChannelDesc::new(0, 0, 0, 0, Float), "no channel"),
            (ChannelDesc::new(8, 0, 0, 0, None), "None"),
            (ChannelDesc::new(-8, 0, 0, 0, Signed), "negative"),
        ] {
            let e = desc.format().unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::InvalidChannelDescriptor, "{e}");
            let s = e.to_string();
            assert!(s.contains(why), "{desc:?}: {s}");
            assert!(s.contains(&desc.x.to_string()), "{s}");
        }
    }

    #[test]
    fn normalised_conversions_match_the_programming_guide() {
        assert_eq!(255u8.to_normalized(), 1.0);
        assert_eq!(0u8.to_normalized(), 0.0);
        assert_eq!(65535u16.to_normalized(), 1.0);
        assert_eq!(127i8.to_normalized(), 1.0);
        assert_eq!((-127i8).to_normalized(), -1.0);
        // -128 would be below -1: clamped.
        assert_eq!((-128i8).to_normalized(), -1.0);
        assert_eq!((-32768i16).to_normalized(), -1.0);
        assert_eq!(32767i16.to_normalized(), 1.0);
        assert_eq!(7u32.to_normalized(), 7.0);
        assert_eq!(half::f16::from_f32(0.5).to_normalized(), 0.5);
        assert_eq!(<[u8; 4]>::from_channels(&[1, 2]), [1, 2, 0, 0]);
        assert_eq!(<u8>::from_f32(300.0), 255);
        assert_eq!(<i8>::from_f32(-300.0), -128);
    }
}
