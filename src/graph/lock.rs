//! The lock of a graph's objects, which also serialises every driver call on the graph
//! ([`super::GraphShared`]'s `objects`).
//!
//! A test-and-set lock whose release is a plain store: a kernel-node update of an executable
//! takes it once per call, and the second atomic read-modify-write of a parking mutex (its
//! release, which must look for parked waiters) was about a tenth of the update's own cost
//! on the null driver (the two together about a quarter).
//!
//! It is held for the driver calls of one operation: one call for most, several for some (a
//! child-graph node's clone, an instantiation with its while-body check and its upload, a
//! whole-graph update, which holds the new graph's and the source graph's, the end of a capture
//! into the graph, a DOT dump that writes a file); an instantiation of a large graph takes
//! milliseconds. Every captured submission into an existing graph takes it too.
//!
//! A waiter spins briefly, then yields, then sleeps in short steps. A test-and-set lock is not
//! fair by itself: a thread that takes it again right after giving it back (a loop of updates)
//! could keep a sleeping waiter out for as long as it loops. So a waiter that has slept raises
//! `wanted` (one waiter at a time), and every other thread's acquisition, the fast one
//! included, then stands back until that waiter has had the lock: a waiter waits for at most
//! the holds already under way, plus one wait of its own for each waiter before it.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A value reached only under the lock.
pub(crate) struct GraphLock<T> {
    held: AtomicBool,
    /// A waiter that has slept asks for the next turn (see the module docs).
    wanted: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `GraphGuard`, and the `held` flag lets one guard
// exist at a time (taken with an acquiring exchange, given back with a releasing store), so
// the lock hands `T` from thread to thread as a mutex does: `T: Send` suffices.
unsafe impl<T: Send> Send for GraphLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for GraphLock<T> {}

impl<T> GraphLock<T> {
    pub(crate) const fn new(value: T) -> GraphLock<T> {
        GraphLock {
            held: AtomicBool::new(false),
            wanted: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting for it if another thread holds it (or a waiter that has slept
    /// asked for the next turn). Not reentrant: a thread that takes it twice waits forever, as
    /// with a mutex.
    #[inline]
    pub(crate) fn lock(&self) -> GraphGuard<'_, T> {
        if self.wanted.load(Ordering::Relaxed) || !self.try_take() {
            self.lock_slow();
        }
        GraphGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    /// One attempt at `held`.
    #[inline]
    fn try_take(&self) -> bool {
        self.held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        let mut round = 0u32;
        // Whether this thread raised `wanted` (then only it may take the lock).
        let mut wanting = false;
        loop {
            // (Read before trying: no exclusive access to the line while it is held.)
            if (wanting || !self.wanted.load(Ordering::Relaxed))
                && !self.held.load(Ordering::Relaxed)
                && self.try_take()
            {
                if wanting {
                    self.wanted.store(false, Ordering::Relaxed);
                }
                return;
            }
            round = round.saturating_add(1);
            if round < 64 {
                std::hint::spin_loop();
            } else if round < 128 {
                std::thread::yield_now();
            } else {
                if !wanting {
                    wanting = self
                        .wanted
                        .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok();
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
}

/// The lock held ([`GraphLock::lock`]); released when dropped. Not `Send`, as a mutex's guard.
pub(crate) struct GraphGuard<'a, T> {
    lock: &'a GraphLock<T>,
    _not_send: PhantomData<*const ()>,
}

impl<T> Deref for GraphGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `GraphLock`'s `Sync`), and it borrows the
        // lock, so the value is live and nothing writes it meanwhile.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for GraphGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above; the guard is borrowed mutably, so this is the only reference.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for GraphGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: what the holder did happens before the next holder's acquiring exchange.
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::GraphLock;
    use std::sync::Arc;

    /// Threads that each add to a counter under the lock, many times, with a read and a
    /// separate write (a lost update would show as a short total).
    #[test]
    fn excludes_other_threads() {
        let lock = Arc::new(GraphLock::new(0u64));
        let threads = 4;
        let rounds = 20_000u64;
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..rounds {
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*lock.lock(), threads * rounds);
    }

    /// A thread that takes the lock again right after each release, holding it most of the
    /// time, does not keep a second thread out: the second gets its turn (asking for it once it
    /// has slept) while the first is still looping. (The first stops on its own after 3 s, the
    /// test then fails; in practice the turn comes within a millisecond or so.)
    #[test]
    fn a_thread_looping_on_the_lock_lets_a_waiter_in() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};
        let lock = GraphLock::new(0u64);
        let got_in = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let looping = sc.spawn(|| {
                let until = Instant::now() + Duration::from_secs(3);
                let mut turns = 0u64;
                loop {
                    // (Checked now and then only: between two turns the lock is free for a few
                    // instructions.)
                    if turns.is_multiple_of(64)
                        && (got_in.load(Ordering::Relaxed) || Instant::now() > until)
                    {
                        break;
                    }
                    let mut g = lock.lock();
                    // Held for a while, given back for a moment only.
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(20) {
                        std::hint::spin_loop();
                    }
                    *g += 1;
                    turns += 1;
                }
                // Stopped by the deadline, not by the waiter's turn: the waiter was kept out.
                let kept_out = !got_in.load(Ordering::Relaxed);
                (turns, kept_out)
            });
            // Let the loop start first.
            while *lock.lock() == 0 {
                std::thread::yield_now();
            }
            let before = *lock.lock();
            got_in.store(true, Ordering::Relaxed);
            let (turns, kept_out) = looping.join().unwrap();
            assert!(
                !kept_out,
                "the waiter was kept out for 3 s ({turns} turns of the loop)"
            );
            assert!(before >= 1 && turns >= before);
        });
    }
}
