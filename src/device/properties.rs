//! `cudaDeviceProp` and `cudaDeviceAttr`. (Skeleton: completed by the properties work.)

use super::Device;
use crate::driver::{self, sys};
use crate::error::{record, Result};

/// A single device attribute (`cudaDeviceAttr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceAttribute {
    /// Maximum threads per block (`cudaDevAttrMaxThreadsPerBlock`).
    MaxThreadsPerBlock,
    /// Number of multiprocessors (`cudaDevAttrMultiProcessorCount`).
    MultiProcessorCount,
}

impl DeviceAttribute {
    fn to_raw(self) -> sys::CUdevice_attribute {
        use sys::CUdevice_attribute::*;
        match self {
            DeviceAttribute::MaxThreadsPerBlock => CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            DeviceAttribute::MultiProcessorCount => CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        }
    }
}

/// The properties of a device (`cudaDeviceProp`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceProperties {
    /// ASCII name (`name`).
    pub name: String,
    /// Maximum threads per block (`maxThreadsPerBlock`).
    pub max_threads_per_block: i32,
    /// Number of multiprocessors (`multiProcessorCount`).
    pub multi_processor_count: i32,
}

impl Device {
    /// One device attribute (`cudaDeviceGetAttribute`).
    #[doc(alias = "cudaDeviceGetAttribute")]
    pub fn attribute(self, attr: DeviceAttribute) -> Result<i32> {
        record(self.attribute_inner(attr))
    }

    fn attribute_inner(self, attr: DeviceAttribute) -> Result<i32> {
        let raw = self.raw()?;
        let mut v = 0i32;
        // SAFETY: valid device handle and out-parameter.
        driver::check(
            unsafe { sys::cuDeviceGetAttribute(&mut v, attr.to_raw(), raw) },
            "cuDeviceGetAttribute",
        )?;
        Ok(v)
    }

    /// All properties of the device (`cudaGetDeviceProperties`).
    #[doc(alias = "cudaGetDeviceProperties")]
    pub fn properties(self) -> Result<DeviceProperties> {
        record((|| {
            Ok(DeviceProperties {
                name: self.name()?,
                max_threads_per_block: self.attribute_inner(DeviceAttribute::MaxThreadsPerBlock)?,
                multi_processor_count: self
                    .attribute_inner(DeviceAttribute::MultiProcessorCount)?,
            })
        })())
    }
}
