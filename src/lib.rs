#![doc = include_str!("../README.md")]
//!
//! # Runtime semantics kept
//!
//! * **Implicit initialisation**: the first call that needs the driver loads and initialises
//!   it; a missing or too-old driver is an [`Error`], never a panic.
//! * **Primary contexts** are retained on first use of a device and shared by all threads; a
//!   thread's context is switched only when its current device changes.
//! * **Current device per thread**, default 0 ([`set_device`], [`get_device`]).
//! * **Last error per thread**: every failing call returns `Err` and records it;
//!   [`get_last_error`] returns and clears it, [`peek_at_last_error`] only returns it. Errors
//!   that corrupt a context ([`ErrorCode::is_sticky`]) are reported by every later call on that
//!   device until [`Device::reset`] (measured on driver 580: after an illegal address not even a
//!   reset recovers the device, in libcudart as here; the process must restart).
//! * **Reset** destroys the primary context; every handle made before it fails with
//!   [`Error::ContextDestroyed`] afterwards instead of touching freed driver state.
//! * **Default streams**: see [`stream`].
//!
//! # Safety model
//!
//! No safe function lets device work or a copy engine touch memory that Rust has freed, moved,
//! or lent out mutably; see [`memory`] for how device buffers are freed in stream order and how
//! host memory is protected during copies. The crate's own kernels ([`kernels`]) are launched
//! through safe, typed wrappers generated from their signatures; every pointer parameter comes
//! with its length, filled from the buffer, and the kernels bound their accesses by it; what else
//! a kernel needs of its launch (a block shape, dynamic shared memory) is declared with it and
//! checked by the wrapper before launching ([`kernels`]). User
//! kernels are launched with the `unsafe` [`Function::launch`], whose arguments are typed
//! ([`kernel_args!`]: buffers and views note their uses, scalars pass by value) and checked by
//! count and size against the kernel's parameter list. Extended launches
//! ([`LaunchConfigEx`], `cudaLaunchKernelEx`) take the same paths, their attributes checked
//! against the device and the kernel first; the safe wrappers refuse programmatic stream
//! serialization, the one attribute that lets a kernel start before the work ahead of it in the
//! stream has finished, unless the kernel declares that every thread waits for that work first
//! (`// cuda-runtime: waits-for-previous-kernel`). PTX text loads safely ([`Module::from_ptx`], [`Module::from_file`]); cubins
//! and fatbins load with the `unsafe` [`Module::from_image`], since the driver follows offsets
//! inside them that cannot all be checked (their headers are). Host functions take
//! `FnOnce() + Send + 'static` closures whose panics are caught. `Drop` never panics; errors met
//! there are kept with the device ([`Device::take_deferred_errors`]).
//!
//! # How queued work is tracked
//!
//! * **One enqueue path.** Every operation that queues device work (launches of the crate's
//!   kernels and of user kernels, copies of every shape and their batches, memsets, prefetches
//!   and discards, host functions and stream callbacks, event records and waits, external
//!   semaphore signals and waits) goes through one internal function that is handed the memory the
//!   work uses, with its access (read or write). It checks that the memory may be used there
//!   (device, context, mapping, writability), orders the work after a stream-ordered allocation
//!   made on another stream, queues the work, and notes every use. An operation cannot forget
//!   to note a use. User kernels note theirs through their typed arguments
//!   ([`kernel_args!`], [`KernelArg`]).
//! * **A use is a point in a queue.** A queue is a created stream, the legacy default stream of
//!   a context, or *one thread's* per-thread default stream (its handle, `0x2`, means a
//!   different stream on every thread, so it is resolved to the submitting thread's own queue
//!   and never stored as an identity). Each queue numbers the submissions that use memory;
//!   memory remembers, per queue, the last submission that used it and the last that wrote it.
//! * **Fences, recorded lazily.** Waiting for a use means waiting for an event (without timing,
//!   about 0.2 us to record in an idle stream on the H200) recorded after it. Such a fence is
//!   recorded right after the submission only when the CPU may need to wait for exactly that
//!   point (the work uses page-locked, mapped or managed memory); otherwise only when someone
//!   first needs to wait (a drop, a CPU view, another stream ordered after an allocation). A
//!   per-thread stream can be named only by its own thread: memory dropped on the thread that
//!   used it there gets its fence at the drop (one record per such drop, none per launch);
//!   another thread that needs a fence there asks the owner, whose next submission on it records
//!   one first (a relaxed load per submission), and from then on that thread's per-thread
//!   submissions are fenced as they are queued (its buffers go to other threads: later drops
//!   need no answer); a synchronize of that stream or of the device, or the thread's exit, also
//!   completes the work, and the per-thread work of a reset context (or one with a sticky
//!   error) counts as complete. Until then memory dropped after such a use is kept. Nothing is ever
//!   recorded in another stream on the owner's behalf (an event in the legacy stream would hold
//!   back every blocking stream, and could hang a valid program). Memory dropped with a wait on
//!   the dropping thread (IPC, external) is fenced at every submission, like host memory.
//!   A kernel launch on a created, legacy or per-thread stream records nothing: it
//!   costs a lock and a few stores
//!   over the raw `cuLaunchKernel` (see the benchmarks). A wait for a use waits for its fence,
//!   from any thread, whatever kind of stream it was on. A fence's event is kept for the next
//!   fence of its device once no one holds the fence (up to 32 spare events per device), so a fenced
//!   submission costs one event record, not a create, a record and a destroy.
//! * **Drops do not wait for unrelated work.** Device memory is freed once its own uses are
//!   done: at once when none is pending; otherwise a background thread (the reclaimer) frees it
//!   when their fences complete. The free is `cuMemFreeAsync`, in the allocation's own stream
//!   or in a non-blocking stream of the crate's: `cuMemFree` waits for the whole device, and
//!   meanwhile blocks every other thread's `cuMemAlloc` (measured on driver 580). An allocation
//!   that fails for lack of memory tries again as pending frees finish (every 20 ms, within
//!   2 s; in between, the work on other threads' per-thread streams that those frees wait for
//!   is completed as a synchronize would, from a thread of the crate's, never while a capture
//!   of the crate is open (a capture that begins or joins while that synchronize runs waits for
//!   it, until at most 2 s after it began; one that begins later, while that synchronize still
//!   waits for long work, may fail at its end) and never behind a reset under way; the retries
//!   stop when a reset waits
//!   for the allocating thread. (Device, pitched and managed allocations, arrays and imported
//!   memory all retry so.) Two cases can still fail where `cudaFree` would not: the *first*
//!   buffer another thread dropped after a use on a per-thread stream, needed by an allocation
//!   while unrelated work keeps the device busy for more than those 2 s; and such a buffer
//!   needed while a capture of the crate stays open elsewhere for those 2 s, if its owner thread
//!   neither submits to its per-thread stream nor synchronizes meanwhile.
//!   [`Device::synchronize`] returns the memory of dropped buffers whose uses
//!   were all on that device's streams before it returns.
//!   Page-locked, managed and array memory are freed with driver calls that wait for the whole
//!   device (`cuMemHostUnregister`, `cuMemFreeHost`, `cuMemFree`, `cuArrayDestroy`, as
//!   `cudaFreeHost` does) and hold a lock of the driver that other threads' calls need
//!   meanwhile, so their drop never makes them: a dropped [`PinnedBuffer`] or [`Array`] joins
//!   its cache (below); managed memory and mipmapped arrays are freed, once their own uses are
//!   done, by the next synchronising call of the crate that finds the device idle
//!   ([`Device::synchronize`], [`Device::release_cached_memory`], an allocation that ran out
//!   of memory), or with their context at a reset: made in the background, such a call can
//!   find work another thread queued a moment before and stall every thread meanwhile. IPC and external memory are closed on the
//!   dropping thread once their own uses are done; the end of a [`HostRegistration`] scope
//!   unregisters the program's memory before its borrow ends, on the calling thread.
//! * **Memory caches.** [`DeviceBuffer::new`] takes its memory from a per-device cache of
//!   whole `cuMemAlloc` blocks, reused for buffers of the same byte size, as PyTorch's and
//!   CuPy's allocators do; [`PinnedBuffer::new`] and [`PinnedBuffer::with_flags`] from a
//!   cache of page-locked blocks, reused for the same flags and size (zeroed again); and
//!   [`Array::new`] from a cache of arrays, reused for the same descriptor. A dropped
//!   buffer's block joins its cache once its own uses are done (at once when none is pending,
//!   else through the reclaimer), so a cached block is ready for work on any stream. The device
//!   cache holds at most half the device's memory. The caches go back to the driver when an
//!   allocation of their kind fails for lack of memory (before it is tried again), on
//!   [`Device::release_cached_memory`], and with the context at a reset;
//!   [`Device::cached_memory`] says how much device memory is cached (counted as used by
//!   [`Device::memory_info`]). A buffer exported for IPC is freed, never cached. Stream-ordered
//!   buffers ([`DeviceBuffer::new_async`]) use the driver's pools instead. Setting
//!   `CUDA_RUNTIME_NO_CACHE=1` in the environment turns both caches off.
//! * **Thread exit.** A thread that ends with work still queued on its per-thread default
//!   stream waits for that work (its own, nothing else) before the driver tears the stream down:
//!   that teardown, finding queued work, deadlocked inside the driver against other threads'
//!   `cuStreamDestroy` and `cuEventDestroy` (measured on driver 580).
//! * **Peers.** A peer copy notes the device it runs on as a reader of the source device: a
//!   reset of the source waits for that device first, and so does every change of the path the
//!   copy uses ([`Device::enable_peer_access`], [`Device::disable_peer_access`],
//!   `MemPool::set_access` for another device), which the driver otherwise makes under the
//!   queued copy. A revocation under it makes the copy fail, and both contexts with it; so did a
//!   grant of pool access beside copies while another thread toggled access (measured on driver
//!   580: `probes/peer_revoke_queued.cu`, `probes/peer_toggle_suspects.cu`). Peer copies hold a
//!   gate shared until they are queued; a change takes it exclusively, so none slips in between
//!   its wait and the driver's call.
//! * **Capture.** While a stream is captured into a graph by the crate
//!   ([`graph::capture`]), the same path records each submission's uses into the capture's
//!   tokens (kept alive by the graph, as explicit nodes' are) instead of noting them as points
//!   in the queue, refuses work a graph cannot replay safely, and makes any failure inside the
//!   capture fail its end. A capture's begin fences the work queued before it, so no fence is
//!   ever recorded in a capturing stream; the crate's housekeeping (drops, deferred frees,
//!   fences and their waits) runs with the thread's capture mode relaxed, so it never breaks a
//!   user's capture. Only queues that a capture may involve pay for the check (about 25 ns).
//!
//! Every public type is `Send` and `Sync` where the runtime allows sharing it (asserted at
//! compile time below).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(feature = "c-abi")]
#[doc(hidden)]
pub mod abi;
mod context;
mod ctx_lock;
mod demangle;
pub mod device;
mod driver;
pub mod error;
/// The kernel-signature and PTX parser shared with the build pipeline (`cuda-runtime-build`):
/// the generated wrappers' preconditions, and user PTX's parameter lists.
#[doc(hidden)]
pub use cuda_runtime_build::kernel_sig;

pub use device::{
    choose_device, set_valid_devices, AsyncNotification, AsyncNotificationRegistration,
    AtomicCapability, AtomicOperation, ComputeMode, DeviceRequirements, FlushScope, P2PAttribute,
};
pub use device::{
    device_count, driver_version, get_device, profiler_start, profiler_stop, runtime_version,
    set_device, CacheConfig, Device, DeviceAttribute, DeviceFlags, DeviceProperties, Limit,
};
pub use error::{
    error_name, error_string, get_last_error, peek_at_last_error, DeferredError, Error, ErrorCode,
    Result,
};
mod cache;
pub mod entry_point;
pub mod event;
pub mod external;
pub mod graph;
pub mod kernels;
pub mod logs;
pub mod memory;
mod queue;
pub mod stream;
pub mod texture;

pub use event::{Event, EventFlags, EventRecordFlags};
pub use graph::{Graph, GraphExec, GraphNode};
pub use l2::{AccessPolicyGuard, AccessPolicyWindow, AccessProperty};
pub use memory::{
    copy_3d, copy_3d_async, Copy3D, Copy3DBatch, DevicePitched, Extent, HostPitched,
    HostPitchedMut, PitchedBuffer, PitchedSide, PitchedSideMut, Pos,
};
pub use memory::{
    pointer_attributes, DeviceBuffer, DeviceRead, DeviceRepr, DeviceView, DeviceViewMut,
    DeviceWrite, HostAccess, HostAllocFlags, HostRegisterFlags, HostRegistration, HostSlice,
    HostSliceMut, IpcEventHandle, IpcMemHandle, Location, ManagedBuffer, MemAdvice, MemAttach,
    MemPool, MemPoolProps, MemoryType, PageLocked, PageLockedMut, PinnedBuffer, PinnedView,
    PinnedViewMut, PointerAttributes, PoolAccess, PoolPtrExport, PoolStats, ReusePolicy,
    ShareableHandle,
};
pub use memory::{Array, ArrayFlags, ArrayInfo, ArrayShape, MipmappedArray};
pub use stream::{
    default_stream_mode, set_default_stream_mode, DefaultStreamMode, Stream, StreamFlags,
};
pub use texture::{
    AddressMode, ArrayFormat, ChannelDesc, ChannelFormatKind, FilterMode, ReadMode, ResourceDesc,
    SurfaceObject, Texel, TexelScalar, TextureDesc, TextureObject,
};
pub mod l2;
pub mod launch;
pub mod library;
pub mod module;
pub mod symbol;

pub use launch::{
    ClusterSchedulingPolicy, Dim3, LaunchAttributes, LaunchConfig, LaunchConfigEx, MemSyncDomain,
    MemSyncDomainMap, ProgrammaticEvent,
};
pub use library::{Kernel, Library};
pub use module::{
    classify_image, EmbeddedKernel, EmbeddedModule, Function, FunctionAttributes, ImageKind,
    KernelArg, Module, OccupancyFlags, ParamInfo,
};
pub use symbol::Symbol;

/// Includes the kernel wrappers that [`cuda-runtime-build`](https://docs.rs/cuda-runtime-build)
/// generated for your crate in its build script: a module per `kernels/<stem>.cu`, with a safe
/// launch function per kernel. Use it where the modules should live (the crate root, or a
/// `mod kernels { cuda_runtime::include_kernels!(); }`).
///
/// ```ignore
/// // build.rs:   fn main() { cuda_runtime_build::Kernels::new().build(); }
/// // kernels/saxpy.cu:
/// //   extern "C" __global__ void saxpy(float* y, size_t y_len, const float* x, size_t x_len, float a)
/// cuda_runtime::include_kernels!();
///
/// fn run(y: &mut cuda_runtime::DeviceBuffer<f32>, x: &cuda_runtime::DeviceBuffer<f32>) -> cuda_runtime::Result<()> {
///     let stream = cuda_runtime::Stream::new()?;
///     saxpy::saxpy(&stream, &cuda_runtime::LaunchConfig::for_elements(y.len(), 256)?, y, x, 2.0)
/// }
/// ```
///
/// With a file name other than the default given to `Kernels::out_file`, name it:
/// `include_kernels!("gpu.rs")`.
#[macro_export]
macro_rules! include_kernels {
    () => {
        include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
    };
    ($file:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $file));
    };
}

// Graphs are `Send` but not `Sync` (the driver does not synchronise them).
const _: () = {
    const fn send<T: Send>() {}
    send::<Graph>();
    send::<GraphExec>();
    send::<GraphNode>();
};

// Thread-safety of the public types, asserted at compile time.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
    send_sync::<Error>();
    send_sync::<Stream>();
    send_sync::<Event>();
    send_sync::<DeviceBuffer<u8>>();
    send_sync::<DeviceView<'static, u8>>();
    send_sync::<DeviceViewMut<'static, u8>>();
    send_sync::<Module>();
    send_sync::<Function>();
    send_sync::<Library>();
    send_sync::<Kernel>();
    send_sync::<EmbeddedModule>();
    send_sync::<EmbeddedKernel>();
    send_sync::<Symbol<f32>>();
    send_sync::<LaunchConfig>();
    send_sync::<AsyncNotificationRegistration>();
    send_sync::<logs::LogCallback>();
    send_sync::<entry_point::DriverEntryPoint>();
    send_sync::<external::ExternalMemory>();
    send_sync::<external::ExternalSemaphore>();
    send_sync::<PoolPtrExport>();
    send_sync::<ResourceDesc>();
};
