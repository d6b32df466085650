//! Streams: the legacy and per-thread default streams, blocking and non-blocking streams,
//! priorities, synchronisation, queries, event waits and host functions.
//!
//! The runtime's default-stream rules hold because the crate uses the driver's own default
//! streams: the legacy default stream (`cudaStreamLegacy`) synchronises with every *blocking*
//! stream of its device, [`StreamFlags::NON_BLOCKING`] streams run beside it, and the per-thread
//! default stream (`cudaStreamPerThread`) behaves like a blocking stream of its own per host
//! thread. Which one plays "stream 0" for the calls that take no stream is a process-wide choice
//! ([`set_default_stream_mode`], or `CUDA_API_PER_THREAD_DEFAULT_STREAM=1` in the environment, the
//! runtime's `--default-stream per-thread` switch).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bitflags::bitflags;
use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, Result};
use crate::event::Event;
use crate::queue::{Lane, Queue, QueueKind};

bitflags! {
    /// Stream creation flags (`cudaStreamCreateWithFlags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// Work in the stream does not synchronise with the legacy default stream
        /// (`cudaStreamNonBlocking`). Without it the stream is blocking (`cudaStreamDefault`).
        const NON_BLOCKING = 0x1;
    }
}

/// Which stream stands for "stream 0" in calls that take no stream (process-wide).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DefaultStreamMode {
    /// The legacy default stream (`cudaStreamLegacy`), libcudart's default.
    Legacy,
    /// The calling thread's per-thread default stream (`cudaStreamPerThread`), libcudart's
    /// `--default-stream per-thread`.
    PerThread,
}

const MODE_UNSET: u8 = 0;
const MODE_LEGACY: u8 = 1;
const MODE_PER_THREAD: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(MODE_UNSET);

/// The process-wide default-stream mode. Read from `CUDA_API_PER_THREAD_DEFAULT_STREAM` (`1`
/// selects per-thread) on first use unless [`set_default_stream_mode`] chose it.
pub fn default_stream_mode() -> DefaultStreamMode {
    match MODE.load(Ordering::Relaxed) {
        MODE_LEGACY => DefaultStreamMode::Legacy,
        MODE_PER_THREAD => DefaultStreamMode::PerThread,
        _ => {
            let per_thread =
                std::env::var("CUDA_API_PER_THREAD_DEFAULT_STREAM").is_ok_and(|v| v == "1");
            let m = if per_thread {
                MODE_PER_THREAD
            } else {
                MODE_LEGACY
            };
            let _ = MODE.compare_exchange(MODE_UNSET, m, Ordering::Relaxed, Ordering::Relaxed);
            default_stream_mode()
        }
    }
}

/// Chooses the process-wide default-stream mode at run time (the runtime's
/// `--default-stream` compile switch). Affects calls made afterwards, in every thread.
pub fn set_default_stream_mode(mode: DefaultStreamMode) {
    let m = match mode {
        DefaultStreamMode::Legacy => MODE_LEGACY,
        DefaultStreamMode::PerThread => MODE_PER_THREAD,
    };
    MODE.store(m, Ordering::Relaxed);
}

/// What a stream handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Legacy,
    PerThread,
    Owned,
}

pub(crate) struct StreamInner {
    pub(crate) raw: Raw<sys::CUstream_st>,
    pub(crate) device: i32,
    pub(crate) generation: u64,
    pub(crate) kind: Kind,
    /// The queue's identity, for created and legacy streams (a per-thread stream is resolved to
    /// the submitting thread's own queue).
    queue: Option<Arc<Queue>>,
}

/// A CUDA stream (`cudaStream_t`): an ordered queue of work on one device.
///
/// Cloning is cheap and gives another handle to the same stream; the stream is destroyed
/// (`cudaStreamDestroy`) once the last handle is dropped and no memory refers to work queued
/// in it any more (a buffer allocated on it, or one whose use in it has not been waited for):
/// a later drop or CPU view may need to mark a point in the stream. Work already queued still
/// completes. The default streams are never destroyed.
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.inner.raw.0)
            .field("device", &self.inner.device)
            .field("kind", &self.inner.kind)
            .finish()
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        self.inner.raw == other.inner.raw && self.inner.device == other.inner.device
    }
}
impl Eq for Stream {}

fn special(kind: Kind) -> Result<Stream> {
    let a = context::enter_current()?;
    let (raw, queue) = match kind {
        Kind::Legacy => (0x1usize, Some(a.legacy_queue())),
        _ => (0x2usize, None),
    };
    Ok(Stream {
        inner: Arc::new(StreamInner {
            raw: Raw(raw as sys::CUstream),
            device: a.dev.ordinal,
            generation: a.generation(),
            kind,
            queue,
        }),
    })
}

impl Stream {
    /// Creates a blocking stream on the current device (`cudaStreamCreate`). Work in it
    /// synchronises with the legacy default stream.
    #[doc(alias = "cudaStreamCreate")]
    pub fn new() -> Result<Stream> {
        Stream::with_priority(StreamFlags::empty(), 0)
    }

    /// Creates a stream with flags on the current device (`cudaStreamCreateWithFlags`).
    #[doc(alias = "cudaStreamCreateWithFlags")]
    pub fn with_flags(flags: StreamFlags) -> Result<Stream> {
        Stream::with_priority(flags, 0)
    }

    /// Creates a stream with flags and a priority (`cudaStreamCreateWithPriority`). Lower
    /// numbers are higher priorities; a priority outside the device's range
    /// ([`Device::stream_priority_range`](crate::Device::stream_priority_range)) is clamped to
    /// it, as in libcudart.
    #[doc(alias = "cudaStreamCreateWithPriority")]
    pub fn with_priority(flags: StreamFlags, priority: i32) -> Result<Stream> {
        record((|| {
            let a = context::enter_current()?;
            let mut raw: sys::CUstream = std::ptr::null_mut();
            // SAFETY: the context is current; valid out-parameter; flags hold only known bits.
            a.check(
                unsafe { sys::cuStreamCreateWithPriority(&mut raw, flags.bits(), priority) },
                "cuStreamCreateWithPriority",
            )?;
            let queue = Queue::new_registered(raw, a.dev.ordinal, a.generation(), QueueKind::Owned);
            Ok(Stream {
                inner: Arc::new(StreamInner {
                    raw: Raw(raw),
                    device: a.dev.ordinal,
                    generation: a.generation(),
                    kind: Kind::Owned,
                    queue: Some(queue),
                }),
            })
        })())
    }

    /// The legacy default stream of the current device (`cudaStreamLegacy`, "stream 0" under
    /// libcudart's default compile mode).
    #[doc(alias = "cudaStreamLegacy")]
    pub fn legacy() -> Result<Stream> {
        record(special(Kind::Legacy))
    }

    /// The calling thread's per-thread default stream of the current device
    /// (`cudaStreamPerThread`). Only for use on the thread that asked for it.
    ///
    /// Submissions here cost what they cost on a created stream. Only this thread can name
    /// this stream, so another thread that must wait for work queued here (the crate's
    /// reclaimer, for memory dropped while a launch here still uses it) asks this thread to
    /// record a fence, which its next submission here does first; until then, or until this
    /// stream or the device is synchronized or the thread exits, such memory is kept (see "How
    /// queued work is tracked" in the crate docs).
    #[doc(alias = "cudaStreamPerThread")]
    pub fn per_thread() -> Result<Stream> {
        record(special(Kind::PerThread))
    }

    /// "Stream 0" of the current device under the process's [`default_stream_mode`].
    pub fn default_stream() -> Result<Stream> {
        record(special(default_kind()))
    }

    /// The raw driver handle (`CUstream`; `0x1` / `0x2` for the legacy / per-thread streams).
    pub fn as_raw(&self) -> sys::CUstream {
        self.inner.raw.0
    }

    /// The device the stream belongs to (`cudaStreamGetDevice`).
    #[doc(alias = "cudaStreamGetDevice")]
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.inner.device)
    }

    /// Enters the stream's device, checking the stream survived every reset since it was made.
    /// (Always inline: out of line, the entry comes back through memory.)
    #[inline(always)]
    pub(crate) fn enter(&self) -> Result<Active> {
        context::enter_handle(self.inner.device, self.inner.generation, "stream")
    }

    /// Enters the stream's device for work submitted to it: as libcudart, submitting to a
    /// stream of another device than the current one is an error.
    #[inline]
    pub(crate) fn enter_for_submit(&self, call: &'static str) -> Result<Active> {
        if self.inner.device != context::current_ordinal() {
            return Err(Error::WrongDevice {
                call,
                stream_device: self.inner.device,
                current_device: context::current_ordinal(),
            });
        }
        self.enter()
    }

    /// The queue of a created or legacy stream (the home of stream-ordered allocations, which
    /// the per-thread stream cannot be: refused when allocating).
    #[inline]
    pub(crate) fn home_queue(&self) -> &Arc<Queue> {
        self.own_queue()
            .expect("stream-ordered allocations are never made on the per-thread stream")
    }

    /// The queue of a created or legacy stream; `None` for the per-thread stream (each thread
    /// has its own).
    #[inline]
    pub(crate) fn own_queue(&self) -> Option<&Arc<Queue>> {
        self.inner.queue.as_ref()
    }

    /// Enters the stream's device and resolves the queue work submitted now goes to.
    #[inline]
    pub(crate) fn lane(&self) -> Result<Lane<'_>> {
        let a = self.enter()?;
        Ok(self.lane_in(a))
    }

    /// As [`lane`](Self::lane), for work that must be submitted from the stream's device.
    #[inline]
    pub(crate) fn lane_for_submit(&self, call: &'static str) -> Result<Lane<'_>> {
        let a = self.enter_for_submit(call)?;
        Ok(self.lane_in(a))
    }

    #[inline]
    fn lane_in(&self, a: Active) -> Lane<'_> {
        match &self.inner.queue {
            Some(q) => Lane::new(a, q),
            None => {
                let q = per_thread_queue(&a);
                Lane::new_owned(a, q)
            }
        }
    }

    /// The stream's flags (`cudaStreamGetFlags`).
    #[doc(alias = "cudaStreamGetFlags")]
    pub fn flags(&self) -> Result<StreamFlags> {
        record((|| {
            let a = self.enter()?;
            let mut f = 0u32;
            // SAFETY: live stream of the current context; valid out-parameter.
            a.check(
                unsafe { sys::cuStreamGetFlags(self.as_raw(), &mut f) },
                "cuStreamGetFlags",
            )?;
            Ok(StreamFlags::from_bits_truncate(f))
        })())
    }

    /// The stream's priority (`cudaStreamGetPriority`), after clamping.
    #[doc(alias = "cudaStreamGetPriority")]
    pub fn priority(&self) -> Result<i32> {
        record((|| {
            let a = self.enter()?;
            let mut p = 0i32;
            // SAFETY: live stream; valid out-parameter.
            a.check(
                unsafe { sys::cuStreamGetPriority(self.as_raw(), &mut p) },
                "cuStreamGetPriority",
            )?;
            Ok(p)
        })())
    }

    /// The stream's unique id in the process (`cudaStreamGetId`). The legacy default stream
    /// has one of its own, and so has each thread's per-thread default stream (asked from
    /// [`Stream::per_thread`], the id is the calling thread's).
    #[doc(alias = "cudaStreamGetId")]
    pub fn id(&self) -> Result<u64> {
        record((|| {
            let a = self.enter()?;
            let mut id: std::ffi::c_ulonglong = 0;
            // SAFETY: live stream of the current context (or a special handle, which the
            // driver resolves); valid out-parameter.
            a.check(
                unsafe { sys::cuStreamGetId(self.as_raw(), &mut id) },
                "cuStreamGetId",
            )?;
            Ok(id as u64)
        })())
    }

    /// Queues a callback (`cudaStreamAddCallback`, flags 0): `f` runs on a driver thread once
    /// all earlier work in the stream is done, and later work waits for it to return. It
    /// receives the stream's status: `Ok(())`, or the error of earlier work in the stream (the
    /// runtime's `status` argument). Deprecated-but-supported in the runtime in favour of
    /// [`launch_host_fn`](Self::launch_host_fn), which it otherwise equals: `f` must not call
    /// into CUDA, and its panic is caught and reported by the next
    /// [`synchronize`](Self::synchronize) or [`query`](Self::query).
    #[doc(alias = "cudaStreamAddCallback")]
    pub fn add_callback<F: FnOnce(Result<()>) + Send + 'static>(&self, f: F) -> Result<()> {
        record((|| {
            let lane = self.lane_for_submit("cudaStreamAddCallback")?;
            let payload = Box::new(HostFn {
                f,
                panics: lane.queue().host_panics.clone(),
            });
            let data = Box::into_raw(payload);
            type Ours = unsafe extern "C" fn(sys::CUstream, u32, *mut std::ffi::c_void);
            type Drivers =
                unsafe extern "C" fn(sys::CUstream, sys::CUresult, *mut std::ffi::c_void);
            // SAFETY: the signatures differ only in a `repr(u32)` enum against `u32`, which are
            // passed identically.
            let cb = unsafe { std::mem::transmute::<Ours, Drivers>(callback_trampoline::<F>) };
            let r = lane.submit("cudaStreamAddCallback", &[], |a, raw| {
                // SAFETY: `data` is a leaked box that `callback_trampoline::<F>` takes back
                // exactly once; on failure the driver never calls it and we take it back below.
                a.check(
                    unsafe { sys::cuStreamAddCallback(raw, Some(cb), data.cast(), 0) },
                    "cuStreamAddCallback",
                )
            });
            if r.is_err() {
                // SAFETY: the driver refused the call, so it holds no reference to `data`.
                drop(unsafe { Box::from_raw(data) });
            }
            r
        })())
    }

    /// Blocks the host until all work in the stream is done (`cudaStreamSynchronize`). Returns
    /// errors of the stream's asynchronous work, and the panic of a host function.
    #[doc(alias = "cudaStreamSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        record((|| {
            let lane = self.lane()?;
            let mark = lane.mark();
            // SAFETY: live stream of the current context.
            lane.a.check(
                unsafe { sys::cuStreamSynchronize(lane.raw()) },
                "cuStreamSynchronize",
            )?;
            lane.synchronized(mark);
            lane.queue().host_panics.take()
        })())
    }

    /// Whether all work in the stream is done (`cudaStreamQuery`): `Ok(true)` when done,
    /// `Ok(false)` while work is pending (the runtime's `cudaErrorNotReady`, which is not
    /// recorded as an error), `Err` for a real error.
    #[doc(alias = "cudaStreamQuery")]
    pub fn query(&self) -> Result<bool> {
        record((|| {
            // The lane: the panics are kept by the queue (every handle of the legacy or this
            // thread's per-thread stream is one queue).
            let lane = self.lane()?;
            // SAFETY: live stream of the current context.
            let r = driver::rc(unsafe { sys::cuStreamQuery(self.as_raw()) });
            match r {
                0 => lane.queue().host_panics.take().map(|_| true),
                600 => Ok(false),
                code => Err(lane.a.dev.note(Error::from_driver(code, "cuStreamQuery"))),
            }
        })())
    }

    /// Makes future work in this stream wait until `event` completes (`cudaStreamWaitEvent`).
    /// The event may belong to another device. Does not block the host.
    ///
    /// For an event recorded in an open stream capture, this stream joins the capture (the
    /// fork of [`crate::graph::capture`]): its later work is captured too, until the capture
    /// ends.
    ///
    /// # Errors
    /// [`Error::CapturedEvent`] for an event last recorded in a capture that has ended; the
    /// runtime's `cudaErrorStreamCaptureIsolation` when this stream is capturing and the event
    /// was recorded outside the capture; [`Error::NotCapturable`] (and the capture's end fails)
    /// when the per-thread default stream would join a capture from a thread-local destructor
    /// that runs after the crate's own.
    #[doc(alias = "cudaStreamWaitEvent")]
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        record((|| {
            // The event's context stays pinned (not reset) until the wait is queued: a reset
            // in between would hand the driver a destroyed event.
            let (_pin, raw_event) = event.pinned_raw()?;
            let lane = self.lane()?;
            // No record of the event runs between the read and the wait (see `Event::order`).
            let _order = event.order.lock();
            let capture = event.captured_in();
            if capture != 0 {
                return crate::graph::capture::join(&lane, capture, raw_event);
            }
            lane.submit_capturable(
                "cudaStreamWaitEvent",
                &[],
                &mut || Ok(Vec::new()),
                |a, raw| {
                    // SAFETY: live stream of the current context; live event (pinned); flags
                    // 0.
                    a.check(
                        unsafe { sys::cuStreamWaitEvent(raw, raw_event, 0) },
                        "cuStreamWaitEvent",
                    )
                },
            )
        })())
    }

    /// Queues a host function (`cudaLaunchHostFunc`): `f` runs on a driver thread once all
    /// earlier work in the stream is done, and later work waits for it to return.
    ///
    /// `f` must not call into CUDA (the runtime forbids it). A panic in `f` is caught; the next
    /// [`synchronize`](Self::synchronize) or [`query`](Self::query) of this stream (through any
    /// handle of it) reports it as [`Error::HostFnPanicked`]; once the stream is gone, it is a
    /// deferred error of the device ([`Device::take_deferred_errors`](crate::Device::take_deferred_errors)).
    ///
    /// # Errors
    /// [`Error::NotCapturable`] on a stream being captured: `f` runs once and is freed then,
    /// but a graph would call it at every replay. Inside captures use
    /// [`launch_host_fn_replayable`](Self::launch_host_fn_replayable).
    #[doc(alias = "cudaLaunchHostFunc")]
    pub fn launch_host_fn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        record((|| {
            let lane = self.lane_for_submit("cudaLaunchHostFunc")?;
            let panics = lane.queue().host_panics.clone();
            // Refused (and `f` dropped) on a capturing stream: not `submit_capturable`.
            lane.submit("cudaLaunchHostFunc", &[], |a, raw| {
                queue_host_fn(a, raw, f, panics)
            })
        })())
    }
}

/// `cuLaunchHostFunc` of `f`, called once (on a stream that is not being captured).
pub(crate) fn queue_host_fn<F: FnOnce() + Send + 'static>(
    a: &Active,
    raw: sys::CUstream,
    f: F,
    panics: Arc<HostPanics>,
) -> Result<()> {
    // One allocation per call: the closure and the panic slot, taken back by the trampoline
    // monomorphised for `F`.
    let data = Box::into_raw(Box::new(HostFn { f, panics }));
    // SAFETY: `data` is a leaked box that `host_fn_trampoline::<F>` takes back exactly once;
    // on failure the driver never calls it and we take it back below.
    let r = a.check(
        unsafe { sys::cuLaunchHostFunc(raw, Some(host_fn_trampoline::<F>), data.cast()) },
        "cuLaunchHostFunc",
    );
    if r.is_err() {
        // SAFETY: the driver refused the call, so it holds no reference to `data`.
        drop(unsafe { Box::from_raw(data) });
    }
    r
}

struct HostFn<F> {
    f: F,
    panics: Arc<HostPanics>,
}

/// The panics of host functions (and callbacks) queued on one queue, kept for the stream's next
/// synchronize or query. Kept by the queue, not by a `Stream` handle: every handle of the legacy
/// stream, and every handle of a thread's per-thread stream, is one queue (review rev-c14: a
/// panic queued through one `Stream::legacy()` was never reported by a synchronize through
/// another). Once the queue is gone (its last handle and uses dropped, a reset, the thread's
/// exit) nobody can synchronize it: what is left, and what comes later, is kept as a deferred
/// error of the device, as for graph host nodes (it was lost).
pub(crate) struct HostPanics {
    device: i32,
    /// The messages, and whether the queue is gone.
    state: Mutex<(Vec<String>, bool)>,
}

impl HostPanics {
    pub(crate) fn new(device: i32) -> HostPanics {
        HostPanics {
            device,
            state: Mutex::new((Vec::new(), false)),
        }
    }

    /// From a trampoline (a driver thread: no CUDA call).
    fn push(&self, message: String) {
        let mut st = self.state.lock();
        if st.1 {
            drop(st);
            self.defer(message);
        } else {
            st.0.push(message);
        }
    }

    /// The oldest panic not reported yet, as the error of a synchronize or query.
    pub(crate) fn take(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.0.is_empty() {
            return Ok(());
        }
        Err(Error::HostFnPanicked {
            message: st.0.remove(0),
        })
    }

    /// The queue is gone: its panics become the device's deferred errors.
    pub(crate) fn orphan(&self) {
        let left = {
            let mut st = self.state.lock();
            st.1 = true;
            std::mem::take(&mut st.0)
        };
        for message in left {
            self.defer(message);
        }
    }

    fn defer(&self, message: String) {
        if let Ok(d) = context::device_state(self.device) {
            d.defer(
                "a host function of a stream that is gone",
                Error::HostFnPanicked { message },
            );
        }
    }
}

unsafe extern "C" fn host_fn_trampoline<F: FnOnce() + Send + 'static>(data: *mut std::ffi::c_void) {
    // SAFETY: `data` came from `Box::into_raw` of a `HostFn<F>` in `launch_host_fn`, and the
    // driver calls the function once.
    let payload = unsafe { Box::from_raw(data.cast::<HostFn<F>>()) };
    let HostFn { f, panics } = *payload;
    let _in_host_fn = context::HostFnScope::enter();
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        panics.push(message);
        // Dropping the payload could panic again; it must not unwind into the driver.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(p)));
    }
}

/// The driver's stream callback, with the status taken as the plain integer it is (a code the
/// bindings' enum lacks must never be materialised as that enum).
unsafe extern "C" fn callback_trampoline<F: FnOnce(Result<()>) + Send + 'static>(
    _stream: sys::CUstream,
    status: u32,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: `data` came from `Box::into_raw` of a `HostFn<F>` in `add_callback`, and the
    // driver calls the function once.
    let payload = unsafe { Box::from_raw(data.cast::<HostFn<F>>()) };
    let HostFn { f, panics } = *payload;
    let status = match status {
        0 => Ok(()),
        code => Err(Error::from_driver(code, "the stream's earlier work")),
    };
    let _in_host_fn = context::HostFnScope::enter();
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || f(status))) {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        panics.push(message);
        let _ = catch_unwind(AssertUnwindSafe(move || drop(p)));
    }
}

fn default_kind() -> Kind {
    match default_stream_mode() {
        DefaultStreamMode::Legacy => Kind::Legacy,
        DefaultStreamMode::PerThread => Kind::PerThread,
    }
}

thread_local! {
    /// This thread's per-thread default streams, one queue per context activation.
    static PER_THREAD: std::cell::RefCell<PerThreadQueues> =
        const { std::cell::RefCell::new(PerThreadQueues(Vec::new())) };
}

/// A thread's per-thread queues; at thread exit, waits for the work the thread queued on them.
///
/// The driver tears a thread's per-thread default stream down when the thread exits (in its own
/// thread-exit destructor, which runs after this one). Measured on driver 580: a teardown that
/// finds queued work there deadlocked with other threads destroying streams and events (the
/// thread spinning in the driver's destructor, `cuStreamDestroy` and `cuEventDestroy` of other
/// threads blocked on the driver's locks, for good). Waiting here for the thread's own work
/// leaves the teardown nothing to wait for. It waits for no other thread's work.
struct PerThreadQueues(Vec<Arc<Queue>>);

impl Drop for PerThreadQueues {
    fn drop(&mut self) {
        for q in self.0.drain(..) {
            q.drain_at_thread_exit();
        }
    }
}

/// Whether the calling thread still has its list of per-thread queues (not while the thread's
/// thread-local storage is being torn down at its exit: a per-thread queue asked for then is
/// a new one at every call).
pub(crate) fn per_thread_queues_alive() -> bool {
    PER_THREAD
        .try_with(|v| v.try_borrow().is_ok())
        .unwrap_or(false)
}

/// The calling thread's per-thread default stream's queue in the entered context.
pub(crate) fn per_thread_queue(a: &Active) -> Arc<Queue> {
    let (device, generation) = a.id();
    let make = |eager| {
        Queue::new_registered_with(
            per_thread_raw(),
            device,
            generation,
            QueueKind::PerThread,
            eager,
        )
    };
    PER_THREAD
        .try_with(|v| {
            let Ok(mut v) = v.try_borrow_mut() else {
                return make(true);
            };
            if let Some(q) =
                v.0.iter()
                    .find(|q| q.device == device && q.generation == generation)
            {
                return q.clone();
            }
            v.0.retain(|q| q.device != device);
            let q = make(false);
            v.0.push(q.clone());
            q
        })
        // Called from a thread-local destructor: a queue of its own, never drained and with
        // nobody left to answer an ask, so fenced at every submission with uses.
        .unwrap_or_else(|_| make(true))
}

/// The queue of "stream 0" of the entered context under the process's mode.
pub(crate) fn default_queue(a: &Active) -> Arc<Queue> {
    match default_kind() {
        Kind::PerThread => per_thread_queue(a),
        _ => a.legacy_queue(),
    }
}

/// The raw handle of the per-thread default stream (`CU_STREAM_PER_THREAD`).
pub(crate) fn per_thread_raw() -> sys::CUstream {
    0x2usize as sys::CUstream
}
