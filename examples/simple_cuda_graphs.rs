//! The same computation three ways, as NVIDIA's simpleCudaGraphs compares them: launches on a
//! stream, an explicit graph, and a graph made by stream capture, each graph launched many
//! times; each result checked against the CPU.
//!
//! The explicit graph: `c = a + b` (a kernel node), `d = c` (a copy node), `e = pattern` (a
//! memset node beside them), joined by an empty node. The captured graph does the same work
//! queued on two streams while they are captured: the origin stream forks to a second stream by
//! an event (the kernel and the copy run there, beside the memset), joins it back by another
//! event, and ends with a host function that counts the replays. The buffers a graph uses are
//! kept alive by it: the inputs are dropped right after instantiation here, and every launch
//! still reads them.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cuda_runtime::graph::{CaptureMode, DotFlags, Graph, MemsetValue};
use cuda_runtime::{
    kernel_args, kernels, DeviceBuffer, Event, EventFlags, LaunchConfig, Module, Stream,
    StreamFlags,
};

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

    // 3. Through stream capture: the same work, queued while the streams are captured.
    let module = Module::from_ptx(kernels::vector_add::PTX)?;
    let vadd = module.function("vadd")?;
    let ca = DeviceBuffer::from_slice(&a)?;
    let cb = DeviceBuffer::from_slice(&b)?;
    let mut cc = DeviceBuffer::<f32>::new(n)?;
    let mut cd = DeviceBuffer::<f32>::new(n)?;
    let mut ce = DeviceBuffer::<u32>::new(n)?;
    cd.fill(f32::NAN)?;
    ce.fill(0)?;
    let side = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let fork = Event::with_flags(EventFlags::DISABLE_TIMING)?;
    let join = Event::with_flags(EventFlags::DISABLE_TIMING)?;
    let replays = Arc::new(AtomicUsize::new(0));
    let counter = replays.clone();
    let captured = stream.capture(CaptureMode::Global, |s| {
        fork.record(s)?;
        side.wait_event(&fork)?; // `side` joins the capture
                                 // SAFETY: as above.
        unsafe { vadd.launch(&side, &cfg, &kernel_args![&ca, n, &cb, n, &mut cc, n]) }?;
        cd.copy_from_device_async(&cc, &side)?;
        ce.memset_u32_async(pattern, s)?;
        join.record(&side)?;
        s.wait_event(&join)?; // and is joined back before the end
                              // A host function in a graph runs at every replay: an `Fn` the graph keeps.
        s.launch_host_fn_replayable(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
    })?;
    println!("the captured graph has {} nodes", captured.nodes()?.len());
    let cexec = captured.instantiate()?;
    drop((ca, cb, cc, module, vadd, captured));
    for _ in 0..launches {
        cexec.launch(&stream)?;
    }
    stream.synchronize()?;
    let via_capture = cd.to_vec()?;
    let captured_fill = ce.to_vec()?;
    let host_calls = replays.load(Ordering::SeqCst);

    let bad_stream = on_stream.iter().zip(&want).filter(|(x, y)| x != y).count();
    let bad_graph = via_graph.iter().zip(&want).filter(|(x, y)| x != y).count();
    let bad_fill = filled.iter().filter(|&&x| x != pattern).count();
    let bad_capture = via_capture
        .iter()
        .zip(&want)
        .filter(|(x, y)| x != y)
        .count();
    let bad_cfill = captured_fill.iter().filter(|&&x| x != pattern).count();
    println!(
        "simple_cuda_graphs: {n} elements; stream: {bad_stream} mismatches; graph ({launches} \
         launches): {bad_graph} mismatches, memset node: {bad_fill} mismatches; captured graph \
         ({launches} launches): {bad_capture} mismatches, memset: {bad_cfill} mismatches, host \
         function ran {host_calls} times"
    );
    Ok(bad_stream == 0
        && bad_graph == 0
        && bad_fill == 0
        && bad_capture == 0
        && bad_cfill == 0
        && host_calls == launches)
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
