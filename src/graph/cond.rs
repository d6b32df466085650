//! Conditional nodes (`cudaGraphConditionalHandleCreate`, `cudaGraphAddNode` with
//! `cudaGraphCondTypeIf` / `cudaGraphCondTypeWhile`; CUDA 12.4 and newer drivers).
//!
//! A conditional node runs its body graph once (if) or repeatedly (while) depending on the
//! value of a [`ConditionalHandle`] at the time the node runs. The value is set at the start of
//! each launch to the handle's default (when one was given) and by device code through
//! `cudaGraphSetConditional(handle, value)` in a kernel of the graph (pass the handle as a
//! kernel argument: `KernelArg::from(handle)`, a `cudaGraphConditionalHandle` parameter).
//!
//! The body is a [`Graph`] handle to a graph the node owns: add nodes to it as to any graph.
//! What they refer to is kept alive by the graph at the root of the nesting (and its clones,
//! executables and launches), so the body handle may outlive the parent [`Graph`] value
//! safely. A body cannot be instantiated, cloned or embedded as a child on its own.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Graph, GraphNode, GraphNodeType, GraphShared, NEXT_GRAPH_ID};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};
use crate::module::KernelArg;

/// A conditional value of a graph (`cudaGraphConditionalHandle`), made by
/// [`Graph::conditional_handle`] and used by one conditional node of that graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConditionalHandle {
    raw: u64,
    graph: u64,
}

impl ConditionalHandle {
    /// The raw handle (`CUgraphConditionalHandle`).
    pub fn as_raw(&self) -> u64 {
        self.raw
    }
}

impl From<ConditionalHandle> for KernelArg<'_> {
    /// The handle by value, for a `cudaGraphConditionalHandle` kernel parameter (which the
    /// kernel passes to `cudaGraphSetConditional`).
    fn from(h: ConditionalHandle) -> Self {
        KernelArg::from(h.raw)
    }
}

/// What a conditional node does with its body (`cudaGraphConditionalNodeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionalKind {
    /// Runs the body once when the value is non-zero (`cudaGraphCondTypeIf`).
    If,
    /// Runs the body while the value is non-zero, testing before each run
    /// (`cudaGraphCondTypeWhile`). The body must set the value to 0 at some point, or the
    /// launch never ends: only a kernel can, so a graph whose while body holds no kernel node
    /// (directly or in a nested conditional node; kernels inside child graphs do not count, as
    /// they may come from captures of the crate's safe launches) is refused at instantiation. Whether the kernel does set it is part of the `unsafe` contract of
    /// [`Graph::add_kernel_node`].
    While,
}

/// Whether a while body of these nodes can end its loop (a kernel may set the value): each
/// node's kind, with, for a nested conditional node, whether its bodies can (a kernel in them
/// may set the outer value too). Kernel nodes of bodies come only from
/// [`Graph::add_kernel_node`], whose `unsafe` contract covers setting the value. A child
/// graph never counts: its kernels may come from a capture of the crate's safe kernel
/// wrappers, which set no conditional value (review finding: a while body holding only a child
/// graph, empty or captured, instantiated and its launch never ended); nor does a nested
/// conditional without such a kernel.
pub(crate) fn can_end_loop(nodes: &[(GraphNodeType, bool)]) -> bool {
    nodes.iter().any(|&(k, inner_kernel)| {
        k == GraphNodeType::Kernel || (inner_kernel && k == GraphNodeType::Conditional)
    })
}

/// The deepest nesting of bodies the loop check follows (deeper: taken as unable to end the
/// loop, so refused).
const MAX_NESTING: u32 = 64;

/// The nodes of body graph `g` with, for conditional nodes, whether their bodies can end a loop
/// (see [`can_end_loop`]). `bodies` are the root's conditional bodies with their parent graphs
/// (a conditional node's bodies are those whose parent is its graph: for a graph with several
/// conditional nodes, any of them that can counts for each).
fn loop_nodes(
    a: &crate::context::Active,
    g: sys::CUgraph,
    bodies: &[super::Body],
    depth: u32,
) -> Result<Vec<(GraphNodeType, bool)>> {
    // SAFETY: a live graph of the root's nesting (the caller holds the root's lock).
    let nodes = super::node_list(a, "cuGraphGetNodes", None, |p, n| unsafe {
        sys::cuGraphGetNodes(g, p, n)
    })?;
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        let kind = super::raw_node_type(a, n.as_raw())?;
        let inner = match kind {
            _ if depth >= MAX_NESTING => false,
            GraphNodeType::Conditional => {
                let mut any = false;
                for &(_, body, parent) in bodies {
                    if parent.0 == g && holds_kernel(a, body.0, bodies, depth + 1)? {
                        any = true;
                        break;
                    }
                }
                any
            }
            _ => false,
        };
        out.push((kind, inner));
    }
    Ok(out)
}

/// Whether body graph `g` can end a loop (see [`loop_nodes`]).
fn holds_kernel(
    a: &crate::context::Active,
    g: sys::CUgraph,
    bodies: &[super::Body],
    depth: u32,
) -> Result<bool> {
    Ok(can_end_loop(&loop_nodes(a, g, bodies, depth)?))
}

impl Graph {
    /// Refuses a graph with a while node whose body cannot end the loop (see
    /// [`ConditionalKind::While`]), at any depth.
    ///
    /// The caller holds the graph's lock (`_held`, the lock of the root of a nesting), and does
    /// what the answer allows (instantiate, copy, update) before letting it go: conditional
    /// nodes are added with their bodies, and nodes of bodies added and destroyed, under that
    /// lock only, so no thread can change the answer meanwhile (a body handle is `Send`).
    pub(crate) fn check_while_bodies(
        &self,
        a: &crate::context::Active,
        _held: &super::more::ObjectsGuard<'_>,
        call: &'static str,
    ) -> Result<()> {
        // (No while body ever: nothing to check; the flag is set under the lock held.)
        if !self
            .shared
            .keeper()
            .flags
            .while_body
            .load(Ordering::Acquire)
        {
            return Ok(());
        }
        let bodies = self.shared.keeper().bodies.lock().clone();
        for &(is_while, body, _) in &bodies {
            if !is_while {
                continue;
            }
            let nodes = loop_nodes(a, body.0, &bodies, 0)?;
            if !can_end_loop(&nodes) {
                let kinds: Vec<GraphNodeType> = nodes.iter().map(|n| n.0).collect();
                return Err(Error::InvalidValue {
                    what: call,
                    value: format!("a while node whose body holds {kinds:?}"),
                    reason: "a while loop ends only when a kernel sets its value to 0, and this \
                             body has no kernel node of its own or in a nested conditional \
                             (kernels inside child graphs do not count: they may be captured \
                             safe launches): every launch would run forever",
                });
            }
        }
        Ok(())
    }

    /// Refuses the body graph of a conditional node for `call`.
    pub(crate) fn not_body(&self, call: &'static str) -> Result<()> {
        if self.shared.root.is_some() {
            return Err(Error::InvalidValue {
                what: call,
                value: "the body graph of a conditional node".into(),
                reason: "a body belongs to its conditional node: it cannot be instantiated, \
                         cloned, updated from or embedded on its own",
            });
        }
        Ok(())
    }

    /// Creates a conditional value for a conditional node of this graph
    /// (`cudaGraphConditionalHandleCreate`). With `default`, every launch sets the value to it
    /// first (`cudaGraphCondAssignDefault`); without, the value is whatever device code last
    /// set (0 at the first launch).
    ///
    /// # Errors
    /// The driver's error (drivers older than CUDA 12.4 have no conditional nodes).
    #[doc(alias = "cudaGraphConditionalHandleCreate")]
    pub fn conditional_handle(&mut self, default: Option<u32>) -> Result<ConditionalHandle> {
        record((|| {
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            let mut h: sys::CUgraphConditionalHandle = 0;
            let flags = if default.is_some() {
                sys::CU_GRAPH_COND_ASSIGN_DEFAULT
            } else {
                0
            };
            // SAFETY: live graph of the entered context; valid out-parameter.
            a.check(
                unsafe {
                    sys::cuGraphConditionalHandleCreate(
                        &mut h,
                        self.shared.raw.0,
                        a.ctx_raw(),
                        default.unwrap_or(0),
                        flags,
                    )
                },
                "cuGraphConditionalHandleCreate",
            )?;
            Ok(ConditionalHandle {
                raw: h,
                graph: self.shared.id,
            })
        })())
    }

    /// Adds a conditional node (`cudaGraphAddNode` with `cudaGraphNodeTypeConditional`) run by
    /// `handle`'s value; returns the node and its body graph, empty, to which the body's nodes
    /// are added.
    ///
    /// The body is a [`Graph`] handle to a graph the node owns: add nodes to it as to any
    /// graph. What they refer to is kept alive by the graph at the root of the nesting (and its
    /// clones, executables and launches), so the body handle may outlive the parent [`Graph`]
    /// value safely. A body cannot be instantiated, cloned, embedded as a child or used for a
    /// whole update on its own, and holds no allocation nodes.
    ///
    /// The value is set at the start of each launch to the handle's default (when it has one)
    /// and by device code through `cudaGraphSetConditional(handle, value)` in a kernel of the
    /// graph (pass the handle as `KernelArg::from(handle)`). The crate's own such kernels,
    /// `kernels::graph_cond::COND_SET` and `COND_COUNT_TO` (their
    /// [`function`](crate::EmbeddedKernel::function)), run from an image linked ahead of time
    /// with the device runtime (feature `device-runtime`, default); your own PTX that calls
    /// `cudaGraphSetConditional` loads through
    /// [`Module::from_ptx_with_device_runtime`](crate::Module::from_ptx_with_device_runtime)
    /// (a toolkit's `libcudadevrt.a` at run time) or, linked ahead of time, through
    /// [`Module::from_image`](crate::Module::from_image).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `handle` is another graph's; the driver's error (a handle
    /// used by two nodes, drivers without conditional nodes).
    #[doc(alias = "cudaGraphAddNode")]
    pub fn add_conditional_node(
        &mut self,
        deps: &[GraphNode],
        handle: ConditionalHandle,
        kind: ConditionalKind,
    ) -> Result<(GraphNode, Graph)> {
        const CALL: &str = "cudaGraphAddNode";
        record((|| {
            if handle.graph != self.shared.id {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("conditional handle {:#x}", handle.raw),
                    reason: "the handle was made for another graph",
                });
            }
            // SAFETY: all-zero is a valid `CUgraphNodeParams` (integers, null pointers, a
            // union of plain structs, and C enums whose 0 is a declared value).
            let mut params: sys::CUgraphNodeParams = unsafe { std::mem::zeroed() };
            params.type_ = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL;
            let a = self.enter()?;
            let ctx = a.ctx_raw();
            drop(a);
            // Writing a union field of plain data.
            {
                params.__bindgen_anon_1.conditional = sys::CUDA_CONDITIONAL_NODE_PARAMS {
                    handle: handle.raw,
                    type_: match kind {
                        ConditionalKind::If => {
                            sys::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF
                        }
                        ConditionalKind::While => {
                            sys::CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE
                        }
                    },
                    size: 1,
                    phGraph_out: std::ptr::null_mut(),
                    ctx,
                };
            }
            let root = match &self.shared.root {
                Some(r) => r.clone(),
                None => self.shared.clone(),
            };
            let parent = Raw(self.shared.raw.0);
            let p = &mut params;
            let mut body: sys::CUgraph = std::ptr::null_mut();
            let body_out = &mut body;
            let node = self.add_node(CALL, deps, Vec::new(), |_, out, g, d, n| {
                // SAFETY: live graph; conditional parameters with one body, whose handle the
                // driver writes into `phGraph_out` (an array it owns, as long as the node).
                let rc = unsafe { sys::cuGraphAddNode_v2(out, g, d, std::ptr::null(), n, p) };
                if rc != sys::CUresult::CUDA_SUCCESS {
                    return rc;
                }
                // SAFETY: reading the union field written above; the driver set `phGraph_out`
                // to an array of `size` (1) body graphs owned by the node.
                *body_out = unsafe {
                    let c = p.__bindgen_anon_1.conditional;
                    if c.phGraph_out.is_null() {
                        std::ptr::null_mut()
                    } else {
                        *c.phGraph_out
                    }
                };
                // The body is known to the root before the root's lock (held here) is let go:
                // an instantiation or a copy, which check the while bodies under that lock,
                // never sees the node without its body.
                if !body_out.is_null() {
                    root.bodies.lock().push((
                        kind == ConditionalKind::While,
                        Raw(*body_out),
                        parent,
                    ));
                    if kind == ConditionalKind::While {
                        root.flags.while_body.store(true, Ordering::Release);
                    }
                }
                rc
            })?;
            if body.is_null() {
                return Err(Error::from_driver(
                    999,
                    "cuGraphAddNode (no body graph returned)",
                ));
            }
            let body = Graph {
                shared: Arc::new(GraphShared {
                    raw: Raw(body),
                    device: self.shared.device,
                    generation: self.shared.generation,
                    id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
                    objects: super::lock::GraphLock::new(super::keep::Refs::default()),
                    mem: Mutex::new(super::mem::MemNodes::default()),
                    root: Some(root),
                    bodies: Mutex::new(Vec::new()),
                    flags: Default::default(),
                    extra: Default::default(),
                }),
                _not_sync: PhantomData::<Cell<()>>,
            };
            Ok((node, body))
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_while_body_without_a_kernel_cannot_end_its_loop() {
        use GraphNodeType::*;
        let no = |k| (k, false);
        assert!(!can_end_loop(&[]));
        assert!(!can_end_loop(&[
            no(Host),
            no(Memset),
            no(Memcpy),
            no(Empty),
            no(EventRecord)
        ]));
        assert!(can_end_loop(&[no(Memset), no(Kernel)]));
        // A nested conditional counts only with a kernel inside; a child graph never (its
        // kernels may be captured safe launches; review finding: such loops never ended).
        assert!(!can_end_loop(&[no(ChildGraph)]));
        assert!(!can_end_loop(&[(ChildGraph, true)]));
        assert!(!can_end_loop(&[no(Conditional), no(Memset)]));
        assert!(can_end_loop(&[(Conditional, true)]));
        assert!(!can_end_loop(&[(Memset, true), (Host, true)]));
    }
}
