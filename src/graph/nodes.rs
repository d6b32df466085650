//! The typed node adders, clone, child graphs, queries and the DOT dump of [`Graph`].

use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::path::Path;
use std::sync::Arc;

use super::keep::{self, Bundle, KeyedBundle, Token};
use super::{
    admit_memory, host_node_trampoline, node_list, DotFlags, Graph, GraphNode, GraphNodeType,
    HostNode, MemsetValue,
};
use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::event::Event;
use crate::launch::{self, LaunchConfig};
use crate::memory::{check_array_regions, copy_region, Base, DeviceRead, DeviceRepr, DeviceWrite};
use crate::module::{Function, KernelArg};
use crate::{Copy3D, PitchedSide, PitchedSideMut};

/// Checks a kernel node's function, configuration and arguments as a stream launch does, and
/// gathers its tokens: the function (and so its module) and the memory its arguments name.
pub(crate) fn kernel_bundle(
    device: i32,
    generation: u64,
    function: &Function,
    config: &LaunchConfig,
    args: &[KernelArg<'_>],
    call: &'static str,
) -> Result<KeyedBundle> {
    Ok(check_kernel_node(device, generation, function, config, args, call)?.bundle())
}

/// A kernel node's operands, checked (as [`kernel_bundle`] checks them) and borrowed: what the
/// node will refer to, to be kept before the driver sees it.
pub(crate) struct KernelOperands<'f, 'a, 'b> {
    function: &'f Function,
    args: &'a [KernelArg<'b>],
}

/// Checks a kernel node's function, configuration and arguments for `device`'s context of
/// `generation`.
pub(crate) fn check_kernel_node<'f, 'a, 'b>(
    device: i32,
    generation: u64,
    function: &'f Function,
    config: &LaunchConfig,
    args: &'a [KernelArg<'b>],
    call: &'static str,
) -> Result<KernelOperands<'f, 'a, 'b>> {
    // Reads launch limits (driver calls) before anything else: never inside a host function.
    if context::in_host_fn() {
        return Err(Error::InHostFunction { call });
    }
    function.check_args(args)?;
    let (fd, fg) = function.id();
    if fd != device {
        return Err(Error::DeviceMismatch {
            call,
            what: "the function",
            found: fd,
            expected: device,
        });
    }
    if fg != generation {
        return Err(Error::ContextDestroyed {
            what: "function",
            device,
        });
    }
    launch::validate(config, context::device_state(device)?.launch_limits()?)?;
    for arg in args {
        if arg.also().is_some() {
            // The graph would keep the object's tracker, not the object: its handle could be
            // destroyed while the graph can still replay.
            return Err(Error::InvalidValue {
                what: "kernel node argument",
                value: "a texture or surface object".into(),
                reason: "texture and surface objects are not supported in graph nodes yet",
            });
        }
        if let Some(u) = arg.used() {
            // (Not in a host function: refused above.)
            crate::graph::check_memory_outside_host_fn(u.alloc, device, generation, call)?;
        }
    }
    Ok(KernelOperands { function, args })
}

/// The key of a function's token: its driver handle (the token holds the function, and so its
/// module: while it is kept, the handle names no other function).
#[inline]
pub(crate) fn function_key(function: &Function) -> (u8, usize) {
    (keep::KEY_FUNCTION, function.as_raw() as usize)
}

/// The key of an allocation's token, if it has one: the address of its keep-alive object
/// (memory without one was never kept, so has no key to find).
#[inline]
pub(crate) fn alloc_key(alloc: &crate::memory::Alloc) -> Option<(u8, usize)> {
    alloc.keep_if_made().map(memory_key)
}

/// The key of a token holding memory through `k` (an allocation's keep-alive object, or an
/// array's): the address of what `k` points to.
#[inline]
fn memory_key<T>(k: &Arc<T>) -> (u8, usize) {
    (keep::KEY_ALLOC, Arc::as_ptr(k) as usize)
}

impl KernelOperands<'_, '_, '_> {
    /// Tokens for all of it, with their keys.
    pub(crate) fn bundle(self) -> KeyedBundle {
        let mut bundle: KeyedBundle = vec![(
            Some(function_key(self.function)),
            Box::new(self.function.clone()),
        )];
        for u in self.args.iter().filter_map(|a| a.used()) {
            bundle.push(keyed(u.alloc.keep_token()));
        }
        bundle
    }

    /// Keeps in `kept` what it does not keep yet; nothing is cloned for what it keeps already
    /// (a per-node update that changes only scalars clones nothing). `kept` is of the context
    /// these operands were checked for: their keys become [checked](keep::Kept::checked) ones.
    #[inline]
    pub(crate) fn keep_into(self, kept: &mut keep::Kept) {
        kept.keep_with(Some(function_key(self.function)), || {
            Box::new(self.function.clone())
        });
        for u in self.args.iter().filter_map(|a| a.used()) {
            let k = u.alloc.keep_ref();
            kept.keep_with(Some(memory_key(k)), || Box::new(k.clone()));
        }
    }
}

/// A memory token with its key (the keep-alive object's address).
pub(crate) fn keyed(t: Arc<crate::memory::AllocKeep>) -> (keep::Key, Token) {
    (Some(memory_key(&t)), Box::new(t))
}

/// Strips the keys of a bundle (a node's own bundle needs none).
pub(crate) fn unkeyed(b: KeyedBundle) -> Bundle {
    b.into_iter().map(|(_, t)| t).collect()
}

/// The driver's kernel node parameters; `ptrs` must outlive their use.
pub(crate) fn kernel_params(
    function: &Function,
    config: &LaunchConfig,
    ptrs: &mut [*mut c_void],
) -> sys::CUDA_KERNEL_NODE_PARAMS {
    sys::CUDA_KERNEL_NODE_PARAMS {
        func: function.as_raw(),
        gridDimX: config.grid.x,
        gridDimY: config.grid.y,
        gridDimZ: config.grid.z,
        blockDimX: config.block.x,
        blockDimY: config.block.y,
        blockDimZ: config.block.z,
        sharedMemBytes: config.shared_mem_bytes,
        kernelParams: if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        },
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// Checks a memset of `dst` to `value` for a node of a graph on `device`; its parameters and
/// the token of the memory.
pub(crate) fn memset_params<T: DeviceRepr>(
    device: i32,
    generation: u64,
    dst: &mut (impl DeviceWrite<T> + ?Sized),
    value: MemsetValue,
    call: &'static str,
) -> Result<(sys::CUDA_MEMSET_NODE_PARAMS, KeyedBundle)> {
    let (elem, pattern) = value.parts();
    let bytes = dst.len() * size_of::<T>();
    let ptr = dst.device_ptr();
    check_memset(bytes, ptr, elem, call)?;
    let token = keyed(admit_memory(dst.allocation(), device, generation, call)?);
    let params = sys::CUDA_MEMSET_NODE_PARAMS {
        dst: ptr,
        pitch: bytes,
        value: pattern,
        elementSize: elem as u32,
        width: bytes / elem,
        height: 1,
    };
    Ok((params, vec![token]))
}

/// The memset shape rule: non-empty, size and address multiples of the element size.
pub(crate) fn check_memset(bytes: usize, ptr: u64, elem: usize, call: &'static str) -> Result<()> {
    if bytes == 0 || !bytes.is_multiple_of(elem) || !ptr.is_multiple_of(elem as u64) {
        return Err(Error::InvalidValue {
            what: call,
            value: format!("{bytes} bytes at {ptr:#x}, element size {elem}"),
            reason: "the memory must be non-empty, and its size and address multiples of the \
                     element size",
        });
    }
    Ok(())
}

/// Checks a device-to-device copy for a node of a graph on `device`; its parameters and the
/// tokens of both sides.
pub(crate) fn memcpy_params<T: DeviceRepr>(
    device: i32,
    generation: u64,
    dst: &mut (impl DeviceWrite<T> + ?Sized),
    src: &(impl DeviceRead<T> + ?Sized),
    call: &'static str,
) -> Result<(sys::CUDA_MEMCPY3D, KeyedBundle)> {
    if dst.len() != src.len() {
        return Err(Error::LengthMismatch {
            what: call,
            expected: dst.len(),
            actual: src.len(),
        });
    }
    let bytes = dst.len() * size_of::<T>();
    if bytes == 0 {
        return Err(Error::InvalidValue {
            what: call,
            value: "0 bytes".into(),
            reason: "a copy node must copy something (add an empty node instead)",
        });
    }
    let dt = keyed(admit_memory(dst.allocation(), device, generation, call)?);
    let st = keyed(admit_memory(src.allocation(), device, generation, call)?);
    let mut params = memcpy3d_zeroed();
    params.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    params.srcDevice = src.device_ptr();
    params.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    params.dstDevice = dst.device_ptr();
    params.WidthInBytes = bytes;
    params.Height = 1;
    params.Depth = 1;
    Ok((params, vec![dt, st]))
}

/// Checks a 2-D/3-D copy between device-side operands for a node of a graph on `device`; its
/// parameters and the tokens that keep both sides alive.
pub(crate) fn memcpy_3d_params<T: DeviceRepr>(
    device: i32,
    generation: u64,
    dst: &(impl PitchedSide<T> + ?Sized),
    src: &(impl PitchedSide<T> + ?Sized),
    p: &Copy3D,
    call: &'static str,
) -> Result<(sys::CUDA_MEMCPY3D, KeyedBundle)> {
    let elem = size_of::<T>();
    let (sb, db) = (src.base(), dst.base());
    check_array_regions(sb, db, p)?;
    let (sl, dl) = (src.layout(), dst.layout());
    let sr = copy_region(sl, p.src_pos, p.extent, elem, "the copy's source")?;
    let dr = copy_region(dl, p.dst_pos, p.extent, elem, "the copy's destination")?;
    if sr.first == sr.end || dr.first == dr.end {
        return Err(Error::InvalidValue {
            what: call,
            value: format!("extent {:?}", p.extent),
            reason: "a copy node must copy something (add an empty node instead)",
        });
    }
    let mut bundle: KeyedBundle = Vec::with_capacity(3);
    let mut side = |b: Base<'_>, keep: Option<Arc<crate::memory::ArrayInner>>| -> Result<_> {
        match b {
            Base::Host(_) => Err(Error::InvalidValue {
                what: call,
                value: "host memory".into(),
                reason: "graph copy nodes take device memory and arrays only (a launch would \
                         touch the host memory long after its borrow ended)",
            }),
            Base::Device(ptr, alloc) => {
                bundle.push(keyed(admit_memory(alloc, device, generation, call)?));
                Ok((
                    sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                    ptr,
                    std::ptr::null_mut(),
                ))
            }
            Base::Array(raw, track, _) => {
                // Device and generation checks (the tracker holds no memory of its own).
                admit_memory(track, device, generation, call)?;
                if let Some(k) = keep {
                    let key = Some(memory_key(&k));
                    bundle.push((key, Box::new(k)));
                }
                Ok((sys::CUmemorytype::CU_MEMORYTYPE_ARRAY, 0, raw))
            }
        }
    };
    let (st, sdev, sarr) = side(sb, src.array_keep())?;
    let (dt, ddev, darr) = side(db, dst.array_keep())?;
    let mut d = memcpy3d_zeroed();
    d.srcXInBytes = sr.x;
    d.srcY = p.src_pos.y;
    d.srcZ = p.src_pos.z;
    d.srcMemoryType = st;
    d.srcDevice = sdev;
    d.srcArray = sarr;
    d.srcPitch = sl.pitch;
    d.srcHeight = sl.rows;
    d.dstXInBytes = dr.x;
    d.dstY = p.dst_pos.y;
    d.dstZ = p.dst_pos.z;
    d.dstMemoryType = dt;
    d.dstDevice = ddev;
    d.dstArray = darr;
    d.dstPitch = dl.pitch;
    d.dstHeight = dl.rows;
    d.WidthInBytes = sr.width;
    d.Height = p.extent.height;
    d.Depth = p.extent.depth;
    Ok((d, bundle))
}

/// A `CUDA_MEMCPY3D` with every field zero or null (device memory on both sides, nothing to
/// copy), to be filled in.
pub(crate) fn memcpy3d_zeroed() -> sys::CUDA_MEMCPY3D {
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: device,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: 0,
        srcHeight: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: device,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: 0,
        dstHeight: 0,
        WidthInBytes: 0,
        Height: 0,
        Depth: 0,
    }
}

/// A host node's parameters and the token that owns its closure.
pub(crate) fn host_params<F: Fn() + Send + Sync + 'static>(
    device: i32,
    f: F,
) -> (sys::CUDA_HOST_NODE_PARAMS, Token) {
    let node = Box::new(HostNode {
        f: Box::new(f),
        device,
    });
    // The box's address does not change when it moves into the bundle.
    let data: *const HostNode = &*node;
    let params = sys::CUDA_HOST_NODE_PARAMS {
        fn_: Some(host_node_trampoline),
        userData: data.cast_mut().cast(),
    };
    (params, node)
}

/// Refuses a copy (clone or child embedding) of a graph with memory nodes: what keeps its
/// graph memory safe (which nodes may use it, whether every allocation is freed, that its
/// edges stay) is the crate's record of the graph, which a copy would not have. (The driver's
/// documentation forbids such copies too; the crate does not depend on its refusal. Memory
/// nodes are added only through the graph itself, never through a body, so the flag cannot
/// change meanwhile.)
pub(crate) fn refuse_mem_copy(has_mem_nodes: bool, call: &'static str) -> Result<()> {
    if has_mem_nodes {
        return Err(Error::InvalidValue {
            what: call,
            value: "a graph with memory allocation or free nodes".into(),
            reason: "graphs with memory nodes are not copied (cloned or embedded as a child \
                     graph): the crate's rules for their graph memory stay with the graph; \
                     build the copy as a graph of its own",
        });
    }
    Ok(())
}

impl Graph {
    /// Adds a node that does nothing (`cudaGraphAddEmptyNode`): a point to join dependencies.
    ///
    /// # Errors
    /// [`Error::ForeignGraphNode`] when a dependency belongs to another graph.
    #[doc(alias = "cudaGraphAddEmptyNode")]
    pub fn add_empty_node(&mut self, deps: &[GraphNode]) -> Result<GraphNode> {
        record(self.add_node(
            "cudaGraphAddEmptyNode",
            deps,
            Vec::new(),
            |_, out, g, d, n| {
                // SAFETY: valid out-parameter; live graph; `n` nodes of it at `d`.
                unsafe { sys::cuGraphAddEmptyNode(out, g, d, n) }
            },
        ))
    }

    /// Adds a kernel launch of a user function (`cudaGraphAddKernelNode`), run at every
    /// launch of the graph's executables.
    ///
    /// Checked as [`Function::launch`] checks a stream launch: argument count and sizes against
    /// the kernel's parameters, the configuration against the device's limits, the function and
    /// the memory against the graph's device. The argument values are copied now; the memory
    /// arguments name (and the function's module) are kept alive by the graph (see the
    /// [module docs](super)), so dropping them afterwards is safe.
    ///
    /// # Errors
    /// [`Error::KernelArguments`], [`Error::InvalidConfiguration`], [`Error::DeviceMismatch`],
    /// [`Error::InvalidValue`] for host-visible memory (refused in graphs),
    /// [`Error::ForeignGraphNode`].
    ///
    /// # Safety
    /// As [`Function::launch`]: each argument has the type the kernel's parameter has, the
    /// kernel stays within the memory passed (addresses passed as plain integers are the
    /// caller's to keep alive for every launch), and memory passed for reading is not written.
    #[doc(alias = "cudaGraphAddKernelNode")]
    pub unsafe fn add_kernel_node(
        &mut self,
        deps: &[GraphNode],
        function: &Function,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddKernelNode";
        record((|| {
            let (device, generation) = (self.shared.device, self.shared.generation);
            let bundle = unkeyed(kernel_bundle(
                device, generation, function, config, args, CALL,
            )?);
            let (deps, mems) = self.kernel_mem_deps(deps, args, CALL)?;
            let mut ptrs: Vec<*mut c_void> = args.iter().map(KernelArg::value_ptr).collect();
            let params = kernel_params(function, config, &mut ptrs);
            let node = self.add_node(CALL, &deps, bundle, |_, out, g, d, n| {
                // SAFETY: the parameter count and sizes match the kernel (checked), the values
                // live in `args` for the call (the driver copies them); the memory they name
                // is kept by the bundle, graph memory is this graph's and the node is ordered
                // after its allocation; the caller vouches for the rest (see `# Safety`).
                unsafe { sys::cuGraphAddKernelNode_v2(out, g, d, n, &params) }
            })?;
            Graph::note_mem_users(&mems, node);
            Ok(node)
        })())
    }

    /// Adds a memset of device memory (`cudaGraphAddMemsetNode`): every element of `value`'s
    /// size in `dst` set to it.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `dst` is empty, or its size or address is not a multiple
    /// of the element size, or it is host-visible memory; [`Error::DeviceMismatch`].
    #[doc(alias = "cudaGraphAddMemsetNode")]
    pub fn add_memset_node<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        value: MemsetValue,
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemsetNode";
        record((|| {
            let (params, bundle) =
                memset_params(self.shared.device, self.shared.generation, dst, value, CALL)?;
            self.add_node(CALL, deps, unkeyed(bundle), |a, out, g, d, n| {
                // SAFETY: `width` elements from `dst` lie in live device memory of the graph's
                // context (checked), kept by the bundle.
                unsafe { sys::cuGraphAddMemsetNode(out, g, d, n, &params, a.ctx_raw()) }
            })
        })())
    }

    /// Adds a device-to-device copy (`cudaGraphAddMemcpyNode1D`, `cudaMemcpyDeviceToDevice`).
    ///
    /// Both sides must be device memory of the graph's device (copies from or to host memory
    /// are not offered in graphs yet).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::InvalidValue`] for empty or host-visible memory;
    /// [`Error::DeviceMismatch`].
    #[doc(alias = "cudaGraphAddMemcpyNode1D")]
    #[doc(alias = "cudaGraphAddMemcpyNode")]
    pub fn add_memcpy_node<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut (impl DeviceWrite<T> + ?Sized),
        src: &(impl DeviceRead<T> + ?Sized),
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemcpyNode1D";
        record((|| {
            let (params, bundle) =
                memcpy_params(self.shared.device, self.shared.generation, dst, src, CALL)?;
            self.add_node(CALL, deps, unkeyed(bundle), |a, out, g, d, n| {
                // SAFETY: both ranges are `bytes` bytes of live device memory of the graph's
                // context (lengths and devices checked), kept by the bundle; `dst` is borrowed
                // exclusively, so they do not overlap.
                unsafe { sys::cuGraphAddMemcpyNode(out, g, d, n, &params, a.ctx_raw()) }
            })
        })())
    }

    /// Adds a 2-D or 3-D copy (`cudaGraphAddMemcpyNode` with a `cudaMemcpy3DParms`) between
    /// device-side operands: pitched device memory ([`PitchedBuffer`](crate::PitchedBuffer),
    /// [`DeviceBuffer::as_pitched`](crate::DeviceBuffer::as_pitched)) and CUDA arrays
    /// ([`Array`](crate::Array)), with the checks of [`copy_3d`](crate::copy_3d): every row
    /// within its side's pitch, the region within each side, array regions within the array's
    /// extent, no overlap within one array. The graph keeps both sides alive (an array until
    /// no graph, executable or launch refers to it).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for host memory (a graph would read or write it at every
    /// launch, long after the borrow ended), host-visible memory and an empty region;
    /// [`Error::InvalidPitch`], [`Error::OutOfRange`] as [`copy_3d`](crate::copy_3d);
    /// [`Error::DeviceMismatch`].
    ///
    /// ```no_run
    /// use cuda_runtime::graph::Graph;
    /// use cuda_runtime::{Array, ArrayFlags, Copy3D, Extent, PitchedBuffer};
    /// # fn main() -> cuda_runtime::Result<()> {
    /// let e = Extent::new(64, 32, 4);
    /// let src = PitchedBuffer::<f32>::new_3d(e)?;
    /// let mut arr = Array::<f32>::new_3d(e, ArrayFlags::empty())?;
    /// let mut g = Graph::new()?;
    /// g.add_memcpy_3d_node(&[], &mut arr, &src, &Copy3D::new(e))?;
    /// # Ok(())
    /// # }
    /// ```
    #[doc(alias = "cudaGraphAddMemcpyNode")]
    pub fn add_memcpy_3d_node<T: DeviceRepr>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut (impl PitchedSideMut<T> + ?Sized),
        src: &(impl PitchedSide<T> + ?Sized),
        region: &Copy3D,
    ) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddMemcpyNode";
        record((|| {
            let (params, bundle) = memcpy_3d_params(
                self.shared.device,
                self.shared.generation,
                &*dst,
                src,
                region,
                CALL,
            )?;
            self.add_node(CALL, deps, unkeyed(bundle), |a, out, g, d, n| {
                // SAFETY: both regions were checked against their sides (device memory and
                // arrays of the graph's context, kept by the bundle; arrays' regions within
                // their extents; no overlap within one array).
                unsafe { sys::cuGraphAddMemcpyNode(out, g, d, n, &params, a.ctx_raw()) }
            })
        })())
    }

    /// Adds a host node (`cudaGraphAddHostNode`): `f` runs on a driver thread at every launch
    /// of every executable of the graph, once the node's dependencies are done.
    ///
    /// `f` is owned by the graph (and kept for its clones, executables and launches in flight),
    /// and may run concurrently for launches of different executables, hence `Fn + Sync`. It
    /// must not call into CUDA: crate calls made there fail with [`Error::InHostFunction`]. A
    /// panic in `f` is caught and kept as the device's deferred error
    /// ([`Device::take_deferred_errors`](crate::Device::take_deferred_errors)). As the
    /// runtime's, host nodes are not called after the context hit a sticky error.
    #[doc(alias = "cudaGraphAddHostNode")]
    pub fn add_host_node<F: Fn() + Send + Sync + 'static>(
        &mut self,
        deps: &[GraphNode],
        f: F,
    ) -> Result<GraphNode> {
        let (params, token) = host_params(self.shared.device, f);
        record(self.add_node(
            "cudaGraphAddHostNode",
            deps,
            vec![token],
            |_, out, g, d, n| {
                // SAFETY: the trampoline takes `userData` as the `HostNode` that the bundle
                // keeps for as long as anything can call it.
                unsafe { sys::cuGraphAddHostNode(out, g, d, n, &params) }
            },
        ))
    }

    /// Adds an embedded copy of `child` (`cudaGraphAddChildGraphNode`). The copy keeps what
    /// `child`'s nodes refer to; `child` itself stays the caller's.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when `child` is another device's graph;
    /// [`Error::InvalidValue`] for a conditional body, for a graph with conditional nodes
    /// (the driver embeds none) and for a graph with memory allocation or free nodes (see
    /// [`GraphMem`](super::GraphMem)).
    #[doc(alias = "cudaGraphAddChildGraphNode")]
    pub fn add_child_graph_node(&mut self, deps: &[GraphNode], child: &Graph) -> Result<GraphNode> {
        const CALL: &str = "cudaGraphAddChildGraphNode";
        record((|| {
            if child.shared.device != self.shared.device {
                return Err(Error::DeviceMismatch {
                    call: CALL,
                    what: "the child graph",
                    found: child.shared.device,
                    expected: self.shared.device,
                });
            }
            child.not_body(CALL)?;
            refuse_mem_copy(child.has_mem_nodes(), CALL)?;
            // A graph with conditional bodies is refused before its lock is taken (review
            // rev-e15): the driver embeds no graph with conditional nodes, and a body of
            // `child` shares `child`'s lock, so that `body.add_child_graph_node(&child)` took
            // that lock twice, and two threads each adding the other's root to a body of their
            // own took the two locks in opposite orders: both hung forever. Without bodies, no
            // handle but `child` (borrowed here) and its executables (which take two locks only
            // in one global order) uses `child`'s lock.
            let bodies = child.shared.bodies.lock().len();
            if bodies > 0 {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("a graph with {bodies} conditional node bodies"),
                    reason: "a graph with conditional nodes cannot be embedded as a child graph",
                });
            }
            // (So the embedded copy has no conditional bodies, whose loops this graph's check
            // could not see: no body handle of `child` exists to add one meanwhile.)
            if child.shared.generation != self.shared.generation {
                return Err(Error::ContextDestroyed {
                    what: "graph",
                    device: self.shared.device,
                });
            }
            // The child's lock is held while the driver clones it (review finding): an
            // executable of the child on another thread may otherwise touch its nodes
            // meanwhile, which the driver forbids.
            let child_guard = child.shared.objects.lock();
            let child_objects = child_guard.clone();
            let c = child.shared.raw.0;
            let node = self.add_node(CALL, deps, Vec::new(), |_, out, g, d, n| {
                // SAFETY: live graphs; `child` is cloned into the node.
                unsafe { sys::cuGraphAddChildGraphNode(out, g, d, n, c) }
            })?;
            drop(child_guard);
            // The clone inside the node carries the child's references already; this graph
            // holds its own as well, so keeping them never depends on that.
            self.share_objects(&child_objects)?;
            Ok(node)
        })())
    }

    /// Gives this graph its own reference to each of `objects` (held by another live graph).
    pub(super) fn share_objects(&mut self, objects: &keep::Refs) -> Result<()> {
        // No driver call: this graph's chain keeps the other chain (see `keep::Refs`).
        self.shared.keeper().objects.lock().keep_all(objects);
        Ok(())
    }

    /// Adds a record of `event` (`cudaGraphAddEventRecordNode`). The graph keeps the event
    /// alive (hence the `Arc`).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when the event belongs to another device.
    #[doc(alias = "cudaGraphAddEventRecordNode")]
    pub fn add_event_record_node(
        &mut self,
        deps: &[GraphNode],
        event: &Arc<Event>,
    ) -> Result<GraphNode> {
        record(self.add_event_node(deps, event, true))
    }

    /// Adds a wait for `event` (`cudaGraphAddEventWaitNode`): later nodes wait for the work the
    /// event last recorded when the node runs. The graph keeps the event alive.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when the event belongs to another device.
    #[doc(alias = "cudaGraphAddEventWaitNode")]
    pub fn add_event_wait_node(
        &mut self,
        deps: &[GraphNode],
        event: &Arc<Event>,
    ) -> Result<GraphNode> {
        record(self.add_event_node(deps, event, false))
    }

    fn add_event_node(
        &mut self,
        deps: &[GraphNode],
        event: &Arc<Event>,
        is_record: bool,
    ) -> Result<GraphNode> {
        let call = if is_record {
            "cudaGraphAddEventRecordNode"
        } else {
            "cudaGraphAddEventWaitNode"
        };
        if event.device().ordinal() != self.shared.device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the event",
                found: event.device().ordinal(),
                expected: self.shared.device,
            });
        }
        // Fails when the event's context was reset since.
        let (_pin, ev) = event.pinned_raw()?;
        if !context::is_live(self.shared.device, self.shared.generation) {
            return Err(Error::ContextDestroyed {
                what: "graph",
                device: self.shared.device,
            });
        }
        let token: Token = Box::new(event.clone());
        self.add_node(call, deps, vec![token], |_, out, g, d, n| {
            // SAFETY: live graph and event (kept by the bundle from now on).
            unsafe {
                if is_record {
                    sys::cuGraphAddEventRecordNode(out, g, d, n, ev)
                } else {
                    sys::cuGraphAddEventWaitNode(out, g, d, n, ev)
                }
            }
        })
    }

    /// Adds dependencies: each `to[i]` runs after `from[i]` (`cudaGraphAddDependencies`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lists differ in length; [`Error::ForeignGraphNode`].
    #[doc(alias = "cudaGraphAddDependencies")]
    pub fn add_dependencies(&mut self, from: &[GraphNode], to: &[GraphNode]) -> Result<()> {
        const CALL: &str = "cudaGraphAddDependencies";
        record((|| {
            if from.len() != to.len() {
                return Err(Error::LengthMismatch {
                    what: CALL,
                    expected: from.len(),
                    actual: to.len(),
                });
            }
            let (f, t) = (self.raw_nodes(CALL, from)?, self.raw_nodes(CALL, to)?);
            if f.is_empty() {
                return Ok(());
            }
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            // SAFETY: live graph; `f.len()` nodes of it on each side; no edge data.
            a.check(
                unsafe {
                    sys::cuGraphAddDependencies_v2(
                        self.shared.raw.0,
                        f.as_ptr(),
                        t.as_ptr(),
                        std::ptr::null(),
                        f.len(),
                    )
                },
                "cuGraphAddDependencies",
            )
        })())
    }

    /// A copy of the graph (`cudaGraphClone`), with its own references to everything the
    /// nodes refer to. Node handles of the copy differ from the original's.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a conditional body, for a graph with a while node whose
    /// body holds no kernel (see [`ConditionalKind::While`](super::ConditionalKind::While)):
    /// the copy's bodies cannot be changed any more, and for a graph with memory allocation or
    /// free nodes (see [`GraphMem`](super::GraphMem)).
    #[doc(alias = "cudaGraphClone")]
    pub fn try_clone(&self) -> Result<Graph> {
        record((|| {
            self.not_body("cudaGraphClone")?;
            refuse_mem_copy(self.has_mem_nodes(), "cudaGraphClone")?;
            let a = self.enter()?;
            let objects = self.shared.objects.lock();
            // The copy's conditional bodies are the driver's copies, which no crate handle
            // reaches (so they stay as they are now) and which the copy's instantiation check
            // does not see: a while body that cannot end its loop is refused here, as the
            // original's instantiation refuses it (review finding: the copy of such a graph
            // instantiated, and its launches never ended). Under the lock held for the clone.
            self.check_while_bodies(&a, &objects, "cudaGraphClone")?;
            let mut raw: sys::CUgraph = std::ptr::null_mut();
            // SAFETY: live graph; valid out-parameter.
            a.check(
                unsafe { sys::cuGraphClone(&mut raw, self.shared.raw.0) },
                "cuGraphClone",
            )?;
            let mut clone = Graph::from_parts(&a, raw);
            let list = objects.clone();
            drop(objects);
            drop(a);
            // The driver copies the references to the clone; it holds its own as well.
            clone.share_objects(&list)?;
            Ok(clone)
        })())
    }

    /// Every node of the graph (`cudaGraphGetNodes`).
    #[doc(alias = "cudaGraphGetNodes")]
    pub fn nodes(&self) -> Result<Vec<GraphNode>> {
        record((|| {
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            let g = self.shared.raw.0;
            // SAFETY: live graph; the buffer holds `n` nodes (or is null for the count).
            node_list(&a, "cuGraphGetNodes", Some(&self.shared), |p, n| unsafe {
                sys::cuGraphGetNodes(g, p, n)
            })
        })())
    }

    /// The nodes without dependencies (`cudaGraphGetRootNodes`).
    #[doc(alias = "cudaGraphGetRootNodes")]
    pub fn root_nodes(&self) -> Result<Vec<GraphNode>> {
        record((|| {
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            let g = self.shared.raw.0;
            // SAFETY: as in `nodes`.
            node_list(
                &a,
                "cuGraphGetRootNodes",
                Some(&self.shared),
                |p, n| unsafe { sys::cuGraphGetRootNodes(g, p, n) },
            )
        })())
    }

    /// Every edge, as `(from, to)` pairs (`cudaGraphGetEdges`).
    #[doc(alias = "cudaGraphGetEdges")]
    pub fn edges(&self) -> Result<Vec<(GraphNode, GraphNode)>> {
        record((|| {
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            let g = self.shared.raw.0;
            let mut n = 0usize;
            let (null, no_data) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: live graph; null buffers ask for the count.
            a.check(
                unsafe { sys::cuGraphGetEdges_v2(g, null, null, no_data, &mut n) },
                "cuGraphGetEdges",
            )?;
            let mut from = vec![std::ptr::null_mut(); n];
            let mut to = vec![std::ptr::null_mut(); n];
            if n > 0 {
                // SAFETY: both buffers hold `n` nodes; no edge data is asked for.
                a.check(
                    unsafe {
                        sys::cuGraphGetEdges_v2(
                            g,
                            from.as_mut_ptr(),
                            to.as_mut_ptr(),
                            no_data,
                            &mut n,
                        )
                    },
                    "cuGraphGetEdges",
                )?;
            }
            let node = |raw: sys::CUgraphNode| self.shared.handle(raw as usize);
            Ok(from
                .into_iter()
                .zip(to)
                .take(n)
                .map(|(f, t)| (node(f), node(t)))
                .collect())
        })())
    }

    /// The nodes `node` depends on (`cudaGraphNodeGetDependencies`).
    #[doc(alias = "cudaGraphNodeGetDependencies")]
    pub fn dependencies(&self, node: GraphNode) -> Result<Vec<GraphNode>> {
        record((|| {
            let raw = self.raw_nodes("cudaGraphNodeGetDependencies", &[node])?[0];
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            // SAFETY: a live node of this graph; the buffer holds `n` nodes; no edge data.
            node_list(
                &a,
                "cuGraphNodeGetDependencies",
                Some(&self.shared),
                |p, n| unsafe {
                    sys::cuGraphNodeGetDependencies_v2(raw, p, std::ptr::null_mut(), n)
                },
            )
        })())
    }

    /// The nodes that depend on `node` (`cudaGraphNodeGetDependentNodes`).
    #[doc(alias = "cudaGraphNodeGetDependentNodes")]
    pub fn dependents(&self, node: GraphNode) -> Result<Vec<GraphNode>> {
        record((|| {
            let raw = self.raw_nodes("cudaGraphNodeGetDependentNodes", &[node])?[0];
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            // SAFETY: as in `dependencies`.
            node_list(
                &a,
                "cuGraphNodeGetDependentNodes",
                Some(&self.shared),
                |p, n| unsafe {
                    sys::cuGraphNodeGetDependentNodes_v2(raw, p, std::ptr::null_mut(), n)
                },
            )
        })())
    }

    /// The kind of `node` (`cudaGraphNodeGetType`).
    #[doc(alias = "cudaGraphNodeGetType")]
    pub fn node_type(&self, node: GraphNode) -> Result<GraphNodeType> {
        record((|| {
            let raw = self.raw_nodes("cudaGraphNodeGetType", &[node])?[0];
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            super::raw_node_type(&a, raw)
        })())
    }

    /// Writes a Graphviz DOT description of the graph to `path` (`cudaGraphDebugDotPrint`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a path that is not UTF-8 or holds a NUL byte; the driver's
    /// error when the file cannot be written.
    #[doc(alias = "cudaGraphDebugDotPrint")]
    pub fn debug_dot_print(&self, path: impl AsRef<Path>, flags: DotFlags) -> Result<()> {
        record((|| {
            let p = path.as_ref();
            let c = p
                .to_str()
                .and_then(|s| CString::new(s).ok())
                .ok_or_else(|| Error::InvalidValue {
                    what: "cudaGraphDebugDotPrint path",
                    value: p.display().to_string(),
                    reason: "must be UTF-8 without NUL bytes",
                })?;
            let a = self.enter()?;
            let _l = self.shared.keeper().objects.lock();
            // SAFETY: live graph; NUL-terminated path; known flag bits only.
            a.check(
                unsafe { sys::cuGraphDebugDotPrint(self.shared.raw.0, c.as_ptr(), flags.bits()) },
                "cuGraphDebugDotPrint",
            )
        })())
    }

    /// The DOT description of [`debug_dot_print`](Self::debug_dot_print) as a string (written
    /// to a temporary file, read back and removed).
    pub fn to_dot(&self, flags: DotFlags) -> Result<String> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "cuda-runtime-graph-{}-{}.dot",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        self.debug_dot_print(&path, flags)?;
        let text = std::fs::read_to_string(&path);
        let _ = std::fs::remove_file(&path);
        record(text.map_err(|e| Error::InvalidValue {
            what: "cudaGraphDebugDotPrint output",
            value: path.display().to_string(),
            reason: if e.kind() == std::io::ErrorKind::InvalidData {
                "not UTF-8"
            } else {
                "could not be read back"
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_graphs_with_memory_nodes_are_refused_before_the_driver() {
        assert!(refuse_mem_copy(false, "cudaGraphClone").is_ok());
        let e = refuse_mem_copy(true, "cudaGraphClone").unwrap_err();
        assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
        let s = e.to_string();
        assert!(
            s.contains("cudaGraphClone") && s.contains("memory allocation or free nodes"),
            "{s}"
        );
    }
}
