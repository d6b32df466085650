// Prints every field of libcudart's cudaDeviceProp (CUDA 13.0) for each device, one
// `prop <cName> <value>` line each, in the format of `examples/device_query.rs`:
//
//   nvcc -O2 -arch=sm_90 device_props.cu -o device_props
//   diff <(cargo run --example device_query | grep ^prop) <(./device_props | grep ^prop)
//
// Arrays are space-separated, uuid and luid are lowercase hex digits, name is verbatim.
#include <cstdio>
#include <cuda_runtime.h>

static void print_hex(const char *field, const char *bytes, int n) {
    printf("prop %s ", field);
    for (int i = 0; i < n; ++i) printf("%02x", (unsigned)(unsigned char)bytes[i]);
    printf("\n");
}

static void print_ints(const char *field, const int *v, int n) {
    printf("prop %s", field);
    for (int i = 0; i < n; ++i) printf(" %d", v[i]);
    printf("\n");
}

int main() {
    int driver = 0, runtime = 0, count = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("driver version %d, runtime version %d\n", driver, runtime);
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        fprintf(stderr, "device_props: cudaGetDeviceCount: %s\n", cudaGetErrorName(e));
        return 1;
    }
    for (int d = 0; d < count; ++d) {
        cudaDeviceProp p;
        e = cudaGetDeviceProperties(&p, d);
        if (e != cudaSuccess) {
            fprintf(stderr, "device_props: cudaGetDeviceProperties(%d): %s\n", d,
                    cudaGetErrorName(e));
            return 1;
        }
        printf("Device %d: \"%s\"\n", d, p.name);
        printf("prop name %s\n", p.name);
        print_hex("uuid", p.uuid.bytes, 16);
        print_hex("luid", p.luid, 8);
        printf("prop luidDeviceNodeMask %u\n", p.luidDeviceNodeMask);
        printf("prop totalGlobalMem %zu\n", p.totalGlobalMem);
        printf("prop sharedMemPerBlock %zu\n", p.sharedMemPerBlock);
        printf("prop regsPerBlock %d\n", p.regsPerBlock);
        printf("prop warpSize %d\n", p.warpSize);
        printf("prop memPitch %zu\n", p.memPitch);
        printf("prop maxThreadsPerBlock %d\n", p.maxThreadsPerBlock);
        print_ints("maxThreadsDim", p.maxThreadsDim, 3);
        print_ints("maxGridSize", p.maxGridSize, 3);
        printf("prop totalConstMem %zu\n", p.totalConstMem);
        printf("prop major %d\n", p.major);
        printf("prop minor %d\n", p.minor);
        printf("prop textureAlignment %zu\n", p.textureAlignment);
        printf("prop texturePitchAlignment %zu\n", p.texturePitchAlignment);
        printf("prop multiProcessorCount %d\n", p.multiProcessorCount);
        printf("prop integrated %d\n", p.integrated);
        printf("prop canMapHostMemory %d\n", p.canMapHostMemory);
        printf("prop maxTexture1D %d\n", p.maxTexture1D);
        printf("prop maxTexture1DMipmap %d\n", p.maxTexture1DMipmap);
        print_ints("maxTexture2D", p.maxTexture2D, 2);
        print_ints("maxTexture2DMipmap", p.maxTexture2DMipmap, 2);
        print_ints("maxTexture2DLinear", p.maxTexture2DLinear, 3);
        print_ints("maxTexture2DGather", p.maxTexture2DGather, 2);
        print_ints("maxTexture3D", p.maxTexture3D, 3);
        print_ints("maxTexture3DAlt", p.maxTexture3DAlt, 3);
        printf("prop maxTextureCubemap %d\n", p.maxTextureCubemap);
        print_ints("maxTexture1DLayered", p.maxTexture1DLayered, 2);
        print_ints("maxTexture2DLayered", p.maxTexture2DLayered, 3);
        print_ints("maxTextureCubemapLayered", p.maxTextureCubemapLayered, 2);
        printf("prop maxSurface1D %d\n", p.maxSurface1D);
        print_ints("maxSurface2D", p.maxSurface2D, 2);
        print_ints("maxSurface3D", p.maxSurface3D, 3);
        print_ints("maxSurface1DLayered", p.maxSurface1DLayered, 2);
        print_ints("maxSurface2DLayered", p.maxSurface2DLayered, 3);
        printf("prop maxSurfaceCubemap %d\n", p.maxSurfaceCubemap);
        print_ints("maxSurfaceCubemapLayered", p.maxSurfaceCubemapLayered, 2);
        printf("prop surfaceAlignment %zu\n", p.surfaceAlignment);
        printf("prop concurrentKernels %d\n", p.concurrentKernels);
        printf("prop ECCEnabled %d\n", p.ECCEnabled);
        printf("prop pciBusID %d\n", p.pciBusID);
        printf("prop pciDeviceID %d\n", p.pciDeviceID);
        printf("prop pciDomainID %d\n", p.pciDomainID);
        printf("prop tccDriver %d\n", p.tccDriver);
        printf("prop asyncEngineCount %d\n", p.asyncEngineCount);
        printf("prop unifiedAddressing %d\n", p.unifiedAddressing);
        printf("prop memoryBusWidth %d\n", p.memoryBusWidth);
        printf("prop l2CacheSize %d\n", p.l2CacheSize);
        printf("prop persistingL2CacheMaxSize %d\n", p.persistingL2CacheMaxSize);
        printf("prop maxThreadsPerMultiProcessor %d\n", p.maxThreadsPerMultiProcessor);
        printf("prop streamPrioritiesSupported %d\n", p.streamPrioritiesSupported);
        printf("prop globalL1CacheSupported %d\n", p.globalL1CacheSupported);
        printf("prop localL1CacheSupported %d\n", p.localL1CacheSupported);
        printf("prop sharedMemPerMultiprocessor %zu\n", p.sharedMemPerMultiprocessor);
        printf("prop regsPerMultiprocessor %d\n", p.regsPerMultiprocessor);
        printf("prop managedMemory %d\n", p.managedMemory);
        printf("prop isMultiGpuBoard %d\n", p.isMultiGpuBoard);
        printf("prop multiGpuBoardGroupID %d\n", p.multiGpuBoardGroupID);
        printf("prop hostNativeAtomicSupported %d\n", p.hostNativeAtomicSupported);
        printf("prop pageableMemoryAccess %d\n", p.pageableMemoryAccess);
        printf("prop concurrentManagedAccess %d\n", p.concurrentManagedAccess);
        printf("prop computePreemptionSupported %d\n", p.computePreemptionSupported);
        printf("prop canUseHostPointerForRegisteredMem %d\n", p.canUseHostPointerForRegisteredMem);
        printf("prop cooperativeLaunch %d\n", p.cooperativeLaunch);
        printf("prop sharedMemPerBlockOptin %zu\n", p.sharedMemPerBlockOptin);
        printf("prop pageableMemoryAccessUsesHostPageTables %d\n", p.pageableMemoryAccessUsesHostPageTables);
        printf("prop directManagedMemAccessFromHost %d\n", p.directManagedMemAccessFromHost);
        printf("prop maxBlocksPerMultiProcessor %d\n", p.maxBlocksPerMultiProcessor);
        printf("prop accessPolicyMaxWindowSize %d\n", p.accessPolicyMaxWindowSize);
        printf("prop reservedSharedMemPerBlock %zu\n", p.reservedSharedMemPerBlock);
        printf("prop hostRegisterSupported %d\n", p.hostRegisterSupported);
        printf("prop sparseCudaArraySupported %d\n", p.sparseCudaArraySupported);
        printf("prop hostRegisterReadOnlySupported %d\n", p.hostRegisterReadOnlySupported);
        printf("prop timelineSemaphoreInteropSupported %d\n", p.timelineSemaphoreInteropSupported);
        printf("prop memoryPoolsSupported %d\n", p.memoryPoolsSupported);
        printf("prop gpuDirectRDMASupported %d\n", p.gpuDirectRDMASupported);
        printf("prop gpuDirectRDMAFlushWritesOptions %u\n", p.gpuDirectRDMAFlushWritesOptions);
        printf("prop gpuDirectRDMAWritesOrdering %d\n", p.gpuDirectRDMAWritesOrdering);
        printf("prop memoryPoolSupportedHandleTypes %u\n", p.memoryPoolSupportedHandleTypes);
        printf("prop deferredMappingCudaArraySupported %d\n", p.deferredMappingCudaArraySupported);
        printf("prop ipcEventSupported %d\n", p.ipcEventSupported);
        printf("prop clusterLaunch %d\n", p.clusterLaunch);
        printf("prop unifiedFunctionPointers %d\n", p.unifiedFunctionPointers);
        printf("prop deviceNumaConfig %d\n", p.deviceNumaConfig);
        printf("prop deviceNumaId %d\n", p.deviceNumaId);
        printf("prop mpsEnabled %d\n", p.mpsEnabled);
        printf("prop hostNumaId %d\n", p.hostNumaId);
        printf("prop gpuPciDeviceID %u\n", p.gpuPciDeviceID);
        printf("prop gpuPciSubsystemID %u\n", p.gpuPciSubsystemID);
        printf("prop hostNumaMultinodeIpcSupported %d\n", p.hostNumaMultinodeIpcSupported);
    }
    return 0;
}
