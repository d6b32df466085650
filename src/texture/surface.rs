//! Surface objects: `cudaCreateSurfaceObject`, `cudaDestroySurfaceObject`.

use std::sync::Arc;

use crate::context::{self, Active};
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::memory::{Array, ArrayFlags, ArrayInner};
use crate::queue::{self, Use, Uses};
use crate::texture::Texel;

/// A surface object (`cudaSurfaceObject_t`): read and write access for kernels to a CUDA array
/// made with [`ArrayFlags::SURFACE_LOAD_STORE`] (layered and cubemap arrays included), through
/// `surf2Dwrite`, `surf2DLayeredwrite`, `surfCubemapwrite` and friends. Surface x coordinates
/// are in **bytes** in CUDA C++ (`x * sizeof(texel)`); y and z count rows and slices.
///
/// It keeps its array alive; kernels take it as a typed argument whose use (a write of the
/// array) is noted through the crate's one enqueue path, and dropping it never waits: it is
/// destroyed once the work that used it is done. Within one kernel, texture reads do not see
/// surface writes to the same array (the texture cache is not coherent with them); across
/// launches they do.
///
/// ```no_run
/// use cuda_runtime::{Array, ArrayFlags, SurfaceObject};
/// # fn main() -> cuda_runtime::Result<()> {
/// let arr = Array::<f32>::new_2d(128, 128, ArrayFlags::SURFACE_LOAD_STORE)?;
/// let surf = SurfaceObject::new(&arr)?;
/// # drop(surf);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SurfaceObject {
    raw: u64,
    /// The context it was made in (its array's): its destroy goes there.
    generation: u64,
    device: i32,
    /// The kernels that received the handle (noted through [`Use::object`]): its destroy
    /// waits for them.
    uses: Uses,
    /// `None` only while it is dropped.
    array: Option<Arc<ArrayInner>>,
}

impl SurfaceObject {
    /// Enters the surface's device, failing after a reset of it.
    pub(super) fn enter_ctx(&self) -> Result<crate::context::Active> {
        crate::context::enter_handle(self.device, self.generation, "surface object")
    }

    /// A surface over `array` (`cudaCreateSurfaceObject`), on the array's device.
    ///
    /// # Errors
    /// [`Error::SurfaceNotLoadStore`] when the array was made without
    /// [`ArrayFlags::SURFACE_LOAD_STORE`] (the driver accepts it, against its documentation);
    /// [`Error::ContextDestroyed`] after a reset.
    #[doc(alias = "cudaCreateSurfaceObject")]
    pub fn new<T: Texel>(array: &Array<T>) -> Result<SurfaceObject> {
        record((|| {
            let inner = &array.inner;
            if inner.flags & ArrayFlags::SURFACE_LOAD_STORE.bits() == 0 {
                return Err(Error::SurfaceNotLoadStore { flags: inner.flags });
            }
            let a = context::enter_handle(inner.device(), inner.generation(), "array")?;
            let mut res = super::resource(sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY);
            res.res.array = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 {
                hArray: inner.raw(),
            };
            let mut raw: sys::CUsurfObject = 0;
            // SAFETY: the context is current; the resource names a live array of it, made with
            // the surface load/store flag.
            a.check(
                unsafe { sys::cuSurfObjectCreate(&mut raw, &res) },
                "cuSurfObjectCreate",
            )?;
            Ok(SurfaceObject {
                raw,
                generation: a.generation(),
                device: a.dev.ordinal,
                uses: Uses::default(),
                array: Some(inner.clone()),
            })
        })())
    }

    /// The raw handle (`CUsurfObject`, the runtime's `cudaSurfaceObject_t`). Passing it to a
    /// kernel by value bypasses the crate's tracking: use the typed kernel arguments.
    pub fn as_raw(&self) -> u64 {
        self.raw
    }

    /// For the crate's kernel wrappers: the handle, and the uses to hand to the launch (of the
    /// object, and a write of its array), which the launch checks and notes.
    #[doc(hidden)]
    #[inline]
    pub fn kernel_arg(&mut self) -> (u64, Use<'_>, Use<'_>) {
        let array = &self
            .array
            .as_ref()
            .expect("a surface object's array is taken only by its drop")
            .track;
        (
            self.raw,
            Use::object(&self.uses, array),
            Use::device(array, true),
        )
    }
}

impl SurfaceObject {
    /// As [`kernel_arg`](Self::kernel_arg), for a parameter whose kernel declares what it
    /// accesses (`// cuda-runtime: surface <param> <shapes> <texel bytes>`): a surface of
    /// another shape or texel size is refused.
    #[doc(hidden)]
    pub fn kernel_arg_expect(
        &mut self,
        kernel: &'static str,
        param: &'static str,
        shapes: &[&str],
        bytes: &str,
    ) -> Result<(u64, Use<'_>, Use<'_>)> {
        if let Some(a) = &self.array {
            let shape = super::shape_name(a.shape);
            let texel = a.format.bytes() * a.channels as usize;
            if !shapes.contains(&shape) || bytes.parse::<usize>().ok() != Some(texel) {
                return crate::error::record(Err(Error::InvalidValue {
                    what: "surface argument",
                    value: format!("{param} of {kernel}: a {shape} surface of {texel}-byte texels"),
                    reason: "the kernel accesses another kind of surface (see its declaration)",
                }));
            }
        }
        Ok(self.kernel_arg())
    }
}

impl Drop for SurfaceObject {
    fn drop(&mut self) {
        let (device, generation) = (self.device, self.generation);
        let waits = self.uses.take_points();
        let raw = self.raw;
        let keep = self.array.take();
        let destroy = move |a: Option<&Active>| {
            // SAFETY: a live surface object of this context; every queued use of it is done.
            let r = a.map_or(Ok(()), |a| {
                a.check(
                    unsafe { sys::cuSurfObjectDestroy(raw) },
                    "cuSurfObjectDestroy",
                )
            });
            drop(keep);
            r
        };
        if waits.is_empty() {
            // Destroying an object queues nothing and waits for nothing: the capture-mode
            // swap is skipped while no capture of the crate is open (`release_async`).
            context::release_async(
                device,
                generation,
                "destroying a surface object",
                move |a| destroy(Some(a)),
            );
        } else {
            queue::defer_free(
                device,
                generation,
                waits,
                "destroying a surface object",
                destroy,
            );
        }
    }
}
