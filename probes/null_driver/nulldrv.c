#define _GNU_SOURCE
// A null CUDA driver (libcuda.so.1 stand-in) for checking the crate's own logic on a machine
// without a GPU: every call succeeds at once, and the calls check that the crate never uses a
// context while it is being reset, nor a handle or pointer of a context that was reset. Each such
// use counts as a violation (nulldrv_violations()). Built and used by run.sh.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
// Live allocations, for NULLDRV_MAX_ALLOCS (an out-of-memory error once that many are live).
static long live_allocs = 0;
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
    case 10: *v = 32; break;  /* warp size */
    case 39: *v = 2048; break;  /* threads per multiprocessor */
    case 109: *v = 134213632; break;  /* max access policy window (H100) */
    case 21: case 22: case 23: *v = 131072; break;  /* 1-D and 2-D texture sizes */
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
  __atomic_store_n(&live_allocs, 0, __ATOMIC_SEQ_CST);  // a reset frees every allocation
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
static int syncs_running;
static CUresult base_cuCtxSynchronize(void) { in_ctx("cuCtxSynchronize"); __atomic_fetch_add(&syncs_running,1,__ATOMIC_SEQ_CST); const char *m = getenv("NULLDRV_CTXSYNC_MS"); if (m) usleep(1000 * atol(m)); __atomic_fetch_sub(&syncs_running,1,__ATOMIC_SEQ_CST); OK; }
CUresult cuCtxGetLimit(size_t *v, int l) { *v = 1024; OK; }
CUresult cuCtxSetLimit(int l, size_t v) { OK; }
CUresult cuCtxGetStreamPriorityRange(int *lo, int *hi) { *lo = 0; *hi = -5; OK; }
// A created stream's handle carries CU_STREAM_NON_BLOCKING in bit 0 (cuStreamGetFlags reads it).
CUresult cuStreamCreate(void **s, unsigned f) { in_ctx("cuStreamCreate"); *s = (void *)(make() | (f & 1)); OK; }
CUresult cuStreamCreateWithPriority(void **s, unsigned f, int p) { in_ctx("cuStreamCreateWithPriority"); *s = (void *)(make() | (f & 1)); OK; }
CUresult cuStreamDestroy_v2(void *s) { in_ctx("cuStreamDestroy"); stream_ok((uint64_t)s, "cuStreamDestroy (stale or destroyed stream)"); mark_dead((uint64_t)s); OK; }
static CUresult base_cuStreamSynchronize(void *s) { in_ctx("cuStreamSynchronize"); stream_ok((uint64_t)s, "cuStreamSynchronize (stale stream)"); OK; }
static CUresult base_cuStreamQuery(void *s) { in_ctx("cuStreamQuery"); stream_ok((uint64_t)s, "cuStreamQuery (stale)"); OK; }
static CUresult base_cuStreamIsCapturing(void *s, int *st) { stream_ok((uint64_t)s, "cuStreamIsCapturing (stale)"); *st = 0; OK; }
static CUresult base_cuStreamWaitEvent(void *s, void *e, unsigned f) { in_ctx("cuStreamWaitEvent"); stream_ok((uint64_t)s, "cuStreamWaitEvent (stale stream)"); handle_ok((uint64_t)e, "cuStreamWaitEvent (stale event)"); OK; }
CUresult cuStreamGetFlags(void *s, unsigned *f) { uint64_t h = (uint64_t)s; *f = h > 2 ? (unsigned)(h & 1) : 0; OK; }
CUresult cuEventCreate(void **e, unsigned f) { in_ctx("cuEventCreate"); *e = (void *)(make() | (f & 0xF)); OK; }
static CUresult base_cuEventRecord(void *e, void *s) { in_ctx("cuEventRecord"); handle_ok((uint64_t)e, "cuEventRecord (stale event)"); stream_ok((uint64_t)s, "cuEventRecord (stale stream)"); OK; }
static CUresult base_cuEventQuery(void *e) { if (__atomic_load_n(&resetting, __ATOMIC_SEQ_CST)) bad("cuEventQuery during reset"); handle_ok((uint64_t)e, "cuEventQuery (stale)"); OK; }
static CUresult base_cuEventSynchronize(void *e) { in_ctx("cuEventSynchronize"); handle_ok((uint64_t)e, "cuEventSynchronize (stale)"); OK; }
static int is_node_event(uint64_t e);
static uint64_t node_event_destroys;
CUresult cuEventDestroy_v2(void *e) { in_ctx("cuEventDestroy"); handle_ok((uint64_t)e, "cuEventDestroy (stale)"); if (is_node_event((uint64_t)e)) __atomic_fetch_add(&node_event_destroys, 1, __ATOMIC_SEQ_CST); OK; }
CUresult cuMemAllocAsync(uint64_t *p, size_t b, void *s) { in_ctx("cuMemAllocAsync"); stream_ok((uint64_t)s, "cuMemAllocAsync (stale stream)"); *p = make(); OK; }
CUresult cuDeviceGetMemPool(void **pool, int dev) { (void)dev; *pool = (void *)0x600d; OK; }
CUresult cuMemAllocFromPoolAsync(uint64_t *p, size_t b, void *pool, void *s) { (void)pool; in_ctx("cuMemAllocFromPoolAsync"); stream_ok((uint64_t)s, "cuMemAllocFromPoolAsync (stale stream)"); *p = make(); OK; }
static CUresult base_cuMemFreeAsync(uint64_t p, void *s) { __atomic_fetch_sub(&live_allocs, 1, __ATOMIC_SEQ_CST); in_ctx("cuMemFreeAsync"); handle_ok(p, "cuMemFreeAsync (stale pointer)"); stream_ok((uint64_t)s, "cuMemFreeAsync (stale stream)"); OK; }
// (Review rev-g15) Log callbacks (cuLogsRegisterCallback): the driver calls them on the thread
// whose call failed, before that call returns; here an allocation refused for
// NULLDRV_MAX_ALLOCS logs "cuMemAlloc: out of memory".
typedef void (*log_cb)(void *, unsigned, char *, size_t);
#define LOG_SLOTS 16
static log_cb log_cbs[LOG_SLOTS];
static void *log_data[LOG_SLOTS];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
CUresult cuLogsRegisterCallback(log_cb cb, void *data, void **h) {
  pthread_mutex_lock(&log_mu);
  for (long i = 0; i < LOG_SLOTS; i++)
    if (!log_cbs[i]) { log_cbs[i] = cb; log_data[i] = data; *h = (void *)(i + 1); pthread_mutex_unlock(&log_mu); OK; }
  pthread_mutex_unlock(&log_mu);
  return 2;
}
CUresult cuLogsUnregisterCallback(void *h) {
  long i = (long)h - 1;
  if (i < 0 || i >= LOG_SLOTS) return 1;
  pthread_mutex_lock(&log_mu); log_cbs[i] = 0; log_data[i] = 0; pthread_mutex_unlock(&log_mu); OK;
}
static void log_error(const char *msg) {
  for (int i = 0; i < LOG_SLOTS; i++) {
    pthread_mutex_lock(&log_mu); log_cb cb = log_cbs[i]; void *d = log_data[i]; pthread_mutex_unlock(&log_mu);
    if (cb) { char buf[128]; snprintf(buf, sizeof buf, "%s", msg); cb(d, 0, buf, strlen(buf) + 1); }
  }
}
static CUresult base_cuMemAlloc_v2(uint64_t *p, size_t b) { in_ctx("cuMemAlloc"); const char *m = getenv("NULLDRV_MAX_ALLOCS"); if (m && __atomic_load_n(&live_allocs, __ATOMIC_SEQ_CST) >= atol(m)) { log_error("cuMemAlloc: out of memory"); return 2; } __atomic_fetch_add(&live_allocs, 1, __ATOMIC_SEQ_CST); *p = make(); OK; }
static CUresult base_cuMemFree_v2(uint64_t p) { in_ctx("cuMemFree"); handle_ok(p, "cuMemFree (stale pointer)"); OK; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { in_ctx("cuMemGetInfo"); *f = 70ull << 30; *t = 80ull << 30; OK; }
static CUresult base_cuMemsetD8Async(uint64_t p, unsigned char v, size_t n, void *s) { in_ctx("cuMemsetD8Async"); handle_ok(p, "cuMemsetD8Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD8Async (stale stream)"); OK; }
static CUresult base_cuMemsetD32Async(uint64_t p, unsigned v, size_t n, void *s) { in_ctx("cuMemsetD32Async"); handle_ok(p, "cuMemsetD32Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD32Async (stale stream)"); OK; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *h, size_t n, void *s) { in_ctx("cuMemcpyHtoDAsync"); handle_ok(d, "cuMemcpyHtoDAsync (stale pointer)"); OK; }
CUresult cuMemcpyDtoHAsync_v2(void *h, uint64_t d, size_t n, void *s) { in_ctx("cuMemcpyDtoHAsync"); handle_ok(d, "cuMemcpyDtoHAsync (stale pointer)"); OK; }
CUresult cuLaunchKernelEx(const void *cfg, void *f, void **p, void **e) { in_ctx("cuLaunchKernelEx"); OK; }
CUresult cuFuncGetAttribute(int *v, int attr, void *f) { in_ctx("cuFuncGetAttribute"); handle_ok((uint64_t)f, "cuFuncGetAttribute (stale function)"); *v = attr == 0 ? 1024 : 0; OK; }
// Occupancy (review rev-d15): 2048 threads per multiprocessor.
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, void *f, int b, size_t smem, unsigned fl) {
  in_ctx("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  handle_ok((uint64_t)f, "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags (stale function)");
  *n = b > 0 ? 2048 / b : 0;
  OK;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh, void *s, void **p, void **e) { in_ctx("cuLaunchKernel"); OK; }
// ---------------------------------------------------------------------------------------------
// Stream capture, simulated: which streams capture (and in which capture and mode), which events
// were last recorded in a capture, the thread's capture mode, user objects owned by graphs. The
// crate's own housekeeping must never break a user's capture: a violation is counted when
//  - a fence (an event created with DISABLE_TIMING, which only the crate's fences use in the
//    harness) is recorded in a capturing stream,
//  - cuMemFreeAsync is called on a capturing stream (the real driver fails it, leaves the
//    capture valid and frees nothing),
//  - a call the runtime calls "unsafe" (frees, allocations, synchronisations, event queries) is
//    made while a global capture is open by a thread whose mode is not relaxed, or on the
//    capturing thread of a thread-local capture (the harness itself makes none of them then).
// Such calls also invalidate the captures they would invalidate on the real driver.
#define CAP_SLOTS 256
struct cap { uint64_t stream; uint64_t id; int mode; int invalid; pthread_t owner; uint64_t graph; };
static struct cap caps[CAP_SLOTS];
struct evc { uint64_t ev; uint64_t id; };
static struct evc evcs[CAP_SLOTS * 16];
static uint64_t next_capture = 1;
static __thread int capture_mode;  // 0 global, 1 thread-local, 2 relaxed
// The capture this thread last saw on a stream (cuStreamGetCaptureInfo): work the crate queues
// on a capturing stream must come after the crate asked, in that capture (else it was captured
// without the crate knowing, and nothing keeps what it uses alive).
static __thread uint64_t asked_stream, asked_id;
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;

static int cap_find(uint64_t s) {  // under cap_mu
  for (int i = 0; i < CAP_SLOTS; i++) if (caps[i].id && caps[i].stream == s) return i;
  return -1;
}
static int capture_open(uint64_t id) {  // under cap_mu
  for (int i = 0; i < CAP_SLOTS; i++) if (caps[i].id == id) return 1;
  return 0;
}
static void invalidate(uint64_t id) {  // under cap_mu
  for (int i = 0; i < CAP_SLOTS; i++) if (caps[i].id == id) caps[i].invalid = 1;
}
// An "unsafe" call: refused (900) and invalidating where the real driver refuses it.
static int unsafe_call(const char *call) {
  int refused = 0;
  pthread_mutex_lock(&cap_mu);
  for (int i = 0; i < CAP_SLOTS; i++) {
    if (!caps[i].id || caps[i].invalid) continue;
    int hit = (caps[i].mode == 0 && capture_mode != 2) ||
              (caps[i].mode == 1 && capture_mode != 2 && pthread_equal(caps[i].owner, pthread_self()));
    if (hit) { invalidate(caps[i].id); refused = 1; }
  }
  pthread_mutex_unlock(&cap_mu);
  if (refused) bad(call);
  return refused;
}
static int capturing(uint64_t s) {
  pthread_mutex_lock(&cap_mu);
  int i = cap_find(s);
  int r = i < 0 ? 0 : caps[i].invalid ? 2 : 1;
  pthread_mutex_unlock(&cap_mu);
  return r;
}
// Work in the legacy stream while a stream it synchronises with (a blocking created stream, or
// a per-thread stream) captures: the real driver refuses it with 906 and invalidates the
// capture, whatever the thread's mode. The harness itself queues no legacy work during its
// captures, so each is the crate's housekeeping: a violation.
static int legacy_implicit(uint64_t s, const char *call) {
  if (s != 1) return 0;
  int hit = 0;
  pthread_mutex_lock(&cap_mu);
  for (int i = 0; i < CAP_SLOTS; i++)
    if (caps[i].id && !caps[i].invalid && (caps[i].stream == 2 || (caps[i].stream > 2 && !(caps[i].stream & 1)))) {
      invalidate(caps[i].id);
      hit = 1;
    }
  pthread_mutex_unlock(&cap_mu);
  if (hit) bad(call);
  return hit;
}
// Driver calls that change or read an existing graph must not overlap (the driver does not
// synchronise graph objects): each marks its graph in use for a moment, and a second call on
// the same graph meanwhile is a violation.
static pthread_mutex_t use_mu = PTHREAD_MUTEX_INITIALIZER;
#define USE_SLOTS 64
static uint64_t in_use[USE_SLOTS];
static void graph_use(uint64_t g, const char *call) {
  if (!g) return;
  int clash = 0, slot = -1;
  pthread_mutex_lock(&use_mu);
  for (int i = 0; i < USE_SLOTS; i++) {
    if (in_use[i] == g) clash = 1;
    if (!in_use[i] && slot < 0) slot = i;
  }
  if (slot >= 0) in_use[slot] = g;
  pthread_mutex_unlock(&use_mu);
  if (clash) bad(call);
  usleep(20);
  if (slot >= 0) { pthread_mutex_lock(&use_mu); in_use[slot] = 0; pthread_mutex_unlock(&use_mu); }
}
// Work queued on stream s: if s captures, the crate must know it; captured into an existing
// graph, the work changes that graph.
static void queued(uint64_t s, const char *call) {
  pthread_mutex_lock(&cap_mu);
  int i = cap_find(s);
  int unknown = i >= 0 && !(asked_stream == s && asked_id == caps[i].id);
  uint64_t g = i >= 0 ? caps[i].graph : 0;
  pthread_mutex_unlock(&cap_mu);
  if (unknown) bad(call);
  graph_use(g, "captured work added to a graph during another driver call on it");
}
static uint64_t event_capture(uint64_t e) {  // under cap_mu
  for (int i = 0; i < CAP_SLOTS * 16; i++) if (evcs[i].ev == e) return evcs[i].id;
  return 0;
}
static void set_event_capture(uint64_t e, uint64_t id) {  // under cap_mu
  int free_slot = -1;
  for (int i = 0; i < CAP_SLOTS * 16; i++) {
    if (evcs[i].ev == e) { evcs[i].id = id; if (!id) evcs[i].ev = 0; return; }
    if (!evcs[i].ev && free_slot < 0) free_slot = i;
  }
  if (id && free_slot >= 0) { evcs[free_slot].ev = e; evcs[free_slot].id = id; }
}

CUresult cuThreadExchangeStreamCaptureMode(int *m) { int old = capture_mode; capture_mode = *m; *m = old; OK; }
static CUresult begin(uint64_t s, int mode, uint64_t graph) {
  if (s == 1) return 900;
  if (__atomic_load_n(&syncs_running,__ATOMIC_SEQ_CST)) { fprintf(stderr, "r5: capture begun while a cuCtxSynchronize runs\n"); if (getenv("NULLDRV_CTXSYNC_DURING")) bad("capture begun while a cuCtxSynchronize runs"); }
  pthread_mutex_lock(&cap_mu);
  if (cap_find(s) >= 0) { pthread_mutex_unlock(&cap_mu); return 401; }
  for (int i = 0; i < CAP_SLOTS; i++)
    if (!caps[i].id) {
      caps[i] = (struct cap){s, next_capture++, mode, 0, pthread_self(), graph};
      pthread_mutex_unlock(&cap_mu);
      return 0;
    }
  pthread_mutex_unlock(&cap_mu);
  return 2;
}
static uint64_t graphs_live;  // graphs made and not destroyed (defined below)
CUresult cuStreamBeginCapture_v2(void *s, int mode) { in_ctx("cuStreamBeginCapture"); stream_ok((uint64_t)s, "cuStreamBeginCapture (stale)"); return begin((uint64_t)s, mode, 0); }
CUresult cuStreamBeginCaptureToGraph(void *s, void *g, const void *d, const void *e, size_t n, int mode) { in_ctx("cuStreamBeginCaptureToGraph"); return begin((uint64_t)s, mode, (uint64_t)g); }
CUresult cuStreamEndCapture(void *s, void **g) {
  in_ctx("cuStreamEndCapture");
  *g = 0;
  pthread_mutex_lock(&cap_mu);
  int i = cap_find((uint64_t)s);
  if (i < 0) { pthread_mutex_unlock(&cap_mu); return 1; }
  uint64_t id = caps[i].id;
  int invalid = caps[i].invalid;
  for (int k = 0; k < CAP_SLOTS; k++) if (caps[k].id == id) caps[k].id = 0;
  pthread_mutex_unlock(&cap_mu);
  if (invalid) return 901;
  *g = (void *)make();
  __atomic_fetch_add(&graphs_live, 1, __ATOMIC_SEQ_CST);
  OK;
}
CUresult cuStreamGetCaptureInfo_v3(void *s, int *st, uint64_t *id, void **g, const void **deps, const void **edges, size_t *n) {
  stream_ok((uint64_t)s, "cuStreamGetCaptureInfo (stale)");
  pthread_mutex_lock(&cap_mu);
  int i = cap_find((uint64_t)s);
  *st = i < 0 ? 0 : caps[i].invalid ? 2 : 1;
  if (i >= 0) { *id = caps[i].id; if (g) *g = (void *)(uintptr_t)(0xCA000000ull + caps[i].id); }
  asked_stream = (uint64_t)s;
  asked_id = i >= 0 ? caps[i].id : 0;
  pthread_mutex_unlock(&cap_mu);
  if (deps) *deps = 0;
  if (edges) *edges = 0;
  if (n) *n = 0;
  OK;
}
CUresult cuStreamIsCapturing(void *s, int *st) { base_cuStreamIsCapturing(s, st); *st = capturing((uint64_t)s); OK; }
CUresult cuStreamSynchronize(void *s) {
  if (capturing((uint64_t)s)) { bad("cuStreamSynchronize of a capturing stream"); return 900; }
  if (unsafe_call("cuStreamSynchronize during a capture")) return 900;
  return base_cuStreamSynchronize(s);
}
CUresult cuStreamQuery(void *s) {
  if (capturing((uint64_t)s)) { bad("cuStreamQuery of a capturing stream"); return 900; }
  return base_cuStreamQuery(s);
}
// (Fourth review) NULLDRV_CTXSYNC_STRICT=1: as measured on the GPU (probes/per_thread_settle_gpu.cu,
// result (2)), a cuCtxSynchronize in ANY capture mode, relaxed included, from any thread, fails
// with 900 and invalidates every open capture of the context.
static int ctxsync_strict(void) {
  if (!getenv("NULLDRV_CTXSYNC_STRICT")) return 0;
  int hit = 0;
  pthread_mutex_lock(&cap_mu);
  for (int i = 0; i < CAP_SLOTS; i++)
    if (caps[i].id && !caps[i].invalid) { invalidate(caps[i].id); hit = 1; }
  pthread_mutex_unlock(&cap_mu);
  if (hit) bad("cuCtxSynchronize (relaxed or not) while a capture is open");
  return hit;
}
// (Fourth review) NULLDRV_SETTLE_DELAY_US: the crate's settle thread ("cuda-runtime-settle")
// reaches its cuCtxSynchronize that much later (thread start, scheduling on a loaded host),
// widening the window between the crate's `no_capture()` check and the synchronize.
static void settle_delay(void) {
  const char *d = getenv("NULLDRV_SETTLE_DELAY_US");
  char name[32] = {0};
  if (d && pthread_getname_np(pthread_self(), name, sizeof name) == 0 && strncmp(name, "cuda-runtime-se", 15) == 0)
    usleep(atol(d));
}
CUresult cuCtxSynchronize(void) { settle_delay(); if (ctxsync_strict()) return 900; if (unsafe_call("cuCtxSynchronize during a capture")) return 900; return base_cuCtxSynchronize(); }
// (Fourth review) pitched and managed allocations count against NULLDRV_MAX_ALLOCS as cuMemAlloc does.
CUresult cuMemAllocPitch_v2(uint64_t *p, size_t *pitch, size_t w, size_t h, unsigned e) { if (unsafe_call("cuMemAllocPitch during a capture")) return 900; CUresult r = base_cuMemAlloc_v2(p, w * h); if (r == 0) *pitch = (w + 511) / 512 * 512; return r; }
CUresult cuMemAllocManaged(uint64_t *p, size_t b, unsigned f) { if (unsafe_call("cuMemAllocManaged during a capture")) return 900; return base_cuMemAlloc_v2(p, b); }
CUresult cuEventQuery(void *e) {
  pthread_mutex_lock(&cap_mu);
  uint64_t c = event_capture((uint64_t)e);
  pthread_mutex_unlock(&cap_mu);
  if (c) return 1;  // a captured event (the crate refuses before asking)
  if (unsafe_call("cuEventQuery during a capture")) return 900;
  return base_cuEventQuery(e);
}
CUresult cuEventSynchronize(void *e) {
  pthread_mutex_lock(&cap_mu);
  uint64_t c = event_capture((uint64_t)e);
  pthread_mutex_unlock(&cap_mu);
  if (c) return 1;
  if (unsafe_call("cuEventSynchronize during a capture")) return 900;
  return base_cuEventSynchronize(e);
}
CUresult cuEventRecord(void *e, void *s) {
  if (legacy_implicit((uint64_t)s, "cuEventRecord in the legacy stream during a blocking stream's capture")) return 906;
  if (((uint64_t)e & 0xF) != 2) queued((uint64_t)s, "cuEventRecord captured without the crate knowing");
  CUresult r = base_cuEventRecord(e, s);
  pthread_mutex_lock(&cap_mu);
  int i = cap_find((uint64_t)s);
  uint64_t id = i >= 0 ? caps[i].id : 0;
  set_event_capture((uint64_t)e, id);
  pthread_mutex_unlock(&cap_mu);
  if (id && ((uint64_t)e & 0xF) == 2) bad("a fence recorded in a capturing stream");
  return r;
}
// cudaEventRecordExternal on a capturing stream makes an event record node: the graph refers to
// the event. Such events are remembered; destroying one counts in nulldrv_node_event_destroys
// (a scenario checks that none is destroyed while a graph or executable still refers to it).
#define NODE_EVENTS 4096
static uint64_t node_events[NODE_EVENTS];
static uint64_t n_node_events, node_event_destroys;
uint64_t nulldrv_node_event_destroys(void) { return __atomic_load_n(&node_event_destroys, __ATOMIC_SEQ_CST); }
static int is_node_event(uint64_t e) {
  int r = 0;
  pthread_mutex_lock(&cap_mu);
  for (uint64_t i = 0; i < n_node_events; i++) if (node_events[i] == e) r = 1;
  pthread_mutex_unlock(&cap_mu);
  return r;
}
CUresult cuEventRecordWithFlags(void *e, void *s, unsigned f) {
  if (!(f & 1) || capturing((uint64_t)s) != 1) return cuEventRecord(e, s);
  queued((uint64_t)s, "cuEventRecordWithFlags captured without the crate knowing");
  in_ctx("cuEventRecordWithFlags");
  handle_ok((uint64_t)e, "cuEventRecordWithFlags (stale event)");
  pthread_mutex_lock(&cap_mu);
  if (n_node_events < NODE_EVENTS) node_events[n_node_events++] = (uint64_t)e;
  pthread_mutex_unlock(&cap_mu);
  OK;
}
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) {
  CUresult r = base_cuStreamWaitEvent(s, e, f);
  pthread_mutex_lock(&cap_mu);
  uint64_t c = event_capture((uint64_t)e);
  int i = cap_find((uint64_t)s);
  if (c && !capture_open(c)) r = 1;
  else if (c && i < 0) {
    int done = 0;
    for (int k = 0; k < CAP_SLOTS && !done; k++)
      if (caps[k].id == c) {
        for (int j = 0; j < CAP_SLOTS; j++)
          if (!caps[j].id) { caps[j] = caps[k]; caps[j].stream = (uint64_t)s; done = 1; break; }
      }
  } else if (i >= 0 && c != caps[i].id) {
    invalidate(caps[i].id);
    r = 905;
  }
  pthread_mutex_unlock(&cap_mu);
  return r;
}
CUresult cuMemFreeAsync(uint64_t p, void *s) {
  if (legacy_implicit((uint64_t)s, "cuMemFreeAsync in the legacy stream during a blocking stream's capture")) return 906;
  if (capturing((uint64_t)s)) { bad("cuMemFreeAsync on a capturing stream"); return 1; }
  if (unsafe_call("cuMemFreeAsync during a capture")) return 900;
  return base_cuMemFreeAsync(p, s);
}
CUresult cuMemFree_v2(uint64_t p) { if (unsafe_call("cuMemFree during a capture")) return 900; return base_cuMemFree_v2(p); }
CUresult cuMemAlloc_v2(uint64_t *p, size_t b) { if (unsafe_call("cuMemAlloc during a capture")) return 900; return base_cuMemAlloc_v2(p, b); }
CUresult cuMemsetD16Async(uint64_t p, unsigned short v, size_t n, void *s) { queued((uint64_t)s, "cuMemsetD16Async captured without the crate knowing"); in_ctx("cuMemsetD16Async"); handle_ok(p, "cuMemsetD16Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD16Async (stale stream)"); OK; }
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s_, size_t n, void *s) { queued((uint64_t)s, "cuMemcpyDtoDAsync captured without the crate knowing"); in_ctx("cuMemcpyDtoDAsync"); handle_ok(d, "cuMemcpyDtoDAsync (stale pointer)"); handle_ok(s_, "cuMemcpyDtoDAsync (stale pointer)"); stream_ok((uint64_t)s, "cuMemcpyDtoDAsync (stale stream)"); OK; }
CUresult cuLaunchHostFunc(void *s, void (*fn)(void *), void *data) {
  in_ctx("cuLaunchHostFunc");
  queued((uint64_t)s, "cuLaunchHostFunc captured without the crate knowing");
  if (!capturing((uint64_t)s)) fn(data);  // a captured one is a node: called at replays only
  OK;
}
CUresult cuStreamAddCallback(void *s, void (*cb)(void *, int, void *), void *data, unsigned flags) {
  in_ctx("cuStreamAddCallback");
  queued((uint64_t)s, "cuStreamAddCallback captured without the crate knowing");
  if (capturing((uint64_t)s)) return 900;  // not capturable (the runtime's rule)
  cb(s, 0, data);
  OK;
}

CUresult cuMemsetD8Async(uint64_t p, unsigned char v, size_t n, void *s) { queued((uint64_t)s, "cuMemsetD8Async captured without the crate knowing"); return base_cuMemsetD8Async(p, v, n, s); }
CUresult cuMemsetD32Async(uint64_t p, unsigned v, size_t n, void *s) { queued((uint64_t)s, "cuMemsetD32Async captured without the crate knowing"); return base_cuMemsetD32Async(p, v, n, s); }
// Page-locked memory (registered Rust allocations).
CUresult cuMemHostRegister_v2(void *p, size_t b, unsigned f) { in_ctx("cuMemHostRegister"); if (unsafe_call("cuMemHostRegister during a capture")) return 900; OK; }
CUresult cuMemHostUnregister(void *p) { in_ctx("cuMemHostUnregister"); if (unsafe_call("cuMemHostUnregister during a capture")) return 900; OK; }
CUresult cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned f) { *d = (uint64_t)(uintptr_t)p; OK; }
CUresult cuMemHostAlloc(void **p, size_t b, unsigned f) { in_ctx("cuMemHostAlloc"); if (unsafe_call("cuMemHostAlloc during a capture")) return 900; *p = calloc(1, b ? b : 1); OK; }
CUresult cuMemFreeHost(void *p) { in_ctx("cuMemFreeHost"); if (unsafe_call("cuMemFreeHost during a capture")) return 900; free(p); OK; }


CUresult cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_NULL"; OK; }
CUresult cuGetErrorString(int e, const char **s) { *s = "null driver"; OK; }

// ---- Graphs (enough for the crate's own checks around graph memory, device launch,
// conditional bodies and user objects; nodes do nothing). Guarded by `gm`.
static pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
#define MAX_NODES 4096
#define MAX_DEPS 16
static struct { uint64_t graph, node; int type; size_t ndeps; uint64_t deps[MAX_DEPS]; uint64_t child; } nodes[MAX_NODES];
static size_t n_nodes;
#define MAX_OBJS 65536
static struct { uint64_t h; void *ptr; void (*dtor)(void *); long refs; } objs[MAX_OBJS];
static size_t n_objs;
// References held by graphs and executables: (owner, object index, count).
#define MAX_HOLDS 131072
static struct { uint64_t owner; size_t obj; long count; } holds[MAX_HOLDS];
static size_t n_holds;
static uint64_t graphs_live;
uint64_t nulldrv_graphs_live(void) { return graphs_live; }
uint64_t nulldrv_user_objects_live(void);
// The capture phase's name for the same count.
uint64_t nulldrv_user_objects(void) { return nulldrv_user_objects_live(); }
uint64_t nulldrv_user_objects_live(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&gm);
  for (size_t i = 0; i < n_objs; i++) n += objs[i].refs > 0;
  pthread_mutex_unlock(&gm);
  return n;
}
static size_t obj_index(uint64_t h) {
  for (size_t i = 0; i < n_objs; i++) if (objs[i].h == h) return i;
  bad("unknown user object");
  return 0;
}
// Drops `c` references of object `i` (gm held); runs the destructor at zero, unlocked.
static void obj_release(size_t i, long c) {
  objs[i].refs -= c;
  if (objs[i].refs == 0 && objs[i].dtor) {
    void (*d)(void *) = objs[i].dtor;
    objs[i].dtor = 0;
    pthread_mutex_unlock(&gm);
    d(objs[i].ptr);
    pthread_mutex_lock(&gm);
  } else if (objs[i].refs < 0) {
    bad("user object released below zero");
  }
}
static void hold(uint64_t owner, size_t obj, long c) {
  for (size_t i = 0; i < n_holds; i++)
    if (holds[i].owner == owner && holds[i].obj == obj) { holds[i].count += c; return; }
  if (n_holds < MAX_HOLDS) { holds[n_holds].owner = owner; holds[n_holds].obj = obj; holds[n_holds].count = c; n_holds++; }
}
static void release_owner(uint64_t owner) {
  for (size_t i = 0; i < n_holds; i++)
    if (holds[i].owner == owner && holds[i].count > 0) {
      long c = holds[i].count;
      holds[i].count = 0;
      obj_release(holds[i].obj, c);
    }
}
static int node_is_dead(uint64_t n);
static CUresult add_node(void **out, void *g, void **deps, size_t nd, int type) {
  in_ctx("cuGraphAdd*Node");
  pthread_mutex_lock(&gm);
  for (size_t i = 0; i < nd; i++) if (node_is_dead((uint64_t)deps[i])) bad("a destroyed node as a dependency");
  if (n_nodes >= MAX_NODES || nd > MAX_DEPS) { pthread_mutex_unlock(&gm); return 2; }
  uint64_t n = make();
  nodes[n_nodes].graph = (uint64_t)g;
  nodes[n_nodes].node = n;
  nodes[n_nodes].type = type;
  nodes[n_nodes].ndeps = nd;
  nodes[n_nodes].child = 0;
  for (size_t i = 0; i < nd; i++) {
    int found = 0;
    for (size_t j = 0; j < n_nodes; j++) found |= nodes[j].node == (uint64_t)deps[i] && nodes[j].graph == (uint64_t)g;
    if (!found) bad("a dependency that is not a node of the graph");
    nodes[n_nodes].deps[i] = (uint64_t)deps[i];
  }
  n_nodes++;
  pthread_mutex_unlock(&gm);
  *out = (void *)n;
  OK;
}
CUresult cuGraphClone(void **g, void *o) { in_ctx("cuGraphClone"); *g = (void *)make(); __atomic_fetch_add(&graphs_live, 1, __ATOMIC_SEQ_CST); OK; }
CUresult cuGraphCreate(void **g, unsigned f) { in_ctx("cuGraphCreate"); *g = (void *)make(); __atomic_fetch_add(&graphs_live, 1, __ATOMIC_SEQ_CST); OK; }
CUresult cuGraphDestroy(void *g) {
  in_ctx("cuGraphDestroy");
  pthread_mutex_lock(&gm);
  release_owner((uint64_t)g);
  pthread_mutex_unlock(&gm);
  __atomic_fetch_sub(&graphs_live, 1, __ATOMIC_SEQ_CST);
  OK;
}
// A child graph node refers to the child itself here (the driver embeds a copy): enough for the
// crate's checks of what a child holds.
CUresult cuGraphAddChildGraphNode(void **n, void *g, void **d, size_t nd, void *child) {
  CUresult r = add_node(n, g, d, nd, 4);
  if (r) return r;
  pthread_mutex_lock(&gm);
  for (size_t i = 0; i < n_nodes; i++) if (nodes[i].node == (uint64_t)*n) nodes[i].child = (uint64_t)child;
  pthread_mutex_unlock(&gm);
  OK;
}
CUresult cuGraphChildGraphNodeGetGraph(void *n, void **g) {
  pthread_mutex_lock(&gm);
  *g = 0;
  for (size_t i = 0; i < n_nodes; i++) if (nodes[i].node == (uint64_t)n) *g = (void *)nodes[i].child;
  pthread_mutex_unlock(&gm);
  return *g ? 0 : 400;
}
CUresult cuGraphAddEmptyNode(void **n, void *g, void **d, size_t nd) { return add_node(n, g, d, nd, 5); }
CUresult cuGraphAddMemsetNode(void **n, void *g, void **d, size_t nd, const void *p, void *c) { return add_node(n, g, d, nd, 2); }
CUresult cuGraphAddMemcpyNode(void **n, void *g, void **d, size_t nd, const void *p, void *c) { return add_node(n, g, d, nd, 1); }
CUresult cuGraphAddHostNode(void **n, void *g, void **d, size_t nd, const void *p) { return add_node(n, g, d, nd, 3); }
CUresult cuGraphAddKernelNode_v2(void **n, void *g, void **d, size_t nd, const void *p) { return add_node(n, g, d, nd, 0); }
typedef struct { int allocType, handleTypes, locType, locId; void *win32; size_t maxSize; unsigned short usage; unsigned char reserved[54]; } PoolProps;
typedef struct { PoolProps pool; void *access; size_t accessCount; size_t bytesize; uint64_t dptr; } AllocParams;
CUresult cuGraphAddMemAllocNode(void **n, void *g, void **d, size_t nd, AllocParams *p) {
  if (p->bytesize == 0 || p->pool.locType != 1) bad("cuGraphAddMemAllocNode parameters");
  p->dptr = make();
  return add_node(n, g, d, nd, 10);
}
CUresult cuGraphAddMemFreeNode(void **n, void *g, void **d, size_t nd, uint64_t p) { return add_node(n, g, d, nd, 11); }
CUresult cuGraphConditionalHandleCreate(uint64_t *h, void *g, void *c, unsigned def, unsigned f) { in_ctx("cuGraphConditionalHandleCreate"); *h = make(); OK; }
// CUgraphNodeParams: the type at 0, the union at 16; for a conditional, phGraph_out at 16 + 16.
CUresult cuGraphAddNode_v2(void **n, void *g, void **d, const void *e, size_t nd, unsigned char *p) {
  int type;
  memcpy(&type, p, 4);
  if (type != 13) return 801;
  void **bodies = malloc(sizeof(void *));
  bodies[0] = (void *)make();
  memcpy(p + 32, &bodies, sizeof bodies);
  return add_node(n, g, d, nd, 13);
}
CUresult cuGraphGetNodes(void *g, void **out, size_t *count) {
  pthread_mutex_lock(&gm);
  size_t k = 0;
  for (size_t i = 0; i < n_nodes; i++)
    if (nodes[i].graph == (uint64_t)g) {
      if (out && k < *count) out[k] = (void *)nodes[i].node;
      k++;
    }
  pthread_mutex_unlock(&gm);
  if (!out || k < *count) *count = k;
  OK;
}
static int node_is_dead(uint64_t n);
CUresult cuGraphNodeGetType(void *n, int *t) {
  pthread_mutex_lock(&gm);
  if (node_is_dead((uint64_t)n)) bad("cuGraphNodeGetType with a destroyed node");
  *t = -1;
  for (size_t i = 0; i < n_nodes; i++) if (nodes[i].node == (uint64_t)n) *t = nodes[i].type;
  pthread_mutex_unlock(&gm);
  return *t < 0 ? 400 : 0;
}
CUresult cuGraphNodeGetDependencies_v2(void *n, void **out, void *e, size_t *count) {
  pthread_mutex_lock(&gm);
  size_t k = 0;
  for (size_t i = 0; i < n_nodes; i++)
    if (nodes[i].node == (uint64_t)n) {
      for (size_t j = 0; j < nodes[i].ndeps; j++) {
        if (out && k < *count) out[k] = (void *)nodes[i].deps[j];
        k++;
      }
    }
  pthread_mutex_unlock(&gm);
  if (!out || k < *count) *count = k;
  OK;
}
CUresult cuUserObjectCreate(void **o, void *ptr, void (*d)(void *), unsigned refs, unsigned f) {
  pthread_mutex_lock(&gm);
  if (n_objs >= MAX_OBJS) { pthread_mutex_unlock(&gm); return 2; }
  uint64_t h = make();
  objs[n_objs].h = h; objs[n_objs].ptr = ptr; objs[n_objs].dtor = d; objs[n_objs].refs = refs;
  n_objs++;
  pthread_mutex_unlock(&gm);
  *o = (void *)h;
  OK;
}
CUresult cuUserObjectRelease(void *o, unsigned c) { pthread_mutex_lock(&gm); obj_release(obj_index((uint64_t)o), c); pthread_mutex_unlock(&gm); OK; }
CUresult cuGraphRetainUserObject(void *g, void *o, unsigned c, unsigned f) {
  pthread_mutex_lock(&gm);
  size_t i = obj_index((uint64_t)o);
  if (!(f & 1)) objs[i].refs += c;  // CU_GRAPH_USER_OBJECT_MOVE takes the caller's references
  hold((uint64_t)g, i, c);
  pthread_mutex_unlock(&gm);
  OK;
}
CUresult cuGraphReleaseUserObject(void *g, void *o, unsigned c) {
  pthread_mutex_lock(&gm);
  size_t i = obj_index((uint64_t)o);
  long held = 0;
  for (size_t k = 0; k < n_holds; k++)
    if (holds[k].owner == (uint64_t)g && holds[k].obj == i) held = holds[k].count;
  if (held < (long)c) {
    bad("cuGraphReleaseUserObject of a reference the graph does not hold");
    pthread_mutex_unlock(&gm);
    return 1;
  }
  hold((uint64_t)g, i, -(long)c);
  obj_release(i, c);
  pthread_mutex_unlock(&gm);
  OK;
}
CUresult cuUserObjectRetain(void *o, unsigned c) {
  pthread_mutex_lock(&gm);
  objs[obj_index((uint64_t)o)].refs += c;
  pthread_mutex_unlock(&gm);
  OK;
}
// Destroyed nodes: their handles must never reach the driver again.
#define MAX_DEAD_NODES 1024
static uint64_t dead_nodes[MAX_DEAD_NODES];
static size_t n_dead_nodes;
static int node_is_dead(uint64_t n) {
  for (size_t i = 0; i < n_dead_nodes; i++) if (dead_nodes[i] == n) return 1;
  return 0;
}
CUresult cuGraphDestroyNode(void *n) {
  in_ctx("cuGraphDestroyNode");
  pthread_mutex_lock(&gm);
  int found = 0;
  for (size_t i = 0; i < n_nodes; i++) {
    if (nodes[i].node == (uint64_t)n) { nodes[i].node = 0; nodes[i].graph = 0; found = 1; }
    // Its edges go with it.
    for (size_t j = 0; j < nodes[i].ndeps; j++)
      if (nodes[i].deps[j] == (uint64_t)n) { nodes[i].deps[j] = nodes[i].deps[--nodes[i].ndeps]; j--; }
  }
  if (!found) bad("cuGraphDestroyNode of a node that is not live");
  else if (n_dead_nodes < MAX_DEAD_NODES) dead_nodes[n_dead_nodes++] = (uint64_t)n;
  pthread_mutex_unlock(&gm);
  return found ? 0 : 400;
}
static int node_type_of(uint64_t n) {
  for (size_t i = 0; i < n_nodes; i++) if (nodes[i].node == n) return nodes[i].type;
  return -1;
}
CUresult cuGraphHostNodeSetParams(void *n, const void *p) {
  in_ctx("cuGraphHostNodeSetParams");
  pthread_mutex_lock(&gm);
  if (node_is_dead((uint64_t)n)) bad("cuGraphHostNodeSetParams with a destroyed node");
  int t = node_type_of((uint64_t)n);
  pthread_mutex_unlock(&gm);
  return t == 3 ? 0 : 1;
}
CUresult cuGraphMemsetNodeSetParams(void *n, const void *p) {
  in_ctx("cuGraphMemsetNodeSetParams");
  pthread_mutex_lock(&gm);
  if (node_is_dead((uint64_t)n)) bad("cuGraphMemsetNodeSetParams with a destroyed node");
  int t = node_type_of((uint64_t)n);
  pthread_mutex_unlock(&gm);
  return t == 2 ? 0 : 1;
}
CUresult cuGraphAddDependencies_v2(void *g, void **from, void **to, const void *e, size_t count) {
  in_ctx("cuGraphAddDependencies");
  pthread_mutex_lock(&gm);
  for (size_t k = 0; k < count; k++) {
    if (node_is_dead((uint64_t)from[k]) || node_is_dead((uint64_t)to[k])) bad("cuGraphAddDependencies with a destroyed node");
    for (size_t i = 0; i < n_nodes; i++)
      if (nodes[i].node == (uint64_t)to[k] && nodes[i].graph == (uint64_t)g && nodes[i].ndeps < MAX_DEPS)
        nodes[i].deps[nodes[i].ndeps++] = (uint64_t)from[k];
  }
  pthread_mutex_unlock(&gm);
  OK;
}
CUresult cuGraphRemoveDependencies_v2(void *g, void **from, void **to, const void *e, size_t count) {
  in_ctx("cuGraphRemoveDependencies");
  pthread_mutex_lock(&gm);
  CUresult r = 0;
  for (size_t k = 0; k < count; k++) {
    if (node_is_dead((uint64_t)from[k]) || node_is_dead((uint64_t)to[k])) bad("cuGraphRemoveDependencies with a destroyed node");
    int found = 0;
    for (size_t i = 0; i < n_nodes; i++)
      if (nodes[i].node == (uint64_t)to[k] && nodes[i].graph == (uint64_t)g)
        for (size_t j = 0; j < nodes[i].ndeps; j++)
          if (nodes[i].deps[j] == (uint64_t)from[k]) { nodes[i].deps[j] = nodes[i].deps[--nodes[i].ndeps]; found = 1; break; }
    if (!found) r = 1;
  }
  pthread_mutex_unlock(&gm);
  return r;
}
CUresult cuGraphInstantiateWithParams(void **e, void *g, void *params) {
  in_ctx("cuGraphInstantiateWithParams");
  uint64_t h = make();
  pthread_mutex_lock(&gm);
  size_t n = n_holds;
  for (size_t i = 0; i < n; i++)
    if (holds[i].owner == (uint64_t)g && holds[i].count > 0) {
      objs[holds[i].obj].refs += holds[i].count;
      hold(h, holds[i].obj, holds[i].count);
    }
  pthread_mutex_unlock(&gm);
  *e = (void *)h;
  OK;
}
// Arrays and texture objects (for the harness's `overhead` figures): handles only.
CUresult cuArray3DCreate_v2(void **a, const void *desc) { in_ctx("cuArray3DCreate"); *a = (void *)make(); OK; }
// Destroys counted (for the scenarios that check an object outlives a graph that refers to it).
static uint64_t array_destroys, tex_destroys, surf_destroys;
uint64_t nulldrv_array_destroys(void) { return __atomic_load_n(&array_destroys, __ATOMIC_SEQ_CST); }
uint64_t nulldrv_tex_destroys(void) { return __atomic_load_n(&tex_destroys, __ATOMIC_SEQ_CST); }
uint64_t nulldrv_surf_destroys(void) { return __atomic_load_n(&surf_destroys, __ATOMIC_SEQ_CST); }
CUresult cuArrayDestroy(void *a) { in_ctx("cuArrayDestroy"); handle_ok((uint64_t)a, "cuArrayDestroy (stale)"); __atomic_fetch_add(&array_destroys, 1, __ATOMIC_SEQ_CST); OK; }
// Mipmapped arrays (handles only): a level's handle is the same for every call with that level,
// as the real driver's is. Batched 3-D copies are counted (ops in `nulldrv_batch_ops`).
static uint64_t batch_ops;
uint64_t nulldrv_batch_ops(void) { return __atomic_load_n(&batch_ops, __ATOMIC_SEQ_CST); }
CUresult cuMipmappedArrayCreate(void **h, const void *desc, unsigned levels) { in_ctx("cuMipmappedArrayCreate"); *h = (void *)make(); OK; }
CUresult cuMipmappedArrayGetLevel(void **a, void *h, unsigned level) { in_ctx("cuMipmappedArrayGetLevel"); handle_ok((uint64_t)h, "cuMipmappedArrayGetLevel (stale)"); *a = (void *)((uint64_t)h | ((uint64_t)(level + 1) << 48)); OK; }
CUresult cuMipmappedArrayDestroy(void *h) { in_ctx("cuMipmappedArrayDestroy"); handle_ok((uint64_t)h, "cuMipmappedArrayDestroy (stale)"); OK; }
CUresult cuMemcpy3DBatchAsync_v2(size_t n, void *ops, unsigned long long flags, void *s) { queued((uint64_t)s, "cuMemcpy3DBatchAsync captured without the crate knowing"); in_ctx("cuMemcpy3DBatchAsync"); stream_ok((uint64_t)s, "cuMemcpy3DBatchAsync (stale stream)"); __atomic_fetch_add(&batch_ops, n, __ATOMIC_SEQ_CST); OK; }
// NULLDRV_TEX_POLLUTE_KB=n: texture create and destroy each write n KiB (one store per 64-byte
// line), evicting the caller's data from the caches as the real driver's microseconds of work
// do (for the overhead probe: the crate's cache misses after a driver call, not only its
// instructions).
static void tex_pollute(void) {
  static long kb = -1;
  static volatile unsigned char *buf;
  if (kb < 0) { const char *m = getenv("NULLDRV_TEX_POLLUTE_KB"); kb = m ? atol(m) : 0; if (kb > 0) buf = malloc(kb * 1024); if (!buf) kb = 0; }
  for (long i = 0; i < kb * 1024; i += 64) buf[i]++;
}
CUresult cuTexObjectCreate(uint64_t *t, const void *res, const void *tex, const void *view) { in_ctx("cuTexObjectCreate"); tex_pollute(); *t = make(); OK; }
CUresult cuTexObjectDestroy(uint64_t t) { in_ctx("cuTexObjectDestroy"); tex_pollute(); handle_ok(t, "cuTexObjectDestroy (stale)"); __atomic_fetch_add(&tex_destroys, 1, __ATOMIC_SEQ_CST); OK; }
CUresult cuSurfObjectCreate(uint64_t *s, const void *res) { in_ctx("cuSurfObjectCreate"); *s = make(); OK; }
CUresult cuSurfObjectDestroy(uint64_t s) { in_ctx("cuSurfObjectDestroy"); handle_ok(s, "cuSurfObjectDestroy (stale)"); __atomic_fetch_add(&surf_destroys, 1, __ATOMIC_SEQ_CST); OK; }
CUresult cuGraphLaunch(void *e, void *s) {
  in_ctx("cuGraphLaunch");
  handle_ok((uint64_t)e, "cuGraphLaunch (stale executable)");
  stream_ok((uint64_t)s, "cuGraphLaunch (stale stream)");
  OK;
}
CUresult cuGraphExecDestroy(void *e) {
  in_ctx("cuGraphExecDestroy");
  pthread_mutex_lock(&gm);
  release_owner((uint64_t)e);
  pthread_mutex_unlock(&gm);
  OK;
}
// Modules: any image loads; every function has six 8-byte parameters (as `vadd`). Fat binaries
// (first word 0xBA55ED50) are counted, and the last one's address kept, for the harness's check
// that the device-runtime kernels load their linked image.
static uint64_t fatbin_loads, last_fatbin;
uint64_t nulldrv_fatbin_loads(void) { return __atomic_load_n(&fatbin_loads, __ATOMIC_SEQ_CST); }
uint64_t nulldrv_last_fatbin(void) { return __atomic_load_n(&last_fatbin, __ATOMIC_SEQ_CST); }
CUresult cuModuleLoadDataEx(void **m, const void *img, unsigned n, int *o, void **v) {
  in_ctx("cuModuleLoadDataEx");
  const unsigned char *b = img;
  if (b && b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba) {
    __atomic_store_n(&last_fatbin, (uint64_t)img, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&fatbin_loads, 1, __ATOMIC_SEQ_CST);
  }
  *m = (void *)make();
  OK;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { in_ctx("cuModuleGetFunction"); handle_ok((uint64_t)m, "cuModuleGetFunction (stale module)"); *f = (void *)make(); OK; }
CUresult cuModuleUnload(void *m) { in_ctx("cuModuleUnload"); handle_ok((uint64_t)m, "cuModuleUnload (stale module)"); OK; }
CUresult cuFuncGetParamInfo(void *f, size_t i, size_t *off, size_t *size) {
  if (i >= 6) return 1;
  *off = i * 8;
  *size = 8;
  OK;
}
// NULLDRV_TOUCH_KB=n (eighteenth session): each kernel-node update also reads n KiB (a line
// every 64 bytes), as the real driver's call displaces the caller's cache lines; the crate's
// figure then includes the misses on its own data after a driver call (compare with n = 0).
static volatile char touch_buf[1 << 20];
static long touch_bytes = -1;
static volatile long touch_sink;
static void touch(void) {
  if (touch_bytes < 0) { const char *t = getenv("NULLDRV_TOUCH_KB"); long kb = t ? atol(t) : 0; touch_bytes = (kb < 0 ? 0 : kb > 1024 ? 1024 : kb) * 1024; }
  long s = 0;
  for (long i = 0; i < touch_bytes; i += 64) s += touch_buf[i];
  touch_sink = s;
}
CUresult cuGraphExecKernelNodeSetParams_v2(void *e, void *n, const void *p) { in_ctx("cuGraphExecKernelNodeSetParams"); touch(); OK; }
CUresult cuGraphExecUpdate_v2(void *e, void *g, void *info) { in_ctx("cuGraphExecUpdate"); if (info) memset(info, 0, 24); OK; }
CUresult cuGraphExecMemsetNodeSetParams(void *e, void *n, const void *p, void *c) {
  in_ctx("cuGraphExecMemsetNodeSetParams");
  uint64_t g = 0;
  pthread_mutex_lock(&gm);
  for (size_t i = 0; i < n_nodes; i++) if (nodes[i].node == (uint64_t)n) g = nodes[i].graph;
  pthread_mutex_unlock(&gm);
  graph_use(g, "a per-node update reading its graph's node during another driver call on the graph");
  OK;
}
CUresult cuGraphExecMemcpyNodeSetParams(void *e, void *n, const void *p, void *c) { in_ctx("cuGraphExecMemcpyNodeSetParams"); OK; }
CUresult cuGraphExecHostNodeSetParams(void *e, void *n, const void *p) { in_ctx("cuGraphExecHostNodeSetParams"); OK; }
// Pointer attributes: none known (the crate asks when it is given a host pointer to copy from).
CUresult cuPointerGetAttributes(unsigned n, int *a, void **d, uint64_t p) { (void)n; (void)a; (void)d; (void)p; return 0; }

// ---- Pool import (review rev-c14): enough for DeviceBuffer::import_from_pool's checks. The
// imported pointer is a fresh 16-byte allocation; its pool is any non-null handle.
CUresult cuMemPoolImportFromShareableHandle(void **pool, void *h, int t, unsigned long long f) { in_ctx("cuMemPoolImportFromShareableHandle"); *pool = (void *)(uintptr_t)0x9001; OK; }
CUresult cuMemPoolImportPointer(uint64_t *p, void *pool, void *data) { in_ctx("cuMemPoolImportPointer"); return base_cuMemAlloc_v2(p, 16); }
CUresult cuMemGetAddressRange_v2(uint64_t *base, size_t *size, uint64_t p) { in_ctx("cuMemGetAddressRange"); *base = p; *size = 16; OK; }
CUresult cuPointerGetAttribute(void *d, int attr, uint64_t p) { in_ctx("cuPointerGetAttribute"); if (attr == 9) *(int *)d = 0; OK; }
