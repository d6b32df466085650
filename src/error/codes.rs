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
    InvalidConfiguration = 9, "cudaErrorInvalidConfiguration", "invalid configuration argument";
    InsufficientDriver = 35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version";
    NoDevice = 100, "cudaErrorNoDevice", "no CUDA-capable device is detected";
    InvalidDevice = 101, "cudaErrorInvalidDevice", "invalid device ordinal";
    ContextIsDestroyed = 709, "cudaErrorContextIsDestroyed", "context is destroyed";
    IllegalAddress = 700, "cudaErrorIllegalAddress", "an illegal memory access was encountered";
    NotReady = 600, "cudaErrorNotReady", "device not ready";
    InvalidResourceHandle = 400, "cudaErrorInvalidResourceHandle", "invalid resource handle";
    SymbolNotFound = 500, "cudaErrorSymbolNotFound", "named symbol not found";
    CooperativeLaunchTooLarge = 720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch";
    Unknown = 999, "cudaErrorUnknown", "unknown error";
}

impl ErrorCode {
    /// Whether this error leaves its context unusable ("sticky"): every later call on the device
    /// reports it until the device is reset.
    pub const fn is_sticky(self) -> bool {
        matches!(self, ErrorCode::IllegalAddress)
    }

    /// The runtime code libcudart reports for a driver `CUresult` number. Numbers unknown to this
    /// table (a newer driver's) map to [`ErrorCode::Unknown`].
    pub const fn from_driver(cu: u32) -> ErrorCode {
        match cu {
            1 => ErrorCode::InvalidValue,
            2 => ErrorCode::MemoryAllocation,
            3 => ErrorCode::InitializationError,
            4 => ErrorCode::CudartUnloading,
            100 => ErrorCode::NoDevice,
            101 => ErrorCode::InvalidDevice,
            600 => ErrorCode::NotReady,
            700 => ErrorCode::IllegalAddress,
            709 => ErrorCode::ContextIsDestroyed,
            _ => ErrorCode::Unknown,
        }
    }
}

/// The `CUDA_ERROR_...` name of a driver result number, if known.
pub(crate) const fn driver_name(cu: u32) -> Option<&'static str> {
    Some(match cu {
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        600 => "CUDA_ERROR_NOT_READY",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        709 => "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_number() {
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_number(c.number()), Some(c), "{c:?}");
            assert!(c.name().starts_with("cudaError"), "{c:?}");
            assert!(!c.description().is_empty(), "{c:?}");
        }
        let mut sorted = ErrorCode::ALL.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ErrorCode::ALL.len(), "duplicate codes");
    }
}
