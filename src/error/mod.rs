//! Errors: every `cudaError_t` of the CUDA 13.0 runtime, the crate's own validation errors, and
//! the per-thread last error (`cudaGetLastError` / `cudaPeekAtLastError`).
//!
//! Every failing call of the crate returns `Err` and records the error as the calling thread's
//! last error. Each [`Error`] maps to the [`ErrorCode`] libcudart would return
//! ([`Error::code`]), whose number, name and description match `cudaGetErrorName` and
//! `cudaGetErrorString`.

mod codes;

use std::cell::RefCell;
use std::fmt;

pub use codes::ErrorCode;

use crate::module::ImageKind;

/// A `Result` whose error is the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every way a call of this crate can fail.
///
/// Errors reported by the driver (or implied by the runtime's rules) are [`Error::Cuda`], carrying
/// the runtime's [`ErrorCode`] and, where the driver reported it, the raw `CUresult` number.
/// Validation failures caught before any driver call have variants of their own that carry the
/// offending values; [`Error::code`] still gives the code libcudart returns for them.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An error with a runtime error code, from the driver or from the runtime's own rules.
    #[error("{}", fmt_cuda(*.code, *.driver, .call))]
    Cuda {
        /// The runtime's error code (`cudaError_t`).
        code: ErrorCode,
        /// The driver's `CUresult` number, when the error came from a driver call. Kept as a
        /// number so that codes of drivers newer than the bindings survive.
        driver: Option<u32>,
        /// The driver or runtime function that failed.
        call: &'static str,
    },
    /// libcuda could not be loaded (`cudaErrorInsufficientDriver`).
    #[error("no NVIDIA driver was found (libcuda could not be loaded); install an NVIDIA driver for CUDA 13.0 or newer")]
    NoDriver,
    /// The installed driver is older than the CUDA version this crate implements
    /// (`cudaErrorInsufficientDriver`).
    #[error("the NVIDIA driver supports CUDA {}, but this crate needs CUDA {} or newer; update the driver", fmt_version(*.found), fmt_version(*.required))]
    DriverTooOld {
        /// The version `cuDriverGetVersion` reported (1000 * major + 10 * minor).
        found: i32,
        /// The version this crate needs.
        required: i32,
    },
    /// A device ordinal outside `0..count` (`cudaErrorInvalidDevice`).
    #[error("invalid device ordinal {ordinal}: there are {count} CUDA device(s)")]
    InvalidDevice {
        /// The ordinal asked for.
        ordinal: i32,
        /// How many devices the driver reports.
        count: i32,
    },
    /// The driver is present but reports no CUDA-capable device (`cudaErrorNoDevice`).
    #[error("no CUDA-capable device is detected")]
    NoDevice,
    /// A handle made before its device was reset (`cudaErrorContextIsDestroyed`).
    #[error("{what} belongs to device {device}'s context that was destroyed by a device reset")]
    ContextDestroyed {
        /// What kind of handle was used.
        what: &'static str,
        /// The device it belongs to.
        device: i32,
    },
    /// A sticky error: an earlier failure corrupted the device's context, and every call on that
    /// device reports it until the device is reset. On driver 580 a reset does not recover
    /// from such errors either: every later call that needs the device then fails with
    /// `cudaErrorDevicesUnavailable` ([`ErrorCode::DevicesUnavailable`], as libcudart answers),
    /// and the process must be restarted, as NVIDIA documents for these errors.
    #[error("device {device} is unusable until it is reset: {code} ({})", .code.description())]
    Sticky {
        /// The device whose context is corrupted.
        device: i32,
        /// The error that corrupted it.
        code: ErrorCode,
    },
    /// A flag value with bits the call does not accept (`cudaErrorInvalidValue`).
    #[error("invalid flags {flags:#x} for {call}: the accepted bits are {allowed:#x}")]
    InvalidFlags {
        /// The call that refused them.
        call: &'static str,
        /// The flags given.
        flags: u32,
        /// The mask of flags the call accepts.
        allowed: u32,
    },
    /// An argument outside the values the call accepts (`cudaErrorInvalidValue`).
    #[error("invalid value for {what}: {value} ({reason})")]
    InvalidValue {
        /// The argument.
        what: &'static str,
        /// Its value, printed.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Two lengths that must match do not (`cudaErrorInvalidValue`).
    #[error("length mismatch in {what}: expected {expected} elements, got {actual}")]
    LengthMismatch {
        /// The operation.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// A range outside the object it indexes (`cudaErrorInvalidValue`).
    #[error("range {start}..{end} is out of bounds for {what} of length {len}")]
    OutOfRange {
        /// The object indexed.
        what: &'static str,
        /// Start of the range.
        start: usize,
        /// End of the range (exclusive).
        end: usize,
        /// Length of the object.
        len: usize,
    },
    /// Work submitted to a stream of another device than the current one
    /// (`cudaErrorInvalidResourceHandle`, as libcudart reports it).
    #[error("{call}: the stream belongs to device {stream_device}, but the current device is {current_device}")]
    WrongDevice {
        /// The call.
        call: &'static str,
        /// The stream's device.
        stream_device: i32,
        /// The calling thread's current device.
        current_device: i32,
    },
    /// Two objects that must be on the same device are not (`cudaErrorInvalidResourceHandle`).
    #[error("{call}: {what} is on device {found}, but device {expected} was required")]
    DeviceMismatch {
        /// The call.
        call: &'static str,
        /// The object on the wrong device.
        what: &'static str,
        /// Its device.
        found: i32,
        /// The device required.
        expected: i32,
    },
    /// A launch configuration outside the device's limits (`cudaErrorInvalidValue`: libcudart
    /// 13.0 reports these as invalid values, where older runtimes said
    /// `cudaErrorInvalidConfiguration`).
    #[error("invalid launch configuration: {what} is {value}, but the limit is {limit}")]
    InvalidConfiguration {
        /// The offending part (e.g. `"block.x"`, `"threads per block"`, `"dynamic shared memory"`).
        what: &'static str,
        /// Its value.
        value: u64,
        /// The limit it exceeds (or the minimum, for zero dimensions).
        limit: u64,
    },
    /// Kernel arguments that do not match the kernel's parameter list (`cudaErrorInvalidValue`).
    #[error("kernel {kernel}: {detail}")]
    KernelArguments {
        /// The kernel's name.
        kernel: String,
        /// What does not match.
        detail: String,
    },
    /// A launch of one of the crate's kernels that breaks a precondition declared with the
    /// kernel in its source (`// cuda-runtime: block = ...` or `require ...`, see
    /// [`crate::kernels`]); refused before anything is launched or borrowed
    /// (`cudaErrorInvalidValue`).
    #[error("kernel {kernel} requires {precondition}, but the launch has {values}")]
    KernelPrecondition {
        /// The kernel's name.
        kernel: &'static str,
        /// The precondition as declared, normalised (e.g. `"block = (32, 8, 1)"`,
        /// `"dynamic_shared >= 4 * n"`).
        precondition: String,
        /// The values it was checked with (e.g. `"block = (32, 32, 1)"`,
        /// `"dynamic_shared = 0, n = 64"`).
        values: String,
    },
    /// A symbol whose size does not match the host type (`cudaErrorInvalidValue`).
    #[error("symbol {name} is {symbol_size} bytes, but the host type is {host_size} bytes")]
    SymbolSize {
        /// The symbol's name.
        name: String,
        /// Its size on the device.
        symbol_size: usize,
        /// The size of the host type.
        host_size: usize,
    },
    /// A module image the driver refused, with the JIT's log.
    #[error("loading a module failed: {} ({}){}", .code.name(), .code.description(), if .log.is_empty() { String::new() } else { format!("; JIT log: {}", .log) })]
    ModuleLoad {
        /// The runtime code.
        code: ErrorCode,
        /// The driver's `CUresult` number.
        driver: u32,
        /// The JIT compiler's error log.
        log: String,
    },
    /// Module bytes refused before the driver sees them (`cudaErrorInvalidValue`): text the
    /// driver would not read whole as PTX (not UTF-8, or a NUL inside), a cubin or fatbin whose
    /// header points outside the bytes, or a cubin or fatbin given to a safe loader (they load
    /// through the `unsafe` [`Module::from_image`](crate::Module::from_image)).
    #[error("{origin} ({len} bytes{}): {reason}", fmt_image(*.kind, *.at))]
    InvalidModuleImage {
        /// Where the bytes came from: a file's path, `"PTX text"`, `"module image"`, or an
        /// embedded module's name.
        origin: String,
        /// The image's length in bytes.
        len: usize,
        /// What its first bytes say it is, where they say it.
        kind: Option<ImageKind>,
        /// The byte offset of the problem, where there is one: the NUL, the first byte that
        /// is not UTF-8, or where a header says a table or section starts.
        at: Option<u64>,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A kernel or variable name that the module does not define (`cudaErrorSymbolNotFound`).
    #[error("{what} {name:?} not found in the module")]
    NotFound {
        /// `"kernel"` or `"symbol"`.
        what: &'static str,
        /// The name looked up.
        name: String,
    },
    /// A cooperative launch with more blocks than fit on the device at once
    /// (`cudaErrorCooperativeLaunchTooLarge`).
    #[error("cooperative launch of {blocks} blocks, but at most {max} fit on the device at once")]
    CooperativeLaunchTooLarge {
        /// Blocks in the grid.
        blocks: u64,
        /// Blocks that fit.
        max: u64,
    },
    /// A row wider than its pitch (`cudaErrorInvalidPitchValue`).
    #[error("{what}: a row of {width_bytes} bytes (starting at byte {x_bytes}) does not fit in a pitch of {pitch} bytes")]
    InvalidPitch {
        /// The side of the copy or the allocation.
        what: &'static str,
        /// The row's starting offset in bytes.
        x_bytes: usize,
        /// The row's width in bytes.
        width_bytes: usize,
        /// The pitch in bytes.
        pitch: usize,
    },
    /// A size outside the device's limit for its kind of CUDA array, texture or surface
    /// (`cudaErrorInvalidValue`), checked before the driver is called.
    #[error("{what} is {value}, but the device's limit ({limit_name}) is {limit}")]
    SizeLimit {
        /// The offending dimension (e.g. `"2-D array height"`).
        what: &'static str,
        /// Its value.
        value: usize,
        /// The largest value the device accepts.
        limit: usize,
        /// The device attribute the limit comes from (e.g. `"cudaDevAttrMaxTexture2DHeight"`).
        limit_name: &'static str,
    },
    /// A channel description that no CUDA array format matches, such as three channels
    /// (`cudaErrorInvalidChannelDescriptor`).
    #[error("invalid channel description (x {x}, y {y}, z {z}, w {w} bits, {kind}): {reason}")]
    InvalidChannelDesc {
        /// Bits of the first channel.
        x: i32,
        /// Bits of the second channel.
        y: i32,
        /// Bits of the third channel.
        z: i32,
        /// Bits of the fourth channel.
        w: i32,
        /// The channel kind (`"signed"`, `"unsigned"`, `"float"`, `"none"` or a number).
        kind: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A texture or surface description that the driver would refuse or silently change, refused
    /// before the driver is called. The code is `cudaErrorInvalidFilterSetting` for linear
    /// filtering of a texel format that cannot give a float result,
    /// `cudaErrorInvalidNormSetting` for reading a format as normalised floats that has no such
    /// reading, and `cudaErrorInvalidValue` otherwise.
    #[error("invalid texture description: {what} is {value} ({reason})")]
    TextureDesc {
        /// The runtime's code for the refusal.
        code: ErrorCode,
        /// The field or combination (e.g. `"address_mode[0]"`).
        what: &'static str,
        /// Its value, printed (with the texel format where that decides).
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A texture over linear or pitched memory whose address or pitch is not a multiple of the
    /// device's alignment (`cudaErrorInvalidValue`): views at arbitrary offsets cannot be
    /// textures.
    #[error("{what} {value:#x} is not a multiple of the device's {attribute} ({alignment} bytes)")]
    TextureAlignment {
        /// `"texture base address"` or `"texture pitch"`.
        what: &'static str,
        /// The address or pitch.
        value: u64,
        /// The required alignment in bytes.
        alignment: u64,
        /// The device attribute it comes from.
        attribute: &'static str,
    },
    /// A surface object over a CUDA array made without
    /// [`ArrayFlags::SURFACE_LOAD_STORE`](crate::ArrayFlags::SURFACE_LOAD_STORE)
    /// (`cudaErrorInvalidValue`; the driver itself accepts it, against its documentation).
    #[error("a surface object needs an array made with ArrayFlags::SURFACE_LOAD_STORE (cudaArraySurfaceLoadStore), but the array's flags are {flags:#x}")]
    SurfaceNotLoadStore {
        /// The array's flags (`cudaArray*` bits).
        flags: u32,
    },
    /// A device reset refused because the CPU borrows host memory the device's context owns
    /// (a view of write-combined page-locked or managed memory): the reset would free the
    /// memory under the borrow (`cudaErrorNotPermitted`).
    #[error("device {device} cannot be reset while {borrows} CPU view(s) of its write-combined page-locked or managed memory are alive")]
    ResetWhileBorrowed {
        /// The device.
        device: i32,
        /// Live borrows.
        borrows: usize,
    },
    /// A managed allocation larger than the device's free memory, refused before the driver is
    /// asked (`cudaErrorMemoryAllocation`): oversubscribing managed memory can hang the machine.
    #[error(
        "managed allocation of {requested} bytes exceeds the {free} bytes free on device {device}"
    )]
    ManagedTooLarge {
        /// The device.
        device: i32,
        /// Bytes asked for.
        requested: usize,
        /// Bytes free.
        free: usize,
    },
    /// A call that cannot run inside a host function (`cudaLaunchHostFunc`), where CUDA calls
    /// are forbidden (`cudaErrorNotPermitted`).
    #[error("{call} cannot run inside a host function (cudaLaunchHostFunc): CUDA calls are forbidden there")]
    InHostFunction {
        /// The call.
        call: &'static str,
    },
    /// A closure given to `launch_host_fn` panicked.
    #[error("host function panicked: {message}")]
    HostFnPanicked {
        /// The panic's message, where it was a string.
        message: String,
    },
    /// A graph node used with a graph, or an executable graph, that it does not belong to.
    #[error("{call}: the node (handle {node:#x}) belongs to another graph")]
    ForeignGraphNode {
        /// The call.
        call: &'static str,
        /// The node's raw handle (`CUgraphNode`), as an address.
        node: usize,
    },
    /// `cudaGraphInstantiateWithParams` refused to instantiate a graph; `code` is the error
    /// libcudart returns.
    #[error(
        "{call} failed: {reason} (cudaGraphInstantiateResult {result}; node {node:#x}, 0 = \
         none; {})",
        .code.name()
    )]
    GraphInstantiate {
        /// The call.
        call: &'static str,
        /// The `cudaGraphInstantiateResult` number.
        result: u32,
        /// What the number means.
        reason: &'static str,
        /// The raw handle of the node that caused the refusal (0: none reported).
        node: usize,
        /// The runtime error code.
        code: ErrorCode,
    },
    /// A launch attribute of an extended launch ([`LaunchConfigEx`](crate::LaunchConfigEx),
    /// `cudaLaunchKernelEx`) refused before the driver sees it: the code is
    /// `cudaErrorInvalidClusterSize` for cluster dimensions the launch or the kernel cannot
    /// take, `cudaErrorInvalidValue` otherwise.
    #[error("launch attribute {attribute}: {detail}")]
    LaunchAttribute {
        /// The runtime's code for the refusal.
        code: ErrorCode,
        /// The attribute (e.g. `"cluster dimensions"`, `"priority"`).
        attribute: &'static str,
        /// What is wrong, with the values (e.g. `"grid.x 7 is not a multiple of cluster.x 2"`).
        detail: String,
    },
    /// Something that needs a newer GPU than the device has: a kernel module built for a newer
    /// architecture (`cudaErrorNoKernelImageForDevice`, checked before the driver is asked to
    /// load it), or a launch feature the device lacks, such as thread-block clusters before
    /// compute capability 9.0 (`cudaErrorNotSupported`).
    #[error("{what} needs compute capability {}.{} or newer, but device {device} has {}.{}", .needs / 10, .needs % 10, .found / 10, .found % 10)]
    ComputeCapability {
        /// The runtime's code for the refusal.
        code: ErrorCode,
        /// What needs it (e.g. `"kernel module cluster (built for sm_90)"`).
        what: String,
        /// The compute capability needed, as `major * 10 + minor` (90 for 9.0).
        needs: u32,
        /// The device.
        device: i32,
        /// Its compute capability, as `major * 10 + minor`.
        found: u32,
    },
    /// A kernel module the crate was built without: its kernels use the CUDA device runtime,
    /// whose linked images come with the Cargo feature `device-runtime` (default), which this
    /// build disabled (`cudaErrorNoKernelImageForDevice`: there is no image to load).
    #[error("{what} needs cuda-runtime's Cargo feature `{feature}`, which this build disabled (default-features = false): {reason}")]
    FeatureDisabled {
        /// What needs it (e.g. `"kernel module cdp"`).
        what: String,
        /// The feature.
        feature: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// A kernel module linked ahead of time has no machine code the device can run: it holds
    /// code for the architectures in `archs` and no PTX (`cudaErrorNoKernelImageForDevice`,
    /// checked before the driver is asked to load it).
    #[error("{what} has machine code for sm_{} only, none of which runs on device {device} (compute capability {}.{})", fmt_archs(.archs), .found / 10, .found % 10)]
    NoDeviceImage {
        /// What has no image (e.g. `"kernel module cdp (linked with the device runtime)"`).
        what: String,
        /// The device.
        device: i32,
        /// Its compute capability, as `major * 10 + minor`.
        found: u32,
        /// The architectures the image has code for, as `major * 10 + minor`.
        archs: &'static [u32],
    },
    /// `cudaGraphExecUpdate` refused to update an executable graph
    /// (`cudaErrorGraphExecUpdateFailure`); the executable is unchanged.
    #[error(
        "cudaGraphExecUpdate refused the update: {reason} (cudaGraphExecUpdateResult {result}; \
         node {node:#x}, from node {from_node:#x}; 0 = none)"
    )]
    GraphExecUpdate {
        /// The `cudaGraphExecUpdateResult` number.
        result: u32,
        /// What the number means.
        reason: &'static str,
        /// The raw handle of the node that caused the refusal (0: none reported).
        node: usize,
        /// For a changed dependency: the raw handle of the node it came from (0: none).
        from_node: usize,
    },
    /// Work that cannot be recorded into a graph, queued on a stream being captured (or a
    /// capture that cannot begin there), as `cudaErrorStreamCaptureUnsupported`. A refusal
    /// inside a capture also makes its end fail ([`Error::CaptureFailed`]).
    #[error("{call} cannot be captured into a graph: {reason}")]
    NotCapturable {
        /// The call.
        call: &'static str,
        /// Why, and what to do instead.
        reason: &'static str,
    },
    /// A stream capture ended, but an operation inside it failed or was refused, so the graph
    /// would miss work: it was discarded (`cudaErrorStreamCaptureInvalidated`).
    #[error("the stream capture failed: {call} inside it failed: {error}")]
    CaptureFailed {
        /// The first call that failed inside the capture.
        call: &'static str,
        /// Its error.
        error: Box<Error>,
    },
    /// The event was last recorded in a stream capture, which records nothing that runs: it
    /// cannot be queried, synchronised or waited for (outside its open capture) until it is
    /// recorded again outside a capture (`cudaErrorCapturedEvent`).
    #[error(
        "{call}: the event was last recorded in a stream capture; record it again outside a \
         capture first"
    )]
    CapturedEvent {
        /// The call.
        call: &'static str,
    },
}

fn fmt_archs(archs: &[u32]) -> String {
    archs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", sm_")
}

fn fmt_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn fmt_image(kind: Option<ImageKind>, at: Option<u64>) -> String {
    let kind = kind.map(|k| format!(", {}", k.name())).unwrap_or_default();
    let at = at.map(|a| format!(", at byte {a}")).unwrap_or_default();
    format!("{kind}{at}")
}

fn fmt_cuda(code: ErrorCode, driver: Option<u32>, call: &str) -> String {
    match driver {
        Some(d) if codes::driver_name(d).is_none() => format!(
            "{call} failed: {} ({}); driver code {d} is unknown to this crate",
            code.name(),
            code.description()
        ),
        Some(d) => format!(
            "{call} failed: {} ({}) [{}]",
            code.name(),
            code.description(),
            codes::driver_name(d).unwrap_or("?")
        ),
        None => format!("{call}: {} ({})", code.name(), code.description()),
    }
}

impl Error {
    /// An error from a driver call that returned `code` (a `CUresult` number).
    pub(crate) fn from_driver(code: u32, call: &'static str) -> Self {
        Error::Cuda {
            code: ErrorCode::from_driver(code),
            driver: Some(code),
            call,
        }
    }

    /// The runtime error code libcudart returns for this error (`cudaError_t`).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Cuda { code, .. } | Error::Sticky { code, .. } => *code,
            Error::NoDriver | Error::DriverTooOld { .. } => ErrorCode::InsufficientDriver,
            Error::InvalidDevice { .. } => ErrorCode::InvalidDevice,
            Error::NoDevice => ErrorCode::NoDevice,
            Error::ContextDestroyed { .. } => ErrorCode::ContextIsDestroyed,
            Error::InvalidFlags { .. }
            | Error::InvalidValue { .. }
            | Error::LengthMismatch { .. }
            | Error::OutOfRange { .. }
            | Error::KernelArguments { .. }
            | Error::KernelPrecondition { .. }
            | Error::SymbolSize { .. }
            | Error::InvalidModuleImage { .. }
            | Error::ForeignGraphNode { .. } => ErrorCode::InvalidValue,
            Error::GraphExecUpdate { .. } => ErrorCode::GraphExecUpdateFailure,
            Error::FeatureDisabled { .. } | Error::NoDeviceImage { .. } => {
                ErrorCode::NoKernelImageForDevice
            }
            Error::GraphInstantiate { code, .. } => *code,
            Error::WrongDevice { .. } | Error::DeviceMismatch { .. } => {
                ErrorCode::InvalidResourceHandle
            }
            Error::InvalidConfiguration { .. } => ErrorCode::InvalidValue,
            Error::ModuleLoad { code, .. } => *code,
            Error::NotFound { .. } => ErrorCode::SymbolNotFound,
            Error::CooperativeLaunchTooLarge { .. } => ErrorCode::CooperativeLaunchTooLarge,
            Error::HostFnPanicked { .. } => ErrorCode::Unknown,
            Error::InvalidPitch { .. } => ErrorCode::InvalidPitchValue,
            Error::ResetWhileBorrowed { .. } | Error::InHostFunction { .. } => {
                ErrorCode::NotPermitted
            }
            Error::ManagedTooLarge { .. } => ErrorCode::MemoryAllocation,
            Error::SizeLimit { .. }
            | Error::TextureAlignment { .. }
            | Error::SurfaceNotLoadStore { .. } => ErrorCode::InvalidValue,
            Error::InvalidChannelDesc { .. } => ErrorCode::InvalidChannelDescriptor,
            Error::TextureDesc { code, .. }
            | Error::LaunchAttribute { code, .. }
            | Error::ComputeCapability { code, .. } => *code,
            Error::NotCapturable { .. } => ErrorCode::StreamCaptureUnsupported,
            Error::CaptureFailed { .. } => ErrorCode::StreamCaptureInvalidated,
            Error::CapturedEvent { .. } => ErrorCode::CapturedEvent,
        }
    }

    /// The driver's raw `CUresult` number, when the error came from a driver call.
    pub fn driver_code(&self) -> Option<u32> {
        match self {
            Error::Cuda { driver, .. } => *driver,
            Error::ModuleLoad { driver, .. } => Some(*driver),
            _ => None,
        }
    }

    /// Whether this error corrupts its context (see [`ErrorCode::is_sticky`]).
    pub fn is_sticky(&self) -> bool {
        self.code().is_sticky()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `cudaGetErrorName` for any number: the `cudaError...` name, `"cudaSuccess"` for 0, and
/// `"cudaErrorUnknown"`-style text for numbers the runtime does not define.
#[doc(alias = "cudaGetErrorName")]
pub fn error_name(code: u32) -> &'static str {
    match code {
        0 => "cudaSuccess",
        n => ErrorCode::from_number(n).map_or("unrecognized error code", ErrorCode::name),
    }
}

/// `cudaGetErrorString` for any number: the runtime's description of the error.
#[doc(alias = "cudaGetErrorString")]
pub fn error_string(code: u32) -> &'static str {
    match code {
        0 => "no error",
        n => ErrorCode::from_number(n).map_or("unrecognized error code", ErrorCode::description),
    }
}

thread_local! {
    static LAST_ERROR: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// Records `e` as the calling thread's last error.
pub(crate) fn set_last_error(e: &Error) {
    // `try_with`: a call made from another thread-local's destructor, after this one is gone,
    // still returns its error; only the record is lost (never a panic in a TLS destructor).
    let _ = LAST_ERROR.try_with(|l| {
        if let Ok(mut slot) = l.try_borrow_mut() {
            *slot = Some(e.clone());
        }
    });
}

/// Records the error of `r`, if any, as the calling thread's last error, and passes `r` on.
/// Every public fallible function ends with this.
#[inline(always)]
pub(crate) fn record<T>(r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        set_last_error(e);
        crate::graph::capture::poison_open_here(e);
    }
    r
}

/// Returns the last error of any call made by this thread and clears it
/// (`cudaGetLastError`). As in libcudart, a sticky error is cleared from here too, but every
/// later call on its device still fails.
#[doc(alias = "cudaGetLastError")]
pub fn get_last_error() -> Option<Error> {
    LAST_ERROR
        .try_with(|l| l.try_borrow_mut().ok().and_then(|mut s| s.take()))
        .ok()
        .flatten()
}

/// Returns the last error of any call made by this thread without clearing it
/// (`cudaPeekAtLastError`).
#[doc(alias = "cudaPeekAtLastError")]
pub fn peek_at_last_error() -> Option<Error> {
    LAST_ERROR
        .try_with(|l| l.try_borrow().ok().and_then(|s| s.clone()))
        .ok()
        .flatten()
}

/// An error met where it could not be returned (in `Drop`), kept on its device with the call that
/// failed. See [`crate::Device::take_deferred_errors`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeferredError {
    /// What was being dropped or released.
    pub during: &'static str,
    /// The error.
    pub error: Error,
}

impl fmt::Display for DeferredError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "while {}: {}", self.during, self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_error_is_per_thread_and_cleared_by_get() {
        assert_eq!(peek_at_last_error(), None);
        let e = Error::InvalidDevice {
            ordinal: 7,
            count: 1,
        };
        let r: Result<()> = record(Err(e.clone()));
        assert_eq!(r.unwrap_err(), e);
        assert_eq!(peek_at_last_error(), Some(e.clone()));
        assert_eq!(peek_at_last_error(), Some(e.clone()));
        std::thread::spawn(|| assert_eq!(peek_at_last_error(), None))
            .join()
            .unwrap();
        assert_eq!(get_last_error(), Some(e));
        assert_eq!(get_last_error(), None);
        let ok: Result<u32> = record(Ok(3));
        assert_eq!(ok, Ok(3));
        assert_eq!(peek_at_last_error(), None);
    }

    #[test]
    fn validation_errors_name_their_values_and_map_to_runtime_codes() {
        let e = Error::LengthMismatch {
            what: "memcpy_htod",
            expected: 10,
            actual: 12,
        };
        assert_eq!(e.code(), ErrorCode::InvalidValue);
        let s = e.to_string();
        assert!(s.contains("10") && s.contains("12"), "{s}");
        let e = Error::InvalidDevice {
            ordinal: 3,
            count: 1,
        };
        assert_eq!(e.code(), ErrorCode::InvalidDevice);
        assert_eq!(e.code().number(), 101);
        assert!(e.to_string().contains('3'));
    }

    #[test]
    fn free_functions_follow_the_runtime_for_success_and_unknown_numbers() {
        assert_eq!(error_name(0), "cudaSuccess");
        assert_eq!(error_string(0), "no error");
        assert_eq!(error_name(1), "cudaErrorInvalidValue");
        assert_eq!(error_name(123_456), "unrecognized error code");
    }
}
