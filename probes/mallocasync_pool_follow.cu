// Does libcudart's cudaMallocAsync follow a pool made current through the driver
// (cuDeviceSetMemPool behind the runtime's back), or a cached pool? And what does each
// allocation path cost, interleaved (twelfth session).
// Build: nvcc -O2 -arch=sm_90 -o /tmp/mpf probes/mallocasync_pool_follow.cu -lcuda
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
using clk = std::chrono::steady_clock;
static CUmemoryPool pool_of(void* p) {
  CUmemoryPool m = nullptr;
  CUresult r = cuPointerGetAttribute(&m, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)p);
  if (r) printf("  (cuPointerGetAttribute rc=%d)\n", r);
  return m;
}
int main() {
  cudaFree(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CUdevice dev; cuDeviceGet(&dev, 0);
  CUmemoryPool def = nullptr; cuDeviceGetDefaultMemPool(&def, dev);
  void* p = nullptr;
  cudaMallocAsync(&p, 1 << 20, s); cudaStreamSynchronize(s);
  printf("default pool %p; cudaMallocAsync before: pool %p\n", (void*)def, (void*)pool_of(p));
  cudaFreeAsync(p, s);
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE; props.location.id = 0;
  CUmemoryPool mine = nullptr;
  printf("cuMemPoolCreate rc=%d %p\n", cuMemPoolCreate(&mine, &props), (void*)mine);
  printf("cuDeviceSetMemPool rc=%d\n", cuDeviceSetMemPool(dev, mine));
  cudaMallocAsync(&p, 1 << 20, s); cudaStreamSynchronize(s);
  CUmemoryPool got = pool_of(p);
  printf("cudaMallocAsync after driver set: pool %p -> %s\n", (void*)got,
         got == mine ? "FOLLOWS the driver's current pool" : got == def ? "still the default (cached)" : "other");
  cudaFreeAsync(p, s); cudaStreamSynchronize(s);
  cudaMemPool_t rp = nullptr; cudaDeviceGetMemPool(&rp, 0);
  printf("cudaDeviceGetMemPool says %p\n", (void*)rp);
  cuDeviceSetMemPool(dev, def);
  cudaMallocAsync(&p, 1 << 20, s); cudaStreamSynchronize(s);
  printf("after setting back to default: %p\n", (void*)pool_of(p));
  cudaFreeAsync(p, s); cudaStreamSynchronize(s);
  // Interleaved timings, 1 MiB pairs.
  const int n = 20000;
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  const char* names[4] = {"cudaMallocAsync+cudaFreeAsync", "cuMemAllocAsync+cuMemFreeAsync",
                          "cuMemAllocFromPoolAsync(def)+cuMemFreeAsync", "cuDeviceGetMemPool+FromPool+Free"};
  for (int round = 0; round < 10; round++) {
    for (int w0 = 0; w0 < 4; w0++) {
      int w = (w0 + round) % 4;
      auto t = clk::now();
      for (int i = 0; i < n; i++) {
        CUdeviceptr d = 0;
        if (w == 0) { cudaMallocAsync((void**)&d, 1 << 20, s); cudaFreeAsync((void*)d, s); }
        else if (w == 1) { cuMemAllocAsync(&d, 1 << 20, (CUstream)s); cuMemFreeAsync(d, (CUstream)s); }
        else if (w == 2) { cuMemAllocFromPoolAsync(&d, 1 << 20, def, (CUstream)s); cuMemFreeAsync(d, (CUstream)s); }
        else { CUmemoryPool c; cuDeviceGetMemPool(&c, dev); cuMemAllocFromPoolAsync(&d, 1 << 20, c, (CUstream)s); cuMemFreeAsync(d, (CUstream)s); }
      }
      cudaStreamSynchronize(s);
      double us = std::chrono::duration<double, std::micro>(clk::now() - t).count() / n;
      if (us < best[w]) best[w] = us;
    }
  }
  for (int w = 0; w < 4; w++) printf("pair %-45s best %.3f us\n", names[w], best[w]);
  return 0;
}
