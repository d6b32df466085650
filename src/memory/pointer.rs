//! `cudaPointerGetAttributes`: what the runtime knows about an address.

use crate::context;
use crate::driver::sys;
use crate::error::{record, Result};

/// The kind of memory an address points to (`cudaMemoryType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MemoryType {
    /// Memory the runtime does not know: ordinary pageable host memory
    /// (`cudaMemoryTypeUnregistered`).
    Unregistered = 0,
    /// Page-locked host memory, allocated or registered (`cudaMemoryTypeHost`).
    Host = 1,
    /// Device memory (`cudaMemoryTypeDevice`).
    Device = 2,
    /// Managed memory (`cudaMemoryTypeManaged`).
    Managed = 3,
}

/// What [`pointer_attributes`] reports (`cudaPointerAttributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PointerAttributes {
    /// The kind of memory.
    pub memory_type: MemoryType,
    /// The device the memory belongs to (for host memory, the device whose context allocated
    /// or registered it); -2 for unregistered memory, as libcudart reports.
    pub device: i32,
    /// The address device code uses, where there is one (device, managed and mapped memory).
    pub device_pointer: Option<u64>,
    /// The address host code uses, where there is one (page-locked, managed memory; the
    /// address itself for unregistered memory).
    pub host_pointer: Option<u64>,
}

/// The attributes of the memory at `ptr`, a host or device address (`cudaPointerGetAttributes`).
/// Unknown addresses are reported as [`MemoryType::Unregistered`], not as an error, as in
/// CUDA 11 and later.
///
/// ```no_run
/// use cuda_runtime::{pointer_attributes, DeviceBuffer, MemoryType};
/// # fn main() -> cuda_runtime::Result<()> {
/// let b = DeviceBuffer::<u32>::new(16)?;
/// let attr = pointer_attributes(b.as_raw())?;
/// assert_eq!(attr.memory_type, MemoryType::Device);
/// assert_eq!(attr.device_pointer, Some(b.as_raw()));
/// # Ok(()) }
/// ```
#[doc(alias = "cudaPointerGetAttributes")]
pub fn pointer_attributes(ptr: u64) -> Result<PointerAttributes> {
    record((|| {
        // A context must be current for the driver to see the address space.
        let a = context::enter_current()?;
        use sys::CUpointer_attribute::*;
        let (mut ty, mut ordinal, mut managed) = (0u32, -2i32, 0u32);
        let (mut dptr, mut hptr) = (0u64, 0u64);
        let mut attrs = [
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
            CU_POINTER_ATTRIBUTE_HOST_POINTER,
        ];
        let mut data: [*mut std::ffi::c_void; 5] = [
            (&mut ty as *mut u32).cast(),
            (&mut ordinal as *mut i32).cast(),
            (&mut managed as *mut u32).cast(),
            (&mut dptr as *mut u64).cast(),
            (&mut hptr as *mut u64).cast(),
        ];
        // SAFETY: each data pointer points to a value of its attribute's type; the call only
        // inspects the address (unknown addresses leave the outputs untouched).
        a.check(
            unsafe {
                sys::cuPointerGetAttributes(
                    attrs.len() as u32,
                    attrs.as_mut_ptr(),
                    data.as_mut_ptr(),
                    ptr,
                )
            },
            "cuPointerGetAttributes",
        )?;
        let memory_type = if managed != 0 {
            MemoryType::Managed
        } else if ty == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32 {
            MemoryType::Host
        } else if ty == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
            MemoryType::Device
        } else {
            MemoryType::Unregistered
        };
        let nz = |v: u64| (v != 0).then_some(v);
        Ok(match memory_type {
            MemoryType::Unregistered => PointerAttributes {
                memory_type,
                device: -2,
                device_pointer: None,
                host_pointer: Some(ptr),
            },
            _ => PointerAttributes {
                memory_type,
                device: ordinal,
                device_pointer: nz(dptr),
                host_pointer: nz(hptr),
            },
        })
    })())
}
