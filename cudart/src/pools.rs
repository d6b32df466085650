//! Stream-ordered memory pools, IPC, peer copies, pointer attributes and other handle-level
//! calls. Structures the driver reads or writes with the same layout as the runtime's are
//! passed through without Rust reading their enumerations.
use std::ffi::c_void;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode, MemoryType};

use crate::{
    code, cudaError_t, cudaEvent_t, cudaStream_t, dptr, driver, export, fail, out, stream_of,
};

/// `cudaMemPool_t`.
pub type cudaMemPool_t = sys::CUmemoryPool;

fn pool_attr(attr: i32, call: &'static str) -> Result<sys::CUmemPool_attribute, Error> {
    use sys::CUmemPool_attribute as A;
    Ok(match attr {
        1 => A::CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
        2 => A::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
        3 => A::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
        4 => A::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
        5 => A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        6 => A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        7 => A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        8 => A::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        _ => return Err(fail(ErrorCode::InvalidValue, call)),
    })
}

fn device_pool(pool: *mut cudaMemPool_t, device: i32, default: bool) -> cudaError_t {
    let call = if default {
        "cudaDeviceGetDefaultMemPool"
    } else {
        "cudaDeviceGetMemPool"
    };
    code((|| {
        let p = out(pool, call)?;
        let a = Entered::device(device)?;
        // SAFETY: valid out-parameter; a valid device ordinal (entered).
        let r = unsafe {
            if default {
                sys::cuDeviceGetDefaultMemPool(p, device)
            } else {
                sys::cuDeviceGetMemPool(p, device)
            }
        };
        a.check(r, call)
    })())
}

export! {
    /// `cudaDeviceGetDefaultMemPool`.
    fn cudaDeviceGetDefaultMemPool(memPool: *mut cudaMemPool_t, device: i32) -> cudaError_t {
        device_pool(memPool, device, true)
    }
}

export! {
    /// `cudaDeviceGetMemPool`.
    fn cudaDeviceGetMemPool(memPool: *mut cudaMemPool_t, device: i32) -> cudaError_t {
        device_pool(memPool, device, false)
    }
}

export! {
    /// `cudaDeviceSetMemPool`.
    fn cudaDeviceSetMemPool(device: i32, memPool: cudaMemPool_t) -> cudaError_t {
        code((|| {
            let a = Entered::device(device)?;
            // SAFETY: the caller's pool; a valid device.
            a.check(unsafe { sys::cuDeviceSetMemPool(device, memPool) }, "cuDeviceSetMemPool")
        })())
    }
}

export! {
    /// `cudaMemPoolCreate` (the properties' layout is the driver's: passed through).
    fn cudaMemPoolCreate(memPool: *mut cudaMemPool_t, poolProps: *const c_void) -> cudaError_t {
        code((|| {
            let p = out(memPool, "cudaMemPoolCreate")?;
            if poolProps.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaMemPoolCreate"));
            }
            let a = Entered::current()?;
            // SAFETY: valid out-parameter; the caller's properties, read by the driver only.
            a.check(unsafe { sys::cuMemPoolCreate(p, poolProps.cast()) }, "cuMemPoolCreate")
        })())
    }
}

export! {
    /// `cudaMemPoolDestroy`.
    fn cudaMemPoolDestroy(memPool: cudaMemPool_t) -> cudaError_t {
        // SAFETY: the caller's pool.
        driver("cuMemPoolDestroy", || unsafe { sys::cuMemPoolDestroy(memPool) })
    }
}

fn pool_attribute(pool: cudaMemPool_t, attr: i32, value: *mut c_void, set: bool) -> cudaError_t {
    let call = if set {
        "cudaMemPoolSetAttribute"
    } else {
        "cudaMemPoolGetAttribute"
    };
    code((|| {
        let a = pool_attr(attr, call)?;
        if value.is_null() {
            return Err(fail(ErrorCode::InvalidValue, call));
        }
        let e = Entered::current()?;
        // SAFETY: the caller's pool and value (an int or a 64-bit integer, per attribute).
        let r = unsafe {
            if set {
                sys::cuMemPoolSetAttribute(pool, a, value)
            } else {
                sys::cuMemPoolGetAttribute(pool, a, value)
            }
        };
        e.check(r, call)
    })())
}

export! {
    /// `cudaMemPoolSetAttribute`.
    fn cudaMemPoolSetAttribute(memPool: cudaMemPool_t, attr: i32, value: *mut c_void) -> cudaError_t {
        pool_attribute(memPool, attr, value, true)
    }
}

export! {
    /// `cudaMemPoolGetAttribute`.
    fn cudaMemPoolGetAttribute(memPool: cudaMemPool_t, attr: i32, value: *mut c_void) -> cudaError_t {
        pool_attribute(memPool, attr, value, false)
    }
}

export! {
    /// `cudaMemPoolTrimTo`.
    fn cudaMemPoolTrimTo(memPool: cudaMemPool_t, minBytesToKeep: usize) -> cudaError_t {
        // SAFETY: the caller's pool.
        driver("cuMemPoolTrimTo", || unsafe { sys::cuMemPoolTrimTo(memPool, minBytesToKeep) })
    }
}

fn from_pool(
    ptr: *mut *mut c_void,
    size: usize,
    pool: cudaMemPool_t,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    code((|| {
        let p = out(ptr, "cudaMallocFromPoolAsync")?;
        let a = Entered::current()?;
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: valid out-parameter; the caller's pool and stream.
        a.check(
            unsafe { sys::cuMemAllocFromPoolAsync(&mut d, size, pool, stream_of(s, pt)) },
            "cuMemAllocFromPoolAsync",
        )?;
        *p = d as usize as *mut c_void;
        Ok(())
    })())
}

export! {
    /// `cudaMallocFromPoolAsync`.
    fn cudaMallocFromPoolAsync(ptr: *mut *mut c_void, size: usize, memPool: cudaMemPool_t, stream: cudaStream_t) -> cudaError_t {
        from_pool(ptr, size, memPool, stream, false)
    }
}

export! {
    /// `cudaMallocFromPoolAsync` with stream 0 as the per-thread stream.
    fn cudaMallocFromPoolAsync_ptsz(ptr: *mut *mut c_void, size: usize, memPool: cudaMemPool_t, stream: cudaStream_t) -> cudaError_t {
        from_pool(ptr, size, memPool, stream, true)
    }
}

/// `cudaIpcMemHandle_t` / `cudaIpcEventHandle_t` (64 opaque bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaIpcHandle {
    /// The driver's bytes.
    pub reserved: [std::ffi::c_char; 64],
}

export! {
    /// `cudaIpcGetMemHandle`.
    fn cudaIpcGetMemHandle(handle: *mut cudaIpcHandle, devPtr: *mut c_void) -> cudaError_t {
        code((|| {
            let h = out(handle, "cudaIpcGetMemHandle")?;
            let a = Entered::current()?;
            let mut raw = sys::CUipcMemHandle { reserved: [0; 64] };
            // SAFETY: valid out-parameter; the caller's allocation.
            a.check(unsafe { sys::cuIpcGetMemHandle(&mut raw, dptr(devPtr)) }, "cuIpcGetMemHandle")?;
            h.reserved = raw.reserved;
            Ok(())
        })())
    }
}

export! {
    /// `cudaIpcOpenMemHandle` (`cudaIpcMemLazyEnablePeerAccess` = 1, the driver's).
    fn cudaIpcOpenMemHandle(devPtr: *mut *mut c_void, handle: cudaIpcHandle, flags: u32) -> cudaError_t {
        code((|| {
            let p = out(devPtr, "cudaIpcOpenMemHandle")?;
            let a = Entered::current()?;
            let mut d: sys::CUdeviceptr = 0;
            let raw = sys::CUipcMemHandle { reserved: handle.reserved };
            // SAFETY: valid out-parameter; the handle's bytes as the other process made them.
            a.check(unsafe { sys::cuIpcOpenMemHandle_v2(&mut d, raw, flags) }, "cuIpcOpenMemHandle")?;
            *p = d as usize as *mut c_void;
            Ok(())
        })())
    }
}

export! {
    /// `cudaIpcCloseMemHandle`.
    fn cudaIpcCloseMemHandle(devPtr: *mut c_void) -> cudaError_t {
        // SAFETY: memory the caller opened from a handle.
        driver("cuIpcCloseMemHandle", || unsafe { sys::cuIpcCloseMemHandle(dptr(devPtr)) })
    }
}

export! {
    /// `cudaIpcGetEventHandle`.
    fn cudaIpcGetEventHandle(handle: *mut cudaIpcHandle, event: cudaEvent_t) -> cudaError_t {
        code((|| {
            let h = out(handle, "cudaIpcGetEventHandle")?;
            let a = Entered::current()?;
            let mut raw = sys::CUipcEventHandle { reserved: [0; 64] };
            // SAFETY: valid out-parameter; the caller's interprocess event.
            a.check(unsafe { sys::cuIpcGetEventHandle(&mut raw, event) }, "cuIpcGetEventHandle")?;
            h.reserved = raw.reserved;
            Ok(())
        })())
    }
}

export! {
    /// `cudaIpcOpenEventHandle`.
    fn cudaIpcOpenEventHandle(event: *mut cudaEvent_t, handle: cudaIpcHandle) -> cudaError_t {
        code((|| {
            let e = out(event, "cudaIpcOpenEventHandle")?;
            let a = Entered::current()?;
            let raw = sys::CUipcEventHandle { reserved: handle.reserved };
            // SAFETY: valid out-parameter; the handle's bytes.
            a.check(unsafe { sys::cuIpcOpenEventHandle(e, raw) }, "cuIpcOpenEventHandle")
        })())
    }
}

fn copy_peer(
    dst: *mut c_void,
    dst_dev: i32,
    src: *const c_void,
    src_dev: i32,
    n: usize,
    stream: Option<cudaStream_t>,
) -> cudaError_t {
    code((|| {
        if n == 0 {
            return Ok(());
        }
        let s = Entered::device(src_dev)?;
        let src_ctx = s.context();
        let d = Entered::device(dst_dev)?;
        let dst_ctx = d.context();
        let a = Entered::current()?;
        // SAFETY: the caller's memory on the two devices, whose contexts are kept from a reset
        // by `s` and `d`.
        let r = unsafe {
            match stream {
                None => sys::cuMemcpyPeer(dptr(dst), dst_ctx, dptr(src), src_ctx, n),
                Some(st) => sys::cuMemcpyPeerAsync(
                    dptr(dst),
                    dst_ctx,
                    dptr(src),
                    src_ctx,
                    n,
                    stream_of(st, false),
                ),
            }
        };
        let _keep = (s, d);
        a.check(
            r,
            if stream.is_some() {
                "cuMemcpyPeerAsync"
            } else {
                "cuMemcpyPeer"
            },
        )
    })())
}

export! {
    /// `cudaMemcpyPeer`.
    fn cudaMemcpyPeer(dst: *mut c_void, dstDevice: i32, src: *const c_void, srcDevice: i32, count: usize) -> cudaError_t {
        copy_peer(dst, dstDevice, src, srcDevice, count, None)
    }
}

export! {
    /// `cudaMemcpyPeerAsync`.
    fn cudaMemcpyPeerAsync(dst: *mut c_void, dstDevice: i32, src: *const c_void, srcDevice: i32, count: usize, stream: cudaStream_t) -> cudaError_t {
        copy_peer(dst, dstDevice, src, srcDevice, count, Some(stream))
    }
}

/// `struct cudaPointerAttributes` (88 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaPointerAttributes {
    /// `cudaMemoryType`.
    pub type_: i32,
    /// Device.
    pub device: i32,
    /// Device address.
    pub devicePointer: *mut c_void,
    /// Host address.
    pub hostPointer: *mut c_void,
    /// Reserved.
    pub reserved: [i64; 8],
}

export! {
    /// `cudaPointerGetAttributes` (the crate's `pointer_attributes`).
    fn cudaPointerGetAttributes(attributes: *mut cudaPointerAttributes, ptr: *const c_void) -> cudaError_t {
        code((|| {
            let dst = out(attributes, "cudaPointerGetAttributes")?;
            let a = cuda_runtime::pointer_attributes(dptr(ptr))?;
            let p = |v: Option<u64>| v.map_or(std::ptr::null_mut(), |x| x as usize as *mut c_void);
            *dst = cudaPointerAttributes {
                type_: match a.memory_type {
                    MemoryType::Unregistered => 0,
                    MemoryType::Host => 1,
                    MemoryType::Device => 2,
                    MemoryType::Managed => 3,
                },
                device: a.device,
                devicePointer: p(a.device_pointer),
                hostPointer: p(a.host_pointer),
                reserved: [0; 8],
            };
            Ok(())
        })())
    }
}

export! {
    /// `cudaEventRecordWithFlags` (`cudaEventRecordExternal` = 1, the driver's).
    fn cudaEventRecordWithFlags(event: cudaEvent_t, stream: cudaStream_t, flags: u32) -> cudaError_t {
        // SAFETY: the caller's event and stream.
        driver("cuEventRecordWithFlags", || unsafe { sys::cuEventRecordWithFlags(event, stream_of(stream, false), flags) })
    }
}

export! {
    /// `cudaEventRecordWithFlags` with stream 0 as the per-thread stream.
    fn cudaEventRecordWithFlags_ptsz(event: cudaEvent_t, stream: cudaStream_t, flags: u32) -> cudaError_t {
        // SAFETY: as above.
        driver("cuEventRecordWithFlags", || unsafe { sys::cuEventRecordWithFlags(event, stream_of(stream, true), flags) })
    }
}

export! {
    /// `cudaStreamGetId`.
    fn cudaStreamGetId(hStream: cudaStream_t, streamId: *mut u64) -> cudaError_t {
        code((|| {
            let p = out(streamId, "cudaStreamGetId")?;
            let a = Entered::current()?;
            let mut id = 0u64;
            // SAFETY: valid out-parameter; the caller's stream.
            a.check(unsafe { sys::cuStreamGetId(stream_of(hStream, false), &mut id) }, "cuStreamGetId")?;
            *p = id;
            Ok(())
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_headers() {
        assert_eq!(std::mem::size_of::<cudaPointerAttributes>(), 88);
        assert_eq!(std::mem::size_of::<cudaIpcHandle>(), 64);
    }
}

/// `struct cudaMemLocation` (by value): type, id.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cudaMemLocation {
    /// `cudaMemLocationType`: device 1, host 2, host NUMA 3, host NUMA current 4.
    pub type_: i32,
    /// Device ordinal or NUMA node.
    pub id: i32,
}

fn location(l: cudaMemLocation, call: &'static str) -> Result<sys::CUmemLocation, Error> {
    use sys::CUmemLocationType as T;
    let type_ = match l.type_ {
        1 => T::CU_MEM_LOCATION_TYPE_DEVICE,
        2 => T::CU_MEM_LOCATION_TYPE_HOST,
        3 => T::CU_MEM_LOCATION_TYPE_HOST_NUMA,
        4 => T::CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT,
        _ => return Err(fail(ErrorCode::InvalidValue, call)),
    };
    Ok(sys::CUmemLocation { type_, id: l.id })
}

fn prefetch(
    p: *const c_void,
    count: usize,
    loc: cudaMemLocation,
    flags: u32,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    code((|| {
        let l = location(loc, "cudaMemPrefetchAsync")?;
        let a = Entered::current()?;
        // SAFETY: the caller's managed range and stream (the driver checks them).
        a.check(
            unsafe { sys::cuMemPrefetchAsync_v2(dptr(p), count, l, flags, stream_of(s, pt)) },
            "cuMemPrefetchAsync",
        )
    })())
}

export! {
    /// `cudaMemPrefetchAsync` (13.0: a location and flags).
    fn cudaMemPrefetchAsync(devPtr: *const c_void, count: usize, location_: cudaMemLocation, flags: u32, stream: cudaStream_t) -> cudaError_t {
        prefetch(devPtr, count, location_, flags, stream, false)
    }
}

export! {
    /// `cudaMemPrefetchAsync` with stream 0 as the per-thread stream.
    fn cudaMemPrefetchAsync_ptsz(devPtr: *const c_void, count: usize, location_: cudaMemLocation, flags: u32, stream: cudaStream_t) -> cudaError_t {
        prefetch(devPtr, count, location_, flags, stream, true)
    }
}

export! {
    /// `cudaMemAdvise` (13.0: a location).
    fn cudaMemAdvise(devPtr: *const c_void, count: usize, advice: i32, location_: cudaMemLocation) -> cudaError_t {
        code((|| {
            use sys::CUmem_advise as A;
            let adv = match advice {
                1 => A::CU_MEM_ADVISE_SET_READ_MOSTLY,
                2 => A::CU_MEM_ADVISE_UNSET_READ_MOSTLY,
                3 => A::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                4 => A::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
                5 => A::CU_MEM_ADVISE_SET_ACCESSED_BY,
                6 => A::CU_MEM_ADVISE_UNSET_ACCESSED_BY,
                _ => return Err(fail(ErrorCode::InvalidValue, "cudaMemAdvise")),
            };
            let l = location(location_, "cudaMemAdvise")?;
            let a = Entered::current()?;
            // SAFETY: the caller's managed range.
            a.check(unsafe { sys::cuMemAdvise_v2(dptr(devPtr), count, adv, l) }, "cuMemAdvise")
        })())
    }
}

export! {
    /// `cudaDeviceGetPCIBusId`.
    fn cudaDeviceGetPCIBusId(pciBusId: *mut std::ffi::c_char, len: i32, device: i32) -> cudaError_t {
        code((|| {
            if pciBusId.is_null() || len <= 0 {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceGetPCIBusId"));
            }
            let a = Entered::device(device)?;
            // SAFETY: the caller's buffer of `len` bytes; a valid device.
            a.check(unsafe { sys::cuDeviceGetPCIBusId(pciBusId, len, device) }, "cuDeviceGetPCIBusId")
        })())
    }
}

export! {
    /// `cudaDeviceGetByPCIBusId`.
    fn cudaDeviceGetByPCIBusId(device: *mut i32, pciBusId: *const std::ffi::c_char) -> cudaError_t {
        code((|| {
            let d = out(device, "cudaDeviceGetByPCIBusId")?;
            if pciBusId.is_null() {
                return Err(fail(ErrorCode::InvalidValue, "cudaDeviceGetByPCIBusId"));
            }
            let a = Entered::current()?;
            let mut dev: sys::CUdevice = 0;
            // SAFETY: valid out-parameter; the caller's NUL-terminated string.
            a.check(unsafe { sys::cuDeviceGetByPCIBusId(&mut dev, pciBusId) }, "cuDeviceGetByPCIBusId")?;
            *d = dev;
            Ok(())
        })())
    }
}
