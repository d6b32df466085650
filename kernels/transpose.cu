// The shared-memory transpose study: 32x32 tiles handled by 32x8 thread blocks, each thread
// moving TILE_DIM / BLOCK_ROWS elements. The grid is (width / 32, height / 32), rounded up; a
// larger grid is harmless. Every global access is checked against the buffer lengths, and an
// element is written only where its source element exists. The shared tiles are indexed by the
// thread's position in a 32x8 block, so each kernel declares that block shape, and the wrappers
// refuse any other (a 32x32 block would index the tile out of bounds).
#define TILE_DIM 32
#define BLOCK_ROWS 8

// Plain copy, the bandwidth ceiling of the access pattern.
// cuda-runtime: block = (32, 8, 1)
extern "C" __global__ void copy(float* odata, size_t odata_len, const float* idata,
                                size_t idata_len, int width, int height) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t i = (size_t)(y + j) * width + x;
    if (x < width && y + j < height && i < odata_len && i < idata_len) odata[i] = idata[i];
  }
}

// Copy through a shared-memory tile, the ceiling with the tile's overhead.
// cuda-runtime: block = (32, 8, 1)
extern "C" __global__ void copy_shared_mem(float* odata, size_t odata_len, const float* idata,
                                           size_t idata_len, int width, int height) {
  __shared__ float tile[TILE_DIM * TILE_DIM];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t i = (size_t)(y + j) * width + x;
    if (x < width && y + j < height && i < idata_len)
      tile[(threadIdx.y + j) * TILE_DIM + threadIdx.x] = idata[i];
  }
  __syncthreads();
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t i = (size_t)(y + j) * width + x;
    if (x < width && y + j < height && i < idata_len && i < odata_len)
      odata[i] = tile[(threadIdx.y + j) * TILE_DIM + threadIdx.x];
  }
}

// Naive transpose: coalesced reads, strided writes.
// cuda-runtime: block = (32, 8, 1)
extern "C" __global__ void transpose_naive(float* odata, size_t odata_len, const float* idata,
                                           size_t idata_len, int width, int height) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t i = (size_t)(y + j) * width + x;
    size_t o = (size_t)x * height + (y + j);
    if (x < width && y + j < height && i < idata_len && o < odata_len) odata[o] = idata[i];
  }
}

// Coalesced transpose through a shared tile; the column reads of the tile conflict on banks.
// cuda-runtime: block = (32, 8, 1)
extern "C" __global__ void transpose_coalesced(float* odata, size_t odata_len,
                                               const float* idata, size_t idata_len, int width,
                                               int height) {
  __shared__ float tile[TILE_DIM][TILE_DIM];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t i = (size_t)(y + j) * width + x;
    if (x < width && y + j < height && i < idata_len) tile[threadIdx.y + j][threadIdx.x] = idata[i];
  }
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;  // transposed block offset
  y = blockIdx.x * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t o = (size_t)(y + j) * height + x;
    size_t i = (size_t)x * width + (y + j);  // where the tile element came from
    if (x < height && y + j < width && o < odata_len && i < idata_len)
      odata[o] = tile[threadIdx.x][threadIdx.y + j];
  }
}

// As above with the tile padded by one column, so column reads hit 32 different banks.
// cuda-runtime: block = (32, 8, 1)
extern "C" __global__ void transpose_no_bank_conflicts(float* odata, size_t odata_len,
                                                       const float* idata, size_t idata_len,
                                                       int width, int height) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t i = (size_t)(y + j) * width + x;
    if (x < width && y + j < height && i < idata_len) tile[threadIdx.y + j][threadIdx.x] = idata[i];
  }
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;
  y = blockIdx.x * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    size_t o = (size_t)(y + j) * height + x;
    size_t i = (size_t)x * width + (y + j);  // where the tile element came from
    if (x < height && y + j < width && o < odata_len && i < idata_len)
      odata[o] = tile[threadIdx.x][threadIdx.y + j];
  }
}
