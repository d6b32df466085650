//! The crate's own time on its hot paths, against the null driver (`../nulldrv.c`, whose calls
//! cost a few nanoseconds): what the crate adds to a launch, a texture create + destroy, a
//! kernel-node update, a graph launch, a stream-ordered allocation + free. For finding where the
//! crate's overhead goes without a GPU (`perf record` / `perf annotate` on this binary; it keeps
//! debug information); the figures that count are the benches' on the GPU machine.
//!
//! `bash probes/null_driver/overhead/run.sh [all|tex|launch|4arg|node|rawnode|glaunch|alloc|alloc-crate|alloc-raw|sizes]`
//! (`N` iterations per figure, default a million).
//!
//! `NULLDRV_TEX_POLLUTE_KB=128` makes the null driver's texture create and destroy write that
//! much memory, evicting the crate's data from the first-level cache as the real driver's work
//! does: under `valgrind --tool=cachegrind --cache-sim=yes` the D1 misses per create + destroy
//! beyond the driver's own writes are then the cache lines the crate touches (wall-clock
//! figures with it are too noisy to compare).
//!
//! `NULLDRV_TOUCH_KB=16` makes each kernel-node update of the null driver read that much memory
//! (the same eviction for figure `node`). On the H200 host's CPU (eighteenth session) the
//! crate's update was 50.5 ns against 8.5 ns raw without it, 235-239 against 206 ns with 16 KiB:
//! the crate's share is its instructions, not misses. In the nineteenth session, same host, the
//! first two rounds of one run: 49-60 ns at `8a18498` (that session's start), 40-46 ns after
//! the short path's cuts (`f535183`); in the first, 34 ns with the test-and-set graph lock
//! (`03e9418`), 32 ns with a lock biased to the graph's thread (branch `wip/bias`, not
//! adopted), 29 ns with no lock at all (measurement only); raw 7.6-9.7 ns. Run it there with
//! the null driver's directory holding both `libcuda.so.1` and the `libcuda.so` link (without
//! the link the real driver is loaded).

use cuda_runtime::graph::Graph;
use cuda_runtime::{
    kernel_args, kernels, Array, ArrayFlags, DeviceBuffer, DeviceRead, LaunchConfig, Module,
    Stream, TextureDesc, TextureObject,
};
use cudarc::driver::sys;
use std::time::Instant;

fn t(name: &str, n: usize, mut f: impl FnMut()) {
    for _ in 0..n / 10 {
        f();
    }
    let s = Instant::now();
    for _ in 0..n {
        f();
    }
    println!(
        "{name:40} {:8.1} ns",
        s.elapsed().as_nanos() as f64 / n as f64
    );
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    if which == "sizes" {
        println!(
            "TextureObject {} Error {} Result<()> {} DeviceBuffer<f32> {} Result<DeviceBuffer<u8>> {}",
            std::mem::size_of::<TextureObject<'static>>(),
            std::mem::size_of::<cuda_runtime::Error>(),
            std::mem::size_of::<cuda_runtime::Result<()>>(),
            std::mem::size_of::<DeviceBuffer<f32>>(),
            std::mem::size_of::<cuda_runtime::Result<DeviceBuffer<u8>>>()
        );
        return;
    }
    let n = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let arr = Array::<f32>::new_2d(64, 64, ArrayFlags::empty()).unwrap();
    if which.is_empty() || which == "tex" {
        t("crate texture create+destroy", n, || {
            let x = TextureObject::from_array(&arr, &TextureDesc::default()).unwrap();
            drop(std::hint::black_box(x));
        });
        // SAFETY: plain C structs whose all-zero pattern is valid; a live array of the current
        // context; valid out-parameter (the null driver only hands out a number).
        t("raw texture create+destroy", n, || unsafe {
            let mut res: sys::CUDA_RESOURCE_DESC = std::mem::zeroed();
            res.res.array.hArray = arr.as_raw();
            let tex: sys::CUDA_TEXTURE_DESC = std::mem::zeroed();
            let mut obj = 0;
            sys::cuTexObjectCreate(&mut obj, &res, &tex, std::ptr::null());
            sys::cuTexObjectDestroy(std::hint::black_box(obj));
        });
    }
    let s = Stream::new().unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(1).unwrap();
    // `alloc-crate` and `alloc-raw` run one figure each, so that instruction counts
    // (`valgrind --tool=callgrind`) can be subtracted: the crate's own work per pair.
    if which == "alloc" || which == "alloc-crate" {
        t("crate mallocAsync+freeAsync 1 MiB", n, || {
            drop(std::hint::black_box(
                DeviceBuffer::<u8>::new_async(1 << 20, &s).unwrap(),
            ))
        });
    }
    if which == "alloc" || which == "alloc-raw" {
        // SAFETY: a live stream of the current context; valid out-parameter; the pointer freed
        // is the one just allocated.
        t("raw cuMemAllocAsync+cuMemFreeAsync", n, || unsafe {
            let mut p = 0;
            sys::cuMemAllocAsync(&mut p, 1 << 20, s.as_raw());
            sys::cuMemFreeAsync(std::hint::black_box(p), s.as_raw());
        });
    }
    if which.starts_with("alloc") {
        return;
    }
    if which == "4arg" {
        let cfg = LaunchConfig::new(1u32, 1u32);
        t("crate 4-arg launch", 5 * n, || {
            kernels::params::four_args(&s, &cfg, &mut out, 1, 2.0, 3.0).unwrap()
        });
    }
    if which.is_empty() || which == "launch" {
        let cfg = LaunchConfig::new(1u32, 1u32);
        t("crate empty launch", n, || {
            kernels::params::empty(&s, &cfg).unwrap()
        });
        t("crate 4-arg launch", n, || {
            kernels::params::four_args(&s, &cfg, &mut out, 1, 2.0, 3.0).unwrap()
        });
        if which == "launch" {
            let cl = LaunchConfig::new(2u32, 1u32).with_cluster(2);
            t("crate cluster launch", n, || {
                kernels::launch_ex::empty90(&s, &cl).unwrap()
            });
            let window = DeviceBuffer::<f32>::zeroed(1024).unwrap();
            let (lo, hi) = cuda_runtime::Device::current()
                .unwrap()
                .stream_priority_range()
                .unwrap();
            let _ = lo;
            t("crate extended launch, 3 attributes", n, || {
                let ex = cfg
                    .extended()
                    .priority(hi)
                    .mem_sync_domain(cuda_runtime::MemSyncDomain::Remote)
                    .access_policy_window(cuda_runtime::AccessPolicyWindow::over(
                        &window,
                        1.0,
                        cuda_runtime::AccessProperty::Normal,
                        cuda_runtime::AccessProperty::Normal,
                    ));
                kernels::params::empty(&s, &ex).unwrap()
            });
        }
        let pts = Stream::per_thread().unwrap();
        t("crate 4-arg launch per-thread", n, || {
            kernels::params::four_args(&pts, &cfg, &mut out, 1, 2.0, 3.0).unwrap()
        });
        t("crate mallocAsync+freeAsync 1 MiB", n, || {
            drop(std::hint::black_box(
                DeviceBuffer::<u8>::new_async(1 << 20, &s).unwrap(),
            ))
        });
    }
    if which.is_empty() || which == "update" {
        // Whole-graph updates alternating between two graphs of 100 kernel nodes in a chain
        // (the bench's shape), against the raw call on the same executable and graphs.
        let module = Module::from_ptx(kernels::params::PTX).unwrap();
        let f = module.function("four_args").unwrap();
        let cfg = LaunchConfig::new(1u32, 1u32);
        let graphs: Vec<Graph> = (0..2i64)
            .map(|turn| {
                let mut g = Graph::new().unwrap();
                let mut prev = Vec::new();
                for i in 0..100i64 {
                    // SAFETY: the null driver runs no kernel.
                    let n = unsafe {
                        g.add_kernel_node(
                            &prev,
                            &f,
                            &cfg,
                            &kernel_args![&mut out, 1usize, i + turn, 2.0f64, 3.0f64],
                        )
                    }
                    .unwrap();
                    prev = vec![n];
                }
                g
            })
            .collect();
        let mut e = graphs[0].instantiate().unwrap();
        let mut turn = 0;
        t("crate whole-graph update", n / 10, || {
            turn ^= 1;
            e.update(&graphs[turn]).unwrap();
        });
        let exec = e.as_raw();
        let raws = [graphs[0].as_raw(), graphs[1].as_raw()];
        t("raw whole-graph update", n / 10, || {
            turn ^= 1;
            let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
            // SAFETY: live executable and graphs of the same shape (null driver).
            let r = unsafe { sys::cuGraphExecUpdate_v2(exec, raws[turn], &mut info) };
            assert_eq!(r as u32, 0);
        });
        if which == "update" {
            return;
        }
    }
    if which.is_empty() || which == "node" || which == "rawnode" || which == "glaunch" {
        let module = Module::from_ptx(kernels::params::PTX).unwrap();
        let f = module.function("four_args").unwrap();
        let cfg = LaunchConfig::new(1u32, 1u32);
        let mut g = Graph::new().unwrap();
        // Arguments of 8 bytes each: the null driver reports every parameter as 8 bytes.
        // SAFETY: the null driver runs no kernel.
        let node = unsafe {
            g.add_kernel_node(
                &[],
                &f,
                &cfg,
                &kernel_args![&mut out, 1usize, 1i64, 2.0f64, 3.0f64],
            )
        }
        .unwrap();
        let mut e = g.instantiate().unwrap();
        let mut k = 0i64;
        if which != "node" && which != "rawnode" {
            t("crate graph launch", n, || e.launch(&s).unwrap());
        }
        if which == "glaunch" {
            return;
        }
        // (`rawnode`: the raw figure alone, to subtract from `node`'s instruction count.)
        if which != "rawnode" {
            t("crate kernel-node update", n, || {
                k ^= 1;
                // SAFETY: as the node's add above.
                unsafe {
                    e.set_kernel_node_params(
                        node,
                        &f,
                        &cfg,
                        &kernel_args![&mut out, 1usize, k, 2.0f64, 3.0f64],
                    )
                }
                .unwrap();
            });
        }
        // The same update straight through the driver: the ratio of the two figures is the
        // crate's share (the GPU bench's ratio is against the real driver's cost).
        let (exec, raw_node, func) = (e.as_raw(), node.as_raw(), f.as_raw());
        let dptr = out.device_ptr();
        let mut vals = [dptr, 1u64, 0, 2.0f64.to_bits(), 3.0f64.to_bits()];
        t("raw kernel-node update", n, || {
            vals[2] ^= 1;
            let mut ptrs = vals
                .each_mut()
                .map(|v| (v as *mut u64).cast::<std::ffi::c_void>());
            let params = sys::CUDA_KERNEL_NODE_PARAMS {
                func,
                gridDimX: 1,
                gridDimY: 1,
                gridDimZ: 1,
                blockDimX: 1,
                blockDimY: 1,
                blockDimZ: 1,
                sharedMemBytes: 0,
                kernelParams: ptrs.as_mut_ptr(),
                extra: std::ptr::null_mut(),
                kern: std::ptr::null_mut(),
                ctx: std::ptr::null_mut(),
            };
            // SAFETY: a live executable and a kernel node of its source graph; five pointers
            // to 8-byte values, as the kernel's parameters; the null driver runs no kernel.
            let r = unsafe { sys::cuGraphExecKernelNodeSetParams_v2(exec, raw_node, &params) };
            assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        });
    }
}
