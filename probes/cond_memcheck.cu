// Companion of cdp_memcheck.cu: a while node whose body kernel (kernels/graph_cond.cu's
// cond_count_to) sets its conditional with the device runtime, built with nvcc and NVIDIA's
// runtime, and run under compute-sanitizer; with an argument "mixed", a second host thread
// launches the dynamic-parallelism kernel of kernels/cdp.cu at the same time (the crate's suite
// runs its tests in parallel). On the GPU machine:
//   nvcc -arch=sm_90 -rdc=true probes/cond_memcheck.cu -lcudadevrt -o /tmp/condm
//   compute-sanitizer --tool memcheck /tmp/condm mixed
#include "../kernels/cdp.cu"
#include "../kernels/graph_cond.cu"
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorName(e_)); return 1; } } while (0)

static int run_while(unsigned limit, int reps) {
  const size_t n = 10007;
  float* data; unsigned* counter;
  CK(cudaMalloc(&data, n * 4)); CK(cudaMalloc(&counter, 4));
  cudaGraph_t g; CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h; p.conditional.type = cudaGraphCondTypeWhile; p.conditional.size = 1;
  // As the crate's test builds it: a memset node resets the counter, then the while node.
  cudaMemsetParams ms = {};
  ms.dst = counter; ms.value = 0; ms.elementSize = 4; ms.width = 1; ms.height = 1; ms.pitch = 4;
  cudaGraphNode_t reset; CK(cudaGraphAddMemsetNode(&reset, g, nullptr, 0, &ms));
  cudaGraphNode_t node; CK(cudaGraphAddNode(&node, g, &reset, nullptr, 1, &p));
  cudaGraph_t body = p.conditional.phGraph_out[0];
  unsigned long long hh = h; size_t one = 1, nn = n;
  void* args[] = {&hh, &counter, &one, &data, &nn, &limit};
  cudaKernelNodeParams k; memset(&k, 0, sizeof k);
  k.func = (void*)cond_count_to; k.gridDim = dim3((unsigned)((n + 255) / 256)); k.blockDim = dim3(256); k.kernelParams = args;
  cudaGraphNode_t kn; CK(cudaGraphAddKernelNode(&kn, body, nullptr, 0, &k));
  cudaGraphExec_t ex; CK(cudaGraphInstantiate(&ex, g, 0));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<float> h0(n), back(n);
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < n; ++i) h0[i] = float((i * 7 + r) % 100);
    CK(cudaMemcpyAsync(data, h0.data(), n * 4, cudaMemcpyHostToDevice, s));
    CK(cudaGraphLaunch(ex, s));
    CK(cudaGraphLaunch(ex, s));
    CK(cudaGraphLaunch(ex, s));
    CK(cudaMemcpyAsync(back.data(), data, n * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; ++i)
      if (back[i] != h0[i] + 3 * limit) { printf("while: rep %d element %zu %f want %f\n", r, i, back[i], h0[i] + 3 * limit); return 1; }
  }
  printf("while node: %d runs of %u iterations ok\n", reps, limit);
  return 0;
}

static int run_cdp(int reps) {
  const size_t n = 300 * 128 + 5;
  float *src, *stage, *out; unsigned* failures;
  CK(cudaMalloc(&src, n * 4)); CK(cudaMalloc(&stage, n * 4)); CK(cudaMalloc(&out, n * 4)); CK(cudaMalloc(&failures, 4));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int r = 0; r < reps; ++r) {
    CK(cudaMemsetAsync(failures, 0, 4, s));
    cdp_child_sees_parent<<<(unsigned)((n + 127) / 128), 128, 0, s>>>(src, n, stage, n, out, n, failures, 1);
    CK(cudaStreamSynchronize(s));
  }
  printf("cdp: %d runs ok\n", reps);
  return 0;
}

int main(int argc, char** argv) {
  bool mixed = argc > 1 && !strcmp(argv[1], "mixed");
  int rc_cdp = 0;
  std::thread t;
  if (mixed) t = std::thread([&] { cudaSetDevice(0); rc_cdp = run_cdp(20); });
  int rc = run_while(37, 20);
  if (mixed) t.join();
  printf("cond_memcheck %s: %s\n", mixed ? "mixed" : "alone", rc || rc_cdp ? "FAILED" : "ok");
  return rc || rc_cdp;
}
