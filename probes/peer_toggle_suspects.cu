// Which driver behaviour made the crate's test peer::peer_access_toggled_while_another_thread_copies
// fail (fifteenth session, H200 x2, driver 580: a peer copy's sync returned
// CUDA_ERROR_LAUNCH_FAILED, sticky, within 0.4 s while another thread toggled peer and pool
// access; only revocations wait for queued copies in the crate)? One case per process (a
// sticky error ends the context): argv[1] =
//   b   a copy of device 1's POOL memory into device 0 with context peer access 0->1 ON and the
//       pool's access for device 0 NONE (the crate's docs say peer copies need no pool access;
//       true with peer access off, probe peer_revoke_queued.cu B0)
//   b2  as b, the pool's access granted read-write then set back to none before the copy
//   a1  a plain peer copy queued (held behind a stream wait on a host flag) with peer access
//       OFF, then cuCtxEnablePeerAccess, then the copy released
//   a2  a pool peer copy queued with the pool's access for device 0 NONE (peer access off),
//       then cuMemPoolSetAccess read-write, then the copy released
//   c   the crate's protocol (main at 7b7112a) replayed on the driver alone, two threads: one
//       queues 200 checked copies (plain and pool memory alternately, each queued under a
//       mutex, then synchronised and compared); the other loops: under the mutex
//       cuCtxSynchronize + cuCtxDisablePeerAccess, under the mutex cuCtxSynchronize + pool
//       access none, then enable and grant without waiting
//   c2  as c, enabling and granting also under the mutex after cuCtxSynchronize
// Prints each step's result and "copy ok" or the wrong byte count.
//   nvcc -O2 -arch=sm_90 probes/peer_toggle_suspects.cu -lcuda -o /tmp/pts
//   for c in b b2 a1 a2 c c2; do /tmp/pts $c; done
// Results (sixteenth session, H200 x2, driver 580.159.04):
//   b, b2, a1, a2: copy ok (each alone, once: no single change under one copy failed)
//   c:  copy 1 (pool memory) failed, its sync CUDA_ERROR_LAUNCH_FAILED (719) in the toggler's
//       round 2; the toggler's next calls returned 719 too (sticky)
//   c2: no failure, but it did not finish in 60 s (std::mutex let the toggler starve the
//       copier); the crate's test with enabling and granting waiting too passed 3 of 3 ways
// So waiting before revocations alone is not enough: the crate waits before every change.
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <mutex>
#include <atomic>
#include <vector>
#define CK(x) do { CUresult r_ = (x); const char *n_ = 0; cuGetErrorName(r_, &n_); \
  printf("%-60s -> %d %s\n", #x, (int)r_, n_ ? n_ : "?"); fflush(stdout); } while (0)
static const size_t N = 16u << 20;
int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "b";
  cuInit(0);
  int n = 0;
  cuDeviceGetCount(&n);
  if (n < 2) { printf("needs 2 GPUs\n"); return 0; }
  CUdevice d0, d1;
  cuDeviceGet(&d0, 0);
  cuDeviceGet(&d1, 1);
  CUcontext c0, c1;
  cuDevicePrimaryCtxRetain(&c0, d0);
  cuDevicePrimaryCtxRetain(&c1, d1);
  cuCtxSetCurrent(c1);
  CUdeviceptr src, psrc;
  CK(cuMemAlloc(&src, N));
  CK(cuMemsetD8(src, 0x5a, N));
  CUstream s1;
  cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
  CUmemoryPool pool;
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CK(cuMemPoolCreate(&pool, &props));
  CK(cuMemAllocFromPoolAsync(&psrc, N, pool, s1));
  CK(cuMemsetD8Async(psrc, 0x5a, N, s1));
  CK(cuStreamSynchronize(s1));
  cuCtxSetCurrent(c0);
  CUdeviceptr dst;
  CK(cuMemAlloc(&dst, N));
  CK(cuMemsetD8(dst, 0, N));
  CUstream s0;
  cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING);
  unsigned *flag;
  cuMemHostAlloc((void **)&flag, 4, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  *flag = 0;
  CUdeviceptr dflag;
  cuMemHostGetDevicePointer(&dflag, flag, 0);
  CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CUmemAccessDesc none = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_NONE};
  if (c[0] == 'c') {
    bool wait_all = !strcmp(c, "c2");
    std::mutex gate;
    std::atomic<bool> done{false};
    CK(cuCtxEnablePeerAccess(c1, 0));
    CK(cuMemPoolSetAccess(pool, &rw, 1));
    long rounds = 0;
    std::thread t([&] {
      cuCtxSetCurrent(c0);
      while (!done.load()) {
        CUresult r[4];
        { std::lock_guard<std::mutex> g(gate); cuCtxSynchronize(); r[0] = cuCtxDisablePeerAccess(c1); }
        { std::lock_guard<std::mutex> g(gate); cuCtxSynchronize(); r[1] = cuMemPoolSetAccess(pool, &none, 1); }
        if (wait_all) { std::lock_guard<std::mutex> g(gate); cuCtxSynchronize(); r[2] = cuCtxEnablePeerAccess(c1, 0); }
        else r[2] = cuCtxEnablePeerAccess(c1, 0);
        if (wait_all) { std::lock_guard<std::mutex> g(gate); cuCtxSynchronize(); r[3] = cuMemPoolSetAccess(pool, &rw, 1); }
        else r[3] = cuMemPoolSetAccess(pool, &rw, 1);
        for (int k = 0; k < 4; k++) if (r[k]) { printf("toggler step %d round %ld -> %d\n", k, rounds, (int)r[k]); fflush(stdout); }
        rounds++;
      }
    });
    std::vector<unsigned char> h(N);
    int bad_copies = 0;
    for (int i = 0; i < 200; i++) {
      cuMemsetD8Async(dst, 0, N, s0);
      CUresult q;
      { std::lock_guard<std::mutex> g(gate); q = cuMemcpyPeerAsync(dst, c0, i % 2 ? psrc : src, c1, N, s0); }
      CUresult y = cuStreamSynchronize(s0);
      if (q || y) { printf("copy %d: queue %d sync %d (toggler round %ld)\n", i, (int)q, (int)y, rounds); bad_copies++; break; }
      cuMemcpyDtoH(h.data(), dst, N);
      size_t bad = 0;
      for (size_t j = 0; j < N; j++) bad += h[j] != 0x5a;
      if (bad) { printf("copy %d (%s): %zu wrong bytes\n", i, i % 2 ? "pool" : "plain", bad); bad_copies++; }
    }
    done = true;
    t.join();
    printf("case %s: %d bad copies of 200, %ld toggler rounds\n", c, bad_copies, rounds);
    return 0;
  }
  bool held = !strcmp(c, "a1") || !strcmp(c, "a2");
  CUdeviceptr from = (!strcmp(c, "a1")) ? src : psrc;
  if (!strcmp(c, "b") || !strcmp(c, "b2")) CK(cuCtxEnablePeerAccess(c1, 0));
  if (!strcmp(c, "b2")) { CK(cuMemPoolSetAccess(pool, &rw, 1)); CK(cuMemPoolSetAccess(pool, &none, 1)); }
  if (held) CK(cuStreamWaitValue32(s0, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  CK(cuMemcpyPeerAsync(dst, c0, from, c1, N, s0));
  if (!strcmp(c, "a1")) CK(cuCtxEnablePeerAccess(c1, 0));
  if (!strcmp(c, "a2")) CK(cuMemPoolSetAccess(pool, &rw, 1));
  *flag = 1;
  CK(cuStreamSynchronize(s0));
  std::vector<unsigned char> h(N);
  CK(cuMemcpyDtoH(h.data(), dst, N));
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) bad += h[i] != 0x5a;
  if (bad) printf("case %s: %zu wrong bytes of %zu\n", c, bad, N);
  else printf("case %s: copy ok\n", c);
  return 0;
}
