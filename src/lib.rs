//! # cuda-runtime
//!
//! NVIDIA's CUDA runtime API (libcudart) reimplemented as a safe Rust library over the CUDA
//! driver API. Building needs no CUDA toolkit; running needs an NVIDIA driver for CUDA 13.0 or
//! newer.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod context;
pub mod device;
mod driver;
pub mod error;

pub use device::{
    device_count, driver_version, get_device, runtime_version, set_device, CacheConfig, Device,
    DeviceAttribute, DeviceFlags, DeviceProperties, Limit,
};
pub use error::{
    error_name, error_string, get_last_error, peek_at_last_error, DeferredError, Error, ErrorCode,
    Result,
};
pub mod event;
pub mod memory;
pub mod stream;

pub use event::{Event, EventFlags};
pub use memory::{DeviceBuffer, DeviceRead, DeviceRepr, DeviceView, DeviceViewMut, DeviceWrite};
pub use stream::{
    default_stream_mode, set_default_stream_mode, DefaultStreamMode, Stream, StreamFlags,
};
pub mod launch;
pub mod module;
pub mod symbol;

pub use launch::{Dim3, LaunchConfig};
pub use module::{
    EmbeddedKernel, EmbeddedModule, Function, FunctionAttributes, KernelArg, Module, ParamInfo,
};
pub use symbol::Symbol;
