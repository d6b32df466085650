//! Primary contexts and the per-thread current device.
//!
//! The runtime's model, kept here:
//!
//! * one primary context per device, retained on first use and shared by every host thread;
//! * a current device per host thread (default 0); the thread's driver context is switched only
//!   when it differs from the one it last made current, so a call costs no driver call for that;
//! * [`reset`](crate::Device::reset) destroys the primary context. Every handle records the
//!   *generation* of the context it was made in; after a reset the generation changes and the
//!   handle's calls fail with [`Error::ContextDestroyed`] instead of touching freed driver state.
//!   Calls hold a shared lock on the device's context for their duration and reset takes it
//!   exclusively, so a reset never frees state that another thread's call is using. The lock
//!   ([`crate::ctx_lock`]) makes shared entries cost no atomic read-modify-write; a null driver
//!   (`probes/null_driver`, run by CI) checks that no call reaches the driver during a reset or
//!   with a handle of a reset context.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::ctx_lock::{self, CtxLock, ReadGuard};

use crate::driver::{self, sys, Raw};
use crate::error::{DeferredError, Error, ErrorCode, Result};
use crate::queue::{Queue, QueueKind};
use std::sync::Arc;

/// The state of one device's primary context.
pub(crate) struct CtxState {
    /// The retained primary context, null while none is retained.
    pub(crate) ctx: Raw<sys::CUctx_st>,
    /// A process-wide unique number of this activation of the context; 0 while inactive.
    pub(crate) generation: u64,
}

impl CtxState {
    /// Whether this is the live activation `generation`.
    fn is(&self, generation: u64) -> bool {
        self.generation == generation && !self.ctx.is_null()
    }
}

/// Everything the crate keeps per device.
pub(crate) struct DeviceState {
    pub(crate) ordinal: i32,
    pub(crate) raw: sys::CUdevice,
    /// Held shared by every call for its duration, exclusively by a reset (see `ctx_lock`).
    pub(crate) ctx: CtxLock<CtxState>,
    /// The number of a sticky [`ErrorCode`] that corrupted the context; 0 when none.
    sticky: AtomicU32,
    /// Set when a reset cleared a sticky error: a refused retain afterwards is reported as
    /// libcudart reports it (see `activate`).
    reset_after_sticky: AtomicBool,
    deferred: Mutex<Vec<DeferredError>>,
    /// Launch limits, read on first launch.
    pub(crate) launch_limits: OnceLock<crate::launch::LaunchLimits>,
    /// The stream priority range `(least, greatest)`, read on first use.
    priority_range: OnceLock<(i32, i32)>,
    /// Live CPU borrows of host memory owned by the context (see [`HostBorrow`]).
    host_borrows: AtomicUsize,
    /// Devices (bit per ordinal, bit 63 for 63 and above) whose streams were given peer copies
    /// reading this device's memory: a reset waits for them first.
    peer_readers: AtomicU64,
    /// Peer copies reading this device's memory queued so far (counted under [`PEER_GATE`]):
    /// a change of a peer path to this device sees whether one was queued while it waited.
    peer_copies: AtomicU64,
    /// The legacy default stream's queue of the live context activation.
    legacy: Mutex<Option<Arc<Queue>>>,
    /// The crate's own non-blocking stream for frees (with its context generation): device
    /// memory is freed in stream order there (`cuMemFreeAsync`), since `cuMemFree` waits for the
    /// whole device and holds up other threads' allocations meanwhile.
    free_stream: Mutex<(u64, Raw<sys::CUstream_st>)>,
}

struct Runtime {
    devices: Box<[DeviceState]>,
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

static RUNTIME: OnceLock<Result<Runtime>> = OnceLock::new();

#[inline]
fn runtime() -> Result<&'static Runtime> {
    match RUNTIME.get() {
        Some(Ok(rt)) => Ok(rt),
        _ => runtime_slow(),
    }
}

#[cold]
fn runtime_slow() -> Result<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            // Before any context lock exists (so before any call can enter a device).
            ctx_lock::init();
            driver::init()?;
            let mut count = 0i32;
            // SAFETY: the driver is initialised; the pointer is valid for one int.
            driver::check(
                unsafe { sys::cuDeviceGetCount(&mut count) },
                "cuDeviceGetCount",
            )?;
            let mut devices = Vec::with_capacity(count.max(0) as usize);
            for ordinal in 0..count {
                let mut raw: sys::CUdevice = 0;
                // SAFETY: `ordinal` is below the count the driver reported.
                driver::check(
                    unsafe { sys::cuDeviceGet(&mut raw, ordinal) },
                    "cuDeviceGet",
                )?;
                devices.push(DeviceState {
                    ordinal,
                    raw,
                    ctx: CtxLock::new(
                        CtxState {
                            ctx: Raw::null(),
                            generation: 0,
                        },
                        ordinal,
                    ),
                    sticky: AtomicU32::new(0),
                    reset_after_sticky: AtomicBool::new(false),
                    deferred: Mutex::new(Vec::new()),
                    launch_limits: OnceLock::new(),
                    priority_range: OnceLock::new(),
                    host_borrows: AtomicUsize::new(0),
                    peer_readers: AtomicU64::new(0),
                    peer_copies: AtomicU64::new(0),
                    legacy: Mutex::new(None),
                    free_stream: Mutex::new((0, Raw::null())),
                });
            }
            Ok(Runtime {
                devices: devices.into_boxed_slice(),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The number of devices (`cudaGetDeviceCount`); initialises the driver.
pub(crate) fn device_count() -> Result<i32> {
    Ok(runtime()?.devices.len() as i32)
}

/// The state of device `ordinal`, or the runtime's error for a bad ordinal.
pub(crate) fn device_state(ordinal: i32) -> Result<&'static DeviceState> {
    let rt = runtime()?;
    if rt.devices.is_empty() {
        return Err(Error::NoDevice);
    }
    // (A match, not `ok_or`: an error value built eagerly is dropped on every call.)
    match usize::try_from(ordinal)
        .ok()
        .and_then(|i| rt.devices.get(i))
    {
        Some(d) => Ok(d),
        None => Err(Error::InvalidDevice {
            ordinal,
            count: rt.devices.len() as i32,
        }),
    }
}

struct ThreadState {
    device: Cell<i32>,
    /// The generation of the context this thread last made current (0: none).
    bound: Cell<u64>,
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState { device: Cell::new(0), bound: Cell::new(0) }
    };
}

/// The calling thread's current device ordinal (not validated).
pub(crate) fn current_ordinal() -> i32 {
    THREAD.with(|t| t.device.get())
}

/// Sets the calling thread's current device ordinal (already validated).
pub(crate) fn set_current_ordinal(ordinal: i32) {
    THREAD.with(|t| t.device.set(ordinal));
}

/// A device whose primary context is active and current on the calling thread. The context
/// cannot be reset while this lives.
pub(crate) struct Active {
    pub(crate) dev: &'static DeviceState,
    guard: ReadGuard<'static, CtxState>,
}

impl Active {
    /// The device's free and total memory in bytes (`cuMemGetInfo`).
    pub(crate) fn mem_info(&self) -> Result<(usize, usize)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: the context is current; valid out-parameters.
        self.check(
            unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
            "cuMemGetInfo",
        )?;
        Ok((free, total))
    }

    /// Whether a reset of this device waits for its entries (this one among them) to leave.
    pub(crate) fn reset_waiting(&self) -> bool {
        self.dev.ctx.writer_waiting()
    }

    /// The generation of the active context, to be stored in handles made in it.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.guard.generation
    }

    /// The device ordinal and context generation whose work is queued through this entry.
    #[inline]
    pub(crate) fn id(&self) -> (i32, u64) {
        (self.dev.ordinal, self.guard.generation)
    }

    /// Checks a driver result of a call made in this context; a sticky error is kept on the
    /// device.
    #[inline]
    pub(crate) fn check(&self, r: sys::CUresult, call: &'static str) -> Result<()> {
        match driver::rc(r) {
            0 => Ok(()),
            code => Err(self.dev.note(Error::from_driver(code, call))),
        }
    }

    /// Makes this context current again after a call that entered another one while this entry
    /// was held.
    #[inline]
    pub(crate) fn rebind(&self) -> Result<()> {
        if THREAD.with(|t| t.bound.get()) != self.guard.generation {
            // SAFETY: the context is retained and cannot be reset while `guard` is held.
            driver::check(
                unsafe { sys::cuCtxSetCurrent(self.guard.ctx.0) },
                "cuCtxSetCurrent",
            )?;
            THREAD.with(|t| t.bound.set(self.guard.generation));
        }
        Ok(())
    }

    /// The queue of this context's legacy default stream.
    pub(crate) fn legacy_queue(&self) -> Arc<Queue> {
        let mut l = self.dev.legacy.lock();
        match &*l {
            Some(q) if q.generation == self.guard.generation => q.clone(),
            _ => {
                let q = Queue::new_registered(
                    0x1usize as sys::CUstream,
                    self.dev.ordinal,
                    self.guard.generation,
                    QueueKind::Legacy,
                );
                *l = Some(q.clone());
                q
            }
        }
    }

    /// The crate's stream for frees in this context (made on first use).
    pub(crate) fn free_stream(&self) -> Result<sys::CUstream> {
        let mut f = self.dev.free_stream.lock();
        if f.0 != self.guard.generation || f.1.is_null() {
            let mut raw: sys::CUstream = std::ptr::null_mut();
            // SAFETY: the context is current; valid out-parameter. The stream dies with the
            // context (a reset), and is remade for the next activation.
            self.check(
                unsafe {
                    sys::cuStreamCreate(
                        &mut raw,
                        sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                    )
                },
                "cuStreamCreate",
            )?;
            *f = (self.guard.generation, Raw(raw));
        }
        Ok(f.1 .0)
    }

    /// The raw context handle.
    #[inline]
    pub(crate) fn ctx_raw(&self) -> sys::CUcontext {
        self.guard.ctx.0
    }

    /// The device's stream priority range `(least, greatest)` (`cuCtxGetStreamPriorityRange`,
    /// read once: it is the device's).
    pub(crate) fn stream_priority_range(&self) -> Result<(i32, i32)> {
        if let Some(r) = self.dev.priority_range.get() {
            return Ok(*r);
        }
        let (mut least, mut greatest) = (0i32, 0i32);
        // SAFETY: the context is current (entered); valid out-parameters.
        self.check(
            unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) },
            "cuCtxGetStreamPriorityRange",
        )?;
        Ok(*self.dev.priority_range.get_or_init(|| (least, greatest)))
    }

    #[inline]
    pub(crate) fn expect_generation(&self, generation: u64, what: &'static str) -> Result<()> {
        if self.guard.generation == generation {
            Ok(())
        } else {
            Err(Error::ContextDestroyed {
                what,
                device: self.dev.ordinal,
            })
        }
    }
}

impl DeviceState {
    /// Keeps a sticky error on the device; passes any error on.
    pub(crate) fn note(&self, e: Error) -> Error {
        if e.is_sticky() {
            let _ = self.sticky.compare_exchange(
                0,
                e.code().number(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        e
    }

    fn sticky_error(&self) -> Option<Error> {
        match self.sticky.load(Ordering::Acquire) {
            0 => None,
            n => Some(Error::Sticky {
                device: self.ordinal,
                code: ErrorCode::from_number(n).unwrap_or(ErrorCode::Unknown),
            }),
        }
    }

    /// Records an error met in `Drop`.
    pub(crate) fn defer(&self, during: &'static str, error: Error) {
        self.deferred.lock().push(DeferredError { during, error });
    }

    /// One device attribute (`cuDeviceGetAttribute`), negative values read as 0.
    pub(crate) fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<u32> {
        let mut v = 0i32;
        // SAFETY: valid device handle and out-parameter.
        driver::check(
            unsafe { sys::cuDeviceGetAttribute(&mut v, attr, self.raw) },
            "cuDeviceGetAttribute",
        )?;
        Ok(v.max(0) as u32)
    }

    /// The device's launch limits (cached).
    #[inline]
    pub(crate) fn launch_limits(&self) -> Result<&crate::launch::LaunchLimits> {
        crate::launch::LaunchLimits::of(&self.launch_limits, self)
    }

    pub(crate) fn take_deferred(&self) -> Vec<DeferredError> {
        std::mem::take(&mut *self.deferred.lock())
    }

    /// Activates the primary context (retains it) if it is not active.
    fn activate(&'static self) -> Result<()> {
        let mut st = self.ctx.write();
        if st.ctx.is_null() {
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: `raw` is a device handle the driver gave; the pointer is valid.
            let r = driver::rc(unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, self.raw) });
            if r != 0 {
                let e = Error::from_driver(r, "cuDevicePrimaryCtxRetain");
                // After a sticky error and a reset, driver 580 refuses the new primary context
                // with the sticky error for the rest of the process; libcudart answers every
                // later call with `cudaErrorDevicesUnavailable` (probes/reset_after_trap.cu,
                // H200, eighth session), and so does the crate. (Only after such a reset: a
                // sticky code from a first activation is passed on as it is.)
                if e.code().is_sticky() && self.reset_after_sticky.load(Ordering::Acquire) {
                    return Err(Error::Cuda {
                        code: ErrorCode::DevicesUnavailable,
                        driver: Some(r),
                        call: "cuDevicePrimaryCtxRetain",
                    });
                }
                return Err(e);
            }
            st.ctx = Raw(ctx);
            st.generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Makes the primary context active and current on this thread and holds it against reset.
    pub(crate) fn enter(&'static self) -> Result<Active> {
        if in_host_fn() {
            // The runtime forbids CUDA calls in host functions; waiting for the context lock
            // there could also wait for a reset that waits for this very host function.
            return Err(Error::InHostFunction {
                call: "a CUDA call inside a host function",
            });
        }
        loop {
            let guard = self.ctx.read_recursive();
            if guard.ctx.is_null() {
                drop(guard);
                self.activate()?;
                continue;
            }
            if let Some(e) = self.sticky_error() {
                return Err(e);
            }
            let generation = guard.generation;
            if THREAD.with(|t| t.bound.get()) != generation {
                // SAFETY: the context is retained and cannot be reset while `guard` is held.
                driver::check(
                    unsafe { sys::cuCtxSetCurrent(guard.ctx.0) },
                    "cuCtxSetCurrent",
                )?;
                THREAD.with(|t| t.bound.set(generation));
            }
            return Ok(Active { dev: self, guard });
        }
    }

    /// Destroys the primary context and everything in it (`cuDevicePrimaryCtxReset`), releases
    /// the crate's retain of it and clears the sticky error. Waits for calls in flight on the
    /// device to finish first.
    pub(crate) fn reset(&'static self) -> Result<()> {
        if in_host_fn() {
            // It would wait for other devices' work, possibly the host function's own stream.
            return Err(Error::InHostFunction {
                call: "cudaDeviceReset",
            });
        }
        // One reset at a time: while this one holds its device's write lock and waits for the
        // peer devices below, no other device's write lock is held, so entering them cannot
        // deadlock.
        // Nor from code the crate runs inside one of its calls on this device (a closure of the
        // caller's, a value's drop): the write lock below does not wait for this thread's own
        // entry, so the reset would destroy the context under that call (review rev-d15: the
        // occupancy search's closure).
        if self.ctx.held_here() {
            return Err(Error::InvalidValue {
                what: "cudaDeviceReset",
                value: format!("device {}", self.ordinal),
                reason: "called from inside a call of the crate on this device (a closure or a \
                         drop the call runs): the context would be destroyed under that call",
            });
        }
        static ONE_RESET: Mutex<()> = Mutex::new(());
        let _one = ONE_RESET.lock();
        let mut st = self.ctx.write();
        // Borrows are only taken under the shared lock, so none can start while we hold it.
        let borrows = self.host_borrows.load(Ordering::Acquire);
        if borrows > 0 {
            return Err(Error::ResetWhileBorrowed {
                device: self.ordinal,
                borrows,
            });
        }
        // Peer copies queued on other devices may still read this device's memory, which the
        // reset frees: wait for those devices. No new one can be queued (the source context is
        // pinned while a peer copy is queued, and the write lock excludes that).
        let readers = self.peer_readers.swap(0, Ordering::AcqRel);
        if readers != 0 {
            if let Err(e) = wait_devices(readers, self.ordinal) {
                self.peer_readers.fetch_or(readers, Ordering::AcqRel);
                return Err(e);
            }
        }
        // SAFETY: no call of the crate is using the context (the write lock excludes them);
        // handles made in it are invalidated below through the generation.
        driver::check(
            unsafe { sys::cuDevicePrimaryCtxReset_v2(self.raw) },
            "cuDevicePrimaryCtxReset",
        )?;
        if !st.ctx.is_null() {
            // Reset does not release a retain; drop ours so that the next use retains afresh.
            // SAFETY: the crate holds exactly one retain of this context.
            driver::check(
                unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.raw) },
                "cuDevicePrimaryCtxRelease",
            )?;
        }
        st.ctx = Raw::null();
        st.generation = 0;
        if self.sticky.swap(0, Ordering::AcqRel) != 0 {
            self.reset_after_sticky.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// Enters device `ordinal` (see [`DeviceState::enter`]).
#[inline]
pub(crate) fn enter(ordinal: i32) -> Result<Active> {
    run_orphans();
    device_state(ordinal)?.enter()
}

/// For `Drop`: enters the device of a handle made in context generation `generation` if that
/// context is still the live one, without creating a context. `Ok(None)`: the context was reset
/// and the handle's driver state died with it.
///
/// Inline, with the slow path out of line: the common case returns the entry in registers
/// (as [`enter_handle`]; measured on the stream-ordered free).
#[inline]
pub(crate) fn enter_live(ordinal: i32, generation: u64) -> Result<Option<Active>> {
    if let Some(a) = enter_fast(ordinal, generation) {
        return Ok(Some(a));
    }
    enter_live_slow(ordinal, generation)
}

#[cold]
#[inline(never)]
fn enter_live_slow(ordinal: i32, generation: u64) -> Result<Option<Active>> {
    enter_live_in(device_state(ordinal)?, generation)
}

/// As [`enter_live`], without waiting for a reset under way: `Ok(None)` then, as for a context
/// that is gone.
pub(crate) fn try_enter_live(ordinal: i32, generation: u64) -> Result<Option<Active>> {
    let dev = device_state(ordinal)?;
    match dev.ctx.try_read_recursive() {
        Some(guard) => enter_guarded(dev, guard, generation),
        None => Ok(None),
    }
}

#[inline]
fn enter_live_in(dev: &'static DeviceState, generation: u64) -> Result<Option<Active>> {
    enter_guarded(dev, read_guard(dev)?, generation)
}

#[inline]
fn enter_guarded(
    dev: &'static DeviceState,
    guard: ReadGuard<'static, CtxState>,
    generation: u64,
) -> Result<Option<Active>> {
    if !guard.is(generation) {
        return Ok(None);
    }
    if THREAD.with(|t| t.bound.get()) != generation {
        // SAFETY: the context is retained and cannot be reset while `guard` is held.
        driver::check(
            unsafe { sys::cuCtxSetCurrent(guard.ctx.0) },
            "cuCtxSetCurrent",
        )?;
        THREAD.with(|t| t.bound.set(generation));
    }
    Ok(Some(Active { dev, guard }))
}

/// Enters device `ordinal` if its context is active, without creating one. `Ok(None)`: none is.
pub(crate) fn enter_if_active(ordinal: i32) -> Result<Option<Active>> {
    let dev = device_state(ordinal)?;
    let generation = dev.ctx.read_recursive().generation;
    if generation == 0 {
        return Ok(None);
    }
    enter_live(ordinal, generation)
}

/// Synchronises every active device in `mask` (bit per ordinal; bit 63: every device from 63
/// on) but `own`. Returns the first error; waits for all of them regardless. A device whose
/// context holds a sticky error runs no more work: there is nothing to wait for, and its error
/// is not the caller's.
pub(crate) fn wait_devices(mask: u64, own: i32) -> Result<()> {
    let count = device_count().unwrap_or(0);
    let mut first = Ok(());
    for d in 0..count {
        if d == own || mask & (1u64 << d.min(63)) == 0 {
            continue;
        }
        let r = enter_if_active(d).and_then(|a| match a {
            // SAFETY: the context is current.
            Some(a) => a.check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize"),
            None => Ok(()),
        });
        let r = match r {
            Err(e) if e.is_sticky() => Ok(()),
            r => r,
        };
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Notes that a stream of device `reader` was given a peer copy reading memory of device
/// `source`, so that a reset of `source` waits for `reader` first.
pub(crate) fn note_peer_reader(source: i32, reader: i32) {
    if let Ok(dev) = device_state(source) {
        let bit = 1u64 << reader.clamp(0, 63);
        if dev.peer_readers.load(Ordering::Relaxed) & bit == 0 {
            dev.peer_readers.fetch_or(bit, Ordering::AcqRel);
        }
    }
}

/// Held shared while a peer copy is being queued ([`note_peer_copy`]), exclusively by a
/// change of a peer path ([`change_peer_path`]), so that none is queued between the
/// change's wait for the copies and its driver call.
static PEER_GATE: parking_lot::RwLock<()> = parking_lot::const_rwlock(());

/// A peer copy being queued: keeps changes of peer paths out until the copy is queued.
pub(crate) struct PeerCopy {
    _gate: parking_lot::RwLockReadGuard<'static, ()>,
}

/// Notes that a stream of device `reader` is being given a peer copy reading memory of device
/// `source` (see [`note_peer_reader`]); the result is held until the copy is queued.
pub(crate) fn note_peer_copy(source: i32, reader: i32) -> PeerCopy {
    // Recursive: a copy may note two sources, and a change waiting for the gate must not
    // stop the second note of a thread that holds the first.
    let gate = PEER_GATE.read_recursive();
    note_peer_reader(source, reader);
    if let Ok(dev) = device_state(source) {
        dev.peer_copies.fetch_add(1, Ordering::AcqRel);
    }
    PeerCopy { _gate: gate }
}

/// Runs `change` (which changes device `accessor`'s direct path to device `owner`'s memory:
/// `cuCtxDisablePeerAccess` or `cuCtxEnablePeerAccess`, `cuMemPoolSetAccess` for `accessor`)
/// once no peer copy queued on `accessor` reading `owner`'s memory can still be running, and
/// with none being queued.
///
/// The driver neither waits for such a copy nor keeps the mapping for it: revoking under a
/// queued copy made the copy fail with `CUDA_ERROR_LAUNCH_FAILED`, sticky for both devices
/// (`probes/peer_revoke_queued.cu`, driver 580), and a thread granting pool access beside
/// another's copies made one fail the same way (`probes/peer_toggle_suspects.cu`). So when
/// `accessor` was ever given such a copy, its work is waited for first (`cuCtxSynchronize`, as
/// a reset of `owner` does), then the change runs under the gate unless a copy was queued
/// meanwhile (then it waits again).
/// `change` must not enter a device it does not hold already: an entry under the gate could
/// wait for a reset that waits for a thread stopped at the gate (the wait enters `accessor`
/// itself, outside the gate).
pub(crate) fn change_peer_path<R>(
    accessor: i32,
    owner: i32,
    change: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let dev = device_state(owner)?;
    let bit = 1u64 << accessor.clamp(0, 63);
    loop {
        // Taken once exclusively: every copy noted so far is queued.
        let seen = {
            let _w = PEER_GATE.write();
            dev.peer_copies.load(Ordering::Acquire)
        };
        if dev.peer_readers.load(Ordering::Acquire) & bit != 0 {
            wait_devices(bit, -1)?;
        }
        let _w = PEER_GATE.write();
        if dev.peer_copies.load(Ordering::Acquire) == seen {
            return change();
        }
    }
}

thread_local! {
    static IN_HOST_FN: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as running a host function (`cudaLaunchHostFunc`) or another
/// callback of the driver (a log callback), where CUDA calls are forbidden: objects dropped there
/// hand their release to [`defer_release`]. Scopes nest (the driver may log from a call made
/// while one is open): the drop puts back the mark found at entry.
pub(crate) struct HostFnScope(bool);

impl HostFnScope {
    pub(crate) fn enter() -> HostFnScope {
        HostFnScope(IN_HOST_FN.with(|f| f.replace(true)))
    }
}

impl Drop for HostFnScope {
    fn drop(&mut self) {
        IN_HOST_FN.with(|f| f.set(self.0));
    }
}

/// Runs `f` as every callback the driver makes on its own threads must run (asynchronous
/// notifications, log callbacks): inside a [`HostFnScope`], so that crate calls made by `f` are
/// refused and what `f` drops, `f` itself included, is released later; with a panic caught and
/// returned as its message. Nothing unwinds out, not even a panic of the payload's drop.
pub(crate) fn run_callback(f: impl FnOnce()) -> std::result::Result<(), String> {
    let _scope = HostFnScope::enter();
    let p = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(()) => return Ok(()),
        Err(p) => p,
    };
    let message = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into());
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(p)));
    Err(message)
}

/// Whether the calling thread is inside a host function. (Inline: a thread-local read, asked on
/// every entry.)
#[inline]
pub(crate) fn in_host_fn() -> bool {
    IN_HOST_FN.with(|f| f.get())
}

type Orphan = Box<dyn FnOnce() + Send>;
static ORPHANS: Mutex<Vec<Orphan>> = Mutex::new(Vec::new());
static HAVE_ORPHANS: AtomicBool = AtomicBool::new(false);

/// Queues a release that cannot run now (inside a host function); the next call of the crate
/// that enters a device runs it.
pub(crate) fn defer_release(f: impl FnOnce() + Send + 'static) {
    ORPHANS.lock().push(Box::new(f));
    HAVE_ORPHANS.store(true, Ordering::Release);
}

/// Takes the releases deferred so far without running them and returns how many there were;
/// the tests that count them hold [`ORPHANS_IN_TEST`].
#[cfg(test)]
pub(crate) fn discard_orphans() -> usize {
    let list = std::mem::take(&mut *ORPHANS.lock());
    HAVE_ORPHANS.store(false, Ordering::Release);
    let n = list.len();
    // Dropped, not run: a test's deferred release may name a handle no driver knows.
    std::mem::forget(list);
    n
}

/// Held by the unit tests that count deferred releases, one at a time.
#[cfg(test)]
pub(crate) static ORPHANS_IN_TEST: Mutex<()> = Mutex::new(());

#[inline]
fn run_orphans() {
    if HAVE_ORPHANS.load(Ordering::Relaxed) && !in_host_fn() {
        run_orphans_slow();
    }
}

#[cold]
fn run_orphans_slow() {
    let list = {
        let mut o = ORPHANS.lock();
        HAVE_ORPHANS.store(false, Ordering::Release);
        std::mem::take(&mut *o)
    };
    for f in list {
        // A release that panics (a graph host node's captures, say) must not unwind out of an
        // unrelated call, nor stop the others (review finding): it is kept as the current
        // device's deferred error.
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            let message = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            if let Ok(d) = device_state(current_ordinal()) {
                d.defer(
                    "releasing something a graph or host function held",
                    Error::HostFnPanicked { message },
                );
            }
        }
    }
}

/// Enters the calling thread's current device.
#[inline]
pub(crate) fn enter_current() -> Result<Active> {
    enter(current_ordinal())
}

/// Enters the device of a handle made in context generation `generation`, failing if the device
/// was reset since.
#[inline]
pub(crate) fn enter_handle(ordinal: i32, generation: u64, what: &'static str) -> Result<Active> {
    match enter_fast(ordinal, generation) {
        Some(a) => Ok(a),
        None => enter_handle_slow(ordinal, generation, what),
    }
}

/// The common case of [`enter_handle`], with nothing to do but take the shared lock: no
/// orphaned release to run, not in a host function, the handle's context live and already
/// current on this thread, no sticky error. `None` in every other case (the slow path then
/// decides, with the same checks in full). Returns in registers, where the full path's
/// `Result` goes through memory (measured on the launch path).
#[inline(always)]
fn enter_fast(ordinal: i32, generation: u64) -> Option<Active> {
    if HAVE_ORPHANS.load(Ordering::Relaxed) || in_host_fn() {
        return None;
    }
    let Some(Ok(rt)) = RUNTIME.get() else {
        return None;
    };
    let dev = rt.devices.get(usize::try_from(ordinal).ok()?)?;
    enter_fast_in(dev, generation)
}

/// [`enter_fast`] for a device whose state the caller holds already (an object made on it
/// keeps it: [`device_state`] of its ordinal). `None` in every case `enter_fast` declines,
/// in a host function or with an orphaned release to run included.
#[inline(always)]
pub(crate) fn enter_fast_on(dev: &'static DeviceState, generation: u64) -> Option<Active> {
    if HAVE_ORPHANS.load(Ordering::Relaxed) || in_host_fn() {
        return None;
    }
    enter_fast_in(dev, generation)
}

/// The rest of [`enter_fast`], once the orphans and the host function are ruled out.
#[inline(always)]
fn enter_fast_in(dev: &'static DeviceState, generation: u64) -> Option<Active> {
    let guard = dev.ctx.read_recursive();
    if guard.generation != generation
        || guard.ctx.is_null()
        || dev.sticky.load(Ordering::Acquire) != 0
        || THREAD.with(|t| t.bound.get()) != generation
    {
        return None;
    }
    Some(Active { dev, guard })
}

#[cold]
#[inline(never)]
fn enter_handle_slow(ordinal: i32, generation: u64, what: &'static str) -> Result<Active> {
    let a = enter(ordinal)?;
    a.expect_generation(generation, what)?;
    Ok(a)
}

/// Takes the shared lock on a device's context. Inside a host function it does not wait: a
/// reset holding the lock may be waiting for the host function's own stream, so waiting there
/// could never end ([`Error::InHostFunction`] instead).
fn read_guard(dev: &'static DeviceState) -> Result<ReadGuard<'static, CtxState>> {
    if in_host_fn() {
        return match dev.ctx.try_read_recursive() {
            Some(g) => Ok(g),
            None => Err(Error::InHostFunction {
                call: "waiting for a device reset in progress",
            }),
        };
    }
    Ok(dev.ctx.read_recursive())
}

/// A context kept alive (not reset) without being made current: for calls that name a second
/// context, such as peer copies.
pub(crate) struct Pinned {
    guard: ReadGuard<'static, CtxState>,
}

impl Pinned {
    /// The raw context handle.
    pub(crate) fn ctx_raw(&self) -> sys::CUcontext {
        self.guard.ctx.0
    }
}

/// Keeps the context generation `generation` of device `ordinal` from being reset while the
/// result lives; [`Error::ContextDestroyed`] when it is gone already.
pub(crate) fn pin(ordinal: i32, generation: u64, what: &'static str) -> Result<Pinned> {
    let dev = device_state(ordinal)?;
    let guard = read_guard(dev)?;
    if !guard.is(generation) {
        return Err(Error::ContextDestroyed {
            what,
            device: ordinal,
        });
    }
    Ok(Pinned { guard })
}

/// A borrow of host memory that depends on a context: a CPU view of memory the context owns
/// (`cuMemHostAlloc`, `cuMemAllocManaged`). While one lives, [`DeviceState::reset`] refuses to
/// run, since it would free the memory under the borrow.
pub(crate) struct HostBorrow<'a> {
    dev: &'static DeviceState,
    /// The allocation's own count of views: when the allocation is freed, views still counted
    /// (forgotten with `mem::forget`) are taken off the device's count ([`forget_borrows`]).
    views: &'a AtomicUsize,
}

impl std::fmt::Debug for HostBorrow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBorrow")
            .field("device", &self.dev.ordinal)
            .finish()
    }
}

impl<'a> HostBorrow<'a> {
    /// Takes a borrow of memory made in context generation `generation` of `ordinal`, counted
    /// on the device and in the allocation's `views`.
    pub(crate) fn take(
        ordinal: i32,
        generation: u64,
        what: &'static str,
        views: &'a AtomicUsize,
    ) -> Result<HostBorrow<'a>> {
        // Counted under the shared lock, which a reset's check of the count excludes.
        let _pinned = pin(ordinal, generation, what)?;
        let dev = device_state(ordinal)?;
        dev.host_borrows.fetch_add(1, Ordering::AcqRel);
        views.fetch_add(1, Ordering::AcqRel);
        Ok(HostBorrow { dev, views })
    }
}

impl Drop for HostBorrow<'_> {
    fn drop(&mut self) {
        self.views.fetch_sub(1, Ordering::AcqRel);
        self.dev.host_borrows.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Takes `n` views that were forgotten (never dropped) off device `ordinal`'s count, when the
/// memory they viewed is freed: they can no longer be used, so they must not block a reset.
pub(crate) fn forget_borrows(ordinal: i32, n: usize) {
    if n > 0 {
        if let Ok(dev) = device_state(ordinal) {
            dev.host_borrows.fetch_sub(n, Ordering::AcqRel);
        }
    }
}

/// Whether the context generation `generation` of device `ordinal` is still alive.
pub(crate) fn is_live(ordinal: i32, generation: u64) -> bool {
    device_state(ordinal).is_ok_and(|d| d.ctx.read_recursive().is(generation))
}

/// Whether no work of the context generation `generation` of device `ordinal` can run any
/// more: it was reset, or a sticky error corrupted it (its work was abandoned; memory another,
/// live device lent it is free to go). `false` for a device this process does not know: no
/// context of it was ever made.
pub(crate) fn work_abandoned(ordinal: i32, generation: u64) -> bool {
    device_state(ordinal).is_ok_and(|d| {
        !d.ctx.read_recursive().is(generation) || d.sticky.load(Ordering::Acquire) != 0
    })
}

/// Releases driver state of a handle from `Drop`: runs `f` in the handle's context if that
/// context is still live (after a reset there is nothing to release), defers it when called
/// inside a host function, and records any error as the device's deferred error.
pub(crate) fn release(
    ordinal: i32,
    generation: u64,
    during: &'static str,
    f: impl FnOnce(&Active) -> Result<()> + Send + 'static,
) {
    release_with(ordinal, generation, during, false, f)
}

/// As [`release`], for a release that waits for nothing (`cuMemFreeAsync` in a stream that is
/// not being captured, `cuTexObjectDestroy`): the capture mode is relaxed only while a capture
/// of the crate may be open (the swap costs about 0.1 µs, a sixth of a stream-ordered
/// allocation and free).
pub(crate) fn release_async(
    ordinal: i32,
    generation: u64,
    during: &'static str,
    f: impl FnOnce(&Active) -> Result<()> + Send + 'static,
) {
    release_with(ordinal, generation, during, true, f)
}

fn release_with(
    ordinal: i32,
    generation: u64,
    during: &'static str,
    queues_only: bool,
    f: impl FnOnce(&Active) -> Result<()> + Send + 'static,
) {
    // The common case first: `enter_fast` answers `None` inside a host function, with an
    // orphaned release waiting, or for a context that is not live and current here, and the
    // full path below then decides as before.
    if let Some(a) = enter_fast(ordinal, generation) {
        release_entered(&a, during, queues_only, f);
        return;
    }
    if in_host_fn() {
        defer_release(move || release(ordinal, generation, during, f));
        return;
    }
    let Ok(dev) = device_state(ordinal) else {
        return;
    };
    match enter_live_in(dev, generation) {
        Ok(Some(a)) => release_entered(&a, during, queues_only, f),
        Ok(None) => {}
        Err(e) => dev.defer(during, e),
    }
}

/// Runs the release `f` in the entered context `a`, keeping its error as the device's.
#[inline(always)]
fn release_entered(
    a: &Active,
    during: &'static str,
    queues_only: bool,
    f: impl FnOnce(&Active) -> Result<()>,
) {
    // Relaxed: a drop never invalidates a user's capture in global or thread-local mode (what
    // it frees is no capture's: captured memory is kept by tokens).
    let r = if queues_only && crate::queue::no_capture() {
        f(a)
    } else {
        crate::queue::relaxed(|| f(a))
    };
    if let Err(e) = r {
        a.dev.defer(during, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HostRegisterFlags, HostRegistration};

    /// Records, when dropped, whether it was dropped inside the host-function scope.
    struct Probe(Arc<Mutex<Vec<&'static str>>>);

    impl Drop for Probe {
        fn drop(&mut self) {
            let at = if in_host_fn() {
                "dropped inside"
            } else {
                "dropped outside"
            };
            self.0.lock().push(at);
        }
    }

    #[test]
    fn a_driver_callback_runs_in_the_host_function_scope() {
        assert!(!in_host_fn());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let probe = Probe(seen.clone());
        let s2 = seen.clone();
        let r = run_callback(move || {
            let _captured = &probe;
            s2.lock().push(if in_host_fn() {
                "ran inside"
            } else {
                "ran outside"
            });
            // A crate call is refused before it reaches the driver.
            let data = [7u8; 16];
            let e = HostRegistration::with_read_only(&data, HostRegisterFlags::empty(), |_| ())
                .unwrap_err();
            assert!(matches!(e, Error::InHostFunction { .. }), "{e:?}");
            s2.lock().push("refused");
        });
        assert_eq!(r, Ok(()));
        assert!(!in_host_fn(), "the scope ends with the callback");
        // The closure's captures are dropped inside the scope too.
        assert_eq!(*seen.lock(), ["ran inside", "refused", "dropped inside"]);
    }

    #[test]
    fn a_panic_in_a_driver_callback_is_caught_and_the_scope_restored() {
        let r = run_callback(|| panic!("callback {} failed", 3));
        assert_eq!(r, Err("callback 3 failed".to_string()));
        assert!(!in_host_fn());
        // Nested in a host function, the scope stays open after the callback.
        let _outer = HostFnScope::enter();
        assert_eq!(
            run_callback(|| std::panic::panic_any(5u8)),
            Err("non-string panic payload".into())
        );
        assert!(in_host_fn());
    }
}
