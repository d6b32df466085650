//! Stream-ordered memory pools: `cudaMemPoolCreate`, `cudaDeviceGetDefaultMemPool`,
//! `cudaMemPoolSetAttribute` / `cudaMemPoolGetAttribute`, `cudaMemPoolTrimTo`.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};
use crate::Device;

bitflags::bitflags! {
    /// When a pool may reuse memory freed in stream order (`cudaMemPoolReuse*` attributes).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct ReusePolicy: u32 {
        /// Reuse memory freed in another stream once an event dependency orders the streams
        /// (`cudaMemPoolReuseFollowEventDependencies`).
        const FOLLOW_EVENT_DEPENDENCIES = 0x1;
        /// Reuse memory whose free has already completed on the device, without ordering
        /// (`cudaMemPoolReuseAllowOpportunistic`).
        const ALLOW_OPPORTUNISTIC = 0x2;
        /// Reuse memory by inserting dependencies on the freeing stream
        /// (`cudaMemPoolReuseAllowInternalDependencies`).
        const ALLOW_INTERNAL_DEPENDENCIES = 0x4;
    }
}

/// How a pool's memory may be shared with other processes (`cudaMemAllocationHandleType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ShareableHandle {
    /// Not shareable (`cudaMemHandleTypeNone`).
    #[default]
    None,
    /// POSIX file descriptors (`cudaMemHandleTypePosixFileDescriptor`).
    PosixFileDescriptor,
}

/// Properties of a new pool (`cudaMemPoolProps`): plain data with `Default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemPoolProps {
    /// How its memory may be exported.
    pub handle_type: ShareableHandle,
    /// The most memory the pool may reserve, in bytes; 0 for the system's default.
    pub max_size: usize,
}

/// Memory statistics of a pool (the `cudaMemPoolAttr*Mem*` attributes), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Memory reserved from the device now (`cudaMemPoolAttrReservedMemCurrent`).
    pub reserved_current: u64,
    /// Highest reserved since the last reset (`cudaMemPoolAttrReservedMemHigh`).
    pub reserved_high: u64,
    /// Memory handed out to allocations now (`cudaMemPoolAttrUsedMemCurrent`).
    pub used_current: u64,
    /// Highest used since the last reset (`cudaMemPoolAttrUsedMemHigh`).
    pub used_high: u64,
}

/// How a device may access a pool's memory (`cudaMemAccessFlags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolAccess {
    /// No access (`cudaMemAccessFlagsProtNone`).
    None,
    /// Reads only (`cudaMemAccessFlagsProtRead`).
    Read,
    /// Reads and writes (`cudaMemAccessFlagsProtReadWrite`).
    ReadWrite,
}

impl PoolAccess {
    fn to_raw(self) -> sys::CUmemAccess_flags {
        use sys::CUmemAccess_flags::*;
        match self {
            PoolAccess::None => CU_MEM_ACCESS_FLAGS_PROT_NONE,
            PoolAccess::Read => CU_MEM_ACCESS_FLAGS_PROT_READ,
            PoolAccess::ReadWrite => CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        }
    }

    fn from_raw(n: u32) -> Result<PoolAccess> {
        match n {
            0 => Ok(PoolAccess::None),
            1 => Ok(PoolAccess::Read),
            3 => Ok(PoolAccess::ReadWrite),
            n => Err(Error::InvalidValue {
                what: "access flags from the driver",
                value: n.to_string(),
                reason: "not a cudaMemAccessFlags value",
            }),
        }
    }
}

/// The pools this crate created and that still live, so that a device's current pool can be
/// handed out as the very pool (sharing its lifetime), never as a second owner.
static OWNED: Mutex<Vec<Weak<PoolInner>>> = Mutex::new(Vec::new());

#[derive(Debug)]
struct PoolInner {
    raw: Raw<sys::CUmemPoolHandle_st>,
    device: i32,
    generation: u64,
    /// Made by the crate (destroyed on drop), not a device's default pool.
    owned: bool,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let raw = self.raw;
        context::release(
            self.device,
            self.generation,
            "destroying a memory pool",
            move |a| {
                // SAFETY: a pool this crate created in this live context. Allocations still
                // outstanding keep their memory: the driver releases the pool after they are freed.
                a.check(
                    unsafe { sys::cuMemPoolDestroy(raw.get()) },
                    "cuMemPoolDestroy",
                )
            },
        );
    }
}

/// A stream-ordered memory pool (`cudaMemPool_t`). Cloning shares the pool; a pool made with
/// [`MemPool::new`] is destroyed when the last clone drops (allocations from it stay valid).
///
/// ```no_run
/// use cuda_runtime::{DeviceBuffer, MemPool, MemPoolProps, Device, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let pool = MemPool::new(Device::current()?, MemPoolProps::default())?;
/// pool.set_release_threshold(u64::MAX)?; // keep freed memory for reuse
/// let stream = Stream::new()?;
/// for _ in 0..100 {
///     let b = DeviceBuffer::<u8>::new_from_pool_async(1 << 20, &pool, &stream)?;
///     drop(b); // freed in stream order, reused by the next allocation
/// }
/// stream.synchronize()?;
/// assert!(pool.stats()?.reserved_current >= 1 << 20);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemPool {
    inner: Arc<PoolInner>,
}

impl MemPool {
    /// Creates a pool of device memory on `device` (`cudaMemPoolCreate`).
    #[doc(alias = "cudaMemPoolCreate")]
    pub fn new(device: Device, props: MemPoolProps) -> Result<MemPool> {
        record((|| {
            let a = context::enter(device.ordinal())?;
            // SAFETY: all-zero is a valid `CUmemPoolProps` (plain integers and a null pointer);
            // the fields that matter are set below.
            let mut p: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
            p.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
            p.handleTypes = match props.handle_type {
                ShareableHandle::None => sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
                ShareableHandle::PosixFileDescriptor => {
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                }
            };
            p.location = sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: device.ordinal(),
            };
            p.maxSize = props.max_size;
            let mut raw: sys::CUmemoryPool = std::ptr::null_mut();
            // SAFETY: the context is current; valid properties and out-parameter.
            a.check(
                unsafe { sys::cuMemPoolCreate(&mut raw, &p) },
                "cuMemPoolCreate",
            )?;
            Ok(MemPool::wrap(&a, raw, true))
        })())
    }

    /// The device's default pool, used by [`DeviceBuffer::new_async`](crate::DeviceBuffer::new_async)
    /// (`cudaDeviceGetDefaultMemPool`).
    #[doc(alias = "cudaDeviceGetDefaultMemPool")]
    pub fn default_for(device: Device) -> Result<MemPool> {
        record((|| {
            let a = context::enter(device.ordinal())?;
            let mut raw: sys::CUmemoryPool = std::ptr::null_mut();
            // SAFETY: valid device and out-parameter.
            a.check(
                unsafe { sys::cuDeviceGetDefaultMemPool(&mut raw, a.dev.raw) },
                "cuDeviceGetDefaultMemPool",
            )?;
            Ok(MemPool::wrap(&a, raw, false))
        })())
    }

    fn wrap(a: &Active, raw: sys::CUmemoryPool, owned: bool) -> MemPool {
        let inner = Arc::new(PoolInner {
            raw: Raw(raw),
            device: a.dev.ordinal,
            generation: a.generation(),
            owned,
        });
        if owned {
            let mut pools = OWNED.lock();
            pools.retain(|w| w.strong_count() > 0);
            pools.push(Arc::downgrade(&inner));
        }
        MemPool { inner }
    }

    /// Sets how `device`'s work may access the pool's memory (`cudaMemPoolSetAccess`, one
    /// descriptor). The pool's own device always has read-write access, which cannot be
    /// lowered.
    ///
    /// Revoking access while `device`'s queued work still uses the pool's memory makes that
    /// work fault on the GPU (an error the stream reports, sticky for the device), as in
    /// libcudart; the crate refuses kernels and copies of one device on another device's
    /// memory anyway, except peer copies, which need no pool access.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for lowering the owner's access; the driver's errors for a
    /// device that cannot be a peer of the pool's device.
    #[doc(alias = "cudaMemPoolSetAccess")]
    pub fn set_access(&self, device: Device, access: PoolAccess) -> Result<()> {
        record((|| {
            if device.ordinal() == self.inner.device && access != PoolAccess::ReadWrite {
                return Err(Error::InvalidValue {
                    what: "cudaMemPoolSetAccess",
                    value: format!("{access:?} for device {}", device.ordinal()),
                    reason: "the pool's own device keeps read-write access",
                });
            }
            crate::Device::new(device.ordinal())?;
            let a = self.enter()?;
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: device.ordinal(),
                },
                flags: access.to_raw(),
            };
            // SAFETY: live pool; one valid descriptor.
            a.check(
                unsafe { sys::cuMemPoolSetAccess(self.as_raw(), &desc, 1) },
                "cuMemPoolSetAccess",
            )
        })())
    }

    /// How `device`'s work may access the pool's memory (`cudaMemPoolGetAccess`).
    #[doc(alias = "cudaMemPoolGetAccess")]
    pub fn access(&self, device: Device) -> Result<PoolAccess> {
        record((|| {
            crate::Device::new(device.ordinal())?;
            let a = self.enter()?;
            let mut loc = sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: device.ordinal(),
            };
            // Read as a plain number: a value the bindings' enum lacks must not be formed.
            let mut flags = 0u32;
            // SAFETY: live pool; valid location; `flags` has the enum's size.
            a.check(
                unsafe {
                    sys::cuMemPoolGetAccess(
                        (&mut flags as *mut u32).cast(),
                        self.as_raw(),
                        &mut loc,
                    )
                },
                "cuMemPoolGetAccess",
            )?;
            PoolAccess::from_raw(flags)
        })())
    }

    /// The raw `CUmemoryPool`.
    pub fn as_raw(&self) -> sys::CUmemoryPool {
        self.inner.raw.get()
    }

    /// The device whose memory the pool holds.
    pub fn device(&self) -> Device {
        Device::from_ordinal_unchecked(self.inner.device)
    }

    pub(crate) fn enter(&self) -> Result<Active> {
        context::enter_handle(self.inner.device, self.inner.generation, "memory pool")
    }

    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation
    }

    fn set_attr(&self, attr: sys::CUmemPool_attribute, mut v: u64, is_u64: bool) -> Result<()> {
        let a = self.enter()?;
        let mut v32 = v as i32;
        let p: *mut std::ffi::c_void = if is_u64 {
            (&mut v as *mut u64).cast()
        } else {
            (&mut v32 as *mut i32).cast()
        };
        // SAFETY: live pool; `p` points to a value of the attribute's type.
        a.check(
            unsafe { sys::cuMemPoolSetAttribute(self.as_raw(), attr, p) },
            "cuMemPoolSetAttribute",
        )
    }

    fn get_attr(&self, attr: sys::CUmemPool_attribute, is_u64: bool) -> Result<u64> {
        let a = self.enter()?;
        let (mut v, mut v32) = (0u64, 0i32);
        let p: *mut std::ffi::c_void = if is_u64 {
            (&mut v as *mut u64).cast()
        } else {
            (&mut v32 as *mut i32).cast()
        };
        // SAFETY: live pool; `p` points to a value of the attribute's type.
        a.check(
            unsafe { sys::cuMemPoolGetAttribute(self.as_raw(), attr, p) },
            "cuMemPoolGetAttribute",
        )?;
        Ok(if is_u64 { v } else { v32 as u64 })
    }

    /// Sets how much freed memory the pool keeps reserved before returning it to the system at
    /// the next synchronisation (`cudaMemPoolAttrReleaseThreshold`). `u64::MAX` keeps all.
    #[doc(alias = "cudaMemPoolSetAttribute")]
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        use sys::CUmemPool_attribute::*;
        record(self.set_attr(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, bytes, true))
    }

    /// The release threshold (`cudaMemPoolGetAttribute`, `cudaMemPoolAttrReleaseThreshold`).
    #[doc(alias = "cudaMemPoolGetAttribute")]
    pub fn release_threshold(&self) -> Result<u64> {
        use sys::CUmemPool_attribute::*;
        record(self.get_attr(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, true))
    }

    /// Sets the reuse policies (the three `cudaMemPoolReuse*` attributes).
    pub fn set_reuse_policy(&self, policy: ReusePolicy) -> Result<()> {
        use sys::CUmemPool_attribute::*;
        record((|| {
            for (flag, attr) in [
                (
                    ReusePolicy::FOLLOW_EVENT_DEPENDENCIES,
                    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
                ),
                (
                    ReusePolicy::ALLOW_OPPORTUNISTIC,
                    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                ),
                (
                    ReusePolicy::ALLOW_INTERNAL_DEPENDENCIES,
                    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                ),
            ] {
                self.set_attr(attr, policy.contains(flag) as u64, false)?;
            }
            Ok(())
        })())
    }

    /// The reuse policies in force.
    pub fn reuse_policy(&self) -> Result<ReusePolicy> {
        use sys::CUmemPool_attribute::*;
        record((|| {
            let mut p = ReusePolicy::empty();
            for (flag, attr) in [
                (
                    ReusePolicy::FOLLOW_EVENT_DEPENDENCIES,
                    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
                ),
                (
                    ReusePolicy::ALLOW_OPPORTUNISTIC,
                    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                ),
                (
                    ReusePolicy::ALLOW_INTERNAL_DEPENDENCIES,
                    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                ),
            ] {
                if self.get_attr(attr, false)? != 0 {
                    p |= flag;
                }
            }
            Ok(p)
        })())
    }

    /// Reserved and used memory, current and high-water marks.
    pub fn stats(&self) -> Result<PoolStats> {
        use sys::CUmemPool_attribute::*;
        record((|| {
            Ok(PoolStats {
                reserved_current: self.get_attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, true)?,
                reserved_high: self.get_attr(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, true)?,
                used_current: self.get_attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT, true)?,
                used_high: self.get_attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH, true)?,
            })
        })())
    }

    /// Resets both high-water marks to the current values (setting them to 0, as the runtime
    /// requires).
    pub fn reset_high_watermarks(&self) -> Result<()> {
        use sys::CUmemPool_attribute::*;
        record((|| {
            self.set_attr(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0, true)?;
            self.set_attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0, true)
        })())
    }

    /// Releases reserved memory until at most `min_bytes` stay reserved (`cudaMemPoolTrimTo`).
    /// Memory backing live allocations is never released.
    #[doc(alias = "cudaMemPoolTrimTo")]
    pub fn trim_to(&self, min_bytes: usize) -> Result<()> {
        record((|| {
            let a = self.enter()?;
            // SAFETY: live pool.
            a.check(
                unsafe { sys::cuMemPoolTrimTo(self.as_raw(), min_bytes) },
                "cuMemPoolTrimTo",
            )
        })())
    }
}

impl Device {
    /// The device's current pool, used by
    /// [`DeviceBuffer::new_async`](crate::DeviceBuffer::new_async) (`cudaDeviceGetMemPool`;
    /// `cudaMemGetMemPool` for a device location and pinned memory): the default pool until
    /// [`set_mem_pool`](Self::set_mem_pool), and after a reset.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the current pool was set outside the crate (through the
    /// driver API): its lifetime is unknown, so no handle to it is given out.
    #[doc(alias = "cudaDeviceGetMemPool")]
    #[doc(alias = "cudaMemGetMemPool")]
    pub fn mem_pool(self) -> Result<MemPool> {
        record((|| {
            let a = context::enter(self.ordinal())?;
            let (mut cur, mut def): (sys::CUmemoryPool, sys::CUmemoryPool) =
                (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: valid device and out-parameters.
            a.check(
                unsafe { sys::cuDeviceGetMemPool(&mut cur, a.dev.raw) },
                "cuDeviceGetMemPool",
            )?;
            // SAFETY: as above.
            a.check(
                unsafe { sys::cuDeviceGetDefaultMemPool(&mut def, a.dev.raw) },
                "cuDeviceGetDefaultMemPool",
            )?;
            if cur == def {
                return Ok(MemPool::wrap(&a, cur, false));
            }
            let generation = a.generation();
            let found = OWNED.lock().iter().find_map(|w| {
                w.upgrade().filter(|p| {
                    p.raw.get() == cur && p.device == self.ordinal() && p.generation == generation
                })
            });
            found.map(|inner| MemPool { inner }).ok_or_else(|| Error::InvalidValue {
                what: "cudaDeviceGetMemPool",
                value: format!("pool {cur:p} of device {}", self.ordinal()),
                reason: "the device's current pool was set outside this crate; its lifetime is \
                         unknown, so no handle to it is given out",
            })
        })())
    }

    /// Makes `pool` the device's current pool, used by
    /// [`DeviceBuffer::new_async`](crate::DeviceBuffer::new_async) (`cudaDeviceSetMemPool`).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when the pool holds another device's memory.
    #[doc(alias = "cudaDeviceSetMemPool")]
    pub fn set_mem_pool(self, pool: &MemPool) -> Result<()> {
        record((|| {
            if pool.inner.device != self.ordinal() {
                return Err(Error::DeviceMismatch {
                    call: "cudaDeviceSetMemPool",
                    what: "the pool",
                    found: pool.inner.device,
                    expected: self.ordinal(),
                });
            }
            let a = pool.enter()?;
            // SAFETY: live pool of this device.
            a.check(
                unsafe { sys::cuDeviceSetMemPool(a.dev.raw, pool.as_raw()) },
                "cuDeviceSetMemPool",
            )
        })())
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<MemPool>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_round_trip() {
        for a in [PoolAccess::None, PoolAccess::Read, PoolAccess::ReadWrite] {
            assert_eq!(PoolAccess::from_raw(a.to_raw() as u32).unwrap(), a);
        }
        let e = PoolAccess::from_raw(2).unwrap_err();
        assert!(e.to_string().contains("2"), "{e}");
    }
}
