//! Kernel signatures: parsing `extern "C" __global__` declarations from CUDA sources, checking
//! them against the PTX, and generating the typed launch wrappers. Used by `build.rs`, and
//! compiled into the library's unit tests so that it is tested everywhere.

use std::fmt::Write as _;

/// A scalar C type a kernel parameter (or a pointer's element) may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    Usize,
    F32,
    F64,
    Bool,
}

impl Scalar {
    fn from_c(tokens: &[&str]) -> Option<Scalar> {
        let t = tokens.join(" ");
        Some(match t.as_str() {
            "char" | "signed char" | "int8_t" => Scalar::I8,
            "unsigned char" | "uint8_t" => Scalar::U8,
            "short" | "signed short" | "short int" | "int16_t" => Scalar::I16,
            "unsigned short" | "unsigned short int" | "uint16_t" => Scalar::U16,
            "int" | "signed" | "signed int" | "int32_t" => Scalar::I32,
            "unsigned" | "unsigned int" | "uint32_t" => Scalar::U32,
            "long long" | "long long int" | "signed long long" | "int64_t" => Scalar::I64,
            "unsigned long long" | "unsigned long long int" | "uint64_t" => Scalar::U64,
            "size_t" => Scalar::Usize,
            "float" => Scalar::F32,
            "double" => Scalar::F64,
            "bool" => Scalar::Bool,
            _ => return None,
        })
    }

    /// Size in bytes on the device.
    pub fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 | Scalar::Bool => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::Usize | Scalar::F64 => 8,
        }
    }

    /// The Rust type.
    pub fn rust(self) -> &'static str {
        match self {
            Scalar::I8 => "i8",
            Scalar::U8 => "u8",
            Scalar::I16 => "i16",
            Scalar::U16 => "u16",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::Usize => "usize",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::Bool => "bool",
        }
    }
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub ty: Scalar,
    /// `T*` (the element type is `ty`).
    pub pointer: bool,
    /// `const T*`.
    pub is_const: bool,
}

impl Param {
    /// Size in bytes of the parameter itself.
    pub fn size(&self) -> usize {
        if self.pointer {
            8
        } else {
            self.ty.size()
        }
    }
}

/// One `extern "C" __global__` kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// Marked `// cuda-runtime: unsafe`: its wrapper is an `unsafe fn` taking raw addresses.
    pub is_unsafe: bool,
    /// The comment lines right above the declaration.
    pub doc: Vec<String>,
    /// The declaration as written, on one line.
    pub signature: String,
}

/// Removes `//` and `/* */` comments, keeping line breaks.
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else {
            let ch = s[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn parse_param(kernel: &str, text: &str) -> Result<Param, String> {
    let spaced = text.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
    let name = tokens
        .pop()
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| format!("kernel {kernel}: cannot read parameter `{}`", text.trim()))?;
    let stars = tokens.iter().filter(|t| **t == "*").count();
    if stars > 1 {
        return Err(format!(
            "kernel {kernel}: parameter `{name}`: pointers to pointers are not supported"
        ));
    }
    let is_const = tokens.iter().position(|t| *t == "const").is_some_and(|c| {
        // `const T*` or `T const*`: const before the star.
        tokens
            .iter()
            .position(|t| *t == "*")
            .map_or(true, |s| c < s)
    });
    let base: Vec<&str> = tokens
        .iter()
        .copied()
        .filter(|t| !matches!(*t, "const" | "volatile" | "__restrict__" | "restrict" | "*"))
        .collect();
    let ty = Scalar::from_c(&base).ok_or_else(|| {
        format!(
            "kernel {kernel}: parameter `{name}` has type `{}`, which the wrapper generator does not support",
            text.trim()
        )
    })?;
    Ok(Param {
        name: name.to_string(),
        ty,
        pointer: stars == 1,
        is_const,
    })
}

/// Parses every `extern "C" __global__ void name(...)` declaration of a CUDA source.
pub fn parse_kernels(src: &str) -> Result<Vec<Kernel>, String> {
    let clean = strip_comments(src);
    let mut kernels = Vec::new();
    let mut from = 0;
    while let Some(pos) = clean[from..].find("__global__") {
        let at = from + pos;
        from = at + "__global__".len();
        let before = clean[..at].trim_end();
        if !before.ends_with("extern \"C\"") {
            continue;
        }
        let rest = &clean[from..];
        let open = rest
            .find('(')
            .ok_or("a __global__ declaration without a parameter list")?;
        let head: Vec<&str> = rest[..open].split_whitespace().collect();
        let (ret, name) = match head.as_slice() {
            [ret, name] => (*ret, *name),
            _ => {
                return Err(format!(
                    "cannot read the kernel declaration `{}`",
                    rest[..open].trim()
                ))
            }
        };
        if ret != "void" {
            return Err(format!("kernel {name}: a kernel must return void"));
        }
        let close = rest[open..]
            .find(')')
            .ok_or_else(|| format!("kernel {name}: unterminated parameter list"))?
            + open;
        let list = rest[open + 1..close].trim();
        let params = if list.is_empty() || list == "void" {
            Vec::new()
        } else {
            list.split(',')
                .map(|p| parse_param(name, p))
                .collect::<Result<Vec<_>, _>>()?
        };
        // Comment lines directly above the declaration, in the original source.
        let line_no = clean[..at].matches('\n').count();
        let lines: Vec<&str> = src.lines().collect();
        let mut doc = Vec::new();
        let mut is_unsafe = false;
        let mut l = line_no;
        while l > 0 {
            let t = lines[l - 1].trim();
            if let Some(c) = t.strip_prefix("//") {
                let c = c.trim();
                if c == "cuda-runtime: unsafe" {
                    is_unsafe = true;
                } else {
                    doc.push(c.to_string());
                }
                l -= 1;
            } else {
                break;
            }
        }
        doc.reverse();
        let signature = format!(
            "extern \"C\" __global__ void {name}({})",
            list.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        kernels.push(Kernel {
            name: name.to_string(),
            params,
            is_unsafe,
            doc,
            signature,
        });
    }
    Ok(kernels)
}

/// The parameter sizes of every `.entry` in a PTX file.
pub fn parse_ptx_entries(ptx: &str) -> Result<Vec<(String, Vec<usize>)>, String> {
    let mut entries = Vec::new();
    let mut from = 0;
    while let Some(pos) = ptx[from..].find(".entry ") {
        let at = from + pos + ".entry ".len();
        let open = ptx[at..].find('(').ok_or("PTX .entry without parameters")? + at;
        let name = ptx[at..open].trim().to_string();
        let close = ptx[open..]
            .find(')')
            .ok_or("unterminated PTX parameter list")?
            + open;
        let mut sizes = Vec::new();
        for p in ptx[open + 1..close].split(',') {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            let words: Vec<&str> = p.split_whitespace().collect();
            let ty = words
                .iter()
                .rev()
                .find(|w| {
                    w.starts_with('.')
                        && *w != &".param"
                        && !w.starts_with(".align")
                        && !w.starts_with(".ptr")
                })
                .ok_or_else(|| format!("PTX entry {name}: cannot read parameter `{p}`"))?;
            let elem = match *ty {
                ".u8" | ".s8" | ".b8" => 1,
                ".u16" | ".s16" | ".b16" | ".f16" => 2,
                ".u32" | ".s32" | ".b32" | ".f32" => 4,
                ".u64" | ".s64" | ".b64" | ".f64" => 8,
                other => return Err(format!("PTX entry {name}: unknown parameter type {other}")),
            };
            let last = words.last().copied().unwrap_or("");
            let count = match (last.find('['), last.find(']')) {
                (Some(a), Some(b)) if a < b => last[a + 1..b]
                    .parse::<usize>()
                    .map_err(|_| format!("PTX entry {name}: bad array size in `{p}`"))?,
                _ => 1,
            };
            sizes.push(elem * count);
        }
        entries.push((name, sizes));
        from = close;
    }
    Ok(entries)
}

/// Checks a kernel's declared parameters against its PTX entry.
pub fn check_against_ptx(k: &Kernel, entries: &[(String, Vec<usize>)]) -> Result<(), String> {
    let (_, sizes) = entries
        .iter()
        .find(|(n, _)| *n == k.name)
        .ok_or_else(|| format!("kernel {}: not found in the PTX", k.name))?;
    if sizes.len() != k.params.len() {
        return Err(format!(
            "kernel {}: the source declares {} parameters, the PTX {}",
            k.name,
            k.params.len(),
            sizes.len()
        ));
    }
    for (i, (p, &s)) in k.params.iter().zip(sizes).enumerate() {
        if p.size() != s {
            return Err(format!(
                "kernel {}: parameter {i} (`{}`) is {} bytes in the source but {s} in the PTX",
                k.name,
                p.name,
                p.size()
            ));
        }
    }
    Ok(())
}

/// Checks the safety convention: in a safe kernel every pointer `p` is followed by `size_t p_len`.
pub fn check_convention(k: &Kernel) -> Result<(), String> {
    if k.is_unsafe {
        return Ok(());
    }
    for (i, p) in k.params.iter().enumerate() {
        if !p.pointer {
            continue;
        }
        let want = format!("{}_len", p.name);
        match k.params.get(i + 1) {
            Some(l) if l.name == want && !l.pointer && l.ty == Scalar::Usize => {}
            _ => {
                return Err(format!(
                    "kernel {}: pointer parameter `{}` must be followed by `size_t {want}` (or mark the kernel `// cuda-runtime: unsafe`)",
                    k.name, p.name
                ))
            }
        }
    }
    Ok(())
}

fn upper(name: &str) -> String {
    name.to_ascii_uppercase()
}

/// Generates the Rust module for one kernel file. `ptx_path` is the absolute path of the PTX to
/// embed, `source` the file's name for the docs.
pub fn generate(
    stem: &str,
    source: &str,
    ptx_path: &str,
    kernels: &[Kernel],
) -> Result<String, String> {
    let mut o = String::new();
    let _ = writeln!(o, "pub mod {stem} {{");
    let _ = writeln!(
        o,
        "    //! Kernels of `kernels/{source}`, with typed launch wrappers."
    );
    let _ = writeln!(o, "    /// The module's PTX (compute_75).");
    let _ = writeln!(o, "    pub const PTX: &str = include_str!({ptx_path:?});");
    let _ = writeln!(o, "    /// The module, loaded on each device on first use.");
    let _ = writeln!(
        o,
        "    pub static MODULE: crate::module::EmbeddedModule = crate::module::EmbeddedModule::new({stem:?}, PTX);"
    );
    for k in kernels {
        check_convention(k)?;
        let sizes: Vec<String> = k.params.iter().map(|p| p.size().to_string()).collect();
        let _ = writeln!(o, "    /// The kernel `{}`, for attributes and occupancy ([`crate::EmbeddedKernel::function`]).", k.name);
        let _ = writeln!(
            o,
            "    pub static {}: crate::module::EmbeddedKernel = crate::module::EmbeddedKernel::new(&MODULE, {:?}, &[{}]);",
            upper(&k.name),
            k.name,
            sizes.join(", ")
        );
        // The wrapper.
        let _ = writeln!(o);
        for d in &k.doc {
            // Source comments are prose, not intra-doc links.
            let d = d.replace('[', "\\[").replace(']', "\\]");
            let _ = writeln!(o, "    /// {d}");
        }
        if !k.doc.is_empty() {
            let _ = writeln!(o, "    ///");
        }
        let _ = writeln!(
            o,
            "    /// Launches `{}` on `stream` (`cudaLaunchKernel`): `{}`.",
            k.name, k.signature
        );
        let mut args = Vec::new();
        let mut setup = Vec::new();
        let mut ptrs = Vec::new();
        let mut uses = Vec::new();
        let mut i = 0;
        while i < k.params.len() {
            let p = &k.params[i];
            if p.pointer && !k.is_unsafe {
                let t = p.ty.rust();
                if p.is_const {
                    args.push(format!(
                        "{}: &(impl crate::DeviceRead<{t}> + ?Sized)",
                        p.name
                    ));
                    setup.push(format!(
                        "let (mut {n}_ptr, mut {n}_len, {n}_use) = crate::DeviceRead::kernel_arg({n});",
                        n = p.name
                    ));
                } else {
                    args.push(format!(
                        "{}: &mut (impl crate::DeviceWrite<{t}> + ?Sized)",
                        p.name
                    ));
                    setup.push(format!(
                        "let (mut {n}_ptr, mut {n}_len, {n}_use) = crate::DeviceWrite::kernel_arg_mut({n});",
                        n = p.name
                    ));
                }
                uses.push(format!("{}_use", p.name));
                ptrs.push(format!(
                    "&mut {}_ptr as *mut u64 as *mut ::core::ffi::c_void",
                    p.name
                ));
                ptrs.push(format!(
                    "&mut {}_len as *mut usize as *mut ::core::ffi::c_void",
                    p.name
                ));
                i += 2;
            } else {
                let t = if p.pointer { "u64" } else { p.ty.rust() };
                args.push(format!("{}: {t}", p.name));
                setup.push(format!("let mut {n}_v = {n};", n = p.name));
                ptrs.push(format!(
                    "&mut {}_v as *mut {t} as *mut ::core::ffi::c_void",
                    p.name
                ));
                i += 1;
            }
        }
        if k.is_unsafe {
            let _ = writeln!(o, "    ///");
            let _ = writeln!(o, "    /// Pointer parameters are raw device addresses.");
            let _ = writeln!(o, "    ///");
            let _ = writeln!(o, "    /// # Safety");
            let _ = writeln!(o, "    /// 1. Every address the kernel dereferences (its pointer arguments, and any it reads from");
            let _ = writeln!(o, "    ///    device variables) must name live device memory, not used by other work, for as long");
            let _ = writeln!(
                o,
                "    ///    as the kernel runs, large enough for the kernel's accesses."
            );
        } else if k.params.iter().any(|p| p.pointer) {
            let _ = writeln!(o, "    ///");
            let _ = writeln!(o, "    /// Each `*_len` is filled from the buffer's length; the kernel keeps its accesses below it.");
        }
        let _ = writeln!(o, "    ///");
        let _ = writeln!(o, "    /// # Errors");
        let _ = writeln!(o, "    /// An invalid launch configuration, buffers of another device than `stream`, or the driver's errors.");
        let _ = writeln!(o, "    #[allow(clippy::too_many_arguments)]");
        let unsafe_kw = if k.is_unsafe { "unsafe " } else { "" };
        let _ = writeln!(
            o,
            "    pub {unsafe_kw}fn {}(stream: &crate::Stream, config: &crate::LaunchConfig{}{}) -> crate::Result<()> {{",
            k.name,
            if args.is_empty() { "" } else { ", " },
            args.join(", ")
        );
        for s in &setup {
            let _ = writeln!(o, "        {s}");
        }
        let _ = writeln!(
            o,
            "        let mut params: [*mut ::core::ffi::c_void; {}] = [{}];",
            ptrs.len(),
            ptrs.join(", ")
        );
        if k.is_unsafe {
            let _ = writeln!(o, "        // SAFETY: the parameter sizes were checked against the PTX at build time; the");
            let _ = writeln!(
                o,
                "        // addresses are the caller's promise (see `# Safety`)."
            );
        } else {
            let _ = writeln!(o, "        // SAFETY: the parameter sizes were checked against the PTX at build time; every");
            let _ = writeln!(o, "        // pointer is a live allocation with its length, checked and noted as used by the launch");
            let _ = writeln!(
                o,
                "        // (freed only after the kernel); the kernel stays below each length."
            );
        }
        let _ = writeln!(
            o,
            "        unsafe {{ {}.launch(stream, config, &[{}], &mut params) }}",
            upper(&k.name),
            uses.join(", ")
        );
        let _ = writeln!(o, "    }}");
    }
    let _ = writeln!(o, "}}");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
// Adds.
extern "C" __global__ void vadd(const float* a, size_t a_len,
                                const float *__restrict__ b, size_t b_len, /* out */ float* c,
                                size_t c_len) { }
__global__ void not_extern(int x) {}
/* a block comment with extern "C" __global__ void fake(int) */
// cuda-runtime: unsafe
// Raw.
extern "C" __global__ void raw(unsigned long long addr, unsigned int v, float* p) {}
extern "C" __global__ void empty() {}
"#;

    #[test]
    fn parses_signatures_with_comments_and_line_breaks() {
        let k = parse_kernels(SRC).unwrap();
        let names: Vec<&str> = k.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["vadd", "raw", "empty"]);
        let v = &k[0];
        assert_eq!(v.params.len(), 6);
        assert!(v.params[0].pointer && v.params[0].is_const && v.params[0].ty == Scalar::F32);
        assert_eq!(v.params[2].name, "b");
        assert!(v.params[2].is_const);
        assert!(v.params[4].pointer && !v.params[4].is_const);
        assert_eq!(v.params[5].ty, Scalar::Usize);
        assert_eq!(v.doc, ["Adds."]);
        assert!(!v.is_unsafe);
        assert!(k[1].is_unsafe);
        assert_eq!(k[1].doc, ["Raw."]);
        assert_eq!(k[1].params[0].ty, Scalar::U64);
        assert_eq!(k[1].params[1].ty, Scalar::U32);
        assert!(k[2].params.is_empty());
    }

    #[test]
    fn unknown_types_and_double_pointers_are_refused_with_the_kernel_name() {
        let e = parse_kernels("extern \"C\" __global__ void k(float2 v) {}").unwrap_err();
        assert!(e.contains("kernel k") && e.contains("float2"), "{e}");
        let e = parse_kernels("extern \"C\" __global__ void k(float** v) {}").unwrap_err();
        assert!(e.contains("kernel k"), "{e}");
    }

    const PTX: &str = "
.visible .entry vadd(
	.param .u64 vadd_param_0,
	.param .u64 vadd_param_1,
	.param .u64 vadd_param_2,
	.param .u64 vadd_param_3,
	.param .u64 vadd_param_4,
	.param .u64 vadd_param_5
)
{ ret; }
.visible .entry raw(
	.param .u64 raw_param_0,
	.param .u32 raw_param_1,
	.param .u64 .ptr .align 1 raw_param_2
)
{ ret; }
.visible .entry empty()
{ ret; }
.visible .entry s(.param .align 4 .b8 s_param_0[12])
{ ret; }
";

    #[test]
    fn ptx_entries_and_sizes() {
        let e = parse_ptx_entries(PTX).unwrap();
        assert_eq!(e[0], ("vadd".to_string(), vec![8; 6]));
        assert_eq!(e[1], ("raw".to_string(), vec![8, 4, 8]));
        assert_eq!(e[2], ("empty".to_string(), vec![]));
        assert_eq!(e[3], ("s".to_string(), vec![12]));
    }

    #[test]
    fn checker_accepts_matching_and_names_mismatches() {
        let k = parse_kernels(SRC).unwrap();
        let e = parse_ptx_entries(PTX).unwrap();
        for kernel in &k {
            check_against_ptx(kernel, &e).unwrap();
        }
        // Count mismatch.
        let mut bad = k[0].clone();
        bad.params.pop();
        let err = check_against_ptx(&bad, &e).unwrap_err();
        assert!(
            err.contains("vadd") && err.contains("5") && err.contains("6"),
            "{err}"
        );
        // Size mismatch.
        let mut bad = k[1].clone();
        bad.params[1].ty = Scalar::U64;
        let err = check_against_ptx(&bad, &e).unwrap_err();
        assert!(err.contains("raw") && err.contains("parameter 1"), "{err}");
        // Missing entry.
        let mut bad = k[2].clone();
        bad.name = "gone".into();
        assert!(check_against_ptx(&bad, &e).unwrap_err().contains("gone"));
    }

    #[test]
    fn safe_kernels_need_lengths_after_pointers() {
        let k = parse_kernels("extern \"C\" __global__ void k(float* p, int n) {}").unwrap();
        let e = check_convention(&k[0]).unwrap_err();
        assert!(e.contains("kernel k") && e.contains("p_len"), "{e}");
        let k = parse_kernels("extern \"C\" __global__ void k(float* p, size_t p_len) {}").unwrap();
        check_convention(&k[0]).unwrap();
    }

    #[test]
    fn generated_wrappers_fill_lengths_and_mark_unsafe() {
        let k = parse_kernels(SRC).unwrap();
        let code = generate("demo", "demo.cu", "/x/demo.ptx", &k).unwrap();
        assert!(code.contains("pub mod demo {"));
        assert!(code.contains("pub static VADD: crate::module::EmbeddedKernel"));
        assert!(code.contains("&[8, 8, 8, 8, 8, 8]"));
        assert!(code.contains("a: &(impl crate::DeviceRead<f32> + ?Sized)"));
        assert!(code.contains("c: &mut (impl crate::DeviceWrite<f32> + ?Sized)"));
        assert!(
            !code.contains("a_len: usize"),
            "lengths are not parameters of the wrapper"
        );
        assert!(code.contains("pub unsafe fn raw(stream: &crate::Stream, config: &crate::LaunchConfig, addr: u64, v: u32, p: u64)"));
        assert!(code.contains("pub fn empty(stream: &crate::Stream, config: &crate::LaunchConfig) -> crate::Result<()>"));
        assert!(code.contains("[*mut ::core::ffi::c_void; 0] = []"));
    }
}
