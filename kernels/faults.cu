// Kernels that fail on purpose, for testing sticky errors.

// cuda-runtime: unsafe
// Writes value to the device address addr.
extern "C" __global__ void write_address(unsigned long long addr, unsigned int value) {
  *(volatile unsigned int*)addr = value;
}

// cuda-runtime: unsafe
// Stops the kernel with a trap.
extern "C" __global__ void trap_kernel() { __trap(); }
