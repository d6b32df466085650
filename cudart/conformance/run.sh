#!/usr/bin/env bash
# Builds each conformance program with nvcc -cudart shared and runs it once on NVIDIA's
# libcudart.so.13 and once on ours: same exit code and same output, or the program is reported.
#   cudart/conformance/run.sh <our lib dir> [NVIDIA's lib dir] [nvcc]
# Defaults: the pinned PyPI toolkit in .nvcc/ (CI: no GPU, so every program takes its no-driver
# path); on the GPU machine pass /usr/local/cuda/lib64 and /usr/local/cuda/bin/nvcc.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ours=$(cd "$1" && pwd)
theirs=$(cd "${2:-$root/.nvcc/nvidia/cu13/lib}" && pwd)
nvcc=${3:-$root/.nvcc/nvidia/cu13/bin/nvcc}
work=$(mktemp -d)
mkdir -p "$work/ours" "$work/theirs"
# Our library under NVIDIA's file name; link against NVIDIA's (the import is by SONAME).
cp "$ours/libcudart.so" "$work/ours/libcudart.so.13"
ln -sf "$theirs/libcudart.so.13" "$work/theirs/libcudart.so"
cp "$theirs"/libcudadevrt.a "$work/theirs/" 2>/dev/null || true
fail=0
jobs=${JOBS:-$(nproc)}
# Build every program first, `jobs` at a time, then run each on both libraries.
build() {
  local src=$1 name
  name=$(basename "$src" .cu)
  if "$nvcc" -O2 -arch=sm_90 -cudart shared -I"$here" "$src" -o "$work/$name" -L"$work/theirs" -L"$theirs" > "$work/$name.build" 2>&1; then
    touch "$work/$name.built"
  fi
}
for src in "$here"/*.cu; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  build "$src" &
done
wait
for src in "$here"/*.cu; do
  name=$(basename "$src" .cu)
  if [ ! -e "$work/$name.built" ]; then
    echo "BUILD FAILED $name"; cat "$work/$name.build"; fail=1; continue
  fi
  LD_LIBRARY_PATH="$work/theirs:$theirs" timeout 120 "$work/$name" > "$work/$name.theirs" 2>&1; rt=$?
  LD_LIBRARY_PATH="$work/ours" timeout 120 "$work/$name" > "$work/$name.ours" 2>&1; ro=$?
  if [ $rt -eq $ro ] && cmp -s "$work/$name.theirs" "$work/$name.ours"; then
    echo "same     $name (exit $ro, $(wc -l < "$work/$name.ours") lines)"
  else
    echo "DIFFERS  $name (exit NVIDIA $rt, ours $ro)"
    diff "$work/$name.theirs" "$work/$name.ours" | head -40
    # Both outputs whole, when asked (scripts/gpu-verify keeps them with its logs).
    if [ -n "${CONFORMANCE_KEEP:-}" ]; then
      mkdir -p "$CONFORMANCE_KEEP"
      cp "$work/$name.theirs" "$CONFORMANCE_KEEP/$name.nvidia.txt"
      cp "$work/$name.ours" "$CONFORMANCE_KEEP/$name.ours.txt"
    fi
    fail=1
  fi
done
rm -rf "$work"
exit $fail
