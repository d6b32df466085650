//! Stream capture: work queued on a stream recorded into a [`Graph`] instead of run
//! (`cudaStreamBeginCapture` / `cudaStreamEndCapture`), with the same keep-alive guarantees as
//! explicit graphs.
//!
//! # The API
//!
//! A capture is a scoped thing, as it is in CUDA C++ (begin ... end on the same stream, usually
//! the same thread). Two forms:
//!
//! * [`Stream::capture`]`(mode, |s| { ... })` runs the closure between the begin and the end and
//!   returns the [`Graph`]; a panic or an `Err` from the closure ends the capture and discards
//!   it. [`Stream::capture_into`] does the same into an existing graph
//!   (`cudaStreamBeginCaptureToGraph`).
//! * [`Stream::begin_capture`] returns a [`Capture`] guard, for sequences that do not fit a
//!   closure; [`Capture::end`] returns the graph, and dropping the guard without `end` ends the
//!   capture and discards it. The guard is neither `Send` nor `Sync`: global and thread-local
//!   captures must end on the thread that began them, as the runtime requires.
//!
//! Other streams join a capture the CUDA way, by waiting for an event recorded in it
//! ([`Event::record`](crate::Event::record) on the capturing stream, then
//! [`Stream::wait_event`] on the other stream: the fork), and must be joined back before the
//! end (the capturing stream waits for an event recorded on them: the join). Work on a joined
//! stream is captured and kept alive exactly as work on the origin stream.
//!
//! # What a captured graph keeps alive
//!
//! Every captured submission goes through the crate's one enqueue path, which sees that the
//! stream is capturing and admits the work as an explicit graph node would be admitted: device
//! memory of the stream's device only, each allocation kept by a token (a buffer dropped while
//! the capture is open, or afterwards while the graph, an executable or a launch still uses it,
//! is freed only once the last of them is gone); a kernel's [`Function`](crate::Function) (and
//! so its module); a host closure. At the end the tokens move into a CUDA user object that the
//! graph keeps, exactly as an explicit node's bundle (see the [module docs](super)).
//!
//! # What a capture refuses
//!
//! Work that a graph would replay unsafely is refused with [`Error::NotCapturable`] (the
//! runtime's `cudaErrorStreamCaptureUnsupported`), and the refusal makes the capture's end
//! fail:
//!
//! * copies from or to host memory (slices, page-locked, mapped or managed memory): the graph
//!   would read or write that host address at every replay, long after the call returned (the
//!   runtime accepts a pageable copy during capture and re-reads the address at every launch);
//!   copy between the host and the device outside the capture, and device to device inside it;
//! * [`Stream::launch_host_fn`]: its closure is `FnOnce`, freed when it first runs, and a graph
//!   calls it at every replay; use [`Stream::launch_host_fn_replayable`] (an `Fn` closure kept by
//!   the graph) inside captures;
//! * stream-ordered allocation ([`DeviceBuffer::new_async`](crate::DeviceBuffer::new_async)) on
//!   a capturing stream (it would be a graph allocation, valid only inside launches);
//! * external event records ([`EventRecordFlags::EXTERNAL`](crate::EventRecordFlags::EXTERNAL)):
//!   the record would be a graph node naming an event that the graph cannot keep alive (add
//!   one to an explicit graph with [`Graph::add_event_record_node`], which keeps an
//!   `Arc<Event>`);
//! * graph launches and uploads, texture and surface objects in captured kernels, peer copies,
//!   and anything else the crate has not audited for replay.
//!
//! # Failures inside a capture
//!
//! The runtime lets some operations fail inside a capture without invalidating it (a
//! `cudaFreeAsync` of a normal allocation on the capturing stream, measured on the H100), so a
//! graph could silently miss work. Here a failure *poisons* the capture, and its end returns
//! [`Error::CaptureFailed`] with the first failure (the graph is discarded):
//!
//! * any error of a captured submission, on whatever thread (refused by the crate, or failed in
//!   the driver);
//! * any failing call of the crate on the thread that began the capture while it is open
//!   (validation errors such as a length mismatch or a bad launch configuration included): the
//!   work that call would have added is missing, even if the error was ignored.
//!
//! Calls the runtime forbids during a capture (synchronising or querying a capturing stream,
//! `cudaMalloc` in global mode, legacy-stream work while a blocking stream captures...) return
//! the runtime's error (`cudaErrorStreamCaptureUnsupported`, `...Invalidated`, `...Implicit`),
//! and the capture's end then fails too.
//!
//! # What the crate itself never does to a capture
//!
//! Its own housekeeping never breaks or adds to a user's capture: drops, deferred frees, fences
//! and waits for them run with the thread's capture mode relaxed; a capture's begin fences the
//! work queued before it, so no fence is ever recorded in a capturing stream; a stream-ordered
//! buffer whose stream is capturing is freed elsewhere once its uses are done, never with a
//! `cuMemFreeAsync` that the capture would record. Nor does it queue anything in the legacy
//! default stream while a blocking stream (or a per-thread stream) of the device is captured,
//! which would make the legacy stream depend on the capture and invalidate it: a fence there
//! waits for the capture's end (a CPU access to memory whose last use was in the legacy stream
//! returns `cudaErrorStreamCaptureImplicit` meanwhile), and stream-ordered allocations of the
//! legacy stream are freed in a stream of the crate's once their uses are done.
//!
//! # Events recorded in a capture
//!
//! [`Event::record`](crate::Event::record) on a capturing stream records nothing that runs: the
//! runtime marks the event as captured, and every later query, synchronisation or wait on it
//! (outside its capture) fails until it is recorded again outside a capture. The crate's
//! [`Event`](crate::Event) remembers this and reports it as [`Error::CapturedEvent`]; waiting on
//! it from another stream while its capture is open is the fork described above. Records and
//! waits inside a capture become edges of the graph, not nodes, so the graph refers to no event
//! (an external record, which would be a node, is refused;
//! a capturing stream waiting on an event recorded outside the capture is the runtime's
//! `cudaErrorStreamCaptureIsolation`; external event nodes are offered by explicit graphs,
//! [`Graph::add_event_record_node`]).
//!
//! # Default streams
//!
//! The legacy default stream cannot be captured (the runtime forbids it): beginning a capture
//! on it is [`Error::NotCapturable`]. The per-thread default stream can: the capture is of the
//! calling thread's own per-thread stream, and ends there.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

mod deps;
pub use deps::CaptureDependencies;

use super::{host_node_trampoline, keep, Graph, GraphNode, GraphShared, HostNode, NEXT_GRAPH_ID};
use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, ErrorCode, Result};
use crate::queue::{Lane, Queue, Tokens};
use crate::stream::{Kind, Stream};

/// Which calls a capture lets other code make meanwhile (`cudaStreamCaptureMode`).
///
/// Some calls ("unsafe" ones in the runtime's words: `cudaMalloc`, synchronisations, queries
/// of unrelated events...) may not overlap a capture; the mode says whose calls are checked.
/// The crate's own housekeeping never trips these checks (it runs relaxed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CaptureMode {
    /// Such calls fail on any thread while the capture is open, unless that thread relaxed
    /// its mode (`cudaStreamCaptureModeGlobal`, the runtime's usual choice).
    #[default]
    Global,
    /// Such calls fail on the capturing thread only (`cudaStreamCaptureModeThreadLocal`).
    ThreadLocal,
    /// Nothing is checked (`cudaStreamCaptureModeRelaxed`).
    Relaxed,
}

impl CaptureMode {
    /// The driver's number.
    pub fn as_raw(self) -> u32 {
        match self {
            CaptureMode::Global => 0,
            CaptureMode::ThreadLocal => 1,
            CaptureMode::Relaxed => 2,
        }
    }

    /// From the driver's number; `None` for a number this crate does not know.
    pub fn from_raw(n: u32) -> Option<CaptureMode> {
        match n {
            0 => Some(CaptureMode::Global),
            1 => Some(CaptureMode::ThreadLocal),
            2 => Some(CaptureMode::Relaxed),
            _ => None,
        }
    }

    fn to_sys(self) -> sys::CUstreamCaptureMode {
        match self {
            CaptureMode::Global => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => {
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
            }
            CaptureMode::Relaxed => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        }
    }
}

/// Whether a stream is being captured (`cudaStreamCaptureStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureStatus {
    /// Not capturing (`cudaStreamCaptureStatusNone`).
    None,
    /// Capturing (`cudaStreamCaptureStatusActive`).
    Active,
    /// The capture failed and must be ended, which returns an error
    /// (`cudaStreamCaptureStatusInvalidated`).
    Invalidated,
    /// A status this crate does not know (a newer driver's), with its number.
    Other(u32),
}

impl CaptureStatus {
    /// From the driver's number (read as an integer: a newer driver's value never becomes an
    /// invalid Rust enum).
    pub fn from_raw(n: u32) -> CaptureStatus {
        match n {
            0 => CaptureStatus::None,
            1 => CaptureStatus::Active,
            2 => CaptureStatus::Invalidated,
            n => CaptureStatus::Other(n),
        }
    }
}

/// What [`Stream::capture_info`] reports (`cudaStreamGetCaptureInfo`).
#[derive(Clone, Debug)]
pub struct CaptureInfo {
    /// Whether the stream is capturing.
    pub status: CaptureStatus,
    /// The capture's id, unique in the process (0 unless the capture is active).
    pub id: u64,
    /// The driver graph being built (null when not capturing). Only for raw driver calls made
    /// during the capture; the crate's [`Graph`] comes from the end.
    pub graph: sys::CUgraph,
    /// The nodes the next captured operation will depend on: the capture's current leaves.
    /// For a capture begun by the crate they belong to the graph the capture produces (or to
    /// the graph of [`Stream::capture_into`]); otherwise to no crate graph.
    pub dependencies: Vec<GraphNode>,
}

// ---------------------------------------------------------------------------------------------
// Sessions: what the crate knows of each capture it began.

/// A capture begun by the crate: its tokens, its first failure and the queues it involves.
pub(crate) struct Session {
    /// The driver's capture id.
    pub(crate) id: u64,
    /// The crate id of the graph the capture builds (nodes reported during it carry it).
    graph_id: u64,
    /// The existing graph a capture adds to ([`Stream::capture_into`]): its lock, which
    /// serialises every driver call on the graph (its executables' per-node calls included),
    /// is held around each captured submission, the begin and the end (review finding: the
    /// captured work changed the graph while another thread's executable of it was updated).
    into: Option<Arc<GraphShared>>,
    state: Mutex<SessionState>,
}

impl Session {
    /// The handle of the live node `raw` of the graph the capture builds.
    pub(crate) fn handle(&self, raw: usize) -> GraphNode {
        match &self.into {
            Some(g) => g.handle(raw),
            // A new graph: no node of it was ever destroyed.
            None => GraphNode {
                raw,
                graph: self.graph_id,
                stamp: 0,
            },
        }
    }
}

struct SessionState {
    tokens: Tokens,
    failure: Option<(&'static str, Error)>,
    /// The origin queue first, then the joined ones; each watched once by this capture.
    queues: Vec<Arc<Queue>>,
    /// The end has begun: no queue joins any more.
    closed: bool,
}

impl Session {
    /// Keeps what a captured submission refers to until the graph is gone.
    pub(crate) fn keep(&self, tokens: Tokens) {
        if !tokens.is_empty() {
            self.state.lock().tokens.extend(tokens);
        }
    }

    /// For the driver call of a captured submission: the lock of the graph captured into, if
    /// any (see [`Session::into`]). Taken after the queue's entry, as the end takes it after
    /// the queues' locks.
    pub(crate) fn graph_lock(&self) -> Option<super::lock::GraphGuard<'_, super::keep::Refs>> {
        self.into.as_ref().map(|g| g.objects.lock())
    }

    /// Notes a failure inside the capture: its end will fail with the first one.
    pub(crate) fn poison(&self, call: &'static str, e: &Error) {
        let mut st = self.state.lock();
        if st.failure.is_none() {
            st.failure = Some((call, e.clone()));
        }
    }
}

/// The captures the crate began and has not ended (few at a time).
static SESSIONS: Mutex<Vec<Arc<Session>>> = Mutex::new(Vec::new());

/// Per stream that the legacy default stream synchronises with (a blocking created stream or
/// a per-thread stream) and that a crate capture begun or joined: the capture's id, with the
/// stream's device and context generation. While one is here, work in that context's legacy
/// stream would depend on the capture, which the driver refuses with
/// `cudaErrorStreamCaptureImplicit` and invalidates the capture (measured, whatever the
/// thread's mode): the crate's own housekeeping (fences recorded in the legacy stream) waits
/// instead (review finding: a drop of memory last used on the legacy stream broke a user's
/// capture of another stream). Written around the driver call that makes a stream capture,
/// read around housekeeping in the legacy stream, so the two never overlap.
static IMPLICIT: parking_lot::RwLock<Vec<(u64, i32, u64)>> = parking_lot::RwLock::new(Vec::new());

/// For work the crate itself queues in the legacy stream of `device` (context `generation`):
/// a guard to hold until it is queued, or the runtime's `cudaErrorStreamCaptureImplicit` while
/// a capture of the crate makes that work impossible (try again after the capture).
pub(crate) fn legacy_quiet(
    device: i32,
    generation: u64,
) -> Result<parking_lot::RwLockReadGuard<'static, Vec<(u64, i32, u64)>>> {
    let g = IMPLICIT.read();
    if g.iter()
        .any(|&(_, d, gen)| d == device && gen == generation)
    {
        return Err(Error::Cuda {
            code: ErrorCode::StreamCaptureImplicit,
            driver: None,
            call: "work in the legacy default stream while a blocking stream is captured",
        });
    }
    Ok(g)
}

/// Whether the legacy stream synchronises with `raw` (of the entered context `a`): the
/// per-thread stream, and created streams without `NON_BLOCKING`. Unknown: assumed so.
fn implicit_with_legacy(a: &Active, raw: sys::CUstream) -> bool {
    if raw as usize == 0x1 {
        // The legacy stream itself (a user's wait on a captured event): the user's work.
        return false;
    }
    if raw as usize == 0x2 {
        return true;
    }
    let mut f = 0u32;
    // SAFETY: a live stream of the current context; valid out-parameter.
    let r = unsafe { sys::cuStreamGetFlags(raw, &mut f) };
    let _ = a;
    crate::driver::rc(r) != 0 || f & 1 == 0
}

thread_local! {
    /// The captures begun on this thread and not ended.
    static OPEN_HERE: std::cell::RefCell<Vec<Arc<Session>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// For every failing call of the crate (`error::record`): a failure on a thread with an open
/// capture poisons it, whatever the call (validation errors included), so that the graph never
/// silently misses work whose error was ignored.
pub(crate) fn poison_open_here(e: &Error) {
    let _ = OPEN_HERE.try_with(|v| {
        if let Ok(v) = v.try_borrow() {
            for s in v.iter() {
                s.poison("a call on the capturing thread", e);
            }
        }
    });
}

fn open_here(s: &Arc<Session>, open: bool) {
    let _ = OPEN_HERE.try_with(|v| {
        if let Ok(mut v) = v.try_borrow_mut() {
            if open {
                v.push(s.clone());
            } else {
                v.retain(|x| !Arc::ptr_eq(x, s));
            }
        }
    });
}

fn find(id: u64) -> Option<Arc<Session>> {
    SESSIONS.lock().iter().find(|s| s.id == id).cloned()
}

/// What `cuStreamGetCaptureInfo` says of a stream.
struct RawInfo {
    status: u32,
    id: u64,
    graph: sys::CUgraph,
    deps: Vec<sys::CUgraphNode>,
}

/// Asks the driver about a stream of the entered context (`cuStreamGetCaptureInfo`, ~25 ns).
fn raw_info(a: &Active, stream: sys::CUstream, with_deps: bool) -> Result<RawInfo> {
    let mut status: u32 = 0;
    let mut id: u64 = 0;
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    let mut dp: *const sys::CUgraphNode = std::ptr::null();
    let mut ep: *const sys::CUgraphEdgeData = std::ptr::null();
    let mut n: usize = 0;
    let (dpp, epp, np) = if with_deps {
        (
            &mut dp as *mut *const sys::CUgraphNode,
            &mut ep as *mut *const sys::CUgraphEdgeData,
            &mut n as *mut usize,
        )
    } else {
        (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    // SAFETY: a live stream of the current context; every out-parameter is valid or null
    // (each optional); the status is a C enum, 4 bytes, written as an integer.
    a.check(
        unsafe {
            sys::cuStreamGetCaptureInfo_v3(
                stream,
                (&mut status as *mut u32).cast(),
                &mut id,
                &mut graph,
                dpp,
                epp,
                np,
            )
        },
        "cuStreamGetCaptureInfo",
    )?;
    let deps = if status == 1 && with_deps && n > 0 && !dp.is_null() {
        // SAFETY: the driver hands out `n` nodes at `dp`, valid until the next call on the
        // stream; copied at once.
        unsafe { std::slice::from_raw_parts(dp, n) }.to_vec()
    } else {
        Vec::new()
    };
    Ok(RawInfo {
        status,
        id,
        graph,
        deps,
    })
}

/// For the enqueue path, on a watched queue: the crate's capture the stream is in (`None`:
/// not capturing). A capture the crate did not begin (raw driver calls) is refused: what it
/// records could not be kept alive.
pub(crate) fn session_of(a: &Active, q: &Queue) -> Result<Option<Arc<Session>>> {
    let info = raw_info(a, q.raw(), false)?;
    match info.status {
        0 => return Ok(None),
        // The driver reports no id for an invalidated capture: its end fails anyway.
        2 => {
            return Err(Error::Cuda {
                code: ErrorCode::StreamCaptureInvalidated,
                driver: None,
                call: "a submission on a stream whose capture was invalidated",
            })
        }
        _ => {}
    }
    find(info.id).map(Some).ok_or(Error::NotCapturable {
        call: "a submission",
        reason: FOREIGN,
    })
}

const FOREIGN: &str = "the stream is being captured by a capture this crate did not begin (a raw \
                       cuStreamBeginCapture): the crate could not keep what the graph uses alive";

const LEGACY: &str = "the legacy default stream cannot be captured (the runtime forbids it): \
                      capture a created stream or the per-thread default stream";

/// Why the enqueue path refuses `call` inside a capture.
pub(crate) fn refusal(call: &str) -> &'static str {
    if call == "cudaLaunchHostFunc" {
        "its closure is FnOnce and freed when it first runs, but a graph calls it at every \
         replay: use Stream::launch_host_fn_replayable (an Fn closure the graph keeps alive)"
    } else if call.contains("host") || call.contains("Symbol") || call.contains("3D") {
        "a graph would read or write that host memory at every replay, long after this call \
         returned: copy between the host and the device outside the capture (device to device \
         inside it)"
    } else if call.starts_with("cudaGraph") {
        "launching or uploading an executable graph inside a capture is not supported: add the \
         graph as a child graph node of an explicit graph instead"
    } else if call.contains("Malloc") {
        "a stream-ordered allocation on a capturing stream would be a graph allocation, valid \
         only inside the graph's launches: allocate before the capture"
    } else {
        "the crate does not record this operation into graphs (refused rather than captured \
         without keeping what it uses alive)"
    }
}

/// For a stream-ordered allocation on `queue` (of the entered context): refuses it while the
/// stream is captured by the crate (poisoning the capture). Hold the returned entry until the
/// allocation is queued.
///
/// Inline, with the watched case out of line: an unwatched queue (no capture of the crate
/// involves it) returns the entry in registers (measured on `cudaMallocAsync`).
#[inline]
pub(crate) fn refuse_if_captured<'q>(
    a: &Active,
    queue: &'q Queue,
    call: &'static str,
) -> Result<crate::queue::Entry<'q>> {
    let entry = queue.enter();
    if entry.watched() {
        return refuse_if_captured_watched(a, queue, call, entry);
    }
    Ok(entry)
}

/// [`refuse_if_captured`] on a watched queue: asks whether a capture of the crate holds it.
#[cold]
#[inline(never)]
fn refuse_if_captured_watched<'q>(
    a: &Active,
    queue: &'q Queue,
    call: &'static str,
    entry: crate::queue::Entry<'q>,
) -> Result<crate::queue::Entry<'q>> {
    if let Some(s) = session_of(a, queue)? {
        let e = Error::NotCapturable {
            call,
            reason: refusal(call),
        };
        s.poison(call, &e);
        return Err(e);
    }
    Ok(entry)
}

// ---------------------------------------------------------------------------------------------
// Begin and end.

/// Why a per-thread stream cannot be captured in a thread-local destructor that runs after the
/// crate's: its queues are gone, every submission would resolve to a new queue, and work would
/// be captured without the capture's checks and keep-alive.
const EXITING_PER_THREAD: &str = "the per-thread default stream of a thread that is exiting (in \
                                  a thread-local destructor run after the crate's): capture it \
                                  before";

/// Refuses to capture `q` when it is the per-thread stream of a thread whose per-thread queues
/// are gone (see [`EXITING_PER_THREAD`]): for a capture's begin and a join.
fn refuse_exiting_per_thread(q: &Queue, call: &'static str) -> Result<()> {
    if q.is_per_thread() && !crate::stream::per_thread_queues_alive() {
        return Err(Error::NotCapturable {
            call,
            reason: EXITING_PER_THREAD,
        });
    }
    Ok(())
}

/// Begins a capture on `stream` (into `into`'s graph when given, after its nodes `deps`).
fn begin(
    stream: &Stream,
    mode: CaptureMode,
    into: Option<(&Arc<GraphShared>, &[sys::CUgraphNode])>,
) -> Result<Arc<Session>> {
    let call = if into.is_some() {
        "cudaStreamBeginCaptureToGraph"
    } else {
        "cudaStreamBeginCapture"
    };
    if stream.inner.kind == Kind::Legacy {
        return Err(Error::NotCapturable {
            call,
            reason: LEGACY,
        });
    }
    if context::in_host_fn() {
        return Err(Error::InHostFunction { call });
    }
    let lane = stream.lane()?;
    refuse_exiting_per_thread(lane.queue(), call)?;
    let (device, generation) = lane.a.id();
    let graph_id = match into {
        Some((g, _)) => {
            if g.device != device {
                return Err(Error::DeviceMismatch {
                    call,
                    what: "the graph",
                    found: g.device,
                    expected: device,
                });
            }
            if g.generation != generation {
                return Err(Error::ContextDestroyed {
                    what: "graph",
                    device,
                });
            }
            g.id
        }
        None => NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
    };
    let q = lane.queue().clone();
    let w = q.watch_exclusive();
    let r = (|| {
        // Everything queued so far gets a fence now: a later wait for it (a drop, a CPU view)
        // then never has to record one in the capturing stream.
        q.fence_all(&lane.a)?;
        let m = mode.to_sys();
        // Housekeeping in the legacy stream never overlaps the begin (see `IMPLICIT`).
        let mut implicit = implicit_with_legacy(&lane.a, lane.raw()).then(|| IMPLICIT.write());
        let rc = match into {
            // SAFETY: a live stream of the current context; a valid mode.
            None => unsafe { sys::cuStreamBeginCapture_v2(lane.raw(), m) },
            Some((g, deps)) => {
                let dp = if deps.is_empty() {
                    std::ptr::null()
                } else {
                    deps.as_ptr()
                };
                let _serial = g.objects.lock();
                // SAFETY: a live stream and graph of the current context (checked above);
                // `deps` are nodes of that graph (checked by the caller); no edge data.
                unsafe {
                    sys::cuStreamBeginCaptureToGraph(
                        lane.raw(),
                        g.raw.0,
                        dp,
                        std::ptr::null(),
                        deps.len(),
                        m,
                    )
                }
            }
        };
        lane.a.check(rc, call)?;
        let info = match raw_info(&lane.a, lane.raw(), false) {
            Ok(i) => i,
            Err(e) => {
                let mut g: sys::CUgraph = std::ptr::null_mut();
                // SAFETY: the capture just begun on this stream; its graph is discarded.
                let _ = unsafe { sys::cuStreamEndCapture(lane.raw(), &mut g) };
                if !g.is_null() && into.is_none() {
                    // SAFETY: the graph the end returned, which nothing else refers to.
                    let _ = unsafe { sys::cuGraphDestroy(g) };
                }
                return Err(e);
            }
        };
        if let Some(g) = implicit.as_mut() {
            g.push((info.id, device, generation));
        }
        drop(implicit);
        let s = Arc::new(Session {
            id: info.id,
            graph_id,
            into: into.map(|(g, _)| g.clone()),
            state: Mutex::new(SessionState {
                tokens: Vec::new(),
                failure: None,
                queues: vec![q.clone()],
                closed: false,
            }),
        });
        SESSIONS.lock().push(s.clone());
        open_here(&s, true);
        Ok(s)
    })();
    drop(w);
    if r.is_err() {
        q.unwatch();
    }
    r
}

/// How a capture ended.
struct Ended {
    /// The end's result.
    result: Result<()>,
    /// The captured graph (null when the capture failed, or when it captured into a graph).
    graph: sys::CUgraph,
    /// The capture's last nodes before the end (asked for captures into a graph).
    leaves: Vec<sys::CUgraphNode>,
    tokens: Tokens,
    failure: Option<(&'static str, Error)>,
    active: Option<Active>,
}

/// Ends the capture `s` begun on `stream` (`cuStreamEndCapture`) and forgets it. Never fails
/// without ending: after a reset of the device there is nothing left to end.
fn finish(stream: &Stream, s: &Arc<Session>, want_leaves: bool) -> Ended {
    open_here(s, false);
    let queues = {
        let mut st = s.state.lock();
        st.closed = true;
        st.queues.clone()
    };
    let mut sorted = queues.clone();
    sorted.sort_by_key(|q| Arc::as_ptr(q) as usize);
    sorted.dedup_by(|x, y| Arc::ptr_eq(x, y));
    // Entered before the queues are locked: entering runs the releases the driver handed over
    // (graph bundles whose user objects went), and their drops may free memory in these very
    // queues, entering them (review finding: with the queues locked, the end never returned).
    let entered = stream.enter();
    // No submission on any queue of the capture runs meanwhile: each is either before the
    // end (captured, its tokens kept) or after it.
    let locks: Vec<_> = sorted.iter().map(|q| q.capture_exclusive()).collect();
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    let mut leaves = Vec::new();
    let (result, active) = match entered {
        Ok(a) => {
            if want_leaves {
                if let Ok(i) = raw_info(&a, stream.as_raw(), true) {
                    leaves = i.deps;
                }
            }
            let _serial = s.graph_lock();
            // SAFETY: the stream the capture began on, live in the current context; valid
            // out-parameter.
            let r = a.check(
                unsafe { sys::cuStreamEndCapture(stream.as_raw(), &mut graph) },
                "cuStreamEndCapture",
            );
            (r, Some(a))
        }
        Err(e) => (Err(e), None),
    };
    SESSIONS.lock().retain(|x| !Arc::ptr_eq(x, s));
    IMPLICIT.write().retain(|&(id, _, _)| id != s.id);
    drop(locks);
    for q in &queues {
        q.unwatch();
    }
    let (tokens, failure) = {
        let mut st = s.state.lock();
        (std::mem::take(&mut st.tokens), st.failure.take())
    };
    Ended {
        result,
        graph,
        leaves,
        tokens,
        failure,
        active,
    }
}

/// A crate graph around a driver graph the capture returned.
fn wrap_graph(a: &Active, raw: sys::CUgraph, id: u64) -> Graph {
    Graph {
        shared: Arc::new(GraphShared {
            raw: Raw(raw),
            device: a.dev.ordinal,
            generation: a.generation(),
            id,
            objects: super::lock::GraphLock::new(super::keep::Refs::default()),
            // Captures refuse stream-ordered allocation and cannot make conditional nodes.
            mem: Mutex::new(super::mem::MemNodes::default()),
            root: None,
            bodies: Mutex::new(Vec::new()),
            flags: Default::default(),
            extra: Default::default(),
        }),
        _not_sync: PhantomData,
    }
}

/// The error of a capture that failed: its first failure inside, else the end's own error.
fn failed(end: Result<()>, failure: Option<(&'static str, Error)>) -> Error {
    match (failure, end) {
        (Some((call, error)), _) => Error::CaptureFailed {
            call,
            error: Box::new(error),
        },
        (None, Err(e)) => e,
        (None, Ok(())) => Error::Cuda {
            code: ErrorCode::StreamCaptureInvalidated,
            driver: None,
            call: "cudaStreamEndCapture (no graph returned)",
        },
    }
}

/// Ends a capture into a new graph: the graph with the capture's tokens, or the failure.
fn end_new(stream: &Stream, s: &Arc<Session>) -> Result<Graph> {
    let e = finish(stream, s, false);
    let graph = match &e.active {
        Some(a) if !e.graph.is_null() => Some(wrap_graph(a, e.graph, s.graph_id)),
        _ => None,
    };
    match (e.result, e.failure, graph, e.active) {
        (Ok(()), None, Some(g), Some(a)) => {
            if !e.tokens.is_empty() {
                let obj = keep::attach(&a, e.tokens)?;
                g.shared.objects.lock().push(obj);
            }
            Ok(g)
        }
        (result, failure, graph, _) => {
            // The graph (if any) is destroyed before the tokens go: nothing can launch it.
            drop(graph);
            drop(e.tokens);
            Err(failed(result, failure))
        }
    }
}

/// Ends a capture into `g`: the capture's last nodes, or the failure. The tokens go to `g`
/// either way (a failed capture may have left nodes in it); if they cannot, they are leaked
/// rather than released under nodes that may refer to them.
fn end_into(stream: &Stream, s: &Arc<Session>, g: &GraphShared) -> Result<Vec<GraphNode>> {
    let e = finish(stream, s, true);
    let mut kept = Ok(());
    match &e.active {
        Some(a) if !e.tokens.is_empty() => {
            let tokens: Arc<Mutex<Tokens>> = Arc::new(Mutex::new(e.tokens));
            let mut objects = g.objects.lock();
            match keep::attach(a, vec![Box::new(tokens.clone())]) {
                Ok(obj) => objects.push(obj),
                Err(err) => {
                    std::mem::forget(tokens);
                    kept = Err(err);
                }
            }
        }
        // No tokens, or the device was reset (the graph died with its context).
        _ => drop(e.tokens),
    }
    match (e.result, e.failure) {
        (Ok(()), None) => kept.map(|()| {
            e.leaves
                .into_iter()
                .map(|raw| g.handle(raw as usize))
                .collect()
        }),
        (result, failure) => Err(failed(result, failure)),
    }
}

/// An open capture on a stream (`cudaStreamBeginCapture` ... `cudaStreamEndCapture`); see
/// the [module docs](self).
///
/// [`end`](Self::end) returns the captured [`Graph`]; dropping the guard without it (a panic,
/// an early return) ends the capture and discards the graph. Neither `Send` nor `Sync`: the
/// capture ends on the thread that began it. A guard forgotten with `mem::forget` leaves the
/// stream capturing for good: its later work is recorded and never runs, and what it uses is
/// never freed (a leak, never a use after free).
///
/// ```no_run
/// use cuda_runtime::graph::CaptureMode;
/// use cuda_runtime::{DeviceBuffer, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let stream = Stream::new()?;
/// let mut a = DeviceBuffer::<u32>::new(1024)?;
/// let capture = stream.begin_capture(CaptureMode::Global)?;
/// a.fill_async(7, &stream)?; // recorded, not run
/// let graph = capture.end()?;
/// graph.instantiate()?.launch(&stream)?;
/// stream.synchronize()?;
/// assert!(a.to_vec()?.iter().all(|&x| x == 7));
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping the capture ends it and discards the graph"]
pub struct Capture<'s> {
    stream: &'s Stream,
    session: Arc<Session>,
    done: bool,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Capture<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("stream", self.stream)
            .field("id", &self.session.id)
            .finish()
    }
}

impl Capture<'_> {
    /// The stream being captured.
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// The capture's id (as [`CaptureInfo::id`]).
    pub fn id(&self) -> u64 {
        self.session.id
    }

    /// Ends the capture (`cudaStreamEndCapture`) and returns the graph, which keeps alive
    /// everything the captured work uses.
    ///
    /// # Errors
    /// [`Error::CaptureFailed`] when an operation inside the capture failed or was refused
    /// (the graph would miss it: it is discarded); the runtime's error when the capture was
    /// invalidated (`cudaErrorStreamCaptureInvalidated`), when a joined stream was not joined
    /// back (`cudaErrorStreamCaptureUnjoined`)...
    #[doc(alias = "cudaStreamEndCapture")]
    pub fn end(mut self) -> Result<Graph> {
        self.done = true;
        record(end_new(self.stream, &self.session))
    }
}

impl Drop for Capture<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Ended and discarded; the error (if any) is of no use to anyone.
            let _ = end_new(self.stream, &self.session);
        }
    }
}

/// Ends an open capture into a graph when dropped (a panic in the closure).
struct IntoGuard<'a> {
    stream: &'a Stream,
    session: Arc<Session>,
    graph: &'a GraphShared,
    done: bool,
}

impl Drop for IntoGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = end_into(self.stream, &self.session, self.graph);
        }
    }
}

impl Stream {
    /// Begins capturing the stream's work into a graph (`cudaStreamBeginCapture`): work queued
    /// on it from now on (and on streams joined to it by an event wait) is recorded, not run,
    /// until [`Capture::end`]. See the [module docs](self) for what is kept alive, refused
    /// and reported.
    ///
    /// # Errors
    /// [`Error::NotCapturable`] on the legacy default stream, and on the per-thread default
    /// stream from a thread-local destructor that runs after the crate's own (at thread exit:
    /// the crate no longer tracks that stream there); the runtime's error when the stream is
    /// already capturing (`cudaErrorIllegalState`) or the capture cannot begin.
    #[doc(alias = "cudaStreamBeginCapture")]
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<Capture<'_>> {
        record((|| {
            let session = begin(self, mode, None)?;
            Ok(Capture {
                stream: self,
                session,
                done: false,
                _not_send: PhantomData,
            })
        })())
    }

    /// Captures what `f` queues on the stream (and on streams it joins to it) into a new graph
    /// (`cudaStreamBeginCapture`, `f`, `cudaStreamEndCapture`). An `Err` or a panic from `f`
    /// ends the capture and discards it.
    ///
    /// ```no_run
    /// use cuda_runtime::graph::CaptureMode;
    /// use cuda_runtime::{DeviceBuffer, Stream};
    /// # fn main() -> cuda_runtime::Result<()> {
    /// let stream = Stream::new()?;
    /// let mut a = DeviceBuffer::<u32>::new(1024)?;
    /// let mut b = DeviceBuffer::<u32>::new(1024)?;
    /// let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
    ///     a.fill_async(3, s)?;
    ///     b.copy_from_device_async(&a, s)
    /// })?;
    /// let exec = graph.instantiate()?;
    /// for _ in 0..10 {
    ///     exec.launch(&stream)?;
    /// }
    /// stream.synchronize()?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`begin_capture`](Self::begin_capture) and [`Capture::end`], or `f`'s error.
    pub fn capture(
        &self,
        mode: CaptureMode,
        f: impl FnOnce(&Stream) -> Result<()>,
    ) -> Result<Graph> {
        let c = self.begin_capture(mode)?;
        match f(self) {
            Ok(()) => c.end(),
            Err(e) => {
                drop(c);
                Err(e)
            }
        }
    }

    /// Captures what `f` queues on the stream into the existing graph `graph`, after its nodes
    /// `deps` (`cudaStreamBeginCaptureToGraph` ... `cudaStreamEndCapture`), and returns the
    /// captured sequence's last nodes (to add dependencies on it). What the captured work uses
    /// is kept alive by `graph`.
    ///
    /// On failure the graph may hold part of the captured work: discard it.
    ///
    /// # Errors
    /// As [`capture`](Self::capture); [`Error::ForeignGraphNode`] when a dependency is not
    /// `graph`'s; [`Error::DeviceMismatch`] for another device's graph;
    /// [`Error::InvalidValue`] for the body graph of a conditional node (not supported).
    #[doc(alias = "cudaStreamBeginCaptureToGraph")]
    pub fn capture_into(
        &self,
        graph: &mut Graph,
        deps: &[GraphNode],
        mode: CaptureMode,
        f: impl FnOnce(&Stream) -> Result<()>,
    ) -> Result<Vec<GraphNode>> {
        const CALL: &str = "cudaStreamBeginCaptureToGraph";
        let session = record((|| {
            if graph.shared.root.is_some() {
                // Review finding: the capture's tokens would be held by the body, not by the
                // root that keeps what its nodes use (the root's clones, child embeddings and
                // executables would not hold them), and captured submissions change the body
                // while other threads may use the root (instantiate, clone, add nodes) without
                // the root's lock, which serialises every driver call on the nesting.
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: "the body graph of a conditional node".into(),
                    reason: "capturing into a conditional body is not supported: add the \
                             body's nodes explicitly, or capture into a graph of its own and \
                             add it to the body as a child graph node",
                });
            }
            let raw_deps = graph.raw_nodes(CALL, deps)?;
            begin(self, mode, Some((&graph.shared, &raw_deps)))
        })())?;
        let mut guard = IntoGuard {
            stream: self,
            session,
            graph: &graph.shared,
            done: false,
        };
        let r = f(self);
        guard.done = true;
        let end = record(end_into(self, &guard.session, guard.graph));
        r.and(end)
    }

    /// Whether the stream is being captured (`cudaStreamIsCapturing`).
    ///
    /// # Errors
    /// The runtime's: on the legacy stream while a blocking stream is captured in global
    /// mode, `cudaErrorStreamCaptureImplicit`.
    #[doc(alias = "cudaStreamIsCapturing")]
    pub fn is_capturing(&self) -> Result<CaptureStatus> {
        record((|| {
            let a = self.enter()?;
            let mut status: u32 = 0;
            // SAFETY: a live stream of the current context; the status is a C enum, 4 bytes,
            // written as an integer.
            a.check(
                unsafe {
                    sys::cuStreamIsCapturing(self.as_raw(), (&mut status as *mut u32).cast())
                },
                "cuStreamIsCapturing",
            )?;
            Ok(CaptureStatus::from_raw(status))
        })())
    }

    /// The stream's capture status, the capture's id, its graph and current leaves
    /// (`cudaStreamGetCaptureInfo`).
    #[doc(alias = "cudaStreamGetCaptureInfo")]
    pub fn capture_info(&self) -> Result<CaptureInfo> {
        record((|| {
            let a = self.enter()?;
            let i = raw_info(&a, self.as_raw(), true)?;
            // Only an active capture's details are valid.
            let active = i.status == 1;
            let session = if active { find(i.id) } else { None };
            Ok(CaptureInfo {
                status: CaptureStatus::from_raw(i.status),
                id: if active { i.id } else { 0 },
                graph: if active {
                    i.graph
                } else {
                    std::ptr::null_mut()
                },
                dependencies: i
                    .deps
                    .into_iter()
                    .map(|raw| match &session {
                        Some(s) => s.handle(raw as usize),
                        None => GraphNode {
                            raw: raw as usize,
                            graph: 0,
                            stamp: 0,
                        },
                    })
                    .collect(),
            })
        })())
    }

    /// Queues a host function that may be captured (`cudaLaunchHostFunc`): outside a capture
    /// it runs once, as [`launch_host_fn`](Self::launch_host_fn); inside one it becomes a host
    /// node, called at every replay of the graph's executables (concurrently when several run,
    /// hence `Sync`), and the graph keeps the closure alive until no graph, executable or
    /// launch refers to it.
    ///
    /// `f` must not call into CUDA. A panic in `f` is caught: outside a capture the stream's
    /// next synchronize or query reports it; in a replay it is recorded as the device's
    /// deferred error.
    #[doc(alias = "cudaLaunchHostFunc")]
    pub fn launch_host_fn_replayable<F: Fn() + Send + Sync + 'static>(&self, f: F) -> Result<()> {
        const CALL: &str = "cudaLaunchHostFunc";
        record((|| {
            let lane = self.lane_for_submit(CALL)?;
            let device = lane.a.dev.ordinal;
            let f = Arc::new(f);
            let node: Cell<*const HostNode> = Cell::new(std::ptr::null());
            let shared = f.clone();
            let mut keep = || -> Result<Tokens> {
                let g = shared.clone();
                let n = Arc::new(HostNode {
                    f: Box::new(move || g()),
                    device,
                });
                node.set(Arc::as_ptr(&n));
                Ok(vec![Box::new(n)])
            };
            let panics = lane.queue().host_panics.clone();
            lane.submit_capturable(CALL, &[], &mut keep, |a, raw| {
                let p = node.get();
                if p.is_null() {
                    let g = f.clone();
                    return crate::stream::queue_host_fn(a, raw, move || g(), panics);
                }
                // SAFETY: `p` is a `HostNode` kept (through the capture's tokens, then the
                // graph's user object) until no graph, executable or launch refers to it; the
                // trampoline only reads it.
                a.check(
                    unsafe {
                        sys::cuLaunchHostFunc(raw, Some(host_node_trampoline), p.cast_mut().cast())
                    },
                    "cuLaunchHostFunc",
                )
            })
        })())
    }
}

/// [`Stream::wait_event`] for an event recorded in the open capture `capture`: the waiting
/// stream joins the capture (the fork), or, already in it, depends on the event's work.
pub(crate) fn join(lane: &Lane<'_>, capture: u64, event: sys::CUevent) -> Result<()> {
    const CALL: &str = "cudaStreamWaitEvent";
    let wait = |a: &Active, raw: sys::CUstream| {
        // SAFETY: a live stream of the current context; a live event (pinned by the caller).
        a.check(
            unsafe { sys::cuStreamWaitEvent(raw, event, 0) },
            "cuStreamWaitEvent",
        )
    };
    let Some(s) = find(capture) else {
        return Err(Error::CapturedEvent { call: CALL });
    };
    let q = lane.queue();
    let member = s.state.lock().queues.iter().any(|x| Arc::ptr_eq(x, q));
    if member {
        return lane.submit_capturable(CALL, &[], &mut || Ok(Vec::new()), wait);
    }
    if let Err(e) = refuse_exiting_per_thread(q, CALL) {
        s.poison(CALL, &e);
        return Err(e);
    }
    let w = q.watch_exclusive();
    let r = (|| {
        if let Some(other) = session_of(&lane.a, q)? {
            if other.id != s.id {
                return Err(Error::NotCapturable {
                    call: CALL,
                    reason: "the stream is in another capture, and captures do not merge",
                });
            }
        }
        {
            let mut st = s.state.lock();
            if st.closed {
                return Err(Error::CapturedEvent { call: CALL });
            }
            st.queues.push(q.clone());
        }
        // As at a begin: the work queued before the join gets its fence now.
        q.fence_all(&lane.a)?;
        let (device, generation) = lane.a.id();
        let mut implicit = implicit_with_legacy(&lane.a, lane.raw()).then(|| IMPLICIT.write());
        wait(&lane.a, lane.raw())?;
        if let Some(g) = implicit.as_mut() {
            g.push((s.id, device, generation));
        }
        Ok(())
    })();
    let joined = s.state.lock().queues.iter().any(|x| Arc::ptr_eq(x, q));
    drop(w);
    if !joined {
        q.unwatch();
    }
    if let Err(e) = &r {
        s.poison(CALL, e);
    }
    r
}

// ---------------------------------------------------------------------------------------------
// The thread's capture mode.

fn exchange(mode: u32) -> Result<u32> {
    let a = context::enter_current()?;
    let mut m = mode;
    // SAFETY: a valid in/out parameter of the enum's size (a C enum, 4 bytes), read back as an
    // integer; the call only swaps the calling thread's mode.
    a.check(
        unsafe { sys::cuThreadExchangeStreamCaptureMode((&mut m as *mut u32).cast()) },
        "cuThreadExchangeStreamCaptureMode",
    )?;
    Ok(m)
}

/// Sets the calling thread's capture mode and returns the previous one
/// (`cudaThreadExchangeStreamCaptureMode`): [`CaptureMode::Relaxed`] lets this thread make
/// calls that a global capture (of any thread) would otherwise refuse. Prefer the scoped
/// [`CaptureModeGuard`].
///
/// # Errors
/// The runtime's; `Ok(None)` inside is not possible: a previous mode this crate does not know
/// is returned as [`CaptureMode::Global`].
#[doc(alias = "cudaThreadExchangeStreamCaptureMode")]
pub fn exchange_capture_mode(mode: CaptureMode) -> Result<CaptureMode> {
    record(exchange(mode.as_raw()).map(|m| CaptureMode::from_raw(m).unwrap_or_default()))
}

/// The calling thread's capture mode, set for the guard's life and put back when it is dropped
/// (`cudaThreadExchangeStreamCaptureMode` twice). Neither `Send` nor `Sync`: the mode is the
/// thread's.
///
/// ```no_run
/// use cuda_runtime::graph::{CaptureMode, CaptureModeGuard};
/// # fn main() -> cuda_runtime::Result<()> {
/// // Another thread captures in global mode; this thread may still allocate meanwhile:
/// let _relaxed = CaptureModeGuard::new(CaptureMode::Relaxed)?;
/// let buf = cuda_runtime::DeviceBuffer::<f32>::new(1 << 20)?;
/// # drop(buf);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "the previous mode is put back when the guard is dropped"]
pub struct CaptureModeGuard {
    previous: u32,
    _not_send: PhantomData<*const ()>,
}

impl CaptureModeGuard {
    /// Sets the calling thread's capture mode to `mode` until the guard is dropped.
    #[doc(alias = "cudaThreadExchangeStreamCaptureMode")]
    pub fn new(mode: CaptureMode) -> Result<CaptureModeGuard> {
        record(exchange(mode.as_raw()).map(|previous| CaptureModeGuard {
            previous,
            _not_send: PhantomData,
        }))
    }

    /// The mode the drop puts back (`None`: a mode this crate does not know).
    pub fn previous(&self) -> Option<CaptureMode> {
        CaptureMode::from_raw(self.previous)
    }
}

impl Drop for CaptureModeGuard {
    fn drop(&mut self) {
        let mut m = self.previous;
        // SAFETY: as in `exchange`; the driver is initialised (the guard's creation did it).
        let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode((&mut m as *mut u32).cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_statuses_round_trip_and_unknown_numbers_stay_numbers() {
        for m in [
            CaptureMode::Global,
            CaptureMode::ThreadLocal,
            CaptureMode::Relaxed,
        ] {
            assert_eq!(CaptureMode::from_raw(m.as_raw()), Some(m));
            assert_eq!(m.to_sys() as u32, m.as_raw());
        }
        assert_eq!(CaptureMode::from_raw(7), None);
        assert_eq!(CaptureMode::default(), CaptureMode::Global);
        assert_eq!(CaptureStatus::from_raw(0), CaptureStatus::None);
        assert_eq!(CaptureStatus::from_raw(1), CaptureStatus::Active);
        assert_eq!(CaptureStatus::from_raw(2), CaptureStatus::Invalidated);
        assert_eq!(CaptureStatus::from_raw(9), CaptureStatus::Other(9));
    }

    #[test]
    fn refusals_name_the_reason_for_each_kind_of_work() {
        assert!(refusal("cudaLaunchHostFunc").contains("launch_host_fn_replayable"));
        assert!(refusal("cudaMemcpyAsync (host to device)").contains("every replay"));
        assert!(refusal("cudaMemcpyAsync (device to host)").contains("host memory"));
        assert!(refusal("cudaGraphLaunch").contains("child graph"));
        assert!(refusal("cudaMallocAsync").contains("graph allocation"));
        assert!(refusal("cudaMemPrefetchAsync").contains("does not record"));
    }

    #[test]
    fn a_poisoned_session_keeps_its_first_failure_and_its_tokens() {
        let s = Session {
            id: 42,
            graph_id: 7,
            into: None,
            state: Mutex::new(SessionState {
                tokens: Vec::new(),
                failure: None,
                queues: Vec::new(),
                closed: false,
            }),
        };
        let kept = Arc::new(());
        s.keep(vec![Box::new(kept.clone())]);
        s.keep(Vec::new());
        let first = Error::InvalidValue {
            what: "x",
            value: "1".into(),
            reason: "first",
        };
        s.poison("cudaMemcpyAsync", &first);
        s.poison(
            "cudaLaunchKernel",
            &Error::InHostFunction { call: "second" },
        );
        let st = s.state.lock();
        assert_eq!(st.tokens.len(), 1);
        assert_eq!(Arc::strong_count(&kept), 2, "the token holds a reference");
        let (call, e) = st.failure.clone().unwrap();
        assert_eq!(call, "cudaMemcpyAsync");
        assert_eq!(e, first);
        let err = failed(Ok(()), st.failure.clone());
        assert_eq!(err.code(), ErrorCode::StreamCaptureInvalidated);
        assert!(err.to_string().contains("cudaMemcpyAsync"), "{err}");
        assert!(err.to_string().contains("first"), "{err}");
    }

    #[test]
    fn capture_errors_carry_the_runtime_codes_and_say_what_to_do() {
        let e = Error::NotCapturable {
            call: "cudaLaunchHostFunc",
            reason: refusal("cudaLaunchHostFunc"),
        };
        assert_eq!(e.code(), ErrorCode::StreamCaptureUnsupported);
        assert_eq!(e.code().name(), "cudaErrorStreamCaptureUnsupported");
        let text = e.to_string();
        assert!(
            text.starts_with("cudaLaunchHostFunc cannot be captured"),
            "{text}"
        );
        assert!(text.contains("launch_host_fn_replayable"), "{text}");
        let e = Error::CapturedEvent {
            call: "cudaEventQuery",
        };
        assert_eq!(e.code(), ErrorCode::CapturedEvent);
        assert_eq!(e.code().name(), "cudaErrorCapturedEvent");
        assert!(e.to_string().contains("record it again outside a capture"));
        let e = Error::CaptureFailed {
            call: "cudaMemcpyAsync (host to device)",
            error: Box::new(Error::NotCapturable {
                call: "cudaMemcpyAsync (host to device)",
                reason: refusal("cudaMemcpyAsync (host to device)"),
            }),
        };
        assert_eq!(e.code(), ErrorCode::StreamCaptureInvalidated);
        assert!(e.to_string().contains("every replay"), "{e}");
        let legacy = Error::NotCapturable {
            call: "cudaStreamBeginCapture",
            reason: LEGACY,
        };
        assert!(legacy.to_string().contains("legacy default stream"));
    }

    #[test]
    fn a_failed_end_without_failure_inside_reports_the_runtime_error() {
        let end = Err(Error::from_driver(904, "cuStreamEndCapture"));
        assert_eq!(failed(end, None).code(), ErrorCode::StreamCaptureUnjoined);
        assert_eq!(
            failed(Ok(()), None).code(),
            ErrorCode::StreamCaptureInvalidated
        );
    }
}
