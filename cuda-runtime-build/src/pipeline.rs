//! The kernel build pipeline: nvcc or the committed PTX, then the generated wrappers.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::kernel_sig;

/// The first line of a committed PTX file starts with this, followed by the sources' hash.
const HASH_PREFIX: &str = "// cuda-runtime-sources-sha256: ";

/// The nvcc options every kernel file is compiled with, for its architecture (`compute_75`, or
/// what its `// cuda-runtime: arch = sm_NN` directives name: [`kernel_sig::file_arch`]).
/// A file marked `// cuda-runtime: device-runtime` ([`kernel_sig::file_device_runtime`]) is
/// compiled with relocatable device code (`-rdc=true`), as `scripts/update-ptx` does.
fn nvcc_args(arch: u32, device_runtime: bool) -> Vec<String> {
    let mut v = vec![
        "-ptx".into(),
        format!("-arch=compute_{arch}"),
        "-O3".into(),
        "-std=c++17".into(),
    ];
    if device_runtime {
        v.insert(1, "-rdc=true".into());
    }
    v
}

/// Builds a crate's kernels: see the [crate docs](crate).
///
/// ```no_run
/// // build.rs: kernels in `gpu/` instead of `kernels/`.
/// fn main() {
///     cuda_runtime_build::Kernels::new().dir("gpu").build();
/// }
/// ```
#[derive(Clone, Debug)]
#[must_use = "nothing is built until `build` is called"]
pub struct Kernels {
    dir: PathBuf,
    out_file: String,
    crate_path: String,
    hidden: Vec<String>,
    regenerate: Option<String>,
    /// For device-runtime kernel files: the Rust path of the crate with the linked images, and
    /// the Cargo feature that enables it.
    linked_images: Option<(String, String)>,
}

impl Default for Kernels {
    fn default() -> Self {
        Kernels::new()
    }
}

fn tool_err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

impl Kernels {
    /// The kernels in `kernels/` of the crate being built, generated into `kernels.rs` in
    /// `OUT_DIR` (what `cuda_runtime::include_kernels!()` includes).
    pub fn new() -> Kernels {
        Kernels {
            dir: PathBuf::from("kernels"),
            out_file: "kernels.rs".into(),
            crate_path: "cuda_runtime".into(),
            hidden: Vec::new(),
            regenerate: None,
            linked_images: None,
        }
    }

    /// The folder of the `.cu` sources, relative to the crate's root (`CARGO_MANIFEST_DIR`)
    /// unless absolute. The committed PTX is in its `ptx/` subfolder.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Kernels {
        self.dir = dir.into();
        self
    }

    /// The name of the generated file in `OUT_DIR` (default `kernels.rs`).
    pub fn out_file(mut self, name: impl Into<String>) -> Kernels {
        self.out_file = name.into();
        self
    }

    /// Source files (by stem) whose modules are generated `#[doc(hidden)]`: kernels for tests
    /// and benchmarks, not for your crate's users.
    pub fn hidden(mut self, stems: &[&str]) -> Kernels {
        self.hidden.extend(stems.iter().map(|s| s.to_string()));
        self
    }

    /// The command the error messages give for regenerating the committed PTX (default: build
    /// with `CUDA_RUNTIME_UPDATE_PTX=1` and an nvcc 13.0).
    pub fn regenerate_hint(mut self, command: impl Into<String>) -> Kernels {
        self.regenerate = Some(command.into());
        self
    }

    /// The path by which the generated code names cuda-runtime (`cuda_runtime`; `crate` in
    /// cuda-runtime itself).
    #[doc(hidden)]
    pub fn crate_path(mut self, path: impl Into<String>) -> Kernels {
        self.crate_path = path.into();
        self
    }

    /// Where the generated code of device-runtime kernel files (`// cuda-runtime:
    /// device-runtime`) finds their images linked ahead of time with the device runtime: the
    /// Rust path of the crate holding them (`::cuda_runtime_devrt`, a module per file with
    /// `FATBIN` and `SOURCES_SHA256`), enabled by the Cargo `feature` of the crate being built.
    /// Only cuda-runtime's own kernels have such images; without this, a device-runtime file
    /// is a build error.
    #[doc(hidden)]
    pub fn device_runtime_images(
        mut self,
        krate: impl Into<String>,
        feature: impl Into<String>,
    ) -> Kernels {
        self.linked_images = Some((krate.into(), feature.into()));
        self
    }

    /// Builds, as [`try_build`](Self::try_build), and on failure prints the error and ends
    /// the build script with a failure (so cargo shows the message without a backtrace).
    pub fn build(self) {
        if let Err(e) = self.try_build() {
            eprintln!("\nerror: {e}\n");
            std::process::exit(1);
        }
    }

    /// Compiles (or takes the committed PTX of) every `.cu` file of the folder, checks each
    /// kernel's parameters against the PTX, and writes the wrappers to `OUT_DIR`. Returns the
    /// generated file's path. Prints the `cargo:` lines a build script prints.
    ///
    /// # Errors
    /// A message naming the file and the problem: a source nvcc rejects with no usable
    /// committed PTX, a changed source without nvcc, a kernel signature or directive the
    /// generator cannot read, a parameter list that differs from the PTX's.
    pub fn try_build(self) -> Result<PathBuf, String> {
        let root = PathBuf::from(
            env::var_os("CARGO_MANIFEST_DIR")
                .ok_or("CARGO_MANIFEST_DIR is not set: call this from a build script")?,
        );
        let out = PathBuf::from(
            env::var_os("OUT_DIR").ok_or("OUT_DIR is not set: call this from a build script")?,
        );
        let kdir = root.join(&self.dir);
        let shown = self.dir.display().to_string();
        println!("cargo:rerun-if-changed={}", kdir.display());
        for var in [
            "NVCC",
            "CUDA_HOME",
            "CUDA_PATH",
            "CUDA_RUNTIME_NO_NVCC",
            "CUDA_RUNTIME_UPDATE_PTX",
        ] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        let update = env::var("CUDA_RUNTIME_UPDATE_PTX").is_ok_and(|v| v == "1");
        let hint = self.regenerate.clone().unwrap_or_else(|| {
            "install nvcc 13.0 and build once with CUDA_RUNTIME_UPDATE_PTX=1".to_string()
        });
        let mut sources: Vec<String> = fs::read_dir(&kdir)
            .map_err(|e| tool_err(&format!("reading the kernel folder {}", kdir.display()), e))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cu"))
            .collect();
        sources.sort();
        let nvcc = find_nvcc(&root);
        let mut generated =
            format!("// Generated by cuda-runtime-build from {shown}/*.cu. Do not edit.\n\n");
        for source in &sources {
            let stem = source.trim_end_matches(".cu");
            if !is_rust_ident(stem) {
                return Err(format!(
                    "{shown}/{source}: the file's stem names the generated module, so it must be a Rust identifier (letters, digits, `_`)"
                ));
            }
            let ptx_out = out.join(format!("{stem}.ptx"));
            let hash = sources_hash(&kdir, source)?;
            let src_text = fs::read_to_string(kdir.join(source))
                .map_err(|e| tool_err(&format!("reading {shown}/{source}"), e))?;
            let arch =
                kernel_sig::file_arch(&src_text).map_err(|e| format!("{shown}/{source}: {e}"))?;
            let device_runtime = kernel_sig::file_device_runtime(&src_text);
            check_device_runtime(
                &format!("{shown}/{source}"),
                device_runtime,
                self.linked_images.is_some(),
            )?;
            let committed = kdir.join("ptx").join(format!("{stem}.ptx"));
            // nvcc when found; the committed PTX when it is not, or when it fails.
            let compiled = nvcc.as_ref().map(|(nvcc, extra)| {
                match Command::new(nvcc)
                    .args(nvcc_args(arch, device_runtime))
                    .args(extra)
                    .arg(kdir.join(source))
                    .arg("-o")
                    .arg(&ptx_out)
                    .output()
                {
                    Ok(o) if o.status.success() => Ok(()),
                    Ok(o) => Err(format!(
                        "{} failed on {shown}/{source}: {}",
                        nvcc.display(),
                        String::from_utf8_lossy(&o.stderr).trim()
                    )),
                    Err(e) => Err(format!("running {}: {e}", nvcc.display())),
                }
            });
            println!("cargo:rerun-if-changed={}", committed.display());
            if let Some(Ok(())) = &compiled {
                if update {
                    let ptx = fs::read_to_string(&ptx_out)
                        .map_err(|e| tool_err(&format!("reading {}", ptx_out.display()), e))?;
                    fs::create_dir_all(kdir.join("ptx"))
                        .map_err(|e| tool_err("creating the ptx folder", e))?;
                    fs::write(&committed, format!("{HASH_PREFIX}{hash}\n{ptx}"))
                        .map_err(|e| tool_err(&format!("writing {}", committed.display()), e))?;
                    println!(
                        "cargo:warning=wrote {shown}/ptx/{stem}.ptx (CUDA_RUNTIME_UPDATE_PTX=1): commit it"
                    );
                }
            } else {
                let why = match &compiled {
                    Some(Err(e)) => format!("{e}\n"),
                    _ => "no nvcc was found; ".to_string(),
                };
                let text = fs::read_to_string(&committed).map_err(|_| {
                    format!(
                        "{why}{shown}/{source} has no committed PTX ({shown}/ptx/{stem}.ptx); to generate it: {hint}"
                    )
                })?;
                let recorded = text
                    .lines()
                    .next()
                    .and_then(|l| l.strip_prefix(HASH_PREFIX))
                    .unwrap_or("");
                if recorded.trim() != hash {
                    return Err(format!(
                        "{why}{shown}/{source} changed since {shown}/ptx/{stem}.ptx was generated; to regenerate it: {hint}"
                    ));
                }
                if let Some(Err(e)) = &compiled {
                    // One line: cargo shows each warning line on its own.
                    let first = e.lines().next().unwrap_or("");
                    println!(
                        "cargo:warning=nvcc failed, using the committed {shown}/ptx/{stem}.ptx (its sources match): {first}"
                    );
                }
                fs::write(&ptx_out, text)
                    .map_err(|e| tool_err(&format!("writing {}", ptx_out.display()), e))?;
            }
            let src = fs::read_to_string(kdir.join(source))
                .map_err(|e| tool_err(&format!("reading {shown}/{source}"), e))?;
            let ptx = fs::read_to_string(&ptx_out)
                .map_err(|e| tool_err(&format!("reading {}", ptx_out.display()), e))?;
            let at = |e: String| format!("{shown}/{source}: {e}");
            let kernels = kernel_sig::parse_kernels(&src).map_err(at)?;
            let entries = kernel_sig::parse_ptx_entries(&ptx).map_err(at)?;
            for k in &kernels {
                kernel_sig::check_against_ptx(k, &entries).map_err(at)?;
            }
            let linked =
                self.linked_images
                    .as_ref()
                    .filter(|_| device_runtime)
                    .map(|(krate, feature)| kernel_sig::LinkedImage {
                        krate,
                        feature,
                        sources_sha256: &hash,
                    });
            let mut code = kernel_sig::generate_with(
                stem,
                source,
                &ptx_out.display().to_string(),
                arch,
                &kernels,
                linked.as_ref(),
            )
            .map_err(at)?;
            if self.crate_path != "crate" {
                code = code.replace("crate::", &format!("{}::", self.crate_path));
            }
            if self.hidden.iter().any(|h| h == stem) {
                generated.push_str("#[doc(hidden)]\n");
            }
            generated.push_str(&code);
            generated.push('\n');
        }
        let file = out.join(&self.out_file);
        fs::write(&file, generated)
            .map_err(|e| tool_err(&format!("writing {}", file.display()), e))?;
        Ok(file)
    }
}

/// Refuses a device-runtime kernel file (`// cuda-runtime: device-runtime`) in a crate without
/// linked images ([`Kernels::device_runtime_images`]: cuda-runtime's own kernels only).
fn check_device_runtime(file: &str, device_runtime: bool, images: bool) -> Result<(), String> {
    if device_runtime && !images {
        return Err(format!(
            "{file} is marked `// cuda-runtime: device-runtime`: its kernels need NVIDIA's device runtime linked in ahead of time, which cuda-runtime-build does only for cuda-runtime's own kernels; remove the directive and load the PTX with `cuda_runtime::Module::from_ptx_with_device_runtime` (it links libcudadevrt.a from a CUDA toolkit at run time)"
        ));
    }
    Ok(())
}

fn is_rust_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s != "_"
}

/// nvcc, looked up in `NVCC`, the crate's pinned `.nvcc/` install, `CUDA_HOME`/`CUDA_PATH`,
/// `/usr/local/cuda`, then `PATH`. `CUDA_RUNTIME_NO_NVCC=1` forces the committed PTX. A change
/// of `PATH` alone does not rerun the build script (every shell and IDE sets its own).
fn find_nvcc(root: &Path) -> Option<(PathBuf, Vec<String>)> {
    if env::var("CUDA_RUNTIME_NO_NVCC").is_ok_and(|v| v == "1") {
        return None;
    }
    if let Ok(p) = env::var("NVCC") {
        return Some((PathBuf::from(p), Vec::new()));
    }
    let local = root.join(".nvcc/nvidia/cu13");
    if local.join("bin/nvcc").is_file() {
        let inc = format!("-I{}", local.join("include/cccl").display());
        return Some((local.join("bin/nvcc"), vec![inc]));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(dir) = env::var(var) {
            let p = Path::new(&dir).join("bin/nvcc");
            if p.is_file() {
                return Some((p, Vec::new()));
            }
        }
    }
    let p = Path::new("/usr/local/cuda/bin/nvcc");
    if p.is_file() {
        return Some((p.to_path_buf(), Vec::new()));
    }
    env::var_os("PATH").and_then(|paths| {
        env::split_paths(&paths)
            .map(|d| d.join("nvcc"))
            .find(|p| p.is_file())
            .map(|p| (p, Vec::new()))
    })
}

/// The local headers a source includes (`#include "x"`), transitively.
fn local_includes(dir: &Path, src: &str, out: &mut Vec<String>) {
    for line in src.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("#include \"") {
            if let Some(name) = rest.split('"').next() {
                if !out.iter().any(|n| n == name) {
                    if let Ok(text) = fs::read_to_string(dir.join(name)) {
                        out.push(name.to_string());
                        local_includes(dir, &text, out);
                    }
                }
            }
        }
    }
}

/// The hash a committed PTX file records: SHA-256 over the sorted file names and contents of
/// `source` (in `dir`) and the local headers it includes (`#include "x"`, transitively): for
/// each, `name NUL content NUL`, in hexadecimal. Prints `cargo:rerun-if-changed` for each file.
///
/// # Errors
/// When `source` cannot be read.
pub fn sources_hash(dir: &Path, source: &str) -> Result<String, String> {
    let text = fs::read_to_string(dir.join(source))
        .map_err(|e| tool_err(&format!("reading {}", dir.join(source).display()), e))?;
    let mut files = vec![source.to_string()];
    local_includes(dir, &text, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
        h.update(f.as_bytes());
        h.update([0]);
        h.update(fs::read(dir.join(f)).unwrap_or_default());
        h.update([0]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_runtime_files_need_linked_images() {
        let e = check_device_runtime("kernels/k.cu", true, false).unwrap_err();
        assert!(
            e.starts_with("kernels/k.cu is marked `// cuda-runtime: device-runtime`"),
            "{e}"
        );
        assert!(e.contains("Module::from_ptx_with_device_runtime"), "{e}");
        check_device_runtime("kernels/k.cu", true, true).unwrap();
        check_device_runtime("kernels/k.cu", false, false).unwrap();
        // Relocatable device code for those files only, as scripts/update-ptx compiles them.
        assert!(nvcc_args(90, true).contains(&"-rdc=true".to_string()));
        assert!(!nvcc_args(75, false).iter().any(|a| a.starts_with("-rdc")));
        assert_eq!(nvcc_args(90, true)[0], "-ptx");
    }

    #[test]
    fn module_names_must_be_identifiers() {
        for ok in ["vector_add", "_x", "k2"] {
            assert!(is_rust_ident(ok), "{ok}");
        }
        for bad in ["vector-add", "2k", "", "_", "a.b", "ä"] {
            assert!(!is_rust_ident(bad), "{bad}");
        }
    }

    #[test]
    fn hash_covers_local_headers_in_name_order() {
        let dir = env::temp_dir().join(format!(
            "cuda-runtime-build-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("k.cu"), "#include \"h.cuh\"\nint k;\n").unwrap();
        fs::write(dir.join("h.cuh"), "int h;\n").unwrap();
        let first = sources_hash(&dir, "k.cu").unwrap();
        // Independent reference: SHA-256 of "h.cuh\0<h>\0k.cu\0<k>\0".
        let mut want = Sha256::new();
        want.update(b"h.cuh\0int h;\n\0k.cu\0#include \"h.cuh\"\nint k;\n\0");
        let want: String = want.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(first, want);
        fs::write(dir.join("h.cuh"), "int h2;\n").unwrap();
        assert_ne!(
            sources_hash(&dir, "k.cu").unwrap(),
            first,
            "a header change"
        );
        assert!(sources_hash(&dir, "missing.cu").is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
