// Shared helpers of the conformance programs: each prints one line per step, with the runtime's
// error name, and data checks as ok / MISMATCH. No addresses, times or device names: the output
// must be the same on NVIDIA's libcudart and on ours.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define STEP(call)                                                              \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    printf("%-48s %s\n", #call, cudaGetErrorName(e_));                          \
  } while (0)

#define LAST(what) printf("%-48s %s\n", "last error after " what, cudaGetErrorName(cudaGetLastError()))

static int mismatches = 0;
static void check(const char* what, bool ok) {
  printf("%-48s %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) mismatches++;
}

// A fixed pseudo-random sequence (the same on every run and library).
static unsigned rng_state = 12345u;
static unsigned rnd() { rng_state = rng_state * 1664525u + 1013904223u; return rng_state >> 8; }
