// Which driver path updates one kernel node of an executable graph fastest (issue 12's
// node-update figure). A chain of 100 kernel nodes as in benches/graph.rs (`four_args`, one
// block of one thread), the last node's integer argument alternating; each path timed in
// interleaved batches, medians printed in microseconds per update:
//   params   cuGraphExecKernelNodeSetParams_v2, kernelParams (what the crate and the bench use)
//   extra    the same, arguments as one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER)
//   generic  cuGraphExecNodeSetParams (CUgraphNodeParams of type kernel)
//   same     as params, with the same value every time (nothing changes)
//   cudart   cudaGraphExecKernelNodeSetParams
//   xctx     as extra, with the context named in the parameters (`ctx`) rather than current
//   pctx     as params, with the context named
// Every path's last update is checked by a launch reading the argument back.
// Build: nvcc -O2 -arch=sm_90 probes/node_update_paths.cu -lcuda -o /tmp/nup
// Run: /tmp/nup [rounds] [cubin]: with a cubin of this file (nvcc -cubin -arch=sm_90), the graph's
// function is that module's (cuModuleLoad, as the crate and the bench load theirs) rather than
// the runtime's (cudaGetFuncBySymbol), and the cudart path is left out (it names the kernel by
// its host symbol, so it needs the runtime's function). The
// bench runs pinned to the GPU's local CPUs (taskset): run this the same way to compare.
//
// Results (seventeenth session, one H200, driver 580.159.04; medians of 21 batches of 2000, as
// the ratio to `params`, over six runs: the runtime's, a cubin's and a PTX module's function,
// pinned to the GPU's CPUs and not): extra 0.94-0.98, generic 1.03-1.07, same 0.98-1.00,
// cudart 1.30-1.35, xctx 0.96-0.97, pctx 1.00. Absolute times varied from machine to machine
// (params 0.37-0.83 us; the bench's driver figure for the middle node was 0.16-0.42 us).
// So the crate's executable kernel-node update packs its arguments (`PackedArgs`).
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" __global__ void four_args(float* out, size_t out_len, int a, float b, double c) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && out_len > 0) out[0] = (float)(a + b + c);
}

#define CK(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char* s_ = nullptr;                                                \
      cuGetErrorName(r_, &s_);                                                 \
      fprintf(stderr, "%s:%d %s -> %d %s\n", __FILE__, __LINE__, #x, (int)r_, s_); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define RK(x)                                                                  \
  do {                                                                         \
    cudaError_t r_ = (x);                                                      \
    if (r_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(r_)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

struct Args {
  CUdeviceptr out;
  size_t len;
  int a;
  float b;
  double c;
};

static CUfunction fn;
static CUcontext ctx_named = nullptr;
static CUmodule mod = nullptr;
static CUgraphExec ex;
static CUgraphNode mid;
static CUdeviceptr out;
static int turn = 0;

static void fill(Args* g, int a) {
  g->out = out;
  g->len = 1;
  g->a = a;
  g->b = 2.0f;
  g->c = 3.0;
}

static CUDA_KERNEL_NODE_PARAMS kp(void** ptrs, void** extra) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = fn;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = ptrs;
  p.extra = extra;
  p.ctx = ctx_named;
  return p;
}

static int next_a(bool same) {
  if (!same) turn ^= 1;
  return 7000 + turn;
}

static void up_params(bool same) {
  Args g;
  fill(&g, next_a(same));
  void* ptrs[5] = {&g.out, &g.len, &g.a, &g.b, &g.c};
  CUDA_KERNEL_NODE_PARAMS p = kp(ptrs, nullptr);
  CK(cuGraphExecKernelNodeSetParams(ex, mid, &p));
}

// The kernel's parameter buffer: offsets 0, 8, 16, 20, 24 (natural alignment).
struct Packed {
  CUdeviceptr out;
  size_t len;
  int a;
  float b;
  double c;
};

static void up_extra() {
  Packed b;
  b.out = out;
  b.len = 1;
  b.a = next_a(false);
  b.b = 2.0f;
  b.c = 3.0;
  size_t size = sizeof b;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &b, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS p = kp(nullptr, extra);
  CK(cuGraphExecKernelNodeSetParams(ex, mid, &p));
}

static void up_generic() {
  Args g;
  fill(&g, next_a(false));
  void* ptrs[5] = {&g.out, &g.len, &g.a, &g.b, &g.c};
  CUgraphNodeParams np;
  memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  np.kernel.func = fn;
  np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
  np.kernel.blockDimX = np.kernel.blockDimY = np.kernel.blockDimZ = 1;
  np.kernel.kernelParams = ptrs;
  CK(cuGraphExecNodeSetParams(ex, mid, &np));
}

static void up_cudart() {
  Args g;
  fill(&g, next_a(false));
  void* ptrs[5] = {&g.out, &g.len, &g.a, &g.b, &g.c};
  cudaKernelNodeParams p;
  memset(&p, 0, sizeof p);
  p.func = (void*)four_args;
  p.gridDim = dim3(1, 1, 1);
  p.blockDim = dim3(1, 1, 1);
  p.kernelParams = ptrs;
  RK(cudaGraphExecKernelNodeSetParams((cudaGraphExec_t)ex, (cudaGraphNode_t)mid, &p));
}

static float check(CUstream s) {
  CK(cuGraphLaunch(ex, s));
  CK(cuStreamSynchronize(s));
  float v = 0;
  CK(cuMemcpyDtoH(&v, out, 4));
  return v;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 21;
  const int batch = 2000;
  RK(cudaFree(0));
  if (argc > 2) {
    CK(cuModuleLoad(&mod, argv[2]));
    CK(cuModuleGetFunction(&fn, mod, "four_args"));
    printf("function from %s\n", argv[2]);
  } else {
    RK(cudaGetFuncBySymbol(&fn, (const void*)four_args));
    printf("function from cudaGetFuncBySymbol\n");
  }
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&out, 256));
  CUgraph g;
  CK(cuGraphCreate(&g, 0));
  std::vector<CUgraphNode> nodes(100);
  for (int i = 0; i < 100; i++) {
    Args a;
    fill(&a, i);
    void* ptrs[5] = {&a.out, &a.len, &a.a, &a.b, &a.c};
    CUDA_KERNEL_NODE_PARAMS p = kp(ptrs, nullptr);
    CK(cuGraphAddKernelNode(&nodes[i], g, i ? &nodes[i - 1] : nullptr, i ? 1 : 0, &p));
  }
  CK(cuGraphInstantiate(&ex, g, 0));
  // The last node (the bench updates the middle one): it writes out[0] last, so a launch shows
  // whether the update took.
  mid = nodes[99];
  const char* names[] = {"params", "extra", "generic", "same", "cudart", "xctx", "pctx"};
  const int paths = 7;
  CUcontext current;
  CK(cuCtxGetCurrent(&current));
  std::vector<std::vector<double>> t(paths);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < paths; k++) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; i++) {
        switch (k) {
          case 0: up_params(false); break;
          case 1: up_extra(); break;
          case 2: up_generic(); break;
          case 3: up_params(true); break;
          case 4: if (!mod) up_cudart(); break;
          case 5: ctx_named = current; up_extra(); ctx_named = nullptr; break;
          case 6: ctx_named = current; up_params(false); ctx_named = nullptr; break;
        }
      }
      auto t1 = std::chrono::steady_clock::now();
      t[k].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
    }
  }
  int bad = 0;
  for (int k = 0; k < paths; k++) {
    switch (k) {
      case 0: up_params(false); break;
      case 1: up_extra(); break;
      case 2: up_generic(); break;
      case 3: up_params(true); break;
      case 4: if (mod) continue; up_cudart(); break;
      case 5: ctx_named = current; up_extra(); ctx_named = nullptr; break;
      case 6: ctx_named = current; up_params(false); ctx_named = nullptr; break;
    }
    float v = check(s);
    float want = (float)(7000 + turn + 2.0f + 3.0);
    if (v != want) {
      printf("%s: launch wrote %f, want %f\n", names[k], v, want);
      bad++;
    }
  }
  for (int k = 0; k < paths; k++) {
    if (k == 4 && mod) continue;
    std::sort(t[k].begin(), t[k].end());
    printf("%-8s median %.4f us  min %.4f  (x params %.3f)\n", names[k], t[k][t[k].size() / 2],
           t[k][0], t[k][t[k].size() / 2] / t[0][t[0].size() / 2]);
  }
  printf("%s\n", bad ? "FAILED" : "checked: every path's update reached the launch");
  return bad != 0;
}
