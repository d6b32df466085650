// __constant__ and __device__ variables set from the host.

__constant__ float coeffs[16];
__device__ float* data_ptr;
__device__ unsigned long long data_len;

// y[i] = coeffs[0] + coeffs[1] x + ... + coeffs[degree] x^degree (Horner), degree clamped to 15.
extern "C" __global__ void poly_eval(const float* x, size_t x_len, float* y, size_t y_len,
                                     int degree) {
  int d = degree < 0 ? 0 : (degree > 15 ? 15 : degree);
  size_t n = x_len < y_len ? x_len : y_len;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = x[i];
    float acc = 0.0f;
    for (int k = d; k >= 0; k--) acc = acc * v + coeffs[k];
    y[i] = acc;
  }
}

// cuda-runtime: unsafe
// Multiplies data_ptr[i] by factor for i < data_len: the host must have set both to a live
// buffer.
extern "C" __global__ void scale_through_pointer(float factor) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < data_len;
       i += (size_t)gridDim.x * blockDim.x) {
    data_ptr[i] *= factor;
  }
}
