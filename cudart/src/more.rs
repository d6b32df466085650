//! Stream and kernel-node attributes, device choice and peer attributes, the deprecated shared
//! memory bank configuration, driver entry points and export tables, graph edge queries, memset
//! node parameters, and range attributes of managed memory.
use std::ffi::{c_char, c_void};

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};

use crate::graph::{cudaGraphNode_t, cudaGraph_t};
use crate::memory::cudaChannelFormatDesc;
use crate::props::cudaDeviceProp;
use crate::{code, cudaError_t, cudaStream_t, dptr, driver, export, fail, out, stream_of};

/// The driver's launch-attribute identifier of a runtime one (the numbers are the same; an
/// unknown number is refused rather than turned into an enumeration value).
fn attr_id(n: i32, call: &'static str) -> Result<sys::CUlaunchAttributeID, Error> {
    use sys::CUlaunchAttributeID as A;
    const ALL: [A; 16] = [
        A::CU_LAUNCH_ATTRIBUTE_IGNORE,
        A::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
        A::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
        A::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
        A::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        A::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        A::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        A::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT,
        A::CU_LAUNCH_ATTRIBUTE_PRIORITY,
        A::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
        A::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
        A::CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
        A::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT,
        A::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
        A::CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        A::CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING,
    ];
    ALL.into_iter()
        .find(|a| *a as i32 == n)
        .ok_or_else(|| fail(ErrorCode::InvalidValue, call))
}

fn stream_attribute(
    s: cudaStream_t,
    attr: i32,
    value: *mut c_void,
    set: bool,
    pt: bool,
) -> cudaError_t {
    let call = if set {
        "cudaStreamSetAttribute"
    } else {
        "cudaStreamGetAttribute"
    };
    let id = match attr_id(attr, call) {
        Ok(id) => id,
        Err(e) => return code(Err(e)),
    };
    if value.is_null() {
        return code(Err(fail(ErrorCode::InvalidValue, call)));
    }
    let st = stream_of(s, pt);
    if set {
        // SAFETY: the caller's stream and a readable `cudaStreamAttrValue` (the driver's
        // `CUstreamAttrValue`, the same union).
        driver("cuStreamSetAttribute", || unsafe {
            sys::cuStreamSetAttribute(st, id, value.cast())
        })
    } else {
        // SAFETY: as above, writable.
        driver("cuStreamGetAttribute", || unsafe {
            sys::cuStreamGetAttribute(st, id, value.cast())
        })
    }
}

export! {
    /// `cudaStreamGetAttribute` (the value is the driver's union, byte for byte).
    fn cudaStreamGetAttribute(hStream: cudaStream_t, attr: i32, value_out: *mut c_void) -> cudaError_t {
        stream_attribute(hStream, attr, value_out, false, false)
    }
}

export! {
    /// `cudaStreamGetAttribute` with stream 0 as the per-thread stream.
    fn cudaStreamGetAttribute_ptsz(hStream: cudaStream_t, attr: i32, value_out: *mut c_void) -> cudaError_t {
        stream_attribute(hStream, attr, value_out, false, true)
    }
}

export! {
    /// `cudaStreamSetAttribute`.
    fn cudaStreamSetAttribute(hStream: cudaStream_t, attr: i32, value: *const c_void) -> cudaError_t {
        stream_attribute(hStream, attr, value.cast_mut(), true, false)
    }
}

export! {
    /// `cudaStreamSetAttribute` with stream 0 as the per-thread stream.
    fn cudaStreamSetAttribute_ptsz(hStream: cudaStream_t, attr: i32, value: *const c_void) -> cudaError_t {
        stream_attribute(hStream, attr, value.cast_mut(), true, true)
    }
}

export! {
    /// `cudaStreamCopyAttributes` with stream 0 as the per-thread stream.
    fn cudaStreamCopyAttributes_ptsz(dst: cudaStream_t, src: cudaStream_t) -> cudaError_t {
        // SAFETY: the caller's streams.
        driver("cuStreamCopyAttributes", || unsafe {
            sys::cuStreamCopyAttributes(stream_of(dst, true), stream_of(src, true))
        })
    }
}

export! {
    /// `cudaStreamGetDevice` with stream 0 as the per-thread stream.
    fn cudaStreamGetDevice_ptsz(hStream: cudaStream_t, device: *mut i32) -> cudaError_t {
        if device.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaStreamGetDevice")));
        }
        // SAFETY: the caller's stream and out-parameter.
        driver("cuStreamGetDevice", || unsafe {
            sys::cuStreamGetDevice(stream_of(hStream, true), device)
        })
    }
}

fn node_attribute(node: cudaGraphNode_t, attr: i32, value: *mut c_void, set: bool) -> cudaError_t {
    let call = if set {
        "cudaGraphKernelNodeSetAttribute"
    } else {
        "cudaGraphKernelNodeGetAttribute"
    };
    let id = match attr_id(attr, call) {
        Ok(id) => id,
        Err(e) => return code(Err(e)),
    };
    if value.is_null() {
        return code(Err(fail(ErrorCode::InvalidValue, call)));
    }
    if set {
        // SAFETY: the caller's kernel node and a readable attribute value.
        driver("cuGraphKernelNodeSetAttribute", || unsafe {
            sys::cuGraphKernelNodeSetAttribute(node, id, value.cast())
        })
    } else {
        // SAFETY: as above, writable.
        driver("cuGraphKernelNodeGetAttribute", || unsafe {
            sys::cuGraphKernelNodeGetAttribute(node, id, value.cast())
        })
    }
}

export! {
    /// `cudaGraphKernelNodeGetAttribute`.
    fn cudaGraphKernelNodeGetAttribute(hNode: cudaGraphNode_t, attr: i32, value_out: *mut c_void) -> cudaError_t {
        node_attribute(hNode, attr, value_out, false)
    }
}

export! {
    /// `cudaGraphKernelNodeSetAttribute`.
    fn cudaGraphKernelNodeSetAttribute(hNode: cudaGraphNode_t, attr: i32, value: *const c_void) -> cudaError_t {
        node_attribute(hNode, attr, value.cast_mut(), true)
    }
}

export! {
    /// `cudaGraphKernelNodeCopyAttributes`.
    fn cudaGraphKernelNodeCopyAttributes(hDst: cudaGraphNode_t, hSrc: cudaGraphNode_t) -> cudaError_t {
        // SAFETY: the caller's kernel nodes.
        driver("cuGraphKernelNodeCopyAttributes", || unsafe {
            sys::cuGraphKernelNodeCopyAttributes(hDst, hSrc)
        })
    }
}

export! {
    /// `cudaChooseDevice`: the crate's `choose_device` (one rule for both interfaces) with the
    /// requirements `prop` sets: compute capability, global memory, multiprocessors and
    /// concurrent managed access (a zero field asks for nothing).
    fn cudaChooseDevice(device: *mut i32, prop: *const cudaDeviceProp) -> cudaError_t {
        code((|| {
            let o = out(device, "cudaChooseDevice")?;
            // SAFETY: C callers pass a readable property block or null (refused).
            let p = unsafe { prop.as_ref() }
                .ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaChooseDevice"))?;
            let wanted = cuda_runtime::DeviceRequirements {
                compute_capability: (p.major, p.minor),
                total_global_mem: p.totalGlobalMem,
                multi_processor_count: p.multiProcessorCount,
                integrated: None,
                concurrent_managed_access: p.concurrentManagedAccess != 0,
            };
            *o = cuda_runtime::choose_device(&wanted)?.ordinal();
            Ok(())
        })())
    }
}

export! {
    /// `cudaSetValidDevices`: the crate's `set_valid_devices` (one rule for both interfaces).
    fn cudaSetValidDevices(device_arr: *mut i32, len: i32) -> cudaError_t {
        code((|| {
            if len < 0 || (len > 0 && device_arr.is_null()) {
                return Err(fail(ErrorCode::InvalidValue, "cudaSetValidDevices"));
            }
            let list = if len == 0 {
                &[][..]
            } else {
                // SAFETY: C callers pass `len` readable ordinals.
                unsafe { std::slice::from_raw_parts(device_arr, len as usize) }
            };
            cuda_runtime::set_valid_devices(list)
        })())
    }
}

export! {
    /// `cudaDeviceGetP2PAttribute` (attributes 1..=5, the driver's numbers).
    fn cudaDeviceGetP2PAttribute(value: *mut i32, attr: i32, srcDevice: i32, dstDevice: i32) -> cudaError_t {
        use sys::CUdevice_P2PAttribute as P;
        const CALL: &str = "cudaDeviceGetP2PAttribute";
        code((|| {
            let o = out(value, CALL)?;
            let a = [
                P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
                P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED,
                P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_ACCESS_SUPPORTED,
                P::CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED,
            ]
            .into_iter()
            .find(|p| *p as i32 == attr)
            .ok_or_else(|| fail(ErrorCode::InvalidValue, CALL))?;
            let n = cuda_runtime::device_count()?;
            if !(0..n).contains(&srcDevice) || !(0..n).contains(&dstDevice) {
                return Err(fail(ErrorCode::InvalidDevice, CALL));
            }
            if srcDevice == dstDevice {
                return Err(fail(ErrorCode::InvalidDevice, CALL));
            }
            let en = Entered::current()?;
            let mut v = 0;
            // SAFETY: valid out-parameter; ordinals checked above (driver ordinals are the
            // runtime's: this library does not reorder devices).
            en.check(
                unsafe { sys::cuDeviceGetP2PAttribute(&mut v, a, srcDevice, dstDevice) },
                "cuDeviceGetP2PAttribute",
            )?;
            *o = v;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceGetTexture1DLinearMaxWidth`: the widest 1-D texture over linear memory of
    /// this format on `device`, in elements.
    fn cudaDeviceGetTexture1DLinearMaxWidth(maxWidthInElements: *mut usize, fmtDesc: *const cudaChannelFormatDesc, device: i32) -> cudaError_t {
        const CALL: &str = "cudaDeviceGetTexture1DLinearMaxWidth";
        code((|| {
            let o = out(maxWidthInElements, CALL)?;
            // SAFETY: a readable description or null (refused).
            let d = unsafe { fmtDesc.as_ref() }.ok_or_else(|| fail(ErrorCode::InvalidValue, CALL))?;
            let (f, n) = crate::texture::format(d, CALL)?;
            let en = Entered::device(device)?;
            let mut w = 0usize;
            // SAFETY: valid out-parameter; a checked format; the device's ordinal.
            en.check(
                unsafe { sys::cuDeviceGetTexture1DLinearMaxWidth(&mut w, f, n, en.ordinal()) },
                "cuDeviceGetTexture1DLinearMaxWidth",
            )?;
            *o = w;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceGetSharedMemConfig` (deprecated): banks are four bytes wide on every device
    /// the runtime supports (`cudaSharedMemBankSizeFourByte`).
    fn cudaDeviceGetSharedMemConfig(pConfig: *mut i32) -> cudaError_t {
        code((|| {
            let o = out(pConfig, "cudaDeviceGetSharedMemConfig")?;
            Entered::current()?;
            *o = 1;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceSetSharedMemConfig` (deprecated): accepts the three configurations and has no
    /// effect, as on every device since compute capability 5.0.
    fn cudaDeviceSetSharedMemConfig(config: i32) -> cudaError_t {
        code((|| {
            if !(0..=2).contains(&config) {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceSetSharedMemConfig"));
            }
            Entered::current()?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaFuncSetSharedMemConfig` (deprecated): checks the function and the configuration;
    /// no effect.
    fn cudaFuncSetSharedMemConfig(func: *const c_void, config: i32) -> cudaError_t {
        code((|| {
            if !(0..=2).contains(&config) {
                return Err(fail(ErrorCode::InvalidValue, "cudaFuncSetSharedMemConfig"));
            }
            crate::register::kernel_of_func(func)?;
            Ok(())
        })())
    }
}

fn entry_point(
    symbol: *const c_char,
    func: *mut *mut c_void,
    version: i32,
    flags: u64,
    status: *mut c_void,
    call: &'static str,
) -> cudaError_t {
    if symbol.is_null() || func.is_null() {
        return code(Err(fail(ErrorCode::InvalidValue, call)));
    }
    // SAFETY: a NUL-terminated name, a writable pointer and an optional status (the driver's
    // enumeration, written by the driver only).
    driver("cuGetProcAddress", || unsafe {
        sys::cuGetProcAddress_v2(symbol, func, version, flags, status.cast())
    })
}

/// The CUDA version this library implements (13.0), as `CUDA_VERSION`.
const CUDA_VERSION: i32 = 13000;

export! {
    /// `cudaGetDriverEntryPoint`: the driver function of that name for CUDA 13.0.
    fn cudaGetDriverEntryPoint(symbol: *const c_char, funcPtr: *mut *mut c_void, flags: u64, driverStatus: *mut c_void) -> cudaError_t {
        entry_point(symbol, funcPtr, CUDA_VERSION, flags, driverStatus, "cudaGetDriverEntryPoint")
    }
}

export! {
    /// `cudaGetDriverEntryPoint` (per-thread build of the caller: the same lookup).
    fn cudaGetDriverEntryPoint_ptsz(symbol: *const c_char, funcPtr: *mut *mut c_void, flags: u64, driverStatus: *mut c_void) -> cudaError_t {
        entry_point(symbol, funcPtr, CUDA_VERSION, flags, driverStatus, "cudaGetDriverEntryPoint")
    }
}

export! {
    /// `cudaGetDriverEntryPointByVersion`.
    fn cudaGetDriverEntryPointByVersion(symbol: *const c_char, funcPtr: *mut *mut c_void, cudaVersion: u32, flags: u64, driverStatus: *mut c_void) -> cudaError_t {
        entry_point(symbol, funcPtr, cudaVersion as i32, flags, driverStatus, "cudaGetDriverEntryPointByVersion")
    }
}

export! {
    /// `cudaGetDriverEntryPointByVersion` (per-thread build of the caller: the same lookup).
    fn cudaGetDriverEntryPointByVersion_ptsz(symbol: *const c_char, funcPtr: *mut *mut c_void, cudaVersion: u32, flags: u64, driverStatus: *mut c_void) -> cudaError_t {
        entry_point(symbol, funcPtr, cudaVersion as i32, flags, driverStatus, "cudaGetDriverEntryPointByVersion")
    }
}

export! {
    /// `cudaGetExportTable`: the driver's table of that UUID.
    fn cudaGetExportTable(ppExportTable: *mut *const c_void, pExportTableId: *const sys::CUuuid) -> cudaError_t {
        if ppExportTable.is_null() || pExportTableId.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGetExportTable")));
        }
        // SAFETY: a writable pointer and a readable UUID.
        driver("cuGetExportTable", || unsafe { sys::cuGetExportTable(ppExportTable, pExportTableId) })
    }
}

export! {
    /// `cudaGraphGetEdges` (13.0: with optional edge data).
    fn cudaGraphGetEdges(graph: cudaGraph_t, from: *mut cudaGraphNode_t, to: *mut cudaGraphNode_t, edgeData: *mut c_void, numEdges: *mut usize) -> cudaError_t {
        if numEdges.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphGetEdges")));
        }
        // SAFETY: the caller's graph, count and optional arrays of `*numEdges` entries.
        driver("cuGraphGetEdges", || unsafe {
            sys::cuGraphGetEdges_v2(graph, from, to, edgeData.cast(), numEdges)
        })
    }
}

export! {
    /// `cudaGraphNodeGetDependencies` (13.0: with optional edge data).
    fn cudaGraphNodeGetDependencies(node: cudaGraphNode_t, pDependencies: *mut cudaGraphNode_t, edgeData: *mut c_void, pNumDependencies: *mut usize) -> cudaError_t {
        if pNumDependencies.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphNodeGetDependencies")));
        }
        // SAFETY: the caller's node, count and optional arrays.
        driver("cuGraphNodeGetDependencies", || unsafe {
            sys::cuGraphNodeGetDependencies_v2(node, pDependencies, edgeData.cast(), pNumDependencies)
        })
    }
}

export! {
    /// `cudaGraphNodeGetDependentNodes` (13.0: with optional edge data).
    fn cudaGraphNodeGetDependentNodes(node: cudaGraphNode_t, pDependentNodes: *mut cudaGraphNode_t, edgeData: *mut c_void, pNumDependentNodes: *mut usize) -> cudaError_t {
        if pNumDependentNodes.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphNodeGetDependentNodes")));
        }
        // SAFETY: the caller's node, count and optional arrays.
        driver("cuGraphNodeGetDependentNodes", || unsafe {
            sys::cuGraphNodeGetDependentNodes_v2(node, pDependentNodes, edgeData.cast(), pNumDependentNodes)
        })
    }
}

export! {
    /// `cudaGraphRemoveDependencies` (13.0: with optional edge data).
    fn cudaGraphRemoveDependencies(graph: cudaGraph_t, from: *const cudaGraphNode_t, to: *const cudaGraphNode_t, edgeData: *const c_void, numDependencies: usize) -> cudaError_t {
        // SAFETY: the caller's graph and arrays of `numDependencies` nodes (and edge data).
        driver("cuGraphRemoveDependencies", || unsafe {
            sys::cuGraphRemoveDependencies_v2(graph, from, to, edgeData.cast(), numDependencies)
        })
    }
}

export! {
    /// `cudaGraphMemsetNodeGetParams` (`cudaMemsetParams` is the driver's layout).
    fn cudaGraphMemsetNodeGetParams(node: cudaGraphNode_t, pNodeParams: *mut sys::CUDA_MEMSET_NODE_PARAMS) -> cudaError_t {
        if pNodeParams.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphMemsetNodeGetParams")));
        }
        // SAFETY: the caller's memset node and a writable parameter block.
        driver("cuGraphMemsetNodeGetParams", || unsafe { sys::cuGraphMemsetNodeGetParams(node, pNodeParams) })
    }
}

export! {
    /// `cudaGraphMemsetNodeSetParams`.
    fn cudaGraphMemsetNodeSetParams(node: cudaGraphNode_t, pNodeParams: *const sys::CUDA_MEMSET_NODE_PARAMS) -> cudaError_t {
        // SAFETY: a readable parameter block or null (refused).
        let Some(p) = (unsafe { pNodeParams.as_ref() }) else {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphMemsetNodeSetParams")));
        };
        if !matches!(p.elementSize, 1 | 2 | 4) || (p.height > 1 && p.width > p.pitch) {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphMemsetNodeSetParams")));
        }
        // SAFETY: the caller's memset node; the block was checked above.
        driver("cuGraphMemsetNodeSetParams", || unsafe { sys::cuGraphMemsetNodeSetParams(node, p) })
    }
}

/// The driver's range attribute of a runtime one (the same numbers, 1..=8).
fn range_attr(n: i32) -> Result<sys::CUmem_range_attribute, Error> {
    use sys::CUmem_range_attribute as R;
    [
        R::CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
        R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
        R::CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
        R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
        R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID,
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
    ]
    .into_iter()
    .find(|r| *r as i32 == n)
    .ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaMemRangeGetAttribute"))
}

export! {
    /// `cudaMemRangeGetAttribute` of managed memory.
    fn cudaMemRangeGetAttribute(data: *mut c_void, dataSize: usize, attribute: i32, devPtr: *const c_void, count: usize) -> cudaError_t {
        let a = match range_attr(attribute) {
            Ok(a) => a,
            Err(e) => return code(Err(e)),
        };
        if data.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaMemRangeGetAttribute")));
        }
        // SAFETY: `dataSize` writable bytes at `data`; the caller's range (checked by the driver).
        driver("cuMemRangeGetAttribute", || unsafe {
            sys::cuMemRangeGetAttribute(data, dataSize, a, dptr(devPtr), count)
        })
    }
}

export! {
    /// `cudaMemRangeGetAttributes` of managed memory.
    fn cudaMemRangeGetAttributes(data: *mut *mut c_void, dataSizes: *mut usize, attributes: *const i32, numAttributes: usize, devPtr: *const c_void, count: usize) -> cudaError_t {
        code((|| {
            if numAttributes == 0 || data.is_null() || dataSizes.is_null() || attributes.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemRangeGetAttributes"));
            }
            // SAFETY: C callers pass `numAttributes` readable attribute numbers.
            let given = unsafe { std::slice::from_raw_parts(attributes, numAttributes) };
            let mut attrs = given.iter().map(|n| range_attr(*n)).collect::<Result<Vec<_>, _>>()?;
            let en = Entered::current()?;
            // SAFETY: the caller's arrays of `numAttributes` buffers and sizes; attributes
            // converted above; the caller's range (checked by the driver).
            en.check(
                unsafe {
                    sys::cuMemRangeGetAttributes(
                        data,
                        dataSizes,
                        attrs.as_mut_ptr(),
                        numAttributes,
                        dptr(devPtr),
                        count,
                    )
                },
                "cuMemRangeGetAttributes",
            )
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_numbers_are_checked() {
        for n in [0, 1, 3, 8, 9, 10, 14, 16] {
            assert_eq!(attr_id(n, "t").unwrap() as i32, n);
        }
        for n in [-1, 15, 17, 1000] {
            assert!(attr_id(n, "t").is_err(), "{n}");
        }
        for n in 1..=8 {
            assert_eq!(range_attr(n).unwrap() as i32, n);
        }
        assert!(range_attr(0).is_err() && range_attr(9).is_err());
    }
}
