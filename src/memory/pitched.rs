//! Pitched and 3-D memory: `cudaMallocPitch`, `cudaMalloc3D`, `cudaMemcpy2D` / `cudaMemcpy3D`
//! (and their `Async` and `Peer` forms), `cudaMemset2D` / `cudaMemset3D`.
//!
//! A copy has two *sides*, each a base address with a layout (a pitch in bytes between rows and
//! a number of rows per slice) and a bound, and a region ([`Copy3D`]): where it starts on each
//! side and its extent. Sides are host slices ([`HostPitched`], [`HostPitchedMut`]), pitched
//! device allocations ([`PitchedBuffer`]) and linear device memory seen with a pitch
//! ([`DeviceBuffer::as_pitched`]) and CUDA arrays ([`Array`](crate::Array), positions and
//! extents in texels, never bytes). Every region is checked against its side before the driver
//! is called.

use std::marker::PhantomData;
use std::mem::size_of;

use super::device::{sealed, Alloc};
use super::{DeviceBuffer, DeviceRead, DeviceRepr};
use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::queue::{Lane, Use};
use crate::stream::Stream;
use crate::texture::format::Texel;
use crate::Array;

/// A position in elements (x), rows (y) and slices (z), like `cudaPos` but with x counted in
/// elements of the copy's type rather than bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Pos {
    /// Element within the row.
    pub x: usize,
    /// Row within the slice.
    pub y: usize,
    /// Slice.
    pub z: usize,
}

impl Pos {
    /// A position.
    pub const fn new(x: usize, y: usize, z: usize) -> Pos {
        Pos { x, y, z }
    }
}

/// An extent in elements, rows and slices, like `cudaExtent` with the width in elements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Extent {
    /// Elements per row.
    pub width: usize,
    /// Rows per slice.
    pub height: usize,
    /// Slices.
    pub depth: usize,
}

impl Extent {
    /// A 3-D extent (`make_cudaExtent`, in elements).
    pub const fn new(width: usize, height: usize, depth: usize) -> Extent {
        Extent {
            width,
            height,
            depth,
        }
    }

    /// A 2-D extent (depth 1).
    pub const fn d2(width: usize, height: usize) -> Extent {
        Extent::new(width, height, 1)
    }

    /// Whether any dimension is zero.
    pub fn is_empty(&self) -> bool {
        self.width == 0 || self.height == 0 || self.depth == 0
    }

    /// Elements in the extent.
    pub fn count(&self) -> Option<usize> {
        self.width.checked_mul(self.height)?.checked_mul(self.depth)
    }
}

/// The region of a 2-D or 3-D copy (the positions and extent of `cudaMemcpy3DParms`): plain
/// data with `Default`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Copy3D {
    /// Where the region starts in the source.
    pub src_pos: Pos,
    /// Where it starts in the destination.
    pub dst_pos: Pos,
    /// Its size.
    pub extent: Extent,
}

impl Copy3D {
    /// A region of `extent` at the origin of both sides.
    pub fn new(extent: Extent) -> Copy3D {
        Copy3D {
            extent,
            ..Copy3D::default()
        }
    }

    /// With the source starting at `p`.
    pub fn src_pos(mut self, p: Pos) -> Copy3D {
        self.src_pos = p;
        self
    }

    /// With the destination starting at `p`.
    pub fn dst_pos(mut self, p: Pos) -> Copy3D {
        self.dst_pos = p;
        self
    }
}

/// The layout of one side, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes from one row to the next.
    pub pitch: usize,
    /// Rows per slice.
    pub rows: usize,
    /// Bytes addressable from the base.
    pub bytes: usize,
}

/// A checked region of one side, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteRegion {
    /// Offset of the first byte touched.
    pub first: usize,
    /// One past the last byte touched (`first` when nothing is).
    pub end: usize,
    /// Row width in bytes.
    pub width: usize,
    /// Start x in bytes.
    pub x: usize,
}

fn overflow(side: &'static str) -> Error {
    Error::InvalidValue {
        what: side,
        value: "the region".into(),
        reason: "its byte offsets overflow usize",
    }
}

/// Checks `extent` at `pos` against a side of layout `l` holding elements of `elem` bytes.
pub(crate) fn region(
    l: Layout,
    pos: Pos,
    extent: Extent,
    elem: usize,
    side: &'static str,
) -> Result<ByteRegion> {
    let of = || overflow(side);
    let x = pos.x.checked_mul(elem).ok_or_else(of)?;
    let width = extent.width.checked_mul(elem).ok_or_else(of)?;
    if extent.is_empty() {
        return Ok(ByteRegion {
            first: 0,
            end: 0,
            width,
            x,
        });
    }
    let row_end = x.checked_add(width).ok_or_else(of)?;
    if row_end > l.pitch {
        return Err(Error::InvalidPitch {
            what: side,
            x_bytes: x,
            width_bytes: width,
            pitch: l.pitch,
        });
    }
    let last_y = pos.y.checked_add(extent.height - 1).ok_or_else(of)?;
    if extent.depth > 1 || pos.z > 0 {
        // Rows of a slice must stay in that slice.
        if last_y >= l.rows {
            return Err(Error::OutOfRange {
                what: side,
                start: pos.y,
                end: last_y.saturating_add(1),
                len: l.rows,
            });
        }
    }
    let last_z = pos.z.checked_add(extent.depth - 1).ok_or_else(of)?;
    let row_of = |z: usize, y: usize| -> Option<usize> {
        z.checked_mul(l.rows)?.checked_add(y)?.checked_mul(l.pitch)
    };
    let first = row_of(pos.z, pos.y)
        .and_then(|r| r.checked_add(x))
        .ok_or_else(of)?;
    let end = row_of(last_z, last_y)
        .and_then(|r| r.checked_add(row_end))
        .ok_or_else(of)?;
    if end > l.bytes {
        return Err(Error::OutOfRange {
            what: side,
            start: first,
            end,
            len: l.bytes,
        });
    }
    Ok(ByteRegion {
        first,
        end,
        width,
        x,
    })
}

/// The CPU model of a 3-D copy between two checked regions (tests use it as the reference).
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn model_copy(
    dst: &mut [u8],
    dl: Layout,
    dp: Pos,
    src: &[u8],
    sl: Layout,
    sp: Pos,
    e: Extent,
    elem: usize,
) {
    for z in 0..e.depth {
        for y in 0..e.height {
            let so = ((sp.z + z) * sl.rows + sp.y + y) * sl.pitch + sp.x * elem;
            let d0 = ((dp.z + z) * dl.rows + dp.y + y) * dl.pitch + dp.x * elem;
            let w = e.width * elem;
            dst[d0..d0 + w].copy_from_slice(&src[so..so + w]);
        }
    }
}

/// Where a side's memory lives.
#[derive(Clone, Copy)]
pub enum Base<'a> {
    Host(*const u8),
    Device(u64, &'a Alloc),
    /// A CUDA array, its use tracker, and the extent copies see (texels, rows, slices).
    Array(sys::CUarray, &'a Alloc, Extent),
}

/// One side of a pitched copy (sealed).
pub trait PitchedSide<T: DeviceRepr>: sealed_side::Sealed {}

/// A side a pitched copy may write (sealed).
pub trait PitchedSideMut<T: DeviceRepr>: PitchedSide<T> {}

pub(crate) mod sealed_side {
    pub trait Sealed {
        fn base(&self) -> super::Base<'_>;
        fn layout(&self) -> super::Layout;
        /// For a CUDA array: what keeps it alive (a graph node holds it).
        fn array_keep(&self) -> Option<std::sync::Arc<crate::memory::ArrayInner>> {
            None
        }
    }
}

/// A host slice seen as rows of `pitch` elements, `rows` rows per slice: the source side of a
/// 2-D/3-D copy from host memory.
#[derive(Debug, Clone, Copy)]
pub struct HostPitched<'a, T> {
    data: &'a [T],
    pitch: usize,
    rows: usize,
}

/// A mutable host slice seen as rows of `pitch` elements: the destination side of a 2-D/3-D
/// copy to host memory.
#[derive(Debug)]
pub struct HostPitchedMut<'a, T> {
    data: &'a mut [T],
    pitch: usize,
    rows: usize,
}

fn check_pitch(pitch: usize, rows: usize, elem: usize, what: &'static str) -> Result<()> {
    if pitch == 0 || rows == 0 {
        return Err(Error::InvalidValue {
            what,
            value: format!("pitch {pitch}, rows {rows}"),
            reason: "the pitch and the rows per slice must be at least 1",
        });
    }
    if pitch.checked_mul(elem).is_none() {
        return Err(Error::InvalidValue {
            what,
            value: format!("pitch {pitch} elements of {elem} bytes"),
            reason: "the pitch in bytes overflows usize",
        });
    }
    Ok(())
}

impl<'a, T: DeviceRepr> HostPitched<'a, T> {
    /// `data` as rows of `pitch` elements, `rows` rows per slice.
    pub fn new(data: &'a [T], pitch: usize, rows: usize) -> Result<HostPitched<'a, T>> {
        record(check_pitch(pitch, rows, size_of::<T>(), "HostPitched"))?;
        Ok(HostPitched { data, pitch, rows })
    }
}

impl<'a, T: DeviceRepr> HostPitchedMut<'a, T> {
    /// `data` as rows of `pitch` elements, `rows` rows per slice.
    pub fn new(data: &'a mut [T], pitch: usize, rows: usize) -> Result<HostPitchedMut<'a, T>> {
        record(check_pitch(pitch, rows, size_of::<T>(), "HostPitchedMut"))?;
        Ok(HostPitchedMut { data, pitch, rows })
    }
}

impl<T: DeviceRepr> sealed_side::Sealed for HostPitched<'_, T> {
    fn base(&self) -> Base<'_> {
        Base::Host(self.data.as_ptr().cast())
    }
    fn layout(&self) -> Layout {
        Layout {
            pitch: self.pitch * size_of::<T>(),
            rows: self.rows,
            bytes: std::mem::size_of_val(self.data),
        }
    }
}
impl<T: DeviceRepr> PitchedSide<T> for HostPitched<'_, T> {}

impl<T: DeviceRepr> sealed_side::Sealed for HostPitchedMut<'_, T> {
    fn base(&self) -> Base<'_> {
        Base::Host(self.data.as_ptr().cast())
    }
    fn layout(&self) -> Layout {
        Layout {
            pitch: self.pitch * size_of::<T>(),
            rows: self.rows,
            bytes: std::mem::size_of_val(self.data),
        }
    }
}
impl<T: DeviceRepr> PitchedSide<T> for HostPitchedMut<'_, T> {}
impl<T: DeviceRepr> PitchedSideMut<T> for HostPitchedMut<'_, T> {}

/// Linear device memory seen with a pitch ([`DeviceBuffer::as_pitched`]).
#[derive(Debug)]
pub struct DevicePitched<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    alloc: &'a Alloc,
    pitch: usize,
    rows: usize,
    _t: PhantomData<&'a mut [T]>,
}

impl<T: DeviceRepr> sealed_side::Sealed for DevicePitched<'_, T> {
    fn base(&self) -> Base<'_> {
        Base::Device(self.ptr, self.alloc)
    }
    fn layout(&self) -> Layout {
        Layout {
            pitch: self.pitch * size_of::<T>(),
            rows: self.rows,
            bytes: self.len * size_of::<T>(),
        }
    }
}
impl<T: DeviceRepr> PitchedSide<T> for DevicePitched<'_, T> {}
impl<T: DeviceRepr> PitchedSideMut<T> for DevicePitched<'_, T> {}

/// Device memory seen densely as rows of `extent.width` elements, for the crate's whole-array
/// copies. The caller borrows the memory as the copy needs (exclusively for a destination).
pub(crate) struct DeviceSide<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    alloc: &'a Alloc,
    pitch: usize,
    rows: usize,
    _t: PhantomData<&'a [T]>,
}

impl<'a, T: DeviceRepr> DeviceSide<'a, T> {
    pub(crate) fn dense(m: &'a (impl DeviceRead<T> + ?Sized), extent: Extent) -> DeviceSide<'a, T> {
        DeviceSide {
            ptr: m.device_ptr(),
            len: m.len(),
            alloc: sealed::Sealed::allocation(m),
            pitch: extent.width.max(1),
            rows: extent.height.max(1),
            _t: PhantomData,
        }
    }
}

impl<T: DeviceRepr> sealed_side::Sealed for DeviceSide<'_, T> {
    fn base(&self) -> Base<'_> {
        Base::Device(self.ptr, self.alloc)
    }
    fn layout(&self) -> Layout {
        Layout {
            pitch: self.pitch * size_of::<T>(),
            rows: self.rows,
            bytes: self.len * size_of::<T>(),
        }
    }
}
impl<T: DeviceRepr> PitchedSide<T> for DeviceSide<'_, T> {}
impl<T: DeviceRepr> PitchedSideMut<T> for DeviceSide<'_, T> {}

// A CUDA array is a side of 2-D and 3-D copies: positions and extents in texels, rows and
// slices (layers, faces), checked against the array's extent.
impl<T: Texel> sealed_side::Sealed for Array<T> {
    fn base(&self) -> Base<'_> {
        Base::Array(self.inner.raw(), &self.inner.track, self.extent())
    }
    fn array_keep(&self) -> Option<std::sync::Arc<crate::memory::ArrayInner>> {
        Some(self.inner.clone())
    }
    fn layout(&self) -> Layout {
        let e = self.extent();
        Layout {
            pitch: e.width * size_of::<T>(),
            rows: e.height,
            bytes: e.width * e.height * e.depth * size_of::<T>(),
        }
    }
}
impl<T: Texel> PitchedSide<T> for Array<T> {}
impl<T: Texel> PitchedSideMut<T> for Array<T> {}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// The buffer seen as rows of `pitch` elements, `rows` rows per slice, as a side of a
    /// 2-D/3-D copy (linear memory in `cudaMemcpy2D` / `cudaMemcpy3D`).
    pub fn as_pitched(&mut self, pitch: usize, rows: usize) -> Result<DevicePitched<'_, T>> {
        record(check_pitch(
            pitch,
            rows,
            size_of::<T>(),
            "DeviceBuffer::as_pitched",
        ))?;
        Ok(DevicePitched {
            ptr: DeviceRead::device_ptr(self),
            len: DeviceRead::len(self),
            alloc: sealed::Sealed::allocation(self),
            pitch,
            rows,
            _t: PhantomData,
        })
    }
}

/// A pitched 2-D or 3-D device allocation (`cudaMallocPitch` / `cudaMalloc3D`): rows of
/// `width` elements padded to `pitch` bytes, `height` rows per slice, `depth` slices.
#[derive(Debug)]
pub struct PitchedBuffer<T: DeviceRepr> {
    alloc: Alloc,
    extent: Extent,
    pitch: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> PitchedBuffer<T> {
    /// Allocates `height` rows of `width` elements with the driver's pitch (`cudaMallocPitch`).
    #[doc(alias = "cudaMallocPitch")]
    pub fn new_2d(width: usize, height: usize) -> Result<PitchedBuffer<T>> {
        Self::new_3d(Extent::d2(width, height))
    }

    /// Allocates a 3-D extent with the driver's pitch (`cudaMalloc3D`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when a dimension is zero or the size overflows;
    /// `cudaErrorMemoryAllocation` when the device is out of memory.
    #[doc(alias = "cudaMalloc3D")]
    pub fn new_3d(extent: Extent) -> Result<PitchedBuffer<T>> {
        record((|| {
            let width = extent.width.checked_mul(size_of::<T>());
            let rows = extent.height.checked_mul(extent.depth);
            let (Some(width), Some(rows)) = (width, rows) else {
                return Err(overflow("cudaMalloc3D extent"));
            };
            if extent.is_empty() {
                return Err(Error::InvalidValue {
                    what: "cudaMalloc3D extent",
                    value: format!("{extent:?}"),
                    reason: "every dimension must be at least 1",
                });
            }
            let a = context::enter_current()?;
            let elem = match size_of::<T>() {
                s if s >= 16 => 16,
                s if s >= 8 => 8,
                _ => 4,
            };
            let (mut ptr, mut pitch) = (0u64, 0usize);
            // Out of memory: tried again as pending frees finish, as `cudaMalloc` is (fourth
            // review of the per-thread fences: memory a per-thread stream's idle owner held
            // never came back for a pitched allocation).
            crate::queue::alloc_retry(&a, || {
                // SAFETY: the context is current; valid out-parameters; element size 4, 8 or
                // 16.
                a.check(
                    unsafe { sys::cuMemAllocPitch_v2(&mut ptr, &mut pitch, width, rows, elem) },
                    "cuMemAllocPitch",
                )
            })?;
            Ok(PitchedBuffer {
                alloc: Alloc::plain(ptr, pitch * rows, a.dev.ordinal, a.generation()),
                extent,
                pitch,
                _t: PhantomData,
            })
        })())
    }

    /// The allocated extent.
    pub fn extent(&self) -> Extent {
        self.extent
    }

    /// Bytes from one row to the next (the `pitch` of `cudaPitchedPtr`).
    pub fn pitch(&self) -> usize {
        self.pitch
    }

    /// The device address of the first row.
    pub fn as_raw(&self) -> u64 {
        self.alloc.ptr
    }

    /// The device it is on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.alloc.device)
    }

    /// Sets every byte of `extent` at `pos` to `value` (`cudaMemset3D`; `cudaMemset2D` with
    /// depth 1). Does not block the host.
    #[doc(alias = "cudaMemset2D")]
    #[doc(alias = "cudaMemset3D")]
    pub fn memset_region(&mut self, value: u8, pos: Pos, extent: Extent) -> Result<()> {
        record(self.memset_on(value, pos, extent, None))
    }

    /// As [`memset_region`](Self::memset_region) on `stream` (`cudaMemset3DAsync`).
    #[doc(alias = "cudaMemset3DAsync")]
    pub fn memset_region_async(
        &mut self,
        value: u8,
        pos: Pos,
        extent: Extent,
        stream: &Stream,
    ) -> Result<()> {
        record(self.memset_on(value, pos, extent, Some(stream)))
    }

    /// Sets every byte of the whole extent (padding excluded) to `value`.
    pub fn memset(&mut self, value: u8) -> Result<()> {
        let e = self.extent;
        self.memset_region(value, Pos::default(), e)
    }

    fn memset_on(
        &mut self,
        value: u8,
        pos: Pos,
        extent: Extent,
        stream: Option<&Stream>,
    ) -> Result<()> {
        let l = sealed_side::Sealed::layout(self);
        let r = region(l, pos, extent, size_of::<T>(), "cudaMemset3D")?;
        if r.first == r.end {
            return Ok(());
        }
        let lane = default_lane(stream, &self.alloc)?;
        let base = self.alloc.ptr;
        lane.submit(
            "cudaMemset3D",
            &[Use::device(&self.alloc, true)],
            |a, raw| {
                for z in 0..extent.depth {
                    let ptr = base + (((pos.z + z) * l.rows + pos.y) * l.pitch + r.x) as u64;
                    // SAFETY: the region was checked against the allocation above: `height` rows
                    // of `width` bytes at `pitch` from `ptr` lie inside it.
                    a.check(
                        unsafe {
                            sys::cuMemsetD2D8Async(ptr, l.pitch, value, r.width, extent.height, raw)
                        },
                        "cuMemsetD2D8Async",
                    )?;
                }
                Ok(())
            },
        )
    }
}

impl<T: DeviceRepr> sealed_side::Sealed for PitchedBuffer<T> {
    fn base(&self) -> Base<'_> {
        Base::Device(self.alloc.ptr, &self.alloc)
    }
    fn layout(&self) -> Layout {
        Layout {
            pitch: self.pitch,
            rows: self.extent.height,
            bytes: self.pitch * self.extent.height * self.extent.depth,
        }
    }
}
impl<T: DeviceRepr> PitchedSide<T> for PitchedBuffer<T> {}
impl<T: DeviceRepr> PitchedSideMut<T> for PitchedBuffer<T> {}

// Kernels see the whole allocation, padding included, as `pitch * rows / size_of::<T>()`
// elements; they index rows with `pitch() / size_of::<T>()`.
impl<T: DeviceRepr> sealed::Sealed for PitchedBuffer<T> {
    fn allocation(&self) -> &Alloc {
        &self.alloc
    }
    fn ptr_ref(&self) -> &u64 {
        &self.alloc.ptr
    }
}
impl<T: DeviceRepr> DeviceRead<T> for PitchedBuffer<T> {
    fn device_ptr(&self) -> u64 {
        self.alloc.ptr
    }
    fn len(&self) -> usize {
        self.alloc.bytes / size_of::<T>().max(1)
    }
}
impl<T: DeviceRepr> super::DeviceWrite<T> for PitchedBuffer<T> {}

/// Copies a 2-D or 3-D region (`cudaMemcpy3D`; `cudaMemcpy2D` with depth 1; `cudaMemcpy3DPeer`
/// when the sides are on two devices). Blocks until the copy is done when a side is host
/// memory; device-to-device copies run in "stream 0" without blocking, as in libcudart.
///
/// # Errors
/// [`Error::InvalidPitch`] when a row (x + width) does not fit in a side's pitch
/// (`cudaErrorInvalidPitchValue`); [`Error::OutOfRange`] when the region leaves a side.
///
/// ```no_run
/// use cuda_runtime::{copy_3d, Copy3D, Extent, HostPitched, HostPitchedMut, PitchedBuffer, Pos};
/// # fn main() -> cuda_runtime::Result<()> {
/// let (w, h) = (100, 50);
/// let host: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
/// let mut img = PitchedBuffer::<f32>::new_2d(w, h)?;
/// copy_3d(&mut img, &HostPitched::new(&host, w, h)?, &Copy3D::new(Extent::d2(w, h)))?;
/// let mut back = vec![0f32; 10 * 10];
/// let region = Copy3D::new(Extent::d2(10, 10)).src_pos(Pos::new(20, 30, 0));
/// copy_3d(&mut HostPitchedMut::new(&mut back, 10, 10)?, &img, &region)?;
/// assert_eq!(back[0], (30 * w + 20) as f32);
/// # Ok(()) }
/// ```
#[doc(alias = "cudaMemcpy2D")]
#[doc(alias = "cudaMemcpy3D")]
#[doc(alias = "cudaMemcpy3DPeer")]
pub fn copy_3d<T: DeviceRepr>(
    dst: &mut (impl PitchedSideMut<T> + ?Sized),
    src: &(impl PitchedSide<T> + ?Sized),
    region: &Copy3D,
) -> Result<()> {
    record(copy_impl::<T>(&*dst, src, region, None))
}

/// As [`copy_3d`] in stream order on `stream` (`cudaMemcpy3DAsync`, `cudaMemcpy2DAsync`,
/// `cudaMemcpy3DPeerAsync`). When a side is host memory it returns once the copy is done (the
/// host memory is borrowed only for the call); device-to-device copies do not block.
#[doc(alias = "cudaMemcpy2DAsync")]
#[doc(alias = "cudaMemcpy3DAsync")]
#[doc(alias = "cudaMemcpy3DPeerAsync")]
pub fn copy_3d_async<T: DeviceRepr>(
    dst: &mut (impl PitchedSideMut<T> + ?Sized),
    src: &(impl PitchedSide<T> + ?Sized),
    region: &Copy3D,
    stream: &Stream,
) -> Result<()> {
    record(copy_impl::<T>(&*dst, src, region, Some(stream)))
}

/// The copy of [`copy_3d`] (for the whole-array helpers of [`Array`]).
pub(crate) fn copy_3d_impl<T: DeviceRepr>(
    dst: &(impl PitchedSide<T> + ?Sized),
    src: &(impl PitchedSide<T> + ?Sized),
    p: &Copy3D,
    stream: Option<&Stream>,
) -> Result<()> {
    copy_impl(dst, src, p, stream)
}

/// Checks a region against an array side: every axis within the array's extent.
pub(crate) fn array_region(dims: Extent, pos: Pos, e: Extent, side: &'static str) -> Result<()> {
    if e.is_empty() {
        return Ok(());
    }
    for (start, len, dim) in [
        (pos.x, e.width, dims.width),
        (pos.y, e.height, dims.height),
        (pos.z, e.depth, dims.depth),
    ] {
        match start.checked_add(len) {
            Some(end) if end <= dim => {}
            end => {
                return Err(Error::OutOfRange {
                    what: side,
                    start,
                    end: end.unwrap_or(usize::MAX),
                    len: dim,
                })
            }
        }
    }
    Ok(())
}

/// Checks the regions of a copy against array sides: each within its array, and no overlap
/// when both sides are one array.
pub(crate) fn check_array_regions(src: Base<'_>, dst: Base<'_>, p: &Copy3D) -> Result<()> {
    if let Base::Array(_, _, dims) = src {
        array_region(
            dims,
            p.src_pos,
            p.extent,
            "the copy's source array (texels, rows, layers)",
        )?;
    }
    if let Base::Array(_, _, dims) = dst {
        array_region(
            dims,
            p.dst_pos,
            p.extent,
            "the copy's destination array (texels, rows, layers)",
        )?;
    }
    check_array_overlap(src, dst, p)
}

fn check_array_overlap(src: Base<'_>, dst: Base<'_>, p: &Copy3D) -> Result<()> {
    // The same array on both sides (two handles to one mipmap level can exist): overlapping
    // regions are undefined for the driver's copy, so they are refused.
    if let (Base::Array(s_raw, _, _), Base::Array(d_raw, _, _)) = (src, dst) {
        let overlap =
            |a: usize, b: usize, n: usize| a < b.saturating_add(n) && b < a.saturating_add(n);
        if s_raw == d_raw
            && p.extent.width > 0
            && p.extent.height > 0
            && p.extent.depth > 0
            && overlap(p.src_pos.x, p.dst_pos.x, p.extent.width)
            && overlap(p.src_pos.y, p.dst_pos.y, p.extent.height)
            && overlap(p.src_pos.z, p.dst_pos.z, p.extent.depth)
        {
            return Err(Error::InvalidValue {
                what: "copy between two regions of one array",
                value: format!(
                    "source at {:?}, destination at {:?}, extent {:?}",
                    p.src_pos, p.dst_pos, p.extent
                ),
                reason: "the regions overlap, and an overlapping copy is undefined",
            });
        }
    }
    Ok(())
}

fn copy_impl<T: DeviceRepr>(
    dst: &(impl PitchedSide<T> + ?Sized),
    src: &(impl PitchedSide<T> + ?Sized),
    p: &Copy3D,
    stream: Option<&Stream>,
) -> Result<()> {
    let elem = size_of::<T>();
    if let Base::Array(_, _, dims) = src.base() {
        array_region(
            dims,
            p.src_pos,
            p.extent,
            "the copy's source array (texels, rows, layers)",
        )?;
    }
    if let Base::Array(_, _, dims) = dst.base() {
        array_region(
            dims,
            p.dst_pos,
            p.extent,
            "the copy's destination array (texels, rows, layers)",
        )?;
    }
    check_array_overlap(src.base(), dst.base(), p)?;
    let (sl, dl) = (src.layout(), dst.layout());
    let sr = region(sl, p.src_pos, p.extent, elem, "the copy's source")?;
    let dr = region(dl, p.dst_pos, p.extent, elem, "the copy's destination")?;
    if sr.first == sr.end {
        return Ok(());
    }
    let (sb, db) = (src.base(), dst.base());
    // The device whose context runs the copy: the destination's, else the source's, else the
    // current one (host to host).
    let home = match (db, sb) {
        (Base::Device(_, a), _)
        | (Base::Array(_, a, _), _)
        | (_, Base::Device(_, a))
        | (_, Base::Array(_, a, _)) => Some(a),
        _ => None,
    };
    let lane = match (stream, home) {
        (Some(s), _) => s.lane()?,
        (None, Some(h)) => default_lane(None, h)?,
        (None, None) => {
            let a = context::enter_current()?;
            let q = crate::stream::default_queue(&a);
            Lane::new_owned(a, q)
        }
    };
    let mut host_side = false;
    let mut peer = None;
    let fill = |b: Base<'_>, l: Layout, pos: Pos, r: &ByteRegion, host_side: &mut bool| {
        let mut m = (
            sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            std::ptr::null::<std::ffi::c_void>(),
            0u64,
            std::ptr::null_mut::<sys::CUarray_st>(),
        );
        match b {
            Base::Host(ptr) => {
                *host_side = true;
                m.1 = ptr.cast();
            }
            Base::Device(ptr, _) => {
                m.0 = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
                m.2 = ptr;
            }
            Base::Array(raw, _, _) => {
                m.0 = sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
                m.3 = raw;
            }
        }
        (m, l, pos, r.x)
    };
    let ((st, shost, sdev, sarr), sl, sp, sx) = fill(sb, sl, p.src_pos, &sr, &mut host_side);
    let ((dt, dhost, ddev, darr), dl, dp, dx) = fill(db, dl, p.dst_pos, &dr, &mut host_side);
    // Every device side is noted as used by the copy (through the one enqueue path): the
    // destination written, the source read, possibly from another device (a peer copy).
    let mut uses = Vec::with_capacity(2);
    if let Base::Device(_, d) | Base::Array(_, d, _) = db {
        uses.push(Use::device(d, true));
    }
    if let Base::Device(_, s) | Base::Array(_, s, _) = sb {
        let other = s.host.is_none() && s.device != lane.a.dev.ordinal;
        if other {
            if matches!(db, Base::Host(_)) {
                return Err(Error::DeviceMismatch {
                    call: "cudaMemcpy3DAsync",
                    what: "the copy's source (a copy to host memory runs on its device)",
                    found: s.device,
                    expected: lane.a.dev.ordinal,
                });
            }
            peer = Some(s);
            uses.push(Use::peer(s, false));
        } else {
            uses.push(Use::device(s, false));
        }
    }
    let desc = sys::CUDA_MEMCPY3D_PEER {
        srcXInBytes: sx,
        srcY: sp.y,
        srcZ: sp.z,
        srcLOD: 0,
        srcMemoryType: st,
        srcHost: shost,
        srcDevice: sdev,
        srcArray: sarr,
        srcContext: std::ptr::null_mut(),
        srcPitch: sl.pitch,
        srcHeight: sl.rows,
        dstXInBytes: dx,
        dstY: dp.y,
        dstZ: dp.z,
        dstLOD: 0,
        dstMemoryType: dt,
        dstHost: dhost.cast_mut(),
        dstDevice: ddev,
        dstArray: darr,
        dstContext: std::ptr::null_mut(),
        dstPitch: dl.pitch,
        dstHeight: dl.rows,
        WidthInBytes: sr.width,
        Height: p.extent.height,
        Depth: p.extent.depth,
    };
    if let Some(s) = peer {
        return lane.submit("cudaMemcpy3DPeerAsync", &uses, |a, raw| {
            // Pinned by the admission of the source until this returns.
            let sp = context::pin(s.device, s.generation, "the copy's source")?;
            let mut desc = desc;
            desc.srcContext = sp.ctx_raw();
            desc.dstContext = a.ctx_raw();
            // SAFETY: both regions were checked against their allocations; both contexts are
            // live and the stream belongs to the destination's, which is current.
            a.check(
                unsafe { sys::cuMemcpy3DPeerAsync(&desc, raw) },
                "cuMemcpy3DPeerAsync",
            )
        });
    }
    let d3 = sys::CUDA_MEMCPY3D {
        srcXInBytes: desc.srcXInBytes,
        srcY: desc.srcY,
        srcZ: desc.srcZ,
        srcLOD: 0,
        srcMemoryType: desc.srcMemoryType,
        srcHost: desc.srcHost,
        srcDevice: desc.srcDevice,
        srcArray: desc.srcArray,
        reserved0: std::ptr::null_mut(),
        srcPitch: desc.srcPitch,
        srcHeight: desc.srcHeight,
        dstXInBytes: desc.dstXInBytes,
        dstY: desc.dstY,
        dstZ: desc.dstZ,
        dstLOD: 0,
        dstMemoryType: desc.dstMemoryType,
        dstHost: desc.dstHost,
        dstDevice: desc.dstDevice,
        dstArray: desc.dstArray,
        reserved1: std::ptr::null_mut(),
        dstPitch: desc.dstPitch,
        dstHeight: desc.dstHeight,
        WidthInBytes: desc.WidthInBytes,
        Height: desc.Height,
        Depth: desc.Depth,
    };
    let mark = lane.mark();
    lane.submit("cudaMemcpy3DAsync", &uses, |a, raw| {
        // SAFETY: both regions were checked against their sides (host slices borrowed for the
        // call, device memory and arrays live in this context, arrays' regions within their
        // extents); the host side, if any, is waited for below before its borrow ends.
        a.check(
            unsafe { sys::cuMemcpy3DAsync_v2(&d3, raw) },
            "cuMemcpy3DAsync",
        )?;
        if host_side {
            // The synchronous call keeps cudaMemcpy3D's wait; the asynchronous one's is the
            // crate's own, for the borrow.
            super::device::wait_for_host_copy(a, raw, stream.is_none())?;
        }
        Ok(())
    })?;
    if host_side {
        lane.synchronized(mark);
    }
    Ok(())
}

/// The lane of `stream`, or of "stream 0" of `alloc`'s device.
fn default_lane<'s>(stream: Option<&'s Stream>, alloc: &Alloc) -> Result<Lane<'s>> {
    match stream {
        Some(s) => s.lane(),
        None => {
            let a = context::enter_handle(alloc.device, alloc.generation, "device memory")?;
            let q = crate::stream::default_queue(&a);
            Ok(Lane::new_owned(a, q))
        }
    }
}

/// A region of a CUDA array that copy `op` of a batch writes or reads.
#[derive(Debug, Clone, Copy)]
struct ArrayBox {
    op: usize,
    raw: sys::CUarray,
    pos: Pos,
    extent: Extent,
    write: bool,
}

impl ArrayBox {
    fn new(op: usize, raw: sys::CUarray, pos: Pos, extent: Extent, write: bool) -> ArrayBox {
        ArrayBox {
            op,
            raw,
            pos,
            extent,
            write,
        }
    }

    fn overlaps(&self, o: &ArrayBox) -> bool {
        let overlap = |a: usize, b: usize, n: usize, m: usize| {
            a < b.saturating_add(m) && b < a.saturating_add(n)
        };
        self.raw == o.raw
            && overlap(self.pos.x, o.pos.x, self.extent.width, o.extent.width)
            && overlap(self.pos.y, o.pos.y, self.extent.height, o.extent.height)
            && overlap(self.pos.z, o.pos.z, self.extent.depth, o.extent.depth)
    }
}

/// Two regions of one array that different copies of a batch touch, one of them writing (the
/// borrows rule it out but for two handles of one mipmap level): the driver runs a batch's
/// copies in no order, so the texels would be unspecified.
fn batch_conflict(boxes: &[ArrayBox]) -> Option<(ArrayBox, ArrayBox)> {
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            if a.op != b.op && (a.write || b.write) && a.overlaps(b) {
                return Some((*a, *b));
            }
        }
    }
    None
}

/// 2-D / 3-D copies queued together (`cudaMemcpy3DBatchAsync`) between device-side operands:
/// pitched device memory ([`PitchedBuffer`], [`DevicePitched`]) and CUDA arrays, of the
/// stream's device. Each copy is checked as [`copy_3d`] checks it; the batch is one submission
/// through the enqueue path, its copies in no particular order among themselves.
///
/// Host sides are refused: a batch returns before its copies run, and the crate's host sides
/// are borrowed slices (use [`copy_3d_async`], which waits for a host side).
///
/// The driver runs a batch's copies in no order, so they must not depend on each other: the
/// borrows rule that out (each destination is borrowed exclusively), and for two handles of
/// one mipmap level ([`MipmappedArray::level`](crate::MipmappedArray::level) twice) the
/// submission refuses a region of the level that one copy writes and another reads or writes.
pub struct Copy3DBatch<'a, T: DeviceRepr> {
    ops: Vec<(&'a dyn PitchedSide<T>, &'a dyn PitchedSide<T>, Copy3D)>,
}

impl<T: DeviceRepr> Default for Copy3DBatch<'_, T> {
    fn default() -> Self {
        Copy3DBatch { ops: Vec::new() }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for Copy3DBatch<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Copy3DBatch")
            .field("copies", &self.ops.len())
            .finish()
    }
}

/// One operand of a batched 3-D copy, and the element size the driver counts it in.
fn operand(
    b: Base<'_>,
    l: Layout,
    r: &ByteRegion,
    pos: Pos,
    unit: usize,
    side: &'static str,
) -> Result<sys::CUmemcpy3DOperand> {
    let mut o = std::mem::MaybeUninit::<sys::CUmemcpy3DOperand>::zeroed();
    let kind = match b {
        Base::Device(..) => sys::CUmemcpy3DOperandType::CU_MEMCPY_OPERAND_TYPE_POINTER,
        Base::Array(..) | Base::Host(_) => sys::CUmemcpy3DOperandType::CU_MEMCPY_OPERAND_TYPE_ARRAY,
    };
    // SAFETY: all-zero is valid for the union of plain structs; the operand type (an enum
    // without a zero) is written before the value is assumed initialised, and set again below.
    let mut o = unsafe {
        std::ptr::addr_of_mut!((*o.as_mut_ptr()).type_).write(kind);
        o.assume_init()
    };
    match b {
        Base::Device(ptr, _) => {
            if !l.pitch.is_multiple_of(unit) {
                return Err(Error::InvalidValue {
                    what: side,
                    value: format!("pitch of {} bytes", l.pitch),
                    reason: "a pitch copied to or from an array in a batch must be a whole \
                             number of elements",
                });
            }
            o.type_ = sys::CUmemcpy3DOperandType::CU_MEMCPY_OPERAND_TYPE_POINTER;
            o.op.ptr = sys::CUmemcpy3DOperand_st__bindgen_ty_1__bindgen_ty_1 {
                // The region's first byte (checked against the side by `region`).
                ptr: ptr + r.first as u64,
                rowLength: l.pitch / unit,
                layerHeight: l.rows,
                // SAFETY: all-zero is a valid location (type invalid: no hint).
                locHint: unsafe { std::mem::zeroed() },
            };
        }
        Base::Array(raw, _, _) => {
            o.type_ = sys::CUmemcpy3DOperandType::CU_MEMCPY_OPERAND_TYPE_ARRAY;
            o.op.array = sys::CUmemcpy3DOperand_st__bindgen_ty_1__bindgen_ty_2 {
                array: raw,
                offset: sys::CUoffset3D {
                    x: pos.x,
                    y: pos.y,
                    z: pos.z,
                },
            };
        }
        Base::Host(_) => {
            return Err(Error::InvalidValue {
                what: side,
                value: "host memory".into(),
                reason: "a batch returns before its copies run, so host sides are refused; use \
                         copy_3d_async",
            })
        }
    }
    Ok(o)
}

impl<'a, T: DeviceRepr> Copy3DBatch<'a, T> {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a copy of `region` from `src` to `dst` (checked at [`submit`](Self::submit)). The
    /// destination is borrowed exclusively for the batch's life.
    pub fn copy<D: PitchedSideMut<T> + 'a, S: PitchedSide<T> + 'a>(
        &mut self,
        dst: &'a mut D,
        src: &'a S,
        region: Copy3D,
    ) {
        let dst: &'a D = dst;
        self.ops.push((dst, src, region));
    }

    /// The number of copies.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no copy.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Queues every copy on `stream` as one operation (`cudaMemcpy3DBatchAsync`, source access
    /// in stream order). Does not block the host. Empty regions queue nothing.
    ///
    /// # Errors
    /// As [`copy_3d`] for each region, naming the copy; [`Error::InvalidValue`] for a host
    /// side or the legacy default stream; [`Error::DeviceMismatch`] for memory of another
    /// device.
    #[doc(alias = "cudaMemcpy3DBatchAsync")]
    pub fn submit(self, stream: &Stream) -> Result<()> {
        record((|| {
            const CALL: &str = "cudaMemcpy3DBatchAsync";
            let raw_stream = stream.as_raw() as usize;
            if raw_stream == 0 || raw_stream == 1 {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: "the legacy default stream".into(),
                    reason: "the driver does not take batched copies on the legacy default \
                             stream; use a created stream or Stream::per_thread()",
                });
            }
            let elem = size_of::<T>();
            let mut list = Vec::with_capacity(self.ops.len());
            let mut uses = Vec::with_capacity(2 * self.ops.len());
            // The array regions the copies write and read, for the check across copies below.
            let mut boxes = Vec::new();
            for (i, (dst, src, p)) in self.ops.iter().enumerate() {
                let named = |e: Error| Error::InvalidValue {
                    what: CALL,
                    value: format!("copy {i}: {e}"),
                    reason: "its region does not fit its sides",
                };
                let (sb, db) = (src.base(), dst.base());
                for (b, pos, side) in [(sb, p.src_pos, "source"), (db, p.dst_pos, "destination")] {
                    if let Base::Array(_, _, dims) = b {
                        array_region(dims, pos, p.extent, side).map_err(named)?;
                    }
                }
                let sr =
                    region(src.layout(), p.src_pos, p.extent, elem, "source").map_err(named)?;
                let dr = region(dst.layout(), p.dst_pos, p.extent, elem, "destination")
                    .map_err(named)?;
                if sr.first == sr.end {
                    continue;
                }
                if let (Base::Array(s_raw, _, _), Base::Array(d_raw, _, _)) = (sb, db) {
                    let overlap = |a: usize, b: usize, n: usize| {
                        a < b.saturating_add(n) && b < a.saturating_add(n)
                    };
                    if s_raw == d_raw
                        && overlap(p.src_pos.x, p.dst_pos.x, p.extent.width)
                        && overlap(p.src_pos.y, p.dst_pos.y, p.extent.height)
                        && overlap(p.src_pos.z, p.dst_pos.z, p.extent.depth)
                    {
                        return Err(Error::InvalidValue {
                            what: CALL,
                            value: format!("copy {i}"),
                            reason: "source and destination regions of one array overlap",
                        });
                    }
                }
                // Pointer to pointer copies count bytes; with an array, its elements.
                let both_pointers =
                    matches!(sb, Base::Device(..)) && matches!(db, Base::Device(..));
                let unit = if both_pointers { 1 } else { elem };
                let s_op = operand(sb, src.layout(), &sr, p.src_pos, unit, "the batch's source")?;
                let d_op = operand(
                    db,
                    dst.layout(),
                    &dr,
                    p.dst_pos,
                    unit,
                    "the batch's destination",
                )?;
                let op = sys::CUDA_MEMCPY3D_BATCH_OP {
                    src: s_op,
                    dst: d_op,
                    extent: sys::CUextent3D {
                        width: p.extent.width * elem / unit,
                        height: p.extent.height,
                        depth: p.extent.depth,
                    },
                    srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                    flags: 0,
                };
                list.push(op);
                if let Base::Array(raw, _, _) = db {
                    boxes.push(ArrayBox::new(i, raw, p.dst_pos, p.extent, true));
                }
                if let Base::Array(raw, _, _) = sb {
                    boxes.push(ArrayBox::new(i, raw, p.src_pos, p.extent, false));
                }
                if let Base::Device(_, d) | Base::Array(_, d, _) = db {
                    uses.push(Use::device(d, true));
                }
                if let Base::Device(_, s) | Base::Array(_, s, _) = sb {
                    uses.push(Use::device(s, false));
                }
            }
            if list.is_empty() {
                return Ok(());
            }
            if let Some((a, b)) = batch_conflict(&boxes) {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!(
                        "copy {} {} {:?} at {:?} and copy {} {} {:?} at {:?} of one array",
                        a.op,
                        if a.write { "writes" } else { "reads" },
                        a.extent,
                        a.pos,
                        b.op,
                        if b.write { "writes" } else { "reads" },
                        b.extent,
                        b.pos,
                    ),
                    reason: "the driver runs a batch's copies in no order, so a region of an \
                             array (two handles of one mipmap level) that one copy writes and \
                             another reads or writes would get unspecified texels",
                });
            }
            let lane = stream.lane()?;
            lane.submit(CALL, &uses, |a, raw| {
                // SAFETY: every operation's regions were checked against their sides, which
                // the enqueue path admitted for this context (destinations written, exclusively
                // borrowed; sources read); flags 0; live stream.
                a.check(
                    unsafe { sys::cuMemcpy3DBatchAsync_v2(list.len(), list.as_mut_ptr(), 0, raw) },
                    "cuMemcpy3DBatchAsync",
                )
            })
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte offset the region touches, by brute force.
    fn touched(l: Layout, p: Pos, e: Extent, elem: usize) -> Vec<usize> {
        let mut v = Vec::new();
        for z in 0..e.depth {
            for y in 0..e.height {
                for b in 0..e.width * elem {
                    v.push(((p.z + z) * l.rows + p.y + y) * l.pitch + p.x * elem + b);
                }
            }
        }
        v
    }

    /// A fresh random generator, its seed printed so a failure can be replayed
    /// (`PITCHED_TEST_SEED=<seed>`).
    fn seeded() -> fastrand::Rng {
        let seed = std::env::var("PITCHED_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fastrand::u64(..));
        eprintln!("seed {seed}");
        fastrand::Rng::with_seed(seed)
    }

    fn random_case(r: &mut fastrand::Rng) -> (Layout, Pos, Extent, usize) {
        let elem = [1, 2, 4, 8, 16][r.usize(0..5)];
        let pitch = r.usize(1..200);
        let rows = r.usize(1..20);
        let slices = r.usize(1..6);
        let bytes = pitch * rows * slices - r.usize(0..pitch.min(50));
        let p = Pos::new(r.usize(0..30), r.usize(0..25), r.usize(0..6));
        let e = Extent::new(r.usize(0..30), r.usize(0..25), r.usize(0..6));
        (Layout { pitch, rows, bytes }, p, e, elem)
    }

    #[test]
    fn regions_agree_with_brute_force() {
        let mut r = seeded();
        let (mut ok, mut bad) = (0, 0);
        for _ in 0..20_000 {
            let (l, p, e, elem) = random_case(&mut r);
            let t = touched(l, p, e, elem);
            let row_fits = (p.x + e.width) * elem <= l.pitch;
            let slice_fits = (e.depth <= 1 && p.z == 0) || p.y + e.height <= l.rows;
            let in_bounds = t.iter().all(|&b| b < l.bytes);
            let valid = e.is_empty() || (row_fits && slice_fits && in_bounds);
            match region(l, p, e, elem, "x") {
                Ok(br) => {
                    assert!(valid, "accepted {l:?} {p:?} {e:?} {elem}");
                    if !t.is_empty() {
                        assert_eq!(br.first, *t.iter().min().unwrap());
                        assert_eq!(br.end, t.iter().max().unwrap() + 1);
                    }
                    ok += 1;
                }
                Err(err) => {
                    assert!(!valid, "refused valid {l:?} {p:?} {e:?} {elem}: {err}");
                    if !row_fits {
                        assert!(matches!(err, Error::InvalidPitch { .. }), "{err}");
                        assert_eq!(err.code(), crate::ErrorCode::InvalidPitchValue);
                    }
                    bad += 1;
                }
            }
        }
        assert!(ok > 1000 && bad > 1000, "ok {ok}, bad {bad}");
    }

    #[test]
    fn huge_values_are_errors_not_panics() {
        let l = Layout {
            pitch: 64,
            rows: 4,
            bytes: 1024,
        };
        for (p, e) in [
            (Pos::new(usize::MAX, 0, 0), Extent::new(1, 1, 1)),
            (Pos::new(0, usize::MAX, 0), Extent::new(1, 2, 1)),
            (Pos::new(0, 0, usize::MAX), Extent::new(1, 1, 2)),
            (Pos::new(0, 0, 0), Extent::new(usize::MAX, 1, 1)),
            (Pos::new(0, 0, 0), Extent::new(1, usize::MAX, usize::MAX)),
        ] {
            assert!(region(l, p, e, 8, "x").is_err(), "{p:?} {e:?}");
        }
        let full = Layout {
            pitch: usize::MAX / 2,
            rows: 3,
            bytes: usize::MAX,
        };
        assert!(region(full, Pos::new(0, 2, 1), Extent::new(1, 1, 1), 1, "x").is_err());
        // The last row at usize::MAX in a 3-D region: the error's range saturates.
        assert!(region(l, Pos::new(0, usize::MAX, 1), Extent::new(1, 1, 1), 8, "x").is_err());
        // A pitch in elements whose size in bytes overflows.
        let v = [0u64; 4];
        let e = HostPitched::new(&v, usize::MAX / 2, 1).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidValue, "{e}");
        let mut w = [0u32; 4];
        assert!(HostPitchedMut::new(&mut w, usize::MAX / 3, 1).is_err());
    }

    #[test]
    fn model_copy_moves_exactly_the_region() {
        let mut r = seeded();
        let mut done = 0;
        while done < 500 {
            let (sl, sp, e, elem) = random_case(&mut r);
            let (dl, dp, _, _) = random_case(&mut r);
            if e.is_empty()
                || region(sl, sp, e, elem, "s").is_err()
                || region(dl, dp, e, elem, "d").is_err()
            {
                continue;
            }
            let src: Vec<u8> = (0..sl.bytes).map(|_| r.u8(..)).collect();
            let mut dst = vec![0xEEu8; dl.bytes];
            model_copy(&mut dst, dl, dp, &src, sl, sp, e, elem);
            let (ts, td) = (touched(sl, sp, e, elem), touched(dl, dp, e, elem));
            for (s, d) in ts.iter().zip(&td) {
                assert_eq!(dst[*d], src[*s]);
            }
            let inside: std::collections::HashSet<usize> = td.into_iter().collect();
            for (i, &b) in dst.iter().enumerate() {
                if !inside.contains(&i) {
                    assert_eq!(b, 0xEE, "byte {i} outside the region changed");
                }
            }
            done += 1;
        }
    }

    /// Review finding: two handles of one mipmap level in one batch, one copy writing a region
    /// that another reads or writes, ran in no order (unspecified texels); now refused. Regions
    /// of other arrays, disjoint regions, and reads of one region by two copies are accepted.
    #[test]
    fn batch_copies_touching_one_array_region_are_refused_across_copies() {
        let (a, b) = (8usize as sys::CUarray, 16usize as sys::CUarray);
        let e = Extent::new(4, 4, 1);
        let bx = |op, raw, x, write| ArrayBox::new(op, raw, Pos::new(x, 0, 0), e, write);
        // Copy 0 writes a at x 0..4, copy 1 reads a (the other handle) at x 2..6.
        let c = batch_conflict(&[bx(0, a, 0, true), bx(1, a, 2, false)]).unwrap();
        assert_eq!((c.0.op, c.1.op), (0, 1));
        // Two writes of one region.
        assert!(batch_conflict(&[bx(0, a, 0, true), bx(1, a, 3, true)]).is_some());
        // Disjoint (x 0..4 and 4..8), another array, two reads, one copy's own sides.
        assert!(batch_conflict(&[bx(0, a, 0, true), bx(1, a, 4, false)]).is_none());
        assert!(batch_conflict(&[bx(0, a, 0, true), bx(1, b, 0, false)]).is_none());
        assert!(batch_conflict(&[bx(0, a, 0, false), bx(1, a, 0, false)]).is_none());
        assert!(batch_conflict(&[bx(0, a, 0, true), bx(0, a, 0, false)]).is_none());
        // Extents of different sizes, huge positions: no overflow.
        let big = ArrayBox::new(2, a, Pos::new(usize::MAX, 0, 0), e, true);
        assert!(batch_conflict(&[bx(0, a, 0, false), big]).is_none());
        let wide = ArrayBox::new(3, a, Pos::new(0, 3, 0), Extent::new(100, 1, 1), false);
        assert!(batch_conflict(&[bx(0, a, 90, true), wide]).is_some());
    }

    #[test]
    fn exact_fits_and_one_over() {
        let l = Layout {
            pitch: 16,
            rows: 2,
            bytes: 64,
        };
        assert!(region(l, Pos::new(0, 0, 0), Extent::new(4, 2, 2), 4, "x").is_ok());
        let e = region(l, Pos::new(1, 0, 0), Extent::new(4, 1, 1), 4, "x").unwrap_err();
        assert_eq!(
            e,
            Error::InvalidPitch {
                what: "x",
                x_bytes: 4,
                width_bytes: 16,
                pitch: 16
            }
        );
        // 2-D: more rows than a "slice" is fine while the bytes fit.
        assert!(region(l, Pos::new(0, 0, 0), Extent::new(4, 4, 1), 4, "x").is_ok());
        assert!(region(l, Pos::new(0, 1, 0), Extent::new(4, 2, 2), 4, "x").is_err());
        assert_eq!(
            region(l, Pos::new(3, 9, 9), Extent::new(0, 5, 5), 4, "x")
                .unwrap()
                .end,
            0
        );
    }
}
