// Does compute-sanitizer deadlock a module unload on one thread beside texture and array
// destroys on another? (Driver API only, no crate code.)
//
// Why: under racecheck (kernel filter that instruments none of its kernels) the crate's test
// gpu::texture::user_launch_with_a_texture_keeps_it_until_the_kernel_ran stalled for 120 s
// (sixteenth session, H200 x2, driver 580.159.04; thirteenth session once in 10 runs too). The
// stacks: the test thread in cuModuleUnload, inside the sanitizer's callback
// (libsanitizer-public), waiting on a driver mutex; the crate's reclaimer threads in
// cuTexObjectDestroy and cuArrayDestroy, each waiting on a driver rwlock (wrlock); no thread in
// a crate lock. This replays the test's calls with the driver alone, many times over:
//   a long-lived module (kernels/ptx/spin.ptx) and, per round, a user module loaded from
//   kernels/ptx/texture.ptx; a 2D float array filled from the host and a texture over it; a spin
//   kernel then sample_2d over the texture on one stream, an event after them; a second thread
//   waits for the event and destroys the texture and the array (the crate's reclaimer); the
//   first makes four decoy arrays and textures, synchronizes, reads the output back, destroys
//   the decoys and unloads the user module, while the second may still be destroying.
// Mode `crate` (argv[2]): as the crate, the decoys' destroys (unused objects) are handed to two
// background threads (textures to one, arrays to the other), and the module is unloaded at once
// beside them; otherwise the first thread destroys the decoys itself before the unload.
// Mode `crate2`: as `crate`, and its spin kernel from a library (cuLibraryLoadData with a JIT
// log, as the crate's embedded kernels), the user module loaded with cuModuleLoadDataEx and a
// JIT log (as Module::from_ptx), device 1's primary context retained too, and the buffers
// stream-ordered (cuMemAllocAsync) and freed in a stream of their own (cuMemFreeAsync).
// A stall: no round finished for 20 s; prints "rud stalled" and exits 3. Otherwise "rud ok".
//
// Results (sixteenth session, H200 x2, driver 580.159.04), first mode: NOT reproduced. Plain
// 8 s: 82 rounds ok; racecheck with the filter, 100 s: 1571 rounds ok, 0 hazards; racecheck
// instrumenting everything, 100 s: 9530 rounds ok, 0 hazards. The crate's test beside it, alone
// under racecheck 8 times: 6 passed (0 hazards), the last 2 stalled to their 45 s limit.
// Mode `crate`, same lengths: NOT reproduced either (plain 1343 rounds; racecheck filtered
// 21096 rounds, unfiltered 5683, 0 hazards) while the crate's test stalled 4 of 12 beside it;
// the stalls' stacks: the test thread in cuModuleUnload inside the sanitizer's callback waiting
// on a driver mutex, the array reclaimer in cuArrayDestroy waiting on a driver rwlock (wrlock),
// nothing else in the driver or in a crate lock. Mode `crate2`: NOT reproduced (plain 1477
// rounds; racecheck filtered, two processes side by side, 21762 and 22031 rounds, 0 hazards).
// One round per process (argv[1] = -1, crate2), as the test makes one: 24 processes, 4 side by
// side, under racecheck: NOT reproduced (0 stalls). The crate's test with its module unloaded
// before the decoys' destroys (after a device synchronize): 0 stalls in 16 runs under
// racecheck, 4 side by side (15e31fa). So the stall needs the unload and an array destroy at
// once, and something of the crate's process that this probe does not have; every frame that
// waits is the driver's, one inside the tool's callback.
//
//   nvcc -O2 -arch=sm_90 probes/racecheck_unload_destroy.cu -lcuda -o /tmp/rud
//   /tmp/rud 10
//   compute-sanitizer --tool racecheck --kernel-name regex=static_reverse /tmp/rud 60
//   compute-sanitizer --tool racecheck /tmp/rud 60
//   compute-sanitizer --tool racecheck --kernel-name regex=static_reverse /tmp/rud 60 crate
// (run from the repository root: it reads kernels/ptx/*.ptx.)
#include <cuda.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_) { const char *n_ = 0; cuGetErrorName(r_, &n_); \
  printf("%s:%d %s -> %d %s\n", __FILE__, __LINE__, #x, (int)r_, n_ ? n_ : "?"); fflush(stdout); _exit(2); } } while (0)

static std::string slurp(const char *p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Doomed { CUevent ev; CUtexObject tex; CUarray arr; };

static CUarray make_array(size_t w, size_t h, const std::vector<float> &data) {
  CUDA_ARRAY3D_DESCRIPTOR d = {};
  d.Width = w; d.Height = h; d.Depth = 0; d.Format = CU_AD_FORMAT_FLOAT; d.NumChannels = 1;
  CUarray a;
  CK(cuArray3DCreate(&a, &d));
  CUDA_MEMCPY2D c = {};
  c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = data.data(); c.srcPitch = w * 4;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY; c.dstArray = a;
  c.WidthInBytes = w * 4; c.Height = h;
  CK(cuMemcpy2D(&c));
  return a;
}

static CUtexObject make_tex(CUarray a) {
  CUDA_RESOURCE_DESC r = {};
  r.resType = CU_RESOURCE_TYPE_ARRAY; r.res.array.hArray = a;
  CUDA_TEXTURE_DESC t = {};
  t.addressMode[0] = t.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
  t.filterMode = CU_TR_FILTER_MODE_POINT;
  CUtexObject tex;
  CK(cuTexObjectCreate(&tex, &r, &t, nullptr));
  return tex;
}

int main(int argc, char **argv) {
  // argv[1] < 0: exactly -argv[1] rounds (a stall that comes only once per process).
  int secs = argc > 1 ? atoi(argv[1]) : 10;
  long max_rounds = secs < 0 ? -secs : -1;
  if (secs < 0) secs = 3600;
  std::string spin_ptx = slurp("kernels/ptx/spin.ptx"), tex_ptx = slurp("kernels/ptx/texture.ptx");
  if (spin_ptx.empty() || tex_ptx.empty()) { printf("run from the repository root\n"); return 1; }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  // Mode crate2: more of what the crate does: its embedded kernels are libraries
  // (cuLibraryLoadData with a JIT log), user modules are loaded with cuModuleLoadDataEx and a
  // JIT log, both devices' primary contexts are retained, and buffers are stream-ordered
  // (cuMemAllocAsync) and freed in a stream of their own (cuMemFreeAsync).
  bool crate2 = argc > 2 && !strcmp(argv[2], "crate2");
  static char jit_log[8192];
  CUjit_option jo[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *jv[2] = {jit_log, (void *)(size_t)sizeof jit_log};
  CUfunction spin;
  if (crate2) {
    int count = 0;
    CK(cuDeviceGetCount(&count));
    if (count > 1) {
      CUdevice d1;
      CUcontext c1;
      CK(cuDeviceGet(&d1, 1));
      CK(cuDevicePrimaryCtxRetain(&c1, d1));
    }
    CUlibrary lib;
    CK(cuLibraryLoadData(&lib, spin_ptx.c_str(), jo, jv, 2, nullptr, nullptr, 0));
    CUkernel k;
    CK(cuLibraryGetKernel(&k, lib, "spin"));
    CK(cuKernelGetFunction(&spin, k));
  } else {
    CUmodule spin_mod;
    CK(cuModuleLoadData(&spin_mod, spin_ptx.c_str()));
    CK(cuModuleGetFunction(&spin, spin_mod, "spin"));
  }
  CUstream s, frees;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&frees, CU_STREAM_NON_BLOCKING));
  CUdeviceptr stamps;
  CK(cuMemAlloc(&stamps, 16));

  bool crate = crate2 || (argc > 2 && !strcmp(argv[2], "crate"));
  struct Yard { std::mutex m; std::condition_variable cv; std::deque<Doomed> doomed; };
  Yard yards[2];
  bool stop = false;
  std::atomic<long> rounds{0}, destroyed{0};
  auto reclaim = [&](Yard &y) {
    CK(cuCtxSetCurrent(ctx));
    for (;;) {
      Doomed d;
      {
        std::unique_lock<std::mutex> g(y.m);
        y.cv.wait(g, [&] { return stop || !y.doomed.empty(); });
        if (y.doomed.empty()) return;
        d = y.doomed.front();
        y.doomed.pop_front();
      }
      if (d.ev) CK(cuEventSynchronize(d.ev));
      if (d.tex) CK(cuTexObjectDestroy(d.tex));
      if (d.arr) CK(cuArrayDestroy(d.arr));
      if (d.ev) CK(cuEventDestroy(d.ev));
      destroyed++;
    }
  };
  auto hand = [&](int i, Doomed d) {
    { std::lock_guard<std::mutex> g(yards[i].m); yards[i].doomed.push_back(d); }
    yards[i].cv.notify_one();
  };
  std::thread reclaimer(reclaim, std::ref(yards[0])), reclaimer2(reclaim, std::ref(yards[1]));
  std::thread watchdog([&] {
    long last = -1;
    auto t = std::chrono::steady_clock::now();
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      long r = rounds.load();
      if (r < 0) return;
      if (r != last) { last = r; t = std::chrono::steady_clock::now(); continue; }
      if (std::chrono::steady_clock::now() - t > std::chrono::seconds(20)) {
        printf("rud stalled after %ld rounds (%ld destroyed)\n", r, destroyed.load());
        fflush(stdout);
        _exit(3);
      }
    }
  });

  unsigned seed = 12345;
  auto rnd = [&](unsigned n) { seed = seed * 1103515245u + 12345u; return (seed >> 8) % n; };
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
  long bad = 0;
  while (std::chrono::steady_clock::now() < end && rounds.load() != max_rounds) {
    size_t w = 8 + rnd(56), h = 8 + rnd(24), n = w * h;
    std::vector<float> data(n), xy(2 * n), out(4 * n);
    for (size_t i = 0; i < n; i++) {
      data[i] = (float)rnd(1 << 20) / (1 << 19) - 1.0f;
      xy[2 * i] = (float)(i % w) + 0.5f;
      xy[2 * i + 1] = (float)(i / w) + 0.5f;
    }
    CUmodule user;
    if (crate2) CK(cuModuleLoadDataEx(&user, tex_ptx.c_str(), 2, jo, jv));
    else CK(cuModuleLoadData(&user, tex_ptx.c_str()));
    CUfunction sample;
    CK(cuModuleGetFunction(&sample, user, "sample_2d"));
    CUdeviceptr dxy, dout;
    if (crate2) {
      CK(cuMemAllocAsync(&dxy, xy.size() * 4, s));
      CK(cuMemcpyHtoDAsync(dxy, xy.data(), xy.size() * 4, s));
      CK(cuMemAllocAsync(&dout, out.size() * 4, s));
    } else {
      CK(cuMemAlloc(&dxy, xy.size() * 4));
      CK(cuMemcpyHtoD(dxy, xy.data(), xy.size() * 4));
      CK(cuMemAlloc(&dout, out.size() * 4));
    }
    CUarray a = make_array(w, h, data);
    CUtexObject tex = make_tex(a);
    unsigned long long ns = 1000000ull * (1 + rnd(5));
    int slot = 0;
    size_t two = 2, xy_len = xy.size(), out_len = out.size();
    void *sp[] = {&stamps, &two, &ns, &slot};
    CK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, sp, nullptr));
    void *tp[] = {&tex, &dxy, &xy_len, &dout, &out_len};
    CK(cuLaunchKernel(sample, (unsigned)((n + 127) / 128), 1, 1, 128, 1, 1, 0, s, tp, nullptr));
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(ev, s));
    hand(0, {ev, tex, a});
    std::vector<float> junk(n, -1.0e6f);
    CUarray decoys[4];
    CUtexObject decoy_tex[4];
    for (int k = 0; k < 4; k++) decoys[k] = make_array(w, h, junk);
    for (int k = 0; k < 4; k++) decoy_tex[k] = make_tex(decoys[k]);
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(out.data(), dout, out.size() * 4));
    for (size_t i = 0; i < n; i++) bad += out[4 * i] != data[i];
    if (crate) {
      // As the crate: unused objects' destroys handed to both background threads at once.
      for (int k = 0; k < 4; k++) hand(0, {nullptr, decoy_tex[k], nullptr});
      for (int k = 0; k < 4; k++) hand(1, {nullptr, 0, decoys[k]});
    } else {
      for (int k = 0; k < 4; k++) CK(cuTexObjectDestroy(decoy_tex[k]));
      for (int k = 0; k < 4; k++) CK(cuArrayDestroy(decoys[k]));
    }
    if (crate2) {
      CK(cuMemFreeAsync(dxy, frees));
      CK(cuMemFreeAsync(dout, frees));
    } else {
      CK(cuMemFree(dxy));
      CK(cuMemFree(dout));
    }
    CK(cuModuleUnload(user));
    rounds++;
  }
  for (auto &y : yards) {
    std::lock_guard<std::mutex> g(y.m);
    stop = true;
  }
  for (auto &y : yards) y.cv.notify_one();
  reclaimer.join();
  reclaimer2.join();
  long r = rounds.load();
  rounds = -1;
  watchdog.join();
  printf("rud %s: %ld rounds, %ld textures and arrays destroyed by the second thread, %ld wrong texels\n",
         bad ? "WRONG" : "ok", r, destroyed.load(), bad);
  return bad ? 4 : 0;
}
