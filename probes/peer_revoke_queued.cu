// Question (review rev-h15): can a safe call revoke the access a peer copy that is already
// queued relies on, so that the copy faults or copies wrong bytes?
//  A. `Device::disable_peer_access` (cuCtxDisablePeerAccess) while a cuMemcpyPeerAsync from
//     device 1's cuMemAlloc memory into device 0's is queued (held behind a stream wait on a
//     host flag): does the disable block until the copy is done, fail, or return at once, and
//     does the copy then complete with the right bytes and no error?
//  B. `MemPool::set_access` (cuMemPoolSetAccess, PROT_NONE for device 0) on device 1's pool
//     while the same kind of peer copy of pool memory into device 0 is queued. Also (B0): does a
//     peer copy of pool memory work with no access granted at all (the crate's docs say peer
//     copies need no pool access)?
// Why: the crate lets both calls run while such copies are queued (it only orders resets after
// peer readers); if the driver neither waits nor keeps the mapping, a safe program faults.
// Needs 2 peer-capable GPUs.
// Build and run: nvcc -O2 -arch=sm_90 probes/peer_revoke_queued.cu -lcuda -o /tmp/x && /tmp/x
// Result (fifteenth session, 4 x H200, driver 580): B0: a pool peer copy with no access granted
// works. A: cuCtxDisablePeerAccess returned at once (0 ms) with the copy queued; the copy then
// failed with CUDA_ERROR_LAUNCH_FAILED, all 64 MiB wrong, sticky for BOTH devices (so B never
// ran). The crate now waits for such copies before revoking (context::change_peer_path; test
// peer::revoking_peer_access_waits_for_queued_peer_copies).
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    CUresult r_ = (x);                                                          \
    if (r_ != CUDA_SUCCESS) {                                                   \
      const char *n_ = 0;                                                       \
      cuGetErrorName(r_, &n_);                                                  \
      printf("%s:%d %s -> %d %s\n", __FILE__, __LINE__, #x, r_, n_ ? n_ : "?"); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

static const size_t N = 64u << 20;  // bytes per copy

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Queues a held peer copy src(c1) -> dst(c0) on s0, runs `revoke`, releases, checks.
template <class F>
static int held_copy(const char *what, CUcontext c0, CUcontext c1, CUdeviceptr dst,
                     CUdeviceptr src, CUstream s0, volatile unsigned *flag, CUdeviceptr dflag,
                     F revoke) {
  CK(cuCtxSetCurrent(c0));
  CK(cuMemsetD8(dst, 0, N));
  *flag = 0;
  CK(cuStreamWaitValue32(s0, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  CK(cuMemcpyPeerAsync(dst, c0, src, c1, N, s0));
  std::thread rel([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    *flag = 1;
  });
  auto t = std::chrono::steady_clock::now();
  CUresult rr = revoke();
  const char *rn = 0;
  cuGetErrorName(rr, &rn);
  printf("%s: revoke -> %d %s after %.0f ms (3000 ms: it waited for the copy)\n", what, rr,
         rn ? rn : "?", ms_since(t));
  rel.join();
  CUresult sr = cuStreamSynchronize(s0);
  const char *sn = 0;
  cuGetErrorName(sr, &sn);
  std::vector<unsigned char> h(N);
  CUresult cr = cuMemcpyDtoH(h.data(), dst, N);
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) bad += h[i] != (unsigned char)0x5a;
  printf("%s: copy sync -> %d %s, readback %d, %zu wrong bytes of %zu\n", what, sr,
         sn ? sn : "?", cr, bad, N);
  return 0;
}

int main() {
  CK(cuInit(0));
  int n = 0;
  CK(cuDeviceGetCount(&n));
  if (n < 2) {
    printf("needs 2 GPUs (found %d)\n", n);
    return 0;
  }
  CUdevice d0, d1;
  CK(cuDeviceGet(&d0, 0));
  CK(cuDeviceGet(&d1, 1));
  int can = 0;
  CK(cuDeviceCanAccessPeer(&can, d0, d1));
  printf("device 0 can access device 1: %d\n", can);
  CUcontext c0, c1;
  CK(cuDevicePrimaryCtxRetain(&c0, d0));
  CK(cuDevicePrimaryCtxRetain(&c1, d1));

  CK(cuCtxSetCurrent(c1));
  CUdeviceptr src;
  CK(cuMemAlloc(&src, N));
  CK(cuMemsetD8(src, 0x5a, N));
  CUstream s1;
  CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUmemoryPool pool1;
  CK(cuDeviceGetDefaultMemPool(&pool1, d1));
  CUdeviceptr psrc;
  CK(cuMemAllocFromPoolAsync(&psrc, N, pool1, s1));
  CK(cuMemsetD8Async(psrc, 0x5a, N, s1));
  CK(cuStreamSynchronize(s1));

  CK(cuCtxSetCurrent(c0));
  CUdeviceptr dst;
  CK(cuMemAlloc(&dst, N));
  CUstream s0;
  CK(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  unsigned *hflag;
  CK(cuMemHostAlloc((void **)&hflag, 4, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr dflag;
  CK(cuMemHostGetDevicePointer(&dflag, hflag, 0));

  // B0: pool memory peer copy with no access granted, nothing queued before it.
  CK(cuMemsetD8(dst, 0, N));
  CUresult r0 = cuMemcpyPeerAsync(dst, c0, psrc, c1, N, s0);
  CUresult r1 = cuStreamSynchronize(s0);
  printf("B0 pool peer copy without access: enqueue %d, sync %d\n", r0, r1);
  if (r1 != CUDA_SUCCESS) return 0;

  if (can) {
    CK(cuCtxEnablePeerAccess(c1, 0));
    held_copy("A disable_peer_access", c0, c1, dst, src, s0, hflag, dflag,
              [&] { return cuCtxDisablePeerAccess(c1); });
  }
  CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CUmemAccessDesc none = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_NONE};
  CUresult ga = cuMemPoolSetAccess(pool1, &rw, 1);
  printf("B grant device 0 access to device 1's pool: %d\n", ga);
  held_copy("B pool set_access(None)", c0, c1, dst, psrc, s0, hflag, dflag,
            [&] { return cuMemPoolSetAccess(pool1, &none, 1); });
  CUresult e0 = cuCtxSynchronize();
  CK(cuCtxSetCurrent(c1));
  CUresult e1 = cuCtxSynchronize();
  printf("context states after: device 0 %d, device 1 %d\n", e0, e1);
  return 0;
}
