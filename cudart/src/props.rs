//! `cudaDeviceProp`, byte-identical to the CUDA 13.0 header (generated from `driver_types.h`;
//! offsets checked by the test below, measured with gcc on that header), and
//! `cudaGetDeviceProperties` filled from the crate's `Device::properties`.
use std::ffi::c_char;

use cuda_runtime::{Device, DeviceProperties};

use crate::{code, export, out};

/// `struct cudaDeviceProp` of CUDA 13.0 (1,008 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaDeviceProp {
    /// `name`.
    pub name: [c_char; 256],
    /// `uuid`.
    pub uuid: [u8; 16],
    /// `luid`.
    pub luid: [c_char; 8],
    /// `luidDeviceNodeMask`.
    pub luidDeviceNodeMask: u32,
    /// `totalGlobalMem`.
    pub totalGlobalMem: usize,
    /// `sharedMemPerBlock`.
    pub sharedMemPerBlock: usize,
    /// `regsPerBlock`.
    pub regsPerBlock: i32,
    /// `warpSize`.
    pub warpSize: i32,
    /// `memPitch`.
    pub memPitch: usize,
    /// `maxThreadsPerBlock`.
    pub maxThreadsPerBlock: i32,
    /// `maxThreadsDim`.
    pub maxThreadsDim: [i32; 3],
    /// `maxGridSize`.
    pub maxGridSize: [i32; 3],
    /// `totalConstMem`.
    pub totalConstMem: usize,
    /// `major`.
    pub major: i32,
    /// `minor`.
    pub minor: i32,
    /// `textureAlignment`.
    pub textureAlignment: usize,
    /// `texturePitchAlignment`.
    pub texturePitchAlignment: usize,
    /// `multiProcessorCount`.
    pub multiProcessorCount: i32,
    /// `integrated`.
    pub integrated: i32,
    /// `canMapHostMemory`.
    pub canMapHostMemory: i32,
    /// `maxTexture1D`.
    pub maxTexture1D: i32,
    /// `maxTexture1DMipmap`.
    pub maxTexture1DMipmap: i32,
    /// `maxTexture2D`.
    pub maxTexture2D: [i32; 2],
    /// `maxTexture2DMipmap`.
    pub maxTexture2DMipmap: [i32; 2],
    /// `maxTexture2DLinear`.
    pub maxTexture2DLinear: [i32; 3],
    /// `maxTexture2DGather`.
    pub maxTexture2DGather: [i32; 2],
    /// `maxTexture3D`.
    pub maxTexture3D: [i32; 3],
    /// `maxTexture3DAlt`.
    pub maxTexture3DAlt: [i32; 3],
    /// `maxTextureCubemap`.
    pub maxTextureCubemap: i32,
    /// `maxTexture1DLayered`.
    pub maxTexture1DLayered: [i32; 2],
    /// `maxTexture2DLayered`.
    pub maxTexture2DLayered: [i32; 3],
    /// `maxTextureCubemapLayered`.
    pub maxTextureCubemapLayered: [i32; 2],
    /// `maxSurface1D`.
    pub maxSurface1D: i32,
    /// `maxSurface2D`.
    pub maxSurface2D: [i32; 2],
    /// `maxSurface3D`.
    pub maxSurface3D: [i32; 3],
    /// `maxSurface1DLayered`.
    pub maxSurface1DLayered: [i32; 2],
    /// `maxSurface2DLayered`.
    pub maxSurface2DLayered: [i32; 3],
    /// `maxSurfaceCubemap`.
    pub maxSurfaceCubemap: i32,
    /// `maxSurfaceCubemapLayered`.
    pub maxSurfaceCubemapLayered: [i32; 2],
    /// `surfaceAlignment`.
    pub surfaceAlignment: usize,
    /// `concurrentKernels`.
    pub concurrentKernels: i32,
    /// `ECCEnabled`.
    pub ECCEnabled: i32,
    /// `pciBusID`.
    pub pciBusID: i32,
    /// `pciDeviceID`.
    pub pciDeviceID: i32,
    /// `pciDomainID`.
    pub pciDomainID: i32,
    /// `tccDriver`.
    pub tccDriver: i32,
    /// `asyncEngineCount`.
    pub asyncEngineCount: i32,
    /// `unifiedAddressing`.
    pub unifiedAddressing: i32,
    /// `memoryBusWidth`.
    pub memoryBusWidth: i32,
    /// `l2CacheSize`.
    pub l2CacheSize: i32,
    /// `persistingL2CacheMaxSize`.
    pub persistingL2CacheMaxSize: i32,
    /// `maxThreadsPerMultiProcessor`.
    pub maxThreadsPerMultiProcessor: i32,
    /// `streamPrioritiesSupported`.
    pub streamPrioritiesSupported: i32,
    /// `globalL1CacheSupported`.
    pub globalL1CacheSupported: i32,
    /// `localL1CacheSupported`.
    pub localL1CacheSupported: i32,
    /// `sharedMemPerMultiprocessor`.
    pub sharedMemPerMultiprocessor: usize,
    /// `regsPerMultiprocessor`.
    pub regsPerMultiprocessor: i32,
    /// `managedMemory`.
    pub managedMemory: i32,
    /// `isMultiGpuBoard`.
    pub isMultiGpuBoard: i32,
    /// `multiGpuBoardGroupID`.
    pub multiGpuBoardGroupID: i32,
    /// `hostNativeAtomicSupported`.
    pub hostNativeAtomicSupported: i32,
    /// `pageableMemoryAccess`.
    pub pageableMemoryAccess: i32,
    /// `concurrentManagedAccess`.
    pub concurrentManagedAccess: i32,
    /// `computePreemptionSupported`.
    pub computePreemptionSupported: i32,
    /// `canUseHostPointerForRegisteredMem`.
    pub canUseHostPointerForRegisteredMem: i32,
    /// `cooperativeLaunch`.
    pub cooperativeLaunch: i32,
    /// `sharedMemPerBlockOptin`.
    pub sharedMemPerBlockOptin: usize,
    /// `pageableMemoryAccessUsesHostPageTables`.
    pub pageableMemoryAccessUsesHostPageTables: i32,
    /// `directManagedMemAccessFromHost`.
    pub directManagedMemAccessFromHost: i32,
    /// `maxBlocksPerMultiProcessor`.
    pub maxBlocksPerMultiProcessor: i32,
    /// `accessPolicyMaxWindowSize`.
    pub accessPolicyMaxWindowSize: i32,
    /// `reservedSharedMemPerBlock`.
    pub reservedSharedMemPerBlock: usize,
    /// `hostRegisterSupported`.
    pub hostRegisterSupported: i32,
    /// `sparseCudaArraySupported`.
    pub sparseCudaArraySupported: i32,
    /// `hostRegisterReadOnlySupported`.
    pub hostRegisterReadOnlySupported: i32,
    /// `timelineSemaphoreInteropSupported`.
    pub timelineSemaphoreInteropSupported: i32,
    /// `memoryPoolsSupported`.
    pub memoryPoolsSupported: i32,
    /// `gpuDirectRDMASupported`.
    pub gpuDirectRDMASupported: i32,
    /// `gpuDirectRDMAFlushWritesOptions`.
    pub gpuDirectRDMAFlushWritesOptions: u32,
    /// `gpuDirectRDMAWritesOrdering`.
    pub gpuDirectRDMAWritesOrdering: i32,
    /// `memoryPoolSupportedHandleTypes`.
    pub memoryPoolSupportedHandleTypes: u32,
    /// `deferredMappingCudaArraySupported`.
    pub deferredMappingCudaArraySupported: i32,
    /// `ipcEventSupported`.
    pub ipcEventSupported: i32,
    /// `clusterLaunch`.
    pub clusterLaunch: i32,
    /// `unifiedFunctionPointers`.
    pub unifiedFunctionPointers: i32,
    /// `deviceNumaConfig`.
    pub deviceNumaConfig: i32,
    /// `deviceNumaId`.
    pub deviceNumaId: i32,
    /// `mpsEnabled`.
    pub mpsEnabled: i32,
    /// `hostNumaId`.
    pub hostNumaId: i32,
    /// `gpuPciDeviceID`.
    pub gpuPciDeviceID: u32,
    /// `gpuPciSubsystemID`.
    pub gpuPciSubsystemID: u32,
    /// `hostNumaMultinodeIpcSupported`.
    pub hostNumaMultinodeIpcSupported: i32,
    /// `reserved`.
    pub reserved: [i32; 56],
}

/// Copies the crate's properties into the C layout.
fn to_c(p: &DeviceProperties) -> cudaDeviceProp {
    // SAFETY: every field is an integer or an array of integers: all zeros is valid.
    let mut c: cudaDeviceProp = unsafe { std::mem::zeroed() };
    for (d, s) in c.name.iter_mut().take(255).zip(p.name.bytes()) {
        *d = s as c_char;
    }
    c.uuid = p.uuid;
    for (d, s) in c.luid.iter_mut().zip(p.luid) {
        *d = s as c_char;
    }
    c.luidDeviceNodeMask = p.luid_device_node_mask;
    c.totalGlobalMem = p.total_global_mem;
    c.sharedMemPerBlock = p.shared_mem_per_block;
    c.regsPerBlock = p.regs_per_block;
    c.warpSize = p.warp_size;
    c.memPitch = p.mem_pitch;
    c.maxThreadsPerBlock = p.max_threads_per_block;
    c.maxThreadsDim = p.max_threads_dim;
    c.maxGridSize = p.max_grid_size;
    c.totalConstMem = p.total_const_mem;
    c.major = p.major;
    c.minor = p.minor;
    c.textureAlignment = p.texture_alignment;
    c.texturePitchAlignment = p.texture_pitch_alignment;
    c.multiProcessorCount = p.multi_processor_count;
    c.integrated = p.integrated as i32;
    c.canMapHostMemory = p.can_map_host_memory as i32;
    c.maxTexture1D = p.max_texture_1d;
    c.maxTexture1DMipmap = p.max_texture_1d_mipmap;
    c.maxTexture2D = p.max_texture_2d;
    c.maxTexture2DMipmap = p.max_texture_2d_mipmap;
    c.maxTexture2DLinear = p.max_texture_2d_linear;
    c.maxTexture2DGather = p.max_texture_2d_gather;
    c.maxTexture3D = p.max_texture_3d;
    c.maxTexture3DAlt = p.max_texture_3d_alt;
    c.maxTextureCubemap = p.max_texture_cubemap;
    c.maxTexture1DLayered = p.max_texture_1d_layered;
    c.maxTexture2DLayered = p.max_texture_2d_layered;
    c.maxTextureCubemapLayered = p.max_texture_cubemap_layered;
    c.maxSurface1D = p.max_surface_1d;
    c.maxSurface2D = p.max_surface_2d;
    c.maxSurface3D = p.max_surface_3d;
    c.maxSurface1DLayered = p.max_surface_1d_layered;
    c.maxSurface2DLayered = p.max_surface_2d_layered;
    c.maxSurfaceCubemap = p.max_surface_cubemap;
    c.maxSurfaceCubemapLayered = p.max_surface_cubemap_layered;
    c.surfaceAlignment = p.surface_alignment;
    c.concurrentKernels = p.concurrent_kernels as i32;
    c.ECCEnabled = p.ecc_enabled as i32;
    c.pciBusID = p.pci_bus_id;
    c.pciDeviceID = p.pci_device_id;
    c.pciDomainID = p.pci_domain_id;
    c.tccDriver = p.tcc_driver as i32;
    c.asyncEngineCount = p.async_engine_count;
    c.unifiedAddressing = p.unified_addressing as i32;
    c.memoryBusWidth = p.memory_bus_width;
    c.l2CacheSize = p.l2_cache_size;
    c.persistingL2CacheMaxSize = p.persisting_l2_cache_max_size;
    c.maxThreadsPerMultiProcessor = p.max_threads_per_multi_processor;
    c.streamPrioritiesSupported = p.stream_priorities_supported as i32;
    c.globalL1CacheSupported = p.global_l1_cache_supported as i32;
    c.localL1CacheSupported = p.local_l1_cache_supported as i32;
    c.sharedMemPerMultiprocessor = p.shared_mem_per_multiprocessor;
    c.regsPerMultiprocessor = p.regs_per_multiprocessor;
    c.managedMemory = p.managed_memory as i32;
    c.isMultiGpuBoard = p.is_multi_gpu_board as i32;
    c.multiGpuBoardGroupID = p.multi_gpu_board_group_id;
    c.hostNativeAtomicSupported = p.host_native_atomic_supported as i32;
    c.pageableMemoryAccess = p.pageable_memory_access as i32;
    c.concurrentManagedAccess = p.concurrent_managed_access as i32;
    c.computePreemptionSupported = p.compute_preemption_supported as i32;
    c.canUseHostPointerForRegisteredMem = p.can_use_host_pointer_for_registered_mem as i32;
    c.cooperativeLaunch = p.cooperative_launch as i32;
    c.sharedMemPerBlockOptin = p.shared_mem_per_block_optin;
    c.pageableMemoryAccessUsesHostPageTables =
        p.pageable_memory_access_uses_host_page_tables as i32;
    c.directManagedMemAccessFromHost = p.direct_managed_mem_access_from_host as i32;
    c.maxBlocksPerMultiProcessor = p.max_blocks_per_multi_processor;
    c.accessPolicyMaxWindowSize = p.access_policy_max_window_size;
    c.reservedSharedMemPerBlock = p.reserved_shared_mem_per_block;
    c.hostRegisterSupported = p.host_register_supported as i32;
    c.sparseCudaArraySupported = p.sparse_cuda_array_supported as i32;
    c.hostRegisterReadOnlySupported = p.host_register_read_only_supported as i32;
    c.timelineSemaphoreInteropSupported = p.timeline_semaphore_interop_supported as i32;
    c.memoryPoolsSupported = p.memory_pools_supported as i32;
    c.gpuDirectRDMASupported = p.gpu_direct_rdma_supported as i32;
    c.gpuDirectRDMAFlushWritesOptions = p.gpu_direct_rdma_flush_writes_options;
    c.gpuDirectRDMAWritesOrdering = p.gpu_direct_rdma_writes_ordering;
    c.memoryPoolSupportedHandleTypes = p.memory_pool_supported_handle_types;
    c.deferredMappingCudaArraySupported = p.deferred_mapping_cuda_array_supported as i32;
    c.ipcEventSupported = p.ipc_event_supported as i32;
    c.clusterLaunch = p.cluster_launch as i32;
    c.unifiedFunctionPointers = p.unified_function_pointers as i32;
    c.deviceNumaConfig = p.device_numa_config;
    c.deviceNumaId = p.device_numa_id;
    c.mpsEnabled = p.mps_enabled as i32;
    c.hostNumaId = p.host_numa_id;
    c.gpuPciDeviceID = p.gpu_pci_device_id;
    c.gpuPciSubsystemID = p.gpu_pci_subsystem_id;
    c.hostNumaMultinodeIpcSupported = p.host_numa_multinode_ipc_supported as i32;
    c
}

export! {
    /// `cudaGetDeviceProperties`.
    fn cudaGetDeviceProperties(prop: *mut cudaDeviceProp, device: i32) -> cudaError_t {
        code((|| {
            let dst = out(prop, "cudaGetDeviceProperties")?;
            let c = to_c(&Device::new(device)?.properties()?);
            // Everything up to `reserved`, which libcudart leaves as the caller had it (seen
            // on the GPU: a buffer filled with 0x5c kept its last 224 bytes).
            let n = std::mem::offset_of!(cudaDeviceProp, reserved);
            // SAFETY: `dst` is a valid, writable `cudaDeviceProp` (checked non-null by `out`)
            // and `c` a distinct local of the same type; `n` is within both.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&c as *const cudaDeviceProp).cast::<u8>(),
                    (dst as *mut cudaDeviceProp).cast::<u8>(),
                    n,
                )
            };
            Ok(())
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// Size and offsets as gcc lays out the 13.0 header's struct.
    #[test]
    fn layout_is_the_headers() {
        assert_eq!(std::mem::size_of::<cudaDeviceProp>(), 1008);
        assert_eq!(offset_of!(cudaDeviceProp, name), 0);
        assert_eq!(offset_of!(cudaDeviceProp, uuid), 256);
        assert_eq!(offset_of!(cudaDeviceProp, luid), 272);
        assert_eq!(offset_of!(cudaDeviceProp, luidDeviceNodeMask), 280);
        assert_eq!(offset_of!(cudaDeviceProp, totalGlobalMem), 288);
        assert_eq!(offset_of!(cudaDeviceProp, sharedMemPerBlock), 296);
        assert_eq!(offset_of!(cudaDeviceProp, regsPerBlock), 304);
        assert_eq!(offset_of!(cudaDeviceProp, warpSize), 308);
        assert_eq!(offset_of!(cudaDeviceProp, memPitch), 312);
        assert_eq!(offset_of!(cudaDeviceProp, maxThreadsPerBlock), 320);
        assert_eq!(offset_of!(cudaDeviceProp, maxThreadsDim), 324);
        assert_eq!(offset_of!(cudaDeviceProp, maxGridSize), 336);
        assert_eq!(offset_of!(cudaDeviceProp, totalConstMem), 352);
        assert_eq!(offset_of!(cudaDeviceProp, major), 360);
        assert_eq!(offset_of!(cudaDeviceProp, minor), 364);
        assert_eq!(offset_of!(cudaDeviceProp, textureAlignment), 368);
        assert_eq!(offset_of!(cudaDeviceProp, texturePitchAlignment), 376);
        assert_eq!(offset_of!(cudaDeviceProp, multiProcessorCount), 384);
        assert_eq!(offset_of!(cudaDeviceProp, integrated), 388);
        assert_eq!(offset_of!(cudaDeviceProp, canMapHostMemory), 392);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture1D), 396);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture1DMipmap), 400);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture2D), 404);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture2DMipmap), 412);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture2DLinear), 420);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture2DGather), 432);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture3D), 440);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture3DAlt), 452);
        assert_eq!(offset_of!(cudaDeviceProp, maxTextureCubemap), 464);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture1DLayered), 468);
        assert_eq!(offset_of!(cudaDeviceProp, maxTexture2DLayered), 476);
        assert_eq!(offset_of!(cudaDeviceProp, maxTextureCubemapLayered), 488);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurface1D), 496);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurface2D), 500);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurface3D), 508);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurface1DLayered), 520);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurface2DLayered), 528);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurfaceCubemap), 540);
        assert_eq!(offset_of!(cudaDeviceProp, maxSurfaceCubemapLayered), 544);
        assert_eq!(offset_of!(cudaDeviceProp, surfaceAlignment), 552);
        assert_eq!(offset_of!(cudaDeviceProp, concurrentKernels), 560);
        assert_eq!(offset_of!(cudaDeviceProp, ECCEnabled), 564);
        assert_eq!(offset_of!(cudaDeviceProp, pciBusID), 568);
        assert_eq!(offset_of!(cudaDeviceProp, pciDeviceID), 572);
        assert_eq!(offset_of!(cudaDeviceProp, pciDomainID), 576);
        assert_eq!(offset_of!(cudaDeviceProp, tccDriver), 580);
        assert_eq!(offset_of!(cudaDeviceProp, asyncEngineCount), 584);
        assert_eq!(offset_of!(cudaDeviceProp, unifiedAddressing), 588);
        assert_eq!(offset_of!(cudaDeviceProp, memoryBusWidth), 592);
        assert_eq!(offset_of!(cudaDeviceProp, l2CacheSize), 596);
        assert_eq!(offset_of!(cudaDeviceProp, persistingL2CacheMaxSize), 600);
        assert_eq!(offset_of!(cudaDeviceProp, maxThreadsPerMultiProcessor), 604);
        assert_eq!(offset_of!(cudaDeviceProp, streamPrioritiesSupported), 608);
        assert_eq!(offset_of!(cudaDeviceProp, globalL1CacheSupported), 612);
        assert_eq!(offset_of!(cudaDeviceProp, localL1CacheSupported), 616);
        assert_eq!(offset_of!(cudaDeviceProp, sharedMemPerMultiprocessor), 624);
        assert_eq!(offset_of!(cudaDeviceProp, regsPerMultiprocessor), 632);
        assert_eq!(offset_of!(cudaDeviceProp, managedMemory), 636);
        assert_eq!(offset_of!(cudaDeviceProp, isMultiGpuBoard), 640);
        assert_eq!(offset_of!(cudaDeviceProp, multiGpuBoardGroupID), 644);
        assert_eq!(offset_of!(cudaDeviceProp, hostNativeAtomicSupported), 648);
        assert_eq!(offset_of!(cudaDeviceProp, pageableMemoryAccess), 652);
        assert_eq!(offset_of!(cudaDeviceProp, concurrentManagedAccess), 656);
        assert_eq!(offset_of!(cudaDeviceProp, computePreemptionSupported), 660);
        assert_eq!(
            offset_of!(cudaDeviceProp, canUseHostPointerForRegisteredMem),
            664
        );
        assert_eq!(offset_of!(cudaDeviceProp, cooperativeLaunch), 668);
        assert_eq!(offset_of!(cudaDeviceProp, sharedMemPerBlockOptin), 672);
        assert_eq!(
            offset_of!(cudaDeviceProp, pageableMemoryAccessUsesHostPageTables),
            680
        );
        assert_eq!(
            offset_of!(cudaDeviceProp, directManagedMemAccessFromHost),
            684
        );
        assert_eq!(offset_of!(cudaDeviceProp, maxBlocksPerMultiProcessor), 688);
        assert_eq!(offset_of!(cudaDeviceProp, accessPolicyMaxWindowSize), 692);
        assert_eq!(offset_of!(cudaDeviceProp, reservedSharedMemPerBlock), 696);
        assert_eq!(offset_of!(cudaDeviceProp, hostRegisterSupported), 704);
        assert_eq!(offset_of!(cudaDeviceProp, sparseCudaArraySupported), 708);
        assert_eq!(
            offset_of!(cudaDeviceProp, hostRegisterReadOnlySupported),
            712
        );
        assert_eq!(
            offset_of!(cudaDeviceProp, timelineSemaphoreInteropSupported),
            716
        );
        assert_eq!(offset_of!(cudaDeviceProp, memoryPoolsSupported), 720);
        assert_eq!(offset_of!(cudaDeviceProp, gpuDirectRDMASupported), 724);
        assert_eq!(
            offset_of!(cudaDeviceProp, gpuDirectRDMAFlushWritesOptions),
            728
        );
        assert_eq!(offset_of!(cudaDeviceProp, gpuDirectRDMAWritesOrdering), 732);
        assert_eq!(
            offset_of!(cudaDeviceProp, memoryPoolSupportedHandleTypes),
            736
        );
        assert_eq!(
            offset_of!(cudaDeviceProp, deferredMappingCudaArraySupported),
            740
        );
        assert_eq!(offset_of!(cudaDeviceProp, ipcEventSupported), 744);
        assert_eq!(offset_of!(cudaDeviceProp, clusterLaunch), 748);
        assert_eq!(offset_of!(cudaDeviceProp, unifiedFunctionPointers), 752);
        assert_eq!(offset_of!(cudaDeviceProp, deviceNumaConfig), 756);
        assert_eq!(offset_of!(cudaDeviceProp, deviceNumaId), 760);
        assert_eq!(offset_of!(cudaDeviceProp, mpsEnabled), 764);
        assert_eq!(offset_of!(cudaDeviceProp, hostNumaId), 768);
        assert_eq!(offset_of!(cudaDeviceProp, gpuPciDeviceID), 772);
        assert_eq!(offset_of!(cudaDeviceProp, gpuPciSubsystemID), 776);
        assert_eq!(
            offset_of!(cudaDeviceProp, hostNumaMultinodeIpcSupported),
            780
        );
        assert_eq!(offset_of!(cudaDeviceProp, reserved), 784);
    }
}
