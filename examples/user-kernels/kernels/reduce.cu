// Block sums: sums[b] = x[256 * b] + ... + x[256 * b + 255] (the elements below x_len), for
// every 256-element chunk b below sums_len, each block taking chunks grid-stride. The tree
// reduction indexes a 256-float shared array by threadIdx.x, so the block shape is fixed.
// cuda-runtime: block = (256, 1, 1)
extern "C" __global__ void block_sums(const float* x, size_t x_len, float* sums, size_t sums_len) {
  __shared__ float partial[256];
  size_t chunks = (x_len + 255) / 256;
  if (chunks > sums_len) chunks = sums_len;
  for (size_t b = blockIdx.x; b < chunks; b += gridDim.x) {
    size_t i = b * 256 + threadIdx.x;
    partial[threadIdx.x] = i < x_len ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[b] = partial[0];
    __syncthreads();
  }
}

// Reverses each tile of `tile` consecutive elements of `src` into `dst` (the last tile may be
// shorter), through `tile` ints of dynamic shared memory; block b takes tiles b, b + grid.x, ...
// Thread t moves element t of a tile, so a block needs at least `tile` threads.
// cuda-runtime: require tile >= 1
// cuda-runtime: require block.x >= tile
// cuda-runtime: require dynamic_shared >= 4 * tile
extern "C" __global__ void tile_reverse(const int* src, size_t src_len, int* dst, size_t dst_len,
                                        int tile) {
  extern __shared__ int s[];
  size_t n = src_len < dst_len ? src_len : dst_len;
  size_t t = (size_t)tile;
  size_t tiles = (n + t - 1) / t;
  bool mover = threadIdx.y == 0 && threadIdx.z == 0 && threadIdx.x < t;
  for (size_t b = blockIdx.x + (size_t)gridDim.x * (blockIdx.y + (size_t)gridDim.y * blockIdx.z);
       b < tiles; b += (size_t)gridDim.x * gridDim.y * gridDim.z) {
    size_t base = b * t;
    size_t len = n - base < t ? n - base : t;
    if (mover && threadIdx.x < len) s[threadIdx.x] = src[base + threadIdx.x];
    __syncthreads();
    if (mover && threadIdx.x < len) dst[base + threadIdx.x] = s[len - 1 - threadIdx.x];
    __syncthreads();
  }
}
