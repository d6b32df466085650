//! Batched operations (`cudaMemcpyBatchAsync`, `cudaMemPrefetchBatchAsync`,
//! `cudaMemDiscardBatchAsync`, `cudaMemDiscardAndPrefetchBatchAsync`) and range attributes of
//! managed memory (`cudaMemRangeGetAttribute(s)`).
//!
//! A batch is one submission through the crate's enqueue path: every piece of memory it names is
//! checked and noted as a use (read or write) at the same point of the stream. The operations
//! of a batch run in no particular order among themselves, and as a whole in stream order.

use std::mem::size_of;
use std::ops::RangeBounds;

use super::device::{resolve_range, Alloc};
use super::managed::{Location, ManagedBuffer};
use super::{DeviceRead, DeviceRepr, DeviceWrite};
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::queue::Use;
use crate::stream::Stream;
use crate::Device;

/// Refuses the legacy default stream, which `cuMemcpyBatchAsync` does not take.
fn refuse_legacy(stream: &Stream, call: &'static str) -> Result<()> {
    let raw = stream.as_raw() as usize;
    if raw == 0 || raw == 1 {
        return Err(Error::InvalidValue {
            what: call,
            value: "the legacy default stream".into(),
            reason: "the driver does not take batched operations on the legacy default stream; \
                     use a created stream or Stream::per_thread()",
        });
    }
    Ok(())
}

/// Device-to-device copies queued together (`cudaMemcpyBatchAsync`), between memory of the
/// stream's device (device buffers and their views; mapped page-locked and managed memory
/// reachable from it).
///
/// ```no_run
/// use cuda_runtime::{memory::CopyBatch, DeviceBuffer, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let stream = Stream::new()?;
/// let (a, b) = (DeviceBuffer::from_slice(&[1u32; 256])?, DeviceBuffer::from_slice(&[2u32; 64])?);
/// let (mut x, mut y) = (DeviceBuffer::<u32>::zeroed(256)?, DeviceBuffer::<u32>::zeroed(64)?);
/// let mut batch = CopyBatch::new();
/// batch.copy(&mut x, &a);
/// batch.copy(&mut y, &b);
/// batch.submit(&stream)?;
/// assert_eq!(y.to_vec()?, vec![2u32; 64]);
/// # Ok(()) }
/// ```
pub struct CopyBatch<'a, T: DeviceRepr> {
    ops: Vec<(&'a mut dyn DeviceWrite<T>, &'a dyn DeviceRead<T>)>,
}

impl<T: DeviceRepr> Default for CopyBatch<'_, T> {
    fn default() -> Self {
        CopyBatch { ops: Vec::new() }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for CopyBatch<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyBatch")
            .field("copies", &self.ops.len())
            .finish()
    }
}

impl<'a, T: DeviceRepr> CopyBatch<'a, T> {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a copy of `src` into `dst` (lengths are checked at [`submit`](Self::submit)). The
    /// destination is borrowed exclusively, so no two copies of a batch write the same memory
    /// and none reads what another writes.
    pub fn copy(&mut self, dst: &'a mut impl DeviceWrite<T>, src: &'a impl DeviceRead<T>) {
        self.ops.push((dst, src));
    }

    /// The number of copies.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no copy.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Queues every copy on `stream` as one operation (`cudaMemcpyBatchAsync`, source access
    /// in stream order). Does not block the host. An empty batch, or copies of no elements,
    /// queue nothing.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] naming the copy whose lengths differ;
    /// [`Error::DeviceMismatch`] for memory of another device; [`Error::InvalidValue`] on the
    /// legacy default stream, which the driver refuses for batches.
    #[doc(alias = "cudaMemcpyBatchAsync")]
    pub fn submit(self, stream: &Stream) -> Result<()> {
        record((|| {
            const CALL: &str = "cudaMemcpyBatchAsync";
            refuse_legacy(stream, CALL)?;
            for (i, (d, s)) in self.ops.iter().enumerate() {
                if d.len() != s.len() {
                    return Err(Error::InvalidValue {
                        what: CALL,
                        value: format!(
                            "copy {i}: destination of {} elements, source of {}",
                            d.len(),
                            s.len()
                        ),
                        reason: "each copy's source and destination must have the same length",
                    });
                }
            }
            // Copies of no bytes (empty, or of a zero-sized `T`) queue nothing.
            let ops: Vec<_> = self
                .ops
                .iter()
                .filter(|(d, _)| d.len() * size_of::<T>() > 0)
                .collect();
            if ops.is_empty() {
                return Ok(());
            }
            let mut dsts: Vec<u64> = ops.iter().map(|(d, _)| d.device_ptr()).collect();
            let mut srcs: Vec<u64> = ops.iter().map(|(_, s)| s.device_ptr()).collect();
            let mut sizes: Vec<usize> = ops.iter().map(|(d, _)| d.len() * size_of::<T>()).collect();
            let mut uses = Vec::with_capacity(2 * ops.len());
            for (d, s) in &ops {
                uses.push(Use::device(d.allocation(), true));
                uses.push(Use::device(s.allocation(), false));
            }
            let lane = stream.lane()?;
            let device = lane.a.dev.ordinal;
            lane.submit(CALL, &uses, |a, raw| {
                // SAFETY: all-zero is a valid attribute set (plain integers and enums whose zero
                // is a listed value); the fields that matter are set below.
                let mut attr: sys::CUmemcpyAttributes = unsafe { std::mem::zeroed() };
                attr.srcAccessOrder =
                    sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
                let here = sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: device,
                };
                attr.srcLocHint = here;
                attr.dstLocHint = here;
                let mut idx = [0usize];
                // SAFETY: `count` live ranges of the given sizes, each admitted for this context
                // by the enqueue path (sources read, destinations written, the destinations
                // exclusively borrowed); one attribute set applying from copy 0; live stream.
                a.check(
                    unsafe {
                        sys::cuMemcpyBatchAsync_v2(
                            dsts.as_mut_ptr(),
                            srcs.as_mut_ptr(),
                            sizes.as_mut_ptr(),
                            dsts.len(),
                            &mut attr,
                            idx.as_mut_ptr(),
                            1,
                            raw,
                        )
                    },
                    "cuMemcpyBatchAsync",
                )
            })
        })())
    }
}

/// One range of a prefetch or discard batch: a managed allocation's elements, erased of type.
struct Range<'a> {
    alloc: &'a Alloc,
    ptr: u64,
    bytes: usize,
}

impl<'a> Range<'a> {
    fn of<T: DeviceRepr>(
        buf: &'a ManagedBuffer<T>,
        range: impl RangeBounds<usize>,
    ) -> Result<Range<'a>> {
        let (start, end) = resolve_range(range, buf.len(), "managed buffer")?;
        Ok(Range {
            alloc: buf.allocation(),
            ptr: buf.as_raw() + (start * size_of::<T>()) as u64,
            bytes: (end - start) * size_of::<T>(),
        })
    }
}

/// The locations of a batch as the driver takes them: distinct consecutive locations, and the
/// index of the first operation each applies to.
fn group_locations(locs: &[Location]) -> (Vec<sys::CUmemLocation>, Vec<usize>) {
    let (mut out, mut idx) = (Vec::new(), Vec::new());
    for (i, l) in locs.iter().enumerate() {
        if i == 0 || locs[i - 1] != *l {
            out.push(l.raw());
            idx.push(i);
        }
    }
    (out, idx)
}

/// Prefetches of managed memory queued together (`cudaMemPrefetchBatchAsync`): each range
/// migrates to its location, the batch in stream order. CPU access afterwards waits for it.
#[derive(Default)]
pub struct PrefetchBatch<'a> {
    ranges: Vec<Range<'a>>,
    to: Vec<Location>,
}

impl std::fmt::Debug for PrefetchBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefetchBatch")
            .field("ranges", &self.ranges.len())
            .field("to", &self.to)
            .finish()
    }
}

impl<'a> PrefetchBatch<'a> {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the elements `range` of `buf`, to be moved to `to`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside the buffer.
    pub fn prefetch<T: DeviceRepr>(
        &mut self,
        buf: &'a ManagedBuffer<T>,
        range: impl RangeBounds<usize>,
        to: Location,
    ) -> Result<()> {
        self.ranges.push(record(Range::of(buf, range))?);
        self.to.push(to);
        Ok(())
    }

    /// Queues the batch on `stream` (`cudaMemPrefetchBatchAsync`). Does not block the host.
    ///
    /// # Errors
    /// The driver's errors (a device location of a device without concurrent managed access,
    /// say).
    #[doc(alias = "cudaMemPrefetchBatchAsync")]
    pub fn submit(self, stream: &Stream) -> Result<()> {
        record(submit_ranges(
            "cudaMemPrefetchBatchAsync",
            &self.ranges,
            Some(&self.to),
            false,
            stream,
        ))
    }
}

/// Discards of managed memory queued together (`cudaMemDiscardBatchAsync`), optionally with a
/// prefetch (`cudaMemDiscardAndPrefetchBatchAsync`): the driver may drop the ranges' contents
/// instead of migrating them. Afterwards the elements hold unspecified values (any bit pattern
/// is a valid `T`, since [`DeviceRepr`] types are plain data) until written; the buffers are
/// borrowed exclusively, and the discard is noted as a write, so no CPU view and no other work
/// queued through the crate overlaps it.
#[derive(Default)]
pub struct DiscardBatch<'a> {
    ranges: Vec<Range<'a>>,
}

impl std::fmt::Debug for DiscardBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscardBatch")
            .field("ranges", &self.ranges.len())
            .finish()
    }
}

impl<'a> DiscardBatch<'a> {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the elements `range` of `buf`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside the buffer.
    pub fn discard<T: DeviceRepr>(
        &mut self,
        buf: &'a mut ManagedBuffer<T>,
        range: impl RangeBounds<usize>,
    ) -> Result<()> {
        let buf: &'a ManagedBuffer<T> = buf;
        self.ranges.push(record(Range::of(buf, range))?);
        Ok(())
    }

    /// Queues the discards on `stream` (`cudaMemDiscardBatchAsync`).
    ///
    /// # Errors
    /// The driver's errors (for memory that is not managed, or a system without concurrent
    /// managed access on every device).
    #[doc(alias = "cudaMemDiscardBatchAsync")]
    pub fn submit(self, stream: &Stream) -> Result<()> {
        record(submit_ranges(
            "cudaMemDiscardBatchAsync",
            &self.ranges,
            None,
            true,
            stream,
        ))
    }

    /// Queues the discards on `stream`, each range then prefetched to `to`, as one operation
    /// (`cudaMemDiscardAndPrefetchBatchAsync`): the pages are made resident there without
    /// moving the old contents.
    #[doc(alias = "cudaMemDiscardAndPrefetchBatchAsync")]
    pub fn submit_and_prefetch(self, to: Location, stream: &Stream) -> Result<()> {
        let to = vec![to; self.ranges.len()];
        record(submit_ranges(
            "cudaMemDiscardAndPrefetchBatchAsync",
            &self.ranges,
            Some(&to),
            true,
            stream,
        ))
    }
}

fn submit_ranges(
    call: &'static str,
    ranges: &[Range<'_>],
    to: Option<&[Location]>,
    write: bool,
    stream: &Stream,
) -> Result<()> {
    let keep: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].bytes > 0).collect();
    if keep.is_empty() {
        return Ok(());
    }
    let mut ptrs: Vec<u64> = keep.iter().map(|&i| ranges[i].ptr).collect();
    let mut sizes: Vec<usize> = keep.iter().map(|&i| ranges[i].bytes).collect();
    let locs: Vec<Location> = to
        .map(|t| keep.iter().map(|&i| t[i]).collect())
        .unwrap_or_default();
    let (mut raw_locs, mut idx) = group_locations(&locs);
    let uses: Vec<Use<'_>> = keep
        .iter()
        .map(|&i| Use::device(ranges[i].alloc, write))
        .collect();
    let lane = stream.lane()?;
    lane.submit(call, &uses, |a, raw| {
        let n = ptrs.len();
        // SAFETY: `n` live managed ranges of the given sizes, admitted for this context by the
        // enqueue path; the location arrays hold `raw_locs.len()` entries with ascending first
        // indices below `n`; flags 0; live stream.
        let (r, name) = unsafe {
            match (to.is_some(), write) {
                (true, false) => (
                    sys::cuMemPrefetchBatchAsync(
                        ptrs.as_mut_ptr(),
                        sizes.as_mut_ptr(),
                        n,
                        raw_locs.as_mut_ptr(),
                        idx.as_mut_ptr(),
                        raw_locs.len(),
                        0,
                        raw,
                    ),
                    "cuMemPrefetchBatchAsync",
                ),
                (true, true) => (
                    sys::cuMemDiscardAndPrefetchBatchAsync(
                        ptrs.as_mut_ptr(),
                        sizes.as_mut_ptr(),
                        n,
                        raw_locs.as_mut_ptr(),
                        idx.as_mut_ptr(),
                        raw_locs.len(),
                        0,
                        raw,
                    ),
                    "cuMemDiscardAndPrefetchBatchAsync",
                ),
                _ => (
                    sys::cuMemDiscardBatchAsync(ptrs.as_mut_ptr(), sizes.as_mut_ptr(), n, 0, raw),
                    "cuMemDiscardBatchAsync",
                ),
            }
        };
        a.check(r, name)
    })
}

/// Where the driver keeps or last moved part of managed memory, as range attributes report it.
fn location_from(id: i32) -> Option<Location> {
    match id {
        -1 => Some(Location::Host),
        id if id >= 0 => Some(Location::Device(Device::from_ordinal_unchecked(id))),
        _ => None,
    }
}

/// Attributes of a range of managed memory (`cudaMemRangeGetAttributes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeAttributes {
    /// Whether the whole range is advised read-mostly (`cudaMemRangeAttributeReadMostly`).
    pub read_mostly: bool,
    /// The preferred location, if the whole range has the same one
    /// (`cudaMemRangeAttributePreferredLocation`).
    pub preferred_location: Option<Location>,
    /// The devices advised to access the range (`cudaMemRangeAttributeAccessedBy`).
    pub accessed_by: Vec<Device>,
    /// Where the range was last prefetched to, if the whole range went to the same place
    /// (`cudaMemRangeAttributeLastPrefetchLocation`; it says where it was sent, not where the
    /// pages are now).
    pub last_prefetch_location: Option<Location>,
}

impl<T: DeviceRepr> ManagedBuffer<T> {
    /// Whether the elements `range` are advised read-mostly (`cudaMemRangeGetAttribute` with
    /// `cudaMemRangeAttributeReadMostly`). A query: it waits for nothing.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside the buffer; [`Error::InvalidValue`] for an
    /// empty range.
    #[doc(alias = "cudaMemRangeGetAttribute")]
    pub fn read_mostly(&self, range: impl RangeBounds<usize>) -> Result<bool> {
        record((|| {
            let r = self.query_range(range)?;
            let a = crate::context::enter_current()?;
            let mut v = 0i32;
            // SAFETY: a live managed range; `v` holds the 4 bytes this attribute writes.
            a.check(
                unsafe {
                    sys::cuMemRangeGetAttribute(
                        (&mut v as *mut i32).cast(),
                        4,
                        sys::CUmem_range_attribute::CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                        r.0,
                        r.1,
                    )
                },
                "cuMemRangeGetAttribute",
            )?;
            Ok(v != 0)
        })())
    }

    /// The range attributes of the elements `range` (`cudaMemRangeGetAttributes`). A query: it
    /// waits for nothing.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside the buffer; [`Error::InvalidValue`] for an
    /// empty range.
    #[doc(alias = "cudaMemRangeGetAttributes")]
    pub fn range_attributes(&self, range: impl RangeBounds<usize>) -> Result<RangeAttributes> {
        record((|| {
            let (ptr, bytes) = self.query_range(range)?;
            let a = crate::context::enter_current()?;
            let n = crate::device_count()? as usize;
            let (mut rm, mut pref, mut last) = (0i32, 0i32, 0i32);
            let mut by = vec![-2i32; n.max(1)];
            use sys::CUmem_range_attribute::*;
            let mut attrs = [
                CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
                CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
            ];
            let mut data: [*mut std::ffi::c_void; 4] = [
                (&mut rm as *mut i32).cast(),
                (&mut pref as *mut i32).cast(),
                by.as_mut_ptr().cast(),
                (&mut last as *mut i32).cast(),
            ];
            let mut sizes = [4usize, 4, 4 * by.len(), 4];
            // SAFETY: a live managed range; each data pointer holds the bytes its size says.
            a.check(
                unsafe {
                    sys::cuMemRangeGetAttributes(
                        data.as_mut_ptr(),
                        sizes.as_mut_ptr(),
                        attrs.as_mut_ptr(),
                        4,
                        ptr,
                        bytes,
                    )
                },
                "cuMemRangeGetAttributes",
            )?;
            Ok(RangeAttributes {
                read_mostly: rm != 0,
                preferred_location: location_from(pref),
                accessed_by: by
                    .into_iter()
                    .filter(|&d| d >= 0)
                    .map(Device::from_ordinal_unchecked)
                    .collect(),
                last_prefetch_location: location_from(last),
            })
        })())
    }

    fn query_range(&self, range: impl RangeBounds<usize>) -> Result<(u64, usize)> {
        let (start, end) = resolve_range(range, self.len(), "managed buffer")?;
        if start == end {
            return Err(Error::InvalidValue {
                what: "cudaMemRangeGetAttribute range",
                value: format!("{start}..{end}"),
                reason: "the range is empty",
            });
        }
        Ok((
            self.as_raw() + (start * size_of::<T>()) as u64,
            (end - start) * size_of::<T>(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_grouped_by_first_index() {
        let d0 = Location::Device(Device::from_ordinal_unchecked(0));
        let d1 = Location::Device(Device::from_ordinal_unchecked(1));
        let h = Location::Host;
        let (locs, idx) = group_locations(&[d0, d0, h, h, h, d1, d0]);
        assert_eq!(idx, vec![0, 2, 5, 6]);
        assert_eq!(locs.len(), 4);
        assert_eq!(locs[1].id, 0);
        assert_eq!(locs[2].id, 1);
        let (locs, idx) = group_locations(&[]);
        assert!(locs.is_empty() && idx.is_empty());
    }

    #[test]
    fn range_locations_decode() {
        assert_eq!(location_from(-1), Some(Location::Host));
        assert_eq!(location_from(-2), None);
        assert_eq!(
            location_from(3),
            Some(Location::Device(Device::from_ordinal_unchecked(3)))
        );
    }
}
