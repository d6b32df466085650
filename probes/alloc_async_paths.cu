// Whether the driver's stream-ordered allocation is cheaper from a pool handle than from the
// device's current pool: 1 MiB `cuMemAllocAsync` + `cuMemFreeAsync` against
// `cuMemAllocFromPoolAsync` (the device's default pool, which is its current pool here) +
// `cuMemFreeAsync`, and libcudart's `cudaMallocAsync` + `cudaFreeAsync`, in interleaved batches
// of 2000 on one stream; medians of 21 batches, microseconds per pair. (The crate's
// `DeviceBuffer::new_async` makes the first call; `cudaMallocAsync` must keep the current
// pool's semantics, so a faster pool-handle path would need the current pool cached.) Also
// `cuMemAlloc` with `cuMemFree`, and with `cuMemFreeAsync` in an idle stream, which the crate's
// drop of an unused `DeviceBuffer::new` makes (36.8 us per pair in the memory bench against
// 5.4 us for cuMemAlloc + cuMemFree). And `cuDeviceGetMemPool` + `cuMemAllocFromPoolAsync`
// + `cuMemFreeAsync`: the current pool read at every call, which keeps `cudaMallocAsync`'s
// semantics with no cache (eleventh session: libcudart's pair, 0.70 us, was faster than the
// driver's `cuMemAllocAsync` pair, 0.89 us, and as fast as the pool-handle pair, 0.67 us). The
// ways take turns going first, round by round.
//
//   nvcc -O2 -arch=sm_90 alloc_async_paths.cu -lcuda -o /tmp/alloc_async_paths && /tmp/alloc_async_paths
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      printf("alloc %s failed: %d\n", #x, (int)r_);                           \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main() {
  const size_t bytes = 1 << 20;
  const int batch = 2000, rounds = 21;
  cudaFree(nullptr);  // the runtime's primary context, current on this thread
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  CUmemoryPool pool;
  CK(cuDeviceGetDefaultMemPool(&pool, dev));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<double> t_current, t_pool, t_rt, t_free, t_free_async, t_get_pool;
  for (int round = 0; round < rounds; round++) {
    for (int turn = 0; turn < 6; turn++) {
      int way = (turn + round) % 6;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; i++) {
        CUdeviceptr p;
        if (way == 0) {
          CK(cuMemAllocAsync(&p, bytes, s));
          CK(cuMemFreeAsync(p, s));
        } else if (way == 1) {
          CK(cuMemAllocFromPoolAsync(&p, bytes, pool, s));
          CK(cuMemFreeAsync(p, s));
        } else if (way == 5) {
          CUmemoryPool current;
          CK(cuDeviceGetMemPool(&current, dev));
          CK(cuMemAllocFromPoolAsync(&p, bytes, current, s));
          CK(cuMemFreeAsync(p, s));
        } else if (way == 3) {
          // What `cudaMalloc` + `cudaFree` cost (the free waits for the whole device).
          CK(cuMemAlloc(&p, bytes));
          CK(cuMemFree(p));
        } else if (way == 4) {
          // What the crate does for a buffer of `cudaMalloc` dropped unused: a stream-ordered
          // free in a stream of its own, so that the drop waits for no other work.
          CK(cuMemAlloc(&p, bytes));
          CK(cuMemFreeAsync(p, s));
        } else {
          void *q;
          if (cudaMallocAsync(&q, bytes, (cudaStream_t)s) != cudaSuccess ||
              cudaFreeAsync(q, (cudaStream_t)s) != cudaSuccess) {
            printf("alloc cudaMallocAsync failed\n");
            return 1;
          }
        }
      }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / batch;
      CK(cuStreamSynchronize(s));
      (way == 0   ? t_current
       : way == 1 ? t_pool
       : way == 2 ? t_rt
       : way == 3 ? t_free
       : way == 4 ? t_free_async
                  : t_get_pool)
          .push_back(us);
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  printf("alloc cuMemAllocAsync+cuMemFreeAsync %.3f us\n", med(t_current));
  printf("alloc cuMemAllocFromPoolAsync(default)+cuMemFreeAsync %.3f us\n", med(t_pool));
  printf("alloc cuDeviceGetMemPool+cuMemAllocFromPoolAsync+cuMemFreeAsync %.3f us\n", med(t_get_pool));
  printf("alloc cudaMallocAsync+cudaFreeAsync %.3f us\n", med(t_rt));
  printf("alloc cuMemAlloc+cuMemFree %.3f us\n", med(t_free));
  printf("alloc cuMemAlloc+cuMemFreeAsync %.3f us\n", med(t_free_async));
  return 0;
}
