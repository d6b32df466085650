//! The rest of the explicit-graph API: node removal and dependency removal, finding a node in a
//! clone, parameter queries and updates of nodes in a graph (kernel, kernel attributes, memset,
//! copy, host, event, child graph, external semaphores), copies to and from module variables,
//! and the parameters of memory nodes.
//!
//! Everything a changed node refers to is kept alive as a new node's is: a fresh bundle, owned
//! by a user object whose reference the graph keeps (see [`keep`](super::keep)). The bundle of
//! the node's old parameters stays with the graph until the graph is dropped (clones and
//! executables made earlier may still use them), so each update keeps one more bundle until
//! then.

use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;

use parking_lot::Mutex;

use super::keep::{self, Bundle, Token};
use super::nodes::{
    host_params, kernel_bundle, kernel_params, keyed, memcpy3d_zeroed, memcpy_3d_params,
    memcpy_params, memset_params, unkeyed,
};
use super::{
    admit_memory, node_list, raw_node_type, Graph, GraphNode, GraphNodeType, GraphShared,
    MemsetValue,
};
use crate::context::{self, Active};
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::event::Event;
use crate::external::ExternalSemaphore;
use crate::launch::{Dim3, LaunchConfig};
use crate::memory::{DeviceRead, DeviceRepr, DeviceWrite};
use crate::module::{Function, KernelArg};
use crate::{AccessPolicyWindow, Copy3D, PitchedSide, PitchedSideMut, Symbol};

/// What a graph knows beyond its nodes: which node handles name destroyed nodes (refused from
/// then on, so that no dangling handle reaches the driver), and the user-object references
/// taken by [`Graph::retain_user_object`].
///
/// The driver gives a new node the address of a destroyed one again, and a handle is little
/// more than that address: so each handle carries the stamp of its address when it was made
/// (see [`Destroyed`]), and a handle whose stamp is not its address's current one names a
/// destroyed node, whatever node lives at the address now.
#[derive(Default)]
pub(crate) struct Extra {
    destroyed: Mutex<Destroyed>,
    /// Set (never cleared) once a node was destroyed: until then every stamp is 0 and no
    /// handle needs the lock (the per-node updates of executables check every handle).
    any_destroyed: std::sync::atomic::AtomicBool,
    user_refs: Mutex<HashMap<usize, u32>>,
}

/// The destructions of a graph's nodes: how many so far, and for each address that lost a
/// node the count at its last destruction (its *stamp*; 0 for an address that never lost one).
/// Stamps only grow, so a handle made before a destruction never has the stamp made after it.
#[derive(Default)]
pub(crate) struct Destroyed {
    count: u64,
    at: HashMap<usize, u64>,
}

impl Destroyed {
    fn stamp(&self, raw: usize) -> u64 {
        self.at.get(&raw).copied().unwrap_or(0)
    }
}

impl Extra {
    /// The stamp a handle made now for a live node at `raw` gets.
    pub(crate) fn stamp(&self, raw: usize) -> u64 {
        if !self.any_destroyed() {
            return 0;
        }
        self.destroyed.lock().stamp(raw)
    }

    /// How many nodes were destroyed so far (an executable notes it when it is made: see
    /// [`GraphExec`](super::GraphExec)'s `destroys`).
    pub(crate) fn destroys(&self) -> u64 {
        if !self.any_destroyed() {
            return 0;
        }
        self.destroyed.lock().count
    }

    /// Whether `node` (a handle of this graph) names a destroyed node.
    pub(crate) fn is_destroyed(&self, node: &GraphNode) -> bool {
        self.any_destroyed() && self.destroyed.lock().stamp(node.raw) != node.stamp
    }

    /// Whether any node was ever destroyed (see `any_destroyed`).
    #[inline]
    fn any_destroyed(&self) -> bool {
        self.any_destroyed
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Notes that node `raw` was destroyed: every handle made so far for its address is dead.
    pub(crate) fn note_destroyed(&self, raw: usize) {
        let mut d = self.destroyed.lock();
        d.count += 1;
        let count = d.count;
        d.at.insert(raw, count);
        self.any_destroyed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Notes a reference to user object `obj` taken by the graph by hand.
    pub(crate) fn note_user_ref(&self, obj: usize) {
        *self.user_refs.lock().entry(obj).or_insert(0) += 1;
    }

    /// Takes back one reference noted by [`note_user_ref`](Self::note_user_ref); false when
    /// the graph holds none (by hand) of `obj`.
    pub(crate) fn take_user_ref(&self, obj: usize) -> bool {
        let mut refs = self.user_refs.lock();
        match refs.get_mut(&obj) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            Some(_) => {
                refs.remove(&obj);
                true
            }
            None => false,
        }
    }

    /// The user objects the graph holds references to by hand.
    pub(crate) fn user_objects(&self) -> Vec<usize> {
        self.user_refs.lock().keys().copied().collect()
    }

    /// Puts back a reference taken by [`take_user_ref`](Self::take_user_ref).
    pub(crate) fn untake_user_ref(&self, obj: usize) {
        self.note_user_ref(obj);
    }
}

/// Refuses the handle of a destroyed node of `shared` (a handle whose stamp is not its
/// address's: see [`Extra`]), before the driver sees it.
#[inline]
pub(crate) fn check_not_destroyed(
    shared: &GraphShared,
    call: &'static str,
    nodes: &[GraphNode],
) -> Result<()> {
    if !shared.extra.any_destroyed() {
        return Ok(());
    }
    check_not_destroyed_slow(shared, call, nodes)
}

/// [`check_not_destroyed`] once a node of `shared` was destroyed.
#[cold]
#[inline(never)]
fn check_not_destroyed_slow(
    shared: &GraphShared,
    call: &'static str,
    nodes: &[GraphNode],
) -> Result<()> {
    let d = shared.extra.destroyed.lock();
    match nodes
        .iter()
        .find(|n| n.graph == shared.id && d.stamp(n.raw) != n.stamp)
    {
        Some(n) => Err(destroyed_node(call, n.raw)),
        None => Ok(()),
    }
}

/// A held graph lock.
pub(crate) type ObjectsGuard<'g> = super::lock::GraphGuard<'g, super::keep::Refs>;

/// The locks of two graphs, taken in one global order (by address) so that two threads
/// locking the same pair never wait for each other: `x`'s guard, then `y`'s (`None` when they
/// are the same graph, locked once).
pub(crate) fn lock_pair<'g>(
    x: &'g GraphShared,
    y: &'g GraphShared,
) -> (ObjectsGuard<'g>, Option<ObjectsGuard<'g>>) {
    if std::ptr::eq(x, y) {
        return (x.objects.lock(), None);
    }
    if (x as *const GraphShared) < (y as *const GraphShared) {
        let gx = x.objects.lock();
        (gx, Some(y.objects.lock()))
    } else {
        let gy = y.objects.lock();
        (x.objects.lock(), Some(gy))
    }
}

/// Under the graph's lock (which [`Graph::destroy_node`] holds while it destroys): refuses a
/// node destroyed since an earlier [`check_not_destroyed`] (another thread's executable may
/// check, then wait for the lock while the node is destroyed).
#[inline]
pub(crate) fn still_live(shared: &GraphShared, node: GraphNode, call: &'static str) -> Result<()> {
    if shared.extra.any_destroyed() && node.graph == shared.id {
        return still_live_slow(shared, node, call);
    }
    Ok(())
}

/// [`still_live`] once a node of `shared` was destroyed.
#[cold]
#[inline(never)]
fn still_live_slow(shared: &GraphShared, node: GraphNode, call: &'static str) -> Result<()> {
    if shared.extra.is_destroyed(&node) {
        return Err(destroyed_node(call, node.raw));
    }
    Ok(())
}

fn destroyed_node(call: &'static str, raw: usize) -> Error {
    Error::InvalidValue {
        what: call,
        value: format!("graph node {raw:#x}"),
        reason: "the node was destroyed (Graph::destroy_node): its handle names nothing",
    }
}

bitflags::bitflags! {
    /// The flags an executable graph was instantiated with (`cudaGraphInstantiateFlags`, as
    /// [`GraphExec::flags`](super::GraphExec::flags) reads them).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct InstantiateFlags: u64 {
        /// `cudaGraphInstantiateFlagAutoFreeOnLaunch`.
        const AUTO_FREE_ON_LAUNCH = 1;
        /// `cudaGraphInstantiateFlagUpload`.
        const UPLOAD = 2;
        /// `cudaGraphInstantiateFlagDeviceLaunch`.
        const DEVICE_LAUNCH = 4;
        /// `cudaGraphInstantiateFlagUseNodePriority`.
        const USE_NODE_PRIORITY = 8;
    }
}

/// A kernel node's function and configuration (`cudaGraphKernelNodeGetParams`). The argument
/// values are the driver's copy and are not read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelNodeParams {
    /// The function's raw handle: compare with [`Function::as_raw`].
    pub function: sys::CUfunction,
    /// Grid, block and dynamic shared memory.
    pub config: LaunchConfig,
}

/// A memset node's parameters (`cudaGraphMemsetNodeGetParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemsetNodeParams {
    /// The first byte set (a device address).
    pub dst: u64,
    /// The value and element size.
    pub value: MemsetValue,
    /// Elements per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Bytes from one row to the next.
    pub pitch: usize,
}

/// A memset node's value from the driver's parameters (the element size says which kind).
pub(crate) fn memset_value(element_size: u32, value: u32) -> Option<MemsetValue> {
    match element_size {
        1 => Some(MemsetValue::U8(value as u8)),
        2 => Some(MemsetValue::U16(value as u16)),
        4 => Some(MemsetValue::U32(value)),
        _ => None,
    }
}

/// A kernel-node priority checked against the device's range `(least, greatest)` (lower
/// numbers are higher priorities, so `greatest <= least`).
pub(crate) fn check_priority(p: i32, (least, greatest): (i32, i32)) -> Result<()> {
    if p < greatest || p > least {
        return Err(Error::InvalidValue {
            what: "cudaGraphKernelNodeSetAttribute priority",
            value: p.to_string(),
            reason: "outside the device's stream priority range \
                     (cudaDeviceGetStreamPriorityRange; lower numbers are higher priorities)",
        });
    }
    Ok(())
}

const ATTR_WINDOW: sys::CUkernelNodeAttrID =
    sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
const ATTR_PRIORITY: sys::CUkernelNodeAttrID =
    sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PRIORITY;

/// Checks the external semaphores of a signal or wait node against the graph's device; their
/// handles, and the tokens that keep them alive.
pub(crate) fn semaphore_parts(
    device: i32,
    generation: u64,
    sems: &[(&Arc<ExternalSemaphore>, u64)],
    call: &'static str,
) -> Result<(Vec<sys::CUexternalSemaphore>, Vec<u64>, Vec<Token>)> {
    if sems.is_empty() {
        return Err(Error::InvalidValue {
            what: call,
            value: "no semaphore".into(),
            reason: "a signal or wait node names at least one external semaphore",
        });
    }
    let mut raws = Vec::with_capacity(sems.len());
    let mut values = Vec::with_capacity(sems.len());
    let mut tokens: Vec<Token> = Vec::with_capacity(sems.len());
    for (s, v) in sems {
        let (d, g) = s.id();
        if d != device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the external semaphore",
                found: d,
                expected: device,
            });
        }
        if g != generation {
            return Err(Error::ContextDestroyed {
                what: "external semaphore",
                device,
            });
        }
        raws.push(s.as_raw());
        values.push(*v);
        tokens.push(Box::new(Arc::clone(s)));
    }
    Ok((raws, values, tokens))
}

/// Checks a module variable for a copy node of a graph on `device`; its address and the token
/// that keeps its module loaded.
pub(crate) fn symbol_parts<T: DeviceRepr>(
    device: i32,
    generation: u64,
    symbol: &Symbol<T>,
    call: &'static str,
) -> Result<(u64, Option<Token>)> {
    let (d, g) = symbol.id();
    if d != device {
        return Err(Error::DeviceMismatch {
            call,
            what: "the module variable",
            found: d,
            expected: device,
        });
    }
    if g != generation {
        return Err(Error::ContextDestroyed {
            what: "module variable",
            device,
        });
    }
    let token = symbol.module_keep().map(|m| Box::new(m) as Token);
    Ok((symbol.as_raw(), token))
}

/// A device-to-device copy of `bytes` bytes from `src` to `dst` as a node's parameters.
pub(crate) fn copy_1d(dst: u64, src: u64, bytes: usize) -> sys::CUDA_MEMCPY3D {
    let mut p = memcpy3d_zeroed();
    p.srcDevice = src;
    p.dstDevice = dst;
    p.WidthInBytes = bytes;
    p.Height = 1;
    p.Depth = 1;
    p
}

/// A copy node's parameters for `symbol = src` (one element of `T`), with its tokens.
pub(crate) fn to_symbol_params<T: DeviceRepr>(
    device: i32,
    generation: u64,
    symbol: &Symbol<T>,
    src: &(impl DeviceRead<T> + ?Sized),
    call: &'static str,
) -> Result<(sys::CUDA_MEMCPY3D, Bundle)> {
    if src.len() != 1 {
        return Err(Error::LengthMismatch {
            what: call,
            expected: 1,
            actual: src.len(),
        });
    }
    let (addr, module) = symbol_parts(device, generation, symbol, call)?;
    let st = keyed(admit_memory(src.allocation(), device, generation, call)?).1;
    let mut bundle: Bundle = vec![st];
    bundle.extend(module);
    Ok((copy_1d(addr, src.device_ptr(), size_of::<T>()), bundle))
}

/// A copy node's parameters for `dst = symbol` (one element of `T`), with its tokens.
pub(crate) fn from_symbol_params<T: DeviceRepr>(
    device: i32,
    generation: u64,
    dst: &mut (impl DeviceWrite<T> + ?Sized),
    symbol: &Symbol<T>,
    call: &'static str,
) -> Result<(sys::CUDA_MEMCPY3D, Bundle)> {
    if dst.len() != 1 {
        return Err(Error::LengthMismatch {
            what: call,
            expected: 1,
            actual: dst.len(),
        });
    }
    let (addr, module) = symbol_parts(device, generation, symbol, call)?;
    let dt = keyed(admit_memory(dst.allocation(), device, generation, call)?).1;
    let mut bundle: Bundle = vec![dt];
    bundle.extend(module);
    Ok((copy_1d(dst.device_ptr(), addr, size_of::<T>()), bundle))
}

impl Graph {
    /// Attaches `bundle` to the graph (a user object it holds), then runs `set` on `node`; on
    /// failure the bundle goes back. For parameter changes of an existing node.
    fn set_with_bundle(
        &mut self,
        call: &'static str,
        node: GraphNode,
        bundle: Bundle,
        set: impl FnOnce(&Active, sys::CUgraphNode) -> sys::CUresult,
    ) -> Result<()> {
        let raw = self.raw_nodes(call, &[node])?[0];
        let a = self.enter()?;
        let keeper = self.shared.keeper();
        let mut objects = keeper.objects.lock();
        let obj = if bundle.is_empty() {
            None
        } else {
            Some(keep::attach(&a, bundle)?)
        };
        let r = a.check(set(&a, raw), call);
        match (r, obj) {
            (Ok(()), obj) => {
                if let Some(obj) = obj {
                    objects.push(obj);
                }
                Ok(())
            }
            (Err(e), Some(obj)) => {
                let _ = keep::unshare(&a, obj);
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    /// Runs a read-only query `f` on `node` (a live node of this graph) under the graph's lock.
    fn query<R>(
        &self,
        call: &'static str,
        node: GraphNode,
        f: impl FnOnce(&Active, sys::CUgraphNode) -> Result<R>,
    ) -> Result<R> {
        let raw = self.raw_nodes(call, &[node])?[0];
        let a = self.enter()?;
        let _l = self.shared.keeper().objects.lock();
        f(&a, raw)
    }

    /// Checks that `node` is of kind `want`, for a clear error before the driver's.
    fn expect_kind(
        a: &Active,
        raw: sys::CUgraphNode,
        want: GraphNodeType,
        call: &'static str,
    ) -> Result<()> {
        let kind = raw_node_type(a, raw)?;
        if kind != want {
            return Err(Error::InvalidValue {
                what: call,
                value: format!("a {kind:?} node ({:#x})", raw as usize),
                reason: match want {
                    GraphNodeType::Kernel => "this call takes a kernel node",
                    GraphNodeType::Memcpy => "this call takes a copy node",
                    GraphNodeType::Memset => "this call takes a memset node",
                    GraphNodeType::Host => "this call takes a host node",
                    GraphNodeType::ChildGraph => "this call takes a child graph node",
                    GraphNodeType::EventRecord => "this call takes an event record node",
                    GraphNodeType::EventWait => "this call takes an event wait node",
                    GraphNodeType::ExternalSemaphoreSignal => {
                        "this call takes an external semaphore signal node"
                    }
                    GraphNodeType::ExternalSemaphoreWait => {
                        "this call takes an external semaphore wait node"
                    }
                    GraphNodeType::MemAlloc => "this call takes a memory allocation node",
                    GraphNodeType::MemFree => "this call takes a memory free node",
                    _ => "this call takes another kind of node",
                },
            });
        }
        Ok(())
    }

    /// Removes `node` and its edges from the graph (`cudaGraphDestroyNode`). Its handle is
    /// refused from then on, by the graph and its executables, also once a new node has the
    /// same raw handle (the driver reuses addresses); the new node's handle is another.
    ///
    /// What the node referred to stays kept by the graph until the graph is dropped (clones and
    /// executables made before may still use it). Executables instantiated before keep their
    /// copy of the node, but it can no longer be named in their per-node updates.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a conditional node (its body graph, which a [`Graph`] handle
    /// names, would go with it) and for memory allocation and free nodes (the rules of
    /// [`GraphMem`](super::GraphMem) depend on them); [`Error::ForeignGraphNode`].
    #[doc(alias = "cudaGraphDestroyNode")]
    pub fn destroy_node(&mut self, node: GraphNode) -> Result<()> {
        const CALL: &str = "cudaGraphDestroyNode";
        record((|| {
            let raw = self.raw_nodes(CALL, &[node])?[0];
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            let kind = raw_node_type(&a, raw)?;
            if matches!(
                kind,
                GraphNodeType::Conditional | GraphNodeType::MemAlloc | GraphNodeType::MemFree
            ) {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("a {kind:?} node ({:#x})", node.raw),
                    reason: "conditional nodes own their body graph, and memory allocation and \
                             free nodes order the uses of graph memory: they are not destroyed \
                             on their own (drop the graph)",
                });
            }
            // SAFETY: a live node of this graph (checked not destroyed); what it refers to is
            // kept by the graph's user objects, not by the node.
            a.check(
                unsafe { sys::cuGraphDestroyNode(raw) },
                "cuGraphDestroyNode",
            )?;
            self.shared.extra.note_destroyed(node.raw);
            Ok(())
        })())
    }

    /// Removes dependencies: `to[i]` no longer waits for `from[i]`
    /// (`cudaGraphRemoveDependencies`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::InvalidValue`] for a graph with memory allocation
    /// or free nodes (their edges keep every use of graph memory between its allocation and
    /// its free); [`Error::ForeignGraphNode`]; the driver's error for an edge that does not
    /// exist.
    #[doc(alias = "cudaGraphRemoveDependencies")]
    pub fn remove_dependencies(&mut self, from: &[GraphNode], to: &[GraphNode]) -> Result<()> {
        const CALL: &str = "cudaGraphRemoveDependencies";
        record((|| {
            if from.len() != to.len() {
                return Err(Error::LengthMismatch {
                    what: CALL,
                    expected: from.len(),
                    actual: to.len(),
                });
            }
            if self.has_mem_nodes() {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: "a graph with memory allocation or free nodes".into(),
                    reason: "edges of such a graph keep graph memory's uses between its \
                             allocation and its free: they are not removed",
                });
            }
            let (f, t) = (self.raw_nodes(CALL, from)?, self.raw_nodes(CALL, to)?);
            if f.is_empty() {
                return Ok(());
            }
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            // SAFETY: live graph; `f.len()` live nodes of it on each side; no edge data.
            a.check(
                unsafe {
                    sys::cuGraphRemoveDependencies_v2(
                        self.shared.raw.0,
                        f.as_ptr(),
                        t.as_ptr(),
                        std::ptr::null(),
                        f.len(),
                    )
                },
                "cuGraphRemoveDependencies",
            )
        })())
    }

    /// The node of `clone` that `node` (a node of this graph) became when `clone` was made
    /// from this graph by [`try_clone`](Self::try_clone) (`cudaGraphNodeFindInClone`).
    ///
    /// # Errors
    /// [`Error::ForeignGraphNode`]; the driver's error when `clone` is not a clone of this
    /// graph.
    #[doc(alias = "cudaGraphNodeFindInClone")]
    pub fn find_in_clone(&self, node: GraphNode, clone: &Graph) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphNodeFindInClone";
        record((|| {
            let raw = self.raw_nodes(CALL, &[node])?[0];
            if clone.shared.device != self.shared.device {
                return Err(Error::DeviceMismatch {
                    call: CALL,
                    what: "the clone",
                    found: clone.shared.device,
                    expected: self.shared.device,
                });
            }
            let a = self.enter()?;
            a.expect_generation(clone.shared.generation, "graph")?;
            let _l = lock_pair(self.shared.keeper(), clone.shared.keeper());
            let mut out: sys::CUgraphNode = std::ptr::null_mut();
            // SAFETY: a live node of this graph and a live graph; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphNodeFindInClone(&mut out, raw, clone.shared.raw.0) },
                "cuGraphNodeFindInClone",
            )?;
            Ok(clone.shared.handle(out as usize))
        })())
    }

    /// A kernel node's function and configuration (`cudaGraphKernelNodeGetParams`).
    #[doc(alias = "cudaGraphKernelNodeGetParams")]
    pub fn kernel_node_params(&self, node: GraphNode) -> Result<KernelNodeParams> {
        const CALL: &str = "cudaGraphKernelNodeGetParams";
        record(self.query(CALL, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::Kernel, CALL)?;
            // SAFETY: all-zero is a valid value (integers and null pointers).
            let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
            // SAFETY: a live kernel node; valid out-parameter (the argument array it points to
            // is the driver's and is not read).
            a.check(
                unsafe { sys::cuGraphKernelNodeGetParams_v2(raw, &mut p) },
                "cuGraphKernelNodeGetParams",
            )?;
            Ok(KernelNodeParams {
                function: p.func,
                config: LaunchConfig {
                    grid: Dim3::new(p.gridDimX, p.gridDimY, p.gridDimZ),
                    block: Dim3::new(p.blockDimX, p.blockDimY, p.blockDimZ),
                    shared_mem_bytes: p.sharedMemBytes,
                },
            })
        }))
    }

    /// Replaces a kernel node's function, configuration and arguments
    /// (`cudaGraphKernelNodeSetParams`), checked as [`add_kernel_node`](Self::add_kernel_node);
    /// the new function and memory are kept by the graph (the old stay kept too, for clones
    /// and executables made before).
    ///
    /// # Errors
    /// As [`add_kernel_node`](Self::add_kernel_node); [`Error::InvalidValue`] for graph memory
    /// among the arguments (its ordering against the allocation is made when a node is added:
    /// add a node instead) and for a node that is not a kernel node.
    ///
    /// # Safety
    /// As [`add_kernel_node`](Self::add_kernel_node).
    #[doc(alias = "cudaGraphKernelNodeSetParams")]
    pub unsafe fn set_kernel_node_params(
        &mut self,
        node: GraphNode,
        function: &Function,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        const CALL: &str = "cudaGraphKernelNodeSetParams";
        record((|| {
            if let Some(m) = args.iter().find_map(|a| a.graph_mem()) {
                return Err(super::graph_mem_outside(m, CALL));
            }
            let (device, generation) = (self.shared.device, self.shared.generation);
            let bundle = unkeyed(kernel_bundle(
                device, generation, function, config, args, CALL,
            )?);
            let mut ptrs: Vec<*mut c_void> = args.iter().map(KernelArg::value_ptr).collect();
            let params = kernel_params(function, config, &mut ptrs);
            self.check_kind(CALL, node, GraphNodeType::Kernel)?;
            self.set_with_bundle(CALL, node, bundle, |_, raw| {
                // SAFETY: a live kernel node; the parameter count and sizes match the kernel
                // (checked), the values live in `args` for the call (the driver copies them);
                // the memory they name is kept by the bundle; the caller vouches for the rest.
                unsafe { sys::cuGraphKernelNodeSetParams_v2(raw, &params) }
            })
        })())
    }

    fn check_kind(&self, call: &'static str, node: GraphNode, want: GraphNodeType) -> Result<()> {
        self.query(call, node, |a, raw| Graph::expect_kind(a, raw, want, call))
    }

    fn kernel_attr(
        &self,
        call: &'static str,
        node: GraphNode,
        id: sys::CUkernelNodeAttrID,
    ) -> Result<sys::CUkernelNodeAttrValue> {
        self.query(call, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::Kernel, call)?;
            // SAFETY: all-zero is a valid value of the attribute union (its padding member).
            let mut v: sys::CUkernelNodeAttrValue = unsafe { std::mem::zeroed() };
            // SAFETY: a live kernel node; valid out-parameter of the union's size.
            a.check(
                unsafe { sys::cuGraphKernelNodeGetAttribute(raw, id, &mut v) },
                "cuGraphKernelNodeGetAttribute",
            )?;
            Ok(v)
        })
    }

    fn set_kernel_attr(
        &mut self,
        call: &'static str,
        node: GraphNode,
        id: sys::CUkernelNodeAttrID,
        v: sys::CUkernelNodeAttrValue,
    ) -> Result<()> {
        self.query(call, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::Kernel, call)?;
            // SAFETY: a live kernel node; a checked value of the attribute's member.
            a.check(
                unsafe { sys::cuGraphKernelNodeSetAttribute(raw, id, &v) },
                "cuGraphKernelNodeSetAttribute",
            )
        })
    }

    /// A kernel node's L2 access policy window (`cudaGraphKernelNodeGetAttribute` with
    /// `cudaKernelNodeAttributeAccessPolicyWindow`); [`AccessPolicyWindow::NONE`] when unset.
    #[doc(alias = "cudaGraphKernelNodeGetAttribute")]
    pub fn kernel_node_access_policy_window(&self, node: GraphNode) -> Result<AccessPolicyWindow> {
        const CALL: &str = "cudaGraphKernelNodeGetAttribute";
        record(
            self.kernel_attr(CALL, node, ATTR_WINDOW)
                .map(|v| AccessPolicyWindow::from_value(&v)),
        )
    }

    /// Sets a kernel node's L2 access policy window (`cudaGraphKernelNodeSetAttribute` with
    /// `cudaKernelNodeAttributeAccessPolicyWindow`): at every launch, a `hit_ratio` fraction of
    /// the node's accesses to the window get `hit_prop` (persisting in the part of L2 set aside
    /// by [`Limit::PersistingL2CacheSize`](crate::Limit::PersistingL2CacheSize)), the others
    /// `miss_prop`. A window is a hint: it never makes the device touch the range.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a hit ratio outside 0..=1, a window larger than the device's
    /// `cudaDevAttrMaxAccessPolicyWindowSize`, or a node that is not a kernel node.
    #[doc(alias = "cudaGraphKernelNodeSetAttribute")]
    pub fn set_kernel_node_access_policy_window(
        &mut self,
        node: GraphNode,
        window: &AccessPolicyWindow,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphKernelNodeSetAttribute";
        record((|| {
            let max = self
                .device()
                .attribute(crate::DeviceAttribute::MaxAccessPolicyWindowSize)?;
            window.check_against(max.max(0) as usize)?;
            self.set_kernel_attr(CALL, node, ATTR_WINDOW, window.to_sys())
        })())
    }

    /// A kernel node's priority (`cudaGraphKernelNodeGetAttribute` with
    /// `cudaKernelNodeAttributePriority`).
    #[doc(alias = "cudaGraphKernelNodeGetAttribute")]
    pub fn kernel_node_priority(&self, node: GraphNode) -> Result<i32> {
        const CALL: &str = "cudaGraphKernelNodeGetAttribute";
        record(self.kernel_attr(CALL, node, ATTR_PRIORITY).map(|v| {
            // SAFETY: the driver wrote the priority member (an int) for this attribute.
            unsafe { v.priority }
        }))
    }

    /// Sets a kernel node's priority (`cudaGraphKernelNodeSetAttribute` with
    /// `cudaKernelNodeAttributePriority`), in the device's stream priority range (lower numbers
    /// are higher priorities). Executables honour it when instantiated with
    /// [`InstantiateOptions::use_node_priority`](super::InstantiateOptions::use_node_priority).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a priority outside the range or a node that is not a kernel
    /// node.
    #[doc(alias = "cudaGraphKernelNodeSetAttribute")]
    pub fn set_kernel_node_priority(&mut self, node: GraphNode, priority: i32) -> Result<()> {
        const CALL: &str = "cudaGraphKernelNodeSetAttribute";
        record((|| {
            check_priority(priority, self.device().stream_priority_range()?)?;
            // SAFETY: all-zero is a valid value of the attribute union (its padding member).
            let mut v: sys::CUkernelNodeAttrValue = unsafe { std::mem::zeroed() };
            v.priority = priority;
            self.set_kernel_attr(CALL, node, ATTR_PRIORITY, v)
        })())
    }

    /// Copies every attribute of kernel node `src` (access policy window, priority, cluster
    /// shape and the rest) to kernel node `dst` (`cudaGraphKernelNodeCopyAttributes`); both
    /// are nodes of this graph.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when either is not a kernel node; [`Error::ForeignGraphNode`].
    #[doc(alias = "cudaGraphKernelNodeCopyAttributes")]
    pub fn copy_kernel_node_attributes(&mut self, dst: GraphNode, src: GraphNode) -> Result<()> {
        const CALL: &str = "cudaGraphKernelNodeCopyAttributes";
        record((|| {
            let raws = self.raw_nodes(CALL, &[dst, src])?;
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            for &r in &raws {
                Graph::expect_kind(&a, r, GraphNodeType::Kernel, CALL)?;
            }
            // SAFETY: two live kernel nodes of this graph.
            a.check(
                unsafe { sys::cuGraphKernelNodeCopyAttributes(raws[0], raws[1]) },
                "cuGraphKernelNodeCopyAttributes",
            )
        })())
    }

    /// A memset node's parameters (`cudaGraphMemsetNodeGetParams`).
    #[doc(alias = "cudaGraphMemsetNodeGetParams")]
    pub fn memset_node_params(&self, node: GraphNode) -> Result<MemsetNodeParams> {
        const CALL: &str = "cudaGraphMemsetNodeGetParams";
        record(self.query(CALL, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::Memset, CALL)?;
            // SAFETY: all-zero is a valid value (integers).
            let mut p: sys::CUDA_MEMSET_NODE_PARAMS = unsafe { std::mem::zeroed() };
            // SAFETY: a live memset node; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphMemsetNodeGetParams(raw, &mut p) },
                "cuGraphMemsetNodeGetParams",
            )?;
            let value =
                memset_value(p.elementSize, p.value).ok_or_else(|| Error::InvalidValue {
                    what: CALL,
                    value: format!("element size {}", p.elementSize),
                    reason: "the driver returned an element size other than 1, 2 or 4",
                })?;
            Ok(MemsetNodeParams {
                dst: p.dst,
                value,
                width: p.width,
                height: p.height,
                pitch: p.pitch,
            })
        }))
    }

    /// Replaces a memset node's destination and value (`cudaGraphMemsetNodeSetParams`),
    /// checked as [`add_memset_node`](Self::add_memset_node); the new memory is kept by the
    /// graph.
    ///
    /// # Errors
    /// As [`add_memset_node`](Self::add_memset_node); [`Error::InvalidValue`] for a node that
    /// is not a memset node.
    #[doc(alias = "cudaGraphMemsetNodeSetParams")]
    pub fn set_memset_node_params<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        value: MemsetValue,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphMemsetNodeSetParams";
        record((|| {
            let (params, bundle) =
                memset_params(self.shared.device, self.shared.generation, dst, value, CALL)?;
            self.check_kind(CALL, node, GraphNodeType::Memset)?;
            self.set_with_bundle(CALL, node, unkeyed(bundle), |_, raw| {
                // SAFETY: a live memset node; `width` elements from `dst` lie in live device
                // memory of the graph's context (checked), kept by the bundle.
                unsafe { sys::cuGraphMemsetNodeSetParams(raw, &params) }
            })
        })())
    }

    /// A copy node's parameters as the driver holds them (`cudaGraphMemcpyNodeGetParams`):
    /// addresses, arrays, pitches and extent, as plain values.
    #[doc(alias = "cudaGraphMemcpyNodeGetParams")]
    pub fn memcpy_node_params(&self, node: GraphNode) -> Result<sys::CUDA_MEMCPY3D> {
        const CALL: &str = "cudaGraphMemcpyNodeGetParams";
        record(self.query(CALL, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::Memcpy, CALL)?;
            let mut p = memcpy3d_zeroed();
            // SAFETY: a live copy node; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphMemcpyNodeGetParams(raw, &mut p) },
                "cuGraphMemcpyNodeGetParams",
            )?;
            Ok(p)
        }))
    }

    fn set_copy(
        &mut self,
        call: &'static str,
        node: GraphNode,
        params: sys::CUDA_MEMCPY3D,
        bundle: Bundle,
    ) -> Result<()> {
        self.check_kind(call, node, GraphNodeType::Memcpy)?;
        self.set_with_bundle(call, node, bundle, |_, raw| {
            // SAFETY: a live copy node; both sides checked (device memory and arrays of the
            // graph's context, regions within them), kept by the bundle.
            unsafe { sys::cuGraphMemcpyNodeSetParams(raw, &params) }
        })
    }

    /// Replaces a copy node's operands with a device-to-device copy of `src` into `dst`
    /// (`cudaGraphMemcpyNodeSetParams1D`), checked as [`add_memcpy_node`](Self::add_memcpy_node);
    /// the new memory is kept by the graph.
    ///
    /// # Errors
    /// As [`add_memcpy_node`](Self::add_memcpy_node); [`Error::InvalidValue`] for a node that
    /// is not a copy node.
    #[doc(alias = "cudaGraphMemcpyNodeSetParams1D")]
    pub fn set_memcpy_node_params<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<()> {
        const CALL: &str = "cudaGraphMemcpyNodeSetParams1D";
        record((|| {
            let (params, bundle) =
                memcpy_params(self.shared.device, self.shared.generation, dst, src, CALL)?;
            self.set_copy(CALL, node, params, unkeyed(bundle))
        })())
    }

    /// Replaces a copy node's operands and region with a 2-D/3-D copy
    /// (`cudaGraphMemcpyNodeSetParams`), checked as
    /// [`add_memcpy_3d_node`](Self::add_memcpy_3d_node); the new operands are kept by the
    /// graph.
    ///
    /// # Errors
    /// As [`add_memcpy_3d_node`](Self::add_memcpy_3d_node); [`Error::InvalidValue`] for a node
    /// that is not a copy node.
    #[doc(alias = "cudaGraphMemcpyNodeSetParams")]
    pub fn set_memcpy_3d_node_params<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl PitchedSideMut<T> + ?Sized),
        src: &(impl PitchedSide<T> + ?Sized),
        region: &Copy3D,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphMemcpyNodeSetParams";
        record((|| {
            let (params, bundle) = memcpy_3d_params(
                self.shared.device,
                self.shared.generation,
                &*dst,
                src,
                region,
                CALL,
            )?;
            self.set_copy(CALL, node, params, unkeyed(bundle))
        })())
    }

    /// Adds a copy of `src` (one element in device memory) into the module variable `symbol`
    /// (`cudaGraphAddMemcpyNodeToSymbol`, device to device, the whole variable). The graph
    /// keeps `src` and the variable's module alive.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `src` is not one element; [`Error::DeviceMismatch`];
    /// [`Error::InvalidValue`] for host-visible memory.
    #[doc(alias = "cudaGraphAddMemcpyNodeToSymbol")]
    pub fn add_memcpy_node_to_symbol<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        symbol: &Symbol<T>,
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemcpyNodeToSymbol";
        record((|| {
            let (params, bundle) = to_symbol_params(
                self.shared.device,
                self.shared.generation,
                symbol,
                src,
                CALL,
            )?;
            self.add_node(CALL, deps, bundle, |a, out, g, d, n| {
                // SAFETY: `size_of::<T>()` bytes of live device memory on both sides (the
                // variable's size is `T`'s, checked when the handle was made), kept by the
                // bundle.
                unsafe { sys::cuGraphAddMemcpyNode(out, g, d, n, &params, a.ctx_raw()) }
            })
        })())
    }

    /// Adds a copy of the module variable `symbol` into `dst` (one element in device memory)
    /// (`cudaGraphAddMemcpyNodeFromSymbol`, device to device, the whole variable). The graph
    /// keeps `dst` and the variable's module alive.
    ///
    /// # Errors
    /// As [`add_memcpy_node_to_symbol`](Self::add_memcpy_node_to_symbol).
    #[doc(alias = "cudaGraphAddMemcpyNodeFromSymbol")]
    pub fn add_memcpy_node_from_symbol<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        symbol: &Symbol<T>,
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemcpyNodeFromSymbol";
        record((|| {
            let (params, bundle) = from_symbol_params(
                self.shared.device,
                self.shared.generation,
                dst,
                symbol,
                CALL,
            )?;
            self.add_node(CALL, deps, bundle, |a, out, g, d, n| {
                // SAFETY: as in `add_memcpy_node_to_symbol`, the other way round.
                unsafe { sys::cuGraphAddMemcpyNode(out, g, d, n, &params, a.ctx_raw()) }
            })
        })())
    }

    /// Makes a copy node copy `src` into the module variable `symbol`
    /// (`cudaGraphMemcpyNodeSetParamsToSymbol`); checked and kept as
    /// [`add_memcpy_node_to_symbol`](Self::add_memcpy_node_to_symbol).
    #[doc(alias = "cudaGraphMemcpyNodeSetParamsToSymbol")]
    pub fn set_memcpy_node_to_symbol<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        symbol: &Symbol<T>,
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<()> {
        const CALL: &str = "cudaGraphMemcpyNodeSetParamsToSymbol";
        record((|| {
            let (params, bundle) = to_symbol_params(
                self.shared.device,
                self.shared.generation,
                symbol,
                src,
                CALL,
            )?;
            self.set_copy(CALL, node, params, bundle)
        })())
    }

    /// Makes a copy node copy the module variable `symbol` into `dst`
    /// (`cudaGraphMemcpyNodeSetParamsFromSymbol`); checked and kept as
    /// [`add_memcpy_node_from_symbol`](Self::add_memcpy_node_from_symbol).
    #[doc(alias = "cudaGraphMemcpyNodeSetParamsFromSymbol")]
    pub fn set_memcpy_node_from_symbol<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        symbol: &Symbol<T>,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphMemcpyNodeSetParamsFromSymbol";
        record((|| {
            let (params, bundle) = from_symbol_params(
                self.shared.device,
                self.shared.generation,
                dst,
                symbol,
                CALL,
            )?;
            self.set_copy(CALL, node, params, bundle)
        })())
    }

    /// A host node's function and data pointers as the driver holds them
    /// (`cudaGraphHostNodeGetParams`). For a node added by this crate the function is the
    /// crate's trampoline and the data its closure; they are returned as plain values, never
    /// called or read here.
    #[doc(alias = "cudaGraphHostNodeGetParams")]
    pub fn host_node_params(&self, node: GraphNode) -> Result<sys::CUDA_HOST_NODE_PARAMS> {
        const CALL: &str = "cudaGraphHostNodeGetParams";
        record(self.query(CALL, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::Host, CALL)?;
            let mut p = sys::CUDA_HOST_NODE_PARAMS {
                fn_: None,
                userData: std::ptr::null_mut(),
            };
            // SAFETY: a live host node; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphHostNodeGetParams(raw, &mut p) },
                "cuGraphHostNodeGetParams",
            )?;
            Ok(p)
        }))
    }

    /// Replaces a host node's closure (`cudaGraphHostNodeSetParams`). The new closure is owned
    /// by the graph, as [`add_host_node`](Self::add_host_node)'s; the old one is kept too
    /// (clones and executables made before still call it).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a node that is not a host node; [`Error::ForeignGraphNode`].
    #[doc(alias = "cudaGraphHostNodeSetParams")]
    pub fn set_host_node_params<F: Fn() + Send + Sync + 'static>(
        &mut self,
        node: GraphNode,
        f: F,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphHostNodeSetParams";
        record((|| {
            self.check_kind(CALL, node, GraphNodeType::Host)?;
            let (params, token) = host_params(self.shared.device, f);
            self.set_with_bundle(CALL, node, vec![token], |_, raw| {
                // SAFETY: a live host node; the trampoline takes `userData` as the closure the
                // bundle keeps for as long as anything can call it.
                unsafe { sys::cuGraphHostNodeSetParams(raw, &params) }
            })
        })())
    }

    fn event_of(&self, call: &'static str, node: GraphNode, record: bool) -> Result<sys::CUevent> {
        let want = if record {
            GraphNodeType::EventRecord
        } else {
            GraphNodeType::EventWait
        };
        self.query(call, node, |a, raw| {
            Graph::expect_kind(a, raw, want, call)?;
            let mut ev: sys::CUevent = std::ptr::null_mut();
            // SAFETY: a live event node of the right kind; valid out-parameter.
            let r = unsafe {
                if record {
                    sys::cuGraphEventRecordNodeGetEvent(raw, &mut ev)
                } else {
                    sys::cuGraphEventWaitNodeGetEvent(raw, &mut ev)
                }
            };
            a.check(r, call)?;
            Ok(ev)
        })
    }

    /// The event an event record node records (`cudaGraphEventRecordNodeGetEvent`), as its
    /// raw handle: compare with [`Event::as_raw`]. The graph keeps that event alive.
    #[doc(alias = "cudaGraphEventRecordNodeGetEvent")]
    pub fn event_record_node_event(&self, node: GraphNode) -> Result<sys::CUevent> {
        record(self.event_of("cudaGraphEventRecordNodeGetEvent", node, true))
    }

    /// The event an event wait node waits for (`cudaGraphEventWaitNodeGetEvent`), as its raw
    /// handle: compare with [`Event::as_raw`]. The graph keeps that event alive.
    #[doc(alias = "cudaGraphEventWaitNodeGetEvent")]
    pub fn event_wait_node_event(&self, node: GraphNode) -> Result<sys::CUevent> {
        record(self.event_of("cudaGraphEventWaitNodeGetEvent", node, false))
    }

    fn set_event(
        &mut self,
        call: &'static str,
        node: GraphNode,
        event: &Arc<Event>,
        record: bool,
    ) -> Result<()> {
        check_event(self.shared.device, event, call)?;
        let (_pin, ev) = event.pinned_raw()?;
        if !context::is_live(self.shared.device, self.shared.generation) {
            return Err(Error::ContextDestroyed {
                what: "graph",
                device: self.shared.device,
            });
        }
        self.check_kind(
            call,
            node,
            if record {
                GraphNodeType::EventRecord
            } else {
                GraphNodeType::EventWait
            },
        )?;
        let token: Token = Box::new(event.clone());
        self.set_with_bundle(call, node, vec![token], |_, raw| {
            // SAFETY: a live event node of the right kind and a live event of the graph's
            // device (kept by the bundle from now on).
            unsafe {
                if record {
                    sys::cuGraphEventRecordNodeSetEvent(raw, ev)
                } else {
                    sys::cuGraphEventWaitNodeSetEvent(raw, ev)
                }
            }
        })
    }

    /// Makes an event record node record `event` instead (`cudaGraphEventRecordNodeSetEvent`).
    /// The graph keeps `event` alive (and the old one, for clones and executables made
    /// before).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] for another device's event; [`Error::InvalidValue`] for a
    /// node that is not an event record node.
    #[doc(alias = "cudaGraphEventRecordNodeSetEvent")]
    pub fn set_event_record_node_event(
        &mut self,
        node: GraphNode,
        event: &Arc<Event>,
    ) -> Result<()> {
        record(self.set_event("cudaGraphEventRecordNodeSetEvent", node, event, true))
    }

    /// Makes an event wait node wait for `event` instead (`cudaGraphEventWaitNodeSetEvent`).
    /// The graph keeps `event` alive.
    ///
    /// # Errors
    /// As [`set_event_record_node_event`](Self::set_event_record_node_event), for event wait
    /// nodes.
    #[doc(alias = "cudaGraphEventWaitNodeSetEvent")]
    pub fn set_event_wait_node_event(&mut self, node: GraphNode, event: &Arc<Event>) -> Result<()> {
        record(self.set_event("cudaGraphEventWaitNodeSetEvent", node, event, false))
    }

    /// A copy of the graph embedded in a child graph node (`cudaGraphChildGraphNodeGetGraph`
    /// followed by `cudaGraphClone`).
    ///
    /// The embedded graph belongs to the node: a handle to it could outlive the node or let
    /// it be changed under an executable's instantiation, so this returns an independent
    /// clone, which keeps what its nodes refer to as any graph does. (Change the embedded
    /// graph of an executable with
    /// [`GraphExec::set_child_graph_node_params`](super::GraphExec::set_child_graph_node_params).)
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a node that is not a child graph node, and for an embedded
    /// graph holding conditional nodes (the crate could not check the while loops of the
    /// copy's bodies).
    #[doc(alias = "cudaGraphChildGraphNodeGetGraph")]
    pub fn child_graph(&self, node: GraphNode) -> Result<Graph> {
        const CALL: &str = "cudaGraphChildGraphNodeGetGraph";
        record((|| {
            let raw = self.raw_nodes(CALL, &[node])?[0];
            let a = self.enter()?;
            let (copy, objects) = {
                let objects = self.shared.keeper().objects.lock();
                Graph::expect_kind(&a, raw, GraphNodeType::ChildGraph, CALL)?;
                let mut child: sys::CUgraph = std::ptr::null_mut();
                // SAFETY: a live child graph node; valid out-parameter. The handle is the
                // node's and is only read (cloned) under this graph's lock.
                a.check(
                    unsafe { sys::cuGraphChildGraphNodeGetGraph(raw, &mut child) },
                    "cuGraphChildGraphNodeGetGraph",
                )?;
                let mut copy: sys::CUgraph = std::ptr::null_mut();
                // SAFETY: the live embedded graph; valid out-parameter.
                a.check(
                    unsafe { sys::cuGraphClone(&mut copy, child) },
                    "cuGraphClone",
                )?;
                (copy, objects.clone())
            };
            // Owned from here: dropped (destroyed) on any error below.
            let mut clone = Graph::from_parts(&a, copy);
            let cond = has_conditional(&a, clone.shared.raw.0, 0);
            // (Released before the clone can be dropped, which enters the context itself.)
            drop(a);
            if cond? {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: "an embedded graph with conditional nodes".into(),
                    reason: "copies of graphs with conditional nodes (at any depth) are not \
                             handed out (the crate could not check the while loops of their \
                             bodies)",
                });
            }
            // The driver copied the embedded graph's references to the clone; it takes its own
            // to everything the parent keeps as well (a superset), so keeping them never
            // depends on that.
            clone.share_objects(&objects)?;
            Ok(clone)
        })())
    }

    fn ext_sem_get(
        &self,
        call: &'static str,
        node: GraphNode,
        signal: bool,
    ) -> Result<Vec<(sys::CUexternalSemaphore, u64)>> {
        let want = if signal {
            GraphNodeType::ExternalSemaphoreSignal
        } else {
            GraphNodeType::ExternalSemaphoreWait
        };
        self.query(call, node, |a, raw| {
            Graph::expect_kind(a, raw, want, call)?;
            // The parameters point into driver-owned arrays, valid while the node is unchanged
            // (read under the graph's lock, copied out at once).
            let (sems, params, n) = if signal {
                // SAFETY: all-zero is valid (null pointers, a count).
                let mut p: sys::CUDA_EXT_SEM_SIGNAL_NODE_PARAMS = unsafe { std::mem::zeroed() };
                // SAFETY: a live signal node; valid out-parameter.
                a.check(
                    unsafe { sys::cuGraphExternalSemaphoresSignalNodeGetParams(raw, &mut p) },
                    "cuGraphExternalSemaphoresSignalNodeGetParams",
                )?;
                let values: Vec<u64> = (0..p.numExtSems as usize)
                    // SAFETY: the driver's array of `numExtSems` parameter sets.
                    .map(|i| unsafe { (*p.paramsArray.add(i)).params.fence.value })
                    .collect();
                (p.extSemArray, values, p.numExtSems as usize)
            } else {
                // SAFETY: as above.
                let mut p: sys::CUDA_EXT_SEM_WAIT_NODE_PARAMS = unsafe { std::mem::zeroed() };
                // SAFETY: a live wait node; valid out-parameter.
                a.check(
                    unsafe { sys::cuGraphExternalSemaphoresWaitNodeGetParams(raw, &mut p) },
                    "cuGraphExternalSemaphoresWaitNodeGetParams",
                )?;
                let values: Vec<u64> = (0..p.numExtSems as usize)
                    // SAFETY: the driver's array of `numExtSems` parameter sets.
                    .map(|i| unsafe { (*p.paramsArray.add(i)).params.fence.value })
                    .collect();
                (p.extSemArray, values, p.numExtSems as usize)
            };
            Ok((0..n)
                // SAFETY: the driver's array of `numExtSems` handles.
                .map(|i| (unsafe { *sems.add(i) }, params[i]))
                .collect())
        })
    }

    /// Adds a signal of external semaphores (`cudaGraphAddExternalSemaphoresSignalNode`): once
    /// the node's dependencies are done, each semaphore is signalled, a timeline semaphore to
    /// its value (ignored for a binary one). The graph keeps the semaphores alive.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for an empty list; [`Error::DeviceMismatch`] for another
    /// device's semaphore.
    #[doc(alias = "cudaGraphAddExternalSemaphoresSignalNode")]
    pub fn add_external_semaphores_signal_node(
        &mut self,
        deps: &[GraphNode],
        semaphores: &[(&Arc<ExternalSemaphore>, u64)],
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddExternalSemaphoresSignalNode";
        record((|| {
            let (mut raws, values, tokens) =
                semaphore_parts(self.shared.device, self.shared.generation, semaphores, CALL)?;
            let params = signal_params(&values);
            let p = sys::CUDA_EXT_SEM_SIGNAL_NODE_PARAMS {
                extSemArray: raws.as_mut_ptr(),
                paramsArray: params.as_ptr(),
                numExtSems: raws.len() as u32,
            };
            self.add_node(CALL, deps, tokens, |_, out, g, d, n| {
                // SAFETY: live semaphores of the graph's context (kept by the bundle), one
                // parameter set each; the arrays live for the call (the driver copies them).
                unsafe { sys::cuGraphAddExternalSemaphoresSignalNode(out, g, d, n, &p) }
            })
        })())
    }

    /// Adds a wait on external semaphores (`cudaGraphAddExternalSemaphoresWaitNode`): later
    /// nodes wait until each semaphore is signalled, a timeline semaphore until it reaches its
    /// value. The graph keeps the semaphores alive.
    ///
    /// # Errors
    /// As [`add_external_semaphores_signal_node`](Self::add_external_semaphores_signal_node).
    #[doc(alias = "cudaGraphAddExternalSemaphoresWaitNode")]
    pub fn add_external_semaphores_wait_node(
        &mut self,
        deps: &[GraphNode],
        semaphores: &[(&Arc<ExternalSemaphore>, u64)],
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddExternalSemaphoresWaitNode";
        record((|| {
            let (mut raws, values, tokens) =
                semaphore_parts(self.shared.device, self.shared.generation, semaphores, CALL)?;
            let params = wait_params(&values);
            let p = sys::CUDA_EXT_SEM_WAIT_NODE_PARAMS {
                extSemArray: raws.as_mut_ptr(),
                paramsArray: params.as_ptr(),
                numExtSems: raws.len() as u32,
            };
            self.add_node(CALL, deps, tokens, |_, out, g, d, n| {
                // SAFETY: as in `add_external_semaphores_signal_node`.
                unsafe { sys::cuGraphAddExternalSemaphoresWaitNode(out, g, d, n, &p) }
            })
        })())
    }

    /// A signal node's semaphores (raw handles: compare with
    /// [`ExternalSemaphore::as_raw`]) and values
    /// (`cudaGraphExternalSemaphoresSignalNodeGetParams`).
    #[doc(alias = "cudaGraphExternalSemaphoresSignalNodeGetParams")]
    pub fn external_semaphores_signal_node_params(
        &self,
        node: GraphNode,
    ) -> Result<Vec<(sys::CUexternalSemaphore, u64)>> {
        record(self.ext_sem_get("cudaGraphExternalSemaphoresSignalNodeGetParams", node, true))
    }

    /// A wait node's semaphores (raw handles) and values
    /// (`cudaGraphExternalSemaphoresWaitNodeGetParams`).
    #[doc(alias = "cudaGraphExternalSemaphoresWaitNodeGetParams")]
    pub fn external_semaphores_wait_node_params(
        &self,
        node: GraphNode,
    ) -> Result<Vec<(sys::CUexternalSemaphore, u64)>> {
        record(self.ext_sem_get("cudaGraphExternalSemaphoresWaitNodeGetParams", node, false))
    }

    /// Replaces a signal node's semaphores and values
    /// (`cudaGraphExternalSemaphoresSignalNodeSetParams`); the graph keeps the new semaphores
    /// alive.
    ///
    /// # Errors
    /// As [`add_external_semaphores_signal_node`](Self::add_external_semaphores_signal_node);
    /// [`Error::InvalidValue`] for a node of another kind.
    #[doc(alias = "cudaGraphExternalSemaphoresSignalNodeSetParams")]
    pub fn set_external_semaphores_signal_node_params(
        &mut self,
        node: GraphNode,
        semaphores: &[(&Arc<ExternalSemaphore>, u64)],
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExternalSemaphoresSignalNodeSetParams";
        record((|| {
            let (mut raws, values, tokens) =
                semaphore_parts(self.shared.device, self.shared.generation, semaphores, CALL)?;
            let params = signal_params(&values);
            let p = sys::CUDA_EXT_SEM_SIGNAL_NODE_PARAMS {
                extSemArray: raws.as_mut_ptr(),
                paramsArray: params.as_ptr(),
                numExtSems: raws.len() as u32,
            };
            self.check_kind(CALL, node, GraphNodeType::ExternalSemaphoreSignal)?;
            self.set_with_bundle(CALL, node, tokens, |_, raw| {
                // SAFETY: a live signal node; semaphores and arrays as in the add.
                unsafe { sys::cuGraphExternalSemaphoresSignalNodeSetParams(raw, &p) }
            })
        })())
    }

    /// Replaces a wait node's semaphores and values
    /// (`cudaGraphExternalSemaphoresWaitNodeSetParams`); the graph keeps the new semaphores
    /// alive.
    ///
    /// # Errors
    /// As [`set_external_semaphores_signal_node_params`](Self::set_external_semaphores_signal_node_params).
    #[doc(alias = "cudaGraphExternalSemaphoresWaitNodeSetParams")]
    pub fn set_external_semaphores_wait_node_params(
        &mut self,
        node: GraphNode,
        semaphores: &[(&Arc<ExternalSemaphore>, u64)],
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExternalSemaphoresWaitNodeSetParams";
        record((|| {
            let (mut raws, values, tokens) =
                semaphore_parts(self.shared.device, self.shared.generation, semaphores, CALL)?;
            let params = wait_params(&values);
            let p = sys::CUDA_EXT_SEM_WAIT_NODE_PARAMS {
                extSemArray: raws.as_mut_ptr(),
                paramsArray: params.as_ptr(),
                numExtSems: raws.len() as u32,
            };
            self.check_kind(CALL, node, GraphNodeType::ExternalSemaphoreWait)?;
            self.set_with_bundle(CALL, node, tokens, |_, raw| {
                // SAFETY: a live wait node; semaphores and arrays as in the add.
                unsafe { sys::cuGraphExternalSemaphoresWaitNodeSetParams(raw, &p) }
            })
        })())
    }

    /// A memory allocation node's address and size in bytes (`cudaGraphMemAllocNodeGetParams`;
    /// the address is only meaningful inside the graph's launches, see
    /// [`GraphMem`](super::GraphMem)).
    #[doc(alias = "cudaGraphMemAllocNodeGetParams")]
    pub fn mem_alloc_node_params(&self, node: GraphNode) -> Result<(u64, usize)> {
        const CALL: &str = "cudaGraphMemAllocNodeGetParams";
        record(self.query(CALL, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::MemAlloc, CALL)?;
            // SAFETY: all-zero is a valid value (integers, null pointers, C enums whose 0 is
            // declared).
            let mut p: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
            // SAFETY: a live allocation node; valid out-parameter (the access descriptors it
            // points to are the driver's and are not read).
            a.check(
                unsafe { sys::cuGraphMemAllocNodeGetParams(raw, &mut p) },
                "cuGraphMemAllocNodeGetParams",
            )?;
            Ok((p.dptr, p.bytesize))
        }))
    }

    /// The address a memory free node frees (`cudaGraphMemFreeNodeGetParams`).
    #[doc(alias = "cudaGraphMemFreeNodeGetParams")]
    pub fn mem_free_node_params(&self, node: GraphNode) -> Result<u64> {
        const CALL: &str = "cudaGraphMemFreeNodeGetParams";
        record(self.query(CALL, node, |a, raw| {
            Graph::expect_kind(a, raw, GraphNodeType::MemFree, CALL)?;
            let mut p = 0u64;
            // SAFETY: a live free node; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphMemFreeNodeGetParams(raw, &mut p) },
                "cuGraphMemFreeNodeGetParams",
            )?;
            Ok(p)
        }))
    }
}

/// Whether the live graph `g` holds a conditional node, itself or in an embedded child graph
/// at any depth (`depth` levels down already).
pub(crate) fn has_conditional(a: &Active, g: sys::CUgraph, depth: u32) -> Result<bool> {
    if depth > 64 {
        // Deeper nesting than any graph the crate can build: treated as "maybe".
        return Ok(true);
    }
    // SAFETY: a live graph; the buffer holds `n` nodes (or is null for the count).
    let nodes = node_list(a, "cuGraphGetNodes", None, |p, n| unsafe {
        sys::cuGraphGetNodes(g, p, n)
    })?;
    for n in nodes {
        match raw_node_type(a, n.as_raw())? {
            GraphNodeType::Conditional => return Ok(true),
            GraphNodeType::ChildGraph => {
                let mut child: sys::CUgraph = std::ptr::null_mut();
                // SAFETY: a live child graph node of a live graph; valid out-parameter; the
                // handle is only read.
                a.check(
                    unsafe { sys::cuGraphChildGraphNodeGetGraph(n.as_raw(), &mut child) },
                    "cuGraphChildGraphNodeGetGraph",
                )?;
                if has_conditional(a, child, depth + 1)? {
                    return Ok(true);
                }
            }
            _ => {}
        }
    }
    Ok(false)
}

/// Checks an event for a node of a graph on `device`.
pub(crate) fn check_event(device: i32, event: &Event, call: &'static str) -> Result<()> {
    if event.device().ordinal() != device {
        return Err(Error::DeviceMismatch {
            call,
            what: "the event",
            found: event.device().ordinal(),
            expected: device,
        });
    }
    Ok(())
}

/// Signal parameters, one per value (the fence value; flags and the rest zero).
pub(crate) fn signal_params(values: &[u64]) -> Vec<sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS> {
    values
        .iter()
        .map(|&v| {
            // SAFETY: all-zero is valid signal parameters (integers only).
            let mut p: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
            p.params.fence.value = v;
            p
        })
        .collect()
}

/// Wait parameters, one per value.
pub(crate) fn wait_params(values: &[u64]) -> Vec<sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS> {
    values
        .iter()
        .map(|&v| {
            // SAFETY: all-zero is valid wait parameters (integers only).
            let mut p: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
            p.params.fence.value = v;
            p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle made as `GraphShared::handle` makes it.
    fn handle(e: &Extra, raw: usize) -> GraphNode {
        GraphNode {
            raw,
            graph: 1,
            stamp: e.stamp(raw),
        }
    }

    #[test]
    fn a_destroyed_nodes_handle_stays_dead_when_a_new_node_takes_its_address() {
        let e = Extra::default();
        let old = handle(&e, 0x10);
        let other = handle(&e, 0x20);
        assert!(!e.is_destroyed(&old));
        assert_eq!(e.destroys(), 0);
        e.note_destroyed(0x10);
        assert!(e.is_destroyed(&old));
        assert!(!e.is_destroyed(&other));
        assert_eq!(e.destroys(), 1);
        // A new node at the same address: its handle is live, the old one stays dead, and the
        // two are different handles.
        let new = handle(&e, 0x10);
        assert!(!e.is_destroyed(&new));
        assert!(e.is_destroyed(&old));
        assert_ne!(old, new);
        assert_eq!(old.raw, new.raw);
        // Destroyed in turn: both dead; a third node there is live again.
        e.note_destroyed(0x10);
        assert!(e.is_destroyed(&new) && e.is_destroyed(&old));
        let third = handle(&e, 0x10);
        assert!(!e.is_destroyed(&third));
        assert!(third.stamp > new.stamp && new.stamp > old.stamp);
        // Another address's destruction changes nothing here.
        e.note_destroyed(0x20);
        assert!(e.is_destroyed(&other));
        assert!(!e.is_destroyed(&third));
        assert_eq!(e.destroys(), 3);
        let msg = destroyed_node("cudaGraphKernelNodeGetParams", 0x10).to_string();
        assert!(msg.contains("0x10") && msg.contains("destroyed"), "{msg}");
    }

    #[test]
    fn user_references_taken_by_hand_are_counted_and_never_over_released() {
        let e = Extra::default();
        assert!(!e.take_user_ref(7));
        e.note_user_ref(7);
        e.note_user_ref(7);
        assert!(e.take_user_ref(7));
        assert!(e.take_user_ref(7));
        assert!(!e.take_user_ref(7));
        e.untake_user_ref(7);
        assert!(e.take_user_ref(7));
        assert!(!e.take_user_ref(8));
    }

    #[test]
    fn memset_values_come_back_with_their_element_size() {
        assert_eq!(memset_value(1, 0x1ab), Some(MemsetValue::U8(0xab)));
        assert_eq!(memset_value(2, 0x1_2345), Some(MemsetValue::U16(0x2345)));
        assert_eq!(
            memset_value(4, 0xdead_beef),
            Some(MemsetValue::U32(0xdead_beef))
        );
        assert_eq!(memset_value(3, 0), None);
        for v in [
            MemsetValue::U8(9),
            MemsetValue::U16(999),
            MemsetValue::U32(1 << 30),
        ] {
            let (elem, raw) = v.parts();
            assert_eq!(memset_value(elem as u32, raw), Some(v));
        }
    }

    #[test]
    fn priorities_outside_the_device_range_are_refused_naming_the_value() {
        // The H100's range: least 0, greatest -5.
        for p in [-5, -3, 0] {
            assert!(check_priority(p, (0, -5)).is_ok(), "{p}");
        }
        for p in [-6, 1, i32::MIN, i32::MAX] {
            let e = check_priority(p, (0, -5)).unwrap_err().to_string();
            assert!(e.contains(&p.to_string()) && e.contains("range"), "{e}");
        }
    }

    #[test]
    fn semaphore_parameters_carry_each_value() {
        let vals = [3u64, u64::MAX, 0];
        let s = signal_params(&vals);
        let w = wait_params(&vals);
        for i in 0..3 {
            assert_eq!(s[i].params.fence.value, vals[i]);
            assert_eq!(w[i].params.fence.value, vals[i]);
            assert_eq!(s[i].flags, 0);
        }
        let e = match semaphore_parts(0, 1, &[], "cudaGraphAddExternalSemaphoresSignalNode") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("an empty list was accepted"),
        };
        assert!(e.contains("at least one"), "{e}");
    }

    #[test]
    fn instantiate_flags_keep_unknown_bits() {
        let f = InstantiateFlags::from_bits_retain(1 | 8 | 64);
        assert!(f.contains(InstantiateFlags::AUTO_FREE_ON_LAUNCH));
        assert!(f.contains(InstantiateFlags::USE_NODE_PRIORITY));
        assert!(!f.contains(InstantiateFlags::UPLOAD));
        assert_eq!(f.bits(), 73);
    }

    #[test]
    fn access_policy_windows_round_trip_through_the_attribute_union() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        use crate::AccessProperty::*;
        let props = [Normal, Streaming, Persisting];
        for _ in 0..100 {
            let w = AccessPolicyWindow {
                base: next() & 0x0000_7fff_ffff_ff00,
                num_bytes: (next() % (1 << 27)) as usize,
                hit_ratio: (next() % 1001) as f32 / 1000.0,
                hit_prop: props[(next() % 3) as usize],
                miss_prop: props[(next() % 3) as usize],
            };
            let v: sys::CUkernelNodeAttrValue = w.to_sys();
            assert_eq!(AccessPolicyWindow::from_value(&v), w);
        }
    }

    #[test]
    fn one_element_copies_to_and_from_variables() {
        let p = copy_1d(0x2000, 0x1000, 12);
        assert_eq!(
            (p.dstDevice, p.srcDevice, p.WidthInBytes),
            (0x2000, 0x1000, 12)
        );
        assert_eq!((p.Height, p.Depth), (1, 1));
    }
}
