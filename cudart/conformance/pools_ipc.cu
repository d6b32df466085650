// Stream-ordered pools and IPC: a created pool's attributes, allocations from it and from the
// device's default pool, trimming; and memory and an event shared with a second process (forked
// before either touches CUDA) through IPC handles sent over a pipe.
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include "common.h"

__global__ void fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base * 7 + i;
}

static int child(int rd, int wr) {
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  if (read(rd, &mh, sizeof mh) != sizeof mh || read(rd, &eh, sizeof eh) != sizeof eh) return 2;
  int* p = nullptr;
  cudaError_t e1 = cudaIpcOpenMemHandle((void**)&p, mh, cudaIpcMemLazyEnablePeerAccess);
  cudaEvent_t ev;
  cudaError_t e2 = cudaIpcOpenEventHandle(&ev, eh);
  cudaError_t e3 = cudaStreamWaitEvent(0, ev, 0);
  std::vector<int> h(4096);
  cudaError_t e4 = cudaMemcpy(h.data(), p, 4096 * 4, cudaMemcpyDeviceToHost);
  int ok = e1 == 0 && e2 == 0 && e3 == 0 && e4 == 0;
  for (int i = 0; i < 4096 && ok; i++) ok = h[i] == 3 * 7 + i;
  cudaError_t e5 = cudaIpcCloseMemHandle(p);
  char msg[256];
  int n = snprintf(msg, sizeof msg, "child: open %s, event %s, wait %s, copy %s, close %s, data %s\n",
                   cudaGetErrorName(e1), cudaGetErrorName(e2), cudaGetErrorName(e3),
                   cudaGetErrorName(e4), cudaGetErrorName(e5), ok ? "ok" : "MISMATCH");
  if (write(wr, msg, n) != n) return 3;
  return ok ? 0 : 1;
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int to_child[2], from_child[2];
  if (pipe(to_child) || pipe(from_child)) return 9;
  pid_t pid = fork();
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return 0;
    _exit(child(to_child[0], from_child[1]));
  }
  close(to_child[0]);
  close(from_child[1]);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("no device\n");
    close(to_child[1]);
    waitpid(pid, nullptr, 0);
    return 0;
  }
  cudaStream_t s;
  STEP(cudaStreamCreate(&s));
  // A created pool.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  STEP(cudaMemPoolCreate(&pool, &props));
  unsigned long long thr = 1 << 20;
  STEP(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
  unsigned long long back = 0;
  STEP(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &back));
  check("release threshold reads back", back == thr);
  int reuse = -1;
  STEP(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &reuse));
  printf("reuse follows events %d\n", reuse);
  int* a = nullptr;
  STEP(cudaMallocFromPoolAsync((void**)&a, 4096 * 4, pool, s));
  fill<<<16, 256, 0, s>>>(a, 4096, 5);
  std::vector<int> h(4096);
  STEP(cudaMemcpyAsync(h.data(), a, 4096 * 4, cudaMemcpyDeviceToHost, s));
  STEP(cudaStreamSynchronize(s));
  bool ok = true;
  for (int i = 0; i < 4096; i++) ok &= h[i] == 35 + i;
  check("allocation from a created pool", ok);
  unsigned long long used = 0;
  STEP(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  check("used memory counted", used >= 4096 * 4);
  STEP(cudaFreeAsync(a, s));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemPoolTrimTo(pool, 0));
  STEP(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  printf("used after free %llu\n", used);
  STEP(cudaMemPoolGetAttribute(pool, (cudaMemPoolAttr)77, &used));
  STEP(cudaGetLastError());
  cudaMemPool_t def, cur;
  STEP(cudaDeviceGetDefaultMemPool(&def, 0));
  STEP(cudaDeviceGetMemPool(&cur, 0));
  check("current pool is the default", def == cur);
  STEP(cudaDeviceSetMemPool(0, pool));
  STEP(cudaMallocAsync((void**)&a, 1024, s));
  STEP(cudaFreeAsync(a, s));
  STEP(cudaDeviceSetMemPool(0, def));
  STEP(cudaStreamSynchronize(s));
  STEP(cudaMemPoolDestroy(pool));

  // IPC with the child process.
  int* shared = nullptr;
  STEP(cudaMalloc(&shared, 4096 * 4));
  fill<<<16, 256>>>(shared, 4096, 3);
  cudaEvent_t ev;
  STEP(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess));
  STEP(cudaEventRecord(ev, 0));
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  STEP(cudaIpcGetMemHandle(&mh, shared));
  STEP(cudaIpcGetEventHandle(&eh, ev));
  cudaEvent_t plain;
  STEP(cudaEventCreate(&plain));
  STEP(cudaIpcGetEventHandle(&eh, plain));
  STEP(cudaGetLastError());
  STEP(cudaIpcGetEventHandle(&eh, ev));
  if (write(to_child[1], &mh, sizeof mh) != sizeof mh || write(to_child[1], &eh, sizeof eh) != sizeof eh) return 8;
  char buf[512] = {0};
  ssize_t got = read(from_child[0], buf, sizeof buf - 1);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("%s", got > 0 ? buf : "child said nothing\n");
  check("child exited cleanly", WIFEXITED(status) && WEXITSTATUS(status) == 0);
  STEP(cudaEventDestroy(ev));
  STEP(cudaEventDestroy(plain));
  STEP(cudaFree(shared));
  STEP(cudaStreamDestroy(s));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
