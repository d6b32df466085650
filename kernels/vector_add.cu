// c[i] = a[i] + b[i] for every i below all three lengths.
extern "C" __global__ void vadd(const float* a, size_t a_len, const float* b, size_t b_len,
                                float* c, size_t c_len) {
  size_t n = a_len < b_len ? a_len : b_len;
  n = n < c_len ? n : c_len;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    c[i] = a[i] + b[i];
  }
}
