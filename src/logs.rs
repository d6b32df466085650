//! Error-log management (`cudaLogs*`): the driver keeps a ring of recent error and warning
//! messages ("cuMemAlloc: ... invalid argument", with the reason); a program can read it back
//! from a position, dump it to a file, or receive each message as it is written.
//!
//! ```no_run
//! use cuda_runtime::logs;
//! # fn main() -> cuda_runtime::Result<()> {
//! let mut from = logs::current()?;
//! // ... calls that may fail ...
//! let text = logs::dump_to_memory(Some(&mut from))?;
//! eprintln!("driver said: {text}");
//! # Ok(()) }
//! ```

use std::ffi::{c_char, c_void, CString};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, Result};

/// The most the driver keeps (and dumps at once), in bytes, as its reference states.
pub const LOG_BUFFER_BYTES: usize = 25600;

/// A position in the driver's log (`cudaLogIterator`): reading from it returns the messages
/// written after it. Reading advances it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogPosition(u32);

impl LogPosition {
    /// The raw `cudaLogIterator`.
    pub fn as_raw(self) -> u32 {
        self.0
    }
}

/// How serious a logged message is (`cudaLogLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogLevel {
    /// An error (`cudaLogLevelError`).
    Error,
    /// A warning (`cudaLogLevelWarning`).
    Warning,
    /// A level this crate does not know, by number.
    Other(u32),
}

impl LogLevel {
    fn from_raw(n: u32) -> LogLevel {
        match n {
            0 => LogLevel::Error,
            1 => LogLevel::Warning,
            n => LogLevel::Other(n),
        }
    }
}

/// The position where the next message will be written (`cudaLogsCurrent`).
#[doc(alias = "cudaLogsCurrent")]
pub fn current() -> Result<LogPosition> {
    record((|| {
        driver::init()?;
        let mut it: sys::CUlogIterator = 0;
        // SAFETY: valid out-parameter; flags must be 0.
        driver::check(unsafe { sys::cuLogsCurrent(&mut it, 0) }, "cuLogsCurrent")?;
        Ok(LogPosition(it))
    })())
}

/// The messages written since `from` (every message the driver still keeps with `None`), one
/// per line (`cudaLogsDumpToMemory`). `from` advances past what was read. When messages were
/// lost because the ring wrapped, the text says so.
#[doc(alias = "cudaLogsDumpToMemory")]
pub fn dump_to_memory(from: Option<&mut LogPosition>) -> Result<String> {
    record((|| {
        driver::init()?;
        let mut buf = vec![0 as c_char; LOG_BUFFER_BYTES + 1];
        let mut size = buf.len();
        let mut it = from.as_ref().map(|p| p.0);
        let itp = it
            .as_mut()
            .map_or(std::ptr::null_mut(), |i| i as *mut sys::CUlogIterator);
        // SAFETY: `buf` holds `size` chars and the driver writes at most that many (with its
        // NUL); `itp` is null or a valid iterator; flags must be 0.
        driver::check(
            unsafe { sys::cuLogsDumpToMemory(itp, buf.as_mut_ptr(), &mut size, 0) },
            "cuLogsDumpToMemory",
        )?;
        if let (Some(p), Some(i)) = (from, it) {
            p.0 = i;
        }
        let n = size.min(buf.len());
        let bytes: Vec<u8> = buf[..n].iter().map(|&c| c as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    })())
}

/// Writes the messages since `from` (all with `None`) to the file `path`, appending
/// (`cudaLogsDumpToFile`). `from` advances past what was written.
///
/// # Errors
/// [`Error::InvalidValue`] for a path that is not UTF-8 or holds a NUL byte; the driver's
/// error when the file cannot be written.
#[doc(alias = "cudaLogsDumpToFile")]
pub fn dump_to_file(from: Option<&mut LogPosition>, path: impl AsRef<Path>) -> Result<()> {
    record((|| {
        let path = path.as_ref();
        let c = path
            .to_str()
            .and_then(|s| CString::new(s).ok())
            .ok_or_else(|| Error::InvalidValue {
                what: "log file path",
                value: format!("{path:?}"),
                reason: "must be UTF-8 without NUL bytes",
            })?;
        driver::init()?;
        let mut it = from.as_ref().map(|p| p.0);
        let itp = it
            .as_mut()
            .map_or(std::ptr::null_mut(), |i| i as *mut sys::CUlogIterator);
        // SAFETY: NUL-terminated path; `itp` is null or a valid iterator; flags must be 0.
        driver::check(
            unsafe { sys::cuLogsDumpToFile(itp, c.as_ptr(), 0) },
            "cuLogsDumpToFile",
        )?;
        if let (Some(p), Some(i)) = (from, it) {
            p.0 = i;
        }
        Ok(())
    })())
}

type LogFn = Arc<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// The registration's user data, never freed (a few bytes per registration) so that a message
/// racing with the unregistration never reads freed memory; the closure is dropped at
/// unregistration, after a call in progress (which holds a clone) returns.
struct LogSlot {
    f: Mutex<Option<LogFn>>,
}

/// A registered log callback; dropping it unregisters it (`cudaLogsUnregisterCallback`).
#[must_use = "dropping the registration unregisters the callback"]
pub struct LogCallback {
    handle: Raw<sys::CUlogsCallbackEntry_st>,
    slot: &'static LogSlot,
}

impl std::fmt::Debug for LogCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogCallback").finish_non_exhaustive()
    }
}

impl Drop for LogCallback {
    fn drop(&mut self) {
        // Disarmed first: a call in progress holds its own clone, dropped when it returns.
        let f = self.slot.f.lock().take();
        let handle = self.handle;
        if crate::context::in_host_fn() {
            // Inside a callback of the driver (this very one, dropping its own registration,
            // or a host function) no CUDA call may be made: the driver would unregister an
            // entry of the list it is walking. The callback is disarmed above; the next call
            // of the crate unregisters it.
            crate::context::defer_release(move || unregister(handle));
        } else {
            unregister(handle);
        }
        drop(f);
    }
}

/// Unregisters a log callback (`cuLogsUnregisterCallback`).
fn unregister(handle: Raw<sys::CUlogsCallbackEntry_st>) {
    // SAFETY: registered by `register_callback` and unregistered once, here, by its only owner.
    // A failure has nowhere to go: the callback is disarmed either way.
    let _ = unsafe { sys::cuLogsUnregisterCallback(handle.get()) };
}

/// The driver's callback, with the level taken as the plain integer it is (a value the
/// bindings' enum lacks must never be materialised as that enum). The driver calls it inside
/// the failing call, so inside the crate's call that made it: it runs in the scope of every
/// driver callback ([`crate::context::run_callback`]), so that crate calls from `f` are refused
/// as in host functions (an allocation in the callback of a failed allocation would fail and
/// log again, recursing until the stack overflowed), and what `f` drops, `f` itself included
/// when the registration went meanwhile, is released later. Nothing unwinds into the driver.
unsafe extern "C" fn log_trampoline(
    data: *mut c_void,
    level: u32,
    message: *mut c_char,
    length: usize,
) {
    let _ = crate::context::run_callback(|| {
        // SAFETY: `data` is the leaked `LogSlot` given at registration; never freed.
        let slot = unsafe { &*data.cast::<LogSlot>() };
        let Some(f) = slot.f.lock().clone() else {
            return;
        };
        let text = if message.is_null() {
            String::new()
        } else {
            // SAFETY: the driver passes `length` valid bytes for the duration of the call.
            let bytes = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), length) };
            let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
            String::from_utf8_lossy(bytes).into_owned()
        };
        f(LogLevel::from_raw(level), text.trim_end());
    });
}

/// Registers `f` to receive each error or warning message the driver logs from now on, on the
/// thread that caused it (`cudaLogsRegisterCallback`); dropping the returned [`LogCallback`]
/// unregisters it. `f` must not call into CUDA: the crate's calls made from it are refused
/// with [`Error::InHostFunction`], as in host functions (the driver calls it inside the call
/// that failed), and what it drops is released at the crate's next call. A panic in `f` is
/// caught and dropped. A registration dropped inside a callback of the driver (its own
/// included) stops its calls at once and is unregistered at the crate's next call.
#[doc(alias = "cudaLogsRegisterCallback")]
#[doc(alias = "cudaLogsUnregisterCallback")]
pub fn register_callback(
    f: impl Fn(LogLevel, &str) + Send + Sync + 'static,
) -> Result<LogCallback> {
    record((|| {
        driver::init()?;
        let slot: &'static LogSlot = Box::leak(Box::new(LogSlot {
            f: Mutex::new(Some(Arc::new(f))),
        }));
        let mut handle: sys::CUlogsCallbackHandle = std::ptr::null_mut();
        type Raw4 = unsafe extern "C" fn(*mut c_void, u32, *mut c_char, usize);
        type Driver4 = unsafe extern "C" fn(*mut c_void, sys::CUlogLevel, *mut c_char, usize);
        // SAFETY: the two signatures differ only in a `repr(u32)` enum against `u32`, which
        // are passed identically.
        let cb = unsafe { std::mem::transmute::<Raw4, Driver4>(log_trampoline) };
        // SAFETY: the trampoline has the driver's callback ABI; `slot` lives for the process;
        // valid out-parameter.
        let r = unsafe {
            sys::cuLogsRegisterCallback(
                Some(cb),
                (slot as *const LogSlot).cast_mut().cast(),
                &mut handle,
            )
        };
        if let Err(e) = driver::check(r, "cuLogsRegisterCallback") {
            slot.f.lock().take();
            return Err(e);
        }
        Ok(LogCallback {
            handle: Raw(handle),
            slot,
        })
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_from_numbers() {
        assert_eq!(LogLevel::from_raw(0), LogLevel::Error);
        assert_eq!(LogLevel::from_raw(1), LogLevel::Warning);
        assert_eq!(LogLevel::from_raw(7), LogLevel::Other(7));
    }

    /// The driver calls a log callback inside the call that failed. Called here as the driver
    /// calls it: the callback runs in the host-function scope, and dropping its own
    /// registration there disarms it and leaves the unregistration to a later call (no driver
    /// call inside the callback), the closure, whose last clone the call then holds, being
    /// dropped inside the scope.
    #[test]
    fn a_log_callback_dropping_its_registration_defers_the_unregistration() {
        struct Probe(Arc<Mutex<Vec<String>>>);
        impl Drop for Probe {
            fn drop(&mut self) {
                let inside = crate::context::in_host_fn();
                self.0
                    .lock()
                    .push(format!("closure dropped, scope {inside}"));
            }
        }
        let _one = crate::context::ORPHANS_IN_TEST.lock();
        crate::context::discard_orphans();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let own: Arc<Mutex<Option<LogCallback>>> = Arc::new(Mutex::new(None));
        let (s2, own2, probe) = (seen.clone(), own.clone(), Probe(seen.clone()));
        let slot: &'static LogSlot = Box::leak(Box::new(LogSlot {
            f: Mutex::new(Some(Arc::new(move |level: LogLevel, text: &str| {
                let _captured = &probe;
                let inside = crate::context::in_host_fn();
                s2.lock().push(format!("{level:?} {text}, scope {inside}"));
                // Without a driver library here, a driver call would panic (caught, and the
                // line below never reached).
                drop(own2.lock().take());
                s2.lock().push("registration dropped".into());
            }))),
        }));
        *own.lock() = Some(LogCallback {
            handle: Raw(std::ptr::null_mut()),
            slot,
        });
        let mut text = *b"cuMemAlloc: out of memory\n\0";
        let data = (slot as *const LogSlot).cast_mut().cast();
        // SAFETY: called as the driver calls it: `text.len()` valid bytes and the slot given
        // at registration.
        unsafe { log_trampoline(data, 1, text.as_mut_ptr().cast(), text.len()) };
        assert!(!crate::context::in_host_fn());
        assert_eq!(
            *seen.lock(),
            [
                "Warning cuMemAlloc: out of memory, scope true",
                "registration dropped",
                "closure dropped, scope true",
            ]
        );
        assert!(slot.f.lock().is_none(), "the callback is disarmed");
        assert_eq!(
            crate::context::discard_orphans(),
            1,
            "the unregistration is deferred"
        );
        // Disarmed: a later message reaches nothing.
        // SAFETY: as above.
        unsafe { log_trampoline(data, 0, text.as_mut_ptr().cast(), text.len()) };
        assert_eq!(seen.lock().len(), 3);
    }

    #[test]
    fn a_bad_path_is_refused_before_the_driver() {
        let e = dump_to_file(None, "a\0b").unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
    }
}
