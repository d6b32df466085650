// Mipmapped arrays, graph memory nodes and attributes, instantiation with parameters, capture
// into an existing graph, conditional handles, default pools and pool access, kernel parameter
// info and per-device attributes, asynchronous notifications, driver logs, batched copies and
// prefetches: values and error names, compared between NVIDIA's library and ours.
#include <cstring>
#include <vector>
#include "common.h"

__global__ void fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + i * 3;
}

static void notified(cudaAsyncNotificationInfo_t*, void*, cudaAsyncCallbackHandle_t) {}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  cudaStream_t s;
  STEP(cudaStreamCreate(&s));

  // Mipmapped arrays.
  cudaMipmappedArray_t mm;
  cudaChannelFormatDesc f1 = cudaCreateChannelDesc<float>();
  STEP(cudaMallocMipmappedArray(&mm, &f1, make_cudaExtent(64, 32, 0), 4, 0));
  for (unsigned l = 0; l < 5; l++) {
    cudaArray_t lv = nullptr;
    cudaError_t e = cudaGetMipmappedArrayLevel(&lv, mm, l);
    cudaExtent ext = {};
    if (e == cudaSuccess) cudaArrayGetInfo(nullptr, &ext, nullptr, lv);
    printf("level %u: %s %zu x %zu\n", l, cudaGetErrorName(e), ext.width, ext.height);
  }
  cudaGetLastError();
  STEP(cudaMallocMipmappedArray(&mm, &f1, make_cudaExtent(64, 32, 0), 0, 0));
  STEP(cudaGetLastError());
  STEP(cudaFreeMipmappedArray(mm));
  STEP(cudaFreeMipmappedArray(nullptr));

  // Graph memory: allocate in the graph, fill, copy out, free in the graph.
  const int N = 1000;
  int* out;
  STEP(cudaMalloc(&out, N * 4));
  cudaGraph_t g;
  STEP(cudaGraphCreate(&g, 0));
  cudaMemAllocNodeParams ap = {};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = N * 4;
  cudaGraphNode_t an, kn, cn, fn;
  STEP(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &ap));
  check("allocation node gave an address", ap.dptr != nullptr);
  cudaKernelNodeParams kp = {};
  int n = N, base = 17;
  void* args[] = {&ap.dptr, &n, &base};
  kp.func = (void*)fill;
  kp.gridDim = dim3((N + 255) / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  STEP(cudaGraphAddKernelNode(&kn, g, &an, 1, &kp));
  STEP(cudaGraphAddMemcpyNode1D(&cn, g, &kn, 1, out, ap.dptr, N * 4, cudaMemcpyDeviceToDevice));
  STEP(cudaGraphAddMemFreeNode(&fn, g, &cn, 1, ap.dptr));
  cudaMemAllocNodeParams back = {};
  STEP(cudaGraphMemAllocNodeGetParams(an, &back));
  check("allocation node params", back.bytesize == N * 4 && back.dptr == ap.dptr);
  void* freed = nullptr;
  STEP(cudaGraphMemFreeNodeGetParams(fn, &freed));
  check("free node address", freed == ap.dptr);
  cudaGraphExec_t e;
  cudaGraphInstantiateParams ip = {};
  ip.flags = cudaGraphInstantiateFlagUpload;
  ip.uploadStream = s;
  STEP(cudaGraphInstantiateWithParams(&e, g, &ip));
  printf("instantiate result %d\n", (int)ip.result_out);
  STEP(cudaGraphLaunch(e, s));
  STEP(cudaStreamSynchronize(s));
  std::vector<int> h(N);
  STEP(cudaMemcpy(h.data(), out, N * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N; i++) ok &= h[i] == 17 + 3 * i;
  check("graph-allocated memory filled and copied", ok);
  unsigned long long used = 0;
  STEP(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &used));
  printf("used high nonzero %d\n", used > 0);
  unsigned long long zero = 0;
  STEP(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
  STEP(cudaDeviceGetGraphMemAttribute(0, (cudaGraphMemAttributeType)9, &used));
  STEP(cudaGetLastError());
  STEP(cudaGraphExecDestroy(e));
  STEP(cudaGraphDestroy(g));
  STEP(cudaDeviceGraphMemTrim(0));

  // Capture into an existing graph after a node, then a conditional handle.
  cudaGraph_t g2;
  STEP(cudaGraphCreate(&g2, 0));
  cudaGraphNode_t first;
  STEP(cudaGraphAddEmptyNode(&first, g2, nullptr, 0));
  STEP(cudaStreamBeginCaptureToGraph(s, g2, &first, nullptr, 1, cudaStreamCaptureModeGlobal));
  base = 5;
  fill<<<(N + 255) / 256, 256, 0, s>>>(out, N, base);
  cudaGraph_t g3 = nullptr;
  STEP(cudaStreamEndCapture(s, &g3));
  check("capture returned the same graph", g3 == g2);
  size_t count = 0;
  STEP(cudaGraphGetNodes(g2, nullptr, &count));
  printf("nodes after capture %zu\n", count);
  cudaGraphConditionalHandle ch;
  STEP(cudaGraphConditionalHandleCreate(&ch, g2, 1, cudaGraphCondAssignDefault));
  STEP(cudaGraphInstantiate(&e, g2, 0));
  STEP(cudaGraphLaunch(e, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(h.data(), out, N * 4, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < N; i++) ok &= h[i] == 5 + 3 * i;
  check("captured kernel ran after the existing node", ok);
  STEP(cudaGraphExecDestroy(e));
  STEP(cudaGraphDestroy(g2));

  // Pools.
  cudaMemPool_t pool, pool2;
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  STEP(cudaMemGetDefaultMemPool(&pool, &loc, cudaMemAllocationTypePinned));
  STEP(cudaDeviceGetDefaultMemPool(&pool2, 0));
  check("default pools agree", pool == pool2);
  STEP(cudaMemGetMemPool(&pool2, &loc, cudaMemAllocationTypePinned));
  check("current pool is the default", pool == pool2);
  STEP(cudaMemGetDefaultMemPool(&pool, &loc, (cudaMemAllocationType)7));
  STEP(cudaGetLastError());
  cudaMemAccessFlags af;
  STEP(cudaMemPoolGetAccess(&af, pool, &loc));
  printf("own device access %d\n", (int)af);

  // Kernels: parameter info and per-device attributes.
  size_t off = 99, size = 99;
  STEP(cudaFuncGetParamInfo((void*)fill, 2, &off, &size));
  printf("param 2 at %zu, %zu bytes\n", off, size);
  STEP(cudaFuncGetParamInfo((void*)fill, 3, &off, &size));
  STEP(cudaGetLastError());
  cudaKernel_t k;
  STEP(cudaGetKernel(&k, fill));
  STEP(cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024, 0));
  STEP(cudaKernelSetAttributeForDevice(k, (cudaFuncAttribute)2, 1, 0));
  STEP(cudaGetLastError());

  // Notifications and logs.
  cudaAsyncCallbackHandle_t cb;
  STEP(cudaDeviceRegisterAsyncNotification(0, notified, nullptr, &cb));
  STEP(cudaDeviceUnregisterAsyncNotification(0, cb));
  cudaLogIterator it;
  STEP(cudaLogsCurrent(&it, 0));
  char logbuf[4096];
  size_t logsize = sizeof logbuf;
  STEP(cudaLogsDumpToMemory(&it, logbuf, &logsize, 0));

  // Graphics resources without a graphics API: the refusals.
  STEP(cudaGraphicsUnregisterResource(nullptr));
  STEP(cudaGetLastError());
  STEP(cudaGraphicsMapResources(0, nullptr, 0));
  STEP(cudaGraphicsResourceSetMapFlags(nullptr, 5));
  STEP(cudaGetLastError());
  void* gp = nullptr;
  STEP(cudaGraphicsResourceGetMappedPointer(&gp, nullptr, nullptr));
  STEP(cudaGetLastError());

  // Batched copies and prefetches.
  int *d1, *d2;
  STEP(cudaMalloc(&d1, 4096));
  STEP(cudaMalloc(&d2, 4096));
  std::vector<int> a(1024), b(1024), c(1024, 0), d(1024, 0);
  for (auto& v : a) v = (int)rnd();
  for (auto& v : b) v = (int)rnd();
  void* dsts[2] = {d1, d2};
  const void* srcs[2] = {a.data(), b.data()};
  size_t sizes[2] = {4096, 4096};
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.srcLocHint.type = cudaMemLocationTypeHost;
  attr.dstLocHint.type = cudaMemLocationTypeDevice;
  size_t idx = 0;
  STEP(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemcpy(c.data(), d1, 4096, cudaMemcpyDeviceToHost));
  STEP(cudaMemcpy(d.data(), d2, 4096, cudaMemcpyDeviceToHost));
  check("batched copies", c == a && d == b);
  int* m;
  STEP(cudaMallocManaged(&m, 1 << 16));
  void* pf[1] = {m};
  size_t pfs[1] = {1 << 16};
  cudaMemLocation to = {cudaMemLocationTypeDevice, 0};
  size_t li = 0;
  STEP(cudaMemPrefetchBatchAsync(pf, pfs, 1, &to, &li, 1, 0, s));
  STEP(cudaStreamSynchronize(s));
  int last = -5;
  STEP(cudaMemRangeGetAttribute(&last, sizeof last, cudaMemRangeAttributeLastPrefetchLocation, m, 1 << 16));
  printf("last prefetch location %d\n", last);

  STEP(cudaFree(m));
  STEP(cudaFree(d1));
  STEP(cudaFree(d2));
  STEP(cudaFree(out));
  STEP(cudaStreamDestroy(s));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
