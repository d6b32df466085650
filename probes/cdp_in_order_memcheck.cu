// Is memcheck's finding on the crate's `dynamic_parallelism::hostile_shapes_stay_inside_the_views`
// test (three "Invalid __global__ write of size 8" at cdp_in_order+0xb10, by thread (0,0,0) of
// blocks 289, 399 and 657, all at one address 39,777 bytes past a 512-byte allocation; eighth
// session, two H200s) about the kernel, or about device-side launches under the tool? This
// builds the crate's own kernel (kernels/cdp.cu) the way NVIDIA documents (nvcc -rdc=true,
// libcudadevrt, NVIDIA's libcudart) and runs the shapes of the test that grids of 700 blocks
// make (each block launching 3 children, in its own stream and in a created one), with the
// test's view lengths. Run under compute-sanitizer on the GPU machine:
//   nvcc -arch=sm_90 -rdc=true probes/cdp_in_order_memcheck.cu -lcudadevrt -o /tmp/cdpo
//   /tmp/cdpo && compute-sanitizer --tool memcheck /tmp/cdpo
#include "../kernels/cdp.cu"
#include <cstdio>
#include <vector>

static unsigned steps_reference(unsigned v, unsigned steps) {
  for (unsigned k = 1; k <= steps; ++k) v = v * 33u + k;
  return v;
}

int main() {
  const unsigned blocks_x[] = {1, 1024};  // block shapes (x only) of the test: 1 and 1024 threads
  const size_t lens[][2] = {{3000, 2500}, {2500, 3000}, {1, 1}};
  int failed = 0;
  for (unsigned bx : blocks_x) {
    for (auto &l : lens) {
      size_t n = l[0] < l[1] ? l[0] : l[1];
      std::vector<unsigned> h(l[0]), back(l[1]);
      for (size_t i = 0; i < l[0]; ++i) h[i] = (unsigned)(i * 2654435761u);
      unsigned *src, *out, *failures;
      cudaMalloc(&src, l[0] * 4);
      cudaMalloc(&out, l[1] * 4);
      cudaMalloc(&failures, 4);
      cudaMemcpy(src, h.data(), l[0] * 4, cudaMemcpyHostToDevice);
      for (int named = 0; named < 2; ++named) {
        cudaMemset(out, 0, l[1] * 4);
        cudaMemset(failures, 0, 4);
        cdp_in_order<<<700, bx>>>(src, l[0], out, l[1], 3, named != 0, failures, 1);
        cudaError_t e = cudaDeviceSynchronize();
        unsigned f = 0;
        cudaMemcpy(back.data(), out, l[1] * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(&f, failures, 4, cudaMemcpyDeviceToHost);
        // Blocks cover n in segments of bx elements; 700 blocks of bx threads cover 700 * bx.
        size_t covered = n < 700 * (size_t)bx ? n : 700 * (size_t)bx, bad = 0;
        for (size_t i = 0; i < covered; ++i)
          if (back[i] != steps_reference(h[i], 3)) ++bad;
        printf("cdp_in_order block %u lengths %zu %zu named %d: sync %s, refused %u, mismatches %zu of %zu\n",
               bx, l[0], l[1], named, cudaGetErrorName(e), f, bad, covered);
        failed |= e != cudaSuccess || (bad != 0 && f == 0);
      }
      cudaFree(src);
      cudaFree(out);
      cudaFree(failures);
    }
  }
  return failed;
}
