//! The built library exports exactly the 422 functions of NVIDIA's libcudart 13.0.96
//! (`exports.txt`), each under the version node `libcudart.so.13`, and has its SONAME. Reads the
//! library with binutils' `nm` and `readelf` (present wherever a Rust toolchain links).
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn library() -> Option<PathBuf> {
    // target/<profile>/deps/exports-<hash> -> target/<profile>/libcudart.so
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let lib = dir.join("libcudart.so");
    if lib.exists() {
        return Some(lib);
    }
    // The GPU machine runs test binaries copied out of the build tree (its runner sets
    // CUDA_RUNTIME_REQUIRE_GPU): this check belongs to the build tree, where CI runs it.
    if std::env::var_os("CUDA_RUNTIME_REQUIRE_GPU").is_some() {
        eprintln!(
            "exports check skipped: no build tree here ({} absent)",
            lib.display()
        );
        return None;
    }
    // `cargo test` builds a cdylib's integration tests without the library itself: build it,
    // into the same target directory and profile.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = dir.parent().unwrap();
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--lib",
        "-p",
        "cuda-runtime-cudart",
        "--manifest-path",
    ])
    .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
    .arg("--target-dir")
    .arg(target_dir);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("running cargo to build libcudart.so");
    assert!(status.success(), "building libcudart.so failed");
    assert!(lib.exists(), "{} not built", lib.display());
    Some(lib)
}

fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {name} (binutils): {e}"));
    assert!(out.status.success(), "{name} {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn exports_match_libcudart_13_0_96_with_its_version() {
    let Some(lib) = library() else { return };
    let want: BTreeSet<String> = include_str!("../exports.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    assert_eq!(want.len(), 422);
    let nm = tool(
        "nm",
        &[
            "-D",
            "--defined-only",
            "--with-symbol-versions",
            lib.to_str().unwrap(),
        ],
    );
    let mut got = BTreeSet::new();
    for line in nm.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (kind, sym) = (f[f.len() - 2], f[f.len() - 1]);
        if kind != "T" {
            continue;
        }
        let name = sym
            .strip_suffix("@@libcudart.so.13")
            .unwrap_or_else(|| panic!("{sym} is not versioned libcudart.so.13"));
        got.insert(name.to_string());
    }
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
    assert!(extra.is_empty(), "exported but not libcudart's: {extra:?}");
    let dynamic = tool("readelf", &["-d", "-W", lib.to_str().unwrap()]);
    assert!(
        dynamic.contains("Library soname: [libcudart.so.13]"),
        "SONAME: {dynamic}"
    );
}
