// Prints what libcudart's cudaGetErrorName and cudaGetErrorString return for every error number
// the runtime recognises in 0..=1000, one line each: number, TAB, name, TAB, string.
//
// The output is the reference `src/error/codes.rs` is checked against:
//
//   nvcc -o error_strings probes/error_strings.cu
//   ./error_strings > error_strings.tsv
//   CUDA_RUNTIME_ERROR_PROBE=error_strings.tsv cargo test --lib error_table_matches_probe
//
// Neither function needs a device or initialises the driver, so this runs on any machine with
// libcudart.
#include <cstdio>
#include <cstring>
#include <cuda_runtime_api.h>

int main() {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    std::fprintf(stderr, "libcudart %d\n", runtime);
    for (int n = 0; n <= 1000; ++n) {
        cudaError_t e = static_cast<cudaError_t>(n);
        const char *name = cudaGetErrorName(e);
        if (name == nullptr || std::strcmp(name, "unrecognized error code") == 0) {
            continue;
        }
        const char *desc = cudaGetErrorString(e);
        std::printf("%d\t%s\t%s\n", n, name, desc ? desc : "(null)");
    }
    return 0;
}
