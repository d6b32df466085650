// Is compute-sanitizer memcheck's finding on cdp_child_sees_parent (an "Invalid __global__ write of
// size 4" by the launching thread, far past a 512-byte allocation) about the kernel, or about
// device-side launches under the sanitizer? This builds the crate's own kernel (kernels/cdp.cu)
// the way NVIDIA documents (nvcc -rdc=true, libcudadevrt, NVIDIA's libcudart) and runs it with
// the test's shape. Run under compute-sanitizer on the GPU machine (it has nvcc):
//   nvcc -arch=sm_90 -rdc=true probes/cdp_memcheck.cu -lcudadevrt -o /tmp/cdpm
//   compute-sanitizer --tool memcheck /tmp/cdpm
#include "../kernels/cdp.cu"
#include <cstdio>
#include <vector>

int main() {
  const size_t n = 1000 * 128 + 37;
  std::vector<float> h(n), back(n);
  for (size_t i = 0; i < n; ++i) h[i] = float((i * 2654435761u) % 1000) * 0.25f;
  float *src, *stage, *out;
  unsigned* failures;
  cudaMalloc(&src, n * 4);
  cudaMalloc(&stage, n * 4);
  cudaMalloc(&out, n * 4);
  cudaMalloc(&failures, 4);
  cudaMemset(failures, 0, 4);
  cudaMemcpy(src, h.data(), n * 4, cudaMemcpyHostToDevice);
  unsigned blocks = (unsigned)((n + 127) / 128);
  cdp_child_sees_parent<<<blocks, 128>>>(src, n, stage, n, out, n, failures, 1);
  cudaError_t e = cudaDeviceSynchronize();
  unsigned f = 0;
  cudaMemcpy(back.data(), out, n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&f, failures, 4, cudaMemcpyDeviceToHost);
  size_t bad = 0;
  for (size_t b = 0; b < blocks; ++b) {
    size_t begin = b * 128, count = n - begin < 128 ? n - begin : 128;
    for (size_t j = 0; j < count; ++j)
      if (back[begin + j] != 2.0f * h[begin + count - 1 - j] + 1.0f) ++bad;
  }
  printf("cdp_memcheck: sync %s, refused launches %u, mismatches %zu of %zu\n",
         cudaGetErrorName(e), f, bad, n);
  return e != cudaSuccess || bad != 0;
}
