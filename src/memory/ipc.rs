//! Interprocess sharing of device memory and events: `cudaIpcGetMemHandle`,
//! `cudaIpcOpenMemHandle`, `cudaIpcCloseMemHandle`, `cudaIpcGetEventHandle`,
//! `cudaIpcOpenEventHandle`.

use std::mem::size_of;

use super::device::Alloc;
use super::{DeviceBuffer, DeviceRepr};
use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::event::{Event, EventFlags};
use parking_lot::Mutex;

/// A handle to a device allocation that another process can open (`cudaIpcMemHandle_t`):
/// 64 opaque bytes, sent by any means (a pipe, a file, a socket).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcMemHandle(pub [u8; 64]);

/// A handle to an interprocess event that another process can open (`cudaIpcEventHandle_t`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcEventHandle(pub [u8; 64]);

impl std::fmt::Debug for IpcMemHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IpcMemHandle({})", hex(&self.0))
    }
}

impl std::fmt::Debug for IpcEventHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IpcEventHandle({})", hex(&self.0))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl IpcMemHandle {
    /// The handle as 128 hexadecimal digits, for passing as text.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Parses [`to_hex`](Self::to_hex)'s output.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for anything but 128 hexadecimal digits.
    pub fn from_hex(s: &str) -> Result<IpcMemHandle> {
        parse_hex(s, "IPC handle text").map(IpcMemHandle)
    }
}

impl IpcEventHandle {
    /// The handle as 128 hexadecimal digits.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Parses [`to_hex`](Self::to_hex)'s output.
    pub fn from_hex(s: &str) -> Result<IpcEventHandle> {
        parse_hex(s, "IPC handle text").map(IpcEventHandle)
    }
}

/// Parses 128 hexadecimal digits into 64 bytes (`what` names the text in the error). Digit by
/// digit: `u8::from_str_radix` also takes a leading `+`, so text that is not a handle's
/// (`"+f+f..."`) was accepted as one (review rev-h15).
pub(crate) fn parse_hex(s: &str, what: &'static str) -> Result<[u8; 64]> {
    let bad = || Error::InvalidValue {
        what,
        value: format!("{s:?}"),
        reason: "expected 128 hexadecimal digits",
    };
    let b = s.as_bytes();
    if b.len() != 128 {
        return Err(bad());
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 64];
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => *o = h << 4 | l,
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// A handle another process can open to reach this allocation (`cudaIpcGetMemHandle`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for stream-ordered allocations (`new_async`, pools), which have
    /// no IPC handle (share them through a pool made with a shareable handle type instead), and
    /// for memory opened from another process's handle.
    #[doc(alias = "cudaIpcGetMemHandle")]
    pub fn ipc_handle(&self) -> Result<IpcMemHandle> {
        record((|| {
            let a = &self.alloc;
            if a.is_stream_ordered() || a.ipc {
                return Err(Error::InvalidValue {
                    what: "cudaIpcGetMemHandle",
                    value: format!("{:#x}", a.ptr),
                    reason: if a.ipc {
                        "the memory was itself opened from an IPC handle"
                    } else {
                        "stream-ordered (pool) allocations have no legacy IPC handle; \
                         allocate with DeviceBuffer::new (cudaMalloc)"
                    },
                });
            }
            if a.bytes == 0 {
                return Err(Error::InvalidValue {
                    what: "cudaIpcGetMemHandle",
                    value: "an empty buffer".into(),
                    reason: "an empty buffer has no allocation to share",
                });
            }
            let ctx = context::enter_handle(a.device, a.generation, "device buffer")?;
            // Another process may map the memory from now on: it is freed, never cached for
            // another buffer of this process.
            a.cached.store(false, std::sync::atomic::Ordering::Relaxed);
            let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
            // SAFETY: live `cuMemAlloc` allocation of this context; valid out-parameter.
            ctx.check(
                unsafe { sys::cuIpcGetMemHandle(&mut h, a.ptr) },
                "cuIpcGetMemHandle",
            )?;
            Ok(IpcMemHandle(h.reserved.map(|c| c as u8)))
        })())
    }

    /// Opens memory another process shared, as `len` elements on the current device
    /// (`cudaIpcOpenMemHandle` with `cudaIpcMemLazyEnablePeerAccess`). Closed
    /// (`cudaIpcCloseMemHandle`) when dropped, after work that used it finished.
    ///
    /// Accesses are not synchronised with the other process: order them with interprocess
    /// events ([`Event::ipc_handle`]).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when `len` elements exceed the shared allocation; the driver's
    /// error for a handle of this same process or an invalid handle.
    #[doc(alias = "cudaIpcOpenMemHandle")]
    #[doc(alias = "cudaIpcCloseMemHandle")]
    pub fn open_ipc(handle: &IpcMemHandle, len: usize) -> Result<DeviceBuffer<T>> {
        record(match Self::open_ipc_once(handle, len) {
            // A buffer of this mapping dropped just before is closed by the reclaimer: let it
            // finish, then try again.
            Err(Error::InvalidValue {
                what: "cudaIpcOpenMemHandle",
                ..
            }) => {
                let patience = std::time::Duration::from_secs(2);
                crate::queue::reclaim(context::current_ordinal(), patience);
                Self::open_ipc_once(handle, len)
            }
            r => r,
        })
    }

    fn open_ipc_once(handle: &IpcMemHandle, len: usize) -> Result<DeviceBuffer<T>> {
        (|| {
            let a = context::enter_current()?;
            let h = sys::CUipcMemHandle {
                reserved: handle.0.map(|b| b as _),
            };
            let mut ptr = 0u64;
            // SAFETY: the context is current; valid out-parameter.
            a.check(
                unsafe {
                    sys::cuIpcOpenMemHandle_v2(
                        &mut ptr,
                        h,
                        sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
                    )
                },
                "cuIpcOpenMemHandle",
            )?;
            let (mut base, mut size) = (0u64, 0usize);
            // SAFETY: `ptr` is a live mapping of this context; valid out-parameters.
            let r = a.check(
                unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) },
                "cuMemGetAddressRange",
            );
            let bytes = len.checked_mul(size_of::<T>());
            let avail = size.saturating_sub((ptr - base) as usize);
            let err = match (r, bytes) {
                (Err(e), _) => Some(e),
                (Ok(()), Some(b)) if b <= avail => None,
                _ => Some(Error::OutOfRange {
                    what: "shared allocation (elements)",
                    start: 0,
                    end: len,
                    len: avail / size_of::<T>().max(1),
                }),
            };
            let err = err.or_else(|| {
                // The driver hands out the same mapping (reference counted) for a handle opened
                // twice; two owning buffers would alias each other's memory.
                let mut open = OPEN.lock();
                open.retain(|&(d, g, _)| context::is_live(d, g));
                let key = (a.dev.ordinal, a.generation(), ptr);
                if open.contains(&key) {
                    Some(Error::InvalidValue {
                        what: "cudaIpcOpenMemHandle",
                        value: format!("handle {} (mapped at {ptr:#x})", handle.to_hex()),
                        reason: "this process has the allocation open already, as another \
                                 DeviceBuffer; a second one would alias it",
                    })
                } else {
                    open.push(key);
                    None
                }
            });
            if let Some(e) = err {
                // SAFETY: opened above (one reference of it), unused.
                unsafe { sys::cuIpcCloseMemHandle(ptr) };
                return Err(e);
            }
            Ok(DeviceBuffer::from_alloc(
                Alloc::opened_ipc(ptr, avail, a.dev.ordinal, a.generation()),
                len,
            ))
        })()
    }
}

/// Mappings of IPC handles this process holds open: (device, context generation, address).
static OPEN: Mutex<Vec<(i32, u64, u64)>> = Mutex::new(Vec::new());

/// Forgets an IPC mapping closed at `ptr` (from the buffer's drop).
pub(crate) fn closed(ptr: u64) {
    OPEN.lock().retain(|&(_, _, p)| p != ptr);
}

impl Event {
    /// A handle another process can open to wait on this event (`cudaIpcGetEventHandle`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] unless the event was made with [`EventFlags::INTERPROCESS`].
    #[doc(alias = "cudaIpcGetEventHandle")]
    pub fn ipc_handle(&self) -> Result<IpcEventHandle> {
        record((|| {
            if !self.flags().contains(EventFlags::INTERPROCESS) {
                return Err(Error::InvalidValue {
                    what: "cudaIpcGetEventHandle",
                    value: format!("event flags {:#x}", self.flags().bits()),
                    reason: "only events made with EventFlags::INTERPROCESS have an IPC handle",
                });
            }
            let a = self.enter()?;
            let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
            // SAFETY: live interprocess event of the current context; valid out-parameter.
            a.check(
                unsafe { sys::cuIpcGetEventHandle(&mut h, self.as_raw()) },
                "cuIpcGetEventHandle",
            )?;
            Ok(IpcEventHandle(h.reserved.map(|c| c as u8)))
        })())
    }

    /// Opens an event another process shared, on the current device (`cudaIpcOpenEventHandle`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the driver hands out an event this process holds already
    /// as another [`Event`] (a second one would destroy it again); the driver's error for a
    /// handle of this same process (`CUDA_ERROR_INVALID_CONTEXT`, as libcudart's
    /// `cudaErrorDeviceUninitialized`) or an invalid handle.
    #[doc(alias = "cudaIpcOpenEventHandle")]
    pub fn open_ipc(handle: &IpcEventHandle) -> Result<Event> {
        record((|| {
            let a = context::enter_current()?;
            let h = sys::CUipcEventHandle {
                reserved: handle.0.map(|b| b as _),
            };
            Event::opened(
                &a,
                EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING,
                || format!("{handle:?}"),
                || {
                    let mut raw: sys::CUevent = std::ptr::null_mut();
                    // SAFETY: the context is current; valid out-parameter.
                    a.check(
                        unsafe { sys::cuIpcOpenEventHandle(&mut raw, h) },
                        "cuIpcOpenEventHandle",
                    )?;
                    Ok(raw)
                },
            )
        })())
    }
}

impl Alloc {
    fn opened_ipc(ptr: u64, bytes: usize, device: i32, generation: u64) -> Alloc {
        let mut a = Alloc::plain(ptr, bytes, device, generation);
        a.ipc = true;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_as_text() {
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..100 {
            let mut b = [0u8; 64];
            b.iter_mut().for_each(|x| *x = rng.u8(..));
            let h = IpcMemHandle(b);
            assert_eq!(IpcMemHandle::from_hex(&h.to_hex()).unwrap(), h);
            let e = IpcEventHandle(b);
            assert_eq!(IpcEventHandle::from_hex(&e.to_hex()).unwrap(), e);
        }
        assert!(IpcMemHandle::from_hex("zz").is_err());
        assert!(IpcMemHandle::from_hex(&"g".repeat(128)).is_err());
        assert!(IpcMemHandle::from_hex(&"é".repeat(64)).is_err());
        // A leading `+` in a pair is no hexadecimal digit (`u8::from_str_radix` took it).
        for t in ["+f".repeat(64), format!("+0{}", "0".repeat(126))] {
            let e = IpcMemHandle::from_hex(&t).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::InvalidValue);
            assert!(IpcEventHandle::from_hex(&t).is_err());
            assert!(crate::memory::PoolPtrExport::from_hex(&t).is_err());
        }
        let upper = "AB".repeat(64);
        assert_eq!(IpcMemHandle::from_hex(&upper).unwrap().0, [0xab; 64]);
    }
}
