//! Stream capture and graphs, at the handle level: graphs, executables and nodes are the
//! driver's, handed to C unboxed; kernel nodes name a registered host stub (or a kernel handle)
//! as `cudaLaunchKernel` does. Out-parameters the driver fills with enumerations are passed
//! through without Rust reading them.
use std::ffi::c_void;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};

use crate::register::kernel_of_func;
use crate::stream::cudaHostFn_t;
use crate::{code, cudaError_t, cudaStream_t, dim3, dptr, driver, export, fail, out, stream_of};

/// `cudaGraph_t`.
pub type cudaGraph_t = sys::CUgraph;
/// `cudaGraphExec_t`.
pub type cudaGraphExec_t = sys::CUgraphExec;
/// `cudaGraphNode_t`.
pub type cudaGraphNode_t = sys::CUgraphNode;

/// `struct cudaKernelNodeParams` (56 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaKernelNodeParams {
    /// Host stub or kernel handle.
    pub func: *mut c_void,
    /// Grid.
    pub gridDim: dim3,
    /// Block.
    pub blockDim: dim3,
    /// Dynamic shared memory, bytes.
    pub sharedMemBytes: u32,
    /// One pointer per kernel parameter.
    pub kernelParams: *mut *mut c_void,
    /// Not supported by the runtime either (must be null).
    pub extra: *mut *mut c_void,
}

/// `struct cudaMemsetParams`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaMemsetParams {
    /// Destination.
    pub dst: *mut c_void,
    /// Pitch, bytes.
    pub pitch: usize,
    /// Value.
    pub value: u32,
    /// Element size: 1, 2 or 4 bytes.
    pub elementSize: u32,
    /// Width, elements.
    pub width: usize,
    /// Height, rows.
    pub height: usize,
}

/// `struct cudaHostNodeParams`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaHostNodeParams {
    /// Function.
    pub fn_: cudaHostFn_t,
    /// Its argument.
    pub userData: *mut c_void,
}

pub(crate) fn capture_mode(mode: i32) -> Result<sys::CUstreamCaptureMode, Error> {
    use sys::CUstreamCaptureMode as M;
    Ok(match mode {
        0 => M::CU_STREAM_CAPTURE_MODE_GLOBAL,
        1 => M::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        2 => M::CU_STREAM_CAPTURE_MODE_RELAXED,
        _ => return Err(fail(ErrorCode::InvalidValue, "cudaStreamBeginCapture")),
    })
}

fn begin(s: cudaStream_t, mode: i32, pt: bool) -> cudaError_t {
    code((|| {
        let m = capture_mode(mode)?;
        let a = Entered::current()?;
        // SAFETY: the caller's stream.
        a.check(
            unsafe { sys::cuStreamBeginCapture_v2(stream_of(s, pt), m) },
            "cuStreamBeginCapture",
        )
    })())
}

export! {
    /// `cudaStreamBeginCapture`.
    fn cudaStreamBeginCapture(stream: cudaStream_t, mode: i32) -> cudaError_t {
        begin(stream, mode, false)
    }
}

export! {
    /// `cudaStreamBeginCapture` with stream 0 as the per-thread stream.
    fn cudaStreamBeginCapture_ptsz(stream: cudaStream_t, mode: i32) -> cudaError_t {
        begin(stream, mode, true)
    }
}

fn end(s: cudaStream_t, graph: *mut cudaGraph_t, pt: bool) -> cudaError_t {
    code((|| {
        let g = out(graph, "cudaStreamEndCapture")?;
        let a = Entered::current()?;
        // SAFETY: valid out-parameter; the caller's stream.
        a.check(
            unsafe { sys::cuStreamEndCapture(stream_of(s, pt), g) },
            "cuStreamEndCapture",
        )
    })())
}

export! {
    /// `cudaStreamEndCapture`.
    fn cudaStreamEndCapture(stream: cudaStream_t, pGraph: *mut cudaGraph_t) -> cudaError_t {
        end(stream, pGraph, false)
    }
}

export! {
    /// `cudaStreamEndCapture` with stream 0 as the per-thread stream.
    fn cudaStreamEndCapture_ptsz(stream: cudaStream_t, pGraph: *mut cudaGraph_t) -> cudaError_t {
        end(stream, pGraph, true)
    }
}

fn is_capturing(s: cudaStream_t, status: *mut i32, pt: bool) -> cudaError_t {
    if status.is_null() {
        return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamIsCapturing")));
    }
    // SAFETY: the caller's status out-parameter (a C enum: passed through, not read here) and
    // stream.
    driver("cuStreamIsCapturing", || unsafe {
        sys::cuStreamIsCapturing(stream_of(s, pt), status.cast())
    })
}

export! {
    /// `cudaStreamIsCapturing`.
    fn cudaStreamIsCapturing(stream: cudaStream_t, pCaptureStatus: *mut i32) -> cudaError_t {
        is_capturing(stream, pCaptureStatus, false)
    }
}

export! {
    /// `cudaStreamIsCapturing` with stream 0 as the per-thread stream.
    fn cudaStreamIsCapturing_ptsz(stream: cudaStream_t, pCaptureStatus: *mut i32) -> cudaError_t {
        is_capturing(stream, pCaptureStatus, true)
    }
}

export! {
    /// `cudaThreadExchangeStreamCaptureMode`.
    fn cudaThreadExchangeStreamCaptureMode(mode: *mut i32) -> cudaError_t {
        code((|| {
            let m = out(mode, "cudaThreadExchangeStreamCaptureMode")?;
            capture_mode(*m)?;
            // SAFETY: a valid mode (checked) in the caller's variable, which the driver
            // overwrites with the previous mode.
            let r = unsafe { sys::cuThreadExchangeStreamCaptureMode((m as *mut i32).cast()) };
            Entered::current()?.check(r, "cuThreadExchangeStreamCaptureMode")
        })())
    }
}

export! {
    /// `cudaGraphCreate` (flags must be 0).
    fn cudaGraphCreate(pGraph: *mut cudaGraph_t, flags: u32) -> cudaError_t {
        code((|| {
            let g = out(pGraph, "cudaGraphCreate")?;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter.
            a.check(unsafe { sys::cuGraphCreate(g, flags) }, "cuGraphCreate")
        })())
    }
}

export! {
    /// `cudaGraphDestroy`.
    fn cudaGraphDestroy(graph: cudaGraph_t) -> cudaError_t {
        // SAFETY: the caller's graph.
        driver("cuGraphDestroy", || unsafe { sys::cuGraphDestroy(graph) })
    }
}

export! {
    /// `cudaGraphClone`.
    fn cudaGraphClone(pGraphClone: *mut cudaGraph_t, originalGraph: cudaGraph_t) -> cudaError_t {
        code((|| {
            let g = out(pGraphClone, "cudaGraphClone")?;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's graph.
            a.check(unsafe { sys::cuGraphClone(g, originalGraph) }, "cuGraphClone")
        })())
    }
}

fn instantiate(exec: *mut cudaGraphExec_t, graph: cudaGraph_t, flags: u64) -> cudaError_t {
    code((|| {
        let e = out(exec, "cudaGraphInstantiate")?;
        let a = Entered::current()?;
        // SAFETY: valid out-parameter; the caller's graph; the driver checks the flags.
        a.check(
            unsafe { sys::cuGraphInstantiateWithFlags(e, graph, flags) },
            "cuGraphInstantiate",
        )
    })())
}

export! {
    /// `cudaGraphInstantiate`.
    fn cudaGraphInstantiate(pGraphExec: *mut cudaGraphExec_t, graph: cudaGraph_t, flags: u64) -> cudaError_t {
        instantiate(pGraphExec, graph, flags)
    }
}

export! {
    /// `cudaGraphInstantiateWithFlags`.
    fn cudaGraphInstantiateWithFlags(pGraphExec: *mut cudaGraphExec_t, graph: cudaGraph_t, flags: u64) -> cudaError_t {
        instantiate(pGraphExec, graph, flags)
    }
}

export! {
    /// `cudaGraphExecDestroy`.
    fn cudaGraphExecDestroy(graphExec: cudaGraphExec_t) -> cudaError_t {
        // SAFETY: the caller's executable.
        driver("cuGraphExecDestroy", || unsafe { sys::cuGraphExecDestroy(graphExec) })
    }
}

export! {
    /// `cudaGraphLaunch`.
    fn cudaGraphLaunch(graphExec: cudaGraphExec_t, stream: cudaStream_t) -> cudaError_t {
        // SAFETY: the caller's executable and stream.
        driver("cuGraphLaunch", || unsafe { sys::cuGraphLaunch(graphExec, stream_of(stream, false)) })
    }
}

export! {
    /// `cudaGraphLaunch` with stream 0 as the per-thread stream.
    fn cudaGraphLaunch_ptsz(graphExec: cudaGraphExec_t, stream: cudaStream_t) -> cudaError_t {
        // SAFETY: as above.
        driver("cuGraphLaunch", || unsafe { sys::cuGraphLaunch(graphExec, stream_of(stream, true)) })
    }
}

export! {
    /// `cudaGraphUpload`.
    fn cudaGraphUpload(graphExec: cudaGraphExec_t, stream: cudaStream_t) -> cudaError_t {
        // SAFETY: as above.
        driver("cuGraphUpload", || unsafe { sys::cuGraphUpload(graphExec, stream_of(stream, false)) })
    }
}

export! {
    /// `cudaGraphUpload` with stream 0 as the per-thread stream.
    fn cudaGraphUpload_ptsz(graphExec: cudaGraphExec_t, stream: cudaStream_t) -> cudaError_t {
        // SAFETY: as above.
        driver("cuGraphUpload", || unsafe { sys::cuGraphUpload(graphExec, stream_of(stream, true)) })
    }
}

/// A node's dependencies: null with a count of 0, or the caller's array.
fn deps(p: *const cudaGraphNode_t, n: usize, call: &'static str) -> Result<(), Error> {
    if p.is_null() && n != 0 {
        return Err(fail(ErrorCode::InvalidValue, call));
    }
    Ok(())
}

export! {
    /// `cudaGraphAddEmptyNode`.
    fn cudaGraphAddEmptyNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize) -> cudaError_t {
        code((|| {
            let node = out(pGraphNode, "cudaGraphAddEmptyNode")?;
            deps(pDependencies, numDependencies, "cudaGraphAddEmptyNode")?;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's graph and `numDependencies` nodes.
            a.check(unsafe { sys::cuGraphAddEmptyNode(node, graph, pDependencies, numDependencies) }, "cuGraphAddEmptyNode")
        })())
    }
}

/// The driver's kernel-node parameters for the runtime's.
fn kernel_params(
    p: *const cudaKernelNodeParams,
    call: &'static str,
) -> Result<sys::CUDA_KERNEL_NODE_PARAMS, Error> {
    // SAFETY: C callers pass a readable struct or null (refused).
    let p = unsafe { p.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
    if !p.extra.is_null() {
        return Err(fail(ErrorCode::InvalidValue, call));
    }
    let kern = kernel_of_func(p.func)?;
    Ok(sys::CUDA_KERNEL_NODE_PARAMS {
        func: std::ptr::null_mut(),
        gridDimX: p.gridDim.x,
        gridDimY: p.gridDim.y,
        gridDimZ: p.gridDim.z,
        blockDimX: p.blockDim.x,
        blockDimY: p.blockDim.y,
        blockDimZ: p.blockDim.z,
        sharedMemBytes: p.sharedMemBytes,
        kernelParams: p.kernelParams,
        extra: std::ptr::null_mut(),
        kern,
        ctx: std::ptr::null_mut(),
    })
}

export! {
    /// `cudaGraphAddKernelNode` (the parameters are copied, as the runtime does).
    fn cudaGraphAddKernelNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, pNodeParams: *const cudaKernelNodeParams) -> cudaError_t {
        code((|| {
            let node = out(pGraphNode, "cudaGraphAddKernelNode")?;
            deps(pDependencies, numDependencies, "cudaGraphAddKernelNode")?;
            let params = kernel_params(pNodeParams, "cudaGraphAddKernelNode")?;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter and parameters; the caller's graph and nodes.
            a.check(unsafe { sys::cuGraphAddKernelNode_v2(node, graph, pDependencies, numDependencies, &params) }, "cuGraphAddKernelNode")
        })())
    }
}

export! {
    /// `cudaGraphKernelNodeSetParams`.
    fn cudaGraphKernelNodeSetParams(node: cudaGraphNode_t, pNodeParams: *const cudaKernelNodeParams) -> cudaError_t {
        code((|| {
            let params = kernel_params(pNodeParams, "cudaGraphKernelNodeSetParams")?;
            let a = Entered::current()?;
            // SAFETY: the caller's node; valid parameters.
            a.check(unsafe { sys::cuGraphKernelNodeSetParams_v2(node, &params) }, "cuGraphKernelNodeSetParams")
        })())
    }
}

export! {
    /// `cudaGraphExecKernelNodeSetParams`.
    fn cudaGraphExecKernelNodeSetParams(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, pNodeParams: *const cudaKernelNodeParams) -> cudaError_t {
        code((|| {
            let params = kernel_params(pNodeParams, "cudaGraphExecKernelNodeSetParams")?;
            let a = Entered::current()?;
            // SAFETY: the caller's executable and node; valid parameters.
            a.check(unsafe { sys::cuGraphExecKernelNodeSetParams_v2(hGraphExec, node, &params) }, "cuGraphExecKernelNodeSetParams")
        })())
    }
}

export! {
    /// `cudaGraphAddHostNode`.
    fn cudaGraphAddHostNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, pNodeParams: *const cudaHostNodeParams) -> cudaError_t {
        code((|| {
            let node = out(pGraphNode, "cudaGraphAddHostNode")?;
            deps(pDependencies, numDependencies, "cudaGraphAddHostNode")?;
            // SAFETY: C callers pass a readable struct or null (refused).
            let p = unsafe { pNodeParams.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaGraphAddHostNode"))?;
            if p.fn_.is_none() {
                return Err(fail(ErrorCode::InvalidValue, "cudaGraphAddHostNode"));
            }
            let params = sys::CUDA_HOST_NODE_PARAMS { fn_: p.fn_, userData: p.userData };
            let a = Entered::current()?;
            // SAFETY: valid out-parameter and parameters; the caller's graph and nodes.
            a.check(unsafe { sys::cuGraphAddHostNode(node, graph, pDependencies, numDependencies, &params) }, "cuGraphAddHostNode")
        })())
    }
}

export! {
    /// `cudaGraphAddMemsetNode` (in the current device's context).
    fn cudaGraphAddMemsetNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, pMemsetParams: *const cudaMemsetParams) -> cudaError_t {
        code((|| {
            let node = out(pGraphNode, "cudaGraphAddMemsetNode")?;
            deps(pDependencies, numDependencies, "cudaGraphAddMemsetNode")?;
            // SAFETY: C callers pass a readable struct or null (refused).
            let p = unsafe { pMemsetParams.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaGraphAddMemsetNode"))?;
            let params = sys::CUDA_MEMSET_NODE_PARAMS {
                dst: dptr(p.dst),
                pitch: p.pitch,
                value: p.value,
                elementSize: p.elementSize,
                width: p.width,
                height: p.height,
            };
            let a = Entered::current()?;
            // SAFETY: valid out-parameter and parameters; the caller's graph and nodes; the
            // entered context.
            a.check(unsafe { sys::cuGraphAddMemsetNode(node, graph, pDependencies, numDependencies, &params, a.context()) }, "cuGraphAddMemsetNode")
        })())
    }
}

export! {
    /// `cudaGraphAddMemcpyNode1D` (unified addresses; the kind is checked).
    fn cudaGraphAddMemcpyNode1D(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, dst: *mut c_void, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        code((|| {
            let node = out(pGraphNode, "cudaGraphAddMemcpyNode1D")?;
            deps(pDependencies, numDependencies, "cudaGraphAddMemcpyNode1D")?;
            if !(0..=4).contains(&kind) {
                return Err(fail(ErrorCode::InvalidMemcpyDirection, "cudaGraphAddMemcpyNode1D"));
            }
            let mut p = crate::blank_copy_3d();
            p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
            p.srcDevice = dptr(src);
            p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED;
            p.dstDevice = dptr(dst);
            p.WidthInBytes = count;
            p.Height = 1;
            p.Depth = 1;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter and descriptor; the caller's graph, nodes and memory.
            a.check(unsafe { sys::cuGraphAddMemcpyNode(node, graph, pDependencies, numDependencies, &p, a.context()) }, "cuGraphAddMemcpyNode")
        })())
    }
}

export! {
    /// `cudaGraphAddDependencies` (edge data may be null).
    fn cudaGraphAddDependencies(graph: cudaGraph_t, from: *const cudaGraphNode_t, to: *const cudaGraphNode_t, edgeData: *const c_void, numDependencies: usize) -> cudaError_t {
        // SAFETY: the caller's graph and arrays of `numDependencies` nodes (and edge data).
        driver("cuGraphAddDependencies", || unsafe {
            sys::cuGraphAddDependencies_v2(graph, from, to, edgeData.cast(), numDependencies)
        })
    }
}

export! {
    /// `cudaGraphGetNodes`.
    fn cudaGraphGetNodes(graph: cudaGraph_t, nodes: *mut cudaGraphNode_t, numNodes: *mut usize) -> cudaError_t {
        if numNodes.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphGetNodes")));
        }
        // SAFETY: the caller's graph, count and (optional) array of `*numNodes` entries.
        driver("cuGraphGetNodes", || unsafe { sys::cuGraphGetNodes(graph, nodes, numNodes) })
    }
}

export! {
    /// `cudaGraphExecUpdate` (the result info is the driver's struct, passed through).
    fn cudaGraphExecUpdate(hGraphExec: cudaGraphExec_t, hGraph: cudaGraph_t, resultInfo: *mut c_void) -> cudaError_t {
        if resultInfo.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphExecUpdate")));
        }
        // SAFETY: the caller's executable, graph and result struct (same layout as the driver's;
        // written by the driver, not read here).
        driver("cuGraphExecUpdate", || unsafe {
            sys::cuGraphExecUpdate_v2(hGraphExec, hGraph, resultInfo.cast())
        })
    }
}

fn add_with(
    node: *mut cudaGraphNode_t,
    deps_ptr: *const cudaGraphNode_t,
    n: usize,
    call: &'static str,
    f: impl FnOnce(*mut cudaGraphNode_t) -> sys::CUresult,
) -> cudaError_t {
    code((|| {
        let node = out(node, call)?;
        deps(deps_ptr, n, call)?;
        let a = Entered::current()?;
        a.check(f(node), call)
    })())
}

export! {
    /// `cudaGraphAddChildGraphNode` (the child is cloned into the graph, as the runtime does).
    fn cudaGraphAddChildGraphNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, childGraph: cudaGraph_t) -> cudaError_t {
        // SAFETY: valid out-parameter; the caller's graphs and nodes.
        add_with(pGraphNode, pDependencies, numDependencies, "cuGraphAddChildGraphNode", |n| unsafe {
            sys::cuGraphAddChildGraphNode(n, graph, pDependencies, numDependencies, childGraph)
        })
    }
}

export! {
    /// `cudaGraphAddEventRecordNode`.
    fn cudaGraphAddEventRecordNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, event: sys::CUevent) -> cudaError_t {
        // SAFETY: as above; the caller's event.
        add_with(pGraphNode, pDependencies, numDependencies, "cuGraphAddEventRecordNode", |n| unsafe {
            sys::cuGraphAddEventRecordNode(n, graph, pDependencies, numDependencies, event)
        })
    }
}

export! {
    /// `cudaGraphAddEventWaitNode`.
    fn cudaGraphAddEventWaitNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, event: sys::CUevent) -> cudaError_t {
        // SAFETY: as above.
        add_with(pGraphNode, pDependencies, numDependencies, "cuGraphAddEventWaitNode", |n| unsafe {
            sys::cuGraphAddEventWaitNode(n, graph, pDependencies, numDependencies, event)
        })
    }
}

export! {
    /// `cudaGraphNodeGetType` (the driver's numbers, which are the runtime's).
    fn cudaGraphNodeGetType(node: cudaGraphNode_t, pType: *mut i32) -> cudaError_t {
        if pType.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphNodeGetType")));
        }
        // SAFETY: the caller's node and out-parameter (an enum the driver writes; not read here).
        driver("cuGraphNodeGetType", || unsafe { sys::cuGraphNodeGetType(node, pType.cast()) })
    }
}

export! {
    /// `cudaGraphDestroyNode`.
    fn cudaGraphDestroyNode(node: cudaGraphNode_t) -> cudaError_t {
        // SAFETY: the caller's node.
        driver("cuGraphDestroyNode", || unsafe { sys::cuGraphDestroyNode(node) })
    }
}

export! {
    /// `cudaGraphGetRootNodes`.
    fn cudaGraphGetRootNodes(graph: cudaGraph_t, pRootNodes: *mut cudaGraphNode_t, pNumRootNodes: *mut usize) -> cudaError_t {
        if pNumRootNodes.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphGetRootNodes")));
        }
        // SAFETY: the caller's graph, count and optional array of `*pNumRootNodes` entries.
        driver("cuGraphGetRootNodes", || unsafe { sys::cuGraphGetRootNodes(graph, pRootNodes, pNumRootNodes) })
    }
}

export! {
    /// `cudaGraphChildGraphNodeGetGraph`.
    fn cudaGraphChildGraphNodeGetGraph(node: cudaGraphNode_t, pGraph: *mut cudaGraph_t) -> cudaError_t {
        code((|| {
            let g = out(pGraph, "cudaGraphChildGraphNodeGetGraph")?;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's node.
            a.check(unsafe { sys::cuGraphChildGraphNodeGetGraph(node, g) }, "cuGraphChildGraphNodeGetGraph")
        })())
    }
}

export! {
    /// `cudaGraphDebugDotPrint` (writes a DOT file).
    fn cudaGraphDebugDotPrint(graph: cudaGraph_t, path: *const std::ffi::c_char, flags: u32) -> cudaError_t {
        if path.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphDebugDotPrint")));
        }
        // SAFETY: the caller's graph and NUL-terminated path.
        driver("cuGraphDebugDotPrint", || unsafe { sys::cuGraphDebugDotPrint(graph, path, flags) })
    }
}

export! {
    /// `cudaGraphNodeSetEnabled` (kernel, memcpy and memset nodes).
    fn cudaGraphNodeSetEnabled(hGraphExec: cudaGraphExec_t, hNode: cudaGraphNode_t, isEnabled: u32) -> cudaError_t {
        // SAFETY: the caller's executable and node.
        driver("cuGraphNodeSetEnabled", || unsafe { sys::cuGraphNodeSetEnabled(hGraphExec, hNode, isEnabled) })
    }
}

export! {
    /// `cudaGraphNodeGetEnabled`.
    fn cudaGraphNodeGetEnabled(hGraphExec: cudaGraphExec_t, hNode: cudaGraphNode_t, isEnabled: *mut u32) -> cudaError_t {
        if isEnabled.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphNodeGetEnabled")));
        }
        // SAFETY: the caller's executable, node and out-parameter.
        driver("cuGraphNodeGetEnabled", || unsafe { sys::cuGraphNodeGetEnabled(hGraphExec, hNode, isEnabled) })
    }
}

export! {
    /// `cudaGraphExecHostNodeSetParams`.
    fn cudaGraphExecHostNodeSetParams(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, pNodeParams: *const cudaHostNodeParams) -> cudaError_t {
        code((|| {
            // SAFETY: a readable struct or null (refused).
            let p = unsafe { pNodeParams.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaGraphExecHostNodeSetParams"))?;
            if p.fn_.is_none() {
                return Err(fail(ErrorCode::InvalidValue, "cudaGraphExecHostNodeSetParams"));
            }
            let params = sys::CUDA_HOST_NODE_PARAMS { fn_: p.fn_, userData: p.userData };
            let a = Entered::current()?;
            // SAFETY: the caller's executable and node; valid parameters.
            a.check(unsafe { sys::cuGraphExecHostNodeSetParams(hGraphExec, node, &params) }, "cuGraphExecHostNodeSetParams")
        })())
    }
}

export! {
    /// `cudaGraphExecMemsetNodeSetParams`.
    fn cudaGraphExecMemsetNodeSetParams(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, pNodeParams: *const cudaMemsetParams) -> cudaError_t {
        code((|| {
            // SAFETY: a readable struct or null (refused).
            let p = unsafe { pNodeParams.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaGraphExecMemsetNodeSetParams"))?;
            let params = sys::CUDA_MEMSET_NODE_PARAMS {
                dst: dptr(p.dst),
                pitch: p.pitch,
                value: p.value,
                elementSize: p.elementSize,
                width: p.width,
                height: p.height,
            };
            let a = Entered::current()?;
            // SAFETY: the caller's executable and node; valid parameters; the entered context.
            a.check(unsafe { sys::cuGraphExecMemsetNodeSetParams(hGraphExec, node, &params, a.context()) }, "cuGraphExecMemsetNodeSetParams")
        })())
    }
}

export! {
    /// `cudaGraphExecChildGraphNodeSetParams`.
    fn cudaGraphExecChildGraphNodeSetParams(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, childGraph: cudaGraph_t) -> cudaError_t {
        // SAFETY: the caller's executable, node and graph.
        driver("cuGraphExecChildGraphNodeSetParams", || unsafe { sys::cuGraphExecChildGraphNodeSetParams(hGraphExec, node, childGraph) })
    }
}

export! {
    /// `cudaGraphExecEventRecordNodeSetEvent`.
    fn cudaGraphExecEventRecordNodeSetEvent(hGraphExec: cudaGraphExec_t, hNode: cudaGraphNode_t, event: sys::CUevent) -> cudaError_t {
        // SAFETY: the caller's executable, node and event.
        driver("cuGraphExecEventRecordNodeSetEvent", || unsafe { sys::cuGraphExecEventRecordNodeSetEvent(hGraphExec, hNode, event) })
    }
}

export! {
    /// `cudaGraphExecEventWaitNodeSetEvent`.
    fn cudaGraphExecEventWaitNodeSetEvent(hGraphExec: cudaGraphExec_t, hNode: cudaGraphNode_t, event: sys::CUevent) -> cudaError_t {
        // SAFETY: as above.
        driver("cuGraphExecEventWaitNodeSetEvent", || unsafe { sys::cuGraphExecEventWaitNodeSetEvent(hGraphExec, hNode, event) })
    }
}
