// Streaming 256 MiB of float4 through a linear texture (tex1Dfetch) against plain __ldg loads,
// over launch shapes and loads in flight per thread: which shape gets the texture path closest to
// the global loads (issue 11's >= 0.95x figure). nvcc -O3 -arch=sm_90 tex_stream_configs.cu
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

template <int ILP>
__global__ void tex_k(cudaTextureObject_t t, long long n, float* out) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x, s = (long long)gridDim.x * blockDim.x;
  float acc[ILP] = {};
  for (; i + (ILP - 1) * s < n; i += ILP * s) {
    float4 v[ILP];
#pragma unroll
    for (int k = 0; k < ILP; k++) v[k] = tex1Dfetch<float4>(t, (int)(i + k * s));
#pragma unroll
    for (int k = 0; k < ILP; k++) acc[k] += v[k].x + v[k].y + v[k].z + v[k].w;
  }
  for (; i < n; i += s) { float4 v = tex1Dfetch<float4>(t, (int)i); acc[0] += v.x + v.y + v.z + v.w; }
  float a = 0; for (int k = 0; k < ILP; k++) a += acc[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}
template <int ILP>
__global__ void glb_k(const float4* p, long long n, float* out) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x, s = (long long)gridDim.x * blockDim.x;
  float acc[ILP] = {};
  for (; i + (ILP - 1) * s < n; i += ILP * s) {
    float4 v[ILP];
#pragma unroll
    for (int k = 0; k < ILP; k++) v[k] = __ldg(&p[i + k * s]);
#pragma unroll
    for (int k = 0; k < ILP; k++) acc[k] += v[k].x + v[k].y + v[k].z + v[k].w;
  }
  for (; i < n; i += s) { float4 v = __ldg(&p[i]); acc[0] += v.x + v.y + v.z + v.w; }
  float a = 0; for (int k = 0; k < ILP; k++) a += acc[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

template <class F>
float best(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  float m = 1e30f;
  for (int r = 0; r < 15; r++) {
    cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (r > 1 && ms < m) m = ms;
  }
  return m;
}

int main() {
  const long long n = (256ll << 20) / 16;
  float4* p; float* out;
  CK(cudaMalloc(&p, n * 16)); CK(cudaMemset(p, 0, n * 16));
  CK(cudaMalloc(&out, 132ll * 64 * 1024 * 4));
  cudaResourceDesc rd = {}; rd.resType = cudaResourceTypeLinear; rd.res.linear.devPtr = p;
  rd.res.linear.desc = cudaCreateChannelDesc<float4>(); rd.res.linear.sizeInBytes = n * 16;
  cudaTextureDesc td = {}; td.readMode = cudaReadModeElementType;
  cudaTextureObject_t t; CK(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  float gbest = 1e30f, tbest = 1e30f;
  int blocks_per_sm[] = {2, 4, 8, 16, 32};
  int threads[] = {128, 256, 512, 1024};
  for (int bps : blocks_per_sm) for (int th : threads) {
    int g = 132 * bps;
    if ((long long)g * th > 132ll * 64 * 1024) continue;
    float g4 = best([&] { glb_k<4><<<g, th>>>(p, n, out); });
    float t1 = best([&] { tex_k<1><<<g, th>>>(t, n, out); });
    float t4 = best([&] { tex_k<4><<<g, th>>>(t, n, out); });
    float t8 = best([&] { tex_k<8><<<g, th>>>(t, n, out); });
    float tb = fminf(t1, fminf(t4, t8));
    gbest = fminf(gbest, g4); tbest = fminf(tbest, tb);
    printf("grid %5d x %4d: global4 %.3f ms (%.0f GB/s)  tex1 %.3f tex4 %.3f tex8 %.3f  best tex/global bw %.3f\n",
           g, th, g4, n * 16 / g4 / 1e6, t1, t4, t8, g4 / tb);
  }
  CK(cudaGetLastError());
  printf("best global %.3f ms, best texture %.3f ms: texture bandwidth %.3fx global\n", gbest, tbest, gbest / tbest);
  printf("bench shape (1056 x 512): global4 %.3f tex4 %.3f ratio %.3f\n",
         best([&] { glb_k<4><<<1056, 512>>>(p, n, out); }), best([&] { tex_k<4><<<1056, 512>>>(t, n, out); }),
         best([&] { glb_k<4><<<1056, 512>>>(p, n, out); }) / best([&] { tex_k<4><<<1056, 512>>>(t, n, out); }));
  return 0;
}
