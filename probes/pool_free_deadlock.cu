// Does libcudart itself hang when one thread frees page-locked / registered / managed memory
// (calls that wait for the whole device) while another thread allocates and frees in stream
// order from the default pool (release threshold 0, so every synchronisation trims it)?
// The crate's GPU tests hung now and then with exactly this mix in one process (the safety-core
// issue's closing note); this tells whether the driver deadlocks without the crate.
// Built and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 pool_free_deadlock.cu -o /tmp/pfd && /tmp/pfd
// Prints `probe <mix> ok <rounds>` per mix, or `probe <mix> HUNG` (and exits 1) when a mix
// does not finish within 10 s of being asked to stop.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <cuda_runtime.h>

__global__ void touch(float* p, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}

static std::atomic<long> progress{0};
static std::atomic<bool> stop{false};

// Thread A: stream-ordered allocations on a non-blocking stream, synchronised each round.
static void pool_user() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const size_t n = 1 << 20;
  while (!stop.load()) {
    float* p = nullptr;
    if (cudaMallocAsync(&p, n * sizeof(float), s) != cudaSuccess) break;
    touch<<<(n + 255) / 256, 256, 0, s>>>(p, n);
    cudaFreeAsync(p, s);
    cudaStreamSynchronize(s);
    progress++;
  }
  cudaStreamDestroy(s);
}

// Thread B: the frees that wait for the whole device, one kind per mix.
static void host_freer(int mix) {
  const size_t bytes = 16 << 20;
  while (!stop.load()) {
    if (mix == 0) {
      void* h = nullptr;
      cudaMallocHost(&h, bytes);
      cudaFreeHost(h);
    } else if (mix == 1) {
      void* h = aligned_alloc(4096, bytes);
      cudaHostRegister(h, bytes, cudaHostRegisterDefault);
      cudaHostUnregister(h);
      free(h);
    } else {
      void* m = nullptr;
      cudaMallocManaged(&m, bytes);
      memset(m, 1, 4096);
      cudaFree(m);
    }
    progress++;
  }
}

int main() {
  cudaFree(0);
  const char* names[] = {"cudaFreeHost", "cudaHostUnregister", "managed-cudaFree"};
  for (int mix = 0; mix < 3; mix++) {
    progress = 0;
    stop = false;
    std::thread a(pool_user), b(host_freer, mix);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    stop = true;
    printf("probe %s ", names[mix]);
    fflush(stdout);
    // Joining a hung thread would hang the probe: detach and report instead.
    auto t0 = std::chrono::steady_clock::now();
    std::atomic<bool> joined{false};
    std::thread joiner([&] { a.join(); b.join(); joined = true; });
    while (!joined && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!joined) {
      printf("HUNG after %ld rounds\n", progress.load());
      fflush(stdout);
      _exit(1);
    }
    joiner.join();
    printf("ok %ld\n", progress.load());
  }
  return 0;
}
