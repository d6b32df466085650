// Devices and errors: count, current device, attributes, invalid devices, error names.
#include <cstring>
#include "common.h"
int main() {
  setvbuf(stdout, NULL, _IONBF, 0);
  int n = -1;
  STEP(cudaGetDeviceCount(&n));
  if (n <= 0) { printf("no device\n"); return 0; }
  int d = -1;
  STEP(cudaGetDevice(&d));
  printf("current device %d\n", d);
  STEP(cudaSetDevice(n));
  LAST("cudaSetDevice(count)");
  STEP(cudaSetDevice(-1));
  STEP(cudaSetDevice(0));
  int major = -1, minor = -1, sms = -1, warp = -1;
  STEP(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  STEP(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  STEP(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  STEP(cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 0));
  printf("cc %d.%d warp %d sms>0 %d\n", major, minor, warp, sms > 0);
  int v = -1;
  STEP(cudaDeviceGetAttribute(&v, (cudaDeviceAttr)100000, 0));
  STEP(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, n));
  STEP(cudaDeviceGetAttribute(nullptr, cudaDevAttrWarpSize, 0));
  cudaDeviceProp prop;
  memset(&prop, 0x5c, sizeof(prop));
  STEP(cudaGetDeviceProperties(&prop, 0));
  printf("name %s, cc %d.%d, %d SMs, %zu MiB\n", prop.name, prop.major, prop.minor,
         prop.multiProcessorCount, prop.totalGlobalMem >> 20);
  // Every byte of the struct, so that a field that differs shows with its offset.
  const unsigned char* pb = (const unsigned char*)&prop;
  for (size_t o = 0; o < sizeof(prop); o += 32) {
    printf("prop+%04zx", o);
    for (size_t i = o; i < o + 32 && i < sizeof(prop); i++) printf(" %02x", pb[i]);
    printf("\n");
  }
  STEP(cudaGetDeviceProperties(&prop, n));
  STEP(cudaGetDeviceProperties(nullptr, 0));
  int rt = 0;
  STEP(cudaRuntimeGetVersion(&rt));
  printf("runtime version %d\n", rt);
  size_t fr = 0, tot = 0;
  STEP(cudaMemGetInfo(&fr, &tot));
  check("free <= total", fr <= tot && tot > 0);
  for (int c : {0, 1, 2, 9, 35, 98, 200, 201, 400, 600, 700, 719, 801, 999, 12345})
    printf("%5d %s / %s\n", c, cudaGetErrorName((cudaError_t)c), cudaGetErrorString((cudaError_t)c));
  STEP(cudaDeviceSynchronize());
  STEP(cudaGetLastError());
  return mismatches ? 1 : 0;
}
