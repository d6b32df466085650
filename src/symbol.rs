//! Module globals: typed handles to `__device__` and `__constant__` variables
//! (`cudaMemcpyToSymbol`, `cudaMemcpyFromSymbol`, `cudaGetSymbolAddress`, `cudaGetSymbolSize`).

use std::ffi::CString;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::context::{self, Active};
use crate::driver::{self, sys};
use crate::error::{record, Error, Result};
use crate::memory::{PageLocked, PageLockedMut};
use crate::queue::{Lane, LoadedCode, Use};
use crate::stream::{self, Stream};
use crate::DeviceRepr;

/// A `__device__` or `__constant__` variable of a loaded module, typed as `T` (whose size must
/// match the variable's). The variable belongs to its module and is never freed by the crate;
/// the handle keeps a user module loaded.
pub struct Symbol<T: DeviceRepr> {
    ptr: u64,
    device: i32,
    generation: u64,
    name: Arc<str>,
    /// The user module or library the variable belongs to: its asynchronous copies are noted
    /// there too, and it is unloaded only after them, whichever handle goes last.
    module: Option<Arc<dyn LoadedCode>>,
    /// Notes the asynchronous copies queued on the variable (an allocation of no bytes: never
    /// freed).
    track: crate::memory::Alloc,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> std::fmt::Debug for Symbol<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbol")
            .field("name", &self.name)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("device", &self.device)
            .finish()
    }
}

impl<T: DeviceRepr> Symbol<T> {
    pub(crate) fn lookup(
        a: &Active,
        module: sys::CUmodule,
        name: &str,
        keep: Option<Arc<dyn LoadedCode>>,
    ) -> Result<Symbol<T>> {
        let cname = CString::new(name).map_err(|_| Error::InvalidValue {
            what: "symbol name",
            value: name.to_string(),
            reason: "contains a NUL byte",
        })?;
        let (mut ptr, mut size) = (0u64, 0usize);
        // SAFETY: live module of the current context; NUL-terminated name; out-parameters.
        let r = driver::rc(unsafe {
            sys::cuModuleGetGlobal_v2(&mut ptr, &mut size, module, cname.as_ptr())
        });
        match r {
            0 => {}
            500 => {
                return Err(Error::NotFound {
                    what: "symbol",
                    name: name.to_string(),
                })
            }
            code => return Err(a.dev.note(Error::from_driver(code, "cuModuleGetGlobal"))),
        }
        Symbol::checked(a, ptr, size, name, keep)
    }

    /// A symbol of `size` bytes at `ptr` in the entered context `a`, typed as `T` when the
    /// sizes agree.
    pub(crate) fn checked(
        a: &Active,
        ptr: u64,
        size: usize,
        name: &str,
        keep: Option<Arc<dyn LoadedCode>>,
    ) -> Result<Symbol<T>> {
        if size != std::mem::size_of::<T>() {
            return Err(Error::SymbolSize {
                name: name.to_string(),
                symbol_size: size,
                host_size: std::mem::size_of::<T>(),
            });
        }
        Ok(Symbol {
            ptr,
            device: a.dev.ordinal,
            generation: a.generation(),
            name: name.into(),
            module: keep,
            track: crate::memory::Alloc::plain(0, 0, a.dev.ordinal, a.generation()),
            _t: PhantomData,
        })
    }

    /// The variable's device address (`cudaGetSymbolAddress`).
    #[doc(alias = "cudaGetSymbolAddress")]
    pub fn as_raw(&self) -> u64 {
        self.ptr
    }

    /// The variable's size in bytes (`cudaGetSymbolSize`), equal to `size_of::<T>()`.
    #[doc(alias = "cudaGetSymbolSize")]
    pub fn size(&self) -> usize {
        std::mem::size_of::<T>()
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variable's device and context generation.
    pub(crate) fn id(&self) -> (i32, u64) {
        (self.device, self.generation)
    }

    /// What keeps the variable's module loaded (none for the crate's own modules, loaded for
    /// the context's life), for a graph node that copies to or from it.
    pub(crate) fn module_keep(&self) -> Option<Arc<dyn LoadedCode>> {
        self.module.clone()
    }

    fn enter<'s>(&self, stream: Option<&'s Stream>) -> Result<Lane<'s>> {
        match stream {
            Some(s) => {
                if s.inner.device != self.device {
                    return Err(Error::DeviceMismatch {
                        call: "cudaMemcpyToSymbolAsync",
                        what: "the symbol",
                        found: self.device,
                        expected: s.inner.device,
                    });
                }
                let lane = s.lane()?;
                lane.a.expect_generation(self.generation, "symbol")?;
                Ok(lane)
            }
            None => {
                let a = context::enter_handle(self.device, self.generation, "symbol")?;
                let q = stream::default_queue(&a);
                Ok(Lane::new_owned(a, q))
            }
        }
    }

    fn write(&self, value: &T, stream: Option<&Stream>) -> Result<()> {
        self.write_bytes(0, bytemuck::bytes_of(value), stream)
    }

    /// Copies `bytes` to the variable's bytes from `offset` (checked by the caller to lie
    /// inside it), and waits for the copy.
    fn write_bytes(&self, offset: usize, bytes: &[u8], stream: Option<&Stream>) -> Result<()> {
        let lane = self.enter(stream)?;
        let mark = lane.mark();
        let ptr = self.ptr + offset as u64;
        lane.submit("cudaMemcpyToSymbol", &[], |a, raw| {
            // SAFETY: the symbol is `size_of::<T>()` bytes of live device memory of this
            // context (checked at lookup); `value` is borrowed for the call.
            a.check(
                unsafe { sys::cuMemcpyHtoDAsync_v2(ptr, bytes.as_ptr().cast(), bytes.len(), raw) },
                "cuMemcpyHtoDAsync",
            )?;
            // `value` may be page-locked memory read later by the DMA engine; synchronous
            // calls wait anyway. Waiting keeps the borrow honest in both cases.
            // SAFETY: live stream of the current context.
            a.check(
                unsafe { sys::cuStreamSynchronize(raw) },
                "cuStreamSynchronize",
            )
        })?;
        lane.synchronized(mark);
        Ok(())
    }

    fn read(&self, stream: Option<&Stream>) -> Result<T> {
        let mut value = T::zeroed();
        self.read_bytes(0, bytemuck::bytes_of_mut(&mut value), stream)?;
        Ok(value)
    }

    /// Copies the variable's bytes from `offset` (checked by the caller) into `bytes`, and
    /// waits for the copy.
    fn read_bytes(&self, offset: usize, bytes: &mut [u8], stream: Option<&Stream>) -> Result<()> {
        let lane = self.enter(stream)?;
        let mark = lane.mark();
        let ptr = self.ptr + offset as u64;
        lane.submit("cudaMemcpyFromSymbol", &[], |a, raw| {
            // SAFETY: as in `write`; `value` is exclusively borrowed and any bit pattern is a
            // valid `T`.
            a.check(
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(bytes.as_mut_ptr().cast(), ptr, bytes.len(), raw)
                },
                "cuMemcpyDtoHAsync",
            )?;
            // SAFETY: live stream of the current context.
            a.check(
                unsafe { sys::cuStreamSynchronize(raw) },
                "cuStreamSynchronize",
            )
        })?;
        lane.synchronized(mark);
        Ok(())
    }

    /// Queues a copy between the variable's bytes from `offset` and page-locked memory on
    /// `stream`, without waiting: the page-locked side notes the use (its CPU access and drop
    /// wait for the copy). `offset` and the host side's size are checked by the caller.
    fn copy_pinned<U: DeviceRepr>(
        &self,
        offset: usize,
        host: &(impl PageLocked<U> + ?Sized),
        to_symbol: bool,
        stream: &Stream,
        call: &'static str,
    ) -> Result<()> {
        let bytes = host.len() * std::mem::size_of::<U>();
        if bytes == 0 {
            return Ok(());
        }
        let lane = self.enter(Some(stream))?;
        let ptr = self.ptr + offset as u64;
        let hp = host.host_ptr();
        let alloc = crate::memory::sealed_allocation(host);
        let uses = [
            Use::host_copy(alloc, !to_symbol),
            Use::device(&self.track, to_symbol),
        ];
        let code = self.module.as_deref().map(LoadedCode::code_uses);
        lane.submit_with_code(call, &uses, code, |a, raw| {
            if to_symbol {
                // SAFETY: `ptr..ptr + bytes` lies inside the variable (checked by the
                // caller), live device memory of this context while the module is held; the
                // page-locked side holds `bytes` bytes and stays allocated and away from the
                // CPU until the use noted on it is waited for.
                a.check(
                    unsafe { sys::cuMemcpyHtoDAsync_v2(ptr, hp.cast(), bytes, raw) },
                    "cuMemcpyHtoDAsync",
                )
            } else {
                // SAFETY: as above; the page-locked side is writable (checked by the enqueue
                // path) and any bit pattern is a valid `U`.
                a.check(
                    unsafe { sys::cuMemcpyDtoHAsync_v2(hp.cast_mut().cast(), ptr, bytes, raw) },
                    "cuMemcpyDtoHAsync",
                )
            }
        })
    }

    /// Copies one `T` from page-locked memory into the variable on `stream`
    /// (`cudaMemcpyToSymbolAsync` from page-locked memory) without waiting: `src` remembers
    /// the copy, and writing it from the CPU or dropping it waits for the copy.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `src` holds exactly one element;
    /// [`Error::DeviceMismatch`] for a stream of another device.
    #[doc(alias = "cudaMemcpyToSymbolAsync")]
    pub fn copy_from_pinned_async(
        &self,
        src: &(impl PageLocked<T> + ?Sized),
        stream: &Stream,
    ) -> Result<()> {
        let call = "cudaMemcpyToSymbolAsync (page-locked)";
        record(one(src.len(), call).and_then(|()| self.copy_pinned(0, src, true, stream, call)))
    }

    /// Copies the variable into page-locked memory holding one `T`, on `stream`
    /// (`cudaMemcpyFromSymbolAsync` to page-locked memory) without waiting: `dst` remembers
    /// the copy, and its CPU access or drop waits for it.
    ///
    /// # Errors
    /// As [`copy_from_pinned_async`](Self::copy_from_pinned_async); [`Error::InvalidValue`]
    /// for a read-only registration.
    #[doc(alias = "cudaMemcpyFromSymbolAsync")]
    pub fn copy_to_pinned_async(
        &self,
        dst: &mut (impl PageLockedMut<T> + ?Sized),
        stream: &Stream,
    ) -> Result<()> {
        let call = "cudaMemcpyFromSymbolAsync (page-locked)";
        record(one(dst.len(), call).and_then(|()| self.copy_pinned(0, &*dst, false, stream, call)))
    }

    /// Copies `value` into the variable (`cudaMemcpyToSymbol`). Blocks until done.
    #[doc(alias = "cudaMemcpyToSymbol")]
    pub fn copy_from_host(&self, value: &T) -> Result<()> {
        record(self.write(value, None))
    }

    /// Copies `value` into the variable in stream order on `stream`
    /// (`cudaMemcpyToSymbolAsync`); returns once the copy is done, so `value` is free again.
    #[doc(alias = "cudaMemcpyToSymbolAsync")]
    pub fn copy_from_host_async(&self, value: &T, stream: &Stream) -> Result<()> {
        record(self.write(value, Some(stream)))
    }

    /// Reads the variable (`cudaMemcpyFromSymbol`). Blocks until done.
    #[doc(alias = "cudaMemcpyFromSymbol")]
    pub fn copy_to_host(&self) -> Result<T> {
        record(self.read(None))
    }

    /// Reads the variable in stream order on `stream` (`cudaMemcpyFromSymbolAsync`); returns
    /// once the value is read.
    #[doc(alias = "cudaMemcpyFromSymbolAsync")]
    pub fn copy_to_host_async(&self, stream: &Stream) -> Result<T> {
        record(self.read(Some(stream)))
    }
}

fn one(len: usize, call: &'static str) -> Result<()> {
    if len == 1 {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            what: call,
            expected: 1,
            actual: len,
        })
    }
}

/// The byte offset of elements `offset..offset + count` of an array of `n` elements of `E`,
/// checked to lie inside it.
fn element_range<E>(offset: usize, count: usize, n: usize, what: &'static str) -> Result<usize> {
    match offset.checked_add(count) {
        Some(end) if end <= n => Ok(offset * std::mem::size_of::<E>()),
        end => Err(Error::OutOfRange {
            what,
            start: offset,
            end: end.unwrap_or(usize::MAX),
            len: n,
        }),
    }
}

/// Partial copies of array variables (`cudaMemcpyToSymbol` / `cudaMemcpyFromSymbol` with a
/// count and an offset), in elements, checked against the array's length.
impl<E: DeviceRepr, const N: usize> Symbol<[E; N]>
where
    [E; N]: DeviceRepr,
{
    /// The number of elements of the array.
    pub fn len(&self) -> usize {
        N
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        N == 0
    }

    /// Copies `src` into elements `offset..offset + src.len()` of the variable
    /// (`cudaMemcpyToSymbol(symbol, src, count, offset)`). Blocks until done.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] with the range and the length when it does not fit.
    #[doc(alias = "cudaMemcpyToSymbol")]
    pub fn copy_from_host_at(&self, offset: usize, src: &[E]) -> Result<()> {
        record((|| {
            let at = element_range::<E>(offset, src.len(), N, "cudaMemcpyToSymbol range")?;
            if src.is_empty() {
                return Ok(());
            }
            self.write_bytes(at, bytemuck::cast_slice(src), None)
        })())
    }

    /// As [`copy_from_host_at`](Self::copy_from_host_at), in stream order on `stream`
    /// (`cudaMemcpyToSymbolAsync`); returns once `src` has been read.
    #[doc(alias = "cudaMemcpyToSymbolAsync")]
    pub fn copy_from_host_at_async(&self, offset: usize, src: &[E], stream: &Stream) -> Result<()> {
        record((|| {
            let at = element_range::<E>(offset, src.len(), N, "cudaMemcpyToSymbolAsync range")?;
            if src.is_empty() {
                return Ok(());
            }
            self.write_bytes(at, bytemuck::cast_slice(src), Some(stream))
        })())
    }

    /// Copies elements `offset..offset + dst.len()` of the variable into `dst`
    /// (`cudaMemcpyFromSymbol(dst, symbol, count, offset)`). Blocks until done.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] with the range and the length when it does not fit.
    #[doc(alias = "cudaMemcpyFromSymbol")]
    pub fn copy_to_host_at(&self, offset: usize, dst: &mut [E]) -> Result<()> {
        record((|| {
            let at = element_range::<E>(offset, dst.len(), N, "cudaMemcpyFromSymbol range")?;
            if dst.is_empty() {
                return Ok(());
            }
            self.read_bytes(at, bytemuck::cast_slice_mut(dst), None)
        })())
    }

    /// As [`copy_to_host_at`](Self::copy_to_host_at), in stream order on `stream`
    /// (`cudaMemcpyFromSymbolAsync`); returns once `dst` holds the values.
    #[doc(alias = "cudaMemcpyFromSymbolAsync")]
    pub fn copy_to_host_at_async(
        &self,
        offset: usize,
        dst: &mut [E],
        stream: &Stream,
    ) -> Result<()> {
        record((|| {
            let at = element_range::<E>(offset, dst.len(), N, "cudaMemcpyFromSymbolAsync range")?;
            if dst.is_empty() {
                return Ok(());
            }
            self.read_bytes(at, bytemuck::cast_slice_mut(dst), Some(stream))
        })())
    }

    /// Copies page-locked memory (a [`PinnedBuffer`](crate::PinnedBuffer), a chunk of one, a
    /// registration or managed memory) into elements `offset..offset + src.len()` of the
    /// variable on `stream` (`cudaMemcpyToSymbolAsync`), without waiting: `src` remembers the
    /// copy, and writing it from the CPU or dropping it waits for the copy.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when the range does not fit; [`Error::DeviceMismatch`] for a
    /// stream of another device.
    #[doc(alias = "cudaMemcpyToSymbolAsync")]
    pub fn copy_from_pinned_at_async(
        &self,
        offset: usize,
        src: &(impl PageLocked<E> + ?Sized),
        stream: &Stream,
    ) -> Result<()> {
        let call = "cudaMemcpyToSymbolAsync (page-locked)";
        record(
            element_range::<E>(offset, src.len(), N, call)
                .and_then(|at| self.copy_pinned(at, src, true, stream, call)),
        )
    }

    /// Copies elements `offset..offset + dst.len()` of the variable into page-locked memory
    /// on `stream` (`cudaMemcpyFromSymbolAsync`), without waiting: `dst` remembers the copy,
    /// and its CPU access or drop waits for it.
    ///
    /// # Errors
    /// As [`copy_from_pinned_at_async`](Self::copy_from_pinned_at_async);
    /// [`Error::InvalidValue`] for a read-only registration.
    #[doc(alias = "cudaMemcpyFromSymbolAsync")]
    pub fn copy_to_pinned_at_async(
        &self,
        offset: usize,
        dst: &mut (impl PageLockedMut<E> + ?Sized),
        stream: &Stream,
    ) -> Result<()> {
        let call = "cudaMemcpyFromSymbolAsync (page-locked)";
        record(
            element_range::<E>(offset, dst.len(), N, call)
                .and_then(|at| self.copy_pinned(at, &*dst, false, stream, call)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_ranges_are_checked_with_their_values() {
        assert_eq!(element_range::<u32>(0, 4, 4, "t").unwrap(), 0);
        assert_eq!(element_range::<u32>(3, 1, 4, "t").unwrap(), 12);
        assert_eq!(element_range::<u32>(4, 0, 4, "t").unwrap(), 16);
        assert_eq!(
            element_range::<u32>(3, 2, 4, "t").unwrap_err(),
            Error::OutOfRange {
                what: "t",
                start: 3,
                end: 5,
                len: 4
            }
        );
        assert!(matches!(
            element_range::<u32>(usize::MAX, 2, 4, "t"),
            Err(Error::OutOfRange {
                end: usize::MAX,
                ..
            })
        ));
        assert!(one(1, "c").is_ok());
        assert!(matches!(
            one(2, "c"),
            Err(Error::LengthMismatch {
                expected: 1,
                actual: 2,
                ..
            })
        ));
    }

    #[test]
    fn arrays_of_any_length_are_plain_data() {
        fn device_repr<T: DeviceRepr>() {}
        device_repr::<[i32; 6976]>();
        device_repr::<[f32; 33]>();
        device_repr::<[[u8; 3]; 1000]>();
    }
}
