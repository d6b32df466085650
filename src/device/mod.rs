//! Devices: enumeration, the per-thread current device, properties and attributes, flags,
//! limits, cache configuration, synchronisation and reset.

mod more;
mod properties;

use std::ffi::c_char;

use bitflags::bitflags;

use crate::context::{self, device_state};
use crate::driver::{self, sys};
use crate::error::{record, DeferredError, Error, Result};

pub use more::{
    choose_device, set_valid_devices, valid_devices, AsyncNotification,
    AsyncNotificationRegistration, AtomicCapability, AtomicOperation, ComputeMode,
    DeviceRequirements, FlushScope, P2PAttribute,
};
pub use properties::{DeviceAttribute, DeviceProperties};

/// The CUDA runtime version this crate implements, as `cudaRuntimeGetVersion` reports it
/// (1000 * major + 10 * minor).
pub const RUNTIME_VERSION: i32 = 13000;

/// The number of CUDA devices (`cudaGetDeviceCount`). Initialises the driver.
///
/// # Errors
/// [`Error::NoDriver`] or [`Error::DriverTooOld`] when no usable driver is installed. Unlike
/// libcudart, a machine whose driver reports no device returns `Ok(0)`.
#[doc(alias = "cudaGetDeviceCount")]
pub fn device_count() -> Result<i32> {
    record(context::device_count())
}

/// Makes `ordinal` the calling thread's current device and initialises its primary context
/// (`cudaSetDevice`, which initialises the device since CUDA 12.0).
///
/// # Errors
/// [`Error::InvalidDevice`] for an ordinal outside `0..device_count()`.
#[doc(alias = "cudaSetDevice")]
pub fn set_device(ordinal: i32) -> Result<()> {
    record(Device::new(ordinal).and_then(Device::set_current))
}

/// The calling thread's current device ordinal (`cudaGetDevice`); 0 until [`set_device`].
///
/// # Errors
/// No usable driver, or no device.
#[doc(alias = "cudaGetDevice")]
pub fn get_device() -> Result<i32> {
    record(Device::current().map(Device::ordinal))
}

/// The version of the installed driver (`cudaDriverGetVersion`): 1000 * major + 10 * minor, or
/// 0 when no driver is installed (as libcudart reports it). Does not initialise the driver.
#[doc(alias = "cudaDriverGetVersion")]
pub fn driver_version() -> i32 {
    driver::driver_version().unwrap_or(0)
}

/// The CUDA runtime version this crate implements (`cudaRuntimeGetVersion`): [`RUNTIME_VERSION`].
#[doc(alias = "cudaRuntimeGetVersion")]
pub fn runtime_version() -> i32 {
    RUNTIME_VERSION
}

/// Waits until all work on the current device is done (`cudaDeviceSynchronize`). Blocks the
/// host; returns errors of earlier asynchronous work.
#[doc(alias = "cudaDeviceSynchronize")]
pub fn synchronize() -> Result<()> {
    record(Device::current().and_then(Device::synchronize_inner))
}

/// Starts profiling on the current device (`cudaProfilerStart`): a profiler attached to the
/// process (Nsight Systems with `--capture-range=cudaProfilerApi`, for example) records from
/// here. Without a profiler it does nothing and succeeds. Does not block the host.
#[doc(alias = "cudaProfilerStart")]
pub fn profiler_start() -> Result<()> {
    record((|| {
        let a = context::enter_current()?;
        // SAFETY: the context is current; the call takes no arguments.
        a.check(unsafe { sys::cuProfilerStart() }, "cuProfilerStart")
    })())
}

/// Stops profiling on the current device (`cudaProfilerStop`), flushing what the profiler
/// recorded. Without a profiler it does nothing and succeeds.
#[doc(alias = "cudaProfilerStop")]
pub fn profiler_stop() -> Result<()> {
    record((|| {
        let a = context::enter_current()?;
        // SAFETY: the context is current; the call takes no arguments.
        a.check(unsafe { sys::cuProfilerStop() }, "cuProfilerStop")
    })())
}

/// A CUDA device, named by its ordinal. Cheap to copy; the device's primary context is created
/// on first use and shared by all threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    ordinal: i32,
}

bitflags! {
    /// Device flags (`cudaSetDeviceFlags`). No schedule bit means `cudaDeviceScheduleAuto`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct DeviceFlags: u32 {
        /// Spin while waiting for the device (`cudaDeviceScheduleSpin`).
        const SCHEDULE_SPIN = 0x1;
        /// Yield the thread while waiting (`cudaDeviceScheduleYield`).
        const SCHEDULE_YIELD = 0x2;
        /// Block on a synchronisation primitive while waiting (`cudaDeviceScheduleBlockingSync`).
        const SCHEDULE_BLOCKING_SYNC = 0x4;
        /// Allow mapped page-locked allocations (`cudaDeviceMapHost`; always on since CUDA 4).
        const MAP_HOST = 0x8;
        /// Keep local memory at its largest size after a launch (`cudaDeviceLmemResizeToMax`).
        const LMEM_RESIZE_TO_MAX = 0x10;
        /// Make synchronous memory operations always synchronise (`cudaDeviceSyncMemops`;
        /// passed to the primary context as `CU_CTX_SYNC_MEMOPS`).
        const SYNC_MEMOPS = 0x80;
    }
}

impl DeviceFlags {
    /// The schedule bits (`cudaDeviceScheduleMask`).
    pub const SCHEDULE_MASK: DeviceFlags = DeviceFlags::from_bits_retain(0x7);

    /// Checks that at most one schedule bit is set.
    fn validate(bits: u32) -> Result<DeviceFlags> {
        let flags = DeviceFlags::from_bits(bits).ok_or_else(|| Error::InvalidFlags {
            call: "cudaSetDeviceFlags",
            flags: bits,
            allowed: DeviceFlags::all().bits(),
        })?;
        if (bits & 0x7).count_ones() > 1 {
            return Err(Error::InvalidValue {
                what: "device flags",
                value: format!("{bits:#x}"),
                reason: "more than one schedule flag (spin, yield, blocking sync) is set",
            });
        }
        Ok(flags)
    }
}

/// A device limit (`cudaLimit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// Stack size of each GPU thread, bytes (`cudaLimitStackSize`).
    StackSize,
    /// Size of the FIFO used by device `printf`, bytes (`cudaLimitPrintfFifoSize`).
    PrintfFifoSize,
    /// Size of the heap used by device `malloc`, bytes (`cudaLimitMallocHeapSize`).
    MallocHeapSize,
    /// Maximum nesting depth of device-runtime synchronisation (`cudaLimitDevRuntimeSyncDepth`).
    DevRuntimeSyncDepth,
    /// Maximum outstanding device-runtime launches (`cudaLimitDevRuntimePendingLaunchCount`).
    DevRuntimePendingLaunchCount,
    /// L2 fetch granularity, bytes, 0 to 128 (`cudaLimitMaxL2FetchGranularity`).
    MaxL2FetchGranularity,
    /// Size of L2 set aside for persisting accesses, bytes (`cudaLimitPersistingL2CacheSize`).
    PersistingL2CacheSize,
}

impl Limit {
    fn to_raw(self) -> sys::CUlimit {
        use sys::CUlimit::*;
        match self {
            Limit::StackSize => CU_LIMIT_STACK_SIZE,
            Limit::PrintfFifoSize => CU_LIMIT_PRINTF_FIFO_SIZE,
            Limit::MallocHeapSize => CU_LIMIT_MALLOC_HEAP_SIZE,
            Limit::DevRuntimeSyncDepth => CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH,
            Limit::DevRuntimePendingLaunchCount => CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT,
            Limit::MaxL2FetchGranularity => CU_LIMIT_MAX_L2_FETCH_GRANULARITY,
            Limit::PersistingL2CacheSize => CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
        }
    }
}

/// The preferred split between L1 and shared memory (`cudaFuncCache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CacheConfig {
    /// No preference (`cudaFuncCachePreferNone`).
    #[default]
    PreferNone,
    /// Prefer larger shared memory (`cudaFuncCachePreferShared`).
    PreferShared,
    /// Prefer larger L1 cache (`cudaFuncCachePreferL1`).
    PreferL1,
    /// Equal L1 and shared memory (`cudaFuncCachePreferEqual`).
    PreferEqual,
}

impl CacheConfig {
    pub(crate) fn to_raw(self) -> sys::CUfunc_cache {
        use sys::CUfunc_cache::*;
        match self {
            CacheConfig::PreferNone => CU_FUNC_CACHE_PREFER_NONE,
            CacheConfig::PreferShared => CU_FUNC_CACHE_PREFER_SHARED,
            CacheConfig::PreferL1 => CU_FUNC_CACHE_PREFER_L1,
            CacheConfig::PreferEqual => CU_FUNC_CACHE_PREFER_EQUAL,
        }
    }

    pub(crate) fn from_raw(raw: u32) -> Result<CacheConfig> {
        Ok(match raw {
            0 => CacheConfig::PreferNone,
            1 => CacheConfig::PreferShared,
            2 => CacheConfig::PreferL1,
            3 => CacheConfig::PreferEqual,
            n => {
                return Err(Error::InvalidValue {
                    what: "cache config from the driver",
                    value: n.to_string(),
                    reason: "not a known CUfunc_cache value",
                })
            }
        })
    }
}

fn c_string(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Device {
    /// The device with this ordinal.
    ///
    /// # Errors
    /// [`Error::InvalidDevice`] for an ordinal outside `0..device_count()`.
    pub fn new(ordinal: i32) -> Result<Device> {
        record(device_state(ordinal).map(|_| Device { ordinal }))
    }

    pub(crate) fn from_ordinal_unchecked(ordinal: i32) -> Device {
        Device { ordinal }
    }

    /// The calling thread's current device (`cudaGetDevice`).
    #[doc(alias = "cudaGetDevice")]
    pub fn current() -> Result<Device> {
        Device::new(context::current_ordinal())
    }

    /// Every device, in ordinal order.
    pub fn all() -> Result<Vec<Device>> {
        Ok((0..device_count()?)
            .map(|ordinal| Device { ordinal })
            .collect())
    }

    /// The device's ordinal.
    pub fn ordinal(self) -> i32 {
        self.ordinal
    }

    /// The raw driver device handle (`CUdevice`).
    pub fn as_raw(self) -> Result<i32> {
        record(device_state(self.ordinal).map(|d| d.raw))
    }

    /// Makes this the calling thread's current device and initialises it (`cudaSetDevice`).
    #[doc(alias = "cudaSetDevice")]
    pub fn set_current(self) -> Result<()> {
        record(context::enter(self.ordinal).map(|_| context::set_current_ordinal(self.ordinal)))
    }

    fn raw(self) -> Result<sys::CUdevice> {
        Ok(device_state(self.ordinal)?.raw)
    }

    /// The device's name (`cudaDeviceProp::name`, `cuDeviceGetName`).
    pub fn name(self) -> Result<String> {
        record((|| {
            let raw = self.raw()?;
            let mut buf = [0 as c_char; 256];
            // SAFETY: the buffer holds 256 chars and the driver writes at most `len` of them.
            driver::check(
                unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, raw) },
                "cuDeviceGetName",
            )?;
            Ok(c_string(&buf))
        })())
    }

    /// The device's 16-byte UUID (`cudaDeviceProp::uuid`, `cuDeviceGetUuid`).
    pub fn uuid(self) -> Result<[u8; 16]> {
        record((|| {
            let raw = self.raw()?;
            // SAFETY: `CUuuid` is plain bytes, for which zero is valid.
            let mut u: sys::CUuuid = unsafe { std::mem::zeroed() };
            // SAFETY: `u` is a valid out-parameter.
            driver::check(
                unsafe { sys::cuDeviceGetUuid_v2(&mut u, raw) },
                "cuDeviceGetUuid",
            )?;
            Ok(u.bytes.map(|b| b as u8))
        })())
    }

    /// The PCI bus id, `domain:bus:device.function` in hex (`cudaDeviceGetPCIBusId`).
    #[doc(alias = "cudaDeviceGetPCIBusId")]
    pub fn pci_bus_id(self) -> Result<String> {
        record((|| {
            let raw = self.raw()?;
            let mut buf = [0 as c_char; 64];
            // SAFETY: the buffer holds 64 chars and the driver writes at most `len` of them.
            driver::check(
                unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, raw) },
                "cuDeviceGetPCIBusId",
            )?;
            Ok(c_string(&buf))
        })())
    }

    /// Total global memory in bytes (`cudaDeviceProp::totalGlobalMem`, `cuDeviceTotalMem`).
    pub fn total_memory(self) -> Result<usize> {
        record((|| {
            let raw = self.raw()?;
            let mut bytes = 0usize;
            // SAFETY: valid out-parameter.
            driver::check(
                unsafe { sys::cuDeviceTotalMem_v2(&mut bytes, raw) },
                "cuDeviceTotalMem",
            )?;
            Ok(bytes)
        })())
    }

    /// Gives the memory the crate's caches hold for this device back to the driver (as
    /// `torch.cuda.empty_cache()`; libcudart has no cache, so no `cuda*` call corresponds): the
    /// blocks of dropped [`DeviceBuffer`](crate::DeviceBuffer)s, which count as free in
    /// [`memory_info`](Self::memory_info) when this returns, and those of dropped
    /// [`PinnedBuffer`](crate::PinnedBuffer)s and [`Array`](crate::Array)s. Buffers dropped
    /// with work still queued join the caches once that work is done. The device blocks are
    /// freed in the crate's stream for frees (this waits only for those frees); page-locked
    /// blocks and arrays are given back with the driver's calls, which wait for the whole
    /// device, as `cudaFreeHost` and `cudaFreeArray` do. The
    /// crate docs, "Memory caches", say what the caches do.
    pub fn release_cached_memory(self) -> Result<()> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            let device = crate::cache::release(&a);
            let host = crate::cache::release_host(&a);
            let arrays = crate::cache::release_arrays(&a);
            drop(a);
            // Managed memory and mipmapped arrays dropped earlier, freed while the device is
            // idle (see the crate docs, "Drops do not wait for unrelated work").
            crate::queue::reclaim(self.ordinal, std::time::Duration::from_millis(100));
            crate::queue::wait_free_stream(&context::enter(self.ordinal)?)?;
            device.and(host).and(arrays)
        })())
    }

    /// The bytes of device memory that [`DeviceBuffer::new`](crate::DeviceBuffer::new)'s
    /// cache holds for this device (blocks of dropped buffers kept for reuse; they count as used
    /// in [`memory_info`](Self::memory_info); page-locked blocks are not counted here). After a
    /// reset it counts the blocks that died with the context until the device's next
    /// allocation forgets them. No `cuda*` call corresponds.
    pub fn cached_memory(self) -> usize {
        crate::cache::cached_bytes(self.ordinal)
    }

    /// Free and total memory in bytes, as `(free, total)` (`cudaMemGetInfo` with this device
    /// current). Initialises the device.
    ///
    /// Device memory that the crate's cache holds for later allocations counts as used (see
    /// [`release_cached_memory`](Self::release_cached_memory)). After [`synchronize`], memory
    /// of buffers dropped earlier that the cache does not keep
    /// counts as free, as after `cudaFree` + `cudaDeviceSynchronize`. Some memory the driver
    /// keeps for itself and never gives back to this figure, with or without this crate (seen
    /// on H100 and H200, driver 580): about 6 MiB once the process has made its first 16 streams
    /// and 2 MiB for the first 8 threads' per-thread streams (kept for later streams, not grown
    /// by them), and device memory that backed managed allocations after they are freed, at
    /// times (64 MiB of 64 set with `cuMemsetD32` and freed through the raw driver).
    #[doc(alias = "cudaMemGetInfo")]
    pub fn memory_info(self) -> Result<(usize, usize)> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            // Memory already freed into the crate's stream for frees counts as free, as after
            // `cudaFree`, once that stream has run the frees (the driver was seen to count it
            // as used until the stream is looked at). A query, never a wait: this call does
            // not block.
            if crate::queue::frees_unwaited(self.ordinal) {
                crate::queue::poll_free_stream(&a)?;
            }
            a.mem_info()
        })())
    }

    /// Waits until all work on this device is done (`cudaDeviceSynchronize` with this device
    /// current). Blocks the host.
    #[doc(alias = "cudaDeviceSynchronize")]
    pub fn synchronize(self) -> Result<()> {
        record(self.synchronize_inner())
    }

    fn synchronize_inner(self) -> Result<()> {
        let before = crate::queue::buried();
        {
            let a = context::enter(self.ordinal)?;
            // Every queue's point before the wait is complete after it: uses on other threads'
            // per-thread streams then need no fence (their owners need not answer).
            let marks = crate::queue::marks(&a);
            // SAFETY: the context is current.
            a.check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")?;
            crate::queue::all_synchronized(marks);
        }
        // Every use is complete now: memory dropped earlier goes back to the driver before
        // this returns (bounded: a free stuck behind another thread's new work is left to the
        // reclaimer).
        crate::queue::reclaim(self.ordinal, std::time::Duration::from_millis(500));
        if crate::queue::buried() != before || crate::queue::frees_unwaited(self.ordinal) {
            // Deferred frees are queued in streams (never `cuMemFree`, which waits for the
            // whole device). Those in the crate's stream for frees (memory of `cudaMalloc`, and
            // stream-ordered memory whose stream may be captured), made by this call's reclaim
            // or earlier by any thread, are waited for here, so that
            // `memory_info` right after this call counts that memory as free, as after
            // `cudaFree` + `cudaDeviceSynchronize`; the stream holds nothing but frees. (Not a
            // second `cuCtxSynchronize`: it would wait for work other threads queued after this
            // call began, and break another thread's global capture; review finding.) Frees
            // queued in an allocation's own stream complete with that stream's work.
            crate::queue::wait_free_stream(&context::enter(self.ordinal)?)?;
        }
        Ok(())
    }

    /// Sets the device flags (`cudaSetDeviceFlags` with this device current). The flags apply to
    /// the device's primary context, now if it is active, or when it is next created.
    ///
    /// # Errors
    /// [`Error::InvalidFlags`] for unknown bits, [`Error::InvalidValue`] for more than one
    /// schedule flag.
    #[doc(alias = "cudaSetDeviceFlags")]
    pub fn set_flags(self, flags: DeviceFlags) -> Result<()> {
        record((|| {
            let flags = DeviceFlags::validate(flags.bits())?;
            let raw = self.raw()?;
            // MapHost is a runtime-level flag (always on); the primary context takes the rest,
            // SyncMemops included (`CU_CTX_SYNC_MEMOPS`, which `cuDevicePrimaryCtxSetFlags`
            // accepts: synchronous memory operations of the context then always synchronise).
            let ctx_flags = flags.bits() & (0x7 | 0x10 | 0x80);
            // SAFETY: plain call on a valid device handle.
            driver::check(
                unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(raw, ctx_flags) },
                "cuDevicePrimaryCtxSetFlags",
            )
        })())
    }

    /// The device flags (`cudaGetDeviceFlags` with this device current). `MAP_HOST` is always
    /// reported, as libcudart does.
    #[doc(alias = "cudaGetDeviceFlags")]
    pub fn flags(self) -> Result<DeviceFlags> {
        record((|| {
            let raw = self.raw()?;
            let (mut flags, mut active) = (0u32, 0i32);
            // SAFETY: valid out-parameters.
            driver::check(
                unsafe { sys::cuDevicePrimaryCtxGetState(raw, &mut flags, &mut active) },
                "cuDevicePrimaryCtxGetState",
            )?;
            Ok(DeviceFlags::from_bits_truncate(flags) | DeviceFlags::MAP_HOST)
        })())
    }

    /// A device limit (`cudaDeviceGetLimit` with this device current).
    #[doc(alias = "cudaDeviceGetLimit")]
    pub fn limit(self, limit: Limit) -> Result<usize> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            let mut v = 0usize;
            // SAFETY: the context is current; valid out-parameter.
            a.check(
                unsafe { sys::cuCtxGetLimit(&mut v, limit.to_raw()) },
                "cuCtxGetLimit",
            )?;
            Ok(v)
        })())
    }

    /// Sets a device limit (`cudaDeviceSetLimit` with this device current). The driver may round
    /// the value; read it back with [`limit`](Self::limit).
    #[doc(alias = "cudaDeviceSetLimit")]
    pub fn set_limit(self, limit: Limit, value: usize) -> Result<()> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            // SAFETY: the context is current.
            a.check(
                unsafe { sys::cuCtxSetLimit(limit.to_raw(), value) },
                "cuCtxSetLimit",
            )
        })())
    }

    /// The preferred cache configuration (`cudaDeviceGetCacheConfig`).
    #[doc(alias = "cudaDeviceGetCacheConfig")]
    pub fn cache_config(self) -> Result<CacheConfig> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            let mut c = sys::CUfunc_cache::CU_FUNC_CACHE_PREFER_NONE;
            // SAFETY: the context is current; valid out-parameter.
            a.check(
                unsafe { sys::cuCtxGetCacheConfig(&mut c) },
                "cuCtxGetCacheConfig",
            )?;
            CacheConfig::from_raw(c as u32)
        })())
    }

    /// Sets the preferred cache configuration (`cudaDeviceSetCacheConfig`). On devices with a
    /// fixed split the call succeeds and has no effect, as in libcudart.
    #[doc(alias = "cudaDeviceSetCacheConfig")]
    pub fn set_cache_config(self, config: CacheConfig) -> Result<()> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            // SAFETY: the context is current.
            a.check(
                unsafe { sys::cuCtxSetCacheConfig(config.to_raw()) },
                "cuCtxSetCacheConfig",
            )
        })())
    }

    /// The stream priority range as `(least, greatest)` (`cudaDeviceGetStreamPriorityRange`).
    /// Lower numbers are higher priorities, so `greatest <= least`.
    #[doc(alias = "cudaDeviceGetStreamPriorityRange")]
    pub fn stream_priority_range(self) -> Result<(i32, i32)> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            let (mut least, mut greatest) = (0i32, 0i32);
            // SAFETY: the context is current; valid out-parameters.
            a.check(
                unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) },
                "cuCtxGetStreamPriorityRange",
            )?;
            Ok((least, greatest))
        })())
    }

    /// Whether this device can access `peer`'s memory directly (`cudaDeviceCanAccessPeer`).
    /// A device cannot be its own peer.
    #[doc(alias = "cudaDeviceCanAccessPeer")]
    pub fn can_access_peer(self, peer: Device) -> Result<bool> {
        record((|| {
            let (raw, peer_raw) = (self.raw()?, peer.raw()?);
            if raw == peer_raw {
                return Ok(false);
            }
            let mut can = 0i32;
            // SAFETY: valid device handles and out-parameter.
            driver::check(
                unsafe { sys::cuDeviceCanAccessPeer(&mut can, raw, peer_raw) },
                "cuDeviceCanAccessPeer",
            )?;
            Ok(can != 0)
        })())
    }

    /// Lets this device's work access `peer`'s memory (`cudaDeviceEnablePeerAccess`, called
    /// with this device current). Access is one-way; enable it from both sides for both.
    ///
    /// Unlike libcudart, and as [`disable_peer_access`](Self::disable_peer_access), first waits
    /// for this device's work when a peer copy reading `peer`'s memory was ever queued on it: a
    /// change of the mapping under a queued copy is not safe on driver 580 (two threads, one
    /// copying, one toggling peer and pool access, made a copy fail with
    /// `cudaErrorLaunchFailure`, sticky for both devices; `probes/peer_toggle_suspects.cu`).
    ///
    /// # Errors
    /// `cudaErrorPeerAccessAlreadyEnabled` when it already is; `cudaErrorPeerAccessUnsupported`
    /// when the devices cannot be peers; `cudaErrorInvalidDevice` for the device itself.
    #[doc(alias = "cudaDeviceEnablePeerAccess")]
    pub fn enable_peer_access(self, peer: Device) -> Result<()> {
        record(self.peer_access(peer, true))
    }

    /// Stops this device's access to `peer`'s memory (`cudaDeviceDisablePeerAccess`).
    ///
    /// Unlike libcudart, first waits for this device's work when a peer copy reading `peer`'s
    /// memory was queued on it: the driver revokes the mapping under such a copy, which then
    /// fails and takes both devices' contexts with it.
    ///
    /// # Errors
    /// `cudaErrorPeerAccessNotEnabled` when access was not enabled.
    #[doc(alias = "cudaDeviceDisablePeerAccess")]
    pub fn disable_peer_access(self, peer: Device) -> Result<()> {
        record(self.peer_access(peer, false))
    }

    fn peer_access(self, peer: Device, enable: bool) -> Result<()> {
        if peer.ordinal == self.ordinal {
            return Err(Error::InvalidDevice {
                ordinal: peer.ordinal,
                count: device_count()?,
            });
        }
        // Held until the call returns: the peer's context cannot be reset meanwhile.
        let p = context::enter(peer.ordinal)?;
        let peer_ctx = p.ctx_raw();
        let a = context::enter(self.ordinal)?;
        // Not under a peer copy still queued on this device: the driver changes the mapping
        // under it (revoked, the copy fails and both contexts with it; granted beside other
        // changes, a copy failed too: `probes/peer_toggle_suspects.cu`, case c).
        context::change_peer_path(self.ordinal, peer.ordinal, || {
            // SAFETY (both calls): both primary contexts are retained and cannot be reset while
            // `p` and `a` live; this device's context is current.
            let (r, call) = if enable {
                let r = unsafe { sys::cuCtxEnablePeerAccess(peer_ctx, 0) };
                (r, "cuCtxEnablePeerAccess")
            } else {
                (
                    unsafe { sys::cuCtxDisablePeerAccess(peer_ctx) },
                    "cuCtxDisablePeerAccess",
                )
            };
            a.check(r, call)
        })
    }

    /// Destroys the device's primary context and everything in it (`cudaDeviceReset`).
    ///
    /// Waits for the crate's calls in flight on the device to return. Every handle made on the
    /// device before the reset (streams, events, buffers, modules...) fails with
    /// [`Error::ContextDestroyed`] afterwards; the next call on the device creates a fresh
    /// primary context. A sticky error is cleared.
    ///
    /// Before destroying the context, waits for other devices whose work reads the device's
    /// memory (peer copies, kernels and copies on its portable mapped or managed memory).
    ///
    /// # Errors
    /// [`Error::ResetWhileBorrowed`] while a CPU view of memory the context owns (write-combined
    /// page-locked or managed memory) is alive; [`Error::InHostFunction`] inside a host
    /// function.
    #[doc(alias = "cudaDeviceReset")]
    pub fn reset(self) -> Result<()> {
        // (The caches forget what died with the context when they are next used in a later
        // one.)
        record(device_state(self.ordinal).and_then(|d| d.reset()))
    }

    /// Takes the errors met in `Drop` of this device's objects (a failed free, say), which had
    /// nowhere to be returned, in the order they happened.
    pub fn take_deferred_errors(self) -> Vec<DeferredError> {
        device_state(self.ordinal)
            .map(|d| d.take_deferred())
            .unwrap_or_default()
    }
}

/// Resets the current device (`cudaDeviceReset`); see [`Device::reset`].
#[doc(alias = "cudaDeviceReset")]
pub fn reset() -> Result<()> {
    record(Device::current().and_then(Device::reset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_validation() {
        assert!(DeviceFlags::validate(0).is_ok());
        assert!(DeviceFlags::validate(0x4 | 0x8).is_ok());
        let e = DeviceFlags::validate(0x1 | 0x4).unwrap_err();
        assert!(e.to_string().contains("0x5"), "{e}");
        let e = DeviceFlags::validate(0x100).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
        assert!(e.to_string().contains("0x100"), "{e}");
    }

    #[test]
    fn cache_config_round_trips() {
        for c in [
            CacheConfig::PreferNone,
            CacheConfig::PreferShared,
            CacheConfig::PreferL1,
            CacheConfig::PreferEqual,
        ] {
            assert_eq!(CacheConfig::from_raw(c.to_raw() as u32).unwrap(), c);
        }
        assert!(CacheConfig::from_raw(9).is_err());
    }
}
