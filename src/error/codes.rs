//! The tables: runtime error codes (`cudaError_t`), driver result names (`CUresult`), and the
//! mapping from driver results to runtime codes.

macro_rules! error_codes {
    ($( $variant:ident = $num:literal, $name:literal, $desc:literal; )*) => {
        /// A CUDA runtime error code (`cudaError_t`), CUDA 13.0, without `cudaSuccess`.
        ///
        /// [`number`](Self::number) is the value of the C enum, [`name`](Self::name) what
        /// `cudaGetErrorName` returns and [`description`](Self::description) what
        /// `cudaGetErrorString` returns.
        #[non_exhaustive]
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $( #[doc = $desc] $variant = $num, )*
        }

        impl ErrorCode {
            /// Every runtime error code, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code with this number, if the CUDA 13.0 runtime defines one.
            pub const fn from_number(n: u32) -> Option<ErrorCode> {
                match n {
                    $( $num => Some(ErrorCode::$variant), )*
                    _ => None,
                }
            }

            /// The `cudaError...` name (`cudaGetErrorName`).
            #[doc(alias = "cudaGetErrorName")]
            pub const fn name(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $name, )*
                }
            }

            /// The runtime's description (`cudaGetErrorString`).
            #[doc(alias = "cudaGetErrorString")]
            pub const fn description(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $desc, )*
                }
            }
        }
    };
}

impl ErrorCode {
    /// The numeric value of the `cudaError_t`.
    pub const fn number(self) -> u32 {
        self as u32
    }
}

error_codes! {
    InvalidValue = 1, "cudaErrorInvalidValue", "invalid argument";
    MemoryAllocation = 2, "cudaErrorMemoryAllocation", "out of memory";
    InitializationError = 3, "cudaErrorInitializationError", "initialization error";
    CudartUnloading = 4, "cudaErrorCudartUnloading", "driver shutting down";
    ProfilerDisabled = 5, "cudaErrorProfilerDisabled", "profiler disabled while using external profiling tool";
    ProfilerNotInitialized = 6, "cudaErrorProfilerNotInitialized", "profiler not initialized: call cudaProfilerInitialize()";
    ProfilerAlreadyStarted = 7, "cudaErrorProfilerAlreadyStarted", "profiler already started";
    ProfilerAlreadyStopped = 8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped";
    InvalidConfiguration = 9, "cudaErrorInvalidConfiguration", "invalid configuration argument";
    InvalidPitchValue = 12, "cudaErrorInvalidPitchValue", "invalid pitch argument";
    InvalidSymbol = 13, "cudaErrorInvalidSymbol", "invalid device symbol";
    InvalidHostPointer = 16, "cudaErrorInvalidHostPointer", "invalid host pointer";
    InvalidDevicePointer = 17, "cudaErrorInvalidDevicePointer", "invalid device pointer";
    InvalidTexture = 18, "cudaErrorInvalidTexture", "invalid texture reference";
    InvalidTextureBinding = 19, "cudaErrorInvalidTextureBinding", "texture is not bound to a pointer";
    InvalidChannelDescriptor = 20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor";
    InvalidMemcpyDirection = 21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy";
    AddressOfConstant = 22, "cudaErrorAddressOfConstant", "invalid address of constant";
    TextureFetchFailed = 23, "cudaErrorTextureFetchFailed", "fetch from texture failed";
    TextureNotBound = 24, "cudaErrorTextureNotBound", "cannot fetch from a texture that is not bound";
    SynchronizationError = 25, "cudaErrorSynchronizationError", "incorrect use of __syncthreads()";
    InvalidFilterSetting = 26, "cudaErrorInvalidFilterSetting", "linear filtering not supported for non-float type";
    InvalidNormSetting = 27, "cudaErrorInvalidNormSetting", "read as normalized float not supported for data type";
    MixedDeviceExecution = 28, "cudaErrorMixedDeviceExecution", "device emulation mode and device execution mode cannot be mixed";
    NotYetImplemented = 31, "cudaErrorNotYetImplemented", "feature not yet implemented";
    MemoryValueTooLarge = 32, "cudaErrorMemoryValueTooLarge", "memory size or pointer value too large to fit in 32 bit";
    StubLibrary = 34, "cudaErrorStubLibrary", "CUDA driver is a stub library";
    InsufficientDriver = 35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version";
    CallRequiresNewerDriver = 36, "cudaErrorCallRequiresNewerDriver", "API call is not supported in the installed CUDA driver";
    InvalidSurface = 37, "cudaErrorInvalidSurface", "invalid surface reference";
    DuplicateVariableName = 43, "cudaErrorDuplicateVariableName", "duplicate global variable looked up by string name";
    DuplicateTextureName = 44, "cudaErrorDuplicateTextureName", "duplicate texture looked up by string name";
    DuplicateSurfaceName = 45, "cudaErrorDuplicateSurfaceName", "duplicate surface looked up by string name";
    DevicesUnavailable = 46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable";
    IncompatibleDriverContext = 49, "cudaErrorIncompatibleDriverContext", "incompatible driver context";
    MissingConfiguration = 52, "cudaErrorMissingConfiguration", "__global__ function call is not configured";
    PriorLaunchFailure = 53, "cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch";
    LaunchMaxDepthExceeded = 65, "cudaErrorLaunchMaxDepthExceeded", "launch would exceed maximum depth of nested launches";
    LaunchFileScopedTex = 66, "cudaErrorLaunchFileScopedTex", "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)";
    LaunchFileScopedSurf = 67, "cudaErrorLaunchFileScopedSurf", "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)";
    SyncDepthExceeded = 68, "cudaErrorSyncDepthExceeded", "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth";
    LaunchPendingCountExceeded = 69, "cudaErrorLaunchPendingCountExceeded", "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount";
    InvalidDeviceFunction = 98, "cudaErrorInvalidDeviceFunction", "invalid device function";
    NoDevice = 100, "cudaErrorNoDevice", "no CUDA-capable device is detected";
    InvalidDevice = 101, "cudaErrorInvalidDevice", "invalid device ordinal";
    DeviceNotLicensed = 102, "cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license";
    SoftwareValidityNotEstablished = 103, "cudaErrorSoftwareValidityNotEstablished", "integrity checks failed";
    StartupFailure = 127, "cudaErrorStartupFailure", "startup failure in cuda runtime";
    InvalidKernelImage = 200, "cudaErrorInvalidKernelImage", "device kernel image is invalid";
    DeviceUninitialized = 201, "cudaErrorDeviceUninitialized", "invalid device context";
    MapBufferObjectFailed = 205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed";
    UnmapBufferObjectFailed = 206, "cudaErrorUnmapBufferObjectFailed", "unmapping of buffer object failed";
    ArrayIsMapped = 207, "cudaErrorArrayIsMapped", "array is mapped";
    AlreadyMapped = 208, "cudaErrorAlreadyMapped", "resource already mapped";
    NoKernelImageForDevice = 209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device";
    AlreadyAcquired = 210, "cudaErrorAlreadyAcquired", "resource already acquired";
    NotMapped = 211, "cudaErrorNotMapped", "resource not mapped";
    NotMappedAsArray = 212, "cudaErrorNotMappedAsArray", "resource not mapped as array";
    NotMappedAsPointer = 213, "cudaErrorNotMappedAsPointer", "resource not mapped as pointer";
    ECCUncorrectable = 214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered";
    UnsupportedLimit = 215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture";
    DeviceAlreadyInUse = 216, "cudaErrorDeviceAlreadyInUse", "exclusive-thread device already in use by a different thread";
    PeerAccessUnsupported = 217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices";
    InvalidPtx = 218, "cudaErrorInvalidPtx", "a PTX JIT compilation failed";
    InvalidGraphicsContext = 219, "cudaErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context";
    NvlinkUncorrectable = 220, "cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution";
    JitCompilerNotFound = 221, "cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found";
    UnsupportedPtxVersion = 222, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain.";
    JitCompilationDisabled = 223, "cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled";
    UnsupportedExecAffinity = 224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported";
    UnsupportedDevSideSync = 225, "cudaErrorUnsupportedDevSideSync", "the provided PTX contains unsupported call to cudaDeviceSynchronize";
    Contained = 226, "cudaErrorContained", "Invalid access of peer GPU memory over nvlink or a hardware error";
    InvalidSource = 300, "cudaErrorInvalidSource", "device kernel image is invalid";
    FileNotFound = 301, "cudaErrorFileNotFound", "file not found";
    SharedObjectSymbolNotFound = 302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found";
    SharedObjectInitFailed = 303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed";
    OperatingSystem = 304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS";
    InvalidResourceHandle = 400, "cudaErrorInvalidResourceHandle", "invalid resource handle";
    IllegalState = 401, "cudaErrorIllegalState", "the operation cannot be performed in the present state";
    LossyQuery = 402, "cudaErrorLossyQuery", "attempted introspection would be semantically lossy";
    SymbolNotFound = 500, "cudaErrorSymbolNotFound", "named symbol not found";
    NotReady = 600, "cudaErrorNotReady", "device not ready";
    IllegalAddress = 700, "cudaErrorIllegalAddress", "an illegal memory access was encountered";
    LaunchOutOfResources = 701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch";
    LaunchTimeout = 702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated";
    LaunchIncompatibleTexturing = 703, "cudaErrorLaunchIncompatibleTexturing", "launch uses incompatible texturing mode";
    PeerAccessAlreadyEnabled = 704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled";
    PeerAccessNotEnabled = 705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled";
    SetOnActiveProcess = 708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process";
    ContextIsDestroyed = 709, "cudaErrorContextIsDestroyed", "context is destroyed";
    Assert = 710, "cudaErrorAssert", "device-side assert triggered";
    TooManyPeers = 711, "cudaErrorTooManyPeers", "peer mapping resources exhausted";
    HostMemoryAlreadyRegistered = 712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped";
    HostMemoryNotRegistered = 713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region";
    HardwareStackError = 714, "cudaErrorHardwareStackError", "hardware stack error";
    IllegalInstruction = 715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered";
    MisalignedAddress = 716, "cudaErrorMisalignedAddress", "misaligned address";
    InvalidAddressSpace = 717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space";
    InvalidPc = 718, "cudaErrorInvalidPc", "invalid program counter";
    LaunchFailure = 719, "cudaErrorLaunchFailure", "unspecified launch failure";
    CooperativeLaunchTooLarge = 720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch";
    TensorMemoryLeak = 721, "cudaErrorTensorMemoryLeak", "tensor memory not completely freed";
    NotPermitted = 800, "cudaErrorNotPermitted", "operation not permitted";
    NotSupported = 801, "cudaErrorNotSupported", "operation not supported";
    SystemNotReady = 802, "cudaErrorSystemNotReady", "system not yet initialized";
    SystemDriverMismatch = 803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination";
    CompatNotSupportedOnDevice = 804, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW";
    MpsConnectionFailed = 805, "cudaErrorMpsConnectionFailed", "MPS client failed to connect to the MPS control daemon or the MPS server";
    MpsRpcFailure = 806, "cudaErrorMpsRpcFailure", "the remote procedural call between the MPS server and the MPS client failed";
    MpsServerNotReady = 807, "cudaErrorMpsServerNotReady", "MPS server is not ready to accept new MPS client requests";
    MpsMaxClientsReached = 808, "cudaErrorMpsMaxClientsReached", "the hardware resources required to create MPS client have been exhausted";
    MpsMaxConnectionsReached = 809, "cudaErrorMpsMaxConnectionsReached", "the hardware resources required to support device connections have been exhausted";
    MpsClientTerminated = 810, "cudaErrorMpsClientTerminated", "the MPS client has been terminated by the server";
    CdpNotSupported = 811, "cudaErrorCdpNotSupported", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it";
    CdpVersionMismatch = 812, "cudaErrorCdpVersionMismatch", "unsupported interaction between different versions of CUDA Dynamic Parallelism";
    StreamCaptureUnsupported = 900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing";
    StreamCaptureInvalidated = 901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture";
    StreamCaptureMerge = 902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences";
    StreamCaptureUnmatched = 903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began";
    StreamCaptureUnjoined = 904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work";
    StreamCaptureIsolation = 905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream";
    StreamCaptureImplicit = 906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream";
    CapturedEvent = 907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream";
    StreamCaptureWrongThread = 908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread";
    Timeout = 909, "cudaErrorTimeout", "wait operation timed out";
    GraphExecUpdateFailure = 910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
    ExternalDevice = 911, "cudaErrorExternalDevice", "an async error has occured in external entity outside of CUDA";
    InvalidClusterSize = 912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration";
    FunctionNotLoaded = 913, "cudaErrorFunctionNotLoaded", "the function handle is not loaded when calling an API that requires a loaded function";
    InvalidResourceType = 914, "cudaErrorInvalidResourceType", "one or more resources passed in are not valid resource types for the operation";
    InvalidResourceConfiguration = 915, "cudaErrorInvalidResourceConfiguration", "one or more resources are insufficient or non-applicable for the operation";
    Unknown = 999, "cudaErrorUnknown", "unknown error";
}

impl ErrorCode {
    /// Whether this error leaves its context unusable ("sticky"): every later call on the device
    /// reports it until the device is reset.
    ///
    /// The set is the codes whose runtime documentation (`driver_types.h`, CUDA 13.0) says the
    /// error leaves the process in an inconsistent state, that any further CUDA work returns the
    /// same error, or that the process must be terminated to continue using CUDA:
    /// `cudaErrorContained` (226), `cudaErrorIllegalAddress` (700), `cudaErrorLaunchTimeout`
    /// (702), `cudaErrorAssert` (710), `cudaErrorHardwareStackError` (714),
    /// `cudaErrorIllegalInstruction` (715), `cudaErrorMisalignedAddress` (716),
    /// `cudaErrorInvalidAddressSpace` (717), `cudaErrorInvalidPc` (718),
    /// `cudaErrorLaunchFailure` (719), `cudaErrorTensorMemoryLeak` (721),
    /// `cudaErrorMpsClientTerminated` (810) and `cudaErrorExternalDevice` (911).
    ///
    /// `cudaErrorECCUncorrectable` and `cudaErrorNvlinkUncorrectable` are not in the set: the
    /// documentation does not say they corrupt the context.
    pub const fn is_sticky(self) -> bool {
        matches!(
            self,
            ErrorCode::Contained
                | ErrorCode::IllegalAddress
                | ErrorCode::LaunchTimeout
                | ErrorCode::Assert
                | ErrorCode::HardwareStackError
                | ErrorCode::IllegalInstruction
                | ErrorCode::MisalignedAddress
                | ErrorCode::InvalidAddressSpace
                | ErrorCode::InvalidPc
                | ErrorCode::LaunchFailure
                | ErrorCode::TensorMemoryLeak
                | ErrorCode::MpsClientTerminated
                | ErrorCode::ExternalDevice
        )
    }

    /// The runtime code libcudart reports for a driver `CUresult` number.
    ///
    /// Since CUDA 10 the runtime's numbers equal the driver's for every error both define, and
    /// libcudart 13.0 passes the driver's number through unchanged: measured on driver 580 by
    /// making `cuCtxSynchronize` / `cuStreamSynchronize` return each `CUresult` and reading what
    /// `cudaDeviceSynchronize` / `cudaStreamSynchronize` returned (every code came back as the
    /// same number). So `CUDA_ERROR_OUT_OF_MEMORY` (2) is `cudaErrorMemoryAllocation`,
    /// `CUDA_ERROR_INVALID_CONTEXT` (201) `cudaErrorDeviceUninitialized`,
    /// `CUDA_ERROR_NOT_FOUND` (500) `cudaErrorSymbolNotFound`, and so on.
    ///
    /// Driver numbers with no runtime code (`CUDA_ERROR_CONTEXT_ALREADY_CURRENT` (202),
    /// `CUDA_ERROR_KEY_ROTATION` (916), a newer driver's codes) are returned raw by libcudart,
    /// where `cudaGetErrorName` calls them "unrecognized error code"; here they map to
    /// [`ErrorCode::Unknown`] and the caller keeps the raw number.
    pub const fn from_driver(cu: u32) -> ErrorCode {
        match ErrorCode::from_number(cu) {
            Some(code) => code,
            None => ErrorCode::Unknown,
        }
    }
}

/// The `CUDA_ERROR_...` name of a driver result number (`CUresult` of the CUDA 13.0 `cuda.h`), if
/// known.
pub(crate) const fn driver_name(cu: u32) -> Option<&'static str> {
    Some(match cu {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        5 => "CUDA_ERROR_PROFILER_DISABLED",
        6 => "CUDA_ERROR_PROFILER_NOT_INITIALIZED",
        7 => "CUDA_ERROR_PROFILER_ALREADY_STARTED",
        8 => "CUDA_ERROR_PROFILER_ALREADY_STOPPED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        36 => "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
        46 => "CUDA_ERROR_DEVICE_UNAVAILABLE",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        102 => "CUDA_ERROR_DEVICE_NOT_LICENSED",
        200 => "CUDA_ERROR_INVALID_IMAGE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        202 => "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
        205 => "CUDA_ERROR_MAP_FAILED",
        206 => "CUDA_ERROR_UNMAP_FAILED",
        207 => "CUDA_ERROR_ARRAY_IS_MAPPED",
        208 => "CUDA_ERROR_ALREADY_MAPPED",
        209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
        210 => "CUDA_ERROR_ALREADY_ACQUIRED",
        211 => "CUDA_ERROR_NOT_MAPPED",
        212 => "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
        213 => "CUDA_ERROR_NOT_MAPPED_AS_POINTER",
        214 => "CUDA_ERROR_ECC_UNCORRECTABLE",
        215 => "CUDA_ERROR_UNSUPPORTED_LIMIT",
        216 => "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
        217 => "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
        218 => "CUDA_ERROR_INVALID_PTX",
        219 => "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
        220 => "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        221 => "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
        222 => "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        223 => "CUDA_ERROR_JIT_COMPILATION_DISABLED",
        224 => "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
        225 => "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
        226 => "CUDA_ERROR_CONTAINED",
        300 => "CUDA_ERROR_INVALID_SOURCE",
        301 => "CUDA_ERROR_FILE_NOT_FOUND",
        302 => "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
        303 => "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        401 => "CUDA_ERROR_ILLEGAL_STATE",
        402 => "CUDA_ERROR_LOSSY_QUERY",
        500 => "CUDA_ERROR_NOT_FOUND",
        600 => "CUDA_ERROR_NOT_READY",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        703 => "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
        704 => "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        705 => "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
        708 => "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
        709 => "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        710 => "CUDA_ERROR_ASSERT",
        711 => "CUDA_ERROR_TOO_MANY_PEERS",
        712 => "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        713 => "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        714 => "CUDA_ERROR_HARDWARE_STACK_ERROR",
        715 => "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        716 => "CUDA_ERROR_MISALIGNED_ADDRESS",
        717 => "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        718 => "CUDA_ERROR_INVALID_PC",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        720 => "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
        721 => "CUDA_ERROR_TENSOR_MEMORY_LEAK",
        800 => "CUDA_ERROR_NOT_PERMITTED",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        802 => "CUDA_ERROR_SYSTEM_NOT_READY",
        803 => "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        804 => "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        805 => "CUDA_ERROR_MPS_CONNECTION_FAILED",
        806 => "CUDA_ERROR_MPS_RPC_FAILURE",
        807 => "CUDA_ERROR_MPS_SERVER_NOT_READY",
        808 => "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
        809 => "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
        810 => "CUDA_ERROR_MPS_CLIENT_TERMINATED",
        811 => "CUDA_ERROR_CDP_NOT_SUPPORTED",
        812 => "CUDA_ERROR_CDP_VERSION_MISMATCH",
        900 => "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        901 => "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        902 => "CUDA_ERROR_STREAM_CAPTURE_MERGE",
        903 => "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
        904 => "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
        905 => "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
        906 => "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        907 => "CUDA_ERROR_CAPTURED_EVENT",
        908 => "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
        909 => "CUDA_ERROR_TIMEOUT",
        910 => "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
        911 => "CUDA_ERROR_EXTERNAL_DEVICE",
        912 => "CUDA_ERROR_INVALID_CLUSTER_SIZE",
        913 => "CUDA_ERROR_FUNCTION_NOT_LOADED",
        914 => "CUDA_ERROR_INVALID_RESOURCE_TYPE",
        915 => "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
        916 => "CUDA_ERROR_KEY_ROTATION",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `CUresult` of the CUDA 13.0 `cuda.h` (the list cudarc's `cuda-13000` bindings hold).
    const DRIVER_13_0: &[(u32, &str)] = &[
        (0, "CUDA_SUCCESS"),
        (1, "CUDA_ERROR_INVALID_VALUE"),
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
        (3, "CUDA_ERROR_NOT_INITIALIZED"),
        (4, "CUDA_ERROR_DEINITIALIZED"),
        (5, "CUDA_ERROR_PROFILER_DISABLED"),
        (6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED"),
        (7, "CUDA_ERROR_PROFILER_ALREADY_STARTED"),
        (8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED"),
        (34, "CUDA_ERROR_STUB_LIBRARY"),
        (36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"),
        (46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
        (100, "CUDA_ERROR_NO_DEVICE"),
        (101, "CUDA_ERROR_INVALID_DEVICE"),
        (102, "CUDA_ERROR_DEVICE_NOT_LICENSED"),
        (200, "CUDA_ERROR_INVALID_IMAGE"),
        (201, "CUDA_ERROR_INVALID_CONTEXT"),
        (202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT"),
        (205, "CUDA_ERROR_MAP_FAILED"),
        (206, "CUDA_ERROR_UNMAP_FAILED"),
        (207, "CUDA_ERROR_ARRAY_IS_MAPPED"),
        (208, "CUDA_ERROR_ALREADY_MAPPED"),
        (209, "CUDA_ERROR_NO_BINARY_FOR_GPU"),
        (210, "CUDA_ERROR_ALREADY_ACQUIRED"),
        (211, "CUDA_ERROR_NOT_MAPPED"),
        (212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY"),
        (213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER"),
        (214, "CUDA_ERROR_ECC_UNCORRECTABLE"),
        (215, "CUDA_ERROR_UNSUPPORTED_LIMIT"),
        (216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE"),
        (217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"),
        (218, "CUDA_ERROR_INVALID_PTX"),
        (219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT"),
        (220, "CUDA_ERROR_NVLINK_UNCORRECTABLE"),
        (221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
        (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
        (223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"),
        (224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY"),
        (225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC"),
        (226, "CUDA_ERROR_CONTAINED"),
        (300, "CUDA_ERROR_INVALID_SOURCE"),
        (301, "CUDA_ERROR_FILE_NOT_FOUND"),
        (302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND"),
        (303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED"),
        (304, "CUDA_ERROR_OPERATING_SYSTEM"),
        (400, "CUDA_ERROR_INVALID_HANDLE"),
        (401, "CUDA_ERROR_ILLEGAL_STATE"),
        (402, "CUDA_ERROR_LOSSY_QUERY"),
        (500, "CUDA_ERROR_NOT_FOUND"),
        (600, "CUDA_ERROR_NOT_READY"),
        (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
        (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
        (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
        (703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING"),
        (704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"),
        (705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"),
        (708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE"),
        (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"),
        (710, "CUDA_ERROR_ASSERT"),
        (711, "CUDA_ERROR_TOO_MANY_PEERS"),
        (712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"),
        (713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"),
        (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"),
        (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
        (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
        (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
        (718, "CUDA_ERROR_INVALID_PC"),
        (719, "CUDA_ERROR_LAUNCH_FAILED"),
        (720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"),
        (721, "CUDA_ERROR_TENSOR_MEMORY_LEAK"),
        (800, "CUDA_ERROR_NOT_PERMITTED"),
        (801, "CUDA_ERROR_NOT_SUPPORTED"),
        (802, "CUDA_ERROR_SYSTEM_NOT_READY"),
        (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
        (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
        (805, "CUDA_ERROR_MPS_CONNECTION_FAILED"),
        (806, "CUDA_ERROR_MPS_RPC_FAILURE"),
        (807, "CUDA_ERROR_MPS_SERVER_NOT_READY"),
        (808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED"),
        (809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED"),
        (810, "CUDA_ERROR_MPS_CLIENT_TERMINATED"),
        (811, "CUDA_ERROR_CDP_NOT_SUPPORTED"),
        (812, "CUDA_ERROR_CDP_VERSION_MISMATCH"),
        (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
        (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
        (902, "CUDA_ERROR_STREAM_CAPTURE_MERGE"),
        (903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"),
        (904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"),
        (905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"),
        (906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"),
        (907, "CUDA_ERROR_CAPTURED_EVENT"),
        (908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"),
        (909, "CUDA_ERROR_TIMEOUT"),
        (910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"),
        (911, "CUDA_ERROR_EXTERNAL_DEVICE"),
        (912, "CUDA_ERROR_INVALID_CLUSTER_SIZE"),
        (913, "CUDA_ERROR_FUNCTION_NOT_LOADED"),
        (914, "CUDA_ERROR_INVALID_RESOURCE_TYPE"),
        (915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"),
        (916, "CUDA_ERROR_KEY_ROTATION"),
        (999, "CUDA_ERROR_UNKNOWN"),
    ];

    /// `CUDA_ERROR_INVALID_VALUE` -> `invalidvalue`, `cudaErrorInvalidValue` -> `invalidvalue`.
    fn driver_key(name: &str) -> String {
        name.trim_start_matches("CUDA_ERROR_")
            .replace('_', "")
            .to_lowercase()
    }

    fn runtime_key(name: &str) -> String {
        name.trim_start_matches("cudaError").to_lowercase()
    }

    #[test]
    fn every_code_round_trips_through_its_number() {
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_number(c.number()), Some(c), "{c:?}");
            assert!(c.name().starts_with("cudaError"), "{c:?}");
            assert_eq!(&c.name()["cudaError".len()..], format!("{c:?}"), "{c:?}");
            assert!(!c.description().is_empty(), "{c:?}");
        }
        assert_eq!(ErrorCode::ALL.len(), 132);
        assert!(
            ErrorCode::ALL.windows(2).all(|w| w[0] < w[1]),
            "not in numeric order"
        );
        assert_eq!(ErrorCode::from_number(0), None);
        assert_eq!(ErrorCode::from_number(10), None);
        assert_eq!(ErrorCode::from_number(1000), None);
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn spot_checks_of_names_and_strings() {
        let cases = [
            (1, "cudaErrorInvalidValue", "invalid argument"),
            (2, "cudaErrorMemoryAllocation", "out of memory"),
            (
                35,
                "cudaErrorInsufficientDriver",
                "CUDA driver version is insufficient for CUDA runtime version",
            ),
            (
                100,
                "cudaErrorNoDevice",
                "no CUDA-capable device is detected",
            ),
            (
                201,
                "cudaErrorDeviceUninitialized",
                "invalid device context",
            ),
            (
                400,
                "cudaErrorInvalidResourceHandle",
                "invalid resource handle",
            ),
            (
                700,
                "cudaErrorIllegalAddress",
                "an illegal memory access was encountered",
            ),
            (719, "cudaErrorLaunchFailure", "unspecified launch failure"),
            (
                900,
                "cudaErrorStreamCaptureUnsupported",
                "operation not permitted when stream is capturing",
            ),
            (999, "cudaErrorUnknown", "unknown error"),
        ];
        for (n, name, desc) in cases {
            let c = ErrorCode::from_number(n).unwrap();
            assert_eq!((c.name(), c.description()), (name, desc));
        }
    }

    #[test]
    fn driver_names_cover_every_cuda_13_0_result() {
        for &(n, name) in DRIVER_13_0 {
            assert_eq!(driver_name(n), Some(name), "{n}");
        }
        assert_eq!(driver_name(202), Some("CUDA_ERROR_CONTEXT_ALREADY_CURRENT"));
        assert_eq!(driver_name(9), None);
        assert_eq!(driver_name(917), None);
        assert_eq!(driver_name(u32::MAX), None);
    }

    #[test]
    fn driver_codes_map_to_the_same_named_runtime_code() {
        let mut same_named = 0;
        for &(n, name) in DRIVER_13_0.iter().skip(1) {
            if let Some(c) = ErrorCode::ALL
                .iter()
                .find(|c| runtime_key(c.name()) == driver_key(name))
            {
                assert_eq!(ErrorCode::from_driver(n), *c, "{name}");
                same_named += 1;
            }
        }
        assert!(same_named > 80, "{same_named}");
    }

    #[test]
    fn driver_codes_map_by_number_as_libcudart_does() {
        for &(n, name) in DRIVER_13_0.iter().skip(1) {
            let expected = ErrorCode::from_number(n).unwrap_or(ErrorCode::Unknown);
            assert_eq!(ErrorCode::from_driver(n), expected, "{name}");
        }
        let known = [
            (2, ErrorCode::MemoryAllocation),
            (3, ErrorCode::InitializationError),
            (4, ErrorCode::CudartUnloading),
            (46, ErrorCode::DevicesUnavailable),
            (200, ErrorCode::InvalidKernelImage),
            (201, ErrorCode::DeviceUninitialized),
            (205, ErrorCode::MapBufferObjectFailed),
            (206, ErrorCode::UnmapBufferObjectFailed),
            (209, ErrorCode::NoKernelImageForDevice),
            (216, ErrorCode::DeviceAlreadyInUse),
            (400, ErrorCode::InvalidResourceHandle),
            (500, ErrorCode::SymbolNotFound),
            (708, ErrorCode::SetOnActiveProcess),
            (719, ErrorCode::LaunchFailure),
            (999, ErrorCode::Unknown),
        ];
        for (n, c) in known {
            assert_eq!(ErrorCode::from_driver(n), c, "{n}");
        }
    }

    #[test]
    fn driver_codes_without_a_runtime_code_are_unknown() {
        for n in [202, 916, 917, 1234, u32::MAX] {
            assert_eq!(ErrorCode::from_driver(n), ErrorCode::Unknown, "{n}");
        }
    }

    #[test]
    fn sticky_codes() {
        let sticky: Vec<u32> = ErrorCode::ALL
            .iter()
            .filter(|c| c.is_sticky())
            .map(|c| c.number())
            .collect();
        assert_eq!(
            sticky,
            [226, 700, 702, 710, 714, 715, 716, 717, 718, 719, 721, 810, 911]
        );
    }

    /// Compares the table with the output of `probes/error_strings.cu` (one
    /// `number<TAB>name<TAB>string` line per code libcudart recognises) when
    /// `CUDA_RUNTIME_ERROR_PROBE` names such a file; skipped otherwise.
    #[test]
    fn error_table_matches_probe() {
        let Some(path) = std::env::var_os("CUDA_RUNTIME_ERROR_PROBE") else {
            eprintln!("CUDA_RUNTIME_ERROR_PROBE is not set: skipped");
            return;
        };
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.to_string_lossy()));
        let mut seen = Vec::new();
        let mut mismatches = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut fields = line.splitn(3, '\t');
            let (Some(n), Some(name), Some(desc)) = (fields.next(), fields.next(), fields.next())
            else {
                panic!("malformed probe line: {line:?}");
            };
            let n: u32 = n
                .parse()
                .unwrap_or_else(|_| panic!("bad number in {line:?}"));
            let ours = (crate::error::error_name(n), crate::error::error_string(n));
            if ours != (name, desc) {
                mismatches.push(format!("{n}: libcudart {name:?} {desc:?}, table {ours:?}"));
            }
            seen.push(n);
        }
        for c in ErrorCode::ALL {
            if !seen.contains(&c.number()) {
                mismatches.push(format!("{}: {} is not in the probe", c.number(), c.name()));
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    }
}
