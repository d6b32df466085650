// Does an event recorded in the legacy default stream by thread B complete only after the work
// thread A queued earlier on its per-thread default stream? (Yes on the H100, driver 580: 200 ms.
// The tenth session's fallback fence for a use on another thread's per-thread stream relied on it;
// that fallback was reverted: such a record also holds back every blocking stream's later work,
// and could hang a valid program.) nvcc -O2 -arch=sm_90 legacy_covers_per_thread.cu
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cuda_runtime.h>

__global__ void spin(long long ns, int* flag) {
  long long t0 = clock64();
  // ~1.7 GHz: cycles roughly ns * 1.7; use globaltimer for wall time instead.
  unsigned long long start; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) { unsigned long long now; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); if (now - start > (unsigned long long)ns) break; }
  *flag = 1; (void)t0;
}

int main() {
  int* flag; cudaMallocManaged(&flag, 4); *flag = 0;
  cudaFree(0);
  std::atomic<int> queued{0};
  std::thread a([&] {
    spin<<<1, 1, 0, cudaStreamPerThread>>>(200000000ll, flag);
    queued = 1;
    cudaStreamSynchronize(cudaStreamPerThread);
  });
  while (!queued) {}
  cudaEvent_t ev; cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  auto t = std::chrono::steady_clock::now();
  cudaEventRecord(ev, cudaStreamLegacy);
  cudaEventSynchronize(ev);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  int f = *(volatile int*)flag;
  printf("legacy-stream event from another thread completed after %.1f ms; A's kernel done: %d -> %s\n",
         ms, f, (f == 1 && ms > 150) ? "COVERS per-thread work" : "DOES NOT cover");
  a.join();
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
