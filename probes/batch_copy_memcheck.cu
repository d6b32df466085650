// Whether compute-sanitizer memcheck keeps `cuMemcpyBatchAsync` (the crate's `CopyBatch`) in
// stream order. The crate's test `runtime_rest::batched_copies_move_random_data` passes on its
// own and in the suite, but under memcheck (alone, eighth session) copy 0 read back as 0, the
// destination's old contents. This probe makes the same copies with the driver alone: random
// sources, zeroed destinations, one batch on a non-blocking stream, a stream synchronise, and
// a read back, with and without the tool. A third pass orders the read back as the crate
// does: an event recorded on the stream after the batch, the legacy stream made to wait for
// it, and a synchronous copy there; a fourth asks `cuEventQuery` first and skips the wait when
// the event says done, as the crate's enqueue path does.
//
//   nvcc -O2 -arch=sm_90 batch_copy_memcheck.cu -lcuda -o /tmp/batch && /tmp/batch &&
//   compute-sanitizer --tool memcheck /tmp/batch
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda.h>

#define CK(x)                                                                 \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      printf("batch %s failed: %d\n", #x, (int)r_);                           \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main() {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  const size_t lens[] = {1, 1000, 65536, 3, 250001};
  const size_t n = sizeof lens / sizeof lens[0];
  std::vector<CUdeviceptr> src(n), dst(n);
  std::vector<size_t> sizes(n);
  std::vector<std::vector<unsigned>> host(n);
  srand(12345);
  for (size_t i = 0; i < n; i++) {
    sizes[i] = lens[i] * 4;
    host[i].resize(lens[i]);
    for (auto &v : host[i]) v = (unsigned)rand() * 2654435761u + 1;
    CK(cuMemAlloc(&src[i], sizes[i]));
    CK(cuMemAlloc(&dst[i], sizes[i]));
    CK(cuMemcpyHtoD(src[i], host[i].data(), sizes[i]));
    CK(cuMemsetD8(dst[i], 0, sizes[i]));
  }
  CK(cuCtxSynchronize());
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  for (int order = 0; order < 4; order++) {
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = order == 1 ? CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL
                                     : CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
    attr.srcLocHint.id = 0;
    attr.dstLocHint = attr.srcLocHint;
    size_t idx = 0;
    for (size_t i = 0; i < n; i++) CK(cuMemsetD8(dst[i], 0, sizes[i]));
    CK(cuCtxSynchronize());
    CK(cuMemcpyBatchAsync(dst.data(), src.data(), sizes.data(), n, &attr, &idx, 1, s));
    if (order == 2) {
      CK(cuEventRecord(ev, s));
      CK(cuStreamWaitEvent(CU_STREAM_LEGACY, ev, 0));
    } else if (order == 3) {
      CK(cuEventRecord(ev, s));
      CUresult q = cuEventQuery(ev);
      printf("batch query right after the batch: %d\n", (int)q);
      if (q != CUDA_SUCCESS) CK(cuStreamWaitEvent(CU_STREAM_LEGACY, ev, 0));
    } else {
      CK(cuStreamSynchronize(s));
    }
    for (size_t i = 0; i < n; i++) {
      std::vector<unsigned> back(lens[i]);
      CK(cuMemcpyDtoH(back.data(), dst[i], sizes[i]));
      size_t bad = 0;
      for (size_t k = 0; k < lens[i]; k++) bad += back[k] != host[i][k];
      printf("batch order=%s copy %zu of %zu elements: %zu differ\n",
             order == 0 ? "stream" : order == 1 ? "during_call" : order == 2 ? "stream+event_wait" : "stream+query", i, lens[i], bad);
    }
  }
  return 0;
}
