#!/usr/bin/env bash
# On the GPU machine: builds each staged sample with nvcc -cudart shared (all its .cu and .cpp
# files, -rdc=true as the samples' own build does) and runs it once on NVIDIA's libcudart.so.13
# and once on ours, from its own directory (data files). Compares the exit codes and the output
# with timings and addresses left out (the same lines in another order count as the same:
# device printf from several blocks comes in any order).
#   cudart/samples/run.sh <dir with our libcudart.so> [NVIDIA's lib dir] [nvcc]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ours=$(cd "$1" && pwd)
theirs=$(cd "${2:-/usr/local/cuda/lib64}" && pwd)
nvcc=${3:-/usr/local/cuda/bin/nvcc}
samples="$root/.gpu-extra/samples"
work=$(mktemp -d); mkdir -p "$work/ours"
cp "$ours/libcudart.so" "$work/ours/libcudart.so.13"
norm() { sed -E 's/[0-9]+\.[0-9]+ *(ms|msec|us|s|sec|GB\/s|GFlop\/s|Mpixels\/sec)/<t>/g; s/0x[0-9a-f]+/<addr>/g; s/(Time|time|Throughput|Performance|Elapsed|elapsed|Bandwidth)[^\n]*/<timing line>/' "$1"; }
same=0; differ=0; failed_build=0
jobs=${JOBS:-$(nproc)}
# Build every sample first, `jobs` at a time (the GPU machine has 16 cores), then run them.
build() {
  local p=$1 name dir srcs
  name=$(basename "$p"); dir="$samples/$p"
  srcs=$(ls "$dir"/*.cu "$dir"/*.cpp 2>/dev/null)
  if "$nvcc" -O2 -std=c++17 -arch=sm_90 -rdc=true -cudart shared --extended-lambda -I"$samples/Common" -I"$dir" $srcs -o "$work/$name" -L"$theirs" > "$work/$name.build" 2>&1; then
    touch "$work/$name.built"
  fi
}
for p in $(grep -v '^#' "$here/list.txt"); do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  build "$p" &
done
wait
for p in $(grep -v '^#' "$here/list.txt"); do
  name=$(basename "$p"); dir="$samples/$p"
  if [ ! -e "$work/$name.built" ]; then
    echo "BUILD FAILED $name: $(tail -2 "$work/$name.build" | tr '\n' ' ')"; failed_build=$((failed_build+1)); continue
  fi
  (cd "$dir" && LD_LIBRARY_PATH="$theirs" timeout "${RUN_TIMEOUT:-60}" "$work/$name" > "$work/$name.theirs" 2>&1); rt=$?
  (cd "$dir" && LD_LIBRARY_PATH="$work/ours" timeout "${RUN_TIMEOUT:-60}" "$work/$name" > "$work/$name.ours" 2>&1); ro=$?
  if [ $rt -eq $ro ] && diff -q <(norm "$work/$name.theirs") <(norm "$work/$name.ours") > /dev/null; then
    echo "same     $name (exit $ro)"; same=$((same+1))
  elif [ $rt -eq $ro ] && diff -q <(norm "$work/$name.theirs" | sort) <(norm "$work/$name.ours" | sort) > /dev/null; then
    # The same lines in another order (device printf from several blocks).
    echo "same     $name (exit $ro; the same lines in another order)"; same=$((same+1))
  else
    echo "DIFFERS  $name (exit NVIDIA $rt, ours $ro)"; differ=$((differ+1))
    diff <(norm "$work/$name.theirs") <(norm "$work/$name.ours") | head -12
  fi
done
echo "samples: $same same, $differ differ, $failed_build did not build"
rm -rf "$work"
