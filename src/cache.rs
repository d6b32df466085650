//! The cache of device memory behind [`DeviceBuffer::new`](crate::DeviceBuffer::new)
//! (`cudaMalloc`).
//!
//! A dropped buffer's allocation is kept for the next allocation of the same size class on its
//! device instead of going back to the driver, as PyTorch's and CuPy's allocators keep theirs:
//! `cuMemAlloc` plus a free that never waits for other work (a `cuMemFreeAsync` into the crate's
//! stream for frees, whose memory the driver does not hand out again until that stream is waited
//! for) cost several times libcudart's `cudaMalloc` + `cudaFree`; a cached block costs a lock and
//! a few stores each way.
//!
//! * **Size classes.** A request is rounded up to a multiple of 512 bytes below 2 MiB, and to a
//!   multiple of 2 MiB from there (the driver's own page size for large allocations), and the
//!   driver is asked for the rounded size. A block is reused only for its own class. Blocks are
//!   whole driver allocations, never split, so an IPC export or a pointer query of a buffer
//!   sees exactly its block.
//! * **Reuse follows the uses.** A block comes back with the point of its last use when that
//!   use was on one created or legacy queue and is not known complete, and with no point
//!   otherwise once every use is done (uses on several queues, or on a per-thread stream, are
//!   waited for by the reclaimer first). An allocation takes a block whose point is complete;
//!   it polls at most one pending block per call (a fence query) before asking the driver.
//! * **Back to the driver.** Cached memory goes back when an allocation of any kind fails for
//!   lack of memory (before it is tried again), on
//!   [`Device::release_cached_memory`](crate::Device::release_cached_memory), and with the
//!   context at a reset (the blocks of an earlier context are forgotten, never freed twice). A
//!   buffer exported for IPC is never cached: another process may still map it.
//! * **Opting out.** `CUDA_RUNTIME_NO_CACHE=1` in the environment (read once) makes every
//!   `DeviceBuffer::new` a `cuMemAlloc` and every drop a free, as without the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::context::Active;
use crate::driver::sys;
use crate::error::Result;
use crate::queue::{self, Queue};

/// Below this, classes are multiples of [`SMALL_STEP`]; from here, of [`LARGE_STEP`].
const LARGE_FROM: usize = 2 << 20;
const SMALL_STEP: usize = 512;
const LARGE_STEP: usize = 2 << 20;

/// The devices (by ordinal) whose allocations are cached; past them, none is.
const DEVICES: usize = 64;

/// The size class of a request of `bytes` (at least 1): the bytes asked of the driver. `None`
/// when rounding up would overflow (the driver is then asked for `bytes` as they are, and the
/// block is not cached).
pub(crate) fn class(bytes: usize) -> Option<usize> {
    let step = if bytes < LARGE_FROM {
        SMALL_STEP
    } else {
        LARGE_STEP
    };
    bytes.checked_next_multiple_of(step)
}

/// A cached block: a whole `cuMemAlloc` allocation, and the last use of its earlier owner when
/// that is not known complete.
struct Block {
    ptr: u64,
    after: Option<(Arc<Queue>, u64)>,
}

/// One device's cached blocks, by size class, for one context generation.
#[derive(Default)]
struct Bins {
    generation: u64,
    by_class: HashMap<usize, Vec<Block>>,
}

struct DeviceCache {
    bins: Mutex<Bins>,
    /// Bytes held (a figure for [`cached_bytes`], read without the lock).
    bytes: AtomicUsize,
}

fn caches() -> &'static [DeviceCache] {
    static C: OnceLock<Vec<DeviceCache>> = OnceLock::new();
    C.get_or_init(|| {
        (0..DEVICES)
            .map(|_| DeviceCache {
                bins: Mutex::new(Bins::default()),
                bytes: AtomicUsize::new(0),
            })
            .collect()
    })
}

/// Whether the cache is on (not opted out with `CUDA_RUNTIME_NO_CACHE=1`).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CUDA_RUNTIME_NO_CACHE").map_or(true, |v| v != "1"))
}

fn cache_of(device: i32) -> Option<&'static DeviceCache> {
    if !enabled() {
        return None;
    }
    usize::try_from(device).ok().and_then(|d| caches().get(d))
}

impl Bins {
    /// Brings the bins to `generation`: blocks of an earlier context died with it (forgotten,
    /// never freed). Returns whether blocks of `generation` belong here (false for a block of
    /// an earlier context than the bins').
    fn at(&mut self, generation: u64, bytes: &AtomicUsize) -> bool {
        if generation > self.generation {
            self.by_class.clear();
            bytes.store(0, Ordering::Relaxed);
            self.generation = generation;
        }
        generation == self.generation
    }
}

/// A cached block of class `class` for an allocation in the entered context `a`, if one is
/// ready for any queue's work.
#[inline]
pub(crate) fn take(a: &Active, class: usize) -> Option<u64> {
    let c = cache_of(a.dev.ordinal)?;
    let generation = a.generation();
    let pending = {
        let mut bins = c.bins.lock();
        if !bins.at(generation, &c.bytes) {
            return None;
        }
        let list = bins.by_class.get_mut(&class)?;
        // The newest ready block first (the likeliest to be in the L2 still).
        if let Some(i) = list
            .iter()
            .rposition(|b| b.after.as_ref().is_none_or(|(q, seq)| q.known_done(*seq)))
        {
            let b = list.swap_remove(i);
            c.bytes.fetch_sub(class, Ordering::Relaxed);
            return Some(b.ptr);
        }
        // The oldest pending block, polled outside the lock (a fence query).
        if list.is_empty() {
            return None;
        }
        let b = list.remove(0);
        c.bytes.fetch_sub(class, Ordering::Relaxed);
        b
    };
    let done = match &pending.after {
        Some((q, seq)) => q.poll_done(*seq).unwrap_or(false),
        None => true,
    };
    if done {
        return Some(pending.ptr);
    }
    put(a.dev.ordinal, generation, class, pending);
    None
}

fn put(device: i32, generation: u64, class: usize, block: Block) {
    let Some(c) = cache_of(device) else {
        return;
    };
    let mut bins = c.bins.lock();
    if bins.at(generation, &c.bytes) {
        bins.by_class.entry(class).or_default().push(block);
        c.bytes.fetch_add(class, Ordering::Relaxed);
    }
}

/// Takes back the block of a dropped buffer (`ptr`, of size class `class`, made in context
/// `generation` of `device`) whose uses not known complete are `waits`. Never waits: a block
/// whose last use is on one created or legacy queue is cached with that point at once; one with
/// uses elsewhere is cached by the reclaimer once they are done.
pub(crate) fn give_back(
    device: i32,
    generation: u64,
    ptr: u64,
    class: usize,
    mut waits: Vec<(Arc<Queue>, u64)>,
) {
    match waits.len() {
        0 => put(device, generation, class, Block { ptr, after: None }),
        1 if !waits[0].0.is_per_thread() => {
            let after = waits.pop();
            put(device, generation, class, Block { ptr, after });
        }
        _ => queue::defer_free(
            device,
            generation,
            waits,
            "caching device memory",
            move |a: Option<&Active>| {
                // After a reset the memory died with its context.
                if a.is_some() {
                    put(device, generation, class, Block { ptr, after: None });
                }
                Ok(())
            },
        ),
    }
}

/// Forgets the blocks of `device` (after a reset: they died with the context).
pub(crate) fn forget(device: i32) {
    if let Some(c) = cache_of(device) {
        c.bins.lock().by_class.clear();
        c.bytes.store(0, Ordering::Relaxed);
    }
}

/// The bytes of device memory the cache holds for `device`.
pub(crate) fn cached_bytes(device: i32) -> usize {
    cache_of(device).map_or(0, |c| c.bytes.load(Ordering::Relaxed))
}

/// Gives every cached block of the entered context `a` back to the driver: blocks whose last
/// use is done are freed in the crate's stream for frees at once, the others by the reclaimer
/// once that use is done. Does not wait for the frees (see [`queue::wait_free_stream`]).
pub(crate) fn release(a: &Active) -> Result<()> {
    let Some(c) = cache_of(a.dev.ordinal) else {
        return Ok(());
    };
    let generation = a.generation();
    let blocks: Vec<Block> = {
        let mut bins = c.bins.lock();
        if !bins.at(generation, &c.bytes) {
            return Ok(());
        }
        c.bytes.store(0, Ordering::Relaxed);
        bins.by_class.drain().flat_map(|(_, v)| v).collect()
    };
    let mut first = Ok(());
    for b in blocks {
        let pending = b
            .after
            .filter(|(q, seq)| !q.known_done(*seq) && !q.poll_done(*seq).unwrap_or(false));
        let ptr = b.ptr;
        match pending {
            None => {
                let r = free_now(a, ptr);
                if first.is_ok() {
                    first = r;
                }
            }
            Some(point) => queue::defer_free(
                a.dev.ordinal,
                generation,
                vec![point],
                "freeing cached device memory",
                move |a: Option<&Active>| match a {
                    Some(a) => free_now(a, ptr),
                    None => Ok(()),
                },
            ),
        }
    }
    first
}

/// Frees a block no work uses in the crate's stream for frees (`cuMemFree` would wait for the
/// whole device).
fn free_now(a: &Active, ptr: u64) -> Result<()> {
    let stream = a.free_stream()?;
    // SAFETY: a live `cuMemAlloc` allocation of this context that nothing uses or refers to
    // any more (taken out of the cache), freed in the crate's stream for frees, which no capture
    // records.
    let r = queue::relaxed(|| {
        a.check(
            unsafe { sys::cuMemFreeAsync(ptr, stream) },
            "cuMemFreeAsync",
        )
    });
    if r.is_ok() {
        queue::note_free_queued(a.dev.ordinal);
    }
    r
}

/// Gives the cached blocks of the entered context `a` back to the driver when there are any
/// (before an allocation that ran out of memory is tried again).
pub(crate) fn release_if_any(a: &Active) {
    if cached_bytes(a.dev.ordinal) > 0 {
        let _ = release(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_their_step_and_never_overflow() {
        assert_eq!(class(1), Some(512));
        assert_eq!(class(512), Some(512));
        assert_eq!(class(513), Some(1024));
        assert_eq!(class(1 << 20), Some(1 << 20));
        assert_eq!(class((2 << 20) - 1), Some(2 << 20));
        assert_eq!(class(2 << 20), Some(2 << 20));
        assert_eq!(class((2 << 20) + 1), Some(4 << 20));
        assert_eq!(class(usize::MAX), None);
        let mut r = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let b = (r % (64 << 20)) as usize + 1;
            let c = class(b).unwrap();
            let step = if b < LARGE_FROM {
                SMALL_STEP
            } else {
                LARGE_STEP
            };
            assert!(
                c >= b && c - b < step && c.is_multiple_of(step),
                "{b} -> {c}"
            );
        }
    }

    #[test]
    fn bins_forget_blocks_of_earlier_contexts() {
        let bytes = AtomicUsize::new(0);
        let mut bins = Bins::default();
        assert!(bins.at(3, &bytes));
        bins.by_class.entry(512).or_default().push(Block {
            ptr: 1,
            after: None,
        });
        bytes.store(512, Ordering::Relaxed);
        // A block of an earlier context is not taken in.
        assert!(!bins.at(2, &bytes));
        assert_eq!(bins.by_class[&512].len(), 1);
        // A later context forgets what the earlier one held.
        assert!(bins.at(4, &bytes));
        assert!(bins.by_class.is_empty());
        assert_eq!(bytes.load(Ordering::Relaxed), 0);
    }
}
