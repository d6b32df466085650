// Does compute-sanitizer memcheck stall the driver under the crate's stress pattern (eight threads
// doing random jobs on legacy / per-thread / blocking / non-blocking streams, streams replaced
// while work is queued, memory registered, unregistered and freed) without the crate?
// (Driver API only, no crate code; the kernel is PTX loaded with cuModuleLoadData, as the crate
// loads its kernels, so no libcudart is in the process.)
//
// Why: on an H200 (driver 580.159.04, CUDA 13.0) the crate's test safety_stress_threads
// (tests/gpu/safety.rs: `stress_child`, `stress_round`, `Worker`) passes in 5-10 s without
// tools, but under `compute-sanitizer --tool memcheck` its second round never finished (over
// 440 s). The stacks of the stalled process showed no thread in the crate's locks; every worker
// inside a driver call waiting on a lock of the driver: cuMemHostUnregister (in
// __pthread_rwlock_wrlock inside libcuda), two cuStreamDestroy_v2, cuStreamCreateWithPriority,
// cuMemAlloc_v2, cuMemcpyDtoHAsync_v2 (pthread mutex / condition waits inside libcuda), and a
// thread the driver made running a sanitizer callback (libcuda -> libsanitizer-public ->
// libsanitizer-collection -> libcuda -> the rwlock cuMemHostUnregister waits on); the crate's
// reclaimer thread idle, another crate thread in cuStreamDestroy from a drop. (An earlier stall
// of the same look, probes/memcheck_unload_deadlock.cu, was not reproduced with driver calls
// alone.)
//
// What it does, as the crate's `stress_round` does: rounds of N threads (new threads each
// round), each doing random jobs until the round's deadline on a random stream kind (legacy,
// per-thread, the thread's own blocking stream, its own non-blocking stream), its own streams
// replaced now and then (cuStreamCreateWithPriority of the new one, then cuStreamDestroy of the
// old one with work maybe still queued). Jobs: vadd (three device buffers of up to 4.6 MiB,
// cuMemAlloc or cuMemAllocAsync on a random stream; uploads by synchronous / asynchronous
// pageable copies, from pageable memory registered for the copy and unregistered after it, or
// from cuMemHostAlloc memory; the kernel; read back into pageable, page-locked (cuMemHostAlloc
// or registered) or managed memory; inputs and output freed while work is queued: by
// cuMemFreeAsync in their own stream, by cuEventSynchronize + cuMemFree on the thread, or handed
// with an event to a reclaimer thread that polls cuEventQuery and frees with cuMemFreeAsync in a
// stream for frees, as the crate does); fill (two cuMemsetD32Async, read back); in the first
// round a kernel reading managed memory and writing managed or mapped page-locked memory;
// results with their event handed to the next thread through a queue, which waits on the event,
// checks the values and frees the memory (cuMemFreeHost, cuMemHostUnregister, cuMemFree);
// cuLaunchHostFunc callbacks now and then. Round 1 (T/2 s) with managed memory, rounds 2..R
// (T s each) without, cuCtxSynchronize and cuMemGetInfo between rounds: the crate's two rounds.
// A watchdog: every driver call bumps its thread's counter; when none moves for 20 s
// (MSS_STALL_S) it prints "mss STALL" with each thread's last (or current) driver call, holds
// the process MSS_HOLD seconds (for a stack dump: gdb -p PID -batch -ex 'thread apply all bt'),
// and exits 2. A wrong value or an unexpected driver error prints "mss FAILED ..." and exits 1.
//
// Build and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 probes/memcheck_stress_stall.cu -lcuda -o /tmp/mss
//   /tmp/mss 3 && compute-sanitizer --tool memcheck /tmp/mss 5
// (nvcc links libcudart_static, which only registers an empty fatbinary at start; no runtime
// call is made. To keep libcudart out altogether: g++ -O2 -x c++ -I<cuda>/include
// probes/memcheck_stress_stall.cu -lcuda -lpthread -o /tmp/mss.)
// Arguments: [seconds T = 3] [threads = 8] [rounds = 2] [words, comma-separated: seed=N,
// nomanaged, noasync (no cuMemAllocAsync), nomemfree (no cuMemFree of device memory),
// noregister (no cuMemHostRegister), nohostfn, noreplace (no stream replacement)] - the words
// leave one ingredient out each, to narrow a stall down.
// Prints "mss ok: jobs <n> in <s> s, <jobs per thread>" at the end.
//
// Result (fifteenth session, 4 x H200, driver 580.159.04): `mss 3` ok (4,473 jobs in 5.4 s);
// under memcheck `mss 5` ok, 0 errors, 8.8 s: the driver alone did not stall. The crate's stress
// stalled only with per-thread streams (with them left out it passed under memcheck in 6 s):
// a worker's thread-exit destructor in the driver, inside the sanitizer's callback, waiting on
// a driver lock beside cuStreamDestroy and cuMemHostUnregister (see tests/gpu/safety.rs,
// `stress_without`). This probe's threads use per-thread streams too but did not meet it.
#include <cuda.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

// c[i] = a[i] + b[i] for i < n (f32).
static const char *kVaddPtx =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry vadd(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pn) {\n"
    " .reg .b32 %r<6>; .reg .b64 %rd<10>; .reg .f32 %f<4>; .reg .pred %p;\n"
    " ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc];\n"
    " ld.param.u32 %r1, [pn];\n"
    " mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;\n"
    " mad.lo.u32 %r5, %r2, %r3, %r4;\n"
    " setp.ge.u32 %p, %r5, %r1; @%p bra DONE;\n"
    " cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;"
    " cvta.to.global.u64 %rd3, %rd3;\n"
    " mul.wide.u32 %rd4, %r5, 4;\n"
    " add.s64 %rd5, %rd1, %rd4; ld.global.f32 %f1, [%rd5];\n"
    " add.s64 %rd6, %rd2, %rd4; ld.global.f32 %f2, [%rd6];\n"
    " add.rn.f32 %f3, %f1, %f2;\n"
    " add.s64 %rd7, %rd3, %rd4; st.global.f32 [%rd7], %f3;\n"
    "DONE: ret;\n}\n";

// ---------------------------------------------------------------------------------------------
// Per-thread progress and last driver call, for the watchdog.

static const int kMaxThreads = 60;

struct Slot {
  const char *volatile last_call = "none";
  std::atomic<long> progress{0};
  std::atomic<int> in_call{0};
  std::atomic<bool> used{false};
  const char *volatile waiting = nullptr;  // set while waiting outside the driver
  char name[32] = "";
};
static Slot g_slots[kMaxThreads + 2];  // workers, then the reclaimer, then main
static thread_local Slot *t_slot = nullptr;

static void claim_slot(int i, const char *name) {
  t_slot = &g_slots[i];
  std::snprintf(t_slot->name, sizeof t_slot->name, "%s", name);
  t_slot->used = true;
}

[[noreturn]] static void die_call(const char *call, CUresult r) {
  const char *s = nullptr;
  cuGetErrorName(r, &s);
  std::printf("mss FAILED: %s on %s: %s (%d)\n", call, t_slot ? t_slot->name : "?", s ? s : "?",
              (int)r);
  std::fflush(stdout);
  std::_Exit(1);
}

// A driver call, recorded as this thread's last call; its result returned.
#define TRY(x)                                        \
  ([&]() -> CUresult {                                \
    Slot *s_ = t_slot;                                \
    if (s_) {                                         \
      s_->last_call = #x;                             \
      s_->in_call.store(1);                           \
    }                                                 \
    CUresult r_ = (x);                                \
    if (s_) {                                         \
      s_->in_call.store(0);                           \
      s_->progress.fetch_add(1);                      \
    }                                                 \
    return r_;                                        \
  }())
// A driver call that must succeed.
#define CK(x)                                   \
  do {                                          \
    CUresult r2_ = TRY(x);                      \
    if (r2_ != CUDA_SUCCESS) die_call(#x, r2_); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Options and shared state.

struct Options {
  bool no_managed = false, no_async = false, no_memfree = false, no_register = false,
       no_hostfn = false, no_replace = false;
  unsigned long long seed = 0;
};
static Options g_opt;

static CUcontext g_ctx;
static CUfunction g_vadd;
static CUstream g_free_stream;  // the crate's stream for frees (non-blocking)
static std::atomic<long> g_hostfns_run{0};
static std::atomic<int> g_round{0};

struct Rng {
  unsigned long long x;
  explicit Rng(unsigned long long seed) : x(seed * 0x9E3779B97F4A7C15ull + 1) {}
  unsigned long long next() {  // splitmix64
    unsigned long long z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return (size_t)(next() % n); }
  size_t range(size_t lo, size_t hi) { return lo + below(hi - lo); }
  bool coin() { return next() & 1; }
  bool chance256(unsigned k) { return (next() & 255) < k; }
};

static CUevent fence(CUstream s) {
  CUevent ev;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(cuEventRecord(ev, s));
  return ev;
}

template <class T>
static void expect_same(const std::string &what, const T *got, const T *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::printf("mss FAILED: %s: element %zu of %zu: got %.9g want %.9g\n", what.c_str(), i,
                  n, (double)got[i], (double)want[i]);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
}

static void launch_vadd(CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, size_t n) {
  unsigned nn = (unsigned)n;
  void *args[] = {&a, &b, &c, &nn};
  unsigned blocks = (unsigned)((n + 255) / 256);
  CK(cuLaunchKernel(g_vadd, blocks, 1, 1, 256, 1, 1, 0, s, args, nullptr));
}

static void CUDA_CB host_fn(void *p) {  // no CUDA call in here
  std::free(p);
  g_hostfns_run++;
}

// ---------------------------------------------------------------------------------------------
// The reclaimer: device memory freed once its uses' event has completed (cuEventQuery), by
// cuMemFreeAsync in the stream for frees, on a thread of its own, as the crate's reclaimer does.

struct Grave {
  CUdeviceptr p;
  CUevent ev;
};
static std::mutex g_gmu;
static std::condition_variable g_gcv;
static std::deque<Grave> g_graves;
static std::atomic<long> g_gbusy{0};
static bool g_gstop = false;

static void bury(CUdeviceptr p, CUevent ev) {
  {
    std::lock_guard<std::mutex> l(g_gmu);
    g_graves.push_back({p, ev});
  }
  g_gcv.notify_one();
}

static void reclaimer(int slot) {
  claim_slot(slot, "reclaimer");
  CK(cuCtxSetCurrent(g_ctx));
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    std::deque<Grave> batch;
    {
      std::unique_lock<std::mutex> l(g_gmu);
      t_slot->waiting = "idle (no frees queued)";
      g_gcv.wait(l, [] { return !g_graves.empty() || g_gstop; });
      t_slot->waiting = nullptr;
      if (g_graves.empty()) return;
      batch.swap(g_graves);
      g_gbusy += (long)batch.size();
    }
    size_t n = batch.size();
    std::deque<Grave> waiting;
    for (Grave &g : batch) {
      CUresult r = TRY(cuEventQuery(g.ev));
      if (r == CUDA_ERROR_NOT_READY) {
        waiting.push_back(g);
        continue;
      }
      if (r != CUDA_SUCCESS) die_call("cuEventQuery (reclaimer)", r);
      CK(cuMemFreeAsync(g.p, g_free_stream));
      CK(cuEventDestroy(g.ev));
    }
    bool progressed = waiting.size() < n;
    {
      std::lock_guard<std::mutex> l(g_gmu);
      for (Grave &g : waiting) g_graves.push_back(g);
      g_gbusy -= (long)n;
    }
    if (progressed) {
      pause = std::chrono::microseconds(50);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }
}

static void wait_for_reclaimer() {
  for (;;) {
    {
      std::lock_guard<std::mutex> l(g_gmu);
      if (g_graves.empty() && g_gbusy == 0) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// ---------------------------------------------------------------------------------------------
// Host-reachable memory.

enum HostKind { kHostAlloc, kRegistered, kManaged };
static const char *kHostName[] = {"cuMemHostAlloc memory", "registered memory", "managed memory"};

struct HostMem {
  HostKind kind = kHostAlloc;
  float *p = nullptr;
  CUdeviceptr dptr = 0;  // managed, or mapped page-locked memory's device address
  size_t bytes = 0;
};

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static HostMem host_alloc(HostKind kind, size_t n, bool mapped) {
  HostMem m;
  m.kind = kind;
  m.bytes = n * sizeof(float);
  switch (kind) {
    case kHostAlloc: {
      void *p = nullptr;
      CK(cuMemHostAlloc(&p, m.bytes, mapped ? CU_MEMHOSTALLOC_DEVICEMAP : 0));
      m.p = (float *)p;
      if (mapped) CK(cuMemHostGetDevicePointer(&m.dptr, p, 0));
      break;
    }
    case kRegistered: {  // the crate's PinnedBuffer: an allocation of its own, registered
      void *p = std::aligned_alloc(4096, round_up(m.bytes, 4096));
      if (!p) {
        std::printf("mss FAILED: out of host memory\n");
        std::_Exit(1);
      }
      CK(cuMemHostRegister(p, m.bytes, mapped ? CU_MEMHOSTREGISTER_DEVICEMAP : 0));
      m.p = (float *)p;
      if (mapped) CK(cuMemHostGetDevicePointer(&m.dptr, p, 0));
      break;
    }
    case kManaged:
      CK(cuMemAllocManaged(&m.dptr, m.bytes, CU_MEM_ATTACH_GLOBAL));
      m.p = (float *)(uintptr_t)m.dptr;
      break;
  }
  return m;
}

// Frees `m`; no queued work may use it any more (the caller waited for its event).
static void host_free(HostMem &m) {
  switch (m.kind) {
    case kHostAlloc:
      CK(cuMemFreeHost(m.p));
      break;
    case kRegistered:
      CK(cuMemHostUnregister(m.p));
      std::free(m.p);
      break;
    case kManaged:
      CK(cuMemFree(m.dptr));
      break;
  }
  m.p = nullptr;
}

// Page-locked or managed results with their event, checked by another thread.
struct Handoff {
  HostMem mem;
  CUevent ev;
  std::vector<float> want;
  std::string what;
};

struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Handoff> q;
  bool closed = false;  // its one sender (the previous thread) is done
};

static void check_handoff(Handoff &h, int by) {
  CK(cuEventSynchronize(h.ev));
  expect_same(h.what + " (checked on thread " + std::to_string(by) + ")", h.mem.p,
              h.want.data(), h.want.size());
  CK(cuEventDestroy(h.ev));
  host_free(h.mem);
}

// ---------------------------------------------------------------------------------------------
// The workers.

enum StreamKind { kLegacy, kPerThread, kBlocking, kNonBlocking };
static const char *kKindName[] = {"legacy", "per-thread", "blocking", "non-blocking"};

struct DevBuf {
  CUdeviceptr p = 0;
  bool async = false;     // cuMemAllocAsync in `home`
  bool only_home = false; // used only in `home` (and ordered there): freed there at once
  CUstream home = nullptr;
  StreamKind home_kind = kLegacy;
};

struct Worker {
  int id;
  Rng r;
  bool managed;
  Inbox *inbox, *next;
  CUstream blocking = nullptr, non_blocking = nullptr;
  std::vector<CUstream> retired;  // replaced, destroyed at the end of the job
  long jobs = 0, checks = 0;

  Worker(int id, unsigned long long seed, bool managed, Inbox *inbox, Inbox *next)
      : id(id), r(seed), managed(managed), inbox(inbox), next(next) {}

  CUstream new_stream(bool nb) {
    CUstream s;
    CK(cuStreamCreateWithPriority(&s, nb ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT, 0));
    return s;
  }

  CUstream stream(StreamKind *k) {
    switch (r.below(4)) {
      case 0:
        *k = kLegacy;
        return CU_STREAM_LEGACY;
      case 1:
        *k = kPerThread;
        return CU_STREAM_PER_THREAD;
      case 2:
        *k = kBlocking;
        return blocking;
      default:
        *k = kNonBlocking;
        return non_blocking;
    }
  }

  // Replaces an owned stream now and then, while work may be queued on it: the new one made,
  // the old one destroyed (now, or at the end of the job when the job still uses it).
  void maybe_replace(bool now) {
    if (g_opt.no_replace) return;
    for (int nb = 0; nb < 2; nb++) {
      if (!r.chance256(20)) continue;
      CUstream &s = nb ? non_blocking : blocking;
      CUstream old = s;
      s = new_stream(nb);
      if (now)
        CK(cuStreamDestroy(old));
      else
        retired.push_back(old);
    }
  }

  void destroy_retired() {
    for (CUstream s : retired) CK(cuStreamDestroy(s));
    retired.clear();
  }

  size_t len() { return r.chance256(40) ? r.range(300000, 1200000) : r.range(1, 50000); }

  void random_floats(std::vector<float> &v) {
    for (float &x : v) x = (float)((long)r.below(2000001) - 1000000) / 64.0f;
  }

  // cuMemAlloc, or cuMemAllocAsync in a random stream ordered before `s` (and before the
  // legacy stream, for synchronous copies, when that stream is non-blocking).
  DevBuf alloc(size_t bytes, CUstream s) {
    DevBuf b;
    if (g_opt.no_async || r.coin()) {
      CK(cuMemAlloc(&b.p, bytes));
      return b;
    }
    StreamKind k;
    CUstream x = stream(&k);
    CUresult e = TRY(cuMemAllocAsync(&b.p, bytes, x));
    if (e == CUDA_ERROR_INVALID_VALUE && k == kPerThread) {  // as the crate allows
      CK(cuMemAlloc(&b.p, bytes));
      return b;
    }
    if (e != CUDA_SUCCESS) die_call("cuMemAllocAsync", e);
    b.async = true;
    b.home = x;
    b.home_kind = k;
    b.only_home = x == s;
    if (x != s || k == kNonBlocking) {
      CUevent ev = fence(x);
      if (x != s) CK(cuStreamWaitEvent(s, ev, 0));
      if (k == kNonBlocking) CK(cuStreamWaitEvent(CU_STREAM_LEGACY, ev, 0));
      CK(cuEventDestroy(ev));
    }
    return b;
  }

  // Frees `b` once the work queued so far in `s` is done: in its own stream at once when only
  // used there; else cuEventSynchronize + cuMemFree here, or the reclaimer's cuMemFreeAsync.
  void free_buf(DevBuf &b, CUstream s) {
    if (!b.p) return;
    if (b.async && b.only_home && b.home_kind != kLegacy) {
      CK(cuMemFreeAsync(b.p, b.home));
    } else {
      CUevent ev = fence(s);
      if (!b.async && !g_opt.no_memfree && r.below(4) == 0) {
        CK(cuEventSynchronize(ev));
        CK(cuEventDestroy(ev));
        CK(cuMemFree(b.p));
      } else {
        bury(b.p, ev);
      }
    }
    b.p = 0;
  }

  // After work in the legacy stream (a synchronous copy), `s` waits for it.
  void after_legacy(CUstream s) {
    CUevent ev = fence(CU_STREAM_LEGACY);
    CK(cuStreamWaitEvent(s, ev, 0));
    CK(cuEventDestroy(ev));
  }

  void upload(DevBuf &d, const std::vector<float> &h, CUstream s, StreamKind k) {
    size_t bytes = h.size() * sizeof(float);
    switch (r.below(g_opt.no_register ? 2 : 4)) {
      case 0:  // synchronous, pageable, in the legacy stream
        CK(cuMemcpyHtoD(d.p, h.data(), bytes));
        d.only_home = false;
        if (k == kNonBlocking) after_legacy(s);
        break;
      case 1:  // asynchronous from pageable memory (the driver stages it)
        CK(cuMemcpyHtoDAsync(d.p, h.data(), bytes, s));
        break;
      case 2: {  // pageable memory registered for the copy, unregistered once it is done
        void *p = std::aligned_alloc(4096, round_up(bytes, 4096));
        std::memcpy(p, h.data(), bytes);
        CK(cuMemHostRegister(p, bytes, 0));
        CK(cuMemcpyHtoDAsync(d.p, p, bytes, s));
        CUevent ev = fence(s);
        CK(cuEventSynchronize(ev));
        CK(cuEventDestroy(ev));
        CK(cuMemHostUnregister(p));
        std::free(p);
        break;
      }
      default: {  // cuMemHostAlloc memory, freed once the copy is done
        void *p = nullptr;
        CK(cuMemHostAlloc(&p, bytes, 0));
        std::memcpy(p, h.data(), bytes);
        CK(cuMemcpyHtoDAsync(d.p, p, bytes, s));
        CUevent ev = fence(s);
        CK(cuEventSynchronize(ev));
        CK(cuEventDestroy(ev));
        CK(cuMemFreeHost(p));
        break;
      }
    }
  }

  void check_or_hand_off(HostMem mem, CUevent ev, std::vector<float> want, std::string what) {
    Handoff h{mem, ev, std::move(want), std::move(what)};
    if (r.coin()) {
      {
        std::lock_guard<std::mutex> l(next->mu);
        next->q.push_back(std::move(h));
      }
      next->cv.notify_one();
      return;
    }
    check_handoff(h, id);
    checks++;
  }

  void drain_inbox() {
    for (;;) {
      Handoff h;
      {
        std::lock_guard<std::mutex> l(inbox->mu);
        if (inbox->q.empty()) return;
        h = std::move(inbox->q.front());
        inbox->q.pop_front();
      }
      check_handoff(h, id);
      checks++;
    }
  }

  // c = a + b with random allocation, upload, stream, read-back and frees.
  void vadd_job() {
    size_t n = len(), bytes = n * sizeof(float);
    std::vector<float> a(n), b(n), want(n);
    random_floats(a);
    random_floats(b);
    for (size_t i = 0; i < n; i++) want[i] = a[i] + b[i];
    StreamKind k;
    CUstream s = stream(&k);
    std::string what =
        "thread " + std::to_string(id) + " vadd n=" + std::to_string(n) + " on " + kKindName[k];
    DevBuf da = alloc(bytes, s), db = alloc(bytes, s), dc = alloc(bytes, s);
    upload(da, a, s, k);
    upload(db, b, s, k);
    launch_vadd(s, da.p, db.p, dc.p, n);
    // Inputs freed while the kernel may still read them.
    if (r.coin()) free_buf(da, s);
    if (r.coin()) free_buf(db, s);
    int way = (int)r.below(4);
    if (way == 0) {
      std::vector<float> back(n, NAN);
      CK(cuMemcpyDtoHAsync(back.data(), dc.p, bytes, s));
      CK(cuStreamSynchronize(s));
      expect_same(what, back.data(), want.data(), n);
      checks++;
    } else if (way == 1) {
      // A synchronous copy runs in the legacy stream: after a non-blocking stream's kernel
      // only by waiting for it.
      if (k == kNonBlocking) CK(cuStreamSynchronize(s));
      std::vector<float> back(n, NAN);
      CK(cuMemcpyDtoH(back.data(), dc.p, bytes));
      dc.only_home = false;
      expect_same(what, back.data(), want.data(), n);
      checks++;
    } else {
      HostKind hk = (way == 2 || !managed) ? (r.coin() ? kHostAlloc : kRegistered) : kManaged;
      what += std::string(" into ") + kHostName[hk];
      HostMem m = host_alloc(hk, n, false);
      for (size_t i = 0; i < n; i++) m.p[i] = NAN;
      if (hk == kManaged)
        CK(cuMemcpyAsync(m.dptr, dc.p, bytes, s));
      else
        CK(cuMemcpyDtoHAsync(m.p, dc.p, bytes, s));
      CUevent ev = fence(s);
      // The source freed, and maybe the stream replaced, with the copy queued.
      if (r.coin()) free_buf(dc, s);
      maybe_replace(false);
      check_or_hand_off(m, ev, std::move(want), std::move(what));
    }
    free_buf(da, s);
    free_buf(db, s);
    free_buf(dc, s);
    destroy_retired();
    jobs++;
  }

  // A kernel on managed inputs writing managed or mapped page-locked memory.
  void host_memory_kernel_job() {
    size_t n = len();
    std::vector<float> a(n), b(n), want(n);
    random_floats(a);
    random_floats(b);
    for (size_t i = 0; i < n; i++) want[i] = a[i] + b[i];
    StreamKind k;
    CUstream s = stream(&k);
    HostMem ma = host_alloc(kManaged, n, false), mb = host_alloc(kManaged, n, false);
    std::memcpy(ma.p, a.data(), ma.bytes);
    std::memcpy(mb.p, b.data(), mb.bytes);
    bool mapped = r.coin();
    HostMem out = mapped ? host_alloc(r.coin() ? kHostAlloc : kRegistered, n, true)
                         : host_alloc(kManaged, n, false);
    for (size_t i = 0; i < n; i++) out.p[i] = NAN;
    launch_vadd(s, ma.dptr, mb.dptr, out.dptr, n);
    CUevent ev = fence(s);
    // Inputs freed with the kernel queued: the free waits for the kernel (as the crate's drop).
    CK(cuEventSynchronize(ev));
    host_free(ma);
    host_free(mb);
    std::string what = "thread " + std::to_string(id) + " vadd n=" + std::to_string(n) + " on " +
                       kKindName[k] + " from managed memory into " +
                       (mapped ? "mapped " : "") + kHostName[out.kind];
    check_or_hand_off(out, ev, std::move(want), std::move(what));
    jobs++;
  }

  // A fill on a stream, read back.
  void fill_job() {
    size_t n = len();
    unsigned value = (unsigned)r.next();
    StreamKind k;
    CUstream s = stream(&k);
    DevBuf d = alloc(n * 4, s);
    CK(cuMemsetD32Async(d.p, 0xDEADBEEFu, n, s));
    CK(cuMemsetD32Async(d.p, value, n, s));
    std::vector<unsigned> back(n, 0xDEADBEEFu + 1), want(n, value);
    CK(cuMemcpyDtoHAsync(back.data(), d.p, n * 4, s));
    CK(cuStreamSynchronize(s));
    expect_same("thread " + std::to_string(id) + " fill n=" + std::to_string(n) + " on " +
                    kKindName[k],
                back.data(), want.data(), n);
    checks++;
    free_buf(d, s);
    jobs++;
  }

  void maybe_host_fn() {
    if (g_opt.no_hostfn || !r.chance256(32)) return;
    StreamKind k;
    CUstream s = stream(&k);
    void *p = std::malloc(64);
    CK(cuLaunchHostFunc(s, host_fn, p));
  }

  void run(std::chrono::steady_clock::time_point deadline) {
    CK(cuCtxSetCurrent(g_ctx));
    blocking = new_stream(false);
    non_blocking = new_stream(true);
    while (std::chrono::steady_clock::now() < deadline) {
      drain_inbox();
      size_t j = r.below(10);
      if (j <= 5)
        vadd_job();
      else if (j <= 7 && managed)
        host_memory_kernel_job();
      else
        fill_job();
      maybe_host_fn();
      maybe_replace(true);
    }
    // No more hand-offs from this thread; check what the previous one still sends.
    {
      std::lock_guard<std::mutex> l(next->mu);
      next->closed = true;
    }
    next->cv.notify_all();
    for (;;) {
      Handoff h;
      {
        std::unique_lock<std::mutex> l(inbox->mu);
        t_slot->waiting = "done, waiting for the previous thread's hand-offs";
        inbox->cv.wait(l, [&] { return !inbox->q.empty() || inbox->closed; });
        t_slot->waiting = nullptr;
        if (inbox->q.empty()) break;
        h = std::move(inbox->q.front());
        inbox->q.pop_front();
      }
      check_handoff(h, id);
      checks++;
    }
    // The worker's streams go with it (the crate's Worker dropped).
    CK(cuStreamDestroy(blocking));
    CK(cuStreamDestroy(non_blocking));
    t_slot->waiting = "finished its round";
  }
};

// ---------------------------------------------------------------------------------------------
// The watchdog: no driver call of any thread returned for `stall_s` seconds.

static std::atomic<bool> g_watch_stop{false};

static void watchdog(int nslots, int stall_s, int hold_s,
                     std::chrono::steady_clock::time_point t0) {
  long last_total = -1;
  auto last_move = std::chrono::steady_clock::now();
  while (!g_watch_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    long total = 0;
    for (int i = 0; i < nslots; i++) total += g_slots[i].progress;
    auto now = std::chrono::steady_clock::now();
    if (total != last_total) {
      last_total = total;
      last_move = now;
      continue;
    }
    if (now - last_move < std::chrono::seconds(stall_s)) continue;
    double t = std::chrono::duration<double>(now - t0).count();
    std::printf("mss STALL: no driver call returned for %d s (round %d, %.1f s since the start, "
                "pid %d); last driver call of each thread:\n",
                stall_s, g_round.load(), t, (int)getpid());
    for (int i = 0; i < nslots; i++) {
      Slot &s = g_slots[i];
      if (!s.used) continue;
      const char *c = s.last_call;
      int len = (int)(std::strchr(c, '(') ? std::strchr(c, '(') - c : std::strlen(c));
      const char *w = s.waiting;
      std::printf("  %-10s %s %.*s (calls returned: %ld)%s%s\n", s.name,
                  s.in_call ? "inside" : "after ", len, c, s.progress.load(), w ? "; now " : "",
                  w ? w : "");
    }
    std::fflush(stdout);
    if (hold_s > 0) {
      std::printf("mss holding %d s for a stack dump: gdb -p %d -batch -ex 'thread apply all bt'\n",
                  hold_s, (int)getpid());
      std::fflush(stdout);
      sleep(hold_s);
    }
    std::_Exit(2);  // not exit(): the driver's teardown would wait on the stalled threads
  }
}

// ---------------------------------------------------------------------------------------------

int main(int argc, char **argv) {
  double secs = argc > 1 ? std::atof(argv[1]) : 3.0;
  int threads = argc > 2 ? std::atoi(argv[2]) : 8;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 2;
  if (threads < 1 || threads > kMaxThreads || rounds < 1 || !(secs > 0)) {
    std::printf("usage: %s [seconds] [threads 1..%d] [rounds] [words]\n", argv[0], kMaxThreads);
    return 1;
  }
  g_opt.seed = (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count();
  std::string words = argc > 4 ? argv[4] : "";
  for (size_t at = 0; at < words.size();) {
    size_t end = words.find(',', at);
    if (end == std::string::npos) end = words.size();
    std::string w = words.substr(at, end - at);
    at = end + 1;
    if (w == "nomanaged") g_opt.no_managed = true;
    else if (w == "noasync") g_opt.no_async = true;
    else if (w == "nomemfree") g_opt.no_memfree = true;
    else if (w == "noregister") g_opt.no_register = true;
    else if (w == "nohostfn") g_opt.no_hostfn = true;
    else if (w == "noreplace") g_opt.no_replace = true;
    else if (w.rfind("seed=", 0) == 0) g_opt.seed = std::strtoull(w.c_str() + 5, nullptr, 10);
    else if (!w.empty()) {
      std::printf("mss: unknown word %s\n", w.c_str());
      return 1;
    }
  }
  const char *env = std::getenv("MSS_STALL_S");
  int stall_s = env ? std::atoi(env) : 20;
  env = std::getenv("MSS_HOLD");
  int hold_s = env ? std::atoi(env) : 0;
  int reclaimer_slot = threads, main_slot = threads + 1, nslots = threads + 2;
  claim_slot(main_slot, "main");
  auto t0 = std::chrono::steady_clock::now();
  std::printf("mss: %d threads, %g s (first round %g s), %d rounds, seed %llu%s\n", threads, secs,
              secs / 2, rounds, g_opt.seed, words.empty() ? "" : (", " + words).c_str());
  std::fflush(stdout);
  std::thread watch(watchdog, nslots, stall_s, hold_s, t0);

  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
  CK(cuCtxSetCurrent(g_ctx));
  CUmodule mod;
  CK(cuModuleLoadData(&mod, kVaddPtx));
  CK(cuModuleGetFunction(&g_vadd, mod, "vadd"));
  CK(cuStreamCreate(&g_free_stream, CU_STREAM_NON_BLOCKING));
  std::thread recl(reclaimer, reclaimer_slot);

  Rng seeds(g_opt.seed);
  long total_jobs = 0, total_checks = 0;
  std::vector<long> per_thread(threads, 0);
  for (int round = 0; round < rounds; round++) {
    g_round = round + 1;
    bool managed = round == 0 && !g_opt.no_managed;
    double t = round == 0 ? secs / 2 : secs;
    std::vector<std::unique_ptr<Inbox>> inboxes;
    for (int i = 0; i < threads; i++) inboxes.emplace_back(new Inbox);
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < threads; i++)
      workers.emplace_back(new Worker(i, seeds.next(), managed, inboxes[i].get(),
                                      inboxes[(i + 1) % threads].get()));
    auto round_start = std::chrono::steady_clock::now();
    auto deadline = round_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(t));
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++)
      ts.emplace_back([&, i] {
        char name[32];
        std::snprintf(name, sizeof name, "worker %d", i);
        claim_slot(i, name);
        t_slot->waiting = nullptr;
        workers[i]->run(deadline);
      });
    t_slot->waiting = "waiting for the workers to end the round";
    for (auto &x : ts) x.join();
    t_slot->waiting = nullptr;
    // As the crate's device::synchronize: the device idle and the deferred frees done.
    CK(cuCtxSynchronize());
    wait_for_reclaimer();
    CK(cuStreamSynchronize(g_free_stream));
    size_t free_b = 0, total_b = 0;
    CK(cuMemGetInfo(&free_b, &total_b));
    long jobs = 0, checks = 0;
    std::string counts;
    for (int i = 0; i < threads; i++) {
      jobs += workers[i]->jobs;
      checks += workers[i]->checks;
      per_thread[i] += workers[i]->jobs;
      counts += (i ? " " : "") + std::to_string(workers[i]->jobs);
    }
    total_jobs += jobs;
    total_checks += checks;
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - round_start)
                      .count();
    std::printf("mss round %d (%s, %g s asked): jobs %ld in %.2f s [%s], checks %ld, host fns "
                "run %ld, free %zu MiB\n",
                round + 1, managed ? "with managed memory" : "without managed memory", t, jobs,
                took, counts.c_str(), checks, g_hostfns_run.load(), free_b >> 20);
    std::fflush(stdout);
    for (int i = 0; i < threads; i++) {
      if (workers[i]->jobs == 0) {
        std::printf("mss FAILED: worker %d did no job in round %d\n", i, round + 1);
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
  }
  {
    std::lock_guard<std::mutex> l(g_gmu);
    g_gstop = true;
  }
  g_gcv.notify_all();
  recl.join();
  CK(cuStreamDestroy(g_free_stream));
  CK(cuModuleUnload(mod));
  g_watch_stop = true;
  watch.join();
  std::string counts;
  for (int i = 0; i < threads; i++) counts += (i ? " " : "") + std::to_string(per_thread[i]);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("mss ok: jobs %ld in %.2f s, [%s] (checks %ld)\n", total_jobs, took,
              counts.c_str(), total_checks);
  CK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
