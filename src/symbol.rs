//! Module globals: typed handles to `__device__` and `__constant__` variables
//! (`cudaMemcpyToSymbol`, `cudaMemcpyFromSymbol`, `cudaGetSymbolAddress`, `cudaGetSymbolSize`).

use std::any::Any;
use std::ffi::CString;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::context::{self, Active};
use crate::driver::{self, sys};
use crate::error::{record, Error, Result};
use crate::queue::Lane;
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
    _module: Option<Arc<dyn Any + Send + Sync>>,
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
        keep: Option<Arc<dyn Any + Send + Sync>>,
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
        keep: Option<Arc<dyn Any + Send + Sync>>,
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
            _module: keep,
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
        let lane = self.enter(stream)?;
        let mark = lane.mark();
        let bytes = bytemuck::bytes_of(value);
        let ptr = self.ptr;
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
        let lane = self.enter(stream)?;
        let mark = lane.mark();
        let mut value = T::zeroed();
        let bytes = bytemuck::bytes_of_mut(&mut value);
        let ptr = self.ptr;
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
        Ok(value)
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
