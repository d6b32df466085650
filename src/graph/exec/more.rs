//! More per-node updates of executables: event nodes, child graphs, copies to and from module
//! variables, external semaphores; and the executable's flags.
//!
//! As the updates in the parent module, each keeps what it is given in the executable's
//! accumulator (a user object the executable holds) before the node can use it.

use std::sync::Arc;

use super::super::keep::Token;
use super::super::more::{
    check_event, from_symbol_params, has_conditional, lock_pair, semaphore_parts, signal_params,
    to_symbol_params, wait_params, InstantiateFlags,
};
use super::super::Graph;
use super::{GraphExec, GraphNode};
use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::event::Event;
use crate::external::ExternalSemaphore;
use crate::memory::{DeviceRead, DeviceRepr, DeviceWrite};
use crate::Symbol;

/// Tokens of an update, without keys (each kept, see `Kept`).
fn unkeyed_tokens(tokens: Vec<Token>) -> super::KeyedBundle {
    tokens.into_iter().map(|t| (None, t)).collect()
}

impl GraphExec {
    /// The flags the executable was instantiated with (`cudaGraphExecGetFlags`), as the driver
    /// reports them: it leaves out `UPLOAD` (documented) and, on the H200 with driver 580,
    /// `USE_NODE_PRIORITY` too; `AUTO_FREE_ON_LAUNCH` and `DEVICE_LAUNCH` are reported.
    #[doc(alias = "cudaGraphExecGetFlags")]
    pub fn flags(&self) -> Result<InstantiateFlags> {
        record((|| {
            let a = context::enter_handle(self.device, self.generation, "executable graph")?;
            let _l = self.source.objects.lock();
            let mut f = 0u64;
            // SAFETY: live executable; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphExecGetFlags(self.raw.0, &mut f) },
                "cuGraphExecGetFlags",
            )?;
            Ok(InstantiateFlags::from_bits_retain(f))
        })())
    }

    fn set_event(
        &mut self,
        call: &'static str,
        node: GraphNode,
        event: &Arc<Event>,
        is_record: bool,
    ) -> Result<()> {
        let raw = self.own_node(node, call)?;
        check_event(self.device, event, call)?;
        let (_pin, ev) = event.pinned_raw()?;
        let token: Token = Box::new(event.clone());
        self.update_node(node, vec![(None, token)], |a, e| {
            // SAFETY: live executable and node of its source graph; a live event of the
            // executable's device (pinned against a reset), kept by the accumulator.
            let r = unsafe {
                if is_record {
                    sys::cuGraphExecEventRecordNodeSetEvent(e, raw, ev)
                } else {
                    sys::cuGraphExecEventWaitNodeSetEvent(e, raw, ev)
                }
            };
            a.check(r, call)
        })
    }

    /// Makes an event record node record `event` in future launches
    /// (`cudaGraphExecEventRecordNodeSetEvent`); `node` is a node of the graph the executable
    /// was instantiated from. The executable keeps `event` alive.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] for another device's event; [`Error::ForeignGraphNode`]; the
    /// driver's error when `node` is not an event record node.
    #[doc(alias = "cudaGraphExecEventRecordNodeSetEvent")]
    pub fn set_event_record_node_event(
        &mut self,
        node: GraphNode,
        event: &Arc<Event>,
    ) -> Result<()> {
        record(self.set_event("cudaGraphExecEventRecordNodeSetEvent", node, event, true))
    }

    /// Makes an event wait node wait for `event` in future launches
    /// (`cudaGraphExecEventWaitNodeSetEvent`). The executable keeps `event` alive.
    ///
    /// # Errors
    /// As [`set_event_record_node_event`](Self::set_event_record_node_event), for wait nodes.
    #[doc(alias = "cudaGraphExecEventWaitNodeSetEvent")]
    pub fn set_event_wait_node_event(&mut self, node: GraphNode, event: &Arc<Event>) -> Result<()> {
        record(self.set_event("cudaGraphExecEventWaitNodeSetEvent", node, event, false))
    }

    /// Updates the graph embedded in a child graph node to `child`'s parameters for future
    /// launches (`cudaGraphExecChildGraphNodeSetParams`); `child` must have the embedded graph's
    /// topology, as for [`update`](Self::update). The executable keeps `child` (and so what its
    /// nodes refer to) alive until it is dropped or whole-updated and its launches are done.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; [`Error::InvalidValue`] for a body of a conditional node, a
    /// graph with memory nodes, or a while loop that could never end; the driver's error when
    /// the topology differs or `node` is not a child graph node.
    #[doc(alias = "cudaGraphExecChildGraphNodeSetParams")]
    pub fn set_child_graph_node_params(&mut self, node: GraphNode, child: &Graph) -> Result<()> {
        const CALL: &str = "cudaGraphExecChildGraphNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            if child.shared.device != self.device {
                return Err(Error::DeviceMismatch {
                    call: CALL,
                    what: "the child graph",
                    found: child.shared.device,
                    expected: self.device,
                });
            }
            if child.shared.generation != self.generation {
                return Err(Error::ContextDestroyed {
                    what: "graph",
                    device: self.device,
                });
            }
            child.not_body(CALL)?;
            // (A child with conditional nodes, whose while loops could never end, is refused
            // below.)
            if child.has_mem_nodes() {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: "a graph with memory allocation or free nodes".into(),
                    reason: "child graphs cannot hold memory nodes",
                });
            }
            {
                let a = context::enter_handle(self.device, self.generation, "executable graph")?;
                let _l = child.shared.objects.lock();
                if has_conditional(&a, child.shared.raw.0, 0)? {
                    return Err(Error::InvalidValue {
                        what: CALL,
                        value: "a graph with conditional nodes".into(),
                        reason: "embedded graphs with conditional nodes are not updated (the \
                                 crate could not check the while loops of the new bodies)",
                    });
                }
            }
            // The whole child graph is kept: its user objects keep what its nodes refer to.
            let token: Token = Box::new(child.shared.clone());
            let c = child.shared.raw.0;
            let a = context::enter_handle(self.device, self.generation, "executable graph")?;
            // Both graphs locked (in the global order): the child is not changed meanwhile.
            let _l = lock_pair(&self.source, &child.shared);
            super::super::more::still_live(&self.source, node, CALL)?;
            super::acc_of(&mut self.kept).keep(vec![(None, token)]);
            // SAFETY: live executable, node of its source graph, and live graph of this
            // context; the child is kept by the accumulator.
            a.check(
                unsafe { sys::cuGraphExecChildGraphNodeSetParams(self.raw.0, raw, c) },
                "cuGraphExecChildGraphNodeSetParams",
            )
        })())
    }

    /// Makes a copy node copy `src` (one element) into the module variable `symbol` in future
    /// launches (`cudaGraphExecMemcpyNodeSetParamsToSymbol`); checked as
    /// [`Graph::add_memcpy_node_to_symbol`]. The executable keeps `src` and the module alive.
    #[doc(alias = "cudaGraphExecMemcpyNodeSetParamsToSymbol")]
    pub fn set_memcpy_node_to_symbol<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        symbol: &Symbol<T>,
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecMemcpyNodeSetParamsToSymbol";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (params, bundle) =
                to_symbol_params(self.device, self.generation, symbol, src, CALL)?;
            self.update_node(node, unkeyed_tokens(bundle), |a, e| {
                // SAFETY: live executable and node of its source graph; both sides live
                // device memory of this context (checked), kept by the accumulator.
                a.check(
                    unsafe { sys::cuGraphExecMemcpyNodeSetParams(e, raw, &params, a.ctx_raw()) },
                    "cuGraphExecMemcpyNodeSetParams",
                )
            })
        })())
    }

    /// Makes a copy node copy the module variable `symbol` into `dst` (one element) in future
    /// launches (`cudaGraphExecMemcpyNodeSetParamsFromSymbol`); checked as
    /// [`Graph::add_memcpy_node_from_symbol`].
    #[doc(alias = "cudaGraphExecMemcpyNodeSetParamsFromSymbol")]
    pub fn set_memcpy_node_from_symbol<T: DeviceRepr>(
        &mut self,
        node: GraphNode,
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        symbol: &Symbol<T>,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecMemcpyNodeSetParamsFromSymbol";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (params, bundle) =
                from_symbol_params(self.device, self.generation, dst, symbol, CALL)?;
            self.update_node(node, unkeyed_tokens(bundle), |a, e| {
                // SAFETY: as in `set_memcpy_node_to_symbol`.
                a.check(
                    unsafe { sys::cuGraphExecMemcpyNodeSetParams(e, raw, &params, a.ctx_raw()) },
                    "cuGraphExecMemcpyNodeSetParams",
                )
            })
        })())
    }

    /// Sets a signal node's semaphores and values for future launches
    /// (`cudaGraphExecExternalSemaphoresSignalNodeSetParams`); the executable keeps the
    /// semaphores alive.
    ///
    /// # Errors
    /// As [`Graph::add_external_semaphores_signal_node`]; [`Error::ForeignGraphNode`].
    #[doc(alias = "cudaGraphExecExternalSemaphoresSignalNodeSetParams")]
    pub fn set_external_semaphores_signal_node_params(
        &mut self,
        node: GraphNode,
        semaphores: &[(&Arc<ExternalSemaphore>, u64)],
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecExternalSemaphoresSignalNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (mut raws, values, tokens) =
                semaphore_parts(self.device, self.generation, semaphores, CALL)?;
            let params = signal_params(&values);
            let p = sys::CUDA_EXT_SEM_SIGNAL_NODE_PARAMS {
                extSemArray: raws.as_mut_ptr(),
                paramsArray: params.as_ptr(),
                numExtSems: raws.len() as u32,
            };
            self.update_node(node, unkeyed_tokens(tokens), |a, e| {
                // SAFETY: live executable and node of its source graph; live semaphores of
                // this context kept by the accumulator; the arrays live for the call.
                a.check(
                    unsafe { sys::cuGraphExecExternalSemaphoresSignalNodeSetParams(e, raw, &p) },
                    "cuGraphExecExternalSemaphoresSignalNodeSetParams",
                )
            })
        })())
    }

    /// Sets a wait node's semaphores and values for future launches
    /// (`cudaGraphExecExternalSemaphoresWaitNodeSetParams`); the executable keeps the
    /// semaphores alive.
    ///
    /// # Errors
    /// As [`set_external_semaphores_signal_node_params`](Self::set_external_semaphores_signal_node_params).
    #[doc(alias = "cudaGraphExecExternalSemaphoresWaitNodeSetParams")]
    pub fn set_external_semaphores_wait_node_params(
        &mut self,
        node: GraphNode,
        semaphores: &[(&Arc<ExternalSemaphore>, u64)],
    ) -> Result<()> {
        const CALL: &str = "cudaGraphExecExternalSemaphoresWaitNodeSetParams";
        record((|| {
            let raw = self.own_node(node, CALL)?;
            let (mut raws, values, tokens) =
                semaphore_parts(self.device, self.generation, semaphores, CALL)?;
            let params = wait_params(&values);
            let p = sys::CUDA_EXT_SEM_WAIT_NODE_PARAMS {
                extSemArray: raws.as_mut_ptr(),
                paramsArray: params.as_ptr(),
                numExtSems: raws.len() as u32,
            };
            self.update_node(node, unkeyed_tokens(tokens), |a, e| {
                // SAFETY: as in `set_external_semaphores_signal_node_params`.
                a.check(
                    unsafe { sys::cuGraphExecExternalSemaphoresWaitNodeSetParams(e, raw, &p) },
                    "cuGraphExecExternalSemaphoresWaitNodeSetParams",
                )
            })
        })())
    }
}
