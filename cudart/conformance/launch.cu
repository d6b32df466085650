// Launches and module state: kernels (one a template), __constant__, __device__ and __managed__
// variables, symbol copies with offsets, streams and events, bad launch shapes.
#include <vector>
#include "common.h"

__constant__ float scale[4];
__device__ int bias;
__managed__ int managed_counter;

__global__ void axpb(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * scale[i % 4] + bias;
  if (i == 0) atomicAdd(&managed_counter, 1);
}

template <typename T>
__global__ void fill(T* p, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v + (T)i;
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  const int N = 100000;
  std::vector<float> x(N), y(N);
  for (auto& v : x) v = (rnd() % 1000) / 8.0f;
  float sc[4] = {0.5f, 2.0f, -1.0f, 4.0f};
  STEP(cudaMemcpyToSymbol(scale, sc, sizeof(sc)));
  float two = 3.0f;
  STEP(cudaMemcpyToSymbol(scale, &two, 4, 4));  // scale[1] = 3
  sc[1] = 3.0f;
  STEP(cudaMemcpyToSymbol(scale, sc, 8, 12));   // past the end
  int b = 7;
  STEP(cudaMemcpyToSymbol(bias, &b, sizeof(b)));
  size_t size = 0;
  STEP(cudaGetSymbolSize(&size, scale));
  printf("scale size %zu\n", size);
  managed_counter = 0;
  float *dx, *dy;
  STEP(cudaMalloc(&dx, N * 4));
  STEP(cudaMalloc(&dy, N * 4));
  STEP(cudaMemcpy(dx, x.data(), N * 4, cudaMemcpyHostToDevice));
  cudaStream_t s;
  STEP(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  STEP(cudaEventCreate(&e0));
  STEP(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
  STEP(cudaEventRecord(e0, s));
  axpb<<<(N + 255) / 256, 256, 0, s>>>(dx, dy, N);
  LAST("axpb launch");
  STEP(cudaEventRecord(e1, s));
  STEP(cudaEventSynchronize(e1));
  STEP(cudaEventQuery(e1));
  STEP(cudaMemcpy(y.data(), dy, N * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N; i++) ok &= y[i] == x[i] * sc[i % 4] + b;
  check("axpb against the host", ok);
  check("managed counter seen by the host", managed_counter == 1);
  int got_bias = 0;
  STEP(cudaMemcpyFromSymbol(&got_bias, bias, sizeof(int)));
  check("bias read back", got_bias == 7);
  int* di;
  STEP(cudaMalloc(&di, N * 4));
  fill<int><<<(N + 127) / 128, 128>>>(di, 40, N);
  LAST("fill<int> launch");
  std::vector<int> yi(N);
  STEP(cudaMemcpy(yi.data(), di, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= yi[i] == 40 + i;
  check("template kernel", ok);
  // Bad shapes: too many threads per block, a zero grid.
  fill<int><<<1, 2048>>>(di, 0, N);
  LAST("block of 2048 threads");
  fill<int><<<0, 32>>>(di, 0, N);
  LAST("grid of 0 blocks");
  // Launch through cudaLaunchKernel with a host stub.
  int v = 100, n = N;
  void* args[] = {&di, &v, &n};
  STEP(cudaLaunchKernel((const void*)fill<int>, dim3((N + 127) / 128), dim3(128), args, 0, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(yi.data(), di, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= yi[i] == 100 + i;
  check("cudaLaunchKernel with a host stub", ok);
  STEP(cudaLaunchKernel((const void*)main, dim3(1), dim3(1), args, 0, s));
  // Extended and cooperative launches.
  v = 200;
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3((N + 127) / 128);
  lc.blockDim = dim3(128);
  lc.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributePriority;
  attr[0].val.priority = 0;
  lc.attrs = attr;
  lc.numAttrs = 1;
  STEP(cudaLaunchKernelExC(&lc, (const void*)fill<int>, args));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(yi.data(), di, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= yi[i] == 200 + i;
  check("cudaLaunchKernelExC", ok);
  v = 300;
  STEP(cudaLaunchCooperativeKernel((const void*)fill<int>, dim3(4), dim3(128), args, 0, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(yi.data(), di, 512 * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < 512; i++) ok &= yi[i] == 300 + i;
  check("cudaLaunchCooperativeKernel", ok);
  cudaFuncAttributes fa;
  STEP(cudaFuncGetAttributes(&fa, (const void*)fill<int>));
  printf("fill<int>: maxThreadsPerBlock %d, ptx %d, binary %d, regs>0 %d\n", fa.maxThreadsPerBlock,
         fa.ptxVersion, fa.binaryVersion, fa.numRegs > 0);
  int blocks = 0;
  STEP(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void*)fill<int>, 128, 0));
  printf("occupancy blocks per SM > 0: %d\n", blocks > 0);
  STEP(cudaEventDestroy(e0));
  STEP(cudaEventDestroy(e1));
  STEP(cudaStreamDestroy(s));
  STEP(cudaFree(dx));
  STEP(cudaFree(dy));
  STEP(cudaFree(di));
  STEP(cudaDeviceSynchronize());
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
