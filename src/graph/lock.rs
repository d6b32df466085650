//! The lock of a graph's objects, which also serialises every driver call on the graph
//! ([`super::GraphShared`]'s `objects`).
//!
//! A test-and-set lock whose release is a plain store: a kernel-node update of an executable
//! takes it once per call, and the second atomic read-modify-write of a parking mutex (its
//! release, which must look for parked waiters) was about a tenth of the update's own cost
//! on the null driver (the two together about a quarter). A waiter spins briefly, then yields,
//! then sleeps in short steps: the lock is held for one driver call at a time (the longest,
//! an instantiation, takes about a hundred microseconds), and contention is rare (the graph's
//! owner against the executables' updates on other threads).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A value reached only under the lock.
pub(crate) struct GraphLock<T> {
    held: AtomicBool,
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
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting for it if another thread holds it. (Not reentrant: a thread
    /// that takes it twice waits forever, as with a mutex.)
    #[inline]
    pub(crate) fn lock(&self) -> GraphGuard<'_, T> {
        if self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        GraphGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        let mut round = 0u32;
        loop {
            // (Read before trying: no exclusive access to the line while it is held.)
            if !self.held.load(Ordering::Relaxed)
                && self
                    .held
                    .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            round = round.saturating_add(1);
            if round < 64 {
                std::hint::spin_loop();
            } else if round < 128 {
                std::thread::yield_now();
            } else {
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
}
