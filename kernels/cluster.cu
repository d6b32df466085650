// Thread-block clusters and distributed shared memory (compute capability 9.0): a histogram
// whose bins are spread over the shared memory of the blocks of a cluster, as in the
// programming guide's "Distributed Shared Memory" section.

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// hist[b] += the number of i < data_len with data[i] % bins == b, for b < min(bins, hist_len).
// Block r of a cluster of c blocks keeps bins [r * ceil(bins / c), (r + 1) * ceil(bins / c)) in
// its shared memory; every thread adds into the block that owns the bin (through the cluster's
// distributed shared memory), then each block adds its bins to `hist`. Correct for any launch:
// any grid, block and cluster shape (a launch without clusters is a cluster of one block), since
// every block has room for all the bins. Grid-stride over `data` without overflow.
// cuda-runtime: arch = sm_90
// cuda-runtime: require dynamic_shared >= 4 * bins
extern "C" __global__ void cluster_histogram(const unsigned* data, size_t data_len,
                                             unsigned* hist, size_t hist_len, unsigned bins) {
  extern __shared__ unsigned smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned long long size = cluster.num_blocks();
  const unsigned long long rank = cluster.block_rank();
  const unsigned long long per = ((unsigned long long)bins + size - 1) / size;
  const unsigned long long threads = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long local =
      threadIdx.x + blockDim.x * ((unsigned long long)threadIdx.y + blockDim.y * threadIdx.z);
  for (unsigned long long i = local; i < per; i += threads) smem[i] = 0;
  // Every block of the cluster has started and zeroed its bins before any is written.
  cluster.sync();

  const unsigned long long n = data_len;
  const unsigned long long blocks =
      (unsigned long long)gridDim.x * gridDim.y * (unsigned long long)gridDim.z;
  const unsigned long long block =
      blockIdx.x + gridDim.x * ((unsigned long long)blockIdx.y +
                                (unsigned long long)gridDim.y * blockIdx.z);
  const unsigned long long stride =
      blocks > ~0ull / threads ? ~0ull : blocks * threads;
  if (bins != 0 && block <= n / threads) {
    for (unsigned long long i = block * threads + local; i < n;) {
      unsigned b = data[i] % bins;
      unsigned* owner = cluster.map_shared_rank(smem, (unsigned)(b / per));
      atomicAdd(owner + b % per, 1u);
      if (n - i <= stride) break;
      i += stride;
    }
  }
  // All additions into this block's bins are done, and no block exits while others still
  // write into its shared memory.
  cluster.sync();

  for (unsigned long long i = local; i < per; i += threads) {
    unsigned long long b = rank * per + i;
    if (b < bins && b < hist_len && smem[i] != 0) atomicAdd(&hist[b], smem[i]);
  }
}
