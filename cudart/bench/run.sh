#!/usr/bin/env bash
# Runs figures.cu on NVIDIA's libcudart.so.13 and on ours, alternating, CUDART_BENCH_RUNS times
# each (default 5), and prints the median of each figure per library.
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
runs=${CUDART_BENCH_RUNS:-5}
for i in $(seq "$runs"); do
  echo "== NVIDIA libcudart ($i)"; LD_LIBRARY_PATH="$theirs" "$work/figures" | tee -a "$work/theirs.txt"
  echo "== cuda-runtime's libcudart ($i)"; LD_LIBRARY_PATH="$work/ours" "$work/figures" | tee -a "$work/ours.txt"
done
# Per figure, the median over the runs of each library (each run's figure is itself a median).
med() { grep -F "$2" "$1" | awk '{print $(NF-1)}' | sort -g | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "== summary: medians of $runs runs each (us; time ratio below 1 is faster)"
printf '%-34s %10s %10s %8s\n' figure NVIDIA ours ratio
grep -E ' us$' "$work/theirs.txt" | sed -E 's/ +[0-9.]+ us$//' | sort -u | while read -r fig; do
  t=$(med "$work/theirs.txt" "$fig"); o=$(med "$work/ours.txt" "$fig")
  printf '%-34s %10s %10s %8s\n' "$fig" "$t" "$o" "$(awk -v a="$o" -v b="$t" 'BEGIN{printf "%.3f", a/b}')"
done
rm -rf "$work"
