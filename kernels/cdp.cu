// Dynamic parallelism: kernels that launch kernels (the device runtime, CDP2). Linked ahead of
// time with NVIDIA's device runtime into the image of the cuda-runtime-devrt crate.
//
// cuda-runtime: device-runtime
//
// Every parent splits the first n elements (n: the smallest of its buffers' lengths) into one
// segment per block, of as many elements as the block has threads, in the order of the block's
// linear index (x fastest); blocks past the end do nothing. Only thread (0, 0, 0) of a block
// launches, and only kernels of this file, each given pointers into its block's segment and the
// segment's length (at most 1024): a child never reaches past what the parent was given. A
// launch the device runtime refuses (its pending-launch pool full, no memory for a stream) adds
// 1 to failures[0] (when failures_len > 0) and its work is not done. The children are plain C++
// `__global__` functions (not `extern "C"`): they get no host wrapper, so only their parents,
// audited with them, launch them. (Not `static`: nvcc names static kernels after the source's
// absolute path, and the committed PTX and image must not depend on where the checkout is.)

__device__ __forceinline__ unsigned long long cdp_block_index() {
  return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
}

__device__ __forceinline__ unsigned cdp_thread_index() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ __forceinline__ unsigned cdp_block_threads() {
  return blockDim.x * blockDim.y * blockDim.z;
}

// This block's segment of the first n elements: its start, and its length (0 past the end).
__device__ __forceinline__ unsigned cdp_segment(size_t n, size_t* begin) {
  size_t t = cdp_block_threads();
  size_t b = cdp_block_index();
  // b * t < n, without overflow: b < ceil(n / t).
  if (b >= n / t + (n % t != 0)) {
    *begin = 0;
    return 0;
  }
  *begin = b * t;
  size_t left = n - *begin;
  return (unsigned)(left < t ? left : t);
}

__device__ __forceinline__ bool cdp_launcher() {
  return (threadIdx.x | threadIdx.y | threadIdx.z) == 0;
}

// Counts a refused launch (cudaGetLastError after the launch: the launching thread's error).
__device__ __forceinline__ void cdp_check(cudaError_t e, unsigned* failures, size_t failures_len) {
  if (e != cudaSuccess && failures_len > 0) atomicAdd(failures, 1u);
}

__device__ __forceinline__ unsigned cdp_grid(unsigned count) { return (count + 127) / 128; }

// A child: out[j] = stage[count - 1 - j] for j < count. Each element comes from another thread
// of the parent block than the one that launched this grid.
__global__ void cdp_reverse_child(const float* stage, float* out, unsigned count) {
  for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x)
    out[j] = stage[count - 1 - j];
}

// A child grid sees what its parent wrote before the launch: every thread of the block writes
// stage[i] = 2 * src[i] + 1 for its element, the block meets at a barrier, then thread (0, 0, 0)
// launches a child that reverses the block's segment of stage into out. After the barrier the
// launching thread has seen all of the block's writes, so the child sees them too:
// out[begin + j] = 2 * src[begin + count - 1 - j] + 1.
extern "C" __global__ void cdp_child_sees_parent(const float* src, size_t src_len, float* stage,
                                                 size_t stage_len, float* out, size_t out_len,
                                                 unsigned* failures, size_t failures_len) {
  size_t n = src_len < stage_len ? src_len : stage_len;
  n = n < out_len ? n : out_len;
  size_t begin;
  unsigned count = cdp_segment(n, &begin);
  if (count == 0) return;  // the whole block: its segment is empty for every thread
  unsigned t = cdp_thread_index();
  if (t < count) stage[begin + t] = 2.0f * src[begin + t] + 1.0f;
  __syncthreads();
  if (cdp_launcher()) {
    cdp_reverse_child<<<cdp_grid(count), 128>>>(stage + begin, out + begin, count);
    cdp_check(cudaGetLastError(), failures, failures_len);
  }
}

// A child step: v[j] = v[j] * 33 + step for j < count (from src instead of v when step is 1).
__global__ void cdp_step_child(const unsigned* src, unsigned* v, unsigned count,
                                      unsigned step) {
  for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x)
    v[j] = (step == 1 ? src[j] : v[j]) * 33u + step;
}

// Launches into one stream from one block run in order: thread (0, 0, 0) launches `steps`
// (at most 16) children one after the other into one stream (the block's implicit stream, or,
// with `named`, a stream it creates with cudaStreamNonBlocking and destroys after the launches);
// child k computes v = v * 33 + k over the block's segment (v = src * 33 + 1 for k = 1), so
// out = the steps applied in order, and any other order or overlap gives another result. After
// a refused launch the block launches no further step (its segment is then incomplete).
// cuda-runtime: require steps <= 16
extern "C" __global__ void cdp_in_order(const unsigned* src, size_t src_len, unsigned* out,
                                        size_t out_len, unsigned steps, bool named,
                                        unsigned* failures, size_t failures_len) {
  size_t n = src_len < out_len ? src_len : out_len;
  size_t begin;
  unsigned count = cdp_segment(n, &begin);
  if (count == 0 || !cdp_launcher()) return;
  cudaStream_t s = 0;
  if (named && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    cdp_check(cudaErrorLaunchOutOfResources, failures, failures_len);
    return;
  }
  for (unsigned k = 1; k <= steps; ++k) {
    cdp_step_child<<<cdp_grid(count), 128, 0, s>>>(src + begin, out + begin, count, k);
    cudaError_t e = cudaGetLastError();
    cdp_check(e, failures, failures_len);
    if (e != cudaSuccess) break;  // the later steps would build on a missing one
  }
  if (named) cudaStreamDestroy(s);
}

// The device's global nanosecond timer.
__device__ __forceinline__ unsigned long long cdp_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A child: out[j] = src[j] mixed `rounds` times with `salt`; thread 0 of each block records its
// start and end in times[0] (min) and times[1] (max) when `times` is not null.
__global__ void cdp_mix_child(const unsigned* src, unsigned* out, unsigned count,
                                     unsigned salt, unsigned rounds,
                                     unsigned long long* times) {
  unsigned long long start = cdp_now();
  for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
    unsigned v = src[j];
    for (unsigned r = 0; r < rounds; ++r) v = (v ^ salt) * 2654435761u + (v >> 13);
    out[j] = v;
  }
  if (times != nullptr && threadIdx.x == 0) {
    atomicMin(&times[0], start);
    atomicMax(&times[1], cdp_now());
  }
}

// Named streams run concurrently: thread (0, 0, 0) creates two streams (cudaStreamNonBlocking)
// and launches one child into each: a = src mixed with salt 1, b = src mixed with salt 2, each
// `rounds` times (at most 100000); then destroys the streams (their work still completes). When
// times_len >= 4, the children record [start, end] of the first stream's grids in times[0..2]
// and of the second's in times[2..4] (global timer, nanoseconds; the caller fills times with
// [MAX, 0, MAX, 0]): whether they overlapped is an observation, not a guarantee.
// cuda-runtime: require rounds <= 100000
extern "C" __global__ void cdp_two_streams(const unsigned* src, size_t src_len, unsigned* a,
                                           size_t a_len, unsigned* b, size_t b_len,
                                           unsigned rounds, unsigned long long* times,
                                           size_t times_len, unsigned* failures,
                                           size_t failures_len) {
  size_t n = src_len < a_len ? src_len : a_len;
  n = n < b_len ? n : b_len;
  size_t begin;
  unsigned count = cdp_segment(n, &begin);
  if (count == 0 || !cdp_launcher()) return;
  cudaStream_t s1, s2;
  if (cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess) {
    cdp_check(cudaErrorLaunchOutOfResources, failures, failures_len);
    return;
  }
  if (cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) != cudaSuccess) {
    cdp_check(cudaErrorLaunchOutOfResources, failures, failures_len);
    cudaStreamDestroy(s1);
    return;
  }
  bool timed = times_len >= 4;
  cdp_mix_child<<<cdp_grid(count), 128, 0, s1>>>(src + begin, a + begin, count, 1u, rounds,
                                                 timed ? times : nullptr);
  cdp_check(cudaGetLastError(), failures, failures_len);
  cdp_mix_child<<<cdp_grid(count), 128, 0, s2>>>(src + begin, b + begin, count, 2u, rounds,
                                                 timed ? times + 2 : nullptr);
  cdp_check(cudaGetLastError(), failures, failures_len);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
}

// A child: out[j] = src[j] * src[j] + 7 (wrapping) for j < count.
__global__ void cdp_square_child(const unsigned* src, unsigned* out, unsigned count) {
  for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x)
    out[j] = src[j] * src[j] + 7u;
}

// The tail: sums[s] = the sum of out over segment s of n elements in segments of `seg`
// elements, for s below both `segments` and sums_len (grid-stride).
__global__ void cdp_sum_tail(const unsigned* out, size_t n, unsigned seg,
                                    unsigned long long* sums, size_t segments) {
  for (size_t s = blockIdx.x * (size_t)blockDim.x + threadIdx.x; s < segments;
       s += (size_t)gridDim.x * blockDim.x) {
    size_t from = s * seg, to = from + seg < n ? from + seg : n;
    unsigned long long acc = 0;
    for (size_t i = from; i < to; ++i) acc += out[i];
    sums[s] = acc;
  }
}

// The parent sees its children's writes after they complete, through a tail launch (CUDA 12
// removed device-side cudaDeviceSynchronize): every block's thread (0, 0, 0) launches a child
// (cudaStreamFireAndForget) that writes out = src * src + 7 over the block's segment, and block
// (0, 0, 0) launches into cudaStreamTailLaunch a grid that runs after this grid and all its
// children complete, and sums each segment of out into sums (segment s into sums[s], for s
// below sums_len).
extern "C" __global__ void cdp_tail_sums(const unsigned* src, size_t src_len, unsigned* out,
                                         size_t out_len, unsigned long long* sums,
                                         size_t sums_len, unsigned* failures,
                                         size_t failures_len) {
  size_t n = src_len < out_len ? src_len : out_len;
  size_t begin;
  unsigned count = cdp_segment(n, &begin);
  if (!cdp_launcher()) return;
  if (count > 0) {
    cdp_square_child<<<cdp_grid(count), 128, 0, cudaStreamFireAndForget>>>(src + begin,
                                                                           out + begin, count);
    cdp_check(cudaGetLastError(), failures, failures_len);
  }
  if (cdp_block_index() == 0) {
    unsigned seg = cdp_block_threads();
    size_t segments = n / seg + (n % seg != 0);
    segments = segments < sums_len ? segments : sums_len;
    if (segments > 0) {
      size_t blocks = (segments + 127) / 128;
      unsigned grid = blocks < 65535 ? (unsigned)blocks : 65535u;
      cdp_sum_tail<<<grid, 128, 0, cudaStreamTailLaunch>>>(out, n, seg, sums, segments);
      cdp_check(cudaGetLastError(), failures, failures_len);
    }
  }
}
