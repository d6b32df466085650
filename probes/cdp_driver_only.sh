#!/usr/bin/env bash
# Dynamic parallelism with only the driver (docs/dynamic-parallelism.md). Builds, with the pinned
# PyPI nvcc (scripts/install-nvcc), the relocatable PTX of cdp_kernels.cu and its image linked
# ahead of time with the package's libcudadevrt.a, then runs cdp_driver_only.c (driver API only):
# the driver's JIT linker without and with libcudadevrt.a, and the prelinked image. Nothing here
# is committed. On the GPU machine: bash probes/cdp_driver_only.sh
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
N=$src/../.nvcc/nvidia/cu13
[ -x "$N/bin/nvcc" ] || { echo "no pinned nvcc: run scripts/install-nvcc first" >&2; exit 1; }
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
arch=${CDP_ARCH:-sm_90}
"$N/bin/nvcc" -arch="$arch" -rdc=true -ptx "$src/cdp_kernels.cu" -o "$w/cdp.ptx"
"$N/bin/nvcc" -arch="$arch" -rdc=true -c "$src/cdp_kernels.cu" -o "$w/cdp.o"
"$N/bin/nvcc" -arch="$arch" -dlink "$w/cdp.o" -L"$N/lib" -lcudadevrt -cubin -o "$w/cdp_linked.cubin"
gcc -O2 -I"$N/include" "$src/cdp_driver_only.c" -o "$w/probe" -l:libcuda.so.1
"$w/probe" "$w/cdp.ptx" "$N/lib/libcudadevrt.a" "$w/cdp_linked.cubin"
