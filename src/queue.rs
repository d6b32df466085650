//! The one enqueue path, and how a use of memory is remembered and waited for.
//!
//! # The mechanism
//!
//! * **Queues have identities.** A [`Queue`] is one ordered queue of device work: a created
//!   stream, the legacy default stream of one context activation, or the per-thread default
//!   stream of one host thread in one context activation. The per-thread stream's raw handle
//!   (`0x2`) names a different stream on every thread, so it is never stored as an identity: each
//!   thread resolves it to its own [`Queue`] when it submits.
//! * **A use is a point in a queue.** Every submission that touches memory goes through
//!   [`Lane::submit`], which receives the memory it uses with the access ([`Use`]), checks it
//!   may be used there, queues the work, and then notes on each piece of memory the queue and
//!   the submission's sequence number in that queue. Nothing else in the crate queues work on
//!   memory, so no operation can forget to note a use.
//! * **Fences are recorded lazily.** A sequence number becomes something to wait for through a
//!   *fence*: an event (without timing, about 0.2 us to record in an idle stream on the H200;
//!   an event with timing costs 1.4 us) recorded in the queue after the submission. Fences are
//!   recorded only where needed:
//!   - eagerly, right after the submission, when it uses memory the CPU can reach (page-locked,
//!     mapped, managed: a CPU view waits for exactly that point);
//!   - otherwise when someone first needs to wait (a drop, a CPU view, ordering another queue
//!     after a stream-ordered allocation): then the fence covers the queue up to that moment.
//!
//!   A per-thread stream can be named only by its own thread (its handle `0x2` names the
//!   calling thread's), so another thread that needs a fence there (the reclaimer, for a buffer
//!   dropped after a launch on it) *asks* the owner: it raises a flag that the owner's next
//!   submission on that stream reads (one relaxed load per submission) and answers by
//!   recording a fence before that submission's work. Until then the memory is not freed; a
//!   synchronize of the owner's stream or of the device, or the owner's exit, completes the
//!   work without any fence. Nothing is ever recorded in another stream on the owner's behalf
//!   (a record in the legacy stream would make later work of every blocking stream wait, and
//!   could hang a valid program: tenth session). Memory that blocking waits are made for
//!   (host-reachable, IPC, external) is fenced at every submission, also here.
//!
//!   Plain kernel launches on created, legacy or per-thread streams record nothing, so the
//!   launch path costs a lock and a few stores over the raw `cuLaunchKernel`, and launches
//!   that use no memory (or copies without tracked memory) none at all.
//! * **Waiting for a use** waits for its fence with `cuEventSynchronize`, from any thread, in the
//!   fence's context; the queue remembers how far it is known to be complete.
//! * **Drops never wait.** Memory that work may still use, and every `cuMemFree` (which, as
//!   measured on driver 580, waits for the whole device, unrelated streams included), goes to
//!   the *reclaimer*: a background thread that frees each allocation once the fences of its
//!   own uses have completed (polling with `cuEventQuery`), in the allocation's context. A
//!   stream-ordered allocation used only on its own stream is freed at once with
//!   `cuMemFreeAsync`. An allocation that fails for lack of memory first lets the reclaimer
//!   finish (bounded) and tries again. [`Device::synchronize`](crate::Device::synchronize)
//!   reclaims what is ready before it returns. Destroys that wait for the whole device
//!   (`cuArrayDestroy`) run on a reclaimer of their own and only once every queue of the device
//!   is idle (or after a grace of 1 s): while one waits it holds a lock of the driver that
//!   other threads' creations and copies need (seen on the H200 pair).
//! * **Capture.** While a capture begun by the crate ([`crate::graph::Capture`]) may involve a
//!   queue (begun on it, or joined to it by an event wait), the queue is *watched*: each
//!   submission asks the driver whether the stream is capturing (`cuStreamGetCaptureInfo`,
//!   about 25 ns, on watched queues only). A captured submission is not queued work: its
//!   memory is admitted as a graph node's is (device memory of the device, kept alive by a
//!   token), the tokens go into the capture's bundle (which the graph keeps, in a user object,
//!   after the end), no use is noted on the queue and no fence is recorded. Work that cannot be
//!   replayed safely (copies from or to host memory, `FnOnce` host functions, graph launches,
//!   anything not audited for capture) is refused, and any failure inside a capture makes its
//!   end fail. A capture's begin fences everything queued before it, so later waits for that
//!   work find a fence and never need to record one in the capturing stream. The crate's own
//!   housekeeping (fences, waits for them, frees, destroys) runs with the thread's capture mode
//!   relaxed, so it never invalidates a user's capture in global or thread-local mode. Without
//!   a crate capture, a fence is still never recorded in a stream that is capturing (checked
//!   with `cuStreamIsCapturing` on the slow paths only).
//!
//!   A submission and a capture's begin on the same queue never overlap: a submission on an
//!   unwatched queue counts itself in `inflight` and then checks `watch`; a begin raises
//!   `watch` and then waits for `inflight` to drain, so either the submission sees the watch
//!   (and takes the queue's capture lock shared, which the begin, joins and end hold
//!   exclusively) or the begin waits for it. A submission can therefore never be captured
//!   without the crate knowing it. A thread that holds no other entry waits behind a begin,
//!   join or end that waits for the lock (so that threads submitting in a loop cannot starve
//!   it); a nested entry takes the lock recursively (its writer may be waiting for it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::context::{self, Active};
use crate::driver::{self, sys, Raw};
use crate::error::{Error, Result};
use crate::memory::Keep;

/// What captured work refers to besides its memory (a function and so its module, a host
/// closure), kept alive by the capture's graph: the same tokens as a graph node's bundle.
pub(crate) type Tokens = Vec<Box<dyn Send>>;

/// An event recorded in a queue after some submission; destroyed (in its context, if that still
/// lives) when the last holder lets go.
pub(crate) struct FenceEvent {
    raw: Raw<sys::CUevent_st>,
    device: i32,
    generation: u64,
}

impl FenceEvent {
    pub(crate) fn raw(&self) -> sys::CUevent {
        self.raw.0
    }
}

impl Drop for FenceEvent {
    fn drop(&mut self) {
        let raw = self.raw;
        // Kept for the next fence of the device (re-recording an event leaves the waits already
        // queued on its earlier record as they were), up to a bound; destroyed past it.
        {
            let mut spare = SPARE_FENCES.lock();
            let device = self.device;
            if spare.iter().filter(|&&(d, _, _)| d == device).count() < MAX_SPARE_FENCES {
                spare.push((device, self.generation, raw));
                return;
            }
        }
        context::release(
            self.device,
            self.generation,
            "destroying a fence",
            move |a| {
                // SAFETY: made in this (live) context by `Queue::record_fence`; waits already queued
                // on it still complete after the destroy.
                a.check(
                    unsafe { sys::cuEventDestroy_v2(raw.get()) },
                    "cuEventDestroy",
                )
            },
        );
    }
}

/// Fence events no fence holds any more, for reuse by the next fence of their device: each
/// fenced submission (per-thread streams, host-reachable memory) made and destroyed an event,
/// two driver calls beside its record. Tagged with the context generation they were made in:
/// after a reset they died with their context, and are dropped from here, never reused nor
/// destroyed. (Locked inside a queue's state lock, never the other way round.)
static SPARE_FENCES: Mutex<Vec<(i32, u64, Raw<sys::CUevent_st>)>> = Mutex::new(Vec::new());

/// The most spare fence events kept per device. (Per device: the spares of a device reset and
/// never used again are dropped only by that device's next fence, and must not stop the other
/// devices' reuse; review finding.)
const MAX_SPARE_FENCES: usize = 32;

/// A spare fence event of `device` made in context generation `generation` (the live one),
/// if any; spares of the device's earlier contexts are dropped on the way.
fn take_spare_fence(device: i32, generation: u64) -> Option<Raw<sys::CUevent_st>> {
    let mut spare = SPARE_FENCES.lock();
    let i = spare.iter().rposition(|&(d, _, _)| d == device)?;
    if spare[i].1 == generation {
        return Some(spare.swap_remove(i).2);
    }
    spare.retain(|&(d, g, _)| d != device || g == generation);
    let i = spare.iter().rposition(|&(d, _, _)| d == device)?;
    Some(spare.swap_remove(i).2)
}

/// The most fences a queue keeps.
const MAX_FENCES: usize = 256;

#[derive(Clone)]
struct Fence {
    seq: u64,
    event: Arc<FenceEvent>,
}

#[derive(Default)]
struct QState {
    /// Every submission up to here is known complete.
    done: u64,
    /// Recorded fences, in increasing `seq`.
    fences: VecDeque<Fence>,
    /// For a per-thread queue: another thread waits for its owner to record a fence (see
    /// [`Queue::fence_for`]).
    asked: bool,
}

/// What [`Queue::fence_for`] found.
enum Found {
    /// The submission is known complete (or nothing is left to wait for).
    Done,
    /// A fence that completes after it.
    Fence(Fence),
    /// A submission of another thread's per-thread stream without a fence yet: its owner has
    /// been asked to record one (polled again later).
    Asked,
}

/// What a queue is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueKind {
    /// A created stream.
    Owned,
    /// The legacy default stream of a context activation.
    Legacy,
    /// The per-thread default stream of one thread.
    PerThread,
}

/// One queue of device work (see the module docs).
pub(crate) struct Queue {
    raw: Raw<sys::CUstream_st>,
    pub(crate) device: i32,
    pub(crate) generation: u64,
    kind: QueueKind,
    /// For a per-thread stream: the thread that owns it.
    owner: Option<std::thread::ThreadId>,
    /// Two counters in one word, so that a submission can take its number and leave in one
    /// atomic operation ([`Entry::number`]): above [`FLIGHT_BITS`], the submissions with noted
    /// uses (and stream-ordered allocations) queued so far, each numbered after it is queued (a
    /// fence reads the number before it is recorded); below, the submissions past the `watch`
    /// check on the fast path, not yet done (see [`Queue::enter`]).
    word: AtomicU64,
    state: Mutex<QState>,
    /// Captures begun by the crate that may involve this queue (begun on it, or joined to it);
    /// while non-zero, submissions check whether the stream is capturing (see the module docs).
    watch: AtomicU32,
    /// Held shared by submissions on a watched queue, exclusively by a capture's begin, joins
    /// and end.
    capture_lock: RwLock<()>,
    /// For a per-thread queue: another thread asks the owner to record a fence at its next
    /// submission there.
    wanted: AtomicBool,
    /// Every submission with uses is fenced at once: a per-thread queue made while its thread
    /// exits (never drained, and nobody left to answer an ask), and a per-thread queue another
    /// thread once had to ask (its buffers are dropped on other threads: from then on it
    /// behaves as a created stream's fenced submissions, so no later drop waits for an answer;
    /// third review).
    eager: AtomicBool,
    /// Panics of host functions queued here, for the stream's next synchronize or query (see
    /// `stream::HostPanics`).
    pub(crate) host_panics: Arc<crate::stream::HostPanics>,
}

/// A submission's hold on a queue against a capture beginning or ending meanwhile (see the
/// module docs).
pub(crate) enum Entry<'q> {
    /// No capture of the crate involves the queue; a begin waits until this is dropped.
    Fast(&'q Queue),
    /// A capture may involve the queue; its begin, joins and end wait until this is dropped.
    Watched(#[allow(dead_code)] RwLockReadGuard<'q, ()>),
    /// A fast entry that has left the queue already, numbered ([`Entry::number`]).
    Left,
}

impl Entry<'_> {
    /// Whether the queue may be involved in a capture (the stream's status must be asked).
    #[inline]
    pub(crate) fn watched(&self) -> bool {
        matches!(self, Entry::Watched(_))
    }

    /// Takes the next submission number of `q` (this entry's queue) for work already queued.
    /// A fast entry leaves the queue in the same atomic operation (a capture's begin may then
    /// go ahead: nothing may be queued in the stream under this entry afterwards); a watched
    /// one stays held until dropped.
    #[inline]
    pub(crate) fn number(&mut self, q: &Queue) -> u64 {
        match self {
            Entry::Fast(fq) => {
                debug_assert!(std::ptr::eq(*fq, q));
                let seq = fq.leave_numbered();
                // The fast entry has left: its drop must not leave again (the thread's count of
                // entries is lowered by the drop of `Left`).
                std::mem::forget(std::mem::replace(self, Entry::Left));
                seq
            }
            _ => q.next_seq(),
        }
    }
}

/// The bits of [`Queue::word`] that count submissions in flight (at most about a million at
/// once: one per thread, and one more per nested entry).
const FLIGHT_BITS: u32 = 20;
/// One submission number in [`Queue::word`].
const ONE_SEQ: u64 = 1 << FLIGHT_BITS;

impl Drop for Entry<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Entry::Fast(q) = self {
            q.word.fetch_sub(1, Ordering::SeqCst);
        }
        ENTRIES.with(|n| n.set(n.get().wrapping_sub(1)));
    }
}

thread_local! {
    /// How many [`Entry`]s (of any queue) the thread holds.
    static ENTRIES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The calling thread's stream-capture mode, swapped back when dropped.
struct ModeSwap {
    mode: u32,
    swapped: bool,
}

impl Drop for ModeSwap {
    fn drop(&mut self) {
        if self.swapped {
            let p = (&mut self.mode as *mut u32).cast::<sys::CUstreamCaptureMode>();
            // SAFETY: a valid in/out parameter of the enum's size (a C enum, 4 bytes), holding
            // the mode the driver wrote; the call only swaps the thread's mode.
            let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode(p) };
        }
    }
}

/// The queues watched for a capture of the crate, over all queues (see [`Queue::watch`]).
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Whether no capture of the crate may be open anywhere in the process.
#[inline]
pub(crate) fn no_capture() -> bool {
    WATCHED.load(Ordering::SeqCst) == 0
}

/// Settle threads between their last look at [`WATCHED`] and the end of their
/// `cuCtxSynchronize` (see [`settle_asked`]).
static SETTLE_SYNCING: AtomicUsize = AtomicUsize::new(0);

/// When the latest settle synchronize began, in nanoseconds since [`settle_epoch`]: waiters
/// wait until [`SETTLE_WAIT`] after it, not each for a fresh [`SETTLE_WAIT`] (fifth review: with a
/// synchronize that outlasted it, every begin and every join waited 2 s).
static SETTLE_SINCE: AtomicU64 = AtomicU64::new(0);

fn settle_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// How long a capture's begin or join waits for a settle thread's synchronize to end.
const SETTLE_WAIT: Duration = Duration::from_secs(2);

/// For a capture's begin or join, once it counts in [`WATCHED`]: waits (at most
/// [`SETTLE_WAIT`]) for a settle thread's `cuCtxSynchronize` under way, which would invalidate
/// the capture (a relaxed `cuCtxSynchronize` from another thread fails with 900 and invalidates
/// an open capture: probes/per_thread_settle_gpu.cu). With the settle thread's count raised
/// before its own look at `WATCHED` (both sequentially consistent), either the settle sees this
/// capture and does not synchronize, or this sees the synchronize and waits for it (fourth
/// review of the per-thread fences: a capture begun between the settle's check and its call
/// failed at its end). Bounded: the synchronize may wait for work that waits for this thread.
fn wait_for_settle() {
    if SETTLE_SYNCING.load(Ordering::SeqCst) == 0 {
        return;
    }
    // Until SETTLE_WAIT after the synchronize began (stored before the count was raised).
    let since = Duration::from_nanos(SETTLE_SINCE.load(Ordering::SeqCst));
    let end = settle_epoch() + since + SETTLE_WAIT;
    while SETTLE_SYNCING.load(Ordering::SeqCst) != 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs `f` with the calling thread's stream-capture mode relaxed
/// (`cuThreadExchangeStreamCaptureMode`), for the crate's own housekeeping: fences, waits for
/// them, frees and destroys made then never invalidate a user's capture in global or
/// thread-local mode (on this thread or another). Sound because nothing they wait for or free
/// belongs to a capture (captured memory is kept by the capture's tokens), and about 0.1 us.
pub(crate) fn relaxed<R>(f: impl FnOnce() -> R) -> R {
    let mut swap = ModeSwap {
        mode: sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED as u32,
        swapped: false,
    };
    let p = (&mut swap.mode as *mut u32).cast::<sys::CUstreamCaptureMode>();
    // SAFETY: as in `ModeSwap::drop`; the mode is read back as an integer (a value the
    // bindings do not know never becomes a Rust enum).
    swap.swapped = driver::rc(unsafe { sys::cuThreadExchangeStreamCaptureMode(p) }) == 0;
    // Restored by the drop, also when `f` unwinds.
    f()
}

impl Drop for Queue {
    /// A created stream is destroyed with its queue, not with the last `Stream` handle: memory
    /// whose uses are still noted on the queue may need a fence recorded in the stream later
    /// (a drop, a CPU view), so the stream lives as long as any use refers to it. Work queued
    /// in it still completes after the destroy.
    fn drop(&mut self) {
        // Nobody can synchronize this stream any more (no CUDA call).
        self.host_panics.orphan();
        if self.kind != QueueKind::Owned || self.raw.0.is_null() {
            return;
        }
        let (raw, device, generation) = (self.raw, self.device, self.generation);
        context::release(device, generation, "destroying a stream", move |a| {
            // SAFETY: a stream this queue owned, in its (live) context; nothing refers to the
            // queue any more, so no work can be queued in it or fenced on it.
            a.check(
                unsafe { sys::cuStreamDestroy_v2(raw.get()) },
                "cuStreamDestroy",
            )
        });
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("raw", &self.raw.0)
            .field("device", &self.device)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Queue {
    pub(crate) fn new(raw: sys::CUstream, device: i32, generation: u64, kind: QueueKind) -> Queue {
        Queue {
            raw: Raw(raw),
            device,
            generation,
            kind,
            owner: (kind == QueueKind::PerThread).then(|| std::thread::current().id()),
            word: AtomicU64::new(0),
            state: Mutex::new(QState::default()),
            watch: AtomicU32::new(0),
            capture_lock: RwLock::new(()),
            wanted: AtomicBool::new(false),
            eager: AtomicBool::new(false),
            host_panics: Arc::new(crate::stream::HostPanics::new(device)),
        }
    }

    /// A new queue, known to the idle check of frees that wait for the whole device
    /// ([`defer_free_blocking`]).
    pub(crate) fn new_registered(
        raw: sys::CUstream,
        device: i32,
        generation: u64,
        kind: QueueKind,
    ) -> Arc<Queue> {
        Queue::new_registered_with(raw, device, generation, kind, false)
    }

    /// As [`new_registered`](Self::new_registered); `eager`: every submission with uses is
    /// fenced at once (see [`Queue::eager`]).
    pub(crate) fn new_registered_with(
        raw: sys::CUstream,
        device: i32,
        generation: u64,
        kind: QueueKind,
        eager: bool,
    ) -> Arc<Queue> {
        let mut q = Queue::new(raw, device, generation, kind);
        q.eager = AtomicBool::new(eager);
        let q = Arc::new(q);
        let mut r = registry().lock();
        if r.0.len() >= r.1 {
            r.0.retain(|w| w.strong_count() > 0);
            r.1 = (2 * r.0.len()).max(64);
        }
        r.0.push(Arc::downgrade(&q));
        q
    }

    /// Whether the queue has nothing left to run, as far as can be known without blocking or
    /// disturbing a capture: a created stream is asked (`cuStreamQuery`, unless it is being
    /// captured); a default stream's last numbered submission is checked (host functions
    /// without uses there are not seen). `a`: the queue's context, current.
    fn idle(&self, a: &Active) -> bool {
        match self.kind {
            QueueKind::Owned => {
                // Held so that no capture begins between the check and the query.
                let e = self.enter();
                if e.watched() && self.capturing(a) {
                    return true;
                }
                // SAFETY: the stream lives as long as its queue (held by the caller), in the
                // current context; a query queues nothing.
                let r = driver::rc(relaxed(|| unsafe { sys::cuStreamQuery(self.raw()) }));
                drop(e);
                r != 600
            }
            QueueKind::Legacy | QueueKind::PerThread => {
                !matches!(self.is_done(self.seq()), Ok(false))
            }
        }
    }

    /// The number of the last submission queued so far.
    #[inline]
    fn seq(&self) -> u64 {
        self.word.load(Ordering::SeqCst) >> FLIGHT_BITS
    }

    /// Takes the next submission number (for work already queued).
    #[inline]
    fn next_seq(&self) -> u64 {
        (self.word.fetch_add(ONE_SEQ, Ordering::SeqCst) >> FLIGHT_BITS) + 1
    }

    /// Takes the next submission number and leaves the queue (one fast entry fewer), at once.
    #[inline]
    fn leave_numbered(&self) -> u64 {
        // The count of entries is at least one (this one's): subtracting it borrows nothing
        // from the number.
        (self.word.fetch_add(ONE_SEQ - 1, Ordering::SeqCst) >> FLIGHT_BITS) + 1
    }

    /// The fast-path submissions in flight.
    #[inline]
    fn inflight(&self) -> u64 {
        self.word.load(Ordering::SeqCst) & (ONE_SEQ - 1)
    }

    /// Enters a submission (or a free in the stream) on this queue; see [`Entry`].
    #[inline]
    pub(crate) fn enter(&self) -> Entry<'_> {
        ENTRIES.with(|n| n.set(n.get() + 1));
        self.word.fetch_add(1, Ordering::SeqCst);
        if self.watch.load(Ordering::SeqCst) == 0 {
            return Entry::Fast(self);
        }
        self.enter_watched()
    }

    #[cold]
    fn enter_watched(&self) -> Entry<'_> {
        self.word.fetch_sub(1, Ordering::SeqCst);
        // A thread that holds no other entry waits behind a capture's begin, join or end that
        // waits for the lock: with recursive reads only, threads submitting to a captured
        // stream in a loop kept its end from ever taking the lock (the null-driver harness hung
        // so). A thread that holds an entry (this queue's: a drop inside a submission, or
        // another queue's, which that begin may be waiting for) enters recursively, never
        // waiting for a writer that may be waiting for it.
        if ENTRIES.with(|n| n.get()) > 1 {
            Entry::Watched(self.capture_lock.read_recursive())
        } else {
            Entry::Watched(self.capture_lock.read())
        }
    }

    /// For a capture's begin or join: from now on every submission on this queue asks the
    /// stream's capture status; waits for the submissions already past the check, and returns
    /// the queue's capture lock held exclusively. Undone by [`unwatch`](Self::unwatch).
    pub(crate) fn watch_exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        WATCHED.fetch_add(1, Ordering::SeqCst);
        // Counted before the settle thread's synchronize is looked for (see `settle_asked`).
        wait_for_settle();
        self.watch.fetch_add(1, Ordering::SeqCst);
        // The fast-path submissions drain first, without the lock held: one of them may enter
        // the queue again meanwhile (an allocation reclaiming memory that frees in this
        // stream), which now takes the lock shared and must not wait for this begin.
        while self.inflight() != 0 {
            std::thread::yield_now();
        }
        self.capture_lock.write()
    }

    /// The queue's capture lock, exclusively (for a capture's end).
    pub(crate) fn capture_exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.capture_lock.write()
    }

    /// Undoes one [`watch_exclusive`](Self::watch_exclusive).
    pub(crate) fn unwatch(&self) {
        self.watch.fetch_sub(1, Ordering::SeqCst);
        WATCHED.fetch_sub(1, Ordering::SeqCst);
    }

    /// Records a fence after everything queued so far, unless one exists or all is known
    /// complete (a capture's begin: later waits for that work then never need to record a fence
    /// in the capturing stream). `a` is this queue's context, current.
    pub(crate) fn fence_all(&self, a: &Active) -> Result<()> {
        let mut st = self.state.lock();
        let seq = self.seq();
        if st.done >= seq || st.fences.back().is_some_and(|f| f.seq >= seq) {
            return Ok(());
        }
        if self.capturing(a) {
            // Already capturing (a second begin, which the driver refuses): never a fence in
            // a capture.
            return Ok(());
        }
        relaxed(|| self.record_fence(a, &mut st)).map(drop)
    }

    /// Whether this is the legacy default stream of a context.
    #[inline]
    pub(crate) fn is_legacy(&self) -> bool {
        self.kind == QueueKind::Legacy
    }

    /// Whether this is a thread's per-thread default stream.
    pub(crate) fn is_per_thread(&self) -> bool {
        self.kind == QueueKind::PerThread
    }

    /// The raw stream handle (`0x1` / `0x2` for the default streams).
    #[inline]
    pub(crate) fn raw(&self) -> sys::CUstream {
        self.raw.0
    }

    /// Whether the calling thread can queue work on this queue (another thread's per-thread
    /// stream cannot be named).
    fn addressable(&self) -> bool {
        self.owner.is_none_or(|o| o == std::thread::current().id())
    }

    /// Whether the queue is being captured into a graph (`cuStreamIsCapturing`); the context
    /// must be current.
    fn capturing(&self, a: &Active) -> bool {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: live stream of the current context; valid out-parameter.
        let r = unsafe { sys::cuStreamIsCapturing(self.raw(), &mut status) };
        let _ = a;
        driver::rc(r) == 0 && status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
    }

    /// Records a fence after everything queued so far. `a` is this queue's context, current;
    /// the caller holds the state lock and may address the queue.
    fn record_fence(&self, a: &Active, st: &mut QState) -> Result<Fence> {
        if !self.addressable() {
            // Never reached: another thread's per-thread stream is asked, not recorded in.
            return Err(Error::InvalidValue {
                what: "a fence in another thread's per-thread stream",
                value: format!("submission {}", self.seq()),
                reason: "only the owner thread can record there (internal error)",
            });
        }
        // Never in the legacy stream while a crate capture of a stream it synchronises with is
        // open: the record would depend on the capture and invalidate it (held until recorded).
        let _quiet = match self.kind {
            QueueKind::Legacy => Some(crate::graph::capture::legacy_quiet(
                self.device,
                self.generation,
            )?),
            _ => None,
        };
        let stream = self.raw();
        let ev = match take_spare_fence(self.device, self.generation) {
            Some(ev) => ev.0,
            None => {
                let mut ev: sys::CUevent = std::ptr::null_mut();
                let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
                // SAFETY: the context is current; valid out-parameter.
                a.check(
                    unsafe { sys::cuEventCreate(&mut ev, flags) },
                    "cuEventCreate",
                )?;
                ev
            }
        };
        let event = Arc::new(FenceEvent {
            raw: Raw(ev),
            device: self.device,
            generation: self.generation,
        });
        // The number is read before the record: every submission numbered up to it was queued
        // before it took its number (`Lane::submit`, `note_alloc`), so before the record.
        let seq = self.seq();
        // SAFETY: live event and stream of the current context.
        a.check(unsafe { sys::cuEventRecord(ev, stream) }, "cuEventRecord")?;
        let f = Fence { seq, event };
        // Completed fences are dropped from the front; past the cap the oldest go too (a wait
        // for an early point then uses a later fence: it waits longer, never less). The fences
        // of a queue are recorded in order after the queue's work, so the completion of one
        // implies that of every earlier one: a query of the middle fence, once there are 16,
        // clears the older half at once (a query per 8 records on a queue fenced at every
        // submission, one using host memory, instead of one per record).
        if st.fences.len() >= 16 {
            let mid = st.fences.len() / 2;
            let probe = &st.fences[mid];
            // Relaxed, as every other query of the crate's: an event query in global capture
            // mode would invalidate another thread's capture (review finding). About 0.1 us
            // once per 8 records.
            // SAFETY: live event of the current context.
            if relaxed(|| driver::rc(unsafe { sys::cuEventQuery(probe.event.raw()) })) == 0 {
                st.done = st.done.max(probe.seq);
                st.fences.drain(..=mid);
            }
        }
        if st.fences.len() >= MAX_FENCES {
            st.fences.pop_front();
        }
        st.fences.push_back(f.clone());
        // Covers every submission numbered so far, so whatever another thread asked for.
        if std::mem::take(&mut st.asked) {
            self.wanted.store(false, Ordering::SeqCst);
        }
        Ok(f)
    }

    /// For the owner of a per-thread queue, at a submission: records the fence another thread
    /// asked for (see [`fence_for`](Self::fence_for)). `a`: the queue's context, current.
    #[cold]
    fn serve(&self, a: &Active) {
        let mut st = self.state.lock();
        if !st.asked || self.capturing(a) {
            return;
        }
        if let Err(e) = relaxed(|| self.record_fence(a, &mut st)) {
            // The waiter keeps asking; the error is the device's to report.
            a.dev.defer("recording a fence another thread asked for", e);
        }
    }

    /// A fence that completes after submission `seq`, recording one if none does yet.
    /// `Found::Done`: `seq` is known complete, or the context is gone, or the queue is being
    /// captured (nothing to wait for outside the graph).
    ///
    /// Another thread's per-thread stream cannot be named here (its handle names the calling
    /// thread's): a waiter that can wait (`poll`) asks the owner to record a fence before its
    /// next submission there and gets `Found::Asked` until it has; one that cannot gets an
    /// error (never: memory that blocking waits are made for is fenced at every submission).
    fn fence_for(&self, seq: u64, poll: bool) -> Result<Found> {
        {
            let st = self.state.lock();
            if st.done >= seq {
                return Ok(Found::Done);
            }
            if let Some(f) = st.fences.iter().find(|f| f.seq >= seq) {
                return Ok(Found::Fence(f.clone()));
            }
        }
        if context::in_host_fn() {
            // No CUDA call may be made here; the reclaimer asks again from its own thread.
            return Err(Error::InHostFunction {
                call: "recording a fence",
            });
        }
        if !self.addressable() {
            // No driver call: the owner records the fence (its exit, a synchronize of its
            // stream or of the device complete the work without one).
            if context::work_abandoned(self.device, self.generation) {
                // The queue's context was reset or corrupted by a sticky error: none of its
                // work runs any more, and nobody could answer (the owner's list and exit drain
                // leave dead contexts alone; a synchronize there fails). Memory of another,
                // live device that the work used is free to go (review findings: asked for
                // ever, every later Device::synchronize waited its full reclaim patience).
                self.completed(seq);
                return Ok(Found::Done);
            }
            if !poll {
                return Err(never_asked(seq));
            }
            let mut st = self.state.lock();
            if st.done >= seq {
                return Ok(Found::Done);
            }
            if let Some(f) = st.fences.iter().find(|f| f.seq >= seq) {
                return Ok(Found::Fence(f.clone()));
            }
            st.asked = true;
            self.eager.store(true, Ordering::Relaxed);
            self.wanted.store(true, Ordering::SeqCst);
            return Ok(Found::Asked);
        }
        let Some(a) = context::enter_live(self.device, self.generation)? else {
            return Ok(Found::Done);
        };
        let mut st = self.state.lock();
        if st.done >= seq {
            return Ok(Found::Done);
        }
        if let Some(f) = st.fences.iter().find(|f| f.seq >= seq) {
            return Ok(Found::Fence(f.clone()));
        }
        if self.capturing(&a) {
            return Ok(Found::Done);
        }
        relaxed(|| self.record_fence(&a, &mut st)).map(Found::Fence)
    }

    /// Marks everything up to `seq` complete and drops the fences it covers.
    fn completed(&self, seq: u64) {
        let mut st = self.state.lock();
        if seq > st.done {
            st.done = seq;
        }
        let done = st.done;
        while st.fences.front().is_some_and(|f| f.seq <= done) {
            st.fences.pop_front();
        }
    }

    /// Blocks until submission `seq` is complete, whatever thread asks.
    pub(crate) fn wait(&self, seq: u64) -> Result<()> {
        let f = match self.fence_for(seq, false)? {
            Found::Done => return Ok(()),
            Found::Fence(f) => f,
            Found::Asked => return Err(never_asked(seq)),
        };
        let Some(a) = context::enter_live(self.device, self.generation)? else {
            return Ok(());
        };
        // SAFETY: the fence's context is live and current, and kept from a reset by `a`.
        relaxed(|| {
            a.check(
                unsafe { sys::cuEventSynchronize(f.event.raw()) },
                "cuEventSynchronize",
            )
        })?;
        self.completed(f.seq);
        Ok(())
    }

    /// Whether submission `seq` is complete, without blocking. Makes sure a fence exists first
    /// when the calling thread can record one.
    fn is_done(&self, seq: u64) -> Result<bool> {
        let f = match self.fence_for(seq, true) {
            Ok(Found::Done) => return Ok(true),
            Ok(Found::Fence(f)) => f,
            Ok(Found::Asked) => return Ok(false),
            // A legacy-stream fence cannot be recorded during a capture (`record_fence`): not
            // done yet, asked again later.
            Err(e) if e.code() == crate::ErrorCode::StreamCaptureImplicit => return Ok(false),
            Err(e) => return Err(e),
        };
        let Ok(_pin) = context::pin(self.device, self.generation, "queue") else {
            return Ok(true);
        };
        // SAFETY: the event lives (held by `f`) in a context kept from a reset by `_pin`;
        // querying needs no current context.
        match driver::rc(relaxed(|| unsafe { sys::cuEventQuery(f.event.raw()) })) {
            0 => {
                self.completed(f.seq);
                Ok(true)
            }
            600 => Ok(false),
            code => Err(Error::from_driver(code, "cuEventQuery")),
        }
    }

    /// For a per-thread queue at its thread's exit: waits for the work queued on it (see
    /// `stream::PerThreadQueues`). Errors are recorded, not returned: nobody is left to get them.
    pub(crate) fn drain_at_thread_exit(&self) {
        // (Only the owner thread's destructor calls this: `thread::current` is not asked, as it
        // may be gone by now.)
        if context::in_host_fn() {
            return;
        }
        let seq = self.seq();
        if self.state.lock().done >= seq {
            return;
        }
        let a = match context::enter_live(self.device, self.generation) {
            Ok(Some(a)) => a,
            // Reset meanwhile: none of the work runs any more.
            Ok(None) => return self.completed(seq),
            // (A context that cannot be entered, e.g. after a sticky error: its work is
            // complete once it is reset, which `fence_for` then sees.)
            Err(_) => return,
        };
        // Relaxed: a thread that exits while another thread's global capture is open must not
        // invalidate it (housekeeping, as every other wait of the crate's; review finding).
        // SAFETY: the per-thread stream of the current (live) context, on its own thread.
        let r = relaxed(|| unsafe { sys::cuStreamSynchronize(self.raw()) });
        if driver::rc(r) == 0 {
            self.completed(seq);
        } else {
            let _ = a.check(r, "cuStreamSynchronize");
        }
    }

    /// The point of the work queued so far (before a synchronising call).
    pub(crate) fn mark(&self) -> u64 {
        self.seq()
    }

    /// For callers that synchronised the whole queue after taking `mark`: everything queued up
    /// to it is done. (Work other threads queued meanwhile may not be.)
    pub(crate) fn synchronized(&self, mark: u64) {
        self.completed(mark);
    }
}

// Queues and fences are shared between threads (their raw handles are `Raw`, whose `Send` and
// `Sync` say why that holds); asserted here.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Queue>();
    send_sync::<FenceEvent>();
    send_sync::<Uses>();
};

/// The uses of one piece of memory: per queue, the last submission that used it and the last
/// that wrote it (0: none).
#[derive(Debug, Default)]
pub(crate) struct Uses {
    list: Mutex<Vec<UseRec>>,
}

#[derive(Debug, Clone)]
struct UseRec {
    queue: Arc<Queue>,
    seq: u64,
    write_seq: u64,
}

impl UseRec {
    /// Whether the use's point is not known complete.
    fn pending(&self) -> bool {
        self.queue.state.lock().done < self.seq
    }
}

impl Uses {
    /// Notes a use by submission `seq` of `queue`.
    #[inline]
    fn note(&self, queue: &Arc<Queue>, seq: u64, write: bool) {
        let mut l = self.list.lock();
        let ws = if write { seq } else { 0 };
        if let Some(u) = l.iter_mut().find(|u| Arc::ptr_eq(&u.queue, queue)) {
            u.seq = seq;
            if write {
                u.write_seq = seq;
            }
            return;
        }
        l.push(UseRec {
            queue: queue.clone(),
            seq,
            write_seq: ws,
        });
    }

    /// Waits for the uses a CPU access conflicts with: the writes for a read, all for a write.
    /// Uses whose wait failed stay, so a later access fails again rather than passing.
    pub(crate) fn wait(&self, for_write: bool) -> Result<()> {
        let list: Vec<UseRec> = self.list.lock().clone();
        let mut first = Ok(());
        for u in &list {
            let seq = if for_write { u.seq } else { u.write_seq };
            if seq == 0 {
                continue;
            }
            match u.queue.wait(seq) {
                Ok(()) => {
                    let mut l = self.list.lock();
                    if let Some(i) = l.iter().position(|x| Arc::ptr_eq(&x.queue, &u.queue)) {
                        if l[i].seq <= seq {
                            l.swap_remove(i);
                        } else if l[i].write_seq <= seq {
                            l[i].write_seq = 0;
                        }
                    }
                }
                Err(e) => {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        first
    }

    /// Whether a CPU access would have to wait (for refusing it where no wait is allowed).
    pub(crate) fn pending(&self, for_write: bool) -> bool {
        // The list is copied first: a queue's state is never locked under the list's lock
        // (`Lane::submit` takes them the other way round).
        let list = self.list.lock().clone();
        list.iter().any(|u| {
            let seq = if for_write { u.seq } else { u.write_seq };
            seq > 0 && u.queue.state.lock().done < seq
        })
    }

    /// Whether every use was on `queue`.
    pub(crate) fn only_on(&mut self, queue: &Arc<Queue>) -> bool {
        // From `Drop`: exclusive, no lock needed.
        self.list
            .get_mut()
            .iter()
            .all(|u| Arc::ptr_eq(&u.queue, queue))
    }

    /// Takes the uses out for a deferred free, as points to wait for. No driver call is made
    /// here: the reclaimer records the fences it needs (a later fence waits longer, never
    /// less; each queue keeps its stream alive). With the fences recorded here, on the
    /// dropping thread, drops of a texture object and of an executable graph whose last use
    /// was queued behind a running host function took as long as the host function (20 s, on
    /// the H200 pair with driver 580); the event create and record were the only driver calls
    /// on that path (`probes/host_fn_block` asks the driver which of them blocks).
    pub(crate) fn take_points(&mut self) -> Vec<(Arc<Queue>, u64)> {
        if self.list.get_mut().is_empty() {
            // Never used (a texture made and dropped unused): nothing to take or free.
            return Vec::new();
        }
        pending_points(std::mem::take(self.list.get_mut()))
    }
}

/// The points of `list` not known complete.
fn pending_points(list: Vec<UseRec>) -> Vec<(Arc<Queue>, u64)> {
    list.into_iter()
        .filter(UseRec::pending)
        .map(|u| (u.queue, u.seq))
        .collect()
}

/// The launches of an executable graph, as points in queues: as [`Uses`] (reads only), without
/// a lock. An executable is `Send` but not `Sync`, and every method that launches it, or reads
/// or takes these points (its update, its drop), is a method of it: one thread at a time, so a
/// `RefCell` suffices (its borrows never nest: none is held across a call out). A launch then
/// costs no atomic operation here (the lock and its release were two of a launch's four atomic
/// read-modify-writes, against the null driver).
#[derive(Debug, Default)]
pub(crate) struct LocalUses {
    list: std::cell::RefCell<Vec<UseRec>>,
}

impl LocalUses {
    /// The points not known complete (the points stay noted).
    pub(crate) fn points(&self) -> Vec<(Arc<Queue>, u64)> {
        // Without copying the list: only the pending points' queues are shared.
        self.list
            .borrow()
            .iter()
            .filter(|u| u.pending())
            .map(|u| (u.queue.clone(), u.seq))
            .collect()
    }

    /// Takes the points out, for a deferred release (see [`Uses::take_points`]).
    pub(crate) fn take_points(&mut self) -> Vec<(Arc<Queue>, u64)> {
        pending_points(std::mem::take(self.list.get_mut()))
    }
}

impl<'u> UseSet<'u, 'static> for &'u LocalUses {
    #[inline]
    fn none(self) -> bool {
        false
    }

    #[inline]
    fn admit(self, _: &Active, _: &Arc<Queue>, _: &'static str) -> Result<(Vec<Keep>, bool)> {
        Ok((Vec::new(), false))
    }

    #[inline]
    fn note(self, q: &Arc<Queue>, seq: u64) {
        let mut l = self.list.borrow_mut();
        if let Some(u) = l.iter_mut().find(|u| Arc::ptr_eq(&u.queue, q)) {
            u.seq = seq;
            return;
        }
        l.push(UseRec {
            queue: q.clone(),
            seq,
            write_seq: 0,
        });
    }

    #[inline]
    fn memory(self) -> &'u [Use<'static>] {
        &[]
    }
}

/// Code loaded into the driver (a user module or library): its unload waits for the queued work
/// that runs its functions or uses its variables, noted here by the enqueue path
/// ([`Lane::submit_with_code`], [`Lane::submit_capturable_with_code`]). Functions and symbols
/// hold it; the last of them to go (or the module itself) unloads it once the points noted here
/// are done, through the reclaimer ([`defer_free`]), never waiting on the dropping thread.
pub(crate) trait LoadedCode: Send + Sync {
    /// The queued uses of the code's functions and variables.
    fn code_uses(&self) -> &CodeUses;
}

/// The queued uses of a module's or library's code (see [`LoadedCode`]): per queue, the last
/// submission that ran a function of it or copied to or from a variable of it. A module lives
/// long and may be used from many queues, each entry keeping its queue's stream alive: the
/// list is pruned of points known complete whenever it has doubled since the last time.
#[derive(Debug)]
pub(crate) struct CodeUses {
    uses: Uses,
    /// The length at which a note asks for a prune.
    prune_at: AtomicUsize,
    /// Set by a note that reached `prune_at`: the submitting thread prunes after its submission
    /// (no lock held then).
    prune: AtomicBool,
}

/// The length of a [`CodeUses`] list below which it is never pruned.
const CODE_USES_KEPT: usize = 16;

impl Default for CodeUses {
    fn default() -> CodeUses {
        CodeUses {
            uses: Uses::default(),
            prune_at: AtomicUsize::new(CODE_USES_KEPT),
            prune: AtomicBool::new(false),
        }
    }
}

impl CodeUses {
    #[inline]
    fn note(&self, queue: &Arc<Queue>, seq: u64) {
        let mut l = self.uses.list.lock();
        if let Some(u) = l.iter_mut().find(|u| Arc::ptr_eq(&u.queue, queue)) {
            u.seq = seq;
            return;
        }
        l.push(UseRec {
            queue: queue.clone(),
            seq,
            write_seq: 0,
        });
        if l.len() >= self.prune_at.load(Ordering::Relaxed) {
            self.prune.store(true, Ordering::Relaxed);
        }
    }

    /// Forgets the points known complete, if a note asked for it. Queues this thread can
    /// fence are asked (a fence is recorded where none covers the point); other threads'
    /// per-thread queues only as far as they are known complete (asking them would make every
    /// later submission of theirs fenced).
    #[cold]
    #[inline(never)]
    fn prune(&self) {
        if !self.prune.swap(false, Ordering::AcqRel) {
            return;
        }
        let list: Vec<UseRec> = self.uses.list.lock().clone();
        let done: Vec<UseRec> = list
            .into_iter()
            .filter(|u| {
                if u.queue.addressable() {
                    matches!(u.queue.is_done(u.seq), Ok(true))
                } else {
                    !u.pending()
                }
            })
            .collect();
        let len = {
            let mut l = self.uses.list.lock();
            l.retain(|u| {
                !done
                    .iter()
                    .any(|d| Arc::ptr_eq(&u.queue, &d.queue) && u.seq <= d.seq)
            });
            l.len()
        };
        self.prune_at
            .store((2 * len).max(CODE_USES_KEPT), Ordering::Relaxed);
        // (The queues forgotten are dropped here, after the list's lock: the last handle of a
        // queue destroys its stream.)
        drop(done);
    }

    /// Takes the points not known complete, for the unload (see [`Uses::take_points`]).
    pub(crate) fn take_points(&mut self) -> Vec<(Arc<Queue>, u64)> {
        self.uses.take_points()
    }
}

/// A submission's memory, and the code (a module or library) whose function it runs or whose
/// variable it copies: the code's use is noted at the same point as the memory's.
#[derive(Clone, Copy)]
struct WithCode<'u, 'a> {
    memory: &'u [Use<'a>],
    code: &'u CodeUses,
}

impl<'u, 'a: 'u> UseSet<'u, 'a> for WithCode<'u, 'a> {
    #[inline]
    fn none(self) -> bool {
        false
    }

    #[inline]
    fn admit(self, a: &Active, q: &Arc<Queue>, call: &'static str) -> Result<(Vec<Keep>, bool)> {
        self.memory.admit(a, q, call)
    }

    #[inline]
    fn note(self, q: &Arc<Queue>, seq: u64) {
        self.memory.note(q, seq);
        self.code.note(q, seq);
    }

    /// Under capture the graph keeps the code through the submission's tokens (the function
    /// or kernel handle): only the memory is admitted as a node's.
    #[inline]
    fn memory(self) -> &'u [Use<'a>] {
        self.memory
    }
}

/// What a submission uses, as the enqueue path ([`Lane::submit`]) admits and notes it: memory
/// ([`Use`]s), or an executable graph's launches ([`LocalUses`]).
trait UseSet<'u, 'a: 'u>: Copy {
    /// Nothing to note (the submission is numbered all the same on a per-thread stream).
    fn none(self) -> bool;
    /// Checks that work on `q` (of the entered context `a`) may use it; returns what must be
    /// held until the work is queued, and whether the submission must be fenced at once.
    fn admit(self, a: &Active, q: &Arc<Queue>, call: &'static str) -> Result<(Vec<Keep>, bool)>;
    /// Notes the use by submission `seq` of `q`.
    fn note(self, q: &Arc<Queue>, seq: u64);
    /// The memory a capture admits as a graph node's.
    fn memory(self) -> &'u [Use<'a>];
}

impl<'u, 'a: 'u> UseSet<'u, 'a> for &'u [Use<'a>] {
    #[inline]
    fn none(self) -> bool {
        self.is_empty()
    }

    #[inline]
    fn memory(self) -> &'u [Use<'a>] {
        self
    }

    #[inline]
    fn admit(self, a: &Active, q: &Arc<Queue>, call: &'static str) -> Result<(Vec<Keep>, bool)> {
        let mut keeps = Vec::new();
        let mut host = false;
        for u in self {
            if let Some(k) = u.alloc.admit(u, a, q, call)? {
                keeps.push(k);
            }
            // Fenced at once: memory the CPU can reach (a CPU view waits for exactly that
            // point), and memory whose drop waits on the dropping thread (IPC, external).
            host |= u.alloc.host.is_some() || u.alloc.ipc || u.alloc.external.is_some();
        }
        Ok((keeps, host))
    }

    #[inline]
    fn note(self, q: &Arc<Queue>, seq: u64) {
        for u in self {
            u.uses.note(q, seq, u.write);
        }
    }
}

/// How a submission uses one piece of memory. (Public in a private module: unnameable outside
/// the crate; the generated kernel wrappers pass it along.)
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Use<'a> {
    /// The memory, admitted (device, generation, host access, stream order) before the work.
    pub(crate) alloc: &'a crate::memory::Alloc,
    /// Where the use is noted: the memory's own list (`alloc.uses`), or, for a texture or
    /// surface object, the object's ([`Use::object`]).
    pub(crate) uses: &'a Uses,
    pub(crate) write: bool,
    /// The work uses the memory's device address (kernels, device-to-device copies), so
    /// page-locked memory must be mapped; copies to and from page-locked memory do not.
    pub(crate) device_address: bool,
    /// The work may be another device's (a peer copy's side).
    pub(crate) peer: bool,
}

impl<'a> Use<'a> {
    /// A kernel argument or device-side operand.
    #[inline]
    pub(crate) fn device(alloc: &'a crate::memory::Alloc, write: bool) -> Use<'a> {
        Use {
            alloc,
            uses: &alloc.uses,
            write,
            device_address: true,
            peer: false,
        }
    }

    /// The page-locked side of a copy.
    #[inline]
    pub(crate) fn host_copy(alloc: &'a crate::memory::Alloc, write: bool) -> Use<'a> {
        Use {
            alloc,
            uses: &alloc.uses,
            write,
            device_address: false,
            peer: false,
        }
    }

    /// A kernel's use of a texture or surface object that reads `memory`: noted in the
    /// object's own `uses` (which its destroy waits for), admitted as `memory` is. The object
    /// was made in `memory`'s context, so the memory's checks (device, generation) are the
    /// object's; the kernel's use of the memory itself is a second [`Use`], noted there.
    #[inline]
    pub(crate) fn object(uses: &'a Uses, memory: &'a crate::memory::Alloc) -> Use<'a> {
        Use {
            alloc: memory,
            uses,
            write: false,
            device_address: true,
            peer: false,
        }
    }

    /// Whether this is a texture or surface object's use ([`Use::object`]), noted on the
    /// object rather than on the memory.
    #[inline]
    pub(crate) fn is_object(&self) -> bool {
        !std::ptr::eq(self.uses, &self.alloc.uses)
    }

    /// A side of a copy that may be another device's memory.
    #[inline]
    pub(crate) fn peer(alloc: &'a crate::memory::Alloc, write: bool) -> Use<'a> {
        Use {
            alloc,
            uses: &alloc.uses,
            write,
            device_address: true,
            peer: true,
        }
    }
}

/// Where a submission goes: an entered context and one of its queues.
pub(crate) struct Lane<'q> {
    pub(crate) a: Active,
    queue: QueueRef<'q>,
}

enum QueueRef<'q> {
    Borrowed(&'q Arc<Queue>),
    Owned(Arc<Queue>),
}

impl<'q> Lane<'q> {
    pub(crate) fn new(a: Active, queue: &'q Arc<Queue>) -> Lane<'q> {
        Lane {
            a,
            queue: QueueRef::Borrowed(queue),
        }
    }

    pub(crate) fn new_owned(a: Active, queue: Arc<Queue>) -> Lane<'static> {
        Lane {
            a,
            queue: QueueRef::Owned(queue),
        }
    }

    #[inline]
    pub(crate) fn queue(&self) -> &Arc<Queue> {
        match &self.queue {
            QueueRef::Borrowed(q) => q,
            QueueRef::Owned(q) => q,
        }
    }

    /// The raw stream handle of the queue.
    #[inline]
    pub(crate) fn raw(&self) -> sys::CUstream {
        self.queue().raw()
    }

    /// Queues work that uses `uses`: checks each may be used here (device, context, mapping,
    /// writability; pins the contexts of other devices' memory until the work is queued), orders
    /// the queue after stream-ordered allocations made elsewhere, runs `op` (the driver call),
    /// then notes every use at this submission's point in the queue. The one place where device
    /// work on memory is queued.
    ///
    /// On a stream being captured by the crate, the work is refused
    /// ([`Error::NotCapturable`], and the capture's end fails): use
    /// [`submit_capturable`](Self::submit_capturable) for work audited for replay.
    #[inline]
    pub(crate) fn submit<R>(
        &self,
        call: &'static str,
        uses: &[Use<'_>],
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        self.submit_in(call, uses, None, &mut None, op)
    }

    /// As [`submit`](Self::submit), for work that may be recorded into a graph as it is: on a
    /// stream being captured, the memory in `uses` is admitted as a graph node's (device memory
    /// of the stream's device; a stream-ordered allocation is waited for), `keep` gives what
    /// else the work refers to (a function, a host closure; called only under capture, before
    /// `op`), and all of it goes into the capture's tokens instead of uses noted on the queue.
    #[inline]
    pub(crate) fn submit_capturable<R>(
        &self,
        call: &'static str,
        uses: &[Use<'_>],
        keep: &mut dyn FnMut() -> Result<Tokens>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        self.submit_in(call, uses, Some(keep), &mut None, op)
    }

    /// As [`submit`](Self::submit), for work on a variable of user code (a module or library,
    /// see [`LoadedCode`]): the point is noted on `code` too, and its unload waits for it.
    #[inline]
    pub(crate) fn submit_with_code<R>(
        &self,
        call: &'static str,
        uses: &[Use<'_>],
        code: Option<&CodeUses>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        let Some(code) = code else {
            return self.submit_in(call, uses, None, &mut None, op);
        };
        let r = self.submit_in(call, WithCode { memory: uses, code }, None, &mut None, op);
        self.after_code_use(code);
        r
    }

    /// As [`submit_capturable`](Self::submit_capturable), for a launch of user code (a module
    /// or library, see [`LoadedCode`]): the point is noted on `code` too, and its unload waits
    /// for it. (Under capture `keep` holds the code for the graph.)
    #[inline]
    pub(crate) fn submit_capturable_with_code<R>(
        &self,
        call: &'static str,
        uses: &[Use<'_>],
        code: Option<&CodeUses>,
        keep: &mut dyn FnMut() -> Result<Tokens>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        let Some(code) = code else {
            return self.submit_in(call, uses, Some(keep), &mut None, op);
        };
        let memory = WithCode { memory: uses, code };
        let r = self.submit_in(call, memory, Some(keep), &mut None, op);
        self.after_code_use(code);
        r
    }

    /// Prunes `code`'s list when the submission's note asked for it (see [`CodeUses`]).
    #[inline]
    fn after_code_use(&self, code: &CodeUses) {
        // (Not inside a host function, where no CUDA call may be made: a later submission
        // prunes.)
        if code.prune.load(Ordering::Relaxed) && !context::in_host_fn() {
            code.prune();
            // Asking other devices' queues may have made their contexts current.
            let _ = self.a.rebind();
        }
    }

    /// As [`submit_capturable`](Self::submit_capturable), also returning the id of the capture
    /// the work went into (`None`: queued).
    pub(crate) fn submit_capturable_id<R>(
        &self,
        call: &'static str,
        uses: &[Use<'_>],
        keep: &mut dyn FnMut() -> Result<Tokens>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> (Result<R>, Option<u64>) {
        let mut id = None;
        let r = self.submit_in(call, uses, Some(keep), &mut id, op);
        (r, id)
    }

    /// Queues an executable graph's launch or upload (see [`submit`](Self::submit)), noted in
    /// the executable's own list of launches: the executable, checked against the stream's
    /// device and context by the caller, is the only thing the launch is admitted for (what
    /// its nodes use is kept by its references, released after the launches noted here).
    /// Refused on a stream being captured by the crate, as `submit` is.
    #[inline]
    pub(crate) fn submit_launch<R>(
        &self,
        call: &'static str,
        launches: &LocalUses,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        self.submit_in(call, launches, None, &mut None, op)
    }

    #[inline]
    fn submit_in<'u, 'a: 'u, R>(
        &self,
        call: &'static str,
        uses: impl UseSet<'u, 'a>,
        keep: Option<&mut dyn FnMut() -> Result<Tokens>>,
        // Set to the id of the capture the work went into. (An out-parameter rather than a
        // returned pair: the 72-byte `Result` is then not copied once more on the way out.)
        captured: &mut Option<u64>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        let q = self.queue();
        // Held until the work is queued (or captured): a capture cannot begin or end meanwhile.
        let mut entry = q.enter();
        if entry.watched() {
            match crate::graph::capture::session_of(&self.a, q) {
                Err(e) => return Err(e),
                Ok(Some(s)) => {
                    *captured = Some(s.id);
                    return self.submit_captured(&s, call, uses.memory(), keep, op);
                }
                Ok(None) => {}
            }
        }
        self.submit_queued(call, uses, &mut entry, op)
    }

    /// A submission on a stream being captured by the crate (see `submit_capturable`).
    #[cold]
    fn submit_captured<R>(
        &self,
        s: &crate::graph::capture::Session,
        call: &'static str,
        uses: &[Use<'_>],
        keep: Option<&mut dyn FnMut() -> Result<Tokens>>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        let r = (|| {
            let Some(keep) = keep else {
                return Err(Error::NotCapturable {
                    call,
                    reason: crate::graph::capture::refusal(call),
                });
            };
            if uses.iter().any(Use::is_object) {
                // The graph would keep the memory behind a texture or surface object, not the
                // object: its handle (and an array only it kept) could be destroyed while the
                // graph can still replay. Refused here for every launch path, the crate's own
                // kernel wrappers included (review finding: `EmbeddedKernel::launch` captured
                // them).
                return Err(Error::NotCapturable {
                    call,
                    reason: "texture and surface objects cannot be used in captured kernels yet",
                });
            }
            let (device, generation) = self.a.id();
            let mut tokens: Tokens = Vec::with_capacity(uses.len() + 1);
            for u in uses {
                let t = crate::graph::admit_memory(u.alloc, device, generation, call)?;
                tokens.push(Box::new(t));
            }
            // Admission may have entered another context (waiting for an allocation).
            self.a.rebind()?;
            tokens.extend(keep()?);
            let r = {
                // Capturing into an existing graph: no other driver call on it meanwhile.
                let _serial = s.graph_lock();
                op(&self.a, self.raw())
            };
            // Kept even when `op` failed: part of the work may be in the graph.
            s.keep(tokens);
            r
        })();
        if let Err(e) = &r {
            s.poison(call, e);
        }
        r
    }

    #[inline]
    fn submit_queued<'u, 'a: 'u, R>(
        &self,
        call: &'static str,
        uses: impl UseSet<'u, 'a>,
        entry: &mut Entry<'_>,
        op: impl FnOnce(&Active, sys::CUstream) -> Result<R>,
    ) -> Result<R> {
        let q = self.queue();
        if q.kind == QueueKind::PerThread && q.wanted.load(Ordering::Relaxed) {
            // Another thread waits for a use queued here: its fence goes in before this
            // submission's work, right behind what was asked for.
            q.serve(&self.a);
        }
        if uses.none() {
            let r = op(&self.a, q.raw());
            if q.kind == QueueKind::PerThread {
                // Numbered all the same: the thread's exit waits for every submission up to
                // its queue's number (`drain_at_thread_exit`), graph launches and kernels with
                // scalar arguments only included (review finding). No fence: no use refers to
                // this point.
                q.next_seq();
            }
            return r;
        }
        let (keeps, mut host) = uses.admit(&self.a, q, call)?;
        host |= q.eager.load(Ordering::Relaxed);
        let r = op(&self.a, q.raw());
        // The point is taken after the work is queued: a fence labelled with a number is always
        // recorded after every submission numbered up to it (see `record_fence`). Noted even
        // when `op` failed: part of the work may be queued. No lock is held while `op` runs, so
        // a submission that blocks (a synchronous copy) never holds up other threads.
        let fenced = if host {
            // Numbered, noted and fenced under the queue's lock: a CPU view that sees the use
            // finds its fence (it does not record one of its own meanwhile).
            let mut st = q.state.lock();
            let seq = q.next_seq();
            uses.note(q, seq);
            if q.capturing(&self.a) {
                Ok(())
            } else {
                q.record_fence(&self.a, &mut st).map(drop)
            }
        } else {
            // No lock (as `note_alloc`): the number is taken after the work is queued, so any
            // fence that reads it (under the lock) is recorded after the work; a waiter that
            // sees the use finds the number already taken. (The lock and its release were two
            // of the eight atomic read-modify-writes of a 4-argument launch: measured against
            // the null driver, tenth session.) The entry leaves the queue in the same
            // operation: a capture's begin that goes ahead then reads this number in its fence,
            // and the uses noted after it are covered by that fence. (On a per-thread stream
            // only its own thread can begin a capture, and it is here.)
            let seq = entry.number(q);
            uses.note(q, seq);
            Ok(())
        };
        drop(keeps);
        // (Not `r.and_then(..)`: that copied the 72-byte `Result` once more.)
        if let Err(e) = fenced {
            if r.is_ok() {
                return Err(e);
            }
        }
        r
    }

    /// The point of the work queued so far on this lane's queue (see [`Queue::mark`]).
    pub(crate) fn mark(&self) -> u64 {
        self.queue().mark()
    }

    /// After a synchronising call on this queue begun after `mark` was taken.
    pub(crate) fn synchronized(&self, mark: u64) {
        self.queue().synchronized(mark);
    }
}

/// A fence of submission `seq` of `queue` for ordering other queues after it: `Ok(None)` when it
/// is known complete.
pub(crate) fn order_fence(queue: &Queue, seq: u64) -> Result<Option<Arc<FenceEvent>>> {
    match queue.fence_for(seq, false)? {
        Found::Done => Ok(None),
        Found::Asked => Err(never_asked(seq)),
        Found::Fence(f) => {
            let Ok(_pin) = context::pin(queue.device, queue.generation, "queue") else {
                return Ok(None);
            };
            // SAFETY: the event is held by `f`, its context pinned.
            if driver::rc(relaxed(|| unsafe { sys::cuEventQuery(f.event.raw()) })) == 0 {
                queue.completed(f.seq);
                return Ok(None);
            }
            Ok(Some(f.event))
        }
    }
}

/// A blocking wait for a use of another thread's per-thread stream without a fence (never: the
/// memory blocking waits are made for is fenced at every submission).
#[cold]
fn never_asked(seq: u64) -> Error {
    Error::InvalidValue {
        what: "a wait for another thread's per-thread stream",
        value: format!("submission {seq}"),
        reason: "no fence was recorded for it (internal error)",
    }
}

/// The queues made so far (weakly held) and the length at which the dead ones are dropped.
type Registry = Mutex<(Vec<Weak<Queue>>, usize)>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new((Vec::new(), 64)))
}

/// Whether no queue of the crate in context (`device`, `generation`) has work left to run (see
/// [`Queue::idle`]): the condition for a free that waits for the whole device to return at once.
pub(crate) fn device_idle(device: i32, generation: u64) -> bool {
    let Ok(Some(a)) = context::enter_live(device, generation) else {
        // The context is gone (the free has nothing to wait for) or cannot be entered now
        // (the free reports why).
        return true;
    };
    let queues: Vec<Arc<Queue>> = registry()
        .lock()
        .0
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|q| q.device == device && q.generation == generation)
        .collect();
    // (Dropped after the registry's lock: the last handle of a queue destroys its stream.)
    queues.iter().all(|q| q.idle(&a))
}

/// The point of every queue of the entered context `a` (before a `cuCtxSynchronize`).
pub(crate) fn marks(a: &Active) -> Vec<(Arc<Queue>, u64)> {
    let (device, generation) = a.id();
    registry()
        .lock()
        .0
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|q| q.device == device && q.generation == generation)
        .map(|q| {
            let m = q.mark();
            (q, m)
        })
        .collect()
}

/// After a `cuCtxSynchronize` begun after `marks` were taken: each queue is complete up to its
/// mark. (Dropped after the registry's lock: the last handle of a queue destroys its stream.)
pub(crate) fn all_synchronized(marks: Vec<(Arc<Queue>, u64)>) {
    for (q, m) in &marks {
        q.synchronized(*m);
    }
}

/// The point in `queue` of a stream-ordered allocation just queued there (other queues are
/// ordered after it; the free follows it on the same queue).
pub(crate) fn note_alloc(entry: &mut Entry<'_>, queue: &Queue) -> u64 {
    // No lock: the number is taken after the allocation is queued, as in `Lane::submit`; a fast
    // entry leaves the queue in the same atomic step (one read-modify-write fewer per
    // `cudaMallocAsync`).
    entry.number(queue)
}

// ---------------------------------------------------------------------------------------------
// The reclaimer.

/// Frees memory in its live context (`Some`), or after a reset (`None`: only memory the crate
/// owns on the host is left to release).
type FreeFn = Box<dyn FnOnce(Option<&Active>) -> Result<()> + Send>;

/// A free waiting for the uses of its memory.
struct Grave {
    device: i32,
    generation: u64,
    waits: Vec<(Arc<Queue>, u64)>,
    free: FreeFn,
    during: &'static str,
    /// A failed wait was recorded as the device's deferred error (once, not at every poll).
    reported: bool,
    /// The free waits for the whole device (`cuArrayDestroy`, `cuMemFreeHost`): it is made only
    /// once the device's queues are idle as well (see [`defer_free_blocking`]).
    whole_device: bool,
}

struct Yard {
    graves: Mutex<Vec<Grave>>,
    wake: Condvar,
    /// Graves taken out by the reclaimer and not yet freed.
    busy: AtomicUsize,
    idle: Condvar,
    idle_lock: Mutex<()>,
}

/// The yards of deferred frees, each with its reclaimer thread. Yard 0 takes frees that return
/// at once (`cuMemFreeAsync`, `cuTexObjectDestroy`), freed by its reclaimer thread. Yard 1 takes
/// the frees that wait for the whole device, as `cuMemFree` does (`cuMipmappedArrayDestroy`,
/// managed `cuMemFree`, and page-locked memory and arrays when their caches are off): it has no
/// thread, and its frees are made by the crate's synchronising calls ([`reclaim`]) while the
/// device is idle, never in the background (see [`ready`]).
fn yards() -> &'static [Yard; 2] {
    static YARDS: OnceLock<[Yard; 2]> = OnceLock::new();
    static STARTED: OnceLock<()> = OnceLock::new();
    let y = YARDS.get_or_init(|| {
        [0, 1].map(|_| Yard {
            graves: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            busy: AtomicUsize::new(0),
            idle: Condvar::new(),
            idle_lock: Mutex::new(()),
        })
    });
    STARTED.get_or_init(|| {
        // Yard 0 only (see above).
        for i in 0..1 {
            // Without the thread, frees wait for `reclaim` (a synchronising call) instead.
            let _ = std::thread::Builder::new()
                .name(format!("cuda-runtime-reclaimer-{i}"))
                .spawn(move || reclaimer(&yards()[i]));
        }
    });
    y
}

/// Frees memory once the uses in `waits` are done, in the background (see the module docs).
pub(crate) fn defer_free(
    device: i32,
    generation: u64,
    waits: Vec<(Arc<Queue>, u64)>,
    during: &'static str,
    free: impl FnOnce(Option<&Active>) -> Result<()> + Send + 'static,
) {
    bury_later(0, device, generation, waits, during, Box::new(free));
}

/// As [`defer_free`], for a free that waits for the whole device (the destruction of a
/// mipmapped array, the free of managed memory): while such a call waits for the device it
/// holds a lock of the driver that every thread's `cuArrayCreate`, `cuEventCreate`,
/// `cuTexObjectCreate` and copies need (on driver 580, a texture created beside an array
/// destroy stalled for as long as an unrelated stream's host function ran), so it is made only
/// by a synchronising call of the crate ([`Device::synchronize`](crate::Device::synchronize),
/// [`Device::release_cached_memory`](crate::Device::release_cached_memory), an allocation
/// that ran out of memory) once its own uses are done and the device is idle, when it returns
/// at once; a reset releases it with its context.
pub(crate) fn defer_free_blocking(
    device: i32,
    generation: u64,
    waits: Vec<(Arc<Queue>, u64)>,
    during: &'static str,
    free: impl FnOnce(Option<&Active>) -> Result<()> + Send + 'static,
) {
    bury_later(1, device, generation, waits, during, Box::new(free));
}

fn bury_later(
    yard: usize,
    device: i32,
    generation: u64,
    waits: Vec<(Arc<Queue>, u64)>,
    during: &'static str,
    free: FreeFn,
) {
    // Uses on the dropping thread's own per-thread stream get their fence now (one event
    // record per such drop, none per launch): only this thread can record it, and the
    // reclaimer would otherwise have to ask it and wait for its next submission there (its
    // synchronize, its exit), which a thread that drops a buffer and then waits for another
    // thread may never make (review finding: the other thread's allocation failed for want of
    // that memory). Best effort: inside a host function, or while the stream is captured, the
    // reclaimer asks later.
    for (q, seq) in &waits {
        if q.is_per_thread() && q.addressable() && !context::in_host_fn() {
            let _ = q.fence_for(*seq, true);
        }
    }
    let y = &yards()[yard];
    y.graves.lock().push(Grave {
        device,
        generation,
        waits,
        free,
        during,
        reported: false,
        whole_device: yard == 1,
    });
    y.wake.notify_one();
}

/// How many deferred frees have been made (queued to the driver) so far, by any thread: a
/// synchronising call that saw it change knows that frees were queued after its wait.
static BURIED: AtomicU64 = AtomicU64::new(0);

/// The number of deferred frees made so far (see [`BURIED`]).
pub(crate) fn buried() -> u64 {
    BURIED.load(Ordering::Acquire)
}

fn bury(g: Grave) {
    let Grave {
        device,
        generation,
        free,
        during,
        ..
    } = g;
    let dev = context::device_state(device).ok();
    let r = relaxed(|| match context::enter_live(device, generation) {
        Ok(Some(a)) => free(Some(&a)),
        Ok(None) => free(None),
        Err(e) => Err(e),
    });
    BURIED.fetch_add(1, Ordering::AcqRel);
    if let (Err(e), Some(d)) = (r, dev) {
        d.defer(during, e);
    }
}

/// Whether every wait of `g` is done; a failed query leaves it waiting (leaked rather than freed
/// under work that may still run), recorded once as the device's deferred error. A free that
/// waits for the whole device is ready only in a synchronising call of the crate (`explicit`)
/// and while the device is idle: made by the background reclaimer, work another thread queues
/// between the check and the call would make it wait, holding a lock of the driver that every
/// other thread's calls need.
fn ready(g: &mut Grave, explicit: bool) -> bool {
    let mut keep = Vec::new();
    for (q, seq) in g.waits.drain(..) {
        match q.is_done(seq) {
            Ok(true) => {}
            Ok(false) => keep.push((q, seq)),
            Err(e) => {
                if e.is_sticky() {
                    // The context is lost: no work runs any more.
                    continue;
                }
                if !g.reported {
                    g.reported = true;
                    if let Ok(d) = context::device_state(g.device) {
                        d.defer(g.during, e);
                    }
                }
                keep.push((q, seq));
            }
        }
    }
    g.waits = keep;
    g.waits.is_empty() && (!g.whole_device || explicit && device_idle(g.device, g.generation))
}

fn reclaimer(y: &Yard) {
    // The reclaimer's queries and frees never invalidate a user's capture in global mode (made
    // from any thread then, they would): its capture mode stays relaxed.
    {
        let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED as u32;
        let p = (&mut mode as *mut u32).cast::<sys::CUstreamCaptureMode>();
        // SAFETY: a valid in/out parameter of the enum's size; the call only sets this
        // thread's mode. (Never swapped back: the thread runs for the process's life.)
        let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode(p) };
    }
    let mut pause = Duration::from_micros(50);
    loop {
        let batch: Vec<Grave> = {
            let mut g = y.graves.lock();
            while g.is_empty() {
                y.wake.wait(&mut g);
            }
            y.busy.fetch_add(g.len(), Ordering::AcqRel);
            std::mem::take(&mut *g)
        };
        let n = batch.len();
        let mut waiting = Vec::new();
        for mut g in batch {
            if ready(&mut g, false) {
                bury(g);
            } else {
                waiting.push(g);
            }
        }
        let progressed = waiting.len() < n;
        if !waiting.is_empty() {
            y.graves.lock().extend(waiting);
        }
        y.busy.fetch_sub(n, Ordering::AcqRel);
        {
            let _l = y.idle_lock.lock();
            y.idle.notify_all();
        }
        if progressed {
            pause = Duration::from_micros(50);
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
}

/// Frees what is ready now on the calling thread (after a synchronising call), then waits up to
/// `patience` for the reclaimers to free what they hold of `device`. Returns whether anything of
/// `device` is still waiting.
pub(crate) fn reclaim(device: i32, patience: Duration) -> bool {
    if context::in_host_fn() {
        return true;
    }
    for y in yards() {
        let mine: Vec<Grave> = {
            let mut g = y.graves.lock();
            let (mine, rest): (Vec<Grave>, Vec<Grave>) = std::mem::take(&mut *g)
                .into_iter()
                .partition(|x| x.device == device);
            *g = rest;
            y.busy.fetch_add(mine.len(), Ordering::AcqRel);
            mine
        };
        let n = mine.len();
        let mut waiting = Vec::new();
        for mut g in mine {
            if ready(&mut g, true) {
                bury(g);
            } else {
                waiting.push(g);
            }
        }
        if !waiting.is_empty() {
            y.graves.lock().extend(waiting);
        }
        y.busy.fetch_sub(n, Ordering::AcqRel);
    }
    let end = Instant::now() + patience;
    loop {
        // (Frees that wait for the whole device are not waited for here: they wait for the
        // device to be idle, which other threads' work may postpone past any patience.)
        let y0 = &yards()[0];
        // Under the graves' lock: the reclaimer counts graves it takes out as busy under it,
        // so a grave is always seen, in the yard or counted (review finding).
        let pending = {
            let g = y0.graves.lock();
            y0.busy.load(Ordering::Acquire) > 0 || g.iter().any(|g| g.device == device)
        };
        if !pending {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        for y in yards() {
            y.wake.notify_one();
        }
        let y = &yards()[0];
        let mut l = y.idle_lock.lock();
        y.idle
            .wait_for(&mut l, (end - now).min(Duration::from_millis(1)));
    }
}

/// The contexts of the per-thread queues that pending frees of `device`'s memory wait for (work
/// only the queues' owner threads can fence).
fn asked_contexts(device: i32) -> Vec<(i32, u64)> {
    // The queues are copied out first: a queue's state is never locked under a yard's lock.
    let mut waits: Vec<(Arc<Queue>, u64)> = Vec::new();
    for y in yards() {
        for g in y.graves.lock().iter().filter(|g| g.device == device) {
            waits.extend(
                g.waits
                    .iter()
                    .filter(|(q, _)| q.kind == QueueKind::PerThread)
                    .cloned(),
            );
        }
    }
    let mut ids = Vec::new();
    for (q, seq) in &waits {
        let id = (q.device, q.generation);
        if q.state.lock().done < *seq && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// Completes the per-thread work that pending frees of `device`'s memory wait for, as
/// `Device::synchronize` does (each queue of the context complete up to its point before a
/// `cuCtxSynchronize`, in relaxed capture mode so that no user's capture is invalidated), on a
/// thread of its own; waits for it at most `patience` (the work may wait for this thread). One
/// such thread at a time.
fn settle_asked(device: i32, patience: Duration) {
    static SETTLING: AtomicBool = AtomicBool::new(false);
    // Synchronizing a context while any of its streams is capturing is invalid and would
    // invalidate that capture (CUDA Programming Guide, "Prohibited and Unhandled Operations";
    // third review): no settle while a capture of the crate is open.
    if !no_capture() {
        return;
    }
    let ids = asked_contexts(device);
    if ids.is_empty() || SETTLING.swap(true, Ordering::AcqRel) {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("cuda-runtime-settle".into())
        .spawn(move || {
            // Cleared however the thread ends.
            struct Done;
            impl Drop for Done {
                fn drop(&mut self) {
                    SETTLING.store(false, Ordering::Release);
                }
            }
            let _done = Done;
            for (d, g) in ids {
                // Never behind a reset under way (which abandons the work anyway): the thread
                // that waits for this one may hold the entry the reset waits for.
                if let Ok(Some(a)) = context::try_enter_live(d, g) {
                    let marks = marks(&a);
                    // Counted, then checked again right before the call: a capture begun on
                    // another thread since the check above would be invalidated by it; one that
                    // begins from now on waits for the synchronize (`wait_for_settle`).
                    struct Syncing;
                    impl Drop for Syncing {
                        fn drop(&mut self) {
                            SETTLE_SYNCING.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    let since = settle_epoch().elapsed().as_nanos() as u64;
                    SETTLE_SINCE.store(since, Ordering::SeqCst);
                    SETTLE_SYNCING.fetch_add(1, Ordering::SeqCst);
                    let syncing = Syncing;
                    if !no_capture() {
                        continue;
                    }
                    // SAFETY: the context is current (entered above).
                    let r = relaxed(|| unsafe { sys::cuCtxSynchronize() });
                    drop(syncing);
                    if driver::rc(r) == 0 {
                        all_synchronized(marks);
                    }
                }
            }
            drop(_done);
            let _ = tx.send(());
        });
    match spawned {
        Ok(_) => {
            let _ = rx.recv_timeout(patience);
        }
        Err(_) => SETTLING.store(false, Ordering::Release),
    }
}

/// Waits for the frees queued in the crate's stream for frees of the entered context `a` (the
/// stream holds nothing but frees: never captured, waited for in relaxed mode so that a user's
/// global capture survives it).
pub(crate) fn wait_free_stream(a: &Active) -> Result<()> {
    settle_free_stream(a, true)
}

/// As [`wait_free_stream`] without blocking (`cuStreamQuery`): counts the frees queued so far as
/// waited for when the stream has finished them. For `memory_info`, which must never wait for
/// the device (if the driver's release of that memory waited for the whole device, as
/// `cuMemFree` does, a wait there could hang behind a stalled stream; review finding).
pub(crate) fn poll_free_stream(a: &Active) -> Result<()> {
    settle_free_stream(a, false)
}

/// Waits for (`block`) or queries the crate's stream for frees; once it has run them, the frees
/// counted before count as waited for (see [`frees_unwaited`]).
fn settle_free_stream(a: &Active, block: bool) -> Result<()> {
    let s = a.free_stream()?;
    let counts = free_counts(a.dev.ordinal);
    let queued = counts.map(|c| c.0.load(Ordering::Acquire));
    let finished = if block {
        // SAFETY: the crate's own stream of the current context.
        relaxed(|| {
            a.check(
                unsafe { sys::cuStreamSynchronize(s) },
                "cuStreamSynchronize",
            )
        })?;
        true
    } else {
        // SAFETY: as above; a query queues nothing.
        relaxed(|| driver::rc(unsafe { sys::cuStreamQuery(s) })) == 0
    };
    if let (true, Some(c), Some(q)) = (finished, counts, queued) {
        c.1.fetch_max(q, Ordering::AcqRel);
    }
    Ok(())
}

/// Per device (by ordinal, the first 64): the frees queued in the crate's stream for frees so
/// far, and how many of them the last wait for that stream covered.
fn free_counts(device: i32) -> Option<&'static (AtomicU64, AtomicU64)> {
    static COUNTS: [(AtomicU64, AtomicU64); 64] =
        [const { (AtomicU64::new(0), AtomicU64::new(0)) }; 64];
    usize::try_from(device).ok().and_then(|d| COUNTS.get(d))
}

/// Notes a free queued in `device`'s stream for frees (see [`frees_unwaited`]).
pub(crate) fn note_free_queued(device: i32) {
    if let Some(c) = free_counts(device) {
        c.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// Whether frees were queued in `device`'s stream for frees since the last wait for it (always
/// true past the 64th device). Memory of `cuMemAlloc` freed with `cuMemFreeAsync` was seen to
/// stay counted as used by `cuMemGetInfo` until that stream was waited for, after a
/// `cuCtxSynchronize` too (the stress test's missing 6 to 106 MiB, H200, driver 580: frees made
/// on the dropping thread, which `device::synchronize` did not wait for; eighth session's
/// review).
pub(crate) fn frees_unwaited(device: i32) -> bool {
    free_counts(device).is_none_or(|c| c.0.load(Ordering::Acquire) != c.1.load(Ordering::Acquire))
}

/// Runs an allocation in the entered context `a`, and when it fails for lack of memory, lets
/// deferred frees of the device finish (up to two seconds) and tries once more.
///
/// Inline: the first try is the allocation call itself, with nothing around it (the retry is
/// out of line), so the driver's result is checked in registers, not moved through memory.
#[inline]
pub(crate) fn alloc_retry<T>(a: &Active, mut f: impl FnMut() -> Result<T>) -> Result<T> {
    match f() {
        Err(e) if e.code() == OOM => alloc_retry_slow(a, f),
        r => r,
    }
}

const OOM: crate::ErrorCode = crate::ErrorCode::MemoryAllocation;

/// As [`alloc_retry`], for an allocation that is one driver call `f` named by `call` (asked
/// only on failure): its result is checked as [`Active::check`] does. Inline, with everything
/// past a successful first try out of line: the common case compares the driver's result in a
/// register and builds no `Result` in memory (measured on `cudaMallocAsync`).
#[inline]
pub(crate) fn alloc_retry_rc(
    a: &Active,
    call: impl Fn() -> &'static str,
    mut f: impl FnMut() -> sys::CUresult,
) -> Result<()> {
    let r = f();
    if driver::rc(r) == 0 {
        return Ok(());
    }
    alloc_retry_failed(a, call, r, f)
}

/// [`alloc_retry_rc`] once the first try failed (`r`): the error, or the retry after an
/// out-of-memory failure, exactly as [`alloc_retry`] with a closure that checks each try.
#[cold]
#[inline(never)]
fn alloc_retry_failed(
    a: &Active,
    call: impl Fn() -> &'static str,
    r: sys::CUresult,
    mut f: impl FnMut() -> sys::CUresult,
) -> Result<()> {
    match a.check(r, call()) {
        Err(e) if e.code() == OOM => alloc_retry_slow(a, || a.check(f(), call())),
        r => r,
    }
}

/// [`alloc_retry`] once the first try failed for lack of memory.
#[cold]
#[inline(never)]
fn alloc_retry_slow<T>(a: &Active, mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let device = a.dev.ordinal;
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let pending = reclaim(device, Duration::from_millis(20));
        a.rebind()?;
        // Cached memory goes back to the driver, with what the reclaim just put in the caches.
        crate::cache::release_if_any(a);
        let _ = wait_free_stream(a);
        match f() {
            // (Not while a reset of the device waits for this thread's entry.)
            Err(e) if e.code() == OOM && pending && Instant::now() < end && !a.reset_waiting() => {
                // Frees still pending: those that wait for work on other threads' per-thread
                // streams wait for their owners' answers, which may never come while this
                // thread waits (an owner may be waiting for it): that work is completed as
                // `Device::synchronize` would, on a thread of its own, waited for within what
                // is left of the patience (review finding: the allocation failed after 2 s
                // where libcudart's `cudaFree` would have returned the memory). Then the frees
                // are waited for again.
                settle_asked(device, end.saturating_duration_since(Instant::now()));
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frees_queued_in_the_free_stream_are_unwaited_until_a_wait_covers_them() {
        // A device number no real device has (61), and numbers past the table.
        let d = 61;
        let c = free_counts(d).unwrap();
        let waited = c.0.load(Ordering::Acquire);
        c.1.fetch_max(waited, Ordering::AcqRel);
        assert!(!frees_unwaited(d));
        note_free_queued(d);
        assert!(frees_unwaited(d));
        // What a wait does after its cuStreamSynchronize: covers the frees counted before it.
        c.1.fetch_max(c.0.load(Ordering::Acquire), Ordering::AcqRel);
        assert!(!frees_unwaited(d));
        assert!(frees_unwaited(64) && frees_unwaited(-1));
    }

    #[test]
    fn spare_fences_are_taken_only_from_their_device_and_live_generation() {
        // Device numbers no real device has; the handles are never given to a driver.
        let h = |n: usize| Raw(n as *mut sys::CUevent_st);
        SPARE_FENCES.lock().extend([
            (9001, 1, h(0x11)),
            (9001, 2, h(0x12)),
            (9002, 2, h(0x22)),
            (9001, 1, h(0x13)),
        ]);
        // The last spare of the device is of an earlier context: it and the other one of that
        // context are dropped, never handed out; the live one is.
        assert_eq!(take_spare_fence(9001, 2), Some(h(0x12)));
        assert_eq!(take_spare_fence(9001, 2), None);
        assert!(!SPARE_FENCES.lock().iter().any(|&(d, _, _)| d == 9001));
        // Another device's spare was left alone; asked for in a later context, it is dropped.
        assert!(SPARE_FENCES.lock().contains(&(9002, 2, h(0x22))));
        assert_eq!(take_spare_fence(9002, 3), None);
        assert!(!SPARE_FENCES.lock().iter().any(|&(d, _, _)| d == 9002));
        assert_eq!(take_spare_fence(9003, 1), None);
    }

    fn queue(kind: QueueKind) -> Arc<Queue> {
        Arc::new(Queue::new(std::ptr::null_mut(), 0, 1, kind))
    }

    /// Submissions numbered as `Lane::submit` numbers them, without a driver.
    fn submit(q: &Arc<Queue>, uses: &[(&Uses, bool)]) -> u64 {
        let _st = q.state.lock();
        let seq = q.next_seq();
        for (u, write) in uses {
            u.note(q, seq, *write);
        }
        seq
    }

    #[test]
    fn code_uses_are_pruned_of_complete_points_when_the_list_doubles() {
        let code = CodeUses::default();
        // Queues of a device number no real device has: a point not known complete cannot be
        // asked about (no driver), so it stays.
        let mine: Vec<Arc<Queue>> = (0..CODE_USES_KEPT - 2)
            .map(|_| Arc::new(Queue::new(std::ptr::null_mut(), 9101, 1, QueueKind::Owned)))
            .collect();
        // Two per-thread queues of another thread: never asked, only read.
        let theirs: Vec<Arc<Queue>> = std::thread::spawn(|| {
            (0..2)
                .map(|_| {
                    Arc::new(Queue::new(
                        std::ptr::null_mut(),
                        9101,
                        1,
                        QueueKind::PerThread,
                    ))
                })
                .collect()
        })
        .join()
        .unwrap();
        let mut points = Vec::new();
        for q in mine.iter().chain(&theirs) {
            let seq = q.next_seq();
            code.note(q, seq);
            points.push((q.clone(), seq));
        }
        assert!(
            code.prune.load(Ordering::Relaxed),
            "the 16th queue asks for a prune"
        );
        // A later point of a queue already noted replaces its entry.
        let again = mine[0].next_seq();
        code.note(&mine[0], again);
        points[0].1 = again;
        assert_eq!(code.uses.list.lock().len(), CODE_USES_KEPT);
        // Half of them (one of the other thread's among them) complete.
        for (q, seq) in points.iter().step_by(2) {
            q.completed(*seq);
        }
        code.prune();
        let left: Vec<(usize, u64)> = code
            .uses
            .list
            .lock()
            .iter()
            .map(|u| (Arc::as_ptr(&u.queue) as usize, u.seq))
            .collect();
        let want: Vec<(usize, u64)> = points
            .iter()
            .skip(1)
            .step_by(2)
            .map(|(q, s)| (Arc::as_ptr(q) as usize, *s))
            .collect();
        assert_eq!(left, want);
        assert!(!code.prune.load(Ordering::Relaxed));
        assert_eq!(code.prune_at.load(Ordering::Relaxed), CODE_USES_KEPT);
        // The other thread's queues were not asked (that would fence its submissions from then).
        assert!(theirs.iter().all(|q| !q.wanted.load(Ordering::Relaxed)));
        assert!(theirs.iter().all(|q| !q.eager.load(Ordering::Relaxed)));
        // A prune nobody asked for does nothing; the unload waits for exactly what is left.
        code.prune();
        assert_eq!(code.uses.list.lock().len(), want.len());
        let mut code = code;
        let mut taken: Vec<(usize, u64)> = code
            .take_points()
            .iter()
            .map(|(q, s)| (Arc::as_ptr(q) as usize, *s))
            .collect();
        taken.sort();
        let mut want = want;
        want.sort();
        assert_eq!(taken, want);
    }

    #[test]
    fn an_executables_launches_are_one_point_per_queue_and_done_ones_are_not_waited_for() {
        let (a, b) = (queue(QueueKind::Owned), queue(QueueKind::Legacy));
        let mut l = LocalUses::default();
        assert!(l.points().is_empty() && l.take_points().is_empty());
        let first = a.next_seq();
        (&l).note(&a, first);
        let second = a.next_seq();
        (&l).note(&a, second);
        let other = b.next_seq();
        (&l).note(&b, other);
        // The later launch on a queue replaces the earlier one.
        let p = l.points();
        assert_eq!(p.len(), 2);
        assert!(p.iter().any(|(q, s)| Arc::ptr_eq(q, &a) && *s == second));
        assert!(p.iter().any(|(q, s)| Arc::ptr_eq(q, &b) && *s == other));
        // `points` leaves them noted; a done queue's point is not waited for.
        b.completed(other);
        assert_eq!(l.points().len(), 1);
        let t = l.take_points();
        assert_eq!(t.len(), 1);
        assert!(Arc::ptr_eq(&t[0].0, &a) && t[0].1 == second);
        assert!(l.points().is_empty(), "taken: nothing left to wait for");
    }

    #[test]
    fn uses_are_points_per_queue_with_the_last_write_kept_apart() {
        let (a, b) = (queue(QueueKind::Owned), queue(QueueKind::Legacy));
        let mut m = Uses::default();
        let w = submit(&a, &[(&m, true)]);
        let r = submit(&a, &[(&m, false)]);
        assert!(r > w);
        assert!(m.only_on(&a));
        {
            let l = m.list.lock();
            assert_eq!(l.len(), 1);
            assert_eq!((l[0].seq, l[0].write_seq), (r, w));
        }
        submit(&b, &[(&m, false)]);
        assert!(!m.only_on(&a));
        // A read conflicts with the write only; a write with every use.
        assert!(m.pending(false) && m.pending(true));
        a.completed(w);
        assert!(
            !m.pending(false),
            "the write is done: a CPU read need not wait"
        );
        assert!(
            m.pending(true),
            "the later read on `a` and the use on `b` are not"
        );
    }

    #[test]
    fn completed_points_need_no_wait_and_are_not_taken_for_frees() {
        let (a, b) = (queue(QueueKind::Owned), queue(QueueKind::Owned));
        let mut m = Uses::default();
        let sa = submit(&a, &[(&m, true)]);
        let sb = submit(&b, &[(&m, true)]);
        // Other work on `a` after the use: completing up to the use is enough.
        submit(&a, &[]);
        a.completed(sa);
        b.completed(sb);
        // Every point is known done: the wait makes no driver call and empties the list.
        m.wait(true).unwrap();
        assert!(m.list.lock().is_empty());
        let sa2 = submit(&a, &[(&m, false)]);
        a.completed(sa2);
        assert!(m.take_points().is_empty());
    }

    #[test]
    fn a_capture_begin_waits_for_submissions_past_the_check_and_later_ones_see_the_watch() {
        let q = queue(QueueKind::Owned);
        // Unwatched: the fast path, counted.
        let e = q.enter();
        assert!(!e.watched());
        assert_eq!(q.inflight(), 1);
        // A begin on another thread must wait for this submission to finish.
        let (q2, begun) = (
            q.clone(),
            Arc::new(std::sync::atomic::AtomicBool::new(false)),
        );
        let b2 = begun.clone();
        let begin = std::thread::spawn(move || {
            let w = q2.watch_exclusive();
            b2.store(true, Ordering::SeqCst);
            drop(w);
        });
        // The begin raises the watch first, then waits.
        while q.watch.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !begun.load(Ordering::SeqCst),
            "the begin went ahead of a submission already past the check"
        );
        // The submission enters the queue again meanwhile (a free in the stream while an
        // allocation reclaims memory): it must not wait for the begin that waits for it.
        let nested = q.enter();
        assert!(nested.watched());
        drop(nested);
        drop(e);
        begin.join().unwrap();
        assert!(begun.load(Ordering::SeqCst));
        assert_eq!(q.inflight(), 0);
        // Watched now: submissions take the capture lock shared and ask the driver.
        let e = q.enter();
        assert!(e.watched());
        assert_eq!(q.inflight(), 0);
        assert!(
            q.capture_lock.try_write().is_none(),
            "an end must wait for a watched submission"
        );
        // Re-entering on the same thread (a drop inside a submission) does not block.
        let again = q.enter();
        assert!(again.watched());
        drop((e, again));
        assert!(q.capture_lock.try_write().is_some());
        q.unwatch();
        assert!(!q.enter().watched());
        assert_eq!(q.inflight(), 0);
    }

    #[test]
    fn a_per_thread_queue_belongs_to_its_thread() {
        let q = queue(QueueKind::PerThread);
        assert!(q.addressable());
        let q2 = q.clone();
        let elsewhere = std::thread::spawn(move || q2.addressable()).join().unwrap();
        assert!(
            !elsewhere,
            "another thread cannot name this thread's per-thread stream"
        );
        assert!(queue(QueueKind::Legacy).addressable());
    }

    #[test]
    fn numbering_a_fast_entry_leaves_the_queue_in_the_same_step() {
        let q = queue(QueueKind::Owned);
        let before = ENTRIES.with(|n| n.get());
        let outer = q.enter();
        let mut e = q.enter();
        assert_eq!(q.inflight(), 2);
        assert_eq!(e.number(&q), 1);
        // One entry left; the number counted; the other entry still in flight.
        assert_eq!((q.inflight(), q.seq()), (1, 1));
        assert!(!e.watched());
        drop(e);
        assert_eq!(q.inflight(), 1, "a numbered entry must not leave twice");
        drop(outer);
        assert_eq!((q.inflight(), q.seq()), (0, 1));
        assert_eq!(ENTRIES.with(|n| n.get()), before);
        assert_eq!(q.next_seq(), 2);
    }

    #[test]
    fn another_thread_asks_the_owner_of_a_per_thread_queue_for_its_fence() {
        // On a device no machine has: on a GPU machine, device 0's context (never activated
        // by this test, so not of generation 1) would make the queue's work count as
        // abandoned, and done (`context::work_abandoned`), before any owner is asked.
        let q = Arc::new(Queue::new(
            std::ptr::null_mut(),
            i32::MAX,
            1,
            QueueKind::PerThread,
        ));
        let mut m = Uses::default();
        let seq = submit(&q, &[(&m, true)]);
        // Launches there record nothing; a poll from another thread (the reclaimer's) asks
        // the owner, however long it waits, and never counts the use done; a blocking wait
        // from there is refused (never made: such memory is fenced at every submission).
        let q2 = q.clone();
        let polls = std::thread::spawn(move || {
            let first = matches!(q2.fence_for(seq, true), Ok(Found::Asked));
            std::thread::sleep(Duration::from_millis(20));
            [
                first,
                matches!(q2.fence_for(seq, true), Ok(Found::Asked)),
                matches!(q2.is_done(seq), Ok(false)),
                q2.fence_for(seq, false).is_err(),
            ]
        })
        .join()
        .unwrap();
        assert_eq!(
            polls, [true; 4],
            "polls wait for the owner, blocking waits are refused"
        );
        assert!(q.wanted.load(Ordering::SeqCst), "the owner was asked");
        assert!(q.state.lock().asked);
        // Once the owner knows the work done (its synchronize, the device's, its exit), no
        // fence is needed.
        q.completed(seq);
        let q3 = q.clone();
        let done = std::thread::spawn(move || matches!(q3.fence_for(seq, true), Ok(Found::Done)))
            .join()
            .unwrap();
        assert!(done);
        assert_eq!(m.take_points().len(), 0);
    }
}
