// The L2 persistence experiment of the programming guide: a small region read again and again
// while a large one streams through the cache.

// out[i] = cold[i] + hot[i % hot_len] for i below min(out_len, cold_len): grid-stride, so any
// launch shape covers them all; nothing is read from an empty `hot`.
extern "C" __global__ void hot_cold(const float* hot, size_t hot_len, const float* cold,
                                    size_t cold_len, float* out, size_t out_len) {
  if (hot_len == 0) return;
  size_t n = out_len < cold_len ? out_len : cold_len;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    out[i] = cold[i] + hot[i % hot_len];
  }
}
