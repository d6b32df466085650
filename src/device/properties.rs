//! Device attributes (`cudaDeviceAttr`, `cudaDeviceGetAttribute`) and device properties
//! (`cudaDeviceProp`, `cudaGetDeviceProperties`), as of the CUDA 13.0 runtime.
//!
//! Every `cudaDeviceAttr` of CUDA 13.0 has the same number as the driver's `CUdevice_attribute`
//! it reads; the runtime's reserved numbers (92-94, 96, 122-124, 127-129, 132, 141, 145) are not
//! variants. `cudaDeviceProp` is filled the way libcudart fills it: one driver attribute per
//! field, except `name`, `uuid`, `luid`, `luidDeviceNodeMask` and `totalGlobalMem`, which come
//! from their own driver queries. The fields CUDA 13.0 removed (`clockRate`, `memoryClockRate`,
//! `computeMode`, `kernelExecTimeoutEnabled`, `deviceOverlap`, `maxTexture1DLinear`,
//! `cooperativeMultiDeviceLaunch`, `singleToDoublePrecisionPerfRatio`...) are not fields; the
//! attributes that still exist ([`DeviceAttribute::ClockRate`] ...) give them.

use std::ffi::c_char;

use super::Device;
use crate::driver::{self, sys};
use crate::error::{record, Result};

macro_rules! device_attributes {
    ($( $(#[doc = $doc:literal])* $variant:ident = $n:literal => $drv:ident, $rt:literal; )*) => {
        /// A device attribute (`cudaDeviceAttr`), read with [`Device::attribute`].
        ///
        /// Each variant's number ([`number`](Self::number)) is the runtime's, which for every
        /// attribute of CUDA 13.0 is also the driver's `CUdevice_attribute`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        #[repr(u32)]
        pub enum DeviceAttribute {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("`", $rt, "` = ", stringify!($n), ".")]
                #[doc(alias = $rt)]
                $variant = $n,
            )*
        }

        impl DeviceAttribute {
            /// Every attribute, in increasing number.
            pub const ALL: &'static [DeviceAttribute] = &[$(DeviceAttribute::$variant),*];

            /// The runtime's name of the attribute (`cudaDevAttr...`).
            pub fn name(self) -> &'static str {
                match self {
                    $(DeviceAttribute::$variant => $rt,)*
                }
            }

            /// The attribute with the runtime's number `n`, if CUDA 13.0 names one (reserved
            /// numbers give `None`).
            pub fn from_number(n: u32) -> Option<DeviceAttribute> {
                match n {
                    $($n => Some(DeviceAttribute::$variant),)*
                    _ => None,
                }
            }

            pub(crate) fn to_raw(self) -> sys::CUdevice_attribute {
                match self {
                    $(DeviceAttribute::$variant =>
                        sys::CUdevice_attribute::$drv,)*
                }
            }
        }
    };
}

device_attributes! {
    /// Maximum number of threads in a block.
    MaxThreadsPerBlock = 1 => CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "cudaDevAttrMaxThreadsPerBlock";
    /// Largest block extent in x.
    MaxBlockDimX = 2 => CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "cudaDevAttrMaxBlockDimX";
    /// Largest block extent in y.
    MaxBlockDimY = 3 => CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "cudaDevAttrMaxBlockDimY";
    /// Largest block extent in z.
    MaxBlockDimZ = 4 => CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "cudaDevAttrMaxBlockDimZ";
    /// Largest grid extent in x, in blocks.
    MaxGridDimX = 5 => CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "cudaDevAttrMaxGridDimX";
    /// Largest grid extent in y, in blocks.
    MaxGridDimY = 6 => CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "cudaDevAttrMaxGridDimY";
    /// Largest grid extent in z, in blocks.
    MaxGridDimZ = 7 => CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "cudaDevAttrMaxGridDimZ";
    /// Shared memory a block may use without opting in, in bytes.
    MaxSharedMemoryPerBlock = 8 => CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "cudaDevAttrMaxSharedMemoryPerBlock";
    /// Size of `__constant__` memory, in bytes.
    TotalConstantMemory = 9 => CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, "cudaDevAttrTotalConstantMemory";
    /// Threads per warp.
    WarpSize = 10 => CU_DEVICE_ATTRIBUTE_WARP_SIZE, "cudaDevAttrWarpSize";
    /// Largest pitch accepted by pitched copies and allocations, in bytes.
    MaxPitch = 11 => CU_DEVICE_ATTRIBUTE_MAX_PITCH, "cudaDevAttrMaxPitch";
    /// 32-bit registers available to one block.
    MaxRegistersPerBlock = 12 => CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "cudaDevAttrMaxRegistersPerBlock";
    /// Peak SM clock, in kHz.
    ClockRate = 13 => CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "cudaDevAttrClockRate";
    /// Alignment required of texture base addresses, in bytes.
    TextureAlignment = 14 => CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, "cudaDevAttrTextureAlignment";
    /// 1 if the device can copy memory while running a kernel.
    GpuOverlap = 15 => CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, "cudaDevAttrGpuOverlap";
    /// Number of streaming multiprocessors.
    MultiProcessorCount = 16 => CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cudaDevAttrMultiProcessorCount";
    /// 1 if kernels are subject to a run-time limit (a watchdog).
    KernelExecTimeout = 17 => CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, "cudaDevAttrKernelExecTimeout";
    /// 1 for an integrated GPU sharing memory with the host.
    Integrated = 18 => CU_DEVICE_ATTRIBUTE_INTEGRATED, "cudaDevAttrIntegrated";
    /// 1 if page-locked host memory can be mapped into the device's address space.
    CanMapHostMemory = 19 => CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "cudaDevAttrCanMapHostMemory";
    /// The compute mode (`cudaComputeMode`: 0 default, 2 prohibited, 3 exclusive process).
    ComputeMode = 20 => CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, "cudaDevAttrComputeMode";
    /// Largest 1D texture width.
    MaxTexture1DWidth = 21 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, "cudaDevAttrMaxTexture1DWidth";
    /// Largest 2D texture width.
    MaxTexture2DWidth = 22 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH, "cudaDevAttrMaxTexture2DWidth";
    /// Largest 2D texture height.
    MaxTexture2DHeight = 23 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, "cudaDevAttrMaxTexture2DHeight";
    /// Largest 3D texture width.
    MaxTexture3DWidth = 24 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH, "cudaDevAttrMaxTexture3DWidth";
    /// Largest 3D texture height.
    MaxTexture3DHeight = 25 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT, "cudaDevAttrMaxTexture3DHeight";
    /// Largest 3D texture depth.
    MaxTexture3DDepth = 26 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH, "cudaDevAttrMaxTexture3DDepth";
    /// Largest layered 2D texture width.
    MaxTexture2DLayeredWidth = 27 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH, "cudaDevAttrMaxTexture2DLayeredWidth";
    /// Largest layered 2D texture height.
    MaxTexture2DLayeredHeight = 28 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, "cudaDevAttrMaxTexture2DLayeredHeight";
    /// Most layers of a layered 2D texture.
    MaxTexture2DLayeredLayers = 29 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS, "cudaDevAttrMaxTexture2DLayeredLayers";
    /// Alignment required of surface base addresses, in bytes.
    SurfaceAlignment = 30 => CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, "cudaDevAttrSurfaceAlignment";
    /// 1 if kernels of different streams may run at the same time.
    ConcurrentKernels = 31 => CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, "cudaDevAttrConcurrentKernels";
    /// 1 if ECC is enabled on the device memory.
    EccEnabled = 32 => CU_DEVICE_ATTRIBUTE_ECC_ENABLED, "cudaDevAttrEccEnabled";
    /// PCI bus number.
    PciBusId = 33 => CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "cudaDevAttrPciBusId";
    /// PCI device (slot) number.
    PciDeviceId = 34 => CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "cudaDevAttrPciDeviceId";
    /// 1 if the device runs under the Windows TCC driver model.
    TccDriver = 35 => CU_DEVICE_ATTRIBUTE_TCC_DRIVER, "cudaDevAttrTccDriver";
    /// Peak memory clock, in kHz.
    MemoryClockRate = 36 => CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "cudaDevAttrMemoryClockRate";
    /// Width of the global memory bus, in bits.
    GlobalMemoryBusWidth = 37 => CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "cudaDevAttrGlobalMemoryBusWidth";
    /// L2 cache size, in bytes.
    L2CacheSize = 38 => CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cudaDevAttrL2CacheSize";
    /// Most resident threads per multiprocessor.
    MaxThreadsPerMultiProcessor = 39 => CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "cudaDevAttrMaxThreadsPerMultiProcessor";
    /// Number of copy engines that can work concurrently with kernels.
    AsyncEngineCount = 40 => CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, "cudaDevAttrAsyncEngineCount";
    /// 1 if the device shares one virtual address space with the host.
    UnifiedAddressing = 41 => CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "cudaDevAttrUnifiedAddressing";
    /// Largest layered 1D texture width.
    MaxTexture1DLayeredWidth = 42 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH, "cudaDevAttrMaxTexture1DLayeredWidth";
    /// Most layers of a layered 1D texture.
    MaxTexture1DLayeredLayers = 43 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS, "cudaDevAttrMaxTexture1DLayeredLayers";
    /// Largest width of a 2D texture used with gather.
    MaxTexture2DGatherWidth = 45 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH, "cudaDevAttrMaxTexture2DGatherWidth";
    /// Largest height of a 2D texture used with gather.
    MaxTexture2DGatherHeight = 46 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT, "cudaDevAttrMaxTexture2DGatherHeight";
    /// Largest 3D texture width of the alternate limits.
    MaxTexture3DWidthAlt = 47 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, "cudaDevAttrMaxTexture3DWidthAlt";
    /// Largest 3D texture height of the alternate limits.
    MaxTexture3DHeightAlt = 48 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, "cudaDevAttrMaxTexture3DHeightAlt";
    /// Largest 3D texture depth of the alternate limits.
    MaxTexture3DDepthAlt = 49 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, "cudaDevAttrMaxTexture3DDepthAlt";
    /// PCI domain number.
    PciDomainId = 50 => CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "cudaDevAttrPciDomainId";
    /// Pitch alignment required of pitched 2D textures, in bytes.
    TexturePitchAlignment = 51 => CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, "cudaDevAttrTexturePitchAlignment";
    /// Largest cubemap texture width (= height).
    MaxTextureCubemapWidth = 52 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH, "cudaDevAttrMaxTextureCubemapWidth";
    /// Largest layered cubemap texture width (= height).
    MaxTextureCubemapLayeredWidth = 53 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, "cudaDevAttrMaxTextureCubemapLayeredWidth";
    /// Most layers of a layered cubemap texture.
    MaxTextureCubemapLayeredLayers = 54 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, "cudaDevAttrMaxTextureCubemapLayeredLayers";
    /// Largest 1D surface width.
    MaxSurface1DWidth = 55 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH, "cudaDevAttrMaxSurface1DWidth";
    /// Largest 2D surface width.
    MaxSurface2DWidth = 56 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH, "cudaDevAttrMaxSurface2DWidth";
    /// Largest 2D surface height.
    MaxSurface2DHeight = 57 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT, "cudaDevAttrMaxSurface2DHeight";
    /// Largest 3D surface width.
    MaxSurface3DWidth = 58 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH, "cudaDevAttrMaxSurface3DWidth";
    /// Largest 3D surface height.
    MaxSurface3DHeight = 59 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT, "cudaDevAttrMaxSurface3DHeight";
    /// Largest 3D surface depth.
    MaxSurface3DDepth = 60 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH, "cudaDevAttrMaxSurface3DDepth";
    /// Largest layered 1D surface width.
    MaxSurface1DLayeredWidth = 61 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH, "cudaDevAttrMaxSurface1DLayeredWidth";
    /// Most layers of a layered 1D surface.
    MaxSurface1DLayeredLayers = 62 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS, "cudaDevAttrMaxSurface1DLayeredLayers";
    /// Largest layered 2D surface width.
    MaxSurface2DLayeredWidth = 63 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH, "cudaDevAttrMaxSurface2DLayeredWidth";
    /// Largest layered 2D surface height.
    MaxSurface2DLayeredHeight = 64 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT, "cudaDevAttrMaxSurface2DLayeredHeight";
    /// Most layers of a layered 2D surface.
    MaxSurface2DLayeredLayers = 65 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS, "cudaDevAttrMaxSurface2DLayeredLayers";
    /// Largest cubemap surface width.
    MaxSurfaceCubemapWidth = 66 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH, "cudaDevAttrMaxSurfaceCubemapWidth";
    /// Largest layered cubemap surface width.
    MaxSurfaceCubemapLayeredWidth = 67 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, "cudaDevAttrMaxSurfaceCubemapLayeredWidth";
    /// Most layers of a layered cubemap surface.
    MaxSurfaceCubemapLayeredLayers = 68 => CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, "cudaDevAttrMaxSurfaceCubemapLayeredLayers";
    /// Largest 1D texture over linear memory, in elements.
    MaxTexture1DLinearWidth = 69 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH, "cudaDevAttrMaxTexture1DLinearWidth";
    /// Largest width of a 2D texture over pitched memory.
    MaxTexture2DLinearWidth = 70 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH, "cudaDevAttrMaxTexture2DLinearWidth";
    /// Largest height of a 2D texture over pitched memory.
    MaxTexture2DLinearHeight = 71 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, "cudaDevAttrMaxTexture2DLinearHeight";
    /// Largest pitch of a 2D texture over pitched memory, in bytes.
    MaxTexture2DLinearPitch = 72 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH, "cudaDevAttrMaxTexture2DLinearPitch";
    /// Largest mipmapped 2D texture width.
    MaxTexture2DMipmappedWidth = 73 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, "cudaDevAttrMaxTexture2DMipmappedWidth";
    /// Largest mipmapped 2D texture height.
    MaxTexture2DMipmappedHeight = 74 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, "cudaDevAttrMaxTexture2DMipmappedHeight";
    /// Compute capability, major number.
    ComputeCapabilityMajor = 75 => CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cudaDevAttrComputeCapabilityMajor";
    /// Compute capability, minor number.
    ComputeCapabilityMinor = 76 => CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cudaDevAttrComputeCapabilityMinor";
    /// Largest mipmapped 1D texture width.
    MaxTexture1DMipmappedWidth = 77 => CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, "cudaDevAttrMaxTexture1DMipmappedWidth";
    /// 1 if streams may have priorities.
    StreamPrioritiesSupported = 78 => CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, "cudaDevAttrStreamPrioritiesSupported";
    /// 1 if global memory accesses may be cached in L1.
    GlobalL1CacheSupported = 79 => CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, "cudaDevAttrGlobalL1CacheSupported";
    /// 1 if local memory accesses may be cached in L1.
    LocalL1CacheSupported = 80 => CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, "cudaDevAttrLocalL1CacheSupported";
    /// Shared memory of one multiprocessor, in bytes.
    MaxSharedMemoryPerMultiprocessor = 81 => CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "cudaDevAttrMaxSharedMemoryPerMultiprocessor";
    /// 32-bit registers of one multiprocessor.
    MaxRegistersPerMultiprocessor = 82 => CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "cudaDevAttrMaxRegistersPerMultiprocessor";
    /// 1 if managed (unified) memory can be allocated on this system.
    ManagedMemory = 83 => CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "cudaDevAttrManagedMemory";
    /// 1 if the device sits on a board with several GPUs.
    IsMultiGpuBoard = 84 => CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, "cudaDevAttrIsMultiGpuBoard";
    /// An identifier shared by the GPUs of one multi-GPU board.
    MultiGpuBoardGroupID = 85 => CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, "cudaDevAttrMultiGpuBoardGroupID";
    /// 1 if the host link supports native atomics.
    HostNativeAtomicSupported = 86 => CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, "cudaDevAttrHostNativeAtomicSupported";
    /// Ratio of single- to double-precision throughput.
    SingleToDoublePrecisionPerfRatio = 87 => CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, "cudaDevAttrSingleToDoublePrecisionPerfRatio";
    /// 1 if the device can access pageable host memory coherently without registering it.
    PageableMemoryAccess = 88 => CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, "cudaDevAttrPageableMemoryAccess";
    /// 1 if the device and the CPU may access managed memory at the same time.
    ConcurrentManagedAccess = 89 => CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "cudaDevAttrConcurrentManagedAccess";
    /// 1 if compute work can be preempted.
    ComputePreemptionSupported = 90 => CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, "cudaDevAttrComputePreemptionSupported";
    /// 1 if registered host memory has the same address on the device as on the host.
    CanUseHostPointerForRegisteredMem = 91 => CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, "cudaDevAttrCanUseHostPointerForRegisteredMem";
    /// 1 if cooperative kernels can be launched.
    CooperativeLaunch = 95 => CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, "cudaDevAttrCooperativeLaunch";
    /// Shared memory a block may use after opting in, in bytes.
    MaxSharedMemoryPerBlockOptin = 97 => CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "cudaDevAttrMaxSharedMemoryPerBlockOptin";
    /// 1 if outstanding remote writes can be flushed.
    CanFlushRemoteWrites = 98 => CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, "cudaDevAttrCanFlushRemoteWrites";
    /// 1 if host memory can be registered (`cudaHostRegister`).
    HostRegisterSupported = 99 => CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, "cudaDevAttrHostRegisterSupported";
    /// 1 if pageable memory is reached through the host's page tables.
    PageableMemoryAccessUsesHostPageTables = 100 => CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, "cudaDevAttrPageableMemoryAccessUsesHostPageTables";
    /// 1 if the host can access managed memory on the device without migrating it.
    DirectManagedMemAccessFromHost = 101 => CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, "cudaDevAttrDirectManagedMemAccessFromHost";
    /// Most resident blocks per multiprocessor.
    MaxBlocksPerMultiprocessor = 106 => CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, "cudaDevAttrMaxBlocksPerMultiprocessor";
    /// Largest L2 set-aside for persisting accesses, in bytes.
    MaxPersistingL2CacheSize = 108 => CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, "cudaDevAttrMaxPersistingL2CacheSize";
    /// Largest `num_bytes` of an access policy window.
    MaxAccessPolicyWindowSize = 109 => CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, "cudaDevAttrMaxAccessPolicyWindowSize";
    /// Shared memory the driver reserves in each block, in bytes.
    ReservedSharedMemoryPerBlock = 111 => CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, "cudaDevAttrReservedSharedMemoryPerBlock";
    /// 1 if sparse CUDA arrays are supported.
    SparseCudaArraySupported = 112 => CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, "cudaDevAttrSparseCudaArraySupported";
    /// 1 if host memory can be registered read-only for the device.
    HostRegisterReadOnlySupported = 113 => CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, "cudaDevAttrHostRegisterReadOnlySupported";
    /// 1 if external timeline semaphores can be imported.
    TimelineSemaphoreInteropSupported = 114 => CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, "cudaDevAttrTimelineSemaphoreInteropSupported";
    /// 1 if stream-ordered allocation and memory pools are supported.
    MemoryPoolsSupported = 115 => CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "cudaDevAttrMemoryPoolsSupported";
    /// 1 if GPUDirect RDMA is supported.
    GPUDirectRDMASupported = 116 => CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, "cudaDevAttrGPUDirectRDMASupported";
    /// Bitmask of `cudaFlushGPUDirectRDMAWritesOptions` supported.
    GPUDirectRDMAFlushWritesOptions = 117 => CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, "cudaDevAttrGPUDirectRDMAFlushWritesOptions";
    /// Scope within which GPUDirect RDMA writes need no flush (`cudaGPUDirectRDMAWritesOrdering`).
    GPUDirectRDMAWritesOrdering = 118 => CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, "cudaDevAttrGPUDirectRDMAWritesOrdering";
    /// Bitmask of `cudaMemAllocationHandleType`s usable for memory-pool IPC.
    MemoryPoolSupportedHandleTypes = 119 => CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, "cudaDevAttrMemoryPoolSupportedHandleTypes";
    /// 1 if thread-block clusters can be launched.
    ClusterLaunch = 120 => CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, "cudaDevAttrClusterLaunch";
    /// 1 if CUDA arrays with deferred mapping are supported.
    DeferredMappingCudaArraySupported = 121 => CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, "cudaDevAttrDeferredMappingCudaArraySupported";
    /// 1 if events can be shared between processes.
    IpcEventSupport = 125 => CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, "cudaDevAttrIpcEventSupport";
    /// Number of memory synchronisation domains.
    MemSyncDomainCount = 126 => CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, "cudaDevAttrMemSyncDomainCount";
    /// NUMA configuration of the device memory (`cudaDeviceNumaConfig`).
    NumaConfig = 130 => CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, "cudaDevAttrNumaConfig";
    /// NUMA node of the device memory, or -1.
    NumaId = 131 => CU_DEVICE_ATTRIBUTE_NUMA_ID, "cudaDevAttrNumaId";
    /// 1 if contexts on this device are shared through MPS.
    MpsEnabled = 133 => CU_DEVICE_ATTRIBUTE_MPS_ENABLED, "cudaDevAttrMpsEnabled";
    /// NUMA node of the host closest to the device, or -1.
    HostNumaId = 134 => CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, "cudaDevAttrHostNumaId";
    /// 1 if CUDA in graphics (CIG) with D3D12 is supported.
    D3D12CigSupported = 135 => CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED, "cudaDevAttrD3D12CigSupported";
    /// 1 if CUDA in graphics (CIG) with Vulkan is supported.
    VulkanCigSupported = 138 => CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED, "cudaDevAttrVulkanCigSupported";
    /// PCI device id (high 16 bits) and vendor id (low 16 bits).
    GpuPciDeviceId = 139 => CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, "cudaDevAttrGpuPciDeviceId";
    /// PCI subsystem id (high 16 bits) and subsystem vendor id (low 16 bits).
    GpuPciSubsystemId = 140 => CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID, "cudaDevAttrGpuPciSubsystemId";
    /// 1 if memory pools may be placed on host NUMA nodes.
    HostNumaMemoryPoolsSupported = 142 => CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, "cudaDevAttrHostNumaMemoryPoolsSupported";
    /// 1 if host-NUMA memory may be shared between the nodes of a multi-node system.
    HostNumaMultinodeIpcSupported = 143 => CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED, "cudaDevAttrHostNumaMultinodeIpcSupported";
    /// 1 if memory pools may be placed in host memory.
    HostMemoryPoolsSupported = 144 => CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, "cudaDevAttrHostMemoryPoolsSupported";
    /// 1 if the host link supports only some native atomics.
    OnlyPartialHostNativeAtomicSupported = 147 => CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, "cudaDevAttrOnlyPartialHostNativeAtomicSupported";
}

impl DeviceAttribute {
    /// The runtime's number of the attribute (the `cudaDeviceAttr` value).
    pub fn number(self) -> u32 {
        self as u32
    }
}

/// The properties of a device (`cudaDeviceProp`, CUDA 13.0 layout), from
/// [`Device::properties`].
///
/// Every field of the CUDA 13.0 `cudaDeviceProp` is here (but `reserved`), under its C name in
/// snake case. Fields that are 0/1 flags in C are `bool`; sizes that are `size_t` in C are
/// `usize`; the rest keep their C type. Each field says which driver query fills it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceProperties {
    /// The device's name (`name`; `cuDeviceGetName`).
    pub name: String,
    /// 16-byte unique identifier (`uuid`; `cuDeviceGetUuid`). Under MIG, the instance's UUID.
    pub uuid: [u8; 16],
    /// 8-byte locally unique identifier (`luid`; `cuDeviceGetLuid`). All zero except on
    /// Windows under WDDM.
    pub luid: [u8; 8],
    /// LUID device node mask (`luidDeviceNodeMask`; `cuDeviceGetLuid`). Zero except on Windows
    /// under WDDM.
    #[doc(alias = "luidDeviceNodeMask")]
    pub luid_device_node_mask: u32,
    /// Global memory, bytes (`totalGlobalMem`; `cuDeviceTotalMem`).
    #[doc(alias = "totalGlobalMem")]
    pub total_global_mem: usize,
    /// Shared memory per block without opt-in, bytes (`sharedMemPerBlock`;
    /// [`DeviceAttribute::MaxSharedMemoryPerBlock`]).
    #[doc(alias = "sharedMemPerBlock")]
    pub shared_mem_per_block: usize,
    /// 32-bit registers per block (`regsPerBlock`; [`DeviceAttribute::MaxRegistersPerBlock`]).
    #[doc(alias = "regsPerBlock")]
    pub regs_per_block: i32,
    /// Threads per warp (`warpSize`; [`DeviceAttribute::WarpSize`]).
    #[doc(alias = "warpSize")]
    pub warp_size: i32,
    /// Largest pitch of pitched copies, bytes (`memPitch`; [`DeviceAttribute::MaxPitch`]).
    #[doc(alias = "memPitch")]
    pub mem_pitch: usize,
    /// Threads per block (`maxThreadsPerBlock`; [`DeviceAttribute::MaxThreadsPerBlock`]).
    #[doc(alias = "maxThreadsPerBlock")]
    pub max_threads_per_block: i32,
    /// Largest block extent in x, y, z (`maxThreadsDim`; `MaxBlockDim{X,Y,Z}`).
    #[doc(alias = "maxThreadsDim")]
    pub max_threads_dim: [i32; 3],
    /// Largest grid extent in x, y, z (`maxGridSize`; `MaxGridDim{X,Y,Z}`).
    #[doc(alias = "maxGridSize")]
    pub max_grid_size: [i32; 3],
    /// `__constant__` memory, bytes (`totalConstMem`; [`DeviceAttribute::TotalConstantMemory`]).
    #[doc(alias = "totalConstMem")]
    pub total_const_mem: usize,
    /// Compute capability, major (`major`; [`DeviceAttribute::ComputeCapabilityMajor`]).
    pub major: i32,
    /// Compute capability, minor (`minor`; [`DeviceAttribute::ComputeCapabilityMinor`]).
    pub minor: i32,
    /// Texture base alignment, bytes (`textureAlignment`; [`DeviceAttribute::TextureAlignment`]).
    #[doc(alias = "textureAlignment")]
    pub texture_alignment: usize,
    /// Pitch alignment of pitched 2D textures, bytes (`texturePitchAlignment`;
    /// [`DeviceAttribute::TexturePitchAlignment`]).
    #[doc(alias = "texturePitchAlignment")]
    pub texture_pitch_alignment: usize,
    /// Multiprocessors (`multiProcessorCount`; [`DeviceAttribute::MultiProcessorCount`]).
    #[doc(alias = "multiProcessorCount")]
    pub multi_processor_count: i32,
    /// Integrated GPU (`integrated`; [`DeviceAttribute::Integrated`]).
    pub integrated: bool,
    /// Host memory can be mapped (`canMapHostMemory`; [`DeviceAttribute::CanMapHostMemory`]).
    #[doc(alias = "canMapHostMemory")]
    pub can_map_host_memory: bool,
    /// Largest 1D texture (`maxTexture1D`; [`DeviceAttribute::MaxTexture1DWidth`]).
    #[doc(alias = "maxTexture1D")]
    pub max_texture_1d: i32,
    /// Largest mipmapped 1D texture (`maxTexture1DMipmap`;
    /// [`DeviceAttribute::MaxTexture1DMipmappedWidth`]).
    #[doc(alias = "maxTexture1DMipmap")]
    pub max_texture_1d_mipmap: i32,
    /// Largest 2D texture, width and height (`maxTexture2D`; `MaxTexture2D{Width,Height}`).
    #[doc(alias = "maxTexture2D")]
    pub max_texture_2d: [i32; 2],
    /// Largest mipmapped 2D texture (`maxTexture2DMipmap`;
    /// `MaxTexture2DMipmapped{Width,Height}`).
    #[doc(alias = "maxTexture2DMipmap")]
    pub max_texture_2d_mipmap: [i32; 2],
    /// Largest 2D texture over pitched memory: width, height, pitch in bytes
    /// (`maxTexture2DLinear`; `MaxTexture2DLinear{Width,Height,Pitch}`).
    #[doc(alias = "maxTexture2DLinear")]
    pub max_texture_2d_linear: [i32; 3],
    /// Largest 2D texture used with gather (`maxTexture2DGather`;
    /// `MaxTexture2DGather{Width,Height}`).
    #[doc(alias = "maxTexture2DGather")]
    pub max_texture_2d_gather: [i32; 2],
    /// Largest 3D texture (`maxTexture3D`; `MaxTexture3D{Width,Height,Depth}`).
    #[doc(alias = "maxTexture3D")]
    pub max_texture_3d: [i32; 3],
    /// Alternate largest 3D texture (`maxTexture3DAlt`; `MaxTexture3D{Width,Height,Depth}Alt`).
    #[doc(alias = "maxTexture3DAlt")]
    pub max_texture_3d_alt: [i32; 3],
    /// Largest cubemap texture (`maxTextureCubemap`; [`DeviceAttribute::MaxTextureCubemapWidth`]).
    #[doc(alias = "maxTextureCubemap")]
    pub max_texture_cubemap: i32,
    /// Largest layered 1D texture: width, layers (`maxTexture1DLayered`;
    /// `MaxTexture1DLayered{Width,Layers}`).
    #[doc(alias = "maxTexture1DLayered")]
    pub max_texture_1d_layered: [i32; 2],
    /// Largest layered 2D texture: width, height, layers (`maxTexture2DLayered`;
    /// `MaxTexture2DLayered{Width,Height,Layers}`).
    #[doc(alias = "maxTexture2DLayered")]
    pub max_texture_2d_layered: [i32; 3],
    /// Largest layered cubemap texture: width, layers (`maxTextureCubemapLayered`;
    /// `MaxTextureCubemapLayered{Width,Layers}`).
    #[doc(alias = "maxTextureCubemapLayered")]
    pub max_texture_cubemap_layered: [i32; 2],
    /// Largest 1D surface (`maxSurface1D`; [`DeviceAttribute::MaxSurface1DWidth`]).
    #[doc(alias = "maxSurface1D")]
    pub max_surface_1d: i32,
    /// Largest 2D surface (`maxSurface2D`; `MaxSurface2D{Width,Height}`).
    #[doc(alias = "maxSurface2D")]
    pub max_surface_2d: [i32; 2],
    /// Largest 3D surface (`maxSurface3D`; `MaxSurface3D{Width,Height,Depth}`).
    #[doc(alias = "maxSurface3D")]
    pub max_surface_3d: [i32; 3],
    /// Largest layered 1D surface: width, layers (`maxSurface1DLayered`;
    /// `MaxSurface1DLayered{Width,Layers}`).
    #[doc(alias = "maxSurface1DLayered")]
    pub max_surface_1d_layered: [i32; 2],
    /// Largest layered 2D surface: width, height, layers (`maxSurface2DLayered`;
    /// `MaxSurface2DLayered{Width,Height,Layers}`).
    #[doc(alias = "maxSurface2DLayered")]
    pub max_surface_2d_layered: [i32; 3],
    /// Largest cubemap surface (`maxSurfaceCubemap`; [`DeviceAttribute::MaxSurfaceCubemapWidth`]).
    #[doc(alias = "maxSurfaceCubemap")]
    pub max_surface_cubemap: i32,
    /// Largest layered cubemap surface: width, layers (`maxSurfaceCubemapLayered`;
    /// `MaxSurfaceCubemapLayered{Width,Layers}`).
    #[doc(alias = "maxSurfaceCubemapLayered")]
    pub max_surface_cubemap_layered: [i32; 2],
    /// Surface base alignment, bytes (`surfaceAlignment`; [`DeviceAttribute::SurfaceAlignment`]).
    #[doc(alias = "surfaceAlignment")]
    pub surface_alignment: usize,
    /// Kernels may run concurrently (`concurrentKernels`; [`DeviceAttribute::ConcurrentKernels`]).
    #[doc(alias = "concurrentKernels")]
    pub concurrent_kernels: bool,
    /// ECC is enabled (`ECCEnabled`; [`DeviceAttribute::EccEnabled`]).
    #[doc(alias = "ECCEnabled")]
    pub ecc_enabled: bool,
    /// PCI bus number (`pciBusID`; [`DeviceAttribute::PciBusId`]).
    #[doc(alias = "pciBusID")]
    pub pci_bus_id: i32,
    /// PCI device number (`pciDeviceID`; [`DeviceAttribute::PciDeviceId`]).
    #[doc(alias = "pciDeviceID")]
    pub pci_device_id: i32,
    /// PCI domain number (`pciDomainID`; [`DeviceAttribute::PciDomainId`]).
    #[doc(alias = "pciDomainID")]
    pub pci_domain_id: i32,
    /// Windows TCC driver model (`tccDriver`; [`DeviceAttribute::TccDriver`]).
    #[doc(alias = "tccDriver")]
    pub tcc_driver: bool,
    /// Copy engines able to overlap kernels (`asyncEngineCount`;
    /// [`DeviceAttribute::AsyncEngineCount`]).
    #[doc(alias = "asyncEngineCount")]
    pub async_engine_count: i32,
    /// One address space with the host (`unifiedAddressing`;
    /// [`DeviceAttribute::UnifiedAddressing`]).
    #[doc(alias = "unifiedAddressing")]
    pub unified_addressing: bool,
    /// Memory bus width, bits (`memoryBusWidth`; [`DeviceAttribute::GlobalMemoryBusWidth`]).
    #[doc(alias = "memoryBusWidth")]
    pub memory_bus_width: i32,
    /// L2 cache, bytes (`l2CacheSize`; [`DeviceAttribute::L2CacheSize`]).
    #[doc(alias = "l2CacheSize")]
    pub l2_cache_size: i32,
    /// Largest persisting-L2 set-aside, bytes (`persistingL2CacheMaxSize`;
    /// [`DeviceAttribute::MaxPersistingL2CacheSize`]).
    #[doc(alias = "persistingL2CacheMaxSize")]
    pub persisting_l2_cache_max_size: i32,
    /// Resident threads per multiprocessor (`maxThreadsPerMultiProcessor`;
    /// [`DeviceAttribute::MaxThreadsPerMultiProcessor`]).
    #[doc(alias = "maxThreadsPerMultiProcessor")]
    pub max_threads_per_multi_processor: i32,
    /// Stream priorities (`streamPrioritiesSupported`;
    /// [`DeviceAttribute::StreamPrioritiesSupported`]).
    #[doc(alias = "streamPrioritiesSupported")]
    pub stream_priorities_supported: bool,
    /// Globals cached in L1 (`globalL1CacheSupported`;
    /// [`DeviceAttribute::GlobalL1CacheSupported`]).
    #[doc(alias = "globalL1CacheSupported")]
    pub global_l1_cache_supported: bool,
    /// Locals cached in L1 (`localL1CacheSupported`; [`DeviceAttribute::LocalL1CacheSupported`]).
    #[doc(alias = "localL1CacheSupported")]
    pub local_l1_cache_supported: bool,
    /// Shared memory per multiprocessor, bytes (`sharedMemPerMultiprocessor`;
    /// [`DeviceAttribute::MaxSharedMemoryPerMultiprocessor`]).
    #[doc(alias = "sharedMemPerMultiprocessor")]
    pub shared_mem_per_multiprocessor: usize,
    /// 32-bit registers per multiprocessor (`regsPerMultiprocessor`;
    /// [`DeviceAttribute::MaxRegistersPerMultiprocessor`]).
    #[doc(alias = "regsPerMultiprocessor")]
    pub regs_per_multiprocessor: i32,
    /// Managed memory can be allocated (`managedMemory`; [`DeviceAttribute::ManagedMemory`]).
    #[doc(alias = "managedMemory")]
    pub managed_memory: bool,
    /// On a multi-GPU board (`isMultiGpuBoard`; [`DeviceAttribute::IsMultiGpuBoard`]).
    #[doc(alias = "isMultiGpuBoard")]
    pub is_multi_gpu_board: bool,
    /// Identifier shared by the GPUs of one board (`multiGpuBoardGroupID`;
    /// [`DeviceAttribute::MultiGpuBoardGroupID`]).
    #[doc(alias = "multiGpuBoardGroupID")]
    pub multi_gpu_board_group_id: i32,
    /// Native atomics over the host link (`hostNativeAtomicSupported`;
    /// [`DeviceAttribute::HostNativeAtomicSupported`]).
    #[doc(alias = "hostNativeAtomicSupported")]
    pub host_native_atomic_supported: bool,
    /// Coherent access to pageable host memory (`pageableMemoryAccess`;
    /// [`DeviceAttribute::PageableMemoryAccess`]).
    #[doc(alias = "pageableMemoryAccess")]
    pub pageable_memory_access: bool,
    /// Managed memory accessed by device and CPU at once (`concurrentManagedAccess`;
    /// [`DeviceAttribute::ConcurrentManagedAccess`]).
    #[doc(alias = "concurrentManagedAccess")]
    pub concurrent_managed_access: bool,
    /// Compute preemption (`computePreemptionSupported`;
    /// [`DeviceAttribute::ComputePreemptionSupported`]).
    #[doc(alias = "computePreemptionSupported")]
    pub compute_preemption_supported: bool,
    /// Registered host memory has the host's address on the device
    /// (`canUseHostPointerForRegisteredMem`;
    /// [`DeviceAttribute::CanUseHostPointerForRegisteredMem`]).
    #[doc(alias = "canUseHostPointerForRegisteredMem")]
    pub can_use_host_pointer_for_registered_mem: bool,
    /// Cooperative launches (`cooperativeLaunch`; [`DeviceAttribute::CooperativeLaunch`]).
    #[doc(alias = "cooperativeLaunch")]
    pub cooperative_launch: bool,
    /// Shared memory per block with opt-in, bytes (`sharedMemPerBlockOptin`;
    /// [`DeviceAttribute::MaxSharedMemoryPerBlockOptin`]).
    #[doc(alias = "sharedMemPerBlockOptin")]
    pub shared_mem_per_block_optin: usize,
    /// Pageable memory reached through the host's page tables
    /// (`pageableMemoryAccessUsesHostPageTables`;
    /// [`DeviceAttribute::PageableMemoryAccessUsesHostPageTables`]).
    #[doc(alias = "pageableMemoryAccessUsesHostPageTables")]
    pub pageable_memory_access_uses_host_page_tables: bool,
    /// Host accesses managed memory without migration (`directManagedMemAccessFromHost`;
    /// [`DeviceAttribute::DirectManagedMemAccessFromHost`]).
    #[doc(alias = "directManagedMemAccessFromHost")]
    pub direct_managed_mem_access_from_host: bool,
    /// Resident blocks per multiprocessor (`maxBlocksPerMultiProcessor`;
    /// [`DeviceAttribute::MaxBlocksPerMultiprocessor`]).
    #[doc(alias = "maxBlocksPerMultiProcessor")]
    pub max_blocks_per_multi_processor: i32,
    /// Largest access policy window, bytes (`accessPolicyMaxWindowSize`;
    /// [`DeviceAttribute::MaxAccessPolicyWindowSize`]).
    #[doc(alias = "accessPolicyMaxWindowSize")]
    pub access_policy_max_window_size: i32,
    /// Shared memory the driver reserves per block, bytes (`reservedSharedMemPerBlock`;
    /// [`DeviceAttribute::ReservedSharedMemoryPerBlock`]).
    #[doc(alias = "reservedSharedMemPerBlock")]
    pub reserved_shared_mem_per_block: usize,
    /// Host memory registration (`hostRegisterSupported`;
    /// [`DeviceAttribute::HostRegisterSupported`]).
    #[doc(alias = "hostRegisterSupported")]
    pub host_register_supported: bool,
    /// Sparse CUDA arrays (`sparseCudaArraySupported`;
    /// [`DeviceAttribute::SparseCudaArraySupported`]).
    #[doc(alias = "sparseCudaArraySupported")]
    pub sparse_cuda_array_supported: bool,
    /// Read-only host registration (`hostRegisterReadOnlySupported`;
    /// [`DeviceAttribute::HostRegisterReadOnlySupported`]).
    #[doc(alias = "hostRegisterReadOnlySupported")]
    pub host_register_read_only_supported: bool,
    /// External timeline semaphores (`timelineSemaphoreInteropSupported`;
    /// [`DeviceAttribute::TimelineSemaphoreInteropSupported`]).
    #[doc(alias = "timelineSemaphoreInteropSupported")]
    pub timeline_semaphore_interop_supported: bool,
    /// Stream-ordered allocation and memory pools (`memoryPoolsSupported`;
    /// [`DeviceAttribute::MemoryPoolsSupported`]).
    #[doc(alias = "memoryPoolsSupported")]
    pub memory_pools_supported: bool,
    /// GPUDirect RDMA (`gpuDirectRDMASupported`; [`DeviceAttribute::GPUDirectRDMASupported`]).
    #[doc(alias = "gpuDirectRDMASupported")]
    pub gpu_direct_rdma_supported: bool,
    /// Bitmask of `cudaFlushGPUDirectRDMAWritesOptions` (`gpuDirectRDMAFlushWritesOptions`;
    /// [`DeviceAttribute::GPUDirectRDMAFlushWritesOptions`]): 1 host, 2 memops.
    #[doc(alias = "gpuDirectRDMAFlushWritesOptions")]
    pub gpu_direct_rdma_flush_writes_options: u32,
    /// A `cudaGPUDirectRDMAWritesOrdering` (`gpuDirectRDMAWritesOrdering`;
    /// [`DeviceAttribute::GPUDirectRDMAWritesOrdering`]): 0 none, 100 owner, 200 all devices.
    #[doc(alias = "gpuDirectRDMAWritesOrdering")]
    pub gpu_direct_rdma_writes_ordering: i32,
    /// Bitmask of `cudaMemAllocationHandleType`s for memory-pool IPC
    /// (`memoryPoolSupportedHandleTypes`; [`DeviceAttribute::MemoryPoolSupportedHandleTypes`]).
    #[doc(alias = "memoryPoolSupportedHandleTypes")]
    pub memory_pool_supported_handle_types: u32,
    /// CUDA arrays with deferred mapping (`deferredMappingCudaArraySupported`;
    /// [`DeviceAttribute::DeferredMappingCudaArraySupported`]).
    #[doc(alias = "deferredMappingCudaArraySupported")]
    pub deferred_mapping_cuda_array_supported: bool,
    /// IPC events (`ipcEventSupported`; [`DeviceAttribute::IpcEventSupport`]).
    #[doc(alias = "ipcEventSupported")]
    pub ipc_event_supported: bool,
    /// Thread-block cluster launches (`clusterLaunch`; [`DeviceAttribute::ClusterLaunch`]).
    #[doc(alias = "clusterLaunch")]
    pub cluster_launch: bool,
    /// Unified function pointers (`unifiedFunctionPointers`; the driver's
    /// `CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS`, which the runtime's attribute list
    /// keeps as reserved number 129).
    #[doc(alias = "unifiedFunctionPointers")]
    pub unified_function_pointers: bool,
    /// A `cudaDeviceNumaConfig`: 0 none, 1 the device memory is a NUMA node
    /// (`deviceNumaConfig`; [`DeviceAttribute::NumaConfig`]).
    #[doc(alias = "deviceNumaConfig")]
    pub device_numa_config: i32,
    /// NUMA node of the device memory, or -1 (`deviceNumaId`; [`DeviceAttribute::NumaId`]).
    #[doc(alias = "deviceNumaId")]
    pub device_numa_id: i32,
    /// Contexts are shared through MPS (`mpsEnabled`; [`DeviceAttribute::MpsEnabled`]).
    #[doc(alias = "mpsEnabled")]
    pub mps_enabled: bool,
    /// NUMA node of the closest host memory, or -1 (`hostNumaId`; [`DeviceAttribute::HostNumaId`]).
    #[doc(alias = "hostNumaId")]
    pub host_numa_id: i32,
    /// PCI device id (high 16 bits) and vendor id (low 16 bits) (`gpuPciDeviceID`;
    /// [`DeviceAttribute::GpuPciDeviceId`]).
    #[doc(alias = "gpuPciDeviceID")]
    pub gpu_pci_device_id: u32,
    /// PCI subsystem id (high 16 bits) and subsystem vendor id (low 16 bits)
    /// (`gpuPciSubsystemID`; [`DeviceAttribute::GpuPciSubsystemId`]).
    #[doc(alias = "gpuPciSubsystemID")]
    pub gpu_pci_subsystem_id: u32,
    /// Host-NUMA memory shared between the nodes of a multi-node system
    /// (`hostNumaMultinodeIpcSupported`; [`DeviceAttribute::HostNumaMultinodeIpcSupported`]).
    #[doc(alias = "hostNumaMultinodeIpcSupported")]
    pub host_numa_multinode_ipc_supported: bool,
}

/// Reads driver attributes of one device.
struct Reader(sys::CUdevice);

impl Reader {
    fn int(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        let mut v = 0i32;
        // SAFETY: valid device handle and out-parameter; every attribute named in this file
        // exists in the driver versions the crate accepts (13.0 and newer).
        driver::check(
            unsafe { sys::cuDeviceGetAttribute(&mut v, attr, self.0) },
            "cuDeviceGetAttribute",
        )?;
        Ok(v)
    }

    fn flag(&self, attr: sys::CUdevice_attribute) -> Result<bool> {
        Ok(self.int(attr)? != 0)
    }

    /// A `size_t` field: C converts the `int` with sign extension, and so does `as`.
    fn size(&self, attr: sys::CUdevice_attribute) -> Result<usize> {
        Ok(self.int(attr)? as usize)
    }

    /// An `unsigned int` field: the driver's `int` bits, reinterpreted as C does.
    fn uint(&self, attr: sys::CUdevice_attribute) -> Result<u32> {
        Ok(self.int(attr)? as u32)
    }

    fn ints<const N: usize>(&self, attrs: [sys::CUdevice_attribute; N]) -> Result<[i32; N]> {
        let mut out = [0i32; N];
        for (o, a) in out.iter_mut().zip(attrs) {
            *o = self.int(a)?;
        }
        Ok(out)
    }

    /// `cuDeviceGetLuid`: Windows only; elsewhere the runtime leaves the fields zero.
    #[cfg(windows)]
    fn luid(&self) -> ([u8; 8], u32) {
        let mut luid = [0 as c_char; 8];
        let mut mask = 0u32;
        // SAFETY: `luid` holds 8 chars, `mask` is a valid out-parameter.
        let r = unsafe { sys::cuDeviceGetLuid(luid.as_mut_ptr(), &mut mask, self.0) };
        // Under TCC the driver has no LUID and refuses; the runtime then reports zeros.
        if driver::rc(r) == 0 {
            (luid.map(|c| c as u8), mask)
        } else {
            ([0; 8], 0)
        }
    }

    #[cfg(not(windows))]
    fn luid(&self) -> ([u8; 8], u32) {
        ([0; 8], 0)
    }
}

impl Device {
    /// One device attribute (`cudaDeviceGetAttribute`). Initialises the driver, not the
    /// device's context.
    ///
    /// # Errors
    /// No usable driver, an invalid device, or the driver's error.
    #[doc(alias = "cudaDeviceGetAttribute")]
    pub fn attribute(self, attr: DeviceAttribute) -> Result<i32> {
        record((|| Reader(self.raw()?).int(attr.to_raw()))())
    }

    /// All properties of the device (`cudaGetDeviceProperties`). Initialises the driver, not
    /// the device's context. Costs one driver call per attribute (about 110): prefer
    /// [`attribute`](Self::attribute) for one value in a hot path.
    ///
    /// # Errors
    /// No usable driver, an invalid device, or the first driver query that fails.
    #[doc(alias = "cudaGetDeviceProperties")]
    pub fn properties(self) -> Result<DeviceProperties> {
        record(self.properties_inner())
    }

    fn properties_inner(self) -> Result<DeviceProperties> {
        use sys::CUdevice_attribute::*;
        let raw = self.raw()?;
        let r = Reader(raw);

        let mut name = [0 as c_char; 256];
        // SAFETY: the buffer holds 256 chars and the driver writes at most that many.
        driver::check(
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, raw) },
            "cuDeviceGetName",
        )?;
        // SAFETY: `CUuuid` is plain bytes, for which zero is valid.
        let mut uuid: sys::CUuuid = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-parameter.
        driver::check(
            unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, raw) },
            "cuDeviceGetUuid",
        )?;
        let mut total_global_mem = 0usize;
        // SAFETY: valid out-parameter.
        driver::check(
            unsafe { sys::cuDeviceTotalMem_v2(&mut total_global_mem, raw) },
            "cuDeviceTotalMem",
        )?;
        let (luid, luid_device_node_mask) = r.luid();

        Ok(DeviceProperties {
            name: super::c_string(&name),
            uuid: uuid.bytes.map(|b| b as u8),
            luid,
            luid_device_node_mask,
            total_global_mem,
            shared_mem_per_block: r.size(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            regs_per_block: r.int(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            warp_size: r.int(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            mem_pitch: r.size(CU_DEVICE_ATTRIBUTE_MAX_PITCH)?,
            max_threads_per_block: r.int(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_dim: r.ints([
                CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
            ])?,
            max_grid_size: r.ints([
                CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
            ])?,
            total_const_mem: r.size(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY)?,
            major: r.int(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            minor: r.int(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            texture_alignment: r.size(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT)?,
            texture_pitch_alignment: r.size(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)?,
            multi_processor_count: r.int(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            integrated: r.flag(CU_DEVICE_ATTRIBUTE_INTEGRATED)?,
            can_map_host_memory: r.flag(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)?,
            max_texture_1d: r.int(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH)?,
            max_texture_1d_mipmap: r.int(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH)?,
            max_texture_2d: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT,
            ])?,
            max_texture_2d_mipmap: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT,
            ])?,
            max_texture_2d_linear: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH,
            ])?,
            max_texture_2d_gather: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT,
            ])?,
            max_texture_3d: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH,
            ])?,
            max_texture_3d_alt: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE,
            ])?,
            max_texture_cubemap: r.int(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH)?,
            max_texture_1d_layered: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS,
            ])?,
            max_texture_2d_layered: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS,
            ])?,
            max_texture_cubemap_layered: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS,
            ])?,
            max_surface_1d: r.int(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH)?,
            max_surface_2d: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT,
            ])?,
            max_surface_3d: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH,
            ])?,
            max_surface_1d_layered: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS,
            ])?,
            max_surface_2d_layered: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS,
            ])?,
            max_surface_cubemap: r.int(CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH)?,
            max_surface_cubemap_layered: r.ints([
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH,
                CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS,
            ])?,
            surface_alignment: r.size(CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT)?,
            concurrent_kernels: r.flag(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS)?,
            ecc_enabled: r.flag(CU_DEVICE_ATTRIBUTE_ECC_ENABLED)?,
            pci_bus_id: r.int(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            pci_device_id: r.int(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
            pci_domain_id: r.int(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            tcc_driver: r.flag(CU_DEVICE_ATTRIBUTE_TCC_DRIVER)?,
            async_engine_count: r.int(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
            unified_addressing: r.flag(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)?,
            memory_bus_width: r.int(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            l2_cache_size: r.int(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            persisting_l2_cache_max_size: r
                .int(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE)?,
            max_threads_per_multi_processor: r
                .int(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            stream_priorities_supported: r.flag(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED)?,
            global_l1_cache_supported: r.flag(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED)?,
            local_l1_cache_supported: r.flag(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED)?,
            shared_mem_per_multiprocessor: r
                .size(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            regs_per_multiprocessor: r.int(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            managed_memory: r.flag(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)?,
            is_multi_gpu_board: r.flag(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD)?,
            multi_gpu_board_group_id: r.int(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID)?,
            host_native_atomic_supported: r
                .flag(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)?,
            pageable_memory_access: r.flag(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)?,
            concurrent_managed_access: r.flag(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)?,
            compute_preemption_supported: r
                .flag(CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED)?,
            can_use_host_pointer_for_registered_mem: r
                .flag(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)?,
            cooperative_launch: r.flag(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)?,
            shared_mem_per_block_optin: r
                .size(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            pageable_memory_access_uses_host_page_tables: r
                .flag(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES)?,
            direct_managed_mem_access_from_host: r
                .flag(CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST)?,
            max_blocks_per_multi_processor: r
                .int(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            access_policy_max_window_size: r
                .int(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)?,
            reserved_shared_mem_per_block: r
                .size(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
            host_register_supported: r.flag(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)?,
            sparse_cuda_array_supported: r.flag(CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED)?,
            host_register_read_only_supported: r
                .flag(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)?,
            timeline_semaphore_interop_supported: r
                .flag(CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED)?,
            memory_pools_supported: r.flag(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)?,
            gpu_direct_rdma_supported: r.flag(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED)?,
            gpu_direct_rdma_flush_writes_options: r
                .uint(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS)?,
            gpu_direct_rdma_writes_ordering: r
                .int(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING)?,
            memory_pool_supported_handle_types: r
                .uint(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)?,
            deferred_mapping_cuda_array_supported: r
                .flag(CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED)?,
            ipc_event_supported: r.flag(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED)?,
            cluster_launch: r.flag(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)?,
            unified_function_pointers: r.flag(CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS)?,
            device_numa_config: r.int(CU_DEVICE_ATTRIBUTE_NUMA_CONFIG)?,
            device_numa_id: r.int(CU_DEVICE_ATTRIBUTE_NUMA_ID)?,
            mps_enabled: r.flag(CU_DEVICE_ATTRIBUTE_MPS_ENABLED)?,
            host_numa_id: r.int(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)?,
            gpu_pci_device_id: r.uint(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID)?,
            gpu_pci_subsystem_id: r.uint(CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID)?,
            host_numa_multinode_ipc_supported: r
                .flag(CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_attribute_maps_to_a_distinct_driver_attribute_of_the_same_number() {
        let mut seen = HashSet::new();
        for &a in DeviceAttribute::ALL {
            let raw = a.to_raw();
            assert!(
                seen.insert(raw as u32),
                "{a:?} maps to a driver attribute twice"
            );
            // In CUDA 13.0 every runtime attribute has the driver's number.
            assert_eq!(a.number(), raw as u32, "{a:?}");
            assert_eq!(DeviceAttribute::from_number(a.number()), Some(a));
        }
        // 147 numbers, less 44 (dropped texture gather flag), 102-105, 107, 110, 136, 137, 146
        // (driver-only) and the runtime's 13 reserved numbers.
        assert_eq!(DeviceAttribute::ALL.len(), 124);
        let mut sorted = DeviceAttribute::ALL.to_vec();
        sorted.sort();
        assert_eq!(sorted, DeviceAttribute::ALL);
    }

    #[test]
    fn numbers_and_names_match_the_runtime() {
        use DeviceAttribute::*;
        // Spot checks against CUDA 13.0's driver_types.h.
        for (a, n, name) in [
            (MaxThreadsPerBlock, 1, "cudaDevAttrMaxThreadsPerBlock"),
            (ComputeMode, 20, "cudaDevAttrComputeMode"),
            (EccEnabled, 32, "cudaDevAttrEccEnabled"),
            (
                MaxTexture2DGatherWidth,
                45,
                "cudaDevAttrMaxTexture2DGatherWidth",
            ),
            (CooperativeLaunch, 95, "cudaDevAttrCooperativeLaunch"),
            (
                MaxBlocksPerMultiprocessor,
                106,
                "cudaDevAttrMaxBlocksPerMultiprocessor",
            ),
            (
                ReservedSharedMemoryPerBlock,
                111,
                "cudaDevAttrReservedSharedMemoryPerBlock",
            ),
            (
                GPUDirectRDMASupported,
                116,
                "cudaDevAttrGPUDirectRDMASupported",
            ),
            (IpcEventSupport, 125, "cudaDevAttrIpcEventSupport"),
            (VulkanCigSupported, 138, "cudaDevAttrVulkanCigSupported"),
            (
                HostMemoryPoolsSupported,
                144,
                "cudaDevAttrHostMemoryPoolsSupported",
            ),
            (
                OnlyPartialHostNativeAtomicSupported,
                147,
                "cudaDevAttrOnlyPartialHostNativeAtomicSupported",
            ),
        ] {
            assert_eq!(a.number(), n);
            assert_eq!(a.name(), name);
        }
        for a in DeviceAttribute::ALL {
            assert_eq!(a.name(), format!("cudaDevAttr{a:?}"));
        }
        for reserved in [
            0, 44, 92, 93, 94, 96, 102, 110, 122, 129, 132, 141, 145, 146, 148,
        ] {
            assert_eq!(DeviceAttribute::from_number(reserved), None, "{reserved}");
        }
    }

    #[test]
    fn no_driver_is_an_error_for_attributes_and_properties() {
        if driver::library_present() {
            return;
        }
        let d = Device { ordinal: 0 };
        assert_eq!(
            d.attribute(DeviceAttribute::WarpSize).unwrap_err(),
            crate::Error::NoDriver
        );
        assert_eq!(d.properties().unwrap_err(), crate::Error::NoDriver);
    }
}
