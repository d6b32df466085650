// Errors: every error name and string from 0 to 1000, the last error and its peek, errors that
// stay (a kernel that traps makes the context unusable until a device reset) and errors that do
// not (a bad launch shape), and what works again after the reset.
#include <cstring>
#include <vector>
#include "common.h"

__global__ void trap_if(int* p, int when) {
  if (p[0] == when) __trap();
  p[1] = 7;
}

__global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  // Names and strings need no device.
  for (int c = 0; c <= 1000; c++) {
    const char* name = cudaGetErrorName((cudaError_t)c);
    const char* text = cudaGetErrorString((cudaError_t)c);
    if (strcmp(name, "cudaErrorUnknown") == 0 && c != 999) continue;  // unnamed codes: below
    printf("%4d %s / %s\n", c, name, text);
  }
  printf("unnamed 5000: %s / %s\n", cudaGetErrorName((cudaError_t)5000), cudaGetErrorString((cudaError_t)5000));
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  int* d;
  STEP(cudaMalloc(&d, 1024 * 4));
  STEP(cudaMemset(d, 0, 1024 * 4));
  // A launch error that does not stay.
  add_one<<<1, 2048>>>(d, 1024);
  STEP(cudaPeekAtLastError());
  STEP(cudaPeekAtLastError());
  STEP(cudaGetLastError());
  STEP(cudaGetLastError());
  add_one<<<0, 32>>>(d, 1024);
  LAST("empty grid");
  add_one<<<dim3(1, 1, 1 << 17), 32>>>(d, 1024);
  LAST("grid z too large");
  add_one<<<4, 256>>>(d, 1024);
  STEP(cudaDeviceSynchronize());
  std::vector<int> h(1024);
  STEP(cudaMemcpy(h.data(), d, 1024 * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int v : h) ok &= v == 1;
  check("work after a refused launch", ok);
  // A bad argument to an API call: recorded, then cleared by cudaGetLastError.
  STEP(cudaMemcpy(h.data(), d, 4, (cudaMemcpyKind)42));
  STEP(cudaPeekAtLastError());
  STEP(cudaGetLastError());
  // An error that stays: a trap.
  int one = 1;
  STEP(cudaMemcpy(d, &one, 4, cudaMemcpyHostToDevice));
  trap_if<<<1, 1>>>(d, 1);
  STEP(cudaDeviceSynchronize());
  STEP(cudaGetLastError());
  STEP(cudaGetLastError());
  STEP(cudaMemcpy(h.data(), d, 4, cudaMemcpyDeviceToHost));
  int* e2 = nullptr;
  STEP(cudaMalloc(&e2, 16));
  cudaStream_t s;
  STEP(cudaStreamCreate(&s));
  STEP(cudaDeviceReset());
  STEP(cudaGetLastError());
  // After the reset, everything works again.
  STEP(cudaMalloc(&d, 1024 * 4));
  STEP(cudaMemset(d, 0, 1024 * 4));
  add_one<<<4, 256>>>(d, 1024);
  add_one<<<4, 256>>>(d, 1024);
  STEP(cudaMemcpy(h.data(), d, 1024 * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int v : h) ok &= v == 2;
  check("work after the reset", ok);
  STEP(cudaFree(d));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
