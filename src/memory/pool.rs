//! Stream-ordered memory pools: `cudaMemPoolCreate`, `cudaDeviceGetDefaultMemPool`,
//! `cudaMemPoolSetAttribute` / `cudaMemPoolGetAttribute`, `cudaMemPoolTrimTo`.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};
use crate::Device;

use super::device::Alloc;
use super::{DeviceBuffer, DeviceRepr};

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

/// The pool handles this crate owns (made with [`MemPool::new`] or imported), by raw handle, from
/// their making until their destroy has run: a device's current pool is handed out as the very
/// pool, and an import that yields a handle already owned shares its owner, never a second
/// owner that would destroy it again.
static OWNED: Mutex<Vec<Owned>> = Mutex::new(Vec::new());

/// One entry of [`OWNED`].
#[derive(Debug)]
struct Owned {
    /// The owner's [`PoolInner::id`].
    id: u64,
    raw: Raw<sys::CUmemPoolHandle_st>,
    device: i32,
    generation: u64,
    pool: Weak<PoolInner>,
    /// The owner's [`PoolInner::pointers_imported`].
    left: Arc<AtomicBool>,
}

/// The number of the next owned pool (0 is no owned pool's).
static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
struct PoolInner {
    raw: Raw<sys::CUmemPoolHandle_st>,
    device: i32,
    generation: u64,
    /// Made or imported by the crate (destroyed when the last handle drops), not a device's
    /// default pool.
    owned: bool,
    /// Its entry in [`OWNED`] (0 when not owned).
    id: u64,
    /// Pointers were imported from this (imported) pool: it is left to its context (destroyed
    /// at a reset or process exit), since the imported buffers may outlive the handle. Shared
    /// with the entry in [`OWNED`], so that a later owner of the same handle leaves it too.
    pointers_imported: Arc<AtomicBool>,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        if !self.owned || self.pointers_imported.load(Ordering::Acquire) {
            // (A pool left to its context keeps its entry: a later import of the handle
            // shares the decision.)
            return;
        }
        let (raw, id) = (self.raw, self.id);
        context::release(
            self.device,
            self.generation,
            "destroying a memory pool",
            move |a| {
                // Under the registry's lock: an import that yielded this handle since its last
                // owner dropped took it over (the entry is gone: destroyed by the new owner),
                // or finds it destroyed.
                let mut owned = OWNED.lock();
                let Some(i) = owned.iter().position(|e| e.id == id) else {
                    return Ok(());
                };
                if owned[i].left.load(Ordering::Acquire) {
                    return Ok(());
                }
                owned.swap_remove(i);
                // SAFETY: a pool this crate owns in this live context, destroyed once (its
                // entry is gone). Allocations still outstanding keep their memory: the driver
                // releases the pool after they are freed.
                a.check(
                    unsafe { sys::cuMemPoolDestroy(raw.get()) },
                    "cuMemPoolDestroy",
                )
            },
        );
    }
}

/// A stream-ordered memory pool (`cudaMemPool_t`). Cloning shares the pool; a pool made with
/// [`MemPool::new`] or imported with [`MemPool::import_fd`] is destroyed when the last clone
/// drops (allocations from it stay valid). One pool handle has one owner: an import that yields
/// a handle this process holds already returns a clone of it.
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
            Ok(MemPool::own(&mut OWNED.lock(), &a, raw))
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
            Ok(MemPool::borrowed(&a, raw))
        })())
    }

    /// A handle to a device's default pool (not owned: never destroyed by the crate).
    fn borrowed(a: &Active, raw: sys::CUmemoryPool) -> MemPool {
        MemPool {
            inner: Arc::new(PoolInner {
                raw: Raw(raw),
                device: a.dev.ordinal,
                generation: a.generation(),
                owned: false,
                id: 0,
                pointers_imported: Arc::new(AtomicBool::new(false)),
            }),
        }
    }

    /// The owner of `raw`, a pool handle of the entered context `a` that the crate just made
    /// or imported, registered in `owned` (the locked [`OWNED`]). A handle that has an owner
    /// already (an import of a pool this process holds) gets that owner; one whose last owner
    /// dropped and whose destroy has not run yet is taken over (that destroy is then skipped).
    fn own(owned: &mut Vec<Owned>, a: &Active, raw: sys::CUmemoryPool) -> MemPool {
        let (device, generation) = a.id();
        // Entries of this device's reset contexts are dead (their destroys never run); owners
        // still held stay.
        owned.retain(|e| {
            e.pool.strong_count() > 0 || e.device != device || e.generation == generation
        });
        let mut left = Arc::new(AtomicBool::new(false));
        if let Some(i) = owned
            .iter()
            .position(|e| e.raw.get() == raw && e.device == device && e.generation == generation)
        {
            if let Some(inner) = owned[i].pool.upgrade() {
                return MemPool { inner };
            }
            left = owned.swap_remove(i).left;
        }
        let inner = Arc::new(PoolInner {
            raw: Raw(raw),
            device,
            generation,
            owned: true,
            id: NEXT_POOL.fetch_add(1, Ordering::Relaxed),
            pointers_imported: left,
        });
        owned.push(Owned {
            id: inner.id,
            raw: inner.raw,
            device,
            generation,
            pool: Arc::downgrade(&inner),
            left: inner.pointers_imported.clone(),
        });
        MemPool { inner }
    }

    /// Sets how `device`'s work may access the pool's memory (`cudaMemPoolSetAccess`, one
    /// descriptor). The pool's own device always has read-write access, which cannot be
    /// lowered.
    ///
    /// The crate refuses kernels and copies of one device on another device's memory, except
    /// peer copies, which need no pool access. Unlike libcudart, any change of `device`'s access
    /// (lowering or granting) first waits for `device`'s work when a peer copy reading this
    /// pool's device's memory was ever queued on it: the driver changes the mapping under such
    /// a copy, which then may fail with both devices' contexts, as for
    /// [`Device::disable_peer_access`](crate::Device::disable_peer_access) (a grant beside a
    /// toggling thread did so on driver 580: `probes/peer_toggle_suspects.cu`).
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
            let set = || {
                // SAFETY: live pool; one valid descriptor.
                a.check(
                    unsafe { sys::cuMemPoolSetAccess(self.as_raw(), &desc, 1) },
                    "cuMemPoolSetAccess",
                )
            };
            // Every change of another device's access waits for its peer copies, granting too:
            // on driver 580 a copy failed (both contexts with it) beside grants made while
            // queued copies ran (`probes/peer_toggle_suspects.cu`, case c against c2).
            if device.ordinal() == self.inner.device {
                set()
            } else {
                // The accessor is entered by the wait itself, before the gate is taken.
                crate::context::change_peer_path(device.ordinal(), self.inner.device, set)
            }
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

/// What another process needs to import one allocation of an exported pool
/// (`cudaMemPoolPtrExportData`): 64 opaque bytes, sent by any means.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PoolPtrExport(pub [u8; 64]);

impl std::fmt::Debug for PoolPtrExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PoolPtrExport({})", self.to_hex())
    }
}

impl PoolPtrExport {
    /// The data as 128 hexadecimal digits, for passing as text.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses [`to_hex`](Self::to_hex)'s output.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for anything but 128 hexadecimal digits.
    pub fn from_hex(s: &str) -> Result<PoolPtrExport> {
        super::ipc::parse_hex(s, "pool pointer export data").map(PoolPtrExport)
    }
}

/// Pointers imported from other processes' pools and still owned by a buffer here: (device,
/// context generation, address, export data). A second import of the same data would alias
/// the first buffer, and its free would release the first one's memory.
/// (device, context generation, address, export data) of one imported pointer.
type Import = (i32, u64, u64, [u8; 64]);

static IMPORTS: Mutex<Vec<Import>> = Mutex::new(Vec::new());

/// Export data this process handed out for its own allocations ([`DeviceBuffer::pool_export`]),
/// with the device, context generation and address of the allocation exported. The driver lets
/// a process import its own export through an import of its own pool: that mapping is a second
/// owner of the allocation's memory, which it does not keep alive (after the exporter's free,
/// it reaches whatever allocation the pool gives that memory next). Any import of this data
/// here is refused, the exporting buffer's drop notwithstanding (its memory may be another
/// allocation's by then). Kept for the context's life: one entry per distinct export data.
static EXPORTED: Mutex<BTreeMap<[u8; 64], (i32, u64, u64)>> = Mutex::new(BTreeMap::new());

/// Notes export data handed out for this process's allocation at `ptr` (see [`EXPORTED`]).
fn note_export(data: [u8; 64], device: i32, generation: u64, ptr: u64) {
    let mut exported = EXPORTED.lock();
    if exported.insert(data, (device, generation, ptr)).is_none() {
        // A new entry: those of this device's reset contexts go (their memory went with the
        // context).
        exported.retain(|_, &mut (d, g, _)| d != device || g == generation);
    }
}

/// The allocation of this process that `data` was exported from, if any: (device, address).
fn exported_here(data: &[u8; 64]) -> Option<(i32, u64)> {
    EXPORTED.lock().get(data).map(|&(d, _, p)| (d, p))
}

/// Forgets an imported pointer once freed (from the buffer's drop).
pub(crate) fn forget_import(device: i32, generation: u64, ptr: u64) {
    IMPORTS
        .lock()
        .retain(|&(d, g, p, _)| !(d == device && g == generation && p == ptr));
}

impl MemPool {
    /// A POSIX file descriptor another process can import the pool from
    /// (`cudaMemPoolExportToShareableHandle` with `cudaMemHandleTypePosixFileDescriptor`).
    /// Send it over a Unix socket (`SCM_RIGHTS`) or let a child inherit it.
    ///
    /// # Errors
    /// The driver's `cudaErrorInvalidValue` unless the pool was made with
    /// [`ShareableHandle::PosixFileDescriptor`].
    #[doc(alias = "cudaMemPoolExportToShareableHandle")]
    pub fn export_fd(&self) -> Result<OwnedFd> {
        record((|| {
            let a = self.enter()?;
            let mut fd: libc::c_int = -1;
            // SAFETY: live pool; for this handle type the driver writes one int.
            a.check(
                unsafe {
                    sys::cuMemPoolExportToShareableHandle(
                        (&mut fd as *mut libc::c_int).cast(),
                        self.as_raw(),
                        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                        0,
                    )
                },
                "cuMemPoolExportToShareableHandle",
            )?;
            if fd < 0 {
                return Err(Error::InvalidValue {
                    what: "cudaMemPoolExportToShareableHandle",
                    value: fd.to_string(),
                    reason: "the driver returned no file descriptor",
                });
            }
            // SAFETY: a descriptor the driver just opened for the caller, owned by nobody else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        })())
    }

    /// Imports a pool another process exported ([`export_fd`](Self::export_fd)) on `device`,
    /// the device of this process that is the exporter's
    /// (`cudaMemPoolImportFromShareableHandle`). The descriptor stays the caller's. The pool
    /// serves only [`DeviceBuffer::import_from_pool`]; allocating from it is refused by the
    /// driver.
    ///
    /// The driver hands out the same handle when a process imports one pool twice: the second
    /// import then returns a clone of the first (one owner of the handle, destroyed when the
    /// last clone drops), as it does for a handle that is this process's own pool.
    #[doc(alias = "cudaMemPoolImportFromShareableHandle")]
    pub fn import_fd(fd: BorrowedFd<'_>, device: Device) -> Result<MemPool> {
        record((|| {
            let a = context::enter(device.ordinal())?;
            // Held from the import until its owner is registered: a destroy of the same handle
            // (its last owner dropped meanwhile) runs wholly before or after.
            let mut owned = OWNED.lock();
            let mut raw: sys::CUmemoryPool = std::ptr::null_mut();
            // SAFETY: the context is current; for this handle type the handle is the
            // descriptor's number passed as a pointer-sized value, which the driver reads and
            // does not close.
            a.check(
                unsafe {
                    sys::cuMemPoolImportFromShareableHandle(
                        &mut raw,
                        fd.as_raw_fd() as isize as *mut std::ffi::c_void,
                        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                        0,
                    )
                },
                "cuMemPoolImportFromShareableHandle",
            )?;
            Ok(MemPool::own(&mut owned, &a, raw))
        })())
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// What another process needs to import this allocation from the pool it was made from
    /// (`cudaMemPoolExportPointer`). Waits until the allocation exists in its stream's order
    /// first (the importer must not use it earlier).
    ///
    /// Keep this buffer alive until every importer has dropped its buffer: the runtime requires
    /// imported memory to be freed before the exporter frees it (order them with an
    /// interprocess event, or wait for the other process to end).
    ///
    /// # Errors
    /// The driver's error unless the buffer came from a pool made with a shareable handle type
    /// ([`DeviceBuffer::new_from_pool_async`]); [`Error::InvalidValue`] for an empty buffer.
    #[doc(alias = "cudaMemPoolExportPointer")]
    pub fn pool_export(&self) -> Result<PoolPtrExport> {
        record((|| {
            let al: &Alloc = super::sealed_allocation(self);
            if al.bytes == 0 {
                return Err(Error::InvalidValue {
                    what: "cudaMemPoolExportPointer",
                    value: "an empty buffer".into(),
                    reason: "an empty buffer has no allocation to share",
                });
            }
            al.wait_allocated()?;
            let a = context::enter_handle(al.device, al.generation, "device buffer")?;
            let mut data = sys::CUmemPoolPtrExportData { reserved: [0; 64] };
            // SAFETY: a live allocation of this context; valid out-parameter.
            a.check(
                unsafe { sys::cuMemPoolExportPointer(&mut data, al.ptr) },
                "cuMemPoolExportPointer",
            )?;
            note_export(data.reserved, al.device, al.generation, al.ptr);
            Ok(PoolPtrExport(data.reserved))
        })())
    }

    /// Imports `len` elements of an allocation another process exported
    /// ([`pool_export`](Self::pool_export)) from `pool`, which was imported from that process
    /// (`cudaMemPoolImportPointer`). Dropping the buffer frees the import (`cudaFreeAsync`,
    /// after the work that used it), not the exporter's memory.
    ///
    /// Accesses are not synchronised with the other process: order them with interprocess
    /// events. A pool from which pointers were imported is left to its context when its last
    /// handle drops (destroyed at a reset or at exit), since the buffers may outlive it.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when this process already holds a buffer for the same export
    /// (a second one would alias it), and for data this process exported itself (the
    /// allocation has its owner here: the exporting buffer); [`Error::OutOfRange`] when `len`
    /// elements exceed the allocation; [`Error::DeviceMismatch`] when the memory is on another
    /// device than the pool's handle says; the driver's errors for a pool or data that do not
    /// belong together.
    #[doc(alias = "cudaMemPoolImportPointer")]
    pub fn import_from_pool(
        pool: &MemPool,
        data: &PoolPtrExport,
        len: usize,
    ) -> Result<DeviceBuffer<T>> {
        record((|| {
            if let Some((device, ptr)) = exported_here(&data.0) {
                return Err(Error::InvalidValue {
                    what: "cudaMemPoolImportPointer",
                    value: format!(
                        "{data:?} (exported by this process from its allocation at {ptr:#x} \
                         on device {device})"
                    ),
                    reason: "the allocation is this process's own: an imported buffer would \
                             be a second owner of its memory, alive past the exporter's free",
                });
            }
            let a = pool.enter()?;
            let (device, generation) = a.id();
            let mut imports = IMPORTS.lock();
            if imports
                .iter()
                .any(|(d, g, _, x)| *d == device && *g == generation && *x == data.0)
            {
                return Err(Error::InvalidValue {
                    what: "cudaMemPoolImportPointer",
                    value: format!("{data:?}"),
                    reason: "this process holds a buffer of that allocation already; a second \
                             one would alias it",
                });
            }
            let mut raw_data = sys::CUmemPoolPtrExportData { reserved: data.0 };
            let mut ptr = 0u64;
            // SAFETY: live (imported) pool of this context; valid data and out-parameter.
            a.check(
                unsafe { sys::cuMemPoolImportPointer(&mut ptr, pool.as_raw(), &mut raw_data) },
                "cuMemPoolImportPointer",
            )?;
            pool.inner.pointers_imported.store(true, Ordering::Release);
            if imports
                .iter()
                .any(|(d, g, p, _)| *d == device && *g == generation && *p == ptr)
            {
                // The same allocation through other export data: the address is a live
                // buffer's. It is not freed here (that could free the live buffer's memory);
                // at worst the driver keeps one more reference until the context goes.
                return Err(Error::InvalidValue {
                    what: "cudaMemPoolImportPointer",
                    value: format!("{data:?} (mapped at {ptr:#x})"),
                    reason: "this process holds a buffer of that allocation already; a second \
                             one would alias it",
                });
            }
            let (mut base, mut size) = (0u64, 0usize);
            // SAFETY: `ptr` is a live import of this context; valid out-parameters.
            let range = a.check(
                unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) },
                "cuMemGetAddressRange",
            );
            let mut ordinal = -1i32;
            // SAFETY: as above; the attribute is one int.
            let ord = a.check(
                unsafe {
                    sys::cuPointerGetAttribute(
                        (&mut ordinal as *mut i32).cast(),
                        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                        ptr,
                    )
                },
                "cuPointerGetAttribute",
            );
            let avail = size.saturating_sub(ptr.saturating_sub(base) as usize);
            let err = match (range, ord) {
                (Err(e), _) | (_, Err(e)) => Some(e),
                _ if ordinal != device => Some(Error::DeviceMismatch {
                    call: "cudaMemPoolImportPointer",
                    what: "the imported memory",
                    found: ordinal,
                    expected: device,
                }),
                _ => match len.checked_mul(std::mem::size_of::<T>()) {
                    Some(b) if b <= avail => None,
                    _ => Some(Error::OutOfRange {
                        what: "imported allocation (elements)",
                        start: 0,
                        end: len,
                        len: avail / std::mem::size_of::<T>().max(1),
                    }),
                },
            };
            if let Some(e) = err {
                // Relaxed, as every free of the crate: a capture-unsafe call in the thread's
                // mode would invalidate a capture open elsewhere in global mode, and fail
                // (review rev-c14: it was a bare call, its result ignored).
                // SAFETY: imported above, unused; freed once (the runtime allows cuMemFree of
                // imported memory).
                let r = crate::queue::relaxed(|| unsafe { sys::cuMemFree_v2(ptr) });
                if let Err(f) = a.check(r, "cuMemFree") {
                    a.dev.defer("freeing a refused pool import", f);
                }
                return Err(e);
            }
            imports.push((device, generation, ptr, data.0));
            drop(imports);
            let mut al = Alloc::plain(ptr, avail, device, generation);
            al.pool_import = true;
            Ok(DeviceBuffer::from_alloc(al, len))
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
                return Ok(MemPool::borrowed(&a, cur));
            }
            let generation = a.generation();
            // (Only the matching entry is upgraded: an owner made here and dropped under the
            // lock would take the lock again in its drop.)
            let found = OWNED
                .lock()
                .iter()
                .find(|e| {
                    e.raw.get() == cur && e.device == self.ordinal() && e.generation == generation
                })
                .and_then(|e| e.pool.upgrade());
            found
                .map(|inner| MemPool { inner })
                .ok_or_else(|| Error::InvalidValue {
                    what: "cudaDeviceGetMemPool",
                    value: format!("pool {cur:p} of device {}", self.ordinal()),
                    reason:
                        "the device's current pool was set outside this crate; its lifetime is \
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
    fn export_data_round_trips_as_text() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..50 {
            let mut b = [0u8; 64];
            b.iter_mut().for_each(|x| *x = rng.u8(..));
            let d = PoolPtrExport(b);
            assert_eq!(PoolPtrExport::from_hex(&d.to_hex()).unwrap(), d);
        }
        let e = PoolPtrExport::from_hex("12").unwrap_err();
        assert!(e.to_string().contains("128 hexadecimal"), "{e}");
        assert!(PoolPtrExport::from_hex(&"x".repeat(128)).is_err());
    }

    #[test]
    fn imports_are_forgotten_exactly() {
        IMPORTS.lock().push((7, 3, 0x1000, [1; 64]));
        IMPORTS.lock().push((7, 3, 0x2000, [2; 64]));
        forget_import(7, 3, 0x1000);
        forget_import(7, 4, 0x2000);
        let left: Vec<u64> = IMPORTS
            .lock()
            .iter()
            .filter(|e| e.0 == 7)
            .map(|e| e.2)
            .collect();
        assert_eq!(left, vec![0x2000]);
        forget_import(7, 3, 0x2000);
    }

    #[test]
    fn exports_are_remembered_per_device_and_live_context() {
        // A device number no real device has.
        note_export([9; 64], 9201, 3, 0x1000);
        note_export([8; 64], 9201, 3, 0x2000);
        note_export([9; 64], 9201, 3, 0x1000);
        assert_eq!(exported_here(&[9; 64]), Some((9201, 0x1000)));
        assert_eq!(exported_here(&[8; 64]), Some((9201, 0x2000)));
        assert_eq!(exported_here(&[7; 64]), None);
        // Another device's export stays; the device's exports of an earlier context go when a
        // later context exports.
        note_export([6; 64], 9202, 1, 0x3000);
        note_export([5; 64], 9201, 4, 0x4000);
        assert_eq!(exported_here(&[9; 64]), None);
        assert_eq!(exported_here(&[8; 64]), None);
        assert_eq!(exported_here(&[6; 64]), Some((9202, 0x3000)));
        assert_eq!(exported_here(&[5; 64]), Some((9201, 0x4000)));
    }

    #[test]
    fn access_flags_round_trip() {
        for a in [PoolAccess::None, PoolAccess::Read, PoolAccess::ReadWrite] {
            assert_eq!(PoolAccess::from_raw(a.to_raw() as u32).unwrap(), a);
        }
        let e = PoolAccess::from_raw(2).unwrap_err();
        assert!(e.to_string().contains("2"), "{e}");
    }
}
