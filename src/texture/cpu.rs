//! A CPU model of the texture unit: what a kernel's `tex1D` / `tex2D` / `tex3D` /
//! `tex1DLayered` / `tex2DLayered` / `texCubemap` / `tex2Dgather` returns for a texture over an
//! array, following the CUDA programming guide's appendix on texture fetching. The crate's GPU
//! tests compare the hardware with it; it is public so that programs can check their own
//! textures the same way.
//!
//! What is modelled:
//!
//! * **Addressing** per dimension: clamp, border, and with normalised coordinates wrap and
//!   mirror; layer indices are clamped to the layers there are.
//! * **Point filtering**: the texel containing the coordinate (texel `i` covers `[i, i + 1)`).
//! * **Linear filtering**: `x - 0.5` split into a texel index and a fraction, the fraction held,
//!   as the hardware holds it, in 9-bit fixed point with 8 fractional bits (rounded to the
//!   nearest 1/256), then the 2, 4 or 8 texels blended. The hardware may take another 1/256
//!   step of a weight than the model, even where the coordinate's fraction is a multiple of
//!   1/256 (seen on the H200): an error of up to 1/256 of the difference between neighbouring
//!   texels per filtered axis. The blend itself is
//!   computed in `f64` and rounded to `f32`: the hardware's arithmetic may differ in the last
//!   bits.
//! * **1-D linear filtering** of 1-D arrays as the hardware does it (seen on the H200): as 2-D
//!   filtering at y = 0 over one row (layered 1-D arrays are filtered along x only), so that with the y address mode [`AddressMode::Border`] half of each
//!   result is the border colour; with any other y mode the row itself.
//! * **The border colour** of normalised 8- and 16-bit integer reads held in the texel's
//!   format (seen on the H200): rounded here to the nearest `k / MAX`. The hardware's rounding
//!   of a colour between two steps differs (0.417 read back from `i8` as 53/127, -0.5317 as
//!   -67/127): a colour on a step (`k / MAX`) is exact in both.
//! * **Read modes**: element type (floats, and fp16 promoted to float), and normalised floats
//!   for 8- and 16-bit integers (`v / MAX`, signed values clamped at -1); **sRGB** to linear
//!   conversion of the first three channels of 8-bit texels before filtering (by the sRGB
//!   formula: the hardware's conversion differed from it by up to 0.0016 on the H200).
//! * **Cubemaps**: the face and face coordinates of a direction (the guide's table), then 2-D
//!   addressing on that face (without seamless filtering).
//! * **Gather** (`tex2Dgather`): one channel of the four texels bilinear filtering would use, in
//!   the order (i0, j1), (i1, j1), (i1, j0), (i0, j0).
//!
//! Channels a texel does not have read as 0 here; compare only the channels the texel has.

use super::format::{ArrayFormat, Texel, TexelScalar};
use super::{texture_desc, AddressMode, FilterMode, ReadMode, ResKind, TextureDesc};
use crate::error::{Error, Result};
use crate::memory::ArrayShape;

/// A texture over texels held on the CPU, laid out as an [`Array`](crate::Array) of `shape`
/// holds them (x fastest, then rows, then slices, layers or faces), sampled as the hardware
/// samples a texture object made with `desc`.
#[derive(Debug, Clone)]
pub struct CpuTexture<'a, T: Texel> {
    data: &'a [T],
    shape: ArrayShape,
    desc: TextureDesc,
    dims: [usize; 3],
}

/// Which texel an axis resolves to (`None`: the border colour).
type Idx = Option<usize>;

/// The 8-bit fractional weight the hardware uses for the fraction `a` (in \[0, 1)).
pub fn quantize_weight(a: f32) -> f32 {
    (a * 256.0).round() / 256.0
}

/// sRGB to linear (the sRGB standard's formula).
pub fn srgb_to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// The cubemap face (0 to 5: +x, -x, +y, -y, +z, -z) a direction points to, and the
/// normalised coordinates (s, t) on it (the programming guide's cubemap fetch table).
pub fn cubemap_face(x: f32, y: f32, z: f32) -> (usize, f32, f32) {
    let (ax, ay, az) = (x.abs(), y.abs(), z.abs());
    let h = |v: f32, m: f32| (v / m + 1.0) * 0.5;
    if ax >= ay && ax >= az {
        if x >= 0.0 {
            (0, h(-z, ax), h(-y, ax))
        } else {
            (1, h(z, ax), h(-y, ax))
        }
    } else if ay >= az {
        if y >= 0.0 {
            (2, h(x, ay), h(z, ay))
        } else {
            (3, h(x, ay), h(-z, ay))
        }
    } else if z >= 0.0 {
        (4, h(x, az), h(-y, az))
    } else {
        (5, h(-x, az), h(-y, az))
    }
}

/// A direction that points to face `face` at normalised coordinates (s, t) (the inverse of
/// [`cubemap_face`]; the major axis has length 1).
pub fn cubemap_direction(face: usize, s: f32, t: f32) -> [f32; 3] {
    let (u, v) = (2.0 * s - 1.0, 2.0 * t - 1.0);
    match face {
        0 => [1.0, -v, -u],
        1 => [-1.0, -v, u],
        2 => [u, 1.0, v],
        3 => [u, -1.0, -v],
        4 => [u, -v, 1.0],
        _ => [-u, -v, -1.0],
    }
}

impl<'a, T: Texel> CpuTexture<'a, T> {
    /// A texture over `data`, laid out as an array of `shape`, sampled as with `desc`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `data` does not hold the shape's texels; the errors of
    /// creating a texture object with `desc` (the model models valid descriptions only).
    pub fn new(data: &'a [T], shape: ArrayShape, desc: TextureDesc) -> Result<CpuTexture<'a, T>> {
        texture_desc(&desc, ResKind::Array(shape), T::FORMAT, T::CHANNELS)?;
        let e = shape.extent();
        // (Zero-sized shapes have no texel to sample: refused, not a panic later.)
        let len = e
            .width
            .checked_mul(e.height)
            .and_then(|n| n.checked_mul(e.depth))
            .filter(|&n| n > 0)
            .ok_or_else(|| Error::InvalidValue {
                what: "CpuTexture::new extent",
                value: format!("{} x {} x {}", e.width, e.height, e.depth),
                reason: "every dimension must be at least 1 and the texel count fit in usize",
            })?;
        if data.len() != len {
            return Err(Error::LengthMismatch {
                what: "CpuTexture::new",
                expected: len,
                actual: data.len(),
            });
        }
        Ok(CpuTexture {
            data,
            shape,
            desc,
            dims: [e.width, e.height, e.depth],
        })
    }

    /// The texel at (x, y, z) (z: slice, layer or face), as the texture reads it: converted by
    /// the read mode and sRGB, missing channels 0.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] naming the axis when x, y or z is outside the shape's extent
    /// (review finding: an x past the row read a texel of the next row, and larger values
    /// panicked on the index or its arithmetic).
    pub fn texel(&self, x: usize, y: usize, z: usize) -> Result<[f32; 4]> {
        for (what, v, n) in [
            ("CpuTexture::texel x", x, self.dims[0]),
            ("CpuTexture::texel y", y, self.dims[1]),
            (
                "CpuTexture::texel z (slice, layer or face)",
                z,
                self.dims[2],
            ),
        ] {
            if v >= n {
                return Err(Error::OutOfRange {
                    what,
                    start: v,
                    end: v.saturating_add(1),
                    len: n,
                });
            }
        }
        Ok(self.texel_at(x, y, z))
    }

    /// [`texel`](Self::texel) at coordinates the addressing produced (within the extent).
    fn texel_at(&self, x: usize, y: usize, z: usize) -> [f32; 4] {
        let t = &self.data[(z * self.dims[1] + y) * self.dims[0] + x];
        let mut out = [0f32; 4];
        let norm = self.desc.read_mode == ReadMode::NormalizedFloat;
        for (o, c) in out.iter_mut().zip(t.channels()) {
            *o = if norm { c.to_normalized() } else { c.to_f32() };
        }
        if self.desc.srgb {
            for o in out.iter_mut().take(3) {
                *o = srgb_to_linear(*o);
            }
        }
        out
    }

    fn texel_or_border(&self, x: Idx, y: Idx, z: usize) -> [f32; 4] {
        match (x, y) {
            (Some(x), Some(y)) => self.texel_at(x, y, z),
            _ => self.border(),
        }
    }

    /// The border colour as the texture reads it: for normalised reads of 8- and 16-bit
    /// integers, held in the texel's format (rounded to the nearest `k / MAX`, seen on the
    /// H200: a border of 0.41708 read back from `i8` texels as 53/127); as given otherwise.
    fn border(&self) -> [f32; 4] {
        let max = match T::FORMAT {
            ArrayFormat::U8 => 255.0,
            ArrayFormat::U16 => 65535.0,
            ArrayFormat::I8 => 127.0,
            ArrayFormat::I16 => 32767.0,
            _ => return self.desc.border_color,
        };
        if self.desc.read_mode != ReadMode::NormalizedFloat {
            return self.desc.border_color;
        }
        let lo = if matches!(T::FORMAT, ArrayFormat::I8 | ArrayFormat::I16) {
            -1.0
        } else {
            0.0
        };
        self.desc
            .border_color
            .map(|c| ((c * max).round() / max).clamp(lo, 1.0))
    }

    /// The texel coordinate `c` maps to on an axis of `n` texels, before addressing.
    fn scaled(&self, c: f32, n: usize) -> f32 {
        if self.desc.normalized_coords {
            c * n as f32
        } else {
            c
        }
    }

    fn address(mode: AddressMode, i: i64, n: usize) -> Idx {
        let n = n as i64;
        match mode {
            AddressMode::Clamp => Some(i.clamp(0, n - 1) as usize),
            AddressMode::Border => (0..n).contains(&i).then_some(i as usize),
            AddressMode::Wrap => Some(i.rem_euclid(n) as usize),
            AddressMode::Mirror => {
                let m = i.rem_euclid(2 * n);
                Some((if m >= n { 2 * n - 1 - m } else { m }) as usize)
            }
        }
    }

    fn floor(u: f32) -> i64 {
        // Saturating: coordinates far outside still address (clamp or border) sanely.
        u.floor().clamp(-(1i64 << 40) as f32, (1i64 << 40) as f32) as i64
    }

    /// Point sampling on one axis.
    fn point_axis(&self, c: f32, n: usize, mode: AddressMode) -> Idx {
        Self::address(mode, Self::floor(self.scaled(c, n)), n)
    }

    /// Linear filtering on one axis: the two texels and the quantised weight of the second.
    fn linear_axis(&self, c: f32, n: usize, mode: AddressMode) -> (Idx, Idx, f32) {
        let u = self.scaled(c, n) - 0.5;
        let i = Self::floor(u);
        let a = quantize_weight(u - u.floor());
        (Self::address(mode, i, n), Self::address(mode, i + 1, n), a)
    }

    fn layer(&self, layer: usize) -> usize {
        layer.min(self.dims[2] - 1)
    }

    /// Samples at up to three coordinates (`coords.len()` dimensions) in slice `z0` (for 1-D
    /// and 2-D kinds: the layer or face).
    fn sample(&self, coords: &[f32], z0: usize) -> [f32; 4] {
        let m = self.desc.address_mode;
        let d = coords.len();
        let n = [
            self.dims[0],
            if d >= 2 { self.dims[1] } else { 1 },
            self.dims[2],
        ];
        if self.desc.filter_mode == FilterMode::Point {
            let x = self.point_axis(coords[0], n[0], m[0]);
            let y = if d >= 2 {
                self.point_axis(coords[1], n[1], m[1])
            } else {
                Some(0)
            };
            let z = if d >= 3 {
                self.point_axis(coords[2], n[2], m[2])
            } else {
                Some(z0)
            };
            return match z {
                Some(z) => self.texel_or_border(x, y, z),
                None => self.border(),
            };
        }
        let ax = self.linear_axis(coords[0], n[0], m[0]);
        // A 1-D fetch of a (not layered) 1-D array filters as a 2-D one at y = 0 on one row
        // (seen on the H200): half of the row below it, which is the row itself unless the y
        // address mode is border, where it is the border colour. (Layered 1-D fetches do not.)
        let ay = if d >= 2 {
            self.linear_axis(coords[1], n[1], m[1])
        } else if matches!(self.shape, ArrayShape::D1 { .. }) {
            self.linear_axis(0.0, 1, m[1])
        } else {
            (Some(0), Some(0), 0.0)
        };
        let az = if d >= 3 {
            self.linear_axis(coords[2], n[2], m[2])
        } else {
            (Some(z0), Some(z0), 0.0)
        };
        let mut acc = [0f64; 4];
        for (zi, wz) in [(az.0, 1.0 - az.2), (az.1, az.2)] {
            for (yi, wy) in [(ay.0, 1.0 - ay.2), (ay.1, ay.2)] {
                for (xi, wx) in [(ax.0, 1.0 - ax.2), (ax.1, ax.2)] {
                    let w = wx as f64 * wy as f64 * wz as f64;
                    if w == 0.0 {
                        continue;
                    }
                    let t = match zi {
                        Some(z) => self.texel_or_border(xi, yi, z),
                        None => self.border(),
                    };
                    for (a, v) in acc.iter_mut().zip(t) {
                        *a += w * v as f64;
                    }
                }
            }
        }
        acc.map(|v| v as f32)
    }

    /// `tex1D(x)` on a 1-D array.
    pub fn sample_1d(&self, x: f32) -> [f32; 4] {
        self.sample(&[x], 0)
    }

    /// `tex1DLayered(x, layer)`.
    pub fn sample_1d_layered(&self, x: f32, layer: usize) -> [f32; 4] {
        self.sample(&[x], self.layer(layer))
    }

    /// `tex2D(x, y)`.
    pub fn sample_2d(&self, x: f32, y: f32) -> [f32; 4] {
        self.sample(&[x, y], 0)
    }

    /// `tex2DLayered(x, y, layer)`.
    pub fn sample_2d_layered(&self, x: f32, y: f32, layer: usize) -> [f32; 4] {
        self.sample(&[x, y], self.layer(layer))
    }

    /// `tex3D(x, y, z)`.
    pub fn sample_3d(&self, x: f32, y: f32, z: f32) -> [f32; 4] {
        self.sample(&[x, y, z], 0)
    }

    /// `texCubemap(x, y, z)`: the face the direction points to, sampled at its (s, t) as
    /// normalised coordinates.
    pub fn sample_cubemap(&self, x: f32, y: f32, z: f32) -> [f32; 4] {
        self.sample_cubemap_layered(x, y, z, 0)
    }

    /// `texCubemapLayered(x, y, z, cube)`.
    pub fn sample_cubemap_layered(&self, x: f32, y: f32, z: f32, cube: usize) -> [f32; 4] {
        let (face, s, t) = cubemap_face(x, y, z);
        let face = self.layer(cube.saturating_mul(6).saturating_add(face));
        let w = self.dims[0] as f32;
        let mut flat = self.clone();
        flat.desc.normalized_coords = false;
        flat.desc.address_mode = [AddressMode::Clamp; 3];
        flat.sample(&[s * w, t * w], face)
    }

    /// `tex2Dgather(x, y, comp)`: channel `comp` of the four texels bilinear filtering at
    /// (x, y) would blend, in the order (i0, j1), (i1, j1), (i1, j0), (i0, j0).
    pub fn gather_2d(&self, x: f32, y: f32, comp: usize) -> [f32; 4] {
        let m = self.desc.address_mode;
        let (x0, x1, _) = self.linear_axis(x, self.dims[0], m[0]);
        let (y0, y1, _) = self.linear_axis(y, self.dims[1], m[1]);
        let c = comp.min(3);
        [
            self.texel_or_border(x0, y1, 0)[c],
            self.texel_or_border(x1, y1, 0)[c],
            self.texel_or_border(x1, y0, 0)[c],
            self.texel_or_border(x0, y0, 0)[c],
        ]
    }

    /// For element-type reads of integer texels (which are not floats): the index in the data
    /// of the texel point sampling at (x, y) in layer `layer` reads, or `None` for the border.
    pub fn point_index_2d(&self, x: f32, y: f32, layer: usize) -> Option<usize> {
        let m = self.desc.address_mode;
        let i = self.point_axis(x, self.dims[0], m[0])?;
        let j = self.point_axis(y, self.dims[1], m[1])?;
        Some((self.layer(layer) * self.dims[1] + j) * self.dims[0] + i)
    }

    /// The shape the data is laid out in.
    pub fn shape(&self) -> ArrayShape {
        self.shape
    }
}

/// Whether `format` read with `desc` gives floats (filtering allowed) — a convenience for
/// tests that pick random descriptions.
pub fn float_result(format: ArrayFormat, read: ReadMode) -> bool {
    format.is_float() || (read == ReadMode::NormalizedFloat && format.normalizable())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texels_outside_the_extent_are_errors_not_other_texels_or_panics() {
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let shape = ArrayShape::D2 {
            width: 2,
            height: 2,
        };
        let t = CpuTexture::new(&data, shape, TextureDesc::default()).unwrap();
        assert_eq!(t.texel(1, 1, 0).unwrap()[0], 4.0);
        // x = 2 was texel (0, 1), (9, 9, 9) an index panic, usize::MAX an overflow panic.
        for (x, y, z, axis) in [
            (2, 0, 0, "x"),
            (0, 2, 0, "y"),
            (0, 0, 1, "z"),
            (9, 9, 9, "x"),
            (usize::MAX, 1, 0, "x"),
            (0, usize::MAX, 0, "y"),
        ] {
            let e = t.texel(x, y, z).unwrap_err();
            assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
            assert!(e.to_string().contains(&format!("texel {axis}")), "{e}");
        }
    }

    #[test]
    fn empty_and_overflowing_shapes_are_errors_not_panics() {
        let d = TextureDesc::default();
        let e = CpuTexture::new(&[] as &[f32], ArrayShape::D1 { width: 0 }, d);
        assert!(matches!(e, Err(Error::InvalidValue { .. })), "{e:?}");
        let e = CpuTexture::new(
            &[0.0f32; 4],
            ArrayShape::D3 {
                width: usize::MAX,
                height: 2,
                depth: 2,
            },
            d,
        );
        assert!(e.is_err());
    }

    fn rng() -> fastrand::Rng {
        let seed = fastrand::u64(..);
        eprintln!("seed {seed}");
        fastrand::Rng::with_seed(seed)
    }

    fn desc(f: FilterMode, m: AddressMode, norm: bool) -> TextureDesc {
        TextureDesc {
            filter_mode: f,
            address_mode: [m; 3],
            normalized_coords: norm,
            border_color: [-7.0, -8.0, -9.0, -10.0],
            ..TextureDesc::default()
        }
    }

    #[test]
    fn point_sampling_reads_the_texel_containing_the_coordinate_in_every_mode() {
        let mut r = rng();
        let (w, h) = (r.usize(2..20), r.usize(2..20));
        let data: Vec<f32> = (0..w * h).map(|_| r.f32() * 100.0 - 50.0).collect();
        let shape = ArrayShape::D2 {
            width: w,
            height: h,
        };
        for m in [
            AddressMode::Clamp,
            AddressMode::Border,
            AddressMode::Wrap,
            AddressMode::Mirror,
        ] {
            let norm = matches!(m, AddressMode::Wrap | AddressMode::Mirror) || r.bool();
            let t = CpuTexture::new(&data, shape, desc(FilterMode::Point, m, norm)).unwrap();
            for _ in 0..200 {
                let (i, j) = (r.usize(0..w), r.usize(0..h));
                let (fx, fy) = (i as f32 + r.f32() * 0.99, j as f32 + r.f32() * 0.99);
                let (x, y) = if norm {
                    (fx / w as f32, fy / h as f32)
                } else {
                    (fx, fy)
                };
                assert_eq!(t.sample_2d(x, y)[0], data[j * w + i], "{m:?} at ({x}, {y})");
                assert_eq!(t.point_index_2d(x, y, 0), Some(j * w + i));
            }
        }
    }

    #[test]
    fn addressing_outside_clamps_borders_wraps_and_mirrors() {
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let shape = ArrayShape::D1 { width: 4 };
        let at = |m, norm, x| {
            CpuTexture::new(&data, shape, desc(FilterMode::Point, m, norm))
                .unwrap()
                .sample_1d(x)[0]
        };
        assert_eq!(at(AddressMode::Clamp, false, -3.0), 1.0);
        assert_eq!(at(AddressMode::Clamp, false, 9.5), 4.0);
        assert_eq!(at(AddressMode::Border, false, -0.01), -7.0);
        assert_eq!(at(AddressMode::Border, false, 4.0), -7.0);
        assert_eq!(at(AddressMode::Border, false, 3.99), 4.0);
        // Normalised: texel i covers [i/4, (i+1)/4).
        assert_eq!(at(AddressMode::Wrap, true, 1.3), 2.0);
        assert_eq!(at(AddressMode::Wrap, true, -0.1), 4.0);
        assert_eq!(at(AddressMode::Mirror, true, 1.1), 4.0);
        assert_eq!(at(AddressMode::Mirror, true, 1.9), 1.0);
        assert_eq!(at(AddressMode::Mirror, true, -0.1), 1.0);
        assert_eq!(at(AddressMode::Mirror, true, -0.3), 2.0);
    }

    #[test]
    fn linear_filtering_blends_with_8_bit_weights() {
        let data = [0.0f32, 1.0, 10.0];
        let t = CpuTexture::new(
            &data,
            ArrayShape::D1 { width: 3 },
            desc(FilterMode::Linear, AddressMode::Clamp, false),
        )
        .unwrap();
        // Texel centres give the texels.
        assert_eq!(t.sample_1d(0.5)[0], 0.0);
        assert_eq!(t.sample_1d(1.5)[0], 1.0);
        // Exact 1/256 positions: the exact blend.
        assert_eq!(t.sample_1d(0.5 + 77.0 / 256.0)[0], 77.0 / 256.0);
        assert_eq!(t.sample_1d(1.5 + 0.25)[0], 1.0 + 9.0 * 0.25);
        // Other fractions snap to the nearest 1/256.
        assert_eq!(t.sample_1d(0.5 + 0.3)[0], 77.0 / 256.0);
        // Clamped at the edges.
        assert_eq!(t.sample_1d(0.1)[0], 0.0);
        assert_eq!(t.sample_1d(3.4)[0], 10.0);
        assert_eq!(quantize_weight(0.999), 1.0);
        // A linear ramp is reproduced within the weight's quantisation in 2-D and 3-D.
        let mut r = rng();
        let (w, h, d) = (9, 7, 5);
        let ramp: Vec<f32> = (0..w * h * d)
            .map(|i| {
                let (x, y, z) = (i % w, (i / w) % h, i / (w * h));
                3.0 * x as f32 - 2.0 * y as f32 + 0.5 * z as f32
            })
            .collect();
        let t3 = CpuTexture::new(
            &ramp,
            ArrayShape::D3 {
                width: w,
                height: h,
                depth: d,
            },
            desc(FilterMode::Linear, AddressMode::Clamp, false),
        )
        .unwrap();
        for _ in 0..500 {
            let (x, y, z) = (
                0.5 + r.f32() * (w - 1) as f32,
                0.5 + r.f32() * (h - 1) as f32,
                0.5 + r.f32() * (d - 1) as f32,
            );
            let want = 3.0 * (x - 0.5) - 2.0 * (y - 0.5) + 0.5 * (z - 0.5);
            let got = t3.sample_3d(x, y, z)[0];
            // Each axis' weight is off by at most 1/512 of its step.
            let tol = (3.0 + 2.0 + 0.5) / 512.0 + 1e-4;
            assert!(
                (got - want).abs() <= tol,
                "({x}, {y}, {z}): {got} vs {want}"
            );
        }
    }

    #[test]
    fn border_texels_enter_the_blend() {
        let data = [8.0f32, 8.0];
        let t = CpuTexture::new(
            &data,
            ArrayShape::D1 { width: 2 },
            desc(FilterMode::Linear, AddressMode::Border, false),
        )
        .unwrap();
        // Half way between the border (-7) and texel 0 (8) on x, then half of that and half
        // the border again on y (the hardware filters a 1-D fetch at y = 0).
        assert_eq!(t.sample_1d(0.0)[0], 0.5 * 0.5 + 0.5 * -7.0);
        // With y clamped, only x blends with the border.
        let mut d = desc(FilterMode::Linear, AddressMode::Border, false);
        d.address_mode[1] = AddressMode::Clamp;
        let t = CpuTexture::new(&data, ArrayShape::D1 { width: 2 }, d).unwrap();
        assert_eq!(t.sample_1d(0.0)[0], 0.5);
        assert_eq!(t.sample_1d(1.0)[0], 8.0);
    }

    #[test]
    fn the_border_of_normalised_integer_reads_is_held_in_the_texel_format() {
        let data = [[0i8, 0]];
        let mut d = desc(FilterMode::Point, AddressMode::Border, false);
        d.read_mode = ReadMode::NormalizedFloat;
        d.border_color = [0.4170784, -0.8348, 2.0, -3.0];
        let t = CpuTexture::new(
            &data,
            ArrayShape::D2 {
                width: 1,
                height: 1,
            },
            d,
        )
        .unwrap();
        let b = t.sample_2d(-1.0, 0.5);
        assert_eq!(b[0], 53.0 / 127.0);
        assert_eq!(b[1], -106.0 / 127.0);
        assert_eq!(&b[2..], &[1.0, -1.0]);
        // Unsigned: [0, 1]; floats: as given.
        let du = [0u16];
        let tu = CpuTexture::new(&du, ArrayShape::D1 { width: 1 }, d).unwrap();
        assert_eq!(
            tu.sample_1d(-1.0)[0],
            (0.4170784f32 * 65535.0).round() / 65535.0
        );
        assert_eq!(tu.sample_1d(-1.0)[1], 0.0);
        let mut df = d;
        df.read_mode = ReadMode::ElementType;
        let f = [0f32];
        let tf = CpuTexture::new(&f, ArrayShape::D1 { width: 1 }, df).unwrap();
        assert_eq!(tf.sample_1d(-1.0), df.border_color);
    }

    #[test]
    fn normalised_reads_and_srgb() {
        let data = [[255u8, 128, 0, 64]];
        let d = TextureDesc {
            read_mode: ReadMode::NormalizedFloat,
            ..TextureDesc::default()
        };
        let shape = ArrayShape::D1 { width: 1 };
        let t = CpuTexture::new(&data, shape, d).unwrap();
        assert_eq!(
            t.texel(0, 0, 0).unwrap(),
            [1.0, 128.0 / 255.0, 0.0, 64.0 / 255.0]
        );
        let s = CpuTexture::new(&data, shape, TextureDesc { srgb: true, ..d }).unwrap();
        let v = s.texel(0, 0, 0).unwrap();
        assert_eq!(v[0], 1.0);
        assert!((v[1] - 0.215_860_5).abs() < 1e-6, "{}", v[1]);
        assert_eq!(v[3], 64.0 / 255.0, "alpha is not converted");
        let i = [-128i8, -127, 0, 127];
        let ti = CpuTexture::new(&i, ArrayShape::D1 { width: 4 }, d).unwrap();
        let got: Vec<f32> = (0..4).map(|x| ti.texel(x, 0, 0).unwrap()[0]).collect();
        assert_eq!(got, [-1.0, -1.0, 0.0, 1.0]);
        // Element-type reads of fp16 are the halves' values.
        let h = [half::f16::from_f32(1.5), half::f16::from_f32(-0.25)];
        let th = CpuTexture::new(&h, ArrayShape::D1 { width: 2 }, TextureDesc::default()).unwrap();
        assert_eq!(th.texel(1, 0, 0).unwrap()[0], -0.25);
        // The model refuses what the driver refuses.
        assert!(CpuTexture::new(
            &i,
            ArrayShape::D1 { width: 4 },
            TextureDesc {
                filter_mode: FilterMode::Linear,
                ..TextureDesc::default()
            }
        )
        .is_err());
        assert!(CpuTexture::new(&i, ArrayShape::D1 { width: 3 }, d).is_err());
    }

    #[test]
    fn cubemap_faces_follow_the_guide_and_directions_invert_them() {
        let mut r = rng();
        for _ in 0..1000 {
            let face = r.usize(0..6);
            let (s, t) = (0.01 + r.f32() * 0.98, 0.01 + r.f32() * 0.98);
            let [x, y, z] = cubemap_direction(face, s, t);
            let (f2, s2, t2) = cubemap_face(x, y, z);
            assert_eq!(f2, face);
            assert!((s - s2).abs() < 1e-6 && (t - t2).abs() < 1e-6);
        }
        // The guide's table, spot-checked: +x face, s from -z, t from -y.
        assert_eq!(cubemap_face(1.0, 0.0, -1.0 + 1e-3).0, 0);
        assert_eq!(cubemap_face(2.0, -1.0, -1.0), (0, 0.75, 0.75));
        assert_eq!(
            cubemap_face(0.5, -3.0, 1.5),
            (3, (0.5f32 / 3.0 + 1.0) * 0.5, 0.25)
        );
        // Each face is sampled from its own slice.
        let w = 4;
        let data: Vec<f32> = (0..w * w * 6).map(|i| i as f32).collect();
        let tex = CpuTexture::new(
            &data,
            ArrayShape::Cubemap { width: w },
            TextureDesc {
                normalized_coords: true,
                ..TextureDesc::default()
            },
        )
        .unwrap();
        for face in 0..6 {
            let [x, y, z] = cubemap_direction(face, 0.6, 0.3);
            // s 0.6 -> texel 2, t 0.3 -> row 1.
            assert_eq!(
                tex.sample_cubemap(x, y, z)[0],
                (face * w * w + w + 2) as f32
            );
        }
    }

    #[test]
    fn gather_returns_the_bilinear_footprint_in_order() {
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let t = CpuTexture::new(
            &data,
            ArrayShape::D2 {
                width: 2,
                height: 2,
            },
            TextureDesc::default(),
        )
        .unwrap();
        // At the centre: i0 = 0, i1 = 1, j0 = 0, j1 = 1.
        assert_eq!(t.gather_2d(1.0, 1.0, 0), [3.0, 4.0, 2.0, 1.0]);
        assert_eq!(
            t.gather_2d(1.0, 1.0, 1),
            [0.0; 4],
            "a 1-channel texel's channel 1"
        );
    }

    #[test]
    fn layers_are_separate_and_clamped() {
        let data: Vec<u16> = (0..2 * 3).map(|i| i as u16 * 1000).collect();
        let t = CpuTexture::new(
            &data,
            ArrayShape::Layered1D {
                width: 2,
                layers: 3,
            },
            TextureDesc {
                read_mode: ReadMode::NormalizedFloat,
                filter_mode: FilterMode::Linear,
                ..TextureDesc::default()
            },
        )
        .unwrap();
        assert_eq!(t.sample_1d_layered(1.5, 1)[0], 3000.0 / 65535.0);
        assert!((t.sample_1d_layered(1.0, 2)[0] - 4500.0 / 65535.0).abs() < 1e-7);
        assert_eq!(t.sample_1d_layered(0.5, 9)[0], 4000.0 / 65535.0);
        // A border y mode changes nothing for layers (unlike a 1-D array's fetch).
        let border_y = TextureDesc {
            read_mode: ReadMode::NormalizedFloat,
            filter_mode: FilterMode::Linear,
            address_mode: [AddressMode::Clamp, AddressMode::Border, AddressMode::Clamp],
            border_color: [1.0; 4],
            ..TextureDesc::default()
        };
        let tb = CpuTexture::new(
            &data,
            ArrayShape::Layered1D {
                width: 2,
                layers: 3,
            },
            border_y,
        )
        .unwrap();
        assert_eq!(tb.sample_1d_layered(1.5, 1)[0], 3000.0 / 65535.0);
        let d1 = CpuTexture::new(&data[2..4], ArrayShape::D1 { width: 2 }, border_y).unwrap();
        assert_eq!(
            d1.sample_1d(1.5)[0],
            (0.5 * (3000.0 / 65535.0) + 0.5) as f32
        );
        assert!(float_result(ArrayFormat::U16, ReadMode::NormalizedFloat));
        assert!(!float_result(ArrayFormat::U32, ReadMode::NormalizedFloat));
    }
}
