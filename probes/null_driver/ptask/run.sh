#!/usr/bin/env bash
# The per-thread stream's ask-the-owner mechanism against the null driver (review of b786a5a,
# eleventh session): `ptask` (a use on a per-thread stream whose buffer was dropped, then a
# device reset while the owner idles: later Device::synchronize calls must not wait the
# reclaimer's patience) and `oom` (a thread whose allocation fails while the memory it needs
# waits for an owner thread that waits for it: the allocation must succeed), and `tls` (a
# capture begun on the per-thread stream in a thread-local destructor run after the crate's is
# refused). Needs gcc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${NULL_DRIVER_DIR:-/tmp/cuda-runtime-null-driver-ptask-$(printf %s "$here" | cksum | cut -d" " -f1)}
mkdir -p "$out"
gcc -shared -fPIC -O2 -o "$out/libcuda.so.1" "$here/../nulldrv.c" -Wl,-soname,libcuda.so.1 -lpthread
ln -sf libcuda.so.1 "$out/libcuda.so"
CARGO_TARGET_DIR="$out/target" cargo build --release --quiet --manifest-path "$here/Cargo.toml"
echo "== ptask (reset while an ask is pending)"
LD_LIBRARY_PATH="$out" "$out/target/release/ptask"
echo "== oom (NULLDRV_MAX_ALLOCS=1)"
NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH="$out" "$out/target/release/oom"
echo "== tls (capture of the per-thread stream in a late thread-local destructor)"
LD_LIBRARY_PATH="$out" "$out/target/release/tls"
echo "== tlsjoin (the per-thread stream joining a capture in a late thread-local destructor)"
LD_LIBRARY_PATH="$out" "$out/target/release/tlsjoin"
# The second review's scenarios (allocation failures under load; NULLDRV_CTXSYNC_MS makes every
# cuCtxSynchronize take that long, standing in for unrelated work).
echo "== oom_long (a synchronize takes 3 s)"
NULLDRV_MAX_ALLOCS=1 NULLDRV_CTXSYNC_MS=3000 LD_LIBRARY_PATH="$out" "$out/target/release/oom_long"
echo "== oom_two (two failing at once, a synchronize takes 1 s)"
NULLDRV_MAX_ALLOCS=2 NULLDRV_CTXSYNC_MS=1000 LD_LIBRARY_PATH="$out" "$out/target/release/oom_two"
echo "== oom_loop (2000 rounds, 4 at once)"
for i in 1 2 3 4; do NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH="$out" "$out/target/release/oom_loop" 2000 & done; wait
echo "== oom_many (6 threads, 3 allocations, 4 s; then with resets; a few failures are true out-of-memory:"
echo "   three other threads can hold a live buffer each at that moment; a failure after ~2 s is not)"
NULLDRV_MAX_ALLOCS=3 LD_LIBRARY_PATH="$out" "$out/target/release/oom_many" 4
NULLDRV_MAX_ALLOCS=3 LD_LIBRARY_PATH="$out" "$out/target/release/oom_many" 4 reset
echo "== reset_settle (a reset racing the settle thread)"
NULLDRV_MAX_ALLOCS=1 NULLDRV_CTXSYNC_MS=500 LD_LIBRARY_PATH="$out" "$out/target/release/reset_settle"
# The third review's scenarios (per-thread branch): a buffer used on A's per-thread stream and
# dropped on another thread, B's allocation needing it; with unrelated 3 s work the first such
# allocation fails after 2 s on the branch (the settle waits for the whole context), at once
# fine on main; r3_reset: a reset landing while B retries must not wait 2 s for B.
echo "== r3_cross (no slow work; then a synchronize takes 3 s)"
NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH="$out" "$out/target/release/r3_cross"
NULLDRV_MAX_ALLOCS=1 NULLDRV_CTXSYNC_MS=3000 LD_LIBRARY_PATH="$out" "$out/target/release/r3_cross"
echo "== r3_reset"
NULLDRV_MAX_ALLOCS=1 NULLDRV_CTXSYNC_MS=500 LD_LIBRARY_PATH="$out" "$out/target/release/r3_reset"
# The fourth review's scenarios (twelfth session; the null driver gained NULLDRV_CTXSYNC_STRICT,
# a cuCtxSynchronize invalidating every open capture as measured on the GPU, and
# NULLDRV_SETTLE_DELAY_US, the settle thread reaching its synchronize later): r4_settle_capture,
# captures begun while the settle thread synchronizes (fixed: a begin waits for it); r4_pitched,
# a pitched allocation while an idle owner holds dropped memory (fixed: it retries as
# cudaMalloc does); r4_oom_capture, the second documented case that still fails (a capture open
# elsewhere for the whole 2 s); r4_stress.
echo "== r4_settle_capture (delayed settle, 20 rounds; then the natural race, 50 rounds)"
NULLDRV_SETTLE_DELAY_US=2000 NULLDRV_MAX_ALLOCS=2 NULLDRV_CTXSYNC_STRICT=1 LD_LIBRARY_PATH="$out" "$out/target/release/r4_settle_capture" 20 100 100 2>&1 | grep -v "^nulldrv violation"
NULLDRV_MAX_ALLOCS=2 NULLDRV_CTXSYNC_STRICT=1 LD_LIBRARY_PATH="$out" "$out/target/release/r4_settle_capture" 50 100 100 2>&1 | grep -v "^nulldrv violation"
echo "== r4_pitched"
NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH="$out" "$out/target/release/r4_pitched"
echo "== r4_oom_capture (documented: fails after 2 s)"
NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH="$out" "$out/target/release/r4_oom_capture"
echo "== r4_stress"
NULLDRV_MAX_ALLOCS=6 LD_LIBRARY_PATH="$out" "$out/target/release/r4_stress" 20
# The fifth review's (twelfth session): a settle synchronize that outlasts the 2 s a capture's
# begin or join waits for it: later begins and joins must not wait again (they did, 2 s each).
echo "== r5_stuck (a synchronize takes 20 s)"
NULLDRV_MAX_ALLOCS=1 NULLDRV_CTXSYNC_MS=20000 NULLDRV_CTXSYNC_STRICT=1 LD_LIBRARY_PATH="$out" "$out/target/release/r5_stuck"
# The sixth review's (fourteenth session, wip/perf14): a texture or surface object handed to one
# of the crate's kernel wrappers on a capturing stream must be refused (it was captured: the
# object and its array were destroyed while the executable still referred to them).
echo "== tex_capture"
LD_LIBRARY_PATH="$out" "$out/target/release/tex_capture"
# The seventh review's (rev-b14): two handles of one mipmap level in one Copy3DBatch, both copies
# writing the same texel, must be refused before the driver (the batch's copies run in no order).
echo "== batch_level"
LD_LIBRARY_PATH="$out" "$out/target/release/batch_level"
# Review rev-a14: an external event record (cudaEventRecordExternal) on a capturing stream is
# an event record node naming the event; the capture kept nothing, so dropping the event
# destroyed it while the executable still recorded it (now refused).
echo "== ext_event_capture"
LD_LIBRARY_PATH="$out" "$out/target/release/ext_event_capture"
# Review rev-c14: a host function's panic is reported by the next synchronize or query through
# any handle of its stream (it was kept per handle: lost through a second Stream::legacy() or
# Stream::per_thread()), and becomes a deferred error of the device once the stream is gone.
echo "== hostfn_panic"
LD_LIBRARY_PATH="$out" "$out/target/release/hostfn_panic" 2>/dev/null
# Review rev-c14: a pool import refused after the driver mapped it is freed relaxed (it was a
# bare cuMemFree in the thread's mode, which invalidated another thread's global capture).
echo "== pool_import_free"
LD_LIBRARY_PATH="$out" "$out/target/release/pool_import_free" < /dev/null
# Review rev-d15: a device reset made from Function::max_potential_block_size's dynamic shared
# memory closure ran under the search's entry of the device, which then asked the driver about
# the reset context's function (now the closure runs outside the entry; the search reports the
# reset).
echo "== occupancy_reset"
LD_LIBRARY_PATH="$out" "$out/target/release/occupancy_reset"
# Review rev-e15: a root embedded as a child in its own conditional body took its lock twice,
# and two threads embedding each other's root in a body of their own took two locks in opposite
# orders: both hung (now refused: no graph with conditional nodes is embedded).
echo "== child_lock_order"
LD_LIBRARY_PATH="$out" "$out/target/release/child_lock_order"
# Review rev-g15: a driver log callback runs inside the failing driver call, so inside a crate
# call; an allocation made from the callback of a failed allocation recursed until the stack
# overflowed (now refused, as in host functions), and a panic payload whose drop panics must not
# unwind into the driver. The null driver logs allocations refused for NULLDRV_MAX_ALLOCS.
echo "== log_reentry"
NULLDRV_MAX_ALLOCS=1 LD_LIBRARY_PATH="$out" "$out/target/release/log_reentry" 2>/dev/null
# Review rev-f15 (host and managed memory): a READ_ONLY registration made through
# HostRegistration::with is read-only for the crate too.
echo "== ro_flag"
LD_LIBRARY_PATH="$out" "$out/target/release/ro_flag"
