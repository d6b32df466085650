#!/usr/bin/env bash
# Dynamic parallelism with only the driver (docs/dynamic-parallelism.md). Builds, with the pinned
# PyPI nvcc (scripts/install-nvcc), the relocatable PTX of cdp_kernels.cu and its image linked
# ahead of time with the package's libcudadevrt.a, then runs cdp_driver_only.c (driver API only):
# the driver's JIT linker without and with libcudadevrt.a, and the prelinked image. Nothing here
# is committed.
#
#   bash probes/cdp_driver_only.sh              build and run here (needs the pinned nvcc and a GPU)
#   bash probes/cdp_driver_only.sh --stage DIR  build the inputs into DIR, on the development
#                                               machine (scripts/gpu-verify --stage-extra does)
#   bash probes/cdp_driver_only.sh DIR          run from inputs staged in DIR, on the GPU machine
#                                               (no nvcc needed there: gcc and libcuda only)
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
N=$src/../.nvcc/nvidia/cu13
arch=${CDP_ARCH:-sm_90}
build() { # DIR
  [ -x "$N/bin/nvcc" ] || { echo "no pinned nvcc: run scripts/install-nvcc first" >&2; exit 1; }
  mkdir -p "$1"
  "$N/bin/nvcc" -arch="$arch" -rdc=true -ptx "$src/cdp_kernels.cu" -o "$1/cdp.ptx"
  "$N/bin/nvcc" -arch="$arch" -rdc=true -c "$src/cdp_kernels.cu" -o "$1/cdp.o"
  "$N/bin/nvcc" -arch="$arch" -dlink "$1/cdp.o" -L"$N/lib" -lcudadevrt -cubin -o "$1/cdp_linked.cubin"
  rm -f "$1/cdp.o"
  cp "$N/lib/libcudadevrt.a" "$N/include/cuda.h" "$1/"
}
run() { # DIR
  local w; w=$(mktemp -d)
  gcc -O2 -I"$1" "$src/cdp_driver_only.c" -o "$w/probe" -l:libcuda.so.1
  "$w/probe" "$1/cdp.ptx" "$1/libcudadevrt.a" "$1/cdp_linked.cubin"
  rm -rf "$w"
}
case "${1:-}" in
  --stage)
    [ -n "${2:-}" ] || { echo "usage: $0 --stage DIR" >&2; exit 2; }
    build "$2"
    echo "staged the dynamic-parallelism probe's inputs ($arch) in $2"
    ;;
  "")
    w=$(mktemp -d)
    trap 'rm -rf "$w"' EXIT
    build "$w"
    run "$w"
    ;;
  *)
    for f in cdp.ptx libcudadevrt.a cdp_linked.cubin cuda.h; do
      [ -f "$1/$f" ] || { echo "$1/$f missing: stage with $0 --stage $1" >&2; exit 1; }
    done
    run "$1"
    ;;
esac
