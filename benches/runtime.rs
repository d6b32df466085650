//! The runtime's hot paths measured three ways in one run: through this crate, through the raw
//! driver call (cudarc's `sys`), and through NVIDIA's libcudart loaded at run time
//! (`CUDA_RUNTIME_LIBCUDART`, default `/usr/local/cuda/lib64/libcudart.so`), all on the same
//! primary context and the same PTX. Criterion measures each; a summary table of medians with the
//! ratios follows.
//!
//! The user-kernel figure launches the example user crate's `saxpy` (`examples/user-kernels`)
//! through the wrapper cuda-runtime-build generated for it, against `cuLaunchKernel` of the same
//! PTX.
//!
//! The extended-launch figures (`cudaLaunchKernelEx`) launch an empty kernel in clusters of two
//! blocks (sm_90 PTX; left out on older devices), and the empty compute_75 kernel with three
//! launch attributes (priority, memory synchronisation domain, access policy window), against
//! `cuLaunchKernelEx` and libcudart's `cudaLaunchKernelExC` (what the C++ `cudaLaunchKernelEx`
//! calls) with the same attributes.
//!
//! The per-thread figure launches the 4-argument kernel (one buffer) in the calling thread's
//! per-thread default stream (`cudaStreamPerThread`, the handle 0x2 for all three). The crate
//! records nothing there either: a thread that needs a fence in another thread's per-thread
//! stream asks the owner, whose next submission there records it (see `queue` in the crate
//! docs); the figure shows what reading that request costs. (Until the tenth session a fence
//! was recorded after every such launch: 1.17x to 1.55x the driver's launch.)
//!
//! `cargo bench` (needs a GPU; without one it prints why and exits).

mod common;

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{ck, die, ok, CudaError};
use criterion::Criterion;
use cuda_runtime::{
    kernels, AccessPolicyWindow, AccessProperty, DeviceBuffer, Event, EventFlags, LaunchConfig,
    LaunchConfigEx, MemSyncDomain, Stream,
};
use cudarc::driver::sys;

/// Fails the bench with a message (no panic backtrace).
/// The raw driver side: its own stream, module, functions and event in the primary context.
struct Raw {
    stream: sys::CUstream,
    empty: sys::CUfunction,
    four: sys::CUfunction,
    /// The example user crate's `saxpy`, from its own PTX.
    saxpy: sys::CUfunction,
    event: sys::CUevent,
    /// `empty90` of the sm_90 test kernels, on a device of compute capability 9.0 or newer.
    empty90: Option<sys::CUfunction>,
}

impl Raw {
    fn new() -> Raw {
        let ptx = CString::new(kernels::params::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
        let mut m: sys::CUmodule = std::ptr::null_mut();
        let (mut empty, mut four): (sys::CUfunction, sys::CUfunction) =
            (std::ptr::null_mut(), std::ptr::null_mut());
        let user_ptx =
            CString::new(user_kernels::saxpy::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
        let (mut um, mut saxpy): (sys::CUmodule, sys::CUfunction) =
            (std::ptr::null_mut(), std::ptr::null_mut());
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let mut event: sys::CUevent = std::ptr::null_mut();
        // SAFETY: the crate has initialised the driver and made its primary context current on
        // this thread; every out-parameter is valid; names are NUL-terminated.
        unsafe {
            ck(
                sys::cuModuleLoadData(&mut m, ptx.as_ptr().cast()),
                "cuModuleLoadData",
            );
            ck(
                sys::cuModuleGetFunction(&mut empty, m, c"empty".as_ptr()),
                "cuModuleGetFunction",
            );
            ck(
                sys::cuModuleGetFunction(&mut four, m, c"four_args".as_ptr()),
                "cuModuleGetFunction",
            );
            ck(
                sys::cuModuleLoadData(&mut um, user_ptx.as_ptr().cast()),
                "cuModuleLoadData",
            );
            ck(
                sys::cuModuleGetFunction(&mut saxpy, um, c"saxpy".as_ptr()),
                "cuModuleGetFunction",
            );
            ck(sys::cuStreamCreate(&mut stream, 0), "cuStreamCreate");
            ck(sys::cuEventCreate(&mut event, 0), "cuEventCreate");
        }
        let empty90 = sm90().then(|| {
            let ptx =
                CString::new(kernels::launch_ex::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
            let (mut m, mut f): (sys::CUmodule, sys::CUfunction) =
                (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: as above.
            unsafe {
                ck(
                    sys::cuModuleLoadData(&mut m, ptx.as_ptr().cast()),
                    "cuModuleLoadData",
                );
                ck(
                    sys::cuModuleGetFunction(&mut f, m, c"empty90".as_ptr()),
                    "cuModuleGetFunction",
                );
            }
            f
        });
        Raw {
            stream,
            empty,
            four,
            saxpy,
            event,
            empty90,
        }
    }

    fn sync(&self) {
        // SAFETY: live stream.
        ck(
            unsafe { sys::cuStreamSynchronize(self.stream) },
            "cuStreamSynchronize",
        );
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Dim3 {
    x: u32,
    y: u32,
    z: u32,
}

/// Whether the current device has thread-block clusters (compute capability 9.0).
fn sm90() -> bool {
    cuda_runtime::Device::current()
        .and_then(|d| d.properties())
        .map(|p| p.major >= 9)
        .unwrap_or(false)
}

/// `cudaLaunchConfig_t` of cuda_runtime_api.h (13.0); its attributes have the driver's layout.
#[repr(C)]
struct CudartLaunchConfig {
    grid: Dim3,
    block: Dim3,
    dynamic_smem_bytes: usize,
    stream: CudaStream,
    attrs: *mut sys::CUlaunchAttribute,
    num_attrs: u32,
}

/// A launch attribute with a zeroed value.
fn attr(id: sys::CUlaunchAttributeID) -> sys::CUlaunchAttribute {
    sys::CUlaunchAttribute {
        id,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue { pad: [0; 64] },
    }
}

/// The cluster figure's attribute: clusters of two blocks.
fn cluster_attrs() -> [sys::CUlaunchAttribute; 1] {
    let mut a = attr(sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    a.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: 2, y: 1, z: 1 };
    [a]
}

/// The extended figure's attributes: the highest priority, the remote domain, a window of
/// normal accesses over `base`.
fn extended_attrs(priority: i32, base: u64) -> [sys::CUlaunchAttribute; 3] {
    use sys::CUlaunchAttributeID as Id;
    let mut p = attr(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY);
    p.value.priority = priority;
    let mut d = attr(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN);
    d.value.memSyncDomain = sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
    let mut w = attr(Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
    w.value.accessPolicyWindow = sys::CUaccessPolicyWindow {
        base_ptr: base as usize as *mut c_void,
        num_bytes: 4,
        hitRatio: 1.0,
        hitProp: sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
        missProp: sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
    };
    [p, d, w]
}

type CudaStream = *mut c_void;
type HostFn = unsafe extern "C" fn(*mut c_void);

/// libcudart, loaded at run time, with the calls the bench needs.
struct Cudart {
    _lib: libloading::Library,
    stream_create: unsafe extern "C" fn(*mut CudaStream) -> CudaError,
    stream_sync: unsafe extern "C" fn(CudaStream) -> CudaError,
    launch: unsafe extern "C" fn(
        *const c_void,
        Dim3,
        Dim3,
        *mut *mut c_void,
        usize,
        CudaStream,
    ) -> CudaError,
    event_create: unsafe extern "C" fn(*mut *mut c_void) -> CudaError,
    event_record: unsafe extern "C" fn(*mut c_void, CudaStream) -> CudaError,
    host_fn: unsafe extern "C" fn(CudaStream, HostFn, *mut c_void) -> CudaError,
    memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, i32, CudaStream) -> CudaError,
    launch_ex: unsafe extern "C" fn(
        *const CudartLaunchConfig,
        *const c_void,
        *mut *mut c_void,
    ) -> CudaError,
    stream: CudaStream,
    /// `empty90`, on a device with clusters (null otherwise).
    empty90: *const c_void,
    empty: *const c_void,
    four: *const c_void,
    event: *mut c_void,
}

impl Cudart {
    fn load() -> Option<Cudart> {
        let lib = common::open_libcudart()?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the field or binding it is stored
                // in (cuda_runtime_api.h of CUDA 13.0).
                unsafe { common::sym(&lib, $name) }
            };
        }
        let library_load: unsafe extern "C" fn(
            *mut *mut c_void,
            *const c_void,
            *mut c_void,
            *mut *mut c_void,
            u32,
            *mut c_void,
            *mut *mut c_void,
            u32,
        ) -> CudaError = sym!(b"cudaLibraryLoadData\0");
        let get_kernel: unsafe extern "C" fn(
            *mut *const c_void,
            *mut c_void,
            *const i8,
        ) -> CudaError = sym!(b"cudaLibraryGetKernel\0");
        let mut c = Cudart {
            stream_create: sym!(b"cudaStreamCreate\0"),
            stream_sync: sym!(b"cudaStreamSynchronize\0"),
            launch: sym!(b"cudaLaunchKernel\0"),
            event_create: sym!(b"cudaEventCreate\0"),
            event_record: sym!(b"cudaEventRecord\0"),
            host_fn: sym!(b"cudaLaunchHostFunc\0"),
            memcpy_async: sym!(b"cudaMemcpyAsync\0"),
            launch_ex: sym!(b"cudaLaunchKernelExC\0"),
            _lib: lib,
            stream: std::ptr::null_mut(),
            empty90: std::ptr::null(),
            empty: std::ptr::null(),
            four: std::ptr::null(),
            event: std::ptr::null_mut(),
        };
        let ptx = CString::new(kernels::params::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
        let mut library: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-parameters; the PTX is NUL-terminated; no options.
        unsafe {
            ok(
                library_load(
                    &mut library,
                    ptx.as_ptr().cast(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                ),
                "cudaLibraryLoadData",
            );
            ok(
                get_kernel(&mut c.empty, library, c"empty".as_ptr()),
                "cudaLibraryGetKernel",
            );
            ok(
                get_kernel(&mut c.four, library, c"four_args".as_ptr()),
                "cudaLibraryGetKernel",
            );
            ok((c.stream_create)(&mut c.stream), "cudaStreamCreate");
            ok((c.event_create)(&mut c.event), "cudaEventCreate");
        }
        if sm90() {
            let ptx =
                CString::new(kernels::launch_ex::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
            let mut library: *mut c_void = std::ptr::null_mut();
            // SAFETY: as above.
            unsafe {
                ok(
                    library_load(
                        &mut library,
                        ptx.as_ptr().cast(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        0,
                    ),
                    "cudaLibraryLoadData",
                );
                ok(
                    get_kernel(&mut c.empty90, library, c"empty90".as_ptr()),
                    "cudaLibraryGetKernel",
                );
            }
        }
        Some(c)
    }

    fn sync(&self) {
        // SAFETY: live stream.
        ok(
            unsafe { (self.stream_sync)(self.stream) },
            "cudaStreamSynchronize",
        );
    }
}

unsafe extern "C" fn noop(_: *mut c_void) {}

const ONE: Dim3 = Dim3 { x: 1, y: 1, z: 1 };

/// The figures: name, unit, and per implementation a closure doing one operation.
struct Setup {
    stream: Stream,
    /// This thread's per-thread default stream (`cudaStreamPerThread`).
    pts: Stream,
    event: Event,
    out: DeviceBuffer<f32>,
    /// `y` and `x` of the user kernel (one element each).
    uy: DeviceBuffer<f32>,
    ux: DeviceBuffer<f32>,
    src: DeviceBuffer<u8>,
    dst: DeviceBuffer<u8>,
    raw: Raw,
    cudart: Option<Cudart>,
    /// The device's highest stream priority (for the extended figure).
    priority: i32,
}

const COPY_BYTES: usize = 256 << 20;

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Crate,
    Driver,
    Cudart,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Figure {
    EmptyLaunch,
    FourArgLaunch,
    PerThreadLaunch,
    UserLaunch,
    ClusterLaunch,
    ExtendedLaunch,
    EventRecord,
    LaunchSync,
    HostFn,
    CopyD2D,
}

impl Figure {
    const ALL: [Figure; 10] = [
        Figure::EmptyLaunch,
        Figure::FourArgLaunch,
        Figure::PerThreadLaunch,
        Figure::UserLaunch,
        Figure::ClusterLaunch,
        Figure::ExtendedLaunch,
        Figure::EventRecord,
        Figure::LaunchSync,
        Figure::HostFn,
        Figure::CopyD2D,
    ];
    fn name(self) -> &'static str {
        match self {
            Figure::EmptyLaunch => "empty kernel launch, submit",
            Figure::FourArgLaunch => "4-argument kernel launch, submit",
            Figure::PerThreadLaunch => "4-argument launch, per-thread stream, submit",
            Figure::UserLaunch => "user kernel (build-helper wrapper), submit",
            Figure::ClusterLaunch => "cluster launch (2-block clusters), submit",
            Figure::ExtendedLaunch => "extended launch, 3 attributes, submit",
            Figure::EventRecord => "event record",
            Figure::LaunchSync => "launch + synchronize round trip",
            Figure::HostFn => "host function + synchronize round trip",
            Figure::CopyD2D => "device-to-device copy 256 MiB",
        }
    }
    /// Operations per timed batch; submit-only figures synchronise after the batch.
    fn batch(self) -> u32 {
        match self {
            Figure::EmptyLaunch
            | Figure::FourArgLaunch
            | Figure::PerThreadLaunch
            | Figure::UserLaunch
            | Figure::ClusterLaunch
            | Figure::ExtendedLaunch
            | Figure::EventRecord => 2000,
            Figure::LaunchSync | Figure::HostFn => 200,
            Figure::CopyD2D => 5,
        }
    }
}

impl Setup {
    /// One operation of `fig` through `way`. Returns false when the way is unavailable.
    fn op(&mut self, fig: Figure, way: Way) -> bool {
        let cfg = LaunchConfig::new(1u32, 1u32);
        if matches!(fig, Figure::ClusterLaunch) && self.raw.empty90.is_none() {
            return false;
        }
        match way {
            Way::Crate => {
                let r = match fig {
                    Figure::EmptyLaunch => kernels::params::empty(&self.stream, &cfg),
                    Figure::FourArgLaunch => {
                        kernels::params::four_args(&self.stream, &cfg, &mut self.out, 1, 2.0, 3.0)
                    }
                    // No fence: another thread that needs one asks this one.
                    Figure::PerThreadLaunch => {
                        kernels::params::four_args(&self.pts, &cfg, &mut self.out, 1, 2.0, 3.0)
                    }
                    // The example user crate's wrapper, generated by cuda-runtime-build.
                    Figure::UserLaunch => {
                        user_kernels::saxpy::saxpy(&self.stream, &cfg, &mut self.uy, &self.ux, 1.0)
                    }
                    Figure::ClusterLaunch => kernels::launch_ex::empty90(
                        &self.stream,
                        &LaunchConfig::new(2u32, 1u32).with_cluster(2),
                    ),
                    Figure::ExtendedLaunch => {
                        let ex: LaunchConfigEx<'_> = cfg
                            .extended()
                            .priority(self.priority)
                            .mem_sync_domain(MemSyncDomain::Remote)
                            .access_policy_window(AccessPolicyWindow::over(
                                &self.out,
                                1.0,
                                AccessProperty::Normal,
                                AccessProperty::Normal,
                            ));
                        kernels::params::empty(&self.stream, &ex)
                    }
                    Figure::EventRecord => self.event.record(&self.stream),
                    Figure::LaunchSync => kernels::params::empty(&self.stream, &cfg)
                        .and_then(|_| self.stream.synchronize()),
                    Figure::HostFn => self
                        .stream
                        .launch_host_fn(|| {})
                        .and_then(|_| self.stream.synchronize()),
                    Figure::CopyD2D => self
                        .dst
                        .copy_from_device_async(&self.src, &self.stream)
                        .and_then(|_| self.stream.synchronize()),
                };
                if let Err(e) = r {
                    die(&format!("{}: {e}", fig.name()));
                }
            }
            Way::Driver => {
                let r = &self.raw;
                // SAFETY: live handles of the current context; the 4-argument kernel gets
                // pointers to locals of its parameter types, and `out` holds one float.
                unsafe {
                    match fig {
                        Figure::EmptyLaunch => ck(
                            sys::cuLaunchKernel(
                                r.empty,
                                1,
                                1,
                                1,
                                1,
                                1,
                                1,
                                0,
                                r.stream,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                            ),
                            "cuLaunchKernel",
                        ),
                        Figure::FourArgLaunch | Figure::PerThreadLaunch => {
                            let (mut p, mut n, mut a, mut b, mut c) =
                                (self.out.as_raw(), 1usize, 1i32, 2f32, 3f64);
                            let mut args: [*mut c_void; 5] = [
                                (&mut p as *mut u64).cast(),
                                (&mut n as *mut usize).cast(),
                                (&mut a as *mut i32).cast(),
                                (&mut b as *mut f32).cast(),
                                (&mut c as *mut f64).cast(),
                            ];
                            ck(
                                sys::cuLaunchKernel(
                                    r.four,
                                    1,
                                    1,
                                    1,
                                    1,
                                    1,
                                    1,
                                    0,
                                    if fig == Figure::PerThreadLaunch {
                                        2 as sys::CUstream // CU_STREAM_PER_THREAD
                                    } else {
                                        r.stream
                                    },
                                    args.as_mut_ptr(),
                                    std::ptr::null_mut(),
                                ),
                                "cuLaunchKernel",
                            )
                        }
                        Figure::UserLaunch => {
                            let (mut y, mut yn, mut x, mut xn, mut a) =
                                (self.uy.as_raw(), 1usize, self.ux.as_raw(), 1usize, 1f32);
                            let mut args: [*mut c_void; 5] = [
                                (&mut y as *mut u64).cast(),
                                (&mut yn as *mut usize).cast(),
                                (&mut x as *mut u64).cast(),
                                (&mut xn as *mut usize).cast(),
                                (&mut a as *mut f32).cast(),
                            ];
                            ck(
                                sys::cuLaunchKernel(
                                    r.saxpy,
                                    1,
                                    1,
                                    1,
                                    1,
                                    1,
                                    1,
                                    0,
                                    r.stream,
                                    args.as_mut_ptr(),
                                    std::ptr::null_mut(),
                                ),
                                "cuLaunchKernel",
                            )
                        }
                        Figure::ClusterLaunch | Figure::ExtendedLaunch => {
                            let (f, grid) = match fig {
                                Figure::ClusterLaunch => (r.empty90.unwrap_or(r.empty), 2),
                                _ => (r.empty, 1),
                            };
                            let mut c = cluster_attrs();
                            let mut e = extended_attrs(self.priority, self.out.as_raw());
                            let (attrs, n) = match fig {
                                Figure::ClusterLaunch => (c.as_mut_ptr(), c.len()),
                                _ => (e.as_mut_ptr(), e.len()),
                            };
                            let config = sys::CUlaunchConfig {
                                gridDimX: grid,
                                gridDimY: 1,
                                gridDimZ: 1,
                                blockDimX: 1,
                                blockDimY: 1,
                                blockDimZ: 1,
                                sharedMemBytes: 0,
                                hStream: r.stream,
                                attrs,
                                numAttrs: n as u32,
                            };
                            ck(
                                sys::cuLaunchKernelEx(
                                    &config,
                                    f,
                                    std::ptr::null_mut(),
                                    std::ptr::null_mut(),
                                ),
                                "cuLaunchKernelEx",
                            )
                        }
                        Figure::EventRecord => {
                            ck(sys::cuEventRecord(r.event, r.stream), "cuEventRecord")
                        }
                        Figure::LaunchSync => {
                            ck(
                                sys::cuLaunchKernel(
                                    r.empty,
                                    1,
                                    1,
                                    1,
                                    1,
                                    1,
                                    1,
                                    0,
                                    r.stream,
                                    std::ptr::null_mut(),
                                    std::ptr::null_mut(),
                                ),
                                "cuLaunchKernel",
                            );
                            r.sync();
                        }
                        Figure::HostFn => {
                            ck(
                                sys::cuLaunchHostFunc(r.stream, Some(noop), std::ptr::null_mut()),
                                "cuLaunchHostFunc",
                            );
                            r.sync();
                        }
                        Figure::CopyD2D => {
                            ck(
                                sys::cuMemcpyDtoDAsync_v2(
                                    self.dst.as_raw(),
                                    self.src.as_raw(),
                                    COPY_BYTES,
                                    r.stream,
                                ),
                                "cuMemcpyDtoDAsync",
                            );
                            r.sync();
                        }
                    }
                }
            }
            Way::Cudart => {
                let Some(c) = &self.cudart else { return false };
                // SAFETY: as above, through libcudart's entry points.
                unsafe {
                    match fig {
                        Figure::EmptyLaunch => ok(
                            (c.launch)(c.empty, ONE, ONE, std::ptr::null_mut(), 0, c.stream),
                            "cudaLaunchKernel",
                        ),
                        Figure::FourArgLaunch | Figure::PerThreadLaunch => {
                            // cudaStreamPerThread is the handle 0x2.
                            let stream = if fig == Figure::PerThreadLaunch {
                                2 as CudaStream
                            } else {
                                c.stream
                            };
                            let (mut p, mut n, mut a, mut b, mut x) =
                                (self.out.as_raw(), 1usize, 1i32, 2f32, 3f64);
                            let mut args: [*mut c_void; 5] = [
                                (&mut p as *mut u64).cast(),
                                (&mut n as *mut usize).cast(),
                                (&mut a as *mut i32).cast(),
                                (&mut b as *mut f32).cast(),
                                (&mut x as *mut f64).cast(),
                            ];
                            ok(
                                (c.launch)(c.four, ONE, ONE, args.as_mut_ptr(), 0, stream),
                                "cudaLaunchKernel",
                            )
                        }
                        // Not loaded into libcudart: the figure compares with the driver.
                        Figure::UserLaunch => return false,
                        Figure::ClusterLaunch | Figure::ExtendedLaunch => {
                            let (f, grid) = match fig {
                                Figure::ClusterLaunch => (c.empty90, 2),
                                _ => (c.empty, 1),
                            };
                            let mut ca = cluster_attrs();
                            let mut e = extended_attrs(self.priority, self.out.as_raw());
                            let (attrs, n) = match fig {
                                Figure::ClusterLaunch => (ca.as_mut_ptr(), ca.len()),
                                _ => (e.as_mut_ptr(), e.len()),
                            };
                            let config = CudartLaunchConfig {
                                grid: Dim3 {
                                    x: grid,
                                    y: 1,
                                    z: 1,
                                },
                                block: ONE,
                                dynamic_smem_bytes: 0,
                                stream: c.stream,
                                attrs,
                                num_attrs: n as u32,
                            };
                            ok(
                                (c.launch_ex)(&config, f, std::ptr::null_mut()),
                                "cudaLaunchKernelExC",
                            )
                        }
                        Figure::EventRecord => {
                            ok((c.event_record)(c.event, c.stream), "cudaEventRecord")
                        }
                        Figure::LaunchSync => {
                            ok(
                                (c.launch)(c.empty, ONE, ONE, std::ptr::null_mut(), 0, c.stream),
                                "cudaLaunchKernel",
                            );
                            c.sync();
                        }
                        Figure::HostFn => {
                            ok(
                                (c.host_fn)(c.stream, noop, std::ptr::null_mut()),
                                "cudaLaunchHostFunc",
                            );
                            c.sync();
                        }
                        Figure::CopyD2D => {
                            ok(
                                (c.memcpy_async)(
                                    self.dst.as_raw() as *mut c_void,
                                    self.src.as_raw() as *const c_void,
                                    COPY_BYTES,
                                    3,
                                    c.stream,
                                ),
                                "cudaMemcpyAsync",
                            );
                            c.sync();
                        }
                    }
                }
            }
        }
        true
    }

    fn sync_all(&self) {
        if let Err(e) = self.stream.synchronize() {
            die(&format!("synchronize: {e}"));
        }
        // The per-thread stream (of this thread) for the three ways: the driver's and
        // libcudart's launches on handle 0x2 are in it too.
        if let Err(e) = self.pts.synchronize() {
            die(&format!("synchronize the per-thread stream: {e}"));
        }
        self.raw.sync();
        if let Some(c) = &self.cudart {
            c.sync();
        }
    }

    /// Time of `n` operations, synchronised after.
    fn batch(&mut self, fig: Figure, way: Way, n: u64) -> Option<Duration> {
        self.sync_all();
        let t = Instant::now();
        for _ in 0..n {
            if !self.op(fig, way) {
                return None;
            }
        }
        let submit = t.elapsed();
        self.sync_all();
        Some(match fig {
            Figure::EmptyLaunch
            | Figure::FourArgLaunch
            | Figure::PerThreadLaunch
            | Figure::UserLaunch
            | Figure::ClusterLaunch
            | Figure::ExtendedLaunch
            | Figure::EventRecord => submit,
            _ => t.elapsed(),
        })
    }

    /// Median time per operation over `reps` batches, microseconds, for every way at once: the
    /// ways take turns batch by batch, so drift of the machine hits them alike.
    fn medians_us(&mut self, fig: Figure, reps: usize) -> [Option<f64>; 3] {
        let n = fig.batch() as u64;
        let ways = [Way::Crate, Way::Driver, Way::Cudart];
        let mut v: [Vec<f64>; 3] = Default::default();
        for rep in 0..=reps {
            for i in common::turns(rep, ways.len()) {
                if let Some(d) = self.batch(fig, ways[i], n) {
                    if rep > 0 {
                        v[i].push(d.as_secs_f64() * 1e6 / n as f64);
                    }
                }
            }
        }
        v.map(|mut x| {
            x.sort_by(f64::total_cmp);
            x.get(x.len() / 2).copied()
        })
    }
}

/// A raw handle handed to the worker threads of the threaded figure.
#[derive(Clone, Copy)]
struct Handle(*mut c_void);
// SAFETY: driver and runtime handles may be used from any thread; the workers use them only
// while `Setup` (which owns them) lives, inside `std::thread::scope`.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// Time per launch on each of `threads` threads launching the empty kernel `per` times on a
/// stream of its own, all at once (microseconds: the slowest thread's time over `per`).
fn threaded_launch_us(setup: &Setup, way: Way, threads: usize, per: u32) -> Option<f64> {
    if way == Way::Cudart && setup.cudart.is_none() {
        return None;
    }
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-parameter; the crate made its context current on this thread.
    ck(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, "cuCtxGetCurrent");
    let ctx = Handle(ctx.cast());
    let empty = Handle(setup.raw.empty.cast());
    let cudart = setup.cudart.as_ref().map(|c| {
        (
            c.stream_create,
            c.launch,
            c.stream_sync,
            Handle(c.empty as *mut c_void),
        )
    });
    let barrier = std::sync::Barrier::new(threads);
    let times: Vec<Duration> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = &barrier;
                sc.spawn(move || {
                    let cfg = LaunchConfig::new(1u32, 1u32);
                    let (ctx, empty) = (ctx, empty);
                    let run = |launch: &mut dyn FnMut()| {
                        barrier.wait();
                        let t = Instant::now();
                        for _ in 0..per {
                            launch();
                        }
                        t.elapsed()
                    };
                    match way {
                        Way::Crate => {
                            let s = Stream::new().unwrap_or_else(|e| die(&e.to_string()));
                            let d = run(&mut || {
                                kernels::params::empty(&s, &cfg)
                                    .unwrap_or_else(|e| die(&e.to_string()))
                            });
                            s.synchronize().unwrap_or_else(|e| die(&e.to_string()));
                            d
                        }
                        Way::Driver => {
                            let mut s: sys::CUstream = std::ptr::null_mut();
                            // SAFETY: the crate's primary context, live for the bench; valid
                            // out-parameter; the stream is destroyed below.
                            unsafe {
                                ck(sys::cuCtxSetCurrent(ctx.0.cast()), "cuCtxSetCurrent");
                                ck(sys::cuStreamCreate(&mut s, 0), "cuStreamCreate");
                            }
                            let d = run(&mut || {
                                // SAFETY: a kernel without parameters on a live stream.
                                ck(
                                    unsafe {
                                        sys::cuLaunchKernel(
                                            empty.0.cast(),
                                            1,
                                            1,
                                            1,
                                            1,
                                            1,
                                            1,
                                            0,
                                            s,
                                            std::ptr::null_mut(),
                                            std::ptr::null_mut(),
                                        )
                                    },
                                    "cuLaunchKernel",
                                )
                            });
                            // SAFETY: the stream made above.
                            unsafe {
                                ck(sys::cuStreamSynchronize(s), "cuStreamSynchronize");
                                ck(sys::cuStreamDestroy_v2(s), "cuStreamDestroy");
                            }
                            d
                        }
                        Way::Cudart => {
                            let (create, launch, sync, kernel) = cudart.expect("checked above");
                            let mut s: CudaStream = std::ptr::null_mut();
                            let one = Dim3 { x: 1, y: 1, z: 1 };
                            // SAFETY: libcudart's entry points with valid arguments.
                            ok(unsafe { create(&mut s) }, "cudaStreamCreate");
                            let d = run(&mut || {
                                // SAFETY: libcudart's kernel handle of `empty` (no parameters).
                                ok(
                                    unsafe {
                                        launch(kernel.0, one, one, std::ptr::null_mut(), 0, s)
                                    },
                                    "cudaLaunchKernel",
                                )
                            });
                            // SAFETY: the stream made above.
                            ok(unsafe { sync(s) }, "cudaStreamSynchronize");
                            d
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let slowest = times.into_iter().max()?;
    Some(slowest.as_secs_f64() * 1e6 / per as f64)
}

fn main() {
    let count = match cuda_runtime::device_count() {
        Ok(n) if n > 0 => n,
        Ok(_) => {
            println!("runtime bench: no CUDA device; nothing to measure");
            return;
        }
        Err(e) => {
            println!("runtime bench: {e}; nothing to measure");
            return;
        }
    };
    let _ = count;
    let mk = || -> cuda_runtime::Result<Setup> {
        let stream = Stream::new()?;
        let event = Event::with_flags(EventFlags::empty())?;
        let out = DeviceBuffer::<f32>::zeroed(1)?;
        let uy = DeviceBuffer::<f32>::zeroed(1)?;
        let ux = DeviceBuffer::<f32>::zeroed(1)?;
        let src = DeviceBuffer::<u8>::zeroed(COPY_BYTES)?;
        let dst = DeviceBuffer::<u8>::zeroed(COPY_BYTES)?;
        Ok(Setup {
            stream,
            pts: Stream::per_thread()?,
            event,
            out,
            uy,
            ux,
            src,
            dst,
            raw: Raw::new(),
            cudart: None,
            priority: cuda_runtime::Device::current()?.stream_priority_range()?.1,
        })
    };
    let mut setup = mk().unwrap_or_else(|e| die(&e.to_string()));
    setup.cudart = Cudart::load();

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20)
        .configure_from_args();
    for fig in Figure::ALL {
        let mut g = c.benchmark_group(fig.name());
        for (way, label) in [
            (Way::Crate, "cuda-runtime"),
            (Way::Driver, "driver"),
            (Way::Cudart, "libcudart"),
        ] {
            // libcudart does not load the user crate's kernels: no column for that figure.
            if way == Way::Cudart && (setup.cudart.is_none() || fig == Figure::UserLaunch) {
                continue;
            }
            g.bench_function(label, |b| {
                b.iter_custom(|iters| setup.batch(fig, way, black_box(iters)).unwrap_or_default())
            });
        }
        g.finish();
    }

    println!(
        "\nSummary: medians of 41 interleaved batches, microseconds per operation (copy: GB/s, read + written)"
    );
    println!(
        "{:<42} {:>12} {:>12} {:>12} {:>10} {:>12}",
        "figure", "cuda-runtime", "driver", "libcudart", "vs driver", "vs libcudart"
    );
    for fig in Figure::ALL {
        let [ours, raw, rt] = setup.medians_us(fig, 41);
        let show = |v: Option<f64>| match (v, fig) {
            (Some(us), Figure::CopyD2D) => format!("{:.0}", 2.0 * COPY_BYTES as f64 / (us * 1e3)),
            (Some(us), _) => format!("{us:.3}"),
            (None, _) => "-".into(),
        };
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.3}x", a / b),
            _ => "-".into(),
        };
        println!(
            "{:<42} {:>12} {:>12} {:>12} {:>10} {:>12}",
            fig.name(),
            show(ours),
            show(raw),
            show(rt),
            ratio(ours, raw),
            ratio(ours, rt)
        );
    }
    println!(
        "(ratios are time ratios: below 1 is faster; for the copy, below 1 means more bandwidth)"
    );
    println!(
        "targets: launch submit (crate and user kernels, cluster and extended) <= 1.05x driver and < libcudart;"
    );
    println!("         event record <= 1.05x driver; launch+sync and host-function round trips <= libcudart");

    // Many threads at once, each on a stream of its own: what the context lock and the queue
    // bookkeeping cost when every thread enters the same device.
    let threads = 8;
    let mut v: [Vec<f64>; 3] = Default::default();
    for _ in 0..7 {
        for (i, way) in [Way::Crate, Way::Driver, Way::Cudart]
            .into_iter()
            .enumerate()
        {
            if let Some(us) = threaded_launch_us(&setup, way, threads, 5000) {
                v[i].push(us);
            }
        }
    }
    let [ours, raw, rt] = v.map(|mut x| {
        x.sort_by(f64::total_cmp);
        x.get(x.len() / 2).copied()
    });
    let show = |v: Option<f64>| v.map_or("-".into(), |us| format!("{us:.3}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.3}x", a / b),
        _ => "-".into(),
    };
    println!(
        "{:<42} {:>12} {:>12} {:>12} {:>10} {:>12}",
        format!("empty launch, {threads} threads at once (us)"),
        show(ours),
        show(raw),
        show(rt),
        ratio(ours, raw),
        ratio(ours, rt)
    );
    println!("(median of 7 runs; each thread launches 5000 times on its own stream; the slowest");
    println!(" thread's time per launch)");
}
