//! Memory: device buffers and views, copies and memsets; page-locked, registered, mapped and
//! managed memory; pitched and 3-D memory; pools; peers; pointer attributes; IPC.
//!
//! # Safety model
//!
//! Device work never touches memory that Rust has freed or lent out mutably (the crate docs,
//! "How queued work is tracked", describe the mechanism):
//!
//! * a [`DeviceBuffer`] owns its allocation. Kernel launches and copies borrow it (shared for
//!   reads, exclusive for writes) only for the duration of the *call*; the work itself may still
//!   run afterwards, so each use is noted as a point in its queue;
//! * dropping a buffer never waits for device work: a stream-ordered allocation used only on
//!   its own stream is freed there at once (`cuMemFreeAsync`); any other buffer is freed once
//!   the work that used it is done (by a background thread when some is still pending), in
//!   stream order, so memory is never handed out again while a kernel on another stream still
//!   reads it, and a stalled unrelated stream never holds up the drop;
//! * a stream-ordered allocation ([`DeviceBuffer::new_async`]) may still have been another
//!   buffer's until its allocation point in its stream's order. Work queued on any other queue
//!   (another stream, a default stream, another thread's per-thread stream, another device) is
//!   first made to wait for that point, once per queue, and not at all once the allocation is
//!   known complete;
//! * copies between the host and plain Rust slices return only once the host memory is no longer
//!   needed by the device: pageable memory follows the runtime's rules (staged or completed
//!   before return), and when a slice turns out to be page-locked the call waits for its stream.
//!   The driver locks whole pages, and another thread may unregister a [`HostRegistration`] at
//!   any moment: a slice in the pages of a live registration is never handed to the driver (it
//!   goes through a buffer of the copy's own), and a registration made while a copy is in the
//!   driver's hands waits for that copy before its pages are unlocked. Page-locked memory the
//!   crate allocates has whole pages of its own;
//! * page-locked ([`PinnedBuffer`]), registered ([`HostRegistration`]) and managed
//!   ([`ManagedBuffer`]) memory remember each use by device work (an asynchronous copy, a kernel
//!   on mapped or managed memory, a prefetch) as a point in its queue. The CPU reaches them only
//!   through `as_slice` / `as_mut_slice`, which first wait for exactly those points (writers for
//!   a read, all of them for a write), whatever thread asks and whatever stream the work was on;
//!   dropping them never waits: page-locked blocks go to the crate's page-locked memory cache
//!   and managed memory is freed by the next synchronising call of the crate, each once its own
//!   uses are done (the
//!   driver's free of such memory waits for the whole device, as `cudaFreeHost` does).
//!   Registration of memory the program owns is
//!   scoped ([`HostRegistration::with`]): the scope waits and unregisters before the borrow of
//!   the slice ends, even on panic, which a guard object could not promise (it may be
//!   forgotten);
//! * memory a device's context owns on the host (write-combined page-locked memory from
//!   `cuMemHostAlloc`, managed memory) dies with a reset, so a reset is refused while a CPU view
//!   of such memory lives ([`Error::ResetWhileBorrowed`](crate::Error::ResetWhileBorrowed)); a
//!   view forgotten with `mem::forget` counts until its memory is freed, not forever. CPU access
//!   after a reset is an error. Page-locked memory without write-combining is a Rust allocation
//!   registered with the driver: the CPU can still use it after a reset, but its page locking
//!   died with the context, so asynchronous copies then refuse it;
//! * host-reachable memory used by work of *another* device (portable mapped memory, managed
//!   memory) makes a reset of its own device wait for that device first: the reset frees or
//!   unmaps the memory;
//! * a peer copy notes its use of the source on the destination's queue (the source's drop
//!   waits for it); a reset of the source's device first waits for the devices given peer
//!   copies of its memory;
//! * managed memory is refused on devices without concurrent managed access (Windows, WSL,
//!   GPUs before Pascal), where the CPU faults on it whenever any kernel runs;
//! * pageable copies are staged through the crate's own page-locked ring (see the
//!   `copy_from_host` docs): the caller's slice is read or written only during the call; a copy
//!   never waits for a ring buffer still used by another queue's copy (it takes the driver's
//!   path instead);
//! * after a device reset every buffer of the device reports [`Error::ContextDestroyed`](crate::Error::ContextDestroyed); its
//!   memory died with the context and is not freed twice.

mod array;
mod batch;
mod device;
pub(crate) mod host;
mod ipc;
mod managed;
mod pitched;
pub(crate) use pitched::{check_array_regions, region as copy_region, Base};
mod pointer;
mod pool;
mod registered;
mod staging;

pub use array::{Array, ArrayFlags, ArrayInfo, ArrayShape, MipmappedArray};
pub(crate) use array::{ArrayInner, MipmappedInner, TexLimits};
pub(crate) use device::sealed;
pub(crate) use device::{Alloc, AllocKeep, Keep};

/// The allocation behind memory of the crate's sealed memory traits (for other modules'
/// submissions through the enqueue path).
pub(crate) fn sealed_allocation<M: device::sealed::Sealed + ?Sized>(m: &M) -> &Alloc {
    m.allocation()
}
pub use batch::{CopyBatch, DiscardBatch, PrefetchBatch, RangeAttributes};
pub use device::{DeviceBuffer, DeviceRead, DeviceView, DeviceViewMut, DeviceWrite};
pub use host::{
    HostAccess, HostAllocFlags, HostRegisterFlags, HostRegistration, HostSlice, HostSliceMut,
    PageLocked, PageLockedMut, PinnedBuffer, PinnedView, PinnedViewMut,
};
pub use ipc::{IpcEventHandle, IpcMemHandle};
pub use managed::{Location, ManagedBuffer, MemAdvice, MemAttach};
pub use pitched::{
    copy_3d, copy_3d_async, Copy3D, Copy3DBatch, DevicePitched, Extent, HostPitched,
    HostPitchedMut, PitchedBuffer, PitchedSide, PitchedSideMut, Pos,
};
pub use pointer::{pointer_attributes, MemoryType, PointerAttributes};
pub use pool::{
    MemPool, MemPoolProps, PoolAccess, PoolPtrExport, PoolStats, ReusePolicy, ShareableHandle,
};

/// Plain data that may be copied to and from the device: `Copy`, no padding, no pointers to
/// host memory, valid for any bit pattern (so reading back whatever the device wrote is sound).
///
/// Implemented for every [`bytemuck::Pod`] type: the primitive integers and floats, arrays of
/// them, and users' `#[repr(C)]` structs through `#[derive(bytemuck::Pod, bytemuck::Zeroable)]`
/// (add `bytemuck` with its `derive` feature to your dependencies).
///
/// ```
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Particle {
///     pos: [f32; 3],
///     mass: f32,
/// }
/// fn assert_device_repr<T: cuda_runtime::DeviceRepr>() {}
/// assert_device_repr::<Particle>();
/// ```
pub trait DeviceRepr: bytemuck::Pod + Send + Sync {}

impl<T: bytemuck::Pod + Send + Sync> DeviceRepr for T {}
