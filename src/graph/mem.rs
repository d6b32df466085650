//! Memory allocation and free nodes ([`GraphMem`]), and the device's pool of graph memory.
//!
//! The rules that keep graph memory safe are on [`GraphMem`].

use std::marker::PhantomData;
use std::mem::size_of;

use parking_lot::Mutex;

use super::nodes::{check_memset, keyed, memcpy3d_zeroed, unkeyed};
use super::{admit_memory, Graph, GraphNode, MemsetValue};
use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::memory::{DeviceRead, DeviceRepr, DeviceWrite};
use crate::module::KernelArg;

/// What nodes know of a [`GraphMem`]: its graph, its allocation node and the nodes that use it.
#[derive(Debug)]
pub(crate) struct GraphMemInner {
    graph: u64,
    alloc: GraphNode,
    ptr: u64,
    bytes: usize,
    users: Mutex<Vec<GraphNode>>,
}

/// Memory that an allocation node of a [`Graph`] allocates (`cudaGraphAddMemAllocNode`):
/// `len` elements of `T`, valid only inside the graph's launches, between the allocation node
/// and its free node.
///
/// # How graph memory is kept safe
///
/// An allocation node's memory exists only while a launch of the graph runs between the
/// allocation node and its free node: outside, its address names nothing (or, later, another
/// launch's data). So the crate hands it out as a [`GraphMem`], which is not device memory
/// of the ordinary kind:
///
/// * it has no host access at all (no `to_vec`, no copies on streams) and implements neither
///   [`DeviceRead`](crate::DeviceRead) nor [`DeviceWrite`](crate::DeviceWrite): the only
///   things that can touch it are nodes of the graph that allocated it (kernel arguments, memset and copy nodes); a node
///   of another graph, a per-node update of an executable, and a stream launch all refuse it
///   with [`Error::InvalidValue`];
/// * every node that uses it is made to depend on the allocation node (the edge is added when
///   missing), and [`Graph::add_mem_free_node`] consumes the handle and depends on every node
///   that used it: no use can run before the allocation or after the free;
/// * a graph with an allocation that it does not free cannot be instantiated (its memory would
///   outlive the launch with nothing in the crate referring to it), and an executable is never
///   updated from a graph with memory nodes (the new kernel arguments would name the other
///   graph's addresses).
///
/// A graph with memory nodes is not copied: [`Graph::try_clone`] and
/// [`Graph::add_child_graph_node`] refuse it (the copy would not have the crate's record of its
/// graph memory). The driver adds its own rule: only one executable of it may exist at a time.
///
/// Pass it to the graph's nodes: as a kernel argument (`KernelArg::from(&mem)` to read,
/// `&mut mem` to write, in [`kernel_args!`](crate::kernel_args)), to
/// [`Graph::add_graph_mem_memset_node`], [`Graph::add_memcpy_node_to_graph_mem`] and
/// [`Graph::add_memcpy_node_from_graph_mem`]; then free it with
/// [`Graph::add_mem_free_node`].
///
/// ```no_run
/// use cuda_runtime::graph::{Graph, MemsetValue};
/// use cuda_runtime::{DeviceBuffer, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let mut out = DeviceBuffer::<u32>::new(256)?;
/// let mut g = Graph::new()?;
/// let (_, mut tmp) = g.add_mem_alloc_node::<u32>(&[], 256)?;
/// let set = g.add_graph_mem_memset_node(&[], &mut tmp, MemsetValue::U32(5))?;
/// let copy = g.add_memcpy_node_from_graph_mem(&[set], &mut out, &tmp)?;
/// g.add_mem_free_node(&[copy], tmp)?;
/// let exec = g.instantiate()?;
/// let s = Stream::new()?;
/// exec.launch(&s)?;
/// s.synchronize()?;
/// assert!(out.to_vec()?.iter().all(|&x| x == 5));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct GraphMem<T> {
    inner: GraphMemInner,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T: DeviceRepr> GraphMem<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element (never: allocation nodes allocate at least one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The allocation node.
    pub fn alloc_node(&self) -> GraphNode {
        self.inner.alloc
    }

    /// The address the graph's launches use (`dptr` of `cudaMemAllocNodeParams`). Only
    /// meaningful inside a launch; the crate never dereferences it elsewhere.
    pub fn device_ptr(&self) -> u64 {
        self.inner.ptr
    }
}

impl<'a, T: DeviceRepr> From<&'a GraphMem<T>> for KernelArg<'a> {
    /// The memory's address for a `const T*` parameter of a node of its graph.
    fn from(m: &'a GraphMem<T>) -> KernelArg<'a> {
        KernelArg::graph_memory(m.inner.ptr, &m.inner)
    }
}

impl<'a, T: DeviceRepr> From<&'a mut GraphMem<T>> for KernelArg<'a> {
    /// The memory's address for a `T*` parameter of a node of its graph.
    fn from(m: &'a mut GraphMem<T>) -> KernelArg<'a> {
        KernelArg::graph_memory(m.inner.ptr, &m.inner)
    }
}

/// The error for graph memory used outside its graph's nodes.
pub(crate) fn graph_mem_outside(m: &GraphMemInner, call: &'static str) -> Error {
    Error::InvalidValue {
        what: call,
        value: format!(
            "graph memory at {:#x} ({} bytes) of allocation node {:#x}",
            m.ptr, m.bytes, m.alloc.raw
        ),
        reason: "memory of an allocation node exists only inside its graph's launches: only \
                 nodes of that graph may use it",
    }
}

/// The kinds of graph memory figures of a device (`cudaGraphMemAttributeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphMemAttribute {
    /// Memory currently associated with graphs, bytes (`cudaGraphMemAttrUsedMemCurrent`).
    UsedMemCurrent,
    /// The high watermark of that since the last reset (`cudaGraphMemAttrUsedMemHigh`).
    UsedMemHigh,
    /// Memory reserved for graphs by the device's pool, bytes
    /// (`cudaGraphMemAttrReservedMemCurrent`).
    ReservedMemCurrent,
    /// The high watermark of that since the last reset (`cudaGraphMemAttrReservedMemHigh`).
    ReservedMemHigh,
}

impl GraphMemAttribute {
    fn raw(self) -> sys::CUgraphMem_attribute {
        use sys::CUgraphMem_attribute::*;
        match self {
            GraphMemAttribute::UsedMemCurrent => CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT,
            GraphMemAttribute::UsedMemHigh => CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
            GraphMemAttribute::ReservedMemCurrent => CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
            GraphMemAttribute::ReservedMemHigh => CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
        }
    }
}

impl crate::Device {
    /// Returns the memory the device's graph pool holds beyond what graphs use to the driver
    /// (`cudaDeviceGraphMemTrim`).
    #[doc(alias = "cudaDeviceGraphMemTrim")]
    pub fn graph_mem_trim(self) -> Result<()> {
        record((|| {
            let a = context::enter(self.ordinal())?;
            // SAFETY: a valid device handle of an entered context.
            a.check(
                unsafe { sys::cuDeviceGraphMemTrim(a.dev.raw) },
                "cuDeviceGraphMemTrim",
            )
        })())
    }

    /// A graph memory figure of the device, bytes (`cudaDeviceGetGraphMemAttribute`).
    #[doc(alias = "cudaDeviceGetGraphMemAttribute")]
    pub fn graph_mem_attribute(self, attr: GraphMemAttribute) -> Result<u64> {
        record((|| {
            let a = context::enter(self.ordinal())?;
            let mut v = 0u64;
            // SAFETY: every graph memory attribute is a 64-bit integer (cuuint64_t).
            a.check(
                unsafe {
                    sys::cuDeviceGetGraphMemAttribute(
                        a.dev.raw,
                        attr.raw(),
                        (&mut v as *mut u64).cast(),
                    )
                },
                "cuDeviceGetGraphMemAttribute",
            )?;
            Ok(v)
        })())
    }

    /// Resets a high watermark ([`GraphMemAttribute::UsedMemHigh`] or
    /// [`ReservedMemHigh`](GraphMemAttribute::ReservedMemHigh)) to the current figure
    /// (`cudaDeviceSetGraphMemAttribute` with 0, the only value the runtime accepts).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for the current figures, which cannot be set.
    #[doc(alias = "cudaDeviceSetGraphMemAttribute")]
    pub fn reset_graph_mem_high(self, attr: GraphMemAttribute) -> Result<()> {
        const CALL: &str = "cudaDeviceSetGraphMemAttribute";
        record((|| {
            if !matches!(
                attr,
                GraphMemAttribute::UsedMemHigh | GraphMemAttribute::ReservedMemHigh
            ) {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("{attr:?}"),
                    reason: "only the high watermarks can be reset",
                });
            }
            let a = context::enter(self.ordinal())?;
            let mut v = 0u64;
            // SAFETY: a 64-bit integer, 0 (reset), for a high watermark.
            a.check(
                unsafe {
                    sys::cuDeviceSetGraphMemAttribute(
                        a.dev.raw,
                        attr.raw(),
                        (&mut v as *mut u64).cast(),
                    )
                },
                "cuDeviceSetGraphMemAttribute",
            )
        })())
    }
}

/// The nodes a node using `mems` must depend on: `deps`, plus each allocation node missing.
fn with_alloc_deps<'m>(
    deps: &[GraphNode],
    mems: impl IntoIterator<Item = &'m GraphMemInner>,
) -> Vec<GraphNode> {
    let mut all = deps.to_vec();
    for m in mems {
        if !all.contains(&m.alloc) {
            all.push(m.alloc);
        }
    }
    all
}

impl Graph {
    /// Checks that graph memory belongs to this graph.
    pub(crate) fn own_mem(&self, m: &GraphMemInner, call: &'static str) -> Result<()> {
        if m.graph == self.shared.id {
            Ok(())
        } else {
            Err(graph_mem_outside(m, call))
        }
    }

    /// The dependencies of a kernel node whose arguments may include graph memory (each must
    /// be this graph's): `deps` plus the allocation nodes. Returns them with the memory used.
    pub(crate) fn kernel_mem_deps<'a>(
        &self,
        deps: &[GraphNode],
        args: &[KernelArg<'a>],
        call: &'static str,
    ) -> Result<(Vec<GraphNode>, Vec<&'a GraphMemInner>)> {
        let mems: Vec<&GraphMemInner> = args.iter().filter_map(|a| a.graph_mem()).collect();
        for m in &mems {
            self.own_mem(m, call)?;
        }
        Ok((with_alloc_deps(deps, mems.iter().copied()), mems))
    }

    /// Adds an allocation of `len` elements of `T` (`cudaGraphAddMemAllocNode`), made at every
    /// launch when the node runs; its memory is the returned [`GraphMem`], usable by this
    /// graph's nodes only, until [`add_mem_free_node`](Self::add_mem_free_node) frees it (which
    /// the graph must do before it can be instantiated). See [`GraphMem`] for the rules.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for 0 elements or a size that overflows, and in the body of a
    /// conditional node; the driver's error
    /// (e.g. out of memory for the graph pool's reservation).
    #[doc(alias = "cudaGraphAddMemAllocNode")]
    pub fn add_mem_alloc_node<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        len: usize,
    ) -> Result<(GraphNode, GraphMem<T>)> {
        const CALL: &str = "cudaGraphAddMemAllocNode";
        record((|| {
            // The instantiation check sees the root graph's allocations only.
            self.not_body(CALL)?;
            let bytes = len
                .checked_mul(size_of::<T>())
                .filter(|&b| b > 0)
                .ok_or_else(|| Error::InvalidValue {
                    what: CALL,
                    value: format!("{len} elements of {} bytes", size_of::<T>()),
                    reason: "an allocation node allocates at least one byte and at most \
                             usize::MAX",
                })?;
            // SAFETY: all-zero is a valid `CUDA_MEM_ALLOC_NODE_PARAMS` (integers, null
            // pointers, and C enums whose 0 is a declared value).
            let mut params: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
            params.poolProps.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
            params.poolProps.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
            params.poolProps.location.id = self.shared.device;
            params.bytesize = bytes;
            let p = &mut params;
            let node = self.add_node(CALL, deps, Vec::new(), |_, out, g, d, n| {
                // SAFETY: live graph; valid parameters (device memory of the graph's device,
                // no peer access descriptors); the driver writes the address into `dptr`.
                unsafe { sys::cuGraphAddMemAllocNode(out, g, d, n, p) }
            })?;
            {
                let mut m = self.shared.mem.lock();
                m.unfreed.push(node);
                // (Release: whoever sees the flag and then takes the lock finds the node.)
                self.shared
                    .flags
                    .mem
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            Ok((
                node,
                GraphMem {
                    inner: GraphMemInner {
                        graph: self.shared.id,
                        alloc: node,
                        ptr: params.dptr,
                        bytes,
                        users: Mutex::new(Vec::new()),
                    },
                    len,
                    _t: PhantomData,
                },
            ))
        })())
    }

    /// Adds the free of `mem` (`cudaGraphAddMemFreeNode`), after `deps` and after every node
    /// that used `mem` (the edges are added); the handle is consumed, so no later node can use
    /// the memory.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `mem` is another graph's.
    #[doc(alias = "cudaGraphAddMemFreeNode")]
    pub fn add_mem_free_node<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        mem: GraphMem<T>,
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemFreeNode";
        record((|| {
            self.own_mem(&mem.inner, CALL)?;
            let mut all = with_alloc_deps(deps, [&mem.inner]);
            for u in mem.inner.users.lock().iter() {
                // A destroyed user needs no ordering (and its handle must not reach the driver).
                if !all.contains(u) && !self.shared.extra.is_destroyed(u) {
                    all.push(*u);
                }
            }
            let ptr = mem.inner.ptr;
            let node = self.add_node(CALL, &all, Vec::new(), |_, out, g, d, n| {
                // SAFETY: live graph; `ptr` is the address of this graph's allocation node,
                // freed after every node that uses it.
                unsafe { sys::cuGraphAddMemFreeNode(out, g, d, n, ptr) }
            })?;
            self.shared
                .mem
                .lock()
                .unfreed
                .retain(|&a| a != mem.inner.alloc);
            Ok(node)
        })())
    }

    /// Adds a memset of graph memory (`cudaGraphAddMemsetNode`), after its allocation node.
    ///
    /// # Errors
    /// As [`add_memset_node`](Self::add_memset_node); [`Error::InvalidValue`] when `mem` is
    /// another graph's.
    #[doc(alias = "cudaGraphAddMemsetNode")]
    pub fn add_graph_mem_memset_node<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        mem: &mut GraphMem<T>,
        value: MemsetValue,
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemsetNode";
        record((|| {
            self.own_mem(&mem.inner, CALL)?;
            let (elem, pattern) = value.parts();
            let (ptr, bytes) = (mem.inner.ptr, mem.inner.bytes);
            check_memset(bytes, ptr, elem, CALL)?;
            let params = sys::CUDA_MEMSET_NODE_PARAMS {
                dst: ptr,
                pitch: bytes,
                value: pattern,
                elementSize: elem as u32,
                width: bytes / elem,
                height: 1,
            };
            let all = with_alloc_deps(deps, [&mem.inner]);
            let node = self.add_node(CALL, &all, Vec::new(), |a, out, g, d, n| {
                // SAFETY: the whole of this graph's allocation, ordered after its allocation
                // node (and before its free node, which depends on every user).
                unsafe { sys::cuGraphAddMemsetNode(out, g, d, n, &params, a.ctx_raw()) }
            })?;
            mem.inner.users.lock().push(node);
            Ok(node)
        })())
    }

    /// Adds a copy from device memory into graph memory (`cudaGraphAddMemcpyNode1D`), after
    /// the allocation node.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; as [`add_memcpy_node`](Self::add_memcpy_node) for `src`;
    /// [`Error::InvalidValue`] when `dst` is another graph's.
    #[doc(alias = "cudaGraphAddMemcpyNode1D")]
    pub fn add_memcpy_node_to_graph_mem<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut GraphMem<T>,
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemcpyNode1D";
        record((|| {
            self.own_mem(&dst.inner, CALL)?;
            if dst.len != src.len() {
                return Err(Error::LengthMismatch {
                    what: CALL,
                    expected: dst.len,
                    actual: src.len(),
                });
            }
            let (device, generation) = (self.shared.device, self.shared.generation);
            let st = keyed(admit_memory(src.allocation(), device, generation, CALL)?);
            let mut params = memcpy3d_zeroed();
            params.srcDevice = src.device_ptr();
            params.dstDevice = dst.inner.ptr;
            params.WidthInBytes = dst.inner.bytes;
            params.Height = 1;
            params.Depth = 1;
            let all = with_alloc_deps(deps, [&dst.inner]);
            let node = self.add_node(CALL, &all, unkeyed(vec![st]), |a, out, g, d, n| {
                // SAFETY: `src` is live device memory of the graph's context of the same
                // length (kept by the bundle); `dst` is this graph's allocation, ordered after
                // its allocation node and before its free.
                unsafe { sys::cuGraphAddMemcpyNode(out, g, d, n, &params, a.ctx_raw()) }
            })?;
            dst.inner.users.lock().push(node);
            Ok(node)
        })())
    }

    /// Adds a copy from graph memory into device memory (`cudaGraphAddMemcpyNode1D`), after
    /// the allocation node: how a graph's temporary results leave it.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; as [`add_memcpy_node`](Self::add_memcpy_node) for `dst`;
    /// [`Error::InvalidValue`] when `src` is another graph's.
    #[doc(alias = "cudaGraphAddMemcpyNode1D")]
    pub fn add_memcpy_node_from_graph_mem<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        src: &GraphMem<T>,
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemcpyNode1D";
        record((|| {
            self.own_mem(&src.inner, CALL)?;
            if dst.len() != src.len {
                return Err(Error::LengthMismatch {
                    what: CALL,
                    expected: dst.len(),
                    actual: src.len,
                });
            }
            let (device, generation) = (self.shared.device, self.shared.generation);
            let dt = keyed(admit_memory(dst.allocation(), device, generation, CALL)?);
            let mut params = memcpy3d_zeroed();
            params.srcDevice = src.inner.ptr;
            params.dstDevice = dst.device_ptr();
            params.WidthInBytes = src.inner.bytes;
            params.Height = 1;
            params.Depth = 1;
            let all = with_alloc_deps(deps, [&src.inner]);
            let node = self.add_node(CALL, &all, unkeyed(vec![dt]), |a, out, g, d, n| {
                // SAFETY: as in `add_memcpy_node_to_graph_mem`, the other way round.
                unsafe { sys::cuGraphAddMemcpyNode(out, g, d, n, &params, a.ctx_raw()) }
            })?;
            src.inner.users.lock().push(node);
            Ok(node)
        })())
    }

    /// Records `node` as a user of each of `mems` (so that their free nodes come after it).
    pub(crate) fn note_mem_users(mems: &[&GraphMemInner], node: GraphNode) {
        for m in mems {
            m.users.lock().push(node);
        }
    }

    /// Refuses to instantiate a graph with an allocation it does not free.
    pub(crate) fn check_all_freed(&self, call: &'static str) -> Result<()> {
        match self.shared.mem.lock().unfreed.first() {
            None => Ok(()),
            Some(node) => Err(Error::InvalidValue {
                what: call,
                value: format!("allocation node {:#x} without a free node", node.raw),
                reason: "a graph must free every allocation it makes before it is instantiated \
                         (add_mem_free_node)",
            }),
        }
    }

    /// Whether the graph has memory allocation or free nodes.
    pub(crate) fn has_mem_nodes(&self) -> bool {
        self.shared.has_mem_nodes()
    }
}

/// The memory nodes of a graph, as the crate knows them.
#[derive(Debug, Default)]
pub(crate) struct MemNodes {
    /// Allocation nodes without a free node yet. (Whether the graph has any memory node is
    /// `GraphShared::has_mem_nodes`.)
    pub(crate) unfreed: Vec<GraphNode>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(raw: usize) -> GraphNode {
        GraphNode {
            raw,
            graph: 1,
            stamp: 0,
        }
    }

    fn inner(alloc: usize) -> GraphMemInner {
        GraphMemInner {
            graph: 1,
            alloc: node(alloc),
            ptr: 0x7000_0000,
            bytes: 64,
            users: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn uses_depend_on_the_allocation_node_once() {
        let (m1, m2) = (inner(10), inner(20));
        let deps = with_alloc_deps(&[node(1), node(10)], [&m1, &m2]);
        assert_eq!(deps, vec![node(1), node(10), node(20)]);
        assert_eq!(with_alloc_deps(&[], [&m1]), vec![node(10)]);
    }

    #[test]
    fn graph_memory_outside_its_graph_names_address_size_and_node() {
        let e = graph_mem_outside(&inner(0xabc), "cudaLaunchKernel");
        let s = e.to_string();
        assert!(
            s.contains("0x70000000") && s.contains("64 bytes") && s.contains("0xabc"),
            "{s}"
        );
        assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
    }
}
