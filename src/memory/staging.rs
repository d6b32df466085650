//! The staged pipeline for copies between pageable host memory and the device.
//!
//! The driver copies pageable memory through small page-locked bounce buffers, one chunk at a
//! time, on one thread. This crate keeps, per device, a ring of [`SLOTS`] page-locked staging
//! buffers of [`CHUNK`] bytes, and a small pool of host threads: host to device, the threads
//! copy chunk `i` into a free staging buffer while the copy engine moves chunk `i - 1`; device
//! to host, the copy engine fills staging buffers ahead while the threads drain the previous
//! one into the destination. Copies under [`DIRECT_BELOW`] bytes, copies from page-locked
//! memory, and copies that find the ring in use by another thread take the driver's path.
//!
//! Each staging buffer has an event recorded after the DMA that uses it; a buffer is written by
//! the CPU only after its event has completed, so the ring is safe to share between copies on
//! different streams.

use std::alloc::Layout;
use std::sync::OnceLock;

use parking_lot::Mutex;
use rayon::prelude::*;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::{Error, ErrorCode, Result};

/// Bytes per staging buffer.
pub(crate) const CHUNK: usize = 8 << 20;
/// Staging buffers per device.
const SLOTS: usize = 4;
/// Copies below this size take the driver's path.
pub(crate) const DIRECT_BELOW: usize = 1 << 20;
/// Bytes each host thread copies at a time.
const PIECE: usize = 1 << 20;

struct Ring {
    generation: u64,
    bufs: Vec<Raw<u8>>,
    events: Vec<Raw<sys::CUevent_st>>,
    /// What is known of each slot's last DMA.
    state: [Slot; SLOTS],
    /// The queue (its identity) of each slot's last DMA.
    queue: [usize; SLOTS],
}

/// What is known of the DMA that last used a staging buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// None is queued.
    Idle,
    /// Its event was recorded after it.
    Recorded,
    /// A DMA was queued but recording its event failed: only a context synchronisation tells
    /// that it is done.
    Unknown,
}

/// One ring per device, made on first use and kept for the process (a reset remakes it).
struct Rings(Box<[Mutex<Option<Ring>>]>);

/// Whole pages of the ring's own (`CHUNK` is a multiple of any page size): the driver locks whole
/// pages, so no memory of the program's shares the ring's locking.
fn layout() -> Layout {
    Layout::from_size_align(CHUNK, super::registered::page_size()).expect("valid staging layout")
}

impl Ring {
    /// Makes a ring in the current context `a`.
    fn new(a: &Active) -> Result<Ring> {
        let mut ring = Ring {
            generation: a.generation(),
            bufs: Vec::with_capacity(SLOTS),
            events: Vec::with_capacity(SLOTS),
            state: [Slot::Idle; SLOTS],
            queue: [0; SLOTS],
        };
        // The ring is the crate's housekeeping (made on the first staged copy, which may be an
        // asynchronous one the user made during another thread's global capture): registering
        // host memory there would invalidate that capture, so the capture mode is relaxed.
        if let Err(e) = crate::queue::relaxed(|| ring.fill(a)) {
            crate::queue::relaxed(|| ring.discard(a));
            return Err(e);
        }
        Ok(ring)
    }

    /// Allocates, registers and pairs with events the ring's buffers.
    fn fill(&mut self, a: &Active) -> Result<()> {
        for _ in 0..SLOTS {
            // SAFETY: non-zero size.
            let p = unsafe { std::alloc::alloc(layout()) };
            if p.is_null() {
                return Err(Error::Cuda {
                    code: ErrorCode::MemoryAllocation,
                    driver: None,
                    call: "staging buffer",
                });
            }
            // SAFETY: `p` is `CHUNK` bytes owned by the ring, which lives for the process or
            // until a reset remakes it (`free_after_reset`) or it is `discard`ed, after its
            // registration is gone.
            let r = a.check(
                unsafe { sys::cuMemHostRegister_v2(p.cast(), CHUNK, 0) },
                "cuMemHostRegister",
            );
            if let Err(e) = r {
                // SAFETY: allocated above, never shared.
                unsafe { std::alloc::dealloc(p, layout()) };
                return Err(e);
            }
            self.bufs.push(Raw(p));
            let mut ev: sys::CUevent = std::ptr::null_mut();
            // SAFETY: the context is current; valid out-parameter.
            a.check(
                unsafe {
                    sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
                },
                "cuEventCreate",
            )?;
            self.events.push(Raw(ev));
        }
        Ok(())
    }

    /// Undoes a partly made ring (no DMA has used it).
    fn discard(&mut self, a: &Active) {
        for p in self.bufs.drain(..) {
            // SAFETY: registered above in this context, unused; errors leave nothing to undo.
            let _ = a.check(
                unsafe { sys::cuMemHostUnregister(p.get().cast()) },
                "cuMemHostUnregister",
            );
            // SAFETY: allocated with `layout()`, no longer registered or used.
            unsafe { std::alloc::dealloc(p.get(), layout()) };
        }
        for e in self.events.drain(..) {
            // SAFETY: made above in this context, never recorded.
            let _ = a.check(unsafe { sys::cuEventDestroy_v2(e.get()) }, "cuEventDestroy");
        }
    }

    /// Waits until the DMA that last used `slot` is done (relaxed: the crate's own wait, never
    /// one that invalidates another thread's global capture).
    fn wait(&mut self, a: &Active, slot: usize) -> Result<()> {
        match self.state[slot] {
            Slot::Idle => {}
            Slot::Recorded => crate::queue::relaxed(|| {
                a.check(
                    // SAFETY: live event of the current context.
                    unsafe { sys::cuEventSynchronize(self.events[slot].get()) },
                    "cuEventSynchronize",
                )
            })?,
            // Not reached since `settle` (a failed copy or record leaves the slot idle); kept
            // as the safe answer should a slot ever be left queued without its event.
            Slot::Unknown => crate::queue::relaxed(|| {
                // SAFETY: the context is current.
                a.check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
            })?,
        }
        self.state[slot] = Slot::Idle;
        Ok(())
    }

    /// Marks `slot` as used by a DMA about to be queued on queue `queue` (before the copy
    /// call).
    fn queued(&mut self, slot: usize, queue: usize) {
        self.state[slot] = Slot::Unknown;
        self.queue[slot] = queue;
    }

    /// Whether a slot still waits for a DMA of another queue than `queue`: the copy then takes
    /// the driver's path rather than wait behind unrelated (maybe stalled) work.
    fn busy_elsewhere(&mut self, queue: usize) -> bool {
        (0..SLOTS).any(|slot| {
            if self.queue[slot] == queue {
                return false;
            }
            match self.state[slot] {
                Slot::Idle => false,
                Slot::Unknown => true,
                // SAFETY: live event of the ring's (live) context; querying needs no current
                // context.
                Slot::Recorded => {
                    let ev = self.events[slot].get();
                    match crate::driver::rc(crate::queue::relaxed(|| unsafe {
                        sys::cuEventQuery(ev)
                    })) {
                        0 => {
                            self.state[slot] = Slot::Idle;
                            false
                        }
                        _ => true,
                    }
                }
            }
        })
    }

    /// After the copy call of `slot` on stream `raw` returned `copied`: records the slot's
    /// event, or, when the copy or the record failed, leaves the slot known idle before
    /// returning the error, so that no later wait has to synchronise the whole context for it
    /// (a context-wide wait is invalid while any stream of it is capturing, in every mode;
    /// review finding). A failed copy queued nothing; after a failed record the copy is
    /// waited for here, on its stream, which lives for this call.
    fn settle(
        &mut self,
        a: &Active,
        slot: usize,
        raw: sys::CUstream,
        copied: Result<()>,
    ) -> Result<()> {
        if let Err(e) = copied {
            self.state[slot] = Slot::Idle;
            return Err(e);
        }
        if let Err(e) = self.record(a, slot, raw) {
            // SAFETY: live stream of the current context.
            let _ = crate::queue::relaxed(|| unsafe { sys::cuStreamSynchronize(raw) });
            self.state[slot] = Slot::Idle;
            return Err(e);
        }
        Ok(())
    }

    fn record(&mut self, a: &Active, slot: usize, raw: sys::CUstream) -> Result<()> {
        // SAFETY: live event and stream of the current context.
        a.check(
            unsafe { sys::cuEventRecord(self.events[slot].get(), raw) },
            "cuEventRecord",
        )?;
        self.state[slot] = Slot::Recorded;
        Ok(())
    }

    /// The staging buffer of `slot`.
    ///
    /// # Safety
    /// The slot's DMA is finished ([`wait`](Self::wait)) and no other view of it exists.
    unsafe fn buf(&mut self, slot: usize) -> &mut [u8] {
        // SAFETY: `CHUNK` bytes owned by the ring; exclusive per the contract.
        unsafe { std::slice::from_raw_parts_mut(self.bufs[slot].get(), CHUNK) }
    }

    /// Frees the ring's memory after its context was destroyed (its events and registrations
    /// died with it).
    fn free_after_reset(&mut self) {
        for p in self.bufs.drain(..) {
            // SAFETY: allocated with `layout()`; no DMA can use it, its context is gone.
            unsafe { std::alloc::dealloc(p.get(), layout()) };
        }
        self.events.clear();
    }
}

fn rings() -> &'static Rings {
    static RINGS: OnceLock<Rings> = OnceLock::new();
    RINGS.get_or_init(|| {
        let n = context::device_count().unwrap_or(0).max(0) as usize;
        Rings((0..n).map(|_| Mutex::new(None)).collect())
    })
}

fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .clamp(2, 8);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cuda-runtime-staging-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Copies `src` into `dst` with the pool's threads.
fn par_copy(pool: &rayon::ThreadPool, dst: &mut [u8], src: &[u8]) {
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    pool.install(|| {
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    });
}

/// Runs `f` with the device's ring, made or remade for the live context of `a`. `None` when
/// another thread holds the ring, or a slot still serves another queue's copy (the caller then
/// takes the driver's path).
fn with_ring<R>(
    a: &Active,
    queue: usize,
    f: impl FnOnce(&mut Ring) -> Result<R>,
) -> Option<Result<R>> {
    let slot = rings().0.get(a.dev.ordinal as usize)?;
    let mut guard = slot.try_lock()?;
    if guard
        .as_ref()
        .is_some_and(|r| r.generation != a.generation())
    {
        // Made before a reset: its events and registrations died with the old context.
        if let Some(mut old) = guard.take() {
            old.free_after_reset();
        }
    }
    if guard.is_none() {
        match Ring::new(a) {
            Ok(r) => *guard = Some(r),
            Err(e) => return Some(Err(e)),
        }
    }
    let ring = guard.as_mut().expect("ring made above");
    if ring.busy_elsewhere(queue) {
        return None;
    }
    Some(f(ring))
}

/// Host to device through the ring, on stream `raw` of the current context `a`. Returns `None`
/// when the copy should take the driver's path instead. When it returns, `src` has been read;
/// the last chunks' DMA may still run (from the ring's own memory).
pub(crate) fn htod(
    a: &Active,
    raw: sys::CUstream,
    queue: usize,
    dst: u64,
    src: &[u8],
) -> Option<Result<()>> {
    if src.len() < DIRECT_BELOW {
        return None;
    }
    let pool = pool()?;
    with_ring(a, queue, |ring| {
        for (i, chunk) in src.chunks(CHUNK).enumerate() {
            let slot = i % SLOTS;
            ring.wait(a, slot)?;
            ring.queued(slot, queue);
            // SAFETY: the slot's DMA is finished and the ring is held exclusively.
            let buf = unsafe { ring.buf(slot) };
            par_copy(pool, &mut buf[..chunk.len()], chunk);
            // SAFETY: `dst + i * CHUNK .. + chunk.len()` lies in the destination the caller
            // checked; the staging buffer is page-locked and not touched by the CPU until its
            // event (recorded next) completes.
            let r = a.check(
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        dst + (i * CHUNK) as u64,
                        buf.as_ptr().cast(),
                        chunk.len(),
                        raw,
                    )
                },
                "cuMemcpyHtoDAsync",
            );
            ring.settle(a, slot, raw, r)?;
        }
        Ok(())
    })
}

/// Device to host through the ring, on stream `raw` of the current context `a`. Returns `None`
/// when the copy should take the driver's path instead; otherwise returns when `dst` holds the
/// data.
pub(crate) fn dtoh(
    a: &Active,
    raw: sys::CUstream,
    queue: usize,
    dst: &mut [u8],
    src: u64,
) -> Option<Result<()>> {
    if dst.len() < DIRECT_BELOW {
        return None;
    }
    let pool = pool()?;
    let n = dst.len().div_ceil(CHUNK);
    let total = dst.len();
    let len_of = move |i: usize| CHUNK.min(total - i * CHUNK);
    with_ring(a, queue, |ring| {
        let issue = |ring: &mut Ring, i: usize| -> Result<()> {
            let slot = i % SLOTS;
            ring.wait(a, slot)?;
            ring.queued(slot, queue);
            // SAFETY: the slot's earlier DMA is finished; the ring is held exclusively.
            let buf = unsafe { ring.buf(slot) };
            // SAFETY: `src + i * CHUNK .. + len` lies in the source the caller checked; the
            // staging buffer is page-locked and read by the CPU only after the event.
            let r = a.check(
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(
                        buf.as_mut_ptr().cast(),
                        src + (i * CHUNK) as u64,
                        len_of(i),
                        raw,
                    )
                },
                "cuMemcpyDtoHAsync",
            );
            ring.settle(a, slot, raw, r)
        };
        for i in 0..n.min(SLOTS) {
            issue(ring, i)?;
        }
        for (i, out) in dst.chunks_mut(CHUNK).enumerate() {
            let slot = i % SLOTS;
            ring.wait(a, slot)?;
            // SAFETY: the slot's DMA is finished (waited above).
            let buf = unsafe { ring.buf(slot) };
            par_copy(pool, out, &buf[..out.len()]);
            if i + SLOTS < n {
                issue(ring, i + SLOTS)?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_copy_matches_for_odd_lengths() {
        let pool = pool().expect("thread pool");
        let mut rng = fastrand::Rng::with_seed(7);
        for len in [0, 1, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 12345] {
            let src: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            let mut dst = vec![0xA5u8; len];
            par_copy(pool, &mut dst, &src);
            assert_eq!(dst, src, "length {len}");
        }
    }
}
