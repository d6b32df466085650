//! The same computation three ways, as NVIDIA's simpleCudaGraphs compares them: launches on a
//! stream, and an explicit graph launched many times; each checked against the CPU.
//!
//! The graph: `c = a + b` (a kernel node), `d = c` (a copy node), `e = pattern` (a memset node
//! beside them), joined by an empty node. The buffers the graph uses are kept alive by it: the
//! inputs are dropped right after instantiation here, and every launch still reads them.

use std::process::ExitCode;

use cuda_runtime::graph::{DotFlags, Graph, MemsetValue};
use cuda_runtime::{kernel_args, kernels, DeviceBuffer, LaunchConfig, Module, Stream};

fn run() -> Result<bool, cuda_runtime::Error> {
    let n = 1 << 20;
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 500.0).collect();
    let b: Vec<f32> = (0..n).map(|i| ((i * 7) % 333) as f32).collect();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let pattern = 0x5EED_1234u32;

    let module = Module::from_ptx(kernels::vector_add::PTX)?;
    let vadd = module.function("vadd")?;
    let cfg = LaunchConfig::for_elements(n, 256)?;
    let stream = Stream::new()?;

    // 1. On a stream.
    let da = DeviceBuffer::from_slice(&a)?;
    let db = DeviceBuffer::from_slice(&b)?;
    let mut dc = DeviceBuffer::<f32>::new(n)?;
    // SAFETY: vadd touches a, b, c below the smallest of the lengths passed with them.
    unsafe { vadd.launch(&stream, &cfg, &kernel_args![&da, n, &db, n, &mut dc, n]) }?;
    let on_stream = dc.to_vec()?;

    // 2. As an explicit graph.
    let mut c = DeviceBuffer::<f32>::new(n)?;
    let mut d = DeviceBuffer::<f32>::new(n)?;
    let mut e = DeviceBuffer::<u32>::new(n)?;
    d.fill(f32::NAN)?;
    let mut graph = Graph::new()?;
    // SAFETY: as above.
    let k = unsafe {
        graph.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&da, n, &db, n, &mut c, n])
    }?;
    let copy = graph.add_memcpy_node(&[k], &mut d, &c)?;
    let set = graph.add_memset_node(&[], &mut e, MemsetValue::U32(pattern))?;
    graph.add_empty_node(&[copy, set])?;
    let dot = graph.to_dot(DotFlags::empty())?;
    println!("the graph in DOT ({} lines):\n{dot}", dot.lines().count());
    let exec = graph.instantiate()?;
    // The graph keeps what its nodes use: the inputs, the module and the graph may go now.
    drop((da, db, dc, module, vadd, graph));
    let launches = 20;
    for _ in 0..launches {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;
    let via_graph = d.to_vec()?;
    let filled = e.to_vec()?;

    let bad_stream = on_stream.iter().zip(&want).filter(|(x, y)| x != y).count();
    let bad_graph = via_graph.iter().zip(&want).filter(|(x, y)| x != y).count();
    let bad_fill = filled.iter().filter(|&&x| x != pattern).count();
    println!(
        "simple_cuda_graphs: {n} elements; stream: {bad_stream} mismatches; graph ({launches} \
         launches): {bad_graph} mismatches, memset node: {bad_fill} mismatches"
    );
    Ok(bad_stream == 0 && bad_graph == 0 && bad_fill == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("simple_cuda_graphs: {e}");
            ExitCode::FAILURE
        }
    }
}
