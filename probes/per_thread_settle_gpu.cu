// GPU questions of the per-thread branch (third review, eleventh session; not yet run). Build: nvcc -O2 -arch=sm_90 -o /tmp/p probes/per_thread_settle_gpu.cu -lcuda
// (1) does cuEventCreate/cuEventRecord on the per-thread stream block while a host function runs
// at its head (bury_later's drop-time fence)? (2) does a relaxed-mode cuCtxSynchronize from
// another thread (the settle thread) fail or invalidate an open capture (global, thread-local,
// per-thread stream)? (3) does cuCtxSynchronize wait for another thread's per-thread work?
// Results (twelfth session, 2 x H200, driver 580): (1) no: create and record return at once
// (0.0 ms) while the host function blocks the per-thread stream; (2) yes: the other thread's
// relaxed cuCtxSynchronize fails with 900 (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and the
// capture's end then fails with 901 (invalidated), in every mode, so the crate's settle thread
// must never synchronize while a capture is open (it does not: queue::no_capture); (3) yes: it
// waited 757 ms for the other thread's per-thread spin.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>
using clk = std::chrono::steady_clock;
static double ms(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }
static std::atomic<int> flag{0};
static void CUDART_CB waiter(void*) { auto t = clk::now(); while (!flag.load() && ms(t) < 4000) usleep(100); }
__global__ void spin(long long n) { long long t = clock64(); while (clock64() - t < n) {} }
__global__ void k(float* p) { if (p) p[threadIdx.x] += 1.0f; }
static void relaxed_sync(int* rc, double* t) {
  cudaFree(0);
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m);
  auto t0 = clk::now(); *rc = cuCtxSynchronize(); *t = ms(t0);
}
int main() {
  cudaFree(0);
  float* d; cudaMalloc(&d, 4096);
  k<<<1, 32, 0, cudaStreamPerThread>>>(d);
  cudaDeviceSynchronize();
  CUevent spare; cuEventCreate(&spare, CU_EVENT_DISABLE_TIMING);
  for (int round = 0; round < 2; round++) {
    flag = 0;
    cudaLaunchHostFunc(cudaStreamPerThread, waiter, nullptr);
    k<<<1, 32, 0, cudaStreamPerThread>>>(d);
    usleep(100000);
    auto t = clk::now();
    CUevent ev = spare; int rc1 = 0;
    if (round == 0) rc1 = cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    double tc = ms(t);
    int rc2 = cuEventRecord(ev, CU_STREAM_PER_THREAD);
    printf("round %d: create rc=%d %.1f ms, record(per-thread) rc=%d %.1f ms (host fn waits for a flag set after this, 4 s cap)\n",
           round, rc1, tc, rc2, ms(t));
    flag = 1;
    cudaStreamSynchronize(cudaStreamPerThread);
  }
  {
    std::atomic<int> st{0};
    std::thread t([&] { spin<<<1, 1, 0, cudaStreamPerThread>>>(1500000000LL); st = 1; while (st != 2) usleep(100); cudaStreamSynchronize(cudaStreamPerThread); });
    while (!st) usleep(100);
    auto t0 = clk::now(); int rc = cuCtxSynchronize();
    printf("cuCtxSynchronize vs another thread's per-thread spin: rc=%d %.1f ms\n", rc, ms(t0));
    st = 2; t.join();
  }
  for (int mode = 0; mode < 3; mode++) {
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStream_t cs = mode == 2 ? cudaStreamPerThread : s;
    int rb = cudaStreamBeginCapture(cs, mode == 1 ? cudaStreamCaptureModeThreadLocal : cudaStreamCaptureModeGlobal);
    k<<<1, 32, 0, cs>>>(d);
    int rc = -1; double ts = 0;
    std::thread o(relaxed_sync, &rc, &ts); o.join();
    k<<<1, 32, 0, cs>>>(d);
    cudaGraph_t g = nullptr; int re = cudaStreamEndCapture(cs, &g);
    printf("capture %s: begin=%d; other thread relaxed cuCtxSynchronize rc=%d %.1f ms; end rc=%d graph=%p\n",
           mode == 0 ? "global" : mode == 1 ? "thread-local" : "per-thread stream, global", rb, rc, ts, re, (void*)g);
    cudaGetLastError(); cudaDeviceSynchronize();
  }
  return 0;
}
