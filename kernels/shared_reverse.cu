// Reverses the first n elements of d within one block, through shared memory.

// Statically sized shared memory: at most 64 elements.
extern "C" __global__ void static_reverse(int* d, size_t d_len, int n) {
  __shared__ int s[64];
  int m = n < 64 ? n : 64;
  if ((size_t)m > d_len) m = (int)d_len;
  int t = threadIdx.x;
  if (t < m) s[t] = d[t];
  __syncthreads();
  if (t < m) d[t] = s[m - t - 1];
}

// Dynamically sized shared memory: the launch gives n * sizeof(int) bytes; n is bounded by
// the block size (one element per thread) and by d_len.
extern "C" __global__ void dynamic_reverse(int* d, size_t d_len, int n) {
  extern __shared__ int s[];
  int m = n < (int)blockDim.x ? n : (int)blockDim.x;
  if ((size_t)m > d_len) m = (int)d_len;
  int t = threadIdx.x;
  if (t < m) s[t] = d[t];
  __syncthreads();
  if (t < m) d[t] = s[m - t - 1];
}
