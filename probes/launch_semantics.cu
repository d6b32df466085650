// What libcudart does in the corner cases the crate's tests assert. Built and run on the GPU
// machine: nvcc -O2 -arch=sm_90 launch_semantics.cu -o /tmp/ls && /tmp/ls
// Prints `semantics <key> <error name or value>` lines.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}
__global__ void bad_write(unsigned long long addr) { *(volatile unsigned*)addr = 1; }
__global__ void reverse_dyn(int* d, int n) {
  extern __shared__ int s[];
  int t = threadIdx.x;
  if (t < n) s[t] = d[t];
  __syncthreads();
  if (t < n) d[t] = s[n - t - 1];
}

#define SHOW(key, expr) printf("semantics %s %s\n", key, cudaGetErrorName(expr))

int main() {
  cudaFree(0);
  int least, greatest;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  cudaStream_t s;
  cudaStreamCreateWithPriority(&s, 0, greatest - 100);
  int p; cudaStreamGetPriority(s, &p);
  printf("semantics priority_clamped_high %d (greatest %d)\n", p, greatest);
  cudaStream_t s2;
  cudaStreamCreateWithPriority(&s2, 0, least + 100);
  cudaStreamGetPriority(s2, &p);
  printf("semantics priority_clamped_low %d (least %d)\n", p, least);

  empty_kernel<<<1, 1025>>>();
  SHOW("launch_block_1025", cudaGetLastError());
  empty_kernel<<<0, 32>>>();
  SHOW("launch_grid_0", cudaGetLastError());
  empty_kernel<<<dim3(1, 70000), 32>>>();
  SHOW("launch_grid_y_70000", cudaGetLastError());
  empty_kernel<<<1, dim3(32, 32, 2)>>>();
  SHOW("launch_2048_threads", cudaGetLastError());
  reverse_dyn<<<1, 32, 0xFFFFFFFFu>>>(nullptr, 0);
  SHOW("launch_smem_huge", cudaGetLastError());
  reverse_dyn<<<1, 32, 100 * 1024>>>(nullptr, 0);
  SHOW("launch_smem_100k_without_attribute", cudaGetLastError());

  cudaEvent_t e;
  SHOW("event_interprocess_without_disable_timing", cudaEventCreateWithFlags(&e, cudaEventInterprocess));
  cudaEvent_t nt, t, never;
  cudaEventCreateWithFlags(&nt, cudaEventDisableTiming);
  cudaEventCreate(&t);
  cudaEventCreate(&never);
  cudaEventRecord(nt, s);
  cudaEventRecord(t, s);
  cudaStreamSynchronize(s);
  float ms;
  SHOW("elapsed_disable_timing", cudaEventElapsedTime(&ms, nt, t));
  SHOW("elapsed_never_recorded", cudaEventElapsedTime(&ms, t, never));
  SHOW("query_never_recorded", cudaEventQuery(never));
  cudaGetLastError();

  int count; cudaGetDeviceCount(&count);
  if (count > 1) {
    cudaSetDevice(1);
    cudaStream_t s1; cudaStreamCreate(&s1);
    cudaEvent_t e1; cudaEventCreate(&e1);
    cudaSetDevice(0);
    empty_kernel<<<1, 1, 0, s1>>>();
    SHOW("launch_on_other_device_stream", cudaGetLastError());
    SHOW("event_record_other_device", cudaEventRecord(t, s1));
    SHOW("stream_wait_other_device_event", cudaStreamWaitEvent(s, e1, 0));
  }

  // Sticky error.
  bad_write<<<1, 1, 0, s>>>(0x10);
  SHOW("sticky_sync", cudaStreamSynchronize(s));
  void* p2 = nullptr;
  SHOW("sticky_malloc_after", cudaMalloc(&p2, 16));
  SHOW("sticky_get_last_error_1", cudaGetLastError());
  SHOW("sticky_get_last_error_2", cudaGetLastError());
  SHOW("sticky_peek", cudaPeekAtLastError());
  SHOW("sticky_reset", cudaDeviceReset());
  SHOW("after_reset_get_last_error_1", cudaGetLastError());
  SHOW("after_reset_get_last_error_2", cudaGetLastError());
  SHOW("after_reset_malloc", cudaMalloc(&p2, 16));
  SHOW("after_reset_old_stream_sync", cudaStreamSynchronize(s));
  return 0;
}
