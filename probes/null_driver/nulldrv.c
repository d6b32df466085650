// A null CUDA driver (libcuda.so.1 stand-in) for checking the crate's own logic on a machine
// without a GPU: every call succeeds at once, and the calls check that the crate never uses a
// context while it is being reset, nor a handle or pointer of a context that was reset. Each such
// use counts as a violation (nulldrv_violations()). Built and used by run.sh.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef int CUresult;
#define OK return 0

static volatile int resetting;        // a reset is running
static volatile uint64_t live_gen = 1; // generation of the live primary context
static volatile uint64_t violations;
static volatile uint64_t counter = 1;
static __thread uint64_t cur_gen;     // generation of the thread's current context (0: none)
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t nulldrv_violations(void) { return violations; }
uint64_t nulldrv_resets(void) { return live_gen - 1; }

static void bad(const char *what) {
  if (__atomic_fetch_add(&violations, 1, __ATOMIC_SEQ_CST) < 20)
    fprintf(stderr, "nulldrv violation: %s\n", what);
}
// A call that needs the current context.
static void in_ctx(const char *call) {
  if (__atomic_load_n(&resetting, __ATOMIC_SEQ_CST)) bad(call);
  if (cur_gen != __atomic_load_n(&live_gen, __ATOMIC_SEQ_CST)) bad(call);
}
// A handle made in generation g (encoded in bits 40..).
static uint64_t make(void) {
  return (__atomic_load_n(&live_gen, __ATOMIC_SEQ_CST) << 40) | (__atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST) << 4);
}
// Destroyed stream handles (handles are never reused, so a set of them is exact).
#define DEAD_SLOTS (1 << 20)
static uint64_t dead[DEAD_SLOTS];
static void mark_dead(uint64_t h) {
  pthread_mutex_lock(&mu);
  for (uint64_t i = (h >> 4) % DEAD_SLOTS;; i = (i + 1) % DEAD_SLOTS)
    if (!dead[i]) { dead[i] = h; break; }
  pthread_mutex_unlock(&mu);
}
static int is_dead(uint64_t h) {
  int r = 0;
  pthread_mutex_lock(&mu);
  for (uint64_t i = (h >> 4) % DEAD_SLOTS; dead[i]; i = (i + 1) % DEAD_SLOTS)
    if (dead[i] == h) { r = 1; break; }
  pthread_mutex_unlock(&mu);
  return r;
}
static void handle_ok(uint64_t h, const char *call) {
  if (h == 0 || h == 1 || h == 2) return;  // null, legacy, per-thread
  if ((h >> 40) != __atomic_load_n(&live_gen, __ATOMIC_SEQ_CST)) bad(call);
}
// A stream handle: of the live context, and not destroyed.
static void stream_ok(uint64_t h, const char *call) {
  handle_ok(h, call);
  if (h > 2 && is_dead(h)) bad(call);
}

CUresult cuInit(unsigned f) { OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; OK; }
CUresult cuDeviceGet(int *d, int o) { *d = o; OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  switch (attr) {
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    case 1: case 2: case 3: *v = 1024; break;
    case 4: *v = 64; break;
    case 5: *v = 2147483647; break;
    case 6: case 7: *v = 65535; break;
    case 8: *v = 49152; break;
    case 16: *v = 132; break;
    default: *v = 1; break;
  }
  OK;
}
CUresult cuDeviceGetName(char *n, int len, int d) { strncpy(n, "Null GPU", len); OK; }
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { *b = 80ull << 30; OK; }
CUresult cuDeviceGetUuid_v2(char *u, int d) { memset(u, 1, 16); OK; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)(uintptr_t)(0xC000 + (live_gen << 4)); OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { OK; }
CUresult cuDevicePrimaryCtxReset_v2(int d) {
  __atomic_store_n(&resetting, 1, __ATOMIC_SEQ_CST);
  usleep(200);
  __atomic_fetch_add(&live_gen, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&resetting, 0, __ATOMIC_SEQ_CST);
  OK;
}
CUresult cuDevicePrimaryCtxGetState(int d, unsigned *f, int *a) { *f = 0; *a = 1; OK; }
CUresult cuDevicePrimaryCtxSetFlags_v2(int d, unsigned f) { OK; }
CUresult cuCtxSetCurrent(void *c) {
  uintptr_t v = (uintptr_t)c;
  cur_gen = v ? (v - 0xC000) >> 4 : 0;
  if (v && cur_gen != live_gen) bad("cuCtxSetCurrent of a reset context");
  OK;
}
CUresult cuCtxGetCurrent(void **c) { *c = (void *)(uintptr_t)(0xC000 + (cur_gen << 4)); OK; }
CUresult cuCtxGetDevice(int *d) { *d = 0; OK; }
CUresult cuCtxSynchronize(void) { in_ctx("cuCtxSynchronize"); OK; }
CUresult cuCtxGetLimit(size_t *v, int l) { *v = 1024; OK; }
CUresult cuCtxSetLimit(int l, size_t v) { OK; }
CUresult cuCtxGetStreamPriorityRange(int *lo, int *hi) { *lo = 0; *hi = -5; OK; }
CUresult cuStreamCreate(void **s, unsigned f) { in_ctx("cuStreamCreate"); *s = (void *)make(); OK; }
CUresult cuStreamCreateWithPriority(void **s, unsigned f, int p) { in_ctx("cuStreamCreateWithPriority"); *s = (void *)make(); OK; }
CUresult cuStreamDestroy_v2(void *s) { in_ctx("cuStreamDestroy"); stream_ok((uint64_t)s, "cuStreamDestroy (stale or destroyed stream)"); mark_dead((uint64_t)s); OK; }
CUresult cuStreamSynchronize(void *s) { in_ctx("cuStreamSynchronize"); stream_ok((uint64_t)s, "cuStreamSynchronize (stale stream)"); OK; }
CUresult cuStreamQuery(void *s) { in_ctx("cuStreamQuery"); stream_ok((uint64_t)s, "cuStreamQuery (stale)"); OK; }
CUresult cuStreamIsCapturing(void *s, int *st) { stream_ok((uint64_t)s, "cuStreamIsCapturing (stale)"); *st = 0; OK; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { in_ctx("cuStreamWaitEvent"); stream_ok((uint64_t)s, "cuStreamWaitEvent (stale stream)"); handle_ok((uint64_t)e, "cuStreamWaitEvent (stale event)"); OK; }
CUresult cuStreamGetFlags(void *s, unsigned *f) { *f = 0; OK; }
CUresult cuEventCreate(void **e, unsigned f) { in_ctx("cuEventCreate"); *e = (void *)make(); OK; }
CUresult cuEventRecord(void *e, void *s) { in_ctx("cuEventRecord"); handle_ok((uint64_t)e, "cuEventRecord (stale event)"); stream_ok((uint64_t)s, "cuEventRecord (stale stream)"); OK; }
CUresult cuEventQuery(void *e) { if (__atomic_load_n(&resetting, __ATOMIC_SEQ_CST)) bad("cuEventQuery during reset"); handle_ok((uint64_t)e, "cuEventQuery (stale)"); OK; }
CUresult cuEventSynchronize(void *e) { in_ctx("cuEventSynchronize"); handle_ok((uint64_t)e, "cuEventSynchronize (stale)"); OK; }
CUresult cuEventDestroy_v2(void *e) { in_ctx("cuEventDestroy"); handle_ok((uint64_t)e, "cuEventDestroy (stale)"); OK; }
CUresult cuMemAllocAsync(uint64_t *p, size_t b, void *s) { in_ctx("cuMemAllocAsync"); stream_ok((uint64_t)s, "cuMemAllocAsync (stale stream)"); *p = make(); OK; }
CUresult cuMemFreeAsync(uint64_t p, void *s) { in_ctx("cuMemFreeAsync"); handle_ok(p, "cuMemFreeAsync (stale pointer)"); stream_ok((uint64_t)s, "cuMemFreeAsync (stale stream)"); OK; }
CUresult cuMemAlloc_v2(uint64_t *p, size_t b) { in_ctx("cuMemAlloc"); *p = make(); OK; }
CUresult cuMemFree_v2(uint64_t p) { in_ctx("cuMemFree"); handle_ok(p, "cuMemFree (stale pointer)"); OK; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { in_ctx("cuMemGetInfo"); *f = 70ull << 30; *t = 80ull << 30; OK; }
CUresult cuMemsetD8Async(uint64_t p, unsigned char v, size_t n, void *s) { in_ctx("cuMemsetD8Async"); handle_ok(p, "cuMemsetD8Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD8Async (stale stream)"); OK; }
CUresult cuMemsetD32Async(uint64_t p, unsigned v, size_t n, void *s) { in_ctx("cuMemsetD32Async"); handle_ok(p, "cuMemsetD32Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD32Async (stale stream)"); OK; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *h, size_t n, void *s) { in_ctx("cuMemcpyHtoDAsync"); handle_ok(d, "cuMemcpyHtoDAsync (stale pointer)"); OK; }
CUresult cuMemcpyDtoHAsync_v2(void *h, uint64_t d, size_t n, void *s) { in_ctx("cuMemcpyDtoHAsync"); handle_ok(d, "cuMemcpyDtoHAsync (stale pointer)"); OK; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh, void *s, void **p, void **e) { in_ctx("cuLaunchKernel"); OK; }
// Stream capture: no stream ever captures here; the crate's housekeeping swaps the thread's
// capture mode around its frees and waits, and watched queues ask for the capture status.
static __thread int capture_mode;
CUresult cuThreadExchangeStreamCaptureMode(int *m) { int old = capture_mode; capture_mode = *m; *m = old; OK; }
CUresult cuStreamGetCaptureInfo_v3(void *s, int *st, uint64_t *id, void **g, const void **deps, const void **edges, size_t *n) {
  stream_ok((uint64_t)s, "cuStreamGetCaptureInfo (stale)");
  *st = 0;
  if (n) *n = 0;
  OK;
}
CUresult cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_NULL"; OK; }
CUresult cuGetErrorString(int e, const char **s) { *s = "null driver"; OK; }
