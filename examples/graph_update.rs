//! A parameter sweep through executable-graph updates, each result checked against the CPU.
//!
//! The graph: `y = y0` (a copy node), then `y = a * x + y` (a kernel node: the example user
//! crate's `saxpy`), then `out = y` (a copy node). It is instantiated once; then
//!
//! 1. for each `a` of a sweep, only the kernel node's argument changes
//!    (`GraphExec::set_kernel_node_params`, `cudaGraphExecKernelNodeSetParams`);
//! 2. the copy nodes are pointed at other buffers (`set_memcpy_node_params`,
//!    `cudaGraphExecMemcpyNodeSetParams`), the old ones dropped right after: the executable
//!    keeps what its nodes use;
//! 3. the whole executable is updated from a second graph of the same shape
//!    (`GraphExec::update`, `cudaGraphExecUpdate`).
//!
//! Every launch's `out` is compared with `a * x + y0` computed on the CPU.

use std::process::ExitCode;

use cuda_runtime::graph::Graph;
use cuda_runtime::{kernel_args, DeviceBuffer, Function, LaunchConfig, Module, Stream};

/// Small integers as floats, so that `a * x + y` is exact for small integer `a`.
fn ints(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 200) as f32 - 100.0
        })
        .collect()
}

fn mismatches(got: &[f32], x: &[f32], y0: &[f32], a: f32) -> usize {
    got.iter()
        .zip(x.iter().zip(y0))
        .filter(|(g, (x, y))| **g != a * **x + **y)
        .count()
}

struct Buffers {
    y0: DeviceBuffer<f32>,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    out: DeviceBuffer<f32>,
}

/// The three-node graph over `b` with the kernel's `a`; its nodes in order.
fn build(
    saxpy: &Function,
    cfg: &LaunchConfig,
    b: &mut Buffers,
    a: f32,
) -> cuda_runtime::Result<(Graph, [cuda_runtime::GraphNode; 3])> {
    let n = b.x.len();
    let mut g = Graph::new()?;
    let reset = g.add_memcpy_node(&[], &mut b.y, &b.y0)?;
    // SAFETY: saxpy touches y and x below the smaller of the lengths passed with them.
    let k =
        unsafe { g.add_kernel_node(&[reset], saxpy, cfg, &kernel_args![&mut b.y, n, &b.x, n, a]) }?;
    let out = g.add_memcpy_node(&[k], &mut b.out, &b.y)?;
    Ok((g, [reset, k, out]))
}

fn run() -> cuda_runtime::Result<bool> {
    let n = 1 << 18;
    let (hx, hy0) = (ints(n, 1), ints(n, 2));
    let module = Module::from_ptx(user_kernels::saxpy::PTX)?;
    let saxpy = module.function("saxpy")?;
    let cfg = LaunchConfig::for_elements(n, 256)?;
    let stream = Stream::new()?;
    let mut b = Buffers {
        y0: DeviceBuffer::from_slice(&hy0)?,
        x: DeviceBuffer::from_slice(&hx)?,
        y: DeviceBuffer::<f32>::new(n)?,
        out: DeviceBuffer::<f32>::new(n)?,
    };
    let (graph, [_, k, out_node]) = build(&saxpy, &cfg, &mut b, 0.0)?;
    let mut exec = graph.instantiate()?;
    let mut ok = true;

    // 1. The sweep: one kernel-node update per value.
    let sweep = [-3.0f32, -1.0, 0.5, 2.0, 7.0, 11.0];
    for &a in &sweep {
        // SAFETY: as in `build`.
        unsafe {
            exec.set_kernel_node_params(k, &saxpy, &cfg, &kernel_args![&mut b.y, n, &b.x, n, a])
        }?;
        b.out.fill(f32::NAN)?;
        exec.launch(&stream)?;
        stream.synchronize()?;
        let bad = mismatches(&b.out.to_vec()?, &hx, &hy0, a);
        println!("a = {a:>5}: {bad} mismatches");
        ok &= bad == 0;
    }

    // 2. The output copy goes to a new buffer; the old one is dropped at once.
    let last = *sweep.last().unwrap_or(&0.0);
    let mut out2 = DeviceBuffer::from_slice(&vec![f32::NAN; n])?;
    exec.set_memcpy_node_params(out_node, &mut out2, &b.y)?;
    drop(std::mem::replace(&mut b.out, DeviceBuffer::<f32>::new(n)?));
    exec.launch(&stream)?;
    stream.synchronize()?;
    let bad = mismatches(&out2.to_vec()?, &hx, &hy0, last);
    println!("copy node re-pointed: {bad} mismatches");
    ok &= bad == 0;

    // 3. A whole update from a second graph with other buffers and a = 4.
    let (hx2, hy2) = (ints(n, 3), ints(n, 4));
    let mut b2 = Buffers {
        y0: DeviceBuffer::from_slice(&hy2)?,
        x: DeviceBuffer::from_slice(&hx2)?,
        y: DeviceBuffer::<f32>::new(n)?,
        out: DeviceBuffer::from_slice(&vec![f32::NAN; n])?,
    };
    let (graph2, _) = build(&saxpy, &cfg, &mut b2, 4.0)?;
    exec.update(&graph2)?;
    drop(graph2);
    exec.launch(&stream)?;
    stream.synchronize()?;
    let bad = mismatches(&b2.out.to_vec()?, &hx2, &hy2, 4.0);
    println!("whole-graph update: {bad} mismatches");
    ok &= bad == 0;
    println!(
        "graph_update: {} launches of one executable, {}",
        sweep.len() + 2,
        if ok { "all correct" } else { "MISMATCHES" }
    );
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("graph_update: {e}");
            ExitCode::FAILURE
        }
    }
}
