// Does a cuCtxSynchronize already under way (blocked on work, called from another thread in
// relaxed mode, as the crate's settle thread calls it) invalidate a capture begun during it, or
// fail? (Twelfth session: a synchronize *called* while a capture is open fails with 900 and
// invalidates it, probes/per_thread_settle_gpu.cu; the crate re-checks right before the call,
// and this probe says whether the instant between check and call is the only window.)
// Build: nvcc -O2 -arch=sm_90 -o /tmp/csc probes/ctxsync_during_capture_begin.cu -lcuda
#include <chrono>
#include <cstdio>
#include <thread>
#include <cuda.h>
#include <cuda_runtime.h>
using clk = std::chrono::steady_clock;
static double ms(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }
__global__ void spin(long long n) { long long t = clock64(); while (clock64() - t < n) {} }
__global__ void k(float* p) { p[threadIdx.x] += 1.0f; }
int main() {
  cudaFree(0);
  float* d; cudaMalloc(&d, 4096);
  int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  long long half_second = (long long)clock_khz * 500;
  const char* names[3] = {"global", "thread-local", "relaxed"};
  cudaStreamCaptureMode modes[3] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
  for (int m = 0; m < 3; m++) {
    cudaStream_t busy, cap;
    cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking);
    spin<<<1, 1, 0, busy>>>(half_second);
    int sync_rc = -1; double sync_ms = 0;
    auto t0 = clk::now();
    std::thread syncer([&] {
      cudaFree(0);
      CUstreamCaptureMode r = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&r);
      auto t = clk::now(); sync_rc = cuCtxSynchronize(); sync_ms = ms(t);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the synchronize is blocked on the spin
    int b = cudaStreamBeginCapture(cap, modes[m]);
    double begun_at = ms(t0);
    k<<<1, 32, 0, cap>>>(d);
    int launch_rc = cudaGetLastError();
    syncer.join();  // wait for the synchronize to return while the capture is open
    cudaGraph_t g = nullptr;
    int e = cudaStreamEndCapture(cap, &g);
    printf("capture %s begun at %.1f ms during a synchronize: begin=%d launch=%d; synchronize rc=%d after %.1f ms; end rc=%d graph=%s\n",
           names[m], begun_at, b, launch_rc, sync_rc, sync_ms, e, g ? "yes" : "no");
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    cudaStreamDestroy(busy); cudaStreamDestroy(cap);
  }
  return 0;
}
