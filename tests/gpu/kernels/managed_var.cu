// Kernel of the GPU test of `Library::managed` (`cudaLibraryGetManaged`). The committed
// managed_var.ptx is made from this file by
//   .nvcc/nvidia/cu13/bin/nvcc -ptx -arch=compute_75 -O3 -std=c++17 managed_var.cu -o managed_var.ptx
// (the pinned nvcc, scripts/install-nvcc).

// One copy for the whole process, reachable from every device and the host.
__managed__ unsigned int mvals[8];

// mvals[i] = mvals[i] * k + i for i < 8 (one block of at least 8 threads).
extern "C" __global__ void bump_managed(unsigned int k) {
  unsigned int i = threadIdx.x;
  if (i < 8) mvals[i] = mvals[i] * k + i;
}
