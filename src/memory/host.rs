//! Page-locked host memory: `cudaMallocHost` / `cudaHostAlloc`, `cudaHostRegister`, mapped
//! (zero-copy) memory, and the bookkeeping that keeps the CPU away from memory that
//! asynchronous work still uses.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicUsize;

use parking_lot::Mutex;

use super::device::{sealed, Alloc, Keep};
use super::registered::{page_size, Registered};
use super::{DeviceRead, DeviceRepr, DeviceWrite};
use crate::context::{self, Active, HostBorrow};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, ErrorCode, Result};
use crate::queue::Uses;

bitflags::bitflags! {
    /// Flags of [`PinnedBuffer::with_flags`] (`cudaHostAlloc` flags).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HostAllocFlags: u32 {
        /// Page-locked for every device's context, not only the current one
        /// (`cudaHostAllocPortable`).
        const PORTABLE = 0x1;
        /// Mapped into the device's address space: kernels can read and write it directly
        /// (`cudaHostAllocMapped`).
        const MAPPED = 0x2;
        /// Write-combined: faster for the device to read over PCIe on some systems, but CPU
        /// reads of it are very slow (`cudaHostAllocWriteCombined`). Use it only for memory the
        /// CPU writes and the device reads.
        const WRITE_COMBINED = 0x4;
    }
}

bitflags::bitflags! {
    /// Flags of [`HostRegistration`] (`cudaHostRegister` flags).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HostRegisterFlags: u32 {
        /// Page-locked for every device's context (`cudaHostRegisterPortable`).
        const PORTABLE = 0x1;
        /// Mapped into the device's address space (`cudaHostRegisterMapped`).
        const MAPPED = 0x2;
        /// The memory is I/O memory (e.g. a PCI BAR) (`cudaHostRegisterIoMemory`).
        const IO_MEMORY = 0x4;
        /// The device only reads the memory (`cudaHostRegisterReadOnly`). Set by
        /// [`HostRegistration::with_read_only`].
        const READ_ONLY = 0x8;
    }
}

/// How host-reachable memory is owned and freed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HostKind {
    /// Nothing allocated (zero bytes).
    Empty,
    /// A Rust allocation owned by the crate, registered with `cuMemHostRegister`. It outlives a
    /// device reset (only the registration dies with the context).
    Registered(Layout),
    /// `cuMemHostAlloc` memory, owned by the context: a reset frees it.
    HostAlloc,
    /// `cuMemAllocManaged` memory, owned by the context: a reset frees it.
    Managed,
    /// Memory the program owns, registered for the scope of a [`HostRegistration`].
    Borrowed,
}

/// The host side of an allocation the CPU can reach.
#[derive(Debug)]
pub(crate) struct HostSide {
    pub(crate) kind: HostKind,
    /// The CPU address.
    pub(crate) host_ptr: Raw<u8>,
    /// Whether kernels may use the device address (mapped or managed memory).
    pub(crate) mapped: bool,
    /// Whether work on every device may use the same device address (portable mapped memory
    /// whose device address is its host address, or managed memory).
    pub(crate) any_device: bool,
    /// Whether the device may write it (not a read-only registration).
    pub(crate) writable: bool,
    /// Whether the CPU may write it: not memory lent by a shared borrow
    /// ([`HostRegistration::with_read_only`]).
    pub(crate) cpu_writable: bool,
    /// Held for a whole wait, so that a second CPU access cannot pass while the first one is
    /// still waiting.
    waiting: Mutex<()>,
    /// CPU views of the memory alive or forgotten (see `context::HostBorrow`). (Here, not in
    /// [`Alloc`]: only memory with a host side has CPU views, and a smaller `Alloc` moves
    /// faster.)
    pub(crate) views: AtomicUsize,
    /// The record of a registration of the program's memory ([`HostKind::Borrowed`]), kept
    /// until it is undone.
    pub(crate) registered: Option<Registered>,
    /// For a [`PinnedBuffer`]'s memory: the flags it was allocated with (its block goes back to
    /// the page-locked memory cache, `crate::cache`, when dropped).
    pub(crate) pinned_flags: Option<u32>,
}

impl HostSide {
    pub(crate) fn new(
        kind: HostKind,
        host_ptr: *mut u8,
        mapped: bool,
        any_device: bool,
        writable: bool,
    ) -> HostSide {
        HostSide {
            kind,
            host_ptr: Raw(host_ptr),
            mapped,
            any_device,
            writable,
            cpu_writable: writable,
            waiting: Mutex::new(()),
            views: AtomicUsize::new(0),
            registered: None,
            pinned_flags: None,
        }
    }

    /// Whether a reset of the owning context frees the memory.
    fn context_owned(&self) -> bool {
        matches!(self.kind, HostKind::HostAlloc | HostKind::Managed)
    }

    /// Waits for queued work that conflicts with a CPU access: writers for a read, all for a
    /// write, each exactly at its point in its queue, whatever thread waits.
    ///
    /// Inside a host function no CUDA call may wait: an access that would have to is refused
    /// ([`Error::InHostFunction`]), as is one while another thread is waiting.
    pub(crate) fn wait(&self, uses: &Uses, for_write: bool) -> Result<()> {
        if context::in_host_fn() {
            let refused = Err(Error::InHostFunction {
                call: "waiting for device work that uses page-locked or managed memory",
            });
            let Some(_one_at_a_time) = self.waiting.try_lock() else {
                return refused;
            };
            if uses.pending(for_write) {
                return refused;
            }
            return Ok(());
        }
        let _one_at_a_time = self.waiting.lock();
        uses.wait(for_write)
    }

    /// Checks that work queued in the context of `device` (generation `generation`) may use
    /// the memory: `need_mapped` for kernels and device-to-device copies (which use its device
    /// address), not for copies to and from it.
    ///
    /// For work of another device than the owner's, a reset of the owner waits for that device
    /// from now on (the reset frees or unmaps the memory), and the returned guard keeps the
    /// owner from being reset until the caller has queued the work.
    pub(crate) fn admit(
        &self,
        alloc: &Alloc,
        device: i32,
        generation: u64,
        need_mapped: bool,
        call: &'static str,
    ) -> Result<Keep> {
        if need_mapped && !self.mapped {
            return Err(Error::InvalidValue {
                what: call,
                value: format!("host memory at {:p}", self.host_ptr.0),
                reason: "page-locked memory is only usable by device work when it is mapped \
                         (HostAllocFlags::MAPPED / HostRegisterFlags::MAPPED)",
            });
        }
        if matches!(self.kind, HostKind::Empty) {
            return Ok(Keep::NONE);
        }
        if device == alloc.device {
            if generation != alloc.generation {
                return Err(Error::ContextDestroyed {
                    what: "host memory or stream",
                    device: alloc.device,
                });
            }
            return Ok(Keep::NONE);
        }
        if need_mapped && !self.any_device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the mapped memory (not portable)",
                found: alloc.device,
                expected: device,
            });
        }
        // Pinned first: a reset that starts later sees the reader noted below and waits for
        // it; one that finished earlier changed the generation, and the pin fails.
        let pin = context::pin(
            alloc.device,
            alloc.generation,
            "host memory used by another device",
        )?;
        context::note_peer_reader(alloc.device, device);
        Ok(Keep::pinned(pin))
    }

    pub(crate) fn check_writable(&self, call: &'static str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::InvalidValue {
                what: call,
                value: format!("{:p}", self.host_ptr.0),
                reason: "the memory was registered read-only (cudaHostRegisterReadOnly)",
            })
        }
    }

    /// For a CPU write view: refused for memory the program lent by a shared borrow.
    pub(crate) fn check_cpu_writable(&self, call: &'static str) -> Result<()> {
        if self.cpu_writable {
            Ok(())
        } else {
            Err(Error::InvalidValue {
                what: call,
                value: format!("{:p}", self.host_ptr.0),
                reason: "the slice was lent shared (HostRegistration::with_read_only): the CPU \
                         may only read it",
            })
        }
    }

    /// Makes the memory available to the CPU: keeps a reset from freeing it for the borrow,
    /// then waits for conflicting device work.
    pub(crate) fn access<'a>(
        &'a self,
        alloc: &'a Alloc,
        for_write: bool,
    ) -> Result<Option<HostBorrow<'a>>> {
        let borrow = if self.context_owned() {
            Some(HostBorrow::take(
                alloc.device,
                alloc.generation,
                "host memory",
                &self.views,
            )?)
        } else {
            None
        };
        self.wait(&alloc.uses, for_write)?;
        Ok(borrow)
    }

    /// Frees the memory once no queued work uses it (from `Drop`). `views`: CPU views still
    /// counted, which were forgotten.
    ///
    /// The driver's calls that free host-reachable memory (`cuMemHostUnregister`,
    /// `cuMemFreeHost`, `cuMemFree` of managed memory) wait for the whole device, as
    /// `cudaFreeHost` does, and hold a lock of the driver meanwhile that other threads' calls
    /// need. So the drop itself never makes them: a [`PinnedBuffer`]'s block joins the crate's
    /// page-locked memory cache once its own uses are done, and managed memory is freed by the
    /// next synchronising call of the crate that finds the device idle. A registration of
    /// the program's memory ([`HostRegistration`]) must be undone before the program's borrow
    /// ends: its scope waits for its own uses and unregisters on the calling thread.
    #[allow(clippy::boxed_local)] // taken as the allocation holds it
    pub(crate) fn finish(
        mut self: Box<Self>,
        ptr: u64,
        device: i32,
        generation: u64,
        bytes: usize,
        mut uses: Uses,
        views: usize,
    ) {
        context::forget_borrows(device, views);
        let host = self.host_ptr;
        if let (Some(flags), HostKind::Registered(_) | HostKind::HostAlloc, true) = (
            self.pinned_flags,
            self.kind,
            crate::cache::caches_host(device),
        ) {
            let layout = match self.kind {
                HostKind::Registered(layout) => Some(layout),
                _ => None,
            };
            let block = crate::cache::HostBlock {
                host,
                dptr: ptr,
                layout,
            };
            let waits = uses.take_points();
            crate::cache::give_back_host(device, generation, flags, bytes, block, waits);
            return;
        }
        let (during, free): (&'static str, FreeHost) = match self.kind {
            HostKind::Empty => return,
            HostKind::Borrowed => {
                // Copies of plain slices in these pages that were in the driver's hands when
                // the registration was made may be transferring them directly: they end before
                // the unregistration. Later ones never reach the driver while it is recorded.
                let registered = self.registered.take();
                if context::in_host_fn() {
                    context::defer_release(move || {
                        unregister_now(host, device, generation, uses, registered)
                    });
                } else {
                    unregister_now(host, device, generation, uses, registered);
                }
                return;
            }
            HostKind::Registered(layout) => (
                "unregistering host memory",
                Box::new(move |a: Option<&Active>| {
                    let r = a.map_or(Ok(()), |a| {
                        // SAFETY: `host` was registered in this (live) context and no work
                        // uses it.
                        a.check(
                            unsafe { sys::cuMemHostUnregister(host.get().cast()) },
                            "cuMemHostUnregister",
                        )
                    });
                    // SAFETY: allocated by `alloc_zeroed` with this layout; no work uses it,
                    // and the registration is gone (undone above, or died with its context).
                    unsafe { std::alloc::dealloc(host.0, layout) };
                    r
                }),
            ),
            HostKind::HostAlloc => (
                "freeing page-locked memory",
                Box::new(move |a: Option<&Active>| {
                    a.map_or(Ok(()), |a| {
                        // SAFETY: `cuMemHostAlloc` memory of this live context, unused.
                        a.check(
                            unsafe { sys::cuMemFreeHost(host.get().cast()) },
                            "cuMemFreeHost",
                        )
                    })
                }),
            ),
            HostKind::Managed => (
                "freeing managed memory",
                Box::new(move |a: Option<&Active>| {
                    // SAFETY: managed memory of this live context, unused.
                    a.map_or(Ok(()), |a| {
                        a.check(unsafe { sys::cuMemFree_v2(ptr) }, "cuMemFree")
                    })
                }),
            ),
        };
        let waits = uses.take_points();
        crate::queue::defer_free_blocking(device, generation, waits, during, free);
    }
}

/// Frees host-reachable memory in its live context (`Some`), or after a reset (`None`).
type FreeHost = Box<dyn FnOnce(Option<&Active>) -> Result<()> + Send>;

/// Waits for the uses of the program's registered memory at `host` and unregisters it (the end
/// of a [`HostRegistration`] scope); `registered` is its entry in the record of registrations,
/// forgotten once the pages are unlocked.
fn unregister_now(
    host: Raw<u8>,
    device: i32,
    generation: u64,
    uses: Uses,
    registered: Option<Registered>,
) {
    if let Err(e) = uses.wait(true) {
        if let Ok(d) = context::device_state(device) {
            d.defer("waiting for work that uses registered host memory", e);
        }
    }
    if let Some(r) = &registered {
        r.settle();
    }
    context::release(device, generation, "unregistering host memory", move |a| {
        // SAFETY: the program's memory, registered in this (live) context; no work uses it, and
        // no copy of a plain slice transfers its pages directly (settled above).
        let r = a.check(
            unsafe { sys::cuMemHostUnregister(host.get().cast()) },
            "cuMemHostUnregister",
        );
        // Forgotten once the pages are unlocked (also when the release does not run: the
        // registration died with its context).
        drop(registered);
        r
    });
}

/// A CPU view of page-locked or managed memory ([`PinnedBuffer::as_slice`]): no device work
/// writes the memory while it lives, and the device cannot be reset under it.
pub struct HostSlice<'a, T> {
    data: &'a [T],
    _borrow: Option<HostBorrow<'a>>,
}

/// An exclusive CPU view of page-locked or managed memory ([`PinnedBuffer::as_mut_slice`]): no
/// device work uses the memory while it lives.
pub struct HostSliceMut<'a, T> {
    data: &'a mut [T],
    _borrow: Option<HostBorrow<'a>>,
}

impl<T> Deref for HostSlice<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T> Deref for HostSliceMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T> DerefMut for HostSliceMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.data.fmt(f)
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSliceMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.data.fmt(f)
    }
}

/// CPU access to an allocation with a host side: `len` elements from element `offset`
/// (`offset + len` within the allocation: the callers' views are checked when made).
pub(crate) fn slice<T>(alloc: &Alloc, offset: usize, len: usize) -> Result<HostSlice<'_, T>> {
    let h = host_side(alloc);
    let borrow = h.access(alloc, false)?;
    // SAFETY: the memory holds initialised `T`s (zeroed or copied at allocation, and every
    // write since was of `T`s), `offset + len` of them within the allocation; no device work
    // writes it (the whole allocation's writers were waited for above) and none can be queued
    // while the shared borrow of the owner lives, except reads; a reset cannot free it while
    // `borrow` lives.
    let data = unsafe { std::slice::from_raw_parts(h.host_ptr.0.cast::<T>().add(offset), len) };
    Ok(HostSlice {
        data,
        _borrow: borrow,
    })
}

/// Exclusive CPU access to an allocation with a host side, as [`slice`].
///
/// # Safety
/// The caller holds exclusive access to the owner of `alloc` (or to the elements
/// `offset..offset + len` of it, through an exclusive view) for `'a`.
pub(crate) unsafe fn slice_mut<T>(
    alloc: &Alloc,
    offset: usize,
    len: usize,
) -> Result<HostSliceMut<'_, T>> {
    let h = host_side(alloc);
    let borrow = h.access(alloc, true)?;
    // SAFETY: as in `slice`; those elements are borrowed exclusively (the caller's contract),
    // so no other CPU access and no new device work on them can start while the view lives,
    // and every queued use of the allocation was waited for.
    let data = unsafe { std::slice::from_raw_parts_mut(h.host_ptr.0.cast::<T>().add(offset), len) };
    Ok(HostSliceMut {
        data,
        _borrow: borrow,
    })
}

pub(crate) fn host_side(alloc: &Alloc) -> &HostSide {
    alloc
        .host
        .as_deref()
        .expect("allocations of host-reachable types always have a host side")
}

/// The device address of mapped memory for work of device `device` (`cudaHostGetDevicePointer`
/// with `device` current). `flag` names the flag that makes memory mapped, for the error.
fn mapped_ptr_on(alloc: &Alloc, device: i32, flag: &'static str) -> Result<u64> {
    let h = host_side(alloc);
    if !h.mapped {
        return Err(Error::InvalidValue {
            what: "cudaHostGetDevicePointer",
            value: format!("{:p}", h.host_ptr.0),
            reason: flag,
        });
    }
    if device == alloc.device {
        return Ok(alloc.ptr);
    }
    if !h.any_device {
        // As the driver: memory not mapped in the current context is an invalid value.
        return Err(Error::InvalidValue {
            what: "cudaHostGetDevicePointer",
            value: format!("{:p} for device {device}", h.host_ptr.0),
            reason: "the memory is mapped only on the device it was allocated or registered \
                     on; ask for PORTABLE to map it on every device",
        });
    }
    if !context::is_live(alloc.device, alloc.generation) {
        return Err(Error::ContextDestroyed {
            what: "mapped memory",
            device: alloc.device,
        });
    }
    let a = context::enter(device)?;
    let mut dptr = 0u64;
    // SAFETY: portable mapped page-locked memory is mapped in every context; valid
    // out-parameter; `device`'s context is current.
    a.check(
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, h.host_ptr.0.cast(), 0) },
        "cuMemHostGetDevicePointer",
    )?;
    Ok(dptr)
}

/// The error for memory the driver gave at an address not aligned for `T` (only types aligned
/// beyond a page can meet it).
pub(crate) fn misaligned<T>(call: &'static str, addr: u64) -> Error {
    Error::InvalidValue {
        what: call,
        value: format!(
            "{addr:#x} for a type aligned to {} bytes",
            std::mem::align_of::<T>()
        ),
        reason: "the driver's allocation is not aligned for the element type",
    }
}

const PINNED_NOT_MAPPED: &str = "the memory was not allocated with HostAllocFlags::MAPPED";
const REGISTERED_NOT_MAPPED: &str = "the memory was not registered with HostRegisterFlags::MAPPED";

/// Page-locked, registered or managed memory that asynchronous copies may use without staging:
/// [`PinnedBuffer`], [`HostRegistration`], [`ManagedBuffer`](crate::ManagedBuffer).
///
/// Sealed. The async copies of device buffers that take it (`copy_from_pinned_async`,
/// `copy_to_pinned_async`) return at once; the memory remembers the stream, and CPU access or
/// drop waits for it.
pub trait PageLocked<T: DeviceRepr>: sealed::Sealed {
    /// The number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The host address of the first element.
    fn host_ptr(&self) -> *const T;
}

/// Page-locked, registered or managed memory that asynchronous copies may *write*:
/// [`PinnedBuffer`], [`HostRegistration`], [`ManagedBuffer`](crate::ManagedBuffer) and the
/// exclusive view [`PinnedViewMut`], each borrowed exclusively by the copy call (a shared
/// [`PinnedView`] is only a source). Sealed.
pub trait PageLockedMut<T: DeviceRepr>: PageLocked<T> {}

pub(crate) mod range {
    /// Where the elements of host-reachable memory lie in their allocation.
    pub trait HostRange {
        /// The allocation, the first element's index in it, and the number of elements.
        fn host_range(&self) -> (&crate::memory::Alloc, usize, usize);
    }
}

/// CPU access shared by page-locked ([`PinnedBuffer`]), registered ([`HostRegistration`]) and
/// managed ([`ManagedBuffer`](crate::ManagedBuffer)) memory, and by exclusive views of part of
/// them ([`PinnedViewMut`]): generic code can read and write any of them from the CPU.
///
/// Every access first waits for the queued device work it conflicts with (the writers for a
/// read, every use for a write), exactly at its points in its queues, whatever stream or thread
/// queued it. For a view, that is the work queued on any part of its allocation (uses are noted
/// per allocation). Sealed.
///
/// ```no_run
/// use cuda_runtime::{HostAccess, ManagedBuffer, PinnedBuffer};
/// fn total<M: HostAccess<f32>>(m: &M) -> cuda_runtime::Result<f32> {
///     Ok(m.as_slice()?.iter().sum())
/// }
/// # fn main() -> cuda_runtime::Result<()> {
/// let pinned = PinnedBuffer::from_slice(&[1.0f32, 2.0])?;
/// let managed = ManagedBuffer::from_slice(&[3.0f32, 4.0])?;
/// assert_eq!(total(&pinned)? + total(&managed)?, 10.0);
/// # Ok(()) }
/// ```
pub trait HostAccess<T: DeviceRepr>: PageLockedMut<T> + range::HostRange {
    /// The contents, once no queued device work writes them. Blocks until then.
    ///
    /// # Errors
    /// [`Error::ContextDestroyed`] for memory a reset freed (write-combined page-locked or
    /// managed memory); the error of the work waited for.
    fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        let (alloc, offset, len) = self.host_range();
        record(slice(alloc, offset, len))
    }

    /// The contents for writing, once no queued device work uses them. Blocks until then.
    ///
    /// # Errors
    /// As [`as_slice`](Self::as_slice); [`Error::InvalidValue`] for a registration made by
    /// [`HostRegistration::with_read_only`] (of a shared slice).
    fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_, T>> {
        let (alloc, offset, len) = self.host_range();
        record(
            host_side(alloc)
                .check_cpu_writable("HostAccess::as_mut_slice")
                // SAFETY: every implementor (sealed) is borrowed exclusively here and owns, or
                // exclusively borrows, exactly these elements.
                .and_then(|()| unsafe { slice_mut(alloc, offset, len) }),
        )
    }

    /// A copy of the contents (waits as [`as_slice`](Self::as_slice)).
    fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.as_slice()?.to_vec())
    }

    /// Waits for every queued piece of device work that uses the memory's allocation.
    fn synchronize(&self) -> Result<()> {
        let (alloc, _, _) = self.host_range();
        record(host_side(alloc).wait(&alloc.uses, true))
    }
}

/// A shared view of part of page-locked, registered or managed memory
/// ([`PinnedBuffer::slice`], [`HostRegistration::slice`], [`ManagedBuffer::slice`]): a source
/// for asynchronous copies ([`DeviceBuffer::copy_from_pinned_async`] and the views' same
/// method) and, for mapped memory, a `const T*` kernel argument.
///
/// Work queued on a view notes its use on the *whole allocation*: CPU views of the buffer and
/// its drop wait for every chunk copied, whatever stream copied it.
///
/// [`DeviceBuffer::copy_from_pinned_async`]: crate::DeviceBuffer::copy_from_pinned_async
/// [`ManagedBuffer::slice`]: crate::ManagedBuffer::slice
#[derive(Debug, Clone, Copy)]
pub struct PinnedView<'a, T: DeviceRepr> {
    alloc: &'a Alloc,
    offset: usize,
    len: usize,
    dptr: u64,
    _t: PhantomData<&'a [T]>,
}

/// An exclusive view of part of page-locked, registered or managed memory
/// ([`PinnedBuffer::slice_mut`], [`HostRegistration::slice_mut`],
/// [`ManagedBuffer::slice_mut`](crate::ManagedBuffer::slice_mut)): a destination for
/// asynchronous copies ([`DeviceBuffer::copy_to_pinned_async`](crate::DeviceBuffer::copy_to_pinned_async)),
/// a `T*` kernel argument for mapped memory, and CPU access to its elements ([`HostAccess`]).
///
/// As for [`PinnedView`], uses are noted on the whole allocation.
///
/// ```no_run
/// use cuda_runtime::{DeviceBuffer, PinnedBuffer, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let n = 1 << 20;
/// let streams = [Stream::new()?, Stream::new()?];
/// let host = PinnedBuffer::from_slice(&vec![1u32; n])?;
/// let mut back = PinnedBuffer::<u32>::new(n)?;
/// let mut dev = DeviceBuffer::<u32>::new(n)?;
/// let half = n / 2;
/// for (i, s) in streams.iter().enumerate() {
///     let r = i * half..(i + 1) * half;
///     dev.slice_mut(r.clone())?.copy_from_pinned_async(&host.slice(r.clone())?, s)?;
///     dev.slice(r.clone())?.copy_to_pinned_async(&mut back.slice_mut(r)?, s)?;
/// }
/// assert!(back.as_slice()?.iter().all(|&x| x == 1)); // waits for both streams' copies
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PinnedViewMut<'a, T: DeviceRepr> {
    alloc: &'a Alloc,
    offset: usize,
    len: usize,
    dptr: u64,
    _t: PhantomData<&'a mut [T]>,
}

/// The element range `range` of `len` elements of `alloc`, from element `base`, as a view's
/// fields: (offset, len, device address).
fn host_view<T>(
    alloc: &Alloc,
    base: usize,
    len: usize,
    range: impl std::ops::RangeBounds<usize>,
) -> Result<(usize, usize, u64)> {
    let (s, e) = super::device::resolve_range(range, len, "page-locked memory view")?;
    let offset = base + s;
    Ok((offset, e - s, alloc.ptr + (offset * size_of::<T>()) as u64))
}

impl<'a, T: DeviceRepr> PinnedView<'a, T> {
    pub(crate) fn alloc_ref(&self) -> &'a Alloc {
        self.alloc
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The view's elements, once no queued device work writes any part of the allocation.
    /// Blocks until then.
    pub fn as_slice(&self) -> Result<HostSlice<'a, T>> {
        record(slice(self.alloc, self.offset, self.len))
    }

    /// A narrower view: `range` is relative to this view.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when the range does not lie within the view.
    pub fn slice(&self, range: impl std::ops::RangeBounds<usize>) -> Result<PinnedView<'a, T>> {
        let (offset, len, dptr) = record(host_view::<T>(self.alloc, self.offset, self.len, range))?;
        Ok(PinnedView {
            alloc: self.alloc,
            offset,
            len,
            dptr,
            _t: PhantomData,
        })
    }
}

impl<'a, T: DeviceRepr> PinnedViewMut<'a, T> {
    pub(crate) fn alloc_ref(&self) -> &'a Alloc {
        self.alloc
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A narrower exclusive view: `range` is relative to this view.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when the range does not lie within the view.
    pub fn slice_mut(
        &mut self,
        range: impl std::ops::RangeBounds<usize>,
    ) -> Result<PinnedViewMut<'_, T>> {
        let (offset, len, dptr) = record(host_view::<T>(self.alloc, self.offset, self.len, range))?;
        Ok(PinnedViewMut {
            alloc: self.alloc,
            offset,
            len,
            dptr,
            _t: PhantomData,
        })
    }

    /// Splits the view in two at element `mid` (`[0, mid)` and `[mid, len)`), both exclusive:
    /// two chunks can then be handed to copies on different streams at once.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when `mid` exceeds the length.
    pub fn split_at_mut(self, mid: usize) -> Result<(Self, Self)> {
        if mid > self.len {
            return record(Err(Error::OutOfRange {
                what: "page-locked memory view split",
                start: mid,
                end: mid,
                len: self.len,
            }));
        }
        let right = PinnedViewMut {
            alloc: self.alloc,
            offset: self.offset + mid,
            len: self.len - mid,
            dptr: self.dptr + (mid * size_of::<T>()) as u64,
            _t: PhantomData,
        };
        let left = PinnedViewMut { len: mid, ..self };
        Ok((left, right))
    }
}

/// `slice` / `slice_mut` for the owners of host-reachable memory. (Used by managed memory too.)
macro_rules! host_view_ops {
    () => {
        /// A shared view of the elements in `range`: a source for asynchronous copies of part
        /// of the memory (chunks copied on several streams). Its uses are noted on the whole
        /// allocation, so CPU access to the buffer and its drop wait for every chunk.
        ///
        /// # Errors
        /// [`Error::OutOfRange`] when the range does not lie within the memory.
        pub fn slice(
            &self,
            range: impl std::ops::RangeBounds<usize>,
        ) -> Result<$crate::memory::PinnedView<'_, T>> {
            $crate::memory::host::view_of(
                $crate::memory::host::range::HostRange::host_range(self).0,
                self.len,
                range,
            )
        }

        /// An exclusive view of the elements in `range`: a destination for asynchronous
        /// copies of part of the memory. Its uses are noted on the whole allocation.
        ///
        /// # Errors
        /// [`Error::OutOfRange`] when the range does not lie within the memory.
        pub fn slice_mut(
            &mut self,
            range: impl std::ops::RangeBounds<usize>,
        ) -> Result<$crate::memory::PinnedViewMut<'_, T>> {
            $crate::memory::host::view_mut_of(
                $crate::memory::host::range::HostRange::host_range(self).0,
                self.len,
                range,
            )
        }
    };
}
pub(crate) use host_view_ops;

pub(crate) fn view_of<T: DeviceRepr>(
    alloc: &Alloc,
    len: usize,
    range: impl std::ops::RangeBounds<usize>,
) -> Result<PinnedView<'_, T>> {
    let (offset, len, dptr) = record(host_view::<T>(alloc, 0, len, range))?;
    Ok(PinnedView {
        alloc,
        offset,
        len,
        dptr,
        _t: PhantomData,
    })
}

/// The caller borrows the owner of `alloc` exclusively for the view's lifetime.
pub(crate) fn view_mut_of<T: DeviceRepr>(
    alloc: &Alloc,
    len: usize,
    range: impl std::ops::RangeBounds<usize>,
) -> Result<PinnedViewMut<'_, T>> {
    let (offset, len, dptr) = record(host_view::<T>(alloc, 0, len, range))?;
    Ok(PinnedViewMut {
        alloc,
        offset,
        len,
        dptr,
        _t: PhantomData,
    })
}

impl<T: DeviceRepr> sealed::Sealed for PinnedView<'_, T> {
    fn allocation(&self) -> &Alloc {
        self.alloc
    }
    fn ptr_ref(&self) -> &u64 {
        &self.dptr
    }
}
impl<T: DeviceRepr> sealed::Sealed for PinnedViewMut<'_, T> {
    fn allocation(&self) -> &Alloc {
        self.alloc
    }
    fn ptr_ref(&self) -> &u64 {
        &self.dptr
    }
}
impl<T: DeviceRepr> DeviceRead<T> for PinnedView<'_, T> {
    fn device_ptr(&self) -> u64 {
        self.dptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
impl<T: DeviceRepr> DeviceRead<T> for PinnedViewMut<'_, T> {
    fn device_ptr(&self) -> u64 {
        self.dptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
impl<T: DeviceRepr> DeviceWrite<T> for PinnedViewMut<'_, T> {}
impl<T: DeviceRepr> PageLocked<T> for PinnedView<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn host_ptr(&self) -> *const T {
        host_side(self.alloc)
            .host_ptr
            .0
            .cast::<T>()
            .cast_const()
            .wrapping_add(self.offset)
    }
}
impl<T: DeviceRepr> PageLocked<T> for PinnedViewMut<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn host_ptr(&self) -> *const T {
        host_side(self.alloc)
            .host_ptr
            .0
            .cast::<T>()
            .cast_const()
            .wrapping_add(self.offset)
    }
}
impl<T: DeviceRepr> PageLockedMut<T> for PinnedViewMut<'_, T> {}
impl<T: DeviceRepr> range::HostRange for PinnedViewMut<'_, T> {
    fn host_range(&self) -> (&Alloc, usize, usize) {
        (self.alloc, self.offset, self.len)
    }
}
impl<T: DeviceRepr> HostAccess<T> for PinnedViewMut<'_, T> {}

fn check_flags(flags: u32, allowed: u32, call: &'static str) -> Result<()> {
    if flags & !allowed != 0 {
        return Err(Error::InvalidFlags {
            call,
            flags,
            allowed,
        });
    }
    Ok(())
}

fn alloc_error(call: &'static str) -> Error {
    Error::Cuda {
        code: ErrorCode::MemoryAllocation,
        driver: None,
        call,
    }
}

/// A typed page-locked host allocation (`cudaMallocHost` / `cudaHostAlloc`).
///
/// Copies between page-locked memory and the device run at full PCIe/NVLink speed and can be
/// asynchronous. The CPU reaches the memory through [`as_slice`](Self::as_slice) and
/// [`as_mut_slice`](Self::as_mut_slice), which first wait for device work that conflicts
/// (asynchronous copies or kernels still using it); dropping the buffer waits for all of it.
///
/// Without [`HostAllocFlags::WRITE_COMBINED`], the memory is a Rust allocation registered with
/// the driver (`cuMemHostRegister`), which outlives a device reset. Write-combined memory comes
/// from `cuMemHostAlloc` and belongs to the device's context: a reset frees it, so CPU access
/// afterwards fails with [`Error::ContextDestroyed`], and a reset while a view of it is alive is
/// refused ([`Error::ResetWhileBorrowed`]).
///
/// ```no_run
/// use cuda_runtime::{DeviceBuffer, PinnedBuffer, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let stream = Stream::new()?;
/// let src = PinnedBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
/// let mut dev = DeviceBuffer::<f32>::new(3)?;
/// dev.copy_from_pinned_async(&src, &stream)?; // returns at once
/// let mut back = PinnedBuffer::<f32>::new(3)?;
/// dev.copy_to_pinned_async(&mut back, &stream)?;
/// assert_eq!(&*back.as_slice()?, &[1.0, 2.0, 3.0]); // waits for the copy
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PinnedBuffer<T: DeviceRepr> {
    alloc: Alloc,
    len: usize,
    flags: HostAllocFlags,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> PinnedBuffer<T> {
    /// Allocates `len` zeroed elements of page-locked memory (`cudaMallocHost`), page-locked
    /// for every device ([`HostAllocFlags::PORTABLE`], as libcudart's `cudaMallocHost` memory
    /// is): copies on any device's streams use it at full speed and asynchronously.
    #[doc(alias = "cudaMallocHost")]
    pub fn new(len: usize) -> Result<PinnedBuffer<T>> {
        Self::with_flags(len, HostAllocFlags::PORTABLE)
    }

    /// Allocates `len` zeroed elements of page-locked memory with `flags` (`cudaHostAlloc`).
    /// Blocks the host while the pages are locked.
    ///
    /// # Errors
    /// [`Error::InvalidFlags`] for unknown bits; `cudaErrorMemoryAllocation` when the memory
    /// cannot be allocated or locked.
    #[doc(alias = "cudaHostAlloc")]
    pub fn with_flags(len: usize, flags: HostAllocFlags) -> Result<PinnedBuffer<T>> {
        record(Self::alloc(len, flags))
    }

    /// Allocates page-locked memory holding a copy of `src`.
    pub fn from_slice(src: &[T]) -> Result<PinnedBuffer<T>> {
        let mut b = Self::new(src.len())?;
        b.as_mut_slice()?.copy_from_slice(src);
        Ok(b)
    }

    fn alloc(len: usize, flags: HostAllocFlags) -> Result<PinnedBuffer<T>> {
        check_flags(flags.bits(), HostAllocFlags::all().bits(), "cudaHostAlloc")?;
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::InvalidValue {
                what: "cudaHostAlloc size",
                value: format!("{len} elements of {} bytes", size_of::<T>()),
                reason: "the size in bytes overflows usize",
            })?;
        let a = context::enter_current()?;
        let (device, generation) = (a.dev.ordinal, a.generation());
        let mapped = flags.contains(HostAllocFlags::MAPPED) && bytes > 0;
        // A block of the page-locked memory cache (no work uses it), zeroed as a new one is.
        let cached = if bytes > 0 {
            crate::cache::take_host(&a, flags.bits(), bytes)
        } else {
            None
        };
        let (host, kind, dptr) = match cached {
            Some(b) if (b.host.0 as usize).is_multiple_of(std::mem::align_of::<T>()) => {
                // SAFETY: the block holds at least `bytes` writable bytes that nothing else uses
                // (cached); zeroing makes every `T` valid.
                unsafe { std::ptr::write_bytes(b.host.0, 0, bytes) };
                let kind = b.layout.map_or(HostKind::HostAlloc, HostKind::Registered);
                (b.host.0, kind, b.dptr)
            }
            other => {
                if let Some(b) = other {
                    // Misaligned for `T` (never for page-aligned blocks): back to the cache.
                    crate::cache::give_back_host(
                        device,
                        generation,
                        flags.bits(),
                        bytes,
                        b,
                        Vec::new(),
                    );
                }
                let fresh = || Self::alloc_fresh(&a, bytes, flags);
                let (host, kind) = match fresh() {
                    // Cached page-locked memory goes back to the driver first (only while the
                    // device is idle: the driver's frees of it wait for the whole device).
                    Err(e)
                        if e.code() == ErrorCode::MemoryAllocation
                            && crate::cache::holds_host(&a)
                            && crate::queue::device_idle(device, generation) =>
                    {
                        crate::cache::release_host(&a)?;
                        fresh()?
                    }
                    r => r?,
                };
                let mut dptr = host as u64;
                if mapped {
                    // SAFETY: `host` is mapped page-locked memory of this context.
                    let r = a.check(
                        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, host.cast(), 0) },
                        "cuMemHostGetDevicePointer",
                    );
                    if let Err(e) = r {
                        drop(Alloc::host(
                            host as u64,
                            bytes,
                            device,
                            generation,
                            HostSide::new(kind, host, false, false, true),
                        ));
                        return Err(e);
                    }
                }
                (host, kind, dptr)
            }
        };
        let any_device = flags.contains(HostAllocFlags::PORTABLE) && dptr == host as u64;
        let mut side = HostSide::new(kind, host, mapped, any_device, true);
        if bytes > 0 {
            side.pinned_flags = Some(flags.bits());
        }
        Ok(PinnedBuffer {
            alloc: Alloc::host(dptr, bytes, device, generation, side),
            len,
            flags,
            _t: PhantomData,
        })
    }

    /// New page-locked memory of `bytes` with `flags` in the entered context `a`.
    fn alloc_fresh(a: &Active, bytes: usize, flags: HostAllocFlags) -> Result<(*mut u8, HostKind)> {
        if bytes == 0 {
            return Ok((
                std::ptr::NonNull::<T>::dangling().as_ptr().cast::<u8>(),
                HostKind::Empty,
            ));
        }
        if flags.contains(HostAllocFlags::WRITE_COMBINED) {
            let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
            // SAFETY: the context is current; valid out-parameter; flags checked above.
            a.check(
                unsafe { sys::cuMemHostAlloc(&mut p, bytes, flags.bits()) },
                "cuMemHostAlloc",
            )?;
            if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
                // SAFETY: allocated just above, never shared.
                let _ = a.check(unsafe { sys::cuMemFreeHost(p) }, "cuMemFreeHost");
                return Err(misaligned::<T>("cudaHostAlloc", p as u64));
            }
            // SAFETY: `p` points to `bytes` writable bytes; zeroing makes every `T` valid.
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
            return Ok((p.cast::<u8>(), HostKind::HostAlloc));
        }
        // Whole pages of its own: the driver locks whole pages, and unlocking them at the
        // drop must not unlock memory of the program's that a copy is transferring.
        let page = page_size();
        let layout = bytes
            .checked_next_multiple_of(page)
            .and_then(|size| {
                Layout::from_size_align(size, page.max(std::mem::align_of::<T>())).ok()
            })
            .ok_or_else(|| alloc_error("cudaHostAlloc"))?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(alloc_error("cudaHostAlloc"));
        }
        let mut reg = 0;
        if flags.contains(HostAllocFlags::PORTABLE) {
            reg |= sys::CU_MEMHOSTREGISTER_PORTABLE;
        }
        if flags.contains(HostAllocFlags::MAPPED) {
            reg |= sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        }
        // SAFETY: `p` is a live allocation of `bytes` bytes that outlives the registration
        // (unregistered before it is freed).
        let r = a.check(
            unsafe { sys::cuMemHostRegister_v2(p.cast(), bytes, reg) },
            "cuMemHostRegister",
        );
        if let Err(e) = r {
            // SAFETY: allocated above with `layout`, never shared.
            unsafe { std::alloc::dealloc(p, layout) };
            return Err(e);
        }
        Ok((p, HostKind::Registered(layout)))
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The flags it was allocated with (`cudaHostGetFlags`, less the implied bits).
    #[doc(alias = "cudaHostGetFlags")]
    pub fn flags(&self) -> HostAllocFlags {
        self.flags
    }

    /// The device it was allocated on (whose context owns its page locking).
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.alloc.device)
    }

    /// The CPU address of the first element.
    pub fn as_host_ptr(&self) -> *const T {
        host_side(&self.alloc).host_ptr.0.cast::<T>().cast_const()
    }

    /// The device address kernels use for mapped memory (`cudaHostGetDevicePointer`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the memory is not mapped.
    #[doc(alias = "cudaHostGetDevicePointer")]
    pub fn device_ptr(&self) -> Result<u64> {
        record(mapped_ptr_on(
            &self.alloc,
            self.alloc.device,
            PINNED_NOT_MAPPED,
        ))
    }

    /// The device address kernels of `device` use for the memory (`cudaHostGetDevicePointer`
    /// with `device` current). Memory allocated with `MAPPED | PORTABLE` is mapped on every
    /// device (at its host address, under unified addressing); memory without `PORTABLE` only
    /// on the device it was allocated on.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the memory is not mapped, or for another device when it is
    /// not portable.
    ///
    /// # Example
    /// ```no_run
    /// use cuda_runtime::{Device, HostAllocFlags, PinnedBuffer};
    /// let flags = HostAllocFlags::MAPPED | HostAllocFlags::PORTABLE;
    /// let buf = PinnedBuffer::<f32>::with_flags(1024, flags)?;
    /// for d in 0..cuda_runtime::device_count()? {
    ///     let ptr = buf.device_ptr_on(Device::new(d)?)?;
    ///     println!("device {d} sees the buffer at {ptr:#x}");
    /// }
    /// # Ok::<(), cuda_runtime::Error>(())
    /// ```
    #[doc(alias = "cudaHostGetDevicePointer")]
    pub fn device_ptr_on(&self, device: crate::Device) -> Result<u64> {
        record(mapped_ptr_on(
            &self.alloc,
            device.ordinal(),
            PINNED_NOT_MAPPED,
        ))
    }

    /// The contents, once no queued device work writes them. Blocks until then.
    ///
    /// # Errors
    /// [`Error::ContextDestroyed`] for write-combined memory after its device was reset; the
    /// error of the work waited for.
    pub fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        record(slice(&self.alloc, 0, self.len))
    }

    /// The contents for writing, once no queued device work uses them. Blocks until then.
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
        record(host_side(&self.alloc).wait(&self.alloc.uses, true))
    }
    host_view_ops!();
}

/// Memory the program owns, page-locked for a scope (`cudaHostRegister` /
/// `cudaHostUnregister`).
///
/// Made by [`HostRegistration::with`] (or [`with_read_only`](Self::with_read_only)), which
/// registers the slice, hands the registration to a closure, then waits for all device work
/// queued on it and unregisters, even when the closure panics. The slice stays borrowed for the
/// whole scope. (A scope rather than a guard object: a forgotten guard would let the program
/// reach the slice while a copy still wrote it.)
///
/// ```no_run
/// use cuda_runtime::{DeviceBuffer, HostRegisterFlags, HostRegistration, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let mut data = vec![7u32; 1 << 20];
/// let mut dev = DeviceBuffer::<u32>::new(data.len())?;
/// let stream = Stream::new()?;
/// HostRegistration::with(&mut data, HostRegisterFlags::empty(), |reg| {
///     dev.copy_from_pinned_async(reg, &stream)
/// })??;
/// assert_eq!(dev.to_vec()?[5], 7);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HostRegistration<'s, T: DeviceRepr> {
    alloc: &'s Alloc,
    len: usize,
    _borrow: PhantomData<&'s mut [T]>,
}

impl<T: DeviceRepr> HostRegistration<'_, T> {
    /// Registers `data` with `flags` on the current device, runs `f`, then waits for the work
    /// queued on the registration and unregisters it (`cudaHostRegister`). With
    /// [`HostRegisterFlags::READ_ONLY`] among `flags` the device may not write it (copies into
    /// it and kernels writing it are refused, as for [`with_read_only`](Self::with_read_only));
    /// the CPU may, through [`as_mut_slice`](Self::as_mut_slice).
    ///
    /// The closure gets a registration whose lifetime is its own, so registrations of two
    /// scopes cannot be swapped.
    ///
    /// # Errors
    /// [`Error::InvalidFlags`] for unknown bits; `cudaErrorHostMemoryAlreadyRegistered` when part
    /// of the memory is registered already; the error of the work waited for at the end.
    #[doc(alias = "cudaHostRegister")]
    #[doc(alias = "cudaHostUnregister")]
    pub fn with<R>(
        data: &mut [T],
        flags: HostRegisterFlags,
        f: impl for<'s> FnOnce(&'s mut HostRegistration<'s, T>) -> R,
    ) -> Result<R> {
        let (ptr, len) = (data.as_mut_ptr(), data.len());
        record(scope(ptr, len, flags, true, f))
    }

    /// As [`with`](Self::with) for memory the device only reads (adds
    /// [`HostRegisterFlags::READ_ONLY`]); kernels may not write it, copies may not target it.
    pub fn with_read_only<R>(
        data: &[T],
        flags: HostRegisterFlags,
        f: impl for<'s> FnOnce(&'s mut HostRegistration<'s, T>) -> R,
    ) -> Result<R> {
        let (ptr, len) = (data.as_ptr().cast_mut(), data.len());
        record(scope(
            ptr,
            len,
            flags | HostRegisterFlags::READ_ONLY,
            false,
            f,
        ))
    }
}

/// The body of [`HostRegistration::with`]: `ptr..ptr+len` is lent by the caller for the call,
/// exclusively when `cpu_writable`.
fn scope<T: DeviceRepr, R>(
    ptr: *mut T,
    len: usize,
    flags: HostRegisterFlags,
    cpu_writable: bool,
    f: impl for<'s> FnOnce(&'s mut HostRegistration<'s, T>) -> R,
) -> Result<R> {
    check_flags(
        flags.bits(),
        HostRegisterFlags::all().bits(),
        "cudaHostRegister",
    )?;
    if context::in_host_fn() {
        // The scope could neither wait for the work it queued nor unregister at its end.
        return Err(Error::InHostFunction {
            call: "cudaHostRegister",
        });
    }
    let bytes = len * size_of::<T>();
    let a = context::enter_current()?;
    let (device, generation) = (a.dev.ordinal, a.generation());
    let host = ptr.cast::<u8>();
    let mut registered = None;
    let kind = if bytes == 0 {
        HostKind::Empty
    } else {
        // Recorded first: from now on a copy of a plain slice in these pages (another
        // thread's, say) never lets the driver transfer it directly, and the copies in the
        // driver's hands now are waited for before the pages are unlocked (`finish_now`).
        let record = Registered::record(host, bytes);
        // SAFETY: `ptr..ptr+bytes` is memory the caller lends for the whole call, which ends
        // only after the registration is undone (in `alloc`'s drop below).
        a.check(
            unsafe { sys::cuMemHostRegister_v2(host.cast(), bytes, flags.bits()) },
            "cuMemHostRegister",
        )?;
        registered = Some(record);
        HostKind::Borrowed
    };
    // The driver's read-only registration is read-only for the device whichever call asked
    // for it (review rev-f15: `with` given READ_ONLY let copies and kernels write it).
    let device_writable = !flags.contains(HostRegisterFlags::READ_ONLY);
    let mut side = HostSide::new(kind, host, false, false, device_writable);
    side.cpu_writable = cpu_writable;
    side.registered = registered;
    let mut alloc = Alloc::host(host as u64, bytes, device, generation, side);
    if flags.contains(HostRegisterFlags::MAPPED) && bytes > 0 {
        let mut dptr = 0u64;
        // SAFETY: mapped registered memory of this context.
        a.check(
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, host.cast(), 0) },
            "cuMemHostGetDevicePointer",
        )?;
        alloc.ptr = dptr;
        let h = alloc.host.as_deref_mut().expect("host side");
        h.mapped = true;
        h.any_device = flags.contains(HostRegisterFlags::PORTABLE) && dptr == host as u64;
    }
    drop(a);
    // `alloc` is dropped at the end of this function, also when `f` unwinds: its drop waits
    // for the queued work and unregisters before the caller's borrow of the slice ends.
    let out = f(&mut HostRegistration {
        alloc: &alloc,
        len,
        _borrow: PhantomData,
    });
    let done = host_side(&alloc).wait(&alloc.uses, true);
    drop(alloc);
    done.map(|()| out)
}

impl<T: DeviceRepr> HostRegistration<'_, T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address kernels use for mapped memory (`cudaHostGetDevicePointer`).
    #[doc(alias = "cudaHostGetDevicePointer")]
    pub fn device_ptr(&self) -> Result<u64> {
        record(mapped_ptr_on(
            self.alloc,
            self.alloc.device,
            REGISTERED_NOT_MAPPED,
        ))
    }

    /// The device address kernels of `device` use for the memory (`cudaHostGetDevicePointer`
    /// with `device` current): see [`PinnedBuffer::device_ptr_on`]; here `PORTABLE` and
    /// `MAPPED` are [`HostRegisterFlags`].
    #[doc(alias = "cudaHostGetDevicePointer")]
    pub fn device_ptr_on(&self, device: crate::Device) -> Result<u64> {
        record(mapped_ptr_on(
            self.alloc,
            device.ordinal(),
            REGISTERED_NOT_MAPPED,
        ))
    }

    /// The contents, once no queued device work writes them.
    pub fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        record(slice(self.alloc, 0, self.len))
    }

    /// The contents for writing, once no queued device work uses them.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a registration made by [`with_read_only`](Self::with_read_only)
    /// (of a shared slice).
    pub fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_, T>> {
        record(
            host_side(self.alloc)
                .check_cpu_writable("HostRegistration::as_mut_slice")
                // SAFETY: `self` is borrowed exclusively for the view.
                .and_then(|()| unsafe { slice_mut(self.alloc, 0, self.len) }),
        )
    }

    /// Waits for every queued piece of device work that uses the memory.
    pub fn synchronize(&self) -> Result<()> {
        record(host_side(self.alloc).wait(&self.alloc.uses, true))
    }
    host_view_ops!();
}

macro_rules! host_traits {
    ($ty:ident $(<$lt:lifetime>)?) => {
        impl<$($lt,)? T: DeviceRepr> sealed::Sealed for $ty<$($lt,)? T> {
            fn allocation(&self) -> &Alloc {
                &self.alloc
            }
            fn ptr_ref(&self) -> &u64 {
                &self.alloc.ptr
            }
        }
        impl<$($lt,)? T: DeviceRepr> DeviceRead<T> for $ty<$($lt,)? T> {
            fn device_ptr(&self) -> u64 {
                self.alloc.ptr
            }
            fn len(&self) -> usize {
                self.len
            }
        }
        impl<$($lt,)? T: DeviceRepr> DeviceWrite<T> for $ty<$($lt,)? T> {}
        impl<$($lt,)? T: DeviceRepr> PageLocked<T> for $ty<$($lt,)? T> {
            fn len(&self) -> usize {
                self.len
            }
            fn host_ptr(&self) -> *const T {
                $crate::memory::host::host_side(&self.alloc).host_ptr.0.cast::<T>().cast_const()
            }
        }
        impl<$($lt,)? T: DeviceRepr> $crate::memory::host::PageLockedMut<T> for $ty<$($lt,)? T> {}
        impl<$($lt,)? T: DeviceRepr> $crate::memory::host::range::HostRange for $ty<$($lt,)? T> {
            fn host_range(&self) -> (&Alloc, usize, usize) {
                (&self.alloc, 0, self.len)
            }
        }
        impl<$($lt,)? T: DeviceRepr> $crate::memory::host::HostAccess<T> for $ty<$($lt,)? T> {}
    };
}

host_traits!(PinnedBuffer);
host_traits!(HostRegistration<'a>);
#[allow(unused_imports)]
pub(crate) use host_traits;

// The raw pointers inside are owned (or lent for the scope) memory, guarded as described above.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<PinnedBuffer<f32>>();
    send_sync::<HostRegistration<'static, f32>>();
    send_sync::<HostSlice<'static, f32>>();
    send_sync::<HostSliceMut<'static, f32>>();
    send_sync::<PinnedView<'static, f32>>();
    send_sync::<PinnedViewMut<'static, f32>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_bits_match_the_runtime() {
        assert_eq!(HostAllocFlags::PORTABLE.bits(), 1); // cudaHostAllocPortable
        assert_eq!(HostAllocFlags::MAPPED.bits(), 2); // cudaHostAllocMapped
        assert_eq!(HostAllocFlags::WRITE_COMBINED.bits(), 4); // cudaHostAllocWriteCombined
        assert_eq!(HostRegisterFlags::PORTABLE.bits(), 1);
        assert_eq!(HostRegisterFlags::MAPPED.bits(), 2);
        assert_eq!(HostRegisterFlags::IO_MEMORY.bits(), 4);
        assert_eq!(HostRegisterFlags::READ_ONLY.bits(), 8);
        assert_eq!(
            HostRegisterFlags::all().bits(),
            sys::CU_MEMHOSTREGISTER_PORTABLE
                | sys::CU_MEMHOSTREGISTER_DEVICEMAP
                | sys::CU_MEMHOSTREGISTER_IOMEMORY
                | sys::CU_MEMHOSTREGISTER_READ_ONLY
        );
    }

    #[test]
    fn unknown_flag_bits_are_refused_with_the_values() {
        let e = check_flags(0x10, 0x7, "cudaHostAlloc").unwrap_err();
        assert_eq!(
            e,
            Error::InvalidFlags {
                call: "cudaHostAlloc",
                flags: 0x10,
                allowed: 0x7
            }
        );
        assert_eq!(e.code(), ErrorCode::InvalidValue);
    }
}
