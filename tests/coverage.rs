//! The runtime coverage count the project keeps (issue 14): which of libcudart 13.0's functions
//! have a row in the README's table "From CUDA C++ to this crate".
//!
//! `coverage/runtime-functions.tsv` lists every function `cuda_runtime_api.h` of
//! nvidia-cuda-runtime 13.0.96 declares (deprecated ones aside), with its reference-manual
//! module. A name counts as covered when the first column of a table row names it. The test
//! prints the count per module, fails on a table name that is not a runtime function (a typo),
//! and fails if the count falls below the floor recorded here (raise it as rows are added).
use std::collections::{BTreeMap, BTreeSet};

/// Covered functions at the last count, graphics interop excluded.
const FLOOR: usize = 300;

fn table_names(readme: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut in_table = false;
    for line in readme.lines() {
        if line.starts_with("## ") {
            in_table = line.starts_with("## From CUDA C++ to this crate");
            continue;
        }
        if !in_table || !line.starts_with('|') {
            continue;
        }
        let first = line.split('|').nth(1).unwrap_or("");
        for part in first.split('`').skip(1).step_by(2) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.starts_with("cuda") {
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn runtime_functions_with_a_readme_row() {
    let list = include_str!("../coverage/runtime-functions.tsv");
    let mut modules: BTreeMap<&str, (String, Vec<&str>)> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for line in list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 3, "bad line: {line}");
        modules
            .entry(f[1])
            .or_insert_with(|| (f[2].to_string(), Vec::new()))
            .1
            .push(f[0]);
        all.insert(f[0].to_string());
    }
    assert_eq!(all.len(), 307, "the 13.0 header declares 307 functions");
    let readme = include_str!("../README.md");
    let rows = table_names(readme);
    // Names in the table that are not functions of the list: the profiler's two
    // (cuda_profiler_api.h), the C++ API of cuda_runtime.h, and constants; anything else is a
    // typo.
    const OTHER_RUNTIME_NAMES: &[&str] = &[
        "cudaProfilerStart",
        "cudaProfilerStop",
        "cudaOccupancyMaxPotentialBlockSize",
        "cudaOccupancyMaxPotentialBlockSizeVariableSMem",
        "cudaOccupancyMaxPotentialBlockSizeWithFlags",
        "cudaLaunchKernelEx",
        "cudaStreamLegacy",
        "cudaStreamPerThread",
        "cudaArrayLayered",
        "cudaArrayCubemap",
        "cudaArraySurfaceLoadStore",
        "cudaArrayTextureGather",
        "cudaKernel_t",
    ];
    let unknown: Vec<_> = rows
        .iter()
        .filter(|n| !all.contains(*n) && !OTHER_RUNTIME_NAMES.contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "README rows naming no runtime function: {unknown:?}"
    );
    let (mut covered, mut total) = (0, 0);
    println!("{:<28} {:>8}  module", "reference module", "rows");
    for (module, (title, names)) in &modules {
        let have = names.iter().filter(|n| rows.contains(**n)).count();
        println!("{module:<28} {have:>3}/{:<4}  {title}", names.len());
        if *module != "CUDART_INTEROP" {
            covered += have;
            total += names.len();
        }
    }
    println!("covered: {covered} of {total} (graphics interop excluded; target 285)");
    assert_eq!(total, 300);
    assert!(
        covered >= FLOOR,
        "coverage fell to {covered} (floor {FLOOR}): a README row was lost"
    );
}
