//! Smaller calls: persisting L2 reset, stream attributes copy and device, cache configuration,
//! device initialisation, host-allocation flags, asynchronous 2-D array copies and memsets, event
//! nodes, executable flags, nodes of clones, host-node parameters, kernels and functions of host
//! stubs, graph-memory trim, available dynamic shared memory, kernel names.
use std::ffi::{c_char, c_void};

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{CacheConfig, Device, ErrorCode};

use crate::graph::{cudaGraphExec_t, cudaGraphNode_t, cudaGraph_t, cudaHostNodeParams};
use crate::register::{function_of, kernel_of_func};
use crate::{code, cudaError_t, cudaEvent_t, cudaStream_t, driver, export, fail, out, stream_of};

export! {
    /// `cudaCtxResetPersistingL2Cache` (the current device).
    fn cudaCtxResetPersistingL2Cache() -> cudaError_t {
        code((|| Device::current()?.reset_persisting_l2_cache())())
    }
}

export! {
    /// `cudaStreamCopyAttributes`.
    fn cudaStreamCopyAttributes(dst: cudaStream_t, src: cudaStream_t) -> cudaError_t {
        // SAFETY: the caller's streams.
        driver("cuStreamCopyAttributes", || unsafe { sys::cuStreamCopyAttributes(stream_of(dst, false), stream_of(src, false)) })
    }
}

export! {
    /// `cudaStreamGetDevice`.
    fn cudaStreamGetDevice(hStream: cudaStream_t, device: *mut i32) -> cudaError_t {
        if device.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamGetDevice")));
        }
        // SAFETY: the caller's stream and out-parameter.
        driver("cuStreamGetDevice", || unsafe { sys::cuStreamGetDevice(stream_of(hStream, false), device) })
    }
}

export! {
    /// `cudaDeviceGetCacheConfig` (the current device).
    fn cudaDeviceGetCacheConfig(pCacheConfig: *mut i32) -> cudaError_t {
        code((|| {
            let p = out(pCacheConfig, "cudaDeviceGetCacheConfig")?;
            *p = match Device::current()?.cache_config()? {
                CacheConfig::PreferNone => 0,
                CacheConfig::PreferShared => 1,
                CacheConfig::PreferL1 => 2,
                CacheConfig::PreferEqual => 3,
            };
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceSetCacheConfig` (the current device).
    fn cudaDeviceSetCacheConfig(cacheConfig: i32) -> cudaError_t {
        code((|| {
            let c = match cacheConfig {
                0 => CacheConfig::PreferNone,
                1 => CacheConfig::PreferShared,
                2 => CacheConfig::PreferL1,
                3 => CacheConfig::PreferEqual,
                _ => return Err(fail(ErrorCode::InvalidValue, "cudaDeviceSetCacheConfig")),
            };
            Device::current()?.set_cache_config(c)
        })())
    }
}

export! {
    /// `cudaInitDevice` (makes the device's primary context; flags must be 0).
    fn cudaInitDevice(device: i32, deviceFlags: u32, flags: u32) -> cudaError_t {
        if deviceFlags != 0 || flags != 0 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaInitDevice")));
        }
        code(Entered::device(device).map(drop))
    }
}

export! {
    /// `cudaHostGetFlags`.
    fn cudaHostGetFlags(pFlags: *mut u32, pHost: *mut c_void) -> cudaError_t {
        if pFlags.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaHostGetFlags")));
        }
        // SAFETY: the caller's out-parameter and page-locked pointer (checked by the driver).
        let r = driver("cuMemHostGetFlags", || unsafe { sys::cuMemHostGetFlags(pFlags, pHost) });
        if r == 0 {
            if let Some(asked) = crate::memory::asked_host_flags(pHost) {
                // SAFETY: checked non-null above; the driver just wrote it.
                unsafe { *pFlags = asked };
            }
        }
        r
    }
}

export! {
    /// `cudaMemset2DAsync`.
    fn cudaMemset2DAsync(devPtr: *mut c_void, pitch: usize, value: i32, width: usize, height: usize, stream: cudaStream_t) -> cudaError_t {
        memset_2d_async(devPtr, pitch, value, width, height, stream, false)
    }
}

export! {
    /// `cudaMemset2DAsync` with stream 0 as the per-thread stream.
    fn cudaMemset2DAsync_ptsz(devPtr: *mut c_void, pitch: usize, value: i32, width: usize, height: usize, stream: cudaStream_t) -> cudaError_t {
        memset_2d_async(devPtr, pitch, value, width, height, stream, true)
    }
}

fn memset_2d_async(
    p: *mut c_void,
    pitch: usize,
    value: i32,
    width: usize,
    height: usize,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    if width > pitch {
        return code(Err(fail(ErrorCode::InvalidValue, "cudaMemset2DAsync")));
    }
    if width == 0 || height == 0 {
        return 0;
    }
    // SAFETY: the caller's pitched allocation and stream (the driver checks them).
    driver("cuMemsetD2D8Async", || unsafe {
        sys::cuMemsetD2D8Async(
            crate::dptr(p),
            pitch,
            value as u8,
            width,
            height,
            stream_of(s, pt),
        )
    })
}

fn event_of_node(node: cudaGraphNode_t, event: *mut cudaEvent_t, record: bool) -> cudaError_t {
    if event.is_null() {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaGraphEventNodeGetEvent",
        )));
    }
    // SAFETY: the caller's node and out-parameter.
    driver("cuGraphEventNodeGetEvent", || unsafe {
        if record {
            sys::cuGraphEventRecordNodeGetEvent(node, event)
        } else {
            sys::cuGraphEventWaitNodeGetEvent(node, event)
        }
    })
}

export! {
    /// `cudaGraphEventRecordNodeGetEvent`.
    fn cudaGraphEventRecordNodeGetEvent(node: cudaGraphNode_t, event_out: *mut cudaEvent_t) -> cudaError_t {
        event_of_node(node, event_out, true)
    }
}

export! {
    /// `cudaGraphEventWaitNodeGetEvent`.
    fn cudaGraphEventWaitNodeGetEvent(node: cudaGraphNode_t, event_out: *mut cudaEvent_t) -> cudaError_t {
        event_of_node(node, event_out, false)
    }
}

export! {
    /// `cudaGraphEventRecordNodeSetEvent`.
    fn cudaGraphEventRecordNodeSetEvent(node: cudaGraphNode_t, event: cudaEvent_t) -> cudaError_t {
        // SAFETY: the caller's node and event.
        driver("cuGraphEventRecordNodeSetEvent", || unsafe { sys::cuGraphEventRecordNodeSetEvent(node, event) })
    }
}

export! {
    /// `cudaGraphEventWaitNodeSetEvent`.
    fn cudaGraphEventWaitNodeSetEvent(node: cudaGraphNode_t, event: cudaEvent_t) -> cudaError_t {
        // SAFETY: the caller's node and event.
        driver("cuGraphEventWaitNodeSetEvent", || unsafe { sys::cuGraphEventWaitNodeSetEvent(node, event) })
    }
}

export! {
    /// `cudaGraphExecGetFlags`.
    fn cudaGraphExecGetFlags(graphExec: cudaGraphExec_t, flags: *mut u64) -> cudaError_t {
        if flags.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphExecGetFlags")));
        }
        // SAFETY: the caller's executable and out-parameter.
        driver("cuGraphExecGetFlags", || unsafe { sys::cuGraphExecGetFlags(graphExec, flags) })
    }
}

export! {
    /// `cudaGraphNodeFindInClone`.
    fn cudaGraphNodeFindInClone(pNode: *mut cudaGraphNode_t, originalNode: cudaGraphNode_t, clonedGraph: cudaGraph_t) -> cudaError_t {
        if pNode.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphNodeFindInClone")));
        }
        // SAFETY: the caller's node, graph and out-parameter.
        driver("cuGraphNodeFindInClone", || unsafe { sys::cuGraphNodeFindInClone(pNode, originalNode, clonedGraph) })
    }
}

export! {
    /// `cudaGraphHostNodeGetParams` (the driver's struct has the runtime's layout).
    fn cudaGraphHostNodeGetParams(node: cudaGraphNode_t, pNodeParams: *mut cudaHostNodeParams) -> cudaError_t {
        if pNodeParams.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphHostNodeGetParams")));
        }
        // SAFETY: the caller's node and out-parameter (function pointer and data pointer, the
        // same layout as the driver's).
        driver("cuGraphHostNodeGetParams", || unsafe { sys::cuGraphHostNodeGetParams(node, pNodeParams.cast()) })
    }
}

export! {
    /// `cudaGraphHostNodeSetParams`.
    fn cudaGraphHostNodeSetParams(node: cudaGraphNode_t, pNodeParams: *const cudaHostNodeParams) -> cudaError_t {
        code((|| {
            // SAFETY: a readable struct or null (refused).
            let p = unsafe { pNodeParams.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaGraphHostNodeSetParams"))?;
            if p.fn_.is_none() {
                return Err(fail(ErrorCode::InvalidValue, "cudaGraphHostNodeSetParams"));
            }
            let params = sys::CUDA_HOST_NODE_PARAMS { fn_: p.fn_, userData: p.userData };
            let a = Entered::current()?;
            // SAFETY: the caller's node; valid parameters.
            a.check(unsafe { sys::cuGraphHostNodeSetParams(node, &params) }, "cuGraphHostNodeSetParams")
        })())
    }
}

export! {
    /// `cudaGetKernel`: the kernel handle of a host stub.
    fn cudaGetKernel(kernelPtr: *mut sys::CUkernel, entryFuncAddr: *const c_void) -> cudaError_t {
        code((|| {
            let k = out(kernelPtr, "cudaGetKernel")?;
            *k = kernel_of_func(entryFuncAddr)?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaGetFuncBySymbol`: the function of a host stub in the current context.
    fn cudaGetFuncBySymbol(functionPtr: *mut sys::CUfunction, symbolPtr: *const c_void) -> cudaError_t {
        code((|| {
            let f = out(functionPtr, "cudaGetFuncBySymbol")?;
            let a = Entered::current()?;
            *f = function_of(&a, symbolPtr)?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaFuncGetName`.
    fn cudaFuncGetName(name: *mut *const c_char, func: *const c_void) -> cudaError_t {
        code((|| {
            let n = out(name, "cudaFuncGetName")?;
            let k = kernel_of_func(func)?;
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; a kernel of a loaded library (its name lives as long).
            a.check(unsafe { sys::cuKernelGetName(n, k) }, "cuKernelGetName")
        })())
    }
}

export! {
    /// `cudaDeviceGraphMemTrim`.
    fn cudaDeviceGraphMemTrim(device: i32) -> cudaError_t {
        code((|| {
            let a = Entered::device(device)?;
            // SAFETY: a valid device (entered).
            a.check(unsafe { sys::cuDeviceGraphMemTrim(device) }, "cuDeviceGraphMemTrim")
        })())
    }
}

export! {
    /// `cudaOccupancyAvailableDynamicSMemPerBlock`.
    fn cudaOccupancyAvailableDynamicSMemPerBlock(dynamicSmemSize: *mut usize, func: *const c_void, numBlocks: i32, blockSize: i32) -> cudaError_t {
        code((|| {
            let d = out(dynamicSmemSize, "cudaOccupancyAvailableDynamicSMemPerBlock")?;
            let a = Entered::current()?;
            let f = function_of(&a, func)?;
            // SAFETY: valid out-parameter; the kernel's function in the current context.
            a.check(unsafe { sys::cuOccupancyAvailableDynamicSMemPerBlock(d, f, numBlocks, blockSize) }, "cuOccupancyAvailableDynamicSMemPerBlock")
        })())
    }
}
