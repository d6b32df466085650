//! Executable graphs: instantiate, upload, launch, whole-graph and per-node updates.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::Arc;

use super::keep::{self, Accumulator, ExecRefs, KeyedBundle};
use super::nodes::{
    alloc_key, check_kernel_node, function_key, host_params, kernel_params, memcpy_3d_params,
    memcpy_params, memset_params,
};
use super::{raw_node_type, Graph, GraphNode, GraphNodeType, GraphShared, MemsetValue};
use crate::context::{self, Active};
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, Result};
use crate::launch::LaunchConfig;
use crate::memory::{DeviceRead, DeviceRepr, DeviceWrite};
use crate::module::{Function, KernelArg, What};
use crate::stream::Stream;

mod more;

/// How [`Graph::instantiate_with`] instantiates (`cudaGraphInstantiateWithParams` flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct InstantiateOptions<'s> {
    /// Free graph allocations left unfreed before each relaunch
    /// (`cudaGraphInstantiateFlagAutoFreeOnLaunch`). Graphs of this crate free every
    /// allocation they make (see [`Graph::add_mem_alloc_node`]), so this changes nothing for
    /// them; it is accepted for the runtime's sake.
    pub auto_free_on_launch: bool,
    /// Instantiate for launches from the device as well (`cudaGraphInstantiateFlagDeviceLaunch`).
    /// The crate launches such an executable from the host only; the flag is there for graphs
    /// shared with device code. Refused with [`Error::InvalidValue`] together with
    /// `auto_free_on_launch`, and for graphs with nodes the driver cannot launch from the
    /// device (host, event, memory allocation and free, external semaphore and batched
    /// memory-operation nodes); a device or driver without support gives
    /// [`Error::GraphInstantiate`].
    pub device_launch: bool,
    /// Launch nodes with their per-node priorities (`cudaGraphInstantiateFlagUseNodePriority`).
    pub use_node_priority: bool,
    /// Upload the executable in this stream as part of instantiation
    /// (`cudaGraphInstantiateFlagUpload` with `uploadStream`).
    pub upload: Option<&'s Stream>,
}

/// `CUDA_GRAPH_INSTANTIATE_PARAMS` with its C-enum field as an integer, so that a value the
/// bindings do not know never becomes an invalid Rust enum.
#[repr(C)]
struct InstantiateParams {
    flags: u64,
    upload_stream: sys::CUstream,
    err_node: sys::CUgraphNode,
    result: u32,
}

/// `CUgraphExecUpdateResultInfo`, read the same way.
#[repr(C)]
struct UpdateResultInfo {
    result: u32,
    error_node: sys::CUgraphNode,
    error_from_node: sys::CUgraphNode,
}

const _: () = {
    assert!(size_of::<InstantiateParams>() == size_of::<sys::CUDA_GRAPH_INSTANTIATE_PARAMS>());
    assert!(size_of::<UpdateResultInfo>() == size_of::<sys::CUgraphExecUpdateResultInfo>());
};

/// What a `cudaGraphInstantiateResult` number means.
pub(crate) fn instantiate_reason(result: u32) -> &'static str {
    match result {
        0 => "success",
        1 => "an unexpected error",
        2 => "the graph's structure is invalid (a cycle, or a node used in a way not allowed)",
        3 => "a node's operation is not supported here (e.g. for device launch)",
        4 => "nodes of several contexts or devices, which this instantiation does not support",
        5 => "a conditional handle that no conditional node uses",
        _ => "a reason this crate does not know",
    }
}

/// Whether the driver can launch a node of this kind from the device.
pub(crate) fn device_launchable(kind: GraphNodeType) -> bool {
    matches!(
        kind,
        GraphNodeType::Kernel
            | GraphNodeType::Memcpy
            | GraphNodeType::Memset
            | GraphNodeType::ChildGraph
            | GraphNodeType::Empty
            | GraphNodeType::Conditional
    )
}

/// What a `cudaGraphExecUpdateResult` number means.
pub(crate) fn update_reason(result: u32) -> &'static str {
    match result {
        0 => "success",
        1 => "an invalid value or an unspecified reason",
        2 => "the topology changed",
        3 => "a node's type changed",
        4 => "a kernel node's function changed in a way not allowed",
        5 => "parameters changed in a way not supported",
        6 => "something about the node is not supported",
        7 => "a kernel node's function changed in an unsupported way",
        8 => "node attributes changed in a way not supported",
        _ => "a reason this crate does not know",
    }
}

/// An executable graph (`cudaGraphExec_t`), instantiated from a [`Graph`] and launched on
/// streams.
///
/// It keeps what its nodes refer to alive (through references of its own to the graph's user
/// objects, see the [module docs](super)), and its source graph, whose nodes name its nodes in
/// per-node updates. Dropping it while a launch runs is safe: its launches are tracked as uses,
/// and it is destroyed, and what the launches use released, once they are done.
///
/// `Send` but not `Sync`: the driver does not synchronise an executable's calls.
pub struct GraphExec {
    raw: Raw<sys::CUgraphExec_st>,
    device: i32,
    /// The state of device `device` (for the short kernel-node update's entry).
    dev: &'static context::DeviceState,
    generation: u64,
    source: Arc<GraphShared>,
    /// How many nodes of `source` were destroyed when the executable was made: a handle with a
    /// later stamp names a node added since at a destroyed node's address, which is none of
    /// the executable's (see `more::Extra`).
    destroys: u64,
    /// A snapshot of the graph's references to its user objects (the driver's executable
    /// holds none, see `keep::Refs`) and the tokens of per-node updates; released once the
    /// launches are done. (`None` only inside `drop`.)
    kept: Option<ExecRefs>,
    /// Where it was launched (no memory: its uses are the launches), so that its destruction
    /// runs after them, off the dropping thread (the driver documents that it defers the
    /// destruction of an executable in flight; the crate does not rely on it).
    launches: crate::queue::LocalUses,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for GraphExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec")
            .field("raw", &self.raw.0)
            .field("device", &self.device)
            .finish()
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        let raw = self.raw;
        // What the nodes refer to goes once no launch runs.
        let kept = self.kept.take();
        let destroy = move |a: &Active| {
            // SAFETY: the executable is live and this is its only handle; its launches are
            // done (no point left to wait for, or the waits of the deferred free).
            keep::relaxed(|| {
                a.check(
                    unsafe { sys::cuGraphExecDestroy(raw.get()) },
                    "cuGraphExecDestroy",
                )
            })
        };
        const DURING: &str = "destroying an executable graph";
        let waits = self.launches.take_points();
        if waits.is_empty() {
            context::release(self.device, self.generation, DURING, destroy);
            drop(kept);
        } else {
            crate::queue::defer_free(self.device, self.generation, waits, DURING, move |a| {
                let r = a.map_or(Ok(()), destroy);
                release_on_a_user_thread(kept);
                r
            });
        }
    }
}

/// The error for a node added to the source graph after the executable was made, at the address
/// of a node destroyed since: the driver would take it for the destroyed node's copy in the
/// executable.
#[cold]
fn added_since(call: &'static str, node: GraphNode) -> Error {
    Error::InvalidValue {
        what: call,
        value: format!("graph node {:#x}", node.raw),
        reason: "the node was added to the graph after the executable was instantiated (at a \
                 destroyed node's address): it is not one of the executable's nodes",
    }
}

/// The call a kernel-node update of an executable names in its errors.
const KERNEL_NODE_UPDATE: &str = "cudaGraphExecKernelNodeSetParams";

/// What a node update that finds its node destroyed under the lock names as the call.
const CALL_NODE_UPDATE: &str = "an executable graph's node update";

/// The tokens of per-node updates in an executable's `kept` (a function of the field alone, so
/// that other fields stay borrowable beside it).
pub(crate) fn acc_of(kept: &mut Option<ExecRefs>) -> &mut keep::Kept {
    &mut kept.as_mut().expect("taken only by drop").acc
}

/// Releases what an executable kept from the reclaimer thread by handing it to the next call of
/// the crate on a user thread (as a user object's destructor does): the tokens may own host
/// memory, whose free must not run at an arbitrary later time on the reclaimer (see
/// `queue::yards`), and host closures, whose drop may panic.
fn release_on_a_user_thread(kept: Option<ExecRefs>) {
    if let Some(k) = kept {
        context::defer_release(move || drop(k));
    }
}

impl Graph {
    /// Instantiates the graph (`cudaGraphInstantiate`, no flags).
    ///
    /// # Errors
    /// The driver's error for a graph that cannot be instantiated.
    #[doc(alias = "cudaGraphInstantiate")]
    pub fn instantiate(&self) -> Result<GraphExec> {
        self.instantiate_with(&InstantiateOptions::default())
    }

    /// Instantiates the graph with options (`cudaGraphInstantiateWithParams`).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when the upload stream is another device's; the driver's error
    /// for a graph that cannot be instantiated.
    #[doc(alias = "cudaGraphInstantiateWithParams")]
    #[doc(alias = "cudaGraphInstantiateWithFlags")]
    pub fn instantiate_with(&self, options: &InstantiateOptions<'_>) -> Result<GraphExec> {
        const CALL: &str = "cudaGraphInstantiateWithParams";
        record((|| {
            let (device, generation) = (self.shared.device, self.shared.generation);
            let mut flags = 0u64;
            if options.auto_free_on_launch {
                flags |= 1;
            }
            if options.device_launch {
                if options.auto_free_on_launch {
                    return Err(Error::InvalidValue {
                        what: CALL,
                        value: "device_launch with auto_free_on_launch".into(),
                        reason: "the runtime does not allow both flags together",
                    });
                }
                for node in self.nodes()? {
                    let kind = self.node_type(node)?;
                    if !device_launchable(kind) {
                        return Err(Error::InvalidValue {
                            what: CALL,
                            value: format!("a {kind:?} node ({:#x})", node.raw),
                            reason: "graphs instantiated for device launch may hold only \
                                     kernel, copy, memset, child graph, empty and conditional \
                                     nodes",
                        });
                    }
                }
                flags |= 4;
            }
            if options.use_node_priority {
                flags |= 8;
            }
            let lane = match options.upload {
                Some(s) => {
                    if s.inner.device != device {
                        return Err(Error::DeviceMismatch {
                            call: CALL,
                            what: "the upload stream",
                            found: s.inner.device,
                            expected: device,
                        });
                    }
                    flags |= 2;
                    Some(s.lane()?)
                }
                None => None,
            };
            self.not_body(CALL)?;
            self.check_all_freed(CALL)?;
            let a = context::enter_handle(device, generation, "graph")?;
            let g = self.shared.raw.0;
            let objects = self.shared.objects.lock();
            // Under the lock held until the driver has instantiated: a body handle on another
            // thread cannot add or destroy a body's node in between.
            self.check_while_bodies(&a, &objects, CALL)?;
            let destroys = self.shared.extra.destroys();
            // The executable keeps a snapshot of the graph's references (no driver call; the
            // driver's graph holds none of them, see `keep::Refs`), and references of its own
            // to the user objects the graph holds by hand.
            let kept = ExecRefs {
                refs: objects.clone(),
                hand: self.shared.hand_refs(&a)?,
                acc: Accumulator::default(),
            };
            let mut exec: sys::CUgraphExec = std::ptr::null_mut();
            let mut params = InstantiateParams {
                flags,
                upload_stream: std::ptr::null_mut(),
                err_node: std::ptr::null_mut(),
                result: 0,
            };
            let mut instantiate = |a: &Active, stream: sys::CUstream| {
                params.upload_stream = stream;
                let p = (&mut params as *mut InstantiateParams).cast();
                // SAFETY: live graph; valid out-parameters of the driver's layout (asserted
                // above); the upload stream, if any, is live in this context.
                a.check(
                    unsafe { sys::cuGraphInstantiateWithParams(&mut exec, g, p) },
                    "cuGraphInstantiateWithParams",
                )
            };
            let r = match &lane {
                // The upload is work queued on the stream: through the enqueue path.
                Some(l) => {
                    a.expect_generation(l.a.generation(), "stream")?;
                    l.submit(CALL, &[], instantiate)
                }
                None => instantiate(&a, std::ptr::null_mut()),
            };
            drop(objects);
            if let Err(e) = r {
                // The driver's reason, when it gave one.
                return Err(match (e.code(), params.result) {
                    (code, result) if result != 0 => Error::GraphInstantiate {
                        call: CALL,
                        result,
                        reason: instantiate_reason(result),
                        node: params.err_node as usize,
                        code,
                    },
                    _ => e,
                });
            }
            Ok(GraphExec {
                raw: Raw(exec),
                device,
                dev: a.dev,
                generation,
                source: self.shared.clone(),
                destroys,
                kept: Some(kept),
                launches: crate::queue::LocalUses::default(),
                _not_sync: PhantomData,
            })
        })())
    }
}

impl GraphExec {
    /// The raw handle (`CUgraphExec`).
    pub fn as_raw(&self) -> sys::CUgraphExec {
        self.raw.0
    }

    /// The device the executable runs on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.device)
    }

    fn check_stream(&self, a: &Active, call: &'static str) -> Result<()> {
        let (device, generation) = a.id();
        if device != self.device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the stream",
                found: device,
                expected: self.device,
            });
        }
        if generation != self.generation {
            return Err(Error::ContextDestroyed {
                what: "executable graph",
                device,
            });
        }
        Ok(())
    }

    /// Launches the graph on `stream` (`cudaGraphLaunch`): ordered after earlier work in the
    /// stream, and later work waits for the whole graph. Launches of one executable run one at
    /// a time, in launch order, even on different streams. Does not block the host.
    ///
    /// Everything the graph refers to stays alive until the launch is done, whatever is dropped
    /// meanwhile (the executable and its graph included).
    ///
    /// # Errors
    /// [`Error::WrongDevice`] when the stream is not the current device's, as libcudart;
    /// [`Error::DeviceMismatch`] when it is not the executable's.
    #[doc(alias = "cudaGraphLaunch")]
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "cudaGraphLaunch";
        record((|| {
            let lane = stream.lane_for_submit(CALL)?;
            self.check_stream(&lane.a, CALL)?;
            let e = self.raw;
            lane.submit_launch(CALL, &self.launches, |a, raw| {
                // SAFETY: live executable and stream of the current context; what the graph
                // uses is kept by the executable's references, released only after its
                // launches (noted here) are done.
                a.check(unsafe { sys::cuGraphLaunch(e.get(), raw) }, "cuGraphLaunch")
            })
        })())
    }

    /// Uploads the executable to the device in `stream` (`cudaGraphUpload`), so that a later
    /// launch starts sooner. Does not block the host.
    #[doc(alias = "cudaGraphUpload")]
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "cudaGraphUpload";
        record((|| {
            let lane = stream.lane()?;
            self.check_stream(&lane.a, CALL)?;
            let e = self.raw;
            lane.submit_launch(CALL, &self.launches, |a, raw| {
                // SAFETY: live executable and stream of the current context.
                a.check(unsafe { sys::cuGraphUpload(e.get(), raw) }, "cuGraphUpload")
            })
        })())
    }

    /// Updates the executable's nodes to the parameters of `graph`'s (`cudaGraphExecUpdate`),
    /// for its future launches; launches in flight keep the old parameters, and what those
    /// refer to stays alive until they are done.
    ///
    /// `graph` must have the executable's topology (node count, kinds, dependencies in the same
    /// order); what may change is the driver's rule (kernel functions and arguments, memset
    /// and copy operands of the same device...).
    ///
    /// # Errors
    /// [`Error::GraphExecUpdate`] with the driver's reason and the offending node when the
    /// update is refused (the executable is then unchanged); [`Error::DeviceMismatch`] for
    /// another device's graph.
    #[doc(alias = "cudaGraphExecUpdate")]
    pub fn update(&mut self, graph: &Graph) -> Result<()> {
        const CALL: &str = "cudaGraphExecUpdate";
        record((|| {
            if graph.shared.device != self.device {
                return Err(Error::DeviceMismatch {
                    call: CALL,
                    what: "the graph",
                    found: graph.shared.device,
                    expected: self.device,
                });
            }
            if graph.shared.generation != self.generation {
                return Err(Error::ContextDestroyed {
                    what: "graph or executable graph",
                    device: self.device,
                });
            }
            graph.not_body(CALL)?;
            if graph.has_mem_nodes() || self.source.has_mem_nodes() {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: "a graph with memory allocation or free nodes".into(),
                    reason: "executables of graphs with memory nodes are not updated as a \
                             whole (kernel arguments would name another graph's memory): \
                             instantiate the new graph instead",
                });
            }
            let a = context::enter_handle(self.device, self.generation, "executable graph")?;
            let g = graph.shared.raw.0;
            // Both graphs locked, in the global order (one lock when `graph` is the source):
            // the driver's update reads the new graph and changes the executable, whose
            // per-node calls the source's lock serialises, and neither graph changes meanwhile.
            let (objects, source_lock) = super::more::lock_pair(&graph.shared, &self.source);
            // Under the locks held until the driver has updated: a body handle on another
            // thread cannot add or destroy a body's node in between.
            graph.check_while_bodies(&a, &objects, CALL)?;
            // A snapshot of the new graph's references, and references to the user objects it
            // holds by hand (an accumulator is added below).
            let refs = objects.clone();
            let hand = graph.shared.hand_refs(&a)?;
            // Decided before the driver's call (whose work leaves little of the crate's data in
            // the caches), neither can change meanwhile (`&mut self`): whether the per-node
            // updates' accumulator can be kept (it holds nothing, and nothing else holds it: a
            // sweep of whole updates then allocates nothing), and the launches still in flight
            // (a point that completes meanwhile only defers the release of the old references).
            let reuse = acc_of(&mut self.kept).is_empty();
            let waits = self.launches.points();
            let mut info = UpdateResultInfo {
                result: 0,
                error_node: std::ptr::null_mut(),
                error_from_node: std::ptr::null_mut(),
            };
            // SAFETY: live executable and graph of this context; the out-parameter has the
            // driver's layout (asserted above).
            let r = driver::rc(unsafe {
                sys::cuGraphExecUpdate_v2(
                    self.raw.0,
                    g,
                    (&mut info as *mut UpdateResultInfo).cast(),
                )
            });
            drop((objects, source_lock));
            match r {
                0 => {
                    // What the old nodes referred to goes once the launches so far are done.
                    let ExecRefs {
                        refs: old_refs,
                        hand: old_hand,
                        acc: old_acc,
                    } = self.kept.take().expect("taken only by drop");
                    let (acc, old_acc) = if reuse {
                        (old_acc, None)
                    } else {
                        (Accumulator::default(), Some(old_acc))
                    };
                    self.kept = Some(ExecRefs { refs, hand, acc });
                    if waits.is_empty() {
                        // No launch in flight: released here.
                        drop((old_refs, old_hand, old_acc));
                        return Ok(());
                    }
                    crate::queue::defer_free(
                        self.device,
                        self.generation,
                        waits,
                        "releasing what an updated executable graph referred to",
                        move |_| {
                            context::defer_release(move || drop((old_refs, old_hand, old_acc)));
                            Ok(())
                        },
                    );
                    Ok(())
                }
                910 => Err(Error::GraphExecUpdate {
                    result: info.result,
                    reason: update_reason(info.result),
                    node: info.error_node as usize,
                    from_node: info.error_from_node as usize,
                }),
                code => Err(a.dev.note(Error::from_driver(code, "cuGraphExecUpdate"))),
            }
        })())
    }

    fn own_node(&self, node: GraphNode, call: &'static str) -> Result<sys::CUgraphNode> {
        // A handle of a node destroyed in the source graph is refused before the driver sees it.
        super::more::check_not_destroyed(&self.source, call, &[node])?;
        if node.graph != self.source.id {
            return Err(Error::ForeignGraphNode {
                call,
                node: node.raw,
            });
        }
        if node.stamp > self.destroys {
            return Err(added_since(call, node));
        }
        Ok(node.as_raw())
    }

    /// Sets the function, configuration and arguments of a kernel node for future launches
    /// (`cudaGraphExecKernelNodeSetParams`); `node` is a node of the graph the executable was
    /// instantiated from. Checked as [`Graph::add_kernel_node`]; what the new arguments refer
    /// to is kept alive by the executable (until a whole update replaces it, or the executable
    /// and its launches are gone), what the old ones referred to by the graph.
    ///
    /// A sweep of parameters is cheap: an update whose function and memory are those a recent
    /// update of this executable named (at most four of them in all) does not check them
    /// again (nothing those checks test can have changed meanwhile) and keeps nothing new; its
    /// arguments' sizes are still checked, and its configuration too unless it is the last one
    /// found within the device's limits (which never change); it passes the arguments to the
    /// driver as one buffer.
    ///
    /// # Errors
    /// As [`Graph::add_kernel_node`]; the driver's error when `node` is not a kernel node or
    /// the change is not allowed.
    ///
    /// # Safety
    /// As [`Graph::add_kernel_node`].
    #[doc(alias = "cudaGraphExecKernelNodeSetParams")]
    pub unsafe fn set_kernel_node_params(
        &mut self,
        node: GraphNode,
        function: &Function,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        let raw = match self.own_node(node, KERNEL_NODE_UPDATE) {
            Ok(raw) => raw,
            Err(e) => return record(Err(e)),
        };
        // (Each outcome returned where it is known: the success of the short path then costs
        // no move of a whole `Result` through `record`.)
        match self.update_known_kernel(node, raw, function, config, args) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => record(Err(e)),
            // SAFETY: the caller's promise.
            None => record(unsafe { self.update_kernel(node, raw, function, config, args) }),
        }
    }

    /// [`set_kernel_node_params`](Self::set_kernel_node_params) with every check, for an
    /// owned node. (Out of line, so that the common case,
    /// [`update_known_kernel`](Self::update_known_kernel), stays short.)
    ///
    /// # Safety
    /// As [`Graph::add_kernel_node`].
    #[inline(never)]
    unsafe fn update_kernel(
        &mut self,
        node: GraphNode,
        raw: sys::CUgraphNode,
        function: &Function,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        const CALL: &str = KERNEL_NODE_UPDATE;
        // Graph memory: the node's ordering against the allocation and its free cannot be
        // checked here.
        if let Some(m) = args.iter().find_map(|a| a.graph_mem()) {
            return Err(super::graph_mem_outside(m, CALL));
        }
        let operands =
            check_kernel_node(self.device, self.generation, function, config, args, CALL)?;
        // The arguments as one buffer where they fit (the driver's update is then 3-5%
        // faster: see `PackedArgs`), else as a pointer per argument. (The same values at the
        // same offsets: the driver copies either into the node's parameters alike.)
        let mut packed = crate::module::PackedArgs::new();
        let mut arg_ptrs;
        let params = match function.packing().and_then(|p| packed.fill(p, args)) {
            Some(extra) => {
                let mut p = kernel_params(function, config, &mut []);
                p.extra = extra;
                p
            }
            None => {
                arg_ptrs = crate::module::ArgPtrs::new();
                kernel_params(function, config, arg_ptrs.fill(args))
            }
        };
        self.update_node_with(
            node,
            |k| operands.keep_into(k),
            |a, e| {
                // SAFETY: live executable and node of its source graph (kept by `source`);
                // arguments checked as for a node add, the memory kept by the accumulator; the
                // caller vouches for the rest.
                a.check(
                    unsafe { sys::cuGraphExecKernelNodeSetParams_v2(e, raw, &params) },
                    "cuGraphExecKernelNodeSetParams",
                )
            },
        )
    }

    /// [`set_kernel_node_params`](Self::set_kernel_node_params) when its function and every
    /// allocation its arguments name were checked and kept by a recent update of this
    /// executable (a sweep of parameters: the common case), in one pass over the arguments;
    /// `None`, having done nothing, in every other case (the full path then decides, with every
    /// check). What it skips holds still (see [`keep::Kept::checked`]), and there is nothing
    /// new to keep. The configuration is checked unless it is the last one found valid (a
    /// refusal is as on the full path); the source graph's lock and the node's liveness are as
    /// on the full path. Inside a host function, or on any other unusual entry (a reset, a
    /// sticky error, another current context), it declines and the full path decides.
    #[inline(always)]
    fn update_known_kernel(
        &mut self,
        node: GraphNode,
        raw: sys::CUgraphNode,
        function: &Function,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Option<Result<()>> {
        let kept = acc_of(&mut self.kept);
        if !kept.checked(function_key(function)) {
            return None;
        }
        let mut packed = crate::module::PackedArgs::new();
        // (Asked only of memory and special arguments: plain values need nothing. Memory
        // whose key is recent passes; a texture, surface or graph memory goes the full way.)
        let extra = packed.fill_if(function.packing()?, args, |a| {
            matches!(a.what, What::Memory(u)
                if alloc_key(u.alloc).is_some_and(|k| kept.checked(k)))
        })?;
        // Only the common case of entering (in a host function, or anything else unusual,
        // the full path decides).
        let a = context::enter_fast_on(self.dev, self.generation)?;
        let kept = acc_of(&mut self.kept);
        if kept.config != *config {
            let limits = a.dev.launch_limits().ok()?;
            if let Err(e) = crate::launch::validate(config, limits) {
                return Some(Err(e));
            }
            kept.config = *config;
            kept.params.0.func = std::ptr::null_mut();
        }
        // The driver's parameters, built again only for another function or configuration.
        if kept.params.0.func != function.as_raw() {
            kept.params.0 = kernel_params(function, config, &mut []);
        }
        kept.params.0.extra = extra;
        let _l = self.source.objects.lock();
        // Not destroyed meanwhile by the graph's owner on another thread.
        if let Err(e) = super::more::still_live(&self.source, node, CALL_NODE_UPDATE) {
            return Some(Err(e));
        }
        // SAFETY: live executable and node of its source graph (kept by `source`); the function
        // and memory checked for this context and kept by the accumulator (above), the
        // arguments' count and sizes the parameters' (`fill_if`), the configuration within the
        // device's limits, and the parameters this function's and configuration's (built for
        // them, above) with this call's buffer; the caller vouches for the rest.
        let r = unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.raw.0, raw, &kept.params.0) };
        // (No pointer into this call's buffer is left behind.)
        kept.params.0.extra = std::ptr::null_mut();
        Some(a.check(r, "cuGraphExecKernelNodeSetParams"))
    }

    /// Keeps `bundle` for the executable (before the node can use it), then runs the update
    /// `f` (given the entered context and the executable) under the source graph's lock.
    fn update_node(
        &mut self,
        node: GraphNode,
        bundle: KeyedBundle,
        f: impl FnOnce(&Active, sys::CUgraphExec) -> Result<()>,
    ) -> Result<()> {
        self.update_node_with(node, |k| k.keep(bundle), f)
    }

    /// As [`update_node`](Self::update_node), keeping what `keep` puts in the executable's
    /// tokens.
    fn update_node_with(
        &mut self,
        node: GraphNode,
        keep: impl FnOnce(&mut keep::Kept),
        f: impl FnOnce(&Active, sys::CUgraphExec) -> Result<()>,
    ) -> Result<()> {
        let a = context::enter_handle(self.device, self.generation, "executable graph")?;
        let _l = self.source.objects.lock();
        // Not destroyed meanwhile by the graph's owner on another thread.
        super::more::still_live(&self.source, node, CALL_NODE_UPDATE)?;
        keep(acc_of(&mut self.kept));
        f(&a, self.raw.0)
    }

    /// Sets a memset node's destination and value for future launches
    /// (`cudaGraphExecMemsetNodeSetParams`); `node` is a node of the graph the executable was
    /// instantiated from. Checked as [`Graph::add_memset_node`]; the new memory is kept alive
    /// by the executable, the old by the graph.
    ///
    /// The driver allows changing the address and the value, within the memory of the same
    /// context as before; other changes (element size, width) it refuses.
    ///
    /// # Errors
    /// As [`Graph::add_memset_node`]; [`Error::ForeignGraphNode`]; the driver's error when
    /// `node` is not a memset node or the change is not allowed.
    #[doc(alias = "cudaGraphExecMemsetNodeSetParams")]
    pub fn set_memset_node_params<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        value: MemsetValue,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecMemsetNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (params, bundle) = memset_params(self.device, self.generation, dst, value, CALL)?;
            self.update_node(node, bundle, |a, e| {
                // SAFETY: live executable and node of its source graph; the memory is live
                // device memory of this context (checked), kept by the accumulator.
                a.check(
                    unsafe { sys::cuGraphExecMemsetNodeSetParams(e, raw, &params, a.ctx_raw()) },
                    "cuGraphExecMemsetNodeSetParams",
                )
            })
        })())
    }

    /// Sets a copy node's operands for future launches (`cudaGraphExecMemcpyNodeSetParams`);
    /// `node` is a node of the graph the executable was instantiated from. Checked as
    /// [`Graph::add_memcpy_node`]; the new memory is kept alive by the executable.
    ///
    /// The driver requires the same kinds of memory (device to device) on the same context
    /// as the node had.
    ///
    /// # Errors
    /// As [`Graph::add_memcpy_node`]; [`Error::ForeignGraphNode`]; the driver's error when
    /// `node` is not a copy node or the change is not allowed.
    #[doc(alias = "cudaGraphExecMemcpyNodeSetParams")]
    #[doc(alias = "cudaGraphExecMemcpyNodeSetParams1D")]
    pub fn set_memcpy_node_params<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecMemcpyNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (params, bundle) = memcpy_params(self.device, self.generation, dst, src, CALL)?;
            self.update_node(node, bundle, |a, e| {
                // SAFETY: live executable and node of its source graph; both ranges are live
                // device memory of this context (checked), kept by the accumulator.
                a.check(
                    unsafe { sys::cuGraphExecMemcpyNodeSetParams(e, raw, &params, a.ctx_raw()) },
                    "cuGraphExecMemcpyNodeSetParams",
                )
            })
        })())
    }

    /// Sets a 2-D/3-D copy node's operands and region for future launches
    /// (`cudaGraphExecMemcpyNodeSetParams`); `node` is a node of the graph the executable was
    /// instantiated from. Checked as [`Graph::add_memcpy_3d_node`]; the new operands are kept
    /// alive by the executable. The driver requires the same kinds of memory (device memory,
    /// arrays) as the node had, and updates only one-row copies (height and depth 1, in the
    /// node as instantiated too): to change a 2-D or 3-D copy node, change the graph
    /// ([`Graph::set_memcpy_3d_node_params`](crate::graph::Graph::set_memcpy_3d_node_params)) and
    /// [`update`](Self::update) the executable from it.
    ///
    /// # Errors
    /// As [`Graph::add_memcpy_3d_node`]; [`Error::ForeignGraphNode`];
    /// [`Error::InvalidValue`] for a region of more than one row; the driver's error when
    /// `node` is not a copy node or the change is not allowed (a node instantiated with more
    /// than one row: `InvalidValue`).
    #[doc(alias = "cudaGraphExecMemcpyNodeSetParams")]
    pub fn set_memcpy_3d_node_params<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl crate::PitchedSideMut<T> + ?Sized),
        src: &(impl crate::PitchedSide<T> + ?Sized),
        region: &crate::Copy3D,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecMemcpyNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let e = region.extent;
            if e.height > 1 || e.depth > 1 {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("a region of {} x {} x {}", e.width, e.height, e.depth),
                    reason: "an executable's copy node is updated only with one-row copies \
                             (change the graph's node and update the executable instead)",
                });
            }
            let (params, bundle) =
                memcpy_3d_params(self.device, self.generation, &*dst, src, region, CALL)?;
            self.update_node(node, bundle, |a, e| {
                // SAFETY: live executable and node of its source graph; both regions checked
                // against their sides (device memory and arrays of this context), kept by the
                // accumulator.
                a.check(
                    unsafe { sys::cuGraphExecMemcpyNodeSetParams(e, raw, &params, a.ctx_raw()) },
                    "cuGraphExecMemcpyNodeSetParams",
                )
            })
        })())
    }

    /// Replaces a host node's closure for future launches (`cudaGraphExecHostNodeSetParams`);
    /// `node` is a node of the graph the executable was instantiated from. The new closure is
    /// owned by the executable (until it is dropped or whole-updated, and its launches are
    /// done: each update keeps one more closure until then); launches in flight still call
    /// the old one, which the graph keeps.
    ///
    /// # Errors
    /// [`Error::ForeignGraphNode`]; the driver's error when `node` is not a host node.
    #[doc(alias = "cudaGraphExecHostNodeSetParams")]
    pub fn set_host_node_params<F: Fn() + Send + Sync + 'static>(
        &mut self,
        node: GraphNode,
        f: F,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecHostNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (params, token) = host_params(self.device, f);
            self.update_node(node, vec![(None, token)], |a, e| {
                // SAFETY: live executable and node of its source graph; the trampoline takes
                // `userData` as the closure the accumulator keeps for as long as anything can
                // call it.
                a.check(
                    unsafe { sys::cuGraphExecHostNodeSetParams(e, raw, &params) },
                    "cuGraphExecHostNodeSetParams",
                )
            })
        })())
    }

    /// Enables or disables a kernel, copy or memset node for future launches
    /// (`cudaGraphNodeSetEnabled`); a disabled node does nothing, as an empty node.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for other kinds of node (the driver supports only these);
    /// [`Error::ForeignGraphNode`].
    #[doc(alias = "cudaGraphNodeSetEnabled")]
    pub fn set_node_enabled(&mut self, node: GraphNode, enabled: bool) -> Result<()> {
        const CALL: &str = "cudaGraphNodeSetEnabled";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let a = context::enter_handle(self.device, self.generation, "executable graph")?;
            let _l = self.source.objects.lock();
            super::more::still_live(&self.source, node, CALL)?;
            let kind = raw_node_type(&a, raw)?;
            if !matches!(
                kind,
                GraphNodeType::Kernel | GraphNodeType::Memcpy | GraphNodeType::Memset
            ) {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("a {kind:?} node"),
                    reason: "only kernel, copy and memset nodes can be disabled",
                });
            }
            // SAFETY: live executable and node of its source graph.
            a.check(
                unsafe { sys::cuGraphNodeSetEnabled(self.raw.0, raw, enabled as u32) },
                "cuGraphNodeSetEnabled",
            )
        })())
    }

    /// Whether a node is enabled in this executable (`cudaGraphNodeGetEnabled`).
    #[doc(alias = "cudaGraphNodeGetEnabled")]
    pub fn node_enabled(&self, node: GraphNode) -> Result<bool> {
        const CALL: &str = "cudaGraphNodeGetEnabled";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let a = context::enter_handle(self.device, self.generation, "executable graph")?;
            let _l = self.source.objects.lock();
            super::more::still_live(&self.source, node, CALL)?;
            let mut on = 0u32;
            // SAFETY: live executable and node of its source graph; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphNodeGetEnabled(self.raw.0, raw, &mut on) },
                "cuGraphNodeGetEnabled",
            )?;
            Ok(on != 0)
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instantiate_and_update_reasons_name_every_known_result() {
        for r in 0..=5 {
            assert_ne!(instantiate_reason(r), "a reason this crate does not know");
        }
        assert_eq!(instantiate_reason(77), "a reason this crate does not know");
        for r in 0..=8 {
            assert_ne!(update_reason(r), "a reason this crate does not know");
        }
    }

    #[test]
    fn device_launch_accepts_only_the_kinds_the_driver_launches_from_the_device() {
        use GraphNodeType::*;
        for k in [Kernel, Memcpy, Memset, ChildGraph, Empty, Conditional] {
            assert!(device_launchable(k), "{k:?}");
        }
        for k in [
            Host,
            EventRecord,
            EventWait,
            MemAlloc,
            MemFree,
            ExternalSemaphoreSignal,
            ExternalSemaphoreWait,
            BatchMemOp,
            Other(99),
        ] {
            assert!(!device_launchable(k), "{k:?}");
        }
    }

    #[test]
    fn instantiate_error_names_reason_node_and_code() {
        let e = Error::GraphInstantiate {
            call: "cudaGraphInstantiateWithParams",
            result: 3,
            reason: instantiate_reason(3),
            node: 0x1234,
            code: crate::ErrorCode::InvalidValue,
        };
        let s = e.to_string();
        assert!(
            s.contains("not supported") && s.contains("0x1234") && s.contains("3"),
            "{s}"
        );
        assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
    }
}
