// Kernels for stream-ordering demonstrations and tests.

// Whether this is thread (0, 0, 0) of block (0, 0, 0): the one thread of one-thread kernels,
// whatever the launch shape.
__device__ __forceinline__ bool first_thread() {
  return (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0;
}

__device__ __forceinline__ unsigned long long global_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread spins for duration_ns and stamps its start and end (ns, %globaltimer) into
// stamps[2 * slot] and stamps[2 * slot + 1].
extern "C" __global__ void spin(unsigned long long* stamps, size_t stamps_len,
                                unsigned long long duration_ns, int slot) {
  if (!first_thread()) return;
  unsigned long long start = global_timer();
  while (global_timer() - start < duration_ns) {
  }
  unsigned long long end = global_timer();
  size_t i = 2 * (size_t)slot;
  if (slot >= 0 && i + 1 < stamps_len) {
    stamps[i] = start;
    stamps[i + 1] = end;
  }
}

// Spins for duration_ns, then sums src into out[0] (one thread): shows that a buffer dropped
// while this runs is not handed out again before it ends.
extern "C" __global__ void spin_read_sum(const float* src, size_t src_len, float* out,
                                         size_t out_len, unsigned long long duration_ns) {
  if (!first_thread()) return;
  unsigned long long start = global_timer();
  while (global_timer() - start < duration_ns) {
  }
  float sum = 0.0f;
  for (size_t i = 0; i < src_len; i++) sum += src[i];
  if (out_len > 0) out[0] = sum;
}

// out[i] = i * 2654435761 (mod 2^32), a cheap hash of the index.
extern "C" __global__ void write_index(unsigned int* out, size_t out_len) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < out_len;
       i += (size_t)gridDim.x * blockDim.x) {
    out[i] = (unsigned int)i * 2654435761u;
  }
}
