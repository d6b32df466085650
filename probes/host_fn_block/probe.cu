// Which calls block while a host function runs at the head of a stream? (GPU tests saw drops of
// an executable graph and of a texture object take as long as a stalled host function.)
// Each call is timed with a host function sleeping 2 s at the head of stream s, and a kernel
// (or graph launch) queued behind it.
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>
using clk = std::chrono::steady_clock;
static void CUDART_CB sleeper(void*) { sleep(2); }
__device__ int table[8192];
__global__ void k(float* p) { if (p) p[threadIdx.x] += 1.0f; }
static double ms(clk::time_point t) {
  return std::chrono::duration<double, std::milli>(clk::now() - t).count();
}
#define T(label, call) do { auto t0 = clk::now(); int rc = (int)(call); \
  printf("%-44s rc=%d %8.1f ms\n", label, rc, ms(t0)); } while (0)
int main() {
  cudaStream_t s, other;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  float* d; cudaMalloc(&d, 4096);
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  cudaGraphNode_t n; cudaKernelNodeParams kp = {};
  void* args[] = {&d}; kp.func = (void*)k; kp.gridDim = 1; kp.blockDim = 32; kp.kernelParams = args;
  cudaGraphAddKernelNode(&n, g, nullptr, 0, &kp);
  cudaGraphExec_t e; cudaGraphInstantiate(&e, g, 0);
  cudaArray_t arr; cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaMallocArray(&arr, &cd, 64, 64);
  cudaResourceDesc rd = {}; rd.resType = cudaResourceTypeArray; rd.res.array.array = arr;
  cudaTextureDesc td = {};
  cudaTextureObject_t tex; cudaCreateTextureObject(&tex, &rd, &td, nullptr);
  cudaDeviceSynchronize();
  int* pinned; cudaMallocHost(&pinned, 8192 * 4);
  float* spare; cudaMalloc(&spare, 1 << 20);
  cudaDeviceSynchronize();
  {
    printf("-- round c: host fn at the head of s, creations and copies elsewhere\n");
    cudaLaunchHostFunc(s, sleeper, nullptr);
    k<<<1, 32, 0, s>>>(d);
    cudaTextureObject_t t2;
    T("cudaCreateTextureObject", cudaCreateTextureObject(&t2, &rd, &td, nullptr));
    cudaArray_t a2;
    T("cudaMallocArray", cudaMallocArray(&a2, &cd, 64, 64));
    T("cudaMemcpyToSymbolAsync (pinned, other)", cudaMemcpyToSymbolAsync(table, pinned, 4000 * 4, 40, cudaMemcpyHostToDevice, other));
    T("cudaMemcpyAsync HtoD (pinned, other)", cudaMemcpyAsync(d, pinned, 4096, cudaMemcpyHostToDevice, other));
    T("cudaMemcpyToSymbolAsync (pinned, s)", cudaMemcpyToSymbolAsync(table, pinned, 4000 * 4, 40, cudaMemcpyHostToDevice, s));
    T("cuMemcpyHtoDAsync (pinned, s)", cuMemcpyHtoDAsync((CUdeviceptr)d, pinned, 4096, (CUstream)s));
    T("cudaFreeAsync (cudaMalloc memory, other)", cudaFreeAsync(spare, other));
    T("cudaStreamSynchronize(s)", cudaStreamSynchronize(s));
  }
  for (int round = 0; round < 2; round++) {
    printf("-- round %d: host fn at the head of s, %s behind it\n", round, round ? "a graph launch" : "a kernel");
    cudaLaunchHostFunc(s, sleeper, nullptr);
    if (round) cudaGraphLaunch(e, s); else k<<<1, 32, 0, s>>>(d);
    CUevent ev;
    T("cuEventCreate", cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    T("cuEventRecord(s)", cuEventRecord(ev, (CUstream)s));
    T("cuEventRecord(other)", cuEventRecord(ev, (CUstream)other));
    T("cuEventQuery", cuEventQuery(ev));
    T("cuEventDestroy", cuEventDestroy(ev));
    T("cuStreamQuery(s)", cuStreamQuery((CUstream)s));
    T("kernel on other", (k<<<1, 32, 0, other>>>(d), cudaGetLastError()));
    if (round) {
      T("cudaGraphExecDestroy (launch pending)", cudaGraphExecDestroy(e));
    } else {
      T("cudaDestroyTextureObject", cudaDestroyTextureObject(tex));
      float* d2; T("cudaMalloc", cudaMalloc(&d2, 1 << 20));
      T("cudaFree (unused)", cudaFree(d2));
      T("cudaMemcpy2DToArray (pageable, sync)", cudaMemcpy2DToArray(arr, 0, 0, (void*)new float[64*64], 256, 256, 64, cudaMemcpyHostToDevice));
    }
    T("cudaStreamSynchronize(s)", cudaStreamSynchronize(s));
  }
  return 0;
}
