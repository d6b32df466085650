// Kernels of the GPU tests of `Library` (context-independent loading, readable names of
// templated kernels). The committed library.ptx is made from this file by
//   .nvcc/nvidia/cu13/bin/nvcc -ptx -arch=compute_75 -O3 -std=c++17 library.cu -o library.ptx
// (the pinned nvcc, scripts/install-nvcc).

// data[i] *= factor for i < n (grid-stride: any launch shape).
template <typename T>
__global__ void scale(T* data, size_t n, T factor) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    data[i] *= factor;
}
template __global__ void scale<float>(float*, size_t, float);
template __global__ void scale<int>(int*, size_t, int);

namespace lib {
// out[i] = in[i] + K for i < n.
template <typename T, int K>
__global__ void add_k(const T* in, T* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i] + (T)K;
}
template __global__ void add_k<unsigned int, 7>(const unsigned int*, unsigned int*, size_t);
template __global__ void add_k<unsigned int, -3>(const unsigned int*, unsigned int*, size_t);
}  // namespace lib

__device__ float coeffs[4];

// d[i] *= coeffs[i % 4] for i < n.
extern "C" __global__ void apply_coeffs(float* d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    d[i] *= coeffs[i % 4];
}

// A module global larger than bytemuck's fixed array impls (for `Symbol<[i32; 6976]>`).
__device__ int table[6976];

// out[i] = table[i % 6976] for i < n.
extern "C" __global__ void gather_table(int* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = table[i % 6976];
}
