// Does the driver hand back the exporter's own handle when a process imports what it exported
// itself? (interprocess event, pool exported as a file descriptor, IPC memory handle). If so, two
// owning wrappers of one handle would destroy it twice. nvcc -O2 -arch=sm_90 self_import.cu -lcuda
#include <cuda.h>
#include <cstdio>
#include <unistd.h>
#define R(x) do { CUresult r_ = (x); const char* n_ = 0; cuGetErrorName(r_, &n_); printf("%-60s -> %d %s\n", #x, (int)r_, n_ ? n_ : "?"); } while (0)
int main() {
  cuInit(0);
  CUdevice d; cuDeviceGet(&d, 0);
  CUcontext c; cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
  // 1. interprocess event
  CUevent e, e2 = 0;
  R(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUipcEventHandle eh; R(cuIpcGetEventHandle(&eh, e));
  R(cuIpcOpenEventHandle(&e2, eh));
  printf("event: own %p opened %p same=%d\n", (void*)e, (void*)e2, e == e2);
  if (e2) {
    CUstream s; cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    R(cuEventRecord(e2, s)); R(cuStreamSynchronize(s));
    R(cuEventDestroy(e2));
    R(cuEventRecord(e, s)); R(cuEventQuery(e));
    R(cuEventDestroy(e));
  }
  // 2. pool exported as a file descriptor, imported here
  CUmemPoolProps p = {};
  p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0;
  CUmemoryPool pool, pool2 = 0; R(cuMemPoolCreate(&pool, &p));
  int fd = -1; R(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  R(cuMemPoolImportFromShareableHandle(&pool2, (void*)(long)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  printf("pool: own %p imported %p same=%d\n", (void*)pool, (void*)pool2, pool == pool2);
  CUstream s; cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr ptr = 0, ptr2 = 0;
  R(cuMemAllocFromPoolAsync(&ptr, 1 << 20, pool, s)); R(cuStreamSynchronize(s));
  CUmemPoolPtrExportData xd; R(cuMemPoolExportPointer(&xd, ptr));
  if (pool2) {
    R(cuMemPoolImportPointer(&ptr2, pool2, &xd));
    printf("pointer: own %llx imported %llx same=%d\n", (unsigned long long)ptr, (unsigned long long)ptr2, ptr == ptr2);
    if (ptr2) { R(cuMemFreeAsync(ptr2, s)); R(cuStreamSynchronize(s)); }
    R(cuMemAllocFromPoolAsync(&ptr2, 1 << 20, pool2, s));
    R(cuMemPoolDestroy(pool2));
    R(cuMemAllocFromPoolAsync(&ptr2, 1 << 20, pool, s)); R(cuStreamSynchronize(s));
  }
  R(cuMemFreeAsync(ptr, s)); R(cuStreamSynchronize(s));
  R(cuMemPoolDestroy(pool));
  close(fd);
  // 3. IPC memory handle opened by its exporter
  CUdeviceptr m, m2 = 0; R(cuMemAlloc(&m, 1 << 20));
  CUipcMemHandle mh; R(cuIpcGetMemHandle(&mh, m));
  R(cuIpcOpenMemHandle(&m2, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  printf("ipc mem: own %llx opened %llx\n", (unsigned long long)m, (unsigned long long)m2);
  R(cuMemFree(m));
  printf("done\n");
  return 0;
}
