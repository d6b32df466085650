//! Managed (unified) memory: `cudaMallocManaged`, `cudaMemPrefetchAsync`, `cudaMemAdvise`.

use std::marker::PhantomData;
use std::mem::size_of;

use super::device::{sealed, Alloc};
use super::host::{host_traits, slice, slice_mut, HostKind, HostSide, HostSlice, HostSliceMut};
use super::{DeviceRead, DeviceRepr, DeviceWrite, PageLocked};
use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, ErrorCode, Result};
use crate::stream::Stream;
use crate::Device;

/// Which streams may use managed memory (`cudaMemAttachGlobal` / `cudaMemAttachHost` /
/// `cudaMemAttachSingle`): at allocation ([`ManagedBuffer::with_attach`], `Global` or `Host`),
/// or from a point in a stream's order on ([`ManagedBuffer::attach_async`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemAttach {
    /// Any stream of any device (`cudaMemAttachGlobal`).
    #[default]
    Global,
    /// Only the host, until a stream attaches it (`cudaMemAttachHost`). On devices with
    /// concurrent managed access (all Pascal and newer GPUs on Linux) this only affects
    /// migration hints.
    Host,
    /// Only the stream given to [`ManagedBuffer::attach_async`] (`cudaMemAttachSingle`); not
    /// an allocation flag.
    Single,
}

impl MemAttach {
    fn raw(self) -> u32 {
        match self {
            MemAttach::Global => sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
            MemAttach::Host => sys::CUmemAttach_flags::CU_MEM_ATTACH_HOST as u32,
            MemAttach::Single => sys::CUmemAttach_flags::CU_MEM_ATTACH_SINGLE as u32,
        }
    }
}

/// A place managed memory can live (`cudaMemLocation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// A device's memory.
    Device(Device),
    /// The host's memory (`cudaCpuDeviceId` in the older API).
    Host,
}

impl Location {
    pub(crate) fn raw(self) -> sys::CUmemLocation {
        match self {
            Location::Device(d) => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: d.ordinal(),
            },
            Location::Host => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
                id: 0,
            },
        }
    }
}

/// Advice about how managed memory is used (`cudaMemAdvise` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemAdvice {
    /// Mostly read: devices may keep read-only copies (`cudaMemAdviseSetReadMostly`).
    SetReadMostly,
    /// Undoes [`SetReadMostly`](Self::SetReadMostly) (`cudaMemAdviseUnsetReadMostly`).
    UnsetReadMostly,
    /// Prefer to keep the pages at a location (`cudaMemAdviseSetPreferredLocation`).
    SetPreferredLocation(Location),
    /// Undoes the preferred location (`cudaMemAdviseUnsetPreferredLocation`).
    UnsetPreferredLocation,
    /// A device accesses the memory: keep it mapped there (`cudaMemAdviseSetAccessedBy`).
    SetAccessedBy(Location),
    /// Undoes [`SetAccessedBy`](Self::SetAccessedBy) (`cudaMemAdviseUnsetAccessedBy`).
    UnsetAccessedBy(Location),
}

impl MemAdvice {
    fn raw(self) -> (sys::CUmem_advise, sys::CUmemLocation) {
        use sys::CUmem_advise::*;
        let none = Location::Host.raw();
        match self {
            MemAdvice::SetReadMostly => (CU_MEM_ADVISE_SET_READ_MOSTLY, none),
            MemAdvice::UnsetReadMostly => (CU_MEM_ADVISE_UNSET_READ_MOSTLY, none),
            MemAdvice::SetPreferredLocation(l) => (CU_MEM_ADVISE_SET_PREFERRED_LOCATION, l.raw()),
            MemAdvice::UnsetPreferredLocation => (CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, none),
            MemAdvice::SetAccessedBy(l) => (CU_MEM_ADVISE_SET_ACCESSED_BY, l.raw()),
            MemAdvice::UnsetAccessedBy(l) => (CU_MEM_ADVISE_UNSET_ACCESSED_BY, l.raw()),
        }
    }
}

/// A typed managed allocation (`cudaMallocManaged`): one address valid on the CPU and on every
/// device, pages migrated on demand.
///
/// The CPU reaches it through [`as_slice`](Self::as_slice) / [`as_mut_slice`](Self::as_mut_slice),
/// which first wait for the device work that used it (kernels, copies, prefetches); kernels
/// take it like a device buffer. The memory belongs to the allocating device's context: after
/// a reset CPU access fails with [`Error::ContextDestroyed`], and a reset while a CPU view is
/// alive is refused.
///
/// The allocation is refused, before the driver is asked, when it is larger than the device's
/// free memory ([`Error::ManagedTooLarge`]): oversubscribed managed memory can stall the GPU.
///
/// ```no_run
/// use cuda_runtime::{Device, Location, ManagedBuffer, MemAdvice, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let mut m = ManagedBuffer::<f32>::new(1024)?;
/// m.as_mut_slice()?.fill(1.5);
/// let stream = Stream::new()?;
/// m.advise(MemAdvice::SetPreferredLocation(Location::Device(Device::current()?)))?;
/// m.prefetch_async(Location::Device(Device::current()?), &stream)?;
/// // ... kernels on `stream` use `m` ...
/// assert_eq!(m.as_slice()?[3], 1.5); // waits for that work
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ManagedBuffer<T: DeviceRepr> {
    alloc: Alloc,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> ManagedBuffer<T> {
    /// The allocation (for batched submissions through the enqueue path).
    pub(crate) fn allocation(&self) -> &Alloc {
        &self.alloc
    }

    /// Allocates `len` zeroed elements of managed memory attached globally on the current
    /// device (`cudaMallocManaged(..., cudaMemAttachGlobal)`).
    #[doc(alias = "cudaMallocManaged")]
    pub fn new(len: usize) -> Result<ManagedBuffer<T>> {
        Self::with_attach(len, MemAttach::Global)
    }

    /// Allocates `len` zeroed elements of managed memory with the given attachment
    /// (`cudaMallocManaged`). Blocks the host until the memory is zeroed.
    ///
    /// # Errors
    /// [`Error::ManagedTooLarge`] when the size exceeds the device's free memory;
    /// `cudaErrorNotSupported` on a device without concurrent managed access (Windows, WSL,
    /// GPUs before Pascal), where the CPU faults on managed memory while any kernel of the
    /// device runs, so safe CPU views of it cannot be given.
    pub fn with_attach(len: usize, attach: MemAttach) -> Result<ManagedBuffer<T>> {
        record(Self::alloc(len, attach))
    }

    /// Allocates managed memory holding a copy of `src`.
    pub fn from_slice(src: &[T]) -> Result<ManagedBuffer<T>> {
        let mut b = Self::new(src.len())?;
        b.as_mut_slice()?.copy_from_slice(src);
        Ok(b)
    }

    fn alloc(len: usize, attach: MemAttach) -> Result<ManagedBuffer<T>> {
        if attach == MemAttach::Single {
            // As libcudart: cudaMemAttachSingle is not an allocation flag.
            return Err(Error::InvalidValue {
                what: "cudaMallocManaged flags",
                value: format!("{attach:?} ({:#x})", attach.raw()),
                reason: "managed memory is allocated attached globally or to the host; attach                          it to one stream afterwards with ManagedBuffer::attach_async",
            });
        }
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::InvalidValue {
                what: "cudaMallocManaged size",
                value: format!("{len} elements of {} bytes", size_of::<T>()),
                reason: "the size in bytes overflows usize",
            })?;
        let a = context::enter_current()?;
        let (device, generation) = (a.dev.ordinal, a.generation());
        if bytes == 0 {
            let p = std::ptr::NonNull::<T>::dangling().as_ptr().cast::<u8>();
            return Ok(ManagedBuffer {
                alloc: Alloc::host(
                    p as u64,
                    0,
                    device,
                    generation,
                    HostSide::new(HostKind::Empty, p, true, true, true),
                ),
                len,
                _t: PhantomData,
            });
        }
        // Without concurrent managed access (Windows, WSL, older GPUs) the CPU faults on
        // managed memory while any kernel of the device runs, which a safe view cannot rule out.
        let concurrent = a
            .dev
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)?;
        if concurrent == 0 {
            return Err(Error::Cuda {
                code: ErrorCode::NotSupported,
                driver: None,
                call: "cudaMallocManaged (the device lacks concurrent managed access, without \
                       which CPU views of managed memory cannot be made safe)",
            });
        }
        let flags = attach.raw();
        let mut ptr = 0u64;
        let (free, total) = a.mem_info()?;
        if bytes > total {
            // No free could make room: refused at once (fifth review), not retried.
            return Err(Error::ManagedTooLarge {
                device,
                requested: bytes,
                free,
            });
        }
        // Out of memory (the driver's, or more than is free): tried again as pending frees
        // finish, as `cudaMalloc` is (fourth review of the per-thread fences). The first try
        // uses the figure just read.
        let mut known_free = Some(free);
        crate::queue::alloc_retry(&a, || {
            let free = match known_free.take() {
                Some(f) => f,
                None => a.mem_info()?.0,
            };
            if bytes > free {
                return Err(Error::ManagedTooLarge {
                    device,
                    requested: bytes,
                    free,
                });
            }
            // SAFETY: the context is current; valid out-parameter; size checked against free
            // memory.
            a.check(
                unsafe { sys::cuMemAllocManaged(&mut ptr, bytes, flags) },
                "cuMemAllocManaged",
            )
        })?;
        let host = ptr as *mut u8;
        let alloc = Alloc::host(
            ptr,
            bytes,
            device,
            generation,
            HostSide::new(HostKind::Managed, host, true, true, true),
        );
        if !ptr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            drop(alloc);
            return Err(super::host::misaligned::<T>("cudaMallocManaged", ptr));
        }
        // SAFETY: `ptr` is `bytes` bytes of managed memory, reachable from the CPU; zeroing
        // makes every `T` valid. No device work uses it yet.
        unsafe { std::ptr::write_bytes(host, 0, bytes) };
        Ok(ManagedBuffer {
            alloc,
            len,
            _t: PhantomData,
        })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address, valid on the CPU and on every device.
    pub fn as_raw(&self) -> u64 {
        self.alloc.ptr
    }

    /// The device whose context owns the memory.
    pub fn device(&self) -> Device {
        Device::from_ordinal_unchecked(self.alloc.device)
    }

    /// The contents, once no queued device work writes them. Blocks until then.
    ///
    /// # Errors
    /// [`Error::ContextDestroyed`] after the owning device was reset; the error of the work
    /// waited for.
    pub fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        record(slice(&self.alloc, 0, self.len))
    }

    /// The contents for writing, once no queued device work uses them.
    pub fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_, T>> {
        // SAFETY: `self` is borrowed exclusively for the view.
        record(unsafe { slice_mut(&self.alloc, 0, self.len) })
    }

    /// A copy of the contents.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.as_slice()?.to_vec())
    }

    /// Waits for every queued piece of device work that uses the memory.
    pub fn synchronize(&self) -> Result<()> {
        record(
            self.alloc
                .host
                .as_deref()
                .map_or(Ok(()), |h| h.wait(&self.alloc.uses, true)),
        )
    }

    /// Migrates the memory to `to` in stream order (`cudaMemPrefetchAsync`). Does not block
    /// the host; CPU access afterwards waits for it.
    #[doc(alias = "cudaMemPrefetchAsync")]
    pub fn prefetch_async(&self, to: Location, stream: &Stream) -> Result<()> {
        record((|| {
            if self.alloc.bytes == 0 {
                return Ok(());
            }
            let lane = stream.lane()?;
            let (ptr, bytes) = (self.alloc.ptr, self.alloc.bytes);
            let uses = [crate::queue::Use::device(&self.alloc, false)];
            lane.submit("cudaMemPrefetchAsync", &uses, |a, raw| {
                // SAFETY: live managed allocation of `bytes` bytes; live stream.
                a.check(
                    unsafe { sys::cuMemPrefetchAsync_v2(ptr, bytes, to.raw(), 0, raw) },
                    "cuMemPrefetchAsync",
                )
            })
        })())
    }

    super::host::host_view_ops!();

    /// Changes which streams may use the memory, in stream order on `stream`
    /// (`cudaStreamAttachMemAsync` on the whole allocation, length 0): from that point on,
    /// [`MemAttach::Single`] lets only `stream` use it (and the CPU, when `stream` is idle),
    /// [`MemAttach::Host`] only the CPU, [`MemAttach::Global`] every stream. Does not block the
    /// host; the attach is noted as a use, so CPU access afterwards waits for it.
    ///
    /// On the devices this crate gives managed memory to (with concurrent managed access), the
    /// attachment changes where the driver migrates pages, not what is allowed: the CPU views
    /// stay safe whatever the attachment.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` from the driver for an attachment it refuses (such as
    /// [`MemAttach::Single`] on the legacy default stream); [`Error::ContextDestroyed`] after a
    /// reset of the memory's device.
    #[doc(alias = "cudaStreamAttachMemAsync")]
    pub fn attach_async(&self, stream: &Stream, attach: MemAttach) -> Result<()> {
        record((|| {
            if self.alloc.bytes == 0 {
                return Ok(());
            }
            let lane = stream.lane()?;
            let ptr = self.alloc.ptr;
            let uses = [crate::queue::Use::device(&self.alloc, true)];
            lane.submit("cudaStreamAttachMemAsync", &uses, |a, raw| {
                // SAFETY: live managed allocation (length 0: the whole of it); live stream of
                // the current context; flags from the enum.
                a.check(
                    unsafe { sys::cuStreamAttachMemAsync(raw, ptr, 0, attach.raw()) },
                    "cuStreamAttachMemAsync",
                )
            })
        })())
    }

    /// Gives the driver a hint about how the memory is used (`cudaMemAdvise`).
    #[doc(alias = "cudaMemAdvise")]
    pub fn advise(&self, advice: MemAdvice) -> Result<()> {
        record((|| {
            if self.alloc.bytes == 0 {
                return Ok(());
            }
            let a =
                context::enter_handle(self.alloc.device, self.alloc.generation, "managed memory")?;
            let (adv, loc) = advice.raw();
            // SAFETY: live managed allocation of `bytes` bytes.
            a.check(
                unsafe { sys::cuMemAdvise_v2(self.alloc.ptr, self.alloc.bytes, adv, loc) },
                "cuMemAdvise",
            )
        })())
    }
}

host_traits!(ManagedBuffer);

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ManagedBuffer<f32>>();
};
