#!/usr/bin/env bash
# Runs figures.cu on NVIDIA's libcudart.so.13 and on ours, three times each, alternating.
#   cudart/bench/run.sh <our lib dir> [NVIDIA's lib dir] [nvcc]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ours=$(cd "$1" && pwd)
theirs=$(cd "${2:-/usr/local/cuda/lib64}" && pwd)
nvcc=${3:-/usr/local/cuda/bin/nvcc}
work=$(mktemp -d)
mkdir -p "$work/ours" "$work/theirs"
cp "$ours/libcudart.so" "$work/ours/libcudart.so.13"
ln -sf "$theirs/libcudart.so.13" "$work/theirs/libcudart.so"
cp "$theirs"/libcudadevrt.a "$work/theirs/" 2>/dev/null || true
"$nvcc" -O2 -arch=sm_90 -cudart shared "$here/figures.cu" -o "$work/figures" -L"$work/theirs"
for i in 1 2 3; do
  echo "== NVIDIA libcudart ($i)"; LD_LIBRARY_PATH="$theirs" "$work/figures"
  echo "== cuda-runtime's libcudart ($i)"; LD_LIBRARY_PATH="$work/ours" "$work/figures"
done
rm -rf "$work"
