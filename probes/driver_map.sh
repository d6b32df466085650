#!/bin/bash
# Measures how libcudart maps driver CUresult numbers to cudaError_t (ErrorCode::from_driver).
# Run on a machine with the driver, gcc and nvcc: bash probes/driver_map.sh > map.tsv
# A stand-in libcuda.so.1 (driver_map_shim.c) forwards everything to the real driver, except that
# cuGetProcAddress hands libcudart a cuCtxSynchronize / cuStreamSynchronize that returns
# $SHIM_CODE. Each line: driver code, cudaDeviceSynchronize's result, cudaStreamSynchronize's
# result, cudaGetErrorName of the first. On libcudart 13.0 / driver 580 every code came back
# unchanged.
set -e
src=$(cd "$(dirname "$0")" && pwd); w=$(mktemp -d); cd "$w"
export REAL_LIBCUDA=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
ln -sf "$REAL_LIBCUDA" libcuda_real.so
gcc -shared -fPIC -O1 -o libcuda.so.1 "$src/driver_map_shim.c" -Wl,--no-as-needed -L. -l:libcuda_real.so -ldl -Wl,-soname,libcudashim.so
nvcc -o map "$src/driver_map.cu"
for c in $(seq 1 8) 34 36 46 $(seq 100 102) $(seq 200 226) $(seq 300 304) $(seq 400 402) 500 600 $(seq 700 721) $(seq 800 812) $(seq 900 917) 999 1234; do
  LD_LIBRARY_PATH=. SHIM_ARMED=1 SHIM_CODE=$c ./map
done
