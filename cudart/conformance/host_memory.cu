// Page-locked, mapped and registered host memory and pointer attributes: allocation flags, the
// device address of mapped memory written by a kernel, registration of ordinary memory and its
// errors, and what cudaPointerGetAttributes says of each kind of pointer.
#include <cstdlib>
#include <cstring>
#include <vector>
#include "common.h"

__global__ void fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + i;
}

static void attrs(const char* what, const void* p) {
  cudaPointerAttributes a;
  memset(&a, 0x7f, sizeof a);
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  printf("%-20s %s type %d device %d host-null %d dev-null %d\n", what, cudaGetErrorName(e),
         (int)a.type, a.device, a.hostPointer == nullptr, a.devicePointer == nullptr);
  cudaGetLastError();
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  const int N = 1 << 16;
  // Mapped, written by a kernel through its device address.
  int* m = nullptr;
  STEP(cudaHostAlloc(&m, N * 4, cudaHostAllocMapped));
  unsigned flags = 0;
  STEP(cudaHostGetFlags(&flags, m));
  printf("mapped flags %u\n", flags);
  int* dm = nullptr;
  STEP(cudaHostGetDevicePointer(&dm, m, 0));
  fill<<<N / 256, 256>>>(dm, N, 11);
  STEP(cudaDeviceSynchronize());
  bool ok = true;
  for (int i = 0; i < N; i++) ok &= m[i] == 11 + i;
  check("kernel wrote mapped memory", ok);
  STEP(cudaHostGetDevicePointer(&dm, m, 1));
  STEP(cudaGetLastError());
  // Write-combined and portable.
  int* wc = nullptr;
  STEP(cudaHostAlloc(&wc, N * 4, cudaHostAllocWriteCombined | cudaHostAllocPortable));
  STEP(cudaHostGetFlags(&flags, wc));
  printf("write-combined flags %u\n", flags);
  // Registered ordinary memory.
  int* r = (int*)aligned_alloc(4096, N * 4);
  for (int i = 0; i < N; i++) r[i] = (int)rnd();
  STEP(cudaHostRegister(r, N * 4, cudaHostRegisterMapped));
  STEP(cudaHostRegister(r, N * 4, cudaHostRegisterMapped));
  STEP(cudaGetLastError());
  STEP(cudaHostGetFlags(&flags, r));
  printf("registered flags %u\n", flags);
  int* dev = nullptr;
  STEP(cudaMalloc(&dev, N * 4));
  STEP(cudaMemcpy(dev, r, N * 4, cudaMemcpyHostToDevice));
  std::vector<int> back(N);
  STEP(cudaMemcpy(back.data(), dev, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= back[i] == r[i];
  check("registered memory copied", ok);
  STEP(cudaHostUnregister(r));
  STEP(cudaHostUnregister(r));
  STEP(cudaGetLastError());
  STEP(cudaHostRegister(r, N * 4, 0x80));
  STEP(cudaGetLastError());
  // Pointer attributes of each kind.
  int* managed = nullptr;
  STEP(cudaMallocManaged(&managed, 4096));
  int stack = 0;
  attrs("device", dev);
  attrs("device+100", dev + 100);
  attrs("mapped", m);
  attrs("write-combined", wc);
  attrs("managed", managed);
  attrs("malloc", r);
  attrs("stack", &stack);
  attrs("null", nullptr);
  STEP(cudaFreeHost(m));
  STEP(cudaFreeHost(wc));
  STEP(cudaFree(managed));
  STEP(cudaFree(dev));
  free(r);
  STEP(cudaFreeHost(nullptr));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
