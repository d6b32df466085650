//! `cudaFuncAttributes` (byte-identical to the 13.0 header, offsets checked below), function
//! attributes and occupancy of registered kernels.

use std::ffi::c_void;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode};
use sys::CUfunction_attribute as A;

use crate::register::kernel_of_func;
use crate::{code, cudaError_t, export, fail, out};

/// `struct cudaFuncAttributes` of CUDA 13.0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cudaFuncAttributes {
    /// `sharedSizeBytes`.
    pub sharedSizeBytes: usize,
    /// `constSizeBytes`.
    pub constSizeBytes: usize,
    /// `localSizeBytes`.
    pub localSizeBytes: usize,
    /// `maxThreadsPerBlock`.
    pub maxThreadsPerBlock: i32,
    /// `numRegs`.
    pub numRegs: i32,
    /// `ptxVersion`.
    pub ptxVersion: i32,
    /// `binaryVersion`.
    pub binaryVersion: i32,
    /// `cacheModeCA`.
    pub cacheModeCA: i32,
    /// `maxDynamicSharedSizeBytes`.
    pub maxDynamicSharedSizeBytes: i32,
    /// `preferredShmemCarveout`.
    pub preferredShmemCarveout: i32,
    /// `clusterDimMustBeSet`.
    pub clusterDimMustBeSet: i32,
    /// `requiredClusterWidth`.
    pub requiredClusterWidth: i32,
    /// `requiredClusterHeight`.
    pub requiredClusterHeight: i32,
    /// `requiredClusterDepth`.
    pub requiredClusterDepth: i32,
    /// `clusterSchedulingPolicyPreference`.
    pub clusterSchedulingPolicyPreference: i32,
    /// `nonPortableClusterSizeAllowed`.
    pub nonPortableClusterSizeAllowed: i32,
    /// `reserved`.
    pub reserved: [i32; 16],
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layout_is_the_headers() {
        assert_eq!(std::mem::size_of::<cudaFuncAttributes>(), 144);
        assert_eq!(offset_of!(cudaFuncAttributes, sharedSizeBytes), 0);
        assert_eq!(offset_of!(cudaFuncAttributes, constSizeBytes), 8);
        assert_eq!(offset_of!(cudaFuncAttributes, localSizeBytes), 16);
        assert_eq!(offset_of!(cudaFuncAttributes, maxThreadsPerBlock), 24);
        assert_eq!(offset_of!(cudaFuncAttributes, numRegs), 28);
        assert_eq!(offset_of!(cudaFuncAttributes, ptxVersion), 32);
        assert_eq!(offset_of!(cudaFuncAttributes, binaryVersion), 36);
        assert_eq!(offset_of!(cudaFuncAttributes, cacheModeCA), 40);
        assert_eq!(
            offset_of!(cudaFuncAttributes, maxDynamicSharedSizeBytes),
            44
        );
        assert_eq!(offset_of!(cudaFuncAttributes, preferredShmemCarveout), 48);
        assert_eq!(offset_of!(cudaFuncAttributes, clusterDimMustBeSet), 52);
        assert_eq!(offset_of!(cudaFuncAttributes, requiredClusterWidth), 56);
        assert_eq!(offset_of!(cudaFuncAttributes, requiredClusterHeight), 60);
        assert_eq!(offset_of!(cudaFuncAttributes, requiredClusterDepth), 64);
        assert_eq!(
            offset_of!(cudaFuncAttributes, clusterSchedulingPolicyPreference),
            68
        );
        assert_eq!(
            offset_of!(cudaFuncAttributes, nonPortableClusterSizeAllowed),
            72
        );
        assert_eq!(offset_of!(cudaFuncAttributes, reserved), 76);
    }
}
fn kernel_attr(a: &Entered, k: sys::CUkernel, attr: A) -> Result<i32, Error> {
    let mut v = 0i32;
    // SAFETY: valid out-parameter; a kernel handle of a loaded library; the entered device.
    a.check(
        unsafe { sys::cuKernelGetAttribute(&mut v, attr, k, a.ordinal()) },
        "cuKernelGetAttribute",
    )?;
    Ok(v)
}

export! {
    /// `cudaFuncGetAttributes` of a host stub or kernel handle, on the current device.
    fn cudaFuncGetAttributes(attr: *mut cudaFuncAttributes, func: *const c_void) -> cudaError_t {
        code((|| {
            let dst = out(attr, "cudaFuncGetAttributes")?;
            let k = kernel_of_func(func)?;
            let a = Entered::current()?;
            let g = |x| kernel_attr(&a, k, x);
            let size = |x| g(x).map(|v| v.max(0) as usize);
            *dst = cudaFuncAttributes {
                sharedSizeBytes: size(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
                constSizeBytes: size(A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
                localSizeBytes: size(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
                maxThreadsPerBlock: g(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
                numRegs: g(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
                ptxVersion: g(A::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
                binaryVersion: g(A::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
                cacheModeCA: g(A::CU_FUNC_ATTRIBUTE_CACHE_MODE_CA)?,
                maxDynamicSharedSizeBytes: g(A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
                preferredShmemCarveout: g(A::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)?,
                clusterDimMustBeSet: g(A::CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET)?,
                requiredClusterWidth: g(A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)?,
                requiredClusterHeight: g(A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)?,
                requiredClusterDepth: g(A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH)?,
                clusterSchedulingPolicyPreference: g(A::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)?,
                nonPortableClusterSizeAllowed: g(A::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)?,
                reserved: [0; 16],
            };
            Ok(())
        })())
    }
}

export! {
    /// `cudaFuncSetAttribute` (`cudaFuncAttribute` 8..=15, the driver's numbers), on the current
    /// device.
    fn cudaFuncSetAttribute(func: *const c_void, attr: i32, value: i32) -> cudaError_t {
        code((|| {
            let which = settable_attr(attr, "cudaFuncSetAttribute")?;
            let k = kernel_of_func(func)?;
            let a = Entered::current()?;
            // SAFETY: a kernel handle of a loaded library; the entered device.
            a.check(
                unsafe { sys::cuKernelSetAttribute(which, value, k, a.ordinal()) },
                "cuKernelSetAttribute",
            )
        })())
    }
}

/// The driver's attribute of a settable `cudaFuncAttribute` (8..=15: the same numbers).
pub(crate) fn settable_attr(attr: i32, call: &'static str) -> Result<A, Error> {
    Ok(match attr {
        8 => A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        9 => A::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        10 => A::CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET,
        11 => A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
        12 => A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
        13 => A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        14 => A::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
        15 => A::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        _ => return Err(fail(ErrorCode::InvalidValue, call)),
    })
}

export! {
    /// `cudaFuncSetCacheConfig` (`cudaFuncCache` 0..=3, the driver's), on the current device.
    fn cudaFuncSetCacheConfig(func: *const c_void, cacheConfig: i32) -> cudaError_t {
        code((|| {
            use sys::CUfunc_cache as C;
            let c = match cacheConfig {
                0 => C::CU_FUNC_CACHE_PREFER_NONE,
                1 => C::CU_FUNC_CACHE_PREFER_SHARED,
                2 => C::CU_FUNC_CACHE_PREFER_L1,
                3 => C::CU_FUNC_CACHE_PREFER_EQUAL,
                _ => return Err(fail(ErrorCode::InvalidValue, "cudaFuncSetCacheConfig")),
            };
            let k = kernel_of_func(func)?;
            let a = Entered::current()?;
            // SAFETY: as above.
            a.check(
                unsafe { sys::cuKernelSetCacheConfig(k, c, a.ordinal()) },
                "cuKernelSetCacheConfig",
            )
        })())
    }
}

fn occupancy(
    num_blocks: *mut i32,
    func: *const c_void,
    block_size: i32,
    dynamic_smem: usize,
    flags: u32,
) -> cudaError_t {
    code((|| {
        let dst = out(num_blocks, "cudaOccupancyMaxActiveBlocksPerMultiprocessor")?;
        if flags & !0x1 != 0 {
            return Err(fail(
                ErrorCode::InvalidValue,
                "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
            ));
        }
        let k = kernel_of_func(func)?;
        let a = Entered::current()?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        let mut n = 0i32;
        // SAFETY: valid out-parameters; the kernel's function in the current context.
        unsafe {
            a.check(sys::cuKernelGetFunction(&mut f, k), "cuKernelGetFunction")?;
            a.check(
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                    &mut n,
                    f,
                    block_size,
                    dynamic_smem,
                    flags,
                ),
                "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
            )?;
        }
        *dst = n;
        Ok(())
    })())
}

export! {
    /// `cudaOccupancyMaxActiveBlocksPerMultiprocessor`.
    fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks: *mut i32, func: *const c_void, blockSize: i32, dynamicSMemSize: usize) -> cudaError_t {
        occupancy(numBlocks, func, blockSize, dynamicSMemSize, 0)
    }
}

export! {
    /// `cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`.
    fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks: *mut i32, func: *const c_void, blockSize: i32, dynamicSMemSize: usize, flags: u32) -> cudaError_t {
        occupancy(numBlocks, func, blockSize, dynamicSMemSize, flags)
    }
}
