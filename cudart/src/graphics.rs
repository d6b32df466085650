//! Graphics interop: the generic resource calls (map, unmap, mapped pointer / array / mipmapped
//! array, map flags, unregister), OpenGL, VDPAU and the simpler EGL calls, and NvSciSync
//! attributes. The driver's interop entry points are not in the crate's bindings; they are
//! looked up once by name through `cuGetProcAddress` for CUDA 13.0 (the driver's own loader),
//! and a name the driver lacks gives `cudaErrorNotSupported`.
use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::ErrorCode;

use crate::interop::cudaMipmappedArray_t;
use crate::texture::cudaArray_t;
use crate::{code, cudaError_t, cudaEvent_t, cudaStream_t, driver, export, fail, out, stream_of};

/// `cudaGraphicsResource_t`.
pub type cudaGraphicsResource_t = sys::CUgraphicsResource;

/// A driver entry point by name, looked up once (`None` when the driver has none).
fn entry(name: &CStr, slot: &'static OnceLock<usize>) -> Option<usize> {
    let p = *slot.get_or_init(|| {
        let mut f: *mut c_void = std::ptr::null_mut();
        let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
        // SAFETY: a NUL-terminated name and valid out-parameters; the lookup needs no context.
        let r = unsafe { sys::cuGetProcAddress_v2(name.as_ptr(), &mut f, 13000, 0, &mut status) };
        if r == sys::CUresult::CUDA_SUCCESS && !f.is_null() {
            f as usize
        } else {
            0
        }
    });
    (p != 0).then_some(p)
}

/// Calls a driver interop function of the given C signature, in the current context; a missing
/// entry point is `cudaErrorNotSupported` for `$call`.
macro_rules! interop {
    ($call:literal, $name:literal, fn($($t:ty),*), ($($a:expr),*)) => {{
        static SLOT: OnceLock<usize> = OnceLock::new();
        match entry($name, &SLOT) {
            None => code(Err(fail(ErrorCode::NotSupported, $call))),
            Some(p) => {
                // SAFETY: the driver's entry point of that name for CUDA 13.0 has this C
                // signature (cudaGL.h, cudaVDPAU.h, cudaEGL.h, cuda.h of 13.0).
                let f: unsafe extern "C" fn($($t),*) -> sys::CUresult = unsafe { std::mem::transmute(p) };
                // SAFETY: the caller's arguments, as the runtime call documents them.
                driver($call, || unsafe { f($($a),*) })
            }
        }
    }};
}

// ---- Generic resource calls --------------------------------------------------------------------

export! {
    /// `cudaGraphicsMapResources`.
    fn cudaGraphicsMapResources(count: i32, resources: *mut cudaGraphicsResource_t, stream: cudaStream_t) -> cudaError_t {
        if count < 0 || (count > 0 && resources.is_null()) {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphicsMapResources")));
        }
        // SAFETY: `count` registered resources of the caller and its stream.
        driver("cuGraphicsMapResources", || unsafe { sys::cuGraphicsMapResources(count as u32, resources, stream_of(stream, false)) })
    }
}

export! {
    /// `cudaGraphicsUnmapResources`.
    fn cudaGraphicsUnmapResources(count: i32, resources: *mut cudaGraphicsResource_t, stream: cudaStream_t) -> cudaError_t {
        if count < 0 || (count > 0 && resources.is_null()) {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphicsUnmapResources")));
        }
        // SAFETY: as above.
        driver("cuGraphicsUnmapResources", || unsafe { sys::cuGraphicsUnmapResources(count as u32, resources, stream_of(stream, false)) })
    }
}

export! {
    /// `cudaGraphicsResourceGetMappedPointer`.
    fn cudaGraphicsResourceGetMappedPointer(devPtr: *mut *mut c_void, size: *mut usize, resource: cudaGraphicsResource_t) -> cudaError_t {
        code((|| {
            let o = out(devPtr, "cudaGraphicsResourceGetMappedPointer")?;
            let a = Entered::current()?;
            let (mut p, mut n): (sys::CUdeviceptr, usize) = (0, 0);
            // SAFETY: valid out-parameters; the caller's mapped resource.
            a.check(unsafe { sys::cuGraphicsResourceGetMappedPointer_v2(&mut p, &mut n, resource) }, "cuGraphicsResourceGetMappedPointer")?;
            *o = p as usize as *mut c_void;
            // SAFETY: an optional writable size.
            if let Some(s) = unsafe { size.as_mut() } {
                *s = n;
            }
            Ok(())
        })())
    }
}

export! {
    /// `cudaGraphicsSubResourceGetMappedArray`.
    fn cudaGraphicsSubResourceGetMappedArray(array: *mut cudaArray_t, resource: cudaGraphicsResource_t, arrayIndex: u32, mipLevel: u32) -> cudaError_t {
        if array.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphicsSubResourceGetMappedArray")));
        }
        // SAFETY: valid out-parameter; the caller's mapped resource.
        driver("cuGraphicsSubResourceGetMappedArray", || unsafe { sys::cuGraphicsSubResourceGetMappedArray(array, resource, arrayIndex, mipLevel) })
    }
}

export! {
    /// `cudaGraphicsResourceGetMappedMipmappedArray`.
    fn cudaGraphicsResourceGetMappedMipmappedArray(mipmappedArray: *mut cudaMipmappedArray_t, resource: cudaGraphicsResource_t) -> cudaError_t {
        if mipmappedArray.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphicsResourceGetMappedMipmappedArray")));
        }
        // SAFETY: valid out-parameter; the caller's mapped resource.
        driver("cuGraphicsResourceGetMappedMipmappedArray", || unsafe { sys::cuGraphicsResourceGetMappedMipmappedArray(mipmappedArray, resource) })
    }
}

export! {
    /// `cudaGraphicsResourceSetMapFlags` (none 0, read-only 1, write-discard 2).
    fn cudaGraphicsResourceSetMapFlags(resource: cudaGraphicsResource_t, flags: u32) -> cudaError_t {
        // A null resource is refused first, as libcudart does (seen on the GPU).
        if resource.is_null() {
            return code(Err(fail(ErrorCode::InvalidResourceHandle, "cudaGraphicsResourceSetMapFlags")));
        }
        if flags > 2 {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGraphicsResourceSetMapFlags")));
        }
        // SAFETY: the caller's registered resource.
        driver("cuGraphicsResourceSetMapFlags", || unsafe { sys::cuGraphicsResourceSetMapFlags_v2(resource, flags) })
    }
}

export! {
    /// `cudaGraphicsUnregisterResource`.
    fn cudaGraphicsUnregisterResource(resource: cudaGraphicsResource_t) -> cudaError_t {
        // SAFETY: the caller's registered resource.
        driver("cuGraphicsUnregisterResource", || unsafe { sys::cuGraphicsUnregisterResource(resource) })
    }
}

// ---- OpenGL ------------------------------------------------------------------------------------

export! {
    /// `cudaGraphicsGLRegisterBuffer`.
    fn cudaGraphicsGLRegisterBuffer(resource: *mut cudaGraphicsResource_t, buffer: u32, flags: u32) -> cudaError_t {
        interop!("cudaGraphicsGLRegisterBuffer", c"cuGraphicsGLRegisterBuffer", fn(*mut cudaGraphicsResource_t, u32, u32), (resource, buffer, flags))
    }
}

export! {
    /// `cudaGraphicsGLRegisterImage`.
    fn cudaGraphicsGLRegisterImage(resource: *mut cudaGraphicsResource_t, image: u32, target: u32, flags: u32) -> cudaError_t {
        interop!("cudaGraphicsGLRegisterImage", c"cuGraphicsGLRegisterImage", fn(*mut cudaGraphicsResource_t, u32, u32, u32), (resource, image, target, flags))
    }
}

export! {
    /// `cudaGLGetDevices` (device ordinals are the driver's).
    fn cudaGLGetDevices(pCudaDeviceCount: *mut u32, pCudaDevices: *mut i32, cudaDeviceCount: u32, deviceList: i32) -> cudaError_t {
        if !(1..=3).contains(&deviceList) {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaGLGetDevices")));
        }
        interop!("cudaGLGetDevices", c"cuGLGetDevices", fn(*mut u32, *mut i32, u32, i32), (pCudaDeviceCount, pCudaDevices, cudaDeviceCount, deviceList))
    }
}

export! {
    /// `cudaGLSetGLDevice` (deprecated): makes `device` current, as the runtime does.
    fn cudaGLSetGLDevice(device: i32) -> cudaError_t {
        code(cuda_runtime::set_device(device))
    }
}

export! {
    /// `cudaGLRegisterBufferObject` (deprecated).
    fn cudaGLRegisterBufferObject(bufObj: u32) -> cudaError_t {
        interop!("cudaGLRegisterBufferObject", c"cuGLRegisterBufferObject", fn(u32), (bufObj))
    }
}

export! {
    /// `cudaGLUnregisterBufferObject` (deprecated).
    fn cudaGLUnregisterBufferObject(bufObj: u32) -> cudaError_t {
        interop!("cudaGLUnregisterBufferObject", c"cuGLUnregisterBufferObject", fn(u32), (bufObj))
    }
}

export! {
    /// `cudaGLSetBufferObjectMapFlags` (deprecated).
    fn cudaGLSetBufferObjectMapFlags(bufObj: u32, flags: u32) -> cudaError_t {
        interop!("cudaGLSetBufferObjectMapFlags", c"cuGLSetBufferObjectMapFlags", fn(u32, u32), (bufObj, flags))
    }
}

fn gl_map(dev_ptr: *mut *mut c_void, buf: u32, stream: Option<cudaStream_t>) -> cudaError_t {
    let Ok(o) = out(dev_ptr, "cudaGLMapBufferObject") else {
        return code(Err(fail(ErrorCode::InvalidValue, "cudaGLMapBufferObject")));
    };
    let (mut p, mut n): (sys::CUdeviceptr, usize) = (0, 0);
    let (pp, pn) = (&mut p as *mut sys::CUdeviceptr, &mut n as *mut usize);
    let r = match stream {
        None => interop!(
            "cudaGLMapBufferObject",
            c"cuGLMapBufferObject",
            fn(*mut sys::CUdeviceptr, *mut usize, u32),
            (pp, pn, buf)
        ),
        Some(s) => interop!(
            "cudaGLMapBufferObjectAsync",
            c"cuGLMapBufferObjectAsync",
            fn(*mut sys::CUdeviceptr, *mut usize, u32, sys::CUstream),
            (pp, pn, buf, stream_of(s, false))
        ),
    };
    if r == 0 {
        *o = p as usize as *mut c_void;
    }
    r
}

export! {
    /// `cudaGLMapBufferObject` (deprecated).
    fn cudaGLMapBufferObject(devPtr: *mut *mut c_void, bufObj: u32) -> cudaError_t {
        gl_map(devPtr, bufObj, None)
    }
}

export! {
    /// `cudaGLMapBufferObjectAsync` (deprecated).
    fn cudaGLMapBufferObjectAsync(devPtr: *mut *mut c_void, bufObj: u32, stream: cudaStream_t) -> cudaError_t {
        gl_map(devPtr, bufObj, Some(stream))
    }
}

export! {
    /// `cudaGLUnmapBufferObject` (deprecated).
    fn cudaGLUnmapBufferObject(bufObj: u32) -> cudaError_t {
        interop!("cudaGLUnmapBufferObject", c"cuGLUnmapBufferObject", fn(u32), (bufObj))
    }
}

export! {
    /// `cudaGLUnmapBufferObjectAsync` (deprecated).
    fn cudaGLUnmapBufferObjectAsync(bufObj: u32, stream: cudaStream_t) -> cudaError_t {
        interop!("cudaGLUnmapBufferObjectAsync", c"cuGLUnmapBufferObjectAsync", fn(u32, sys::CUstream), (bufObj, stream_of(stream, false)))
    }
}

// ---- VDPAU -------------------------------------------------------------------------------------

export! {
    /// `cudaVDPAUGetDevice`.
    fn cudaVDPAUGetDevice(device: *mut i32, vdpDevice: u32, vdpGetProcAddress: *mut c_void) -> cudaError_t {
        if device.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaVDPAUGetDevice")));
        }
        interop!("cudaVDPAUGetDevice", c"cuVDPAUGetDevice", fn(*mut i32, u32, *mut c_void), (device, vdpDevice, vdpGetProcAddress))
    }
}

export! {
    /// `cudaVDPAUSetVDPAUDevice`: makes `device` current (the runtime's primary context serves
    /// VDPAU interop on every supported driver).
    fn cudaVDPAUSetVDPAUDevice(device: i32, _vdpDevice: u32, _vdpGetProcAddress: *mut c_void) -> cudaError_t {
        code(cuda_runtime::set_device(device))
    }
}

export! {
    /// `cudaGraphicsVDPAURegisterVideoSurface`.
    fn cudaGraphicsVDPAURegisterVideoSurface(resource: *mut cudaGraphicsResource_t, vdpSurface: u32, flags: u32) -> cudaError_t {
        interop!("cudaGraphicsVDPAURegisterVideoSurface", c"cuGraphicsVDPAURegisterVideoSurface", fn(*mut cudaGraphicsResource_t, u32, u32), (resource, vdpSurface, flags))
    }
}

export! {
    /// `cudaGraphicsVDPAURegisterOutputSurface`.
    fn cudaGraphicsVDPAURegisterOutputSurface(resource: *mut cudaGraphicsResource_t, vdpSurface: u32, flags: u32) -> cudaError_t {
        interop!("cudaGraphicsVDPAURegisterOutputSurface", c"cuGraphicsVDPAURegisterOutputSurface", fn(*mut cudaGraphicsResource_t, u32, u32), (resource, vdpSurface, flags))
    }
}

// ---- EGL (connections, images, sync objects) ---------------------------------------------------

export! {
    /// `cudaGraphicsEGLRegisterImage`.
    fn cudaGraphicsEGLRegisterImage(pCudaResource: *mut cudaGraphicsResource_t, image: *mut c_void, flags: u32) -> cudaError_t {
        interop!("cudaGraphicsEGLRegisterImage", c"cuGraphicsEGLRegisterImage", fn(*mut cudaGraphicsResource_t, *mut c_void, u32), (pCudaResource, image, flags))
    }
}

export! {
    /// `cudaEGLStreamConsumerConnect`.
    fn cudaEGLStreamConsumerConnect(conn: *mut c_void, eglStream: *mut c_void) -> cudaError_t {
        interop!("cudaEGLStreamConsumerConnect", c"cuEGLStreamConsumerConnect", fn(*mut c_void, *mut c_void), (conn, eglStream))
    }
}

export! {
    /// `cudaEGLStreamConsumerConnectWithFlags`.
    fn cudaEGLStreamConsumerConnectWithFlags(conn: *mut c_void, eglStream: *mut c_void, flags: u32) -> cudaError_t {
        interop!("cudaEGLStreamConsumerConnectWithFlags", c"cuEGLStreamConsumerConnectWithFlags", fn(*mut c_void, *mut c_void, u32), (conn, eglStream, flags))
    }
}

export! {
    /// `cudaEGLStreamConsumerDisconnect`.
    fn cudaEGLStreamConsumerDisconnect(conn: *mut c_void) -> cudaError_t {
        interop!("cudaEGLStreamConsumerDisconnect", c"cuEGLStreamConsumerDisconnect", fn(*mut c_void), (conn))
    }
}

export! {
    /// `cudaEGLStreamProducerConnect` (width and height by value, as the driver's).
    fn cudaEGLStreamProducerConnect(conn: *mut c_void, eglStream: *mut c_void, width: i32, height: i32) -> cudaError_t {
        interop!("cudaEGLStreamProducerConnect", c"cuEGLStreamProducerConnect", fn(*mut c_void, *mut c_void, i32, i32), (conn, eglStream, width, height))
    }
}

export! {
    /// `cudaEGLStreamProducerDisconnect`.
    fn cudaEGLStreamProducerDisconnect(conn: *mut c_void) -> cudaError_t {
        interop!("cudaEGLStreamProducerDisconnect", c"cuEGLStreamProducerDisconnect", fn(*mut c_void), (conn))
    }
}

export! {
    /// `cudaEGLStreamConsumerReleaseFrame` (the resource and stream pointer are passed through).
    fn cudaEGLStreamConsumerReleaseFrame(conn: *mut c_void, pCudaResource: cudaGraphicsResource_t, pStream: *mut cudaStream_t) -> cudaError_t {
        interop!("cudaEGLStreamConsumerReleaseFrame", c"cuEGLStreamConsumerReleaseFrame", fn(*mut c_void, cudaGraphicsResource_t, *mut cudaStream_t), (conn, pCudaResource, pStream))
    }
}

export! {
    /// `cudaEGLStreamConsumerAcquireFrame`.
    fn cudaEGLStreamConsumerAcquireFrame(conn: *mut c_void, pCudaResource: *mut cudaGraphicsResource_t, pStream: *mut cudaStream_t, timeout: u32) -> cudaError_t {
        interop!("cudaEGLStreamConsumerAcquireFrame", c"cuEGLStreamConsumerAcquireFrame", fn(*mut c_void, *mut cudaGraphicsResource_t, *mut cudaStream_t, u32), (conn, pCudaResource, pStream, timeout))
    }
}

export! {
    /// `cudaEventCreateFromEGLSync`.
    fn cudaEventCreateFromEGLSync(phEvent: *mut cudaEvent_t, eglSync: *mut c_void, flags: u32) -> cudaError_t {
        interop!("cudaEventCreateFromEGLSync", c"cuEventCreateFromEGLSync", fn(*mut cudaEvent_t, *mut c_void, u32), (phEvent, eglSync, flags))
    }
}

// ---- NvSciSync ---------------------------------------------------------------------------------

export! {
    /// `cudaDeviceGetNvSciSyncAttributes`.
    fn cudaDeviceGetNvSciSyncAttributes(nvSciSyncAttrList: *mut c_void, device: i32, flags: i32) -> cudaError_t {
        if nvSciSyncAttrList.is_null() {
            return code(Err(fail(ErrorCode::InvalidValue, "cudaDeviceGetNvSciSyncAttributes")));
        }
        interop!("cudaDeviceGetNvSciSyncAttributes", c"cuDeviceGetNvSciSyncAttributes", fn(*mut c_void, i32, i32), (nvSciSyncAttrList, device, flags))
    }
}
