#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>
int main() {
    if (cudaFree(nullptr) != cudaSuccess) { std::printf("init failed\n"); return 2; }
    cudaError_t a = cudaDeviceSynchronize();
    cudaError_t b = cudaStreamSynchronize(0);
    std::printf("%s\t%d\t%d\t%s\n", std::getenv("SHIM_CODE"), (int)a, (int)b, cudaGetErrorName(a));
    return 0;
}
