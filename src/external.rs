//! External resource interoperability: memory and semaphores another API or process exported
//! (Vulkan, another CUDA process's `cuMemCreate` allocation, a dma-buf), imported into CUDA
//! (`cudaImportExternalMemory`, `cudaImportExternalSemaphore` and the calls on them).
//!
//! # Safety model
//!
//! * An imported handle's descriptor is given to the driver, which owns it from then on: the
//!   import takes an [`OwnedFd`] and consumes it only on success (on failure it is closed by the
//!   drop, as the caller would).
//! * A buffer mapped from external memory ([`ExternalMemory::mapped_buffer`]) is an ordinary
//!   [`DeviceBuffer`]: its uses are noted like any other's; its drop frees
//!   the mapping (`cuMemFree`, on the dropping thread once its own uses are done) and only then
//!   lets the external memory go, which the runtime requires (`cudaDestroyExternalMemory` after
//!   every mapping is freed). A mapped mipmapped array keeps the external memory alive the same
//!   way.
//! * The memory is shared with whoever exported it: what they write meanwhile is not ordered
//!   with CUDA work unless both sides use a semaphore (or another agreement). The crate's types
//!   are plain data ([`DeviceRepr`], valid for every bit pattern), so such a
//!   race gives wrong values, never undefined behaviour in the program.
//! * Signals and waits of a semaphore are queued through the crate's one enqueue path and noted
//!   on the semaphore; dropping it destroys it (`cudaDestroyExternalSemaphore`) only after
//!   them, in the background.

use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::Arc;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};
use crate::memory::{Alloc, DeviceBuffer, DeviceRepr};
use crate::queue::{self, Use};
use crate::stream::Stream;

/// What kind of descriptor external memory comes as (`cudaExternalMemoryHandleType`, the Linux
/// kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExternalMemoryKind {
    /// An opaque file descriptor (`cudaExternalMemoryHandleTypeOpaqueFd`): Vulkan's
    /// `VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`, or a CUDA allocation exported with
    /// `cuMemExportToShareableHandle` as a POSIX file descriptor.
    OpaqueFd,
    /// A Linux dma-buf (`cudaExternalMemoryHandleTypeDmaBufFd`, CUDA 13).
    DmaBufFd,
}

impl ExternalMemoryKind {
    fn to_raw(self) -> sys::CUexternalMemoryHandleType {
        use sys::CUexternalMemoryHandleType::*;
        match self {
            ExternalMemoryKind::OpaqueFd => CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            ExternalMemoryKind::DmaBufFd => CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD,
        }
    }
}

/// An external memory object imported on a device (`cudaExternalMemory_t`). Cloning shares it;
/// it is destroyed (`cudaDestroyExternalMemory`) when the last clone and the last buffer or
/// mipmapped array mapped from it are gone.
#[derive(Debug, Clone)]
pub struct ExternalMemory {
    inner: Arc<ExtMemInner>,
}

/// The shared part of an [`ExternalMemory`]. (Public in a private path: unnameable outside the
/// crate.)
#[doc(hidden)]
#[derive(Debug)]
pub struct ExtMemInner {
    raw: Raw<sys::CUextMemory_st>,
    device: i32,
    generation: u64,
    size: u64,
}

impl Drop for ExtMemInner {
    fn drop(&mut self) {
        let raw = self.raw;
        context::release(
            self.device,
            self.generation,
            "destroying external memory",
            move |a| {
                // SAFETY: imported in this live context; every mapping of it was freed before
                // its hold on this object was released.
                a.check(
                    unsafe { sys::cuDestroyExternalMemory(raw.get()) },
                    "cuDestroyExternalMemory",
                )
            },
        );
    }
}

/// Checks a mapping of `bytes` bytes at `offset` against an object of `size` bytes.
fn check_span(offset: u64, bytes: Option<u64>, size: u64, what: &'static str) -> Result<()> {
    match bytes.and_then(|b| offset.checked_add(b)) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::InvalidValue {
            what,
            value: format!(
                "{} bytes at offset {offset}",
                bytes.map_or("too many".to_string(), |b| b.to_string())
            ),
            reason: "the mapping runs past the end of the external memory",
        }),
    }
}

impl ExternalMemory {
    /// Imports `size` bytes of external memory on the current device
    /// (`cudaImportExternalMemory`). `dedicated` must say whether the exporter made a dedicated
    /// allocation (Vulkan's `VkMemoryDedicatedAllocateInfo`; `cudaExternalMemoryDedicated`).
    /// The descriptor goes to the driver on success.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a size of 0; the driver's error (`cudaErrorInvalidValue`,
    /// `cudaErrorOperatingSystem`) for a descriptor it cannot import or a size beyond it.
    #[doc(alias = "cudaImportExternalMemory")]
    pub fn import(
        kind: ExternalMemoryKind,
        fd: OwnedFd,
        size: u64,
        dedicated: bool,
    ) -> Result<ExternalMemory> {
        record((|| {
            if size == 0 {
                return Err(Error::InvalidValue {
                    what: "cudaImportExternalMemory size",
                    value: "0".into(),
                    reason: "external memory has at least one byte",
                });
            }
            let a = context::enter_current()?;
            let mut desc = std::mem::MaybeUninit::<sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC>::zeroed();
            // SAFETY: all-zero is valid for every field but the handle type (an enum without a
            // zero), which is written before the value is assumed initialised; the handle is a
            // union of an int and pointers.
            let mut desc = unsafe {
                std::ptr::addr_of_mut!((*desc.as_mut_ptr()).type_).write(kind.to_raw());
                desc.assume_init()
            };
            desc.handle.fd = std::os::fd::AsRawFd::as_raw_fd(&fd);
            desc.size = size;
            desc.flags = if dedicated { 0x1 } else { 0 };
            let mut raw: sys::CUexternalMemory = std::ptr::null_mut();
            // SAFETY: the context is current; a valid descriptor naming an open descriptor;
            // valid out-parameter.
            a.check(
                unsafe { sys::cuImportExternalMemory(&mut raw, &desc) },
                "cuImportExternalMemory",
            )?;
            // The driver owns the descriptor now: it must not be closed here.
            let _ = fd.into_raw_fd();
            Ok(ExternalMemory {
                inner: Arc::new(ExtMemInner {
                    raw: Raw(raw),
                    device: a.dev.ordinal,
                    generation: a.generation(),
                    size,
                }),
            })
        })())
    }

    /// The size given at import, in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// The device it was imported on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.inner.device)
    }

    /// The raw handle (`CUexternalMemory`).
    pub fn as_raw(&self) -> sys::CUexternalMemory {
        self.inner.raw.get()
    }

    fn enter(&self) -> Result<Active> {
        context::enter_handle(self.inner.device, self.inner.generation, "external memory")
    }

    /// Maps `len` elements of `T` at byte `offset` as a device buffer
    /// (`cudaExternalMemoryGetMappedBuffer`). The buffer is freed (`cudaFree`) when dropped,
    /// after the work that used it, and keeps the external memory alive until then. Several
    /// mappings of one object may overlap (as in the runtime): each is its own buffer, and
    /// writes through one are seen through the others.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for an empty mapping or one past the end; the driver's error for
    /// an offset it refuses (misaligned).
    #[doc(alias = "cudaExternalMemoryGetMappedBuffer")]
    pub fn mapped_buffer<T: DeviceRepr>(&self, offset: u64, len: usize) -> Result<DeviceBuffer<T>> {
        record((|| {
            let bytes = len.checked_mul(std::mem::size_of::<T>()).map(|b| b as u64);
            if bytes == Some(0) {
                return Err(Error::InvalidValue {
                    what: "cudaExternalMemoryGetMappedBuffer",
                    value: format!("{len} elements"),
                    reason: "a mapping has at least one byte",
                });
            }
            check_span(
                offset,
                bytes,
                self.inner.size,
                "cudaExternalMemoryGetMappedBuffer",
            )?;
            let bytes = bytes.unwrap_or(0);
            let a = self.enter()?;
            // SAFETY: all-zero is a valid buffer descriptor (integers only).
            let mut desc: sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC = unsafe { std::mem::zeroed() };
            desc.offset = offset;
            desc.size = bytes;
            let mut ptr = 0u64;
            queue::alloc_retry(&a, || {
                // SAFETY: live external memory of this context; a span inside it; valid
                // out-parameter.
                a.check(
                    unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, self.as_raw(), &desc) },
                    "cuExternalMemoryGetMappedBuffer",
                )
            })?;
            let mut al = Alloc::plain(ptr, bytes as usize, a.dev.ordinal, a.generation());
            al.external = Some(self.inner.clone());
            Ok(DeviceBuffer::from_alloc(al, len))
        })())
    }

    /// Maps a mipmapped array of `levels` levels, level 0 of `shape`, texels of `T`, at byte
    /// `offset` (`cudaExternalMemoryGetMappedMipmappedArray`). The array keeps the external
    /// memory alive; it is destroyed after its uses, then the external memory may go.
    ///
    /// # Errors
    /// As [`MipmappedArray::new`](crate::MipmappedArray::new) for the shape, flags and levels;
    /// the driver's error for a layout the exporter's memory does not have.
    #[doc(alias = "cudaExternalMemoryGetMappedMipmappedArray")]
    pub fn mapped_mipmapped_array<T: crate::texture::Texel>(
        &self,
        offset: u64,
        shape: crate::ArrayShape,
        levels: u32,
        flags: crate::ArrayFlags,
    ) -> Result<crate::MipmappedArray<T>> {
        record((|| {
            if offset >= self.inner.size {
                return Err(Error::InvalidValue {
                    what: "cudaExternalMemoryGetMappedMipmappedArray offset",
                    value: offset.to_string(),
                    reason: "the offset is past the end of the external memory",
                });
            }
            let a = self.enter()?;
            let ext = self.inner.clone();
            let raw = self.as_raw();
            let a = &a;
            crate::MipmappedArray::<T>::from_external(a, shape, levels, flags, move |desc| {
                let mut d =
                    std::mem::MaybeUninit::<sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC>::zeroed(
                    );
                // SAFETY: all-zero is valid for every field but the array descriptor's format
                // (an enum without a zero), written whole before the value is assumed
                // initialised.
                let d = unsafe {
                    std::ptr::addr_of_mut!((*d.as_mut_ptr()).arrayDesc).write(*desc);
                    let mut d = d.assume_init();
                    d.offset = offset;
                    d.numLevels = levels;
                    d
                };
                let mut out: sys::CUmipmappedArray = std::ptr::null_mut();
                // SAFETY: live external memory of the current context; checked array
                // descriptor; valid out-parameter.
                a.check(
                    unsafe { sys::cuExternalMemoryGetMappedMipmappedArray(&mut out, raw, &d) },
                    "cuExternalMemoryGetMappedMipmappedArray",
                )?;
                Ok((out, ext))
            })
        })())
    }
}

/// What kind of descriptor an external semaphore comes as (`cudaExternalSemaphoreHandleType`,
/// the Linux kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExternalSemaphoreKind {
    /// A binary semaphore as an opaque file descriptor
    /// (`cudaExternalSemaphoreHandleTypeOpaqueFd`; Vulkan's `VkSemaphore`).
    OpaqueFd,
    /// A timeline semaphore as an opaque file descriptor
    /// (`cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd`): signals and waits carry values.
    TimelineSemaphoreFd,
}

impl ExternalSemaphoreKind {
    fn to_raw(self) -> sys::CUexternalSemaphoreHandleType {
        use sys::CUexternalSemaphoreHandleType::*;
        match self {
            ExternalSemaphoreKind::OpaqueFd => CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
            ExternalSemaphoreKind::TimelineSemaphoreFd => {
                CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
            }
        }
    }
}

/// An external semaphore imported on a device (`cudaExternalSemaphore_t`), destroyed
/// (`cudaDestroyExternalSemaphore`) on drop, after the signals and waits queued on it.
#[derive(Debug)]
pub struct ExternalSemaphore {
    raw: Raw<sys::CUextSemaphore_st>,
    kind: ExternalSemaphoreKind,
    /// Notes the signals and waits queued on the semaphore (an allocation of no bytes: never
    /// freed), so that the drop destroys it after them.
    track: Alloc,
}

impl Drop for ExternalSemaphore {
    fn drop(&mut self) {
        let raw = self.raw;
        let (device, generation) = (self.track.device, self.track.generation);
        let waits = self.track.uses.take_points();
        queue::defer_free(
            device,
            generation,
            waits,
            "destroying an external semaphore",
            move |a| {
                let Some(a) = a else { return Ok(()) };
                // SAFETY: imported in this live context; the signals and waits queued on it
                // are done.
                a.check(
                    unsafe { sys::cuDestroyExternalSemaphore(raw.get()) },
                    "cuDestroyExternalSemaphore",
                )
            },
        );
    }
}

impl ExternalSemaphore {
    /// Imports a semaphore on the current device (`cudaImportExternalSemaphore`). The
    /// descriptor goes to the driver on success.
    #[doc(alias = "cudaImportExternalSemaphore")]
    pub fn import(kind: ExternalSemaphoreKind, fd: OwnedFd) -> Result<ExternalSemaphore> {
        record((|| {
            let a = context::enter_current()?;
            let mut desc =
                std::mem::MaybeUninit::<sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC>::zeroed();
            // SAFETY: all-zero is valid for every field but the handle type (an enum without a
            // zero), written before the value is assumed initialised; the handle is a union of
            // an int and pointers.
            let mut desc = unsafe {
                std::ptr::addr_of_mut!((*desc.as_mut_ptr()).type_).write(kind.to_raw());
                desc.assume_init()
            };
            desc.handle.fd = std::os::fd::AsRawFd::as_raw_fd(&fd);
            let mut raw: sys::CUexternalSemaphore = std::ptr::null_mut();
            // SAFETY: the context is current; a valid descriptor naming an open descriptor;
            // valid out-parameter.
            a.check(
                unsafe { sys::cuImportExternalSemaphore(&mut raw, &desc) },
                "cuImportExternalSemaphore",
            )?;
            let _ = fd.into_raw_fd();
            Ok(ExternalSemaphore {
                raw: Raw(raw),
                kind,
                track: Alloc::plain(0, 0, a.dev.ordinal, a.generation()),
            })
        })())
    }

    /// The device and context generation it was imported in.
    pub(crate) fn id(&self) -> (i32, u64) {
        (self.track.device, self.track.generation)
    }

    /// The kind it was imported as.
    pub fn kind(&self) -> ExternalSemaphoreKind {
        self.kind
    }

    /// The raw handle (`CUexternalSemaphore`).
    pub fn as_raw(&self) -> sys::CUexternalSemaphore {
        self.raw.get()
    }

    /// Queues a signal of the semaphore on `stream` (`cudaSignalExternalSemaphoresAsync`, one
    /// semaphore): once the stream's earlier work is done the semaphore is signalled, a
    /// timeline semaphore to `value` (ignored for a binary one).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] for a stream of another device.
    #[doc(alias = "cudaSignalExternalSemaphoresAsync")]
    pub fn signal_async(&self, value: u64, stream: &Stream) -> Result<()> {
        record((|| {
            let lane = self.lane(stream, "cudaSignalExternalSemaphoresAsync")?;
            // SAFETY: all-zero is valid signal parameters (integers only).
            let mut p: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
            p.params.fence.value = value;
            let sem = self.raw.get();
            lane.submit(
                "cudaSignalExternalSemaphoresAsync",
                &[Use::device(&self.track, true)],
                |a, raw| {
                    // SAFETY: a live semaphore of this context (noted as used, so not
                    // destroyed before the signal runs); one parameter set; live stream.
                    a.check(
                        unsafe { sys::cuSignalExternalSemaphoresAsync(&sem, &p, 1, raw) },
                        "cuSignalExternalSemaphoresAsync",
                    )
                },
            )
        })())
    }

    /// Makes `stream`'s later work wait until the semaphore is signalled, a timeline semaphore
    /// until it reaches `value` (`cudaWaitExternalSemaphoresAsync`, one semaphore). Does not
    /// block the host.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] for a stream of another device.
    #[doc(alias = "cudaWaitExternalSemaphoresAsync")]
    pub fn wait_async(&self, value: u64, stream: &Stream) -> Result<()> {
        record((|| {
            let lane = self.lane(stream, "cudaWaitExternalSemaphoresAsync")?;
            // SAFETY: all-zero is valid wait parameters (integers only).
            let mut p: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
            p.params.fence.value = value;
            let sem = self.raw.get();
            lane.submit(
                "cudaWaitExternalSemaphoresAsync",
                &[Use::device(&self.track, true)],
                |a, raw| {
                    // SAFETY: as in `signal_async`.
                    a.check(
                        unsafe { sys::cuWaitExternalSemaphoresAsync(&sem, &p, 1, raw) },
                        "cuWaitExternalSemaphoresAsync",
                    )
                },
            )
        })())
    }

    fn lane<'s>(&self, stream: &'s Stream, call: &'static str) -> Result<queue::Lane<'s>> {
        if stream.device().ordinal() != self.track.device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the stream",
                found: stream.device().ordinal(),
                expected: self.track.device,
            });
        }
        stream.lane()
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ExternalMemory>();
    send_sync::<ExternalSemaphore>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_checked_without_overflow() {
        assert!(check_span(0, Some(4096), 4096, "m").is_ok());
        assert!(check_span(4096, Some(1), 8192, "m").is_ok());
        let e = check_span(4096, Some(4097), 8192, "m").unwrap_err();
        assert!(e.to_string().contains("4097 bytes at offset 4096"), "{e}");
        assert!(check_span(u64::MAX, Some(2), u64::MAX, "m").is_err());
        let e = check_span(0, None, 10, "m").unwrap_err();
        assert!(e.to_string().contains("too many"), "{e}");
    }

    #[test]
    fn a_zero_size_import_is_refused_before_the_driver() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let e =
            ExternalMemory::import(ExternalMemoryKind::OpaqueFd, f.into(), 0, false).unwrap_err();
        assert!(e.to_string().contains("at least one byte"), "{e}");
    }
}
