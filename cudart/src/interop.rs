//! External memory and semaphores, pool sharing and access, default and current pools, graph
//! memory nodes and attributes, instantiation with parameters, conditional handles, capture into
//! a graph, mipmapped arrays, array planes and sparse / memory-requirement queries, kernel
//! attributes per device and parameter info, GPUDirect RDMA flushes, atomic capabilities,
//! asynchronous notifications, batched copies, prefetches and discards, and driver logs.
//!
//! Where the runtime's structure is the driver's byte for byte (sizes and offsets compared with
//! gcc on the 13.0 headers; see `layouts_match_the_driver` below for the Rust side) the caller's
//! block is passed through untouched; enumerations passed by value are converted by lookup,
//! never by reinterpretation.
use std::ffi::{c_char, c_void};

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};

use crate::graph::{cudaGraphNode_t, cudaGraph_t};
use crate::memory::cudaChannelFormatDesc;
use crate::texture::{cudaArray_t, cudaExtent};
use crate::{code, cudaError_t, cudaStream_t, dptr, driver, export, fail, out, stream_of};

/// `cudaMipmappedArray_t`.
pub type cudaMipmappedArray_t = sys::CUmipmappedArray;
/// `cudaExternalMemory_t`.
pub type cudaExternalMemory_t = sys::CUexternalMemory;
/// `cudaExternalSemaphore_t`.
pub type cudaExternalSemaphore_t = sys::CUexternalSemaphore;
/// `cudaMemPool_t`.
type Pool = sys::CUmemoryPool;

/// Finds the driver enumeration value with the runtime's number.
fn lookup<E: Copy + Into<i64>>(n: i64, all: &[E], call: &'static str) -> Result<E, Error> {
    all.iter()
        .copied()
        .find(|e| (*e).into() == n)
        .ok_or_else(|| fail(ErrorCode::InvalidValue, call))
}

macro_rules! enum_i64 {
    ($($t:ty),*) => {$(
        /// Local wrapper: the numeric value of a driver enumeration.
        impl From<Wrap<$t>> for i64 {
            fn from(w: Wrap<$t>) -> i64 {
                w.0 as i64
            }
        }
    )*};
}

/// A driver enumeration value compared by number in [`lookup`].
#[derive(Clone, Copy)]
struct Wrap<T>(T);
enum_i64!(
    sys::CUmemAllocationType,
    sys::CUgraphMem_attribute,
    sys::CUflushGPUDirectRDMAWritesTarget,
    sys::CUflushGPUDirectRDMAWritesScope
);

fn handle_type(n: i32, call: &'static str) -> Result<sys::CUmemAllocationHandleType, Error> {
    // A bit-set type in the driver's bindings: one handle kind at a time here.
    match n {
        0 | 1 | 2 | 4 | 8 => Ok(sys::CUmemAllocationHandleType(n as u32)),
        _ => Err(fail(ErrorCode::InvalidValue, call)),
    }
}

fn allocation_type(n: i32, call: &'static str) -> Result<sys::CUmemAllocationType, Error> {
    use sys::CUmemAllocationType as T;
    let all = [
        Wrap(T::CU_MEM_ALLOCATION_TYPE_PINNED),
        Wrap(T::CU_MEM_ALLOCATION_TYPE_MANAGED),
    ];
    lookup(n as i64, &all, call).map(|w| w.0)
}

// ---- External memory and semaphores ----------------------------------------------------------

export! {
    /// `cudaImportExternalMemory` (the handle description is the driver's layout).
    fn cudaImportExternalMemory(extMem_out: *mut cudaExternalMemory_t, memHandleDesc: *const c_void) -> cudaError_t {
        if extMem_out.is_null() || memHandleDesc.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaImportExternalMemory")));
        }
        // SAFETY: a writable handle and the caller's description, passed through to the driver.
        driver("cuImportExternalMemory", || unsafe {
            sys::cuImportExternalMemory(extMem_out, memHandleDesc.cast())
        })
    }
}

export! {
    /// `cudaExternalMemoryGetMappedBuffer`.
    fn cudaExternalMemoryGetMappedBuffer(devPtr: *mut *mut c_void, extMem: cudaExternalMemory_t, bufferDesc: *const c_void) -> cudaError_t {
        code((|| {
            let o = out(devPtr, "cudaExternalMemoryGetMappedBuffer")?;
            if bufferDesc.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaExternalMemoryGetMappedBuffer"));
            }
            let en = Entered::current()?;
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: valid out-parameter; the caller's memory object and description.
            en.check(
                unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut p, extMem, bufferDesc.cast()) },
                "cuExternalMemoryGetMappedBuffer",
            )?;
            *o = p as usize as *mut c_void;
            Ok(())
        })())
    }
}

/// `struct cudaExternalMemoryMipmappedArrayDesc` (128 bytes; not the driver's layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaExternalMemoryMipmappedArrayDesc {
    /// Offset into the memory object.
    pub offset: u64,
    /// Texel format.
    pub formatDesc: cudaChannelFormatDesc,
    /// Extent of level 0.
    pub extent: cudaExtent,
    /// `cudaArray*` flags.
    pub flags: u32,
    /// Number of levels.
    pub numLevels: u32,
    /// Must be zero.
    pub reserved: [u32; 16],
}

export! {
    /// `cudaExternalMemoryGetMappedMipmappedArray`.
    fn cudaExternalMemoryGetMappedMipmappedArray(mipmap: *mut cudaMipmappedArray_t, extMem: cudaExternalMemory_t, mipmapDesc: *const cudaExternalMemoryMipmappedArrayDesc) -> cudaError_t {
        const CALL: &str = "cudaExternalMemoryGetMappedMipmappedArray";
        code((|| {
            let o = out(mipmap, CALL)?;
            // SAFETY: a readable description or null (refused).
            let d = unsafe { mipmapDesc.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, CALL))?;
            let (f, n) = crate::texture::format(&d.formatDesc, CALL)?;
            let desc = sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
                offset: d.offset,
                arrayDesc: sys::CUDA_ARRAY3D_DESCRIPTOR {
                    Width: d.extent.width,
                    Height: d.extent.height,
                    Depth: d.extent.depth,
                    Format: f,
                    NumChannels: n,
                    Flags: d.flags,
                },
                numLevels: d.numLevels,
                reserved: [0; 16],
            };
            let en = Entered::current()?;
            // SAFETY: valid out-parameter and translated description; the caller's object.
            en.check(
                unsafe { sys::cuExternalMemoryGetMappedMipmappedArray(o, extMem, &desc) },
                "cuExternalMemoryGetMappedMipmappedArray",
            )
        })())
    }
}

export! {
    /// `cudaDestroyExternalMemory`.
    fn cudaDestroyExternalMemory(extMem: cudaExternalMemory_t) -> cudaError_t {
        // SAFETY: the caller's memory object.
        driver("cuDestroyExternalMemory", || unsafe { sys::cuDestroyExternalMemory(extMem) })
    }
}

export! {
    /// `cudaImportExternalSemaphore` (the handle description is the driver's layout).
    fn cudaImportExternalSemaphore(extSem_out: *mut cudaExternalSemaphore_t, semHandleDesc: *const c_void) -> cudaError_t {
        if extSem_out.is_null() || semHandleDesc.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaImportExternalSemaphore")));
        }
        // SAFETY: a writable handle and the caller's description.
        driver("cuImportExternalSemaphore", || unsafe {
            sys::cuImportExternalSemaphore(extSem_out, semHandleDesc.cast())
        })
    }
}

fn semaphores(
    sems: *const cudaExternalSemaphore_t,
    params: *const c_void,
    n: u32,
    s: cudaStream_t,
    signal: bool,
    pt: bool,
) -> cudaError_t {
    if n > 0 && (sems.is_null() || params.is_null()) {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            if signal {
                "cudaSignalExternalSemaphoresAsync"
            } else {
                "cudaWaitExternalSemaphoresAsync"
            },
        )));
    }
    let st = stream_of(s, pt);
    if signal {
        // SAFETY: `n` semaphores and parameter blocks (the driver's layout) of the caller.
        driver("cuSignalExternalSemaphoresAsync", || unsafe {
            sys::cuSignalExternalSemaphoresAsync(sems, params.cast(), n, st)
        })
    } else {
        // SAFETY: as above.
        driver("cuWaitExternalSemaphoresAsync", || unsafe {
            sys::cuWaitExternalSemaphoresAsync(sems, params.cast(), n, st)
        })
    }
}

export! {
    /// `cudaSignalExternalSemaphoresAsync`.
    fn cudaSignalExternalSemaphoresAsync(extSemArray: *const cudaExternalSemaphore_t, paramsArray: *const c_void, numExtSems: u32, stream: cudaStream_t) -> cudaError_t {
        semaphores(extSemArray, paramsArray, numExtSems, stream, true, false)
    }
}

export! {
    /// `cudaSignalExternalSemaphoresAsync` with stream 0 as the per-thread stream.
    fn cudaSignalExternalSemaphoresAsync_ptsz(extSemArray: *const cudaExternalSemaphore_t, paramsArray: *const c_void, numExtSems: u32, stream: cudaStream_t) -> cudaError_t {
        semaphores(extSemArray, paramsArray, numExtSems, stream, true, true)
    }
}

export! {
    /// `cudaWaitExternalSemaphoresAsync`.
    fn cudaWaitExternalSemaphoresAsync(extSemArray: *const cudaExternalSemaphore_t, paramsArray: *const c_void, numExtSems: u32, stream: cudaStream_t) -> cudaError_t {
        semaphores(extSemArray, paramsArray, numExtSems, stream, false, false)
    }
}

export! {
    /// `cudaWaitExternalSemaphoresAsync` with stream 0 as the per-thread stream.
    fn cudaWaitExternalSemaphoresAsync_ptsz(extSemArray: *const cudaExternalSemaphore_t, paramsArray: *const c_void, numExtSems: u32, stream: cudaStream_t) -> cudaError_t {
        semaphores(extSemArray, paramsArray, numExtSems, stream, false, true)
    }
}

export! {
    /// `cudaDestroyExternalSemaphore`.
    fn cudaDestroyExternalSemaphore(extSem: cudaExternalSemaphore_t) -> cudaError_t {
        // SAFETY: the caller's semaphore.
        driver("cuDestroyExternalSemaphore", || unsafe { sys::cuDestroyExternalSemaphore(extSem) })
    }
}

// ---- Pools: sharing, access, default and current pools ----------------------------------------

export! {
    /// `cudaMemPoolExportToShareableHandle`.
    fn cudaMemPoolExportToShareableHandle(shareableHandle: *mut c_void, memPool: Pool, handleType: i32, flags: u32) -> cudaError_t {
        code((|| {
            let h = handle_type(handleType, "cudaMemPoolExportToShareableHandle")?;
            if shareableHandle.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemPoolExportToShareableHandle"));
            }
            let en = Entered::current()?;
            // SAFETY: storage for the handle type's handle; the caller's pool.
            en.check(
                unsafe { sys::cuMemPoolExportToShareableHandle(shareableHandle, memPool, h, flags as u64) },
                "cuMemPoolExportToShareableHandle",
            )
        })())
    }
}

export! {
    /// `cudaMemPoolImportFromShareableHandle`.
    fn cudaMemPoolImportFromShareableHandle(memPool: *mut Pool, shareableHandle: *mut c_void, handleType: i32, flags: u32) -> cudaError_t {
        code((|| {
            let o = out(memPool, "cudaMemPoolImportFromShareableHandle")?;
            let h = handle_type(handleType, "cudaMemPoolImportFromShareableHandle")?;
            let en = Entered::current()?;
            // SAFETY: valid out-parameter; the handle as the handle type passes it (a file
            // descriptor by value for POSIX, a pointer otherwise).
            en.check(
                unsafe { sys::cuMemPoolImportFromShareableHandle(o, shareableHandle, h, flags as u64) },
                "cuMemPoolImportFromShareableHandle",
            )
        })())
    }
}

export! {
    /// `cudaMemPoolExportPointer`.
    fn cudaMemPoolExportPointer(exportData: *mut sys::CUmemPoolPtrExportData, ptr: *mut c_void) -> cudaError_t {
        if exportData.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaMemPoolExportPointer")));
        }
        // SAFETY: writable 64-byte export data; the caller's allocation.
        driver("cuMemPoolExportPointer", || unsafe { sys::cuMemPoolExportPointer(exportData, dptr(ptr)) })
    }
}

export! {
    /// `cudaMemPoolImportPointer`.
    fn cudaMemPoolImportPointer(ptr: *mut *mut c_void, memPool: Pool, exportData: *mut sys::CUmemPoolPtrExportData) -> cudaError_t {
        code((|| {
            let o = out(ptr, "cudaMemPoolImportPointer")?;
            if exportData.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemPoolImportPointer"));
            }
            let en = Entered::current()?;
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: valid out-parameter; the caller's imported pool and export data.
            en.check(
                unsafe { sys::cuMemPoolImportPointer(&mut p, memPool, exportData) },
                "cuMemPoolImportPointer",
            )?;
            *o = p as usize as *mut c_void;
            Ok(())
        })())
    }
}

export! {
    /// `cudaMemPoolSetAccess` (`cudaMemAccessDesc` is the driver's layout).
    fn cudaMemPoolSetAccess(memPool: Pool, descList: *const sys::CUmemAccessDesc, count: usize) -> cudaError_t {
        if count > 0 && descList.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaMemPoolSetAccess")));
        }
        // SAFETY: the caller's pool and `count` access descriptions.
        driver("cuMemPoolSetAccess", || unsafe { sys::cuMemPoolSetAccess(memPool, descList, count) })
    }
}

export! {
    /// `cudaMemPoolGetAccess`.
    fn cudaMemPoolGetAccess(flags: *mut i32, memPool: Pool, location: *mut sys::CUmemLocation) -> cudaError_t {
        if flags.is_null() || location.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaMemPoolGetAccess")));
        }
        // SAFETY: a writable flags variable (written by the driver only) and the caller's
        // location and pool.
        driver("cuMemPoolGetAccess", || unsafe { sys::cuMemPoolGetAccess(flags.cast(), memPool, location) })
    }
}

export! {
    /// `cudaMemGetDefaultMemPool`.
    fn cudaMemGetDefaultMemPool(memPool: *mut Pool, location: *mut sys::CUmemLocation, type_: i32) -> cudaError_t {
        code((|| {
            let t = allocation_type(type_, "cudaMemGetDefaultMemPool")?;
            if memPool.is_null() || location.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemGetDefaultMemPool"));
            }
            let en = Entered::current()?;
            // SAFETY: writable pool; the caller's location.
            en.check(unsafe { sys::cuMemGetDefaultMemPool(memPool, location, t) }, "cuMemGetDefaultMemPool")
        })())
    }
}

export! {
    /// `cudaMemGetMemPool`.
    fn cudaMemGetMemPool(memPool: *mut Pool, location: *mut sys::CUmemLocation, type_: i32) -> cudaError_t {
        code((|| {
            let t = allocation_type(type_, "cudaMemGetMemPool")?;
            if memPool.is_null() || location.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemGetMemPool"));
            }
            let en = Entered::current()?;
            // SAFETY: writable pool; the caller's location.
            en.check(unsafe { sys::cuMemGetMemPool(memPool, location, t) }, "cuMemGetMemPool")
        })())
    }
}

export! {
    /// `cudaMemSetMemPool`.
    fn cudaMemSetMemPool(location: *mut sys::CUmemLocation, type_: i32, memPool: Pool) -> cudaError_t {
        code((|| {
            let t = allocation_type(type_, "cudaMemSetMemPool")?;
            if location.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemSetMemPool"));
            }
            let en = Entered::current()?;
            // SAFETY: the caller's location and pool.
            en.check(unsafe { sys::cuMemSetMemPool(location, t, memPool) }, "cuMemSetMemPool")
        })())
    }
}

// ---- Graph memory ----------------------------------------------------------------------------

fn graph_mem_attr(n: i32, call: &'static str) -> Result<sys::CUgraphMem_attribute, Error> {
    use sys::CUgraphMem_attribute as G;
    let all = [
        Wrap(G::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT),
        Wrap(G::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH),
        Wrap(G::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
        Wrap(G::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH),
    ];
    lookup(n as i64, &all, call).map(|w| w.0)
}

export! {
    /// `cudaDeviceGetGraphMemAttribute` (a `u64` value).
    fn cudaDeviceGetGraphMemAttribute(device: i32, attr: i32, value: *mut c_void) -> cudaError_t {
        code((|| {
            let a = graph_mem_attr(attr, "cudaDeviceGetGraphMemAttribute")?;
            if value.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceGetGraphMemAttribute"));
            }
            let en = Entered::device(device)?;
            // SAFETY: a writable u64; the entered device's ordinal.
            en.check(unsafe { sys::cuDeviceGetGraphMemAttribute(en.ordinal(), a, value) }, "cuDeviceGetGraphMemAttribute")
        })())
    }
}

export! {
    /// `cudaDeviceSetGraphMemAttribute` (only the high-water marks can be reset, to 0).
    fn cudaDeviceSetGraphMemAttribute(device: i32, attr: i32, value: *mut c_void) -> cudaError_t {
        code((|| {
            let a = graph_mem_attr(attr, "cudaDeviceSetGraphMemAttribute")?;
            if value.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceSetGraphMemAttribute"));
            }
            let en = Entered::device(device)?;
            // SAFETY: a readable u64; the entered device's ordinal.
            en.check(unsafe { sys::cuDeviceSetGraphMemAttribute(en.ordinal(), a, value) }, "cuDeviceSetGraphMemAttribute")
        })())
    }
}

export! {
    /// `cudaGraphAddMemAllocNode` (`cudaMemAllocNodeParams` is the driver's layout; the driver
    /// writes the address back into it).
    fn cudaGraphAddMemAllocNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, nodeParams: *mut sys::CUDA_MEM_ALLOC_NODE_PARAMS) -> cudaError_t {
        if pGraphNode.is_null() || nodeParams.is_null() || (numDependencies > 0 && pDependencies.is_null()) {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphAddMemAllocNode")));
        }
        // SAFETY: the caller's graph, dependencies and parameter block.
        driver("cuGraphAddMemAllocNode", || unsafe {
            sys::cuGraphAddMemAllocNode(pGraphNode, graph, pDependencies, numDependencies, nodeParams)
        })
    }
}

export! {
    /// `cudaGraphAddMemFreeNode`.
    fn cudaGraphAddMemFreeNode(pGraphNode: *mut cudaGraphNode_t, graph: cudaGraph_t, pDependencies: *const cudaGraphNode_t, numDependencies: usize, dptr_: *mut c_void) -> cudaError_t {
        if pGraphNode.is_null() || (numDependencies > 0 && pDependencies.is_null()) {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphAddMemFreeNode")));
        }
        // SAFETY: the caller's graph and dependencies; an address of the graph's allocations.
        driver("cuGraphAddMemFreeNode", || unsafe {
            sys::cuGraphAddMemFreeNode(pGraphNode, graph, pDependencies, numDependencies, dptr(dptr_))
        })
    }
}

export! {
    /// `cudaGraphMemAllocNodeGetParams`.
    fn cudaGraphMemAllocNodeGetParams(node: cudaGraphNode_t, params_out: *mut sys::CUDA_MEM_ALLOC_NODE_PARAMS) -> cudaError_t {
        if params_out.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphMemAllocNodeGetParams")));
        }
        // SAFETY: the caller's node and a writable block.
        driver("cuGraphMemAllocNodeGetParams", || unsafe { sys::cuGraphMemAllocNodeGetParams(node, params_out) })
    }
}

export! {
    /// `cudaGraphMemFreeNodeGetParams`.
    fn cudaGraphMemFreeNodeGetParams(node: cudaGraphNode_t, dptr_out: *mut *mut c_void) -> cudaError_t {
        code((|| {
            let o = out(dptr_out, "cudaGraphMemFreeNodeGetParams")?;
            let en = Entered::current()?;
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: valid out-parameter; the caller's node.
            en.check(unsafe { sys::cuGraphMemFreeNodeGetParams(node, &mut p) }, "cuGraphMemFreeNodeGetParams")?;
            *o = p as usize as *mut c_void;
            Ok(())
        })())
    }
}

/// `cudaGraphInstantiateParams` (32 bytes, the driver's layout; the result is kept as a number).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaGraphInstantiateParams {
    /// `cudaGraphInstantiateFlag*`.
    pub flags: u64,
    /// Stream of an upload at instantiation.
    pub uploadStream: cudaStream_t,
    /// The node that failed, written back.
    pub errNode_out: cudaGraphNode_t,
    /// `cudaGraphInstantiateResult`, written back.
    pub result_out: i32,
}

fn instantiate_with_params(
    exec: *mut sys::CUgraphExec,
    graph: cudaGraph_t,
    p: *mut cudaGraphInstantiateParams,
    pt: bool,
) -> cudaError_t {
    code((|| {
        let o = out(exec, "cudaGraphInstantiateWithParams")?;
        let p = out(p, "cudaGraphInstantiateWithParams")?;
        // The upload stream resolved as the runtime's stream 0 of this build; the result is an
        // integer field here, so the driver's writes are read back as numbers only.
        let mut q = *p;
        q.uploadStream = stream_of(q.uploadStream, pt);
        let en = Entered::current()?;
        // SAFETY: valid out-parameter; a block of the driver's layout (sizes and offsets checked
        // in the tests).
        let r = unsafe {
            sys::cuGraphInstantiateWithParams(
                o,
                graph,
                (&mut q as *mut cudaGraphInstantiateParams).cast(),
            )
        };
        p.errNode_out = q.errNode_out;
        p.result_out = q.result_out;
        en.check(r, "cuGraphInstantiateWithParams")
    })())
}

export! {
    /// `cudaGraphInstantiateWithParams`.
    fn cudaGraphInstantiateWithParams(pGraphExec: *mut sys::CUgraphExec, graph: cudaGraph_t, instantiateParams: *mut cudaGraphInstantiateParams) -> cudaError_t {
        instantiate_with_params(pGraphExec, graph, instantiateParams, false)
    }
}

export! {
    /// `cudaGraphInstantiateWithParams` with stream 0 as the per-thread stream.
    fn cudaGraphInstantiateWithParams_ptsz(pGraphExec: *mut sys::CUgraphExec, graph: cudaGraph_t, instantiateParams: *mut cudaGraphInstantiateParams) -> cudaError_t {
        instantiate_with_params(pGraphExec, graph, instantiateParams, true)
    }
}

export! {
    /// `cudaGraphConditionalHandleCreate` (in the current device's context).
    fn cudaGraphConditionalHandleCreate(pHandle_out: *mut u64, graph: cudaGraph_t, defaultLaunchValue: u32, flags: u32) -> cudaError_t {
        code((|| {
            let o = out(pHandle_out, "cudaGraphConditionalHandleCreate")?;
            let en = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's graph; the entered context.
            en.check(
                unsafe { sys::cuGraphConditionalHandleCreate(o, graph, en.context(), defaultLaunchValue, flags) },
                "cuGraphConditionalHandleCreate",
            )
        })())
    }
}

fn begin_to_graph(
    s: cudaStream_t,
    g: cudaGraph_t,
    deps: *const cudaGraphNode_t,
    data: *const c_void,
    n: usize,
    mode: i32,
    pt: bool,
) -> cudaError_t {
    code((|| {
        let m = crate::graph::capture_mode(mode)?;
        if n > 0 && deps.is_null() {
            return Err(fail(
                ErrorCode::InvalidValue,
                "cudaStreamBeginCaptureToGraph",
            ));
        }
        let en = Entered::current()?;
        // SAFETY: the caller's stream, graph and `n` dependencies (and edge data).
        en.check(
            unsafe {
                sys::cuStreamBeginCaptureToGraph(stream_of(s, pt), g, deps, data.cast(), n, m)
            },
            "cuStreamBeginCaptureToGraph",
        )
    })())
}

export! {
    /// `cudaStreamBeginCaptureToGraph`.
    fn cudaStreamBeginCaptureToGraph(stream: cudaStream_t, graph: cudaGraph_t, dependencies: *const cudaGraphNode_t, dependencyData: *const c_void, numDependencies: usize, mode: i32) -> cudaError_t {
        begin_to_graph(stream, graph, dependencies, dependencyData, numDependencies, mode, false)
    }
}

export! {
    /// `cudaStreamBeginCaptureToGraph` with stream 0 as the per-thread stream.
    fn cudaStreamBeginCaptureToGraph_ptsz(stream: cudaStream_t, graph: cudaGraph_t, dependencies: *const cudaGraphNode_t, dependencyData: *const c_void, numDependencies: usize, mode: i32) -> cudaError_t {
        begin_to_graph(stream, graph, dependencies, dependencyData, numDependencies, mode, true)
    }
}

fn update_capture(
    s: cudaStream_t,
    deps: *mut cudaGraphNode_t,
    data: *const c_void,
    n: usize,
    flags: u32,
    pt: bool,
) -> cudaError_t {
    if n > 0 && deps.is_null() {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaStreamUpdateCaptureDependencies",
        )));
    }
    // SAFETY: the caller's capturing stream and `n` nodes (and edge data).
    driver("cuStreamUpdateCaptureDependencies", || unsafe {
        sys::cuStreamUpdateCaptureDependencies_v2(stream_of(s, pt), deps, data.cast(), n, flags)
    })
}

export! {
    /// `cudaStreamUpdateCaptureDependencies`.
    fn cudaStreamUpdateCaptureDependencies(stream: cudaStream_t, dependencies: *mut cudaGraphNode_t, dependencyData: *const c_void, numDependencies: usize, flags: u32) -> cudaError_t {
        update_capture(stream, dependencies, dependencyData, numDependencies, flags, false)
    }
}

export! {
    /// `cudaStreamUpdateCaptureDependencies` with stream 0 as the per-thread stream.
    fn cudaStreamUpdateCaptureDependencies_ptsz(stream: cudaStream_t, dependencies: *mut cudaGraphNode_t, dependencyData: *const c_void, numDependencies: usize, flags: u32) -> cudaError_t {
        update_capture(stream, dependencies, dependencyData, numDependencies, flags, true)
    }
}

// ---- Mipmapped arrays and array queries -------------------------------------------------------

export! {
    /// `cudaMallocMipmappedArray`.
    fn cudaMallocMipmappedArray(mipmappedArray: *mut cudaMipmappedArray_t, desc: *const cudaChannelFormatDesc, extent: cudaExtent, numLevels: u32, flags: u32) -> cudaError_t {
        const CALL: &str = "cudaMallocMipmappedArray";
        code((|| {
            let o = out(mipmappedArray, CALL)?;
            // SAFETY: a readable description or null (refused).
            let d = unsafe { desc.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, CALL))?;
            if flags & !0xf != 0 {
                return Err(fail(ErrorCode::InvalidValue, CALL));
            }
            // libcudart accepts no levels (seen on the GPU): one level is made.
            let numLevels = numLevels.max(1);
            let (f, n) = crate::texture::format(d, CALL)?;
            let a = sys::CUDA_ARRAY3D_DESCRIPTOR {
                Width: extent.width,
                Height: extent.height,
                Depth: extent.depth,
                Format: f,
                NumChannels: n,
                Flags: flags,
            };
            let en = Entered::current()?;
            // SAFETY: valid out-parameter and descriptor; context current.
            en.check(unsafe { sys::cuMipmappedArrayCreate(o, &a, numLevels) }, "cuMipmappedArrayCreate")
        })())
    }
}

export! {
    /// `cudaGetMipmappedArrayLevel`.
    fn cudaGetMipmappedArrayLevel(levelArray: *mut cudaArray_t, mipmappedArray: cudaMipmappedArray_t, level: u32) -> cudaError_t {
        if levelArray.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGetMipmappedArrayLevel")));
        }
        // SAFETY: valid out-parameter; the caller's mipmapped array.
        driver("cuMipmappedArrayGetLevel", || unsafe { sys::cuMipmappedArrayGetLevel(levelArray, mipmappedArray, level) })
    }
}

export! {
    /// `cudaFreeMipmappedArray` (null is allowed).
    fn cudaFreeMipmappedArray(mipmappedArray: cudaMipmappedArray_t) -> cudaError_t {
        if mipmappedArray.is_null() {
            return 0;
        }
        // SAFETY: the caller's mipmapped array.
        driver("cuMipmappedArrayDestroy", || unsafe { sys::cuMipmappedArrayDestroy(mipmappedArray) })
    }
}

export! {
    /// `cudaArrayGetPlane`.
    fn cudaArrayGetPlane(pPlaneArray: *mut cudaArray_t, hArray: cudaArray_t, planeIdx: u32) -> cudaError_t {
        if pPlaneArray.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaArrayGetPlane")));
        }
        // SAFETY: valid out-parameter; the caller's array.
        driver("cuArrayGetPlane", || unsafe { sys::cuArrayGetPlane(pPlaneArray, hArray, planeIdx) })
    }
}

export! {
    /// `cudaArrayGetSparseProperties` (the driver's layout).
    fn cudaArrayGetSparseProperties(sparseProperties: *mut sys::CUDA_ARRAY_SPARSE_PROPERTIES, array: cudaArray_t) -> cudaError_t {
        if sparseProperties.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaArrayGetSparseProperties")));
        }
        // SAFETY: a writable block; the caller's array.
        driver("cuArrayGetSparseProperties", || unsafe { sys::cuArrayGetSparseProperties(sparseProperties, array) })
    }
}

export! {
    /// `cudaMipmappedArrayGetSparseProperties`.
    fn cudaMipmappedArrayGetSparseProperties(sparseProperties: *mut sys::CUDA_ARRAY_SPARSE_PROPERTIES, mipmap: cudaMipmappedArray_t) -> cudaError_t {
        if sparseProperties.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaMipmappedArrayGetSparseProperties")));
        }
        // SAFETY: a writable block; the caller's mipmapped array.
        driver("cuMipmappedArrayGetSparseProperties", || unsafe { sys::cuMipmappedArrayGetSparseProperties(sparseProperties, mipmap) })
    }
}

export! {
    /// `cudaArrayGetMemoryRequirements`.
    fn cudaArrayGetMemoryRequirements(memoryRequirements: *mut sys::CUDA_ARRAY_MEMORY_REQUIREMENTS, array: cudaArray_t, device: i32) -> cudaError_t {
        code((|| {
            if memoryRequirements.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaArrayGetMemoryRequirements"));
            }
            let en = Entered::device(device)?;
            // SAFETY: a writable block; the caller's array; the entered device.
            en.check(unsafe { sys::cuArrayGetMemoryRequirements(memoryRequirements, array, en.ordinal()) }, "cuArrayGetMemoryRequirements")
        })())
    }
}

export! {
    /// `cudaMipmappedArrayGetMemoryRequirements`.
    fn cudaMipmappedArrayGetMemoryRequirements(memoryRequirements: *mut sys::CUDA_ARRAY_MEMORY_REQUIREMENTS, mipmap: cudaMipmappedArray_t, device: i32) -> cudaError_t {
        code((|| {
            if memoryRequirements.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMipmappedArrayGetMemoryRequirements"));
            }
            let en = Entered::device(device)?;
            // SAFETY: a writable block; the caller's mipmapped array; the entered device.
            en.check(unsafe { sys::cuMipmappedArrayGetMemoryRequirements(memoryRequirements, mipmap, en.ordinal()) }, "cuMipmappedArrayGetMemoryRequirements")
        })())
    }
}

// ---- Kernels, devices --------------------------------------------------------------------------

export! {
    /// `cudaKernelSetAttributeForDevice` (settable attributes 8..=15).
    fn cudaKernelSetAttributeForDevice(kernel: sys::CUkernel, attr: i32, value: i32, device: i32) -> cudaError_t {
        code((|| {
            let a = crate::func::settable_attr(attr, "cudaKernelSetAttributeForDevice")?;
            let en = Entered::device(device)?;
            // SAFETY: the caller's kernel handle; the entered device.
            en.check(unsafe { sys::cuKernelSetAttribute(a, value, kernel, en.ordinal()) }, "cuKernelSetAttribute")
        })())
    }
}

export! {
    /// `cudaFuncGetParamInfo` of a host stub or kernel handle.
    fn cudaFuncGetParamInfo(func: *const c_void, paramIndex: usize, paramOffset: *mut usize, paramSize: *mut usize) -> cudaError_t {
        code((|| {
            let k = crate::register::kernel_of_func(func)?;
            let en = Entered::current()?;
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: valid out-parameters; a kernel of a loaded library.
            en.check(unsafe { sys::cuKernelGetParamInfo(k, paramIndex, &mut off, &mut size) }, "cuKernelGetParamInfo")?;
            // SAFETY: C callers pass writable out-parameters or null (skipped).
            unsafe {
                if let Some(o) = paramOffset.as_mut() {
                    *o = off;
                }
                if let Some(o) = paramSize.as_mut() {
                    *o = size;
                }
            }
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceFlushGPUDirectRDMAWrites` (target: the current device; scope: owner or all
    /// devices).
    fn cudaDeviceFlushGPUDirectRDMAWrites(target: i32, scope: i32) -> cudaError_t {
        use sys::CUflushGPUDirectRDMAWritesScope as S;
        use sys::CUflushGPUDirectRDMAWritesTarget as T;
        const CALL: &str = "cudaDeviceFlushGPUDirectRDMAWrites";
        code((|| {
            let t = lookup(target as i64, &[Wrap(T::CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX)], CALL)?.0;
            let s = lookup(
                scope as i64,
                &[Wrap(S::CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER), Wrap(S::CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES)],
                CALL,
            )?
            .0;
            let en = Entered::current()?;
            // SAFETY: checked target and scope; the entered context.
            en.check(unsafe { sys::cuFlushGPUDirectRDMAWrites(t, s) }, "cuFlushGPUDirectRDMAWrites")
        })())
    }
}

export! {
    /// `cudaDeviceGetHostAtomicCapabilities`.
    fn cudaDeviceGetHostAtomicCapabilities(capabilities: *mut u32, operations: *const i32, count: u32, device: i32) -> cudaError_t {
        code((|| {
            if count > 0 && (capabilities.is_null() || operations.is_null()) {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceGetHostAtomicCapabilities"));
            }
            let en = Entered::device(device)?;
            // SAFETY: `count` operations and writable capabilities (the driver checks the
            // operation numbers, which it reads as its own enumeration).
            en.check(
                unsafe { sys::cuDeviceGetHostAtomicCapabilities(capabilities, operations.cast(), count, en.ordinal()) },
                "cuDeviceGetHostAtomicCapabilities",
            )
        })())
    }
}

export! {
    /// `cudaDeviceGetP2PAtomicCapabilities`.
    fn cudaDeviceGetP2PAtomicCapabilities(capabilities: *mut u32, operations: *const i32, count: u32, srcDevice: i32, dstDevice: i32) -> cudaError_t {
        code((|| {
            if count > 0 && (capabilities.is_null() || operations.is_null()) {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceGetP2PAtomicCapabilities"));
            }
            let s = Entered::device(srcDevice)?;
            let d = Entered::device(dstDevice)?;
            let en = Entered::current()?;
            // SAFETY: as above, for the two entered devices.
            let r = unsafe {
                sys::cuDeviceGetP2PAtomicCapabilities(capabilities, operations.cast(), count, s.ordinal(), d.ordinal())
            };
            en.check(r, "cuDeviceGetP2PAtomicCapabilities")
        })())
    }
}

/// `cudaAsyncCallback`: the driver's `CUasyncCallback` shape (the notification is the driver's
/// layout, the handle the driver's handle).
pub type cudaAsyncCallback =
    Option<unsafe extern "C" fn(*mut c_void, *mut c_void, sys::CUasyncCallbackHandle)>;

export! {
    /// `cudaDeviceRegisterAsyncNotification`: the callback is registered with the driver as it
    /// is (the same signature and layouts).
    fn cudaDeviceRegisterAsyncNotification(device: i32, callbackFunc: cudaAsyncCallback, userData: *mut c_void, callback: *mut sys::CUasyncCallbackHandle) -> cudaError_t {
        code((|| {
            let Some(f) = callbackFunc else {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceRegisterAsyncNotification"));
            };
            let o = out(callback, "cudaDeviceRegisterAsyncNotification")?;
            let en = Entered::device(device)?;
            // SAFETY: the runtime's and the driver's callback types have the same ABI: three
            // pointer-sized arguments, the first pointing at a structure of the same layout.
            let f: unsafe extern "C" fn(*mut sys::CUasyncNotificationInfo, *mut c_void, sys::CUasyncCallbackHandle) =
                unsafe { std::mem::transmute(f) };
            // SAFETY: a callback the caller keeps valid until unregistered; valid out-parameter.
            en.check(
                unsafe { sys::cuDeviceRegisterAsyncNotification(en.ordinal(), Some(f), userData, o) },
                "cuDeviceRegisterAsyncNotification",
            )
        })())
    }
}

export! {
    /// `cudaDeviceUnregisterAsyncNotification`.
    fn cudaDeviceUnregisterAsyncNotification(device: i32, callback: sys::CUasyncCallbackHandle) -> cudaError_t {
        code((|| {
            let en = Entered::device(device)?;
            // SAFETY: a handle the caller registered on this device.
            en.check(
                unsafe { sys::cuDeviceUnregisterAsyncNotification(en.ordinal(), callback) },
                "cuDeviceUnregisterAsyncNotification",
            )
        })())
    }
}

// ---- Batched copies, prefetches, discards ------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn batch_copy(
    dsts: *const *mut c_void,
    srcs: *const *const c_void,
    sizes: *const usize,
    count: usize,
    attrs: *mut sys::CUmemcpyAttributes,
    idxs: *mut usize,
    n_attrs: usize,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    if count > 0 && (dsts.is_null() || srcs.is_null() || sizes.is_null()) {
        return code(Err(fail(ErrorCode::InvalidValue, "cudaMemcpyBatchAsync")));
    }
    // SAFETY: `count` addresses and sizes, `n_attrs` attribute blocks (the driver's layout)
    // and indices of the caller; device pointers are the same numbers as host addresses.
    driver("cuMemcpyBatchAsync", || unsafe {
        sys::cuMemcpyBatchAsync_v2(
            dsts as *mut sys::CUdeviceptr,
            srcs as *mut sys::CUdeviceptr,
            sizes.cast_mut(),
            count,
            attrs,
            idxs,
            n_attrs,
            stream_of(s, pt),
        )
    })
}

export! {
    /// `cudaMemcpyBatchAsync`.
    fn cudaMemcpyBatchAsync(dsts: *const *mut c_void, srcs: *const *const c_void, sizes: *const usize, count: usize, attrs: *mut sys::CUmemcpyAttributes, attrsIdxs: *mut usize, numAttrs: usize, stream: cudaStream_t) -> cudaError_t {
        batch_copy(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, false)
    }
}

export! {
    /// `cudaMemcpyBatchAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpyBatchAsync_ptsz(dsts: *const *mut c_void, srcs: *const *const c_void, sizes: *const usize, count: usize, attrs: *mut sys::CUmemcpyAttributes, attrsIdxs: *mut usize, numAttrs: usize, stream: cudaStream_t) -> cudaError_t {
        batch_copy(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, true)
    }
}

fn batch_copy_3d(n: usize, ops: *mut c_void, flags: u64, s: cudaStream_t, pt: bool) -> cudaError_t {
    if n > 0 && ops.is_null() {
        return code(Err(fail(ErrorCode::InvalidValue, "cudaMemcpy3DBatchAsync")));
    }
    // SAFETY: `n` operations of the driver's layout (112 bytes each, checked with gcc).
    driver("cuMemcpy3DBatchAsync", || unsafe {
        sys::cuMemcpy3DBatchAsync_v2(n, ops.cast(), flags, stream_of(s, pt))
    })
}

export! {
    /// `cudaMemcpy3DBatchAsync`.
    fn cudaMemcpy3DBatchAsync(numOps: usize, opList: *mut c_void, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_copy_3d(numOps, opList, flags, stream, false)
    }
}

export! {
    /// `cudaMemcpy3DBatchAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpy3DBatchAsync_ptsz(numOps: usize, opList: *mut c_void, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_copy_3d(numOps, opList, flags, stream, true)
    }
}

#[allow(clippy::too_many_arguments)]
fn batch_prefetch(
    discard: bool,
    prefetch: bool,
    dptrs: *mut *mut c_void,
    sizes: *mut usize,
    count: usize,
    locs: *mut sys::CUmemLocation,
    idxs: *mut usize,
    n_locs: usize,
    flags: u64,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    if count > 0 && (dptrs.is_null() || sizes.is_null()) {
        return code(Err(fail(
            ErrorCode::InvalidValue,
            "cudaMemPrefetchBatchAsync",
        )));
    }
    let st = stream_of(s, pt);
    let p = dptrs as *mut sys::CUdeviceptr;
    // SAFETY: the caller's `count` ranges, `n_locs` locations and indices; device pointers are
    // the same numbers as host addresses.
    match (discard, prefetch) {
        (false, _) => driver("cuMemPrefetchBatchAsync", || unsafe {
            sys::cuMemPrefetchBatchAsync(p, sizes, count, locs, idxs, n_locs, flags, st)
        }),
        // SAFETY: as above.
        (true, false) => driver("cuMemDiscardBatchAsync", || unsafe {
            sys::cuMemDiscardBatchAsync(p, sizes, count, flags, st)
        }),
        // SAFETY: as above.
        (true, true) => driver("cuMemDiscardAndPrefetchBatchAsync", || unsafe {
            sys::cuMemDiscardAndPrefetchBatchAsync(p, sizes, count, locs, idxs, n_locs, flags, st)
        }),
    }
}

export! {
    /// `cudaMemPrefetchBatchAsync`.
    fn cudaMemPrefetchBatchAsync(dptrs: *mut *mut c_void, sizes: *mut usize, count: usize, prefetchLocs: *mut sys::CUmemLocation, prefetchLocIdxs: *mut usize, numPrefetchLocs: usize, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_prefetch(false, true, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, false)
    }
}

export! {
    /// `cudaMemPrefetchBatchAsync` with stream 0 as the per-thread stream.
    fn cudaMemPrefetchBatchAsync_ptsz(dptrs: *mut *mut c_void, sizes: *mut usize, count: usize, prefetchLocs: *mut sys::CUmemLocation, prefetchLocIdxs: *mut usize, numPrefetchLocs: usize, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_prefetch(false, true, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, true)
    }
}

export! {
    /// `cudaMemDiscardBatchAsync`.
    fn cudaMemDiscardBatchAsync(dptrs: *mut *mut c_void, sizes: *mut usize, count: usize, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_prefetch(true, false, dptrs, sizes, count, std::ptr::null_mut(), std::ptr::null_mut(), 0, flags, stream, false)
    }
}

export! {
    /// `cudaMemDiscardBatchAsync` with stream 0 as the per-thread stream.
    fn cudaMemDiscardBatchAsync_ptsz(dptrs: *mut *mut c_void, sizes: *mut usize, count: usize, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_prefetch(true, false, dptrs, sizes, count, std::ptr::null_mut(), std::ptr::null_mut(), 0, flags, stream, true)
    }
}

export! {
    /// `cudaMemDiscardAndPrefetchBatchAsync`.
    fn cudaMemDiscardAndPrefetchBatchAsync(dptrs: *mut *mut c_void, sizes: *mut usize, count: usize, prefetchLocs: *mut sys::CUmemLocation, prefetchLocIdxs: *mut usize, numPrefetchLocs: usize, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_prefetch(true, true, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, false)
    }
}

export! {
    /// `cudaMemDiscardAndPrefetchBatchAsync` with stream 0 as the per-thread stream.
    fn cudaMemDiscardAndPrefetchBatchAsync_ptsz(dptrs: *mut *mut c_void, sizes: *mut usize, count: usize, prefetchLocs: *mut sys::CUmemLocation, prefetchLocIdxs: *mut usize, numPrefetchLocs: usize, flags: u64, stream: cudaStream_t) -> cudaError_t {
        batch_prefetch(true, true, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, true)
    }
}

// ---- Driver logs -------------------------------------------------------------------------------

/// `cudaLogsCallback_t`: the driver's `CUlogsCallback` shape.
pub type cudaLogsCallback_t = Option<unsafe extern "C" fn(*mut c_void, i32, *mut c_char, usize)>;

export! {
    /// `cudaLogsRegisterCallback`: registered with the driver as it is.
    fn cudaLogsRegisterCallback(callbackFunc: cudaLogsCallback_t, userData: *mut c_void, callback_out: *mut sys::CUlogsCallbackHandle) -> cudaError_t {
        code((|| {
            let Some(f) = callbackFunc else {
                return Err(fail(ErrorCode::InvalidValue, "cudaLogsRegisterCallback"));
            };
            let o = out(callback_out, "cudaLogsRegisterCallback")?;
            // SAFETY: the same ABI: a pointer, a 32-bit level (an enumeration in the driver's
            // type, passed by the driver), a pointer and a size.
            let f: unsafe extern "C" fn(*mut c_void, sys::CUlogLevel, *mut c_char, usize) =
                unsafe { std::mem::transmute(f) };
            // SAFETY: a callback the caller keeps valid until unregistered; valid out-parameter.
            let r = unsafe { sys::cuLogsRegisterCallback(Some(f), userData, o) };
            Entered::current()?.check(r, "cuLogsRegisterCallback")
        })())
    }
}

export! {
    /// `cudaLogsUnregisterCallback`.
    fn cudaLogsUnregisterCallback(callback: sys::CUlogsCallbackHandle) -> cudaError_t {
        // SAFETY: a handle the caller registered.
        driver("cuLogsUnregisterCallback", || unsafe { sys::cuLogsUnregisterCallback(callback) })
    }
}

export! {
    /// `cudaLogsCurrent`.
    fn cudaLogsCurrent(iterator_out: *mut sys::CUlogIterator, flags: u32) -> cudaError_t {
        if iterator_out.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLogsCurrent")));
        }
        // SAFETY: valid out-parameter.
        driver("cuLogsCurrent", || unsafe { sys::cuLogsCurrent(iterator_out, flags) })
    }
}

export! {
    /// `cudaLogsDumpToFile`.
    fn cudaLogsDumpToFile(iterator: *mut sys::CUlogIterator, pathToFile: *const c_char, flags: u32) -> cudaError_t {
        if pathToFile.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLogsDumpToFile")));
        }
        // SAFETY: an optional iterator and a NUL-terminated path of the caller.
        driver("cuLogsDumpToFile", || unsafe { sys::cuLogsDumpToFile(iterator, pathToFile, flags) })
    }
}

export! {
    /// `cudaLogsDumpToMemory`.
    fn cudaLogsDumpToMemory(iterator: *mut sys::CUlogIterator, buffer: *mut c_char, size: *mut usize, flags: u32) -> cudaError_t {
        if buffer.is_null() || size.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaLogsDumpToMemory")));
        }
        // SAFETY: a buffer of `*size` bytes and an optional iterator of the caller.
        driver("cuLogsDumpToMemory", || unsafe { sys::cuLogsDumpToMemory(iterator, buffer, size, flags) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The Rust side of the layouts compared with gcc on the 13.0 headers: the runtime's
    /// structures that are passed through have the driver's sizes here too.
    #[test]
    fn layouts_match_the_driver() {
        assert_eq!(size_of::<sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC>(), 104);
        assert_eq!(size_of::<sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC>(), 88);
        assert_eq!(size_of::<sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC>(), 96);
        assert_eq!(size_of::<sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS>(), 144);
        assert_eq!(size_of::<sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS>(), 144);
        assert_eq!(size_of::<sys::CUmemPoolPtrExportData>(), 64);
        assert_eq!(size_of::<sys::CUmemAccessDesc>(), 12);
        assert_eq!(size_of::<sys::CUDA_MEM_ALLOC_NODE_PARAMS>(), 120);
        assert_eq!(size_of::<sys::CUDA_ARRAY_SPARSE_PROPERTIES>(), 48);
        assert_eq!(size_of::<sys::CUDA_ARRAY_MEMORY_REQUIREMENTS>(), 32);
        assert_eq!(size_of::<sys::CUmemcpyAttributes>(), 24);
        assert_eq!(size_of::<sys::CUDA_MEMCPY3D_BATCH_OP>(), 112);
        assert_eq!(size_of::<sys::CUDA_GRAPH_INSTANTIATE_PARAMS>(), 32);
        assert_eq!(size_of::<cudaGraphInstantiateParams>(), 32);
        assert_eq!(offset_of!(cudaGraphInstantiateParams, result_out), 24);
        // The runtime's mipmapped description is not the driver's: it is translated.
        assert_eq!(size_of::<cudaExternalMemoryMipmappedArrayDesc>(), 128);
        assert_eq!(offset_of!(cudaExternalMemoryMipmappedArrayDesc, extent), 32);
        assert_eq!(offset_of!(cudaExternalMemoryMipmappedArrayDesc, flags), 56);
        assert_eq!(
            offset_of!(cudaExternalMemoryMipmappedArrayDesc, numLevels),
            60
        );
    }

    #[test]
    fn enumerations_are_looked_up_by_number() {
        assert!(matches!(
            handle_type(1, "t"),
            Ok(sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        ));
        assert!(handle_type(3, "t").is_err() && handle_type(16, "t").is_err());
        assert!(allocation_type(0, "t").is_err() && allocation_type(2, "t").is_ok());
        for n in 0..4 {
            assert_eq!(graph_mem_attr(n, "t").unwrap() as i32, n);
        }
        assert!(graph_mem_attr(4, "t").is_err());
    }
}
