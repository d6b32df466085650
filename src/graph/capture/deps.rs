//! `cudaStreamUpdateCaptureDependencies`: changing the nodes a capturing stream's next
//! operation depends on.

use super::{find, raw_info, Stream};
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::graph::{node_list, GraphNode};

/// How [`Stream::update_capture_dependencies`] changes the dependency set
/// (`cudaStreamUpdateCaptureDependenciesFlags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureDependencies {
    /// Add the nodes to the current set (`cudaStreamAddCaptureDependencies`).
    Add,
    /// Replace the set with the nodes (`cudaStreamSetCaptureDependencies`).
    Set,
}

impl CaptureDependencies {
    pub(crate) fn flags(self) -> u32 {
        match self {
            CaptureDependencies::Add => 0,
            CaptureDependencies::Set => 1,
        }
    }
}

impl Stream {
    /// Changes the nodes the stream's next captured operation depends on
    /// (`cudaStreamUpdateCaptureDependencies`): adds `nodes` to them, or replaces them by
    /// `nodes`. The stream must be in a capture the crate began, and each node must be a node
    /// of that capture's graph, as [`capture_info`](Self::capture_info) reports them (or, for
    /// [`capture_into`](Self::capture_into), a node of the graph captured into); each is
    /// checked against the graph's live nodes before the driver sees it.
    ///
    /// Goes through the stream's enqueue path: a failure makes the capture's end fail, as any
    /// failure inside a capture.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the stream is not in an active capture of the crate's, or
    /// a node is not one of its graph's.
    #[doc(alias = "cudaStreamUpdateCaptureDependencies")]
    pub fn update_capture_dependencies(
        &self,
        nodes: &[GraphNode],
        how: CaptureDependencies,
    ) -> Result<()> {
        const CALL: &str = "cudaStreamUpdateCaptureDependencies";
        record((|| {
            let lane = self.lane()?;
            lane.submit_capturable(CALL, &[], &mut || Ok(Vec::new()), |a, raw| {
                // The queue's entry is held: the capture cannot begin or end meanwhile.
                let info = raw_info(a, raw, false)?;
                let session = if info.status == 1 {
                    find(info.id)
                } else {
                    None
                };
                let Some(session) = session else {
                    return Err(Error::InvalidValue {
                        what: CALL,
                        value: "a stream not in an active capture begun by the crate".into(),
                        reason: "only a capturing stream has capture dependencies",
                    });
                };
                let g = info.graph;
                // SAFETY: the capture's live graph (listing nodes is allowed during a
                // capture); the buffer holds `n` nodes (or is null for the count).
                let live: Vec<GraphNode> = node_list(a, "cuGraphGetNodes", None, |p, n| unsafe {
                    sys::cuGraphGetNodes(g, p, n)
                })?
                .into_iter()
                .map(|n| session.handle(n.raw))
                .collect();
                for n in nodes {
                    if n.graph != session.graph_id || !live.contains(n) {
                        return Err(Error::InvalidValue {
                            what: CALL,
                            value: format!("graph node {:#x}", n.raw),
                            reason: "not a node of the graph this stream's capture builds",
                        });
                    }
                }
                let mut raws: Vec<sys::CUgraphNode> = nodes.iter().map(|n| n.as_raw()).collect();
                let p = if raws.is_empty() {
                    std::ptr::null_mut()
                } else {
                    raws.as_mut_ptr()
                };
                // SAFETY: a capturing stream of the current context; `raws.len()` live nodes of
                // its capture graph (checked); no edge data; a defined flag.
                a.check(
                    unsafe {
                        sys::cuStreamUpdateCaptureDependencies_v2(
                            raw,
                            p,
                            std::ptr::null(),
                            raws.len(),
                            how.flags(),
                        )
                    },
                    "cuStreamUpdateCaptureDependencies",
                )
            })
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_set_are_the_runtime_flags() {
        assert_eq!(CaptureDependencies::Add.flags(), 0);
        assert_eq!(CaptureDependencies::Set.flags(), 1);
    }
}
