//! Launch configurations and their validation against the device's limits, and extended
//! launches with launch attributes (`cudaLaunchKernelEx`: thread-block clusters, programmatic
//! dependent launch, priority, memory synchronisation domains, an access policy window,
//! cooperative launches): [`LaunchConfigEx`].

mod ex;

pub(crate) use ex::{
    fill_raw_attributes, raw_attributes, raw_config, validate_attributes, FuncCluster, RawAttrs,
    PORTABLE_CLUSTER_SIZE,
};
pub use ex::{
    ClusterSchedulingPolicy, Launch, LaunchAttributes, LaunchConfigEx, MemSyncDomain,
    MemSyncDomainMap, ProgrammaticEvent,
};

use std::sync::OnceLock;

use crate::context::DeviceState;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::kernel_sig::{LaunchShape, Rule};

/// Three-dimensional sizes of grids and blocks (`dim3`). Missing dimensions are 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl Dim3 {
    /// A size of `x` by `y` by `z`.
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// The product `x * y * z`, saturated at `u64::MAX` (three `u32`s can exceed a `u64`: a
    /// cluster of `u32::MAX` blocks per side panicked here in debug builds before its checks
    /// refused it; review finding).
    pub const fn volume(self) -> u64 {
        (self.x as u64 * self.y as u64).saturating_mul(self.z as u64)
    }
}

impl Default for Dim3 {
    fn default() -> Self {
        Dim3::new(1, 1, 1)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}

/// How a kernel is launched: the `<<<grid, block, shared_mem_bytes>>>` part of a CUDA C++
/// launch (the stream is passed beside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LaunchConfig {
    /// Number of blocks in each dimension (`gridDim`).
    pub grid: Dim3,
    /// Number of threads per block in each dimension (`blockDim`).
    pub block: Dim3,
    /// Dynamic shared memory per block, bytes (`extern __shared__`).
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A configuration of `grid` blocks of `block` threads, without dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
        }
    }

    /// One-dimensional launch covering `n` elements with `block` threads per block
    /// (`ceil(n / block)` blocks, at least one).
    ///
    /// ```
    /// use cuda_runtime::{Dim3, LaunchConfig};
    /// let c = LaunchConfig::for_elements(1000, 256)?;
    /// assert_eq!((c.grid, c.block), (Dim3::new(4, 1, 1), Dim3::new(256, 1, 1)));
    /// assert!(LaunchConfig::for_elements(1000, 0).is_err());
    /// # Ok::<(), cuda_runtime::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfiguration`] when `block` is 0, or when `n` needs more than
    /// `u32::MAX` blocks of `block` threads (no grid covers it).
    pub fn for_elements(n: usize, block: u32) -> Result<LaunchConfig> {
        if block == 0 {
            return record(Err(Error::InvalidConfiguration {
                what: "block.x",
                value: 0,
                limit: 1,
            }));
        }
        let blocks = n.div_ceil(block as usize).max(1);
        match u32::try_from(blocks) {
            Ok(blocks) => Ok(LaunchConfig::new(blocks, block)),
            Err(_) => record(Err(Error::InvalidConfiguration {
                what: "grid.x",
                value: blocks as u64,
                limit: u32::MAX as u64,
            })),
        }
    }

    /// The same configuration with `bytes` of dynamic shared memory.
    pub fn with_shared_mem(mut self, bytes: u32) -> LaunchConfig {
        self.shared_mem_bytes = bytes;
        self
    }
}

/// The device limits a launch is checked against, read once per device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchLimits {
    pub(crate) max_block: [u32; 3],
    pub(crate) max_grid: [u32; 3],
    pub(crate) max_threads_per_block: u32,
    pub(crate) max_shared_per_block_optin: u32,
    /// Compute capability, `major * 10 + minor`.
    pub(crate) compute_capability: u32,
    /// `cudaDevAttrClusterLaunch`.
    pub(crate) cluster_launch: bool,
    /// `cudaDevAttrMemSyncDomainCount`.
    pub(crate) mem_sync_domains: u32,
    /// `cudaDevAttrMaxAccessPolicyWindowSize`.
    pub(crate) max_window_bytes: usize,
}

impl LaunchLimits {
    fn read(dev: &DeviceState) -> Result<LaunchLimits> {
        use sys::CUdevice_attribute::*;
        let get = |attr| dev.attribute(attr);
        Ok(LaunchLimits {
            max_block: [
                get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_threads_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_shared_per_block_optin: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            compute_capability: get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? * 10
                + get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            cluster_launch: get(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0,
            mem_sync_domains: get(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT)?,
            max_window_bytes: get(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)? as usize,
        })
    }

    /// The limits of a device, cached.
    /// (A reference: the limits are copied by no launch.)
    #[inline]
    pub(crate) fn of<'c>(
        cache: &'c OnceLock<LaunchLimits>,
        dev: &DeviceState,
    ) -> Result<&'c LaunchLimits> {
        if let Some(l) = cache.get() {
            return Ok(l);
        }
        Self::read_into(cache, dev)
    }

    #[cold]
    fn read_into<'c>(
        cache: &'c OnceLock<LaunchLimits>,
        dev: &DeviceState,
    ) -> Result<&'c LaunchLimits> {
        let l = LaunchLimits::read(dev)?;
        Ok(cache.get_or_init(|| l))
    }
}

/// Checks a launch configuration against the device limits, as libcudart does before launching
/// (it reports `cudaErrorInvalidValue` for each of these).
#[inline]
pub(crate) fn validate(cfg: &LaunchConfig, limits: &LaunchLimits) -> Result<()> {
    // 1..=max (0 wraps past every limit).
    let within = |v: u32, max: u32| v.wrapping_sub(1) < max;
    let (b, g) = (cfg.block, cfg.grid);
    if within(b.x, limits.max_block[0])
        & within(b.y, limits.max_block[1])
        & within(b.z, limits.max_block[2])
        & within(g.x, limits.max_grid[0])
        & within(g.y, limits.max_grid[1])
        & within(g.z, limits.max_grid[2])
        && b.volume() <= limits.max_threads_per_block as u64
        && cfg.shared_mem_bytes <= limits.max_shared_per_block_optin
    {
        return Ok(());
    }
    refuse_config(cfg, limits)
}

/// The refusal of [`validate`]: the first limit exceeded, in the order of the checks.
#[cold]
#[inline(never)]
fn refuse_config(cfg: &LaunchConfig, limits: &LaunchLimits) -> Result<()> {
    let g = [cfg.grid.x, cfg.grid.y, cfg.grid.z];
    let b = [cfg.block.x, cfg.block.y, cfg.block.z];
    const GRID: [&str; 3] = ["grid.x", "grid.y", "grid.z"];
    const BLOCK: [&str; 3] = ["block.x", "block.y", "block.z"];
    for i in 0..3 {
        if b[i] == 0 || b[i] > limits.max_block[i] {
            return Err(Error::InvalidConfiguration {
                what: BLOCK[i],
                value: b[i] as u64,
                limit: if b[i] == 0 {
                    1
                } else {
                    limits.max_block[i] as u64
                },
            });
        }
        if g[i] == 0 || g[i] > limits.max_grid[i] {
            return Err(Error::InvalidConfiguration {
                what: GRID[i],
                value: g[i] as u64,
                limit: if g[i] == 0 {
                    1
                } else {
                    limits.max_grid[i] as u64
                },
            });
        }
    }
    let threads = cfg.block.volume();
    if threads > limits.max_threads_per_block as u64 {
        return Err(Error::InvalidConfiguration {
            what: "threads per block",
            value: threads,
            limit: limits.max_threads_per_block as u64,
        });
    }
    if cfg.shared_mem_bytes > limits.max_shared_per_block_optin {
        return Err(Error::InvalidConfiguration {
            what: "dynamic shared memory per block (bytes)",
            value: cfg.shared_mem_bytes as u64,
            limit: limits.max_shared_per_block_optin as u64,
        });
    }
    Ok(())
}

/// Checks a launch against the preconditions declared with one of the crate's kernels (the
/// generated `<kernel>_preconditions` functions call this first thing in each wrapper). `args`
/// are the values of the parameters the rules name, in their argument order. A few integer
/// compares per rule; allocates only to report a refusal, which is recorded as the thread's last
/// error.
#[doc(hidden)]
#[inline]
pub fn check_preconditions(
    kernel: &'static str,
    rules: &[Rule],
    config: &LaunchConfig,
    args: &[i128],
) -> Result<()> {
    let shape = LaunchShape {
        grid: [config.grid.x, config.grid.y, config.grid.z],
        block: [config.block.x, config.block.y, config.block.z],
        dynamic_shared: config.shared_mem_bytes,
    };
    match rules.iter().find(|r| !r.holds(&shape, args)) {
        None => Ok(()),
        Some(r) => record(Err(Error::KernelPrecondition {
            kernel,
            precondition: r.to_string(),
            values: r.values(&shape, args),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn cfg(grid: (u32, u32, u32), block: (u32, u32, u32), smem: u32) -> LaunchConfig {
        LaunchConfig::new(grid, block).with_shared_mem(smem)
    }

    #[test]
    fn valid_configurations_pass() {
        validate(&cfg((1, 1, 1), (1, 1, 1), 0), &H100).unwrap();
        validate(
            &cfg((2147483647, 65535, 65535), (1024, 1, 1), 232448),
            &H100,
        )
        .unwrap();
        validate(&cfg((1, 1, 1), (16, 16, 4), 0), &H100).unwrap();
    }

    #[test]
    fn the_quick_check_accepts_exactly_what_the_full_one_does() {
        // Each dimension at 0, 1, its limit, past it and at the type's end; with a block
        // volume past the thread limit and shared memory past its limit too.
        let edges = |max: u32| [0, 1, max, max.wrapping_add(1), u32::MAX];
        let mut seen = [0usize; 2];
        for bx in edges(H100.max_block[0]) {
            for bz in edges(H100.max_block[2]) {
                for gx in edges(H100.max_grid[0]) {
                    for gy in edges(H100.max_grid[1]) {
                        for (by, smem) in [(1, 0), (2, 0), (1, 232448), (1, 232449)] {
                            let c = cfg((gx, gy, 1), (bx, by, bz), smem);
                            let quick = validate(&c, &H100);
                            assert_eq!(quick, refuse_config(&c, &H100), "{c:?}");
                            seen[quick.is_ok() as usize] += 1;
                        }
                    }
                }
            }
        }
        assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
    }

    #[test]
    fn each_limit_names_the_offending_value() {
        let cases = [
            (cfg((1, 1, 1), (1025, 1, 1), 0), "block.x", 1025, 1024),
            (cfg((1, 1, 1), (1, 1, 65), 0), "block.z", 65, 64),
            (cfg((1, 1, 1), (0, 1, 1), 0), "block.x", 0, 1),
            (cfg((0, 1, 1), (1, 1, 1), 0), "grid.x", 0, 1),
            (cfg((1, 65536, 1), (1, 1, 1), 0), "grid.y", 65536, 65535),
            (
                cfg((1, 1, 1), (64, 32, 1), 0),
                "threads per block",
                2048,
                1024,
            ),
            (
                cfg((1, 1, 1), (32, 1, 1), 232449),
                "dynamic shared memory per block (bytes)",
                232449,
                232448,
            ),
        ];
        for (c, what, value, limit) in cases {
            let e = validate(&c, &H100).unwrap_err();
            assert_eq!(e, Error::InvalidConfiguration { what, value, limit });
            assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
            let msg = e.to_string();
            assert!(msg.contains(&value.to_string()) && msg.contains(&limit.to_string()));
        }
    }

    #[test]
    fn precondition_refusals_name_kernel_rule_and_values_and_are_recorded() {
        use crate::kernel_sig::{Cmp, Operand, Term};
        let rules = [
            Rule::Block([32, 8, 1]),
            Rule::Compare(
                Term {
                    coeff: 1,
                    operand: Operand::DynamicShared,
                },
                Cmp::Ge,
                Term {
                    coeff: 4,
                    operand: Operand::Param("n".into(), 0),
                },
            ),
        ];
        crate::error::get_last_error();
        let ok = cfg((100, 7, 3), (32, 8, 1), 256);
        check_preconditions("k", &rules, &ok, &[64]).unwrap();
        assert_eq!(crate::error::peek_at_last_error(), None);
        let e =
            check_preconditions("k", &rules, &cfg((1, 1, 1), (32, 32, 1), 256), &[64]).unwrap_err();
        assert_eq!(
            e,
            Error::KernelPrecondition {
                kernel: "k",
                precondition: "block = (32, 8, 1)".into(),
                values: "block = (32, 32, 1)".into(),
            }
        );
        assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
        assert_eq!(crate::error::get_last_error(), Some(e));
        let e =
            check_preconditions("k", &rules, &cfg((1, 1, 1), (32, 8, 1), 255), &[64]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel k requires dynamic_shared >= 4 * n, but the launch has dynamic_shared = 255, n = 64"
        );
        assert_eq!(crate::error::get_last_error(), Some(e));
    }

    #[test]
    fn element_launches_cover_n() {
        let c = LaunchConfig::for_elements(1000, 256).unwrap();
        assert_eq!(c.grid, Dim3::new(4, 1, 1));
        assert_eq!(c.block, Dim3::new(256, 1, 1));
        assert_eq!(c.shared_mem_bytes, 0);
        assert_eq!(LaunchConfig::for_elements(0, 256).unwrap().grid.x, 1);
        assert_eq!(LaunchConfig::for_elements(1024, 256).unwrap().grid.x, 4);
        assert_eq!(LaunchConfig::for_elements(1025, 256).unwrap().grid.x, 5);
        let mut rng = fastrand::Rng::new();
        for _ in 0..1000 {
            let b = rng.u32(1..=1024);
            let n = rng.usize(..=b as usize * u32::MAX as usize);
            let c = LaunchConfig::for_elements(n, b).unwrap();
            let threads = c.grid.x as u64 * b as u64;
            assert!(
                threads >= n as u64 && threads < n as u64 + b as u64 || n == 0,
                "{n} {b}"
            );
        }
    }

    #[test]
    fn element_launches_refuse_empty_blocks_and_uncoverable_counts() {
        crate::error::get_last_error();
        let e = LaunchConfig::for_elements(100, 0).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidConfiguration {
                what: "block.x",
                value: 0,
                limit: 1
            }
        );
        assert_eq!(crate::error::get_last_error(), Some(e));
        // u32::MAX blocks of one thread cover u32::MAX elements, not one more.
        let max = u32::MAX as usize;
        assert_eq!(LaunchConfig::for_elements(max, 1).unwrap().grid.x, u32::MAX);
        let e = LaunchConfig::for_elements(max + 1, 1).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidConfiguration {
                what: "grid.x",
                value: max as u64 + 1,
                limit: max as u64
            }
        );
        assert!(LaunchConfig::for_elements(usize::MAX, 1024).is_err());
    }
}
