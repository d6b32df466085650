// The issue's figures for the C ABI library, measured by one program that is run once on
// NVIDIA's libcudart.so.13 and once on ours (cudart/bench/run.sh): per operation, median of 21
// batches, microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

__global__ void empty() {}

template <typename F>
static double median_us(int batch, F f, cudaStream_t s) {
  std::vector<double> v;
  for (int rep = 0; rep < 22; rep++) {
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; i++) f();
    auto t1 = std::chrono::steady_clock::now();
    cudaStreamSynchronize(s);
    if (rep > 0) v.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { printf("no device\n"); return 0; }
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  int *d, *h;
  cudaMalloc(&d, 4);
  cudaMallocHost(&h, 4);
  empty<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  printf("launch submit (<<<>>>)           %8.3f us\n", median_us(2000, [&] { empty<<<1, 1, 0, s>>>(); }, s));
  printf("event record                      %8.3f us\n", median_us(2000, [&] { cudaEventRecord(e, s); }, s));
  printf("4-byte cudaMemcpyAsync H2D        %8.3f us\n", median_us(2000, [&] { cudaMemcpyAsync(d, h, 4, cudaMemcpyHostToDevice, s); }, s));
  printf("1 MiB cudaMallocAsync+FreeAsync   %8.3f us\n", median_us(2000, [&] {
    void* p;
    cudaMallocAsync(&p, 1 << 20, s);
    cudaFreeAsync(p, s);
  }, s));
  printf("errors: %s\n", cudaGetErrorName(cudaGetLastError()));
  return 0;
}
