//! Graph figures (issue 12), three ways in one run on the same primary context and the same PTX:
//! through this crate, through the raw driver (cudarc's `sys`: `cuGraph*`), and through
//! NVIDIA's libcudart loaded at run time (`CUDA_RUNTIME_LIBCUDART`, default
//! `/usr/local/cuda/lib64/libcudart.so`; its column is left empty when it cannot be loaded).
//!
//! **The graph timed**: a chain of 100 kernel nodes, each a launch of the crate's `four_args`
//! kernel (`kernels/params.cu`, one block of one thread, writing one float) with its own
//! integer argument, node *i* depending on node *i - 1*. Built the same way on each side (the
//! crate's graph through `Graph::add_kernel_node`, the driver's through `cuGraphAddKernelNode`,
//! libcudart's through `cudaGraphAddKernelNode` with the kernel handle of
//! `cudaLibraryGetKernel`).
//!
//! Figures (medians of interleaved batches, microseconds per operation):
//! - instantiate the 100-node graph (the executable's destruction is not timed);
//! - launch it, host submit time per launch (a batch of launches, synchronised after);
//! - whole-graph update of the executable from a second graph of the same shape with other
//!   arguments (alternating between two such graphs);
//! - one kernel-node update (`cudaGraphExecKernelNodeSetParams` of the middle node, its
//!   integer argument alternating). The driver side passes a pointer per argument
//!   (`kernelParams`), as libcudart does; the crate passes them packed into one buffer
//!   (`extra`), which the driver handles in 0.95-0.97x the time
//!   (`probes/node_update_paths.cu`): part of the crate's figure is that saving. After the
//!   first, the crate's updates take its short path (the same function and buffer as the
//!   last update: their checks hold still, nothing new to keep), as any sweep of parameters
//!   does. A last line times it against the driver given the arguments packed the same
//!   way (`extra`): the crate's own cost, with no target;
//! - the same 100 kernels as one graph launch against 100 stream launches: host submit time
//!   and device time (events recorded around them on the same stream);
//! - the keep-alive bookkeeping: the crate's `GraphExec::launch` against `cuGraphLaunch` of the
//!   very same executable on the very same stream.
//!
//! Targets (issue 12): instantiate, launch and both updates at most 1.05x the driver and at
//! most libcudart's; keep-alive at most 1.05x.
//!
//! `cargo bench --bench graph` (needs a GPU; without one it prints why and exits).

mod common;

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{ck, die, ok, CudaError};
use criterion::Criterion;
use cuda_runtime::graph::Graph;
use cuda_runtime::{
    kernel_args, kernels, DeviceBuffer, Event, Function, GraphExec, GraphNode, LaunchConfig,
    Module, Stream,
};
use cudarc::driver::sys;

/// Nodes in the timed graph.
const NODES: usize = 100;
/// Interleaved batches per figure in the summary table and the lines after it (after one to
/// warm up).
const REPS: usize = 31;
/// The node whose parameters the node-update figure changes.
const MIDDLE: usize = NODES / 2;

fn must<T>(r: cuda_runtime::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| die(&format!("{what}: {e}")))
}

/// The arguments of node `i` of graph variant `v` (`four_args(out, out_len, a, b, c)`).
fn node_arg(i: usize, v: usize) -> i32 {
    (i + 1000 * v) as i32
}

/// What every side does, one operation at a time.
trait Side {
    /// Instantiates the main graph; returns the time of the instantiation alone.
    fn instantiate(&mut self) -> Duration;
    /// Launches the main executable once (submit only).
    fn launch(&mut self);
    /// Updates the main executable from the other variant's graph.
    fn update_whole(&mut self);
    /// Updates the middle node's argument of the main executable.
    fn update_node(&mut self);
    /// The same 100 kernels as 100 stream launches (submit only).
    fn stream_launches(&mut self);
    /// Records the start (`false`) or end (`true`) timing event on the side's stream.
    fn record(&mut self, end: bool);
    /// Milliseconds between the start and end events (after a synchronize).
    fn elapsed_ms(&mut self) -> f32;
    fn sync(&mut self);
}

// ---------------------------------------------------------------------------------------------
// The crate.

struct CrateSide {
    stream: Stream,
    function: Function,
    out: DeviceBuffer<f32>,
    /// Two graphs of the same shape, variants 0 and 1.
    graphs: [Graph; 2],
    nodes: Vec<GraphNode>,
    exec: GraphExec,
    turn: usize,
    start: Event,
    end: Event,
}

fn crate_graph(f: &Function, out: &mut DeviceBuffer<f32>, v: usize) -> (Graph, Vec<GraphNode>) {
    let cfg = LaunchConfig::new(1u32, 1u32);
    let mut g = must(Graph::new(), "Graph::new");
    let mut nodes: Vec<GraphNode> = Vec::with_capacity(NODES);
    for i in 0..NODES {
        let deps: Vec<GraphNode> = nodes.last().copied().into_iter().collect();
        // SAFETY: four_args writes out[0] when out_len > 0; `out` holds one float.
        let n = unsafe {
            g.add_kernel_node(
                &deps,
                f,
                &cfg,
                &kernel_args![&mut *out, 1usize, node_arg(i, v), 2.0f32, 3.0f64],
            )
        };
        nodes.push(must(n, "add_kernel_node"));
    }
    (g, nodes)
}

impl CrateSide {
    fn new() -> CrateSide {
        let module = must(Module::from_ptx(kernels::params::PTX), "Module::from_ptx");
        let function = must(module.function("four_args"), "Module::function");
        let mut out = must(DeviceBuffer::<f32>::zeroed(1), "zeroed");
        let (g0, nodes) = crate_graph(&function, &mut out, 0);
        let (g1, _) = crate_graph(&function, &mut out, 1);
        let exec = must(g0.instantiate(), "instantiate");
        CrateSide {
            stream: must(Stream::new(), "Stream::new"),
            function,
            out,
            graphs: [g0, g1],
            nodes,
            exec,
            turn: 0,
            start: must(Event::new(), "Event::new"),
            end: must(Event::new(), "Event::new"),
        }
    }
}

impl Side for CrateSide {
    fn instantiate(&mut self) -> Duration {
        let t = Instant::now();
        let e = must(self.graphs[0].instantiate(), "instantiate");
        let d = t.elapsed();
        drop(e);
        d
    }
    fn launch(&mut self) {
        must(self.exec.launch(&self.stream), "GraphExec::launch");
    }
    fn update_whole(&mut self) {
        self.turn ^= 1;
        must(
            self.exec.update(&self.graphs[self.turn]),
            "GraphExec::update",
        );
    }
    fn update_node(&mut self) {
        self.turn ^= 1;
        let cfg = LaunchConfig::new(1u32, 1u32);
        let a = node_arg(MIDDLE, self.turn);
        // SAFETY: as in `crate_graph`.
        let r = unsafe {
            self.exec.set_kernel_node_params(
                self.nodes[MIDDLE],
                &self.function,
                &cfg,
                &kernel_args![&mut self.out, 1usize, a, 2.0f32, 3.0f64],
            )
        };
        must(r, "set_kernel_node_params");
    }
    fn stream_launches(&mut self) {
        let cfg = LaunchConfig::new(1u32, 1u32);
        for i in 0..NODES {
            must(
                kernels::params::four_args(
                    &self.stream,
                    &cfg,
                    &mut self.out,
                    node_arg(i, 0),
                    2.0,
                    3.0,
                ),
                "four_args",
            );
        }
    }
    fn record(&mut self, end: bool) {
        let e = if end { &self.end } else { &self.start };
        must(e.record(&self.stream), "Event::record");
    }
    fn elapsed_ms(&mut self) -> f32 {
        must(self.end.synchronize(), "Event::synchronize");
        must(Event::elapsed_time(&self.start, &self.end), "elapsed_time")
    }
    fn sync(&mut self) {
        must(self.stream.synchronize(), "Stream::synchronize");
    }
}

// ---------------------------------------------------------------------------------------------
// The raw driver.

struct DriverSide {
    stream: sys::CUstream,
    function: sys::CUfunction,
    out: u64,
    graphs: [sys::CUgraph; 2],
    nodes: Vec<sys::CUgraphNode>,
    exec: sys::CUgraphExec,
    turn: usize,
    start: sys::CUevent,
    end: sys::CUevent,
}

/// Launch arguments of `four_args`, with the pointer array into them.
struct Args {
    out: u64,
    len: usize,
    a: i32,
    b: f32,
    c: f64,
}

impl Args {
    /// On the caller's stack, as a careful C caller keeps them. (A heap allocation per call,
    /// as this was until the eighteenth session, added about 5% to the driver's and
    /// libcudart's node update: 0.976-1.071x against 1.046-1.069x for the crate's figure.)
    fn new(out: u64, a: i32) -> Args {
        Args {
            out,
            len: 1,
            a,
            b: 2.0,
            c: 3.0,
        }
    }
    fn ptrs(&mut self) -> [*mut c_void; 5] {
        [
            (&mut self.out as *mut u64).cast(),
            (&mut self.len as *mut usize).cast(),
            (&mut self.a as *mut i32).cast(),
            (&mut self.b as *mut f32).cast(),
            (&mut self.c as *mut f64).cast(),
        ]
    }
}

fn driver_params(f: sys::CUfunction, ptrs: &mut [*mut c_void; 5]) -> sys::CUDA_KERNEL_NODE_PARAMS {
    sys::CUDA_KERNEL_NODE_PARAMS {
        func: f,
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
    }
}

fn driver_graph(f: sys::CUfunction, out: u64, v: usize) -> (sys::CUgraph, Vec<sys::CUgraphNode>) {
    let mut g: sys::CUgraph = std::ptr::null_mut();
    let mut nodes: Vec<sys::CUgraphNode> = Vec::with_capacity(NODES);
    // SAFETY: valid out-parameters; the parameters point to live locals for the call (the
    // driver copies them); each dependency is the previous node of this graph.
    unsafe {
        ck(sys::cuGraphCreate(&mut g, 0), "cuGraphCreate");
        for i in 0..NODES {
            let mut args = Args::new(out, node_arg(i, v));
            let mut ptrs = args.ptrs();
            let p = driver_params(f, &mut ptrs);
            let mut n: sys::CUgraphNode = std::ptr::null_mut();
            let (dp, dn) = match nodes.last() {
                Some(prev) => (prev as *const sys::CUgraphNode, 1),
                None => (std::ptr::null(), 0),
            };
            ck(
                sys::cuGraphAddKernelNode_v2(&mut n, g, dp, dn, &p),
                "cuGraphAddKernelNode",
            );
            nodes.push(n);
        }
    }
    (g, nodes)
}

impl DriverSide {
    fn new(out: u64) -> DriverSide {
        let ptx = CString::new(kernels::params::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
        let mut m: sys::CUmodule = std::ptr::null_mut();
        let mut f: sys::CUfunction = std::ptr::null_mut();
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let (mut start, mut end): (sys::CUevent, sys::CUevent) =
            (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: the crate made its primary context current on this thread; valid
        // out-parameters; NUL-terminated PTX and name.
        unsafe {
            ck(
                sys::cuModuleLoadData(&mut m, ptx.as_ptr().cast()),
                "cuModuleLoadData",
            );
            ck(
                sys::cuModuleGetFunction(&mut f, m, c"four_args".as_ptr()),
                "cuModuleGetFunction",
            );
            ck(sys::cuStreamCreate(&mut stream, 0), "cuStreamCreate");
            ck(sys::cuEventCreate(&mut start, 0), "cuEventCreate");
            ck(sys::cuEventCreate(&mut end, 0), "cuEventCreate");
        }
        let (g0, nodes) = driver_graph(f, out, 0);
        let (g1, _) = driver_graph(f, out, 1);
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: live graph; valid out-parameter.
        ck(
            unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, g0, 0) },
            "cuGraphInstantiateWithFlags",
        );
        DriverSide {
            stream,
            function: f,
            out,
            graphs: [g0, g1],
            nodes,
            exec,
            turn: 0,
            start,
            end,
        }
    }
}

impl DriverSide {
    /// [`Side::update_node`] with the arguments packed into one buffer (`extra`,
    /// `CU_LAUNCH_PARAM_BUFFER_POINTER`) at the offsets `cuFuncGetParamInfo` gave, as the
    /// crate passes them: the driver's own cost of the crate's call.
    fn update_node_packed(&mut self, offsets: &[usize; 5]) {
        self.turn ^= 1;
        let a = node_arg(MIDDLE, self.turn);
        let mut buf = [0u64; 4];
        let mut size = 32usize;
        let bytes: [&[u8]; 5] = [
            &self.out.to_ne_bytes(),
            &1usize.to_ne_bytes(),
            &a.to_ne_bytes(),
            &2.0f32.to_ne_bytes(),
            &3.0f64.to_ne_bytes(),
        ];
        {
            let b: &mut [u8; 32] = bytemuck::cast_mut(&mut buf);
            for (v, &o) in bytes.iter().zip(offsets) {
                b[o..o + v.len()].copy_from_slice(v);
            }
        }
        let mut extra = [
            sys::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT as usize as *mut c_void,
            buf.as_mut_ptr().cast(),
            sys::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT as usize as *mut c_void,
            (&mut size as *mut usize).cast(),
            sys::CU_LAUNCH_PARAM_END_AS_INT as usize as *mut c_void,
        ];
        let mut p = driver_params(self.function, &mut [std::ptr::null_mut(); 5]);
        p.kernelParams = std::ptr::null_mut();
        p.extra = extra.as_mut_ptr();
        // SAFETY: a kernel node of the executable's source graph; the buffer holds the
        // parameters at the driver's offsets (read at setup) and lives for the call.
        ck(
            unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.exec, self.nodes[MIDDLE], &p) },
            "cuGraphExecKernelNodeSetParams (extra)",
        );
    }

    /// The offsets of `four_args`'s five parameters (`cuFuncGetParamInfo`), checked to fit the
    /// 32-byte buffer of [`update_node_packed`](Self::update_node_packed).
    fn param_offsets(&self) -> [usize; 5] {
        let sizes = [8, 8, 4, 4, 8];
        let mut offsets = [0usize; 5];
        for (i, o) in offsets.iter_mut().enumerate() {
            let mut size = 0usize;
            // SAFETY: a live function and valid out-parameters.
            ck(
                unsafe { sys::cuFuncGetParamInfo(self.function, i, o, &mut size) },
                "cuFuncGetParamInfo",
            );
            if size != sizes[i] || *o + size > 32 {
                die(&format!("four_args parameter {i}: offset {o}, size {size}"));
            }
        }
        offsets
    }
}

impl Side for DriverSide {
    fn instantiate(&mut self) -> Duration {
        let mut e: sys::CUgraphExec = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: live graph; valid out-parameter.
        ck(
            unsafe { sys::cuGraphInstantiateWithFlags(&mut e, self.graphs[0], 0) },
            "cuGraphInstantiateWithFlags",
        );
        let d = t.elapsed();
        // SAFETY: the executable made above, never launched.
        ck(unsafe { sys::cuGraphExecDestroy(e) }, "cuGraphExecDestroy");
        d
    }
    fn launch(&mut self) {
        // SAFETY: live executable and stream.
        ck(
            unsafe { sys::cuGraphLaunch(self.exec, self.stream) },
            "cuGraphLaunch",
        );
    }
    fn update_whole(&mut self) {
        self.turn ^= 1;
        // SAFETY: all-zero is a valid `CUgraphExecUpdateResultInfo` (success, null nodes).
        let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
        // SAFETY: live executable and graph of the same shape; valid out-parameter.
        ck(
            unsafe { sys::cuGraphExecUpdate_v2(self.exec, self.graphs[self.turn], &mut info) },
            "cuGraphExecUpdate",
        );
    }
    fn update_node(&mut self) {
        self.turn ^= 1;
        let mut args = Args::new(self.out, node_arg(MIDDLE, self.turn));
        let mut ptrs = args.ptrs();
        let p = driver_params(self.function, &mut ptrs);
        // SAFETY: a kernel node of the executable's source graph; parameters as at add time.
        ck(
            unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.exec, self.nodes[MIDDLE], &p) },
            "cuGraphExecKernelNodeSetParams",
        );
    }
    fn stream_launches(&mut self) {
        for i in 0..NODES {
            let mut args = Args::new(self.out, node_arg(i, 0));
            let mut ptrs = args.ptrs();
            // SAFETY: the kernel's parameter list, pointing at live locals for the call.
            ck(
                unsafe {
                    sys::cuLaunchKernel(
                        self.function,
                        1,
                        1,
                        1,
                        1,
                        1,
                        1,
                        0,
                        self.stream,
                        ptrs.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                },
                "cuLaunchKernel",
            );
        }
    }
    fn record(&mut self, end: bool) {
        let e = if end { self.end } else { self.start };
        // SAFETY: live event and stream.
        ck(
            unsafe { sys::cuEventRecord(e, self.stream) },
            "cuEventRecord",
        );
    }
    fn elapsed_ms(&mut self) -> f32 {
        let mut ms = 0f32;
        // SAFETY: live events, both recorded; valid out-parameter.
        unsafe {
            ck(sys::cuEventSynchronize(self.end), "cuEventSynchronize");
            ck(
                sys::cuEventElapsedTime_v2(&mut ms, self.start, self.end),
                "cuEventElapsedTime",
            );
        }
        ms
    }
    fn sync(&mut self) {
        // SAFETY: live stream.
        ck(
            unsafe { sys::cuStreamSynchronize(self.stream) },
            "cuStreamSynchronize",
        );
    }
}

// ---------------------------------------------------------------------------------------------
// libcudart, loaded at run time.

type Ptr = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
struct Dim3 {
    x: u32,
    y: u32,
    z: u32,
}

const ONE: Dim3 = Dim3 { x: 1, y: 1, z: 1 };

/// `cudaKernelNodeParams` (CUDA 13.0 headers).
#[repr(C)]
struct KernelNodeParams {
    func: Ptr,
    grid: Dim3,
    block: Dim3,
    shared: u32,
    params: *mut Ptr,
    extra: *mut Ptr,
}

/// `cudaGraphExecUpdateResultInfo`.
#[repr(C)]
struct UpdateInfo {
    result: i32,
    error_node: Ptr,
    error_from_node: Ptr,
}

struct CudartSide {
    _lib: libloading::Library,
    instantiate: unsafe extern "C" fn(*mut Ptr, Ptr, u64) -> CudaError,
    exec_destroy: unsafe extern "C" fn(Ptr) -> CudaError,
    graph_launch: unsafe extern "C" fn(Ptr, Ptr) -> CudaError,
    exec_update: unsafe extern "C" fn(Ptr, Ptr, *mut UpdateInfo) -> CudaError,
    node_set: unsafe extern "C" fn(Ptr, Ptr, *const KernelNodeParams) -> CudaError,
    launch: unsafe extern "C" fn(Ptr, Dim3, Dim3, *mut Ptr, usize, Ptr) -> CudaError,
    event_record: unsafe extern "C" fn(Ptr, Ptr) -> CudaError,
    event_sync: unsafe extern "C" fn(Ptr) -> CudaError,
    elapsed: unsafe extern "C" fn(*mut f32, Ptr, Ptr) -> CudaError,
    stream_sync: unsafe extern "C" fn(Ptr) -> CudaError,
    stream: Ptr,
    kernel: Ptr,
    out: u64,
    graphs: [Ptr; 2],
    nodes: Vec<Ptr>,
    exec: Ptr,
    turn: usize,
    start: Ptr,
    end: Ptr,
}

impl CudartSide {
    fn load(out: u64) -> Option<CudartSide> {
        let lib = common::open_libcudart()?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the field or binding it is stored
                // in (cuda_runtime_api.h of CUDA 13.0).
                unsafe { common::sym(&lib, $name) }
            };
        }
        let library_load: unsafe extern "C" fn(
            *mut Ptr,
            *const c_void,
            Ptr,
            Ptr,
            u32,
            Ptr,
            Ptr,
            u32,
        ) -> CudaError = sym!(b"cudaLibraryLoadData\0");
        let get_kernel: unsafe extern "C" fn(*mut Ptr, Ptr, *const i8) -> CudaError =
            sym!(b"cudaLibraryGetKernel\0");
        let stream_create: unsafe extern "C" fn(*mut Ptr) -> CudaError =
            sym!(b"cudaStreamCreate\0");
        let event_create: unsafe extern "C" fn(*mut Ptr) -> CudaError = sym!(b"cudaEventCreate\0");
        let graph_create: unsafe extern "C" fn(*mut Ptr, u32) -> CudaError =
            sym!(b"cudaGraphCreate\0");
        let add_kernel: unsafe extern "C" fn(
            *mut Ptr,
            Ptr,
            *const Ptr,
            usize,
            *const KernelNodeParams,
        ) -> CudaError = sym!(b"cudaGraphAddKernelNode\0");
        let mut c = CudartSide {
            instantiate: sym!(b"cudaGraphInstantiate\0"),
            exec_destroy: sym!(b"cudaGraphExecDestroy\0"),
            graph_launch: sym!(b"cudaGraphLaunch\0"),
            exec_update: sym!(b"cudaGraphExecUpdate\0"),
            node_set: sym!(b"cudaGraphExecKernelNodeSetParams\0"),
            launch: sym!(b"cudaLaunchKernel\0"),
            event_record: sym!(b"cudaEventRecord\0"),
            event_sync: sym!(b"cudaEventSynchronize\0"),
            elapsed: sym!(b"cudaEventElapsedTime\0"),
            stream_sync: sym!(b"cudaStreamSynchronize\0"),
            _lib: lib,
            stream: std::ptr::null_mut(),
            kernel: std::ptr::null_mut(),
            out,
            graphs: [std::ptr::null_mut(); 2],
            nodes: Vec::with_capacity(NODES),
            exec: std::ptr::null_mut(),
            turn: 0,
            start: std::ptr::null_mut(),
            end: std::ptr::null_mut(),
        };
        let ptx = CString::new(kernels::params::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
        let mut library: Ptr = std::ptr::null_mut();
        // SAFETY: libcudart's entry points with valid out-parameters; NUL-terminated PTX and
        // name; the node parameters point at live locals for each call (copied by the runtime).
        unsafe {
            ok(
                library_load(
                    &mut library,
                    ptx.as_ptr().cast(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                ),
                "cudaLibraryLoadData",
            );
            ok(
                get_kernel(&mut c.kernel, library, c"four_args".as_ptr()),
                "cudaLibraryGetKernel",
            );
            ok(stream_create(&mut c.stream), "cudaStreamCreate");
            ok(event_create(&mut c.start), "cudaEventCreate");
            ok(event_create(&mut c.end), "cudaEventCreate");
            for v in 0..2 {
                ok(graph_create(&mut c.graphs[v], 0), "cudaGraphCreate");
                let mut prev: Option<Ptr> = None;
                for i in 0..NODES {
                    let mut args = Args::new(out, node_arg(i, v));
                    let mut ptrs = args.ptrs();
                    let p = c.params(&mut ptrs);
                    let mut n: Ptr = std::ptr::null_mut();
                    let (dp, dn) = match &prev {
                        Some(x) => (x as *const Ptr, 1),
                        None => (std::ptr::null(), 0),
                    };
                    let e = add_kernel(&mut n, c.graphs[v], dp, dn, &p);
                    if e != 0 {
                        println!(
                            "libcudart cudaGraphAddKernelNode with a cudaLibraryGetKernel handle \
                             returned cudaError {e}: its column is left empty"
                        );
                        return None;
                    }
                    if v == 0 {
                        c.nodes.push(n);
                    }
                    prev = Some(n);
                }
            }
            ok(
                (c.instantiate)(&mut c.exec, c.graphs[0], 0),
                "cudaGraphInstantiate",
            );
        }
        Some(c)
    }

    fn params(&self, ptrs: &mut [*mut c_void; 5]) -> KernelNodeParams {
        KernelNodeParams {
            func: self.kernel,
            grid: ONE,
            block: ONE,
            shared: 0,
            params: ptrs.as_mut_ptr(),
            extra: std::ptr::null_mut(),
        }
    }
}

impl Side for CudartSide {
    fn instantiate(&mut self) -> Duration {
        let mut e: Ptr = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: live graph; valid out-parameter.
        ok(
            unsafe { (self.instantiate)(&mut e, self.graphs[0], 0) },
            "cudaGraphInstantiate",
        );
        let d = t.elapsed();
        // SAFETY: the executable made above, never launched.
        ok(unsafe { (self.exec_destroy)(e) }, "cudaGraphExecDestroy");
        d
    }
    fn launch(&mut self) {
        // SAFETY: live executable and stream.
        ok(
            unsafe { (self.graph_launch)(self.exec, self.stream) },
            "cudaGraphLaunch",
        );
    }
    fn update_whole(&mut self) {
        self.turn ^= 1;
        let mut info = UpdateInfo {
            result: 0,
            error_node: std::ptr::null_mut(),
            error_from_node: std::ptr::null_mut(),
        };
        // SAFETY: live executable and graph of the same shape; valid out-parameter.
        ok(
            unsafe { (self.exec_update)(self.exec, self.graphs[self.turn], &mut info) },
            "cudaGraphExecUpdate",
        );
    }
    fn update_node(&mut self) {
        self.turn ^= 1;
        let mut args = Args::new(self.out, node_arg(MIDDLE, self.turn));
        let mut ptrs = args.ptrs();
        let p = self.params(&mut ptrs);
        // SAFETY: a kernel node of the executable's source graph; parameters as at add time.
        ok(
            unsafe { (self.node_set)(self.exec, self.nodes[MIDDLE], &p) },
            "cudaGraphExecKernelNodeSetParams",
        );
    }
    fn stream_launches(&mut self) {
        for i in 0..NODES {
            let mut args = Args::new(self.out, node_arg(i, 0));
            let mut ptrs = args.ptrs();
            // SAFETY: the kernel's parameter list, pointing at live locals for the call.
            ok(
                unsafe { (self.launch)(self.kernel, ONE, ONE, ptrs.as_mut_ptr(), 0, self.stream) },
                "cudaLaunchKernel",
            );
        }
    }
    fn record(&mut self, end: bool) {
        let e = if end { self.end } else { self.start };
        // SAFETY: live event and stream.
        ok(
            unsafe { (self.event_record)(e, self.stream) },
            "cudaEventRecord",
        );
    }
    fn elapsed_ms(&mut self) -> f32 {
        let mut ms = 0f32;
        // SAFETY: live events, both recorded; valid out-parameter.
        unsafe {
            ok((self.event_sync)(self.end), "cudaEventSynchronize");
            ok(
                (self.elapsed)(&mut ms, self.start, self.end),
                "cudaEventElapsedTime",
            );
        }
        ms
    }
    fn sync(&mut self) {
        // SAFETY: live stream.
        ok(
            unsafe { (self.stream_sync)(self.stream) },
            "cudaStreamSynchronize",
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Figures.

#[derive(Clone, Copy, PartialEq)]
enum Figure {
    Instantiate,
    Launch,
    UpdateWhole,
    UpdateNode,
    GraphSubmit,
    StreamSubmit,
    GraphDevice,
    StreamDevice,
}

impl Figure {
    const ALL: [Figure; 8] = [
        Figure::Instantiate,
        Figure::Launch,
        Figure::UpdateWhole,
        Figure::UpdateNode,
        Figure::GraphSubmit,
        Figure::StreamSubmit,
        Figure::GraphDevice,
        Figure::StreamDevice,
    ];
    fn name(self) -> &'static str {
        match self {
            Figure::Instantiate => "instantiate, 100-node chain",
            Figure::Launch => "graph launch, submit",
            Figure::UpdateWhole => "whole-graph update (cudaGraphExecUpdate)",
            Figure::UpdateNode => "one kernel-node update",
            Figure::GraphSubmit => "100 kernels: 1 graph launch, submit",
            Figure::StreamSubmit => "100 kernels: 100 stream launches, submit",
            Figure::GraphDevice => "100 kernels: 1 graph launch, device",
            Figure::StreamDevice => "100 kernels: 100 stream launches, device",
        }
    }
    fn batch(self) -> u64 {
        match self {
            Figure::Instantiate => 20,
            Figure::Launch | Figure::UpdateWhole => 200,
            Figure::UpdateNode => 2000,
            Figure::GraphSubmit | Figure::StreamSubmit => 20,
            Figure::GraphDevice | Figure::StreamDevice => 5,
        }
    }
}

/// Time of `n` operations of `fig` on `side` (per operation summed: submit or device time).
fn batch(side: &mut dyn Side, fig: Figure, n: u64) -> Duration {
    side.sync();
    let mut total = Duration::ZERO;
    match fig {
        Figure::Instantiate => {
            for _ in 0..n {
                total += side.instantiate();
            }
        }
        Figure::Launch | Figure::GraphSubmit => {
            let t = Instant::now();
            for _ in 0..n {
                side.launch();
            }
            total = t.elapsed();
        }
        Figure::StreamSubmit => {
            let t = Instant::now();
            for _ in 0..n {
                side.stream_launches();
            }
            total = t.elapsed();
        }
        Figure::UpdateWhole | Figure::UpdateNode => {
            let t = Instant::now();
            for _ in 0..n {
                if fig == Figure::UpdateWhole {
                    side.update_whole();
                } else {
                    side.update_node();
                }
            }
            total = t.elapsed();
        }
        Figure::GraphDevice | Figure::StreamDevice => {
            for _ in 0..n {
                side.sync();
                side.record(false);
                if fig == Figure::GraphDevice {
                    side.launch();
                } else {
                    side.stream_launches();
                }
                side.record(true);
                total += Duration::from_secs_f64(side.elapsed_ms() as f64 / 1e3);
            }
        }
    }
    side.sync();
    total
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.3}x", a / b),
        _ => "-".into(),
    }
}

fn show(v: Option<f64>) -> String {
    v.map_or("-".into(), |us| format!("{us:.3}"))
}

fn main() {
    match cuda_runtime::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => {
            println!("graph bench: no CUDA device; nothing to measure");
            return;
        }
        Err(e) => {
            println!("graph bench: {e}; nothing to measure");
            return;
        }
    }
    let mut ours = CrateSide::new();
    let out = ours.out.as_raw();
    let mut raw = DriverSide::new(out);
    let mut rt = CudartSide::load(out);

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20)
        .configure_from_args();
    for fig in Figure::ALL {
        let mut g = c.benchmark_group(fig.name());
        g.bench_function("cuda-runtime", |b| {
            b.iter_custom(|iters| batch(&mut ours, fig, black_box(iters)))
        });
        g.bench_function("driver", |b| {
            b.iter_custom(|iters| batch(&mut raw, fig, black_box(iters)))
        });
        if let Some(rt) = rt.as_mut() {
            g.bench_function("libcudart", |b| {
                b.iter_custom(|iters| batch(rt, fig, black_box(iters)))
            });
        }
        g.finish();
    }

    println!(
        "\nThe graph: a chain of {NODES} nodes of the `four_args` kernel (1 thread each). \
         Medians of {REPS} interleaved batches, microseconds per operation."
    );
    println!(
        "{:<44} {:>12} {:>12} {:>12} {:>10} {:>12}",
        "figure", "cuda-runtime", "driver", "libcudart", "vs driver", "vs libcudart"
    );
    let mut table: Vec<[Option<f64>; 3]> = Vec::new();
    for fig in Figure::ALL {
        let n = fig.batch();
        let mut v: [Vec<f64>; 3] = Default::default();
        for rep in 0..=REPS {
            let mut sides: [Option<&mut dyn Side>; 3] = [
                Some(&mut ours),
                Some(&mut raw),
                rt.as_mut().map(|r| r as &mut dyn Side),
            ];
            for i in common::turns(rep, sides.len()) {
                if let Some(s) = &mut sides[i] {
                    let d = batch(&mut **s, fig, n);
                    if rep > 0 {
                        v[i].push(d.as_secs_f64() * 1e6 / n as f64);
                    }
                }
            }
        }
        let [a, b, r] = v.map(median);
        println!(
            "{:<44} {:>12} {:>12} {:>12} {:>10} {:>12}",
            fig.name(),
            show(a),
            show(b),
            show(r),
            ratio(a, b),
            ratio(a, r)
        );
        table.push([a, b, r]);
    }
    println!("(ratios are time ratios: below 1 is faster)");
    let col = |f: Figure, i: usize| table[Figure::ALL.iter().position(|&x| x == f).unwrap()][i];
    for (i, side) in ["cuda-runtime", "driver", "libcudart"].iter().enumerate() {
        println!(
            "{side}: one graph launch against 100 stream launches: submit {} , device {}",
            ratio(col(Figure::GraphSubmit, i), col(Figure::StreamSubmit, i)),
            ratio(col(Figure::GraphDevice, i), col(Figure::StreamDevice, i)),
        );
    }
    println!(
        "targets: instantiate, launch, whole update, node update <= 1.05x driver and <= libcudart"
    );

    // The keep-alive bookkeeping: the same executable on the same stream, launched through the
    // crate and through `cuGraphLaunch` directly, batch by batch in turns.
    let exec = ours.exec.as_raw();
    let stream = ours.stream.as_raw();
    let n = 200u64;
    pair_line(
        "keep-alive: crate launch vs raw, same exec",
        n,
        |crate_side| {
            if crate_side {
                return batch(&mut ours, Figure::Launch, n);
            }
            ours.sync();
            let t = Instant::now();
            for _ in 0..n {
                // SAFETY: the crate's live executable on the crate's live stream; what the graph
                // uses is kept by the crate for as long as the executable lives.
                ck(unsafe { sys::cuGraphLaunch(exec, stream) }, "cuGraphLaunch");
            }
            let dr = t.elapsed();
            ours.sync();
            dr
        },
    );
    println!("target: keep-alive <= 1.05x");

    // The node update against the driver given the arguments as the crate gives them (one
    // packed buffer, not a pointer per argument): what the crate's own work costs.
    let offsets = raw.param_offsets();
    let n = Figure::UpdateNode.batch();
    pair_line(
        "node update: crate vs driver given 1 buffer",
        n,
        |crate_side| {
            if crate_side {
                return batch(&mut ours, Figure::UpdateNode, n);
            }
            raw.sync();
            let t = Instant::now();
            for _ in 0..n {
                raw.update_node_packed(&offsets);
            }
            t.elapsed()
        },
    );
    println!("(no target: the crate's own cost on the driver's faster path)");
}

/// A line after the table: `time(true)` times a batch of `n` of the crate's operations,
/// `time(false)` the same number of the other side's, each going first in turn, for [`REPS`]
/// pairs after one to warm up; prints the medians (µs per operation) and their ratio.
fn pair_line(label: &str, n: u64, mut time: impl FnMut(bool) -> Duration) {
    let (mut v_crate, mut v_other) = (Vec::new(), Vec::new());
    for rep in 0..=REPS {
        // Taking turns going first (`common::turns`).
        let (d, dr) = if rep % 2 == 0 {
            let d = time(true);
            (d, time(false))
        } else {
            let dr = time(false);
            (time(true), dr)
        };
        if rep > 0 {
            v_crate.push(d.as_secs_f64() * 1e6 / n as f64);
            v_other.push(dr.as_secs_f64() * 1e6 / n as f64);
        }
    }
    let (a, b) = (median(v_crate), median(v_other));
    println!(
        "{:<44} {:>12} {:>12} {:>12} {:>10}",
        label,
        show(a),
        show(b),
        "-",
        ratio(a, b)
    );
}
