#!/usr/bin/env bash
# Checks the crate's reset exclusion, handle generations and graph rules against a null driver, on a machine
# without a GPU: bash probes/null_driver/run.sh [seconds]. Needs gcc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Per checkout, so that worktrees building at once never run each other's driver or harness.
out=${NULL_DRIVER_DIR:-/tmp/cuda-runtime-null-driver-$(printf %s "$here" | cksum | cut -d" " -f1)}
mkdir -p "$out"
gcc -shared -fPIC -O2 -o "$out/libcuda.so.1" "$here/nulldrv.c" -Wl,-soname,libcuda.so.1 -lpthread
ln -sf libcuda.so.1 "$out/libcuda.so"
CARGO_TARGET_DIR="$out/target" cargo build --release --quiet --manifest-path "$here/harness/Cargo.toml"
LD_LIBRARY_PATH="$out" timeout 120 "$out/target/release/null-driver-harness" "${1:-3}"
