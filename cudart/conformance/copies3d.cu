// 3-D copies and sets: cudaMalloc3D + cudaMemset3D, cudaMemcpy3D between host, pitched device
// memory and a 3-D array with offsets on every side (sync and async), the deprecated linear
// array copies that wrap at row ends, array-to-array copies, array queries, and the parameter
// blocks the runtime refuses. Every copy is checked against a CPU model of the same region.
#include <algorithm>
#include <cstring>
#include <vector>
#include "common.h"

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  const size_t W = 37, H = 11, D = 5;  // bytes, rows, slices of the linear volume
  std::vector<unsigned char> h(W * H * D), got(W * H * D);
  for (auto& v : h) v = (unsigned char)rnd();

  // Pitched volume: set, then fill from the host, read back.
  cudaPitchedPtr p;
  STEP(cudaMalloc3D(&p, make_cudaExtent(W, H, D)));
  check("pitch covers the width", p.pitch >= W && p.xsize == W && p.ysize == H);
  STEP(cudaMemset3D(p, 0x5a, make_cudaExtent(W, H, D)));
  cudaMemcpy3DParms c = {};
  c.srcPtr = p;
  c.dstPtr = make_cudaPitchedPtr(got.data(), W, W, H);
  c.extent = make_cudaExtent(W, H, D);
  c.kind = cudaMemcpyDeviceToHost;
  STEP(cudaMemcpy3D(&c));
  bool ok = true;
  for (auto v : got) ok &= v == 0x5a;
  check("memset3D reaches every byte", ok);
  // A sub-box set: bytes 3..3+20 of rows 2..2+6 of slices 1..1+3.
  cudaPitchedPtr sub = p;
  sub.ptr = (char*)p.ptr + 1 * p.pitch * H + 2 * p.pitch + 3;
  STEP(cudaMemset3D(sub, 0x11, make_cudaExtent(20, 6, 3)));
  STEP(cudaMemcpy3D(&c));
  ok = true;
  for (size_t z = 0; z < D; z++)
    for (size_t y = 0; y < H; y++)
      for (size_t x = 0; x < W; x++) {
        bool in = z >= 1 && z < 4 && y >= 2 && y < 8 && x >= 3 && x < 23;
        ok &= got[(z * H + y) * W + x] == (in ? 0x11 : 0x5a);
      }
  check("memset3D of a sub-box", ok);

  c = {};
  c.srcPtr = make_cudaPitchedPtr(h.data(), W, W, H);
  c.dstPtr = p;
  c.extent = make_cudaExtent(W, H, D);
  c.kind = cudaMemcpyHostToDevice;
  STEP(cudaMemcpy3D(&c));
  std::fill(got.begin(), got.end(), 0);
  c = {};
  c.srcPtr = p;
  c.dstPtr = make_cudaPitchedPtr(got.data(), W, W, H);
  c.extent = make_cudaExtent(W, H, D);
  c.kind = cudaMemcpyDeviceToHost;
  STEP(cudaMemcpy3D(&c));
  check("host -> pitched -> host round trip", got == h);

  // Offsets on both linear sides, async on a stream.
  cudaStream_t s;
  STEP(cudaStreamCreate(&s));
  std::vector<unsigned char> box(W * H * D, 0);
  c = {};
  c.srcPtr = p;
  c.srcPos = make_cudaPos(4, 3, 1);
  c.dstPtr = make_cudaPitchedPtr(box.data(), W, W, H);
  c.dstPos = make_cudaPos(1, 2, 2);
  c.extent = make_cudaExtent(17, 5, 3);
  c.kind = cudaMemcpyDeviceToHost;
  STEP(cudaMemcpy3DAsync(&c, s));
  STEP(cudaStreamSynchronize(s));
  ok = true;
  for (size_t z = 0; z < D; z++)
    for (size_t y = 0; y < H; y++)
      for (size_t x = 0; x < W; x++) {
        bool in = z >= 2 && z < 5 && y >= 2 && y < 7 && x >= 1 && x < 18;
        unsigned char want = in ? h[((z - 1) * H + (y + 1)) * W + (x + 3)] : 0;
        ok &= box[(z * H + y) * W + x] == want;
      }
  check("offset box, async", ok);

  // A 3-D array of uint2 (8-byte elements): positions and extents count elements.
  const size_t AW = 9, AH = 6, AD = 4;
  std::vector<unsigned> e(AW * AH * AD * 2), eg(AW * AH * AD * 2, 0);
  for (auto& v : e) v = rnd();
  cudaChannelFormatDesc d2 = cudaCreateChannelDesc<uint2>();
  cudaArray_t a;
  STEP(cudaMalloc3DArray(&a, &d2, make_cudaExtent(AW, AH, AD), 0));
  cudaChannelFormatDesc back;
  cudaExtent ext;
  unsigned flags = 99;
  STEP(cudaGetChannelDesc(&back, a));
  printf("channel desc %d %d %d %d kind %d\n", back.x, back.y, back.z, back.w, (int)back.f);
  STEP(cudaArrayGetInfo(&back, &ext, &flags, a));
  printf("array info %zu %zu %zu flags %u\n", ext.width, ext.height, ext.depth, flags);
  c = {};
  c.srcPtr = make_cudaPitchedPtr(e.data(), AW * 8, AW, AH);
  c.dstArray = a;
  c.extent = make_cudaExtent(AW, AH, AD);
  c.kind = cudaMemcpyHostToDevice;
  STEP(cudaMemcpy3D(&c));
  c = {};
  c.srcArray = a;
  c.srcPos = make_cudaPos(2, 1, 1);
  c.dstPtr = make_cudaPitchedPtr(eg.data(), AW * 8, AW, AH);
  c.dstPos = make_cudaPos(8, 0, 0);  // bytes on the linear side
  c.extent = make_cudaExtent(5, 4, 2);
  c.kind = cudaMemcpyDeviceToHost;
  STEP(cudaMemcpy3D(&c));
  ok = true;
  for (size_t z = 0; z < AD; z++)
    for (size_t y = 0; y < AH; y++)
      for (size_t x = 0; x < AW; x++)
        for (int k = 0; k < 2; k++) {
          bool in = z < 2 && y < 4 && x >= 1 && x < 6;
          unsigned want = in ? e[(((z + 1) * AH + (y + 1)) * AW + (x - 1 + 2)) * 2 + k] : 0;
          ok &= eg[((z * AH + y) * AW + x) * 2 + k] == want;
        }
  check("array box to host, element units", ok);
  // In which unit the pointer side's x position counts when an array takes part (NVIDIA's
  // library refused the byte offset 8 above, which fits as bytes but not as 8-byte elements):
  // x = 2 fits either way; the data says which one the library used.
  std::fill(eg.begin(), eg.end(), 0u);
  c.dstPos = make_cudaPos(2, 0, 0);
  STEP(cudaMemcpy3D(&c));
  {
    // First row of the box: 5 elements from array (2, 1, 1).
    const unsigned* first = &e[((1 * AH + 1) * AW + 2) * 2];
    const unsigned char* row = reinterpret_cast<const unsigned char*>(eg.data());
    bool as_elements = memcmp(row + 2 * 8, first, 5 * 8) == 0;
    bool as_bytes = memcmp(row + 2, first, 5 * 8) == 0;
    printf("pointer-side x position with an array: %s\n",
           as_elements ? "elements" : as_bytes ? "bytes" : "neither");
  }
  // Array -> pitched device -> host.
  c = {};
  c.srcArray = a;
  c.dstPtr = p;
  c.extent = make_cudaExtent(4, 3, 2);  // 32 bytes per row: within the volume's 37
  c.kind = cudaMemcpyDeviceToDevice;
  STEP(cudaMemcpy3D(&c));
  // Refusals: both sides on the source, neither, mismatched pitch, bad kind, null.
  c = {};
  c.srcArray = a;
  c.srcPtr = p;
  c.dstPtr = p;
  c.extent = make_cudaExtent(1, 1, 1);
  c.kind = cudaMemcpyDeviceToDevice;
  STEP(cudaMemcpy3D(&c));
  STEP(cudaGetLastError());
  c = {};
  c.dstPtr = p;
  c.extent = make_cudaExtent(1, 1, 1);
  c.kind = cudaMemcpyDeviceToDevice;
  STEP(cudaMemcpy3D(&c));
  STEP(cudaGetLastError());
  c = {};
  c.srcPtr = p;
  c.dstPtr = make_cudaPitchedPtr(got.data(), 8, 8, 1);
  c.extent = make_cudaExtent(9, 1, 1);
  c.kind = cudaMemcpyDeviceToHost;
  STEP(cudaMemcpy3D(&c));
  STEP(cudaGetLastError());
  c.extent = make_cudaExtent(8, 1, 1);
  c.kind = (cudaMemcpyKind)7;
  STEP(cudaMemcpy3D(&c));
  STEP(cudaGetLastError());
  STEP(cudaMemcpy3D(nullptr));
  STEP(cudaGetLastError());
  // Empty extent: nothing to do.
  c.kind = cudaMemcpyDeviceToHost;
  c.extent = make_cudaExtent(0, 1, 1);
  STEP(cudaMemcpy3D(&c));

  // 2-D array of floats: the deprecated linear copies wrap at row ends.
  const size_t FW = 13, FH = 7;
  std::vector<float> f(FW * FH), fg(FW * FH, 0.0f), fz(FW * FH, 0.0f);
  for (auto& v : f) v = (float)(rnd() % 1000);
  cudaChannelFormatDesc df = cudaCreateChannelDesc<float>();
  cudaArray_t fa, fb;
  STEP(cudaMallocArray(&fa, &df, FW, FH, 0));
  STEP(cudaMallocArray(&fb, &df, FW, FH, 0));
  STEP(cudaMemcpy2DToArray(fa, 0, 0, fz.data(), FW * 4, FW * 4, FH, cudaMemcpyHostToDevice));
  STEP(cudaMemcpy2DToArray(fb, 0, 0, fz.data(), FW * 4, FW * 4, FH, cudaMemcpyHostToDevice));
  // 30 floats from float 5 of row 1 on: the rest of row 1, all of rows 2..3, 1 float of row 4.
  STEP(cudaMemcpyToArray(fa, 5 * 4, 1, f.data(), 30 * 4, cudaMemcpyHostToDevice));
  STEP(cudaMemcpy2DFromArray(fg.data(), FW * 4, fa, 0, 0, FW * 4, FH, cudaMemcpyDeviceToHost));
  ok = true;
  for (size_t i = 0; i < FW * FH; i++) {
    size_t start = 1 * FW + 5;
    float want = (i >= start && i < start + 30) ? f[i - start] : 0.0f;
    ok &= fg[i] == want;
  }
  check("cudaMemcpyToArray wraps rows", ok);
  std::vector<float> lin(30, -1.0f);
  STEP(cudaMemcpyFromArray(lin.data(), fa, 5 * 4, 1, 30 * 4, cudaMemcpyDeviceToHost));
  check("cudaMemcpyFromArray wraps rows", memcmp(lin.data(), f.data(), 30 * 4) == 0);
  // Array to array, 2-D box and deprecated linear form.
  STEP(cudaMemcpy2DToArray(fa, 0, 0, f.data(), FW * 4, FW * 4, FH, cudaMemcpyHostToDevice));
  STEP(cudaMemcpy2DArrayToArray(fb, 2 * 4, 3, fa, 1 * 4, 0, 6 * 4, 4, cudaMemcpyDeviceToDevice));
  STEP(cudaMemcpy2DFromArray(fg.data(), FW * 4, fb, 0, 0, FW * 4, FH, cudaMemcpyDeviceToHost));
  ok = true;
  for (size_t y = 0; y < FH; y++)
    for (size_t x = 0; x < FW; x++) {
      bool in = y >= 3 && y < 7 && x >= 2 && x < 8;
      float want = in ? f[(y - 3) * FW + (x - 2 + 1)] : 0.0f;
      ok &= fg[y * FW + x] == want;
    }
  check("2-D array to array box", ok);
  STEP(cudaMemcpyArrayToArray(fb, 0, 0, fa, 3 * 4, 2, 20 * 4, cudaMemcpyDeviceToDevice));
  STEP(cudaMemcpyFromArray(lin.data(), fb, 0, 0, 20 * 4, cudaMemcpyDeviceToHost));
  check("linear array to array", memcmp(lin.data(), f.data() + 2 * FW + 3, 20 * 4) == 0);
  // Async 2-D array copies on a stream.
  STEP(cudaMemcpy2DToArrayAsync(fb, 0, 0, f.data(), FW * 4, FW * 4, FH, cudaMemcpyHostToDevice, s));
  std::fill(fg.begin(), fg.end(), 0.0f);
  STEP(cudaMemcpy2DFromArrayAsync(fg.data(), FW * 4, fb, 0, 0, FW * 4, FH, cudaMemcpyDeviceToHost, s));
  STEP(cudaStreamSynchronize(s));
  check("async 2-D array round trip", fg == f);

  STEP(cudaFreeArray(a));
  STEP(cudaFreeArray(fa));
  STEP(cudaFreeArray(fb));
  STEP(cudaFree(p.ptr));
  STEP(cudaStreamDestroy(s));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
