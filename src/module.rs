//! Modules and kernels: the crate's embedded PTX, loaded lazily on each device, and user PTX or
//! cubins loaded explicitly; functions, their attributes, occupancy, and launches.

use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::device::CacheConfig;
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, ErrorCode, Result};
use crate::launch::{
    self, ClusterSchedulingPolicy, Dim3, FuncCluster, Launch, LaunchAttributes, LaunchConfig,
    LaunchConfigEx,
};
use crate::memory::{
    DeviceBuffer, DeviceView, DeviceViewMut, DeviceWrite, HostRegistration, ManagedBuffer,
    PinnedBuffer, PinnedView, PinnedViewMut, PitchedBuffer,
};
use crate::queue::{LoadedCode, Use};
use crate::stream::Stream;
use crate::symbol::Symbol;
use crate::{DeviceRead, DeviceRepr};

/// Loads a module image into the current context, with the JIT's error log in the error.
///
/// # Safety
/// `image` is NUL-terminated PTX text (from [`ptx_text`]), or a well-formed cubin or fatbin:
/// the driver is given no length and follows the sizes and offsets inside binaries unchecked.
unsafe fn load_image(a: &Active, image: &[u8]) -> Result<sys::CUmodule> {
    let mut log = vec![0u8; 8192];
    let mut options = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: the context is current; the image stays in bounds for the driver (the caller's
    // promise); the options point to a log buffer of the stated size that outlives the call.
    let r = driver::rc(unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image.as_ptr().cast(),
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    });
    if r == 0 {
        return Ok(module);
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let log = String::from_utf8_lossy(&log[..end]).trim().to_string();
    Err(a.dev.note(Error::ModuleLoad {
        code: ErrorCode::from_driver(r),
        driver: r,
        log,
    }))
}

/// What a module image is, told apart by its first bytes as the driver tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageKind {
    /// PTX text: UTF-8 without a NUL byte, except one at the very end.
    Ptx,
    /// A cubin: an ELF file (`\x7fELF`), as `nvcc -cubin` writes.
    Cubin,
    /// A fat binary (first word `0xBA55ED50`, little-endian), as `nvcc -fatbin` writes.
    Fatbin,
}

impl ImageKind {
    /// `"PTX"`, `"cubin"` or `"fatbin"`.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Ptx => "PTX",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbin => "fatbin",
        }
    }
}

const ELF_MAGIC: [u8; 4] = *b"\x7fELF";
const FATBIN_MAGIC: [u8; 4] = 0xBA55_ED50u32.to_le_bytes();

fn refuse(
    origin: &str,
    image: &[u8],
    kind: Option<ImageKind>,
    at: Option<u64>,
    reason: &'static str,
) -> Error {
    Error::InvalidModuleImage {
        origin: origin.to_string(),
        len: image.len(),
        kind,
        at,
        reason,
    }
}

/// The binary kind the driver would take `image` for, by its magic number.
fn binary_kind(image: &[u8]) -> Option<ImageKind> {
    if image.starts_with(&ELF_MAGIC) {
        Some(ImageKind::Cubin)
    } else if image.starts_with(&FATBIN_MAGIC) {
        Some(ImageKind::Fatbin)
    } else {
        None
    }
}

/// `image` as PTX text the driver reads whole (it reads up to the first NUL): valid UTF-8, no
/// NUL byte except one at the very end (dropped here), and no binary's magic number at the
/// start (the driver would parse the bytes as a cubin or fatbin, following offsets in them).
fn ptx_text<'a>(image: &'a [u8], origin: &str) -> Result<&'a str> {
    if let Some(kind) = binary_kind(image) {
        return Err(refuse(
            origin,
            image,
            Some(kind),
            None,
            "a binary image: the driver follows sizes and offsets inside it that cannot all be checked; load it with the unsafe Module::from_image",
        ));
    }
    // A binary format the driver knows and this crate does not would start with a control
    // byte too (ELF does, with DEL): text does not.
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    if image
        .first()
        .is_some_and(|&c| c.is_ascii_control() && !space(c))
    {
        return Err(refuse(
            origin,
            image,
            None,
            Some(0),
            "starts with a control byte, as binaries do and PTX text does not",
        ));
    }
    let body = image.strip_suffix(&[0]).unwrap_or(image);
    let text = std::str::from_utf8(body).map_err(|e| {
        refuse(
            origin,
            image,
            None,
            Some(e.valid_up_to() as u64),
            "neither PTX text (UTF-8), a cubin (ELF) nor a fatbin",
        )
    })?;
    if let Some(nul) = body.iter().position(|&b| b == 0) {
        return Err(refuse(
            origin,
            image,
            Some(ImageKind::Ptx),
            Some(nul as u64),
            "a NUL byte inside PTX text: the driver would stop reading there",
        ));
    }
    if text.trim().is_empty() {
        return Err(refuse(
            origin,
            image,
            Some(ImageKind::Ptx),
            None,
            "empty PTX text",
        ));
    }
    Ok(text)
}

/// [`ptx_text`], and a NUL-terminated copy of it for the driver.
pub(crate) fn ptx_c_string<'a>(image: &'a [u8], origin: &str) -> Result<(&'a str, CString)> {
    let text = ptx_text(image, origin)?;
    // `ptx_text` refused every NUL inside the text.
    let c = CString::new(text).map_err(|e| {
        refuse(
            origin,
            image,
            Some(ImageKind::Ptx),
            Some(e.nul_position() as u64),
            "a NUL byte inside PTX text: the driver would stop reading there",
        )
    })?;
    Ok((text, c))
}

/// The `N` bytes at `at`, where they lie inside `b`.
fn read_le<const N: usize>(b: &[u8], at: u64) -> Option<[u8; N]> {
    let at = usize::try_from(at).ok()?;
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn read_u16(b: &[u8], at: u64) -> Option<u64> {
    read_le(b, at).map(|s| u16::from_le_bytes(s).into())
}

fn read_u32(b: &[u8], at: u64) -> Option<u64> {
    read_le(b, at).map(|s| u32::from_le_bytes(s).into())
}

fn read_u64(b: &[u8], at: u64) -> Option<u64> {
    read_le(b, at).map(u64::from_le_bytes)
}

/// Whether `count` entries of `size` bytes from `offset` lie inside `image`.
fn inside(image: &[u8], offset: u64, count: u64, size: u64) -> bool {
    count
        .checked_mul(size)
        .and_then(|n| offset.checked_add(n))
        .is_some_and(|end| end <= image.len() as u64)
}

/// The ELF header's tables, and every section's and segment's contents, lie inside `image`
/// (ELF64, little-endian, as every CUDA 13 cubin).
fn check_elf(image: &[u8], origin: &str) -> Result<()> {
    let bad = |at: Option<u64>, reason| refuse(origin, image, Some(ImageKind::Cubin), at, reason);
    if image.len() < 64 {
        return Err(bad(None, "shorter than an ELF64 header (64 bytes)"));
    }
    if image.get(4..6) != Some(&[2, 1]) {
        return Err(bad(
            Some(4),
            "not a 64-bit little-endian ELF file, as cubins are",
        ));
    }
    // A field that cannot be read reads as u64::MAX, which no check below lets through.
    let u16_at = |at| read_u16(image, at).unwrap_or(u64::MAX);
    let u32_at = |at| read_u32(image, at).unwrap_or(u64::MAX);
    let u64_at = |at| read_u64(image, at).unwrap_or(u64::MAX);
    let (phoff, shoff) = (u64_at(32), u64_at(40));
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    let (shentsize, mut shnum, shstrndx) = (u16_at(58), u16_at(60), u16_at(62));
    // Offsets below are inside tables already checked to fit in the image: no overflow.
    if phnum > 0 {
        if phentsize < 56 || !inside(image, phoff, phnum, phentsize) {
            return Err(bad(
                Some(phoff),
                "the program header table (e_phoff, e_phnum, e_phentsize) does not fit in the image",
            ));
        }
        for p in (0..phnum).map(|i| phoff + i * phentsize) {
            let (offset, filesz) = (u64_at(p + 8), u64_at(p + 32));
            if !inside(image, offset, 1, filesz) {
                return Err(bad(
                    Some(offset),
                    "a segment's contents (p_offset, p_filesz) end past the image",
                ));
            }
        }
    }
    if shoff == 0 {
        return match shnum {
            0 => Ok(()),
            _ => Err(bad(None, "sections without a section header table")),
        };
    }
    if shentsize < 64 || !inside(image, shoff, 1, shentsize) {
        return Err(bad(
            Some(shoff),
            "the section header table (e_shoff, e_shentsize) does not fit in the image",
        ));
    }
    if shnum == 0 {
        // Extended numbering: the count is section 0's sh_size.
        shnum = u64_at(shoff + 32);
    }
    if !inside(image, shoff, shnum, shentsize) {
        return Err(bad(
            Some(shoff),
            "the section header table (e_shoff, e_shnum, e_shentsize) does not fit in the image",
        ));
    }
    // The table fits, so there are fewer sections than bytes in the image.
    for s in (0..shnum).map(|i| shoff + i * shentsize) {
        let (ty, offset, size) = (u32_at(s + 4), u64_at(s + 24), u64_at(s + 32));
        // SHT_NULL and SHT_NOBITS sections take no bytes of the file.
        if ty != 0 && ty != 8 && !inside(image, offset, 1, size) {
            return Err(bad(
                Some(offset),
                "a section's contents (sh_offset, sh_size) end past the image",
            ));
        }
    }
    // SHN_XINDEX: the index is section 0's sh_link.
    let strndx = match shstrndx {
        0xffff => u32_at(shoff + 40),
        i => i,
    };
    if shnum > 0 && strndx >= shnum {
        return Err(bad(
            None,
            "the section name table index (e_shstrndx) is not a section",
        ));
    }
    Ok(())
}

/// The fatbin header, and the entries' size it declares, lie inside `image`.
fn check_fatbin(image: &[u8], origin: &str) -> Result<()> {
    let bad = |at, reason| refuse(origin, image, Some(ImageKind::Fatbin), at, reason);
    let (Some(header), Some(size)) = (read_u16(image, 6), read_u64(image, 8)) else {
        return Err(bad(None, "shorter than a fatbin header (16 bytes)"));
    };
    if header < 16 || !inside(image, header, 1, size) {
        return Err(bad(
            Some(header),
            "the fatbin's entries (headerSize, fatSize) end past the image",
        ));
    }
    Ok(())
}

/// Tells what a module image is, and checks what can be checked without trusting it:
/// PTX text must be UTF-8 with no NUL before its end (the driver reads up to the first NUL);
/// a cubin's ELF header tables and every section's and segment's contents, and a fatbin's
/// header and the entries' size it declares, must lie inside the slice.
///
/// A binary that passes is not thereby safe to load: the driver also follows symbol tables,
/// relocations, notes and fatbin entries, which are not checked (see [`Module::from_image`]).
///
/// # Errors
/// [`Error::InvalidModuleImage`], with the offset of the problem.
pub fn classify_image(image: &[u8]) -> Result<ImageKind> {
    const ORIGIN: &str = "module image";
    match binary_kind(image) {
        Some(ImageKind::Cubin) => check_elf(image, ORIGIN).map(|()| ImageKind::Cubin),
        Some(_) => check_fatbin(image, ORIGIN).map(|()| ImageKind::Fatbin),
        None => ptx_text(image, ORIGIN).map(|_| ImageKind::Ptx),
    }
}

/// One of the crate's kernel files, loaded on a device the first time one of its kernels is used
/// there (as libcudart loads the kernels it registered), and kept until the device is reset.
///
/// Most are loaded from their PTX. A file whose kernels use the CUDA device runtime (kernels
/// that launch kernels, `cudaGraphSetConditional`) cannot be: the driver alone has no device
/// runtime to link its PTX with. It is loaded instead from its image linked ahead of time with
/// NVIDIA's `libcudadevrt.a` (`cuModuleLoadData` of a fat binary with machine code for each
/// architecture family), which the separately licensed crate cuda-runtime-devrt holds; the Cargo
/// feature `device-runtime` (default) brings it in, and without it such a module fails with
/// [`Error::FeatureDisabled`].
pub struct EmbeddedModule {
    name: &'static str,
    ptx: &'static str,
    /// The compute capability the PTX targets, `major * 10 + minor` (75 for `compute_75`).
    arch: u32,
    image: Image,
    loaded: Mutex<Vec<(i32, u64, Raw<sys::CUmod_st>)>>,
}

/// What an [`EmbeddedModule`] is loaded from.
#[derive(Clone, Copy)]
enum Image {
    /// Its PTX.
    Ptx,
    /// A fat binary linked with the device runtime, with machine code for `archs`.
    Linked {
        fatbin: &'static [u8],
        archs: &'static [u32],
    },
    /// A device-runtime module whose image the crate was built without (`feature` disabled).
    Disabled { feature: &'static str },
}

/// Whether two SHA-256 hashes in hexadecimal are the same, ignoring a line end after either (the
/// `.sha256` files of cuda-runtime-devrt end with one): the generated code's compile-time check
/// that a linked image was built from the current kernel sources.
#[doc(hidden)]
pub const fn same_sources_hash(recorded: &str, current: &str) -> bool {
    const fn trimmed_len(s: &[u8]) -> usize {
        let mut n = s.len();
        while n > 0 && (s[n - 1] == b'\n' || s[n - 1] == b'\r') {
            n -= 1;
        }
        n
    }
    let (a, b) = (recorded.as_bytes(), current.as_bytes());
    let (n, m) = (trimmed_len(a), trimmed_len(b));
    if n != m || n != 64 {
        return false;
    }
    let mut i = 0;
    while i < n {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The architecture of the machine code a device of compute capability `cc` runs from an
/// image with code for `archs`: the newest of its major version at or below `cc` (a cubin runs
/// on later minor versions of its major one).
pub(crate) fn sass_for(archs: &[u32], cc: u32) -> Option<u32> {
    archs
        .iter()
        .copied()
        .filter(|&a| a / 10 == cc / 10 && a <= cc)
        .max()
}

/// The error of a device-runtime module the crate was built without.
fn feature_disabled(name: &str, feature: &'static str) -> Error {
    Error::FeatureDisabled {
        what: format!("kernel module {name}"),
        feature,
        reason: "its kernels use the CUDA device runtime, and their image linked with it (NVIDIA \
                 object code, in the separately licensed crate cuda-runtime-devrt) was left out \
                 of this build",
    }
}

/// Refuses a linked image on a device none of its machine code runs on (the driver would fail
/// with `CUDA_ERROR_NO_BINARY_FOR_GPU`; there is no PTX to fall back on).
fn check_linked(name: &str, archs: &'static [u32], device: i32, found: u32) -> Result<()> {
    match sass_for(archs, found) {
        Some(_) => Ok(()),
        None => Err(Error::NoDeviceImage {
            what: format!("kernel module {name} (linked with the device runtime)"),
            device,
            found,
            archs,
        }),
    }
}

impl EmbeddedModule {
    /// A module of the crate's kernels whose PTX targets `compute_<arch>` (used by the
    /// generated code).
    #[doc(hidden)]
    pub const fn new(name: &'static str, ptx: &'static str, arch: u32) -> EmbeddedModule {
        EmbeddedModule {
            name,
            ptx,
            arch,
            image: Image::Ptx,
            loaded: Mutex::new(Vec::new()),
        }
    }

    /// A module of the crate's kernels that use the device runtime, loaded from `fatbin` (linked
    /// with it ahead of time; machine code for `archs`, none older than `arch`). Used by the
    /// generated code: the image is the crate's own, built by the pinned nvcc and checked in CI.
    ///
    /// # Safety
    /// `fatbin` is a well-formed fat binary as nvcc writes them (the driver follows the sizes and
    /// offsets inside it unchecked when the module is loaded, by safe calls such as
    /// [`EmbeddedKernel::function`]), with machine code for each architecture of `archs`.
    #[doc(hidden)]
    pub const unsafe fn linked(
        name: &'static str,
        ptx: &'static str,
        arch: u32,
        fatbin: &'static [u8],
        archs: &'static [u32],
    ) -> EmbeddedModule {
        EmbeddedModule {
            name,
            ptx,
            arch,
            image: Image::Linked { fatbin, archs },
            loaded: Mutex::new(Vec::new()),
        }
    }

    /// A module of the crate's kernels that use the device runtime, in a build without the
    /// Cargo `feature` that brings their image: using it fails with [`Error::FeatureDisabled`].
    #[doc(hidden)]
    pub const fn linked_disabled(
        name: &'static str,
        ptx: &'static str,
        arch: u32,
        feature: &'static str,
    ) -> EmbeddedModule {
        EmbeddedModule {
            name,
            ptx,
            arch,
            image: Image::Disabled { feature },
            loaded: Mutex::new(Vec::new()),
        }
    }

    /// Whether the module's kernels use the CUDA device runtime (their file is marked
    /// `// cuda-runtime: device-runtime`): it is loaded from an image linked with it, not from
    /// its PTX.
    pub fn uses_device_runtime(&self) -> bool {
        !matches!(self.image, Image::Ptx)
    }

    /// The image linked with the device runtime that the module is loaded from (a fat binary),
    /// when it uses the device runtime and the crate was built with the feature
    /// `device-runtime`.
    pub fn linked_image(&self) -> Option<&'static [u8]> {
        match self.image {
            Image::Linked { fatbin, .. } => Some(fatbin),
            _ => None,
        }
    }

    /// The compute capability the module needs, `major * 10 + minor` (its PTX's target: 75
    /// unless its source names a newer one with `// cuda-runtime: arch = sm_NN`).
    pub fn arch(&self) -> u32 {
        self.arch
    }

    /// The module's name (its source file's stem).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The PTX text. For a module that uses the device runtime it is relocatable PTX
    /// (`-rdc=true`), which the driver cannot load without linking NVIDIA's device runtime
    /// library in: the module is loaded from [`linked_image`](Self::linked_image) instead.
    pub fn ptx(&self) -> &'static str {
        self.ptx
    }

    /// The module in the active context, loading it there on first use.
    fn module(&self, a: &Active) -> Result<sys::CUmodule> {
        let (dev, generation) = (a.dev.ordinal, a.generation());
        let mut loaded = self.loaded.lock();
        if let Some(&(_, _, m)) = loaded
            .iter()
            .find(|&&(d, g, _)| d == dev && g == generation)
        {
            return Ok(m.0);
        }
        let limits = a.dev.launch_limits()?;
        check_arch(
            self.name,
            self.arch,
            a.dev.ordinal,
            limits.compute_capability,
        )?;
        let m = match self.image {
            Image::Ptx => {
                let (_, ptx) = ptx_c_string(self.ptx.as_bytes(), self.name)?;
                // Loaded lazily on the first launch: housekeeping, relaxed so that it never
                // invalidates another thread's global capture (audit finding).
                // SAFETY: NUL-terminated PTX text, which the driver reads as text up to its NUL.
                crate::queue::relaxed(|| unsafe { load_image(a, ptx.as_bytes_with_nul()) })?
            }
            Image::Disabled { feature } => return Err(feature_disabled(self.name, feature)),
            Image::Linked { fatbin, archs } => {
                check_linked(self.name, archs, a.dev.ordinal, limits.compute_capability)?;
                check_fatbin(fatbin, self.name)?;
                // SAFETY: a well-formed fat binary, the promise of `linked`'s caller (the
                // generated code: the crate's own image in cuda-runtime-devrt, written by the
                // pinned nvcc, checked byte for byte in CI and against the sources' hash at
                // compile time); its header was checked just now. Relaxed, as above.
                crate::queue::relaxed(|| unsafe { load_image(a, fatbin) })?
            }
        };
        // Entries of earlier (reset) contexts of this device are dead.
        loaded.retain(|&(d, _, _)| d != dev);
        loaded.push((dev, generation, Raw(m)));
        Ok(m)
    }

    /// A typed handle to a `__device__` or `__constant__` variable of this module on the
    /// current device (`cudaGetSymbolAddress` / `cudaGetSymbolSize`).
    pub fn global<T: DeviceRepr>(&'static self, name: &str) -> Result<Symbol<T>> {
        record((|| {
            let a = context::enter_current()?;
            let m = self.module(&a)?;
            Symbol::lookup(&a, m, name, None)
        })())
    }
}

/// Refuses to load a module built for a newer architecture than the device's (the driver
/// would fail to JIT the PTX, with a less helpful error).
fn check_arch(name: &str, arch: u32, device: i32, found: u32) -> Result<()> {
    if found < arch {
        return Err(Error::ComputeCapability {
            code: ErrorCode::NoKernelImageForDevice,
            what: format!("kernel module {name} (built for sm_{arch})"),
            needs: arch,
            device,
            found,
        });
    }
    Ok(())
}

const CACHED_DEVICES: usize = 16;

struct Slot {
    generation: AtomicU64,
    func: AtomicPtr<sys::CUfunc_st>,
    /// The function's required cluster dimensions once read (see [`ClusterCache`]).
    cluster: ClusterCache,
}

/// One of the crate's kernels. Resolves on each device on first launch there; launches go
/// through the typed wrappers in [`crate::kernels`].
pub struct EmbeddedKernel {
    module: &'static EmbeddedModule,
    name: &'static str,
    param_sizes: &'static [usize],
    /// Declared `// cuda-runtime: waits-for-previous-kernel` (see `launch`).
    waits_for_previous: bool,
    cache: [Slot; CACHED_DEVICES],
}

impl EmbeddedKernel {
    /// A kernel of an embedded module (used by the generated code).
    #[doc(hidden)]
    pub const fn new(
        module: &'static EmbeddedModule,
        name: &'static str,
        param_sizes: &'static [usize],
        waits_for_previous: bool,
    ) -> EmbeddedKernel {
        EmbeddedKernel {
            module,
            name,
            param_sizes,
            waits_for_previous,
            cache: [const {
                Slot {
                    generation: AtomicU64::new(0),
                    func: AtomicPtr::new(std::ptr::null_mut()),
                    cluster: ClusterCache(AtomicU32::new(0)),
                }
            }; CACHED_DEVICES],
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The size in bytes of each parameter, as the PTX declares them.
    pub fn param_sizes(&self) -> &'static [usize] {
        self.param_sizes
    }

    #[inline]
    fn resolve(&self, a: &Active) -> Result<sys::CUfunction> {
        let generation = a.generation();
        if let Some(slot) = self.cache.get(a.dev.ordinal as usize) {
            if slot.generation.load(Ordering::Acquire) == generation {
                return Ok(slot.func.load(Ordering::Relaxed));
            }
        }
        self.resolve_slow(a)
    }

    #[cold]
    fn resolve_slow(&self, a: &Active) -> Result<sys::CUfunction> {
        let m = self.module.module(a)?;
        let f = get_function(a, m, self.name)?;
        if let Some(slot) = self.cache.get(a.dev.ordinal as usize) {
            // The read guard in `a` excludes a reset, so no other generation is stored now.
            slot.cluster.0.store(0, Ordering::Relaxed);
            slot.func.store(f, Ordering::Relaxed);
            slot.generation.store(a.generation(), Ordering::Release);
        }
        Ok(f)
    }

    /// The kernel as a [`Function`] on the current device, for attributes and occupancy.
    pub fn function(&self) -> Result<Function> {
        record((|| {
            let a = context::enter_current()?;
            let f = self.resolve(&a)?;
            Function::new(&a, f, self.name, None, Some(self.param_sizes))
        })())
    }

    /// Launches the kernel with raw parameters (used by the generated wrappers), with
    /// `cuLaunchKernel`, or `cuLaunchKernelEx` for a [`LaunchConfigEx`](crate::LaunchConfigEx)
    /// (its attributes checked first; programmatic stream serialization refused unless the
    /// kernel declares `// cuda-runtime: waits-for-previous-kernel`). The memory in `uses` is
    /// checked and its use noted through the crate's one enqueue path.
    ///
    /// # Safety
    /// 1. `params` has one pointer per kernel parameter, each to a value of that parameter's
    ///    size and type;
    /// 2. every device address among them refers to memory the kernel may access for the whole
    ///    time it runs (memory named in `uses` is kept so), within the bounds the kernel
    ///    respects.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn launch<L: Launch + ?Sized>(
        &self,
        stream: &Stream,
        config: &L,
        uses: &[Use<'_>],
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let (config, attrs) = (config.config(), config.attributes());
        record((|| {
            let call = if attrs.is_some() {
                "cudaLaunchKernelEx"
            } else {
                "cudaLaunchKernel"
            };
            let lane = stream.lane_for_submit(call)?;
            launch::validate(config, lane.a.dev.launch_limits()?)?;
            let f = self.resolve(&lane.a)?;
            // The module of the crate's and the build helper's kernels stays loaded as long as
            // the context: a captured launch needs nothing else kept. A programmatic event
            // would be recorded into the graph: such launches are not captured.
            let programmatic = attrs.is_some_and(|at| at.programmatic_event.is_some());
            let mut keep = || {
                if programmatic {
                    return Err(Error::NotCapturable {
                        call,
                        reason: "launches with a programmatic event cannot be captured yet",
                    });
                }
                Ok(Vec::new())
            };
            match attrs {
                None => lane.submit_capturable("kernel launch", uses, &mut keep, |a, raw| {
                    // SAFETY: the caller guarantees the parameters (1, 2); the configuration
                    // was validated; the stream is live in the current context; the memory in
                    // `uses` was checked by `submit`.
                    unsafe { raw_launch(a, f, raw, config, params, false) }
                }),
                Some(at) => {
                    let refuse = !self.waits_for_previous;
                    let cache = self
                        .cache
                        .get(lane.a.dev.ordinal as usize)
                        .map(|s| &s.cluster);
                    let event = prepare_extended(&lane.a, f, config, at, refuse, cache)?;
                    let mut raw_attrs = launch::RawAttrs::new();
                    launch::fill_raw_attributes(&mut raw_attrs, at, event.as_ref().map(|e| e.1));
                    lane.submit_capturable("kernel launch", uses, &mut keep, |a, raw| {
                        // SAFETY: as above; the attributes were validated against the device
                        // and the kernel, and the programmatic event's context is pinned.
                        unsafe { raw_launch_ex(a, f, raw, config, &mut raw_attrs, params) }
                    })
                }
            }
        })())
    }
}

/// Checks the attributes of an extended launch of `f` in `a`'s context (see
/// [`launch::validate_attributes`]; cooperative launches against occupancy). Returns the
/// programmatic event's raw handle with its context pinned, when there is one.
pub(crate) fn prepare_extended(
    a: &Active,
    f: sys::CUfunction,
    c: &LaunchConfig,
    at: &LaunchAttributes<'_>,
    refuse_serialization: bool,
    cache: Option<&ClusterCache>,
) -> Result<Option<(context::Pinned, sys::CUevent)>> {
    let limits = a.dev.launch_limits()?;
    // A device without clusters is refused by the validation, before the kernel is asked.
    let func = match at.cluster_dim {
        Some(c) if limits.cluster_launch => {
            func_cluster(a, f, c.volume() > launch::PORTABLE_CLUSTER_SIZE, cache)?
        }
        _ => FuncCluster::default(),
    };
    let priorities = match at.priority {
        Some(_) => Some(a.stream_priority_range()?),
        None => None,
    };
    launch::validate_attributes(
        c,
        at,
        limits,
        a.dev.ordinal,
        &func,
        priorities,
        refuse_serialization,
    )?;
    if at.cooperative {
        check_cooperative(a, f, c)?;
    }
    match at.programmatic_event {
        Some(pe) => {
            let (pin, raw) = pe.event.pinned_raw()?;
            Ok(Some((pin, raw)))
        }
        None => Ok(None),
    }
}

/// One attribute of a function (`cuFuncGetAttribute`).
fn func_attr(a: &Active, f: sys::CUfunction, attr: sys::CUfunction_attribute) -> Result<i32> {
    let mut v = 0i32;
    // SAFETY: a live function of the current context; valid out-parameter.
    a.check(
        unsafe { sys::cuFuncGetAttribute(&mut v, attr, f) },
        "cuFuncGetAttribute",
    )?;
    Ok(v)
}

/// A function's required cluster dimensions, read once per context generation (they are
/// fixed when the kernel is compiled): 0 until read, then the known bit and 10 bits per
/// dimension. Saves a `cuFuncGetAttribute` per cluster launch of the crate's and the build
/// helper's kernels.
pub(crate) struct ClusterCache(AtomicU32);

impl ClusterCache {
    const KNOWN: u32 = 1 << 31;

    fn get(&self) -> Option<[u32; 3]> {
        let v = self.0.load(Ordering::Relaxed);
        (v & Self::KNOWN != 0).then_some([v & 0x3ff, (v >> 10) & 0x3ff, (v >> 20) & 0x3ff])
    }

    fn set(&self, d: [u32; 3]) {
        if d.iter().all(|&x| x < 1024) {
            self.0.store(
                Self::KNOWN | d[0] | d[1] << 10 | d[2] << 20,
                Ordering::Relaxed,
            );
        }
    }
}

/// What a function says about clusters: its required dimensions (from `cache` when given and
/// filled) and, when `non_portable`, whether it may run in non-portable cluster sizes (read as
/// `false` otherwise; never cached: the caller may change it). One driver call when no
/// dimensions are required: they are all zero or all positive.
fn func_cluster(
    a: &Active,
    f: sys::CUfunction,
    non_portable: bool,
    cache: Option<&ClusterCache>,
) -> Result<FuncCluster> {
    use sys::CUfunction_attribute::*;
    let dim = |attr| func_attr(a, f, attr).map(|v| v.max(0) as u32);
    let required = match cache.and_then(ClusterCache::get) {
        Some(r) => r,
        None => {
            let width = dim(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)?;
            let r = if width == 0 {
                [0; 3]
            } else {
                [
                    width,
                    dim(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)?,
                    dim(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH)?,
                ]
            };
            if let Some(c) = cache {
                c.set(r);
            }
            r
        }
    };
    Ok(FuncCluster {
        required,
        non_portable: non_portable
            && func_attr(a, f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)? != 0,
    })
}

/// Blocks of `block_size` threads with `smem` bytes of dynamic shared memory that fit on one
/// multiprocessor (`cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`).
fn occupancy(
    a: &Active,
    f: sys::CUfunction,
    block_size: u32,
    smem: usize,
    flags: u32,
) -> Result<u32> {
    let block_size = occupancy_int("occupancy block size", block_size)?;
    let mut n = 0i32;
    // SAFETY: a live function of the current context; valid out-parameter.
    a.check(
        unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                &mut n, f, block_size, smem, flags,
            )
        },
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    )?;
    Ok(n.max(0) as u32)
}

/// `v` as the C `int` the occupancy calculator takes (a larger value would reach the driver
/// negative).
fn occupancy_int(what: &'static str, v: u32) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::InvalidValue {
        what,
        value: v.to_string(),
        reason: "above i32::MAX, the most the occupancy calculator takes",
    })
}

/// Refuses a cooperative launch with more blocks than fit on the device at once.
fn check_cooperative(a: &Active, f: sys::CUfunction, c: &LaunchConfig) -> Result<()> {
    let per_sm = occupancy(
        a,
        f,
        c.block.volume() as u32,
        c.shared_mem_bytes as usize,
        0,
    )?;
    let sms = a
        .dev
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let max = per_sm as u64 * sms as u64;
    if c.grid.volume() > max {
        return Err(Error::CooperativeLaunchTooLarge {
            blocks: c.grid.volume(),
            max,
        });
    }
    Ok(())
}

/// `cuLaunchKernelEx`.
///
/// # Safety
/// As [`raw_launch`]; `attrs` were validated, and the handles among them are live.
#[inline]
unsafe fn raw_launch_ex(
    a: &Active,
    f: sys::CUfunction,
    stream: sys::CUstream,
    c: &LaunchConfig,
    attrs: &mut launch::RawAttrs,
    params: &mut [*mut c_void],
) -> Result<()> {
    let p = if params.is_empty() {
        std::ptr::null_mut()
    } else {
        params.as_mut_ptr()
    };
    let cfg = launch::raw_config(c, stream, attrs);
    // SAFETY: forwarded from the caller; `cfg` points into `attrs`, which outlives the call.
    a.check(
        unsafe { sys::cuLaunchKernelEx(&cfg, f, p, std::ptr::null_mut()) },
        "cuLaunchKernelEx",
    )
}

/// `cuLaunchKernel` / `cuLaunchCooperativeKernel`.
///
/// # Safety
/// `params` must match the kernel's parameters, and the memory they name must stay valid for the
/// kernel's run.
#[inline]
unsafe fn raw_launch(
    a: &Active,
    f: sys::CUfunction,
    stream: sys::CUstream,
    c: &LaunchConfig,
    params: &mut [*mut c_void],
    cooperative: bool,
) -> Result<()> {
    let p = if params.is_empty() {
        std::ptr::null_mut()
    } else {
        params.as_mut_ptr()
    };
    if cooperative {
        // SAFETY: forwarded from the caller.
        a.check(
            unsafe {
                sys::cuLaunchCooperativeKernel(
                    f,
                    c.grid.x,
                    c.grid.y,
                    c.grid.z,
                    c.block.x,
                    c.block.y,
                    c.block.z,
                    c.shared_mem_bytes,
                    stream,
                    p,
                )
            },
            "cuLaunchCooperativeKernel",
        )
    } else {
        // SAFETY: forwarded from the caller.
        a.check(
            unsafe {
                sys::cuLaunchKernel(
                    f,
                    c.grid.x,
                    c.grid.y,
                    c.grid.z,
                    c.block.x,
                    c.block.y,
                    c.block.z,
                    c.shared_mem_bytes,
                    stream,
                    p,
                    std::ptr::null_mut(),
                )
            },
            "cuLaunchKernel",
        )
    }
}

/// Loads a module image as a context-independent library (`cuLibraryLoadData`), with the JIT's
/// error log in the error. `a`: the calling thread's entered context, for the error's device.
///
/// # Safety
/// As [`load_image`].
pub(crate) unsafe fn load_library(a: &Active, image: &[u8]) -> Result<sys::CUlibrary> {
    let mut log = vec![0u8; 8192];
    let mut options = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    let mut lib: sys::CUlibrary = std::ptr::null_mut();
    // SAFETY: the image stays in bounds for the driver (the caller's promise); the options
    // point to a log buffer of the stated size that outlives the call; no library options.
    let r = driver::rc(unsafe {
        sys::cuLibraryLoadData(
            &mut lib,
            image.as_ptr().cast(),
            options.as_mut_ptr(),
            values.as_mut_ptr(),
            options.len() as u32,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    });
    if r == 0 {
        return Ok(lib);
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let log = String::from_utf8_lossy(&log[..end]).trim().to_string();
    Err(a.dev.note(Error::ModuleLoad {
        code: ErrorCode::from_driver(r),
        driver: r,
        log,
    }))
}

fn get_function(a: &Active, m: sys::CUmodule, name: &str) -> Result<sys::CUfunction> {
    let cname = CString::new(name).map_err(|_| Error::InvalidValue {
        what: "kernel name",
        value: name.to_string(),
        reason: "contains a NUL byte",
    })?;
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: live module of the current context; NUL-terminated name; valid out-parameter.
    let r = driver::rc(unsafe { sys::cuModuleGetFunction(&mut f, m, cname.as_ptr()) });
    match r {
        0 => Ok(f),
        500 => Err(Error::NotFound {
            what: "kernel",
            name: name.to_string(),
        }),
        code => Err(a.dev.note(Error::from_driver(code, "cuModuleGetFunction"))),
    }
}

struct ModuleInner {
    raw: Raw<sys::CUmod_st>,
    device: i32,
    generation: u64,
    /// Parameter sizes of each entry, when the module was PTX text.
    ptx_entries: Vec<(String, Vec<usize>)>,
    /// Queued launches of its functions and copies to or from its variables.
    uses: crate::queue::CodeUses,
}

impl LoadedCode for ModuleInner {
    fn code_uses(&self) -> &crate::queue::CodeUses {
        &self.uses
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let raw = self.raw;
        let unload = move |a: &Active| {
            // SAFETY: the module is live in this context; nothing references it any more
            // (functions and symbols hold the module) and no queued work uses it.
            a.check(unsafe { sys::cuModuleUnload(raw.get()) }, "cuModuleUnload")
        };
        let waits = self.uses.take_points();
        if waits.is_empty() {
            context::release(self.device, self.generation, "unloading a module", unload);
        } else {
            // Work queued on its functions or variables may still run: unloaded once it is
            // done, in the background (`cuModuleUnload` would wait for the kernels on this
            // thread, and unload under queued copies to its variables).
            crate::queue::defer_free(
                self.device,
                self.generation,
                waits,
                "unloading a module",
                move |a| a.map_or(Ok(()), unload),
            );
        }
    }
}

/// A module loaded from user PTX, cubin or fatbin on the current device (`cuModuleLoadData`;
/// libcudart's `cudaLibraryLoadData` for a single device). Unloaded when the module and every
/// function and symbol taken from it are dropped, once the work queued on them (kernel
/// launches, asynchronous copies to or from its variables) has run: in the background, so that
/// a drop never waits, as for buffers.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("raw", &self.inner.raw.0)
            .field("device", &self.inner.device)
            .finish()
    }
}

impl Module {
    /// Loads PTX text on the current device (compiled by the driver's JIT).
    ///
    /// The text is checked first: it must not hold a NUL byte (one at the very end is
    /// allowed), since the driver reads up to the first NUL, nor start with a control byte
    /// (a cubin starts with `\x7fELF`), since the driver would parse it as a binary. A NUL is
    /// appended for the driver.
    /// Each `.entry`'s parameter list is read from the text for [`Function::launch`]'s checks;
    /// where the reader is not certain of it (preprocessor lines, unusual declarations), the
    /// driver is asked instead.
    ///
    /// # Errors
    /// [`Error::InvalidModuleImage`] for text refused by those checks, [`Error::ModuleLoad`]
    /// with the JIT's log for invalid PTX.
    #[doc(alias = "cudaLibraryLoadData")]
    #[doc(alias = "cuModuleLoadData")]
    pub fn from_ptx(ptx: &str) -> Result<Module> {
        record(Module::load_ptx(ptx.as_bytes(), "PTX text"))
    }

    /// Loads a module image on the current device: PTX text, a cubin or a fatbin
    /// (`cuModuleLoadData`).
    ///
    /// PTX text is checked and loaded as by [`from_ptx`](Self::from_ptx), NUL-terminated here
    /// when it is not. Binaries are checked as far as [`classify_image`] goes (the ELF or
    /// fatbin header's tables and sizes lie inside `image`), which catches truncated and
    /// corrupt files, but the driver follows much more inside a binary without a length:
    /// symbol tables, relocations, notes, fatbin entries. Their functions' parameter lists come
    /// from the driver.
    ///
    /// # Errors
    /// [`Error::InvalidModuleImage`] for bytes refused by those checks, [`Error::ModuleLoad`]
    /// with the driver's code (and the JIT's log) for images it refuses.
    ///
    /// # Safety
    /// Nothing is required of PTX text (prefer the safe [`from_ptx`](Self::from_ptx)). When
    /// `image` is a cubin or a fatbin:
    /// 1. it must be well formed, as NVIDIA's tools (`nvcc`, `ptxas`, `fatbinary`, `nvlink`)
    ///    write them: every size, offset and index inside it (section and program headers,
    ///    symbol tables, relocations, notes, fatbin entries and the images they hold) must
    ///    stay inside `image`. The driver reads it with no length, and a malformed binary can
    ///    make it read past the slice or crash the process.
    #[doc(alias = "cudaLibraryLoadData")]
    #[doc(alias = "cuModuleLoadData")]
    pub unsafe fn from_image(image: &[u8]) -> Result<Module> {
        record((|| match classify_image(image)? {
            ImageKind::Ptx => Module::load_ptx(image, "module image"),
            // SAFETY: a binary whose headers lie inside `image`; the rest is the caller's
            // promise (1).
            _ => unsafe { Module::load(image, Vec::new()) },
        })())
    }

    /// Loads a file of PTX text on the current device, as [`from_ptx`](Self::from_ptx).
    ///
    /// Cubin and fatbin files are refused: loading them is `unsafe` (the driver follows
    /// offsets inside them that cannot all be checked). Read them and use
    /// [`from_image`](Self::from_image): `unsafe { Module::from_image(&std::fs::read(path)?) }`.
    /// There is deliberately no unchecked file loader: the bytes the caller vouches for are
    /// then in view at the `unsafe` call, and the driver never reads a file that may have
    /// changed since it was checked.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the file cannot be read, [`Error::InvalidModuleImage`]
    /// (with `kind: Some(ImageKind::Cubin | ImageKind::Fatbin)` for binaries) for contents
    /// refused by [`from_ptx`](Self::from_ptx)'s checks, [`Error::ModuleLoad`] with the JIT's
    /// log for invalid PTX.
    #[doc(alias = "cudaLibraryLoadFromFile")]
    #[doc(alias = "cuModuleLoad")]
    pub fn from_file(path: impl AsRef<Path>) -> Result<Module> {
        let path = path.as_ref();
        record((|| {
            let bytes = std::fs::read(path).map_err(|e| Error::InvalidValue {
                what: "module file",
                value: path.display().to_string(),
                reason: io_reason(&e),
            })?;
            Module::load_ptx(&bytes, &path.display().to_string())
        })())
    }

    /// Checks PTX text, reads its entries' parameter lists, and loads it NUL-terminated.
    fn load_ptx(image: &[u8], origin: &str) -> Result<Module> {
        let (text, c) = ptx_c_string(image, origin)?;
        // A list the parser cannot read for certain is left out: `Function::new` then asks
        // the driver. The driver has the last word on the text itself.
        let entries = crate::kernel_sig::parse_ptx_entries(text).unwrap_or_default();
        // SAFETY: NUL-terminated PTX text, which the driver reads as text up to its NUL.
        unsafe { Module::load(c.as_bytes_with_nul(), entries) }
    }

    /// # Safety
    /// As [`load_image`].
    unsafe fn load(image: &[u8], ptx_entries: Vec<(String, Vec<usize>)>) -> Result<Module> {
        let a = context::enter_current()?;
        // SAFETY: forwarded from the caller.
        let raw = unsafe { load_image(&a, image) }?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw: Raw(raw),
                device: a.dev.ordinal,
                generation: a.generation(),
                ptx_entries,
                uses: Default::default(),
            }),
        })
    }

    fn enter(&self) -> Result<Active> {
        context::enter_handle(self.inner.device, self.inner.generation, "module")
    }

    /// The raw module handle (`CUmodule`).
    pub fn as_raw(&self) -> sys::CUmodule {
        self.inner.raw.0
    }

    /// The kernel `name` (its `extern "C"` name, or mangled name for C++ kernels).
    ///
    /// # Errors
    /// [`Error::NotFound`] when the module has no such kernel.
    pub fn function(&self, name: &str) -> Result<Function> {
        record((|| {
            let a = self.enter()?;
            let f = get_function(&a, self.inner.raw.0, name)?;
            let known = self
                .inner
                .ptx_entries
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, sizes)| sizes.as_slice());
            Function::new(&a, f, name, Some(self.keep_alive()), known)
        })())
    }

    /// A typed handle to the `__device__` or `__constant__` variable `name`.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown name, [`Error::SymbolSize`] when its size differs
    /// from `size_of::<T>()`.
    pub fn global<T: DeviceRepr>(&self, name: &str) -> Result<Symbol<T>> {
        record((|| {
            let a = self.enter()?;
            Symbol::lookup(&a, self.inner.raw.0, name, Some(self.keep_alive()))
        })())
    }

    pub(crate) fn keep_alive(&self) -> Arc<dyn LoadedCode> {
        self.inner.clone()
    }
}

pub(crate) fn io_reason(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "file not found",
        std::io::ErrorKind::PermissionDenied => "permission denied",
        _ => "the file could not be read",
    }
}

/// Attributes of a kernel (`cudaFuncAttributes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FunctionAttributes {
    /// Static shared memory per block, bytes (`sharedSizeBytes`).
    pub shared_size_bytes: usize,
    /// Constant memory used, bytes (`constSizeBytes`).
    pub const_size_bytes: usize,
    /// Local memory per thread, bytes (`localSizeBytes`).
    pub local_size_bytes: usize,
    /// Maximum threads per block this kernel can be launched with (`maxThreadsPerBlock`).
    pub max_threads_per_block: i32,
    /// Registers per thread (`numRegs`).
    pub num_regs: i32,
    /// PTX virtual architecture it was compiled for, e.g. 75 (`ptxVersion`).
    pub ptx_version: i32,
    /// Binary architecture it was compiled for, e.g. 90 (`binaryVersion`).
    pub binary_version: i32,
    /// Whether it was compiled with `-Xptxas --dlcm=ca` (`cacheModeCA`).
    pub cache_mode_ca: bool,
    /// Maximum dynamic shared memory per block, bytes (`maxDynamicSharedSizeBytes`).
    pub max_dynamic_shared_size_bytes: i32,
    /// Preferred shared-memory carveout, percent, or -1 for none (`preferredShmemCarveout`).
    pub preferred_shmem_carveout: i32,
    /// Whether the kernel must be launched with cluster dimensions (`clusterDimMustBeSet`).
    pub cluster_dim_must_be_set: bool,
    /// The cluster dimensions the kernel requires, set at compile time (`__cluster_dims__`) or
    /// with [`Function::set_required_cluster_dims`] (`requiredClusterWidth`, `...Height`,
    /// `...Depth`); `None` when it requires none.
    pub required_cluster_dim: Option<Dim3>,
    /// Whether the kernel may run in clusters of more than 8 blocks
    /// (`nonPortableClusterSizeAllowed`).
    pub non_portable_cluster_size_allowed: bool,
    /// The kernel's preferred cluster scheduling policy
    /// (`clusterSchedulingPolicyPreference`).
    pub cluster_scheduling_policy_preference: ClusterSchedulingPolicy,
}

bitflags::bitflags! {
    /// Flags of the occupancy calculator (`cudaOccupancyDefault`,
    /// `cudaOccupancyDisableCachingOverride`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct OccupancyFlags: u32 {
        /// Assume the global caching the kernel asks for is not overridden by the device's
        /// configuration, where the device would otherwise turn it off to fit more blocks
        /// (`cudaOccupancyDisableCachingOverride`).
        const DISABLE_CACHING_OVERRIDE = 1;
    }
}

/// One parameter of a kernel, as `cuFuncGetParamInfo` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// Offset in the parameter buffer, bytes.
    pub offset: usize,
    /// Size, bytes.
    pub size: usize,
}

/// A kernel on one device (`cudaFunction_t` / `CUfunction`): attributes, occupancy, and the
/// `unsafe` launch of user kernels with argument checking.
#[derive(Clone)]
pub struct Function {
    raw: Raw<sys::CUfunc_st>,
    device: i32,
    generation: u64,
    name: Arc<str>,
    params: Arc<[ParamInfo]>,
    /// The size of the parameter buffer when `params` pack into one ([`Packing::of`]), else 0.
    packed_size: usize,
    /// What the function lives in (a user module or library), kept loaded; its launches are
    /// noted there, and its unload waits for them.
    module: Option<Arc<dyn LoadedCode>>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("device", &self.device)
            .field("params", &self.params)
            .finish()
    }
}

/// One kernel argument for [`Function::launch`]: a scalar passed by value, or device memory
/// passed by its address, whose use by the kernel the crate notes (its drop, CPU views and other
/// queues then wait for the kernel, as for the crate's own kernels).
///
/// Arguments are usually made with [`kernel_args!`](crate::kernel_args), which converts each
/// expression with `KernelArg::from`:
///
/// | argument | the kernel's parameter | use noted |
/// |---|---|---|
/// | `&buf` (a [`DeviceBuffer`], [`DeviceView`], [`PinnedBuffer`] or [`PinnedView`] (mapped), [`ManagedBuffer`], [`PitchedBuffer`]) | `const T*` | read |
/// | `&mut buf`, or a [`DeviceViewMut`] or [`PinnedViewMut`] by value | `T*` | write |
/// | a [`DeviceView`] or [`PinnedView`] by value (`buf.slice(a..b)?`) | `const T*` | read |
/// | `i8` `u8` `i16` `u16` `i32` `u32` `i64` `u64` `isize` `usize` `f32` `f64` `bool` | the same C type | none |
/// | [`KernelArg::new(&value)`](Self::new) for any other [`DeviceRepr`] (`#[repr(C)]` structs) | the struct by value | none |
///
/// Memory can only become a pointer argument through its own type, so a scalar can never be
/// mistaken for a buffer (and a buffer's use never goes unnoted) by accident; an address
/// written as a plain `u64` is a scalar to the crate, and keeping its memory alive is the
/// caller's business.
#[derive(Clone, Copy)]
pub struct KernelArg<'a> {
    /// The value of a pointer or a scalar of at most 8 bytes, in its first bytes; the bytes
    /// after it are zero (`PackedArgs` writes the whole word). Zero for a borrowed value.
    inline: u64,
    /// The value's size in bytes (`u32::MAX` for a value of `u32::MAX` bytes or more, which no
    /// parameter is).
    size: u32,
    /// What the argument is beyond its value: one field, whose tag alone tells packing what
    /// to do (a plain value, the common case, is written with three stores).
    pub(crate) what: What<'a>,
    _borrow: PhantomData<&'a ()>,
}

/// What a [`KernelArg`] is, beyond its value.
#[derive(Clone, Copy)]
pub(crate) enum What<'a> {
    /// A value in `inline`, nothing else.
    Inline,
    /// A value at this address (borrowed for `'a`), of `size` bytes.
    Borrowed(*const c_void),
    /// An address in `inline`, of this memory.
    Memory(Use<'a>),
    /// A texture or surface object's handle in `inline`: its use, and what it reads or writes
    /// (its array or memory).
    Object { object: Use<'a>, also: Use<'a> },
    /// The address in `inline` of a graph's allocation node: valid only inside that graph's
    /// launches, so only that graph's nodes accept it (a stream launch refuses it).
    GraphMem(&'a crate::graph::GraphMemInner),
}

impl std::fmt::Debug for KernelArg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelArg")
            .field("size", &self.size())
            .field("memory", &self.used().map(|u| (u.alloc.ptr, u.write)))
            .finish()
    }
}

impl<'a> KernelArg<'a> {
    /// An argument passed by value: `value` is copied into the kernel's parameter buffer at
    /// launch (its size is checked against the parameter's). For the primitive scalars,
    /// `KernelArg::from(x)` (or [`kernel_args!`](crate::kernel_args)) takes the value itself.
    /// Pass device memory as memory (`&buf`, `&mut buf`, views), not as its address, so that
    /// its use is noted.
    pub fn new<T: DeviceRepr>(value: &'a T) -> KernelArg<'a> {
        KernelArg {
            inline: 0,
            size: u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX),
            what: What::Borrowed((value as *const T).cast()),
            _borrow: PhantomData,
        }
    }

    /// A scalar of at most 8 bytes, by value.
    fn scalar<T: DeviceRepr>(value: T) -> KernelArg<'a> {
        let mut inline = 0u64;
        let bytes = bytemuck::bytes_of(&value);
        // At most 8 bytes: only the primitive scalars come here.
        let n = bytes.len().min(8);
        bytemuck::bytes_of_mut(&mut inline)[..n].copy_from_slice(&bytes[..n]);
        KernelArg {
            inline,
            size: n as u32,
            what: What::Inline,
            _borrow: PhantomData,
        }
    }

    fn memory(address: u64, used: Use<'a>) -> KernelArg<'a> {
        KernelArg {
            inline: address,
            size: 8,
            what: What::Memory(used),
            _borrow: PhantomData,
        }
    }

    /// Device memory the kernel reads, passed as its address (a `const T*` parameter). The
    /// launch checks that the memory may be used on the stream and notes the use. Same as
    /// `KernelArg::from(&memory)`, for every kind of memory work can use.
    pub fn read<T: DeviceRepr>(memory: &'a (impl DeviceRead<T> + ?Sized)) -> KernelArg<'a> {
        KernelArg::memory(memory.device_ptr(), Use::device(memory.allocation(), false))
    }

    /// Device memory the kernel may write, passed as its address (a `T*` parameter). Same as
    /// `KernelArg::from(&mut memory)`.
    pub fn write<T: DeviceRepr>(memory: &'a mut (impl DeviceWrite<T> + ?Sized)) -> KernelArg<'a> {
        let memory: &'a _ = memory;
        KernelArg::memory(memory.device_ptr(), Use::device(memory.allocation(), true))
    }

    /// Graph memory (see [`GraphMem`](crate::graph::GraphMem)) passed as its address.
    pub(crate) fn graph_memory(
        address: u64,
        inner: &'a crate::graph::GraphMemInner,
    ) -> KernelArg<'a> {
        KernelArg {
            inline: address,
            size: 8,
            what: What::GraphMem(inner),
            _borrow: PhantomData,
        }
    }

    /// The argument's size in bytes.
    pub fn size(&self) -> usize {
        self.size as usize
    }

    /// Whether the argument is memory whose use the launch notes (and whether a write).
    pub fn memory_access(&self) -> Option<bool> {
        self.used().map(|u| u.write)
    }

    /// The use the work makes of the argument's memory (or texture or surface object), if
    /// any.
    #[inline]
    pub(crate) fn used(&self) -> Option<Use<'a>> {
        match self.what {
            What::Memory(u) | What::Object { object: u, .. } => Some(u),
            _ => None,
        }
    }

    /// The second use of a texture or surface object (what it reads or writes).
    #[inline]
    pub(crate) fn also(&self) -> Option<Use<'a>> {
        match self.what {
            What::Object { also, .. } => Some(also),
            _ => None,
        }
    }

    /// The graph allocation of graph memory.
    #[inline]
    pub(crate) fn graph_mem(&self) -> Option<&'a crate::graph::GraphMemInner> {
        match self.what {
            What::GraphMem(m) => Some(m),
            _ => None,
        }
    }

    /// Where the driver reads the value from; valid while `self` is not moved.
    #[inline]
    pub(crate) fn value_ptr(&self) -> *mut c_void {
        match self.what {
            What::Borrowed(p) => p.cast_mut(),
            _ => (&self.inline as *const u64).cast_mut().cast(),
        }
    }
}

/// A texture object (a `cudaTextureObject_t` parameter): the launch notes a use of the object
/// and a read of what it samples, so neither is destroyed or freed while the kernel is queued.
impl<'a, 'b> From<&'a crate::TextureObject<'b>> for KernelArg<'a> {
    fn from(t: &'a crate::TextureObject<'b>) -> KernelArg<'a> {
        let (raw, object, backing) = t.kernel_arg();
        KernelArg {
            inline: raw,
            size: 8,
            what: What::Object {
                object,
                also: backing,
            },
            _borrow: PhantomData,
        }
    }
}

/// A surface object (a `cudaSurfaceObject_t` parameter): the launch notes a use of the object
/// and a write of its array.
impl<'a> From<&'a mut crate::SurfaceObject> for KernelArg<'a> {
    fn from(s: &'a mut crate::SurfaceObject) -> KernelArg<'a> {
        let (raw, object, array) = s.kernel_arg();
        KernelArg {
            inline: raw,
            size: 8,
            what: What::Object {
                object,
                also: array,
            },
            _borrow: PhantomData,
        }
    }
}

macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        impl From<$t> for KernelArg<'_> {
            #[doc = concat!("A `", stringify!($t), "` passed by value.")]
            #[inline]
            fn from(v: $t) -> Self {
                KernelArg::scalar(v)
            }
        }
    )*};
}
scalar_args!(i8, u8, i16, u16, i32, u32, i64, u64, isize, usize, f32, f64);

impl From<bool> for KernelArg<'_> {
    /// A `bool` passed by value (one byte, 0 or 1, as C++'s `bool`).
    #[inline]
    fn from(v: bool) -> Self {
        KernelArg::scalar(v as u8)
    }
}

macro_rules! memory_args {
    ($($ty:ident $(<$lt:lifetime>)?),*) => {$(
        impl<'a, $($lt,)? T: DeviceRepr> From<&'a $ty<$($lt,)? T>> for KernelArg<'a> {
            /// The memory's address, for a `const T*` parameter; the launch notes a read.
            #[inline]
            fn from(m: &'a $ty<$($lt,)? T>) -> Self {
                KernelArg::read::<T>(m)
            }
        }
        impl<'a, $($lt,)? T: DeviceRepr> From<&'a mut $ty<$($lt,)? T>> for KernelArg<'a> {
            /// The memory's address, for a `T*` parameter; the launch notes a write.
            #[inline]
            fn from(m: &'a mut $ty<$($lt,)? T>) -> Self {
                KernelArg::write::<T>(m)
            }
        }
    )*};
}
memory_args!(
    DeviceBuffer,
    DeviceViewMut<'v>,
    PinnedBuffer,
    PinnedViewMut<'v>,
    ManagedBuffer,
    HostRegistration<'v>,
    PitchedBuffer
);

impl<'a, T: DeviceRepr> From<&'a PinnedView<'_, T>> for KernelArg<'a> {
    /// The view's device address (mapped memory), for a `const T*` parameter; the launch notes
    /// a read of its allocation.
    #[inline]
    fn from(m: &'a PinnedView<'_, T>) -> Self {
        KernelArg::read::<T>(m)
    }
}

impl<'a, T: DeviceRepr> From<PinnedView<'a, T>> for KernelArg<'a> {
    /// As `&view`.
    #[inline]
    fn from(m: PinnedView<'a, T>) -> Self {
        let (ptr, alloc) = (m.device_ptr(), m.alloc_ref());
        KernelArg::memory(ptr, Use::device(alloc, false))
    }
}

impl<'a, T: DeviceRepr> From<PinnedViewMut<'a, T>> for KernelArg<'a> {
    /// The view's device address (mapped memory), for a `T*` parameter; the launch notes a
    /// write of its allocation. (The view is consumed: its exclusive borrow lasts as long as
    /// the argument.)
    #[inline]
    fn from(m: PinnedViewMut<'a, T>) -> Self {
        let (ptr, alloc) = (m.device_ptr(), m.alloc_ref());
        KernelArg::memory(ptr, Use::device(alloc, true))
    }
}

impl<'a, T: DeviceRepr> From<&'a DeviceView<'_, T>> for KernelArg<'a> {
    /// The view's address, for a `const T*` parameter; the launch notes a read.
    #[inline]
    fn from(m: &'a DeviceView<'_, T>) -> Self {
        KernelArg::read::<T>(m)
    }
}

impl<'a, T: DeviceRepr> From<DeviceView<'a, T>> for KernelArg<'a> {
    /// The view's address, for a `const T*` parameter; the launch notes a read of its
    /// allocation.
    #[inline]
    fn from(m: DeviceView<'a, T>) -> Self {
        let (ptr, alloc) = (m.device_ptr(), m.alloc);
        KernelArg::memory(ptr, Use::device(alloc, false))
    }
}

impl<'a, T: DeviceRepr> From<DeviceViewMut<'a, T>> for KernelArg<'a> {
    /// The view's address, for a `T*` parameter; the launch notes a write of its allocation.
    /// (The view is consumed: the exclusive borrow it holds lasts as long as the argument.)
    #[inline]
    fn from(m: DeviceViewMut<'a, T>) -> Self {
        let (ptr, alloc) = (m.device_ptr(), m.alloc);
        KernelArg::memory(ptr, Use::device(alloc, true))
    }
}

/// The arguments of a user kernel launch, each converted with `KernelArg::from` (see
/// [`KernelArg`] for what each kind of value becomes): an array to pass to
/// [`Function::launch`].
///
/// ```no_run
/// use cuda_runtime::{kernel_args, DeviceBuffer, LaunchConfig, Module, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// # let ptx = "";
/// let module = Module::from_ptx(ptx)?; // extern "C" __global__ void axpy(float* y, const float* x, float a, unsigned n)
/// let axpy = module.function("axpy")?;
/// let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
/// let mut y = DeviceBuffer::from_slice(&[10.0f32, 20.0, 30.0])?;
/// let stream = Stream::new()?;
/// let cfg = LaunchConfig::for_elements(3, 128)?;
/// // SAFETY: axpy writes y[i] and reads x[i] only for i < n, and n is both buffers' length.
/// unsafe { axpy.launch(&stream, &cfg, &kernel_args![&mut y, &x, 2.0f32, 3u32]) }?;
/// assert_eq!(y.to_vec()?, [12.0, 24.0, 36.0]); // waits for the kernel (its use was noted)
/// # Ok(())
/// # }
/// ```
#[macro_export]
macro_rules! kernel_args {
    ($($arg:expr),* $(,)?) => {
        [$($crate::KernelArg::from($arg)),*]
    };
}

impl Function {
    /// A function handle. `known` is the parameter list from the PTX, when there is one: the
    /// driver is then asked about exactly those parameters. Without it (cubins) the list is
    /// found by asking until the driver reports an invalid index (driver 580 has no
    /// `cuFuncGetParamCount`), which API-error checkers will see.
    pub(crate) fn new(
        a: &Active,
        f: sys::CUfunction,
        name: &str,
        module: Option<Arc<dyn LoadedCode>>,
        known: Option<&[usize]>,
    ) -> Result<Function> {
        let mut params = Vec::new();
        loop {
            if known.is_some_and(|k| params.len() == k.len()) {
                break;
            }
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: live function; valid out-parameters.
            let r = driver::rc(unsafe {
                sys::cuFuncGetParamInfo(f, params.len(), &mut offset, &mut size)
            });
            match r {
                0 => params.push(ParamInfo { offset, size }),
                1 if known.is_none() => break,
                code => return Err(a.dev.note(Error::from_driver(code, "cuFuncGetParamInfo"))),
            }
        }
        Ok(Function {
            raw: Raw(f),
            device: a.dev.ordinal,
            generation: a.generation(),
            name: name.into(),
            packed_size: Packing::of(&params).map_or(0, |p| p.size),
            params: params.into(),
            module,
        })
    }

    /// The parameter list as [`PackedArgs`] packs it, checked once when the function was made;
    /// `None` when it does not pack (see [`Packing::of`]).
    #[inline]
    pub(crate) fn packing(&self) -> Option<Packing<'_>> {
        // (Checked by `Packing::of` in `new`; neither field changes after.)
        (self.packed_size != 0).then_some(Packing {
            params: &self.params,
            size: self.packed_size,
        })
    }

    fn enter(&self) -> Result<Active> {
        context::enter_handle(self.device, self.generation, "function")
    }

    /// The raw handle (`CUfunction`).
    pub fn as_raw(&self) -> sys::CUfunction {
        self.raw.0
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel's parameters (`cuFuncGetParamInfo`).
    pub fn params(&self) -> &[ParamInfo] {
        &self.params
    }

    fn attr(&self, a: &Active, attr: sys::CUfunction_attribute) -> Result<i32> {
        let mut v = 0i32;
        // SAFETY: live function; valid out-parameter.
        a.check(
            unsafe { sys::cuFuncGetAttribute(&mut v, attr, self.raw.0) },
            "cuFuncGetAttribute",
        )?;
        Ok(v)
    }

    /// The kernel's attributes (`cudaFuncGetAttributes`).
    #[doc(alias = "cudaFuncGetAttributes")]
    pub fn attributes(&self) -> Result<FunctionAttributes> {
        use sys::CUfunction_attribute::*;
        record((|| {
            let a = self.enter()?;
            let mut at = FunctionAttributes {
                shared_size_bytes: self.attr(&a, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as usize,
                const_size_bytes: self.attr(&a, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)? as usize,
                local_size_bytes: self.attr(&a, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as usize,
                max_threads_per_block: self.attr(&a, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
                num_regs: self.attr(&a, CU_FUNC_ATTRIBUTE_NUM_REGS)?,
                ptx_version: self.attr(&a, CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
                binary_version: self.attr(&a, CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
                cache_mode_ca: self.attr(&a, CU_FUNC_ATTRIBUTE_CACHE_MODE_CA)? != 0,
                max_dynamic_shared_size_bytes: self
                    .attr(&a, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
                preferred_shmem_carveout: self
                    .attr(&a, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)?,
                ..FunctionAttributes::default()
            };
            // Devices without clusters report none (the defaults).
            if a.dev.launch_limits()?.cluster_launch {
                let c = func_cluster(&a, self.raw.0, true, None)?;
                at.cluster_dim_must_be_set =
                    self.attr(&a, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET)? != 0;
                at.required_cluster_dim = (c.required != [0; 3])
                    .then(|| Dim3::new(c.required[0], c.required[1], c.required[2]));
                at.non_portable_cluster_size_allowed = c.non_portable;
                at.cluster_scheduling_policy_preference = ClusterSchedulingPolicy::from_number(
                    self.attr(&a, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)?,
                );
            }
            Ok(at)
        })())
    }

    fn set_attr(&self, attr: sys::CUfunction_attribute, value: i32) -> Result<()> {
        let a = self.enter()?;
        // SAFETY: live function of the current context.
        a.check(
            unsafe { sys::cuFuncSetAttribute(self.raw.0, attr, value) },
            "cuFuncSetAttribute",
        )
    }

    /// Raises (or lowers) the dynamic shared memory this kernel may be launched with
    /// (`cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)`); needed above 48 KiB.
    #[doc(alias = "cudaFuncSetAttribute")]
    pub fn set_max_dynamic_shared_size(&self, bytes: u32) -> Result<()> {
        record(i32::try_from(bytes).map_err(|_| Error::InvalidValue {
            what: "max dynamic shared size",
            value: bytes.to_string(),
            reason: "above i32::MAX",
        }))
        .and_then(|b| {
            record(self.set_attr(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                b,
            ))
        })
    }

    /// Sets the preferred shared-memory carveout, percent of the combined L1/shared capacity, or
    /// -1 for no preference (`cudaFuncAttributePreferredSharedMemoryCarveout`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] outside -1..=100.
    pub fn set_preferred_shared_memory_carveout(&self, percent: i32) -> Result<()> {
        record((|| {
            if !(-1..=100).contains(&percent) {
                return Err(Error::InvalidValue {
                    what: "shared memory carveout",
                    value: percent.to_string(),
                    reason: "must be -1 (no preference) or 0..=100 percent",
                });
            }
            self.set_attr(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                percent,
            )
        })())
    }

    /// Sets the kernel's preferred cache configuration (`cudaFuncSetCacheConfig`).
    #[doc(alias = "cudaFuncSetCacheConfig")]
    pub fn set_cache_config(&self, config: CacheConfig) -> Result<()> {
        record((|| {
            let a = self.enter()?;
            // SAFETY: live function of the current context.
            a.check(
                unsafe { sys::cuFuncSetCacheConfig(self.raw.0, config.to_raw()) },
                "cuFuncSetCacheConfig",
            )
        })())
    }

    /// The most blocks of `block_size` threads with `dynamic_smem` bytes of dynamic shared
    /// memory that fit on one multiprocessor at once
    /// (`cudaOccupancyMaxActiveBlocksPerMultiprocessor`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a block size above `i32::MAX`; the driver's errors.
    #[doc(alias = "cudaOccupancyMaxActiveBlocksPerMultiprocessor")]
    pub fn max_active_blocks_per_multiprocessor(
        &self,
        block_size: u32,
        dynamic_smem: usize,
    ) -> Result<u32> {
        record((|| {
            let a = self.enter()?;
            self.occupancy(&a, block_size, dynamic_smem)
        })())
    }

    fn occupancy(&self, a: &Active, block_size: u32, dynamic_smem: usize) -> Result<u32> {
        occupancy(a, self.raw.0, block_size, dynamic_smem, 0)
    }

    /// As [`max_active_blocks_per_multiprocessor`](Self::max_active_blocks_per_multiprocessor),
    /// with occupancy calculator flags
    /// (`cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`).
    #[doc(alias = "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags")]
    pub fn max_active_blocks_per_multiprocessor_with_flags(
        &self,
        block_size: u32,
        dynamic_smem: usize,
        flags: OccupancyFlags,
    ) -> Result<u32> {
        record((|| {
            let a = self.enter()?;
            occupancy(&a, self.raw.0, block_size, dynamic_smem, flags.bits())
        })())
    }

    /// Requires the kernel to be launched in clusters of exactly `dims` blocks, or lifts the
    /// requirement with `None` (`cudaFuncSetAttribute` with
    /// `cudaFuncAttributeRequiredClusterWidth`, `...Height`, `...Depth`). A kernel whose
    /// cluster dimensions were set at compile time (`__cluster_dims__`) refuses this
    /// (`cudaErrorNotPermitted` from the driver).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a zero dimension in `Some(dims)`.
    #[doc(alias = "cudaFuncAttributeRequiredClusterWidth")]
    pub fn set_required_cluster_dims(&self, dims: Option<Dim3>) -> Result<()> {
        use sys::CUfunction_attribute::*;
        record((|| {
            let d = match dims {
                None => [0; 3],
                Some(d) => {
                    let d = [d.x, d.y, d.z];
                    if d.contains(&0) || d.iter().any(|&v| v > i32::MAX as u32) {
                        return Err(Error::InvalidValue {
                            what: "required cluster dimensions",
                            value: format!("({}, {}, {})", d[0], d[1], d[2]),
                            reason: "every dimension must be 1 or more (None for no requirement)",
                        });
                    }
                    d
                }
            };
            self.set_attr(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, d[0] as i32)?;
            self.set_attr(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, d[1] as i32)?;
            self.set_attr(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, d[2] as i32)
        })())
    }

    /// Allows (or forbids) clusters of more than 8 blocks for this kernel, up to what the
    /// device supports (16 on the H100) (`cudaFuncSetAttribute` with
    /// `cudaFuncAttributeNonPortableClusterSizeAllowed`).
    #[doc(alias = "cudaFuncAttributeNonPortableClusterSizeAllowed")]
    pub fn set_non_portable_cluster_size_allowed(&self, allowed: bool) -> Result<()> {
        record(self.set_attr(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            allowed as i32,
        ))
    }

    /// Sets the kernel's preferred cluster scheduling policy (`cudaFuncSetAttribute` with
    /// `cudaFuncAttributeClusterSchedulingPolicyPreference`); a launch attribute
    /// ([`LaunchAttributes::cluster_scheduling_policy`]) overrides it.
    #[doc(alias = "cudaFuncAttributeClusterSchedulingPolicyPreference")]
    pub fn set_cluster_scheduling_policy_preference(
        &self,
        policy: ClusterSchedulingPolicy,
    ) -> Result<()> {
        record(self.set_attr(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
            policy.to_sys() as i32,
        ))
    }

    /// Checks a cluster occupancy query: a device with clusters, and cluster dimensions the
    /// kernel can take (given in `config`, or required by the kernel). The grid is not checked.
    fn cluster_query(&self, a: &Active, config: &LaunchConfigEx<'_>) -> Result<Dim3> {
        let limits = a.dev.launch_limits()?;
        if !limits.cluster_launch || limits.compute_capability < 90 {
            return Err(Error::ComputeCapability {
                code: ErrorCode::NotSupported,
                what: "cudaOccupancyMaxActiveClusters".to_string(),
                needs: 90,
                device: a.dev.ordinal,
                found: limits.compute_capability,
            });
        }
        let func = func_cluster(a, self.raw.0, true, None)?;
        let cluster = match config.attributes.cluster_dim {
            Some(c) => c,
            None if func.required != [0; 3] => {
                Dim3::new(func.required[0], func.required[1], func.required[2])
            }
            None => {
                return Err(Error::LaunchAttribute {
                    code: ErrorCode::InvalidClusterSize,
                    attribute: "cluster dimensions",
                    detail: format!(
                        "kernel {} requires no cluster size, so the configuration must give one",
                        self.name
                    ),
                })
            }
        };
        // Any grid the cluster divides: occupancy does not depend on the grid.
        let shape = LaunchConfig {
            grid: cluster,
            ..config.config
        };
        let mut at = config.attributes;
        at.cluster_dim = Some(cluster);
        launch::validate(&shape, limits)?;
        launch::validate_attributes(&shape, &at, limits, a.dev.ordinal, &func, None, false)?;
        Ok(cluster)
    }

    /// The most clusters of the configuration's size (its cluster dimensions, or the kernel's
    /// required ones), with its block size and dynamic shared memory, that can run on the device
    /// at once (`cudaOccupancyMaxActiveClusters`). Needs compute capability 9.0.
    ///
    /// # Errors
    /// [`Error::ComputeCapability`] on an older device; [`Error::LaunchAttribute`] for cluster
    /// dimensions the kernel cannot take, or none at all; the driver's errors.
    #[doc(alias = "cudaOccupancyMaxActiveClusters")]
    pub fn max_active_clusters(&self, config: &LaunchConfigEx<'_>) -> Result<u32> {
        record((|| {
            let a = self.enter()?;
            let cluster = self.cluster_query(&a, config)?;
            let shape = LaunchConfig {
                grid: cluster,
                ..config.config
            };
            let only_cluster = LaunchAttributes {
                cluster_dim: Some(cluster),
                cluster_scheduling_policy: config.attributes.cluster_scheduling_policy,
                ..LaunchAttributes::default()
            };
            let mut raw_attrs = launch::raw_attributes(&only_cluster, None);
            let cfg = launch::raw_config(&shape, std::ptr::null_mut(), &mut raw_attrs);
            let mut n = 0i32;
            // SAFETY: a live function of the current context; `cfg` points into `raw_attrs`,
            // alive for the call; valid out-parameter.
            a.check(
                unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, self.raw.0, &cfg) },
                "cuOccupancyMaxActiveClusters",
            )?;
            Ok(n.max(0) as u32)
        })())
    }

    /// The largest cluster size, in blocks, that the kernel can run with the configuration's
    /// block size and dynamic shared memory on this device
    /// (`cudaOccupancyMaxPotentialClusterSize`); above 8 only if the kernel allows non-portable
    /// sizes. Needs compute capability 9.0.
    ///
    /// # Errors
    /// [`Error::ComputeCapability`] on an older device; the driver's errors.
    #[doc(alias = "cudaOccupancyMaxPotentialClusterSize")]
    pub fn max_potential_cluster_size(&self, config: &LaunchConfig) -> Result<u32> {
        record((|| {
            let a = self.enter()?;
            let limits = a.dev.launch_limits()?;
            if !limits.cluster_launch || limits.compute_capability < 90 {
                return Err(Error::ComputeCapability {
                    code: ErrorCode::NotSupported,
                    what: "cudaOccupancyMaxPotentialClusterSize".to_string(),
                    needs: 90,
                    device: a.dev.ordinal,
                    found: limits.compute_capability,
                });
            }
            let shape = LaunchConfig {
                grid: Dim3::new(1, 1, 1),
                ..*config
            };
            launch::validate(&shape, limits)?;
            let mut none = launch::raw_attributes(&LaunchAttributes::default(), None);
            let cfg = launch::raw_config(&shape, std::ptr::null_mut(), &mut none);
            let mut n = 0i32;
            // SAFETY: a live function of the current context; `cfg` has no attributes;
            // valid out-parameter.
            a.check(
                unsafe { sys::cuOccupancyMaxPotentialClusterSize(&mut n, self.raw.0, &cfg) },
                "cuOccupancyMaxPotentialClusterSize",
            )?;
            Ok(n.max(0) as u32)
        })())
    }

    /// The block size that maximises occupancy, and the smallest grid that fills the device
    /// at it, as `(min_grid_size, block_size)`
    /// (`cudaOccupancyMaxPotentialBlockSizeVariableSMem`). `dynamic_smem` gives the dynamic
    /// shared memory a block of a given size needs; `block_size_limit` caps the block size
    /// (0: no cap beyond the kernel's).
    #[doc(alias = "cudaOccupancyMaxPotentialBlockSize")]
    #[doc(alias = "cudaOccupancyMaxPotentialBlockSizeVariableSMem")]
    pub fn max_potential_block_size(
        &self,
        dynamic_smem: impl Fn(u32) -> usize,
        block_size_limit: u32,
    ) -> Result<(u32, u32)> {
        self.max_potential_block_size_with_flags(
            dynamic_smem,
            block_size_limit,
            OccupancyFlags::empty(),
        )
    }

    /// As [`max_potential_block_size`](Self::max_potential_block_size), with occupancy
    /// calculator flags (`cudaOccupancyMaxPotentialBlockSizeWithFlags`,
    /// `cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags`).
    #[doc(alias = "cudaOccupancyMaxPotentialBlockSizeWithFlags")]
    #[doc(alias = "cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags")]
    pub fn max_potential_block_size_with_flags(
        &self,
        dynamic_smem: impl Fn(u32) -> usize,
        block_size_limit: u32,
        flags: OccupancyFlags,
    ) -> Result<(u32, u32)> {
        record((|| {
            let (sms, warp, limit) = {
                let a = self.enter()?;
                use sys::CUdevice_attribute::*;
                let dev_attr = |attr| a.dev.attribute(attr);
                let sms = dev_attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
                let warp = dev_attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?.max(1);
                let max_threads_sm = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
                let func_max = self.attr(
                    &a,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                )? as u32;
                let mut limit = func_max.min(max_threads_sm);
                if block_size_limit > 0 {
                    limit = limit.min(block_size_limit);
                }
                (sms, warp, limit)
            };
            // `dynamic_smem` is the caller's code, which may call the crate: it runs outside the
            // crate's entry of the device. A reset made in it would otherwise run under that
            // entry (a reset does not wait for its own thread's), and the search go on with the
            // reset context's function (review finding). Entering again refuses the function
            // of a reset context.
            let sizes: Vec<(u32, usize)> = block_sizes(limit, warp)
                .map(|b| (b, dynamic_smem(b)))
                .collect();
            let a = self.enter()?;
            let (best_blocks, best_size) = best_block_size(sizes, |b, smem| {
                occupancy(&a, self.raw.0, b, smem, flags.bits())
            })?;
            Ok((best_blocks * sms, best_size))
        })())
    }

    /// Dynamic shared memory available per block when `num_blocks` blocks of `block_size`
    /// threads share a multiprocessor (`cudaOccupancyAvailableDynamicSMemPerBlock`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a block count or size above `i32::MAX`; the driver's errors.
    #[doc(alias = "cudaOccupancyAvailableDynamicSMemPerBlock")]
    pub fn available_dynamic_shared_memory_per_block(
        &self,
        num_blocks: u32,
        block_size: u32,
    ) -> Result<usize> {
        record((|| {
            let num_blocks = occupancy_int("occupancy block count", num_blocks)?;
            let block_size = occupancy_int("occupancy block size", block_size)?;
            let a = self.enter()?;
            let mut bytes = 0usize;
            // SAFETY: live function; valid out-parameter.
            a.check(
                unsafe {
                    sys::cuOccupancyAvailableDynamicSMemPerBlock(
                        &mut bytes, self.raw.0, num_blocks, block_size,
                    )
                },
                "cuOccupancyAvailableDynamicSMemPerBlock",
            )?;
            Ok(bytes)
        })())
    }

    /// Where launches of the function are noted: its module's or library's uses (none for the
    /// crate's own kernels, loaded for the context's life).
    #[inline]
    fn code_uses(&self) -> Option<&crate::queue::CodeUses> {
        self.module.as_deref().map(LoadedCode::code_uses)
    }

    /// The device and context generation the function was loaded in.
    pub(crate) fn id(&self) -> (i32, u64) {
        (self.device, self.generation)
    }

    /// Checks arguments against the kernel's parameter list (see [`check_args`]).
    #[inline]
    pub(crate) fn check_args(&self, args: &[KernelArg<'_>]) -> Result<()> {
        check_args(&self.name, &self.params, args)
    }

    fn launch_inner(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        attrs: Option<&LaunchAttributes<'_>>,
        args: &[KernelArg<'_>],
        cooperative: bool,
    ) -> Result<()> {
        check_args(&self.name, &self.params, args)?;
        let call = if attrs.is_some() {
            "cudaLaunchKernelEx"
        } else if cooperative {
            "cudaLaunchCooperativeKernel"
        } else {
            "cudaLaunchKernel"
        };
        let lane = stream.lane_for_submit(call)?;
        let a = &lane.a;
        a.expect_generation(self.generation, "function")?;
        if a.dev.ordinal != self.device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the function",
                found: self.device,
                expected: a.dev.ordinal,
            });
        }
        launch::validate(config, a.dev.launch_limits()?)?;
        // Under capture the graph keeps the function, and so its module.
        let mut keep = || Ok(vec![Box::new(self.clone()) as Box<dyn Send>]);
        match attrs {
            None => {
                if cooperative {
                    check_cooperative(a, self.raw.0, config)?;
                }
                // SAFETY: the caller's promise (see `launch`); the arguments were checked above.
                unsafe {
                    submit_launch(
                        &lane,
                        self.raw.0,
                        call,
                        config,
                        None,
                        args,
                        cooperative,
                        self.code_uses(),
                        &mut keep,
                    )
                }
            }
            Some(at) => {
                let mut at = *at;
                at.cooperative |= cooperative;
                let event = prepare_extended(a, self.raw.0, config, &at, false, None)?;
                let ex = Some((&at, event.as_ref().map(|e| e.1)));
                // SAFETY: the caller's promise (see `launch`); the arguments were checked above;
                // the attributes were validated and the event's context is pinned.
                unsafe {
                    submit_launch(
                        &lane,
                        self.raw.0,
                        call,
                        config,
                        ex,
                        args,
                        false,
                        self.code_uses(),
                        &mut keep,
                    )
                }
            }
        }
    }

    /// Launches the kernel on `stream` (`cudaLaunchKernel`; `cudaLaunchKernelEx` when `config`
    /// is a [`LaunchConfigEx`]). Does not block the host.
    ///
    /// The argument count and each argument's size are checked against the kernel's parameter
    /// list first, the configuration against the device's limits, and launch attributes against
    /// the device and the kernel ([`Error::LaunchAttribute`], [`Error::ComputeCapability`]); a
    /// mismatch is an error, not a launch.
    ///
    /// # Safety
    /// The crate cannot know what the kernel does with its arguments:
    /// 1. each argument must have the type the kernel's parameter has, not just its size;
    /// 2. every device address the kernel uses must name memory that stays allocated, and is
    ///    not written by anything else, until the kernel has finished, and the kernel must stay
    ///    within its bounds. Memory passed as memory (`&buf`, `&mut buf`, views, in
    ///    [`kernel_args!`](crate::kernel_args); [`KernelArg::read`] / [`KernelArg::write`]) is
    ///    kept so by the crate (its use is noted: its drop, CPU views and other streams wait for
    ///    the kernel); an address passed as a plain integer is the caller's to keep alive (e.g.
    ///    synchronise `stream` before dropping that buffer);
    /// 3. memory passed as `&buf` (a read) must not be written by the kernel;
    /// 4. with [`programmatic_stream_serialization`](LaunchAttributes::programmatic_stream_serialization),
    ///    every thread of the kernel must wait for the kernel before it
    ///    (`cudaGridDependencySynchronize()`, PTX `griddepcontrol.wait`) before it touches
    ///    memory that earlier work in the stream uses, and before it exits: the crate orders
    ///    the uses of memory by stream order, which the attribute relaxes for the kernel's start.
    ///
    /// ```no_run
    /// # use cuda_runtime::{kernel_args, DeviceBuffer, LaunchConfig, Module, Stream};
    /// # fn main() -> cuda_runtime::Result<()> {
    /// # let (module, stream, n) = (Module::from_ptx("")?, Stream::new()?, 1024usize);
    /// # let (a, b) = (DeviceBuffer::<f32>::new(n)?, DeviceBuffer::<f32>::new(n)?);
    /// # let mut c = DeviceBuffer::<f32>::new(n)?;
    /// // extern "C" __global__ void add(const float* a, const float* b, float* c, unsigned n)
    /// let add = module.function("add")?;
    /// let cfg = LaunchConfig::for_elements(n, 256)?;
    /// // SAFETY: `add` touches a[i], b[i], c[i] for i < n only, and each holds n floats.
    /// unsafe { add.launch(&stream, &cfg, &kernel_args![&a, &b, &mut c, n as u32]) }?;
    /// # Ok(())
    /// # }
    /// ```
    #[doc(alias = "cudaLaunchKernel")]
    #[doc(alias = "cudaLaunchKernelEx")]
    pub unsafe fn launch<L: Launch + ?Sized>(
        &self,
        stream: &Stream,
        config: &L,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        record(self.launch_inner(stream, config.config(), config.attributes(), args, false))
    }

    /// Launches the kernel cooperatively (`cudaLaunchCooperativeKernel`): all blocks are
    /// resident at once, so they may synchronise through `grid.sync()`.
    ///
    /// # Errors
    /// [`Error::CooperativeLaunchTooLarge`] when the grid exceeds what fits on the device at
    /// once, besides the checks of [`launch`](Self::launch).
    ///
    /// # Safety
    /// As [`launch`](Self::launch).
    #[doc(alias = "cudaLaunchCooperativeKernel")]
    pub unsafe fn launch_cooperative<L: Launch + ?Sized>(
        &self,
        stream: &Stream,
        config: &L,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        record(self.launch_inner(stream, config.config(), config.attributes(), args, true))
    }
}

/// Checks the count and sizes of `args` against the parameters of kernel `name`.
#[inline]
pub(crate) fn check_args(name: &str, params: &[ParamInfo], args: &[KernelArg<'_>]) -> Result<()> {
    if args.len() == params.len() && args.iter().zip(params).all(|(a, p)| a.size() == p.size) {
        return Ok(());
    }
    refuse_args(name, params, args)
}

/// The refusal of [`check_args`]: the first mismatch.
#[cold]
#[inline(never)]
fn refuse_args(name: &str, params: &[ParamInfo], args: &[KernelArg<'_>]) -> Result<()> {
    if args.len() != params.len() {
        return Err(Error::KernelArguments {
            kernel: name.to_string(),
            detail: format!(
                "{} arguments given, but the kernel has {} parameters",
                args.len(),
                params.len()
            ),
        });
    }
    for (i, (arg, p)) in args.iter().zip(params.iter()).enumerate() {
        if arg.size() != p.size {
            return Err(Error::KernelArguments {
                kernel: name.to_string(),
                detail: format!(
                    "argument {i} is {} bytes, but parameter {i} is {} bytes",
                    arg.size(),
                    p.size
                ),
            });
        }
    }
    Ok(())
}

/// Queues the launch of `f` (a function of the lane's context) with `args` through the
/// enqueue path, noting the uses of the memory among them.
///
/// # Safety
/// `args` match `f`'s parameters in count and size (checked by the caller) and in meaning
/// (the user's promise, see [`Function::launch`]); the configuration was validated.
///
/// Under a stream capture the launch is recorded into the graph; `keep` gives what keeps the
/// kernel's code alive for it (the function or kernel handle). Otherwise the launch is noted on
/// `code`, the uses of the module or library `f` belongs to, whose unload waits for it.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn submit_launch(
    lane: &crate::queue::Lane<'_>,
    f: sys::CUfunction,
    call: &'static str,
    config: &LaunchConfig,
    extended: Option<(&LaunchAttributes<'_>, Option<sys::CUevent>)>,
    args: &[KernelArg<'_>],
    cooperative: bool,
    code: Option<&crate::queue::CodeUses>,
    keep: &mut dyn FnMut() -> Result<crate::queue::Tokens>,
) -> Result<()> {
    if let Some(m) = args.iter().find_map(|a| a.graph_mem()) {
        return Err(crate::graph::graph_mem_outside(m, call));
    }
    let mut arg_ptrs = ArgPtrs::new();
    let ptrs = arg_ptrs.fill(args);
    let uses: Vec<Use<'_>> = args
        .iter()
        .flat_map(|a| a.used().into_iter().chain(a.also()))
        .collect();
    let textures = args.iter().any(|a| a.also().is_some());
    let programmatic = extended.is_some_and(|(_, event)| event.is_some());
    let mut keep = || {
        if textures {
            // The graph would keep the object's tracker, not the object: its handle could be
            // destroyed while the graph can still replay.
            return Err(Error::NotCapturable {
                call,
                reason: "texture and surface objects cannot be used in captured kernels yet",
            });
        }
        if programmatic {
            return Err(Error::NotCapturable {
                call,
                reason: "launches with a programmatic event cannot be captured yet",
            });
        }
        keep()
    };
    match extended {
        None => lane.submit_capturable_with_code(call, &uses, code, &mut keep, |a, raw| {
            // SAFETY: the caller's promise (count, sizes and meaning of the arguments); the
            // stream is live in the current context, which `f` belongs to.
            unsafe { raw_launch(a, f, raw, config, ptrs, cooperative) }
        }),
        Some((at, event)) => {
            let mut attrs = launch::RawAttrs::new();
            launch::fill_raw_attributes(&mut attrs, at, event);
            lane.submit_capturable_with_code(call, &uses, code, &mut keep, |a, raw| {
                // SAFETY: as above; the attributes were validated by the caller, and the
                // event's context is pinned by it.
                unsafe { raw_launch_ex(a, f, raw, config, &mut attrs, ptrs) }
            })
        }
    }
}

/// The block sizes the search of [`best_block_size`] tries, largest first: the multiples of
/// `warp` up to `limit`, and `limit` itself where it is not one.
pub(crate) fn block_sizes(limit: u32, warp: u32) -> impl Iterator<Item = u32> {
    let warp = warp.max(1);
    (1..=limit.div_ceil(warp))
        .rev()
        .map(move |k| (k as u64 * warp as u64).min(limit as u64) as u32)
}

/// The block size maximising resident threads per multiprocessor among `sizes` (each with the
/// dynamic shared memory a block of it needs, largest first, from [`block_sizes`]), with its
/// block count: the search libcudart's `cudaOccupancyMaxPotentialBlockSizeVariableSMem` does.
/// Ties keep the larger block.
pub(crate) fn best_block_size(
    sizes: impl IntoIterator<Item = (u32, usize)>,
    mut blocks_for: impl FnMut(u32, usize) -> Result<u32>,
) -> Result<(u32, u32)> {
    let mut best = (0u32, 0u32, 0u64); // blocks, size, threads
    for (b, smem) in sizes {
        let blocks = blocks_for(b, smem)?;
        let threads = blocks as u64 * b as u64;
        if threads > best.2 {
            best = (blocks, b, threads);
        }
    }
    Ok((best.0, best.1))
}

/// The argument pointers of a launch (`kernelParams`): up to 32 on the stack, more (rare) on
/// the heap. Made empty where it stays, then filled in place: a constructor that fills it
/// returned it through a 288-byte copy (`memcpy`) on the kernel-node update's path.
pub(crate) struct ArgPtrs {
    stack: [*mut c_void; 32],
    heap: Vec<*mut c_void>,
}

impl ArgPtrs {
    #[inline(always)]
    pub(crate) fn new() -> ArgPtrs {
        ArgPtrs {
            stack: [std::ptr::null_mut(); 32],
            heap: Vec::new(),
        }
    }

    /// The pointers to the values of `args`, in order.
    #[inline(always)]
    pub(crate) fn fill(&mut self, args: &[KernelArg<'_>]) -> &mut [*mut c_void] {
        if args.len() <= self.stack.len() {
            let slots = &mut self.stack[..args.len()];
            for (slot, arg) in slots.iter_mut().zip(args) {
                *slot = arg.value_ptr();
            }
            slots
        } else {
            self.heap.clear();
            self.heap.extend(args.iter().map(KernelArg::value_ptr));
            &mut self.heap
        }
    }
}

/// The arguments of a launch as one parameter buffer (`extra` with
/// `CU_LAUNCH_PARAM_BUFFER_POINTER`), laid out at the offsets `cuFuncGetParamInfo` gave: the
/// driver then copies one buffer instead of following a pointer per parameter. On the H200,
/// updating a kernel node of an executable graph this way took 0.95-0.97x the time of the same
/// driver update through `kernelParams` (`probes/node_update_paths.cu`), and the crate's update
/// in the graph bench went from 0.229 to 0.200 µs. Made empty where it stays, then filled in
/// place (its `extra` list points into itself).
pub(crate) struct PackedArgs {
    /// The buffer. (The driver copies it byte for byte into the parameter space, each value
    /// at the offset it reported, so the buffer's own alignment is not the parameters'; whole
    /// words only keep the copies aligned.) Its first `size` bytes are the parameters, with
    /// the padding between them zero; only those are read. (One word more than
    /// [`PACKED_WORDS`]: a value held in its argument is written as a whole word, which may
    /// pass `size` by up to 7 bytes.)
    buf: std::mem::MaybeUninit<[u64; PACKED_WORDS + 1]>,
    /// `size` and `extra` are written by `fill`. (Left uninitialised by `new`: a zeroed field
    /// there made the compiler clear the whole struct, buffer included, with a `memset` call.)
    size: std::mem::MaybeUninit<usize>,
    extra: std::mem::MaybeUninit<[*mut c_void; 5]>,
}

/// The largest parameter buffer [`PackedArgs`] holds, in 8-byte words (larger lists go through
/// `kernelParams`).
const PACKED_WORDS: usize = 32;

/// A parameter list that packs into one buffer of [`PackedArgs`]: not empty, each parameter
/// starting at or after the end of the one before, the last ending within [`PACKED_WORDS`]
/// words. Made only by [`Packing::of`], which checks that (and by [`Function::packing`], from
/// its result).
#[derive(Clone, Copy)]
pub(crate) struct Packing<'a> {
    params: &'a [ParamInfo],
    /// The end of the last parameter: the buffer's size.
    size: usize,
}

impl<'a> Packing<'a> {
    /// `params` as a packing, or `None` when they do not pack (none, out of order, overlapping,
    /// or past [`PACKED_WORDS`] words: those go through `kernelParams`).
    pub(crate) fn of(params: &'a [ParamInfo]) -> Option<Packing<'a>> {
        let mut end = 0usize;
        for p in params {
            if p.offset < end {
                return None;
            }
            end = p.offset.checked_add(p.size)?;
        }
        (!params.is_empty() && end <= PACKED_WORDS * 8).then_some(Packing { params, size: end })
    }
}

impl PackedArgs {
    #[inline(always)]
    pub(crate) fn new() -> PackedArgs {
        PackedArgs {
            buf: std::mem::MaybeUninit::uninit(),
            size: std::mem::MaybeUninit::uninit(),
            extra: std::mem::MaybeUninit::uninit(),
        }
    }

    /// Packs `args` and returns the `extra` list naming the buffer; `None` when `args` do not
    /// match the parameters (count or a size: [`check_args`] then says which). So `Some` also
    /// means `check_args` would pass.
    #[inline(always)]
    pub(crate) fn fill(
        &mut self,
        packing: Packing<'_>,
        args: &[KernelArg<'_>],
    ) -> Option<*mut *mut c_void> {
        self.fill_if(packing, args, |_| true)
    }

    /// As [`fill`](Self::fill), and `None` also when `admit` refuses an argument (asked, in the
    /// same pass, of each that is more than a value: memory, an object, graph memory; plain
    /// values need no admission).
    #[inline(always)]
    pub(crate) fn fill_if(
        &mut self,
        packing: Packing<'_>,
        args: &[KernelArg<'_>],
        mut admit: impl FnMut(&KernelArg<'_>) -> bool,
    ) -> Option<*mut *mut c_void> {
        let Packing { params, size } = packing;
        if args.len() != params.len() {
            return None;
        }
        let words = self.buf.as_mut_ptr().cast::<u64>();
        // Zeroes the words that hold the parameters (so padding is zero), in blocks of 8 words
        // written as constants: a few vector stores. (One `write_bytes` of the rounded size,
        // or a loop, became a `memset` call, a few ns on every update.)
        const _: () = assert!(PACKED_WORDS == 32);
        // SAFETY: block `i` is words `8 i .. 8 i + 8`, written only when `size > 64 i`, so for
        // `i < 4` only: within the buffer's `PACKED_WORDS` = 32 words (`size <= 256`:
        // `Packing`).
        unsafe {
            let block = |i: usize| words.add(8 * i).cast::<[u64; 8]>().write([0; 8]);
            block(0);
            if size > 64 {
                block(1);
            }
            if size > 128 {
                block(2);
            }
            if size > 192 {
                block(3);
            }
        }
        let base = words.cast::<u8>();
        for (a, p) in args.iter().zip(params) {
            if a.size() != p.size {
                return None;
            }
            let dst = base.wrapping_add(p.offset);
            let src = match a.what {
                What::Inline => None,
                What::Borrowed(src) => Some(src.cast::<u8>()),
                _ if admit(a) => None,
                _ => return None,
            };
            let Some(src) = src else {
                // A value held in the argument (every kind but `Borrowed`; at most 8 bytes,
                // zero after them): written as the whole word. The bytes past the value are
                // zero, and land in padding or in the parameters after this one, which are
                // written later (they start at or after its end: `Packing`). No pointer to
                // follow, no branch on the size.
                // SAFETY: `p.offset <= p.offset + p.size <= size <= PACKED_WORDS * 8`
                // (`Packing`), so the 8 bytes at `dst` are within the buffer's
                // `PACKED_WORDS + 1` words.
                unsafe { dst.cast::<u64>().write_unaligned(a.inline) };
                continue;
            };
            // SAFETY: `p.offset + p.size <= size <= the buffer's size` (`Packing`), so
            // `dst` and the `p.size` bytes after it are in the buffer; `src` is the argument's
            // borrowed value of `a.size == p.size` bytes; the two do not overlap (the buffer is
            // this struct's own). Unaligned accesses: neither side is aligned for the value's
            // type. (The common sizes as one move each, not a `memcpy` call.)
            unsafe {
                match p.size {
                    8 => dst
                        .cast::<u64>()
                        .write_unaligned(src.cast::<u64>().read_unaligned()),
                    4 => dst
                        .cast::<u32>()
                        .write_unaligned(src.cast::<u32>().read_unaligned()),
                    2 => dst
                        .cast::<u16>()
                        .write_unaligned(src.cast::<u16>().read_unaligned()),
                    1 => dst.write(src.read()),
                    n => std::ptr::copy_nonoverlapping(src, dst, n),
                }
            }
        }
        let size = self.size.write(size);
        let extra = self.extra.write([
            sys::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT as usize as *mut c_void,
            base.cast(),
            sys::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT as usize as *mut c_void,
            (size as *mut usize).cast(),
            sys::CU_LAUNCH_PARAM_END_AS_INT as usize as *mut c_void,
        ]);
        Some(extra.as_mut_ptr())
    }
}

#[cfg(test)]
mod tests {

    /// The bytes `PackedArgs::fill` hands the driver, through its `extra` list.
    fn packed_bytes(params: &[super::ParamInfo], args: &[super::KernelArg<'_>]) -> Option<Vec<u8>> {
        let mut p = super::PackedArgs::new();
        let extra = p.fill(super::Packing::of(params)?, args)?;
        // SAFETY: `fill` returned a 5-entry list naming its buffer and the buffer's size, both
        // in `p`, which lives until the end of this function.
        unsafe {
            let list = std::slice::from_raw_parts(extra, 5);
            assert_eq!(list[0] as usize, 1, "CU_LAUNCH_PARAM_BUFFER_POINTER");
            assert_eq!(list[2] as usize, 2, "CU_LAUNCH_PARAM_BUFFER_SIZE");
            assert!(list[4].is_null(), "CU_LAUNCH_PARAM_END");
            let size = *list[3].cast::<usize>();
            Some(std::slice::from_raw_parts(list[1].cast::<u8>(), size).to_vec())
        }
    }

    #[test]
    fn packed_arguments_sit_at_the_driver_offsets_with_zero_padding() {
        use super::{KernelArg, ParamInfo};
        let mut r = fastrand::Rng::with_seed(fastrand::u64(..));
        for _ in 0..200 {
            // A random parameter list with the C alignment rules (offset a multiple of the
            // size, for 1..=8; 16-byte values 16-aligned), and random values.
            let n = r.usize(1..12);
            let mut params = Vec::new();
            let mut values: Vec<Vec<u8>> = Vec::new();
            let mut end = 0usize;
            for _ in 0..n {
                let size = [1, 2, 4, 8, 16, 12][r.usize(..6)];
                let align = if size == 12 { 4 } else { size };
                let offset = end.next_multiple_of(align);
                end = offset + size;
                params.push(ParamInfo { offset, size });
                values.push((0..size).map(|_| r.u8(..)).collect());
            }
            let (mut w8, mut w4, mut w2) = (Vec::new(), Vec::new(), Vec::new());
            let (mut w1, mut w16, mut w12) = (Vec::new(), Vec::new(), Vec::new());
            for v in &values {
                match v.len() {
                    8 => w8.push(u64::from_le_bytes(v[..].try_into().unwrap())),
                    4 => w4.push(u32::from_le_bytes(v[..].try_into().unwrap())),
                    2 => w2.push(u16::from_le_bytes(v[..].try_into().unwrap())),
                    1 => w1.push(v[0]),
                    16 => w16.push(<[u8; 16]>::try_from(&v[..]).unwrap()),
                    _ => w12.push(<[u8; 12]>::try_from(&v[..]).unwrap()),
                }
            }
            let (mut i8_, mut i4, mut i2, mut i1, mut i16_, mut i12) = (0, 0, 0, 0, 0, 0);
            let args: Vec<KernelArg<'_>> = values
                .iter()
                .map(|v| {
                    let next = |i: &mut usize| {
                        *i += 1;
                        *i - 1
                    };
                    // Scalars held in the argument or borrowed, at random.
                    let held = r.bool();
                    match v.len() {
                        8 if held => KernelArg::from(w8[next(&mut i8_)]),
                        8 => KernelArg::new(&w8[next(&mut i8_)]),
                        4 if held => KernelArg::from(w4[next(&mut i4)]),
                        4 => KernelArg::new(&w4[next(&mut i4)]),
                        2 if held => KernelArg::from(w2[next(&mut i2)]),
                        2 => KernelArg::new(&w2[next(&mut i2)]),
                        1 if held => KernelArg::from(w1[next(&mut i1)]),
                        1 => KernelArg::new(&w1[next(&mut i1)]),
                        16 => KernelArg::new(&w16[next(&mut i16_)]),
                        _ => KernelArg::new(&w12[next(&mut i12)]),
                    }
                })
                .collect();
            let got = packed_bytes(&params, &args);
            if end > 256 {
                assert!(got.is_none(), "{end} bytes: left to kernelParams");
                continue;
            }
            let mut want = vec![0u8; end];
            for (p, v) in params.iter().zip(&values) {
                want[p.offset..p.offset + p.size].copy_from_slice(v);
            }
            assert_eq!(got.as_deref(), Some(&want[..]), "{params:?}");
        }
    }

    #[test]
    fn packing_declines_what_it_cannot_pack() {
        use super::{KernelArg, ParamInfo};
        let p = |offset, size| ParamInfo { offset, size };
        // No parameters, a count or size mismatch, a buffer over 256 bytes, an overflowing end;
        assert!(packed_bytes(&[], &[]).is_none());
        assert!(packed_bytes(&[p(0, 4)], &[]).is_none());
        assert!(packed_bytes(&[p(0, 4)], &[KernelArg::from(1u64)]).is_none());
        let big = [7u8; 256];
        assert!(packed_bytes(
            &[p(0, 4), p(8, 256)],
            &[KernelArg::from(1u32), KernelArg::new(&big)]
        )
        .is_none());
        assert!(packed_bytes(&[p(usize::MAX, 4)], &[KernelArg::from(1u32)]).is_none());
        // Parameters out of order, or overlapping the one before (a whole-word write of the
        // first would land on the second's bytes after they were written).
        let two = [KernelArg::from(1u32), KernelArg::from(2u32)];
        assert!(packed_bytes(&[p(8, 4), p(0, 4)], &two).is_none());
        assert!(packed_bytes(&[p(0, 4), p(2, 4)], &two).is_none());
        assert_eq!(
            packed_bytes(&[p(0, 4), p(4, 4)], &two),
            Some([1u32.to_le_bytes(), 2u32.to_le_bytes()].concat())
        );
        // Exactly 256 bytes still packs.
        assert_eq!(
            packed_bytes(&[p(0, 256)], &[KernelArg::new(&big)]),
            Some(big.to_vec())
        );
    }
    #[test]
    fn cluster_cache_holds_dimensions_once_read() {
        let c = ClusterCache(AtomicU32::new(0));
        assert_eq!(c.get(), None);
        c.set([0, 0, 0]);
        assert_eq!(c.get(), Some([0, 0, 0]));
        c.set([8, 2, 1]);
        assert_eq!(c.get(), Some([8, 2, 1]));
        c.set([1023, 1, 1023]);
        assert_eq!(c.get(), Some([1023, 1, 1023]));
        // Dimensions past the packing are not cached (read again each time).
        let d = ClusterCache(AtomicU32::new(0));
        d.set([1024, 1, 1]);
        assert_eq!(d.get(), None);
    }

    use super::*;

    fn put(b: &mut [u8], at: usize, v: &[u8]) {
        b[at..at + v.len()].copy_from_slice(v);
    }

    /// A small well-formed ELF64 file shaped like a cubin: the header, 16 bytes of section
    /// contents at 64, and a section header table at 80 (a null section and that one).
    fn elf() -> Vec<u8> {
        let mut b = vec![0u8; 208];
        put(&mut b, 0, b"\x7fELF\x02\x01\x01\x33\x07");
        put(&mut b, 16, &2u16.to_le_bytes()); // ET_EXEC
        put(&mut b, 18, &190u16.to_le_bytes()); // EM_CUDA
        put(&mut b, 20, &1u32.to_le_bytes());
        put(&mut b, 40, &80u64.to_le_bytes()); // e_shoff
        put(&mut b, 52, &64u16.to_le_bytes());
        put(&mut b, 54, &56u16.to_le_bytes());
        put(&mut b, 58, &64u16.to_le_bytes()); // e_shentsize
        put(&mut b, 60, &2u16.to_le_bytes()); // e_shnum
        put(&mut b, 62, &1u16.to_le_bytes()); // e_shstrndx
        put(&mut b, 144 + 4, &1u32.to_le_bytes()); // SHT_PROGBITS
        put(&mut b, 144 + 24, &64u64.to_le_bytes());
        put(&mut b, 144 + 32, &16u64.to_le_bytes());
        b
    }

    fn refused_at(r: Result<ImageKind>, kind: Option<ImageKind>, at: Option<u64>) {
        match r {
            Err(Error::InvalidModuleImage { kind: k, at: a, .. }) if k == kind && a == at => {}
            other => panic!("expected a refusal of a {kind:?} at {at:?}, got {other:?}"),
        }
    }

    #[test]
    fn modules_for_newer_architectures_are_refused_before_loading() {
        check_arch("cluster", 90, 0, 90).unwrap();
        check_arch("cluster", 90, 1, 100).unwrap();
        check_arch("vector_add", 75, 0, 75).unwrap();
        for found in [75, 80, 86, 89] {
            let e = check_arch("cluster", 90, 2, found).unwrap_err();
            assert_eq!(e.code(), ErrorCode::NoKernelImageForDevice);
            assert_eq!(
                e.to_string(),
                format!(
                    "kernel module cluster (built for sm_90) needs compute capability 9.0 or newer, but device 2 has {}.{}",
                    found / 10,
                    found % 10
                )
            );
        }
    }

    #[test]
    fn elf_is_refused_on_the_safe_path_and_its_offsets_are_checked() {
        let good = elf();
        assert_eq!(classify_image(&good).unwrap(), ImageKind::Cubin);
        // Every cubin, well formed or not, is refused by the safe loaders.
        let e = ptx_text(&good, "k.cubin").unwrap_err();
        assert!(
            matches!(&e, Error::InvalidModuleImage { origin, kind: Some(ImageKind::Cubin), .. } if origin == "k.cubin"),
            "{e}"
        );
        assert_eq!(e.code(), ErrorCode::InvalidValue);
        assert!(e.to_string().contains("Module::from_image"), "{e}");
        // The bytes that crashed the driver: a section header table far past the end.
        let mut crafted = good.clone();
        put(&mut crafted, 40, &0xffff_ffff_ffff_ff00u64.to_le_bytes());
        refused_at(
            ptx_text(&crafted, "x").map(|_| ImageKind::Ptx),
            Some(ImageKind::Cubin),
            None,
        );
        refused_at(
            classify_image(&crafted),
            Some(ImageKind::Cubin),
            Some(0xffff_ffff_ffff_ff00),
        );
        // The same as text, which `from_ptx(&str)` could be given: no NUL, valid UTF-8.
        let text = format!("\x7fELF\x02\x01{}", "A".repeat(64));
        refused_at(
            ptx_text(text.as_bytes(), "x").map(|_| ImageKind::Ptx),
            Some(ImageKind::Cubin),
            None,
        );
        refused_at(
            classify_image(text.as_bytes()),
            Some(ImageKind::Cubin),
            Some(0x4141_4141_4141_4141),
        );
        // A count whose table size overflows, a section past the end, a bad name index.
        let mut b = good.clone();
        put(&mut b, 60, &0xffffu16.to_le_bytes());
        put(&mut b, 58, &0xffffu16.to_le_bytes());
        refused_at(classify_image(&b), Some(ImageKind::Cubin), Some(80));
        let mut b = good.clone();
        put(&mut b, 144 + 32, &(u64::MAX - 10).to_le_bytes());
        refused_at(classify_image(&b), Some(ImageKind::Cubin), Some(64));
        let mut b = good.clone();
        put(&mut b, 144 + 4, &8u32.to_le_bytes()); // SHT_NOBITS: takes no bytes.
        put(&mut b, 144 + 32, &u64::MAX.to_le_bytes());
        assert_eq!(classify_image(&b).unwrap(), ImageKind::Cubin);
        let mut b = good.clone();
        put(&mut b, 62, &2u16.to_le_bytes());
        refused_at(classify_image(&b), Some(ImageKind::Cubin), None);
        // Extended numbering: the count in section 0, here far too many.
        let mut b = good.clone();
        put(&mut b, 60, &0u16.to_le_bytes());
        put(&mut b, 80 + 32, &2u64.to_le_bytes());
        assert_eq!(classify_image(&b).unwrap(), ImageKind::Cubin);
        put(&mut b, 80 + 32, &(1u64 << 58).to_le_bytes());
        refused_at(classify_image(&b), Some(ImageKind::Cubin), Some(80));
        // Program headers: the table and each segment's contents.
        let mut b = good.clone();
        put(&mut b, 56, &1u16.to_le_bytes());
        put(&mut b, 32, &200u64.to_le_bytes());
        refused_at(classify_image(&b), Some(ImageKind::Cubin), Some(200));
        put(&mut b, 32, &64u64.to_le_bytes()); // over the section contents: fits
        assert_eq!(classify_image(&b).unwrap(), ImageKind::Cubin);
        // Truncated, and 32-bit.
        refused_at(classify_image(&good[..40]), Some(ImageKind::Cubin), None);
        refused_at(
            classify_image(&good[..150]),
            Some(ImageKind::Cubin),
            Some(80),
        );
        let mut b = good.clone();
        b[4] = 1;
        refused_at(classify_image(&b), Some(ImageKind::Cubin), Some(4));
    }

    #[test]
    fn ptx_text_is_nul_terminated_for_the_driver() {
        let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n";
        for image in [ptx.as_bytes().to_vec(), format!("{ptx}\0").into_bytes()] {
            assert_eq!(classify_image(&image).unwrap(), ImageKind::Ptx);
            let (text, c) = ptx_c_string(&image, "t").unwrap();
            assert_eq!(text, ptx);
            assert_eq!(c.as_bytes_with_nul(), format!("{ptx}\0").as_bytes());
        }
        // A NUL inside: the driver would read only up to it.
        refused_at(
            classify_image(b".version 8.0\0.entry k()"),
            Some(ImageKind::Ptx),
            Some(12),
        );
        refused_at(
            classify_image(b".version 8.0\0\0"),
            Some(ImageKind::Ptx),
            Some(12),
        );
        // Not text, and nothing.
        refused_at(classify_image(b".version \xff 8.0"), None, Some(9));
        refused_at(classify_image(b"\x7fELX.version 8.0"), None, Some(0));
        refused_at(classify_image(b"\x01.version 8.0"), None, Some(0));
        assert_eq!(classify_image(b"\t.version 8.0").unwrap(), ImageKind::Ptx);
        refused_at(classify_image(b""), Some(ImageKind::Ptx), None);
        refused_at(classify_image(b" \n\0"), Some(ImageKind::Ptx), None);
        let e = ptx_c_string(b"a\0b", "k.ptx").unwrap_err();
        assert_eq!(
            e.to_string(),
            "k.ptx (3 bytes, PTX, at byte 1): a NUL byte inside PTX text: the driver would stop reading there"
        );
    }

    #[test]
    fn fatbin_is_refused_on_the_safe_path_and_its_size_is_checked() {
        let fatbin = |header: u16, size: u64, payload: usize| {
            let mut b = FATBIN_MAGIC.to_vec();
            b.extend(1u16.to_le_bytes());
            b.extend(header.to_le_bytes());
            b.extend(size.to_le_bytes());
            b.extend(std::iter::repeat_n(0x11, payload));
            b
        };
        let good = fatbin(16, 32, 32);
        assert_eq!(classify_image(&good).unwrap(), ImageKind::Fatbin);
        refused_at(
            ptx_text(&good, "k.fatbin").map(|_| ImageKind::Ptx),
            Some(ImageKind::Fatbin),
            None,
        );
        refused_at(
            classify_image(&fatbin(16, 33, 32)),
            Some(ImageKind::Fatbin),
            Some(16),
        );
        refused_at(
            classify_image(&fatbin(16, u64::MAX, 32)),
            Some(ImageKind::Fatbin),
            Some(16),
        );
        refused_at(
            classify_image(&fatbin(8, 32, 32)),
            Some(ImageKind::Fatbin),
            Some(8),
        );
        refused_at(classify_image(&good[..10]), Some(ImageKind::Fatbin), None);
        // The fatbin wrapper (it holds pointers) and unknown binaries are not text.
        let mut wrapper = 0x466243B1u32.to_le_bytes().to_vec();
        wrapper.extend([1, 0, 0, 0, 0x10, 0x20, 0x30, 0x40, 0, 0, 0, 0]);
        refused_at(classify_image(&wrapper), None, Some(0));
    }

    #[test]
    fn occupancy_arguments_above_i32_are_refused_with_their_value() {
        assert_eq!(occupancy_int("occupancy block size", 1024).unwrap(), 1024);
        assert_eq!(
            occupancy_int("occupancy block size", i32::MAX as u32).unwrap(),
            i32::MAX
        );
        for v in [i32::MAX as u32 + 1, u32::MAX - 31, u32::MAX] {
            let e = occupancy_int("occupancy block size", v).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidValue);
            assert!(e.to_string().contains(&v.to_string()), "{e}");
        }
    }

    #[test]
    fn block_size_search_maximises_resident_threads() {
        // A multiprocessor of 2048 threads, 32 blocks, and a kernel whose dynamic shared
        // memory grows with the block: 64 KiB per SM, 64 bytes per thread.
        let occ = |b: u32| -> Result<u32> {
            let by_threads = 2048 / b;
            let by_smem = (65536 / (64 * b as usize)) as u32;
            Ok(by_threads.min(by_smem).min(32))
        };
        let search = |limit, warp, occ: &dyn Fn(u32) -> Result<u32>| {
            best_block_size(block_sizes(limit, warp).map(|b| (b, 0)), |b, _| occ(b))
        };
        let (blocks, size) = search(1024, 32, &occ).unwrap();
        // 1024 threads of shared memory fit: 64 KiB / 64 B; every size dividing it ties, the
        // largest wins.
        assert_eq!((blocks, size), (1, 1024));
        let occ2 = |b: u32| -> Result<u32> { Ok((1536 / b).min(16)) };
        let (blocks, size) = search(1024, 32, &occ2).unwrap();
        assert_eq!(blocks as u64 * size as u64, 1536);
        assert_eq!((blocks, size), (2, 768));
        let (blocks, size) = search(100, 32, &occ2).unwrap();
        assert!(size <= 100);
        assert_eq!(blocks * size, 1536 / 96 * 96);
        // The sizes tried: multiples of the warp, the limit in place of the first above it.
        assert_eq!(block_sizes(100, 32).collect::<Vec<_>>(), [100, 96, 64, 32]);
        assert_eq!(block_sizes(96, 32).collect::<Vec<_>>(), [96, 64, 32]);
        assert_eq!(block_sizes(20, 32).collect::<Vec<_>>(), [20]);
        assert_eq!(block_sizes(0, 32).count(), 0);
        assert_eq!(block_sizes(3, 0).collect::<Vec<_>>(), [3, 2, 1]);
        assert_eq!(
            block_sizes(u32::MAX, 1 << 31).collect::<Vec<_>>(),
            [u32::MAX, 1 << 31]
        );
    }
}

/// Where the device runtime library (`libcudadevrt.a`) is looked for, in order:
/// `CUDA_RUNTIME_DEVRT` (the file itself), then `lib64/`, `lib/` and
/// `targets/x86_64-linux/lib/` under `CUDA_HOME`, `CUDA_PATH` and `/usr/local/cuda`.
pub(crate) fn devrt_candidates(env: impl Fn(&str) -> Option<String>) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = env("CUDA_RUNTIME_DEVRT") {
        v.push(std::path::PathBuf::from(p));
    }
    let roots = [
        env("CUDA_HOME"),
        env("CUDA_PATH"),
        Some("/usr/local/cuda".into()),
    ];
    for root in roots.into_iter().flatten() {
        for sub in ["lib64", "lib", "targets/x86_64-linux/lib"] {
            v.push(Path::new(&root).join(sub).join("libcudadevrt.a"));
        }
    }
    v
}

impl Module {
    /// Loads PTX that calls device-runtime functions (such as `cudaGraphSetConditional`, or
    /// kernel launches from device code, which `nvcc -rdc=true` PTX declares `.extern`), linked
    /// by the driver with NVIDIA's device runtime library `libcudadevrt.a` from a CUDA toolkit
    /// (`cuLinkCreate`, `cuLinkAddData`, `cuLinkAddFile`, `cuLinkComplete`; libcudart's programs
    /// get the same from `nvcc -rdc=true`).
    ///
    /// This is for your own PTX, on a machine that has the library (a CUDA toolkit, or the PyPI
    /// package `nvidia-cuda-runtime`, whose `nvidia/cu13/lib/libcudadevrt.a` you can name in
    /// `CUDA_RUNTIME_DEVRT`). The crate's own device-runtime kernels (`kernels::graph_cond`,
    /// `kernels::cdp`) do not need it: they run from images linked ahead of time (feature
    /// `device-runtime`). Without the library, link ahead of time yourself (`nvcc -rdc=true
    /// -c`, then `nvcc -dlink -fatbin -lcudadevrt`) and load the result with
    /// [`Module::from_image`].
    ///
    /// The library is looked for in `CUDA_RUNTIME_DEVRT` (the file), then under `CUDA_HOME`,
    /// `CUDA_PATH` and `/usr/local/cuda` (`lib64/`, `lib/`, `targets/x86_64-linux/lib/`). The
    /// PTX is checked as by [`from_ptx`](Self::from_ptx); the cubin the driver's linker makes
    /// is loaded as is.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] naming the paths searched when no library is found;
    /// [`Error::InvalidModuleImage`] as [`from_ptx`](Self::from_ptx); [`Error::ModuleLoad`]
    /// with the linker's log when linking fails.
    #[doc(alias = "cuLinkCreate")]
    #[doc(alias = "cuLinkComplete")]
    pub fn from_ptx_with_device_runtime(ptx: &str) -> Result<Module> {
        record((|| {
            let (text, c) = ptx_c_string(ptx.as_bytes(), "PTX text")?;
            let entries = crate::kernel_sig::parse_ptx_entries(text).unwrap_or_default();
            let candidates = devrt_candidates(|k| std::env::var(k).ok());
            let devrt =
                candidates
                    .iter()
                    .find(|p| p.is_file())
                    .ok_or_else(|| Error::InvalidValue {
                        what: "libcudadevrt.a (the device runtime library)",
                        value: candidates
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        reason:
                            "not found in any of these places: set CUDA_RUNTIME_DEVRT to the file \
                             or CUDA_HOME to a CUDA toolkit",
                    })?;
            let devrt = std::ffi::CString::new(devrt.display().to_string()).map_err(|_| {
                Error::InvalidValue {
                    what: "libcudadevrt.a path",
                    value: devrt.display().to_string(),
                    reason: "holds a NUL byte",
                }
            })?;
            let a = context::enter_current()?;
            let mut log = vec![0u8; 8192];
            let mut options = [
                sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
                sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            ];
            let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
            let mut state: sys::CUlinkState = std::ptr::null_mut();
            // SAFETY: the options point to a log buffer of the stated size, alive until the
            // state is destroyed below; valid out-parameter.
            a.check(
                unsafe {
                    sys::cuLinkCreate_v2(2, options.as_mut_ptr(), values.as_mut_ptr(), &mut state)
                },
                "cuLinkCreate",
            )?;
            let linked = (|| -> std::result::Result<Vec<u8>, u32> {
                let ptx = c.as_bytes_with_nul();
                // SAFETY: live link state; NUL-terminated PTX text of the stated size (the
                // driver copies it); no options.
                let r = crate::driver::rc(unsafe {
                    sys::cuLinkAddData_v2(
                        state,
                        sys::CUjitInputType::CU_JIT_INPUT_PTX,
                        ptx.as_ptr().cast_mut().cast(),
                        ptx.len(),
                        c"kernels.ptx".as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                });
                if r != 0 {
                    return Err(r);
                }
                // SAFETY: live link state; NUL-terminated path of NVIDIA's library.
                let r = crate::driver::rc(unsafe {
                    sys::cuLinkAddFile_v2(
                        state,
                        sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
                        devrt.as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                });
                if r != 0 {
                    return Err(r);
                }
                let (mut cubin, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
                // SAFETY: live link state; valid out-parameters.
                let r =
                    crate::driver::rc(unsafe { sys::cuLinkComplete(state, &mut cubin, &mut size) });
                if r != 0 || cubin.is_null() {
                    return Err(if r != 0 { r } else { 999 });
                }
                // SAFETY: the driver's cubin of `size` bytes, owned by the state, alive until
                // it is destroyed below; copied out now.
                Ok(unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) }.to_vec())
            })();
            // SAFETY: the live state made above, destroyed once.
            let _ = unsafe { sys::cuLinkDestroy(state) };
            let image = match linked {
                Ok(i) => i,
                Err(r) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let log = String::from_utf8_lossy(&log[..end]).trim().to_string();
                    return Err(a.dev.note(Error::ModuleLoad {
                        code: ErrorCode::from_driver(r),
                        driver: r,
                        log,
                    }));
                }
            };
            drop(a);
            // SAFETY: a cubin written by the driver's own linker from checked PTX and
            // NVIDIA's device runtime library: well formed as the driver writes them.
            unsafe { Module::load(&image, entries) }
        })())
    }
}

#[cfg(test)]
mod devrt_tests {
    use super::{check_linked, devrt_candidates, feature_disabled, same_sources_hash, sass_for};
    use crate::{Error, ErrorCode};

    const ARCHS: &[u32] = &[75, 80, 90, 100, 120];

    #[test]
    fn linked_images_run_on_later_minor_versions_of_their_family_only() {
        let cases = [
            (75, Some(75)),
            (80, Some(80)),
            (86, Some(80)),
            (87, Some(80)),
            (89, Some(80)),
            (90, Some(90)),
            (100, Some(100)),
            (103, Some(100)),
            (120, Some(120)),
            (121, Some(120)),
            // Other families: no machine code, and no PTX to JIT.
            (110, None),
            (72, None),
            (130, None),
        ];
        for (cc, want) in cases {
            assert_eq!(sass_for(ARCHS, cc), want, "compute capability {cc}");
        }
        // A file built for sm_90 only has code from 9.0 on.
        assert_eq!(sass_for(&[90, 100, 120], 89), None);
        let e = check_linked("cdp", ARCHS, 1, 110).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NoKernelImageForDevice);
        assert_eq!(
            e.to_string(),
            "kernel module cdp (linked with the device runtime) has machine code for sm_75, \
             sm_80, sm_90, sm_100, sm_120 only, none of which runs on device 1 (compute \
             capability 11.0)"
        );
        check_linked("cdp", ARCHS, 0, 90).unwrap();
    }

    #[test]
    fn a_build_without_the_feature_names_it() {
        let e = feature_disabled("cdp", "device-runtime");
        assert!(matches!(
            e,
            Error::FeatureDisabled {
                feature: "device-runtime",
                ..
            }
        ));
        assert_eq!(e.code(), ErrorCode::NoKernelImageForDevice);
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "kernel module cdp needs cuda-runtime's Cargo feature `device-runtime`, which \
                 this build disabled"
            ),
            "{msg}"
        );
        assert!(msg.contains("cuda-runtime-devrt"), "{msg}");
    }

    #[test]
    fn source_hashes_compare_exactly_up_to_a_line_end() {
        let h = "2443ec1d4dde80df8f2b4b14b180dd0f065c8f4f108d9f0716e1b96082eb80f5";
        let other = "2443ec1d4dde80df8f2b4b14b180dd0f065c8f4f108d9f0716e1b96082eb80f6";
        assert!(same_sources_hash(&format!("{h}\n"), h));
        assert!(same_sources_hash(h, h));
        assert!(same_sources_hash(&format!("{h}\r\n"), &format!("{h}\n")));
        assert!(!same_sources_hash(other, h));
        assert!(!same_sources_hash(&h[..63], &h[..63]), "not a SHA-256");
        assert!(!same_sources_hash("", ""));
        assert!(!same_sources_hash(&format!("{h} "), h));
    }

    #[test]
    fn device_runtime_is_looked_for_in_the_env_file_then_toolkit_roots() {
        let env = |k: &str| match k {
            "CUDA_RUNTIME_DEVRT" => Some("/x/libcudadevrt.a".to_string()),
            "CUDA_HOME" => Some("/opt/cuda".to_string()),
            _ => None,
        };
        let v = devrt_candidates(env);
        assert_eq!(v[0], std::path::Path::new("/x/libcudadevrt.a"));
        assert_eq!(v[1], std::path::Path::new("/opt/cuda/lib64/libcudadevrt.a"));
        assert!(v.contains(&std::path::PathBuf::from(
            "/usr/local/cuda/lib64/libcudadevrt.a"
        )));
        assert_eq!(v.len(), 1 + 2 * 3);
        assert_eq!(devrt_candidates(|_| None).len(), 3);
    }
}
