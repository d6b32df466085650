// Records what libcudart (CUDA 13.0) does in the corner cases of device management, so that the
// crate can be checked against it. Each answer is one line:
//
//   semantics <key> <value or error name>
//
// Build and run on the GPU machine:
//
//   nvcc -O2 -arch=sm_90 device_semantics.cu -o device_semantics && ./device_semantics
//
// Each scenario runs in a fresh process (this program re-executes itself with the scenario's
// name), because several depend on the runtime not being initialised yet, and a use of a handle
// after cudaDeviceReset may crash the process: a crash is reported as
// `semantics <scenario>.crashed signal <n>` and the other scenarios still run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>

extern char **environ;

static void say(const char *key, const char *value) {
    printf("semantics %s %s\n", key, value);
    fflush(stdout);
}

static void say_err(const char *key, cudaError_t e) { say(key, cudaGetErrorName(e)); }

static void say_int(const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    say(key, buf);
}

// The value when the call succeeded, else the error's name.
static void say_result(const char *key, cudaError_t e, long long v) {
    if (e == cudaSuccess) say_int(key, v);
    else say_err(key, e);
}

static void say_flags(const char *key) {
    unsigned int f = 0;
    cudaError_t e = cudaGetDeviceFlags(&f);
    char buf[32];
    snprintf(buf, sizeof buf, "0x%x", f);
    if (e == cudaSuccess) say(key, buf);
    else say_err(key, e);
}

// Fresh process: queries before any initialisation, invalid ordinals, flags once active.
static void scenario_init() {
    int dev = -7;
    cudaError_t e = cudaGetDevice(&dev);
    say_result("get_device.before_set", e, dev);
    say_flags("get_device_flags.before_init");

    int count = 0;
    cudaGetDeviceCount(&count);
    say_int("device_count", count);
    say_err("set_device.count", cudaSetDevice(count));
    say_err("set_device.count.last_error", cudaGetLastError());
    say_err("set_device.minus_one", cudaSetDevice(-1));
    cudaGetLastError();
    dev = -7;
    e = cudaGetDevice(&dev);
    say_result("get_device.after_bad_set", e, dev);

    say_flags("get_device_flags.before_set_device");
    say_err("set_device.0", cudaSetDevice(0));
    say_flags("get_device_flags.after_set_device");
    say_err("free_null", cudaFree(0));
    say_flags("get_device_flags.after_free_null");

    say_err("set_device_flags.blocking_sync.active",
            cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    cudaGetLastError();
    say_flags("get_device_flags.after_set_blocking_sync.active");
    say_err("set_device_flags.0x3", cudaSetDeviceFlags(0x3));
    cudaGetLastError();
    say_err("set_device_flags.0x100", cudaSetDeviceFlags(0x100));
    cudaGetLastError();
    say_err("set_device_flags.map_host", cudaSetDeviceFlags(cudaDeviceMapHost));
    cudaGetLastError();
    say_flags("get_device_flags.end");
}

// Fresh process: flags set before the primary context exists.
static void scenario_flags_before() {
    say_err("set_device_flags.blocking_sync.inactive",
            cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    say_flags("get_device_flags.after_set_blocking_sync.inactive");
    say_err("flags_before.free_null", cudaFree(0));
    say_flags("get_device_flags.after_set_blocking_sync.inactive.then_active");
    say_err("set_device_flags.spin.active", cudaSetDeviceFlags(cudaDeviceScheduleSpin));
    say_flags("get_device_flags.after_set_spin.active");
}

struct LimitCase {
    const char *name;
    cudaLimit limit;
    size_t new_value;
};

static void scenario_limits() {
    int driver = 0, runtime = 0;
    cudaError_t e = cudaDriverGetVersion(&driver);
    say_result("driver_version", e, driver);
    e = cudaRuntimeGetVersion(&runtime);
    say_result("runtime_version", e, runtime);
    cudaSetDevice(0);
    const LimitCase cases[] = {
        {"stack_size", cudaLimitStackSize, 4096},
        {"printf_fifo_size", cudaLimitPrintfFifoSize, 4u << 20},
        {"malloc_heap_size", cudaLimitMallocHeapSize, 32u << 20},
        {"dev_runtime_sync_depth", cudaLimitDevRuntimeSyncDepth, 4},
        {"dev_runtime_pending_launch_count", cudaLimitDevRuntimePendingLaunchCount, 4096},
        {"max_l2_fetch_granularity", cudaLimitMaxL2FetchGranularity, 32},
        {"persisting_l2_cache_size", cudaLimitPersistingL2CacheSize, 1u << 20},
    };
    char key[128];
    for (const LimitCase &c : cases) {
        size_t v = 0;
        snprintf(key, sizeof key, "limit.%s.default", c.name);
        e = cudaDeviceGetLimit(&v, c.limit);
        say_result(key, e, (long long)v);
        snprintf(key, sizeof key, "limit.%s.set_%zu", c.name, c.new_value);
        say_err(key, cudaDeviceSetLimit(c.limit, c.new_value));
        cudaGetLastError();
        v = 0;
        snprintf(key, sizeof key, "limit.%s.after_set", c.name);
        e = cudaDeviceGetLimit(&v, c.limit);
        say_result(key, e, (long long)v);
    }
    size_t v = 0;
    say_err("limit.invalid_7", cudaDeviceGetLimit(&v, (cudaLimit)7));
    cudaGetLastError();

    cudaFuncCache cfg = cudaFuncCachePreferEqual;
    e = cudaDeviceGetCacheConfig(&cfg);
    say_result("cache_config.default", e, (long long)cfg);
    say_err("cache_config.set_prefer_shared", cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
    e = cudaDeviceGetCacheConfig(&cfg);
    say_result("cache_config.after_set_prefer_shared", e, (long long)cfg);

    int least = 99, greatest = 99;
    e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    say_result("stream_priority_range.least", e, least);
    say_result("stream_priority_range.greatest", e, greatest);

    int can = -1;
    e = cudaDeviceCanAccessPeer(&can, 0, 0);
    say_result("can_access_peer.0_0", e, can);
    int count = 0;
    cudaGetDeviceCount(&count);
    if (count > 1) {
        can = -1;
        e = cudaDeviceCanAccessPeer(&can, 0, 1);
        say_result("can_access_peer.0_1", e, can);
    }
    can = -1;
    e = cudaDeviceCanAccessPeer(&can, 0, count);
    say_result("can_access_peer.0_count", e, can);
    cudaGetLastError();
}

// Makes a buffer, a stream and an event, resets the device, then applies `use` (one of
// free, stream, event, malloc) to the old handles.
static void scenario_reset(const char *use) {
    cudaSetDevice(0);
    void *buf = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
    if (cudaMalloc(&buf, 1 << 20) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess ||
        cudaEventCreate(&event) != cudaSuccess || cudaEventRecord(event, stream) != cudaSuccess) {
        say("reset.setup", "failed");
        return;
    }
    cudaDeviceSynchronize();
    say_err("reset.device_reset", cudaDeviceReset());
    char key[64];
    snprintf(key, sizeof key, "reset.%s", use);
    cudaError_t e = cudaSuccess;
    if (strcmp(use, "free") == 0) {
        e = cudaFree(buf);
    } else if (strcmp(use, "stream") == 0) {
        e = cudaStreamSynchronize(stream);
    } else if (strcmp(use, "event") == 0) {
        e = cudaEventQuery(event);
    } else if (strcmp(use, "malloc") == 0) {
        void *fresh = nullptr;
        e = cudaMalloc(&fresh, 1 << 20);
        if (e == cudaSuccess) e = cudaMemset(fresh, 0, 1 << 20);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e == cudaSuccess) e = cudaFree(fresh);
    }
    say_err(key, e);
    snprintf(key, sizeof key, "reset.%s.last_error", use);
    say_err(key, cudaGetLastError());
    snprintf(key, sizeof key, "reset.%s.then_sync", use);
    say_err(key, cudaDeviceSynchronize());
}

static int run_scenario(const char *name) {
    if (strcmp(name, "init") == 0) scenario_init();
    else if (strcmp(name, "flags_before") == 0) scenario_flags_before();
    else if (strcmp(name, "limits") == 0) scenario_limits();
    else if (strncmp(name, "reset_", 6) == 0) scenario_reset(name + 6);
    else {
        fprintf(stderr, "device_semantics: unknown scenario %s\n", name);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) return run_scenario(argv[1]);
    const char *scenarios[] = {"init",         "flags_before", "limits",      "reset_free",
                               "reset_stream", "reset_event",  "reset_malloc"};
    int failures = 0;
    for (const char *s : scenarios) {
        char *child_argv[] = {argv[0], const_cast<char *>(s), nullptr};
        pid_t pid;
        if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, child_argv, environ) != 0) {
            fprintf(stderr, "device_semantics: cannot start scenario %s\n", s);
            return 1;
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) {
            printf("semantics %s.crashed signal %d\n", s, WTERMSIG(status));
            ++failures;
        } else if (WEXITSTATUS(status) != 0) {
            printf("semantics %s.exit %d\n", s, WEXITSTATUS(status));
            ++failures;
        }
        fflush(stdout);
    }
    return failures == 0 ? 0 : 1;
}
