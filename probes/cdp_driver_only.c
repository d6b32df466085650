/* Dynamic parallelism with the driver API only (docs/dynamic-parallelism.md): can the driver
 * link relocatable PTX that launches kernels without libcudadevrt.a, and do the image linked
 * with it at run time and the image linked ahead of time by the pinned PyPI nvcc (what the
 * crate would commit) load and run? Built and run by cdp_driver_only.sh on the GPU machine.
 * usage: probe RDC_PTX LIBCUDADEVRT_A LINKED_CUBIN. Prints `cdp <key> <value>` lines. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
  fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "short read %s\n", path); exit(2); }
  b[n] = 0; fclose(f); *len = (size_t)n; return b;
}

static const char *name(CUresult r) { const char *s = "?"; cuGetErrorName(r, &s); return s; }

/* Runs the parent on one block of 256 threads and checks the child's and the tail's results. */
static void run(CUmodule m, const char *how) {
  CUfunction parent;
  CUresult r = cuModuleGetFunction(&parent, m, "cdp_parent");
  if (r) { printf("cdp %s get_function %s\n", how, name(r)); return; }
  size_t n = 100000; unsigned seed = 2654435761u;
  CUdeviceptr in, out, sum;
  cuMemAlloc(&in, n * 4); cuMemAlloc(&out, n * 4); cuMemAlloc(&sum, 8);
  cuMemsetD32(out, 0xdeadbeef, n); cuMemsetD32(sum, 0, 2);
  void *args[] = {&in, &out, &n, &sum, &seed};
  r = cuLaunchKernel(parent, 1, 1, 1, 256, 1, 1, 0, 0, args, 0);
  CUresult s = cuCtxSynchronize();
  unsigned *h = malloc(n * 4); unsigned long long hs = 0;
  cuMemcpyDtoH(h, out, n * 4); cuMemcpyDtoH(&hs, sum, 8);
  size_t bad = 0; unsigned long long want = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned w = seed * (unsigned)i + 12345u + 1u;
    want += w;
    if (h[i] != w) ++bad;
  }
  printf("cdp %s launch %s sync %s child_mismatches %zu tail_sum %s\n", how, name(r), name(s), bad,
         hs == want ? "ok" : "wrong");
  free(h); cuMemFree(in); cuMemFree(out); cuMemFree(sum);
}

static CUresult jit_link(const char *ptx, size_t len, const char *lib, void **image, char *log) {
  CUjit_option o[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *v[] = {log, (void *)(size_t)8192};
  CUlinkState ls;
  CUresult r = cuLinkCreate(2, o, v, &ls);
  if (r) return r;
  r = cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)ptx, len + 1, "cdp.ptx", 0, 0, 0);
  if (!r && lib) r = cuLinkAddFile(ls, CU_JIT_INPUT_LIBRARY, lib, 0, 0, 0);
  size_t size = 0;
  if (!r) r = cuLinkComplete(ls, image, &size);
  if (!r) {
    /* The image belongs to the link state: keep a copy. */
    void *copy = malloc(size);
    for (size_t i = 0; i < size; ++i) ((char *)copy)[i] = ((char *)*image)[i];
    *image = copy;
  }
  cuLinkDestroy(ls);
  return r;
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s RDC_PTX LIBCUDADEVRT_A LINKED_CUBIN\n", argv[0]); return 2; }
  CUdevice d; CUcontext c; int drv = 0;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
    fprintf(stderr, "no device\n"); return 1;
  }
  cuDriverGetVersion(&drv);
  printf("cdp driver_version %d\n", drv);
  size_t len; char *ptx = slurp(argv[1], &len);
  static char log[8192];
  void *image = 0; CUmodule m;

  log[0] = 0;
  CUresult r = jit_link(ptx, len, NULL, &image, log);
  printf("cdp link_without_cudadevrt %s log: %s\n", name(r), log);
  if (!r && !cuModuleLoadData(&m, image)) run(m, "driver_only");

  log[0] = 0;
  r = jit_link(ptx, len, argv[2], &image, log);
  printf("cdp link_with_cudadevrt %s log: %s\n", name(r), log);
  if (!r) {
    r = cuModuleLoadData(&m, image);
    printf("cdp load_runtime_linked %s\n", name(r));
    if (!r) run(m, "runtime_linked");
  }

  size_t clen; char *cubin = slurp(argv[3], &clen);
  r = cuModuleLoadData(&m, cubin);
  printf("cdp load_prelinked_cubin %s (%zu bytes)\n", name(r), clen);
  if (!r) run(m, "prelinked");
  return 0;
}
