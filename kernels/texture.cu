// Texture fetches and surface accesses: the crate's texture tests, examples and benchmarks.
//
// Every kernel is a grid-stride loop bounded by its buffers' lengths, so it is correct for any
// launch shape and any argument values. Texture fetches never fault (coordinates outside a
// texture are addressed by its modes; linear fetches outside read zero). Surface accesses use
// cudaBoundaryModeZero: a write outside the surface is dropped and a read outside reads zero,
// never a fault, whatever width and height the caller passes.

#define GRID_STRIDE(i, n)                                                              \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);             \
       i += (size_t)gridDim.x * blockDim.x)

__device__ inline void put4(float* out, size_t i, float4 v) {
  out[4 * i] = v.x;
  out[4 * i + 1] = v.y;
  out[4 * i + 2] = v.z;
  out[4 * i + 3] = v.w;
}

__device__ inline size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

// out[4i..4i+4] = `tex1Dfetch<float4>`(tex, idx[i]): a linear texture read as floats.
// cuda-runtime: texture tex linear float
extern "C" __global__ void fetch_linear(cudaTextureObject_t tex, const int* idx, size_t idx_len,
                                        float* out, size_t out_len) {
  size_t n = smaller(idx_len, out_len / 4);
  GRID_STRIDE(i, n) { put4(out, i, tex1Dfetch<float4>(tex, idx[i])); }
}

// out[4i..4i+4] = `tex1Dfetch<uint4>`(tex, idx[i]): a linear texture of unsigned integers read
// as stored.
// cuda-runtime: texture tex linear uint
extern "C" __global__ void fetch_linear_u(cudaTextureObject_t tex, const int* idx, size_t idx_len,
                                          unsigned int* out, size_t out_len) {
  size_t n = smaller(idx_len, out_len / 4);
  GRID_STRIDE(i, n) {
    uint4 v = tex1Dfetch<uint4>(tex, idx[i]);
    out[4 * i] = v.x;
    out[4 * i + 1] = v.y;
    out[4 * i + 2] = v.z;
    out[4 * i + 3] = v.w;
  }
}

// out[4i..] = `tex1D<float4>`(tex, x[i]).
// cuda-runtime: texture tex 1d float
extern "C" __global__ void sample_1d(cudaTextureObject_t tex, const float* x, size_t x_len,
                                     float* out, size_t out_len) {
  size_t n = smaller(x_len, out_len / 4);
  GRID_STRIDE(i, n) { put4(out, i, tex1D<float4>(tex, x[i])); }
}

// out[4i..] = `tex2D<float4>`(tex, xy[2i], xy[2i + 1]).
// cuda-runtime: texture tex 2d,pitch2d float
extern "C" __global__ void sample_2d(cudaTextureObject_t tex, const float* xy, size_t xy_len,
                                     float* out, size_t out_len) {
  size_t n = smaller(xy_len / 2, out_len / 4);
  GRID_STRIDE(i, n) { put4(out, i, tex2D<float4>(tex, xy[2 * i], xy[2 * i + 1])); }
}

// out[4i..] = `tex2D<uint4>`(tex, xy[2i], xy[2i + 1]): unsigned integer texels read as stored.
// cuda-runtime: texture tex 2d,pitch2d uint
extern "C" __global__ void sample_2d_u(cudaTextureObject_t tex, const float* xy, size_t xy_len,
                                       unsigned int* out, size_t out_len) {
  size_t n = smaller(xy_len / 2, out_len / 4);
  GRID_STRIDE(i, n) {
    uint4 v = tex2D<uint4>(tex, xy[2 * i], xy[2 * i + 1]);
    out[4 * i] = v.x;
    out[4 * i + 1] = v.y;
    out[4 * i + 2] = v.z;
    out[4 * i + 3] = v.w;
  }
}

// out[4i..] = `tex2D<int4>`(tex, xy[2i], xy[2i + 1]): signed integer texels read as stored.
// cuda-runtime: texture tex 2d,pitch2d int
extern "C" __global__ void sample_2d_i(cudaTextureObject_t tex, const float* xy, size_t xy_len,
                                       int* out, size_t out_len) {
  size_t n = smaller(xy_len / 2, out_len / 4);
  GRID_STRIDE(i, n) {
    int4 v = tex2D<int4>(tex, xy[2 * i], xy[2 * i + 1]);
    out[4 * i] = v.x;
    out[4 * i + 1] = v.y;
    out[4 * i + 2] = v.z;
    out[4 * i + 3] = v.w;
  }
}

// out[4i..] = `tex3D<float4>`(tex, xyz[3i], xyz[3i + 1], xyz[3i + 2]).
// cuda-runtime: texture tex 3d float
extern "C" __global__ void sample_3d(cudaTextureObject_t tex, const float* xyz, size_t xyz_len,
                                     float* out, size_t out_len) {
  size_t n = smaller(xyz_len / 3, out_len / 4);
  GRID_STRIDE(i, n) {
    put4(out, i, tex3D<float4>(tex, xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]));
  }
}

// out[4i..] = `tex1DLayered<float4>`(tex, x[i], layer[i]).
// cuda-runtime: texture tex 1d-layered float
extern "C" __global__ void sample_1d_layered(cudaTextureObject_t tex, const float* x, size_t x_len,
                                             const int* layer, size_t layer_len, float* out,
                                             size_t out_len) {
  size_t n = smaller(smaller(x_len, layer_len), out_len / 4);
  GRID_STRIDE(i, n) { put4(out, i, tex1DLayered<float4>(tex, x[i], layer[i])); }
}

// out[4i..] = `tex2DLayered<float4>`(tex, xy[2i], xy[2i + 1], layer[i]).
// cuda-runtime: texture tex 2d-layered float
extern "C" __global__ void sample_2d_layered(cudaTextureObject_t tex, const float* xy,
                                             size_t xy_len, const int* layer, size_t layer_len,
                                             float* out, size_t out_len) {
  size_t n = smaller(smaller(xy_len / 2, layer_len), out_len / 4);
  GRID_STRIDE(i, n) {
    put4(out, i, tex2DLayered<float4>(tex, xy[2 * i], xy[2 * i + 1], layer[i]));
  }
}

// out[4i..] = `texCubemap<float4>`(tex, xyz[3i], xyz[3i + 1], xyz[3i + 2]).
// cuda-runtime: texture tex cubemap float
extern "C" __global__ void sample_cubemap(cudaTextureObject_t tex, const float* xyz,
                                          size_t xyz_len, float* out, size_t out_len) {
  size_t n = smaller(xyz_len / 3, out_len / 4);
  GRID_STRIDE(i, n) {
    put4(out, i, texCubemap<float4>(tex, xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]));
  }
}

// out[4i..] = `texCubemapLayered<float4>`(tex, xyz[3i..3i+3], cube[i]).
// cuda-runtime: texture tex cubemap-layered float
extern "C" __global__ void sample_cubemap_layered(cudaTextureObject_t tex, const float* xyz,
                                                  size_t xyz_len, const int* cube,
                                                  size_t cube_len, float* out, size_t out_len) {
  size_t n = smaller(smaller(xyz_len / 3, cube_len), out_len / 4);
  GRID_STRIDE(i, n) {
    put4(out, i,
         texCubemapLayered<float4>(tex, xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2], cube[i]));
  }
}

// out[4i..] = `tex2Dgather<float4>`(tex, xy[2i], xy[2i + 1], comp) (comp 0 to 3; others read
// channel 0).
// cuda-runtime: texture tex 2d float
extern "C" __global__ void gather_2d(cudaTextureObject_t tex, const float* xy, size_t xy_len,
                                     int comp, float* out, size_t out_len) {
  size_t n = smaller(xy_len / 2, out_len / 4);
  int c = (comp >= 0 && comp <= 3) ? comp : 0;
  GRID_STRIDE(i, n) { put4(out, i, tex2Dgather<float4>(tex, xy[2 * i], xy[2 * i + 1], c)); }
}

// out[4i..] = `tex2DLod<float4>`(tex, xyl[3i], xyl[3i + 1], xyl[3i + 2]) (x, y, level of detail).
// cuda-runtime: texture tex mipmapped-2d,2d float
extern "C" __global__ void sample_2d_lod(cudaTextureObject_t tex, const float* xyl, size_t xyl_len,
                                         float* out, size_t out_len) {
  size_t n = smaller(xyl_len / 3, out_len / 4);
  GRID_STRIDE(i, n) {
    put4(out, i, tex2DLod<float4>(tex, xyl[3 * i], xyl[3 * i + 1], xyl[3 * i + 2]));
  }
}

// Writes src[i] to texel (i % width, i / width) of a 2-D float surface, for i below
// min(src_len, width * height).
// cuda-runtime: require width <= 536870911
// cuda-runtime: surface surf 2d 4
extern "C" __global__ void surf_write_2d(cudaSurfaceObject_t surf, const float* src,
                                         size_t src_len, int width, int height) {
  // (x * 4 is a byte offset in an int: wider surfaces are refused by the wrapper.)
  if (width <= 0 || height <= 0 || width > 536870911) return;
  size_t n = smaller(src_len, (size_t)width * (size_t)height);
  GRID_STRIDE(i, n) {
    int x = (int)(i % (size_t)width), y = (int)(i / (size_t)width);
    surf2Dwrite(src[i], surf, x * (int)sizeof(float), y, cudaBoundaryModeZero);
  }
}

// Multiplies every texel of a width x height float surface by `factor`, reading and writing it.
// cuda-runtime: require width <= 536870911
// cuda-runtime: surface surf 2d 4
extern "C" __global__ void surf_scale_2d(cudaSurfaceObject_t surf, int width, int height,
                                         float factor) {
  if (width <= 0 || height <= 0 || width > 536870911) return;
  size_t n = (size_t)width * (size_t)height;
  GRID_STRIDE(i, n) {
    int x = (int)(i % (size_t)width), y = (int)(i / (size_t)width);
    float v = surf2Dread<float>(surf, x * (int)sizeof(float), y, cudaBoundaryModeZero);
    surf2Dwrite(v * factor, surf, x * (int)sizeof(float), y, cudaBoundaryModeZero);
  }
}

// Writes src[i] to texel (x, y) of layer l of a layered float surface, i = (l * height + y) *
// width + x, for i below min(src_len, width * height * layers).
// cuda-runtime: require width <= 536870911
// cuda-runtime: surface surf 2d-layered 4
extern "C" __global__ void surf_write_2d_layered(cudaSurfaceObject_t surf, const float* src,
                                                 size_t src_len, int width, int height,
                                                 int layers) {
  if (width <= 0 || height <= 0 || layers <= 0 || width > 536870911) return;
  size_t plane = (size_t)width * (size_t)height;
  size_t n = smaller(src_len, plane * (size_t)layers);
  GRID_STRIDE(i, n) {
    int x = (int)(i % (size_t)width), y = (int)((i / (size_t)width) % (size_t)height);
    int l = (int)(i / plane);
    surf2DLayeredwrite(src[i], surf, x * (int)sizeof(float), y, l, cudaBoundaryModeZero);
  }
}

// Writes src[i] to texel (x, y) of face f of a float cubemap surface, i = (f * width + y) *
// width + x, for i below min(src_len, 6 * width * width).
// cuda-runtime: require width <= 536870911
// cuda-runtime: surface surf cubemap 4
extern "C" __global__ void surf_write_cubemap(cudaSurfaceObject_t surf, const float* src,
                                              size_t src_len, int width) {
  if (width <= 0 || width > 536870911) return;
  size_t plane = (size_t)width * (size_t)width;
  size_t n = smaller(src_len, 6 * plane);
  GRID_STRIDE(i, n) {
    int x = (int)(i % (size_t)width), y = (int)((i / (size_t)width) % (size_t)width);
    int f = (int)(i / plane);
    surfCubemapwrite(src[i], surf, x * (int)sizeof(float), y, f, cudaBoundaryModeZero);
  }
}

// The simpleTexture study: out[y * width + x] = `tex2D<float>`(tex, u, v), where (u, v) is the
// normalised centre of pixel (x, y) rotated by `angle` radians about the image's centre. For
// pixels below min(out_len, width * height).
// cuda-runtime: texture tex 2d,pitch2d float
extern "C" __global__ void rotate(cudaTextureObject_t tex, float* out, size_t out_len, int width,
                                  int height, float angle) {
  if (width <= 0 || height <= 0) return;
  size_t n = smaller(out_len, (size_t)width * (size_t)height);
  float s = sinf(angle), c = cosf(angle);
  GRID_STRIDE(i, n) {
    int x = (int)(i % (size_t)width), y = (int)(i / (size_t)width);
    float u = ((float)x + 0.5f) / (float)width - 0.5f;
    float v = ((float)y + 0.5f) / (float)height - 0.5f;
    float tu = u * c - v * s + 0.5f;
    float tv = v * c + u * s + 0.5f;
    out[i] = tex2D<float>(tex, tu, tv);
  }
}

// Streaming reads through a texture: sums `tex1Dfetch<float4>`(tex, i) over i below n4 (float4
// texels; fetches past the texture read zero), one partial sum per thread into out[t % out_len].
// Each thread keeps four fetches in flight (one grid stride apart), as a streaming kernel should:
// with one at a time the texture path reached 0.93x of the global loads below on the H200.
// cuda-runtime: require n4 <= 2147483648
// cuda-runtime: texture tex linear float
extern "C" __global__ void stream_texture(cudaTextureObject_t tex, unsigned long long n4, float* out,
                                          size_t out_len) {
  // (Texel indices are ints: more would wrap onto texels already read. Every index fetched is
  // below n4, so at most 2^31 - 1.)
  if (out_len == 0 || n4 > 2147483648ull) return;
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t n = (size_t)n4;
  float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  size_t i = t;
  for (; i + 3 * stride < n; i += 4 * stride) {
    float4 a = tex1Dfetch<float4>(tex, (int)i);
    float4 b = tex1Dfetch<float4>(tex, (int)(i + stride));
    float4 c = tex1Dfetch<float4>(tex, (int)(i + 2 * stride));
    float4 d = tex1Dfetch<float4>(tex, (int)(i + 3 * stride));
    acc0 += a.x + a.y + a.z + a.w;
    acc1 += b.x + b.y + b.z + b.w;
    acc2 += c.x + c.y + c.z + c.w;
    acc3 += d.x + d.y + d.z + d.w;
  }
  for (; i < n; i += stride) {
    float4 v = tex1Dfetch<float4>(tex, (int)i);
    acc0 += v.x + v.y + v.z + v.w;
  }
  out[t % out_len] = (acc0 + acc1) + (acc2 + acc3);
}

// The same through plain global loads of float4 (when `src` is 16-byte aligned; floats
// otherwise), for comparison, with as many loads in flight per thread.
extern "C" __global__ void stream_global(const float* src, size_t src_len, float* out,
                                         size_t out_len) {
  if (out_len == 0) return;
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  if (((unsigned long long)src & 15) == 0) {
    const float4* in4 = reinterpret_cast<const float4*>(src);
    size_t n = src_len / 4;
    size_t i = t;
    for (; i + 3 * stride < n; i += 4 * stride) {
      float4 a = __ldg(&in4[i]);
      float4 b = __ldg(&in4[i + stride]);
      float4 c = __ldg(&in4[i + 2 * stride]);
      float4 d = __ldg(&in4[i + 3 * stride]);
      acc0 += a.x + a.y + a.z + a.w;
      acc1 += b.x + b.y + b.z + b.w;
      acc2 += c.x + c.y + c.z + c.w;
      acc3 += d.x + d.y + d.z + d.w;
    }
    for (; i < n; i += stride) {
      float4 v = __ldg(&in4[i]);
      acc0 += v.x + v.y + v.z + v.w;
    }
    // The floats past the last whole float4 (src_len % 4 of them), by the first threads.
    size_t tail = n * 4 + t;
    if (tail < src_len) acc1 += __ldg(&src[tail]);
  } else {
    GRID_STRIDE(i, src_len) { acc0 += __ldg(&src[i]); }
  }
  out[t % out_len] = (acc0 + acc1) + (acc2 + acc3);
}
