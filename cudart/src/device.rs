//! Devices: count, current device, synchronisation, reset, attributes, versions.
use cuda_runtime::abi::sys;
use cuda_runtime::{Device, DeviceAttribute, DeviceFlags, ErrorCode, Limit};

use crate::{code, driver, export, fail, out};

export! {
    /// `cudaGetDeviceCount`.
    fn cudaGetDeviceCount(count: *mut i32) -> cudaError_t {
        code(out(count, "cudaGetDeviceCount").and_then(|c| {
            *c = cuda_runtime::device_count()?;
            Ok(())
        }))
    }
}

export! {
    /// `cudaSetDevice`: the calling thread's current device.
    fn cudaSetDevice(device: i32) -> cudaError_t {
        code(cuda_runtime::set_device(device))
    }
}

export! {
    /// `cudaGetDevice`.
    fn cudaGetDevice(device: *mut i32) -> cudaError_t {
        code(out(device, "cudaGetDevice").and_then(|d| {
            *d = cuda_runtime::get_device()?;
            Ok(())
        }))
    }
}

export! {
    /// `cudaDeviceSynchronize`.
    fn cudaDeviceSynchronize() -> cudaError_t {
        code(cuda_runtime::device::synchronize())
    }
}

export! {
    /// `cudaDeviceReset`: destroys the current device's primary context.
    fn cudaDeviceReset() -> cudaError_t {
        code(cuda_runtime::device::reset())
    }
}

export! {
    /// `cudaDriverGetVersion` (0 without a driver, as libcudart).
    fn cudaDriverGetVersion(version: *mut i32) -> cudaError_t {
        code(out(version, "cudaDriverGetVersion").map(|v| *v = cuda_runtime::driver_version()))
    }
}

export! {
    /// `cudaRuntimeGetVersion`.
    fn cudaRuntimeGetVersion(version: *mut i32) -> cudaError_t {
        code(out(version, "cudaRuntimeGetVersion").map(|v| *v = cuda_runtime::runtime_version()))
    }
}

export! {
    /// `cudaDeviceGetAttribute` (the crate's attribute table; an unknown number is
    /// `cudaErrorInvalidValue`, as in libcudart).
    fn cudaDeviceGetAttribute(value: *mut i32, attr: i32, device: i32) -> cudaError_t {
        code((|| {
            let v = out(value, "cudaDeviceGetAttribute")?;
            let attr = u32::try_from(attr)
                .ok()
                .and_then(DeviceAttribute::from_number)
                .ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaDeviceGetAttribute"))?;
            *v = Device::new(device)?.attribute(attr)?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaMemGetInfo` (current device).
    fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> cudaError_t {
        let (mut f, mut t) = (0usize, 0usize);
        // SAFETY: valid out-parameters.
        let r = driver("cuMemGetInfo", || unsafe { sys::cuMemGetInfo_v2(&mut f, &mut t) });
        if r == 0 {
            // SAFETY: C callers pass writable pointers or null (skipped).
            unsafe {
                if let Some(p) = free.as_mut() {
                    *p = f;
                }
                if let Some(p) = total.as_mut() {
                    *p = t;
                }
            }
        }
        r
    }
}

export! {
    /// `cudaSetDeviceFlags` (the current device).
    fn cudaSetDeviceFlags(flags: u32) -> cudaError_t {
        code((|| {
            let f = DeviceFlags::from_bits(flags)
                .ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaSetDeviceFlags"))?;
            Device::current()?.set_flags(f)
        })())
    }
}

export! {
    /// `cudaGetDeviceFlags` (the current device).
    fn cudaGetDeviceFlags(flags: *mut u32) -> cudaError_t {
        code((|| {
            let p = out(flags, "cudaGetDeviceFlags")?;
            *p = Device::current()?.flags()?.bits();
            Ok(())
        })())
    }
}

/// `cudaLimit` numbers.
fn limit(n: i32) -> Result<Limit, cuda_runtime::Error> {
    Ok(match n {
        0 => Limit::StackSize,
        1 => Limit::PrintfFifoSize,
        2 => Limit::MallocHeapSize,
        3 => Limit::DevRuntimeSyncDepth,
        4 => Limit::DevRuntimePendingLaunchCount,
        5 => Limit::MaxL2FetchGranularity,
        6 => Limit::PersistingL2CacheSize,
        _ => return Err(fail(ErrorCode::UnsupportedLimit, "cudaDeviceSetLimit")),
    })
}

export! {
    /// `cudaDeviceSetLimit` (the current device).
    fn cudaDeviceSetLimit(lim: i32, value: usize) -> cudaError_t {
        code((|| Device::current()?.set_limit(limit(lim)?, value))())
    }
}

export! {
    /// `cudaDeviceGetLimit` (the current device).
    fn cudaDeviceGetLimit(pValue: *mut usize, lim: i32) -> cudaError_t {
        code((|| {
            let p = out(pValue, "cudaDeviceGetLimit")?;
            *p = Device::current()?.limit(limit(lim)?)?;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceGetStreamPriorityRange` (the current device).
    fn cudaDeviceGetStreamPriorityRange(leastPriority: *mut i32, greatestPriority: *mut i32) -> cudaError_t {
        code((|| {
            let (least, greatest) = Device::current()?.stream_priority_range()?;
            // SAFETY: C callers pass writable pointers or null (skipped).
            unsafe {
                if let Some(p) = leastPriority.as_mut() {
                    *p = least;
                }
                if let Some(p) = greatestPriority.as_mut() {
                    *p = greatest;
                }
            }
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceCanAccessPeer`.
    fn cudaDeviceCanAccessPeer(canAccessPeer: *mut i32, device: i32, peerDevice: i32) -> cudaError_t {
        code((|| {
            let p = out(canAccessPeer, "cudaDeviceCanAccessPeer")?;
            *p = Device::new(device)?.can_access_peer(Device::new(peerDevice)?)? as i32;
            Ok(())
        })())
    }
}

export! {
    /// `cudaDeviceEnablePeerAccess` (from the current device; flags must be 0).
    fn cudaDeviceEnablePeerAccess(peerDevice: i32, flags: u32) -> cudaError_t {
        if flags != 0 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaDeviceEnablePeerAccess")));
        }
        code((|| Device::current()?.enable_peer_access(Device::new(peerDevice)?))())
    }
}

export! {
    /// `cudaDeviceDisablePeerAccess`.
    fn cudaDeviceDisablePeerAccess(peerDevice: i32) -> cudaError_t {
        code((|| Device::current()?.disable_peer_access(Device::new(peerDevice)?))())
    }
}

export! {
    /// `cudaProfilerStart`.
    fn cudaProfilerStart() -> cudaError_t {
        // SAFETY: no arguments; context current.
        driver("cuProfilerStart", || unsafe { sys::cuProfilerStart() })
    }
}

export! {
    /// `cudaProfilerStop`.
    fn cudaProfilerStop() -> cudaError_t {
        // SAFETY: as above.
        driver("cuProfilerStop", || unsafe { sys::cuProfilerStop() })
    }
}
