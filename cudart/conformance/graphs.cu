// Graphs: the same work through stream capture and through an explicit graph (kernel, memset,
// 1-D copy and host nodes), launched several times; a kernel-node update of the executable;
// capture-mode exchange; errors of bad capture use.
#include <vector>
#include "common.h"

__global__ void scale_add(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static int host_calls = 0;
static void CUDART_CB on_host(void* p) { (*(int*)p)++; }

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  const int N = 1 << 16;
  std::vector<float> x(N), want(N), got(N);
  for (auto& v : x) v = (rnd() % 1000) / 16.0f;
  float *dx, *dy;
  STEP(cudaMalloc(&dx, N * 4));
  STEP(cudaMalloc(&dy, N * 4));
  STEP(cudaMemcpy(dx, x.data(), N * 4, cudaMemcpyHostToDevice));
  cudaStream_t s;
  STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Capture: y = 0; y = 2x + y; y = 3x + y; host counter.
  cudaGraph_t g;
  STEP(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus st;
  STEP(cudaStreamIsCapturing(s, &st));
  printf("capturing: %d\n", (int)st);
  STEP(cudaMemsetAsync(dy, 0, N * 4, s));
  scale_add<<<(N + 255) / 256, 256, 0, s>>>(dy, dx, 2.0f, N);
  scale_add<<<(N + 255) / 256, 256, 0, s>>>(dy, dx, 3.0f, N);
  STEP(cudaLaunchHostFunc(s, on_host, &host_calls));
  STEP(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  STEP(cudaGraphGetNodes(g, nullptr, &nodes));
  printf("captured nodes: %zu\n", nodes);
  cudaGraphExec_t e;
  STEP(cudaGraphInstantiate(&e, g, 0));
  for (int r = 0; r < 3; r++) STEP(cudaGraphLaunch(e, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(got.data(), dy, N * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N; i++) ok &= got[i] == 5.0f * x[i];
  check("captured graph result", ok);
  check("host node ran at every launch", host_calls == 3);
  // Explicit: memset -> kernel (a = 7) -> copy y to x2.
  float* dx2;
  STEP(cudaMalloc(&dx2, N * 4));
  cudaGraph_t h;
  STEP(cudaGraphCreate(&h, 0));
  cudaGraphNode_t ms, k, cp;
  cudaMemsetParams mp = {};
  mp.dst = dy; mp.value = 0; mp.elementSize = 4; mp.width = N; mp.height = 1; mp.pitch = 0;
  STEP(cudaGraphAddMemsetNode(&ms, h, nullptr, 0, &mp));
  float a = 7.0f;
  int n = N;
  void* args[] = {&dy, &dx, &a, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)scale_add;
  kp.gridDim = dim3((N + 255) / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  STEP(cudaGraphAddKernelNode(&k, h, &ms, 1, &kp));
  STEP(cudaGraphAddMemcpyNode1D(&cp, h, &k, 1, dx2, dy, N * 4, cudaMemcpyDeviceToDevice));
  cudaGraphExec_t he;
  STEP(cudaGraphInstantiate(&he, h, 0));
  STEP(cudaGraphLaunch(he, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(got.data(), dx2, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= got[i] == 7.0f * x[i];
  check("explicit graph result", ok);
  // Update the kernel node of the executable: a = -1.
  a = -1.0f;
  STEP(cudaGraphExecKernelNodeSetParams(he, k, &kp));
  STEP(cudaGraphLaunch(he, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(got.data(), dx2, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= got[i] == -x[i];
  check("updated kernel node", ok);
  // Capture-mode exchange, and ending a capture that was never begun.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  STEP(cudaThreadExchangeStreamCaptureMode(&mode));
  printf("previous mode %d\n", (int)mode);
  STEP(cudaThreadExchangeStreamCaptureMode(&mode));
  cudaGraph_t none;
  STEP(cudaStreamEndCapture(s, &none));
  LAST("end without begin");
  STEP(cudaGraphExecDestroy(e));
  STEP(cudaGraphExecDestroy(he));
  STEP(cudaGraphDestroy(g));
  STEP(cudaGraphDestroy(h));
  STEP(cudaStreamDestroy(s));
  STEP(cudaFree(dx));
  STEP(cudaFree(dy));
  STEP(cudaFree(dx2));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
