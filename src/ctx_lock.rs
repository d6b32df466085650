//! The lock that keeps a device's primary context from being reset while calls use it.
//!
//! Every call of the crate takes it shared for its duration; a reset (and the first activation)
//! takes it exclusively. Shared entries are by far the common case (one or two per call), so they
//! cost no atomic read-modify-write and touch no cache line that other threads write:
//!
//! * each thread has a *slot* of reader counts, one per device (ordinals wrap at
//!   [`SLOT_DEVICES`]: devices that share a count only make a reset wait a little longer);
//!   a shared entry is a plain store to its own count, then a check that no reset is under way;
//! * a reset raises the device's `writing` flag, then waits until every thread's count for the
//!   device is zero. The two sides form a Dekker pair: the reader stores its count then loads the
//!   flag, the writer stores the flag then loads the counts. The reader's side would need a full
//!   fence between its store and its load; instead the writer forces one on every thread of the
//!   process (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, Linux 4.14+), so a reader either
//!   sees the flag or has its count seen. Where that system call is unavailable, readers use a
//!   full fence instead (as costly as the read-write lock this replaces, never less correct).
//!
//! Entries are recursive: a thread that already holds the device shared enters again even while
//! a reset waits (the reset is waiting for that very thread), as `RwLock::read_recursive` does.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

/// Devices with their own reader count in each thread's slot.
pub(crate) const SLOT_DEVICES: usize = 64;

/// One thread's reader counts, one per device (by ordinal modulo [`SLOT_DEVICES`]). Only the
/// owning thread writes them; writers read them.
struct Slot {
    counts: [AtomicU32; SLOT_DEVICES],
}

/// Every slot ever made (slots are never freed: threads that exit hand theirs back for reuse).
static SLOTS: Mutex<Vec<&'static Slot>> = Mutex::new(Vec::new());
/// Slots of exited threads, all counts zero.
static FREE: Mutex<Vec<&'static Slot>> = Mutex::new(Vec::new());
/// Whether writers force the fence on readers (`membarrier`): readers then need only a compiler
/// fence. Decided once, before the first entry (see [`init`]).
static HEAVY: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The calling thread's slot. (No destructor: readable at any point of thread exit.)
    static SLOT: Cell<Option<&'static Slot>> = const { Cell::new(None) };
    /// Hands the slot back when the thread exits.
    static GIVE_BACK: GiveBack = const { GiveBack };
}

struct GiveBack;

impl Drop for GiveBack {
    fn drop(&mut self) {
        if let Some(s) = SLOT.with(|c| c.take()) {
            recycle(s);
        }
    }
}

/// Returns a slot to the free list if no count is held in it (a count still held would be a
/// guard that outlives its thread: the slot is then leaked rather than reused).
fn recycle(s: &'static Slot) {
    if s.counts.iter().all(|c| c.load(Ordering::Relaxed) == 0) {
        FREE.lock().push(s);
    }
}

/// The calling thread's slot, and whether it is only borrowed for one entry (late in thread
/// exit, after the slot was handed back).
#[inline]
fn my_slot() -> (&'static Slot, bool) {
    match SLOT.with(|c| c.get()) {
        Some(s) => (s, false),
        None => take_slot(),
    }
}

#[cold]
fn take_slot() -> (&'static Slot, bool) {
    let s = FREE.lock().pop().unwrap_or_else(|| {
        let s: &'static Slot = Box::leak(Box::new(Slot {
            counts: [const { AtomicU32::new(0) }; SLOT_DEVICES],
        }));
        SLOTS.lock().push(s);
        s
    });
    SLOT.with(|c| c.set(Some(s)));
    // Registering the hand-back fails once the thread's destructors have run: the slot is then
    // handed back by the guard that took it.
    let registered = GIVE_BACK.try_with(|_| ()).is_ok();
    (s, !registered)
}

#[cfg(target_os = "linux")]
mod membarrier {
    // From linux/membarrier.h.
    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// Registers the process for expedited private barriers; whether they are available.
    pub(super) fn register() -> bool {
        // SAFETY: membarrier takes two integers and touches no memory of ours.
        let mask = unsafe { libc::syscall(libc::SYS_membarrier, CMD_QUERY, 0 as libc::c_long) };
        if mask < 0 || mask & CMD_PRIVATE_EXPEDITED == 0 {
            return false;
        }
        // SAFETY: as above.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                CMD_REGISTER_PRIVATE_EXPEDITED,
                0 as libc::c_long,
            ) == 0
        }
    }

    /// A full memory barrier on every running thread of the process.
    pub(super) fn all_threads() -> bool {
        // SAFETY: as above; the process registered in `register`.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                CMD_PRIVATE_EXPEDITED,
                0 as libc::c_long,
            ) == 0
        }
    }
}

/// Chooses the readers' fence once, before any context lock is used (called while the runtime
/// is being initialised, before any device can be entered).
pub(crate) fn init() {
    #[cfg(target_os = "linux")]
    if membarrier::register() {
        HEAVY.store(true, Ordering::SeqCst);
    }
}

/// The reader's half of the fence between storing its count and loading the flag.
#[inline]
fn light_barrier() {
    if HEAVY.load(Ordering::Relaxed) {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The writer's half: after it, every reader either sees the flag or has its count seen.
fn heavy_barrier() {
    fence(Ordering::SeqCst);
    #[cfg(target_os = "linux")]
    if HEAVY.load(Ordering::Relaxed) && !membarrier::all_threads() {
        // Registered but refused now: never seen; readers would be unprotected. Abort rather
        // than let a reset free what a call is using.
        eprintln!("cuda-runtime: membarrier failed after registration; aborting");
        std::process::abort();
    }
}

/// A value (the context state of one device) read under the shared lock and changed under the
/// exclusive one.
pub(crate) struct CtxLock<T> {
    value: UnsafeCell<T>,
    /// Index of this device's count in every slot.
    index: usize,
    /// A writer is waiting for readers or changing the value.
    writing: AtomicBool,
    /// One writer at a time.
    writer: Mutex<()>,
    /// Readers waiting for a writer to finish.
    waiting: Mutex<()>,
    done: Condvar,
}

// SAFETY: the value is read only while the reader's count is held and no writer is changing it,
// and written only by the one writer after every count went to zero (see the module docs); so it
// is shared between threads like the value of a read-write lock.
unsafe impl<T: Send + Sync> Sync for CtxLock<T> {}

impl<T> CtxLock<T> {
    /// A lock for device `ordinal`.
    pub(crate) fn new(value: T, ordinal: i32) -> CtxLock<T> {
        CtxLock {
            value: UnsafeCell::new(value),
            index: ordinal.unsigned_abs() as usize % SLOT_DEVICES,
            writing: AtomicBool::new(false),
            writer: Mutex::new(()),
            waiting: Mutex::new(()),
            done: Condvar::new(),
        }
    }

    /// Enters shared, waiting for a writer (unless this thread already holds the lock shared).
    #[inline]
    pub(crate) fn read_recursive(&self) -> ReadGuard<'_, T> {
        loop {
            if let Some(g) = self.try_read_recursive() {
                return g;
            }
            self.wait_for_writer();
        }
    }

    /// Whether the calling thread holds this lock shared (with more than [`SLOT_DEVICES`]
    /// devices, or another device's entry sharing its count: see [`write`](Self::write)).
    pub(crate) fn held_here(&self) -> bool {
        SLOT.with(|c| c.get())
            .is_some_and(|s| s.counts[self.index].load(Ordering::Relaxed) != 0)
    }

    /// Whether a writer is under way (waiting for the readers to leave, or holding the lock).
    pub(crate) fn writer_waiting(&self) -> bool {
        self.writing.load(Ordering::Acquire)
    }

    /// Enters shared unless a writer is under way (and this thread does not hold it already).
    /// (Always inline: out of line, the guard comes back through memory; the stream-ordered
    /// free's entry was such a call.)
    #[inline(always)]
    pub(crate) fn try_read_recursive(&self) -> Option<ReadGuard<'_, T>> {
        let (slot, borrowed) = my_slot();
        let count = &slot.counts[self.index];
        let held = count.load(Ordering::Relaxed);
        count.store(held + 1, Ordering::Relaxed);
        light_barrier();
        // Acquire: a writer's changes to the value are seen once its flag is seen down. (A
        // recursive entry is covered by the outer one.)
        if held == 0 && self.writing.load(Ordering::Acquire) {
            count.store(held, Ordering::Release);
            if borrowed {
                give_back_borrowed(slot);
            }
            return None;
        }
        Some(ReadGuard {
            lock: self,
            count,
            borrowed: usize::from(borrowed),
            _not_send: PhantomData,
        })
    }

    #[cold]
    fn wait_for_writer(&self) {
        let mut w = self.waiting.lock();
        while self.writing.load(Ordering::Acquire) {
            // Timed: a wake-up between the check and the wait is not lost for long.
            self.done.wait_for(&mut w, Duration::from_millis(1));
        }
    }

    /// Enters exclusively: waits for every shared entry to end (new ones wait meanwhile). The
    /// calling thread must not hold this lock shared. (It may hold another device's: with more
    /// than [`SLOT_DEVICES`] devices two share a count, and the caller's own count is then
    /// another device's, left out of the wait.)
    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        let one = self.writer.lock();
        let mine = SLOT.with(|c| c.get());
        let own = mine.map_or(0, |s| s.counts[self.index].load(Ordering::Relaxed));
        self.writing.store(true, Ordering::SeqCst);
        heavy_barrier();
        let mut round = 0u32;
        loop {
            // Acquire: pairs with each reader's release of its count, so their reads of the
            // value happen before the changes below.
            let busy = SLOTS.lock().iter().any(|s| {
                let expect = match mine {
                    Some(m) if std::ptr::eq(m, *s) => own,
                    _ => 0,
                };
                s.counts[self.index].load(Ordering::Acquire) != expect
            });
            if !busy {
                break;
            }
            round += 1;
            if round < 64 {
                std::hint::spin_loop();
            } else if round < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        WriteGuard {
            lock: self,
            _one: one,
        }
    }
}

#[cold]
fn give_back_borrowed(slot: &'static Slot) {
    SLOT.with(|c| c.set(None));
    recycle(slot);
}

/// A borrowed slot's guard ended: hands back the slot it borrowed (still the thread's `SLOT`:
/// entries while it is borrowed use it without borrowing again).
#[cold]
fn give_back_current() {
    if let Some(s) = SLOT.with(|c| c.get()) {
        give_back_borrowed(s);
    }
}

/// A shared entry ([`CtxLock::read_recursive`]). Not `Send`: it is a count of its thread's slot.
pub(crate) struct ReadGuard<'a, T> {
    lock: &'a CtxLock<T>,
    count: &'static AtomicU32,
    /// Whether the slot is borrowed for this entry alone (0 or 1). A whole word, not a `bool`:
    /// the entry travels through memory on the launch path ([`crate::context::Active`]), and
    /// a `bool` there was copied as single bytes, then read back 16 bytes at a time, which the
    /// processor cannot forward from the byte stores (a stall measured with `perf` against the
    /// null driver, tenth session).
    borrowed: usize,
    _not_send: PhantomData<*const ()>,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: no writer changes the value while this entry's count is held (module docs).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // One less, whatever the order the thread's guards end in (only this thread writes its
        // count, so a load and a store suffice). Storing the count seen at entry instead left
        // a count held forever when two entries of one device ended out of order (the first
        // stored 0, the second then its 1), and the next reset of the device waited forever
        // (seen on the H200 pair: a reset in the GPU test suite never returned).
        let now = self.count.load(Ordering::Relaxed) - 1;
        // Release: this entry's reads of the value happen before a writer's changes.
        self.count.store(now, Ordering::Release);
        if self.borrowed != 0 && now == 0 {
            give_back_current();
        }
    }
}

/// An exclusive entry ([`CtxLock::write`]).
pub(crate) struct WriteGuard<'a, T> {
    lock: &'a CtxLock<T>,
    _one: MutexGuard<'a, ()>,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: every reader is out and new ones wait while `writing` is up.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above; the one writer holds `_one`.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        // Release: readers that see the flag down see the changes.
        self.lock.writing.store(false, Ordering::Release);
        let _w = self.lock.waiting.lock();
        self.lock.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn leak<T>(v: T) -> &'static T {
        Box::leak(Box::new(v))
    }

    /// Two entries of one thread that end in the order they began (not nested) leave no count
    /// behind: a writer then gets in (it waited forever when each guard restored the count it
    /// saw at entry).
    #[test]
    fn entries_ending_out_of_order_leave_no_count() {
        init();
        let lock = leak(CtxLock::new(7u32, 5));
        let first = lock.read_recursive();
        let second = lock.read_recursive();
        let third = lock.read_recursive();
        drop(first);
        drop(third);
        drop(second);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let w = lock.write();
            tx.send(*w).unwrap();
        });
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(10)),
            Ok(7),
            "a count was left behind: the writer never got in"
        );
    }

    /// `held_here` is true exactly while the calling thread holds the lock shared (a reset
    /// refuses then), whatever other threads hold.
    #[test]
    fn held_here_is_the_calling_threads_entry_only() {
        init();
        let lock = leak(CtxLock::new(1u8, 9));
        assert!(!lock.held_here());
        let outer = lock.read_recursive();
        let inner = lock.read_recursive();
        assert!(lock.held_here());
        drop(inner);
        assert!(lock.held_here());
        std::thread::spawn(move || assert!(!lock.held_here()))
            .join()
            .unwrap();
        drop(outer);
        assert!(!lock.held_here());
        let other = std::thread::spawn(move || {
            let g = lock.read_recursive();
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(g);
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert!(!lock.held_here());
        other.join().unwrap();
    }

    /// Readers on many threads and a writer that changes the value in two steps: no reader ever
    /// sees the value half changed, and recursive entries do not deadlock against a waiting
    /// writer.
    #[test]
    fn readers_never_see_a_write_in_progress() {
        init();
        let lock = leak(CtxLock::new((0u64, 0u64), 3));
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (stop, reads) = (stop.clone(), reads.clone());
                std::thread::spawn(move || {
                    // At least 10 reads each, however the threads are scheduled.
                    for i in 0.. {
                        if i >= 10 && stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let g = lock.read_recursive();
                        let (a, b) = *g;
                        assert_eq!(a, b, "a reader saw a write in progress");
                        // Recursive entry while a writer may be waiting.
                        let inner = lock.read_recursive();
                        assert_eq!(inner.0, a, "the value changed under a reader");
                        drop(inner);
                        drop(g);
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for i in 1..=300u64 {
            let mut w = lock.write();
            w.0 = i;
            std::hint::spin_loop();
            w.1 = i;
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert!(reads.load(Ordering::Relaxed) >= 40);
        assert_eq!(*lock.read_recursive(), (300, 300));
    }

    /// A try-entry fails while a writer is under way (for host functions, which must not wait)
    /// and succeeds after it.
    #[test]
    fn try_entry_fails_while_a_writer_waits() {
        init();
        let lock = leak(CtxLock::new(7u32, 5));
        let g = lock.read_recursive();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let mut w = lock.write();
            tx.send(()).unwrap();
            *w = 8;
        });
        // Once the writer waits for `g`, another thread's try-entry must fail.
        while !lock.writing.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let other = std::thread::spawn(move || lock.try_read_recursive().map(|g| *g));
        assert_eq!(other.join().unwrap(), None);
        drop(g);
        rx.recv().unwrap();
        writer.join().unwrap();
        assert_eq!(lock.try_read_recursive().map(|g| *g), Some(8));
    }

    /// Slots of exited threads are reused, not leaked per thread.
    #[test]
    fn slots_are_reused_after_thread_exit() {
        let lock = leak(CtxLock::new(0u8, 9));
        for _ in 0..50 {
            std::thread::spawn(move || {
                let _g = lock.read_recursive();
            })
            .join()
            .unwrap();
        }
        let made = SLOTS.lock().len();
        for _ in 0..50 {
            std::thread::spawn(move || {
                let _g = lock.read_recursive();
            })
            .join()
            .unwrap();
        }
        // Other tests run threads meanwhile; 50 more threads one at a time add at most a few.
        assert!(
            SLOTS.lock().len() <= made + 8,
            "{} slots after reuse, {made} before",
            SLOTS.lock().len()
        );
    }
}
