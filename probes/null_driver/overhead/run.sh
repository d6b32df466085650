#!/usr/bin/env bash
# Builds the null driver and this probe, and prints the crate's time per operation against it:
# bash probes/null_driver/overhead/run.sh [figure]. Needs gcc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${NULL_DRIVER_DIR:-/tmp/cuda-runtime-null-driver-overhead-$(printf %s "$here" | cksum | cut -d" " -f1)}
mkdir -p "$out"
gcc -shared -fPIC -O2 -o "$out/libcuda.so.1" "$here/../nulldrv.c" -Wl,-soname,libcuda.so.1 -lpthread
ln -sf libcuda.so.1 "$out/libcuda.so"
CARGO_TARGET_DIR="$out/target" cargo build --release --quiet --manifest-path "$here/Cargo.toml"
echo "binary: $out/target/release/null-driver-overhead (run with LD_LIBRARY_PATH=$out)"
LD_LIBRARY_PATH="$out" "$out/target/release/null-driver-overhead" "${1:-}"
