//! Extended launches (`cudaLaunchKernelEx`): a launch configuration with launch attributes,
//! checked against the device and the kernel before the driver sees them.

use crate::driver::sys;
use crate::error::{Error, ErrorCode, Result};
use crate::event::EventFlags;
use crate::launch::{Dim3, LaunchConfig, LaunchLimits};
use crate::{AccessPolicyWindow, Event};

/// How the driver places the thread-block clusters of a launch on the GPU
/// (`cudaClusterSchedulingPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[doc(alias = "cudaClusterSchedulingPolicy")]
pub enum ClusterSchedulingPolicy {
    /// The driver's choice (`cudaClusterSchedulingPolicyDefault`).
    #[default]
    Default,
    /// Spread the blocks of a cluster over the GPU processing clusters
    /// (`cudaClusterSchedulingPolicySpread`).
    Spread,
    /// Let the driver balance load, possibly running clusters of fewer resident blocks
    /// (`cudaClusterSchedulingPolicyLoadBalancing`).
    LoadBalancing,
}

impl ClusterSchedulingPolicy {
    pub(crate) fn to_sys(self) -> sys::CUclusterSchedulingPolicy {
        use sys::CUclusterSchedulingPolicy as P;
        match self {
            ClusterSchedulingPolicy::Default => P::CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
            ClusterSchedulingPolicy::Spread => P::CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
            ClusterSchedulingPolicy::LoadBalancing => {
                P::CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING
            }
        }
    }

    /// The policy of a raw number (a newer driver's unknown value reads as `Default`).
    pub(crate) fn from_number(n: i32) -> ClusterSchedulingPolicy {
        match n {
            1 => ClusterSchedulingPolicy::Spread,
            2 => ClusterSchedulingPolicy::LoadBalancing,
            _ => ClusterSchedulingPolicy::Default,
        }
    }
}

/// The logical memory synchronisation domain a kernel's fences work in
/// (`cudaLaunchMemSyncDomain`): a memory fence of a kernel in one domain need not wait for the
/// memory traffic of kernels in another (programming guide, "Memory Synchronization Domains").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[doc(alias = "cudaLaunchMemSyncDomain")]
pub enum MemSyncDomain {
    /// `cudaLaunchMemSyncDomainDefault`.
    #[default]
    Default,
    /// For kernels that serve remote memory traffic, such as communication kernels
    /// (`cudaLaunchMemSyncDomainRemote`).
    Remote,
}

/// Which physical domain each logical domain of a launch maps to
/// (`cudaLaunchMemSyncDomainMap`). Each must be below the device's
/// [`MemSyncDomainCount`](crate::DeviceAttribute::MemSyncDomainCount).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[doc(alias = "cudaLaunchMemSyncDomainMap")]
pub struct MemSyncDomainMap {
    /// The physical domain of [`MemSyncDomain::Default`] (`default_`).
    pub default: u8,
    /// The physical domain of [`MemSyncDomain::Remote`] (`remote`).
    pub remote: u8,
}

/// An event that the launch triggers when every block of the kernel has triggered it (with
/// `cudaTriggerProgrammaticLaunchCompletion`) or exited, instead of when the kernel completes
/// (`cudaLaunchAttributeProgrammaticEvent`). Work that waits for the event may then overlap the
/// kernel's end. The event must be of the launch's device and made with
/// [`EventFlags::DISABLE_TIMING`], not [`EventFlags::INTERPROCESS`].
#[derive(Clone, Copy, Debug)]
pub struct ProgrammaticEvent<'a> {
    /// The event.
    pub event: &'a Event,
    /// Whether a block triggers the event as soon as it starts (`triggerAtBlockStart`).
    pub trigger_at_block_start: bool,
}

/// The attributes of an extended launch (`cudaLaunchAttribute`, one field per attribute). `None`
/// or `false` leaves an attribute out of the launch: the stream's or the kernel's setting
/// applies. Checked against the device and the kernel when launched (see [`LaunchConfigEx`]).
#[derive(Clone, Copy, Debug, Default)]
#[doc(alias = "cudaLaunchAttribute")]
pub struct LaunchAttributes<'a> {
    /// Thread-block cluster dimensions, in blocks (`cudaLaunchAttributeClusterDimension`).
    /// Needs compute capability 9.0; each grid dimension must be a multiple of the cluster's;
    /// more than 8 blocks needs the kernel's non-portable attribute
    /// ([`Function::set_non_portable_cluster_size_allowed`](crate::Function::set_non_portable_cluster_size_allowed)).
    pub cluster_dim: Option<Dim3>,
    /// How clusters are placed (`cudaLaunchAttributeClusterSchedulingPolicyPreference`).
    pub cluster_scheduling_policy: Option<ClusterSchedulingPolicy>,
    /// All blocks resident at once, so that they may synchronise with `grid.sync()`
    /// (`cudaLaunchAttributeCooperative`, as `cudaLaunchCooperativeKernel`).
    pub cooperative: bool,
    /// Programmatic dependent launch: the kernel may start before the previous kernel in the
    /// stream has finished, and waits for it with `cudaGridDependencySynchronize()`
    /// (`cudaLaunchAttributeProgrammaticStreamSerialization`). Needs compute capability 9.0.
    /// Refused by the crate's typed wrappers (their kernels do not wait); allowed on the
    /// `unsafe` launches of user kernels, whose `# Safety` says what the kernel must do.
    pub programmatic_stream_serialization: bool,
    /// An event triggered early by the kernel (`cudaLaunchAttributeProgrammaticEvent`).
    /// Needs compute capability 9.0.
    pub programmatic_event: Option<ProgrammaticEvent<'a>>,
    /// The kernel's scheduling priority, in the device's stream priority range
    /// ([`Device::stream_priority_range`](crate::Device::stream_priority_range); lower numbers
    /// are higher priorities) (`cudaLaunchAttributePriority`).
    pub priority: Option<i32>,
    /// The kernel's logical memory synchronisation domain (`cudaLaunchAttributeMemSyncDomain`).
    pub mem_sync_domain: Option<MemSyncDomain>,
    /// The logical-to-physical domain map (`cudaLaunchAttributeMemSyncDomainMap`).
    pub mem_sync_domain_map: Option<MemSyncDomainMap>,
    /// An L2 access policy window for this launch only
    /// (`cudaLaunchAttributeAccessPolicyWindow`); see [`crate::l2`].
    pub access_policy_window: Option<AccessPolicyWindow>,
}

/// An extended launch configuration (`cudaLaunchConfig_t`): the grid, block and dynamic shared
/// memory of a [`LaunchConfig`], with [`LaunchAttributes`]. Accepted wherever a
/// [`LaunchConfig`] is (the typed kernel wrappers, [`Function::launch`](crate::Function::launch),
/// [`Kernel::launch`](crate::Kernel::launch)); those then launch with `cuLaunchKernelEx`.
///
/// ```no_run
/// use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};
/// # fn main() -> cuda_runtime::Result<()> {
/// let data = DeviceBuffer::from_slice(&[3u32, 1, 4, 1, 5, 9, 2, 6])?;
/// let mut hist = DeviceBuffer::<u32>::zeroed(4)?;
/// let stream = Stream::new()?;
/// // 8 blocks in clusters of 4; each block holds a quarter of the bins in shared memory.
/// let cfg = LaunchConfig::new(8, 128).with_shared_mem(16).with_cluster(4).priority(-1);
/// kernels::cluster::cluster_histogram(&stream, &cfg, &data, &mut hist, 4)?;
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[doc(alias = "cudaLaunchConfig_t")]
#[doc(alias = "cudaLaunchKernelEx")]
pub struct LaunchConfigEx<'a> {
    /// Grid, block and dynamic shared memory.
    pub config: LaunchConfig,
    /// The launch attributes.
    pub attributes: LaunchAttributes<'a>,
}

impl LaunchConfig {
    /// This configuration with launch attributes: an extended launch (`cudaLaunchKernelEx`).
    pub fn with_attributes(self, attributes: LaunchAttributes<'_>) -> LaunchConfigEx<'_> {
        LaunchConfigEx {
            config: self,
            attributes,
        }
    }

    /// This configuration launched in thread-block clusters of `cluster` blocks
    /// (`cudaLaunchAttributeClusterDimension`).
    pub fn with_cluster(self, cluster: impl Into<Dim3>) -> LaunchConfigEx<'static> {
        LaunchConfigEx {
            config: self,
            attributes: LaunchAttributes::default(),
        }
        .cluster(cluster)
    }

    /// This configuration as an extended launch without attributes yet.
    pub fn extended(self) -> LaunchConfigEx<'static> {
        LaunchConfigEx {
            config: self,
            attributes: LaunchAttributes::default(),
        }
    }
}

impl<'a> LaunchConfigEx<'a> {
    /// Sets the cluster dimensions ([`LaunchAttributes::cluster_dim`]).
    pub fn cluster(mut self, cluster: impl Into<Dim3>) -> Self {
        self.attributes.cluster_dim = Some(cluster.into());
        self
    }

    /// Sets the cluster scheduling policy ([`LaunchAttributes::cluster_scheduling_policy`]).
    pub fn cluster_scheduling_policy(mut self, policy: ClusterSchedulingPolicy) -> Self {
        self.attributes.cluster_scheduling_policy = Some(policy);
        self
    }

    /// Makes the launch cooperative ([`LaunchAttributes::cooperative`]).
    pub fn cooperative(mut self) -> Self {
        self.attributes.cooperative = true;
        self
    }

    /// Allows programmatic dependent launch
    /// ([`LaunchAttributes::programmatic_stream_serialization`]).
    pub fn programmatic_stream_serialization(mut self) -> Self {
        self.attributes.programmatic_stream_serialization = true;
        self
    }

    /// Sets the programmatic event ([`LaunchAttributes::programmatic_event`]).
    pub fn programmatic_event<'b>(
        self,
        event: &'b Event,
        trigger_at_block_start: bool,
    ) -> LaunchConfigEx<'b>
    where
        'a: 'b,
    {
        let mut attributes: LaunchAttributes<'b> = self.attributes;
        attributes.programmatic_event = Some(ProgrammaticEvent {
            event,
            trigger_at_block_start,
        });
        LaunchConfigEx {
            config: self.config,
            attributes,
        }
    }

    /// Sets the priority ([`LaunchAttributes::priority`]).
    pub fn priority(mut self, priority: i32) -> Self {
        self.attributes.priority = Some(priority);
        self
    }

    /// Sets the memory synchronisation domain ([`LaunchAttributes::mem_sync_domain`]).
    pub fn mem_sync_domain(mut self, domain: MemSyncDomain) -> Self {
        self.attributes.mem_sync_domain = Some(domain);
        self
    }

    /// Sets the domain map ([`LaunchAttributes::mem_sync_domain_map`]).
    pub fn mem_sync_domain_map(mut self, map: MemSyncDomainMap) -> Self {
        self.attributes.mem_sync_domain_map = Some(map);
        self
    }

    /// Sets the access policy window ([`LaunchAttributes::access_policy_window`]).
    pub fn access_policy_window(mut self, window: AccessPolicyWindow) -> Self {
        self.attributes.access_policy_window = Some(window);
        self
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::LaunchConfig {}
    impl Sealed for super::LaunchConfigEx<'_> {}
}

/// What a launch function accepts: a [`LaunchConfig`] (`cudaLaunchKernel`) or a
/// [`LaunchConfigEx`] (`cudaLaunchKernelEx`). Sealed.
pub trait Launch: sealed::Sealed {
    /// Grid, block and dynamic shared memory.
    fn config(&self) -> &LaunchConfig;
    /// The launch attributes, for an extended launch.
    fn attributes(&self) -> Option<&LaunchAttributes<'_>>;
}

impl Launch for LaunchConfig {
    #[inline]
    fn config(&self) -> &LaunchConfig {
        self
    }
    #[inline]
    fn attributes(&self) -> Option<&LaunchAttributes<'_>> {
        None
    }
}

impl Launch for LaunchConfigEx<'_> {
    #[inline]
    fn config(&self) -> &LaunchConfig {
        &self.config
    }
    #[inline]
    fn attributes(&self) -> Option<&LaunchAttributes<'_>> {
        Some(&self.attributes)
    }
}

/// What the kernel says about clusters (`cuFuncGetAttribute`), read for cluster launches only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FuncCluster {
    /// Required cluster dimensions (compile time `__cluster_dims__`, or set at run time); all
    /// zero when none.
    pub(crate) required: [u32; 3],
    /// `cudaFuncAttributeNonPortableClusterSizeAllowed`.
    pub(crate) non_portable: bool,
}

/// Blocks in a cluster that every device with clusters supports.
pub(crate) const PORTABLE_CLUSTER_SIZE: u64 = 8;

fn too_old(feature: &str, lim: &LaunchLimits, device: i32) -> Error {
    Error::ComputeCapability {
        code: ErrorCode::NotSupported,
        what: format!("{feature} (cudaLaunchKernelEx)"),
        needs: 90,
        device,
        found: lim.compute_capability,
    }
}

fn attr_err(code: ErrorCode, attribute: &'static str, detail: String) -> Error {
    Error::LaunchAttribute {
        code,
        attribute,
        detail,
    }
}

fn dims(d: [u32; 3]) -> String {
    format!("({}, {}, {})", d[0], d[1], d[2])
}

/// Checks a programmatic event: the launch's device, no timing, not interprocess.
pub(crate) fn check_programmatic_event(
    event_device: i32,
    flags: EventFlags,
    device: i32,
) -> Result<()> {
    if event_device != device {
        return Err(Error::DeviceMismatch {
            call: "cudaLaunchKernelEx",
            what: "the programmatic event",
            found: event_device,
            expected: device,
        });
    }
    if !flags.contains(EventFlags::DISABLE_TIMING) || flags.contains(EventFlags::INTERPROCESS) {
        return Err(attr_err(
            ErrorCode::InvalidValue,
            "programmatic event",
            format!(
                "the event must be made with EventFlags::DISABLE_TIMING (cudaEventDisableTiming) \
                 and without EventFlags::INTERPROCESS, but its flags are {:#x}",
                flags.bits()
            ),
        ));
    }
    Ok(())
}

/// Checks launch attributes against the device (`lim`, device `device`) and the kernel
/// (`func`, read for cluster launches), before any driver call. `priority_range` is the
/// device's `(least, greatest)` stream priority, read when a priority is given.
/// `refuse_serialization`: a launch through a generated (safe) wrapper of a kernel that does
/// not declare that it waits for the previous kernel, which refuses programmatic stream
/// serialization. Cooperative launches are checked against occupancy elsewhere.
pub(crate) fn validate_attributes(
    c: &LaunchConfig,
    at: &LaunchAttributes<'_>,
    lim: &LaunchLimits,
    device: i32,
    func: &FuncCluster,
    priority_range: Option<(i32, i32)>,
    refuse_serialization: bool,
) -> Result<()> {
    let LaunchAttributes {
        cluster_dim,
        cluster_scheduling_policy,
        cooperative: _,
        programmatic_stream_serialization,
        programmatic_event,
        priority,
        mem_sync_domain: _,
        mem_sync_domain_map,
        access_policy_window,
    } = at;
    if let Some(cl) = cluster_dim {
        if !lim.cluster_launch || lim.compute_capability < 90 {
            return Err(too_old("a thread-block cluster launch", lim, device));
        }
        let cd = [cl.x, cl.y, cl.z];
        const AXES: [&str; 3] = ["x", "y", "z"];
        if let Some(i) = cd.iter().position(|&v| v == 0) {
            return Err(attr_err(
                ErrorCode::InvalidClusterSize,
                "cluster dimensions",
                format!(
                    "cluster.{} is 0 in cluster {}; every dimension must be at least 1",
                    AXES[i],
                    dims(cd)
                ),
            ));
        }
        if func.required != [0; 3] && func.required != cd {
            return Err(attr_err(
                ErrorCode::InvalidClusterSize,
                "cluster dimensions",
                format!(
                    "the kernel requires clusters of {} (__cluster_dims__ or \
                     cudaFuncAttributeRequiredClusterWidth/Height/Depth), but the launch gives {}",
                    dims(func.required),
                    dims(cd)
                ),
            ));
        }
        let g = [c.grid.x, c.grid.y, c.grid.z];
        for i in 0..3 {
            if !g[i].is_multiple_of(cd[i]) {
                return Err(attr_err(
                    ErrorCode::InvalidClusterSize,
                    "cluster dimensions",
                    format!(
                        "grid.{a} {} is not a multiple of cluster.{a} {} (grid {}, cluster {})",
                        g[i],
                        cd[i],
                        dims(g),
                        dims(cd),
                        a = AXES[i]
                    ),
                ));
            }
        }
        let size = cl.volume();
        if size > PORTABLE_CLUSTER_SIZE && !func.non_portable {
            return Err(attr_err(
                ErrorCode::InvalidClusterSize,
                "cluster dimensions",
                format!(
                    "a cluster of {size} blocks {} exceeds the portable maximum of \
                     {PORTABLE_CLUSTER_SIZE}; allow it with \
                     Function::set_non_portable_cluster_size_allowed(true) \
                     (cudaFuncAttributeNonPortableClusterSizeAllowed)",
                    dims(cd)
                ),
            ));
        }
    }
    if cluster_scheduling_policy.is_some() && lim.compute_capability < 90 {
        return Err(too_old("a cluster scheduling policy", lim, device));
    }
    if *programmatic_stream_serialization {
        if lim.compute_capability < 90 {
            return Err(too_old("programmatic dependent launch", lim, device));
        }
        if refuse_serialization {
            return Err(attr_err(
                ErrorCode::InvalidValue,
                "programmatic stream serialization",
                "the kernel's wrapper refuses it: the kernel does not declare \
                 `// cuda-runtime: waits-for-previous-kernel` (every thread waiting for the \
                 kernel before it with cudaGridDependencySynchronize before touching memory), \
                 so the launch could overlap work it must follow"
                    .to_string(),
            ));
        }
    }
    if let Some(pe) = programmatic_event {
        if lim.compute_capability < 90 {
            return Err(too_old("a programmatic event", lim, device));
        }
        check_programmatic_event(pe.event.device().ordinal(), pe.event.flags(), device)?;
    }
    if let (Some(p), Some((least, greatest))) = (priority, priority_range) {
        if *p < greatest || *p > least {
            return Err(attr_err(
                ErrorCode::InvalidValue,
                "priority",
                format!(
                    "priority {p} is outside the device's range {greatest}..={least} \
                     (cudaDeviceGetStreamPriorityRange; lower numbers are higher priorities)"
                ),
            ));
        }
    }
    if let Some(m) = mem_sync_domain_map {
        let n = lim.mem_sync_domains;
        if m.default as u32 >= n || m.remote as u32 >= n {
            return Err(attr_err(
                ErrorCode::InvalidValue,
                "memory synchronisation domain map",
                format!(
                    "the map (default -> {}, remote -> {}) names a domain beyond the device's {n} \
                     (cudaDevAttrMemSyncDomainCount)",
                    m.default, m.remote
                ),
            ));
        }
    }
    if let Some(w) = access_policy_window {
        w.check_against(lim.max_window_bytes)?;
    }
    Ok(())
}

/// The most attributes one launch sets.
const MAX_ATTRS: usize = 9;

/// Launch attributes in the driver's form, on the stack. Only the attributes set are written
/// (the rest of the list stays uninitialised: a launch with one attribute does not fill nine).
pub(crate) struct RawAttrs {
    list: [std::mem::MaybeUninit<sys::CUlaunchAttribute>; MAX_ATTRS],
    len: usize,
}

impl RawAttrs {
    pub(crate) fn new() -> RawAttrs {
        RawAttrs {
            list: [const { std::mem::MaybeUninit::uninit() }; MAX_ATTRS],
            len: 0,
        }
    }

    fn push(&mut self, id: sys::CUlaunchAttributeID, value: sys::CUlaunchAttributeValue) {
        if let Some(slot) = self.list.get_mut(self.len) {
            slot.write(sys::CUlaunchAttribute {
                id,
                pad: [0; 4],
                value,
            });
            self.len += 1;
        }
    }

    /// The attributes set, as the driver takes them.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [sys::CUlaunchAttribute] {
        // SAFETY: the first `len` entries were written by `push` (`len` never exceeds the
        // list's length, and only `push` raises it); `MaybeUninit<T>` has `T`'s layout.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.list.as_mut_ptr().cast::<sys::CUlaunchAttribute>(),
                self.len,
            )
        }
    }
}

fn blank() -> sys::CUlaunchAttributeValue {
    sys::CUlaunchAttributeValue { pad: [0; 64] }
}

/// The driver's form of `at`; `event` is the programmatic event's raw handle (its context
/// pinned by the caller). Validated attributes only.
/// (A wrapper of [`fill_raw_attributes`] for the callers that are not on a launch path.)
pub(crate) fn raw_attributes(at: &LaunchAttributes<'_>, event: Option<sys::CUevent>) -> RawAttrs {
    let mut r = RawAttrs::new();
    fill_raw_attributes(&mut r, at, event);
    r
}

/// Writes the driver's form of `at` into `r` (empty), in place: returning the list by value
/// copied all of its 656 bytes on every extended launch.
pub(crate) fn fill_raw_attributes(
    r: &mut RawAttrs,
    at: &LaunchAttributes<'_>,
    event: Option<sys::CUevent>,
) {
    use sys::CUlaunchAttributeID as Id;
    if let Some(c) = at.cluster_dim {
        let mut v = blank();
        v.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
            x: c.x,
            y: c.y,
            z: c.z,
        };
        r.push(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
    }
    if let Some(p) = at.cluster_scheduling_policy {
        let mut v = blank();
        v.clusterSchedulingPolicyPreference = p.to_sys();
        r.push(
            Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
            v,
        );
    }
    if at.cooperative {
        let mut v = blank();
        v.cooperative = 1;
        r.push(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v);
    }
    if at.programmatic_stream_serialization {
        let mut v = blank();
        v.programmaticStreamSerializationAllowed = 1;
        r.push(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, v);
    }
    if let (Some(pe), Some(event)) = (at.programmatic_event, event) {
        let mut v = blank();
        v.programmaticEvent = sys::CUlaunchAttributeValue_union__bindgen_ty_2 {
            event,
            flags: 0,
            triggerAtBlockStart: pe.trigger_at_block_start as i32,
        };
        r.push(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, v);
    }
    if let Some(p) = at.priority {
        let mut v = blank();
        v.priority = p;
        r.push(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
    }
    if let Some(m) = at.mem_sync_domain_map {
        let mut v = blank();
        v.memSyncDomainMap = sys::CUlaunchMemSyncDomainMap {
            default_: m.default,
            remote: m.remote,
        };
        r.push(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, v);
    }
    if let Some(d) = at.mem_sync_domain {
        let mut v = blank();
        v.memSyncDomain = match d {
            MemSyncDomain::Default => sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
            MemSyncDomain::Remote => sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
        };
        r.push(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, v);
    }
    if let Some(w) = at.access_policy_window {
        r.push(Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, w.to_sys());
    }
}

/// The driver's launch configuration for `c` on `stream` with `attrs`; valid while `attrs` is
/// neither moved nor dropped.
pub(crate) fn raw_config(
    c: &LaunchConfig,
    stream: sys::CUstream,
    attrs: &mut RawAttrs,
) -> sys::CUlaunchConfig {
    let list = attrs.as_mut_slice();
    sys::CUlaunchConfig {
        gridDimX: c.grid.x,
        gridDimY: c.grid.y,
        gridDimZ: c.grid.z,
        blockDimX: c.block.x,
        blockDimY: c.block.y,
        blockDimZ: c.block.z,
        sharedMemBytes: c.shared_mem_bytes,
        hStream: stream,
        numAttrs: list.len() as u32,
        attrs: if list.is_empty() {
            std::ptr::null_mut()
        } else {
            list.as_mut_ptr()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessProperty;

    const H100: LaunchLimits = LaunchLimits {
        max_block: [1024, 1024, 64],
        max_grid: [2147483647, 65535, 65535],
        max_threads_per_block: 1024,
        max_shared_per_block_optin: 232448,
        compute_capability: 90,
        cluster_launch: true,
        mem_sync_domains: 4,
        max_window_bytes: 134213632,
    };
    const A100: LaunchLimits = LaunchLimits {
        compute_capability: 80,
        cluster_launch: false,
        mem_sync_domains: 1,
        ..H100
    };
    const NONE: FuncCluster = FuncCluster {
        required: [0; 3],
        non_portable: false,
    };

    fn cfg(grid: (u32, u32, u32), block: u32) -> LaunchConfig {
        LaunchConfig::new(grid, block)
    }

    fn check(c: &LaunchConfigEx<'_>, lim: &LaunchLimits, f: &FuncCluster) -> Result<()> {
        validate_attributes(&c.config, &c.attributes, lim, 0, f, Some((0, -5)), true)
    }

    fn detail(e: &Error) -> (ErrorCode, &'static str, String) {
        match e {
            Error::LaunchAttribute {
                code,
                attribute,
                detail,
            } => (*code, *attribute, detail.clone()),
            other => panic!("expected a launch attribute error, got {other:?}"),
        }
    }

    #[test]
    fn huge_cluster_dimensions_are_refused_without_overflow() {
        // x * y * z of three u32::MAX exceeds u64: the volume saturates, and the checks refuse
        // the cluster with its values (the extended-launch path asks the volume first).
        let huge = Dim3::new(u32::MAX, u32::MAX, u32::MAX);
        assert_eq!(huge.volume(), u64::MAX);
        assert_eq!(
            Dim3::new(u32::MAX, u32::MAX, 1).volume(),
            (u32::MAX as u64).pow(2)
        );
        for grid in [(1, 1, 1), (2147483647, 65535, 65535)] {
            let c = cfg(grid, 32).extended().cluster(huge);
            let e = check(&c, &H100, &NONE).unwrap_err();
            let (code, attr, text) = detail(&e);
            assert_eq!(
                (code, attr),
                (ErrorCode::InvalidClusterSize, "cluster dimensions")
            );
            assert!(text.contains("4294967295"), "{text}");
        }
    }

    #[test]
    fn clusters_that_divide_the_grid_pass_on_sm90() {
        let mut rng = fastrand::Rng::new();
        for _ in 0..1000 {
            let cl = [rng.u32(1..=8), 1, 1];
            let cl = match rng.u8(0..3) {
                0 => cl,
                1 => [1, cl[0].min(4), 2],
                _ => [2, 2, 2],
            };
            let k = [rng.u32(1..1000), rng.u32(1..20), rng.u32(1..5)];
            let g = (k[0] * cl[0], k[1] * cl[1], k[2] * cl[2]);
            let c = cfg(g, 128).with_cluster((cl[0], cl[1], cl[2]));
            check(&c, &H100, &NONE).unwrap_or_else(|e| panic!("{g:?} {cl:?}: {e}"));
        }
    }

    #[test]
    fn a_grid_that_is_no_multiple_of_the_cluster_names_both() {
        let mut rng = fastrand::Rng::new();
        for _ in 0..500 {
            let cx = rng.u32(2..=8);
            let gx = cx * rng.u32(0..1000) + rng.u32(1..cx);
            let e = check(&cfg((gx, 1, 1), 64).with_cluster(cx), &H100, &NONE).unwrap_err();
            let (code, attr, d) = detail(&e);
            assert_eq!(code, ErrorCode::InvalidClusterSize);
            assert_eq!(attr, "cluster dimensions");
            assert_eq!(
                d,
                format!(
                    "grid.x {gx} is not a multiple of cluster.x {cx} (grid ({gx}, 1, 1), cluster ({cx}, 1, 1))"
                )
            );
            assert_eq!(e.code(), ErrorCode::InvalidClusterSize);
        }
        let e = check(&cfg((4, 3, 1), 64).with_cluster((2, 2, 1)), &H100, &NONE).unwrap_err();
        assert!(detail(&e)
            .2
            .starts_with("grid.y 3 is not a multiple of cluster.y 2"));
    }

    #[test]
    fn clusters_above_eight_need_the_non_portable_attribute() {
        for (cl, size) in [((16, 1, 1), 16), ((3, 3, 1), 9), ((2, 2, 4), 16)] {
            let grid = (cl.0 * 2, cl.1, cl.2);
            let c = cfg(grid, 32).with_cluster(cl);
            let e = check(&c, &H100, &NONE).unwrap_err();
            let (code, _, d) = detail(&e);
            assert_eq!(code, ErrorCode::InvalidClusterSize);
            assert!(d.starts_with(&format!("a cluster of {size} blocks")), "{d}");
            assert!(d.contains("set_non_portable_cluster_size_allowed"), "{d}");
            let allowed = FuncCluster {
                non_portable: true,
                ..NONE
            };
            check(&c, &H100, &allowed).unwrap();
        }
        check(&cfg((8, 1, 1), 32).with_cluster(8), &H100, &NONE).unwrap();
        check(&cfg((2, 2, 2), 32).with_cluster((2, 2, 2)), &H100, &NONE).unwrap();
    }

    #[test]
    fn zero_cluster_dimensions_and_required_sizes_are_checked() {
        let e = check(&cfg((4, 1, 1), 32).with_cluster((2, 0, 1)), &H100, &NONE).unwrap_err();
        assert_eq!(
            detail(&e).2,
            "cluster.y is 0 in cluster (2, 0, 1); every dimension must be at least 1"
        );
        let req = FuncCluster {
            required: [4, 1, 1],
            non_portable: false,
        };
        check(&cfg((8, 1, 1), 32).with_cluster(4), &H100, &req).unwrap();
        let e = check(&cfg((8, 1, 1), 32).with_cluster(2), &H100, &req).unwrap_err();
        let d = detail(&e).2;
        assert!(
            d.starts_with("the kernel requires clusters of (4, 1, 1)"),
            "{d}"
        );
        assert!(d.ends_with("but the launch gives (2, 1, 1)"), "{d}");
    }

    #[test]
    fn sm90_features_on_an_older_device_name_the_feature_and_both_capabilities() {
        let cases: [(LaunchConfigEx<'static>, &str); 3] = [
            (
                cfg((4, 1, 1), 32).with_cluster(2),
                "a thread-block cluster launch",
            ),
            (
                cfg((4, 1, 1), 32)
                    .extended()
                    .cluster_scheduling_policy(ClusterSchedulingPolicy::Spread),
                "a cluster scheduling policy",
            ),
            (
                cfg((4, 1, 1), 32)
                    .extended()
                    .programmatic_stream_serialization(),
                "programmatic dependent launch",
            ),
        ];
        for (c, feature) in cases {
            let e = check(&c, &A100, &NONE).unwrap_err();
            assert_eq!(
                e,
                Error::ComputeCapability {
                    code: ErrorCode::NotSupported,
                    what: format!("{feature} (cudaLaunchKernelEx)"),
                    needs: 90,
                    device: 0,
                    found: 80,
                }
            );
            assert_eq!(
                e.to_string(),
                format!("{feature} (cudaLaunchKernelEx) needs compute capability 9.0 or newer, but device 0 has 8.0")
            );
        }
        // The other attributes work on older devices.
        let c = cfg((4, 1, 1), 32)
            .extended()
            .priority(-2)
            .mem_sync_domain(MemSyncDomain::Remote)
            .cooperative();
        check(&c, &A100, &NONE).unwrap();
    }

    #[test]
    fn typed_wrappers_refuse_programmatic_stream_serialization_user_launches_do_not() {
        let c = cfg((4, 1, 1), 32)
            .extended()
            .programmatic_stream_serialization();
        let e = check(&c, &H100, &NONE).unwrap_err();
        let (code, attr, d) = detail(&e);
        assert_eq!(
            (code, attr),
            (ErrorCode::InvalidValue, "programmatic stream serialization")
        );
        assert!(d.contains("cudaGridDependencySynchronize"), "{d}");
        validate_attributes(&c.config, &c.attributes, &H100, 0, &NONE, None, false).unwrap();
    }

    #[test]
    fn priorities_outside_the_range_are_refused_with_the_range() {
        let mut rng = fastrand::Rng::new();
        for _ in 0..200 {
            let p = rng.i32(-5..=0);
            check(&cfg((1, 1, 1), 32).extended().priority(p), &H100, &NONE).unwrap();
            let bad = if rng.bool() {
                rng.i32(1..=i32::MAX)
            } else {
                rng.i32(i32::MIN..-5)
            };
            let e = check(&cfg((1, 1, 1), 32).extended().priority(bad), &H100, &NONE).unwrap_err();
            let (_, attr, d) = detail(&e);
            assert_eq!(attr, "priority");
            assert!(
                d.starts_with(&format!(
                    "priority {bad} is outside the device's range -5..=0"
                )),
                "{d}"
            );
        }
    }

    #[test]
    fn domain_maps_stay_below_the_device_domain_count() {
        for (d, r) in [(0, 0), (3, 1), (1, 3), (2, 2)] {
            let m = MemSyncDomainMap {
                default: d,
                remote: r,
            };
            check(
                &cfg((1, 1, 1), 32).extended().mem_sync_domain_map(m),
                &H100,
                &NONE,
            )
            .unwrap();
        }
        let m = MemSyncDomainMap {
            default: 0,
            remote: 4,
        };
        let e = check(
            &cfg((1, 1, 1), 32).extended().mem_sync_domain_map(m),
            &H100,
            &NONE,
        )
        .unwrap_err();
        assert_eq!(
            detail(&e).2,
            "the map (default -> 0, remote -> 4) names a domain beyond the device's 4 (cudaDevAttrMemSyncDomainCount)"
        );
        let m = MemSyncDomainMap {
            default: 1,
            remote: 0,
        };
        assert!(check(
            &cfg((1, 1, 1), 32).extended().mem_sync_domain_map(m),
            &A100,
            &NONE
        )
        .is_err());
    }

    #[test]
    fn the_window_is_checked_against_the_device() {
        let w = AccessPolicyWindow {
            base: 0x7f00_0000_0000,
            num_bytes: 1 << 20,
            hit_ratio: 0.6,
            hit_prop: AccessProperty::Persisting,
            miss_prop: AccessProperty::Streaming,
        };
        check(
            &cfg((1, 1, 1), 32).extended().access_policy_window(w),
            &H100,
            &NONE,
        )
        .unwrap();
        for (bytes, ratio) in [(134213633usize, 0.5f32), (1024, 1.5), (1024, f32::NAN)] {
            let w = AccessPolicyWindow {
                num_bytes: bytes,
                hit_ratio: ratio,
                ..w
            };
            let e = check(
                &cfg((1, 1, 1), 32).extended().access_policy_window(w),
                &H100,
                &NONE,
            )
            .unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidValue);
        }
    }

    #[test]
    fn programmatic_events_must_be_of_the_device_without_timing() {
        check_programmatic_event(0, EventFlags::DISABLE_TIMING, 0).unwrap();
        check_programmatic_event(1, EventFlags::DISABLE_TIMING | EventFlags::BLOCKING_SYNC, 1)
            .unwrap();
        assert!(matches!(
            check_programmatic_event(1, EventFlags::DISABLE_TIMING, 0),
            Err(Error::DeviceMismatch {
                found: 1,
                expected: 0,
                ..
            })
        ));
        for flags in [
            EventFlags::empty(),
            EventFlags::BLOCKING_SYNC,
            EventFlags::DISABLE_TIMING | EventFlags::INTERPROCESS,
        ] {
            let e = check_programmatic_event(0, flags, 0).unwrap_err();
            let d = detail(&e).2;
            assert!(d.ends_with(&format!("{:#x}", flags.bits())), "{d}");
        }
    }

    #[test]
    fn raw_attributes_carry_each_value_in_order() {
        use sys::CUlaunchAttributeID as Id;
        let w = AccessPolicyWindow {
            base: 0x1000,
            num_bytes: 4096,
            hit_ratio: 0.25,
            hit_prop: AccessProperty::Persisting,
            miss_prop: AccessProperty::Normal,
        };
        let c = cfg((6, 4, 1), 64)
            .with_cluster((3, 2, 1))
            .cluster_scheduling_policy(ClusterSchedulingPolicy::LoadBalancing)
            .cooperative()
            .programmatic_stream_serialization()
            .priority(-3)
            .mem_sync_domain_map(MemSyncDomainMap {
                default: 1,
                remote: 2,
            })
            .mem_sync_domain(MemSyncDomain::Remote)
            .access_policy_window(w);
        let mut r = raw_attributes(&c.attributes, None);
        let ids: Vec<Id> = r.as_mut_slice().iter().map(|a| a.id).collect();
        assert_eq!(
            ids,
            [
                Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
                Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                Id::CU_LAUNCH_ATTRIBUTE_PRIORITY,
                Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
                Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
                Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
            ]
        );
        let a = r.as_mut_slice();
        // SAFETY (test): each member read is the one written for its id.
        unsafe {
            let cd = a[0].value.clusterDim;
            assert_eq!((cd.x, cd.y, cd.z), (3, 2, 1));
            assert_eq!(a[2].value.cooperative, 1);
            assert_eq!(a[4].value.priority, -3);
            let m = a[5].value.memSyncDomainMap;
            assert_eq!((m.default_, m.remote), (1, 2));
            let aw = a[7].value.accessPolicyWindow;
            assert_eq!((aw.base_ptr as usize, aw.num_bytes), (0x1000, 4096));
            assert_eq!(aw.hitRatio, 0.25);
        }
        let mut r2 = raw_attributes(&c.attributes, None);
        let rc = raw_config(&c.config, std::ptr::null_mut(), &mut r2);
        assert_eq!(
            (rc.gridDimX, rc.gridDimY, rc.blockDimX, rc.numAttrs),
            (6, 4, 64, 8)
        );
        let mut none = raw_attributes(&LaunchAttributes::default(), None);
        let rc = raw_config(&c.config, std::ptr::null_mut(), &mut none);
        assert_eq!(rc.numAttrs, 0);
        assert!(rc.attrs.is_null());
    }
}
