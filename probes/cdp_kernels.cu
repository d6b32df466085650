// Device code of the dynamic-parallelism probe (cdp_driver_only.sh): a parent block writes
// `in`, synchronises, and one thread launches a child grid that reads it (into a
// fire-and-forget stream) and a tail grid that sums the child's output.

extern "C" __global__ void cdp_child(const unsigned* in, unsigned* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i] + 1;
}

extern "C" __global__ void cdp_sum(const unsigned* out, size_t n, unsigned long long* sum) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    unsigned long long s = 0;
    for (size_t i = 0; i < n; ++i) s += out[i];
    *sum = s;
  }
}

// One block: every thread writes its share of `in`; after the barrier the block's writes are
// visible to the child grid that thread 0 launches; the tail launch starts after the parent
// and the child have completed.
extern "C" __global__ void cdp_parent(unsigned* in, unsigned* out, size_t n,
                                      unsigned long long* sum, unsigned seed) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) in[i] = seed * (unsigned)i + 12345u;
  __syncthreads();
  if (threadIdx.x == 0) {
    cdp_child<<<(unsigned)((n + 255) / 256), 256, 0, cudaStreamFireAndForget>>>(in, out, n);
    cdp_sum<<<1, 1, 0, cudaStreamTailLaunch>>>(out, n, sum);
  }
}
