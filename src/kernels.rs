//! The crate's own kernels (`kernels/*.cu`), with safe, typed launch wrappers generated at build
//! time from their `extern "C" __global__` signatures and checked against the PTX.
//!
//! One module per source file. Each has the PTX (`PTX`), the module (`MODULE`, loaded on each
//! device on first use; [`EmbeddedModule::global`](crate::EmbeddedModule::global) reaches its
//! `__device__` and `__constant__` variables), a static per kernel (e.g. `vector_add::VADD`, for
//! [`EmbeddedKernel::function`](crate::EmbeddedKernel::function): attributes and occupancy), and
//! a launch function per kernel.
//!
//! In the wrappers, a `const T*` parameter takes any [`DeviceRead<T>`](crate::DeviceRead), a
//! `T*` any [`DeviceWrite<T>`](crate::DeviceWrite), and each pointer's `size_t <name>_len`
//! companion is filled from the buffer's length, which the kernel never exceeds: that is what
//! makes these launches safe. Kernels marked `// cuda-runtime: unsafe` in their source take raw
//! addresses and are `unsafe fn`s.
//!
//! ```no_run
//! use cuda_runtime::{kernels, DeviceBuffer, LaunchConfig, Stream};
//! # fn main() -> cuda_runtime::Result<()> {
//! let a = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
//! let b = DeviceBuffer::from_slice(&[10.0f32, 20.0, 30.0])?;
//! let mut c = DeviceBuffer::<f32>::new(3)?;
//! let stream = Stream::new()?;
//! kernels::vector_add::vadd(&stream, &LaunchConfig::for_elements(3, 128), &a, &b, &mut c)?;
//! stream.synchronize()?;
//! assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
//! # Ok(())
//! # }
//! ```

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
