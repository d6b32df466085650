// Why a `cudaMalloc`-style allocation freed with `cuMemFreeAsync` in an idle stream of its own
// (the crate's drop of an unused `DeviceBuffer::new`) costs about 21 us per allocate + free pair
// against 3.4 us for `cuMemAlloc` + `cuMemFree` (memory bench, H200, driver 580, ninth
// session), and whether a query of that stream before the next allocation (letting the driver
// take back what the stream has freed) brings it down. 1 MiB, batches of 200, medians of 11
// interleaved rounds; per way the allocation and the free are timed apart, and the device
// memory missing at the end of a batch (before any wait) is printed.
//
// Seen (ninth session, an H200 of the pair, driver 580.159.04): cuMemAlloc + cuMemFree 57 + 49
// us; cuMemAlloc + cuMemFreeAsync 33 + 0.5 us, and every freed MiB still missing at the end of
// the batch (200 of 200) whether or not the stream is queried before or after each pair: the
// query does not make the driver reuse the memory (so the crate does not make one). The crate's
// bench on the same machine: 57.8 us per allocate + drop against 122.8 (driver) and 121.3
// (libcudart); on the machine of the run before it, 24.9 against 3.4 and 3.5. The figure moves
// with the machine's state by 30x for the driver's own pair.
//
//   nvcc -O2 -arch=sm_90 free_async_reuse.cu -lcuda -o /tmp/free_async_reuse && /tmp/free_async_reuse
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda.h>

#define CK(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      printf("free %s failed: %d\n", #x, (int)r_);                            \
      return 1;                                                               \
    }                                                                         \
  } while (0)

using clk = std::chrono::steady_clock;
static double us(clk::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

int main() {
  const size_t bytes = 1 << 20;
  const int batch = 200, rounds = 11, ways = 4;
  const char *names[ways] = {"cuMemAlloc + cuMemFree", "cuMemAlloc + cuMemFreeAsync",
                             "cuStreamQuery + cuMemAlloc + cuMemFreeAsync",
                             "cuMemAlloc + cuMemFreeAsync + cuStreamQuery"};
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<double> ta[ways], tf[ways], miss[ways];
  for (int round = 0; round < rounds; round++) {
    for (int way = 0; way < ways; way++) {
      CK(cuCtxSynchronize());
      CK(cuStreamSynchronize(s));
      size_t free0, free1, total;
      CK(cuMemGetInfo(&free0, &total));
      double a = 0, f = 0;
      for (int i = 0; i < batch; i++) {
        CUdeviceptr p;
        auto t0 = clk::now();
        if (way == 2) cuStreamQuery(s);
        CK(cuMemAlloc(&p, bytes));
        auto t1 = clk::now();
        if (way == 0) {
          CK(cuMemFree(p));
        } else {
          CK(cuMemFreeAsync(p, s));
          if (way == 3) cuStreamQuery(s);
        }
        auto t2 = clk::now();
        a += us(t1 - t0);
        f += us(t2 - t1);
      }
      CK(cuMemGetInfo(&free1, &total));
      ta[way].push_back(a / batch);
      tf[way].push_back(f / batch);
      miss[way].push_back(free0 > free1 ? double(free0 - free1) / (1 << 20) : 0.0);
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int way = 0; way < ways; way++)
    printf("free %s: alloc %.3f us, free %.3f us, pair %.3f us, %.0f MiB missing after %d pairs\n",
           names[way], med(ta[way]), med(tf[way]), med(ta[way]) + med(tf[way]), med(miss[way]),
           batch);
  return 0;
}
