//! The hidden registration and launch ABI that nvcc's generated host code calls, and the launch
//! and symbol calls built on it.
//!
//! Before `main`, each translation unit registers its fatbin (`__cudaRegisterFatBinary`), its
//! kernels' host stubs with their device names, and its variables. Nothing touches the driver
//! then: a fatbin is loaded as a context-independent library (`cuLibraryLoadData`, given the
//! wrapper nvcc emits, as it is) when a kernel or variable of it is first used. `<<<>>>` pushes a
//! launch configuration on a per-thread stack; the launch stub pops it, asks `__cudaGetKernel`
//! for the kernel (the call site caches the answer forever: it never changes) and launches it.
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::OnceLock;

use cuda_runtime::abi::{sys, Entered};
use cuda_runtime::{Error, ErrorCode, LaunchConfig};
use parking_lot::{Mutex, RwLock};

use crate::{code, cudaError_t, cudaStream_t, dim3, dptr, export, fail, out, stream_of};

/// One registered fatbin: the wrapper nvcc emitted, and the library loaded from it on first use.
struct Fatbin {
    wrapper: usize,
    library: Mutex<Option<usize>>,
}

struct Func {
    fatbin: &'static Fatbin,
    name: CString,
    kernel: OnceLock<usize>,
}

struct Var {
    fatbin: &'static Fatbin,
    name: CString,
    size: usize,
}

struct Managed {
    fatbin: &'static Fatbin,
    slot: usize,
    name: CString,
}

/// Host stub address -> kernel.
static FUNCS: RwLock<Option<HashMap<usize, &'static Func>>> = RwLock::new(None);
/// Host shadow address -> variable.
static VARS: RwLock<Option<HashMap<usize, &'static Var>>> = RwLock::new(None);
static MANAGED: Mutex<Vec<Managed>> = Mutex::new(Vec::new());
/// Kernel handles handed out by `__cudaGetKernel` (launchable as `cudaKernel_t`).
pub(crate) static KERNELS: RwLock<Option<HashMap<usize, ()>>> = RwLock::new(None);

fn c_string(p: *const c_char) -> CString {
    if p.is_null() {
        return CString::default();
    }
    // SAFETY: nvcc passes NUL-terminated names that live for the program.
    unsafe { CStr::from_ptr(p) }.to_owned()
}

/// The fatbin a handle stands for.
fn fatbin(handle: *mut *mut c_void) -> Option<&'static Fatbin> {
    // SAFETY: handles are only ever made by `__cudaRegisterFatBinary` (leaked, never freed).
    unsafe { (handle as *const Fatbin).as_ref() }
}

/// `__cudaRegisterFatBinary`: a handle for the fatbin wrapper; no driver work.
#[no_mangle]
pub extern "C" fn __cudaRegisterFatBinary(fatCubin: *mut c_void) -> *mut *mut c_void {
    let f: &'static Fatbin = Box::leak(Box::new(Fatbin {
        wrapper: fatCubin as usize,
        library: Mutex::new(None),
    }));
    f as *const Fatbin as *mut *mut c_void
}
crate::symver!(__cudaRegisterFatBinary);

/// `__cudaRegisterFatBinaryEnd`: nothing more to do.
#[no_mangle]
pub extern "C" fn __cudaRegisterFatBinaryEnd(_fatCubinHandle: *mut *mut c_void) {}
crate::symver!(__cudaRegisterFatBinaryEnd);

/// `__cudaUnregisterFatBinary` (at exit or `dlclose`): forgets the fatbin's kernels and
/// variables and unloads its library.
#[no_mangle]
pub extern "C" fn __cudaUnregisterFatBinary(fatCubinHandle: *mut *mut c_void) {
    let Some(f) = fatbin(fatCubinHandle) else {
        return;
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(m) = FUNCS.write().as_mut() {
            m.retain(|_, v| !std::ptr::eq(v.fatbin, f));
        }
        if let Some(m) = VARS.write().as_mut() {
            m.retain(|_, v| !std::ptr::eq(v.fatbin, f));
        }
        MANAGED.lock().retain(|v| !std::ptr::eq(v.fatbin, f));
        if let Some(lib) = f.library.lock().take() {
            // SAFETY: a library this fatbin loaded; nothing of it is used any more.
            let _ = unsafe { sys::cuLibraryUnload(lib as sys::CUlibrary) };
        }
    }));
}
crate::symver!(__cudaUnregisterFatBinary);

/// `__cudaRegisterFunction`: a kernel's host stub and device name.
#[no_mangle]
pub extern "C" fn __cudaRegisterFunction(
    fatCubinHandle: *mut *mut c_void,
    hostFun: *const c_char,
    _deviceFun: *mut c_char,
    deviceName: *const c_char,
    _thread_limit: i32,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _bDim: *mut dim3,
    _gDim: *mut dim3,
    _wSize: *mut i32,
) {
    let Some(f) = fatbin(fatCubinHandle) else {
        return;
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let func: &'static Func = Box::leak(Box::new(Func {
            fatbin: f,
            name: c_string(deviceName),
            kernel: OnceLock::new(),
        }));
        FUNCS
            .write()
            .get_or_insert_with(HashMap::new)
            .insert(hostFun as usize, func);
    }));
}
crate::symver!(__cudaRegisterFunction);

/// `__cudaRegisterVar`: a `__device__` or `__constant__` variable's host shadow and name.
#[no_mangle]
pub extern "C" fn __cudaRegisterVar(
    fatCubinHandle: *mut *mut c_void,
    hostVar: *mut c_char,
    _deviceAddress: *mut c_char,
    deviceName: *const c_char,
    _ext: i32,
    size: usize,
    _constant: i32,
    _global: i32,
) {
    let Some(f) = fatbin(fatCubinHandle) else {
        return;
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let var: &'static Var = Box::leak(Box::new(Var {
            fatbin: f,
            name: c_string(deviceName),
            size,
        }));
        VARS.write()
            .get_or_insert_with(HashMap::new)
            .insert(hostVar as usize, var);
    }));
}
crate::symver!(__cudaRegisterVar);

/// `__cudaRegisterManagedVar`: a `__managed__` variable; its host pointer slot is filled by
/// `__cudaInitModule`.
#[no_mangle]
pub extern "C" fn __cudaRegisterManagedVar(
    fatCubinHandle: *mut *mut c_void,
    hostVarPtrAddress: *mut *mut c_void,
    _deviceAddress: *mut c_char,
    deviceName: *const c_char,
    _ext: i32,
    _size: usize,
    _constant: i32,
    _global: i32,
) {
    let Some(f) = fatbin(fatCubinHandle) else {
        return;
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        MANAGED.lock().push(Managed {
            fatbin: f,
            slot: hostVarPtrAddress as usize,
            name: c_string(deviceName),
        });
    }));
}
crate::symver!(__cudaRegisterManagedVar);

/// `__cudaRegisterHostVar`: not emitted by nvcc 13.0; recorded as unsupported.
#[no_mangle]
pub extern "C" fn __cudaRegisterHostVar(
    _fatCubinHandle: *mut *mut c_void,
    _deviceName: *const c_char,
    _hostVar: *mut c_char,
    _size: usize,
) {
    let _ = code(Err(fail(ErrorCode::NotSupported, "__cudaRegisterHostVar")));
}
crate::symver!(__cudaRegisterHostVar);

/// The fatbin's library, loaded on first use (in no context: libraries are context-independent).
fn library(f: &Fatbin) -> Result<sys::CUlibrary, Error> {
    let a = Entered::current()?;
    let mut l = f.library.lock();
    if let Some(lib) = *l {
        return Ok(lib as sys::CUlibrary);
    }
    let mut lib: sys::CUlibrary = std::ptr::null_mut();
    // Relaxed: the first launch may come inside a capture, the program's own or another
    // thread's (NVIDIA's library loads its modules lazily too, without breaking captures).
    // SAFETY: the wrapper nvcc emitted for this fatbin, alive for the program; the driver takes
    // it as it is (measured on driver 580). No options.
    let r = cuda_runtime::abi::relaxed(|| unsafe {
        sys::cuLibraryLoadData(
            &mut lib,
            f.wrapper as *const c_void,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    });
    a.check(r, "cuLibraryLoadData")?;
    *l = Some(lib as usize);
    Ok(lib)
}

/// `__cudaInitModule`: loads the fatbin and points its `__managed__` variables' host slots at
/// their memory. 1 on success.
#[no_mangle]
pub extern "C" fn __cudaInitModule(fatCubinHandle: *mut *mut c_void) -> c_char {
    let Some(f) = fatbin(fatCubinHandle) else {
        return 0;
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<(), Error> {
        let lib = library(f)?;
        let a = Entered::current()?;
        for m in MANAGED.lock().iter().filter(|m| std::ptr::eq(m.fatbin, f)) {
            let (mut d, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
            // SAFETY: valid out-parameters; a library this fatbin loaded.
            let r = unsafe { sys::cuLibraryGetManaged(&mut d, &mut bytes, lib, m.name.as_ptr()) };
            a.check(r, "cuLibraryGetManaged")?;
            // SAFETY: the host pointer slot nvcc registered for this variable.
            unsafe { *(m.slot as *mut *mut c_void) = d as usize as *mut c_void };
        }
        Ok(())
    }));
    match r {
        Ok(r) => (code(r) == 0) as c_char,
        Err(_) => 0,
    }
}
crate::symver!(__cudaInitModule);

thread_local! {
    /// Launch configurations pushed by `<<<>>>` and not popped yet: a stack, since an argument
    /// of a launch may itself launch a kernel.
    static CONFIGS: RefCell<Vec<(dim3, dim3, usize, cudaStream_t)>> = const { RefCell::new(Vec::new()) };
}

/// `__cudaPushCallConfiguration` (0: pushed).
#[no_mangle]
pub extern "C" fn __cudaPushCallConfiguration(
    gridDim: dim3,
    blockDim: dim3,
    sharedMem: usize,
    stream: cudaStream_t,
) -> u32 {
    let pushed = CONFIGS.try_with(|c| {
        c.borrow_mut().push((gridDim, blockDim, sharedMem, stream));
    });
    u32::from(pushed.is_err())
}
crate::symver!(__cudaPushCallConfiguration);

export! {
    /// `__cudaPopCallConfiguration`.
    fn __cudaPopCallConfiguration(gridDim: *mut dim3, blockDim: *mut dim3, sharedMem: *mut usize, stream: *mut c_void) -> cudaError_t {
        let top = CONFIGS.try_with(|c| c.borrow_mut().pop()).ok().flatten();
        let Some((g, b, s, st)) = top else {
            return code(Err(fail(ErrorCode::MissingConfiguration, "__cudaPopCallConfiguration")));
        };
        code((|| {
            *out(gridDim, "__cudaPopCallConfiguration")? = g;
            *out(blockDim, "__cudaPopCallConfiguration")? = b;
            *out(sharedMem, "__cudaPopCallConfiguration")? = s;
            *out(stream as *mut cudaStream_t, "__cudaPopCallConfiguration")? = st;
            Ok(())
        })())
    }
}

/// The kernel of a registered host stub (loading its fatbin on first use).
fn kernel_of(host_fun: *const c_void) -> Result<sys::CUkernel, Error> {
    let func = FUNCS
        .read()
        .as_ref()
        .and_then(|m| m.get(&(host_fun as usize)).copied())
        .ok_or_else(|| fail(ErrorCode::InvalidDeviceFunction, "cudaGetKernel"))?;
    if let Some(k) = func.kernel.get() {
        return Ok(*k as sys::CUkernel);
    }
    let lib = library(func.fatbin)?;
    let a = Entered::current()?;
    let mut k: sys::CUkernel = std::ptr::null_mut();
    // SAFETY: valid out-parameter; the library of the stub's fatbin; a NUL-terminated name.
    let r = unsafe { sys::cuLibraryGetKernel(&mut k, lib, func.name.as_ptr()) };
    a.check(r, "cuLibraryGetKernel")?;
    let k = *func.kernel.get_or_init(|| k as usize);
    KERNELS
        .write()
        .get_or_insert_with(HashMap::new)
        .insert(k, ());
    Ok(k as sys::CUkernel)
}

export! {
    /// `__cudaGetKernel`: the kernel handle of a host stub (the same for the program's life).
    fn __cudaGetKernel(kernel: *mut sys::CUkernel, hostFun: *const c_void) -> cudaError_t {
        code((|| {
            let k = out(kernel, "__cudaGetKernel")?;
            *k = kernel_of(hostFun)?;
            Ok(())
        })())
    }
}

/// Launches a kernel handle in the current device's context.
fn launch(
    k: sys::CUkernel,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    code((|| {
        let a = Entered::current()?;
        let shared_mem_bytes = u32::try_from(shared)
            .map_err(|_| fail(ErrorCode::InvalidConfiguration, "cudaLaunchKernel"))?;
        let config = LaunchConfig {
            grid: (grid.x, grid.y, grid.z).into(),
            block: (block.x, block.y, block.z).into(),
            shared_mem_bytes,
        };
        a.validate_launch(&config)?;
        // SAFETY: a kernel handle of a loaded library (a `CUkernel` is launchable where a
        // `CUfunction` is expected, in the current context); `args` points at one pointer per
        // kernel parameter, as the C caller's launch stub laid out.
        let r = unsafe {
            sys::cuLaunchKernel(
                k as sys::CUfunction,
                grid.x,
                grid.y,
                grid.z,
                block.x,
                block.y,
                block.z,
                shared_mem_bytes,
                stream_of(s, pt),
                args,
                std::ptr::null_mut(),
            )
        };
        a.check(r, "cuLaunchKernel")
    })())
}

export! {
    /// `__cudaLaunchKernel`: the launch stub's launch.
    fn __cudaLaunchKernel(kernel: sys::CUkernel, gridDim: dim3, blockDim: dim3, args: *mut *mut c_void, sharedMem: usize, stream: cudaStream_t) -> cudaError_t {
        launch(kernel, gridDim, blockDim, args, sharedMem, stream, false)
    }
}

export! {
    /// `__cudaLaunchKernel` with stream 0 as the per-thread stream.
    fn __cudaLaunchKernel_ptsz(kernel: sys::CUkernel, gridDim: dim3, blockDim: dim3, args: *mut *mut c_void, sharedMem: usize, stream: cudaStream_t) -> cudaError_t {
        launch(kernel, gridDim, blockDim, args, sharedMem, stream, true)
    }
}

/// A host stub, or a kernel handle this library handed out.
pub(crate) fn kernel_of_func(func: *const c_void) -> Result<sys::CUkernel, Error> {
    let known = KERNELS
        .read()
        .as_ref()
        .is_some_and(|m| m.contains_key(&(func as usize)));
    if known {
        return Ok(func as sys::CUkernel);
    }
    kernel_of(func)
}

fn launch_func(
    func: *const c_void,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    match kernel_of_func(func) {
        Ok(k) => launch(k, grid, block, args, shared, s, pt),
        // Neither a registered stub nor a kernel handle: libcudart takes it for a
        // `cudaKernel_t` and answers invalid resource handle (seen on the GPU).
        Err(e) if e.code() == ErrorCode::InvalidDeviceFunction => code(Err(fail(
            ErrorCode::InvalidResourceHandle,
            "cudaLaunchKernel",
        ))),
        Err(e) => code(Err(e)),
    }
}

export! {
    /// `cudaLaunchKernel`: a host stub or a `cudaKernel_t`.
    fn cudaLaunchKernel(func: *const c_void, gridDim: dim3, blockDim: dim3, args: *mut *mut c_void, sharedMem: usize, stream: cudaStream_t) -> cudaError_t {
        launch_func(func, gridDim, blockDim, args, sharedMem, stream, false)
    }
}

export! {
    /// `cudaLaunchKernel` with stream 0 as the per-thread stream.
    fn cudaLaunchKernel_ptsz(func: *const c_void, gridDim: dim3, blockDim: dim3, args: *mut *mut c_void, sharedMem: usize, stream: cudaStream_t) -> cudaError_t {
        launch_func(func, gridDim, blockDim, args, sharedMem, stream, true)
    }
}

/// A registered variable's device address and size.
fn symbol(host_var: *const c_void) -> Result<(sys::CUdeviceptr, usize), Error> {
    let var = VARS
        .read()
        .as_ref()
        .and_then(|m| m.get(&(host_var as usize)).copied())
        .ok_or_else(|| fail(ErrorCode::InvalidSymbol, "cudaGetSymbolAddress"))?;
    let lib = library(var.fatbin)?;
    let a = Entered::current()?;
    let (mut d, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: valid out-parameters; the library of the variable's fatbin.
    let r = unsafe { sys::cuLibraryGetGlobal(&mut d, &mut bytes, lib, var.name.as_ptr()) };
    a.check(r, "cuLibraryGetGlobal")?;
    let _ = var.size;
    Ok((d, bytes))
}

export! {
    /// `cudaGetSymbolAddress`.
    fn cudaGetSymbolAddress(devPtr: *mut *mut c_void, symbol_: *const c_void) -> cudaError_t {
        code((|| {
            let p = out(devPtr, "cudaGetSymbolAddress")?;
            *p = symbol(symbol_)?.0 as usize as *mut c_void;
            Ok(())
        })())
    }
}

export! {
    /// `cudaGetSymbolSize`.
    fn cudaGetSymbolSize(size: *mut usize, symbol_: *const c_void) -> cudaError_t {
        code((|| {
            let p = out(size, "cudaGetSymbolSize")?;
            *p = symbol(symbol_)?.1;
            Ok(())
        })())
    }
}

/// The device address of `count` bytes at `offset` in a symbol, checked against its size.
pub(crate) fn symbol_range(
    sym: *const c_void,
    count: usize,
    offset: usize,
    call: &'static str,
) -> Result<sys::CUdeviceptr, Error> {
    let (d, bytes) = symbol(sym)?;
    match offset.checked_add(count) {
        Some(end) if end <= bytes => Ok(d + offset as sys::CUdeviceptr),
        _ => Err(fail(ErrorCode::InvalidValue, call)),
    }
}

fn symbol_copy(
    to_symbol: bool,
    sym: *const c_void,
    host: *mut c_void,
    count: usize,
    offset: usize,
    kind: i32,
    stream: Option<(cudaStream_t, bool)>,
) -> cudaError_t {
    let call = if to_symbol {
        "cudaMemcpyToSymbol"
    } else {
        "cudaMemcpyFromSymbol"
    };
    if !(0..=4).contains(&kind) {
        return code(Err(fail(ErrorCode::InvalidMemcpyDirection, call)));
    }
    code((|| {
        let d = symbol_range(sym, count, offset, call)?;
        if count == 0 {
            return Ok(());
        }
        let a = Entered::current()?;
        let (dst, src) = if to_symbol {
            (d, dptr(host))
        } else {
            (dptr(host), d)
        };
        // SAFETY: `count` bytes inside the symbol (checked) and the caller's memory.
        let r = unsafe {
            match stream {
                None => sys::cuMemcpy(dst, src, count),
                Some((s, pt)) => sys::cuMemcpyAsync(dst, src, count, stream_of(s, pt)),
            }
        };
        a.check(
            r,
            if stream.is_some() {
                "cuMemcpyAsync"
            } else {
                "cuMemcpy"
            },
        )
    })())
}

export! {
    /// `cudaMemcpyToSymbol` (bytes at `offset`, checked against the symbol's size).
    fn cudaMemcpyToSymbol(symbol_: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        symbol_copy(true, symbol_, src as *mut c_void, count, offset, kind, None)
    }
}

export! {
    /// `cudaMemcpyFromSymbol`.
    fn cudaMemcpyFromSymbol(dst: *mut c_void, symbol_: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        symbol_copy(false, symbol_, dst, count, offset, kind, None)
    }
}

export! {
    /// `cudaMemcpyToSymbolAsync`.
    fn cudaMemcpyToSymbolAsync(symbol_: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        symbol_copy(true, symbol_, src as *mut c_void, count, offset, kind, Some((stream, false)))
    }
}

export! {
    /// `cudaMemcpyFromSymbolAsync`.
    fn cudaMemcpyFromSymbolAsync(dst: *mut c_void, symbol_: *const c_void, count: usize, offset: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        symbol_copy(false, symbol_, dst, count, offset, kind, Some((stream, false)))
    }
}

/// `cudaLaunchConfig_t` (56 bytes). Its attributes have the driver's layout and numbering and
/// are passed through to the driver as they are.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaLaunchConfig_t {
    /// Grid.
    pub gridDim: dim3,
    /// Block.
    pub blockDim: dim3,
    /// Dynamic shared memory, bytes.
    pub dynamicSmemBytes: usize,
    /// Stream.
    pub stream: cudaStream_t,
    /// Launch attributes (`cudaLaunchAttribute`, the driver's `CUlaunchAttribute`).
    pub attrs: *mut c_void,
    /// Number of attributes.
    pub numAttrs: u32,
}

/// The kernel's function in the current context (for the driver's launch calls that take one).
pub(crate) fn function_of(a: &Entered, func: *const c_void) -> Result<sys::CUfunction, Error> {
    let k = kernel_of_func(func)?;
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-parameter; a kernel of a loaded library; context current.
    a.check(
        unsafe { sys::cuKernelGetFunction(&mut f, k) },
        "cuKernelGetFunction",
    )?;
    Ok(f)
}

fn launch_ex(
    config: *const cudaLaunchConfig_t,
    func: *const c_void,
    args: *mut *mut c_void,
    pt: bool,
) -> cudaError_t {
    code((|| {
        // SAFETY: a readable configuration or null (refused).
        let c = unsafe { config.as_ref() }
            .ok_or_else(|| fail(ErrorCode::InvalidValue, "cudaLaunchKernelExC"))?;
        if c.numAttrs > 0 && c.attrs.is_null() {
            return Err(fail(ErrorCode::InvalidValue, "cudaLaunchKernelExC"));
        }
        let a = Entered::current()?;
        let shared = u32::try_from(c.dynamicSmemBytes)
            .map_err(|_| fail(ErrorCode::InvalidConfiguration, "cudaLaunchKernelExC"))?;
        a.validate_launch(&LaunchConfig {
            grid: (c.gridDim.x, c.gridDim.y, c.gridDim.z).into(),
            block: (c.blockDim.x, c.blockDim.y, c.blockDim.z).into(),
            shared_mem_bytes: shared,
        })?;
        let f = function_of(&a, func)?;
        let cfg = sys::CUlaunchConfig {
            gridDimX: c.gridDim.x,
            gridDimY: c.gridDim.y,
            gridDimZ: c.gridDim.z,
            blockDimX: c.blockDim.x,
            blockDimY: c.blockDim.y,
            blockDimZ: c.blockDim.z,
            sharedMemBytes: shared,
            hStream: stream_of(c.stream, pt),
            attrs: c.attrs.cast(),
            numAttrs: c.numAttrs,
        };
        // SAFETY: a valid configuration whose attributes the caller laid out as the driver's;
        // one pointer per kernel parameter in `args`.
        a.check(
            unsafe { sys::cuLaunchKernelEx(&cfg, f, args, std::ptr::null_mut()) },
            "cuLaunchKernelEx",
        )
    })())
}

export! {
    /// `cudaLaunchKernelExC`: a launch with attributes (clusters, priority, ...).
    fn cudaLaunchKernelExC(config: *const cudaLaunchConfig_t, func: *const c_void, args: *mut *mut c_void) -> cudaError_t {
        launch_ex(config, func, args, false)
    }
}

export! {
    /// `cudaLaunchKernelExC` with stream 0 as the per-thread stream.
    fn cudaLaunchKernelExC_ptsz(config: *const cudaLaunchConfig_t, func: *const c_void, args: *mut *mut c_void) -> cudaError_t {
        launch_ex(config, func, args, true)
    }
}

fn cooperative(
    func: *const c_void,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
    s: cudaStream_t,
    pt: bool,
) -> cudaError_t {
    code((|| {
        let a = Entered::current()?;
        let shared = u32::try_from(shared).map_err(|_| {
            fail(
                ErrorCode::InvalidConfiguration,
                "cudaLaunchCooperativeKernel",
            )
        })?;
        a.validate_launch(&LaunchConfig {
            grid: (grid.x, grid.y, grid.z).into(),
            block: (block.x, block.y, block.z).into(),
            shared_mem_bytes: shared,
        })?;
        let f = function_of(&a, func)?;
        // SAFETY: the kernel's function in the current context; one pointer per parameter.
        a.check(
            unsafe {
                sys::cuLaunchCooperativeKernel(
                    f,
                    grid.x,
                    grid.y,
                    grid.z,
                    block.x,
                    block.y,
                    block.z,
                    shared,
                    stream_of(s, pt),
                    args,
                )
            },
            "cuLaunchCooperativeKernel",
        )
    })())
}

export! {
    /// `cudaLaunchCooperativeKernel`.
    fn cudaLaunchCooperativeKernel(func: *const c_void, gridDim: dim3, blockDim: dim3, args: *mut *mut c_void, sharedMem: usize, stream: cudaStream_t) -> cudaError_t {
        cooperative(func, gridDim, blockDim, args, sharedMem, stream, false)
    }
}

export! {
    /// `cudaLaunchCooperativeKernel` with stream 0 as the per-thread stream.
    fn cudaLaunchCooperativeKernel_ptsz(func: *const c_void, gridDim: dim3, blockDim: dim3, args: *mut *mut c_void, sharedMem: usize, stream: cudaStream_t) -> cudaError_t {
        cooperative(func, gridDim, blockDim, args, sharedMem, stream, true)
    }
}

#[cfg(test)]
mod layout {
    #[test]
    fn launch_config_is_the_headers() {
        assert_eq!(std::mem::size_of::<super::cudaLaunchConfig_t>(), 56);
    }
}

export! {
    /// `cudaMemcpyToSymbol` on the per-thread default stream.
    fn cudaMemcpyToSymbol_ptds(symbol_: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        crate::memory::then_sync_per_thread(symbol_copy(true, symbol_, src as *mut c_void, count, offset, kind, Some((std::ptr::null_mut(), true))))
    }
}

export! {
    /// `cudaMemcpyFromSymbol` on the per-thread default stream.
    fn cudaMemcpyFromSymbol_ptds(dst: *mut c_void, symbol_: *const c_void, count: usize, offset: usize, kind: i32) -> cudaError_t {
        crate::memory::then_sync_per_thread(symbol_copy(false, symbol_, dst, count, offset, kind, Some((std::ptr::null_mut(), true))))
    }
}

export! {
    /// `cudaMemcpyToSymbolAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpyToSymbolAsync_ptsz(symbol_: *const c_void, src: *const c_void, count: usize, offset: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        symbol_copy(true, symbol_, src as *mut c_void, count, offset, kind, Some((stream, true)))
    }
}

export! {
    /// `cudaMemcpyFromSymbolAsync` with stream 0 as the per-thread stream.
    fn cudaMemcpyFromSymbolAsync_ptsz(dst: *mut c_void, symbol_: *const c_void, count: usize, offset: usize, kind: i32, stream: cudaStream_t) -> cudaError_t {
        symbol_copy(false, symbol_, dst, count, offset, kind, Some((stream, true)))
    }
}

/// The host stub registered for a kernel handle, or the handle itself when none was (a
/// `cudaKernel_t` is accepted wherever a stub is): the runtime's `func` of a kernel node.
pub(crate) fn stub_of_kernel(k: sys::CUkernel) -> *mut c_void {
    FUNCS
        .read()
        .as_ref()
        .and_then(|m| {
            m.iter()
                .find(|(_, f)| f.kernel.get() == Some(&(k as usize)))
                .map(|(stub, _)| *stub as *mut c_void)
        })
        .unwrap_or(k.cast())
}
