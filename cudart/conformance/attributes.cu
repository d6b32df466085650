// Stream and kernel-node attributes, device choice, peer attributes, shared-memory bank
// configuration, driver entry points, graph edge queries, memset-node parameters and managed
// range attributes: values and error names, compared between NVIDIA's library and ours.
#include <cstring>
#include <vector>
#include "common.h"

__global__ void bump(int* p) { p[threadIdx.x] += 1; }

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("no device\n"); return 0; }
  cudaStream_t s;
  STEP(cudaStreamCreate(&s));
  cudaStreamAttrValue v;
  memset(&v, 0, sizeof v);
  STEP(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &v));
  printf("priority %d\n", v.priority);
  int lo, hi;
  STEP(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  v.priority = hi;
  STEP(cudaStreamSetAttribute(s, cudaStreamAttributePriority, &v));
  memset(&v, 0, sizeof v);
  STEP(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &v));
  check("priority reads back", v.priority == hi);
  int* buf;
  STEP(cudaMalloc(&buf, 1 << 20));
  memset(&v, 0, sizeof v);
  v.accessPolicyWindow.base_ptr = buf;
  v.accessPolicyWindow.num_bytes = 1 << 20;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  STEP(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
  memset(&v, 0, sizeof v);
  STEP(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
  check("window reads back", v.accessPolicyWindow.base_ptr == buf &&
                                 v.accessPolicyWindow.num_bytes == (1 << 20) &&
                                 v.accessPolicyWindow.hitProp == cudaAccessPropertyPersisting);
  cudaStream_t t;
  STEP(cudaStreamCreate(&t));
  STEP(cudaStreamCopyAttributes(t, s));
  memset(&v, 0, sizeof v);
  STEP(cudaStreamGetAttribute(t, cudaStreamAttributeAccessPolicyWindow, &v));
  check("copied window", v.accessPolicyWindow.base_ptr == buf);
  STEP(cudaStreamGetAttribute(s, (cudaStreamAttrID)15, &v));
  STEP(cudaGetLastError());
  // (A null value pointer crashes libcudart 13.0: not asked.)
  STEP(cudaGetLastError());

  // Device choice and peer attributes.
  cudaDeviceProp want;
  memset(&want, 0, sizeof want);
  want.major = 1;
  int chosen = -1;
  STEP(cudaChooseDevice(&chosen, &want));
  printf("chosen %d\n", chosen);
  STEP(cudaChooseDevice(&chosen, nullptr));
  STEP(cudaGetLastError());
  int pv = -7;
  STEP(cudaDeviceGetP2PAttribute(&pv, cudaDevP2PAttrAccessSupported, 0, 0));
  STEP(cudaGetLastError());
  STEP(cudaDeviceGetP2PAttribute(&pv, cudaDevP2PAttrAccessSupported, 0, ndev));
  STEP(cudaGetLastError());
  if (ndev > 1) {
    STEP(cudaDeviceGetP2PAttribute(&pv, cudaDevP2PAttrAccessSupported, 0, 1));
    printf("p2p access supported read\n");
  }
  int valid[1] = {0};
  STEP(cudaSetValidDevices(valid, 1));
  int bad[1] = {ndev + 3};
  STEP(cudaSetValidDevices(bad, 1));
  STEP(cudaGetLastError());

  // Deprecated shared-memory bank configuration.
#pragma nv_diag_suppress 1444
  cudaSharedMemConfig cfg;
  STEP(cudaDeviceGetSharedMemConfig(&cfg));
  printf("bank config %d\n", (int)cfg);
  STEP(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte));
  STEP(cudaDeviceSetSharedMemConfig((cudaSharedMemConfig)9));
  STEP(cudaGetLastError());
  STEP(cudaFuncSetSharedMemConfig(bump, cudaSharedMemBankSizeDefault));

  size_t w = 0;
  cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>();
  STEP(cudaDeviceGetTexture1DLinearMaxWidth(&w, &f4, 0));
  printf("1-D linear max width nonzero %d\n", w > 0);

  // Driver entry points.
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  STEP(cudaGetDriverEntryPoint("cuDeviceGetCount", &fn, cudaEnableDefault, &q));
  int n2 = -1;
  if (fn) ((int (*)(int*))fn)(&n2);
  check("driver entry point works", n2 == ndev && q == cudaDriverEntryPointSuccess);
  STEP(cudaGetDriverEntryPoint("cuNoSuchFunction", &fn, cudaEnableDefault, &q));
  printf("missing symbol status %d\n", (int)q);
  STEP(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &q));
  printf("by version status %d found %d\n", (int)q, fn != nullptr);

  // Graph edges and memset-node parameters.
  cudaGraph_t g;
  STEP(cudaGraphCreate(&g, 0));
  cudaMemsetParams mp = {};
  mp.dst = buf;
  mp.value = 0x01020304;
  mp.elementSize = 4;
  mp.width = 64;
  mp.height = 1;
  cudaGraphNode_t a, b, c;
  STEP(cudaGraphAddMemsetNode(&a, g, nullptr, 0, &mp));
  cudaKernelNodeParams kp = {};
  void* args[] = {&buf};
  kp.func = (void*)bump;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(64);
  kp.kernelParams = args;
  STEP(cudaGraphAddKernelNode(&b, g, &a, 1, &kp));
  STEP(cudaGraphAddEmptyNode(&c, g, &a, 1));
  size_t ne = 0;
  STEP(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
  printf("edges %zu\n", ne);
  std::vector<cudaGraphNode_t> from(ne), to(ne);
  STEP(cudaGraphGetEdges(g, from.data(), to.data(), nullptr, &ne));
  bool ok = ne == 2;
  for (size_t i = 0; i < ne; i++) ok &= from[i] == a && (to[i] == b || to[i] == c);
  check("edges name the nodes", ok);
  size_t nd = 0;
  STEP(cudaGraphNodeGetDependentNodes(a, nullptr, nullptr, &nd));
  printf("dependents of the memset %zu\n", nd);
  STEP(cudaGraphNodeGetDependencies(b, nullptr, nullptr, &nd));
  printf("dependencies of the kernel %zu\n", nd);
  STEP(cudaGraphRemoveDependencies(g, &a, &c, nullptr, 1));
  STEP(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
  printf("edges after removal %zu\n", ne);
  cudaMemsetParams back;
  STEP(cudaGraphMemsetNodeGetParams(a, &back));
  check("memset params read back", back.dst == buf && back.value == 0x01020304 &&
                                       back.elementSize == 4 && back.width == 64);
  mp.value = 7;
  STEP(cudaGraphMemsetNodeSetParams(a, &mp));
  cudaGraphExec_t e;
  STEP(cudaGraphInstantiate(&e, g, 0));
  STEP(cudaGraphLaunch(e, s));
  STEP(cudaStreamSynchronize(s));
  std::vector<int> host(64);
  STEP(cudaMemcpy(host.data(), buf, 256, cudaMemcpyDeviceToHost));
  ok = true;
  for (int x : host) ok &= x == 8;
  check("updated memset then kernel", ok);
  cudaLaunchAttributeValue kv;
  memset(&kv, 0, sizeof kv);
  STEP(cudaGraphKernelNodeGetAttribute(b, cudaLaunchAttributePriority, &kv));
  printf("kernel node priority %d\n", kv.priority);

  // Managed range attributes.
  int* m;
  STEP(cudaMallocManaged(&m, 1 << 16));
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  STEP(cudaMemAdvise(m, 1 << 16, cudaMemAdviseSetReadMostly, loc));
  int rm = -1;
  STEP(cudaMemRangeGetAttribute(&rm, sizeof rm, cudaMemRangeAttributeReadMostly, m, 1 << 16));
  printf("read mostly %d\n", rm);
  STEP(cudaMemAdvise(m, 1 << 16, cudaMemAdviseSetPreferredLocation, loc));
  int pl = -9, lp = -9;
  void* data[2] = {&pl, &lp};
  size_t sizes[2] = {sizeof pl, sizeof lp};
  cudaMemRangeAttribute attrs[2] = {cudaMemRangeAttributePreferredLocation,
                                    cudaMemRangeAttributeLastPrefetchLocation};
  STEP(cudaMemRangeGetAttributes(data, sizes, attrs, 2, m, 1 << 16));
  printf("preferred %d last prefetch %d\n", pl, lp);
  STEP(cudaMemRangeGetAttribute(&rm, sizeof rm, (cudaMemRangeAttribute)42, m, 1 << 16));
  STEP(cudaGetLastError());

  STEP(cudaGraphExecDestroy(e));
  STEP(cudaGraphDestroy(g));
  STEP(cudaFree(m));
  STEP(cudaFree(buf));
  STEP(cudaStreamDestroy(s));
  STEP(cudaStreamDestroy(t));
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
