//! Devices: count, current device, synchronisation, reset, attributes, versions.
use cuda_runtime::abi::sys;
use cuda_runtime::{Device, DeviceAttribute, ErrorCode};

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
