// Does libcudart export a pointer of a pool made with a POSIX file-descriptor handle type?
// (The crate's pool_export got CUDA_ERROR_INVALID_VALUE on the H200 pair.)
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); printf("%-40s %d %s\n", #x, (int)e, cudaGetErrorName(e)); } while (0)
int main() {
  cudaMemPoolProps p = {};
  p.allocType = cudaMemAllocationTypePinned;
  p.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  p.location.type = cudaMemLocationTypeDevice;
  p.location.id = 0;
  cudaMemPool_t pool;
  CK(cudaMemPoolCreate(&pool, &p));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  void* ptr = nullptr;
  CK(cudaMallocFromPoolAsync(&ptr, 400000, pool, s));
  CK(cudaStreamSynchronize(s));
  cudaMemPoolPtrExportData d;
  CK(cudaMemPoolExportPointer(&d, ptr));
  int fd = -1;
  CK(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
  printf("fd %d\n", fd);
  // The crate's default pool props leave maxSize 0; also try with an explicit size.
  p.maxSize = 1 << 26;
  cudaMemPool_t pool2;
  CK(cudaMemPoolCreate(&pool2, &p));
  void* ptr2 = nullptr;
  CK(cudaMallocFromPoolAsync(&ptr2, 400000, pool2, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemPoolExportPointer(&d, ptr2));
  return 0;
}
