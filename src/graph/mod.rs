//! CUDA graphs: explicit graphs built node by node ([`Graph`]), and executable graphs
//! instantiated from them and launched on streams ([`GraphExec`]).
//!
//! # What a graph keeps alive
//!
//! The driver copies a node's parameters when the node is added, but not what they refer to:
//! a kernel node holds device addresses, a host node a function pointer and its data, an event
//! node an event handle. Here everything a node refers to stays alive while any graph, clone,
//! child embedding or executable refers to it, and until every launch that uses it has
//! finished:
//!
//! * each node that refers to something gets a bundle of shared tokens (the allocation behind
//!   a buffer, the [`Function`](crate::Function) and so its module, the [`Event`](crate::Event), the host closure), owned by a
//!   CUDA user object (`cuUserObjectCreate`) whose reference the crate keeps in the graph's
//!   chain of references. The driver's graph is given none: an executable holding any user
//!   object costs about 40 times a plain launch (57.7 µs against 1.46 µs per submit on the
//!   H200). Copies, child embeddings and executables share the chain without a driver call (a
//!   snapshot: nodes added later go to a new segment), and an executable releases its snapshot
//!   once its launches, which it tracks as any use, are done. So the bundle is released exactly
//!   when nothing can use it any more;
//! * a buffer dropped while a graph still refers to it is not freed: its allocation moves into
//!   the shared holder the graph's token points to, and is freed (in stream order, as any
//!   buffer) when the last token goes. Buffers never used in a graph pay nothing for this;
//! * the user object's destructor runs on a driver thread where no CUDA call is allowed: it
//!   only queues the bundle, and the next call of the crate that enters a device releases it on
//!   the calling thread. (So memory of a finished graph returns to the driver at the next crate
//!   call, e.g. [`Device::synchronize`](crate::Device::synchronize), not at the instant the
//!   launch ends.)
//! * per-node updates of an executable ([`GraphExec::set_kernel_node_params`] and the memset,
//!   copy and host ones) keep what they are given in one bundle that the executable holds, until
//!   the executable is dropped or updated as a whole (launches in flight may still use the old
//!   parameters, so nothing is released earlier). The same buffer or function given again is
//!   kept once; each new host closure is kept.
//! * parameter changes of a node in a graph ([`Graph::set_kernel_node_params`], the memset,
//!   copy, host, event and external-semaphore setters) give the new parameters a bundle of
//!   their own; the old bundle stays with the graph until it is dropped (clones and
//!   executables made before still use the old parameters). [`Graph::destroy_node`] likewise
//!   leaves the node's bundle with the graph, and the destroyed node's handle is refused from
//!   then on, so that it never reaches the driver;
//! * [`UserObject`] offers the same mechanism for values of the caller's: a graph that
//!   retains one ([`Graph::retain_user_object`]) keeps the value for its clones, executables
//!   and launches.
//!
//! # What graphs refuse (for now)
//!
//! * **Host-visible memory** (page-locked, mapped, registered or managed buffers) is refused in
//!   every node with [`Error::InvalidValue`]: a launched graph runs without borrowing the
//!   buffer, so a CPU view (`as_slice`) could see the device write under it. Graphs use device
//!   memory; copy results out with the stream copies after the launch.
//! * The body graph of a conditional node (see [`Graph::add_conditional_node`]) cannot be
//!   cloned, embedded as a child or instantiated on its own: what its nodes refer to is kept
//!   by the graph at the root of the nesting.
//! * Graph memory (allocation and free nodes) follows the rules of [`GraphMem`]: usable only by
//!   the nodes of its graph, never from the host.
//! * A while node whose body holds no kernel could never end its loop: such a graph is refused
//!   at instantiation (see [`ConditionalKind::While`]).
//! * Texture and surface objects as kernel-node arguments, and host memory in copy nodes.
//!
//! # Stream capture
//!
//! Work queued on a stream can also be recorded into a graph ([`Stream::capture`](crate::Stream::capture),
//! [`Stream::begin_capture`](crate::Stream::begin_capture)), with the same keep-alive guarantees
//! as explicit nodes; see [`capture`] for the API, what it refuses and why.
//!
//! # Threads
//!
//! [`Graph`] and [`GraphExec`] are `Send` but not `Sync`, as the driver does not synchronise
//! graph objects. An executable keeps its source graph alive (its node handles name the
//! executable's nodes in per-node updates); calls on a graph and on its executables are
//! serialised by a lock inside.

pub mod capture;
mod cond;
mod exec;
mod keep;
mod lock;
mod mem;
mod more;
mod nodes;
mod user_object;

use std::cell::Cell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

pub use capture::{
    exchange_capture_mode, Capture, CaptureDependencies, CaptureInfo, CaptureMode,
    CaptureModeGuard, CaptureStatus,
};
pub use cond::{ConditionalHandle, ConditionalKind};
pub use exec::{GraphExec, InstantiateOptions};
use keep::Bundle;
pub(crate) use mem::{graph_mem_outside, GraphMemInner};
pub use mem::{GraphMem, GraphMemAttribute};
pub use more::{InstantiateFlags, KernelNodeParams, MemsetNodeParams};
pub use user_object::UserObject;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};
use crate::memory::{Alloc, AllocKeep};

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// The driver graph and what the crate knows of it; shared by a [`Graph`] and the executables
/// instantiated from it.
pub(crate) struct GraphShared {
    raw: Raw<sys::CUgraph_st>,
    device: i32,
    generation: u64,
    id: u64,
    /// The user objects the graph holds references to (through the nodes' bundles). The lock
    /// also serialises every driver call on the graph.
    objects: lock::GraphLock<keep::Refs>,
    /// The graph's memory allocation and free nodes.
    mem: Mutex<mem::MemNodes>,
    /// For the body graph of a conditional node: the graph at the root of the nesting, which
    /// holds what the body's nodes refer to (and owns the body through the node).
    root: Option<Arc<GraphShared>>,
    /// For a root graph: the bodies of its conditional nodes at any depth (owned by their
    /// nodes, so live as long as this graph), with whether the node is a while loop (those are
    /// checked at instantiation, see [`cond::ConditionalKind::While`]). Raw handles, not the
    /// bodies' `GraphShared`: those hold the root, and a cycle would leak both. Each body comes
    /// with the graph it is a node of (its parent: the root or another body).
    bodies: Mutex<Vec<Body>>,
    /// Set (never cleared) once the graph has a memory node, or, for a root, once
    /// `bodies` holds a while loop's (pushed and set under `objects`' lock, with the node):
    /// read without the locks of `mem` and `bodies` by instantiations, copies and whole
    /// updates, which for most graphs then have nothing more to check.
    flags: Flags,
    /// Destroyed node handles and the user objects retained by hand (see [`more`]).
    extra: more::Extra,
}

/// See [`GraphShared`]'s `flags`.
#[derive(Default)]
pub(crate) struct Flags {
    pub(crate) mem: std::sync::atomic::AtomicBool,
    pub(crate) while_body: std::sync::atomic::AtomicBool,
    /// Set (never cleared, under `objects`' lock) once the graph retained a user object by
    /// hand ([`Graph::retain_user_object`]).
    pub(crate) user: std::sync::atomic::AtomicBool,
}

/// A conditional body known to its root: whether its node is a while loop, the body, and the
/// graph the node belongs to (the root or another body).
pub(crate) type Body = (bool, Raw<sys::CUgraph_st>, Raw<sys::CUgraph_st>);

impl GraphShared {
    /// The handle of the live node `raw` of this graph.
    pub(crate) fn handle(&self, raw: usize) -> GraphNode {
        GraphNode {
            raw,
            graph: self.id,
            stamp: self.extra.stamp(raw),
        }
    }

    /// References of the crate's own to the user objects the graph holds by hand, for an
    /// executable made or updated from it (see [`keep::HandRefs`]); the caller holds the graph's
    /// lock. (A graph that never retained one: nothing, without a lock.)
    pub(crate) fn hand_refs(&self, a: &Active) -> Result<keep::HandRefs> {
        if !self.flags.user.load(Ordering::Acquire) {
            return Ok(keep::HandRefs::default());
        }
        keep::HandRefs::take(a, &self.extra.user_objects())
    }

    /// Whether the graph has a memory node (its flag, read without a lock).
    #[inline]
    pub(crate) fn has_mem_nodes(&self) -> bool {
        self.flags.mem.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The graph whose user objects keep what this graph's nodes refer to (itself, or the root
    /// of a conditional body).
    fn keeper(&self) -> &GraphShared {
        match &self.root {
            Some(r) => r,
            None => self,
        }
    }
}

impl Drop for GraphShared {
    fn drop(&mut self) {
        if self.root.is_some() {
            // A conditional node's body: owned by the node.
            return;
        }
        let raw = self.raw;
        context::release(
            self.device,
            self.generation,
            "destroying a graph",
            move |a| {
                // SAFETY: the graph is live and no handle of the crate refers to it any more
                // (executables hold this struct). The references in its `Refs` go with this
                // struct; executables and copies hold snapshots of their own.
                keep::relaxed(|| {
                    a.check(unsafe { sys::cuGraphDestroy(raw.get()) }, "cuGraphDestroy")
                })
            },
        );
    }
}

/// A CUDA graph (`cudaGraph_t`): a set of operations (nodes) and the dependencies between them,
/// built explicitly, then instantiated into a [`GraphExec`] to be launched.
///
/// Created on the current device; every node runs there. `Send` but not `Sync`.
///
/// ```no_run
/// use cuda_runtime::graph::{Graph, MemsetValue};
/// use cuda_runtime::{DeviceBuffer, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let mut a = DeviceBuffer::<u32>::new(1024)?;
/// let mut b = DeviceBuffer::<u32>::new(1024)?;
/// let mut graph = Graph::new()?;
/// let set = graph.add_memset_node(&[], &mut a, MemsetValue::U32(7))?;
/// graph.add_memcpy_node(&[set], &mut b, &a)?;
/// let exec = graph.instantiate()?;
/// let stream = Stream::new()?;
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// assert!(b.to_vec()?.iter().all(|&x| x == 7));
/// # Ok(())
/// # }
/// ```
pub struct Graph {
    shared: Arc<GraphShared>,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.shared.raw.0)
            .field("device", &self.shared.device)
            .finish()
    }
}

/// A node of a [`Graph`] (`cudaGraphNode_t`): a plain handle, valid with the graph it came
/// from (and that graph's executables); using it with another graph is an
/// [`Error::ForeignGraphNode`]. Once its node is destroyed ([`Graph::destroy_node`]) the handle
/// is refused for good, even where a newer node has the same raw handle: two handles are equal
/// only when they name the same node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphNode {
    raw: usize,
    graph: u64,
    /// The stamp of `raw` in its graph when the handle was made (see `more::Extra`).
    stamp: u64,
}

impl GraphNode {
    /// The raw handle (`CUgraphNode`).
    pub fn as_raw(&self) -> sys::CUgraphNode {
        self.raw as sys::CUgraphNode
    }
}

/// The kind of a graph node (`cudaGraphNodeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GraphNodeType {
    /// A kernel launch (`cudaGraphNodeTypeKernel`).
    Kernel,
    /// A copy (`cudaGraphNodeTypeMemcpy`).
    Memcpy,
    /// A memset (`cudaGraphNodeTypeMemset`).
    Memset,
    /// A host function (`cudaGraphNodeTypeHost`).
    Host,
    /// An embedded child graph (`cudaGraphNodeTypeGraph`).
    ChildGraph,
    /// A node that does nothing (`cudaGraphNodeTypeEmpty`).
    Empty,
    /// A wait on an event (`cudaGraphNodeTypeWaitEvent`).
    EventWait,
    /// An event record (`cudaGraphNodeTypeEventRecord`).
    EventRecord,
    /// An external semaphore signal (`cudaGraphNodeTypeExtSemaphoreSignal`).
    ExternalSemaphoreSignal,
    /// An external semaphore wait (`cudaGraphNodeTypeExtSemaphoreWait`).
    ExternalSemaphoreWait,
    /// A memory allocation (`cudaGraphNodeTypeMemAlloc`).
    MemAlloc,
    /// A memory free (`cudaGraphNodeTypeMemFree`).
    MemFree,
    /// A batch of memory operations (`CU_GRAPH_NODE_TYPE_BATCH_MEM_OP`).
    BatchMemOp,
    /// A conditional node (`cudaGraphNodeTypeConditional`).
    Conditional,
    /// A kind this crate does not know (a newer driver's), with its number.
    Other(u32),
}

impl GraphNodeType {
    /// From the driver's number (read as an integer: a newer driver's value never becomes an
    /// invalid Rust enum).
    pub(crate) fn from_raw(n: u32) -> GraphNodeType {
        use GraphNodeType::*;
        match n {
            0 => Kernel,
            1 => Memcpy,
            2 => Memset,
            3 => Host,
            4 => ChildGraph,
            5 => Empty,
            6 => EventWait,
            7 => EventRecord,
            8 => ExternalSemaphoreSignal,
            9 => ExternalSemaphoreWait,
            10 => MemAlloc,
            11 => MemFree,
            12 => BatchMemOp,
            13 => Conditional,
            n => Other(n),
        }
    }
}

/// The value and element size of a memset node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemsetValue {
    /// Every byte set to the value.
    U8(u8),
    /// Every 16-bit word set to the value (size and address must be multiples of 2).
    U16(u16),
    /// Every 32-bit word set to the value (size and address must be multiples of 4).
    U32(u32),
}

impl MemsetValue {
    fn parts(self) -> (usize, u32) {
        match self {
            MemsetValue::U8(v) => (1, v as u32),
            MemsetValue::U16(v) => (2, v as u32),
            MemsetValue::U32(v) => (4, v),
        }
    }
}

bitflags::bitflags! {
    /// What [`Graph::debug_dot_print`] writes about each node (`cudaGraphDebugDotFlags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct DotFlags: u32 {
        /// Everything (`cudaGraphDebugDotFlagsVerbose`).
        const VERBOSE = 1 << 0;
        /// Kernel node parameters (`cudaGraphDebugDotFlagsKernelNodeParams`).
        const KERNEL_NODE_PARAMS = 1 << 2;
        /// Copy node parameters (`cudaGraphDebugDotFlagsMemcpyNodeParams`).
        const MEMCPY_NODE_PARAMS = 1 << 3;
        /// Memset node parameters (`cudaGraphDebugDotFlagsMemsetNodeParams`).
        const MEMSET_NODE_PARAMS = 1 << 4;
        /// Host node parameters (`cudaGraphDebugDotFlagsHostNodeParams`).
        const HOST_NODE_PARAMS = 1 << 5;
        /// Event handles of record and wait nodes (`cudaGraphDebugDotFlagsEventNodeParams`).
        const EVENT_NODE_PARAMS = 1 << 6;
        /// Kernel node attributes (`cudaGraphDebugDotFlagsKernelNodeAttributes`).
        const KERNEL_NODE_ATTRIBUTES = 1 << 9;
        /// Node and function handles (`cudaGraphDebugDotFlagsHandles`).
        const HANDLES = 1 << 10;
    }
}

/// Checks that device memory may be used by a node of a graph on `device`/`generation`, and
/// returns the token that keeps it alive. (Also the admission of memory a captured
/// submission uses.)
pub(crate) fn admit_memory(
    alloc: &Alloc,
    device: i32,
    generation: u64,
    call: &'static str,
) -> Result<Arc<AllocKeep>> {
    check_memory(alloc, device, generation, call)?;
    Ok(alloc.keep_token())
}

/// The checks of [`admit_memory`], without taking the token.
pub(crate) fn check_memory(
    alloc: &Alloc,
    device: i32,
    generation: u64,
    call: &'static str,
) -> Result<()> {
    // Admission may wait for the allocation (a driver call): never inside a host function
    // (review finding).
    if context::in_host_fn() {
        return Err(Error::InHostFunction { call });
    }
    check_memory_outside_host_fn(alloc, device, generation, call)
}

/// The checks of [`check_memory`] but the first: for a caller that refused a call inside a
/// host function already (a kernel node's check, once for all its arguments).
#[inline]
pub(crate) fn check_memory_outside_host_fn(
    alloc: &Alloc,
    device: i32,
    generation: u64,
    call: &'static str,
) -> Result<()> {
    if alloc.host.is_some() || alloc.ipc || alloc.device != device || alloc.generation != generation
    {
        return refuse_memory(alloc, device, generation, call);
    }
    alloc.wait_allocated()
}

/// The refusals of [`check_memory_outside_host_fn`], in their order.
#[cold]
#[inline(never)]
fn refuse_memory(alloc: &Alloc, device: i32, generation: u64, call: &'static str) -> Result<()> {
    if alloc.host.is_some() {
        return Err(Error::InvalidValue {
            what: call,
            value: format!("host-visible memory at {:#x}", alloc.ptr),
            reason: "page-locked, mapped, registered and managed memory cannot be used in graphs \
                     yet (a launch would not keep CPU views away from it): use device memory",
        });
    }
    if alloc.ipc {
        return Err(Error::InvalidValue {
            what: call,
            value: format!("memory opened from an IPC handle at {:#x}", alloc.ptr),
            reason: "IPC memory cannot be used in graphs yet (closing it waits for the whole \
                     device, which a graph's release would do inside another call)",
        });
    }
    if alloc.device != device {
        return Err(Error::DeviceMismatch {
            call,
            what: "the buffer",
            found: alloc.device,
            expected: device,
        });
    }
    if alloc.generation != generation {
        return Err(Error::ContextDestroyed {
            what: "buffer",
            device,
        });
    }
    // A launch on any stream may run the node: the allocation itself must be done.
    alloc.wait_allocated()
}

/// A host node's closure, called at every launch; owned by the node's bundle.
pub(crate) struct HostNode {
    pub(crate) f: Box<dyn Fn() + Send + Sync>,
    pub(crate) device: i32,
}

pub(crate) unsafe extern "C" fn host_node_trampoline(data: *mut c_void) {
    // SAFETY: `data` points to a `HostNode` boxed in the node's bundle, which the graph's user
    // object keeps until no graph, executable or launch refers to it: every call comes first.
    let node = unsafe { &*data.cast::<HostNode>() };
    let _in_host_fn = context::HostFnScope::enter();
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| (node.f)())) {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        if let Ok(d) = context::device_state(node.device) {
            d.defer("a graph host node", Error::HostFnPanicked { message });
        }
        // Dropping the payload could panic again; it must not unwind into the driver.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(p)));
    }
}

/// The kind of a live node (`cuGraphNodeGetType`), read as an integer.
pub(crate) fn raw_node_type(a: &Active, raw: sys::CUgraphNode) -> Result<GraphNodeType> {
    let mut t: u32 = u32::MAX;
    // SAFETY: a live node; the out-parameter is a C enum, 4 bytes, written as an integer (a
    // newer driver's value never becomes an invalid Rust enum).
    a.check(
        unsafe { sys::cuGraphNodeGetType(raw, (&mut t as *mut u32).cast()) },
        "cuGraphNodeGetType",
    )?;
    Ok(GraphNodeType::from_raw(t))
}

/// Reads a list of nodes with the two-call pattern (`count` first, then the nodes), as handles
/// of `graph`'s nodes (`None`: of a graph without a crate handle, with stamp 0 and graph id 0,
/// for the crate's own reading).
fn node_list(
    a: &Active,
    call: &'static str,
    graph: Option<&GraphShared>,
    mut get: impl FnMut(*mut sys::CUgraphNode, *mut usize) -> sys::CUresult,
) -> Result<Vec<GraphNode>> {
    let mut n = 0usize;
    a.check(get(std::ptr::null_mut(), &mut n), call)?;
    let mut v: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); n];
    if n > 0 {
        a.check(get(v.as_mut_ptr(), &mut n), call)?;
        v.truncate(n);
    }
    Ok(v.into_iter()
        .map(|raw| match graph {
            Some(g) => g.handle(raw as usize),
            None => GraphNode {
                raw: raw as usize,
                graph: 0,
                stamp: 0,
            },
        })
        .collect())
}

impl Graph {
    /// Creates an empty graph on the current device (`cudaGraphCreate`).
    #[doc(alias = "cudaGraphCreate")]
    pub fn new() -> Result<Graph> {
        record((|| {
            let a = context::enter_current()?;
            let mut raw: sys::CUgraph = std::ptr::null_mut();
            // SAFETY: valid out-parameter; flags must be 0.
            a.check(unsafe { sys::cuGraphCreate(&mut raw, 0) }, "cuGraphCreate")?;
            Ok(Graph::from_parts(&a, raw))
        })())
    }

    fn from_parts(a: &Active, raw: sys::CUgraph) -> Graph {
        Graph {
            shared: Arc::new(GraphShared {
                raw: Raw(raw),
                device: a.dev.ordinal,
                generation: a.generation(),
                id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
                objects: lock::GraphLock::new(keep::Refs::default()),
                mem: Mutex::new(mem::MemNodes::default()),
                root: None,
                bodies: Mutex::new(Vec::new()),
                flags: Flags::default(),
                extra: Default::default(),
            }),
            _not_sync: PhantomData,
        }
    }

    /// The raw handle (`CUgraph`).
    pub fn as_raw(&self) -> sys::CUgraph {
        self.shared.raw.0
    }

    /// The device the graph's nodes run on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.shared.device)
    }

    fn enter(&self) -> Result<Active> {
        context::enter_handle(self.shared.device, self.shared.generation, "graph")
    }

    /// Checks that each node belongs to this graph; their raw handles.
    fn raw_nodes(&self, call: &'static str, nodes: &[GraphNode]) -> Result<Vec<sys::CUgraphNode>> {
        // A handle of a destroyed node is refused before the driver sees it.
        more::check_not_destroyed(&self.shared, call, nodes)?;
        nodes
            .iter()
            .map(|n| {
                if n.graph == self.shared.id {
                    Ok(n.as_raw())
                } else {
                    Err(Error::ForeignGraphNode { call, node: n.raw })
                }
            })
            .collect()
    }

    /// Adds a node: the bundle's user object first (so that the node never exists without what
    /// it refers to being kept), then the node through `add` (given the entered context, the
    /// out-parameter, the graph and the dependencies).
    fn add_node(
        &mut self,
        call: &'static str,
        deps: &[GraphNode],
        bundle: Bundle,
        add: impl FnOnce(
            &Active,
            &mut sys::CUgraphNode,
            sys::CUgraph,
            *const sys::CUgraphNode,
            usize,
        ) -> sys::CUresult,
    ) -> Result<GraphNode> {
        let deps = self.raw_nodes(call, deps)?;
        let a = self.enter()?;
        let g = self.shared.raw.0;
        let keeper = self.shared.keeper();
        let mut objects = keeper.objects.lock();
        let obj = if bundle.is_empty() {
            None
        } else {
            Some(keep::attach(&a, bundle)?)
        };
        let dp = if deps.is_empty() {
            std::ptr::null()
        } else {
            deps.as_ptr()
        };
        let mut node: sys::CUgraphNode = std::ptr::null_mut();
        let r = a.check(add(&a, &mut node, g, dp, deps.len()), call);
        match (r, obj) {
            (Ok(()), obj) => {
                if let Some(obj) = obj {
                    objects.push(obj);
                }
                // (A new node may have a destroyed node's address: its handle gets the
                // address's current stamp, which the destroyed node's handles do not have.)
                Ok(self.shared.handle(node as usize))
            }
            (Err(e), Some(obj)) => {
                // The node was not added: its bundle goes back (released by the driver).
                let _ = keep::unshare(&a, obj);
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }
}
