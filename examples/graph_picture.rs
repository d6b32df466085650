//! A picture of a graph: the DOT text the driver writes (`cudaGraphDebugDotPrint`) is saved,
//! read back, checked against the graph's own node and edge lists, and drawn as a PNG with a
//! simple layered layout (no Graphviz needed): each node in the row of its longest path from a
//! root, coloured by its kind, edges as lines from the bottom of a node to the top of the
//! next.
//!
//! `cargo run --example graph_picture [DIR]` writes `DIR/graph.dot` and `DIR/graph.png`
//! (default: the system's temporary folder). It also launches the graph and checks its result.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cuda_runtime::graph::{DotFlags, Graph, MemsetValue};
use cuda_runtime::{kernel_args, kernels, DeviceBuffer, Event, LaunchConfig, Module, Stream};

/// One token of DOT text.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// An identifier, number or quoted string (unquoted), with whether it was quoted.
    Id(String, bool),
    Sym(&'static str),
}

fn tokenize(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let c: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '"' {
            let mut v = String::new();
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    v.push(c[i + 1]);
                    i += 2;
                } else {
                    v.push(c[i]);
                    i += 1;
                }
            }
            i += 1;
            out.push(Tok::Id(v, true));
        } else if ch == '-' && c.get(i + 1) == Some(&'>') {
            out.push(Tok::Sym("->"));
            i += 2;
        } else if let Some(sym) = ["{", "}", "[", "]", "=", ";", ","]
            .into_iter()
            .find(|s| s.starts_with(ch))
        {
            out.push(Tok::Sym(sym));
            i += 1;
        } else {
            let mut v = String::new();
            let ends = |i: usize| {
                i >= c.len()
                    || c[i].is_whitespace()
                    || "{}[]=;,\"".contains(c[i])
                    || (c[i] == '-' && c.get(i + 1) == Some(&'>'))
            };
            while !ends(i) {
                v.push(c[i]);
                i += 1;
            }
            out.push(Tok::Id(v, false));
        }
    }
    out
}

/// Two names: a node's (name, label), or an edge's (from, to).
type Pair = (String, String);

/// Nodes (name, label) and edges (from, to) of DOT text; subgraph and attribute statements
/// are skipped.
fn parse_dot(text: &str) -> (Vec<Pair>, Vec<Pair>) {
    let t = tokenize(text);
    let (mut nodes, mut edges): (Vec<Pair>, Vec<Pair>) = (vec![], vec![]);
    let mut i = 0;
    // Reads `[k = v, ...]` from `i`, returning the label.
    let attrs = |i: &mut usize| -> String {
        let mut label = String::new();
        if t.get(*i) != Some(&Tok::Sym("[")) {
            return label;
        }
        *i += 1;
        while *i < t.len() && t[*i] != Tok::Sym("]") {
            if let (Some(Tok::Id(k, _)), Some(Tok::Sym("=")), Some(Tok::Id(v, _))) =
                (t.get(*i), t.get(*i + 1), t.get(*i + 2))
            {
                if k == "label" {
                    label = v.clone();
                }
                *i += 3;
            } else {
                *i += 1;
            }
        }
        *i += 1;
        label
    };
    while i < t.len() {
        match &t[i] {
            Tok::Id(k, false) if k == "digraph" || k == "subgraph" => {
                // `digraph NAME {` / `subgraph NAME {`
                i += 1;
                while i < t.len() && t[i] != Tok::Sym("{") {
                    i += 1;
                }
                i += 1;
            }
            Tok::Id(k, false) if k == "graph" || k == "node" || k == "edge" => {
                i += 1;
                attrs(&mut i);
            }
            Tok::Id(a, quoted) => {
                let a = a.clone();
                if t.get(i + 1) == Some(&Tok::Sym("=")) {
                    // A graph attribute `k = v`.
                    i += 3;
                } else if t.get(i + 1) == Some(&Tok::Sym("->")) {
                    let mut from = a;
                    i += 2;
                    while let Some(Tok::Id(b, _)) = t.get(i) {
                        edges.push((from.clone(), b.clone()));
                        from = b.clone();
                        i += 1;
                        if t.get(i) == Some(&Tok::Sym("->")) {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    attrs(&mut i);
                } else {
                    i += 1;
                    let label = attrs(&mut i);
                    if *quoted || !label.is_empty() {
                        nodes.push((a, label));
                    }
                }
            }
            Tok::Sym(_) => i += 1,
        }
    }
    (nodes, edges)
}

/// The colour of a node by the kind its label names.
fn colour(label: &str) -> [u8; 3] {
    let l = label.to_ascii_lowercase();
    for (key, c) in [
        ("kernel", [66, 133, 244]),
        ("memcpy", [52, 168, 83]),
        ("memset", [251, 188, 5]),
        ("host", [234, 67, 53]),
        ("event", [171, 71, 188]),
        ("empty", [160, 160, 160]),
    ] {
        if l.contains(key) {
            return c;
        }
    }
    [90, 90, 90]
}

/// Draws the layered layout: returns RGB pixels and the size.
fn draw(nodes: &[(String, String)], edges: &[(String, String)]) -> (Vec<u8>, usize, usize) {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();
    let e: Vec<(usize, usize)> = edges
        .iter()
        .filter_map(|(a, b)| Some((*index.get(a.as_str())?, *index.get(b.as_str())?)))
        .collect();
    // Longest path from a root (the graph is acyclic: at most n rounds).
    let mut layer = vec![0usize; nodes.len()];
    for _ in 0..nodes.len() {
        let mut changed = false;
        for &(a, b) in &e {
            if layer[b] < layer[a] + 1 {
                layer[b] = layer[a] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let rows = layer.iter().max().map_or(1, |m| m + 1);
    let mut slot = vec![0usize; nodes.len()];
    let mut per_row = vec![0usize; rows];
    for (i, &l) in layer.iter().enumerate() {
        slot[i] = per_row[l];
        per_row[l] += 1;
    }
    let cols = per_row.iter().copied().max().unwrap_or(1).max(1);
    let (bw, bh, gx, gy) = (120usize, 48usize, 40usize, 60usize);
    let w = cols * (bw + gx) + gx;
    let h = rows * (bh + gy) + gy;
    let mut px = vec![255u8; w * h * 3];
    let centre = |i: usize| {
        let row_w = per_row[layer[i]] * (bw + gx) - gx;
        let x0 = (w - row_w) / 2 + slot[i] * (bw + gx);
        let y0 = gy + layer[i] * (bh + gy);
        (x0, y0)
    };
    let put = |x: i64, y: i64, c: [u8; 3], px: &mut Vec<u8>| {
        if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
            let o = (y as usize * w + x as usize) * 3;
            px[o..o + 3].copy_from_slice(&c);
        }
    };
    for &(a, b) in &e {
        let (ax, ay) = centre(a);
        let (bx, by) = centre(b);
        let (x0, y0) = ((ax + bw / 2) as i64, (ay + bh) as i64);
        let (x1, y1) = ((bx + bw / 2) as i64, by as i64);
        let steps = (x1 - x0).abs().max(y1 - y0).max(1);
        for s in 0..=steps {
            let x = x0 + (x1 - x0) * s / steps;
            let y = y0 + (y1 - y0) * s / steps;
            put(x, y, [0, 0, 0], &mut px);
            put(x + 1, y, [0, 0, 0], &mut px);
        }
        // An arrow head: a small block above the target.
        for dy in 0..6 {
            for dx in -(6 - dy)..=(6 - dy) {
                put(x1 + dx, y1 - 1 - dy, [0, 0, 0], &mut px);
            }
        }
    }
    for (i, (_, label)) in nodes.iter().enumerate() {
        let (x0, y0) = centre(i);
        let c = colour(label);
        for y in y0..y0 + bh {
            for x in x0..x0 + bw {
                let edge = y < y0 + 2 || y >= y0 + bh - 2 || x < x0 + 2 || x >= x0 + bw - 2;
                put(
                    x as i64,
                    y as i64,
                    if edge { [0, 0, 0] } else { c },
                    &mut px,
                );
            }
        }
    }
    (px, w, h)
}

fn run() -> Result<bool, String> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let e = |x: cuda_runtime::Error| x.to_string();
    let n = 1 << 16;
    let a: Vec<f32> = (0..n).map(|i| (i % 101) as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 37) as f32 - 18.0).collect();
    let module = Module::from_ptx(kernels::vector_add::PTX).map_err(e)?;
    let vadd = module.function("vadd").map_err(e)?;
    let cfg = LaunchConfig::for_elements(n, 256).map_err(e)?;
    let (da, db) = (
        DeviceBuffer::from_slice(&a).map_err(e)?,
        DeviceBuffer::from_slice(&b).map_err(e)?,
    );
    let mut c = DeviceBuffer::<f32>::new(n).map_err(e)?;
    let mut d = DeviceBuffer::<f32>::new(n).map_err(e)?;
    let mut flags = DeviceBuffer::<u32>::new(n).map_err(e)?;
    let calls = Arc::new(AtomicUsize::new(0));
    let event = Arc::new(Event::new().map_err(e)?);

    // A diamond and a tail: memset and kernel side by side, joined, copied, then a host node
    // and an event record.
    let mut g = Graph::new().map_err(e)?;
    let set = g
        .add_memset_node(&[], &mut flags, MemsetValue::U32(1))
        .map_err(e)?;
    // SAFETY: vadd stays below the lengths passed with the buffers.
    let k =
        unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&da, n, &db, n, &mut c, n]) }
            .map_err(e)?;
    let join = g.add_empty_node(&[set, k]).map_err(e)?;
    let copy = g.add_memcpy_node(&[join], &mut d, &c).map_err(e)?;
    let counter = calls.clone();
    let host = g
        .add_host_node(&[copy], move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .map_err(e)?;
    g.add_event_record_node(&[host], &event).map_err(e)?;

    let dot_path = dir.join("graph.dot");
    g.debug_dot_print(&dot_path, DotFlags::VERBOSE).map_err(e)?;
    let text = std::fs::read_to_string(&dot_path).map_err(|x| x.to_string())?;
    let (dot_nodes, dot_edges) = parse_dot(&text);
    let (api_nodes, api_edges) = (g.nodes().map_err(e)?, g.edges().map_err(e)?);
    println!(
        "DOT: {} nodes, {} edges; the graph: {} nodes, {} edges",
        dot_nodes.len(),
        dot_edges.len(),
        api_nodes.len(),
        api_edges.len()
    );
    let mut ok = dot_nodes.len() == api_nodes.len() && dot_edges.len() == api_edges.len();
    // Every edge joins two nodes the DOT declares.
    let names: Vec<&str> = dot_nodes.iter().map(|(n, _)| n.as_str()).collect();
    ok &= dot_edges
        .iter()
        .all(|(a, b)| names.contains(&a.as_str()) && names.contains(&b.as_str()));

    let (px, w, h) = draw(&dot_nodes, &dot_edges);
    let png_path = dir.join("graph.png");
    let file = std::fs::File::create(&png_path).map_err(|x| x.to_string())?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|x| x.to_string())?;
    writer.write_image_data(&px).map_err(|x| x.to_string())?;
    writer.finish().map_err(|x| x.to_string())?;
    println!(
        "wrote {} and {} ({w} x {h})",
        dot_path.display(),
        png_path.display()
    );

    // The graph runs, too.
    let exec = g.instantiate().map_err(e)?;
    let s = Stream::new().map_err(e)?;
    exec.launch(&s).map_err(e)?;
    s.synchronize().map_err(e)?;
    let got = d.to_vec().map_err(e)?;
    let bad = got
        .iter()
        .zip(a.iter().zip(&b))
        .filter(|(g, (x, y))| **g != *x + *y)
        .count();
    let set_ok = flags.to_vec().map_err(e)?.iter().all(|&f| f == 1);
    println!(
        "launch: {bad} mismatches, memset {}, host node called {} time(s)",
        if set_ok { "ok" } else { "WRONG" },
        calls.load(Ordering::SeqCst)
    );
    ok &= bad == 0 && set_ok && calls.load(Ordering::SeqCst) == 1;
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("graph_picture: mismatch");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("graph_picture: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{colour, draw, parse_dot};

    #[test]
    fn a_chain_is_drawn_in_one_column_of_rows_with_its_colours() {
        let n = |s: &str, l: &str| (s.to_string(), l.to_string());
        let nodes = vec![n("a", "KERNEL"), n("b", "MEMCPY"), n("c", "HOST")];
        let edges = vec![n("a", "b"), n("b", "c")];
        let (px, w, h) = draw(&nodes, &edges);
        assert_eq!((w, h), (120 + 2 * 40, 3 * (48 + 60) + 60));
        assert_eq!(px.len(), w * h * 3);
        for l in ["KERNEL", "MEMCPY", "HOST"] {
            let c = colour(l);
            assert!(px.chunks(3).any(|p| p == c), "{l} not drawn");
        }
    }

    #[test]
    fn parses_nodes_edges_and_skips_attributes() {
        let text = r#"digraph dot {
subgraph cluster_1 {
label="graph_1" graph[style="dashed"];
"graph_1_node_0"[style="solid" shape="rectangle" label="0
KERNEL
vadd"];
"graph_1_node_1"[label="1
MEMCPY"];
"graph_1_node_0" -> "graph_1_node_1";
}
}"#;
        let (nodes, edges) = parse_dot(text);
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        assert!(nodes[0].1.contains("KERNEL"));
        assert_eq!(
            edges,
            vec![("graph_1_node_0".to_string(), "graph_1_node_1".to_string())]
        );
    }
}
