// Kernels for conditional graph nodes. `cudaGraphSetConditional` lives in the device runtime
// library: this file is linked with it ahead of time (the cuda-runtime-devrt crate's image), and
// its generated wrappers load that image.
//
// cuda-runtime: device-runtime

// The body of a while node that runs `limit` times (at least once): every element of `data`
// gets 1 added, then thread (0, 0, 0) counts the run in counter[0] and sets the node's
// conditional `handle` to 1 while the count is below `limit`, else 0. The handle must be the
// conditional of the node whose body this kernel is in.
// cuda-runtime: unsafe
extern "C" __global__ void cond_count_to(unsigned long long handle, unsigned int* counter,
                                         size_t counter_len, float* data, size_t data_len,
                                         unsigned int limit) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < data_len;
       i += (size_t)gridDim.x * blockDim.x) {
    data[i] += 1.0f;
  }
  if ((threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0 &&
      counter_len > 0) {
    unsigned int c = counter[0] + 1;
    counter[0] = c;
    cudaGraphSetConditional((cudaGraphConditionalHandle)handle, c < limit ? 1u : 0u);
  }
}

// Sets the conditional `handle` to `value` (one thread): the decision of an if node, made on
// the device. The handle must be a conditional of the graph this kernel runs in.
// cuda-runtime: unsafe
extern "C" __global__ void cond_set(unsigned long long handle, unsigned int value) {
  if ((threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0) {
    cudaGraphSetConditional((cudaGraphConditionalHandle)handle, value);
  }
}
