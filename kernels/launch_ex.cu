// Kernels for the tests and benchmarks of extended launches (compute capability 9.0):
// programmatic dependent launch, and an empty kernel for cluster launches.

// Does nothing (launch overhead of cluster and extended launches).
// cuda-runtime: arch = sm_90
extern "C" __global__ void empty90() {}

// out[i] = seed * (i + 1) ^ (i >> 3) for i < out_len (grid-stride), then lets a kernel launched
// after it with programmatic stream serialization go past its wait: the writes before the
// trigger are visible there.
// cuda-runtime: arch = sm_90
extern "C" __global__ void pdl_produce(unsigned* out, size_t out_len, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < out_len;
       i += (size_t)gridDim.x * blockDim.x) {
    out[i] = seed * (unsigned)(i + 1) ^ (unsigned)(i >> 3);
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Waits for the kernel before it (cudaGridDependencySynchronize: a no-op unless launched with
// programmatic stream serialization), then out[i] = src[i] + 1 for i below both lengths. Every
// thread waits first, before any memory access.
// cuda-runtime: arch = sm_90
// cuda-runtime: waits-for-previous-kernel
extern "C" __global__ void pdl_consume(const unsigned* src, size_t src_len, unsigned* out,
                                       size_t out_len) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  size_t n = src_len < out_len ? src_len : out_len;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    out[i] = src[i] + 1;
  }
}
