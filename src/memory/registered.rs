//! The memory of the program's own that the crate has registered with the driver (the pages of
//! each [`HostRegistration`](super::HostRegistration)), and the copies between plain host slices
//! and the device that are in the driver's hands.
//!
//! The driver transfers a plain slice directly (by DMA, possibly after the call returns) when
//! its pages are page-locked, and through staging buffers of its own (done when the call
//! returns) when they are not; the caller cannot tell which it chose. Page locking is per page,
//! so a slice shares the locking of any registration of memory in its pages, and another thread
//! may undo that registration at any moment: pages unlocked under a queued transfer end the
//! context. So, under one lock:
//!
//! * a registration is recorded here ([`Registered::record`]) before `cuMemHostRegister`, and
//!   forgotten only after `cuMemHostUnregister`; before unregistering it waits
//!   ([`Registered::settle`]) for the copies that were in the driver's hands when it was
//!   recorded, which the driver may have given its pages directly;
//! * a copy from or to a plain slice looks here first ([`SliceCopy::begin`]). A slice in the
//!   pages of a recorded registration never reaches the driver: the copy goes through a buffer
//!   of its own ([`Bounce`]). Any other slice is recorded as in the driver's hands until the
//!   copy ends; a registration recorded meanwhile ([`SliceCopy::seen_by_registration`]) makes
//!   the copy wait for its transfer before it ends, and itself waits for the copy's end.
//!
//! Neither side ever waits for the other while holding the lock, and a copy never waits for a
//! registration: the common case (no registration near the slice) costs two short critical
//! sections per copy.

use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ErrorCode, Result};

/// The pages of a registration, as the half-open range of addresses they cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pages {
    lo: usize,
    hi: usize,
}

impl Pages {
    /// The pages that hold any byte of `ptr..ptr+bytes` (`bytes > 0`).
    fn of(ptr: *const u8, bytes: usize) -> Pages {
        let page = page_size();
        let start = ptr as usize;
        let end = start.saturating_add(bytes);
        Pages {
            lo: start / page * page,
            hi: end.div_ceil(page).saturating_mul(page),
        }
    }

    fn overlaps(self, other: Pages) -> bool {
        self.lo < other.hi && other.lo < self.hi
    }
}

/// The system's page size: the unit of the driver's page locking (at least 4 KiB).
pub(crate) fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: `sysconf` only reads a configuration value.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096)
            .max(4096)
    })
}

struct Registration {
    id: u64,
    pages: Pages,
    /// Copies in the driver's hands when the registration was recorded, not yet ended.
    copies: usize,
}

struct InFlight {
    id: u64,
    pages: Pages,
    /// The registrations recorded while the copy was in the driver's hands.
    seen_by: Vec<u64>,
}

struct Record {
    next_id: u64,
    registrations: Vec<Registration>,
    copies: Vec<InFlight>,
}

static RECORD: Mutex<Record> = Mutex::new(Record {
    next_id: 0,
    registrations: Vec::new(),
    copies: Vec::new(),
});
/// Signalled when the last copy a registration waits for ends.
static SETTLED: Condvar = Condvar::new();
/// Registrations recorded so far: a copy that finds the count unchanged at its end knows that
/// none was recorded during it, without taking the lock.
static RECORDED: AtomicU64 = AtomicU64::new(0);

/// A registration of the program's memory, recorded from before `cuMemHostRegister` until it is
/// dropped, after `cuMemHostUnregister` (or once the registration failed, or died with its
/// context).
#[derive(Debug)]
pub(crate) struct Registered(u64);

impl Registered {
    /// Records the registration of `ptr..ptr+bytes` (`bytes > 0`), about to be made: from now
    /// on no copy lets the driver transfer a plain slice in its pages directly, and the copies
    /// in the driver's hands now are the ones [`settle`](Self::settle) waits for.
    pub(crate) fn record(ptr: *const u8, bytes: usize) -> Registered {
        let pages = Pages::of(ptr, bytes);
        let mut r = RECORD.lock();
        let id = r.next_id;
        r.next_id += 1;
        let mut copies = 0;
        for c in r.copies.iter_mut().filter(|c| c.pages.overlaps(pages)) {
            c.seen_by.push(id);
            copies += 1;
        }
        r.registrations.push(Registration { id, pages, copies });
        RECORDED.fetch_add(1, Ordering::AcqRel);
        Registered(id)
    }

    /// Waits until every copy that may have been given the registration's pages directly has
    /// ended (each first waits for its own transfer): the pages may then be unlocked. Copies
    /// that began after [`record`](Self::record) never are, so the wait ends.
    pub(crate) fn settle(&self) {
        let mut r = RECORD.lock();
        while r
            .registrations
            .iter()
            .any(|g| g.id == self.0 && g.copies > 0)
        {
            SETTLED.wait(&mut r);
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut r = RECORD.lock();
        if let Some(i) = r.registrations.iter().position(|g| g.id == self.0) {
            r.registrations.swap_remove(i);
        }
    }
}

/// A copy between a plain host slice and the device, recorded while the driver may use the
/// slice: from [`begin`](Self::begin), before the driver's call, until dropped, after the copy
/// waited for its transfer where it had to.
#[derive(Debug)]
pub(crate) struct SliceCopy {
    id: u64,
    /// [`RECORDED`] when the copy began.
    recorded: u64,
}

impl SliceCopy {
    /// Records a copy of `ptr..ptr+bytes` (`bytes > 0`). `None` when the slice lies in pages
    /// of a recorded registration, which another thread may undo at any moment: the driver must
    /// not be given that slice (go through a [`Bounce`] buffer instead).
    pub(crate) fn begin(ptr: *const u8, bytes: usize) -> Option<SliceCopy> {
        let pages = Pages::of(ptr, bytes);
        let mut r = RECORD.lock();
        if r.registrations.iter().any(|g| g.pages.overlaps(pages)) {
            return None;
        }
        let id = r.next_id;
        r.next_id += 1;
        r.copies.push(InFlight {
            id,
            pages,
            seen_by: Vec::new(),
        });
        Some(SliceCopy {
            id,
            recorded: RECORDED.load(Ordering::Acquire),
        })
    }

    /// Whether a registration of the slice's pages was recorded since [`begin`](Self::begin):
    /// the driver may then have chosen to transfer the slice directly, after its call returned,
    /// and the copy must wait for that transfer before it ends. (Asked after the driver's call;
    /// a registration recorded after the call returned is harmless: the driver had decided
    /// before it.)
    pub(crate) fn seen_by_registration(&self) -> bool {
        if RECORDED.load(Ordering::Acquire) == self.recorded {
            return false;
        }
        let r = RECORD.lock();
        r.copies
            .iter()
            .any(|c| c.id == self.id && !c.seen_by.is_empty())
    }
}

impl Drop for SliceCopy {
    fn drop(&mut self) {
        let mut r = RECORD.lock();
        let Some(i) = r.copies.iter().rposition(|c| c.id == self.id) else {
            return;
        };
        let c = r.copies.swap_remove(i);
        let mut settled = false;
        for id in c.seen_by {
            if let Some(g) = r.registrations.iter_mut().find(|g| g.id == id) {
                g.copies -= 1;
                settled |= g.copies == 0;
            }
        }
        drop(r);
        if settled {
            SETTLED.notify_all();
        }
    }
}

/// A buffer of whole pages of a copy's own: no other memory shares its pages, so no
/// registration of the program's memory can lock them, and the driver always stages it (its
/// transfer is done with it when the driver's call returns).
pub(crate) struct Bounce {
    ptr: *mut u8,
    layout: Layout,
}

impl Bounce {
    /// A zeroed buffer of at least `bytes` bytes (`bytes > 0`).
    pub(crate) fn new(bytes: usize) -> Result<Bounce> {
        let page = page_size();
        let failed = || Error::Cuda {
            code: ErrorCode::MemoryAllocation,
            driver: None,
            call: "a copy's host buffer",
        };
        let size = bytes.checked_next_multiple_of(page).ok_or_else(failed)?;
        let layout = Layout::from_size_align(size, page).map_err(|_| failed())?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(failed());
        }
        Ok(Bounce { ptr, layout })
    }

    /// A buffer holding a copy of `data` (not empty).
    pub(crate) fn copy_of(data: &[u8]) -> Result<Bounce> {
        let b = Bounce::new(data.len())?;
        // SAFETY: the buffer holds at least `data.len()` bytes and is no part of `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.ptr, data.len()) };
        Ok(b)
    }

    /// The buffer's first byte.
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the driver is done with it (see the type).
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    /// A page-aligned address no test allocates: the record is process-wide, so each test
    /// uses addresses of its own (`base(k)`), far apart.
    fn base(k: usize) -> *const u8 {
        ((0x7000_0000_0000usize + (k << 32)) / page_size() * page_size()) as *const u8
    }

    #[test]
    fn pages_round_out_to_whole_pages() {
        let p = page_size();
        let b = base(1);
        assert_eq!(
            Pages::of(b.wrapping_add(p + 1), 2),
            Pages {
                lo: b as usize + p,
                hi: b as usize + 2 * p
            }
        );
        assert_eq!(
            Pages::of(b.wrapping_add(p - 1), 2),
            Pages {
                lo: b as usize,
                hi: b as usize + 2 * p
            }
        );
        // Neighbours in one page overlap; in adjacent pages they do not.
        let a = Pages::of(b, 8);
        assert!(a.overlaps(Pages::of(b.wrapping_add(p - 8), 8)));
        assert!(!a.overlaps(Pages::of(b.wrapping_add(p), 8)));
    }

    #[test]
    fn a_slice_in_registered_pages_never_reaches_the_driver() {
        let b = base(2);
        assert!(SliceCopy::begin(b, 64).is_some());
        let reg = Registered::record(b.wrapping_add(100), 16);
        // The same bytes, and other bytes of the same page: refused while recorded.
        assert!(SliceCopy::begin(b.wrapping_add(100), 16).is_none());
        assert!(SliceCopy::begin(b, 8).is_none());
        // Another page: given to the driver.
        assert!(SliceCopy::begin(b.wrapping_add(page_size()), 8).is_some());
        drop(reg);
        assert!(SliceCopy::begin(b, 8).is_some());
    }

    #[test]
    fn a_registration_recorded_during_a_copy_waits_for_its_end() {
        let b = base(3);
        let copy = SliceCopy::begin(b, 4096).unwrap();
        let unrelated = SliceCopy::begin(base(4), 4096).unwrap();
        assert!(!copy.seen_by_registration());
        let reg = Arc::new(Registered::record(b.wrapping_add(16), 32));
        assert!(
            copy.seen_by_registration(),
            "the driver may transfer it directly"
        );
        assert!(!unrelated.seen_by_registration());
        // A later copy of those pages is refused; a copy that ended is not waited for.
        assert!(SliceCopy::begin(b, 4).is_none());
        drop(unrelated);
        let settled = Arc::new(AtomicBool::new(false));
        let (r2, s2) = (reg.clone(), settled.clone());
        let t = std::thread::spawn(move || {
            r2.settle();
            s2.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !settled.load(Ordering::SeqCst),
            "settled while the copy was in flight"
        );
        drop(copy);
        t.join().unwrap();
        assert!(settled.load(Ordering::SeqCst));
        // Nothing in flight: settles at once.
        reg.settle();
    }

    #[test]
    fn a_bounce_buffer_has_pages_of_its_own() {
        let data: Vec<u8> = (0..=255).collect();
        let b = Bounce::copy_of(&data).unwrap();
        assert_eq!(b.as_mut_ptr() as usize % page_size(), 0);
        assert_eq!(b.layout.size() % page_size(), 0);
        // SAFETY: `b` holds at least `data.len()` initialised bytes.
        let back = unsafe { std::slice::from_raw_parts(b.as_mut_ptr(), data.len()) };
        assert_eq!(back, &data[..]);
    }
}
