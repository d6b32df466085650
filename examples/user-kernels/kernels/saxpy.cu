// y = a * x + y, elementwise over the first min(y_len, x_len) elements: grid-stride, so any
// launch shape covers them all.
extern "C" __global__ void saxpy(float* y, size_t y_len, const float* x, size_t x_len, float a) {
  size_t n = y_len < x_len ? y_len : x_len;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}
