// A 2-D kernel over pitched memory: img[y][x] = img[y][x] * factor + y, for a width x height
// image whose rows are pitch_elems elements apart.
extern "C" __global__ void scale_rows(float* img, size_t img_len, size_t pitch_elems, int width,
                                      int height, float factor) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height || x >= (long long)pitch_elems) return;
  size_t i = (size_t)y * pitch_elems + x;
  if (i < img_len) img[i] = img[i] * factor + (float)y;
}
