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
    /// launch never ends: only a kernel can, so a graph whose while body holds no kernel
    /// (directly, in a child graph or in a nested conditional node) is refused at
    /// instantiation. Whether the kernel does set it is part of the `unsafe` contract of
    /// [`Graph::add_kernel_node`].
    While,
}

/// Whether a while body of these node kinds can end its loop (a kernel may set the value).
pub(crate) fn can_end_loop(kinds: &[GraphNodeType]) -> bool {
    kinds.iter().any(|k| {
        matches!(
            k,
            GraphNodeType::Kernel | GraphNodeType::ChildGraph | GraphNodeType::Conditional
        )
    })
}

impl Graph {
    /// Refuses a graph with a while node whose body cannot end the loop (see
    /// [`ConditionalKind::While`]), at any depth.
    pub(crate) fn check_while_bodies(&self, call: &'static str) -> Result<()> {
        let bodies: Vec<(bool, Raw<sys::CUgraph_st>)> = self.shared.keeper().bodies.lock().clone();
        let a = self.enter()?;
        for (is_while, body) in bodies {
            if !is_while {
                continue;
            }
            let mut kinds = Vec::new();
            {
                let _l = self.shared.keeper().objects.lock();
                let g = body.0;
                // SAFETY: a live body graph (owned by its node in this graph).
                let nodes = super::node_list(&a, "cuGraphGetNodes", 0, |p, n| unsafe {
                    sys::cuGraphGetNodes(g, p, n)
                })?;
                for n in nodes {
                    kinds.push(super::raw_node_type(&a, n.as_raw())?);
                }
            }
            if !can_end_loop(&kinds) {
                return Err(Error::InvalidValue {
                    what: call,
                    value: format!("a while node whose body holds {kinds:?}"),
                    reason: "a while loop ends only when a kernel sets its value to 0, and this \
                             body has no kernel: every launch would run forever",
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
    /// graph (pass the handle as `KernelArg::from(handle)`; such PTX loads through
    /// [`Module::from_ptx_with_device_runtime`](crate::Module::from_ptx_with_device_runtime)).
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
            let p = &mut params;
            let node = self.add_node(CALL, deps, Vec::new(), |_, out, g, d, n| {
                // SAFETY: live graph; conditional parameters with one body, whose handle the
                // driver writes into `phGraph_out` (an array it owns, as long as the node).
                unsafe { sys::cuGraphAddNode_v2(out, g, d, std::ptr::null(), n, p) }
            })?;
            // SAFETY: reading the union field written above; the driver set `phGraph_out` to
            // an array of `size` (1) body graphs owned by the node.
            let body = unsafe {
                let c = params.__bindgen_anon_1.conditional;
                if c.phGraph_out.is_null() {
                    std::ptr::null_mut()
                } else {
                    *c.phGraph_out
                }
            };
            if body.is_null() {
                return Err(Error::from_driver(
                    999,
                    "cuGraphAddNode (no body graph returned)",
                ));
            }
            let root = match &self.shared.root {
                Some(r) => r.clone(),
                None => self.shared.clone(),
            };
            let body = Graph {
                shared: Arc::new(GraphShared {
                    raw: Raw(body),
                    device: self.shared.device,
                    generation: self.shared.generation,
                    id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
                    objects: Mutex::new(Vec::new()),
                    mem: Mutex::new(super::mem::MemNodes::default()),
                    root: Some(root),
                    bodies: Mutex::new(Vec::new()),
                    extra: Default::default(),
                }),
                _not_sync: PhantomData::<Cell<()>>,
            };
            self.shared
                .keeper()
                .bodies
                .lock()
                .push((kind == ConditionalKind::While, Raw(body.shared.raw.0)));
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
        assert!(!can_end_loop(&[]));
        assert!(!can_end_loop(&[Host, Memset, Memcpy, Empty, EventRecord]));
        assert!(can_end_loop(&[Memset, Kernel]));
        assert!(can_end_loop(&[ChildGraph]));
        assert!(can_end_loop(&[Conditional]));
    }
}
