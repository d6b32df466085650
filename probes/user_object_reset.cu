// Result (fifteenth session, H200, driver 580): a reset runs no destructor (0 0 0); the later
// cuUserObjectRelease, cuGraphDestroy and cuGraphExecDestroy succeed and run each destructor
// once: Seg::drop's release after a reset is the objects' only release, as it should be.
// Review rev-e15's question: does a device reset (cuDevicePrimaryCtxReset)
// end user objects? The crate's graph keep-alive segments (src/graph/keep.rs, `Seg::drop`)
// release their user-object references with cuUserObjectRelease without a context and without
// looking at the context's generation, so a graph or executable dropped after a reset releases
// objects made before it. If the reset destroyed them (their destructors ran, the handles are
// gone), that release is a use of a freed driver handle; if not, it is the only release they
// get. Prints, for an object held by a handle only, one retained by a graph, and one retained by
// an executable: whether its destructor ran at the reset, and what the later release returns.
//   nvcc -O2 -arch=sm_90 probes/user_object_reset.cu -lcuda -o /tmp/uor && /tmp/uor
#include <cstdio>
#include <unistd.h>
#include <atomic>
#include <cuda.h>
static std::atomic<int> ran[3];
static void CUDA_CB dtor(void* p) { ran[(long)p]++; }
#define R(x) do { CUresult r_ = (x); const char* n_ = 0; cuGetErrorName(r_, &n_); printf("%-64s -> %d %s\n", #x, (int)r_, n_ ? n_ : "?"); } while (0)
int main() {
  R(cuInit(0));
  CUdevice d; R(cuDeviceGet(&d, 0));
  CUcontext c; R(cuDevicePrimaryCtxRetain(&c, d)); R(cuCtxSetCurrent(c));
  CUuserObject o[3];
  for (long i = 0; i < 3; i++) R(cuUserObjectCreate(&o[i], (void*)i, dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUgraph g; R(cuGraphCreate(&g, 0));
  CUgraphNode n; R(cuGraphAddEmptyNode(&n, g, nullptr, 0));
  R(cuGraphRetainUserObject(g, o[1], 1, CU_GRAPH_USER_OBJECT_MOVE));
  CUgraph g2; R(cuGraphCreate(&g2, 0));
  CUgraphNode n2; R(cuGraphAddEmptyNode(&n2, g2, nullptr, 0));
  R(cuGraphRetainUserObject(g2, o[2], 1, CU_GRAPH_USER_OBJECT_MOVE));
  CUgraphExec e; R(cuGraphInstantiate(&e, g2, 0));
  R(cuGraphDestroy(g2));
  usleep(200000);
  printf("before reset: destructors ran %d %d %d\n", ran[0].load(), ran[1].load(), ran[2].load());
  R(cuDevicePrimaryCtxReset(d));
  usleep(500000);
  printf("after reset: destructors ran %d %d %d\n", ran[0].load(), ran[1].load(), ran[2].load());
  R(cuUserObjectRelease(o[0], 1));
  R(cuGraphDestroy(g));
  R(cuGraphExecDestroy(e));
  usleep(500000);
  printf("after the releases: destructors ran %d %d %d (1 1 1: each once)\n", ran[0].load(), ran[1].load(), ran[2].load());
  return 0;
}
