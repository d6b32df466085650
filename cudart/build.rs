//! Gives the library the SONAME and symbol version of NVIDIA's (`libcudart.so.13`), and writes
//! a stub for every export of libcudart 13.0.96 (`exports.txt`) that `src/` does not implement.
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("reading src/").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Names of exports defined in the sources: `fn cuda...(` / `fn __cuda...(`.
fn implemented(src: &str, into: &mut BTreeSet<String>) {
    let mut rest = src;
    while let Some(i) = rest.find("fn ") {
        rest = &rest[i + 3..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if (name.starts_with("cuda") || name.starts_with("__cuda"))
            && rest[name.len()..].trim_start().starts_with('(')
        {
            into.insert(name);
        }
    }
}

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let list = std::fs::read_to_string(here.join("exports.txt")).expect("exports.txt");
    let exports: BTreeSet<String> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let mut files = Vec::new();
    rust_files(&here.join("src"), &mut files);
    let mut done = BTreeSet::new();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        implemented(&std::fs::read_to_string(f).unwrap(), &mut done);
    }
    println!("cargo:rerun-if-changed=exports.txt");
    let unknown: Vec<_> = done.difference(&exports).collect();
    assert!(
        unknown.is_empty(),
        "defined but not exported by libcudart 13.0.96: {unknown:?}"
    );
    let mut stubs = String::new();
    for name in exports.difference(&done) {
        writeln!(stubs, "stub!({name});").unwrap();
    }
    std::fs::write(out.join("stubs.rs"), stubs).unwrap();
    std::fs::write(
        out.join("counts.rs"),
        format!(
            "/// Exports implemented.\npub const IMPLEMENTED: usize = {};\n/// Exports of libcudart 13.0.96.\npub const EXPORTS: usize = {};\n",
            done.len(),
            exports.len()
        ),
    )
    .unwrap();
    // One version node, as NVIDIA's library; each export is bound to it with `.symver`.
    let map = out.join("libcudart.map");
    std::fs::write(&map, "libcudart.so.13 { };\n").unwrap();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcudart.so.13");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
}
