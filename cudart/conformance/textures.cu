// Arrays, texture and surface objects: a float array filled by a 2-D copy, fetched through a
// texture at texel centres (point filtering: exact) and between texels (linear filtering),
// written through a surface, read back; channel descriptions the runtime refuses.
#include <vector>
#include "common.h"

__global__ void fetch(cudaTextureObject_t t, float* out, int w, int h, float shift) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f + shift, y + 0.5f);
}

__global__ void negate(cudaSurfaceObject_t s, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) {
    float v;
    surf2Dread(&v, s, x * 4, y);
    surf2Dwrite(-v, s, x * 4, y);
  }
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  const int W = 300, H = 77;
  std::vector<float> h(W * H), got(W * H);
  for (auto& v : h) v = (rnd() % 4096) / 64.0f;
  cudaChannelFormatDesc d = cudaCreateChannelDesc<float>();
  printf("channel desc %d %d %d %d kind %d\n", d.x, d.y, d.z, d.w, (int)d.f);
  cudaArray_t a;
  STEP(cudaMallocArray(&a, &d, W, H, cudaArraySurfaceLoadStore));
  STEP(cudaMemcpy2DToArray(a, 0, 0, h.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = a;
  cudaTextureDesc td = {};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t t = 0;
  STEP(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  float* out;
  STEP(cudaMalloc(&out, W * H * 4));
  dim3 grid((W + 127) / 128, H);
  fetch<<<grid, 128>>>(t, out, W, H, 0.0f);
  LAST("point fetch");
  STEP(cudaMemcpy(got.data(), out, W * H * 4, cudaMemcpyDeviceToHost));
  check("point fetches equal the texels", got == h);
  cudaTextureObject_t lin = 0;
  td.filterMode = cudaFilterModeLinear;
  STEP(cudaCreateTextureObject(&lin, &rd, &td, nullptr));
  fetch<<<grid, 128>>>(lin, out, W, H, 0.5f);
  STEP(cudaMemcpy(got.data(), out, W * H * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int y = 0; y < H; y++)
    for (int x = 0; x + 1 < W; x++) {
      float want = 0.5f * (h[y * W + x] + h[y * W + x + 1]);
      ok &= fabsf(got[y * W + x] - want) <= 1e-3f * (1.0f + fabsf(want));
    }
  check("linear fetches halfway between texels", ok);
  double sum = 0;
  for (float v : got) sum += v;
  printf("linear checksum %.3f\n", sum);
  cudaSurfaceObject_t s = 0;
  STEP(cudaCreateSurfaceObject(&s, &rd));
  negate<<<grid, 128>>>(s, W, H);
  LAST("surface negate");
  STEP(cudaMemcpy2DFromArray(got.data(), W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < W * H; i++) ok &= got[i] == -h[i];
  check("surface writes read back", ok);
  // Refusals: three channels, mixed widths.
  cudaChannelFormatDesc three = cudaCreateChannelDesc(32, 32, 32, 0, cudaChannelFormatKindFloat);
  cudaArray_t bad;
  STEP(cudaMallocArray(&bad, &three, 16, 16, 0));
  cudaChannelFormatDesc mixed = cudaCreateChannelDesc(8, 16, 0, 0, cudaChannelFormatKindUnsigned);
  STEP(cudaMallocArray(&bad, &mixed, 16, 16, 0));
  STEP(cudaDestroySurfaceObject(s));
  STEP(cudaDestroyTextureObject(t));
  STEP(cudaDestroyTextureObject(lin));
  STEP(cudaFreeArray(a));
  STEP(cudaFree(out));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
