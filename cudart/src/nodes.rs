//! Graph memcpy nodes (3-D, 1-D and symbol forms, in graphs and executables), kernel-node
//! parameter queries, external-semaphore nodes, texture and surface object queries, and cluster
//! occupancy.
use std::ffi::c_void;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};

use crate::copy3d::{cudaMemcpy3DParms, params_3d, params_of};
use crate::graph::{cudaGraphExec_t, cudaGraphNode_t, cudaGraph_t, cudaKernelNodeParams};
use crate::memory::cudaChannelFormatDesc;
use crate::register::{cudaLaunchConfig_t, function_of, stub_of_kernel, symbol_range};
use crate::texture::{cudaResourceDesc, cudaTextureDesc, cudaTextureObject_t};
use crate::{code, cudaError_t, dim3, dptr, driver, export, fail, out, stream_of};

fn deps(p: *const cudaGraphNode_t, n: usize, call: &'static str) -> Result<(), Error> {
    if p.is_null() && n != 0 {
        return Err(fail(ErrorCode::InvalidValue, call));
    }
    Ok(())
}

/// A 1-D copy of `count` bytes between unified addresses.
fn linear(
    dst: sys::CUdeviceptr,
    src: sys::CUdeviceptr,
    count: usize,
    kind: i32,
    call: &'static str,
) -> Result<sys::CUDA_MEMCPY3D, Error> {
    if !(0..=4).contains(&kind) {
        return Err(fail(ErrorCode::InvalidMemcpyDirection, call));
    }
    let mut p = crate::blank_copy_3d();
    p.srcDevice = src;
    p.dstDevice = dst;
    p.WidthInBytes = count;
    p.Height = 1;
    p.Depth = 1;
    Ok(p)
}

fn add_copy(
    node: *mut cudaGraphNode_t,
    graph: cudaGraph_t,
    d: *const cudaGraphNode_t,
    n: usize,
    p: Result<sys::CUDA_MEMCPY3D, Error>,
    call: &'static str,
) -> cudaError_t {
    code((|| {
        let o = out(node, call)?;
        deps(d, n, call)?;
        let p = p?;
        let a = Entered::current()?;
        // SAFETY: valid out-parameter and descriptor; the caller's graph, nodes and memory.
        a.check(
            unsafe { sys::cuGraphAddMemcpyNode(o, graph, d, n, &p, a.context()) },
            "cuGraphAddMemcpyNode",
        )
    })())
}

fn read_params(
    p: *const cudaMemcpy3DParms,
    call: &'static str,
) -> Result<sys::CUDA_MEMCPY3D, Error> {
    // SAFETY: a readable parameter block or null (refused).
    let p = unsafe { p.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
    params_3d(p, call)
}

export! {
    /// `cudaGraphAddMemcpyNode` (a `cudaMemcpy3DParms`, with the units of `cudaMemcpy3D`).
    fn cudaGraphAddMemcpyNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, pCopyParams: *const cudaMemcpy3DParms) -> cudaError_t {
        add_copy(pGraphNode, graph, pDependencies, numDependencies, read_params(pCopyParams, "cudaGraphAddMemcpyNode"), "cudaGraphAddMemcpyNode")
    }
}

export! {
    /// `cudaGraphAddMemcpyNodeToSymbol`.
    fn cudaGraphAddMemcpyNodeToSymbol(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        const CALL: &str = "cudaGraphAddMemcpyNodeToSymbol";
        let p = symbol_range(symbol, count, offset, CALL).and_then(|d| linear(d, dptr(src), count, kind, CALL));
        add_copy(pGraphNode, graph, pDependencies, numDependencies, p, CALL)
    }
}

export! {
    /// `cudaGraphAddMemcpyNodeFromSymbol`.
    fn cudaGraphAddMemcpyNodeFromSymbol(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        const CALL: &str = "cudaGraphAddMemcpyNodeFromSymbol";
        let p = symbol_range(symbol, count, offset, CALL).and_then(|s| linear(dptr(dst), s, count, kind, CALL));
        add_copy(pGraphNode, graph, pDependencies, numDependencies, p, CALL)
    }
}

export! {
    /// `cudaGraphMemcpyNodeGetParams` (array sides in elements; kind `cudaMemcpyDefault`).
    fn cudaGraphMemcpyNodeGetParams(node: cudaGraphNode_t, pNodeParams: *mut cudaMemcpy3DParms) -> cudaError_t {
        code((|| {
            let o = out(pNodeParams, "cudaGraphMemcpyNodeGetParams")?;
            let a = Entered::current()?;
            let mut d = crate::blank_copy_3d();
            // SAFETY: a writable descriptor; the caller's memcpy node.
            a.check(unsafe { sys::cuGraphMemcpyNodeGetParams(node, &mut d) }, "cuGraphMemcpyNodeGetParams")?;
            *o = params_of(&d)?;
            Ok(())
        })())
    }
}

fn set_copy(
    exec: Option<cudaGraphExec_t>,
    node: cudaGraphNode_t,
    p: Result<sys::CUDA_MEMCPY3D, Error>,
) -> cudaError_t {
    code((|| {
        let p = p?;
        let a = Entered::current()?;
        // SAFETY: the caller's node (and executable) and a checked descriptor.
        let r = unsafe {
            match exec {
                None => sys::cuGraphMemcpyNodeSetParams(node, &p),
                Some(e) => sys::cuGraphExecMemcpyNodeSetParams(e, node, &p, a.context()),
            }
        };
        a.check(
            r,
            if exec.is_some() {
                "cuGraphExecMemcpyNodeSetParams"
            } else {
                "cuGraphMemcpyNodeSetParams"
            },
        )
    })())
}

export! {
    /// `cudaGraphMemcpyNodeSetParams`.
    fn cudaGraphMemcpyNodeSetParams(node: cudaGraphNode_t, pNodeParams: *const cudaMemcpy3DParms) -> cudaError_t {
        set_copy(None, node, read_params(pNodeParams, "cudaGraphMemcpyNodeSetParams"))
    }
}

export! {
    /// `cudaGraphMemcpyNodeSetParams1D`.
    fn cudaGraphMemcpyNodeSetParams1D(node: cudaGraphNode_t, dst: *mut c_void, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        set_copy(None, node, linear(dptr(dst), dptr(src), count, kind, "cudaGraphMemcpyNodeSetParams1D"))
    }
}

export! {
    /// `cudaGraphMemcpyNodeSetParamsToSymbol`.
    fn cudaGraphMemcpyNodeSetParamsToSymbol(node: cudaGraphNode_t, symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        const CALL: &str = "cudaGraphMemcpyNodeSetParamsToSymbol";
        set_copy(None, node, symbol_range(symbol, count, offset, CALL).and_then(|d| linear(d, dptr(src), count, kind, CALL)))
    }
}

export! {
    /// `cudaGraphMemcpyNodeSetParamsFromSymbol`.
    fn cudaGraphMemcpyNodeSetParamsFromSymbol(node: cudaGraphNode_t, dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        const CALL: &str = "cudaGraphMemcpyNodeSetParamsFromSymbol";
        set_copy(None, node, symbol_range(symbol, count, offset, CALL).and_then(|s| linear(dptr(dst), s, count, kind, CALL)))
    }
}

export! {
    /// `cudaGraphExecMemcpyNodeSetParams`.
    fn cudaGraphExecMemcpyNodeSetParams(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, pNodeParams: *const cudaMemcpy3DParms) -> cudaError_t {
        set_copy(Some(hGraphExec), node, read_params(pNodeParams, "cudaGraphExecMemcpyNodeSetParams"))
    }
}

export! {
    /// `cudaGraphExecMemcpyNodeSetParams1D`.
    fn cudaGraphExecMemcpyNodeSetParams1D(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, dst: *mut c_void, src: *const c_void, count: usize, kind: i32) -> cudaError_t {
        set_copy(Some(hGraphExec), node, linear(dptr(dst), dptr(src), count, kind, "cudaGraphExecMemcpyNodeSetParams1D"))
    }
}

export! {
    /// `cudaGraphExecMemcpyNodeSetParamsToSymbol`.
    fn cudaGraphExecMemcpyNodeSetParamsToSymbol(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        const CALL: &str = "cudaGraphExecMemcpyNodeSetParamsToSymbol";
        set_copy(Some(hGraphExec), node, symbol_range(symbol, count, offset, CALL).and_then(|d| linear(d, dptr(src), count, kind, CALL)))
    }
}

export! {
    /// `cudaGraphExecMemcpyNodeSetParamsFromSymbol`.
    fn cudaGraphExecMemcpyNodeSetParamsFromSymbol(hGraphExec: cudaGraphExec_t, node: cudaGraphNode_t, dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        const CALL: &str = "cudaGraphExecMemcpyNodeSetParamsFromSymbol";
        set_copy(Some(hGraphExec), node, symbol_range(symbol, count, offset, CALL).and_then(|s| linear(dptr(dst), s, count, kind, CALL)))
    }
}

export! {
    /// `cudaGraphKernelNodeGetParams` (`func` is the registered host stub of the node's kernel,
    /// or the kernel handle when none was registered).
    fn cudaGraphKernelNodeGetParams(node: cudaGraphNode_t, pNodeParams: *mut cudaKernelNodeParams) -> cudaError_t {
        code((|| {
            let o = out(pNodeParams, "cudaGraphKernelNodeGetParams")?;
            let a = Entered::current()?;
            let mut p = sys::CUDA_KERNEL_NODE_PARAMS {
                func: std::ptr::null_mut(),
                gridDimX: 0,
                gridDimY: 0,
                gridDimZ: 0,
                blockDimX: 0,
                blockDimY: 0,
                blockDimZ: 0,
                sharedMemBytes: 0,
                kernelParams: std::ptr::null_mut(),
                extra: std::ptr::null_mut(),
                kern: std::ptr::null_mut(),
                ctx: std::ptr::null_mut(),
            };
            // SAFETY: a writable block; the caller's kernel node.
            a.check(unsafe { sys::cuGraphKernelNodeGetParams_v2(node, &mut p) }, "cuGraphKernelNodeGetParams")?;
            let func = if p.kern.is_null() { p.func.cast() } else { stub_of_kernel(p.kern) };
            *o = cudaKernelNodeParams {
                func,
                gridDim: dim3 { x: p.gridDimX, y: p.gridDimY, z: p.gridDimZ },
                blockDim: dim3 { x: p.blockDimX, y: p.blockDimY, z: p.blockDimZ },
                sharedMemBytes: p.sharedMemBytes,
                kernelParams: p.kernelParams,
                extra: p.extra,
            };
            Ok(())
        })())
    }
}

// ---- External-semaphore nodes (the parameter blocks are the driver's layout) -------------------

fn add_sem_node(
    node: *mut cudaGraphNode_t,
    graph: cudaGraph_t,
    d: *const cudaGraphNode_t,
    n: usize,
    params: *const c_void,
    signal: bool,
) -> cudaError_t {
    let call = if signal {
        "cudaGraphAddExternalSemaphoresSignalNode"
    } else {
        "cudaGraphAddExternalSemaphoresWaitNode"
    };
    if node.is_null() || params.is_null() || (n > 0 && d.is_null()) {
        return code(Err(fail(ErrorCode::InvalidValue, call)));
    }
    if signal {
        // SAFETY: the caller's graph, dependencies and parameter block.
        driver("cuGraphAddExternalSemaphoresSignalNode", || unsafe {
            sys::cuGraphAddExternalSemaphoresSignalNode(node, graph, d, n, params.cast())
        })
    } else {
        // SAFETY: as above.
        driver("cuGraphAddExternalSemaphoresWaitNode", || unsafe {
            sys::cuGraphAddExternalSemaphoresWaitNode(node, graph, d, n, params.cast())
        })
    }
}

export! {
    /// `cudaGraphAddExternalSemaphoresSignalNode`.
    fn cudaGraphAddExternalSemaphoresSignalNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, nodeParams: *const c_void) -> cudaError_t {
        add_sem_node(pGraphNode, graph, pDependencies, numDependencies, nodeParams, true)
    }
}

export! {
    /// `cudaGraphAddExternalSemaphoresWaitNode`.
    fn cudaGraphAddExternalSemaphoresWaitNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, nodeParams: *const c_void) -> cudaError_t {
        add_sem_node(pGraphNode, graph, pDependencies, numDependencies, nodeParams, false)
    }
}

/// Which parameter call of an external-semaphore node.
#[derive(Clone, Copy)]
enum SemOp {
    Get,
    Set,
    ExecSet(cudaGraphExec_t),
}

fn sem_params(node: cudaGraphNode_t, p: *mut c_void, signal: bool, op: SemOp) -> cudaError_t {
    if p.is_null() {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaGraphExternalSemaphoresNodeParams",
        )));
    }
    // SAFETY (every arm): the caller's node (and executable) and a parameter block of the
    // driver's layout, readable or writable as the call needs.
    match (signal, op) {
        (true, SemOp::Get) => driver("cuGraphExternalSemaphoresSignalNodeGetParams", || unsafe {
            sys::cuGraphExternalSemaphoresSignalNodeGetParams(node, p.cast())
        }),
        (true, SemOp::Set) => driver("cuGraphExternalSemaphoresSignalNodeSetParams", || unsafe {
            sys::cuGraphExternalSemaphoresSignalNodeSetParams(node, p.cast())
        }),
        (true, SemOp::ExecSet(e)) => driver(
            "cuGraphExecExternalSemaphoresSignalNodeSetParams",
            || unsafe { sys::cuGraphExecExternalSemaphoresSignalNodeSetParams(e, node, p.cast()) },
        ),
        (false, SemOp::Get) => driver("cuGraphExternalSemaphoresWaitNodeGetParams", || unsafe {
            sys::cuGraphExternalSemaphoresWaitNodeGetParams(node, p.cast())
        }),
        (false, SemOp::Set) => driver("cuGraphExternalSemaphoresWaitNodeSetParams", || unsafe {
            sys::cuGraphExternalSemaphoresWaitNodeSetParams(node, p.cast())
        }),
        (false, SemOp::ExecSet(e)) => driver(
            "cuGraphExecExternalSemaphoresWaitNodeSetParams",
            || unsafe { sys::cuGraphExecExternalSemaphoresWaitNodeSetParams(e, node, p.cast()) },
        ),
    }
}

export! {
    /// `cudaGraphExternalSemaphoresSignalNodeGetParams`.
    fn cudaGraphExternalSemaphoresSignalNodeGetParams(hNode: cudaGraphNode_t, params_out: *mut c_void) -> cudaError_t {
        sem_params(hNode, params_out, true, SemOp::Get)
    }
}

export! {
    /// `cudaGraphExternalSemaphoresSignalNodeSetParams`.
    fn cudaGraphExternalSemaphoresSignalNodeSetParams(hNode: cudaGraphNode_t, nodeParams: *const c_void) -> cudaError_t {
        sem_params(hNode, nodeParams.cast_mut(), true, SemOp::Set)
    }
}

export! {
    /// `cudaGraphExecExternalSemaphoresSignalNodeSetParams`.
    fn cudaGraphExecExternalSemaphoresSignalNodeSetParams(hGraphExec: cudaGraphExec_t, hNode: cudaGraphNode_t, nodeParams: *const c_void) -> cudaError_t {
        sem_params(hNode, nodeParams.cast_mut(), true, SemOp::ExecSet(hGraphExec))
    }
}

export! {
    /// `cudaGraphExternalSemaphoresWaitNodeGetParams`.
    fn cudaGraphExternalSemaphoresWaitNodeGetParams(hNode: cudaGraphNode_t, params_out: *mut c_void) -> cudaError_t {
        sem_params(hNode, params_out, false, SemOp::Get)
    }
}

export! {
    /// `cudaGraphExternalSemaphoresWaitNodeSetParams`.
    fn cudaGraphExternalSemaphoresWaitNodeSetParams(hNode: cudaGraphNode_t, nodeParams: *const c_void) -> cudaError_t {
        sem_params(hNode, nodeParams.cast_mut(), false, SemOp::Set)
    }
}

export! {
    /// `cudaGraphExecExternalSemaphoresWaitNodeSetParams`.
    fn cudaGraphExecExternalSemaphoresWaitNodeSetParams(hGraphExec: cudaGraphExec_t, hNode: cudaGraphNode_t, nodeParams: *const c_void) -> cudaError_t {
        sem_params(hNode, nodeParams.cast_mut(), false, SemOp::ExecSet(hGraphExec))
    }
}

// ---- Texture and surface object queries -----------------------------------------------------

/// `CUDA_RESOURCE_DESC` read as numbers (enumerations the driver writes are never turned into
/// Rust enumeration values): type, union as words, flags.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawResource {
    res_type: u32,
    _pad: u32,
    words: [u64; 16],
    flags: u32,
    _pad2: u32,
}

/// `CUDA_TEXTURE_DESC` read as numbers.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawTexture {
    address: [u32; 3],
    filter: u32,
    flags: u32,
    max_anisotropy: u32,
    mipmap_filter: u32,
    bias: f32,
    min_clamp: f32,
    max_clamp: f32,
    border: [f32; 4],
    reserved: [i32; 12],
}

/// The runtime's channel description of a driver format number and channel count.
fn channel(format: u32, n: u32) -> Result<cudaChannelFormatDesc, Error> {
    let (bits, f) = match format {
        0x01 => (8, 1),
        0x02 => (16, 1),
        0x03 => (32, 1),
        0x08 => (8, 0),
        0x09 => (16, 0),
        0x0a => (32, 0),
        0x10 => (16, 2),
        0x20 => (32, 2),
        _ => {
            return Err(fail(
                ErrorCode::InvalidChannelDescriptor,
                "cudaGetTextureObjectResourceDesc",
            ))
        }
    };
    let c = |i: u32| if i < n { bits } else { 0 };
    Ok(cudaChannelFormatDesc {
        x: c(0),
        y: c(1),
        z: c(2),
        w: c(3),
        f,
    })
}

/// The runtime's resource description of the driver's (read as numbers).
fn resource_of(r: &RawResource) -> Result<cudaResourceDesc, Error> {
    use crate::texture::{Linear, Pitch2D, ResUnion};
    let w = &r.words;
    let res = match r.res_type {
        0 | 1 => ResUnion {
            handle: w[0] as usize as *mut c_void,
        },
        2 => ResUnion {
            linear: Linear {
                devPtr: w[0] as usize as *mut c_void,
                desc: channel(w[1] as u32, (w[1] >> 32) as u32)?,
                sizeInBytes: w[2] as usize,
            },
        },
        3 => ResUnion {
            pitch2d: Pitch2D {
                devPtr: w[0] as usize as *mut c_void,
                desc: channel(w[1] as u32, (w[1] >> 32) as u32)?,
                width: w[2] as usize,
                height: w[3] as usize,
                pitchInBytes: w[4] as usize,
            },
        },
        _ => {
            return Err(fail(
                ErrorCode::InvalidValue,
                "cudaGetTextureObjectResourceDesc",
            ))
        }
    };
    Ok(cudaResourceDesc {
        resType: r.res_type as i32,
        res,
        flags: r.flags,
    })
}

fn blank_resource() -> RawResource {
    RawResource {
        res_type: 0,
        _pad: 0,
        words: [0; 16],
        flags: 0,
        _pad2: 0,
    }
}

export! {
    /// `cudaGetTextureObjectResourceDesc`.
    fn cudaGetTextureObjectResourceDesc(pResDesc: *mut cudaResourceDesc, texObject: cudaTextureObject_t) -> cudaError_t {
        code((|| {
            let o = out(pResDesc, "cudaGetTextureObjectResourceDesc")?;
            let a = Entered::current()?;
            let mut r = blank_resource();
            // SAFETY: a writable block of the driver's size (checked in the tests); the caller's
            // texture object.
            a.check(unsafe { sys::cuTexObjectGetResourceDesc((&mut r as *mut RawResource).cast(), texObject) }, "cuTexObjectGetResourceDesc")?;
            *o = resource_of(&r)?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaGetSurfaceObjectResourceDesc`.
    fn cudaGetSurfaceObjectResourceDesc(pResDesc: *mut cudaResourceDesc, surfObject: cudaTextureObject_t) -> cudaError_t {
        code((|| {
            let o = out(pResDesc, "cudaGetSurfaceObjectResourceDesc")?;
            let a = Entered::current()?;
            let mut r = blank_resource();
            // SAFETY: as above, for a surface object.
            a.check(unsafe { sys::cuSurfObjectGetResourceDesc((&mut r as *mut RawResource).cast(), surfObject) }, "cuSurfObjectGetResourceDesc")?;
            *o = resource_of(&r)?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaGetTextureObjectTextureDesc`.
    fn cudaGetTextureObjectTextureDesc(pTexDesc: *mut cudaTextureDesc, texObject: cudaTextureObject_t) -> cudaError_t {
        code((|| {
            let o = out(pTexDesc, "cudaGetTextureObjectTextureDesc")?;
            let a = Entered::current()?;
            let mut t = RawTexture::default();
            // SAFETY: a writable block of the driver's size (checked in the tests).
            a.check(unsafe { sys::cuTexObjectGetTextureDesc((&mut t as *mut RawTexture).cast(), texObject) }, "cuTexObjectGetTextureDesc")?;
            *o = texture_of(&t);
            if let Some(b) = crate::texture::border_of(texObject) {
                o.borderColor = b;
            }
            Ok(())
        })())
    }
}

fn texture_of(t: &RawTexture) -> cudaTextureDesc {
    let flag = |b: u32| i32::from(t.flags & b != 0);
    cudaTextureDesc {
        addressMode: [
            t.address[0] as i32,
            t.address[1] as i32,
            t.address[2] as i32,
        ],
        filterMode: t.filter as i32,
        // CU_TRSF_READ_AS_INTEGER: element type (0); otherwise normalised float (1).
        readMode: 1 - flag(0x1),
        sRGB: flag(0x10),
        borderColor: t.border,
        normalizedCoords: flag(0x2),
        maxAnisotropy: t.max_anisotropy,
        mipmapFilterMode: t.mipmap_filter as i32,
        mipmapLevelBias: t.bias,
        minMipmapLevelClamp: t.min_clamp,
        maxMipmapLevelClamp: t.max_clamp,
        disableTrilinearOptimization: flag(0x20),
        seamlessCubemap: flag(0x40),
    }
}

export! {
    /// `cudaGetTextureObjectResourceViewDesc` (`cudaResourceViewDesc` is the driver's layout).
    fn cudaGetTextureObjectResourceViewDesc(pResViewDesc: *mut c_void, texObject: cudaTextureObject_t) -> cudaError_t {
        if pResViewDesc.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGetTextureObjectResourceViewDesc")));
        }
        // SAFETY: a writable 112-byte block; the caller's texture object.
        driver("cuTexObjectGetResourceViewDesc", || unsafe { sys::cuTexObjectGetResourceViewDesc(pResViewDesc.cast(), texObject) })
    }
}

// ---- Cluster occupancy ------------------------------------------------------------------------

fn cluster_query(
    result: *mut i32,
    func: *const c_void,
    config: *const cudaLaunchConfig_t,
    active: bool,
) -> cudaError_t {
    let call = if active {
        "cudaOccupancyMaxActiveClusters"
    } else {
        "cudaOccupancyMaxPotentialClusterSize"
    };
    code((|| {
        let o = out(result, call)?;
        // SAFETY: a readable configuration or null (refused).
        let c = unsafe { config.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, call))?;
        if c.numAttrs > 0 && c.attrs.is_null() {
            return Err(fail(ErrorCode::InvalidValue, call));
        }
        let shared =
            u32::try_from(c.dynamicSmemBytes).map_err(|_| fail(ErrorCode::InvalidValue, call))?;
        let a = Entered::current()?;
        let f = function_of(&a, func)?;
        let cfg = sys::CUlaunchConfig {
            gridDimX: c.gridDim.x,
            gridDimY: c.gridDim.y,
            gridDimZ: c.gridDim.z,
            blockDimX: c.blockDim.x,
            blockDimY: c.blockDim.y,
            blockDimZ: c.blockDim.z,
            sharedMemBytes: shared,
            hStream: stream_of(c.stream, false),
            attrs: c.attrs.cast(),
            numAttrs: c.numAttrs,
        };
        let mut v = 0;
        // SAFETY: valid out-parameter; a configuration whose attributes the caller laid out as
        // the driver's; a function of the current context.
        let r = unsafe {
            if active {
                sys::cuOccupancyMaxActiveClusters(&mut v, f, &cfg)
            } else {
                sys::cuOccupancyMaxPotentialClusterSize(&mut v, f, &cfg)
            }
        };
        a.check(
            r,
            if active {
                "cuOccupancyMaxActiveClusters"
            } else {
                "cuOccupancyMaxPotentialClusterSize"
            },
        )?;
        *o = v;
        Ok(())
    })())
}

export! {
    /// `cudaOccupancyMaxActiveClusters`.
    fn cudaOccupancyMaxActiveClusters(numClusters: *mut i32, func: *const c_void, launchConfig: *const cudaLaunchConfig_t) -> cudaError_t {
        cluster_query(numClusters, func, launchConfig, true)
    }
}

export! {
    /// `cudaOccupancyMaxPotentialClusterSize`.
    fn cudaOccupancyMaxPotentialClusterSize(clusterSize: *mut i32, func: *const c_void, launchConfig: *const cudaLaunchConfig_t) -> cudaError_t {
        cluster_query(clusterSize, func, launchConfig, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn raw_blocks_have_the_drivers_sizes() {
        assert_eq!(
            size_of::<RawResource>(),
            size_of::<sys::CUDA_RESOURCE_DESC>()
        );
        assert_eq!(size_of::<RawTexture>(), size_of::<sys::CUDA_TEXTURE_DESC>());
        assert_eq!(size_of::<sys::CUDA_RESOURCE_VIEW_DESC>(), 112);
    }

    #[test]
    fn texture_flags_map_back() {
        let mut t = RawTexture {
            address: [1, 3, 0],
            filter: 1,
            flags: 0x2 | 0x40,
            ..Default::default()
        };
        let d = texture_of(&t);
        assert_eq!(d.addressMode, [1, 3, 0]);
        assert_eq!((d.filterMode, d.readMode, d.normalizedCoords), (1, 1, 1));
        assert_eq!(
            (d.seamlessCubemap, d.sRGB, d.disableTrilinearOptimization),
            (1, 0, 0)
        );
        t.flags = 0x1 | 0x10 | 0x20;
        let d = texture_of(&t);
        assert_eq!(
            (d.readMode, d.sRGB, d.disableTrilinearOptimization),
            (0, 1, 1)
        );
        assert_eq!(d.normalizedCoords, 0);
    }

    #[test]
    fn formats_map_back_to_channel_descriptions() {
        // Every format and channel count the creation path accepts maps back to itself.
        for f in [0, 1, 2] {
            for bits in [8, 16, 32] {
                for n in [1, 2, 4] {
                    let ch = |i| if i < n { bits } else { 0 };
                    let d = cudaChannelFormatDesc {
                        x: ch(0),
                        y: ch(1),
                        z: ch(2),
                        w: ch(3),
                        f,
                    };
                    let Ok((fmt, count)) = crate::texture::format(&d, "t") else {
                        continue;
                    };
                    assert_eq!(channel(fmt as u32, count).unwrap(), d);
                }
            }
        }
        assert!(channel(0x77, 1).is_err());
    }

    #[test]
    fn pitched_resource_words_are_read_in_order() {
        let mut r = blank_resource();
        r.res_type = 3;
        r.words = [0; 16];
        r.words[0] = 0x7000_0000;
        r.words[1] = 0x20 | (2u64 << 32);
        r.words[2] = 640;
        r.words[3] = 480;
        r.words[4] = 2560;
        let d = resource_of(&r).unwrap();
        assert_eq!(d.resType, 3);
        // SAFETY: the member `resType` 3 selects.
        let p = unsafe { d.res.pitch2d };
        assert_eq!(p.devPtr as usize, 0x7000_0000);
        assert_eq!((p.width, p.height, p.pitchInBytes), (640, 480, 2560));
        assert_eq!((p.desc.x, p.desc.y, p.desc.z, p.desc.f), (32, 32, 0, 2));
    }
}

// ---- Generic node parameters (`cudaGraphNodeParams`, 256 bytes) -------------------------------

/// A `cudaGraphNodeParams` / `CUgraphNodeParams` block as bytes (both are 256 bytes, the type at
/// 0 and the union at 16; which members differ, and where, was measured with gcc on the 13.0
/// headers).
#[repr(C, align(8))]
struct RawNode([u8; 256]);

const UNION: usize = 16;

impl RawNode {
    fn put<T: Copy>(&mut self, at: usize, v: T) {
        assert!(at + std::mem::size_of::<T>() <= 256);
        // SAFETY: in bounds (checked above); unaligned writes of plain data.
        unsafe { std::ptr::write_unaligned(self.0.as_mut_ptr().add(at).cast::<T>(), v) }
    }
    fn get<T: Copy>(&self, at: usize) -> T {
        assert!(at + std::mem::size_of::<T>() <= 256);
        // SAFETY: in bounds; every `T` read here is plain data valid for any bytes (integers,
        // pointers, the runtime's copy parameters).
        unsafe { std::ptr::read_unaligned(self.0.as_ptr().add(at).cast::<T>()) }
    }
}

/// The driver's block for a runtime one: kernel nodes name the kernel of the stub, copies are
/// translated and every member that carries a context gets the current one.
fn driver_node(p: *const c_void, a: &Entered, call: &'static str) -> Result<RawNode, Error> {
    if p.is_null() {
        return Err(fail(ErrorCode::InvalidValue, call));
    }
    let mut n = RawNode([0; 256]);
    // SAFETY: C callers pass a readable 256-byte `cudaGraphNodeParams`.
    unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), n.0.as_mut_ptr(), 256) };
    let ctx = a.context();
    match n.get::<i32>(0) {
        0 => {
            // Kernel: `func` (a stub or kernel handle) becomes `kern`; func and ctx null.
            let func: *const c_void = n.get(UNION);
            let k = crate::register::kernel_of_func(func)?;
            n.put(UNION, std::ptr::null_mut::<c_void>());
            n.put(UNION + 56, k);
            n.put(UNION + 64, std::ptr::null_mut::<c_void>());
        }
        1 => {
            // Memcpy: flags stay; the runtime's 3-D parameters become the driver's descriptor.
            let rt: cudaMemcpy3DParms = n.get(UNION + 16);
            let d = params_3d(&rt, call)?;
            n.put(UNION + 4, 0i32);
            n.put(UNION + 8, ctx);
            n.put(UNION + 16, d);
        }
        2 => n.put(UNION + 40, ctx),  // memset: context
        13 => n.put(UNION + 24, ctx), // conditional: context
        3..=12 => {}                  // the same layout on both sides
        _ => return Err(fail(ErrorCode::InvalidValue, call)),
    }
    Ok(n)
}

export! {
    /// `cudaGraphAddNode` (any node kind, with optional edge data).
    fn cudaGraphAddNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, dependencyData: *const c_void, numDependencies: usize, nodeParams: *mut c_void) -> cudaError_t {
        const CALL: &str = "cudaGraphAddNode";
        code((|| {
            let o = out(pGraphNode, CALL)?;
            deps(pDependencies, numDependencies, CALL)?;
            let a = Entered::current()?;
            let mut n = driver_node(nodeParams, &a, CALL)?;
            // SAFETY: valid out-parameter; the caller's graph, dependencies and edge data; a
            // block of the driver's layout.
            a.check(
                unsafe { sys::cuGraphAddNode_v2(o, graph, pDependencies, dependencyData.cast(), numDependencies, n.0.as_mut_ptr().cast()) },
                "cuGraphAddNode",
            )?;
            if n.get::<i32>(0) == 10 {
                // An allocation node: the driver wrote the address into the block; hand it back
                // (the runtime's allocation parameters are the driver's layout).
                // SAFETY: the caller's writable 256-byte block.
                unsafe { std::ptr::copy_nonoverlapping(n.0.as_ptr().add(UNION), nodeParams.cast::<u8>().add(UNION), 232) };
            }
            Ok(())
        })())
    }
}

export! {
    /// `cudaGraphNodeSetParams`.
    fn cudaGraphNodeSetParams(node: cudaGraphNode_t, nodeParams: *mut c_void) -> cudaError_t {
        code((|| {
            let a = Entered::current()?;
            let mut n = driver_node(nodeParams, &a, "cudaGraphNodeSetParams")?;
            // SAFETY: the caller's node; a block of the driver's layout.
            a.check(unsafe { sys::cuGraphNodeSetParams(node, n.0.as_mut_ptr().cast()) }, "cuGraphNodeSetParams")
        })())
    }
}

export! {
    /// `cudaGraphExecNodeSetParams`.
    fn cudaGraphExecNodeSetParams(graphExec: cudaGraphExec_t, node: cudaGraphNode_t, nodeParams: *mut c_void) -> cudaError_t {
        code((|| {
            let a = Entered::current()?;
            let mut n = driver_node(nodeParams, &a, "cudaGraphExecNodeSetParams")?;
            // SAFETY: the caller's executable and node; a block of the driver's layout.
            a.check(unsafe { sys::cuGraphExecNodeSetParams(graphExec, node, n.0.as_mut_ptr().cast()) }, "cuGraphExecNodeSetParams")
        })())
    }
}

#[cfg(test)]
mod generic_tests {
    use super::*;

    #[test]
    fn node_blocks_have_the_measured_offsets() {
        assert_eq!(std::mem::size_of::<sys::CUgraphNodeParams>(), 256);
        assert_eq!(std::mem::size_of::<sys::CUDA_MEMCPY3D>(), 200);
        assert_eq!(std::mem::size_of::<cudaMemcpy3DParms>(), 160);
        assert_eq!(
            std::mem::offset_of!(sys::CUDA_KERNEL_NODE_PARAMS_v3, kern),
            56
        );
        assert_eq!(
            std::mem::offset_of!(sys::CUDA_KERNEL_NODE_PARAMS_v3, ctx),
            64
        );
        assert_eq!(
            std::mem::offset_of!(sys::CUDA_MEMCPY_NODE_PARAMS, copyCtx),
            8
        );
        assert_eq!(
            std::mem::offset_of!(sys::CUDA_MEMCPY_NODE_PARAMS, copyParams),
            16
        );
        assert_eq!(
            std::mem::offset_of!(sys::CUDA_MEMSET_NODE_PARAMS_v2, ctx),
            40
        );
        assert_eq!(
            std::mem::offset_of!(sys::CUDA_CONDITIONAL_NODE_PARAMS, ctx),
            24
        );
    }

    #[test]
    fn bytes_round_trip_at_any_offset() {
        let mut n = RawNode([0; 256]);
        let mut seed = 7u64;
        for _ in 0..100 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = (seed >> 40) as usize % 248;
            n.put(at, seed);
            assert_eq!(n.get::<u64>(at), seed);
        }
    }
}
