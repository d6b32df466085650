//! A small demangler of the Itanium C++ ABI names nvcc gives kernels: enough to find a templated
//! kernel by its readable name (`scale<float>`, `lib::add_k<unsigned int, 7>`).
//!
//! Written here rather than taken from a crate: kernels' names use a small part of the grammar
//! (plain and nested names, template arguments of builtin, pointer, qualified and class types
//! and integer literals, template parameters and substitutions), and the crate keeps its
//! dependencies few (`cpp_demangle` is large and its output is only needed for lookups). Names
//! outside that part demangle to `None`: such kernels are still found by their mangled name.
//! The output follows `c++filt`'s spelling (`unsigned int const*`, `void f<int>(int*)`).

/// A demangled kernel name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Demangled {
    /// The qualified name with its template arguments: `lib::add_k<unsigned int, 7>`.
    pub(crate) name: String,
    /// The whole signature as `c++filt` writes it:
    /// `void lib::add_k<unsigned int, 7>(unsigned int const*, unsigned int*, unsigned long)`.
    pub(crate) signature: String,
}

/// Demangles `mangled` (`_Z...`), or `None` when it is not a name this demangler reads.
pub(crate) fn demangle(mangled: &str) -> Option<Demangled> {
    let rest = mangled.strip_prefix("_Z")?;
    // Names come from the user's PTX: bounded input, recursion and output (a crafted name
    // otherwise overflowed the stack or grew exponentially through substitutions).
    if rest.len() > MAX_INPUT {
        return None;
    }
    let mut p = Parser {
        s: rest.as_bytes(),
        pos: 0,
        subs: Vec::new(),
        params: Vec::new(),
        depth: 0,
        produced: 0,
    };
    let (name, template) = p.name()?;
    let ret = if template { Some(p.ty()?) } else { None };
    let mut args = Vec::new();
    if p.peek() == Some(b'v') && p.pos + 1 == p.s.len() {
        p.pos += 1;
    } else {
        while p.pos < p.s.len() {
            args.push(p.ty()?);
        }
    }
    if args.is_empty() && p.pos == 0 {
        return None;
    }
    let params = format!("({})", args.join(", "));
    let signature = match ret {
        Some(r) => format!("{r} {name}{params}"),
        None => format!("{name}{params}"),
    };
    Some(Demangled { name, signature })
}

/// `s` without whitespace, for comparing names however they are spaced.
pub(crate) fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Longest mangled name read (the longest kernel names of template libraries are a few KB).
const MAX_INPUT: usize = 64 << 10;
/// Deepest nesting of types read.
const MAX_DEPTH: usize = 256;
/// Most bytes of demangled text produced for one name, substitutions included.
const MAX_OUTPUT: usize = 1 << 20;

struct Parser<'a> {
    /// Current nesting of types.
    depth: usize,
    /// Bytes of types produced so far.
    produced: usize,
    s: &'a [u8],
    pos: usize,
    /// Substitution candidates, in the order the ABI numbers them (`S_`, `S0_`, `S1_`...).
    subs: Vec<String>,
    /// The function's template arguments (`T_`, `T0_`...).
    params: Vec<String>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn number(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.s[start..self.pos])
            .ok()?
            .parse()
            .ok()
    }

    fn source_name(&mut self) -> Option<String> {
        let n = self.number()?;
        let end = self.pos.checked_add(n)?;
        let id = std::str::from_utf8(self.s.get(self.pos..end)?).ok()?;
        self.pos = end;
        Some(id.to_string())
    }

    /// The function's name; `true` when it has template arguments (then a return type
    /// follows).
    fn name(&mut self) -> Option<(String, bool)> {
        match self.peek()? {
            b'N' => self.nested(false),
            b'S' if self.s.get(self.pos + 1) == Some(&b't') => {
                self.pos += 2;
                let n = format!("std::{}", self.source_name()?);
                self.template_tail(n, false)
            }
            b'0'..=b'9' => {
                let n = self.source_name()?;
                self.template_tail(n, false)
            }
            _ => None,
        }
    }

    /// After an unscoped name: its template arguments, if any (the name is then a
    /// substitution candidate).
    fn template_tail(&mut self, name: String, as_type: bool) -> Option<(String, bool)> {
        if self.peek() != Some(b'I') {
            if as_type {
                self.subs.push(name.clone());
            }
            return Some((name, false));
        }
        self.subs.push(name.clone());
        let (args, list) = self.template_args()?;
        if !as_type {
            self.params = list;
        }
        let full = format!("{name}{args}");
        self.charge(full.len())?;
        if as_type {
            self.subs.push(full.clone());
        }
        Some((full, true))
    }

    /// `N prefix... E`: each prefix is a substitution candidate; the whole name too when it
    /// names a type (`as_type`), not when it names the function.
    fn nested(&mut self, as_type: bool) -> Option<(String, bool)> {
        self.pos += 1; // N
        let mut name = String::new();
        let mut template = false;
        loop {
            match self.peek()? {
                b'E' => {
                    self.pos += 1;
                    if name.is_empty() {
                        return None;
                    }
                    if as_type {
                        self.subs.push(name.clone());
                    }
                    return Some((name, template));
                }
                b'I' => {
                    if name.is_empty() {
                        return None;
                    }
                    let (args, list) = self.template_args()?;
                    name.push_str(&args);
                    self.charge(name.len())?;
                    template = true;
                    if !as_type {
                        self.params = list;
                    }
                    if self.peek() != Some(b'E') {
                        self.subs.push(name.clone());
                    }
                }
                b'S' => {
                    if !name.is_empty() {
                        return None;
                    }
                    if self.s.get(self.pos + 1) == Some(&b't') {
                        self.pos += 2;
                        name = format!("std::{}", self.source_name()?);
                        self.subs.push(name.clone());
                    } else {
                        name = self.substitution()?;
                    }
                    template = false;
                }
                b'0'..=b'9' => {
                    let id = self.source_name()?;
                    name = if name.is_empty() {
                        id
                    } else {
                        format!("{name}::{id}")
                    };
                    // Each prefix is a new string (and a substitution candidate): counted, or
                    // a long prefix followed by many short parts took quadratic time and
                    // memory (review finding).
                    self.charge(name.len())?;
                    template = false;
                    if self.peek() != Some(b'E') {
                        self.subs.push(name.clone());
                    }
                }
                _ => return None,
            }
        }
    }

    /// `I arg... E`: the arguments as written (`<float, 7>`) and one by one.
    fn template_args(&mut self) -> Option<(String, Vec<String>)> {
        self.pos += 1; // I
        let mut list = Vec::new();
        while !self.eat(b'E') {
            let arg = if self.eat(b'L') {
                self.literal()?
            } else {
                self.ty()?
            };
            list.push(arg);
        }
        if list.is_empty() {
            return None;
        }
        let mut out = format!("<{}", list.join(", "));
        if out.ends_with('>') {
            out.push(' ');
        }
        out.push('>');
        Some((out, list))
    }

    /// `L type value E` (after the `L`), for integer and bool literals.
    fn literal(&mut self) -> Option<String> {
        let ty = self.peek()?;
        self.pos += 1;
        let neg = self.eat(b'n');
        let v = self.number()?;
        if !self.eat(b'E') {
            return None;
        }
        let sign = if neg { "-" } else { "" };
        Some(match ty {
            b'b' if !neg && v <= 1 => (if v == 1 { "true" } else { "false" }).to_string(),
            b'i' => format!("{sign}{v}"),
            b'j' => format!("{sign}{v}u"),
            b'l' => format!("{sign}{v}l"),
            b'm' => format!("{sign}{v}ul"),
            b'x' => format!("{sign}{v}ll"),
            b'y' => format!("{sign}{v}ull"),
            _ => format!("({}){sign}{v}", builtin(ty)?),
        })
    }

    /// `S_` / `S<base 36>_`.
    fn substitution(&mut self) -> Option<String> {
        self.pos += 1; // S
        let mut idx = 0usize;
        if !self.eat(b'_') {
            loop {
                let c = self.peek()?;
                self.pos += 1;
                let d = match c {
                    b'0'..=b'9' => (c - b'0') as usize,
                    b'A'..=b'Z' => (c - b'A') as usize + 10,
                    b'_' => break,
                    _ => return None,
                };
                idx = idx.checked_mul(36)?.checked_add(d)?;
            }
            idx = idx.checked_add(1)?;
        }
        self.subs.get(idx).cloned()
    }

    /// Counts `n` more bytes of text produced; `None` past the output limit.
    fn charge(&mut self, n: usize) -> Option<()> {
        self.produced = self.produced.checked_add(n)?;
        (self.produced <= MAX_OUTPUT).then_some(())
    }

    /// A type, within the depth and output limits.
    fn ty(&mut self) -> Option<String> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let t = self.ty_inner();
        self.depth -= 1;
        let t = t?;
        self.charge(t.len())?;
        Some(t)
    }

    fn ty_inner(&mut self) -> Option<String> {
        let c = self.peek()?;
        if let Some(b) = builtin(c) {
            self.pos += 1;
            return Some(b.to_string());
        }
        match c {
            b'P' | b'R' | b'O' => {
                self.pos += 1;
                let inner = self.ty()?;
                let t = format!(
                    "{inner}{}",
                    match c {
                        b'P' => "*",
                        b'R' => "&",
                        _ => "&&",
                    }
                );
                self.subs.push(t.clone());
                Some(t)
            }
            b'r' | b'V' | b'K' => {
                let mut quals = Vec::new();
                for (q, word) in [(b'r', "restrict"), (b'V', "volatile"), (b'K', "const")] {
                    if self.eat(q) {
                        quals.push(word);
                    }
                }
                let inner = self.ty()?;
                // c++filt writes `const` last: `float const`, `float const volatile`.
                quals.reverse();
                let t = format!("{inner} {}", quals.join(" "));
                self.subs.push(t.clone());
                Some(t)
            }
            b'T' => {
                self.pos += 1;
                let idx = if self.eat(b'_') {
                    0
                } else {
                    let n = self.number()?;
                    if !self.eat(b'_') {
                        return None;
                    }
                    n.checked_add(1)?
                };
                let t = self.params.get(idx)?.clone();
                self.subs.push(t.clone());
                Some(t)
            }
            b'D' => {
                let code = self.s.get(self.pos + 1..self.pos + 2)?;
                let t = match code {
                    b"h" => "half",
                    b"s" => "char16_t",
                    b"i" => "char32_t",
                    b"u" => "char8_t",
                    b"n" => "decltype(nullptr)",
                    _ => return None,
                };
                self.pos += 2;
                Some(t.to_string())
            }
            b'S' => {
                if self.s.get(self.pos + 1) == Some(&b't') {
                    self.pos += 2;
                    let n = format!("std::{}", self.source_name()?);
                    return self.template_tail(n, true).map(|(t, _)| t);
                }
                let t = self.substitution()?;
                if self.peek() == Some(b'I') {
                    let (args, _) = self.template_args()?;
                    let full = format!("{t}{args}");
                    self.subs.push(full.clone());
                    return Some(full);
                }
                Some(t)
            }
            b'N' => self.nested(true).map(|(t, _)| t),
            b'0'..=b'9' => {
                let n = self.source_name()?;
                self.template_tail(n, true).map(|(t, _)| t)
            }
            _ => None,
        }
    }
}

fn builtin(c: u8) -> Option<&'static str> {
    Some(match c {
        b'v' => "void",
        b'w' => "wchar_t",
        b'b' => "bool",
        b'c' => "char",
        b'a' => "signed char",
        b'h' => "unsigned char",
        b's' => "short",
        b't' => "unsigned short",
        b'i' => "int",
        b'j' => "unsigned int",
        b'l' => "long",
        b'm' => "unsigned long",
        b'x' => "long long",
        b'y' => "unsigned long long",
        b'n' => "__int128",
        b'o' => "unsigned __int128",
        b'f' => "float",
        b'd' => "double",
        b'e' => "long double",
        b'g' => "__float128",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names nvcc gave kernels, with what `c++filt` (GNU binutils) makes of them.
    const CASES: &[(&str, &str, &str)] = &[
        (
            "_Z5scaleIfEvPT_mS0_",
            "scale<float>",
            "void scale<float>(float*, unsigned long, float)",
        ),
        (
            "_Z5scaleIiEvPT_mS0_",
            "scale<int>",
            "void scale<int>(int*, unsigned long, int)",
        ),
        (
            "_ZN3lib5add_kIjLi7EEEvPKT_PS1_m",
            "lib::add_k<unsigned int, 7>",
            "void lib::add_k<unsigned int, 7>(unsigned int const*, unsigned int*, unsigned long)",
        ),
        (
            "_ZN3lib5add_kIjLin3EEEvPKT_PS1_m",
            "lib::add_k<unsigned int, -3>",
            "void lib::add_k<unsigned int, -3>(unsigned int const*, unsigned int*, unsigned long)",
        ),
        ("_Z6kernelPfS_", "kernel", "kernel(float*, float*)"),
        ("_Z5emptyv", "empty", "empty()"),
        (
            "_ZN2ns5inner3runEPKdPdi",
            "ns::inner::run",
            "ns::inner::run(double const*, double*, int)",
        ),
        (
            "_Z4fillIdLb1EEvPT_",
            "fill<double, true>",
            "void fill<double, true>(double*)",
        ),
        (
            "_Z3mixIPfmEvT_T0_S2_",
            "mix<float*, unsigned long>",
            "void mix<float*, unsigned long>(float*, unsigned long, unsigned long)",
        ),
        (
            "_Z4copyI4Vec3EvPKT_PS1_",
            "copy<Vec3>",
            "void copy<Vec3>(Vec3 const*, Vec3*)",
        ),
    ];

    #[test]
    fn kernel_names_demangle_as_cxxfilt_writes_them() {
        for (mangled, name, signature) in CASES {
            let d = demangle(mangled).unwrap_or_else(|| panic!("{mangled} did not demangle"));
            assert_eq!(d.name, *name, "{mangled}");
            assert_eq!(d.signature, *signature, "{mangled}");
        }
    }

    #[test]
    fn unreadable_names_are_none_not_panics() {
        for bad in [
            "",
            "_Z",
            "_Z5",
            "_Z99scale",
            "_Z5scaleI",
            "_Z5scaleIfE",
            "_Z5scaleIfEvPT9_",
            "_Z5scaleIfEvS9_",
            "_Z1fPFvvE",
            "apply_coeffs",
            "_Z3fooLi",
            "_Z5scaleIEvv",
            "_ZNE",
            "_ZN3fooIiE",
            "_Z18446744073709551616x",
        ] {
            assert_eq!(demangle(bad), None, "{bad:?}");
        }
        // Crafted names (review finding): deep nesting, index overflow, and substitutions that
        // double the text at every level are refused within the limits, never a crash.
        let deep = format!("_Z1f{}i", "P".repeat(100_000));
        assert_eq!(demangle(&deep), None);
        assert_eq!(demangle("_Z1fIiEvT18446744073709551615_"), None);
        assert_eq!(demangle("_Z1fS3W5E11264SGSF_"), None);
        let mut doubling = String::from("_Z1f1A");
        for level in 0..40 {
            // B<X, X> where X is the newest substitution so far (it grows by two a level).
            let idx = 2 * level;
            let sub = if idx == 0 {
                "S_".to_string()
            } else {
                format!("S{}_", base36(idx - 1))
            };
            doubling.push_str(&format!("1BI{sub}{sub}E"));
        }
        let r = demangle(&doubling);
        assert!(
            r.as_ref().is_none_or(|d| d.signature.len() <= MAX_OUTPUT),
            "{:?}",
            r.map(|d| d.signature.len())
        );
        // A long prefix (a long name with template arguments repeating it) followed by many
        // short parts: every part made a copy of the whole prefix, kept as a substitution
        // candidate (review finding: 4000 parts took 12 s and 4.4 GB, the 64 KB input
        // limit's 17000 parts would have taken about 17 GB).
        let mut long = format!("_ZN30000{}I{}E", "a".repeat(30000), "S_".repeat(30));
        long.push_str(&"1b".repeat((MAX_INPUT - long.len()) / 2 - 2));
        long.push_str("Ev");
        let t = std::time::Instant::now();
        assert_eq!(demangle(&long), None);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        // Every prefix of a good name is refused or read, never a panic.
        for (m, _, _) in CASES {
            for i in 0..m.len() {
                let _ = demangle(&m[..i]);
            }
        }
    }

    fn base36(mut n: usize) -> String {
        let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut out = Vec::new();
        loop {
            out.push(digits[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        out.reverse();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn names_compare_without_spaces() {
        assert_eq!(
            squeeze(" lib::add_k< unsigned int,7 >"),
            "lib::add_k<unsignedint,7>"
        );
    }
}
