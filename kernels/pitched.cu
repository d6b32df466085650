// A 2-D kernel over pitched memory: img[y][x] = img[y][x] * factor + y, for a width x height
// image whose rows are pitch_elems elements apart. Any launch shape is correct: indices are
// 64-bit (a large grid cannot wrap onto another thread's element), threads with a z index above
// 0 do nothing, and a row offset that would overflow is skipped, so no element is scaled twice.
extern "C" __global__ void scale_rows(float* img, size_t img_len, size_t pitch_elems, int width,
                                      int height, float factor) {
  if (threadIdx.z != 0 || blockIdx.z != 0) return;
  size_t x = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t y = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
  if (width <= 0 || height <= 0 || x >= (size_t)width || y >= (size_t)height || x >= pitch_elems)
    return;
  // (y + 1) * pitch_elems < 2^64, so y * pitch_elems + x does not wrap (x < pitch_elems).
  if (__umul64hi(y + 1, pitch_elems) != 0) return;
  size_t i = y * pitch_elems + x;
  if (i < img_len) img[i] = img[i] * factor + (float)y;
}
