// Streams, events and host functions: flags and priorities, queries of busy and idle streams,
// cross-stream order through events, the legacy default stream's implicit order with blocking
// streams, the per-thread default stream, event flags, queries and timing errors, host functions
// and callbacks in stream order.
#include <atomic>
#include <thread>
#include <vector>
#include "common.h"

// Spins for about `ns` nanoseconds of GPU time, then writes `v` at p[i].
__global__ void spin_write(int* p, int i, int v, long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns) {}
  p[i] = v;
}

__global__ void copy_one(const int* p, int from, int* q, int to) { q[to] = p[from]; }

static std::vector<int> order;
static void CUDART_CB note(void* arg) { order.push_back((int)(size_t)arg); }
static void CUDART_CB callback(cudaStream_t, cudaError_t status, void* arg) {
  order.push_back(100 + (int)(size_t)arg + 1000 * (int)status);
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  long long busy = (long long)clock_khz * 200;  // about 200 ms of cycles
  int* d;
  STEP(cudaMalloc(&d, 64 * 4));
  STEP(cudaMemset(d, 0, 64 * 4));

  // Flags and priorities.
  cudaStream_t a, b, nb, pr;
  STEP(cudaStreamCreate(&a));
  STEP(cudaStreamCreate(&b));
  STEP(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  int lo, hi;
  STEP(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  STEP(cudaStreamCreateWithPriority(&pr, cudaStreamDefault, hi));
  unsigned f = 99;
  STEP(cudaStreamGetFlags(nb, &f));
  printf("non-blocking flags %u\n", f);
  STEP(cudaStreamGetFlags(a, &f));
  printf("default flags %u\n", f);
  int p = 99;
  STEP(cudaStreamGetPriority(pr, &p));
  check("priority reads back", p == hi);
  STEP(cudaStreamCreateWithFlags(&b, 0x10));
  STEP(cudaGetLastError());
  unsigned long long ida = 0, idb = 0;
  STEP(cudaStreamGetId(a, &ida));
  STEP(cudaStreamGetId(b, &idb));
  check("stream ids differ", ida != idb);

  // Query: busy, then idle.
  spin_write<<<1, 1, 0, a>>>(d, 0, 1, busy);
  STEP(cudaStreamQuery(a));
  STEP(cudaGetLastError());
  STEP(cudaStreamSynchronize(a));
  STEP(cudaStreamQuery(a));

  // Order across streams through an event: b copies what a wrote after a long spin.
  cudaEvent_t ev;
  STEP(cudaEventCreate(&ev));
  spin_write<<<1, 1, 0, a>>>(d, 2, 42, busy);
  STEP(cudaEventRecord(ev, a));
  STEP(cudaStreamWaitEvent(b, ev, 0));
  copy_one<<<1, 1, 0, b>>>(d, 2, d, 3);
  STEP(cudaStreamSynchronize(b));
  int h[64];
  STEP(cudaMemcpy(h, d, 64 * 4, cudaMemcpyDeviceToHost));
  check("event orders b after a", h[3] == 42);

  // The legacy default stream waits for blocking streams and they for it.
  spin_write<<<1, 1, 0, a>>>(d, 4, 17, busy);
  copy_one<<<1, 1>>>(d, 4, d, 5);  // legacy stream: after a's spin
  copy_one<<<1, 1, 0, b>>>(d, 5, d, 6);  // blocking b: after the legacy copy
  STEP(cudaDeviceSynchronize());
  STEP(cudaMemcpy(h, d, 64 * 4, cudaMemcpyDeviceToHost));
  check("legacy stream orders blocking streams", h[5] == 17 && h[6] == 17);

  // The per-thread default stream of another thread is its own.
  std::atomic<int> seen{0};
  std::thread t([&] {
    spin_write<<<1, 1, 0, cudaStreamPerThread>>>(d, 7, 5, busy / 4);
    cudaStreamSynchronize(cudaStreamPerThread);
    int v = 0;
    cudaMemcpy(&v, d + 7, 4, cudaMemcpyDeviceToHost);
    seen = v;
  });
  t.join();
  check("per-thread stream of a thread", seen == 5);
  STEP(cudaStreamQuery(cudaStreamPerThread));

  // Events: flags, queries, timing.
  cudaEvent_t e0, e1, nt;
  STEP(cudaEventCreate(&e0));
  STEP(cudaEventCreate(&e1));
  STEP(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
  STEP(cudaEventQuery(e0));  // never recorded: complete
  STEP(cudaEventRecord(e0, a));
  spin_write<<<1, 1, 0, a>>>(d, 8, 1, busy);
  STEP(cudaEventRecord(e1, a));
  STEP(cudaEventRecord(nt, a));
  STEP(cudaEventQuery(e1));
  STEP(cudaGetLastError());
  STEP(cudaEventSynchronize(e1));
  STEP(cudaEventQuery(e1));
  float ms = -1;
  STEP(cudaEventElapsedTime(&ms, e0, e1));
  check("elapsed time positive", ms > 1.0f);
  STEP(cudaEventElapsedTime(&ms, e0, nt));
  STEP(cudaGetLastError());
  cudaEvent_t never;
  STEP(cudaEventCreate(&never));
  STEP(cudaEventElapsedTime(&ms, e0, never));
  STEP(cudaGetLastError());
  STEP(cudaEventCreateWithFlags(&never, 0x40));
  STEP(cudaGetLastError());

  // Host functions and callbacks run in stream order, after the work before them.
  spin_write<<<1, 1, 0, a>>>(d, 9, 1, busy / 4);
  STEP(cudaLaunchHostFunc(a, note, (void*)1));
  STEP(cudaStreamAddCallback(a, callback, (void*)2, 0));
  STEP(cudaLaunchHostFunc(a, note, (void*)3));
  STEP(cudaStreamAddCallback(a, callback, (void*)4, 1));
  STEP(cudaGetLastError());
  STEP(cudaStreamSynchronize(a));
  printf("host order:");
  for (int x : order) printf(" %d", x);
  printf("\n");

  STEP(cudaEventDestroy(e0));
  STEP(cudaEventDestroy(e1));
  STEP(cudaEventDestroy(nt));
  STEP(cudaEventDestroy(ev));
  STEP(cudaEventDestroy(never));
  for (cudaStream_t s : {a, b, nb, pr}) STEP(cudaStreamDestroy(s));
  STEP(cudaFree(d));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
