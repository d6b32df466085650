//! Kernel signatures: parsing `extern "C" __global__` declarations from CUDA sources, checking
//! them against the PTX, and generating the typed launch wrappers. Used by the build pipeline
//! (cuda-runtime's own `build.rs` and users' through `Kernels`), and by the
//! cuda-runtime library at run time (launch preconditions, user PTX's parameter lists).
//!
//! The comment lines right above a kernel may hold directives, `// cuda-runtime: <directive>`:
//!
//! * `unsafe`: the wrapper is an `unsafe fn` taking raw addresses;
//! * `block = (X, Y, Z)`: the kernel must be launched with exactly this block shape (missing
//!   dimensions are 1, as in `dim3`);
//! * `require A OP B`: a launch precondition. `OP` is one of `==`, `!=`, `<`, `<=`, `>`, `>=`;
//!   `A` and `B` are each an integer, a quantity, or `INTEGER * quantity`, where a quantity is
//!   `block.x|y|z`, `grid.x|y|z`, `dynamic_shared` (bytes of dynamic shared memory) or an integer
//!   parameter of the kernel (a pointer's `*_len` companion included, which the wrapper fills
//!   from the buffer). Example: `require dynamic_shared >= 4 * n`.
//!
//! * `waits-for-previous-kernel`: every thread of the kernel waits for the kernel before it in
//!   the stream (`cudaGridDependencySynchronize()`) before it touches memory and before it exits,
//!   so its wrapper accepts programmatic stream serialization (programmatic dependent launch);
//! * `arch = sm_NN`: the kernel needs compute capability `N.N` (e.g. `sm_90` for thread-block
//!   clusters). A file is compiled for the newest architecture any of its directives names
//!   ([`file_arch`]; `compute_75` when none), so every kernel of that file needs it: keep such
//!   kernels in a file of their own. On an older device, the generated wrappers fail with a
//!   clear error before the module is loaded;
//! * `device-runtime` (a line of its own anywhere in the file; it concerns the whole file): the
//!   file's kernels call the CUDA device runtime (launch kernels, `cudaGraphSetConditional`). It
//!   is compiled with relocatable device code (`-rdc=true`), and its wrappers load the image
//!   linked ahead of time with NVIDIA's `libcudadevrt.a` ([`file_device_runtime`]). Only
//!   cuda-runtime's own kernels have such images (in the cuda-runtime-devrt crate); the build
//!   pipeline refuses the directive in other crates.
//!
//! The generated wrapper checks every precondition ([`Rule::holds`], in exact 128-bit
//! arithmetic) before it borrows a buffer or launches, and refuses the launch with an error
//! naming the precondition and the values it was checked with. The evaluator lives here, beside
//! the parser, so that the library's launch path and the tests use the same code.

use std::borrow::Cow;
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
    /// `cudaTextureObject_t`: the wrapper takes a `&TextureObject`.
    TexObject,
    /// `cudaSurfaceObject_t`: the wrapper takes a `&mut SurfaceObject`.
    SurfObject,
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
            "cudaTextureObject_t" => Scalar::TexObject,
            "cudaSurfaceObject_t" => Scalar::SurfObject,
            _ => return None,
        })
    }

    /// Size in bytes on the device.
    pub fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 | Scalar::Bool => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64
            | Scalar::U64
            | Scalar::Usize
            | Scalar::F64
            | Scalar::TexObject
            | Scalar::SurfObject => 8,
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
            // Texture and surface handles are raw `u64`s for unsafe kernels only.
            Scalar::U64 | Scalar::TexObject | Scalar::SurfObject => "u64",
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
    /// Marked `// cuda-runtime: waits-for-previous-kernel`: every thread waits for the kernel
    /// before it (`cudaGridDependencySynchronize`) before touching memory and before exiting,
    /// so its wrapper accepts programmatic stream serialization.
    pub waits_for_previous: bool,
    /// Its launch preconditions (`// cuda-runtime: block = ...` and `require ...`), in source
    /// order.
    pub preconditions: Vec<Rule>,
    /// The parameters the preconditions name, in the order of their [`Operand::Param`] indices.
    pub precondition_args: Vec<String>,
    /// What texture and surface parameters must be (`// cuda-runtime: texture t 2d,pitch2d
    /// float`, `surface s 2d 4`): the wrapper checks the object it is given.
    pub objects: Vec<ObjectExpect>,
    /// The architecture it declares it needs (`// cuda-runtime: arch = sm_90` gives 90).
    pub arch: Option<u32>,
    /// The comment lines right above the declaration.
    pub doc: Vec<String>,
    /// The declaration as written, on one line.
    pub signature: String,
}

/// A texture or surface parameter's declared expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectExpect {
    /// The parameter.
    pub param: String,
    /// Resource shapes the kernel reads correctly (`linear`, `pitch2d`, `1d`, `2d`, `3d`,
    /// `1d-layered`, `2d-layered`, `cubemap`, `cubemap-layered`, or `mipmapped-<shape>`).
    pub shapes: Vec<String>,
    /// For a texture, how the kernel's fetches read texels: `float` (float texels, or integers
    /// read as normalised floats), `int` or `uint` (integer texels read as stored). For a
    /// surface, the texel size in bytes its accesses use.
    pub element: String,
}

const OBJECT_SHAPES: [&str; 9] = [
    "linear",
    "pitch2d",
    "1d",
    "2d",
    "3d",
    "1d-layered",
    "2d-layered",
    "cubemap",
    "cubemap-layered",
];

/// Parses `texture <param> <shape>[,<shape>...] <element>` or `surface <param> <shapes>
/// <bytes>`.
fn parse_object_directive(d: &str, params: &[Param]) -> Result<ObjectExpect, String> {
    let t: Vec<&str> = d.split_whitespace().collect();
    let [kind, param, shapes, element] = t.as_slice() else {
        return Err(
            "expected `texture <param> <shape>[,<shape>...] <float|int|uint>` or \
                    `surface <param> <shape>[,<shape>...] <texel bytes>`"
                .into(),
        );
    };
    let surface = *kind == "surface";
    let want = if surface {
        Scalar::SurfObject
    } else {
        Scalar::TexObject
    };
    if !params
        .iter()
        .any(|p| p.name == *param && p.ty == want && !p.pointer)
    {
        return Err(format!(
            "`{param}` is no {} parameter of the kernel",
            if surface {
                "cudaSurfaceObject_t"
            } else {
                "cudaTextureObject_t"
            }
        ));
    }
    let shapes: Vec<String> = shapes.split(',').map(str::to_string).collect();
    for sh in &shapes {
        let base = sh.strip_prefix("mipmapped-").unwrap_or(sh);
        if !OBJECT_SHAPES.contains(&base) || (surface && sh.starts_with("mipmapped-")) {
            return Err(format!("unknown shape `{sh}` (one of {OBJECT_SHAPES:?}, or mipmapped-<shape> for textures)"));
        }
    }
    let ok = if surface {
        matches!(*element, "1" | "2" | "4" | "8" | "16")
    } else {
        matches!(*element, "float" | "int" | "uint")
    };
    if !ok {
        return Err(format!("unknown element `{element}`"));
    }
    Ok(ObjectExpect {
        param: param.to_string(),
        shapes,
        element: element.to_string(),
    })
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

/// Rust's keywords (strict and reserved, 2021 edition): a parameter named so would not compile.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield", "gen",
];

/// The names of the generated wrapper's own arguments and locals.
const WRAPPER_NAMES: &[&str] = &["stream", "config", "params"];

fn parse_param(kernel: &str, text: &str) -> Result<Param, String> {
    let spaced = text.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
    let name = tokens
        .pop()
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| format!("kernel {kernel}: cannot read parameter `{}`", text.trim()))?;
    if RUST_KEYWORDS.contains(&name) || WRAPPER_NAMES.contains(&name) {
        return Err(format!(
            "kernel {kernel}: parameter `{name}` cannot name an argument of the generated Rust wrapper (a Rust keyword, or one of {WRAPPER_NAMES:?}): rename it"
        ));
    }
    let stars = tokens.iter().filter(|t| **t == "*").count();
    if stars > 1 {
        return Err(format!(
            "kernel {kernel}: parameter `{name}`: pointers to pointers are not supported"
        ));
    }
    let is_const = tokens.iter().position(|t| *t == "const").is_some_and(|c| {
        // `const T*` or `T const*`: const before the star.
        tokens.iter().position(|t| *t == "*").is_none_or(|s| c < s)
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
    if stars > 0 && matches!(ty, Scalar::TexObject | Scalar::SurfObject) {
        return Err(format!(
            "kernel {kernel}: parameter `{name}`: pointers to texture or surface objects are not supported"
        ));
    }
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
        let mut directives = Vec::new();
        let mut l = line_no;
        while l > 0 {
            let t = lines[l - 1].trim();
            if let Some(c) = t.strip_prefix("//") {
                let c = c.trim();
                match c.strip_prefix(DIRECTIVE) {
                    Some(d) => directives.push(d.trim()),
                    None => doc.push(c.to_string()),
                }
                l -= 1;
            } else {
                break;
            }
        }
        doc.reverse();
        directives.reverse();
        let mut is_unsafe = false;
        let mut waits_for_previous = false;
        let mut preconditions = Vec::new();
        let mut precondition_args = Vec::new();
        let mut objects = Vec::new();
        let mut arch = None;
        for d in directives {
            if d == "unsafe" {
                is_unsafe = true;
            } else if d == DEVICE_RUNTIME {
                // The whole file's ([`file_device_runtime`]).
            } else if d == WAITS_FOR_PREVIOUS {
                waits_for_previous = true;
            } else if is_arch_directive(d) {
                let a =
                    parse_arch(d).map_err(|e| format!("kernel {name}: `{DIRECTIVE} {d}`: {e}"))?;
                arch = arch.max(Some(a));
            } else if d.starts_with("texture ") || d.starts_with("surface ") {
                let e = parse_object_directive(d, &params)
                    .map_err(|e| format!("kernel {name}: `{DIRECTIVE} {d}`: {e}"))?;
                objects.push(e);
            } else {
                let rule = parse_directive(d, &params, &mut precondition_args)
                    .map_err(|e| format!("kernel {name}: `{DIRECTIVE} {d}`: {e}"))?;
                preconditions.push(rule);
            }
        }
        let signature = format!(
            "extern \"C\" __global__ void {name}({})",
            list.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        kernels.push(Kernel {
            name: name.to_string(),
            params,
            is_unsafe,
            waits_for_previous,
            preconditions,
            precondition_args,
            objects,
            arch,
            doc,
            signature,
        });
    }
    Ok(kernels)
}

/// The directive of a kernel whose every thread waits for the previous kernel in the stream
/// (`cudaGridDependencySynchronize()`, PTX `griddepcontrol.wait`) before it touches memory and
/// before it exits: its wrapper accepts programmatic stream serialization.
pub const WAITS_FOR_PREVIOUS: &str = "waits-for-previous-kernel";

/// The directive of a kernel file whose kernels call the CUDA device runtime (see
/// [`file_device_runtime`]).
pub const DEVICE_RUNTIME: &str = "device-runtime";

/// Whether a kernel file is marked `// cuda-runtime: device-runtime` on a line of its own (as
/// `scripts/update-ptx` reads it): its kernels call the device runtime, so it is compiled with
/// `-rdc=true` and its wrappers load the image linked ahead of time with `libcudadevrt.a`
/// instead of its PTX (which the driver could not link alone).
pub fn file_device_runtime(src: &str) -> bool {
    src.lines().any(|line| {
        line.trim()
            .strip_prefix("//")
            .and_then(|c| c.trim().strip_prefix(DIRECTIVE))
            .is_some_and(|d| d.trim() == DEVICE_RUNTIME)
    })
}

/// Where the generated code of a device-runtime kernel file finds its linked image.
#[derive(Clone, Copy, Debug)]
pub struct LinkedImage<'a> {
    /// The Rust path of the crate that holds the images (`::cuda_runtime_devrt`): a module per
    /// kernel file with `FATBIN` and `SOURCES_SHA256`, and `ARCHS` at its root.
    pub krate: &'a str,
    /// The Cargo feature of the generated code's crate that enables that dependency.
    pub feature: &'a str,
    /// The SHA-256 of the file's sources (as the committed PTX's header records it), compared at compile
    /// time with the one the image records.
    pub sources_sha256: &'a str,
}

/// The architecture every CUDA version this crate supports can target: PTX for `compute_75`.
pub const BASE_ARCH: u32 = 75;

fn is_arch_directive(d: &str) -> bool {
    d == "arch" || d.starts_with("arch ") || d.starts_with("arch=")
}

/// Parses an `arch = sm_NN` directive (the text after `cuda-runtime:`) into `NN`, at least
/// [`BASE_ARCH`].
pub fn parse_arch(d: &str) -> Result<u32, String> {
    let shape = "expected `arch = sm_NN` (e.g. `arch = sm_90`)";
    let t = directive_tokens(d)?;
    let ["arch", "=", target] = t.as_slice() else {
        return Err(shape.into());
    };
    let digits = target.strip_prefix("sm_").ok_or(shape)?;
    if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(shape.into());
    }
    let n: u32 = digits.parse().map_err(|_| shape.to_string())?;
    if n < BASE_ARCH {
        return Err(format!(
            "sm_{n} is older than sm_{BASE_ARCH}, the oldest target of CUDA 13; leave the directive out"
        ));
    }
    Ok(n)
}

/// The architecture a kernel file is compiled for: the newest `// cuda-runtime: arch = sm_NN`
/// on any of its lines, or [`BASE_ARCH`]. `scripts/update-ptx` reads the files the same way.
pub fn file_arch(src: &str) -> Result<u32, String> {
    let mut arch = BASE_ARCH;
    for (i, line) in src.lines().enumerate() {
        let Some(c) = line.trim().strip_prefix("//") else {
            continue;
        };
        let Some(d) = c.trim().strip_prefix(DIRECTIVE) else {
            continue;
        };
        let d = d.trim();
        if is_arch_directive(d) {
            let a = parse_arch(d).map_err(|e| format!("line {}: `{DIRECTIVE} {d}`: {e}", i + 1))?;
            arch = arch.max(a);
        }
    }
    Ok(arch)
}

/// The most bytes of parameters a kernel may take (CUDA 12.1 and newer, Volta and newer): a
/// parameter list beyond it is no kernel the driver loads.
pub const MAX_PARAM_BYTES: u64 = 32764;

/// More tokens than any parameter declaration has (`.param .align 8 .u64 .ptr .global .align 8
/// name [4] [4]` has 14).
const MAX_PARAM_TOKENS: usize = 32;

/// One token of PTX text, as far as the entry parser needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PtxTok<'a> {
    /// A directive, identifier, opcode or number: `.entry`, `axpy`, `%r1`, `0x10`, `12U`.
    Word(&'a str),
    /// A string literal (its contents are never needed).
    Str,
    /// Any other ASCII character: `(`, `,`, `[`, `{`, ...
    Punct(u8),
}

/// A lexer of PTX text that drops comments (PTX's comments are C's, non-nested, and count as
/// whitespace; they never start inside a string literal). It refuses what would make its reading
/// differ from the driver's: preprocessor lines (`#if 0` could hide an entry, `#define` rename
/// one), backslashes outside strings (C's line splicing could end or extend a comment),
/// quotes escaped inside strings, NUL bytes (the driver stops reading there) and non-ASCII
/// text outside comments and strings (PTX is ASCII; Unicode spaces would split tokens here only).
struct PtxLexer<'a> {
    text: &'a str,
    at: usize,
    peeked: Option<Option<PtxTok<'a>>>,
}

fn ptx_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'%')
}

impl<'a> PtxLexer<'a> {
    fn new(text: &'a str) -> PtxLexer<'a> {
        PtxLexer {
            text,
            at: 0,
            peeked: None,
        }
    }

    fn peek(&mut self) -> Result<Option<PtxTok<'a>>, String> {
        if let Some(t) = self.peeked {
            return Ok(t);
        }
        let t = self.lex()?;
        self.peeked = Some(t);
        Ok(t)
    }

    fn next_tok(&mut self) -> Result<Option<PtxTok<'a>>, String> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex(),
        }
    }

    fn lex(&mut self) -> Result<Option<PtxTok<'a>>, String> {
        let b = self.text.as_bytes();
        loop {
            let i = self.at;
            let Some(&c) = b.get(i) else {
                return Ok(None);
            };
            let next = b.get(i + 1).copied();
            match c {
                b'/' if next == Some(b'/') => {
                    // To the end of the line; the newline itself is whitespace.
                    let len = b[i..]
                        .iter()
                        .position(|&c| c == b'\n')
                        .unwrap_or(b.len() - i);
                    // With its newline, so that a splice before it is seen.
                    check_comment(i, b.get(i..i + len + 1).unwrap_or(&b[i..]))?;
                    self.at = i + len;
                }
                b'/' if next == Some(b'*') => {
                    let body = &b[i + 2..];
                    let end = body
                        .windows(2)
                        .position(|w| w == b"*/")
                        .ok_or_else(|| format!("unterminated PTX comment at byte {i}"))?;
                    check_comment(i, &body[..end])?;
                    self.at = i + 2 + end + 2;
                }
                b'"' => {
                    let mut j = i + 1;
                    loop {
                        match b.get(j) {
                            None | Some(b'\n') | Some(0) => {
                                return Err(format!("unterminated PTX string at byte {i}"))
                            }
                            Some(b'"') => break,
                            Some(b'\\') => match b.get(j + 1) {
                                Some(b'"') => {
                                    return Err(format!(
                                        "PTX string at byte {i} has an escaped quote, which PTX does not define"
                                    ))
                                }
                                Some(b'\\') => j += 2,
                                _ => j += 1,
                            },
                            Some(_) => j += 1,
                        }
                    }
                    self.at = j + 1;
                    return Ok(Some(PtxTok::Str));
                }
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.at = i + 1,
                b'#' => {
                    return Err(format!(
                        "PTX preprocessor directive at byte {i}: not read by the entry parser"
                    ))
                }
                b'\\' => return Err(format!("backslash outside a PTX string at byte {i}")),
                0 => return Err(format!("PTX has a NUL byte at byte {i}")),
                c if !c.is_ascii() => {
                    return Err(format!("non-ASCII PTX outside comments at byte {i}"))
                }
                c if c == b'.' || ptx_word_byte(c) => {
                    let len = b[i + 1..]
                        .iter()
                        .position(|&c| !ptx_word_byte(c))
                        .unwrap_or(b.len() - i - 1);
                    self.at = i + 1 + len;
                    // ASCII from `i` to `at`: both are character boundaries.
                    let word = self.text.get(i..self.at).ok_or("PTX lexer out of step")?;
                    return Ok(Some(PtxTok::Word(word)));
                }
                c => {
                    self.at = i + 1;
                    return Ok(Some(PtxTok::Punct(c)));
                }
            }
        }
    }
}

/// Refuses a comment (starting at byte `at`) that C's rules would read differently: a backslash
/// before a line break splices the lines (ending a block comment early or extending a line
/// comment), and a NUL ends the driver's reading.
fn check_comment(at: usize, comment: &[u8]) -> Result<(), String> {
    if comment.contains(&0) {
        return Err(format!("PTX has a NUL byte in the comment at byte {at}"));
    }
    for (k, _) in comment.iter().enumerate().filter(|(_, &c)| c == b'\\') {
        let after = comment.get(k + 1..).unwrap_or(&[]);
        let gap = after
            .iter()
            .position(|c| !matches!(c, b' ' | b'\t' | b'\r' | 0x0b | 0x0c))
            .unwrap_or(after.len());
        if after.get(gap) == Some(&b'\n') {
            return Err(format!(
                "PTX comment at byte {at} has a backslash before a line break (a line splice in C)"
            ));
        }
    }
    Ok(())
}

/// A PTX identifier: `[a-zA-Z][a-zA-Z0-9_$]*` or `[_$%][a-zA-Z0-9_$]+`.
fn is_ptx_identifier(w: &str) -> bool {
    let b = w.as_bytes();
    let rest_ok = |r: &[u8]| {
        r.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$'))
    };
    match b.split_first() {
        Some((c, rest)) if c.is_ascii_alphabetic() => rest_ok(rest),
        Some((b'_' | b'$' | b'%', rest)) => !rest.is_empty() && rest_ok(rest),
        _ => false,
    }
}

/// A PTX integer literal (C's decimal, hexadecimal, octal and binary forms, with an optional
/// `U`), or `None` when it is not one or does not fit in a `u64`.
fn parse_ptx_int(w: &str) -> Option<u64> {
    let w = w.strip_suffix('U').unwrap_or(w);
    let (digits, radix) = if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = w.strip_prefix("0b").or_else(|| w.strip_prefix("0B")) {
        (b, 2)
    } else if let Some(o) = w.strip_prefix('0').filter(|o| !o.is_empty()) {
        (o, 8)
    } else {
        (w, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Size in bytes of a PTX parameter type.
fn ptx_type_size(ty: &str) -> Option<u64> {
    Some(match ty {
        ".u8" | ".s8" | ".b8" => 1,
        ".u16" | ".s16" | ".b16" | ".f16" => 2,
        ".u32" | ".s32" | ".b32" | ".f32" => 4,
        ".u64" | ".s64" | ".b64" | ".f64" => 8,
        _ => return None,
    })
}

/// One kernel parameter's `(size, alignment)`, from its tokens:
/// `.param [.align N] .type [.ptr [.space] [.align N]] name [N]...`.
fn parse_ptx_param(entry: &str, toks: &[PtxTok<'_>]) -> Result<(u64, u64), String> {
    let cannot = |why: &str| format!("PTX entry {entry}: cannot read parameter {toks:?}: {why}");
    let mut it = toks.iter().copied();
    if it.next() != Some(PtxTok::Word(".param")) {
        return Err(cannot("kernel parameters start with .param"));
    }
    let (mut align, mut elem, mut ptr, mut name) = (None::<u64>, None::<u64>, false, false);
    let mut size = None::<u64>;
    while let Some(t) = it.next() {
        match t {
            PtxTok::Word(".align") if !name => {
                let n = match it.next() {
                    Some(PtxTok::Word(w)) => parse_ptx_int(w),
                    _ => None,
                }
                .filter(|n| n.is_power_of_two())
                .ok_or_else(|| cannot(".align needs a power of two"))?;
                // After `.ptr` it is the pointee's alignment, not the parameter's.
                if !ptr {
                    align = Some(align.map_or(n, |a| a.max(n)));
                }
            }
            PtxTok::Word(".ptr") if elem.is_some() && !ptr && !name => ptr = true,
            PtxTok::Word(".global" | ".const" | ".local" | ".shared") if ptr && !name => {}
            PtxTok::Word(w) if !name && elem.is_none() && ptx_type_size(w).is_some() => {
                elem = ptx_type_size(w);
                size = elem;
            }
            PtxTok::Word(w) if !name && elem.is_some() && is_ptx_identifier(w) => name = true,
            PtxTok::Punct(b'[') if name => {
                let n = match it.next() {
                    Some(PtxTok::Word(w)) => parse_ptx_int(w),
                    _ => None,
                }
                .ok_or_else(|| cannot("an array size must be an integer literal within u64"))?;
                if it.next() != Some(PtxTok::Punct(b']')) {
                    return Err(cannot("unterminated array size"));
                }
                size = size.and_then(|s| s.checked_mul(n));
                if !matches!(size, Some(s) if s <= MAX_PARAM_BYTES) {
                    return Err(format!(
                        "PTX entry {entry}: a parameter of more than {MAX_PARAM_BYTES} bytes, the most a kernel may take"
                    ));
                }
            }
            _ => return Err(cannot("unexpected token")),
        }
    }
    match (size, elem, name) {
        (Some(size), Some(elem), true) => Ok((size, align.unwrap_or(elem))),
        _ => Err(cannot("a parameter needs a type and a name")),
    }
}

/// The parameter sizes of every `.entry` in a PTX file.
///
/// Conservative: what it cannot read for certain (see `PtxLexer`, and parameter declarations
/// beyond the forms nvcc and hand-written PTX use) is an error, never a guess, because
/// `Module::from_ptx` trusts the lists it returns. Sizes are computed with checked arithmetic;
/// a list of more than `MAX_PARAM_BYTES` (with alignment padding) is an error.
pub fn parse_ptx_entries(ptx: &str) -> Result<Vec<(String, Vec<usize>)>, String> {
    let mut entries: Vec<(String, Vec<usize>)> = Vec::new();
    let mut lx = PtxLexer::new(ptx);
    while let Some(t) = lx.next_tok()? {
        if t != PtxTok::Word(".entry") {
            continue;
        }
        let name = match lx.next_tok()? {
            Some(PtxTok::Word(w)) if is_ptx_identifier(w) => w,
            other => return Err(format!("PTX .entry followed by {other:?}, not a name")),
        };
        if entries.iter().any(|(n, _)| n == name) {
            return Err(format!("PTX entry {name} is declared twice"));
        }
        let mut sizes = Vec::new();
        // The parameter list is optional: `.entry k { ... }`.
        if lx.peek()? == Some(PtxTok::Punct(b'(')) {
            lx.next_tok()?;
            let (mut toks, mut end) = (Vec::new(), 0u64);
            loop {
                let t = lx
                    .next_tok()?
                    .ok_or_else(|| format!("PTX entry {name}: unterminated parameter list"))?;
                match t {
                    PtxTok::Punct(b')') if toks.is_empty() && sizes.is_empty() => break,
                    PtxTok::Punct(b',' | b')') => {
                        let (size, align) = parse_ptx_param(name, &toks)?;
                        end = end
                            .checked_next_multiple_of(align)
                            .and_then(|e| e.checked_add(size))
                            .filter(|&e| e <= MAX_PARAM_BYTES)
                            .ok_or_else(|| {
                                format!(
                                    "PTX entry {name}: parameters of more than {MAX_PARAM_BYTES} bytes, the most a kernel may take"
                                )
                            })?;
                        // At most MAX_PARAM_BYTES: fits in usize.
                        sizes.push(size as usize);
                        toks.clear();
                        if t == PtxTok::Punct(b')') {
                            break;
                        }
                    }
                    // A declaration has a dozen tokens at most; do not collect a whole file.
                    _ if toks.len() >= MAX_PARAM_TOKENS => {
                        return Err(format!(
                            "PTX entry {name}: a parameter declaration of more than {MAX_PARAM_TOKENS} tokens"
                        ))
                    }
                    t => toks.push(t),
                }
            }
        }
        entries.push((name.to_string(), sizes));
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

/// The prefix of a directive in the comment lines above a kernel.
pub const DIRECTIVE: &str = "cuda-runtime:";

/// A quantity a launch precondition compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The number 1: a term of it is a constant.
    One,
    /// `block.x`, `block.y` or `block.z` (0, 1, 2).
    Block(usize),
    /// `grid.x`, `grid.y` or `grid.z` (0, 1, 2).
    Grid(usize),
    /// `dynamic_shared`: bytes of dynamic shared memory per block.
    DynamicShared,
    /// An integer parameter: its name, and its index in the values the wrapper passes.
    Param(Cow<'static, str>, usize),
}

/// `coeff * operand`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// The factor (at most `u32::MAX` when `operand` is not [`Operand::One`]).
    pub coeff: u64,
    /// The quantity.
    pub operand: Operand,
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A launch precondition declared with a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `block = (x, y, z)`: exactly this block shape.
    Block([u32; 3]),
    /// `require lhs op rhs`.
    Compare(Term, Cmp, Term),
}

/// The launch a precondition is checked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchShape {
    /// `gridDim`.
    pub grid: [u32; 3],
    /// `blockDim`.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared: u32,
}

const AXES: [&str; 3] = ["x", "y", "z"];

impl Operand {
    #[inline]
    fn value(&self, shape: &LaunchShape, args: &[i128]) -> i128 {
        match self {
            Operand::One => 1,
            Operand::Block(i) => shape.block.get(*i).map_or(0, |&v| v as i128),
            Operand::Grid(i) => shape.grid.get(*i).map_or(0, |&v| v as i128),
            Operand::DynamicShared => shape.dynamic_shared as i128,
            Operand::Param(_, i) => args.get(*i).copied().unwrap_or(0),
        }
    }
}

impl Term {
    /// The term's value: exact for every term the parser makes (|value| < 2^96).
    #[inline]
    pub fn value(&self, shape: &LaunchShape, args: &[i128]) -> i128 {
        (self.coeff as i128).saturating_mul(self.operand.value(shape, args))
    }
}

impl Rule {
    /// Whether the launch `shape`, with `args` (the values of the parameters the rule names,
    /// by their [`Operand::Param`] indices), meets the rule.
    #[inline]
    pub fn holds(&self, shape: &LaunchShape, args: &[i128]) -> bool {
        match self {
            Rule::Block(b) => shape.block == *b,
            Rule::Compare(l, op, r) => {
                let (l, r) = (l.value(shape, args), r.value(shape, args));
                match op {
                    Cmp::Eq => l == r,
                    Cmp::Ne => l != r,
                    Cmp::Lt => l < r,
                    Cmp::Le => l <= r,
                    Cmp::Gt => l > r,
                    Cmp::Ge => l >= r,
                }
            }
        }
    }

    /// The values the rule was checked with, for an error message: `block = (32, 32, 1)`,
    /// `dynamic_shared = 0, n = 64`.
    pub fn values(&self, shape: &LaunchShape, args: &[i128]) -> String {
        match self {
            Rule::Block(_) => {
                let [x, y, z] = shape.block;
                format!("block = ({x}, {y}, {z})")
            }
            Rule::Compare(l, _, r) => {
                let mut seen: Vec<&Operand> = Vec::new();
                let mut out = String::new();
                for t in [l, r] {
                    if t.operand == Operand::One || seen.contains(&&t.operand) {
                        continue;
                    }
                    seen.push(&t.operand);
                    if !out.is_empty() {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "{} = {}", t.operand, t.operand.value(shape, args));
                }
                out
            }
        }
    }

    /// Rust source that builds this rule in the library (`crate::kernel_sig::Rule`).
    fn to_rust(&self) -> String {
        const K: &str = "crate::kernel_sig";
        let term = |t: &Term| {
            let op = match &t.operand {
                Operand::One => "One".to_string(),
                Operand::Block(i) => format!("Block({i})"),
                Operand::Grid(i) => format!("Grid({i})"),
                Operand::DynamicShared => "DynamicShared".to_string(),
                Operand::Param(n, i) => {
                    format!("Param(::std::borrow::Cow::Borrowed({n:?}), {i})")
                }
            };
            format!(
                "{K}::Term {{ coeff: {}, operand: {K}::Operand::{op} }}",
                t.coeff
            )
        };
        match self {
            Rule::Block([x, y, z]) => format!("{K}::Rule::Block([{x}, {y}, {z}])"),
            Rule::Compare(l, op, r) => {
                format!(
                    "{K}::Rule::Compare({}, {K}::Cmp::{op:?}, {})",
                    term(l),
                    term(r)
                )
            }
        }
    }
}

impl std::fmt::Display for Operand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Operand::One => f.write_str("1"),
            Operand::Block(i) => write!(f, "block.{}", AXES.get(*i).unwrap_or(&"?")),
            Operand::Grid(i) => write!(f, "grid.{}", AXES.get(*i).unwrap_or(&"?")),
            Operand::DynamicShared => f.write_str("dynamic_shared"),
            Operand::Param(n, _) => f.write_str(n),
        }
    }
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.coeff, &self.operand) {
            (c, Operand::One) => write!(f, "{c}"),
            (1, o) => write!(f, "{o}"),
            (c, o) => write!(f, "{c} * {o}"),
        }
    }
}

impl std::fmt::Display for Rule {
    /// The rule in the directive's syntax, normalised (`dynamic_shared >= 4 * n`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Block([x, y, z]) => write!(f, "block = ({x}, {y}, {z})"),
            Rule::Compare(l, op, r) => {
                let op = match op {
                    Cmp::Eq => "==",
                    Cmp::Ne => "!=",
                    Cmp::Lt => "<",
                    Cmp::Le => "<=",
                    Cmp::Gt => ">",
                    Cmp::Ge => ">=",
                };
                write!(f, "{l} {op} {r}")
            }
        }
    }
}

/// Splits a directive into words (`block.x`, `n`, `32`) and symbols (`(`, `)`, `,`, `*`, `=`,
/// `==`, `!=`, `<`, `<=`, `>`, `>=`).
fn directive_tokens(s: &str) -> Result<Vec<&str>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
        } else if matches!(c, b'<' | b'>' | b'=' | b'!') {
            i += 1;
            if b.get(i) == Some(&b'=') {
                i += 1;
            }
        } else if matches!(c, b'(' | b')' | b',' | b'*') {
            i += 1;
        } else {
            let ch = s[i..].chars().next().unwrap_or('?');
            return Err(format!("unexpected `{ch}`"));
        }
        out.push(&s[start..i]);
    }
    Ok(out)
}

fn parse_number(t: &str) -> Result<u64, String> {
    if !t.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("`{t}` is not a number"));
    }
    t.parse::<u64>()
        .map_err(|_| format!("{t} is too large (at most {})", u64::MAX))
}

/// A quantity's name: a launch quantity, or an integer parameter (numbered in `args`).
fn parse_operand(t: &str, params: &[Param], args: &mut Vec<String>) -> Result<Operand, String> {
    let axis = |a: &str| AXES.iter().position(|x| *x == a);
    if let Some(i) = t.strip_prefix("block.").and_then(axis) {
        return Ok(Operand::Block(i));
    }
    if let Some(i) = t.strip_prefix("grid.").and_then(axis) {
        return Ok(Operand::Grid(i));
    }
    if t == "dynamic_shared" {
        return Ok(Operand::DynamicShared);
    }
    let p = params.iter().find(|p| p.name == t).ok_or_else(|| {
        format!(
            "unknown quantity `{t}`: expected block.x|y|z, grid.x|y|z, dynamic_shared or an integer parameter"
        )
    })?;
    if p.pointer
        || matches!(
            p.ty,
            Scalar::F32 | Scalar::F64 | Scalar::Bool | Scalar::TexObject | Scalar::SurfObject
        )
    {
        return Err(format!(
            "parameter `{t}` is not an integer (only integer parameters may be compared)"
        ));
    }
    let i = match args.iter().position(|a| a == t) {
        Some(i) => i,
        None => {
            args.push(t.to_string());
            args.len() - 1
        }
    };
    Ok(Operand::Param(Cow::Owned(t.to_string()), i))
}

/// One side of a comparison: `N`, `quantity`, `N * quantity` or `quantity * N`.
fn parse_term(t: &[&str], params: &[Param], args: &mut Vec<String>) -> Result<Term, String> {
    let is_num = |s: &str| s.bytes().next().is_some_and(|c| c.is_ascii_digit());
    let (coeff, name) = match t {
        [n] if is_num(n) => {
            return Ok(Term {
                coeff: parse_number(n)?,
                operand: Operand::One,
            })
        }
        [q] => (1, *q),
        [n, "*", q] | [q, "*", n] if is_num(n) && !is_num(q) => (parse_number(n)?, *q),
        _ => {
            return Err(format!(
                "cannot read `{}`: expected N, a quantity, or N * quantity",
                t.join(" ")
            ))
        }
    };
    if coeff > u32::MAX as u64 {
        return Err(format!(
            "factor {coeff} is too large (at most {})",
            u32::MAX
        ));
    }
    Ok(Term {
        coeff,
        operand: parse_operand(name, params, args)?,
    })
}

/// Parses a directive other than `unsafe` (the text after `cuda-runtime:`): `block = (X, Y, Z)`
/// or `require A OP B`. Parameters it names are added to `args`.
pub fn parse_directive(d: &str, params: &[Param], args: &mut Vec<String>) -> Result<Rule, String> {
    let t = directive_tokens(d)?;
    match t.first().copied() {
        Some("block") => {
            let shape = "expected `block = (X, Y, Z)`";
            let ["block", "=", "(", inner @ .., ")"] = t.as_slice() else {
                return Err(shape.into());
            };
            // X, Y, Z separated by commas; missing dimensions are 1.
            if inner.len() % 2 == 0
                || inner.len() > 5
                || inner.iter().skip(1).step_by(2).any(|s| *s != ",")
            {
                return Err(shape.into());
            }
            let mut b = [1u32; 3];
            for (i, s) in inner.iter().step_by(2).enumerate() {
                let v = parse_number(s)?;
                b[i] = u32::try_from(v)
                    .map_err(|_| format!("block.{} = {v} is too large", AXES[i]))?;
            }
            let threads = b.iter().map(|&v| v as u64).product::<u64>();
            if b.contains(&0) || b[0] > 1024 || b[1] > 1024 || b[2] > 64 || threads > 1024 {
                return Err(format!(
                    "block ({}, {}, {}) can never be launched (each dimension at least 1, x and y at most 1024, z at most 64, at most 1024 threads)",
                    b[0], b[1], b[2]
                ));
            }
            Ok(Rule::Block(b))
        }
        Some("require") => {
            let ops = ["==", "!=", "<", "<=", ">", ">="];
            let at: Vec<usize> = (1..t.len()).filter(|&i| ops.contains(&t[i])).collect();
            let &[at] = at.as_slice() else {
                return Err("expected `require A OP B` with one of == != < <= > >=".into());
            };
            let op = match t[at] {
                "==" => Cmp::Eq,
                "!=" => Cmp::Ne,
                "<" => Cmp::Lt,
                "<=" => Cmp::Le,
                ">" => Cmp::Gt,
                _ => Cmp::Ge,
            };
            let lhs = parse_term(&t[1..at], params, args)?;
            let rhs = parse_term(&t[at + 1..], params, args)?;
            Ok(Rule::Compare(lhs, op, rhs))
        }
        _ => Err(
            "unknown directive: expected `unsafe`, `block = (X, Y, Z)` or `require A OP B`".into(),
        ),
    }
}

fn upper(name: &str) -> String {
    name.to_ascii_uppercase()
}

/// The parameter a precondition names, and whether it is a safe kernel's `*_len` companion (the
/// wrapper then takes the length from the buffer, the parameter before it).
fn precondition_param<'a>(k: &'a Kernel, name: &str) -> Option<(&'a Param, Option<&'a Param>)> {
    let i = k.params.iter().position(|p| p.name == name)?;
    let p = &k.params[i];
    let buffer = (!k.is_unsafe && i > 0)
        .then(|| &k.params[i - 1])
        .filter(|b| b.pointer && !p.pointer);
    Some((p, buffer))
}

/// The wrapper's expressions for the values of the parameters the preconditions name, in
/// argument order.
fn precondition_values(k: &Kernel) -> Vec<String> {
    k.precondition_args
        .iter()
        .filter_map(|a| precondition_param(k, a))
        .map(|(p, buffer)| match buffer {
            Some(b) => format!("crate::DeviceRead::<{}>::len(&*{})", b.ty.rust(), b.name),
            None => p.name.clone(),
        })
        .collect()
}

/// `<kernel>_preconditions(config, args...)`: the check the wrapper runs first.
fn generate_precondition_check(o: &mut String, k: &Kernel) {
    let params: Vec<(String, String)> = k
        .precondition_args
        .iter()
        .filter_map(|a| precondition_param(k, a))
        .map(|(p, _)| (p.name.clone(), p.ty.rust().to_string()))
        .collect();
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "    /// Checks the launch preconditions declared with `{}` (see its wrapper).",
        k.name
    );
    let _ = writeln!(o, "    #[inline]");
    let _ = writeln!(o, "    #[allow(clippy::too_many_arguments)]");
    let _ = writeln!(
        o,
        "    pub(crate) fn {}_preconditions(config: &crate::LaunchConfig{}) -> crate::Result<()> {{",
        k.name,
        params
            .iter()
            .map(|(n, t)| format!(", {n}: {t}"))
            .collect::<String>()
    );
    let _ = writeln!(
        o,
        "        static RULES: [crate::kernel_sig::Rule; {}] = [",
        k.preconditions.len()
    );
    for r in &k.preconditions {
        let _ = writeln!(o, "            {},", r.to_rust());
    }
    let _ = writeln!(o, "        ];");
    let _ = writeln!(
        o,
        "        crate::launch::check_preconditions({:?}, &RULES, config, &[{}])",
        k.name,
        params
            .iter()
            .map(|(n, _)| format!("{n} as i128"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(o, "    }}");
}

/// A texture or surface object parameter of a safe kernel: the wrapper takes the crate's object
/// (`&TextureObject<'_>`, `&mut SurfaceObject`), passes its handle, and hands the launch two uses
/// (the object, and the memory it reads or the array it writes). Returns `false` for other
/// parameters.
fn handle_param(
    k: &Kernel,
    p: &Param,
    args: &mut Vec<String>,
    setup: &mut Vec<String>,
    uses: &mut Vec<String>,
    ptrs: &mut Vec<String>,
) -> bool {
    let (ty, call) = match p.ty {
        Scalar::TexObject => (
            "&crate::TextureObject<'_>",
            "crate::TextureObject::kernel_arg",
        ),
        Scalar::SurfObject => (
            "&mut crate::SurfaceObject",
            "crate::SurfaceObject::kernel_arg",
        ),
        _ => return false,
    };
    let n = &p.name;
    args.push(format!("{n}: {ty}"));
    match k.objects.iter().find(|e| e.param == *n) {
        Some(e) => setup.push(format!(
            "let (mut {n}_v, {n}_use, {n}_mem_use) = {call}_expect({n}, {:?}, {n:?}, &[{}], {:?})?;",
            k.name,
            e.shapes.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "),
            e.element
        )),
        None => setup.push(format!(
            "let (mut {n}_v, {n}_use, {n}_mem_use) = {call}({n});"
        )),
    }
    uses.push(format!("{n}_use"));
    uses.push(format!("{n}_mem_use"));
    ptrs.push(format!(
        "&mut {n}_v as *mut u64 as *mut ::core::ffi::c_void"
    ));
    true
}

/// Generates the Rust module for one kernel file. `ptx_path` is the absolute path of the PTX to
/// embed, `source` the file's name for the docs.
pub fn generate(
    stem: &str,
    source: &str,
    ptx_path: &str,
    arch: u32,
    kernels: &[Kernel],
) -> Result<String, String> {
    generate_with(stem, source, ptx_path, arch, kernels, None)
}

/// [`generate`], for a device-runtime kernel file when `image` is given: its module loads the
/// linked image from `image.krate` when `image.feature` is enabled, and fails with
/// `Error::FeatureDisabled` otherwise; a compile-time assertion checks that the image was built
/// from the current sources.
pub fn generate_with(
    stem: &str,
    source: &str,
    ptx_path: &str,
    arch: u32,
    kernels: &[Kernel],
    image: Option<&LinkedImage<'_>>,
) -> Result<String, String> {
    let mut o = String::new();
    let _ = writeln!(o, "pub mod {stem} {{");
    let _ = writeln!(
        o,
        "    //! Kernels of `kernels/{source}`, with typed launch wrappers."
    );
    match image {
        None => {
            let _ = writeln!(o, "    /// The module's PTX (compute_{arch}).");
            let _ = writeln!(o, "    pub const PTX: &str = include_str!({ptx_path:?});");
            let _ = writeln!(o, "    /// The module, loaded on each device on first use.");
            let _ = writeln!(
                o,
                "    pub static MODULE: crate::module::EmbeddedModule = crate::module::EmbeddedModule::new({stem:?}, PTX, {arch});"
            );
        }
        Some(img) => {
            let LinkedImage {
                krate,
                feature,
                sources_sha256,
            } = img;
            let _ = writeln!(o, "    /// The module's relocatable PTX (compute_{arch}, `-rdc=true`): it calls the device");
            let _ = writeln!(o, "    /// runtime, so the driver cannot load it alone; `MODULE` loads the linked image.");
            let _ = writeln!(o, "    pub const PTX: &str = include_str!({ptx_path:?});");
            let _ = writeln!(o, "    #[cfg(feature = {feature:?})]");
            let _ = writeln!(
                o,
                "    const _: () = assert!(crate::module::same_sources_hash({krate}::{stem}::SOURCES_SHA256, {sources_sha256:?}), {:?});",
                format!("the device-runtime image of kernels/{source} was built from other sources: run scripts/update-ptx")
            );
            let _ = writeln!(o, "    /// The module, loaded on each device on first use from the image linked ahead of time");
            let _ = writeln!(o, "    /// with the device runtime (feature `{feature}`).");
            let _ = writeln!(o, "    #[cfg(feature = {feature:?})]");
            let _ = writeln!(
                o,
                "    // SAFETY: the crate's own image of this file, written by the pinned nvcc"
            );
            let _ = writeln!(o, "    // (scripts/update-ptx), checked byte for byte in CI (scripts/check-ptx) and against");
            let _ = writeln!(
                o,
                "    // the sources' hash above; machine code for each of ARCHS."
            );
            let _ = writeln!(
                o,
                "    pub static MODULE: crate::module::EmbeddedModule = unsafe {{ crate::module::EmbeddedModule::linked({stem:?}, PTX, {arch}, {krate}::{stem}::FATBIN, {krate}::ARCHS) }};"
            );
            let _ = writeln!(
                o,
                "    /// The module: without the feature `{feature}` its kernels fail with"
            );
            let _ = writeln!(o, "    /// `Error::FeatureDisabled`.");
            let _ = writeln!(o, "    #[cfg(not(feature = {feature:?}))]");
            let _ = writeln!(
                o,
                "    pub static MODULE: crate::module::EmbeddedModule = crate::module::EmbeddedModule::linked_disabled({stem:?}, PTX, {arch}, {feature:?});"
            );
        }
    }
    for k in kernels {
        check_convention(k)?;
        let sizes: Vec<String> = k.params.iter().map(|p| p.size().to_string()).collect();
        let _ = writeln!(o, "    /// The kernel `{}`, for attributes and occupancy ([`crate::EmbeddedKernel::function`]).", k.name);
        let _ = writeln!(
            o,
            "    pub static {}: crate::module::EmbeddedKernel = crate::module::EmbeddedKernel::new(&MODULE, {:?}, &[{}], {});",
            upper(&k.name),
            k.name,
            sizes.join(", "),
            k.waits_for_previous
        );
        if !k.preconditions.is_empty() {
            generate_precondition_check(&mut o, k);
        }
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
            "    /// Launches `{}` on `stream` (`cudaLaunchKernel`; `cudaLaunchKernelEx` with a `LaunchConfigEx`): `{}`.",
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
            } else if !k.is_unsafe
                && handle_param(k, p, &mut args, &mut setup, &mut uses, &mut ptrs)
            {
                i += 1;
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
        if k.waits_for_previous {
            let _ = writeln!(o, "    ///");
            let _ = writeln!(o, "    /// Declared `waits-for-previous-kernel`: accepts programmatic stream serialization");
            let _ = writeln!(
                o,
                "    /// (`LaunchConfigEx::programmatic_stream_serialization`)."
            );
        }
        if !k.preconditions.is_empty() {
            let _ = writeln!(o, "    ///");
            let _ = writeln!(o, "    /// # Preconditions");
            let _ = writeln!(
                o,
                "    /// Declared with the kernel and checked before launching:"
            );
            for r in &k.preconditions {
                let _ = writeln!(o, "    /// - `{r}`");
            }
        }
        if let Some(img) = image {
            let _ = writeln!(o, "    ///");
            let _ = writeln!(o, "    /// Uses the CUDA device runtime: runs from the image linked ahead of time with it");
            let _ = writeln!(o, "    /// (feature `{}`; without it the launch fails with `Error::FeatureDisabled`).", img.feature);
        }
        if arch > BASE_ARCH {
            let _ = writeln!(o, "    ///");
            let _ = writeln!(
                o,
                "    /// Built for `sm_{arch}`: on a device of compute capability below {}.{} the launch fails",
                arch / 10,
                arch % 10
            );
            let _ = writeln!(o, "    /// with `Error::ComputeCapability` (`cudaErrorNoKernelImageForDevice`) before the module loads.");
        }
        let _ = writeln!(o, "    ///");
        let _ = writeln!(o, "    /// # Errors");
        if k.preconditions.is_empty() {
            let _ = writeln!(o, "    /// An invalid launch configuration, buffers of another device than `stream`, or the driver's errors.");
        } else {
            let _ = writeln!(o, "    /// A launch that breaks a precondition ([`crate::Error::KernelPrecondition`]), an invalid");
            let _ = writeln!(o, "    /// launch configuration, buffers of another device than `stream`, or the driver's errors.");
        }
        let _ = writeln!(o, "    #[allow(clippy::too_many_arguments)]");
        let unsafe_kw = if k.is_unsafe { "unsafe " } else { "" };
        let _ = writeln!(
            o,
            "    pub {unsafe_kw}fn {}(stream: &crate::Stream, config: &(impl crate::launch::Launch + ?Sized){}{}) -> crate::Result<()> {{",
            k.name,
            if args.is_empty() { "" } else { ", " },
            args.join(", ")
        );
        if !k.preconditions.is_empty() {
            // Before any buffer is borrowed: a refused launch notes no use.
            let _ = writeln!(
                o,
                "        {}_preconditions(crate::launch::Launch::config(config){})?;",
                k.name,
                precondition_values(k)
                    .iter()
                    .map(|v| format!(", {v}"))
                    .collect::<String>()
            );
        }
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

    /// A real entry preceded by fake ones in line and block comments, with the same name and
    /// other parameter lists: only the real list may come back.
    #[test]
    fn ptx_entries_in_comments_are_ignored() {
        let ptx = "
.version 8.0
.target sm_75
.address_size 64
// .visible .entry axpy(.param .u32 fake)
/* A block comment over lines, with an entry in it:
.visible .entry axpy(
    .param .u64 fake_0
)
*/
.visible .entry axpy( // trailing comment .entry axpy(.param .u8 z)
    .param .u64 y, /* .param .u64 inside, */ .param .u64 x,
    .param .f32 a, .param .u32 n
)
{ ret; }
";
        let e = parse_ptx_entries(ptx).unwrap();
        assert_eq!(e, vec![("axpy".to_string(), vec![8, 8, 4, 4])]);
    }

    /// `elem * count` products, and sums, that overflow or exceed the driver's 32764-byte
    /// parameter limit are errors, not panics or wrapped sizes.
    #[test]
    fn ptx_parameter_sizes_are_checked_not_wrapped() {
        let entry = |params: &str| format!(".visible .entry k({params})\n{{ ret; }}\n");
        for params in [
            // 8 * 2^61 = 2^64: overflows usize.
            ".param .align 8 .b64 p[2305843009213693952]",
            // Fits in usize, far above the limit.
            ".param .align 8 .b8 p[4294967296]",
            // Does not fit in u64.
            ".param .align 8 .b8 p[18446744073709551616]",
            // One byte over.
            ".param .align 4 .b8 p[32765]",
            // Each fits, the sum does not.
            ".param .align 8 .b8 p[32760], .param .u64 q",
        ] {
            let r = parse_ptx_entries(&entry(params));
            assert!(r.is_err(), "{params}: {r:?}");
        }
        assert_eq!(
            parse_ptx_entries(&entry(".param .align 4 .b8 p[32764]")).unwrap(),
            vec![("k".to_string(), vec![32764])]
        );
    }

    #[test]
    fn ptx_lexing_follows_the_driver_or_refuses() {
        let ok = |ptx: &str| parse_ptx_entries(ptx).unwrap_or_else(|e| panic!("{ptx}: {e}"));
        let refused = |ptx: &str| {
            let r = parse_ptx_entries(ptx);
            assert!(r.is_err(), "{ptx:?} gave {r:?}");
        };
        let k = |sizes: Vec<usize>| vec![("k".to_string(), sizes)];
        // `//` and `/*` inside a string literal start no comment.
        assert_eq!(
            ok(".file 1 \"/src//a/*b.cu\"\n.entry k(.param .u32 a)\n{ ret; }\n/* \" */"),
            k(vec![4])
        );
        // A comment is whitespace between tokens; `.visible.entry` is two tokens.
        assert_eq!(ok(".visible.entry/**/k(.param/* */.u64 a)"), k(vec![8]));
        // No parameter list at all.
        assert_eq!(ok(".entry k .maxntid 32, 1, 1\n{ ret; }"), k(vec![]));
        // Integer literals as PTX (C) writes them, and spaces inside brackets.
        assert_eq!(
            ok(".entry k(.param .b8 a[ 0x10 ], .param .b8 b[010], .param .b8 c[0b11U])"),
            k(vec![16, 8, 3])
        );
        // Alignment pads the list; the pointee's alignment after `.ptr` does not count.
        assert_eq!(
            ok(".entry k(.param .u64 .ptr .global .align 16 p, .param .align 8 .b8 s[2][3])"),
            k(vec![8, 6])
        );
        assert_eq!(
            ok(".entry k(.param .u8 a, .param .align 4096 .b8 s[28668])"),
            k(vec![1, 28668])
        );
        refused(".entry k(.param .u8 a, .param .align 4096 .b8 s[28669])");
        // What could make the driver see other entries than the parser: refused.
        refused("#if 0\n.entry k(.param .u32 a)\n#endif\n.entry k(.param .u64 a)");
        refused("#define P .param .u64\n.entry k(P a)");
        refused("// comment \\\n.entry k(.param .u32 a)");
        refused("// comment \\ \r\n.entry k(.param .u32 a)");
        refused("/* *\\\n/ .entry k(.param .u32 a) */");
        refused(".file 1 \"a\\\" .entry k(.param .u32 a) \"");
        refused(".entry\u{2003}k(.param .u32 a)");
        refused(".entry k(.param .u32 a)\0.entry j(.param .u32 a)");
        refused("/* unterminated .entry k(.param .u32 a)");
        refused(".entry k(.param .u32 a)\n.entry k(.param .u64 a)");
        refused(".entry k(.param .u32 a");
        refused(".entry k(.param .u32 a,)");
        refused(".entry k(.param .u32)");
        refused(".entry k(.reg .u32 a)");
        refused(".entry k(.param .u32 a[])");
        refused(".entry k(.param .u32 a[-1])");
        refused(".entry k(.param .align 3 .b8 a[4])");
        refused(".entry k(.param .texref t)");
        refused(".entry (.param .u32 a)");
        // Comments may hold anything else.
        assert_eq!(
            ok("// #if \u{e9} \\ x\n/* # \\ \u{2003} */.entry k()"),
            k(vec![])
        );
    }

    /// Random text and random mutations of the crate's PTX never make the parser panic, and
    /// what it accepts stays within the driver's limits. Replay with `PTX_FUZZ_SEED=<seed>`.
    #[test]
    fn ptx_parser_never_panics_on_random_or_mutated_text() {
        let seed = std::env::var("PTX_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fastrand::u64(..));
        println!("PTX_FUZZ_SEED={seed}");
        let mut rng = fastrand::Rng::with_seed(seed);
        // The cuda-runtime crate's committed PTX, beside this crate in the workspace.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/ptx");
        let mut real: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        real.push(PTX.to_string());
        assert!(real.len() > 2);
        let pieces: &[&str] = &[
            "/",
            "*",
            "/*",
            "*/",
            "//",
            "\"",
            "\\",
            "#",
            "\n",
            "\r",
            "\0",
            "(",
            ")",
            "[",
            "]",
            ",",
            ".entry ",
            ".entry",
            ".param",
            ".align",
            ".ptr",
            ".global",
            ".b8",
            ".u64",
            " p[",
            "18446744073709551615",
            "18446744073709551616",
            "32764",
            "0x",
            "0b",
            "09",
            "U",
            "{",
            "}",
            "\u{e9}",
            "\u{2003}",
            " ",
            "\t",
            "k",
            "%r1",
        ];
        let check = |text: &str| {
            if let Ok(entries) = parse_ptx_entries(text) {
                for (name, sizes) in &entries {
                    assert!(is_ptx_identifier(name), "{name:?} from {text:?}");
                    let total: usize = sizes.iter().sum();
                    assert!(total as u64 <= MAX_PARAM_BYTES, "{name}: {sizes:?}");
                }
            }
        };
        for round in 0..3000 {
            let text = match round % 3 {
                // Random bytes.
                0 => {
                    let n = rng.usize(0..400);
                    let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                // Random PTX-like tokens.
                1 => (0..rng.usize(0..200))
                    .map(|_| pieces[rng.usize(..pieces.len())])
                    .collect(),
                // Mutations of real PTX.
                _ => {
                    let mut b = real[rng.usize(..real.len())].clone().into_bytes();
                    for _ in 0..rng.usize(1..8) {
                        let at = rng.usize(0..=b.len());
                        match rng.u8(0..4) {
                            0 => {
                                let p = pieces[rng.usize(..pieces.len())];
                                b.splice(at..at, p.bytes());
                            }
                            1 => {
                                let end = (at + rng.usize(0..64)).min(b.len());
                                b.drain(at..end);
                            }
                            2 => {
                                let end = (at + rng.usize(0..200)).min(b.len());
                                let copy = b[at..end].to_vec();
                                let to = rng.usize(0..=b.len());
                                b.splice(to..to, copy);
                            }
                            _ => {
                                if at < b.len() {
                                    b[at] = rng.u8(..);
                                }
                            }
                        }
                    }
                    String::from_utf8_lossy(&b).into_owned()
                }
            };
            check(&text);
        }
        // The unmutated files parse.
        for ptx in &real {
            parse_ptx_entries(ptx).unwrap();
        }
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
    fn parameters_named_like_rust_keywords_or_wrapper_arguments_are_build_errors() {
        for name in ["in", "type", "fn", "stream", "config", "params"] {
            let src = format!("extern \"C\" __global__ void k(const int* {name}, size_t n) {{}}");
            let e = parse_kernels(&src).unwrap_err();
            assert!(
                e.contains("kernel k") && e.contains(&format!("`{name}`")),
                "{e}"
            );
        }
        parse_kernels("extern \"C\" __global__ void k(const int* input, size_t input_len) {}")
            .unwrap();
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
        let code = generate("demo", "demo.cu", "/x/demo.ptx", 75, &k).unwrap();
        assert!(code.contains("pub mod demo {"));
        assert!(code.contains("pub static VADD: crate::module::EmbeddedKernel"));
        assert!(code.contains("&[8, 8, 8, 8, 8, 8]"));
        assert!(code.contains("a: &(impl crate::DeviceRead<f32> + ?Sized)"));
        assert!(code.contains("c: &mut (impl crate::DeviceWrite<f32> + ?Sized)"));
        assert!(
            !code.contains("a_len: usize"),
            "lengths are not parameters of the wrapper"
        );
        assert!(code.contains("pub unsafe fn raw(stream: &crate::Stream, config: &(impl crate::launch::Launch + ?Sized), addr: u64, v: u32, p: u64)"));
        assert!(code.contains("pub fn empty(stream: &crate::Stream, config: &(impl crate::launch::Launch + ?Sized)) -> crate::Result<()>"));
        assert!(code.contains("[*mut ::core::ffi::c_void; 0] = []"));
    }

    #[test]
    fn device_runtime_files_are_marked_and_generate_image_modules() {
        let src = "// Launches.\n//   cuda-runtime:   device-runtime  \n\n// cuda-runtime: device-runtime\nextern \"C\" __global__ void p(float* o, size_t o_len) {}\n__global__ void child(float* o) {}\n";
        assert!(file_device_runtime(src));
        for not in [
            "// cuda-runtime: device-runtime please\n",
            "/* cuda-runtime: device-runtime */\n",
            "int x; // cuda-runtime: device-runtime\n",
            "// cuda-runtime: arch = sm_90\n",
            "",
        ] {
            assert!(!file_device_runtime(not), "{not:?}");
        }
        // Accepted among a kernel's directives; children without extern "C" get no wrapper.
        let k = parse_kernels(src).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].name, "p");
        assert!(k[0].preconditions.is_empty());
        let hash = "ab".repeat(32);
        let img = LinkedImage {
            krate: "::images",
            feature: "devrt",
            sources_sha256: &hash,
        };
        let code = generate_with("dp", "dp.cu", "/x/dp.ptx", 75, &k, Some(&img)).unwrap();
        assert!(code.contains(&format!(
            "const _: () = assert!(crate::module::same_sources_hash(::images::dp::SOURCES_SHA256, \"{hash}\")"
        )));
        assert!(code.contains("    pub static MODULE: crate::module::EmbeddedModule = unsafe { crate::module::EmbeddedModule::linked(\"dp\", PTX, 75, ::images::dp::FATBIN, ::images::ARCHS) };"));
        assert!(code.contains("#[cfg(feature = \"devrt\")]\n    // SAFETY: "));
        assert!(code.contains("#[cfg(not(feature = \"devrt\"))]\n    pub static MODULE: crate::module::EmbeddedModule = crate::module::EmbeddedModule::linked_disabled(\"dp\", PTX, 75, \"devrt\");"));
        assert!(code.contains("pub fn p(stream: &crate::Stream"));
        assert!(!code.contains("fn child"));
        assert_eq!(code.matches("pub static MODULE").count(), 2);
        // Without an image the module is the PTX's, as before.
        let plain = generate("dp", "dp.cu", "/x/dp.ptx", 75, &k).unwrap();
        assert!(plain.contains("crate::module::EmbeddedModule::new(\"dp\", PTX, 75);"));
        assert!(!plain.contains("linked"));
    }

    const DECLARED: &str = r#"
// Tiles of 32x8.
// cuda-runtime: block = (32, 8, 1)
extern "C" __global__ void tile(float* o, size_t o_len, int w) {}
// Reverses through dynamic shared memory.
// cuda-runtime: require dynamic_shared >= 4*n
// cuda-runtime: require n <= o_len
// cuda-runtime: require grid.x == 1
extern "C" __global__ void rev(int* o, size_t o_len, int n) {}
// cuda-runtime: unsafe
// cuda-runtime: block = (64)
extern "C" __global__ void raw(unsigned long long p, unsigned long long p_len) {}
"#;

    fn shape(block: [u32; 3], grid: [u32; 3], dynamic_shared: u32) -> LaunchShape {
        LaunchShape {
            grid,
            block,
            dynamic_shared,
        }
    }

    fn rule(d: &str, params: &str) -> Result<Rule, String> {
        let src = format!("extern \"C\" __global__ void k({params}) {{}}");
        let k = parse_kernels(&src).unwrap();
        parse_directive(d, &k[0].params, &mut Vec::new())
    }

    #[test]
    fn directives_become_preconditions_not_docs() {
        let k = parse_kernels(DECLARED).unwrap();
        assert_eq!(k[0].preconditions, [Rule::Block([32, 8, 1])]);
        assert_eq!(k[0].doc, ["Tiles of 32x8."]);
        assert!(k[0].precondition_args.is_empty());
        let r = &k[1];
        assert_eq!(r.doc, ["Reverses through dynamic shared memory."]);
        let texts: Vec<String> = r.preconditions.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            texts,
            ["dynamic_shared >= 4 * n", "n <= o_len", "grid.x == 1"]
        );
        // Each parameter gets one index, in order of first use.
        assert_eq!(r.precondition_args, ["n", "o_len"]);
        assert_eq!(
            r.preconditions[1],
            Rule::Compare(
                Term {
                    coeff: 1,
                    operand: Operand::Param("n".into(), 0)
                },
                Cmp::Le,
                Term {
                    coeff: 1,
                    operand: Operand::Param("o_len".into(), 1)
                }
            )
        );
        assert!(k[2].is_unsafe);
        assert_eq!(k[2].preconditions, [Rule::Block([64, 1, 1])]);
        assert!(k[2].doc.is_empty());
    }

    #[test]
    fn directive_syntax_variants() {
        let p = "int* d, size_t d_len, int n, unsigned long long big";
        let cases = [
            ("block = (32, 8, 1)", "block = (32, 8, 1)"),
            ("block=(32,8)", "block = (32, 8, 1)"),
            ("block = ( 1024 )", "block = (1024, 1, 1)"),
            ("require dynamic_shared >= 4 * n", "dynamic_shared >= 4 * n"),
            ("require dynamic_shared>=n*4", "dynamic_shared >= 4 * n"),
            (
                "require 4 * block.x <= dynamic_shared",
                "4 * block.x <= dynamic_shared",
            ),
            ("require grid.z == 1", "grid.z == 1"),
            ("require block.y != 3", "block.y != 3"),
            ("require n < d_len", "n < d_len"),
            ("require big > 0", "big > 0"),
            (
                "require 18446744073709551615 >= big",
                "18446744073709551615 >= big",
            ),
            ("require 4294967295 * n >= 0", "4294967295 * n >= 0"),
        ];
        for (d, normal) in cases {
            let r = rule(d, p).unwrap_or_else(|e| panic!("{d}: {e}"));
            assert_eq!(r.to_string(), normal, "{d}");
            // The normal form reads back as the same rule.
            let again = if normal.starts_with("block =") {
                normal.to_string()
            } else {
                format!("require {normal}")
            };
            assert_eq!(rule(&again, p).unwrap(), r, "{again}");
        }
    }

    #[test]
    fn texture_and_surface_directives_are_parsed_and_checked() {
        let src = "// cuda-runtime: texture t 2d,mipmapped-2d float\n\
                   // cuda-runtime: surface s cubemap 4\n\
                   extern \"C\" __global__ void k(cudaTextureObject_t t, cudaSurfaceObject_t s) {}";
        let k = parse_kernels(src).unwrap();
        assert_eq!(
            k[0].objects,
            vec![
                ObjectExpect {
                    param: "t".into(),
                    shapes: vec!["2d".into(), "mipmapped-2d".into()],
                    element: "float".into()
                },
                ObjectExpect {
                    param: "s".into(),
                    shapes: vec!["cubemap".into()],
                    element: "4".into()
                },
            ]
        );
        for (bad, why) in [
            ("texture t 4d float", "unknown shape"),
            ("texture t 2d double", "unknown element"),
            ("texture s 2d float", "no cudaTextureObject_t"),
            ("surface s mipmapped-2d 4", "unknown shape"),
            ("surface s 2d 3", "unknown element"),
            ("texture t 2d", "expected"),
        ] {
            let src = format!(
                "// cuda-runtime: {bad}\nextern \"C\" __global__ void k(cudaTextureObject_t t, cudaSurfaceObject_t s) {{}}"
            );
            let e = parse_kernels(&src).unwrap_err();
            assert!(e.contains(why) && e.contains("kernel k"), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_directives_are_build_errors_with_the_kernel_and_the_directive() {
        let p = "float* f, size_t f_len, float x, bool b, int n";
        let cases = [
            ("blok = (32, 8, 1)", "unknown directive"),
            ("unsafe please", "unknown directive"),
            ("block = 32", "block = (X, Y, Z)"),
            ("block = (32, 8, 1, 1)", "block = (X, Y, Z)"),
            ("block = (32 8)", "block = (X, Y, Z)"),
            ("block = (32,)", "block = (X, Y, Z)"),
            ("block = (0, 8, 1)", "can never be launched"),
            ("block = (64, 32, 1)", "can never be launched"),
            ("block = (1, 1, 65)", "can never be launched"),
            ("block = (1, 4294967296)", "too large"),
            ("block = (-32, 8)", "unexpected `-`"),
            ("require n", "one of =="),
            ("require n = 4", "one of =="),
            ("require 1 < n < 5", "one of =="),
            ("require m >= 1", "unknown quantity `m`"),
            ("require block.w >= 1", "unknown quantity `block.w`"),
            ("require x >= 1", "`x` is not an integer"),
            ("require b == 1", "`b` is not an integer"),
            ("require f >= 1", "`f` is not an integer"),
            (
                "require 4294967296 * n >= 1",
                "factor 4294967296 is too large",
            ),
            ("require 99999999999999999999 >= n", "too large"),
            ("require n * n >= 1", "cannot read `n * n`"),
            ("require 2 * 3 >= n", "cannot read `2 * 3`"),
            ("require >= n", "cannot read ``"),
            ("require n >= 1 + 2", "unexpected `+`"),
            ("require n ≥ 1", "unexpected `≥`"),
        ];
        for (d, want) in cases {
            let src = format!("// cuda-runtime: {d}\nextern \"C\" __global__ void kk({p}) {{}}");
            let e = parse_kernels(&src).expect_err(d);
            assert!(
                e.contains("kernel kk") && e.contains(d) && e.contains(want),
                "{d}: {e}"
            );
        }
    }

    #[test]
    fn rules_hold_exactly_for_extreme_values() {
        let dynamic = rule("require dynamic_shared >= 4 * n", "int n").unwrap();
        let any = [1, 1, 1];
        assert!(!dynamic.holds(&shape(any, any, 0), &[64]));
        assert!(!dynamic.holds(&shape(any, any, 255), &[64]));
        assert!(dynamic.holds(&shape(any, any, 256), &[64]));
        assert!(dynamic.holds(&shape(any, any, 0), &[0]));
        assert!(dynamic.holds(&shape(any, any, 0), &[-5]));
        assert!(dynamic.holds(&shape(any, any, 0), &[i32::MIN as i128]));
        // 4 * i32::MAX does not fit in u32 dynamic shared memory: refused, not wrapped.
        assert!(!dynamic.holds(&shape(any, any, u32::MAX), &[i32::MAX as i128]));
        // No overflow with the largest factor and the largest 64-bit values.
        let big = rule(
            "require 4294967295 * big >= 4294967295 * len",
            "unsigned long long big, size_t len",
        )
        .unwrap();
        assert!(big.holds(&shape(any, any, 0), &[u64::MAX as i128, u64::MAX as i128]));
        assert!(!big.holds(
            &shape(any, any, 0),
            &[u64::MAX as i128 - 1, u64::MAX as i128]
        ));
        let block = Rule::Block([32, 8, 1]);
        assert!(block.holds(&shape([32, 8, 1], [u32::MAX, 65535, 65535], u32::MAX), &[]));
        for b in [
            [32, 32, 1],
            [8, 32, 1],
            [32, 8, 2],
            [1, 1, 1],
            [1024, 1, 1],
            [7, 3, 2],
        ] {
            assert!(!block.holds(&shape(b, any, 0), &[]), "{b:?}");
        }
        let each = [
            ("require block.x == 5", [5, 2, 3], [7, 11, 13]),
            ("require block.y == 2", [5, 2, 3], [7, 11, 13]),
            ("require block.z == 3", [5, 2, 3], [7, 11, 13]),
            ("require grid.x == 7", [5, 2, 3], [7, 11, 13]),
            ("require grid.y == 11", [5, 2, 3], [7, 11, 13]),
            ("require grid.z == 13", [5, 2, 3], [7, 11, 13]),
        ];
        for (d, b, g) in each {
            let r = rule(d, "int n").unwrap();
            assert!(r.holds(&shape(b, g, 0), &[]), "{d}");
            assert!(!r.holds(&shape(g, b, 0), &[]), "{d}");
        }
        let ops = [
            ("==", [false, true, false]),
            ("!=", [true, false, true]),
            ("<", [true, false, false]),
            ("<=", [true, true, false]),
            (">", [false, false, true]),
            (">=", [false, true, true]),
        ];
        for (op, want) in ops {
            let r = rule(&format!("require n {op} 0"), "int n").unwrap();
            let got = [-1, 0, 1].map(|n| r.holds(&shape(any, any, 0), &[n]));
            assert_eq!(got, want, "{op}");
        }
    }

    #[test]
    fn refusals_name_the_values_checked() {
        let any = [1, 1, 1];
        let r = rule("require dynamic_shared >= 4 * n", "int n").unwrap();
        assert_eq!(
            r.values(&shape(any, any, 0), &[64]),
            "dynamic_shared = 0, n = 64"
        );
        let r = rule("require 2 * n <= n", "int n").unwrap();
        assert_eq!(r.values(&shape(any, any, 0), &[-3]), "n = -3");
        let r = rule("require block.x >= 7", "int n").unwrap();
        assert_eq!(r.values(&shape([4, 1, 1], any, 0), &[]), "block.x = 4");
        let r = Rule::Block([32, 8, 1]);
        assert_eq!(
            r.values(&shape([32, 32, 1], any, 0), &[]),
            "block = (32, 32, 1)"
        );
    }

    #[test]
    fn generated_wrappers_check_preconditions_before_borrowing() {
        let k = parse_kernels(DECLARED).unwrap();
        let code = generate("demo", "demo.cu", "/x/demo.ptx", 75, &k).unwrap();
        // The check function, with the parameters its rules name.
        assert!(code.contains(
            "pub(crate) fn tile_preconditions(config: &crate::LaunchConfig) -> crate::Result<()>"
        ));
        assert!(code.contains("crate::kernel_sig::Rule::Block([32, 8, 1])"));
        assert!(code.contains(
            "pub(crate) fn rev_preconditions(config: &crate::LaunchConfig, n: i32, o_len: usize)"
        ));
        assert!(code.contains("crate::launch::check_preconditions(\"rev\", &RULES, config, &[n as i128, o_len as i128])"));
        // A length is taken from the buffer, before the buffer is borrowed for the launch.
        let call = "rev_preconditions(crate::launch::Launch::config(config), n, crate::DeviceRead::<i32>::len(&*o))?;";
        let borrow = "crate::DeviceWrite::kernel_arg_mut(o);";
        let rev = &code[code.find("pub fn rev(").unwrap()..];
        assert!(rev.find(call).unwrap() < rev.find(borrow).unwrap(), "{rev}");
        // An unsafe kernel's `*_len` is its own argument.
        assert!(code.contains("raw_preconditions(crate::launch::Launch::config(config))?;"));
        // The docs list the preconditions.
        assert!(code.contains("    /// - `dynamic_shared >= 4 * n`"));
        assert!(code.contains("[`crate::Error::KernelPrecondition`]"));
        // Kernels without preconditions get no check.
        let plain = generate("p", "p.cu", "/x/p.ptx", 75, &parse_kernels(SRC).unwrap()).unwrap();
        assert!(!plain.contains("_preconditions"));
        assert!(!plain.contains("# Preconditions"));
    }

    #[test]
    fn unsafe_kernels_may_name_their_raw_lengths() {
        let src = "// cuda-runtime: unsafe\n// cuda-runtime: require p_len >= 4\nextern \"C\" __global__ void r(float* p, size_t p_len) {}";
        let k = parse_kernels(src).unwrap();
        let code = generate("u", "u.cu", "/x/u.ptx", 75, &k).unwrap();
        assert!(
            code.contains("r_preconditions(crate::launch::Launch::config(config), p_len)?;"),
            "{code}"
        );
    }

    #[test]
    fn texture_and_surface_parameters_take_the_objects_and_note_two_uses() {
        let src = "extern \"C\" __global__ void k(cudaTextureObject_t t, cudaSurfaceObject_t s, \
                   const float* a, size_t a_len, int n) {}\n\
                   // cuda-runtime: unsafe\n\
                   extern \"C\" __global__ void raw(cudaTextureObject_t t) {}";
        let k = parse_kernels(src).unwrap();
        assert_eq!(k[0].params[0].ty, Scalar::TexObject);
        assert_eq!(k[0].params[1].ty, Scalar::SurfObject);
        assert_eq!(k[0].params[0].size(), 8);
        let code = generate("t", "t.cu", "/x/t.ptx", 75, &k).unwrap();
        assert!(
            code.contains("t: &crate::TextureObject<'_>, s: &mut crate::SurfaceObject"),
            "{code}"
        );
        assert!(
            code.contains("&[t_use, t_mem_use, s_use, s_mem_use, a_use]"),
            "{code}"
        );
        // Unsafe kernels take the raw handle.
        assert!(
            code.contains(
                "pub unsafe fn raw(stream: &crate::Stream, config: &(impl crate::launch::Launch + ?Sized), t: u64)"
            ),
            "{code}"
        );
        // Handles are not integers to compare, and pointers to them are refused.
        let e = parse_kernels("// cuda-runtime: require t > 0\nextern \"C\" __global__ void k(cudaTextureObject_t t) {}").unwrap_err();
        assert!(e.contains("not an integer"), "{e}");
        let e = parse_kernels(
            "extern \"C\" __global__ void k(cudaSurfaceObject_t* s, size_t s_len) {}",
        )
        .unwrap_err();
        assert!(e.contains("pointers to texture or surface objects"), "{e}");
    }

    #[test]
    fn arch_directives_set_the_file_target_and_are_checked() {
        assert_eq!(
            file_arch("extern \"C\" __global__ void k() {}").unwrap(),
            75
        );
        let src = "// cuda-runtime: arch = sm_90\n// cuda-runtime: require n > 0\n\
                   extern \"C\" __global__ void k(int n) {}\n\
                   //cuda-runtime:arch=sm_80\nextern \"C\" __global__ void j() {}";
        assert_eq!(file_arch(src).unwrap(), 90);
        let k = parse_kernels(src).unwrap();
        assert_eq!((k[0].arch, k[1].arch), (Some(90), Some(80)));
        assert_eq!(k[0].preconditions.len(), 1);
        for (bad, why) in [
            ("arch = sm_52", "older than sm_75"),
            ("arch = 90", "expected `arch = sm_NN`"),
            ("arch = sm_", "expected `arch = sm_NN`"),
            ("arch = sm_9x", "expected `arch = sm_NN`"),
            ("arch sm_90", "expected `arch = sm_NN`"),
            ("arch = compute_90", "expected `arch = sm_NN`"),
        ] {
            let src =
                format!("// x\n// cuda-runtime: {bad}\nextern \"C\" __global__ void k() {{}}");
            let e = file_arch(&src).unwrap_err();
            assert!(
                e.starts_with(&format!("line 2: `cuda-runtime: {bad}`")) && e.contains(why),
                "{e}"
            );
            let e = parse_kernels(&src).unwrap_err();
            assert!(e.starts_with("kernel k: ") && e.contains(why), "{e}");
        }
        let code = generate("c", "c.cu", "/x/c.ptx", 90, &parse_kernels(src).unwrap()).unwrap();
        assert!(
            code.contains("EmbeddedModule::new(\"c\", PTX, 90)"),
            "{code}"
        );
        assert!(code.contains("/// The module's PTX (compute_90)."));
        assert!(code.contains("Built for `sm_90`"));
        let code = generate("c", "c.cu", "/x/c.ptx", 75, &parse_kernels(SRC).unwrap()).unwrap();
        assert!(code.contains("EmbeddedModule::new(\"c\", PTX, 75)"));
        assert!(!code.contains("Built for"));
    }

    #[test]
    fn waiting_kernels_are_marked_and_generated_so() {
        let src = "// cuda-runtime: waits-for-previous-kernel\n\
                   extern \"C\" __global__ void w(int* p, size_t p_len) {}\n\
                   extern \"C\" __global__ void n(int* p, size_t p_len) {}";
        let k = parse_kernels(src).unwrap();
        assert!(k[0].waits_for_previous && !k[1].waits_for_previous);
        let code = generate("x", "x.cu", "/x/x.ptx", 90, &k).unwrap();
        assert!(
            code.contains("EmbeddedKernel::new(&MODULE, \"w\", &[8, 8], true)"),
            "{code}"
        );
        assert!(
            code.contains("EmbeddedKernel::new(&MODULE, \"n\", &[8, 8], false)"),
            "{code}"
        );
        assert!(code.contains("Declared `waits-for-previous-kernel`"));
        let e = parse_kernels(
            "// cuda-runtime: waits-for-previous\nextern \"C\" __global__ void w() {}",
        )
        .unwrap_err();
        assert!(e.starts_with("kernel w: "), "{e}");
    }
}
