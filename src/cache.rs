//! The caches of device memory behind [`DeviceBuffer::new`](crate::DeviceBuffer::new)
//! (`cudaMalloc`) and of page-locked memory behind [`PinnedBuffer`](crate::PinnedBuffer)
//! (`cudaHostAlloc`; see its section below).
//!
//! A dropped buffer's allocation is kept for the next allocation of the same size on its
//! device instead of going back to the driver, as PyTorch's and CuPy's allocators keep theirs:
//! `cuMemAlloc` plus a free that never waits for other work (a `cuMemFreeAsync` into the crate's
//! stream for frees, whose memory the driver does not hand out again until that stream is waited
//! for) cost several times libcudart's `cudaMalloc` + `cudaFree`; a cached block costs a lock and
//! a few stores each way.
//!
//! * **Blocks.** Each block is a whole `cuMemAlloc` allocation of exactly the bytes a buffer
//!   asked for, reused only for a buffer of the same byte size: an IPC export, a pointer query
//!   or an address-range query of a buffer sees exactly what `cudaMalloc` would have given.
//! * **Reuse follows the uses.** A dropped buffer's block joins the cache at once when no work
//!   uses it any more, and otherwise once the reclaimer has seen the buffer's own uses done
//!   (the drop never waits). So every cached block is ready for work on any queue, and an
//!   allocation takes one without a driver call.
//! * **Back to the driver.** Cached memory goes back when an allocation of any kind fails for
//!   lack of memory (before it is tried again), on
//!   [`Device::release_cached_memory`](crate::Device::release_cached_memory), and with the
//!   context at a reset (the blocks of an earlier context are forgotten when the cache is next
//!   used, never freed twice). The
//!   cache holds at most half of the device's memory: a block past that is freed (in the
//!   crate's stream for frees) instead. A buffer exported for IPC is never cached: another
//!   process may still map it.
//! * **Opting out.** `CUDA_RUNTIME_NO_CACHE=1` in the environment (read once) makes every
//!   `DeviceBuffer::new` a `cuMemAlloc` and every drop a free, as without the cache, and
//!   every page-locked allocation a new one.

use std::alloc::Layout;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::Result;
use crate::queue::{self, Queue};

/// The devices (by ordinal) whose allocations are cached; past them, none is.
const DEVICES: usize = 64;

/// A cached block: a whole `cuMemAlloc` allocation that no work uses any more.
struct Block {
    ptr: u64,
}

/// One device's cached blocks, by size in bytes, for one context generation.
#[derive(Default)]
struct Bins {
    generation: u64,
    by_class: HashMap<usize, Vec<Block>>,
}

struct DeviceCache {
    bins: Mutex<Bins>,
    /// Bytes held (a figure for [`cached_bytes`], read without the lock).
    bytes: AtomicUsize,
    /// The most bytes held: half the device's memory (read at the first allocation).
    cap: AtomicUsize,
}

fn caches() -> &'static [DeviceCache] {
    static C: OnceLock<Vec<DeviceCache>> = OnceLock::new();
    C.get_or_init(|| {
        (0..DEVICES)
            .map(|_| DeviceCache {
                bins: Mutex::new(Bins::default()),
                bytes: AtomicUsize::new(0),
                cap: AtomicUsize::new(0),
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

/// A cached block of `bytes` for an allocation in the entered context `a`, if one is there
/// (every cached block is ready for any queue's work).
#[inline]
pub(crate) fn take(a: &Active, bytes: usize) -> Option<u64> {
    let c = cache_of(a.dev.ordinal)?;
    if c.cap.load(Ordering::Relaxed) == 0 {
        set_cap(a, c);
    }
    let mut bins = c.bins.lock();
    if !bins.at(a.generation(), &c.bytes) {
        return None;
    }
    // The newest block first (the likeliest to be in the L2 still).
    let b = bins.by_class.get_mut(&bytes)?.pop()?;
    c.bytes.fetch_sub(bytes, Ordering::Relaxed);
    Some(b.ptr)
}

#[cold]
fn set_cap(a: &Active, c: &DeviceCache) {
    let total = a.mem_info().map_or(0, |(_, total)| total);
    c.cap.store((total / 2).max(1), Ordering::Relaxed);
}

/// Caches `block` of `bytes`; `false` (nothing done) when the cache is full, off, or holds
/// another context's blocks.
fn put(device: i32, generation: u64, bytes: usize, block: Block) -> bool {
    let Some(c) = cache_of(device) else {
        return false;
    };
    let mut bins = c.bins.lock();
    if !bins.at(generation, &c.bytes)
        || c.bytes.load(Ordering::Relaxed) + bytes > c.cap.load(Ordering::Relaxed)
    {
        return false;
    }
    bins.by_class.entry(bytes).or_default().push(block);
    c.bytes.fetch_add(bytes, Ordering::Relaxed);
    true
}

/// Takes back the block of a dropped buffer (`ptr`, of `bytes`, made in context `generation`
/// of `device`) whose uses not known complete are `waits`. Never waits: a block no work uses
/// is cached at once; one still used is cached by the reclaimer once those uses are done (which
/// holds their queues until then, as for any deferred free). A block the cache has no room
/// for is freed instead.
pub(crate) fn give_back(
    device: i32,
    generation: u64,
    ptr: u64,
    bytes: usize,
    waits: Vec<(Arc<Queue>, u64)>,
) {
    if waits.is_empty() {
        if !put(device, generation, bytes, Block { ptr }) {
            context::release(device, generation, "freeing device memory", move |a| {
                free_now(a, ptr)
            });
        }
        return;
    }
    queue::defer_free(
        device,
        generation,
        waits,
        "caching device memory",
        move |a: Option<&Active>| match a {
            Some(a) if !put(device, generation, bytes, Block { ptr }) => free_now(a, ptr),
            // Cached, or after a reset, when the memory died with its context.
            _ => Ok(()),
        },
    );
}

/// The bytes of device memory the cache holds for `device`.
pub(crate) fn cached_bytes(device: i32) -> usize {
    cache_of(device).map_or(0, |c| c.bytes.load(Ordering::Relaxed))
}

/// Gives every cached block of the entered context `a` back to the driver, freed in the
/// crate's stream for frees (no work uses them). Does not wait for the frees (see
/// [`queue::wait_free_stream`]); blocks still waiting for their uses in the reclaimer join the
/// cache when those are done.
pub(crate) fn release(a: &Active) -> Result<()> {
    let Some(c) = cache_of(a.dev.ordinal) else {
        return Ok(());
    };
    let blocks: Vec<(usize, Block)> = {
        let mut bins = c.bins.lock();
        if !bins.at(a.generation(), &c.bytes) {
            return Ok(());
        }
        c.bytes.store(0, Ordering::Relaxed);
        bins.by_class
            .drain()
            .flat_map(|(bytes, v)| v.into_iter().map(move |b| (bytes, b)))
            .collect()
    };
    let mut first = Ok(());
    for (bytes, b) in blocks {
        if let Err(e) = free_now(a, b.ptr) {
            // Kept for a later release rather than lost (the stream for frees could not be
            // made, say).
            put(a.dev.ordinal, a.generation(), bytes, b);
            if first.is_ok() {
                first = Err(e);
            }
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
    // `cuArrayDestroy` waits for the whole device: only while it is idle (an allocation must
    // fail rather than wait for work that may wait for this thread).
    if holds_arrays(a) && queue::device_idle(a.dev.ordinal, a.generation()) {
        let _ = release_arrays(a);
    }
}

// ---------------------------------------------------------------------------------------------
// Page-locked memory.

/// A cached page-locked allocation of [`PinnedBuffer`](crate::PinnedBuffer): its CPU address,
/// its device address (the CPU address, or the mapping's), and how it is owned.
pub(crate) struct HostBlock {
    pub(crate) host: Raw<u8>,
    pub(crate) dptr: u64,
    /// `Some(layout)`: a Rust allocation registered with `cuMemHostRegister`; `None`:
    /// `cuMemHostAlloc` memory.
    pub(crate) layout: Option<Layout>,
}

impl HostBlock {
    /// Gives the memory back: unregisters or frees it in its live context `a` (these calls
    /// wait for the whole device), or, after a reset (`None`), releases what outlives the
    /// context (the Rust allocation of a registration).
    fn free(self, a: Option<&Active>) -> Result<()> {
        let host = self.host;
        let r = match (a, self.layout) {
            (None, _) => Ok(()),
            // SAFETY: registered in this (live) context by `PinnedBuffer`, unused (cached).
            (Some(a), Some(_)) => a.check(
                unsafe { sys::cuMemHostUnregister(host.get().cast()) },
                "cuMemHostUnregister",
            ),
            // SAFETY: `cuMemHostAlloc` memory of this live context, unused (cached).
            (Some(a), None) => a.check(
                unsafe { sys::cuMemFreeHost(host.get().cast()) },
                "cuMemFreeHost",
            ),
        };
        if let Some(layout) = self.layout {
            // SAFETY: allocated with this layout by `PinnedBuffer`; no work uses it, and its
            // registration is gone (undone above, or died with its context).
            unsafe { std::alloc::dealloc(host.0, layout) };
        }
        r
    }
}

/// One device's cached page-locked blocks, by (allocation flags, bytes), for one context
/// generation.
#[derive(Default)]
struct HostBins {
    generation: u64,
    by_key: HashMap<(u32, usize), Vec<HostBlock>>,
}

impl HostBins {
    /// As [`Bins::at`]; blocks of an earlier context are released (their Rust allocations) as
    /// they are dropped from here.
    fn at(&mut self, generation: u64) -> bool {
        if generation > self.generation {
            for b in self.by_key.drain().flat_map(|(_, v)| v) {
                let _ = b.free(None);
            }
            self.generation = generation;
        }
        generation == self.generation
    }
}

fn host_caches() -> &'static [Mutex<HostBins>] {
    static C: OnceLock<Vec<Mutex<HostBins>>> = OnceLock::new();
    C.get_or_init(|| (0..DEVICES).map(|_| Mutex::default()).collect())
}

fn host_cache_of(device: i32) -> Option<&'static Mutex<HostBins>> {
    if !enabled() {
        return None;
    }
    usize::try_from(device)
        .ok()
        .and_then(|d| host_caches().get(d))
}

/// A cached page-locked block of `bytes` allocated with `flags` for the entered context `a`,
/// if one is there (no work uses it).
pub(crate) fn take_host(a: &Active, flags: u32, bytes: usize) -> Option<HostBlock> {
    let mut bins = host_cache_of(a.dev.ordinal)?.lock();
    if !bins.at(a.generation()) {
        return None;
    }
    bins.by_key.get_mut(&(flags, bytes))?.pop()
}

/// Caches `block`; hands it back when the cache is off or holds another context's blocks.
fn put_host(
    device: i32,
    generation: u64,
    flags: u32,
    bytes: usize,
    block: HostBlock,
) -> Option<HostBlock> {
    let Some(c) = host_cache_of(device) else {
        return Some(block);
    };
    let mut bins = c.lock();
    if !bins.at(generation) {
        return Some(block);
    }
    bins.by_key.entry((flags, bytes)).or_default().push(block);
    None
}

/// Takes back the block of a dropped [`PinnedBuffer`](crate::PinnedBuffer) (of `bytes`,
/// allocated with `flags` in context `generation` of `device`) whose uses not known complete
/// are `waits`: cached at once when none is pending, else by the reclaimer once they are done.
/// The driver's free of such memory waits for the whole device and holds a lock of the driver
/// that other threads' calls need meanwhile, so it is never made in the background: cached
/// blocks go back on [`release_host`], when a page-locked allocation fails, and at a reset.
/// Only for a device whose dropped page-locked memory is cached ([`caches_host`]).
pub(crate) fn give_back_host(
    device: i32,
    generation: u64,
    flags: u32,
    bytes: usize,
    block: HostBlock,
    waits: Vec<(Arc<Queue>, u64)>,
) {
    if waits.is_empty() {
        if let Some(b) = put_host(device, generation, flags, bytes, block) {
            // Of an earlier context: its registration died with it.
            let _ = b.free(None);
        }
        return;
    }
    queue::defer_free(
        device,
        generation,
        waits,
        "caching page-locked memory",
        move |a: Option<&Active>| {
            // After a reset (`None`) the registration died with its context.
            let back = match a {
                Some(_) => put_host(device, generation, flags, bytes, block),
                None => Some(block),
            };
            back.map_or(Ok(()), |b| b.free(None))
        },
    );
}

/// Whether dropped page-locked memory of `device` goes to the cache (see [`give_back_host`]).
pub(crate) fn caches_host(device: i32) -> bool {
    host_cache_of(device).is_some()
}

/// Gives every cached page-locked block of the entered context `a` back to the driver. The
/// driver's calls wait for the whole device (as `cudaFreeHost`); made only when asked.
pub(crate) fn release_host(a: &Active) -> Result<()> {
    let Some(c) = host_cache_of(a.dev.ordinal) else {
        return Ok(());
    };
    let blocks: Vec<HostBlock> = {
        let mut bins = c.lock();
        if !bins.at(a.generation()) {
            return Ok(());
        }
        bins.by_key.drain().flat_map(|(_, v)| v).collect()
    };
    let mut first = Ok(());
    for b in blocks {
        let r = queue::relaxed(|| b.free(Some(a)));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Whether page-locked blocks are cached for `a`'s device (for an allocation that failed).
pub(crate) fn holds_host(a: &Active) -> bool {
    host_cache_of(a.dev.ordinal).is_some_and(|c| !c.lock().by_key.is_empty())
}

// ---------------------------------------------------------------------------------------------
// CUDA arrays.

/// What a cached CUDA array is reused for: exactly the descriptor it was made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ArrayKey {
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) depth: usize,
    /// `CUarray_format`, as its number.
    pub(crate) format: u32,
    pub(crate) channels: u32,
    pub(crate) flags: u32,
}

/// One device's cached arrays, for one context generation.
#[derive(Default)]
struct ArrayBins {
    generation: u64,
    by_key: HashMap<ArrayKey, Vec<Raw<sys::CUarray_st>>>,
}

impl ArrayBins {
    /// As [`Bins::at`] (arrays of an earlier context died with it).
    fn at(&mut self, generation: u64) -> bool {
        if generation > self.generation {
            self.by_key.clear();
            self.generation = generation;
        }
        generation == self.generation
    }
}

fn array_caches() -> &'static [Mutex<ArrayBins>] {
    static C: OnceLock<Vec<Mutex<ArrayBins>>> = OnceLock::new();
    C.get_or_init(|| (0..DEVICES).map(|_| Mutex::default()).collect())
}

fn array_cache_of(device: i32) -> Option<&'static Mutex<ArrayBins>> {
    if !enabled() {
        return None;
    }
    usize::try_from(device)
        .ok()
        .and_then(|d| array_caches().get(d))
}

/// Whether dropped arrays of `device` go to the cache (see [`give_back_array`]).
pub(crate) fn caches_arrays(device: i32) -> bool {
    array_cache_of(device).is_some()
}

/// A cached array made with `key` for the entered context `a`, if one is there (no work uses
/// it; its contents are unspecified, as a new array's).
pub(crate) fn take_array(a: &Active, key: &ArrayKey) -> Option<sys::CUarray> {
    let mut bins = array_cache_of(a.dev.ordinal)?.lock();
    if !bins.at(a.generation()) {
        return None;
    }
    bins.by_key.get_mut(key)?.pop().map(|r| r.0)
}

fn put_array(device: i32, generation: u64, key: ArrayKey, raw: Raw<sys::CUarray_st>) {
    if let Some(c) = array_cache_of(device) {
        let mut bins = c.lock();
        if bins.at(generation) {
            bins.by_key.entry(key).or_default().push(raw);
        }
    }
}

/// Takes back a dropped array (made with `key` in context `generation` of `device`) whose
/// uses not known complete are `waits`: cached at once when none is pending, else by the
/// reclaimer once they are done. `cuArrayDestroy` waits for the whole device and holds a lock
/// of the driver that other threads' calls need meanwhile, so it is never made in the
/// background: cached arrays are destroyed on [`release_arrays`], when an allocation fails, and
/// die with their context at a reset. Only for a device whose arrays are cached
/// ([`caches_arrays`]).
pub(crate) fn give_back_array(
    device: i32,
    generation: u64,
    key: ArrayKey,
    raw: Raw<sys::CUarray_st>,
    waits: Vec<(Arc<Queue>, u64)>,
) {
    if waits.is_empty() {
        put_array(device, generation, key, raw);
        return;
    }
    queue::defer_free(
        device,
        generation,
        waits,
        "caching a CUDA array",
        move |a: Option<&Active>| {
            // After a reset the array died with its context.
            if a.is_some() {
                put_array(device, generation, key, raw);
            }
            Ok(())
        },
    );
}

/// Destroys every cached array of the entered context `a` (`cuArrayDestroy` waits for the whole
/// device, as `cudaFreeArray`; made only when asked or when an allocation failed).
pub(crate) fn release_arrays(a: &Active) -> Result<()> {
    let Some(c) = array_cache_of(a.dev.ordinal) else {
        return Ok(());
    };
    let arrays: Vec<Raw<sys::CUarray_st>> = {
        let mut bins = c.lock();
        if !bins.at(a.generation()) {
            return Ok(());
        }
        bins.by_key.drain().flat_map(|(_, v)| v).collect()
    };
    let mut first = Ok(());
    for raw in arrays {
        // SAFETY: a live array of this context that nothing uses or refers to (cached).
        let r =
            queue::relaxed(|| a.check(unsafe { sys::cuArrayDestroy(raw.get()) }, "cuArrayDestroy"));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Whether arrays are cached for `a`'s device (for an allocation that failed).
pub(crate) fn holds_arrays(a: &Active) -> bool {
    array_cache_of(a.dev.ordinal).is_some_and(|c| !c.lock().by_key.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_forget_blocks_of_earlier_contexts() {
        let bytes = AtomicUsize::new(0);
        let mut bins = Bins::default();
        assert!(bins.at(3, &bytes));
        bins.by_class.entry(512).or_default().push(Block { ptr: 1 });
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
