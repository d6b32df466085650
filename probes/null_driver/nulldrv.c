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
static CUresult base_cuCtxSynchronize(void) { in_ctx("cuCtxSynchronize"); OK; }
CUresult cuCtxGetLimit(size_t *v, int l) { *v = 1024; OK; }
CUresult cuCtxSetLimit(int l, size_t v) { OK; }
CUresult cuCtxGetStreamPriorityRange(int *lo, int *hi) { *lo = 0; *hi = -5; OK; }
CUresult cuStreamCreate(void **s, unsigned f) { in_ctx("cuStreamCreate"); *s = (void *)make(); OK; }
CUresult cuStreamCreateWithPriority(void **s, unsigned f, int p) { in_ctx("cuStreamCreateWithPriority"); *s = (void *)make(); OK; }
CUresult cuStreamDestroy_v2(void *s) { in_ctx("cuStreamDestroy"); stream_ok((uint64_t)s, "cuStreamDestroy (stale or destroyed stream)"); mark_dead((uint64_t)s); OK; }
static CUresult base_cuStreamSynchronize(void *s) { in_ctx("cuStreamSynchronize"); stream_ok((uint64_t)s, "cuStreamSynchronize (stale stream)"); OK; }
static CUresult base_cuStreamQuery(void *s) { in_ctx("cuStreamQuery"); stream_ok((uint64_t)s, "cuStreamQuery (stale)"); OK; }
static CUresult base_cuStreamIsCapturing(void *s, int *st) { stream_ok((uint64_t)s, "cuStreamIsCapturing (stale)"); *st = 0; OK; }
static CUresult base_cuStreamWaitEvent(void *s, void *e, unsigned f) { in_ctx("cuStreamWaitEvent"); stream_ok((uint64_t)s, "cuStreamWaitEvent (stale stream)"); handle_ok((uint64_t)e, "cuStreamWaitEvent (stale event)"); OK; }
CUresult cuStreamGetFlags(void *s, unsigned *f) { *f = 0; OK; }
CUresult cuEventCreate(void **e, unsigned f) { in_ctx("cuEventCreate"); *e = (void *)(make() | (f & 0xF)); OK; }
static CUresult base_cuEventRecord(void *e, void *s) { in_ctx("cuEventRecord"); handle_ok((uint64_t)e, "cuEventRecord (stale event)"); stream_ok((uint64_t)s, "cuEventRecord (stale stream)"); OK; }
static CUresult base_cuEventQuery(void *e) { if (__atomic_load_n(&resetting, __ATOMIC_SEQ_CST)) bad("cuEventQuery during reset"); handle_ok((uint64_t)e, "cuEventQuery (stale)"); OK; }
static CUresult base_cuEventSynchronize(void *e) { in_ctx("cuEventSynchronize"); handle_ok((uint64_t)e, "cuEventSynchronize (stale)"); OK; }
CUresult cuEventDestroy_v2(void *e) { in_ctx("cuEventDestroy"); handle_ok((uint64_t)e, "cuEventDestroy (stale)"); OK; }
CUresult cuMemAllocAsync(uint64_t *p, size_t b, void *s) { in_ctx("cuMemAllocAsync"); stream_ok((uint64_t)s, "cuMemAllocAsync (stale stream)"); *p = make(); OK; }
static CUresult base_cuMemFreeAsync(uint64_t p, void *s) { in_ctx("cuMemFreeAsync"); handle_ok(p, "cuMemFreeAsync (stale pointer)"); stream_ok((uint64_t)s, "cuMemFreeAsync (stale stream)"); OK; }
static CUresult base_cuMemAlloc_v2(uint64_t *p, size_t b) { in_ctx("cuMemAlloc"); *p = make(); OK; }
static CUresult base_cuMemFree_v2(uint64_t p) { in_ctx("cuMemFree"); handle_ok(p, "cuMemFree (stale pointer)"); OK; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { in_ctx("cuMemGetInfo"); *f = 70ull << 30; *t = 80ull << 30; OK; }
static CUresult base_cuMemsetD8Async(uint64_t p, unsigned char v, size_t n, void *s) { in_ctx("cuMemsetD8Async"); handle_ok(p, "cuMemsetD8Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD8Async (stale stream)"); OK; }
static CUresult base_cuMemsetD32Async(uint64_t p, unsigned v, size_t n, void *s) { in_ctx("cuMemsetD32Async"); handle_ok(p, "cuMemsetD32Async (stale pointer)"); stream_ok((uint64_t)s, "cuMemsetD32Async (stale stream)"); OK; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *h, size_t n, void *s) { in_ctx("cuMemcpyHtoDAsync"); handle_ok(d, "cuMemcpyHtoDAsync (stale pointer)"); OK; }
CUresult cuMemcpyDtoHAsync_v2(void *h, uint64_t d, size_t n, void *s) { in_ctx("cuMemcpyDtoHAsync"); handle_ok(d, "cuMemcpyDtoHAsync (stale pointer)"); OK; }
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
struct cap { uint64_t stream; uint64_t id; int mode; int invalid; pthread_t owner; };
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
// Work queued on stream s: if s captures, the crate must know it.
static void queued(uint64_t s, const char *call) {
  pthread_mutex_lock(&cap_mu);
  int i = cap_find(s);
  int unknown = i >= 0 && !(asked_stream == s && asked_id == caps[i].id);
  pthread_mutex_unlock(&cap_mu);
  if (unknown) bad(call);
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
static CUresult begin(uint64_t s, int mode) {
  if (s == 1) return 900;
  pthread_mutex_lock(&cap_mu);
  if (cap_find(s) >= 0) { pthread_mutex_unlock(&cap_mu); return 401; }
  for (int i = 0; i < CAP_SLOTS; i++)
    if (!caps[i].id) {
      caps[i] = (struct cap){s, next_capture++, mode, 0, pthread_self()};
      pthread_mutex_unlock(&cap_mu);
      return 0;
    }
  pthread_mutex_unlock(&cap_mu);
  return 2;
}
CUresult cuStreamBeginCapture_v2(void *s, int mode) { in_ctx("cuStreamBeginCapture"); stream_ok((uint64_t)s, "cuStreamBeginCapture (stale)"); return begin((uint64_t)s, mode); }
CUresult cuStreamBeginCaptureToGraph(void *s, void *g, const void *d, const void *e, size_t n, int mode) { in_ctx("cuStreamBeginCaptureToGraph"); return begin((uint64_t)s, mode); }
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
CUresult cuCtxSynchronize(void) { if (unsafe_call("cuCtxSynchronize during a capture")) return 900; return base_cuCtxSynchronize(); }
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

CUresult cuMemsetD8Async(uint64_t p, unsigned char v, size_t n, void *s) { queued((uint64_t)s, "cuMemsetD8Async captured without the crate knowing"); return base_cuMemsetD8Async(p, v, n, s); }
CUresult cuMemsetD32Async(uint64_t p, unsigned v, size_t n, void *s) { queued((uint64_t)s, "cuMemsetD32Async captured without the crate knowing"); return base_cuMemsetD32Async(p, v, n, s); }
// Page-locked memory (registered Rust allocations).
CUresult cuMemHostRegister_v2(void *p, size_t b, unsigned f) { in_ctx("cuMemHostRegister"); if (unsafe_call("cuMemHostRegister during a capture")) return 900; OK; }
CUresult cuMemHostUnregister(void *p) { in_ctx("cuMemHostUnregister"); if (unsafe_call("cuMemHostUnregister during a capture")) return 900; OK; }
CUresult cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned f) { *d = (uint64_t)(uintptr_t)p; OK; }
CUresult cuMemHostAlloc(void **p, size_t b, unsigned f) { in_ctx("cuMemHostAlloc"); if (unsafe_call("cuMemHostAlloc during a capture")) return 900; *p = calloc(1, b ? b : 1); OK; }
CUresult cuMemFreeHost(void *p) { in_ctx("cuMemFreeHost"); if (unsafe_call("cuMemFreeHost during a capture")) return 900; free(p); OK; }

// User objects owned by graphs: a graph's references are dropped by cuGraphDestroy, and the
// destructor runs (here, at once) when the last one goes.
#define UO_SLOTS 4096
struct uo { uint64_t h; void *p; void (*d)(void *); int refs; };
static struct uo uos[UO_SLOTS];
struct gref { uint64_t g; uint64_t h; int n; };
static struct gref grefs[UO_SLOTS];
static pthread_mutex_t uo_mu = PTHREAD_MUTEX_INITIALIZER;
static void uo_release(uint64_t h, int n) {  // not under uo_mu
  void (*d)(void *) = 0;
  void *p = 0;
  pthread_mutex_lock(&uo_mu);
  for (int i = 0; i < UO_SLOTS; i++)
    if (uos[i].h == h) {
      uos[i].refs -= n;
      if (uos[i].refs <= 0) { d = uos[i].d; p = uos[i].p; uos[i].h = 0; }
      break;
    }
  pthread_mutex_unlock(&uo_mu);
  if (d) d(p);
}
CUresult cuUserObjectCreate(void **o, void *p, void (*d)(void *), unsigned refs, unsigned flags) {
  pthread_mutex_lock(&uo_mu);
  for (int i = 0; i < UO_SLOTS; i++)
    if (!uos[i].h) {
      uos[i] = (struct uo){make(), p, d, (int)refs};
      *o = (void *)uos[i].h;
      pthread_mutex_unlock(&uo_mu);
      OK;
    }
  pthread_mutex_unlock(&uo_mu);
  return 2;
}
CUresult cuUserObjectRelease(void *o, unsigned n) { uo_release((uint64_t)o, (int)n); OK; }
CUresult cuGraphRetainUserObject(void *g, void *o, unsigned n, unsigned flags) {
  pthread_mutex_lock(&uo_mu);
  if (!(flags & 1))
    for (int i = 0; i < UO_SLOTS; i++) if (uos[i].h == (uint64_t)o) uos[i].refs += (int)n;
  for (int i = 0; i < UO_SLOTS; i++)
    if (!grefs[i].g) { grefs[i] = (struct gref){(uint64_t)g, (uint64_t)o, (int)n}; break; }
  pthread_mutex_unlock(&uo_mu);
  OK;
}
CUresult cuGraphReleaseUserObject(void *g, void *o, unsigned n) {
  pthread_mutex_lock(&uo_mu);
  for (int i = 0; i < UO_SLOTS; i++)
    if (grefs[i].g == (uint64_t)g && grefs[i].h == (uint64_t)o) { grefs[i].g = 0; break; }
  pthread_mutex_unlock(&uo_mu);
  uo_release((uint64_t)o, (int)n);
  OK;
}
CUresult cuGraphCreate(void **g, unsigned f) { in_ctx("cuGraphCreate"); *g = (void *)make(); OK; }
CUresult cuGraphDestroy(void *g) {
  in_ctx("cuGraphDestroy");
  for (;;) {
    uint64_t h = 0;
    int n = 0;
    pthread_mutex_lock(&uo_mu);
    for (int i = 0; i < UO_SLOTS; i++)
      if (grefs[i].g == (uint64_t)g) { h = grefs[i].h; n = grefs[i].n; grefs[i].g = 0; break; }
    pthread_mutex_unlock(&uo_mu);
    if (!h) break;
    uo_release(h, n);
  }
  OK;
}
uint64_t nulldrv_user_objects(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&uo_mu);
  for (int i = 0; i < UO_SLOTS; i++) n += uos[i].h != 0;
  pthread_mutex_unlock(&uo_mu);
  return n;
}

CUresult cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_NULL"; OK; }
CUresult cuGetErrorString(int e, const char **s) { *s = "null driver"; OK; }
