// What do user objects cost a graph launch? The crate's executables (one user object per node)
// took 73 us per back-to-back launch of a 100-node chain where the raw driver took 1.5 us
// (benches/graph.rs on the H200 pair). Times the submit of 200 back-to-back launches of a
// 100-kernel chain with 0, 1 and 100 user objects retained by the graph.
//   nvcc -O2 -arch=sm_90 probe.cu -lcuda -o /tmp/uo && /tmp/uo
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void spin(int* p, int n) { if (p) atomicAdd(p, n); }
static void CUDART_CB nothing(void*) {}
int main() {
  int* d; cudaMalloc(&d, 4);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  for (int objects : {0, 1, 100}) {
    cudaGraph_t g; cudaGraphCreate(&g, 0);
    cudaGraphNode_t prev = nullptr;
    for (int i = 0; i < 100; i++) {
      cudaKernelNodeParams kp = {};
      int n = i;
      void* args[] = {&d, &n};
      kp.func = (void*)spin; kp.gridDim = 1; kp.blockDim = 32; kp.kernelParams = args;
      cudaGraphNode_t node;
      cudaGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &kp);
      prev = node;
    }
    for (int i = 0; i < objects; i++) {
      cudaUserObject_t o;
      cudaUserObjectCreate(&o, nullptr, nothing, 1, cudaUserObjectNoDestructorSync);
      cudaGraphRetainUserObject(g, o, 1, cudaGraphUserObjectMove);
    }
    cudaGraphExec_t e; cudaGraphInstantiate(&e, g, 0);
    cudaGraphLaunch(e, s); cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; i++) cudaGraphLaunch(e, s);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 200;
    cudaStreamSynchronize(s);
    printf("%3d user objects: %.2f us per launch submit (%s)\n", objects, us, cudaGetErrorName(cudaGetLastError()));
    cudaGraphExecDestroy(e); cudaGraphDestroy(g);
  }
  return 0;
}
