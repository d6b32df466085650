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
                        "let (mut {n}_ptr, mut {n}_len, _{n}_keep) = crate::DeviceRead::kernel_arg({n}, stream)?;",
                        n = p.name
                    ));
                } else {
                    args.push(format!(
                        "{}: &mut (impl crate::DeviceWrite<{t}> + ?Sized)",
                        p.name
                    ));
                    setup.push(format!(
                        "let (mut {n}_ptr, mut {n}_len, _{n}_keep) = crate::DeviceWrite::kernel_arg_mut({n}, stream)?;",
                        n = p.name
                    ));
                }
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
            let _ = writeln!(o, "        // pointer is a live allocation of the stream's device with its length, borrowed for the");
            let _ = writeln!(o, "        // call and freed only in stream order after the kernel; the kernel stays below each length.");
        }
        let _ = writeln!(
            o,
            "        unsafe {{ {}.launch(stream, config, &mut params) }}",
            upper(&k.name)
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
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/ptx");
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
