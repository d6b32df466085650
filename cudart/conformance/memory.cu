// Memory: device, page-locked, managed and stream-ordered allocations; copies and memsets in
// every direction, checked against the host; invalid arguments.
#include <vector>
#include "common.h"
int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { printf("no device\n"); return 0; }
  const size_t N = 1 << 20;
  std::vector<unsigned> h(N), back(N);
  for (auto& x : h) x = rnd();
  unsigned *d = nullptr, *d2 = nullptr;
  STEP(cudaMalloc(&d, N * 4));
  STEP(cudaMalloc(&d2, N * 4));
  STEP(cudaMemcpy(d, h.data(), N * 4, cudaMemcpyHostToDevice));
  STEP(cudaMemcpy(d2, d, N * 4, cudaMemcpyDeviceToDevice));
  STEP(cudaMemcpy(back.data(), d2, N * 4, cudaMemcpyDefault));
  check("round trip H2D, D2D, D2H", back == h);
  STEP(cudaMemset(d2, 0xab, N * 4));
  STEP(cudaMemcpy(back.data(), d2, N * 4, cudaMemcpyDeviceToHost));
  bool all = true;
  for (auto x : back) all &= x == 0xabababab;
  check("memset bytes", all);
  STEP(cudaMemcpy(back.data(), d2, 16, (cudaMemcpyKind)7));
  LAST("bad copy kind");
  void* z = (void*)1;
  STEP(cudaMalloc(&z, 0));
  check("cudaMalloc(0) gives null", z == nullptr);
  STEP(cudaFree(nullptr));
  STEP(cudaMalloc(nullptr, 16));
  LAST("cudaMalloc(nullptr)");
  // Page-locked, async copies on a stream.
  unsigned* p = nullptr;
  STEP(cudaMallocHost(&p, N * 4));
  cudaStream_t s;
  STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  STEP(cudaMemcpyAsync(d, h.data(), N * 4, cudaMemcpyHostToDevice, s));
  STEP(cudaMemsetAsync(d2, 0, N * 4, s));
  STEP(cudaMemcpyAsync(d2, d, N * 4, cudaMemcpyDeviceToDevice, s));
  STEP(cudaMemcpyAsync(p, d2, N * 4, cudaMemcpyDeviceToHost, s));
  STEP(cudaStreamSynchronize(s));
  bool same = true;
  for (size_t i = 0; i < N; i++) same &= p[i] == h[i];
  check("page-locked async round trip", same);
  STEP(cudaFreeHost(p));
  unsigned* q = nullptr;
  STEP(cudaHostAlloc(&q, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
  STEP(cudaFreeHost(q));
  STEP(cudaHostAlloc(&q, 4096, 0x100));
  // Managed memory, touched by the host and copied by the device.
  unsigned* m = nullptr;
  STEP(cudaMallocManaged(&m, N * 4, cudaMemAttachGlobal));
  for (size_t i = 0; i < N; i++) m[i] = h[i] ^ 0x5a5a5a5a;
  STEP(cudaMemcpy(d, m, N * 4, cudaMemcpyDefault));
  STEP(cudaMemcpy(back.data(), d, N * 4, cudaMemcpyDeviceToHost));
  same = true;
  for (size_t i = 0; i < N; i++) same &= back[i] == (h[i] ^ 0x5a5a5a5a);
  check("managed memory copied by the device", same);
  STEP(cudaFree(m));
  // Stream-ordered.
  unsigned* a = nullptr;
  STEP(cudaMallocAsync(&a, N * 4, s));
  STEP(cudaMemcpyAsync(a, h.data(), N * 4, cudaMemcpyHostToDevice, s));
  STEP(cudaMemcpyAsync(back.data(), a, N * 4, cudaMemcpyDeviceToHost, s));
  STEP(cudaFreeAsync(a, s));
  STEP(cudaStreamSynchronize(s));
  check("stream-ordered round trip", back == h);
  // Pointer attributes of each kind of memory.
  unsigned* hp = nullptr;
  STEP(cudaMallocHost(&hp, 4096));
  unsigned* mm = nullptr;
  STEP(cudaMallocManaged(&mm, 4096, cudaMemAttachGlobal));
  std::vector<unsigned> pageable(16);
  const void* ptrs[] = {d, hp, mm, pageable.data()};
  for (const void* q : ptrs) {
    cudaPointerAttributes pa;
    STEP(cudaPointerGetAttributes(&pa, q));
    printf("type %d device %d devptr-is-ptr %d hostptr-is-ptr %d\n", (int)pa.type, pa.device,
           pa.devicePointer == q, pa.hostPointer == q);
  }
  STEP(cudaFreeHost(hp));
  STEP(cudaFree(mm));
  // The default pool: release threshold, allocation from it.
  cudaMemPool_t pool;
  STEP(cudaDeviceGetDefaultMemPool(&pool, 0));
  unsigned long long thr = 1 << 20, thr2 = 0;
  STEP(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
  STEP(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr2));
  check("release threshold read back", thr2 == thr);
  unsigned* fp = nullptr;
  STEP(cudaMallocFromPoolAsync((void**)&fp, N * 4, pool, s));
  STEP(cudaMemcpyAsync(fp, h.data(), N * 4, cudaMemcpyHostToDevice, s));
  STEP(cudaMemcpyAsync(back.data(), fp, N * 4, cudaMemcpyDeviceToHost, s));
  STEP(cudaFreeAsync(fp, s));
  STEP(cudaStreamSynchronize(s));
  check("pool allocation round trip", back == h);
  STEP(cudaMemPoolTrimTo(pool, 0));
  STEP(cudaMemPoolSetAttribute(pool, (cudaMemPoolAttr)99, &thr));
  STEP(cudaStreamDestroy(s));
  STEP(cudaFree(d));
  STEP(cudaFree(d2));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
