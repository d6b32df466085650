//! The rest of device management: compute modes, peer attributes, PCI bus ids,
//! `cudaChooseDevice`, `cudaInitDevice`, `cudaSetValidDevices`, atomic capabilities, flushing
//! GPUDirect RDMA writes, and asynchronous notifications.

use std::cell::RefCell;
use std::ffi::CString;
use std::sync::Arc;

use bitflags::bitflags;
use parking_lot::Mutex;

use super::{device_count, Device, DeviceFlags};
use crate::context::{self, device_state};
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, Result};

/// How processes may use a device (`cudaComputeMode`), as the administrator set it with
/// `nvidia-smi -c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ComputeMode {
    /// Any number of processes and threads (`cudaComputeModeDefault`).
    Default,
    /// No process may use the device (`cudaComputeModeProhibited`): making its context fails.
    Prohibited,
    /// One process at a time, any number of its threads (`cudaComputeModeExclusiveProcess`).
    ExclusiveProcess,
}

impl ComputeMode {
    /// The mode for a `cudaComputeMode` number.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a number the runtime does not define (1, `Exclusive`, was
    /// removed in CUDA 8).
    pub fn from_raw(raw: i32) -> Result<ComputeMode> {
        match raw {
            0 => Ok(ComputeMode::Default),
            2 => Ok(ComputeMode::Prohibited),
            3 => Ok(ComputeMode::ExclusiveProcess),
            n => Err(Error::InvalidValue {
                what: "compute mode",
                value: n.to_string(),
                reason: "not a cudaComputeMode (0 default, 2 prohibited, 3 exclusive process)",
            }),
        }
    }

    /// The `cudaComputeMode` number.
    pub fn to_raw(self) -> i32 {
        match self {
            ComputeMode::Default => 0,
            ComputeMode::Prohibited => 2,
            ComputeMode::ExclusiveProcess => 3,
        }
    }
}

/// A property of the link from one device to another (`cudaDeviceP2PAttr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum P2PAttribute {
    /// Relative performance of the link: a lower rank is faster
    /// (`cudaDevP2PAttrPerformanceRank`).
    PerformanceRank,
    /// Whether peer access is possible (`cudaDevP2PAttrAccessSupported`).
    AccessSupported,
    /// Whether native atomics work over the link (`cudaDevP2PAttrNativeAtomicSupported`).
    NativeAtomicSupported,
    /// Whether kernels may access CUDA arrays over the link
    /// (`cudaDevP2PAttrCudaArrayAccessSupported`).
    CudaArrayAccessSupported,
    /// Whether only some atomic operations are native over the link
    /// (`cudaDevP2PAttrOnlyPartialNativeAtomicSupported`; see
    /// [`Device::p2p_atomic_capabilities`]).
    OnlyPartialNativeAtomicSupported,
}

impl P2PAttribute {
    fn to_raw(self) -> sys::CUdevice_P2PAttribute {
        use sys::CUdevice_P2PAttribute::*;
        match self {
            P2PAttribute::PerformanceRank => CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
            P2PAttribute::AccessSupported => CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED,
            P2PAttribute::NativeAtomicSupported => CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
            P2PAttribute::CudaArrayAccessSupported => {
                CU_DEVICE_P2P_ATTRIBUTE_ACCESS_ACCESS_SUPPORTED
            }
            P2PAttribute::OnlyPartialNativeAtomicSupported => {
                CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED
            }
        }
    }
}

/// An atomic operation whose support is asked for (`cudaAtomicOperation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AtomicOperation {
    /// Integer add (`cudaAtomicOperationIntegerAdd`).
    IntegerAdd,
    /// Integer minimum (`cudaAtomicOperationIntegerMin`).
    IntegerMin,
    /// Integer maximum (`cudaAtomicOperationIntegerMax`).
    IntegerMax,
    /// Wrapping increment (`cudaAtomicOperationIntegerIncrement`).
    IntegerIncrement,
    /// Wrapping decrement (`cudaAtomicOperationIntegerDecrement`).
    IntegerDecrement,
    /// Bitwise and (`cudaAtomicOperationAnd`).
    And,
    /// Bitwise or (`cudaAtomicOperationOr`).
    Or,
    /// Bitwise exclusive or (`cudaAtomicOperationXOR`).
    Xor,
    /// Exchange (`cudaAtomicOperationExchange`).
    Exchange,
    /// Compare and swap (`cudaAtomicOperationCAS`).
    CompareAndSwap,
    /// Floating-point add (`cudaAtomicOperationFloatAdd`).
    FloatAdd,
    /// Floating-point minimum (`cudaAtomicOperationFloatMin`).
    FloatMin,
    /// Floating-point maximum (`cudaAtomicOperationFloatMax`).
    FloatMax,
}

impl AtomicOperation {
    /// Every operation, in the runtime's order.
    pub const ALL: [AtomicOperation; 13] = [
        AtomicOperation::IntegerAdd,
        AtomicOperation::IntegerMin,
        AtomicOperation::IntegerMax,
        AtomicOperation::IntegerIncrement,
        AtomicOperation::IntegerDecrement,
        AtomicOperation::And,
        AtomicOperation::Or,
        AtomicOperation::Xor,
        AtomicOperation::Exchange,
        AtomicOperation::CompareAndSwap,
        AtomicOperation::FloatAdd,
        AtomicOperation::FloatMin,
        AtomicOperation::FloatMax,
    ];

    fn to_raw(self) -> sys::CUatomicOperation {
        use sys::CUatomicOperation::*;
        match self {
            AtomicOperation::IntegerAdd => CU_ATOMIC_OPERATION_INTEGER_ADD,
            AtomicOperation::IntegerMin => CU_ATOMIC_OPERATION_INTEGER_MIN,
            AtomicOperation::IntegerMax => CU_ATOMIC_OPERATION_INTEGER_MAX,
            AtomicOperation::IntegerIncrement => CU_ATOMIC_OPERATION_INTEGER_INCREMENT,
            AtomicOperation::IntegerDecrement => CU_ATOMIC_OPERATION_INTEGER_DECREMENT,
            AtomicOperation::And => CU_ATOMIC_OPERATION_AND,
            AtomicOperation::Or => CU_ATOMIC_OPERATION_OR,
            AtomicOperation::Xor => CU_ATOMIC_OPERATION_XOR,
            AtomicOperation::Exchange => CU_ATOMIC_OPERATION_EXCHANGE,
            AtomicOperation::CompareAndSwap => CU_ATOMIC_OPERATION_CAS,
            AtomicOperation::FloatAdd => CU_ATOMIC_OPERATION_FLOAT_ADD,
            AtomicOperation::FloatMin => CU_ATOMIC_OPERATION_FLOAT_MIN,
            AtomicOperation::FloatMax => CU_ATOMIC_OPERATION_FLOAT_MAX,
        }
    }
}

bitflags! {
    /// The operand kinds an atomic operation supports natively (`cudaAtomicOperationCapability`).
    /// Empty: the operation is not native over that link.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct AtomicCapability: u32 {
        /// Signed integers (`cudaAtomicCapabilitySigned`).
        const SIGNED = 0x1;
        /// Unsigned integers (`cudaAtomicCapabilityUnsigned`).
        const UNSIGNED = 0x2;
        /// As a reduction (no result returned) (`cudaAtomicCapabilityReduction`).
        const REDUCTION = 0x4;
        /// 32-bit operands (`cudaAtomicCapabilityScalar32`).
        const SCALAR_32 = 0x8;
        /// 64-bit operands (`cudaAtomicCapabilityScalar64`).
        const SCALAR_64 = 0x10;
        /// 128-bit operands (`cudaAtomicCapabilityScalar128`).
        const SCALAR_128 = 0x20;
        /// Vectors of four 32-bit operands (`cudaAtomicCapabilityVector32x4`).
        const VECTOR_32X4 = 0x40;
    }
}

/// What [`choose_device`] looks for (the fields of `cudaDeviceProp` that `cudaChooseDevice`
/// weighs). Zero / `false` / `None` means "no requirement".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceRequirements {
    /// Compute capability major and minor version wanted, `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// Least global memory, bytes.
    pub total_global_mem: usize,
    /// Least number of multiprocessors.
    pub multi_processor_count: i32,
    /// An integrated (`Some(true)`) or discrete (`Some(false)`) device.
    pub integrated: Option<bool>,
    /// Managed memory usable concurrently with the device (`concurrentManagedAccess`).
    pub concurrent_managed_access: bool,
}

/// The device that best matches `wanted` (`cudaChooseDevice`).
///
/// The runtime does not document its weighing; this crate's rule is: devices whose compute mode
/// is not [`ComputeMode::Prohibited`] and that meet every requirement are preferred, among
/// them the one whose compute capability is closest to (at or above) the one asked for, then
/// the one with more multiprocessors, then the lower ordinal. When no device meets every
/// requirement, the one meeting most of them wins (same tie-breaks).
///
/// # Errors
/// [`Error::NoDevice`] without a device; [`Error::InvalidValue`] for a negative compute
/// capability or multiprocessor count.
#[doc(alias = "cudaChooseDevice")]
pub fn choose_device(wanted: &DeviceRequirements) -> Result<Device> {
    record((|| {
        let (major, minor) = wanted.compute_capability;
        if major < 0 || minor < 0 || wanted.multi_processor_count < 0 {
            return Err(Error::InvalidValue {
                what: "cudaChooseDevice requirements",
                value: format!("{wanted:?}"),
                reason: "compute capability and multiprocessor count must not be negative",
            });
        }
        let mut candidates = Vec::new();
        for d in Device::all()? {
            use super::DeviceAttribute as A;
            candidates.push(Candidate {
                ordinal: d.ordinal(),
                cc: (
                    d.attribute(A::ComputeCapabilityMajor)?,
                    d.attribute(A::ComputeCapabilityMinor)?,
                ),
                mem: d.total_memory()?,
                sms: d.attribute(A::MultiProcessorCount)?,
                integrated: d.attribute(A::Integrated)? != 0,
                cma: d.attribute(A::ConcurrentManagedAccess)? != 0,
                prohibited: d.compute_mode()? == ComputeMode::Prohibited,
            });
        }
        best_candidate(wanted, &candidates)
            .map(Device::from_ordinal_unchecked)
            .ok_or(Error::NoDevice)
    })())
}

/// One device's facts as [`choose_device`] weighs them.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    ordinal: i32,
    cc: (i32, i32),
    mem: usize,
    sms: i32,
    integrated: bool,
    cma: bool,
    prohibited: bool,
}

/// [`choose_device`]'s rule over plain data (unit-tested without a GPU).
fn best_candidate(w: &DeviceRequirements, c: &[Candidate]) -> Option<i32> {
    let met = |d: &Candidate| {
        [
            !d.prohibited,
            d.cc >= w.compute_capability,
            d.mem >= w.total_global_mem,
            d.sms >= w.multi_processor_count,
            w.integrated.is_none_or(|i| i == d.integrated),
            !w.concurrent_managed_access || d.cma,
        ]
        .iter()
        .filter(|&&m| m)
        .count()
    };
    // Distance of a capability from the one wanted: those at or above it first, closest first.
    // (In 64 bits: any pair of `i32`s a caller or a driver gives weighs without overflow.)
    let distance = |d: &Candidate| {
        let weigh = |(major, minor): (i32, i32)| i64::from(major) * 100 + i64::from(minor);
        let (have, want) = (weigh(d.cc), weigh(w.compute_capability));
        if have >= want {
            (0, have - want)
        } else {
            (1, want - have)
        }
    };
    c.iter()
        .min_by_key(|d| {
            (
                std::cmp::Reverse(met(d)),
                distance(d),
                std::cmp::Reverse(d.sms),
                d.ordinal,
            )
        })
        .map(|d| d.ordinal)
}

thread_local! {
    /// The list given to `cudaSetValidDevices` on this thread (empty: every device).
    static VALID: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// Sets the devices this thread may use, in order of preference (`cudaSetValidDevices`); an
/// empty list means every device.
///
/// The thread's current device becomes the first device of the list whose compute mode is not
/// [`ComputeMode::Prohibited`] (or, if each is, the first of the list), so that work that names
/// no device goes there; a later [`set_device`](super::set_device) chooses freely, as in
/// libcudart (which consults the list only where it picks a device itself).
///
/// # Errors
/// [`Error::InvalidDevice`] for an ordinal outside `0..device_count()`;
/// [`Error::InvalidValue`] for an ordinal listed twice.
#[doc(alias = "cudaSetValidDevices")]
pub fn set_valid_devices(devices: &[i32]) -> Result<()> {
    record((|| {
        let count = device_count()?;
        for (i, &d) in devices.iter().enumerate() {
            if d < 0 || d >= count {
                return Err(Error::InvalidDevice { ordinal: d, count });
            }
            if devices[..i].contains(&d) {
                return Err(Error::InvalidValue {
                    what: "cudaSetValidDevices list",
                    value: format!("{devices:?}"),
                    reason: "a device is listed twice",
                });
            }
        }
        let mut pick = devices.first().copied();
        for &d in devices {
            if Device::from_ordinal_unchecked(d).compute_mode()? != ComputeMode::Prohibited {
                pick = Some(d);
                break;
            }
        }
        VALID.with(|v| *v.borrow_mut() = devices.to_vec());
        if let Some(d) = pick {
            context::set_current_ordinal(d);
        }
        Ok(())
    })())
}

/// The list last given to [`set_valid_devices`] on this thread (empty: every device).
pub fn valid_devices() -> Vec<i32> {
    VALID.with(|v| v.borrow().clone())
}

/// Whom [`Device::flush_gpu_direct_rdma_writes`] makes the writes visible to
/// (`cudaFlushGPUDirectRDMAWritesScope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushScope {
    /// To the device's own work (`cudaFlushGPUDirectRDMAWritesToOwner`).
    ToOwner,
    /// To every device (`cudaFlushGPUDirectRDMAWritesToAllDevices`).
    ToAllDevices,
}

/// A notification the driver sends about a device (`cudaAsyncNotificationInfo_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsyncNotification {
    /// The application went over its memory budget by this many bytes
    /// (`cudaAsyncNotificationTypeOverBudget`).
    OverBudget {
        /// Bytes over the budget.
        bytes_over_budget: u64,
    },
    /// A notification type this crate does not know, by number.
    Other(u32),
}

type NotifyFn = Arc<dyn Fn(AsyncNotification) + Send + Sync + 'static>;

/// The registration's user data. The driver holds a pointer to it until unregistered; it is
/// never freed (a few bytes per registration), so that a notification racing with the
/// unregistration never reads freed memory. The closure itself is dropped at unregistration,
/// after any call in progress (which holds a clone) returns.
struct NotifySlot {
    f: Mutex<Option<NotifyFn>>,
}

/// A registered asynchronous-notification callback; dropping it unregisters it
/// (`cudaDeviceUnregisterAsyncNotification`).
#[must_use = "dropping the registration unregisters the callback"]
pub struct AsyncNotificationRegistration {
    device: i32,
    dev_raw: sys::CUdevice,
    handle: Raw<sys::CUasyncCallbackEntry_st>,
    slot: &'static NotifySlot,
}

impl std::fmt::Debug for AsyncNotificationRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncNotificationRegistration")
            .field("device", &self.device)
            .finish()
    }
}

impl AsyncNotificationRegistration {
    /// The device the callback listens to.
    pub fn device(&self) -> Device {
        Device::from_ordinal_unchecked(self.device)
    }
}

impl Drop for AsyncNotificationRegistration {
    fn drop(&mut self) {
        // A call in progress holds its own clone: the closure is dropped when it returns.
        let f = self.slot.f.lock().take();
        if context::in_host_fn() {
            // No CUDA call may be made here (inside a driver callback, this one's own
            // included): the callback is disarmed above, and the next call of the crate
            // unregisters it.
            let (device, dev_raw, handle) = (self.device, self.dev_raw, self.handle);
            context::defer_release(move || unregister_notification(device, dev_raw, handle));
            drop(f);
            return;
        }
        unregister_notification(self.device, self.dev_raw, self.handle);
        drop(f);
    }
}

/// Unregisters a notification callback (`cuDeviceUnregisterAsyncNotification`); a failure
/// becomes the device's deferred error.
fn unregister_notification(
    device: i32,
    dev_raw: sys::CUdevice,
    handle: Raw<sys::CUasyncCallbackEntry_st>,
) {
    // SAFETY: a registration made by `register_async_notification` on this device and not
    // unregistered before (its only owner unregisters it once, here).
    let r = unsafe { sys::cuDeviceUnregisterAsyncNotification(dev_raw, handle.get()) };
    if let Err(e) = driver::check(r, "cuDeviceUnregisterAsyncNotification") {
        if let Ok(d) = device_state(device) {
            d.defer("unregistering an asynchronous notification", e);
        }
    }
}

/// The driver's notification callback. Runs in the scope of every driver callback
/// ([`context::run_callback`]): the closure's crate calls are refused, and what it drops (the
/// closure itself, when this call holds its last clone) is released later.
unsafe extern "C" fn notify_trampoline(
    info: *mut sys::CUasyncNotificationInfo,
    data: *mut std::ffi::c_void,
    _handle: sys::CUasyncCallbackHandle,
) {
    // A panic is dropped here: there is no stream to report it on.
    let _ = context::run_callback(|| {
        // SAFETY: `data` is the leaked `NotifySlot` given at registration; it is never freed.
        let slot = unsafe { &*data.cast::<NotifySlot>() };
        let Some(f) = slot.f.lock().clone() else {
            return;
        };
        if info.is_null() {
            return;
        }
        // SAFETY: the driver passes a valid notification for the duration of the call. Its
        // type is read as the plain integer it is (a value the bindings' enum lacks must never
        // be materialised as that enum): `type_` is the struct's first field, a `repr(u32)`
        // enum.
        let kind = unsafe { info.cast::<u32>().read() };
        let n = match kind {
            1 => AsyncNotification::OverBudget {
                // SAFETY: the over-budget member is the one the driver filled for this type.
                bytes_over_budget: unsafe {
                    std::ptr::addr_of!((*info).info.overBudget.bytesOverBudget).read()
                },
            },
            other => AsyncNotification::Other(other),
        };
        f(n);
    });
}

impl Device {
    /// The device's compute mode (`cudaDevAttrComputeMode`) as an enum.
    #[doc(alias = "cudaComputeMode")]
    pub fn compute_mode(self) -> Result<ComputeMode> {
        record(
            self.attribute(super::DeviceAttribute::ComputeMode)
                .and_then(ComputeMode::from_raw),
        )
    }

    /// A property of the link from this device to `peer` (`cudaDeviceGetP2PAttribute`, this
    /// device as the source).
    ///
    /// # Errors
    /// [`Error::InvalidDevice`] when `peer` is this device (the runtime's
    /// `cudaErrorInvalidDevice`).
    #[doc(alias = "cudaDeviceGetP2PAttribute")]
    pub fn p2p_attribute(self, peer: Device, attr: P2PAttribute) -> Result<i32> {
        record((|| {
            let (src, dst) = (self.raw()?, peer.raw()?);
            if self.ordinal == peer.ordinal {
                return Err(Error::InvalidDevice {
                    ordinal: peer.ordinal,
                    count: device_count()?,
                });
            }
            let mut v = 0i32;
            // SAFETY: valid device handles and out-parameter.
            driver::check(
                unsafe { sys::cuDeviceGetP2PAttribute(&mut v, attr.to_raw(), src, dst) },
                "cuDeviceGetP2PAttribute",
            )?;
            Ok(v)
        })())
    }

    /// The device with this PCI bus id (`cudaDeviceGetByPCIBusId`), in any of the forms
    /// `domain:bus:device.function`, `domain:bus:device` or `bus:device.function` (hex), as
    /// [`pci_bus_id`](Self::pci_bus_id) returns it.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for text with a NUL byte; the driver's
    /// `cudaErrorInvalidDevice` for an id no device has.
    #[doc(alias = "cudaDeviceGetByPCIBusId")]
    pub fn by_pci_bus_id(id: &str) -> Result<Device> {
        record((|| {
            driver::init()?;
            let c = CString::new(id).map_err(|_| Error::InvalidValue {
                what: "PCI bus id",
                value: format!("{id:?}"),
                reason: "contains a NUL byte",
            })?;
            let mut raw: sys::CUdevice = 0;
            // SAFETY: NUL-terminated string; valid out-parameter.
            driver::check(
                unsafe { sys::cuDeviceGetByPCIBusId(&mut raw, c.as_ptr()) },
                "cuDeviceGetByPCIBusId",
            )?;
            for d in Device::all()? {
                if d.raw()? == raw {
                    return Ok(d);
                }
            }
            Err(Error::InvalidValue {
                what: "PCI bus id",
                value: format!("{id:?}"),
                reason: "the driver named a device this process does not enumerate",
            })
        })())
    }

    /// Initialises the device's primary context without making it current
    /// (`cudaInitDevice`). With `flags`, the device flags are set first
    /// (`cudaInitDeviceFlagsAreValid`), as [`set_flags`](Self::set_flags) would.
    #[doc(alias = "cudaInitDevice")]
    pub fn init(self, flags: Option<DeviceFlags>) -> Result<()> {
        record((|| {
            if let Some(f) = flags {
                self.set_flags(f)?;
            }
            context::enter(self.ordinal).map(drop)
        })())
    }

    fn atomic_caps(
        self,
        peer: Option<Device>,
        ops: &[AtomicOperation],
    ) -> Result<Vec<AtomicCapability>> {
        let raw = self.raw()?;
        let peer_raw = match peer {
            Some(p) if p.ordinal == self.ordinal => {
                return Err(Error::InvalidDevice {
                    ordinal: p.ordinal,
                    count: device_count()?,
                })
            }
            Some(p) => Some(p.raw()?),
            None => None,
        };
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let count = u32::try_from(ops.len()).map_err(|_| Error::InvalidValue {
            what: "atomic operations asked for",
            value: ops.len().to_string(),
            reason: "more than u32::MAX",
        })?;
        let raw_ops: Vec<sys::CUatomicOperation> = ops.iter().map(|o| o.to_raw()).collect();
        let mut caps = vec![0u32; ops.len()];
        // SAFETY: `caps` and `raw_ops` hold `count` elements each; valid device handles.
        let (r, call) = unsafe {
            match peer_raw {
                None => (
                    sys::cuDeviceGetHostAtomicCapabilities(
                        caps.as_mut_ptr(),
                        raw_ops.as_ptr(),
                        count,
                        raw,
                    ),
                    "cuDeviceGetHostAtomicCapabilities",
                ),
                Some(p) => (
                    sys::cuDeviceGetP2PAtomicCapabilities(
                        caps.as_mut_ptr(),
                        raw_ops.as_ptr(),
                        count,
                        raw,
                        p,
                    ),
                    "cuDeviceGetP2PAtomicCapabilities",
                ),
            }
        };
        driver::check(r, call)?;
        Ok(caps
            .into_iter()
            .map(AtomicCapability::from_bits_truncate)
            .collect())
    }

    /// For each operation, what this device supports natively on memory of the host over its
    /// link (`cudaDeviceGetHostAtomicCapabilities`), in the order asked.
    #[doc(alias = "cudaDeviceGetHostAtomicCapabilities")]
    pub fn host_atomic_capabilities(
        self,
        ops: &[AtomicOperation],
    ) -> Result<Vec<AtomicCapability>> {
        record(self.atomic_caps(None, ops))
    }

    /// For each operation, what this device supports natively on `peer`'s memory
    /// (`cudaDeviceGetP2PAtomicCapabilities`, this device as the source).
    ///
    /// # Errors
    /// [`Error::InvalidDevice`] when `peer` is this device.
    #[doc(alias = "cudaDeviceGetP2PAtomicCapabilities")]
    pub fn p2p_atomic_capabilities(
        self,
        peer: Device,
        ops: &[AtomicOperation],
    ) -> Result<Vec<AtomicCapability>> {
        record(self.atomic_caps(Some(peer), ops))
    }

    /// Makes the writes third-party devices (a NIC, through GPUDirect RDMA) have made into this
    /// device's memory so far visible to work queued after this call
    /// (`cudaDeviceFlushGPUDirectRDMAWrites` with this device current). Succeeds without
    /// effect where the device orders such writes itself (see
    /// [`DeviceAttribute::GPUDirectRDMAWritesOrdering`](super::DeviceAttribute::GPUDirectRDMAWritesOrdering)).
    #[doc(alias = "cudaDeviceFlushGPUDirectRDMAWrites")]
    pub fn flush_gpu_direct_rdma_writes(self, scope: FlushScope) -> Result<()> {
        record((|| {
            let a = context::enter(self.ordinal)?;
            use sys::CUflushGPUDirectRDMAWritesScope::*;
            let scope = match scope {
                FlushScope::ToOwner => CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER,
                FlushScope::ToAllDevices => CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES,
            };
            // SAFETY: the context is current; plain enum arguments.
            a.check(
                unsafe {
                    sys::cuFlushGPUDirectRDMAWrites(
                        sys::CUflushGPUDirectRDMAWritesTarget::CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                        scope,
                    )
                },
                "cuFlushGPUDirectRDMAWrites",
            )
        })())
    }

    /// Registers `f` to be called, on a driver thread, with the driver's notifications about
    /// this device (`cudaDeviceRegisterAsyncNotification`); dropping the returned registration
    /// unregisters it (`cudaDeviceUnregisterAsyncNotification`).
    ///
    /// `f` must not call into CUDA (the runtime forbids it): the crate's calls made from it are
    /// refused with [`Error::InHostFunction`], and what it drops is released at the crate's next
    /// call, as in host functions. A panic in `f` is caught and dropped. A registration dropped
    /// inside a callback of the driver stops its calls at once and is unregistered at the
    /// crate's next call. On platforms without such notifications (the budget is a Windows / WDDM and
    /// Tegra concept), registering succeeds or fails with the driver's `cudaErrorNotSupported`.
    #[doc(alias = "cudaDeviceRegisterAsyncNotification")]
    #[doc(alias = "cudaDeviceUnregisterAsyncNotification")]
    pub fn register_async_notification(
        self,
        f: impl Fn(AsyncNotification) + Send + Sync + 'static,
    ) -> Result<AsyncNotificationRegistration> {
        record((|| {
            let raw = self.raw()?;
            driver::init()?;
            let slot: &'static NotifySlot = Box::leak(Box::new(NotifySlot {
                f: Mutex::new(Some(Arc::new(f))),
            }));
            let mut handle: sys::CUasyncCallbackHandle = std::ptr::null_mut();
            // SAFETY: the trampoline matches the driver's callback type; `slot` lives for the
            // process; valid out-parameter.
            let r = unsafe {
                sys::cuDeviceRegisterAsyncNotification(
                    raw,
                    Some(notify_trampoline),
                    (slot as *const NotifySlot).cast_mut().cast(),
                    &mut handle,
                )
            };
            if let Err(e) = driver::check(r, "cuDeviceRegisterAsyncNotification") {
                slot.f.lock().take();
                return Err(e);
            }
            Ok(AsyncNotificationRegistration {
                device: self.ordinal,
                dev_raw: raw,
                handle: Raw(handle),
                slot,
            })
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records, when dropped, whether it was dropped inside the host-function scope.
    struct Probe(Arc<Mutex<Vec<String>>>);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0
                .lock()
                .push(format!("closure dropped, scope {}", context::in_host_fn()));
        }
    }

    /// The driver never sends a notification on demand (over-budget notifications are a WDDM
    /// and Tegra matter), so the trampoline is called here as the driver would call it: the
    /// callback runs in the host-function scope (a crate call is refused), dropping its own
    /// registration there disarms it and leaves the unregistration to a later call (no driver
    /// call inside the callback), and the closure, whose last clone the call then holds, is
    /// dropped inside the scope.
    #[test]
    fn a_notification_runs_in_the_host_function_scope() {
        let _one = context::ORPHANS_IN_TEST.lock();
        context::discard_orphans();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let own: Arc<Mutex<Option<AsyncNotificationRegistration>>> = Arc::new(Mutex::new(None));
        let (s2, own2, probe) = (seen.clone(), own.clone(), Probe(seen.clone()));
        let slot: &'static NotifySlot = Box::leak(Box::new(NotifySlot {
            f: Mutex::new(Some(Arc::new(move |n: AsyncNotification| {
                let _captured = &probe;
                s2.lock()
                    .push(format!("{n:?}, scope {}", context::in_host_fn()));
                let data = [1u32; 8];
                let r = crate::HostRegistration::with_read_only(
                    &data,
                    crate::HostRegisterFlags::empty(),
                    |_| (),
                );
                let refused = matches!(r, Err(Error::InHostFunction { .. }));
                s2.lock().push(format!("refused {refused}"));
                // Without a driver library here, a driver call would panic (caught, and the
                // line below never reached).
                drop(own2.lock().take());
                s2.lock().push("registration dropped".into());
            }))),
        }));
        *own.lock() = Some(AsyncNotificationRegistration {
            device: 0,
            dev_raw: 0,
            handle: Raw(std::ptr::null_mut()),
            slot,
        });
        let mut info = std::mem::MaybeUninit::<sys::CUasyncNotificationInfo>::zeroed();
        let p = info.as_mut_ptr();
        // SAFETY: writes into the zeroed struct: its type (the first field, a 4-byte enum,
        // written as the integer 1, over budget) and that type's member.
        unsafe {
            p.cast::<u32>().write(1);
            std::ptr::addr_of_mut!((*p).info.overBudget.bytesOverBudget).write(4096);
        }
        // SAFETY: called as the driver calls it: a notification valid for the call and the
        // slot given at registration.
        unsafe {
            notify_trampoline(
                p,
                (slot as *const NotifySlot).cast_mut().cast(),
                std::ptr::null_mut(),
            )
        };
        assert!(!context::in_host_fn());
        assert_eq!(
            *seen.lock(),
            [
                "OverBudget { bytes_over_budget: 4096 }, scope true",
                "refused true",
                "registration dropped",
                "closure dropped, scope true",
            ]
        );
        assert!(slot.f.lock().is_none(), "the callback is disarmed");
        assert_eq!(
            context::discard_orphans(),
            1,
            "the unregistration is deferred"
        );
        // Disarmed: a later notification reaches nothing.
        // SAFETY: as above.
        unsafe {
            notify_trampoline(
                p,
                (slot as *const NotifySlot).cast_mut().cast(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(seen.lock().len(), 4);
    }

    #[test]
    fn compute_modes_round_trip() {
        for m in [
            ComputeMode::Default,
            ComputeMode::Prohibited,
            ComputeMode::ExclusiveProcess,
        ] {
            assert_eq!(ComputeMode::from_raw(m.to_raw()).unwrap(), m);
        }
        let e = ComputeMode::from_raw(1).unwrap_err();
        assert!(e.to_string().contains("compute mode: 1"), "{e}");
    }

    fn cand(ordinal: i32, cc: (i32, i32), sms: i32) -> Candidate {
        Candidate {
            ordinal,
            cc,
            mem: 80 << 30,
            sms,
            integrated: false,
            cma: true,
            prohibited: false,
        }
    }

    #[test]
    fn choose_prefers_closest_capability_at_or_above() {
        let devs = [
            cand(0, (8, 0), 108),
            cand(1, (9, 0), 132),
            cand(2, (8, 6), 84),
        ];
        let mut w = DeviceRequirements {
            compute_capability: (8, 5),
            ..Default::default()
        };
        assert_eq!(best_candidate(&w, &devs), Some(2));
        w.compute_capability = (9, 0);
        assert_eq!(best_candidate(&w, &devs), Some(1));
        // Nobody reaches 10.0: the one meeting most requirements, then the closest below.
        w.compute_capability = (10, 0);
        assert_eq!(best_candidate(&w, &devs), Some(1));
        // Ties on capability go to more multiprocessors, then the lower ordinal.
        let twins = [
            cand(0, (9, 0), 100),
            cand(1, (9, 0), 132),
            cand(2, (9, 0), 132),
        ];
        w.compute_capability = (0, 0);
        assert_eq!(best_candidate(&w, &twins), Some(1));
        assert_eq!(best_candidate(&w, &[]), None);
    }

    #[test]
    fn choose_skips_prohibited_and_unmet_requirements() {
        let mut devs = [cand(0, (9, 0), 132), cand(1, (9, 0), 132)];
        devs[0].prohibited = true;
        let w = DeviceRequirements::default();
        assert_eq!(best_candidate(&w, &devs), Some(1));
        devs[0].prohibited = false;
        devs[0].mem = 1 << 30;
        let w = DeviceRequirements {
            total_global_mem: 2 << 30,
            ..Default::default()
        };
        assert_eq!(best_candidate(&w, &devs), Some(1));
        let w = DeviceRequirements {
            integrated: Some(true),
            ..Default::default()
        };
        devs[1].integrated = true;
        assert_eq!(best_candidate(&w, &devs), Some(1));
    }

    #[test]
    fn choose_weighs_extreme_capabilities_without_overflow() {
        let devs = [cand(0, (9, 0), 132), cand(1, (i32::MAX, i32::MAX), 8)];
        for cc in [
            (i32::MAX, i32::MAX),
            (i32::MAX, 0),
            (0, i32::MAX),
            (i32::MAX - 1, 99),
        ] {
            let w = DeviceRequirements {
                compute_capability: cc,
                ..Default::default()
            };
            // Only the device of the extreme capability meets it.
            assert_eq!(best_candidate(&w, &devs), Some(1), "{cc:?}");
        }
        let w = DeviceRequirements {
            compute_capability: (9, 0),
            ..Default::default()
        };
        assert_eq!(best_candidate(&w, &devs), Some(0));
    }

    #[test]
    fn atomic_operations_map_in_order() {
        for (i, op) in AtomicOperation::ALL.iter().enumerate() {
            assert_eq!(op.to_raw() as usize, i);
        }
    }
}
