//! Modules and kernels: the crate's embedded PTX, loaded lazily on each device, and user PTX or
//! cubins loaded explicitly; functions, their attributes, occupancy, and launches.

use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::device::CacheConfig;
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, ErrorCode, Result};
use crate::launch::{self, LaunchConfig};
use crate::memory::DeviceWrite;
use crate::queue::Use;
use crate::stream::Stream;
use crate::symbol::Symbol;
use crate::{DeviceRead, DeviceRepr};

/// Loads a module image (PTX with a NUL, cubin or fatbin) into the current context, with the
/// JIT's error log in the error.
fn load_image(a: &Active, image: &[u8]) -> Result<sys::CUmodule> {
    let mut log = vec![0u8; 8192];
    let mut options = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: the context is current; `image` is a complete module image (PTX is NUL-terminated
    // by the callers); the options point to a log buffer of the stated size that outlives the
    // call.
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

/// The PTX of one of the crate's kernel files, loaded on a device the first time one of its
/// kernels is used there (as libcudart loads the kernels it registered), and kept until the
/// device is reset.
pub struct EmbeddedModule {
    name: &'static str,
    ptx: &'static str,
    loaded: Mutex<Vec<(i32, u64, Raw<sys::CUmod_st>)>>,
}

impl EmbeddedModule {
    /// A module of the crate's kernels (used by the generated code).
    #[doc(hidden)]
    pub const fn new(name: &'static str, ptx: &'static str) -> EmbeddedModule {
        EmbeddedModule {
            name,
            ptx,
            loaded: Mutex::new(Vec::new()),
        }
    }

    /// The module's name (its source file's stem).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The PTX text.
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
        let ptx = CString::new(self.ptx).map_err(|_| Error::InvalidValue {
            what: "embedded PTX",
            value: self.name.to_string(),
            reason: "contains a NUL byte",
        })?;
        let m = load_image(a, ptx.as_bytes_with_nul())?;
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

const CACHED_DEVICES: usize = 16;

struct Slot {
    generation: AtomicU64,
    func: AtomicPtr<sys::CUfunc_st>,
}

/// One of the crate's kernels. Resolves on each device on first launch there; launches go
/// through the typed wrappers in [`crate::kernels`].
pub struct EmbeddedKernel {
    module: &'static EmbeddedModule,
    name: &'static str,
    param_sizes: &'static [usize],
    cache: [Slot; CACHED_DEVICES],
}

impl EmbeddedKernel {
    /// A kernel of an embedded module (used by the generated code).
    #[doc(hidden)]
    pub const fn new(
        module: &'static EmbeddedModule,
        name: &'static str,
        param_sizes: &'static [usize],
    ) -> EmbeddedKernel {
        EmbeddedKernel {
            module,
            name,
            param_sizes,
            cache: [const {
                Slot {
                    generation: AtomicU64::new(0),
                    func: AtomicPtr::new(std::ptr::null_mut()),
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

    /// Launches the kernel with raw parameters (used by the generated wrappers). The memory in
    /// `uses` is checked and its use noted through the crate's one enqueue path.
    ///
    /// # Safety
    /// 1. `params` has one pointer per kernel parameter, each to a value of that parameter's
    ///    size and type;
    /// 2. every device address among them refers to memory the kernel may access for the whole
    ///    time it runs (memory named in `uses` is kept so), within the bounds the kernel
    ///    respects.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        uses: &[Use<'_>],
        params: &mut [*mut c_void],
    ) -> Result<()> {
        record((|| {
            let lane = stream.lane_for_submit("cudaLaunchKernel")?;
            launch::validate(config, &lane.a.dev.launch_limits()?)?;
            let f = self.resolve(&lane.a)?;
            lane.submit("kernel launch", uses, |a, raw| {
                // SAFETY: the caller guarantees the parameters (1, 2); the configuration was
                // validated; the stream is live in the current context; the memory in `uses`
                // was checked by `submit`.
                unsafe { raw_launch(a, f, raw, config, params, false) }
            })
        })())
    }
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
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let raw = self.raw;
        context::release(
            self.device,
            self.generation,
            "unloading a module",
            move |a| {
                // SAFETY: the module is live in this context and nothing references it any more
                // (functions and symbols hold the module).
                a.check(unsafe { sys::cuModuleUnload(raw.get()) }, "cuModuleUnload")
            },
        );
    }
}

/// A module loaded from user PTX, cubin or fatbin on the current device (`cuModuleLoadData`;
/// libcudart's `cudaLibraryLoadData` for a single device). Unloaded when the module and every
/// function and symbol taken from it are dropped.
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
    /// # Errors
    /// [`Error::ModuleLoad`] with the JIT's log for invalid PTX.
    pub fn from_ptx(ptx: &str) -> Result<Module> {
        record((|| {
            let c = CString::new(ptx).map_err(|_| Error::InvalidValue {
                what: "PTX",
                value: format!("{} bytes", ptx.len()),
                reason: "contains a NUL byte",
            })?;
            Module::load(c.as_bytes_with_nul(), ptx)
        })())
    }

    /// Loads a module image: PTX (NUL-terminated), cubin or fatbin bytes.
    pub fn from_image(image: &[u8]) -> Result<Module> {
        record((|| {
            // PTX must end in a NUL for the driver; cubins and fatbins carry their own length.
            let is_elf = image.first() == Some(&0x7f);
            let is_fatbin = image.starts_with(&[0x50, 0xed, 0x55, 0xba]);
            if is_elf || is_fatbin {
                return Module::load(image, "");
            }
            // PTX text: NUL-terminate it for the driver.
            let text =
                std::str::from_utf8(image.strip_suffix(&[0]).unwrap_or(image)).map_err(|_| {
                    Error::InvalidValue {
                        what: "module image",
                        value: format!("{} bytes", image.len()),
                        reason: "neither a cubin, a fatbin, nor UTF-8 PTX text",
                    }
                })?;
            Module::from_ptx(text)
        })())
    }

    /// Loads a module from a file of PTX, cubin or fatbin.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Module> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::InvalidValue {
            what: "module file",
            value: path.display().to_string(),
            reason: io_reason(&e),
        });
        Module::from_image(&record(bytes)?)
    }

    fn load(image: &[u8], ptx: &str) -> Result<Module> {
        let a = context::enter_current()?;
        let raw = load_image(&a, image)?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw: Raw(raw),
                device: a.dev.ordinal,
                generation: a.generation(),
                ptx_entries: crate::kernel_sig::parse_ptx_entries(ptx).unwrap_or_default(),
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
            Function::new(&a, f, name, Some(self.inner.clone()), known)
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

    pub(crate) fn keep_alive(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        self.inner.clone()
    }
}

fn io_reason(e: &std::io::Error) -> &'static str {
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
    _module: Option<Arc<ModuleInner>>,
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

/// One kernel argument for [`Function::launch`]: a reference to a value of the parameter's
/// type, checked by size against the kernel's parameter list, or device memory passed by its
/// address, whose use by the kernel the crate notes (its drop, CPU views and other queues then
/// wait for the kernel, as for the crate's own kernels).
#[derive(Clone, Copy)]
pub struct KernelArg<'a> {
    ptr: *const c_void,
    size: usize,
    used: Option<Use<'a>>,
    _borrow: PhantomData<&'a ()>,
}

impl std::fmt::Debug for KernelArg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelArg")
            .field("size", &self.size)
            .field("memory", &self.used.map(|u| (u.alloc.ptr, u.write)))
            .finish()
    }
}

impl<'a> KernelArg<'a> {
    /// An argument passed by value: `value` is copied into the kernel's parameter buffer at
    /// launch. Pass device memory with [`read`](Self::read) / [`write`](Self::write) instead,
    /// so that its use is noted.
    pub fn new<T: Copy>(value: &'a T) -> KernelArg<'a> {
        KernelArg {
            ptr: (value as *const T).cast(),
            size: std::mem::size_of::<T>(),
            used: None,
            _borrow: PhantomData,
        }
    }

    /// Device memory the kernel reads, passed as its address (a `const T*` parameter). The
    /// launch checks that the memory may be used on the stream and notes the use.
    pub fn read<T: DeviceRepr>(memory: &'a (impl DeviceRead<T> + ?Sized)) -> KernelArg<'a> {
        KernelArg {
            ptr: (memory.ptr_ref() as *const u64).cast(),
            size: std::mem::size_of::<u64>(),
            used: Some(Use::device(memory.allocation(), false)),
            _borrow: PhantomData,
        }
    }

    /// Device memory the kernel may write, passed as its address (a `T*` parameter).
    pub fn write<T: DeviceRepr>(memory: &'a mut (impl DeviceWrite<T> + ?Sized)) -> KernelArg<'a> {
        let memory: &'a _ = memory;
        KernelArg {
            ptr: (memory.ptr_ref() as *const u64).cast(),
            size: std::mem::size_of::<u64>(),
            used: Some(Use::device(memory.allocation(), true)),
            _borrow: PhantomData,
        }
    }
}

impl Function {
    /// A function handle. `known` is the parameter list from the PTX, when there is one: the
    /// driver is then asked about exactly those parameters. Without it (cubins) the list is
    /// found by asking until the driver reports an invalid index (driver 580 has no
    /// `cuFuncGetParamCount`), which API-error checkers will see.
    fn new(
        a: &Active,
        f: sys::CUfunction,
        name: &str,
        module: Option<Arc<ModuleInner>>,
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
            params: params.into(),
            _module: module,
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
            Ok(FunctionAttributes {
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
            })
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
        let mut n = 0i32;
        // SAFETY: live function; valid out-parameter; flags 0 (default).
        a.check(
            unsafe {
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                    &mut n,
                    self.raw.0,
                    block_size as i32,
                    dynamic_smem,
                    0,
                )
            },
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )?;
        Ok(n.max(0) as u32)
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
        record((|| {
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
            let (best_blocks, best_size) =
                best_block_size(limit, warp, |b| self.occupancy(&a, b, dynamic_smem(b)))?;
            Ok((best_blocks * sms, best_size))
        })())
    }

    /// Dynamic shared memory available per block when `num_blocks` blocks of `block_size`
    /// threads share a multiprocessor (`cudaOccupancyAvailableDynamicSMemPerBlock`).
    #[doc(alias = "cudaOccupancyAvailableDynamicSMemPerBlock")]
    pub fn available_dynamic_shared_memory_per_block(
        &self,
        num_blocks: u32,
        block_size: u32,
    ) -> Result<usize> {
        record((|| {
            let a = self.enter()?;
            let mut bytes = 0usize;
            // SAFETY: live function; valid out-parameter.
            a.check(
                unsafe {
                    sys::cuOccupancyAvailableDynamicSMemPerBlock(
                        &mut bytes,
                        self.raw.0,
                        num_blocks as i32,
                        block_size as i32,
                    )
                },
                "cuOccupancyAvailableDynamicSMemPerBlock",
            )?;
            Ok(bytes)
        })())
    }

    fn check_args(&self, args: &[KernelArg<'_>]) -> Result<()> {
        if args.len() != self.params.len() {
            return Err(Error::KernelArguments {
                kernel: self.name.to_string(),
                detail: format!(
                    "{} arguments given, but the kernel has {} parameters",
                    args.len(),
                    self.params.len()
                ),
            });
        }
        for (i, (arg, p)) in args.iter().zip(self.params.iter()).enumerate() {
            if arg.size != p.size {
                return Err(Error::KernelArguments {
                    kernel: self.name.to_string(),
                    detail: format!(
                        "argument {i} is {} bytes, but parameter {i} is {} bytes",
                        arg.size, p.size
                    ),
                });
            }
        }
        Ok(())
    }

    fn launch_inner(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
        cooperative: bool,
    ) -> Result<()> {
        self.check_args(args)?;
        let call = if cooperative {
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
        launch::validate(config, &a.dev.launch_limits()?)?;
        if cooperative {
            self.check_cooperative(a, config)?;
        }
        // Up to 32 arguments live on the stack; more are rare enough to allocate.
        let mut stack = [std::ptr::null_mut::<c_void>(); 32];
        let mut heap = Vec::new();
        let ptrs: &mut [*mut c_void] = if args.len() <= stack.len() {
            for (slot, arg) in stack.iter_mut().zip(args) {
                *slot = arg.ptr as *mut c_void;
            }
            &mut stack[..args.len()]
        } else {
            heap.extend(args.iter().map(|a| a.ptr as *mut c_void));
            &mut heap
        };
        let uses: Vec<Use<'_>> = args.iter().filter_map(|a| a.used).collect();
        let f = self.raw.0;
        lane.submit(call, &uses, |a, raw| {
            // SAFETY: the argument count and sizes match the kernel's parameters (checked
            // above); what the values mean to the kernel is the caller's promise (see
            // `launch`).
            unsafe { raw_launch(a, f, raw, config, ptrs, cooperative) }
        })
    }

    fn check_cooperative(&self, a: &Active, c: &LaunchConfig) -> Result<()> {
        let per_sm = self.occupancy(a, c.block.volume() as u32, c.shared_mem_bytes as usize)?;
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

    /// Launches the kernel on `stream` (`cudaLaunchKernel`). Does not block the host.
    ///
    /// The argument count and each argument's size are checked against the kernel's parameter
    /// list first, and the configuration against the device's limits; a mismatch is an error,
    /// not a launch.
    ///
    /// # Safety
    /// The crate cannot know what the kernel does with its arguments:
    /// 1. each argument must have the type the kernel's parameter has, not just its size;
    /// 2. every device pointer passed must stay allocated, and not be written by anything else,
    ///    until the kernel has finished (e.g. synchronise `stream` before dropping a buffer
    ///    whose address was passed), and the kernel must stay within its bounds.
    #[doc(alias = "cudaLaunchKernel")]
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        record(self.launch_inner(stream, config, args, false))
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
    pub unsafe fn launch_cooperative(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        record(self.launch_inner(stream, config, args, true))
    }
}

/// The block size (a multiple of `warp`, at most `limit`) maximising resident threads per
/// multiprocessor, with its block count: the search libcudart's
/// `cudaOccupancyMaxPotentialBlockSizeVariableSMem` does. Ties keep the larger block.
pub(crate) fn best_block_size(
    limit: u32,
    warp: u32,
    mut blocks_for: impl FnMut(u32) -> Result<u32>,
) -> Result<(u32, u32)> {
    let mut best = (0u32, 0u32, 0u64); // blocks, size, threads
    let top = if limit % warp == 0 {
        limit
    } else {
        (limit / warp + 1) * warp
    };
    let mut size = top;
    while size > 0 {
        let b = size.min(limit);
        let blocks = blocks_for(b)?;
        let threads = blocks as u64 * b as u64;
        if threads > best.2 {
            best = (blocks, b, threads);
        }
        if best.2 == 0 && size <= warp {
            break;
        }
        size = size.saturating_sub(warp);
    }
    Ok((best.0, best.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_size_search_maximises_resident_threads() {
        // A multiprocessor of 2048 threads, 32 blocks, and a kernel whose dynamic shared
        // memory grows with the block: 64 KiB per SM, 64 bytes per thread.
        let occ = |b: u32| -> Result<u32> {
            let by_threads = 2048 / b;
            let by_smem = (65536 / (64 * b as usize)) as u32;
            Ok(by_threads.min(by_smem).min(32))
        };
        let (blocks, size) = best_block_size(1024, 32, occ).unwrap();
        // 1024 threads of shared memory fit: 64 KiB / 64 B; every size dividing it ties, the
        // largest wins.
        assert_eq!((blocks, size), (1, 1024));
        let occ2 = |b: u32| -> Result<u32> { Ok((1536 / b).min(16)) };
        let (blocks, size) = best_block_size(1024, 32, occ2).unwrap();
        assert_eq!(blocks as u64 * size as u64, 1536);
        assert_eq!((blocks, size), (2, 768));
        let (blocks, size) = best_block_size(100, 32, occ2).unwrap();
        assert!(size <= 100);
        assert_eq!(blocks * size, 1536 / 96 * 96);
    }
}
