//! Libraries: module images loaded once for every device (`cudaLibraryLoadData`,
//! `cudaLibraryGetKernel`, `cudaLibraryGetGlobal`, `cudaLibraryUnload`), over the driver's
//! context-independent `cuLibrary*` handles.
//!
//! A [`Library`] is not tied to a device or a context: the driver loads it into each context
//! the first time one of its kernels or globals is used there, and into a device's fresh
//! primary context after a reset. A [`Kernel`] launches on a stream of any device; the
//! per-context function is resolved in the launching context (and cached per device until
//! that device is reset). What *is* tied to one context — a [`Function`] taken with
//! [`Kernel::function`], a [`Symbol`] taken with [`Library::global`] — fails with
//! [`Error::ContextDestroyed`] after its device is reset, while the library goes on working
//! on every device, the reset one included.
//!
//! Templated kernels are found by their readable name as well as by their mangled one:
//! `library.kernel("scale<float>")`, or the whole signature as `c++filt` writes it.

use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use crate::context::{self, Active};
use crate::demangle::{demangle, squeeze};
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, Result};
use crate::launch::{self, Launch};
use crate::module::{
    check_args, classify_image, io_reason, load_library, prepare_extended, ptx_c_string,
    submit_launch, Function, ImageKind, KernelArg, ParamInfo,
};
use crate::queue::LoadedCode;
use crate::stream::Stream;
use crate::symbol::Symbol;
use crate::DeviceRepr;

struct LibraryInner {
    raw: Raw<sys::CUlib_st>,
    /// Every kernel: its mangled name, its demangled forms, and its handle.
    kernels: Vec<Entry>,
    /// Parameter sizes of each entry, when the library was PTX text.
    ptx_entries: Vec<(String, Vec<usize>)>,
    /// Queued launches of its kernels and copies to or from its variables, on any device.
    uses: crate::queue::CodeUses,
}

impl LoadedCode for LibraryInner {
    fn code_uses(&self) -> &crate::queue::CodeUses {
        &self.uses
    }
}

struct Entry {
    name: String,
    readable: Option<crate::demangle::Demangled>,
    raw: Raw<sys::CUkern_st>,
}

impl Drop for LibraryInner {
    fn drop(&mut self) {
        // Kernels, functions and symbols of the library hold it, so no handle refers to it any
        // more. Unloading is context-independent: no context is entered.
        let raw = self.raw;
        let unload = move || {
            // Relaxed: a drop never invalidates another thread's global capture.
            // SAFETY: loaded by `Library::load`, unloaded once.
            let r =
                crate::queue::relaxed(|| driver::rc(unsafe { sys::cuLibraryUnload(raw.get()) }));
            if r != 0 {
                if let Ok(d) = context::device_state(context::current_ordinal()) {
                    d.defer(
                        "unloading a library",
                        Error::from_driver(r, "cuLibraryUnload"),
                    );
                }
            }
        };
        let waits = self.uses.take_points();
        if let Some((q, _)) = waits.first() {
            // Work queued on its kernels or variables may still run: unloaded once it is done,
            // in the background, whatever became of the contexts meanwhile (the unload needs
            // none).
            let (device, generation) = (q.device, q.generation);
            crate::queue::defer_free(
                device,
                generation,
                waits,
                "unloading a library",
                move |_| {
                    unload();
                    Ok(())
                },
            );
        } else if context::in_host_fn() {
            // No CUDA call may be made in a host function (the last handle can be dropped in
            // one, review finding): the next crate call outside does it.
            context::defer_release(unload);
        } else {
            unload();
        }
    }
}

/// A module image loaded for every device at once (`cudaLibrary_t` / `CUlibrary`). Unloaded
/// (`cudaLibraryUnload`) when the library and every kernel, function and symbol taken from it
/// are dropped, once the work queued on them has run, in the background (a drop never waits).
///
/// ```no_run
/// use cuda_runtime::{kernel_args, Device, DeviceBuffer, Library, LaunchConfig, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// # let ptx = "";
/// // template <typename T> __global__ void scale(T* data, size_t n, T factor);
/// // template __global__ void scale<float>(float*, size_t, float);
/// let lib = Library::from_ptx(ptx)?;
/// let scale = lib.kernel("scale<float>")?; // or "_Z5scaleIfEvPT_mS0_"
/// for d in 0..cuda_runtime::device_count()? {
///     Device::new(d)?.set_current()?;
///     let mut data = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
///     let stream = Stream::new()?;
///     let cfg = LaunchConfig::for_elements(3, 128)?;
///     // SAFETY: scale touches data[i] for i < n only, and n is the buffer's length.
///     unsafe { scale.launch(&stream, &cfg, &kernel_args![&mut data, 3usize, 2.0f32]) }?;
///     assert_eq!(data.to_vec()?, [2.0, 4.0, 6.0]);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Library {
    inner: Arc<LibraryInner>,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("raw", &self.inner.raw.0)
            .field("kernels", &self.inner.kernels.len())
            .finish()
    }
}

impl Library {
    /// Loads PTX text for every device (`cudaLibraryLoadData`). The text is checked as by
    /// [`Module::from_ptx`](crate::Module::from_ptx).
    ///
    /// # Errors
    /// [`Error::InvalidModuleImage`] for text refused by those checks, [`Error::ModuleLoad`]
    /// with the JIT's log for invalid PTX.
    #[doc(alias = "cudaLibraryLoadData")]
    pub fn from_ptx(ptx: &str) -> Result<Library> {
        record(Library::load_ptx(ptx.as_bytes(), "PTX text"))
    }

    /// Loads a file of PTX text for every device (`cudaLibraryLoadFromFile`), as
    /// [`from_ptx`](Self::from_ptx). Cubin and fatbin files are refused: read them and use the
    /// `unsafe` [`from_image`](Self::from_image).
    #[doc(alias = "cudaLibraryLoadFromFile")]
    pub fn from_file(path: impl AsRef<Path>) -> Result<Library> {
        let path = path.as_ref();
        record((|| {
            let bytes = std::fs::read(path).map_err(|e| Error::InvalidValue {
                what: "library file",
                value: path.display().to_string(),
                reason: io_reason(&e),
            })?;
            match classify_image(&bytes)? {
                ImageKind::Ptx => Library::load_ptx(&bytes, &path.display().to_string()),
                kind => Err(Error::InvalidValue {
                    what: "library file",
                    value: format!("{} ({})", path.display(), kind.name()),
                    reason: "binaries load only through the unsafe Library::from_image",
                }),
            }
        })())
    }

    /// Loads a module image for every device: PTX text, a cubin or a fatbin
    /// (`cudaLibraryLoadData`), checked as by
    /// [`Module::from_image`](crate::Module::from_image).
    ///
    /// # Errors
    /// As [`Module::from_image`](crate::Module::from_image).
    ///
    /// # Safety
    /// As [`Module::from_image`](crate::Module::from_image): a cubin or fatbin must be well
    /// formed, every size, offset and index inside it staying inside `image`.
    #[doc(alias = "cudaLibraryLoadData")]
    pub unsafe fn from_image(image: &[u8]) -> Result<Library> {
        record((|| match classify_image(image)? {
            ImageKind::Ptx => Library::load_ptx(image, "library image"),
            // SAFETY: a binary whose headers lie inside `image`; the rest is the caller's
            // promise.
            _ => unsafe { Library::load(image, Vec::new()) },
        })())
    }

    fn load_ptx(image: &[u8], origin: &str) -> Result<Library> {
        let (text, c) = ptx_c_string(image, origin)?;
        let entries = crate::kernel_sig::parse_ptx_entries(text).unwrap_or_default();
        // SAFETY: NUL-terminated PTX text, which the driver reads as text up to its NUL.
        unsafe { Library::load(c.as_bytes_with_nul(), entries) }
    }

    /// # Safety
    /// As `module::load_image`.
    unsafe fn load(image: &[u8], ptx_entries: Vec<(String, Vec<usize>)>) -> Result<Library> {
        // The runtime initialises itself (and the current device's context) on this call, as
        // libcudart does; errors are noted on that device.
        let a = context::enter_current()?;
        // SAFETY: forwarded from the caller.
        let raw = unsafe { load_library(&a, image) }?;
        // Owned from here: an error below unloads it.
        let mut inner = LibraryInner {
            raw: Raw(raw),
            kernels: Vec::new(),
            ptx_entries,
            uses: Default::default(),
        };
        inner.kernels = enumerate(&a, raw)?;
        Ok(Library {
            inner: Arc::new(inner),
        })
    }

    /// The raw handle (`cudaLibrary_t` / `CUlibrary`).
    pub fn as_raw(&self) -> sys::CUlibrary {
        self.inner.raw.0
    }

    /// The mangled names of the library's kernels (`cudaLibraryEnumerateKernels`), in the
    /// driver's order.
    #[doc(alias = "cudaLibraryEnumerateKernels")]
    pub fn kernel_names(&self) -> Vec<&str> {
        self.inner.kernels.iter().map(|e| e.name.as_str()).collect()
    }

    /// How many kernels the library has (`cudaLibraryGetKernelCount`), as the driver counted
    /// them when it was loaded.
    #[doc(alias = "cudaLibraryGetKernelCount")]
    pub fn kernel_count(&self) -> usize {
        self.inner.kernels.len()
    }

    /// Every kernel of the library, as launchable handles in the driver's order
    /// (`cudaLibraryEnumerateKernels`).
    pub fn kernels(&self) -> Result<Vec<Kernel>> {
        let names: Vec<String> = self.kernel_names().iter().map(|n| n.to_string()).collect();
        names.iter().map(|n| self.kernel(n)).collect()
    }

    /// The kernel `name` (`cudaLibraryGetKernel`): its mangled or `extern "C"` name, or, for
    /// a C++ (templated) kernel, its readable name with its template arguments
    /// (`scale<float>`, `ns::add_k<unsigned int, 7>`) or its whole signature as `c++filt`
    /// writes it (`void scale<float>(float*, unsigned long, float)`). Spaces do not matter.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no kernel has that name; [`Error::InvalidValue`] listing the
    /// candidates when a readable name without a parameter list fits several overloads, or a
    /// template's name without arguments (`scale`) several instantiations (one alone is
    /// taken).
    #[doc(alias = "cudaLibraryGetKernel")]
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        record((|| {
            let entry = self.find(name)?;
            let known = self
                .inner
                .ptx_entries
                .iter()
                .find(|(n, _)| *n == entry.name)
                .map(|(_, sizes)| sizes.as_slice());
            let params = kernel_params(entry.raw.0, known)?;
            Ok(Kernel {
                inner: Arc::new(KernelInner {
                    raw: entry.raw,
                    name: entry.name.as_str().into(),
                    readable: entry.readable.as_ref().map(|d| d.signature.as_str().into()),
                    params: params.into(),
                    cache: [const {
                        Slot {
                            generation: AtomicU64::new(0),
                            func: AtomicPtr::new(std::ptr::null_mut()),
                        }
                    }; CACHED_DEVICES],
                    library: self.inner.clone(),
                }),
            })
        })())
    }

    fn find(&self, name: &str) -> Result<&Entry> {
        let k = &self.inner.kernels;
        if let Some(e) = k.iter().find(|e| e.name == name) {
            return Ok(e);
        }
        let want = squeeze(name);
        if let Some(e) = k.iter().find(|e| {
            e.readable
                .as_ref()
                .is_some_and(|d| squeeze(&d.signature) == want)
        }) {
            return Ok(e);
        }
        let mut fits: Vec<&Entry> = k
            .iter()
            .filter(|e| {
                e.readable
                    .as_ref()
                    .is_some_and(|d| squeeze(&d.name) == want)
            })
            .collect();
        if fits.is_empty() && !want.contains('<') {
            // A template's name without its arguments (`scale`): its instantiations.
            fits = k
                .iter()
                .filter(|e| {
                    e.readable.as_ref().is_some_and(|d| {
                        d.name
                            .split_once('<')
                            .is_some_and(|(bare, _)| squeeze(bare) == want)
                    })
                })
                .collect();
        }
        match fits.as_slice() {
            [one] => Ok(one),
            [] => Err(Error::NotFound {
                what: "kernel",
                name: name.to_string(),
            }),
            many => Err(Error::InvalidValue {
                what: "kernel name",
                value: format!(
                    "{name} (fits {})",
                    many.iter()
                        .filter_map(|e| e.readable.as_ref().map(|d| d.signature.as_str()))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                reason: "several kernels have that name: give the whole signature or the \
                         mangled name",
            }),
        }
    }

    /// A typed handle to the `__device__` or `__constant__` variable `name` on the current
    /// device (`cudaLibraryGetGlobal`): each device has its own copy of the variable. The
    /// symbol keeps the library loaded, and fails with [`Error::ContextDestroyed`] after a
    /// reset of its device (take it again then).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown name, [`Error::SymbolSize`] when its size differs
    /// from `size_of::<T>()`.
    #[doc(alias = "cudaLibraryGetGlobal")]
    pub fn global<T: DeviceRepr>(&self, name: &str) -> Result<Symbol<T>> {
        record((|| {
            let a = context::enter_current()?;
            let cname = c_name(name, "symbol name")?;
            let (mut ptr, mut size) = (0u64, 0usize);
            // SAFETY: live library; NUL-terminated name; out-parameters; the global is taken in
            // the current (entered) context.
            let r = driver::rc(unsafe {
                sys::cuLibraryGetGlobal(&mut ptr, &mut size, self.inner.raw.0, cname.as_ptr())
            });
            match r {
                0 => {}
                500 => {
                    return Err(Error::NotFound {
                        what: "symbol",
                        name: name.to_string(),
                    })
                }
                code => return Err(a.dev.note(Error::from_driver(code, "cuLibraryGetGlobal"))),
            }
            let keep: Arc<dyn LoadedCode> = self.inner.clone();
            Symbol::checked(&a, ptr, size, name, Some(keep))
        })())
    }
}

impl Library {
    /// The `__managed__` variable `name`, typed as `T` (`cudaLibraryGetManaged`).
    ///
    /// The variable is managed memory, one copy for the whole process (every device sees the
    /// same bytes). The crate reaches it through [`Symbol`]'s checked copies, which are
    /// ordered against the device work that uses it; it hands out no CPU reference to it (one
    /// would race with kernels writing it).
    ///
    /// # Errors
    /// [`Error::NotFound`] when the library has no managed variable of that name;
    /// [`Error::SymbolSize`] when `T`'s size differs from the variable's.
    #[doc(alias = "cudaLibraryGetManaged")]
    pub fn managed<T: DeviceRepr>(&self, name: &str) -> Result<Symbol<T>> {
        record((|| {
            let a = context::enter_current()?;
            let cname = c_name(name, "managed variable name")?;
            let (mut ptr, mut size) = (0u64, 0usize);
            // SAFETY: live library; NUL-terminated name; valid out-parameters.
            let r = driver::rc(unsafe {
                sys::cuLibraryGetManaged(&mut ptr, &mut size, self.inner.raw.0, cname.as_ptr())
            });
            match r {
                0 => {}
                500 => {
                    return Err(Error::NotFound {
                        what: "managed variable",
                        name: name.to_string(),
                    })
                }
                code => return Err(a.dev.note(Error::from_driver(code, "cuLibraryGetManaged"))),
            }
            let keep: Arc<dyn LoadedCode> = self.inner.clone();
            Symbol::checked(&a, ptr, size, name, Some(keep))
        })())
    }
}

impl Library {
    /// The address of the unified function `name` (`cudaLibraryGetUnifiedFunction`): a
    /// function of the library image that the host may call. Getting the address is safe;
    /// calling it needs `unsafe` (cast to its exact C signature with `std::mem::transmute`), as
    /// with [`driver_entry_point`](crate::entry_point::driver_entry_point). The library must
    /// stay loaded (hold it) while the address is used.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the library has no unified function of that name (PTX
    /// libraries have none).
    #[doc(alias = "cudaLibraryGetUnifiedFunction")]
    pub fn unified_function(&self, name: &str) -> Result<std::ptr::NonNull<std::ffi::c_void>> {
        record((|| {
            let cname = c_name(name, "unified function name")?;
            driver::init()?;
            let mut f: *mut std::ffi::c_void = std::ptr::null_mut();
            // SAFETY: live library; NUL-terminated name; valid out-parameter.
            let r = driver::rc(unsafe {
                sys::cuLibraryGetUnifiedFunction(&mut f, self.inner.raw.0, cname.as_ptr())
            });
            let not_found = || Error::NotFound {
                what: "unified function",
                name: name.to_string(),
            };
            match r {
                0 => std::ptr::NonNull::new(f).ok_or_else(not_found),
                // Driver 580 answers a name it does not have with `CUDA_ERROR_INVALID_VALUE`
                // (the library is live and the name a valid string here).
                1 | 500 => Err(not_found()),
                code => Err(Error::from_driver(code, "cuLibraryGetUnifiedFunction")),
            }
        })())
    }
}

impl Kernel {
    fn set_attr_for(
        &self,
        device: crate::Device,
        attr: sys::CUfunction_attribute,
        value: i32,
    ) -> Result<()> {
        let a = context::enter(device.ordinal())?;
        // SAFETY: a kernel of a live library (held by `self`); a valid device handle.
        a.check(
            unsafe { sys::cuKernelSetAttribute(attr, value, self.inner.raw.0, a.dev.raw) },
            "cuKernelSetAttribute",
        )
    }

    /// Raises (or lowers) the dynamic shared memory the kernel may be launched with on
    /// `device` (`cudaKernelSetAttributeForDevice` with
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize`); needed above 48 KiB.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] above `i32::MAX`; the driver's error above the device's opt-in
    /// limit.
    #[doc(alias = "cudaKernelSetAttributeForDevice")]
    pub fn set_max_dynamic_shared_size_for(&self, device: crate::Device, bytes: u32) -> Result<()> {
        record((|| {
            let b = i32::try_from(bytes).map_err(|_| Error::InvalidValue {
                what: "max dynamic shared size",
                value: bytes.to_string(),
                reason: "above i32::MAX",
            })?;
            self.set_attr_for(
                device,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                b,
            )
        })())
    }

    /// Sets the preferred shared-memory carveout of the kernel on `device`, percent of the
    /// combined L1/shared capacity or -1 for no preference (`cudaKernelSetAttributeForDevice`
    /// with `cudaFuncAttributePreferredSharedMemoryCarveout`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] outside -1..=100.
    #[doc(alias = "cudaKernelSetAttributeForDevice")]
    pub fn set_preferred_shared_memory_carveout_for(
        &self,
        device: crate::Device,
        percent: i32,
    ) -> Result<()> {
        record((|| {
            if !(-1..=100).contains(&percent) {
                return Err(Error::InvalidValue {
                    what: "shared memory carveout",
                    value: percent.to_string(),
                    reason: "must be -1 (no preference) or 0..=100 percent",
                });
            }
            self.set_attr_for(
                device,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                percent,
            )
        })())
    }
}

fn c_name(name: &str, what: &'static str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::InvalidValue {
        what,
        value: name.to_string(),
        reason: "contains a NUL byte",
    })
}

/// Every kernel of `lib`, with its name and demangled forms.
fn enumerate(a: &Active, lib: sys::CUlibrary) -> Result<Vec<Entry>> {
    let mut count = 0u32;
    // SAFETY: live library; valid out-parameter.
    a.check(
        unsafe { sys::cuLibraryGetKernelCount(&mut count, lib) },
        "cuLibraryGetKernelCount",
    )?;
    let mut raws = vec![std::ptr::null_mut::<sys::CUkern_st>(); count as usize];
    if count > 0 {
        // SAFETY: room for `count` handles.
        a.check(
            unsafe { sys::cuLibraryEnumerateKernels(raws.as_mut_ptr(), count, lib) },
            "cuLibraryEnumerateKernels",
        )?;
    }
    raws.into_iter()
        .map(|k| {
            let mut p: *const std::ffi::c_char = std::ptr::null();
            // SAFETY: a kernel of the live library; valid out-parameter.
            a.check(
                unsafe { sys::cuKernelGetName(&mut p, k) },
                "cuKernelGetName",
            )?;
            if p.is_null() {
                return Err(Error::InvalidValue {
                    what: "cuKernelGetName",
                    value: format!("{k:p}"),
                    reason: "the driver gave no name",
                });
            }
            // SAFETY: the driver's NUL-terminated name, valid while the library is loaded;
            // copied at once.
            let name = unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned();
            let readable = demangle(&name);
            Ok(Entry {
                name,
                readable,
                raw: Raw(k),
            })
        })
        .collect()
}

/// A kernel's parameters, asked of the driver without a context (`cuKernelGetParamInfo`):
/// exactly `known.len()` of them when the PTX was read, otherwise until the driver reports an
/// invalid index.
fn kernel_params(k: sys::CUkernel, known: Option<&[usize]>) -> Result<Vec<ParamInfo>> {
    let mut params = Vec::new();
    loop {
        if known.is_some_and(|n| params.len() == n.len()) {
            return Ok(params);
        }
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: a kernel of a live library; valid out-parameters.
        let r = driver::rc(unsafe {
            sys::cuKernelGetParamInfo(k, params.len(), &mut offset, &mut size)
        });
        match r {
            0 => params.push(ParamInfo { offset, size }),
            1 if known.is_none() => return Ok(params),
            code => return Err(Error::from_driver(code, "cuKernelGetParamInfo")),
        }
    }
}

const CACHED_DEVICES: usize = 16;

/// The function of a kernel in one device's context, and the context's generation.
struct Slot {
    generation: AtomicU64,
    func: AtomicPtr<sys::CUfunc_st>,
}

struct KernelInner {
    raw: Raw<sys::CUkern_st>,
    name: Arc<str>,
    readable: Option<Arc<str>>,
    params: Arc<[ParamInfo]>,
    cache: [Slot; CACHED_DEVICES],
    library: Arc<LibraryInner>,
}

/// A kernel of a [`Library`], usable on every device (`cudaKernel_t` / `CUkernel`). Keeps its
/// library loaded. Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<KernelInner>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.inner.name)
            .field("readable", &self.inner.readable)
            .field("params", &self.inner.params)
            .finish()
    }
}

impl Kernel {
    /// The raw handle (`cudaKernel_t` / `CUkernel`).
    pub fn as_raw(&self) -> sys::CUkernel {
        self.inner.raw.0
    }

    /// The kernel's name as the image has it (mangled for C++ kernels).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The readable signature of a C++ kernel, as `c++filt` writes it
    /// (`void scale<float>(float*, unsigned long, float)`); `None` for `extern "C"` kernels
    /// and names the crate's demangler does not read.
    pub fn readable_name(&self) -> Option<&str> {
        self.inner.readable.as_deref()
    }

    /// The kernel's parameters (`cuKernelGetParamInfo`).
    pub fn params(&self) -> &[ParamInfo] {
        &self.inner.params
    }

    /// The kernel's function in the entered context `a`, loading the library there on first
    /// use (`cuKernelGetFunction`).
    #[inline]
    fn resolve(&self, a: &Active) -> Result<sys::CUfunction> {
        if let Some(slot) = self.inner.cache.get(a.dev.ordinal as usize) {
            if slot.generation.load(Ordering::Acquire) == a.generation() {
                return Ok(slot.func.load(Ordering::Relaxed));
            }
        }
        self.resolve_slow(a)
    }

    #[cold]
    fn resolve_slow(&self, a: &Active) -> Result<sys::CUfunction> {
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: a kernel of a live library (held by `self`); valid out-parameter; `a`'s
        // context is current.
        a.check(
            unsafe { sys::cuKernelGetFunction(&mut f, self.inner.raw.0) },
            "cuKernelGetFunction",
        )?;
        if let Some(slot) = self.inner.cache.get(a.dev.ordinal as usize) {
            // The read guard in `a` excludes a reset, so no other generation is stored now.
            slot.func.store(f, Ordering::Relaxed);
            slot.generation.store(a.generation(), Ordering::Release);
        }
        Ok(f)
    }

    /// The kernel as a [`Function`] of the current device (`cudaGetFuncBySymbol` of a kernel;
    /// `cuKernelGetFunction`), for attributes, occupancy and cooperative launches there. The
    /// function keeps the library loaded, and fails with [`Error::ContextDestroyed`] after a
    /// reset of its device (the kernel itself goes on working).
    pub fn function(&self) -> Result<Function> {
        record((|| {
            let a = context::enter_current()?;
            let f = self.resolve(&a)?;
            let keep: Arc<dyn LoadedCode> = self.inner.library.clone();
            let sizes: Vec<usize> = self.inner.params.iter().map(|p| p.size).collect();
            Function::new(&a, f, &self.inner.name, Some(keep), Some(&sizes))
        })())
    }

    /// Launches the kernel on `stream`, of any device (`cudaLaunchKernel` with a
    /// `cudaKernel_t`; `cudaLaunchKernelEx` with a [`LaunchConfigEx`](crate::LaunchConfigEx),
    /// whose attributes are checked as [`Function::launch`] checks them): the library is loaded into the stream's context on first use there.
    /// Does not block the host.
    ///
    /// The argument count and sizes are checked against the kernel's parameter list, and the
    /// configuration against the device's limits, before anything is queued.
    ///
    /// # Errors
    /// [`Error::KernelArguments`] for arguments that do not fit the parameters;
    /// [`Error::ContextDestroyed`] for a stream made before a reset of its device.
    ///
    /// # Safety
    /// As [`Function::launch`]: the arguments must have the types the kernel's parameters have,
    /// the memory it reaches must stay valid and within bounds for its run, memory passed as a
    /// read must not be written, and with programmatic stream serialization every thread waits
    /// for the kernel before it first.
    #[doc(alias = "cudaLaunchKernel")]
    #[doc(alias = "cudaLaunchKernelEx")]
    pub unsafe fn launch<L: Launch + ?Sized>(
        &self,
        stream: &Stream,
        config: &L,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        let (config, attrs) = (config.config(), config.attributes());
        record((|| {
            check_args(&self.inner.name, &self.inner.params, args)?;
            let call = if attrs.is_some() {
                "cudaLaunchKernelEx"
            } else {
                "cudaLaunchKernel"
            };
            let lane = stream.lane_for_submit(call)?;
            launch::validate(config, lane.a.dev.launch_limits()?)?;
            let f = self.resolve(&lane.a)?;
            // Under capture the graph keeps the kernel, and so its library; otherwise the
            // launch is noted on the library, whose unload waits for it.
            let mut keep = || Ok(vec![Box::new(self.clone()) as Box<dyn Send>]);
            let code = Some(&self.inner.library.uses);
            match attrs {
                // SAFETY: the caller's promise (1-4 of `Function::launch`); count and sizes
                // checked above; `f` belongs to the lane's context.
                None => unsafe {
                    submit_launch(&lane, f, call, config, None, args, false, code, &mut keep)
                },
                Some(at) => {
                    let event = prepare_extended(&lane.a, f, config, at, false, None)?;
                    let ex = Some((at, event.as_ref().map(|e| e.1)));
                    // SAFETY: as above; the attributes were validated and the event's context
                    // is pinned.
                    unsafe {
                        submit_launch(&lane, f, call, config, ex, args, false, code, &mut keep)
                    }
                }
            }
        })())
    }
}

// The raw handles inside are context-independent driver objects, used from any thread.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Library>();
    send_sync::<Kernel>();
};
