// Reverses the first elements of d within one block, through shared memory. Only the first
// block works (other blocks would race with it on d), and only its threads with threadIdx.y and
// threadIdx.z of 0, one element per thread: any launch shape gives the same, correct result.

// The number of elements reversed: n (0 if negative), at most the block's width, the buffer's
// length and cap.
__device__ __forceinline__ size_t reverse_count(int n, size_t d_len, size_t cap) {
  size_t m = n > 0 ? (size_t)n : 0;
  if (m > blockDim.x) m = blockDim.x;
  if (m > d_len) m = d_len;
  if (m > cap) m = cap;
  return m;
}

__device__ __forceinline__ bool first_block() {
  return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
}

// Statically sized shared memory: reverses the first min(n, 64, blockDim.x, d_len) elements
// (none if n is negative), for any launch shape.
extern "C" __global__ void static_reverse(int* d, size_t d_len, int n) {
  __shared__ int s[64];
  if (!first_block()) return;  // uniform over the block, so no thread misses the barrier
  size_t m = reverse_count(n, d_len, 64);
  size_t t = threadIdx.x;
  bool lead = threadIdx.y == 0 && threadIdx.z == 0;
  if (lead && t < m) s[t] = d[t];
  __syncthreads();
  if (lead && t < m) d[t] = s[m - t - 1];
}

// Dynamically sized shared memory: the launch gives at least n * sizeof(int) bytes; reverses
// the first min(n, blockDim.x, d_len) elements (none if n is negative), for any launch shape.
// cuda-runtime: require dynamic_shared >= 4 * n
extern "C" __global__ void dynamic_reverse(int* d, size_t d_len, int n) {
  extern __shared__ int s[];
  if (!first_block()) return;
  // The wrapper checks the size above; the kernel also stays within what the launch gave.
  unsigned smem;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem));
  size_t m = reverse_count(n, d_len, smem / sizeof(int));
  size_t t = threadIdx.x;
  bool lead = threadIdx.y == 0 && threadIdx.z == 0;
  if (lead && t < m) s[t] = d[t];
  __syncthreads();
  if (lead && t < m) d[t] = s[m - t - 1];
}
