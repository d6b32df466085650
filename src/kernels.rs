//! The crate's own kernels (`kernels/*.cu`), with safe, typed launch wrappers generated at build
//! time from their `extern "C" __global__` signatures and checked against the PTX.
//!
//! One module per source file. Each has the PTX (`PTX`), the module (`MODULE`, loaded on each
//! device on first use; [`EmbeddedModule::global`](crate::EmbeddedModule::global) reaches its
//! `__device__` and `__constant__` variables), a static per kernel (e.g. `vector_add::VADD`, for
//! [`EmbeddedKernel::function`](crate::EmbeddedKernel::function): attributes and occupancy), and
//! a launch function per kernel.
//!
//! The modules documented here are the kernels of the crate's examples. The crate also builds
//! kernels for its own tests and benchmarks (`faults`, `params`, `spin`); they are hidden from
//! this documentation and are not part of the API (they may change in any release), as are
//! `cdp` and `graph_cond` (below, "Kernels that launch kernels"); so is
//! `launch_ex` (grid-stride `pdl_produce` and `pdl_consume`, correct for any shape, and
//! `empty90`, built for `sm_90`; `pdl_consume` waits for the previous kernel in every thread
//! before anything else, and declares it).
//!
//! In the wrappers, a `const T*` parameter takes any [`DeviceRead<T>`](crate::DeviceRead), a
//! `T*` any [`DeviceWrite<T>`](crate::DeviceWrite), and each pointer's `size_t <name>_len`
//! companion is filled from the buffer's length, which the kernel never exceeds. Kernels marked
//! `// cuda-runtime: unsafe` in their source take raw addresses and are `unsafe fn`s.
//!
//! # Launch preconditions
//!
//! A safe wrapper accepts every launch the device accepts (any grid, any block up to the
//! device's limits, any dynamic shared memory up to its opt-in limit) and any argument values,
//! so each kernel is written to be correct for all of them, or declares what it needs in the
//! comment lines right above it, and its wrapper refuses any other launch:
//!
//! ```text
//! // cuda-runtime: block = (32, 8, 1)
//! // cuda-runtime: require dynamic_shared >= 4 * n
//! ```
//!
//! * `block = (X, Y, Z)`: exactly this block shape (missing dimensions are 1);
//! * `require A OP B`, with `OP` one of `==` `!=` `<` `<=` `>` `>=`, and `A`, `B` each an
//!   integer, a quantity or `INTEGER * quantity`; a quantity is `block.x`, `block.y`, `block.z`,
//!   `grid.x`, `grid.y`, `grid.z`, `dynamic_shared` (bytes of dynamic shared memory per block) or
//!   an integer parameter of the kernel, a pointer's `*_len` included (taken from the buffer).
//!
//! The build fails on a directive it cannot read, naming the kernel. The generated wrapper checks
//! the preconditions first, in exact 128-bit arithmetic (a few integer compares, no allocation),
//! before it borrows any buffer; a launch that breaks one is refused with
//! [`Error::KernelPrecondition`](crate::Error::KernelPrecondition) (`cudaErrorInvalidValue`),
//! which names the precondition and the values it was checked with, and nothing is queued. Each
//! wrapper's docs list its preconditions. Together with the lengths, that is what makes these
//! launches safe: a launch the wrapper accepts cannot fault.
//!
//! The crate's kernels, audited for every launch shape:
//!
//! * `transpose::*` (all five) index their shared tiles by the thread's position in a 32x8
//!   block: they declare `block = (32, 8, 1)`. Any grid is fine; an element is written only where
//!   its source element is inside the input.
//! * `shared_reverse::dynamic_reverse` declares `require dynamic_shared >= 4 * n` (and also never
//!   indexes past the dynamic shared memory the launch gave). Both reversal kernels reverse the
//!   first `min(n, block.x, d_len)` elements (at most 64 for `static_reverse`), with the first
//!   block's first row of threads only, whatever the launch shape; a negative `n` reverses none.
//! * `pitched::scale_rows` is correct for any shape and any pitch (64-bit indices, threads with a
//!   z index above 0 idle, row offsets that would overflow skipped).
//! * `texture::*` are grid-stride loops bounded by every buffer's length, so any shape is
//!   correct. Texture fetches never fault (coordinates outside are addressed by the texture's
//!   modes; linear fetches outside read zero), and surface accesses use
//!   `cudaBoundaryModeZero`: outside the surface a write is dropped and a read gives zero,
//!   whatever width and height are passed (up to 536870911 texels wide: byte offsets are ints,
//!   so wider is refused by the wrappers; `stream_texture` likewise takes at most 2^31 texels).
//!   Texture and surface parameters take the crate's
//!   [`TextureObject`](crate::TextureObject) and [`SurfaceObject`](crate::SurfaceObject),
//!   whose uses (of the object and of the memory behind it) the launch notes.
//! * `spin::spin` and `spin::spin_read_sum` run on thread (0, 0, 0) of block (0, 0, 0) only; the
//!   grid-stride kernels (`vector_add::vadd`, `spin::write_index`, `constant_memory::poly_eval`,
//!   `simple_streams::mix_repeat`, `l2::hot_cold`) and `params::*` are correct for any shape. (`spin::spin` spins
//!   as long as it is told to: a huge duration keeps the GPU busy, it does not fault.)
//! * `cluster::cluster_histogram` (built for `sm_90`: thread-block clusters and distributed
//!   shared memory) declares `require dynamic_shared >= 4 * bins`, so every block of a cluster
//!   has room for all the bins, whatever the cluster shape; it is correct for any grid, block
//!   and cluster (a launch without clusters is a cluster of one block), reads `data` below
//!   `data_len` and writes `hist` below `hist_len` only. On a device below compute capability
//!   9.0 its wrapper fails with [`Error::ComputeCapability`](crate::Error::ComputeCapability)
//!   before the module is loaded.
//!
//! # Kernels that launch kernels
//!
//! A kernel file marked `// cuda-runtime: device-runtime` calls the CUDA device runtime, so its
//! module is loaded from an image linked ahead of time with NVIDIA's `libcudadevrt.a` (the
//! separately licensed crate cuda-runtime-devrt, Cargo feature `device-runtime`, default), not
//! from its PTX; without the feature its wrappers fail with
//! [`Error::FeatureDisabled`](crate::Error::FeatureDisabled). Two such files, both hidden
//! (kernels of the tests and examples, not API):
//!
//! * `cdp` (dynamic parallelism; `docs/dynamic-parallelism.md`): `cdp_child_sees_parent`,
//!   `cdp_in_order` (`require steps <= 16`), `cdp_two_streams` (`require rounds <= 100000`) and
//!   `cdp_tail_sums`. Each takes the smallest of its buffers' lengths as `n`, gives each block
//!   the segment of `n` at its linear index (as many elements as the block has threads; blocks
//!   past the end do nothing), and launches from thread (0, 0, 0) only children of the same file
//!   (C++ `__global__` functions without `extern "C"`, so without host wrappers), each given
//!   pointers into the block's segment and its length, or a tail grid bounded by `n` and the
//!   output's length. Children's shapes are fixed by the parents, so every launch shape of a
//!   parent is correct; a launch the device runtime refuses (its pending-launch pool full) is
//!   counted in `failures[0]`, never silent. The launch's buffer uses cover the children and the
//!   tail grid: a grid completes only after all the work it launched.
//! * `graph_cond` (`cudaGraphSetConditional`): `cond_count_to` and `cond_set`, `unsafe` (a
//!   conditional handle cannot be checked).
//!
//! # Extended launches
//!
//! Every wrapper also takes a [`LaunchConfigEx`](crate::LaunchConfigEx) (`cudaLaunchKernelEx`):
//! thread-block clusters, priority, memory synchronisation domains, an access policy window, a
//! programmatic event, cooperative launches. The attributes are checked against the device and
//! the kernel first; programmatic stream serialization is refused (these kernels do not wait for
//! the kernel before them, so the launch could overlap work it must follow), unless the kernel
//! declares `// cuda-runtime: waits-for-previous-kernel`: every thread waits for the kernel
//! before it (`cudaGridDependencySynchronize()`) before touching memory and before exiting.
//!
//! ```no_run
//! use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};
//! # fn main() -> cuda_runtime::Result<()> {
//! let a = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
//! let b = DeviceBuffer::from_slice(&[10.0f32, 20.0, 30.0])?;
//! let mut c = DeviceBuffer::<f32>::new(3)?;
//! let stream = Stream::new()?;
//! kernels::vector_add::vadd(&stream, &LaunchConfig::for_elements(3, 128)?, &a, &b, &mut c)?;
//! stream.synchronize()?;
//! assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
//! # Ok(())
//! # }
//! ```

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

#[cfg(test)]
mod tests {
    use super::{shared_reverse, transpose};
    use crate::{Dim3, Error, ErrorCode, LaunchConfig, Result};

    fn cfg(grid: (u32, u32, u32), block: (u32, u32, u32), smem: u32) -> LaunchConfig {
        LaunchConfig::new(grid, block).with_shared_mem(smem)
    }

    type Check = fn(&LaunchConfig) -> Result<()>;

    const TRANSPOSE: [(&str, Check); 5] = [
        ("copy", transpose::copy_preconditions),
        ("copy_shared_mem", transpose::copy_shared_mem_preconditions),
        ("transpose_naive", transpose::transpose_naive_preconditions),
        (
            "transpose_coalesced",
            transpose::transpose_coalesced_preconditions,
        ),
        (
            "transpose_no_bank_conflicts",
            transpose::transpose_no_bank_conflicts_preconditions,
        ),
    ];

    #[test]
    fn transpose_kernels_refuse_every_block_but_32x8() {
        for (name, check) in TRANSPOSE {
            for b in [
                (32, 32, 1),
                (1, 1, 1),
                (7, 3, 2),
                (1024, 1, 1),
                (32, 8, 2),
                (8, 32, 1),
                (256, 1, 1),
            ] {
                let e = check(&cfg((4, 4, 1), b, 0)).unwrap_err();
                let Error::KernelPrecondition {
                    kernel,
                    precondition,
                    values,
                } = &e
                else {
                    panic!("{name} {b:?}: {e}");
                };
                assert_eq!(*kernel, name);
                assert_eq!(precondition, "block = (32, 8, 1)");
                assert_eq!(*values, format!("block = ({}, {}, {})", b.0, b.1, b.2));
                assert_eq!(e.code(), ErrorCode::InvalidValue);
            }
            // Any grid and any dynamic shared memory with 32x8 blocks.
            for (g, smem) in [
                ((1, 1, 1), 0),
                ((256, 256, 1), 0),
                ((2147483647, 65535, 65535), u32::MAX),
                ((3, 5, 7), 4096),
            ] {
                check(&cfg(g, (32, 8, 1), smem)).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }

    #[test]
    fn dynamic_reverse_needs_4_bytes_of_dynamic_shared_memory_per_element() {
        use shared_reverse::dynamic_reverse_preconditions as check;
        let refused = [
            (64, 0),
            (64, 255),
            (1, 3),
            (1024, 4095),
            (i32::MAX, u32::MAX),
        ];
        for (n, smem) in refused {
            let e = check(&cfg((1, 1, 1), (64, 1, 1), smem), n).unwrap_err();
            assert_eq!(
                e,
                Error::KernelPrecondition {
                    kernel: "dynamic_reverse",
                    precondition: "dynamic_shared >= 4 * n".into(),
                    values: format!("dynamic_shared = {smem}, n = {n}"),
                },
            );
        }
        let accepted = [
            (64, 256),
            (64, 100_000),
            (0, 0),
            (-1, 0),
            (i32::MIN, 0),
            (1, 4),
        ];
        for (n, smem) in accepted {
            for block in [(1, 1, 1), (7, 3, 2), (1024, 1, 1), (64, 1, 1)] {
                check(&cfg((9, 1, 1), block, smem), n).unwrap();
            }
        }
    }

    /// The audit of every kernel, kept: each kernel's declared preconditions. A kernel added to
    /// `kernels/*.cu` fails this test until it is audited for every launch shape and listed.
    #[test]
    fn every_kernel_is_audited_and_declares_its_preconditions() {
        const BLOCK_32X8: &[&str] = &["block = (32, 8, 1)"];
        // Surface byte offsets and texel indices are ints in these kernels.
        const SURFACE_WIDTH: &[&str] = &["width <= 536870911"];
        let expected: &[(&str, &[&str])] = &[
            ("poly_eval", &[]),
            ("scale_through_pointer", &[]), // unsafe
            ("write_address", &[]),         // unsafe
            ("trap_kernel", &[]),           // unsafe
            ("empty", &[]),
            ("four_args", &[]),
            ("scale_rows", &[]),
            ("static_reverse", &[]),
            ("dynamic_reverse", &["dynamic_shared >= 4 * n"]),
            ("spin", &[]),
            ("spin_read_sum", &[]),
            ("write_index", &[]),
            ("copy", BLOCK_32X8),
            ("copy_shared_mem", BLOCK_32X8),
            ("transpose_naive", BLOCK_32X8),
            ("transpose_coalesced", BLOCK_32X8),
            ("transpose_no_bank_conflicts", BLOCK_32X8),
            ("vadd", &[]),
            ("hot_cold", &[]),
            ("fetch_linear", &[]),
            ("fetch_linear_u", &[]),
            ("sample_1d", &[]),
            ("sample_2d", &[]),
            ("sample_2d_u", &[]),
            ("sample_2d_i", &[]),
            ("sample_3d", &[]),
            ("sample_1d_layered", &[]),
            ("sample_2d_layered", &[]),
            ("sample_cubemap", &[]),
            ("sample_cubemap_layered", &[]),
            ("gather_2d", &[]),
            ("sample_2d_lod", &[]),
            ("surf_write_2d", SURFACE_WIDTH),
            ("surf_scale_2d", SURFACE_WIDTH),
            ("surf_write_2d_layered", SURFACE_WIDTH),
            ("surf_write_cubemap", SURFACE_WIDTH),
            ("rotate", &[]),
            ("stream_texture", &["n4 <= 2147483648"]),
            ("stream_global", &[]),
            ("mix_repeat", &[]),
            ("cond_count_to", &[]), // unsafe
            ("cond_set", &[]),      // unsafe
            ("cluster_histogram", &["dynamic_shared >= 4 * bins"]),
            ("empty90", &[]),
            ("pdl_produce", &[]),
            ("pdl_consume", &[]),
            // Device runtime: children get pointers into the parent block's segment and its
            // length (see the module docs, "Kernels that launch kernels").
            ("cdp_child_sees_parent", &[]),
            ("cdp_in_order", &["steps <= 16"]),
            ("cdp_two_streams", &["rounds <= 100000"]),
            ("cdp_tail_sums", &[]),
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("cu") {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            for k in crate::kernel_sig::parse_kernels(&src).unwrap() {
                let declared: Vec<String> = k.preconditions.iter().map(|r| r.to_string()).collect();
                let want = expected
                    .iter()
                    .find(|(n, _)| *n == k.name)
                    .unwrap_or_else(|| {
                        panic!(
                            "kernel {} ({}) is not audited: check it for every launch shape, \
                             then list it here",
                            k.name,
                            path.display()
                        )
                    })
                    .1;
                assert_eq!(declared, want, "kernel {}", k.name);
                seen.push(k.name);
            }
        }
        for (n, _) in expected {
            assert!(seen.iter().any(|s| s == n), "kernel {n} no longer exists");
        }
        // Kernels whose every thread waits for the previous kernel before touching memory and
        // before exiting (their wrappers accept programmatic stream serialization), audited.
        let mut waiting = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) == Some("cu") {
                let src = std::fs::read_to_string(&path).unwrap();
                for k in crate::kernel_sig::parse_kernels(&src).unwrap() {
                    if k.waits_for_previous {
                        waiting.push(k.name);
                    }
                }
            }
        }
        assert_eq!(waiting, ["pdl_consume"]);
        // Kernel files that use the device runtime, and every kernel their kernels may launch
        // from the device (`__global__` functions without `extern "C"`: no host wrapper),
        // audited with their parents.
        let mut device_runtime = Vec::new();
        let mut children = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("cu") {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            if crate::kernel_sig::file_device_runtime(&src) {
                device_runtime.push(path.file_stem().unwrap().to_string_lossy().into_owned());
            }
            for line in src.lines() {
                if let Some(rest) = line.trim().strip_prefix("__global__ void ") {
                    children.push(rest.split('(').next().unwrap().trim().to_string());
                }
            }
        }
        device_runtime.sort();
        children.sort();
        assert_eq!(device_runtime, ["cdp", "graph_cond"]);
        assert_eq!(
            children,
            [
                "cdp_mix_child",
                "cdp_reverse_child",
                "cdp_square_child",
                "cdp_step_child",
                "cdp_sum_tail"
            ]
        );
        assert!(super::cdp::MODULE.uses_device_runtime());
        assert!(super::graph_cond::MODULE.uses_device_runtime());
        assert!(!super::vector_add::MODULE.uses_device_runtime());
    }

    #[test]
    fn device_runtime_kernels_declare_their_bounds() {
        use super::cdp;
        let c = cfg((3, 1, 1), (64, 1, 1), 0);
        cdp::cdp_in_order_preconditions(&c, 16).unwrap();
        cdp::cdp_in_order_preconditions(&c, 0).unwrap();
        let e = cdp::cdp_in_order_preconditions(&c, 17).unwrap_err();
        assert_eq!(
            e,
            Error::KernelPrecondition {
                kernel: "cdp_in_order",
                precondition: "steps <= 16".into(),
                values: "steps = 17".into(),
            }
        );
        cdp::cdp_two_streams_preconditions(&c, 100_000).unwrap();
        let e = cdp::cdp_two_streams_preconditions(&c, u32::MAX).unwrap_err();
        assert_eq!(
            e,
            Error::KernelPrecondition {
                kernel: "cdp_two_streams",
                precondition: "rounds <= 100000".into(),
                values: format!("rounds = {}", u32::MAX),
            }
        );
    }

    /// With the feature, the device-runtime modules carry the image of cuda-runtime-devrt;
    /// without it, their kernels fail with an error naming the feature, before any driver call.
    #[test]
    fn device_runtime_modules_load_the_linked_image_or_name_the_feature() {
        use super::{cdp, graph_cond};
        #[cfg(feature = "device-runtime")]
        {
            assert_eq!(
                cdp::MODULE.linked_image().map(|i| i.as_ptr()),
                Some(cuda_runtime_devrt::cdp::FATBIN.as_ptr())
            );
            assert_eq!(
                graph_cond::MODULE.linked_image().map(|i| i.as_ptr()),
                Some(cuda_runtime_devrt::graph_cond::FATBIN.as_ptr())
            );
            for m in [&cdp::MODULE, &graph_cond::MODULE] {
                let image = m.linked_image().unwrap();
                assert_eq!(
                    crate::classify_image(image).unwrap(),
                    crate::ImageKind::Fatbin
                );
            }
        }
        #[cfg(not(feature = "device-runtime"))]
        {
            assert!(cdp::MODULE.linked_image().is_none());
            assert!(graph_cond::MODULE.linked_image().is_none());
        }
        // Either way the PTX is the relocatable one the wrappers were checked against.
        assert!(cdp::PTX.contains(".extern .func"));
        assert!(cdp::PTX.contains("__cudaCDP2LaunchDeviceV2"));
    }

    #[test]
    fn checks_compare_the_launch_not_its_volume() {
        // 256 threads in another shape than 32x8 are refused: the tiles index by position.
        let c = LaunchConfig {
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(16, 16, 1),
            shared_mem_bytes: 0,
        };
        assert!(transpose::transpose_coalesced_preconditions(&c).is_err());
    }
}
