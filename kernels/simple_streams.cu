// The kernel of the simple_streams example: enough arithmetic per element that a chunk's kernel
// takes about as long as its copies, so that streams can overlap them.

// data[i] = data[i] * 1664525 + factor (mod 2^32), `iterations` times, for every i < data_len
// (a grid-stride loop: correct for any launch shape; a negative count does nothing).
extern "C" __global__ void mix_repeat(unsigned int* data, size_t data_len, unsigned int factor,
                                      int iterations) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < data_len;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned int x = data[i];
    for (int k = 0; k < iterations; k++) x = x * 1664525u + factor;
    data[i] = x;
  }
}
