//! Linear device memory: `cudaMalloc`, `cudaMallocAsync`, views, copies and memsets.

use std::marker::PhantomData;
use std::mem::{size_of, ManuallyDrop};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use super::host::{host_side, HostSide, PageLocked, PageLockedMut};
use super::registered;
use super::staging;
use super::DeviceRepr;
use crate::context::{self, Active};
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::queue::{self, FenceEvent, Lane, Queue, Use, Uses};
use crate::stream::{self, Stream};

/// How work on other queues is ordered after a stream-ordered allocation.
#[derive(Default)]
struct Order {
    /// The allocation is known complete: nothing needs to wait any more.
    done: bool,
    /// The queues made to wait already.
    waited: Vec<Arc<Queue>>,
    /// The fences they wait on (kept until the drop).
    fences: Vec<Arc<FenceEvent>>,
}

impl std::fmt::Debug for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Order")
            .field("done", &self.done)
            .field("waited", &self.waited.len())
            .finish()
    }
}

/// Keeps the context that owns memory from being reset while work of another device that uses
/// the memory is being queued; held by [`Lane::submit`] until the work is queued. (Public in a
/// private module: unnameable outside the crate.)
#[doc(hidden)]
#[must_use = "the owner's context must stay pinned until the work is queued"]
pub struct Keep {
    _pin: Option<context::Pinned>,
    /// For a peer copy: keeps revocations of peer access out until it is queued.
    _peer: Option<context::PeerCopy>,
}

impl Keep {
    /// Nothing to keep.
    pub(crate) const NONE: Keep = Keep {
        _pin: None,
        _peer: None,
    };

    /// Keeps `pin` until the work is queued.
    pub(crate) fn pinned(pin: context::Pinned) -> Keep {
        Keep {
            _pin: Some(pin),
            _peer: None,
        }
    }

    fn into_option(self) -> Option<Keep> {
        self._pin.is_some().then_some(self)
    }
}

/// The allocation behind a buffer, shared by reference with its views. (Public in a private
/// module: unnameable outside the crate.)
#[derive(Debug)]
pub struct Alloc {
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
    pub(crate) device: i32,
    pub(crate) generation: u64,
    /// The stream of a stream-ordered allocation (`cudaMallocAsync`), freed there, and the
    /// allocation's point in its queue.
    home: Option<(Stream, u64)>,
    /// Every queued use, as points in queues (see [`crate::queue`]).
    pub(crate) uses: Uses,
    /// What only some allocations need, made on first use (see [`Rare`]).
    rare: RareCell,
    /// Memory opened from another process's IPC handle: closed, not freed.
    pub(crate) ipc: bool,
    /// Memory imported from another process's pool (`cuMemPoolImportPointer`): freed as usual,
    /// and forgotten by the registry of imported pointers when freed.
    pub(crate) pool_import: bool,
    /// A block of the device memory cache ([`crate::cache`]), given back to it when dropped;
    /// cleared when the memory is exported for IPC (then freed as usual).
    pub(crate) cached: AtomicBool,
    /// A buffer mapped from external memory (`cuExternalMemoryGetMappedBuffer`): freed with
    /// `cuMemFree` on the dropping thread once its uses are done, then the external memory
    /// (kept alive until then) may be destroyed.
    pub(crate) external: Option<Arc<crate::external::ExtMemInner>>,
    /// For memory the CPU can also reach (page-locked, registered, managed): how it is owned,
    /// and its CPU views.
    pub(crate) host: Option<Box<HostSide>>,
}

/// The parts of an allocation that only some allocations need, boxed together and made on
/// first use through a shared reference: most buffers never need them, and a smaller `Alloc`
/// (at most 128 bytes with its `DeviceBuffer`) is moved with a few inline stores rather than
/// a `memcpy` call on every `Result` it passes through.
#[derive(Debug, Default)]
struct Rare {
    /// For a stream-ordered allocation used outside its stream: the queues ordered after it.
    order: parking_lot::Mutex<Order>,
    /// Made the first time a graph node refers to the memory (see [`AllocKeep`]); empty for
    /// memory never used in a graph, whose paths it does not touch.
    keep: OnceLock<Arc<AllocKeep>>,
}

/// The cell of an allocation's [`Rare`] parts: a `OnceLock<Box<Rare>>` whose drop is one inline
/// check when they were never made (the common case), not a call (measured on every drop of a
/// stream-ordered allocation).
#[derive(Debug)]
struct RareCell(ManuallyDrop<OnceLock<Box<Rare>>>);

impl std::ops::Deref for RareCell {
    type Target = OnceLock<Box<Rare>>;
    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for RareCell {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for RareCell {
    #[inline]
    fn drop(&mut self) {
        // (Taken out, the cell is empty: the `ManuallyDrop` leaves nothing behind.)
        if self.0.get_mut().is_some() {
            drop_rare(&mut self.0);
        }
    }
}

#[cold]
#[inline(never)]
fn drop_rare(cell: &mut OnceLock<Box<Rare>>) {
    drop(cell.take());
}

/// A shared holder of an allocation that graphs refer to. Graph nodes hold clones (through
/// their CUDA user objects, see `crate::graph`); when the buffer is dropped while a clone is
/// still held, the allocation moves in here and is freed, by its normal drop, when the last
/// clone goes: after the last graph, executable and launch that use it.
#[derive(Debug)]
pub(crate) struct AllocKeep {
    moved: parking_lot::Mutex<Option<Alloc>>,
}

impl Alloc {
    /// `home`: the stream and point of a stream-ordered allocation.
    #[inline]
    fn with(
        ptr: u64,
        bytes: usize,
        device: i32,
        generation: u64,
        home: Option<(Stream, u64)>,
    ) -> Alloc {
        Alloc {
            ptr,
            bytes,
            device,
            generation,
            home,
            uses: Uses::default(),
            rare: RareCell(ManuallyDrop::new(OnceLock::new())),
            ipc: false,
            pool_import: false,
            cached: AtomicBool::new(false),
            external: None,
            host: None,
        }
    }

    /// A token that keeps the allocation alive for a graph (see [`AllocKeep`]).
    pub(crate) fn keep_token(&self) -> Arc<AllocKeep> {
        self.keep_ref().clone()
    }

    /// The allocation's keep-alive object, made on first use (its address is the graph's key
    /// for the allocation).
    pub(crate) fn keep_ref(&self) -> &Arc<AllocKeep> {
        self.rare().keep.get_or_init(|| {
            Arc::new(AllocKeep {
                moved: parking_lot::Mutex::new(None),
            })
        })
    }

    /// The allocation's keep-alive object if [`keep_ref`](Self::keep_ref) made it (memory a
    /// graph never referred to has none, and makes none here).
    #[inline]
    pub(crate) fn keep_if_made(&self) -> Option<&Arc<AllocKeep>> {
        self.rare.get().and_then(|r| r.keep.get())
    }

    /// The rarely needed parts, made on first use.
    fn rare(&self) -> &Rare {
        self.rare.get_or_init(Box::default)
    }

    /// Waits until a stream-ordered allocation exists (its allocation point in its stream is
    /// done), for work whose order against that stream the crate cannot arrange (graph nodes).
    #[inline]
    pub(crate) fn wait_allocated(&self) -> Result<()> {
        match &self.home {
            Some((s, seq)) => s.home_queue().wait(*seq),
            None => Ok(()),
        }
    }

    /// Device memory that is not stream-ordered.
    pub(crate) fn plain(ptr: u64, bytes: usize, device: i32, generation: u64) -> Alloc {
        Alloc::with(ptr, bytes, device, generation, None)
    }

    /// Whether the memory came from `cudaMallocAsync` / a pool.
    pub(crate) fn is_stream_ordered(&self) -> bool {
        self.home.is_some()
    }

    /// An allocation reachable from the CPU, described by `host`.
    pub(crate) fn host(
        ptr: u64,
        bytes: usize,
        device: i32,
        generation: u64,
        host: HostSide,
    ) -> Alloc {
        let mut a = Alloc::with(ptr, bytes, device, generation, None);
        a.host = Some(Box::new(host));
        a
    }

    /// Checks that work in the entered context `a`, on `queue`, may use the memory as `u`
    /// says, and orders `queue` after a stream-ordered allocation made on another queue. The
    /// returned guard keeps another device's context from a reset until the work is queued.
    /// May enter other contexts; the caller binds its own again.
    pub(crate) fn admit(
        &self,
        u: &Use<'_>,
        a: &Active,
        queue: &Arc<Queue>,
        call: &'static str,
    ) -> Result<Option<Keep>> {
        let (dev, generation) = a.id();
        if let Some(h) = &self.host {
            if u.write {
                h.check_writable(call)?;
            }
            return Ok(h
                .admit(self, dev, generation, u.device_address, call)?
                .into_option());
        }
        let mut keep = None;
        if self.device != dev {
            if !u.peer {
                return Err(Error::DeviceMismatch {
                    call,
                    what: "the buffer",
                    found: self.device,
                    expected: dev,
                });
            }
            // Another device's memory read by a peer copy: its context stays pinned until the
            // copy is queued, and a reset of it waits for this device from now on.
            let pin = context::pin(self.device, self.generation, "the copy's source")?;
            keep = Some(Keep {
                _pin: Some(pin),
                _peer: Some(context::note_peer_copy(self.device, dev)),
            });
        } else if self.generation != generation {
            return Err(Error::ContextDestroyed {
                what: "buffer or stream",
                device: self.device,
            });
        }
        if let Some((s, seq)) = &self.home {
            let home = s.home_queue();
            if !Arc::ptr_eq(home, queue) {
                self.order_after_alloc(home, *seq, a, queue)?;
            }
        }
        Ok(keep)
    }

    /// Makes `queue` (of the entered context `a`) wait for the allocation, unless it already
    /// did or the allocation is known complete.
    #[cold]
    fn order_after_alloc(
        &self,
        home: &Queue,
        seq: u64,
        a: &Active,
        queue: &Arc<Queue>,
    ) -> Result<()> {
        let mut order = self.rare().order.lock();
        if order.done || order.waited.iter().any(|w| Arc::ptr_eq(w, queue)) {
            return Ok(());
        }
        // For work of another device, the allocation's context (and the fence made in it) is
        // kept from a reset until the wait is queued.
        let _pin = if home.device != a.dev.ordinal {
            Some(context::pin(self.device, self.generation, "device buffer")?)
        } else {
            None
        };
        let fence = queue::order_fence(home, seq);
        // Making the fence may have entered the allocation's context.
        a.rebind()?;
        let Some(fence) = fence? else {
            order.done = true;
            return Ok(());
        };
        // SAFETY: `queue` is a live stream of the current context; the event may belong to
        // another context (cuStreamWaitEvent allows it) and is kept alive by `order`.
        a.check(
            unsafe { sys::cuStreamWaitEvent(queue.raw(), fence.raw(), 0) },
            "cuStreamWaitEvent",
        )?;
        order.waited.push(queue.clone());
        order.fences.push(fence);
        Ok(())
    }

    /// Enters the memory's device for a call without a stream. Memory usable from any device
    /// (portable mapped or managed memory) uses the calling thread's current device.
    fn enter_any(&self) -> Result<Active> {
        match &self.host {
            Some(h) if h.any_device && context::current_ordinal() != self.device => {
                context::enter_current()
            }
            Some(_) if self.bytes == 0 => context::enter_current(),
            _ => context::enter_handle(self.device, self.generation, "device buffer"),
        }
    }
}

/// A failed `cuMemFreeAsync` of a dropped buffer (driver result `r`, in the entered context
/// `a`): kept as the device's deferred error, as [`Active::check`] reports it.
#[cold]
#[inline(never)]
fn free_async_failed(a: &Active, r: sys::CUresult) {
    if let Err(e) = a.check(r, "cuMemFreeAsync") {
        a.dev.defer("freeing device memory", e);
    }
}

impl Alloc {
    /// The common drop: a stream-ordered allocation used on its own stream only, freed there
    /// at once (`cuMemFreeAsync`). `false` when the drop must go the general way
    /// ([`drop_slow`](Self::drop_slow)), with nothing done. Kept apart from the general way so
    /// that this path keeps its values in registers (measured on `cudaFreeAsync`).
    #[inline(always)]
    fn free_on_home(&mut self) -> bool {
        let (ptr, device, generation) = (self.ptr, self.device, self.generation);
        let Some((s, _)) = &self.home else {
            return false;
        };
        // (The cases `drop_slow` takes before its stream-ordered free: a graph's keep-alive
        // holder, memory the CPU can reach, an empty allocation; and its own conditions: used
        // on other queues, or other queues ordered after the allocation.)
        if self.host.is_some() || self.bytes == 0 {
            return false;
        }
        if let Some(r) = self.rare.get_mut() {
            if r.keep.get().is_some() || !r.order.get_mut().waited.is_empty() {
                return false;
            }
        }
        let q = s.home_queue();
        if !self.uses.only_on(q) {
            return false;
        }
        // Outside host functions the context is entered before the queue's entry (the order
        // of `alloc_in`, `Lane::submit` and capture begin / end): entering it while holding
        // the entry could wait behind a reset that waits for a capture's end that waits for
        // the entry (review finding). No stream clone, no closure.
        if q.is_legacy() || context::in_host_fn() {
            return false;
        }
        match context::enter_live(device, generation) {
            Ok(Some(a)) => {
                // A capture of the crate cannot begin on the stream until the free is queued.
                let entry = q.enter();
                if entry.watched() {
                    return false;
                }
                // SAFETY: `ptr` is a live stream-ordered allocation of this context, used only
                // by work of its own stream (not being captured: the entry holds off a
                // capture), which the free follows.
                let free = || unsafe { sys::cuMemFreeAsync(ptr, s.as_raw()) };
                // Relaxed while a capture is open elsewhere: a drop never invalidates a user's
                // capture.
                let r = if queue::no_capture() {
                    free()
                } else {
                    queue::relaxed(free)
                };
                // (The result checked in a register; a failure is kept as the device's
                // deferred error, out of line.)
                if crate::driver::rc(r) != 0 {
                    free_async_failed(&a, r);
                }
                true
            }
            // The context was reset: the memory went with it.
            Ok(None) => true,
            // Reported by the deferred way (`drop_slow`).
            Err(_) => false,
        }
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        if !self.free_on_home() {
            self.drop_slow();
        }
    }
}

impl Alloc {
    /// Every drop but [`free_on_home`](Self::free_on_home)'s.
    #[cold]
    #[inline(never)]
    fn drop_slow(&mut self) {
        let (ptr, device, generation) = (self.ptr, self.device, self.generation);
        if let Some(keep) = self.rare.get_mut().and_then(|r| r.keep.take()) {
            // A graph may still refer to the memory: it moves into the shared holder, freed
            // (by this drop, without the holder) when the holder's last clone goes.
            let moved = std::mem::replace(self, Alloc::with(0, 0, device, generation, None));
            *keep.moved.lock() = Some(moved);
            return;
        }
        if let Some(mut h) = self.host.take() {
            let views = *h.views.get_mut();
            h.finish(
                ptr,
                device,
                generation,
                self.bytes,
                std::mem::take(&mut self.uses),
                views,
            );
            return;
        }
        if self.bytes == 0 {
            return;
        }
        if *self.cached.get_mut() {
            // Back to the device's cache, once the uses not known complete are done.
            let waits = self.uses.take_points();
            crate::cache::give_back(device, generation, ptr, self.bytes, waits);
            return;
        }
        let ipc = self.ipc;
        // Set when the allocation's own stream may be captured: the allocation point is waited
        // for, and the free goes elsewhere (a capture would record a `cuMemFreeAsync` of a
        // normal allocation, fail it and free nothing).
        let mut alloc_point = None;
        let home = match self.home.take() {
            // Used on its own stream only: freed there in stream order, at once.
            Some((s, seq))
                if self.uses.only_on(s.home_queue())
                    && self
                        .rare
                        .get_mut()
                        .is_none_or(|r| r.order.get_mut().waited.is_empty()) =>
            {
                // (Outside host functions, and not in the legacy stream, the free was tried in
                // `free_on_home` first: it got here only when the context could not be entered
                // or a capture may involve the stream.)
                // A capture of the crate cannot begin on the stream until the free is queued.
                let entry = s.home_queue().enter();
                // Not in the legacy stream: a free there would invalidate a capture of any
                // blocking stream (review finding); such memory goes the deferred way below.
                // (Only inside a host function, where the free is handed on without entering
                // the context; every other case not freed above goes the deferred way.)
                if context::in_host_fn() && !entry.watched() && !s.home_queue().is_legacy() {
                    let s2 = s.clone();
                    context::release_async(device, generation, "freeing device memory", move |a| {
                        // SAFETY: `ptr` is a live stream-ordered allocation of this context,
                        // used only by work of its own stream (not being captured: the entry
                        // holds off a capture), which the free follows.
                        a.check(
                            unsafe { sys::cuMemFreeAsync(ptr, s2.as_raw()) },
                            "cuMemFreeAsync",
                        )
                    });
                    drop(entry);
                    return;
                }
                drop(entry);
                alloc_point = Some((s.home_queue().clone(), seq));
                Some((s, seq))
            }
            home => home,
        };
        // (The fences that other queues wait on, kept until the free.)
        let order = self.rare.take();
        if let Some(keep) = self.external.take() {
            // As for IPC memory: `cuMemFree` waits for the whole device, so it runs on the
            // dropping thread once the buffer's own uses are done; the external memory object
            // is released after the free.
            let uses = std::mem::take(&mut self.uses);
            if context::in_host_fn() {
                context::defer_release(move || free_external(device, generation, ptr, uses, keep));
            } else {
                free_external(device, generation, ptr, uses, keep);
            }
            drop(order);
            return;
        }
        if ipc {
            // Closing waits for the whole device (as `cuMemFree` does): done here, on the
            // dropping thread, once the mapping's own uses are done.
            if context::in_host_fn() {
                let uses = std::mem::take(&mut self.uses);
                context::defer_release(move || close_ipc(device, generation, ptr, uses));
            } else {
                close_ipc(device, generation, ptr, std::mem::take(&mut self.uses));
            }
            drop(order);
            return;
        }
        let mut waits = self.uses.take_points();
        if let Some((q, seq)) = alloc_point {
            // Fenced at the capture's begin (or known done): the wait never records a fence in
            // the capturing stream.
            waits.push((q, seq));
        }
        let imported = self.pool_import;
        let free = move |a: Option<&Active>| {
            drop(order);
            // After a reset the memory died with its context.
            let Some(a) = a else {
                if imported {
                    super::pool::forget_import(device, generation, ptr);
                }
                return Ok(());
            };
            // Not `cuMemFree`: it waits for the whole device (unrelated, maybe stalled work
            // included) and holds up other threads' allocations meanwhile, as measured on
            // driver 580. The free goes into a stream instead: the allocation's own (unless a
            // capture may involve it), or the crate's stream for frees; every use of the
            // memory is done already.
            let entry = home.as_ref().map(|(s, _)| s.home_queue().enter());
            let (stream, in_free_stream) = match (&home, &entry) {
                (Some((s, _)), Some(e)) if !e.watched() && !s.home_queue().is_legacy() => {
                    (s.as_raw(), false)
                }
                _ => (a.free_stream()?, true),
            };
            // SAFETY: a live allocation of this context whose uses (and allocation) are all
            // done, freed in a stream no capture records.
            let r = a.check(
                unsafe { sys::cuMemFreeAsync(ptr, stream) },
                "cuMemFreeAsync",
            );
            if r.is_ok() && in_free_stream {
                // In the crate's stream for frees: `device::synchronize` waits for it.
                crate::queue::note_free_queued(a.dev.ordinal);
            }
            drop(entry);
            // Forgotten only once freed: an import of the same pointer meanwhile is refused
            // (it would alias this one), never handed the memory this free releases.
            if imported {
                super::pool::forget_import(device, generation, ptr);
            }
            r
        };
        if waits.is_empty() {
            context::release(device, generation, "freeing device memory", move |a| {
                free(Some(a))
            });
        } else {
            queue::defer_free(device, generation, waits, "freeing device memory", free);
        }
    }
}

/// Closes memory opened from an IPC handle once its own uses are done. (Closing waits for the
/// whole device, as `cuMemFree` does, so it runs on the dropping thread, not later in the
/// background.)
fn close_ipc(device: i32, generation: u64, ptr: u64, uses: Uses) {
    if let Err(e) = uses.wait(true) {
        if let Ok(d) = context::device_state(device) {
            d.defer("waiting for work that uses IPC memory", e);
        }
    }
    context::release(device, generation, "closing IPC memory", move |a| {
        // SAFETY: opened from an IPC handle in this context; its uses are done.
        let r = a.check(
            unsafe { sys::cuIpcCloseMemHandle(ptr) },
            "cuIpcCloseMemHandle",
        );
        super::ipc::closed(ptr);
        r
    });
}

/// Frees a buffer mapped from external memory once its own uses are done, then lets the
/// external memory go.
fn free_external(
    device: i32,
    generation: u64,
    ptr: u64,
    uses: Uses,
    keep: Arc<crate::external::ExtMemInner>,
) {
    if let Err(e) = uses.wait(true) {
        if let Ok(d) = context::device_state(device) {
            d.defer("waiting for work that uses external memory", e);
        }
    }
    context::release(
        device,
        generation,
        "freeing a mapped external buffer",
        move |a| {
            // SAFETY: mapped from external memory in this context; its uses are done.
            let r = a.check(unsafe { sys::cuMemFree_v2(ptr) }, "cuMemFree");
            drop(keep);
            r
        },
    );
}

/// A typed allocation of `len` elements of `T` in device memory (`cudaMalloc` or
/// `cudaMallocAsync`), freed in stream order on drop (see the [module docs](super)).
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceRepr> {
    pub(crate) alloc: Alloc,
    len: usize,
    _t: PhantomData<T>,
}

/// A shared view of part of a device buffer.
#[derive(Debug, Clone, Copy)]
pub struct DeviceView<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    pub(crate) alloc: &'a Alloc,
    _t: PhantomData<&'a [T]>,
}

/// An exclusive view of part of a device buffer.
#[derive(Debug)]
pub struct DeviceViewMut<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    pub(crate) alloc: &'a Alloc,
    _t: PhantomData<&'a mut [T]>,
}

pub(crate) mod sealed {
    pub trait Sealed {
        /// The allocation behind the memory.
        fn allocation(&self) -> &super::Alloc;
        /// Where the device address of the first element is stored (for kernel arguments).
        fn ptr_ref(&self) -> &u64;
    }
}

/// Device memory that work may read: [`DeviceBuffer`], [`DeviceView`], [`DeviceViewMut`].
///
/// Sealed: the crate's safe launches trust the address and length it reports.
pub trait DeviceRead<T: DeviceRepr>: sealed::Sealed {
    /// The device address of the first element.
    fn device_ptr(&self) -> u64;
    /// The number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// For the crate's kernel wrappers: the address, the length, and the use to hand to the
    /// launch (which checks it and notes it).
    #[doc(hidden)]
    #[inline]
    fn kernel_arg(&self) -> (u64, usize, Use<'_>) {
        (
            self.device_ptr(),
            self.len(),
            Use::device(self.allocation(), false),
        )
    }
}

/// Device memory that work may write: [`DeviceBuffer`] and [`DeviceViewMut`].
pub trait DeviceWrite<T: DeviceRepr>: DeviceRead<T> {
    /// As [`DeviceRead::kernel_arg`], for a write.
    #[doc(hidden)]
    #[inline]
    fn kernel_arg_mut(&mut self) -> (u64, usize, Use<'_>) {
        (
            self.device_ptr(),
            self.len(),
            Use::device(self.allocation(), true),
        )
    }
}

impl<T: DeviceRepr> sealed::Sealed for DeviceBuffer<T> {
    fn allocation(&self) -> &Alloc {
        &self.alloc
    }
    fn ptr_ref(&self) -> &u64 {
        &self.alloc.ptr
    }
}
impl<T: DeviceRepr> sealed::Sealed for DeviceView<'_, T> {
    fn allocation(&self) -> &Alloc {
        self.alloc
    }
    fn ptr_ref(&self) -> &u64 {
        &self.ptr
    }
}
impl<T: DeviceRepr> sealed::Sealed for DeviceViewMut<'_, T> {
    fn allocation(&self) -> &Alloc {
        self.alloc
    }
    fn ptr_ref(&self) -> &u64 {
        &self.ptr
    }
}

impl<T: DeviceRepr> DeviceRead<T> for DeviceBuffer<T> {
    fn device_ptr(&self) -> u64 {
        self.alloc.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
impl<T: DeviceRepr> DeviceWrite<T> for DeviceBuffer<T> {}

impl<T: DeviceRepr> DeviceRead<T> for DeviceView<'_, T> {
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl<T: DeviceRepr> DeviceRead<T> for DeviceViewMut<'_, T> {
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
impl<T: DeviceRepr> DeviceWrite<T> for DeviceViewMut<'_, T> {}

/// Resolves a range against a length, as an error instead of a panic.
pub(crate) fn resolve_range(
    range: impl RangeBounds<usize>,
    len: usize,
    what: &'static str,
) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e)),
        (s, e) => Err(Error::OutOfRange {
            what,
            start: s.unwrap_or(usize::MAX),
            end: e.unwrap_or(usize::MAX),
            len,
        }),
    }
}

fn byte_len<T>(len: usize, what: &'static str) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| Error::InvalidValue {
            what,
            value: format!("{len} elements of {} bytes", size_of::<T>()),
            reason: "the size in bytes overflows usize",
        })
}

/// Where an operation runs: a stream, or "stream 0" of the memory's device for the calls
/// without a stream.
#[derive(Clone, Copy)]
enum On<'s> {
    Stream(&'s Stream),
    Default,
}

impl<'s> On<'s> {
    /// Enters the device and resolves the queue the work goes to: the stream's, or "stream 0"
    /// of the memory's device.
    fn lane(self, alloc: &Alloc) -> Result<Lane<'s>> {
        match self {
            On::Stream(s) => s.lane(),
            On::Default => {
                let a = alloc.enter_any()?;
                let q = stream::default_queue(&a);
                Ok(Lane::new_owned(a, q))
            }
        }
    }
}

/// Whether memory at `ptr..ptr+bytes`, given as a host slice, is known to the driver:
/// page-locked, or managed memory seen through a CPU view. The DMA engine may use such memory
/// after an asynchronous call returns, so the call waits before the borrow ends; it is never
/// staged.
pub(crate) fn is_page_locked(ptr: *const u8, bytes: usize) -> bool {
    let probe = |p: *const u8| {
        let mut ty = 0u32;
        let mut attr = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE];
        let mut data = [(&mut ty as *mut u32).cast::<std::ffi::c_void>()];
        // SAFETY: the query only inspects the address; `ty` is a valid out-parameter of the
        // attribute's size. Unlike `cuPointerGetAttribute`, this call succeeds (leaving 0) for
        // memory the driver does not know, so ordinary pageable memory raises no API error.
        let r = unsafe {
            sys::cuPointerGetAttributes(
                1,
                attr.as_mut_ptr(),
                data.as_mut_ptr(),
                p as sys::CUdeviceptr,
            )
        };
        // 0: ordinary pageable memory; HOST: page-locked; DEVICE or UNIFIED: managed memory.
        crate::driver::rc(r) == 0 && ty != 0
    };
    bytes > 0 && (probe(ptr) || probe(ptr.wrapping_add(bytes - 1)))
}

// The operations, shared by buffers and views.

/// Waits for stream `raw` after a copy between device and host memory queued there, before the
/// host borrow ends. For a synchronous call (`sync`) this is `cudaMemcpy`'s own wait, made in the
/// thread's capture mode (so it fails during another thread's global capture, as libcudart's
/// does); for an asynchronous one it is the crate's wait for the borrow, made relaxed so that it
/// never invalidates such a capture, which `cudaMemcpyAsync` would not.
pub(crate) fn wait_for_host_copy(a: &Active, raw: sys::CUstream, sync: bool) -> Result<()> {
    let wait = || {
        a.check(
            // SAFETY: live stream of the current context.
            unsafe { sys::cuStreamSynchronize(raw) },
            "cuStreamSynchronize",
        )
    };
    if sync {
        wait()
    } else {
        crate::queue::relaxed(wait)
    }
}

fn copy_htod<T: DeviceRepr>(
    dst: &(impl DeviceRead<T> + ?Sized),
    src: &[T],
    on: On<'_>,
    call: &'static str,
) -> Result<()> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            what: call,
            expected: dst.len(),
            actual: src.len(),
        });
    }
    let bytes = std::mem::size_of_val(src);
    if bytes == 0 {
        return Ok(());
    }
    let alloc = dst.allocation();
    let lane = on.lane(alloc)?;
    let sync = matches!(on, On::Default);
    let queue_id = Arc::as_ptr(lane.queue()) as usize;
    let mark = lane.mark();
    let waited = lane.submit(call, &[Use::device(alloc, true)], |a, raw| {
        let host = src.as_ptr().cast::<u8>();
        // `None`: the slice lies in pages of a registration that another thread may undo at
        // any moment, so the driver must not be given it (it could transfer it directly,
        // after the call, from pages unlocked meanwhile): staged, or copied through a buffer
        // of the copy's own. Otherwise the copy is recorded until it ends.
        let flight = registered::SliceCopy::begin(host, bytes);
        let locked =
            flight.is_some() && bytes >= staging::DIRECT_BELOW && is_page_locked(host, bytes);
        if bytes >= staging::DIRECT_BELOW && !locked {
            let staged = staging::htod(
                a,
                raw,
                queue_id,
                dst.device_ptr(),
                bytemuck::cast_slice(src),
            );
            if let Some(r) = staged {
                r?;
                if sync {
                    wait_for_host_copy(a, raw, true)?;
                }
                return Ok(sync);
            }
        }
        let Some(flight) = flight else {
            let bounce = registered::Bounce::copy_of(bytemuck::cast_slice(src))?;
            // SAFETY: `dst` is live device memory of `bytes` bytes (lengths checked above);
            // `bounce` holds `bytes` bytes, pageable memory of this copy's own, which the
            // driver has staged when the call returns.
            a.check(
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        dst.device_ptr(),
                        bounce.as_mut_ptr().cast_const().cast(),
                        bytes,
                        raw,
                    )
                },
                "cuMemcpyHtoDAsync",
            )?;
            if sync {
                wait_for_host_copy(a, raw, true)?;
            }
            return Ok(sync);
        };
        // SAFETY: `dst` is live device memory of `bytes` bytes (lengths checked above), `src` a
        // live host slice of `bytes` bytes borrowed for the call.
        a.check(
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst.device_ptr(), host.cast(), bytes, raw) },
            "cuMemcpyHtoDAsync",
        )?;
        // Pageable memory has been staged when the call returns; page-locked memory is read by
        // the DMA engine later, so wait before the borrow ends, and before a registration of
        // the slice's pages made during the call may be undone (`flight` ends after the wait).
        // The calls without a stream are synchronous, as cudaMemcpy.
        if sync || locked || flight.seen_by_registration() || is_page_locked(host, bytes) {
            wait_for_host_copy(a, raw, sync)?;
            return Ok(true);
        }
        Ok(false)
    })?;
    if waited {
        lane.synchronized(mark);
    }
    Ok(())
}

fn copy_dtoh<T: DeviceRepr>(
    src: &(impl DeviceRead<T> + ?Sized),
    dst: &mut [T],
    on: On<'_>,
    call: &'static str,
) -> Result<()> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            what: call,
            expected: src.len(),
            actual: dst.len(),
        });
    }
    let bytes = std::mem::size_of_val(dst);
    if bytes == 0 {
        return Ok(());
    }
    let alloc = src.allocation();
    let sync = matches!(on, On::Default);
    let lane = on.lane(alloc)?;
    let queue_id = Arc::as_ptr(lane.queue()) as usize;
    let mark = lane.mark();
    lane.submit(call, &[Use::device(alloc, false)], |a, raw| {
        let host = dst.as_ptr().cast::<u8>();
        // As in `copy_htod`: a slice in pages of a registration is never given to the driver;
        // any other is recorded until the copy (which waits for its transfer) ends.
        let flight = registered::SliceCopy::begin(host, bytes);
        if bytes >= staging::DIRECT_BELOW && (flight.is_none() || !is_page_locked(host, bytes)) {
            let out: &mut [u8] = bytemuck::cast_slice_mut(dst);
            if let Some(r) = staging::dtoh(a, raw, queue_id, out, src.device_ptr()) {
                r?;
                if sync {
                    // The ring's own waits are relaxed; the synchronous copy keeps cudaMemcpy's
                    // wait for its stream, whatever its size (review finding). The data is
                    // already in `dst`.
                    wait_for_host_copy(a, raw, true)?;
                }
                return Ok(());
            }
        }
        let Some(_flight) = flight else {
            let bounce = registered::Bounce::new(bytes)?;
            // SAFETY: `src` is live device memory of `bytes` bytes; `bounce` holds `bytes`
            // bytes, pageable memory of this copy's own, kept until the wait below.
            a.check(
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(
                        bounce.as_mut_ptr().cast(),
                        src.device_ptr(),
                        bytes,
                        raw,
                    )
                },
                "cuMemcpyDtoHAsync",
            )?;
            wait_for_host_copy(a, raw, sync)?;
            // SAFETY: after the wait `bounce` holds the `bytes` bytes copied; `dst` is an
            // exclusively borrowed host slice of `bytes` bytes, no part of `bounce`; `T` is
            // valid for any bit pattern.
            unsafe {
                std::ptr::copy_nonoverlapping(bounce.as_mut_ptr(), dst.as_mut_ptr().cast(), bytes)
            };
            return Ok(());
        };
        // SAFETY: `src` is live device memory of `bytes` bytes, `dst` a live, exclusively
        // borrowed host slice of `bytes` bytes; `T` is valid for any bit pattern.
        a.check(
            unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), src.device_ptr(), bytes, raw)
            },
            "cuMemcpyDtoHAsync",
        )?;
        // The host slice must hold the data before the borrow ends.
        wait_for_host_copy(a, raw, sync)
    })?;
    // The queue is complete up to here (the copy waited for it): later drops and views of
    // memory used before need no fence.
    lane.synchronized(mark);
    Ok(())
}

/// An asynchronous copy between device memory and page-locked memory: no host wait; the
/// page-locked side notes the use.
fn copy_pinned<T: DeviceRepr>(
    dev: &(impl DeviceRead<T> + ?Sized),
    host: &(impl PageLocked<T> + ?Sized),
    to_device: bool,
    stream: &Stream,
    call: &'static str,
) -> Result<()> {
    if host.len() != dev.len() {
        return Err(Error::LengthMismatch {
            what: call,
            expected: dev.len(),
            actual: host.len(),
        });
    }
    let bytes = dev.len() * size_of::<T>();
    let (d, h) = (dev.allocation(), host.allocation());
    if !to_device {
        host_side(h).check_writable(call)?;
    }
    if bytes == 0 {
        return Ok(());
    }
    let lane = stream.lane()?;
    let uses = [Use::device(d, to_device), Use::host_copy(h, !to_device)];
    let hp = host.host_ptr();
    lane.submit(call, &uses, |a, raw| {
        if to_device {
            // SAFETY: `dev` is live device memory of `bytes` bytes; `host` is page-locked
            // memory of `bytes` bytes that stays allocated (and untouched by the CPU) until the
            // use noted on it is waited for.
            a.check(
                unsafe { sys::cuMemcpyHtoDAsync_v2(dev.device_ptr(), hp.cast(), bytes, raw) },
                "cuMemcpyHtoDAsync",
            )
        } else {
            // SAFETY: as above; the destination is writable (checked) and `T` is valid for any
            // bit pattern.
            a.check(
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(hp.cast_mut().cast(), dev.device_ptr(), bytes, raw)
                },
                "cuMemcpyDtoHAsync",
            )
        }
    })
}

fn copy_dtod<T: DeviceRepr>(
    dst: &(impl DeviceRead<T> + ?Sized),
    src: &(impl DeviceRead<T> + ?Sized),
    on: On<'_>,
    call: &'static str,
) -> Result<()> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            what: call,
            expected: dst.len(),
            actual: src.len(),
        });
    }
    let bytes = src.len() * size_of::<T>();
    if bytes == 0 {
        return Ok(());
    }
    let (d, s) = (dst.allocation(), src.allocation());
    let lane = on.lane(d)?;
    let run_dev = lane.a.dev.ordinal;
    // The source must be usable in the context that runs the copy, or be another device's
    // memory copied to this device's (a peer copy, `cudaMemcpyPeer`, run in the destination's
    // stream).
    let peer = s.host.is_none() && s.device != run_dev;
    if peer && d.host.is_some() {
        return Err(Error::DeviceMismatch {
            call,
            what: "the source buffer (a copy into host-mapped memory runs on the source's \
                   device)",
            found: s.device,
            expected: run_dev,
        });
    }
    let src_use = if peer {
        Use::peer(s, false)
    } else {
        Use::device(s, false)
    };
    // Capturable: device memory on both sides (a peer source is refused under capture by the
    // graph admission, as another device's memory).
    let mut keep = || Ok(Vec::new());
    lane.submit_capturable(
        call,
        &[Use::device(d, true), src_use],
        &mut keep,
        |a, raw| {
            if peer {
                // Pinned by the admission of the source until this returns.
                let src_ctx = context::pin(s.device, s.generation, "the source buffer")?;
                // SAFETY: both ranges are live device memory of `bytes` bytes in their (live,
                // pinned) contexts; the stream belongs to the destination's context, current.
                return a.check(
                    unsafe {
                        sys::cuMemcpyPeerAsync(
                            dst.device_ptr(),
                            a.ctx_raw(),
                            src.device_ptr(),
                            src_ctx.ctx_raw(),
                            bytes,
                            raw,
                        )
                    },
                    "cuMemcpyPeerAsync",
                );
            }
            // SAFETY: both ranges are live memory of `bytes` bytes reachable from this context
            // (device memory of this device, or mapped / managed memory); `dst` is borrowed
            // exclusively, so they do not overlap.
            a.check(
                unsafe {
                    sys::cuMemcpyDtoDAsync_v2(dst.device_ptr(), src.device_ptr(), bytes, raw)
                },
                "cuMemcpyDtoDAsync",
            )
        },
    )
}

/// Sets `count` elements of `elem` bytes (1, 2 or 4) starting at `ptr` with a pitch of
/// `pitch` bytes between them (for typed fills) to `pattern`.
fn memset_raw(
    a: &Active,
    raw: sys::CUstream,
    ptr: u64,
    elem: usize,
    pitch: usize,
    count: usize,
    pattern: u32,
) -> Result<()> {
    // SAFETY (all arms): the caller checked that `count` elements at `pitch` from `ptr` lie in a
    // live allocation of this context, and `ptr` is aligned to `elem`.
    unsafe {
        match (elem, pitch == elem) {
            (1, true) => a.check(
                sys::cuMemsetD8Async(ptr, pattern as u8, count, raw),
                "cuMemsetD8Async",
            ),
            (2, true) => a.check(
                sys::cuMemsetD16Async(ptr, pattern as u16, count, raw),
                "cuMemsetD16Async",
            ),
            (4, true) => a.check(
                sys::cuMemsetD32Async(ptr, pattern, count, raw),
                "cuMemsetD32Async",
            ),
            (1, false) => a.check(
                sys::cuMemsetD2D8Async(ptr, pitch, pattern as u8, 1, count, raw),
                "cuMemsetD2D8Async",
            ),
            (2, false) => a.check(
                sys::cuMemsetD2D16Async(ptr, pitch, pattern as u16, 1, count, raw),
                "cuMemsetD2D16Async",
            ),
            _ => a.check(
                sys::cuMemsetD2D32Async(ptr, pitch, pattern, 1, count, raw),
                "cuMemsetD2D32Async",
            ),
        }
    }
}

fn memset_pattern<T: DeviceRepr>(
    dst: &(impl DeviceRead<T> + ?Sized),
    elem: usize,
    pattern: u32,
    on: On<'_>,
    call: &'static str,
) -> Result<()> {
    let bytes = dst.len() * size_of::<T>();
    if !bytes.is_multiple_of(elem) || dst.device_ptr() % elem as u64 != 0 {
        return Err(Error::InvalidValue {
            what: call,
            value: format!("{bytes} bytes at {:#x}", dst.device_ptr()),
            reason: "the size and address must be multiples of the pattern size",
        });
    }
    if bytes == 0 {
        return Ok(());
    }
    let alloc = dst.allocation();
    let lane = on.lane(alloc)?;
    let mut keep = || Ok(Vec::new());
    lane.submit_capturable(call, &[Use::device(alloc, true)], &mut keep, |a, raw| {
        memset_raw(a, raw, dst.device_ptr(), elem, elem, bytes / elem, pattern)
    })
}

fn fill<T: DeviceRepr>(
    dst: &(impl DeviceRead<T> + ?Sized),
    value: T,
    on: On<'_>,
    call: &'static str,
) -> Result<()> {
    if dst.is_empty() || size_of::<T>() == 0 {
        return Ok(());
    }
    let alloc = dst.allocation();
    let lane = on.lane(alloc)?;
    let bytes = bytemuck::bytes_of(&value);
    let size = bytes.len();
    // The widest word that divides the element and its address; one strided memset per word.
    let word = [4usize, 2, 1]
        .into_iter()
        .find(|&w| size.is_multiple_of(w) && dst.device_ptr() % w as u64 == 0)
        .unwrap_or(1);
    let mut keep = || Ok(Vec::new());
    lane.submit_capturable(call, &[Use::device(alloc, true)], &mut keep, |a, raw| {
        for (k, chunk) in bytes.chunks(word).enumerate() {
            let pattern = match word {
                4 => u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                2 => u16::from_ne_bytes([chunk[0], chunk[1]]) as u32,
                _ => chunk[0] as u32,
            };
            let ptr = dst.device_ptr() + (k * word) as u64;
            memset_raw(a, raw, ptr, word, size, dst.len(), pattern)?;
        }
        Ok(())
    })
}

fn view<T: DeviceRepr>(
    base: u64,
    len: usize,
    range: impl RangeBounds<usize>,
) -> Result<(u64, usize)> {
    let (s, e) = resolve_range(range, len, "device buffer view")?;
    Ok((base + (s * size_of::<T>()) as u64, e - s))
}

/// Operations shared by buffers and views. Generated for each type so that they are inherent
/// methods (no trait import needed).
macro_rules! read_ops {
    () => {
        /// Copies the device memory into `dst` (`cudaMemcpy`, device to host). Blocks until the
        /// data is in `dst`. Pageable destinations of 1 MiB or more are filled from the crate's
        /// staging ring by a few host threads while the copy engine fills the next buffer.
        ///
        /// # Errors
        /// [`Error::LengthMismatch`] when the lengths differ.
        #[doc(alias = "cudaMemcpy")]
        pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
            record(copy_dtoh(
                self,
                dst,
                On::Default,
                "cudaMemcpy (device to host)",
            ))
        }

        /// Copies the device memory into `dst` on `stream` (`cudaMemcpyAsync`, device to host).
        /// Ordered after earlier work in `stream`; returns once the data is in `dst` (as
        /// libcudart does for pageable memory), so `dst` is free to use afterwards. A `dst` in
        /// the pages of a live [`HostRegistration`](crate::HostRegistration) (of memory beside
        /// it) is filled through a buffer of the call's own.
        #[doc(alias = "cudaMemcpyAsync")]
        pub fn copy_to_host_async(&self, dst: &mut [T], stream: &Stream) -> Result<()> {
            record(copy_dtoh(
                self,
                dst,
                On::Stream(stream),
                "cudaMemcpyAsync (device to host)",
            ))
        }

        /// Copies the device memory into page-locked memory on `stream` (`cudaMemcpyAsync`,
        /// device to host) without waiting: `dst` remembers the stream, and its CPU access or
        /// drop waits for the copy.
        ///
        /// # Errors
        /// [`Error::LengthMismatch`] when the lengths differ; [`Error::DeviceMismatch`] when the
        /// stream is on another device than the memory.
        #[doc(alias = "cudaMemcpyAsync")]
        pub fn copy_to_pinned_async(
            &self,
            dst: &mut (impl PageLockedMut<T> + ?Sized),
            stream: &Stream,
        ) -> Result<()> {
            record(copy_pinned(
                self,
                &*dst,
                false,
                stream,
                "cudaMemcpyAsync (device to page-locked host)",
            ))
        }

        /// Copies the device memory into a new `Vec` (`cudaMemcpy`, device to host).
        pub fn to_vec(&self) -> Result<Vec<T>> {
            let mut v = vec![T::zeroed(); DeviceRead::len(self)];
            self.copy_to_host(&mut v)?;
            Ok(v)
        }

        /// A shared view of `range` (elements).
        ///
        /// # Errors
        /// [`Error::OutOfRange`] when the range does not lie within the buffer.
        pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
            let (ptr, len) = record(view::<T>(
                DeviceRead::device_ptr(self),
                DeviceRead::len(self),
                range,
            ))?;
            Ok(DeviceView {
                ptr,
                len,
                alloc: sealed::Sealed::allocation(self),
                _t: PhantomData,
            })
        }
    };
}

macro_rules! write_ops {
    () => {
        /// Copies `src` into the device memory (`cudaMemcpy`, host to device). Blocks until the
        /// copy is done.
        ///
        /// Pageable memory of 1 MiB or more is staged through the crate's ring of page-locked
        /// buffers, filled by a few host threads while the copy engine moves the previous chunk
        /// (several times libcudart's speed); page-locked memory is copied directly.
        ///
        /// # Errors
        /// [`Error::LengthMismatch`] when the lengths differ.
        #[doc(alias = "cudaMemcpy")]
        pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
            record(copy_htod(
                &*self,
                src,
                On::Default,
                "cudaMemcpy (host to device)",
            ))
        }

        /// Copies `src` into the device memory on `stream` (`cudaMemcpyAsync`, host to device).
        /// Ordered after earlier work in `stream`. Returns once `src` has been read (pageable
        /// memory is staged, as in libcudart; page-locked memory is waited for), so `src` is
        /// free to change afterwards; the device-side write may still be pending. A `src` in
        /// the pages of a live [`HostRegistration`](crate::HostRegistration), which another
        /// thread may end at any moment, is copied through a buffer of the call's own: copy
        /// from the registration itself (`copy_from_pinned_async`) to have it read directly.
        #[doc(alias = "cudaMemcpyAsync")]
        pub fn copy_from_host_async(&mut self, src: &[T], stream: &Stream) -> Result<()> {
            record(copy_htod(
                &*self,
                src,
                On::Stream(stream),
                "cudaMemcpyAsync (host to device)",
            ))
        }

        /// Copies page-locked memory into the device memory on `stream` (`cudaMemcpyAsync`,
        /// host to device) without waiting: `src` remembers the stream, and writing to it from
        /// the CPU or dropping it waits for the copy.
        ///
        /// # Errors
        /// [`Error::LengthMismatch`] when the lengths differ.
        #[doc(alias = "cudaMemcpyAsync")]
        pub fn copy_from_pinned_async(
            &mut self,
            src: &(impl PageLocked<T> + ?Sized),
            stream: &Stream,
        ) -> Result<()> {
            record(copy_pinned(
                &*self,
                src,
                true,
                stream,
                "cudaMemcpyAsync (page-locked host to device)",
            ))
        }

        /// Copies device memory `src` into this memory (`cudaMemcpy`, device to device). As in
        /// libcudart, it does not block the host: the copy runs in "stream 0" of the device.
        #[doc(alias = "cudaMemcpy")]
        pub fn copy_from_device(&mut self, src: &(impl DeviceRead<T> + ?Sized)) -> Result<()> {
            record(copy_dtod(
                &*self,
                src,
                On::Default,
                "cudaMemcpy (device to device)",
            ))
        }

        /// Copies device memory `src` into this memory on `stream` (`cudaMemcpyAsync`, device
        /// to device). Does not block the host.
        #[doc(alias = "cudaMemcpyAsync")]
        pub fn copy_from_device_async(
            &mut self,
            src: &(impl DeviceRead<T> + ?Sized),
            stream: &Stream,
        ) -> Result<()> {
            record(copy_dtod(
                &*self,
                src,
                On::Stream(stream),
                "cudaMemcpyAsync (device to device)",
            ))
        }

        /// Sets every byte to `value` (`cudaMemset`). Does not block the host.
        #[doc(alias = "cudaMemset")]
        pub fn memset_u8(&mut self, value: u8) -> Result<()> {
            record(memset_pattern(
                &*self,
                1,
                value as u32,
                On::Default,
                "cudaMemset",
            ))
        }

        /// Sets every byte to `value` on `stream` (`cudaMemsetAsync`).
        #[doc(alias = "cudaMemsetAsync")]
        pub fn memset_u8_async(&mut self, value: u8, stream: &Stream) -> Result<()> {
            record(memset_pattern(
                &*self,
                1,
                value as u32,
                On::Stream(stream),
                "cudaMemsetAsync",
            ))
        }

        /// Sets every 16-bit word to `value` (`cuMemsetD16`; the runtime has no equivalent).
        ///
        /// # Errors
        /// [`Error::InvalidValue`] when the size or address is not a multiple of 2.
        pub fn memset_u16(&mut self, value: u16) -> Result<()> {
            record(memset_pattern(
                &*self,
                2,
                value as u32,
                On::Default,
                "memset_u16",
            ))
        }

        /// Sets every 16-bit word to `value` on `stream`.
        pub fn memset_u16_async(&mut self, value: u16, stream: &Stream) -> Result<()> {
            record(memset_pattern(
                &*self,
                2,
                value as u32,
                On::Stream(stream),
                "memset_u16_async",
            ))
        }

        /// Sets every 32-bit word to `value` (`cuMemsetD32`).
        ///
        /// # Errors
        /// [`Error::InvalidValue`] when the size or address is not a multiple of 4.
        pub fn memset_u32(&mut self, value: u32) -> Result<()> {
            record(memset_pattern(&*self, 4, value, On::Default, "memset_u32"))
        }

        /// Sets every 32-bit word to `value` on `stream`.
        pub fn memset_u32_async(&mut self, value: u32, stream: &Stream) -> Result<()> {
            record(memset_pattern(
                &*self,
                4,
                value,
                On::Stream(stream),
                "memset_u32_async",
            ))
        }

        /// Sets every element to `value`, for any element size (strided memsets; no kernel).
        /// Does not block the host.
        pub fn fill(&mut self, value: T) -> Result<()> {
            record(fill(&*self, value, On::Default, "fill"))
        }

        /// Sets every element to `value` on `stream`.
        pub fn fill_async(&mut self, value: T, stream: &Stream) -> Result<()> {
            record(fill(&*self, value, On::Stream(stream), "fill_async"))
        }

        /// An exclusive view of `range` (elements).
        ///
        /// # Errors
        /// [`Error::OutOfRange`] when the range does not lie within the buffer.
        pub fn slice_mut(
            &mut self,
            range: impl RangeBounds<usize>,
        ) -> Result<DeviceViewMut<'_, T>> {
            let (ptr, len) = record(view::<T>(
                DeviceRead::device_ptr(&*self),
                DeviceRead::len(&*self),
                range,
            ))?;
            Ok(DeviceViewMut {
                ptr,
                len,
                alloc: sealed::Sealed::allocation(&*self),
                _t: PhantomData,
            })
        }
    };
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    pub(crate) fn from_alloc(alloc: Alloc, len: usize) -> DeviceBuffer<T> {
        DeviceBuffer {
            alloc,
            len,
            _t: PhantomData,
        }
    }

    fn alloc_on(len: usize, on: Option<&Stream>) -> Result<DeviceBuffer<T>> {
        Self::alloc_in(len, on, None)
    }

    /// Always inline: each caller (`new`, `new_async`, `new_from_pool_async`) gets the path of
    /// its own arguments, without the branches and moves of the others (measured on
    /// `cudaMallocAsync`).
    #[inline(always)]
    fn alloc_in(
        len: usize,
        on: Option<&Stream>,
        pool: Option<&super::MemPool>,
    ) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len, "device allocation size")?;
        // (Exactly the streams without a queue of their own: `Stream::home_queue` relies on it.)
        if on.is_some_and(|s| s.own_queue().is_none()) {
            return Err(Error::InvalidValue {
                what: "stream of a stream-ordered allocation",
                value: "the per-thread default stream".into(),
                reason: "the memory is freed on its stream from whichever thread drops it, and \
                         each thread has its own per-thread stream: use a created stream or the \
                         legacy default stream",
            });
        }
        let (a, home) = match on {
            Some(s) => (s.enter()?, Some(s)),
            None => (context::enter_current()?, None),
        };
        // On a stream captured by the crate the allocation would be a graph allocation, valid
        // only inside launches: refused (and the capture's end fails). Held until queued.
        let mut entry = match home {
            Some(s) => Some(crate::graph::capture::refuse_if_captured(
                &a,
                s.home_queue(),
                "cudaMallocAsync",
            )?),
            None => None,
        };
        let device = a.dev.ordinal;
        let mut ptr: sys::CUdeviceptr = 0;
        // `cudaMalloc`: a block of the device's cache, or a new one.
        let cached = home.is_none() && bytes > 0 && crate::cache::enabled();
        if cached {
            match crate::cache::take(&a, bytes) {
                Some(p) => ptr = p,
                None => queue::alloc_retry_rc(
                    &a,
                    || "cuMemAlloc",
                    // SAFETY: the context is current; valid out-parameter.
                    || unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) },
                )?,
            }
        } else if bytes > 0 {
            let call = || match (home, pool) {
                (Some(_), Some(_)) => "cuMemAllocFromPoolAsync",
                (Some(_), None) => "cuMemAllocAsync",
                (None, _) => "cuMemAlloc",
            };
            queue::alloc_retry_rc(&a, call, || match home {
                // SAFETY: the context is current; valid out-parameter; live stream and pool
                // of this context (checked by the caller).
                Some(s) => match pool {
                    Some(p) => unsafe {
                        sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, p.as_raw(), s.as_raw())
                    },
                    // SAFETY: as above.
                    None => unsafe { sys::cuMemAllocAsync(&mut ptr, bytes, s.as_raw()) },
                },
                // SAFETY: the context is current; valid out-parameter.
                None => unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) },
            })?;
        }
        let home = match (home, entry.as_mut()) {
            // Numbered while the entry is held, after the allocation is queued (as
            // `Lane::submit`); a fast entry leaves the queue in the same step.
            (Some(s), Some(e)) => Some((s.clone(), queue::note_alloc(e, s.home_queue()))),
            _ => None,
        };
        drop(entry);
        let alloc = Alloc::with(ptr, bytes, device, a.generation(), home);
        if cached {
            alloc.cached.store(true, Ordering::Relaxed);
        }
        Ok(DeviceBuffer {
            alloc,
            len,
            _t: PhantomData,
        })
    }

    /// Allocates `len` elements on the current device (`cudaMalloc`). The contents are
    /// unspecified (any bit pattern is a valid `T`). Blocks the host as `cudaMalloc` may.
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation` when the device is out of memory.
    #[doc(alias = "cudaMalloc")]
    pub fn new(len: usize) -> Result<DeviceBuffer<T>> {
        record(Self::alloc_on(len, None))
    }

    /// Allocates `len` elements set to zero bits on the current device (`cudaMalloc` +
    /// `cudaMemset`). Returns once the memory is zero, so work on any stream sees zeros
    /// (`cudaMemset` alone would order only the streams that synchronise with the legacy
    /// stream, not non-blocking ones).
    pub fn zeroed(len: usize) -> Result<DeviceBuffer<T>> {
        let mut b = Self::new(len)?;
        b.memset_u8(0)?;
        record(b.alloc.uses.wait(true))?;
        Ok(b)
    }

    /// Allocates a buffer on the current device holding a copy of `src` (`cudaMalloc` +
    /// `cudaMemcpy`).
    pub fn from_slice(src: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = Self::new(src.len())?;
        b.copy_from_host(src)?;
        Ok(b)
    }

    /// Allocates `len` elements in stream order on `stream`'s device (`cudaMallocAsync`, from
    /// the device's default memory pool). The memory may be used by work ordered after this
    /// call in `stream` (or made to wait for it); it is freed on `stream` when dropped.
    #[doc(alias = "cudaMallocAsync")]
    pub fn new_async(len: usize, stream: &Stream) -> Result<DeviceBuffer<T>> {
        record(Self::alloc_on(len, Some(stream)))
    }

    /// Allocates `len` elements from `pool` in stream order on `stream`
    /// (`cudaMallocFromPoolAsync`); freed on `stream` when dropped.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when the pool and the stream are on different devices.
    #[doc(alias = "cudaMallocFromPoolAsync")]
    pub fn new_from_pool_async(
        len: usize,
        pool: &super::MemPool,
        stream: &Stream,
    ) -> Result<DeviceBuffer<T>> {
        record((|| {
            if pool.device().ordinal() != stream.inner.device {
                return Err(Error::DeviceMismatch {
                    call: "cudaMallocFromPoolAsync",
                    what: "the pool",
                    found: pool.device().ordinal(),
                    expected: stream.inner.device,
                });
            }
            if pool.generation() != stream.inner.generation {
                return Err(Error::ContextDestroyed {
                    what: "memory pool or stream",
                    device: stream.inner.device,
                });
            }
            Self::alloc_in(len, Some(stream), Some(pool))
        })())
    }

    /// As [`new_async`](Self::new_async), set to zero bits in `stream`.
    pub fn zeroed_async(len: usize, stream: &Stream) -> Result<DeviceBuffer<T>> {
        let mut b = Self::new_async(len, stream)?;
        b.memset_u8_async(0, stream)?;
        Ok(b)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address (`CUdeviceptr`).
    pub fn as_raw(&self) -> u64 {
        self.alloc.ptr
    }

    /// The device the memory is on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.alloc.device)
    }

    /// The stream a stream-ordered buffer is freed on.
    pub fn stream(&self) -> Option<&Stream> {
        self.alloc.home.as_ref().map(|(s, _)| s)
    }

    read_ops!();
    write_ops!();
}

impl<'a, T: DeviceRepr> DeviceView<'a, T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device address of the first element.
    pub fn as_raw(&self) -> u64 {
        self.ptr
    }
    read_ops!();
}

impl<'a, T: DeviceRepr> DeviceViewMut<'a, T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device address of the first element.
    pub fn as_raw(&self) -> u64 {
        self.ptr
    }
    read_ops!();
    write_ops!();
}

// Raw handles inside are plain numbers; the buffer's ownership rules are Rust's.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<DeviceBuffer<f32>>();
    send_sync::<DeviceView<'static, f32>>();
    send_sync::<DeviceViewMut<'static, f32>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_buffer_moves_without_memcpy() {
        // Up to 128 bytes a move is a few inline stores on x86-64; past that, a `memcpy` call
        // (three per `cudaMallocAsync` + free at 144 bytes, about 87 instructions).
        assert!(size_of::<DeviceBuffer<u8>>() <= 128);
        assert!(size_of::<Result<DeviceBuffer<u8>>>() <= 128);
    }

    #[test]
    fn ranges_resolve_or_fail_with_values() {
        assert_eq!(resolve_range(.., 10, "x").unwrap(), (0, 10));
        assert_eq!(resolve_range(2..5, 10, "x").unwrap(), (2, 5));
        assert_eq!(resolve_range(2..=5, 10, "x").unwrap(), (2, 6));
        assert_eq!(resolve_range(10.., 10, "x").unwrap(), (10, 10));
        let e = resolve_range(3..11, 10, "x").unwrap_err();
        assert_eq!(
            e,
            Error::OutOfRange {
                what: "x",
                start: 3,
                end: 11,
                len: 10
            }
        );
        #[allow(clippy::reversed_empty_ranges)]
        let r = resolve_range(5..3, 10, "x");
        assert!(r.is_err());
        assert!(resolve_range(..=usize::MAX, 10, "x").is_err());
    }

    #[test]
    fn byte_sizes_overflow_is_an_error() {
        assert_eq!(byte_len::<u32>(3, "x").unwrap(), 12);
        assert!(byte_len::<u64>(usize::MAX / 4, "x").is_err());
    }
}
