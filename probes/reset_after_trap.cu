// What the driver and libcudart do after a kernel traps and the device is reset: the `errors`
// conformance program differs there (seventh session, H200 pair, driver 580.159.04): after
// `cudaDeviceReset`, NVIDIA's library answers the next calls with cudaErrorDevicesUnavailable,
// ours with cudaErrorLaunchFailure. This records each step's code, through the driver alone
// (`driver`) and through libcudart (`runtime`), each in a fresh process. One line per step:
//
//   reset <way> <step> <code name>
//
// Build and run on the GPU machine (scripts/gpu-verify runs it with the `cudart` part):
//
//   nvcc -O2 -arch=sm_90 reset_after_trap.cu -lcuda -o /tmp/reset_after_trap && /tmp/reset_after_trap
#include <cstdio>
#include <cstring>
#include <spawn.h>
#include <sys/wait.h>
#include <cuda.h>
#include <cuda_runtime.h>

extern char **environ;

__global__ void trap_if(int *p, int when) {
    if (p[0] == when) __trap();
}

static void say_drv(const char *step, CUresult r) {
    const char *name = nullptr;
    cuGetErrorName(r, &name);
    printf("reset driver %s %s\n", step, name ? name : "?");
    fflush(stdout);
}

static void say_rt(const char *step, cudaError_t e) {
    printf("reset runtime %s %s\n", step, cudaGetErrorName(e));
    fflush(stdout);
}

// The driver alone: primary context, a trapping kernel (taken from the runtime's registration
// of this file, through cudaGetFuncBySymbol after the context exists), then the reset and what
// follows it.
static int driver_way() {
    CUdevice dev;
    CUcontext ctx;
    say_drv("init", cuInit(0));
    say_drv("device_get", cuDeviceGet(&dev, 0));
    say_drv("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    say_drv("set_current", cuCtxSetCurrent(ctx));
    cudaFunction_t fn;
    say_rt("get_func_by_symbol", cudaGetFuncBySymbol(&fn, (const void *)trap_if));
    CUdeviceptr d;
    say_drv("alloc", cuMemAlloc(&d, 16));
    int one = 1;
    say_drv("copy_in", cuMemcpyHtoD(d, &one, 4));
    int when = 1;
    void *args[] = {&d, &when};
    say_drv("launch_trap", cuLaunchKernel((CUfunction)fn, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
    say_drv("sync_after_trap", cuCtxSynchronize());
    say_drv("alloc_after_trap", cuMemAlloc(&d, 16));
    say_drv("primary_reset", cuDevicePrimaryCtxReset(dev));
    say_drv("release", cuDevicePrimaryCtxRelease(dev));
    unsigned flags;
    int active;
    say_drv("state_after_reset", cuDevicePrimaryCtxGetState(dev, &flags, &active));
    printf("reset driver active_after_reset %d\n", active);
    say_drv("retain_again", cuDevicePrimaryCtxRetain(&ctx, dev));
    say_drv("set_current_again", cuCtxSetCurrent(ctx));
    say_drv("alloc_again", cuMemAlloc(&d, 16));
    say_drv("sync_again", cuCtxSynchronize());
    // Once more, a second reset: does the device come back?
    say_drv("primary_reset_2", cuDevicePrimaryCtxReset(dev));
    say_drv("retain_3", cuDevicePrimaryCtxRetain(&ctx, dev));
    say_drv("set_current_3", cuCtxSetCurrent(ctx));
    say_drv("alloc_3", cuMemAlloc(&d, 16));
    return 0;
}

static int runtime_way() {
    int *d = nullptr;
    say_rt("malloc", cudaMalloc(&d, 16));
    int one = 1;
    say_rt("copy_in", cudaMemcpy(d, &one, 4, cudaMemcpyHostToDevice));
    trap_if<<<1, 1>>>(d, 1);
    say_rt("launch_trap", cudaGetLastError());
    say_rt("sync_after_trap", cudaDeviceSynchronize());
    say_rt("device_reset", cudaDeviceReset());
    say_rt("last_after_reset", cudaGetLastError());
    say_rt("malloc_after_reset", cudaMalloc(&d, 16));
    say_rt("last_after_malloc", cudaGetLastError());
    say_rt("sync_after_reset", cudaDeviceSynchronize());
    say_rt("device_reset_2", cudaDeviceReset());
    say_rt("malloc_after_reset_2", cudaMalloc(&d, 16));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        return strcmp(argv[1], "driver") == 0 ? driver_way() : runtime_way();
    }
    for (const char *way : {"driver", "runtime"}) {
        pid_t pid;
        char *child[] = {argv[0], (char *)way, nullptr};
        if (posix_spawn(&pid, argv[0], nullptr, nullptr, child, environ) != 0) {
            printf("reset %s spawn_failed\n", way);
            continue;
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) printf("reset %s crashed signal %d\n", way, WTERMSIG(status));
        fflush(stdout);
    }
    return 0;
}
