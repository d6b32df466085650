//! Allocation and drops: the device memory cache behind `DeviceBuffer::new`, and drops of every
//! kind of memory while an unrelated stream is held by a host function.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{assert_same, random_u32, rng, run_in_child_within};
use cuda_runtime::{
    kernels, Array, ArrayFlags, Device, DeviceBuffer, HostAllocFlags, LaunchConfig, ManagedBuffer,
    PinnedBuffer, Stream, StreamFlags,
};

crate::tests![
    cache_reuses_blocks_of_dropped_buffers_with_intact_results,
    cache_hands_out_no_block_still_used_by_queued_work,
    arrays_and_page_locked_blocks_are_reused_once_their_uses_are_done,
    ;
    exclusive:
    cache_goes_back_to_the_driver_when_an_allocation_would_fail,
    drops_and_creations_do_not_wait_for_an_unrelated_stream,
];

/// Children run by `run_in_child_within`.
pub const CHILDREN: &[(&str, fn())] = &[("allocation_unrelated_stream", unrelated_stream_child)];

fn non_blocking() -> Stream {
    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap()
}

/// What `write_index` writes at element `i`.
fn index_value(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761)
}

/// Holds `stream` with a host function until `release` is set (at most `limit`).
fn hold(stream: &Stream, release: &Arc<AtomicBool>, limit: Duration) {
    let r = release.clone();
    stream
        .launch_host_fn(move || {
            let t = Instant::now();
            while !r.load(Ordering::SeqCst) && t.elapsed() < limit {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
}

/// Buffers of random sizes are made, written, checked and dropped in a loop: the results are
/// the CPU's, blocks of dropped buffers are handed out again for their size, and the cache's
/// figure follows. (Releasing the cache, which waits for the whole device when it holds
/// page-locked blocks or arrays, is checked by an exclusive test.)
fn cache_reuses_blocks_of_dropped_buffers_with_intact_results() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let s = non_blocking();
    let mut seen = std::collections::HashSet::new();
    let mut reused = 0;
    // Eight sizes, so that blocks of dropped buffers meet allocations of their size.
    let sizes: Vec<usize> = (0..8).map(|_| r.usize(1..300_000)).collect();
    for round in 0..200 {
        let n = sizes[r.usize(..sizes.len())];
        let data = random_u32(&mut r, n);
        let mut b = DeviceBuffer::<u32>::new(n).unwrap();
        if !seen.insert(b.as_raw()) {
            reused += 1;
        }
        // Poisoned first: a stale block must not pass for the data.
        b.memset_u8_async(0xA5, &s).unwrap();
        b.copy_from_host_async(&data, &s).unwrap();
        let mut back = vec![0u32; n];
        b.copy_to_host_async(&mut back, &s).unwrap();
        assert_same(&format!("round {round}"), &back, &data);
        if round % 3 == 0 {
            // Dropped with a use still queued.
            kernels::spin::write_index(&s, &LaunchConfig::for_elements(n, 256).unwrap(), &mut b)
                .unwrap();
        }
    }
    // Same-size loops reuse the same block.
    let mut ptrs = Vec::new();
    for _ in 0..10 {
        let b = DeviceBuffer::<u8>::new(1 << 20).unwrap();
        ptrs.push(b.as_raw());
    }
    ptrs.dedup();
    assert_eq!(ptrs.len(), 1, "1 MiB allocations in a loop: {ptrs:x?}");
    assert!(reused > 0, "no block of 200 random allocations was reused");
    s.synchronize().unwrap();
    assert!(dev.cached_memory() >= 1 << 20, "{}", dev.cached_memory());
}

/// A buffer dropped while a kernel queued behind a held stream still writes it: a buffer
/// allocated meanwhile and written on another stream keeps its data after the kernel ran.
fn cache_hands_out_no_block_still_used_by_queued_work() {
    let mut r = rng();
    let (s1, s2) = (non_blocking(), non_blocking());
    let n = 1 << 18;
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let release = Arc::new(AtomicBool::new(false));
    hold(&s1, &release, Duration::from_secs(20));
    let mut a = DeviceBuffer::<u32>::new(n).unwrap();
    let a_ptr = a.as_raw();
    kernels::spin::write_index(&s1, &cfg, &mut a).unwrap();
    drop(a);
    let mut later = Vec::new();
    for _ in 0..4 {
        let data = random_u32(&mut r, n);
        let mut b = DeviceBuffer::<u32>::new(n).unwrap();
        if b.as_raw() == a_ptr {
            assert!(
                s1.query().unwrap(),
                "a block still written by work queued behind the held stream was handed out"
            );
        }
        b.copy_from_host_async(&data, &s2).unwrap();
        s2.synchronize().unwrap();
        later.push((b, data));
    }
    release.store(true, Ordering::SeqCst);
    s1.synchronize().unwrap();
    for (i, (b, data)) in later.iter().enumerate() {
        assert_same(&format!("buffer {i}"), &b.to_vec().unwrap(), data);
    }
    drop(later);
    // Once the kernel is done its block is handed out again, with whatever the kernel left.
    let b = DeviceBuffer::<u32>::new(n).unwrap();
    let mut head = vec![0u32; 16];
    b.slice(..16).unwrap().copy_to_host(&mut head).unwrap();
    if b.as_raw() == a_ptr {
        let want: Vec<u32> = (0..16).map(index_value).collect();
        assert_same("the reused block holds the kernel's writes", &head, &want);
    }
}

/// An array read by a copy queued behind a held stream is dropped: arrays of the same
/// descriptor made meanwhile are other arrays, and their data survives the queued copy; once
/// it is done, the array is handed out again. The same for a page-locked buffer written by a
/// queued copy, whose block comes back zeroed.
fn arrays_and_page_locked_blocks_are_reused_once_their_uses_are_done() {
    let mut r = rng();
    let (s1, s2) = (non_blocking(), non_blocking());
    let (w, h) = (64 + r.usize(..64), 32 + r.usize(..32));
    let n = w * h;
    let release = Arc::new(AtomicBool::new(false));
    hold(&s1, &release, Duration::from_secs(20));
    let first = random_u32(&mut r, n);
    let mut a = Array::<u32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
    a.copy_from_host(&first).unwrap();
    let mut out = DeviceBuffer::<u32>::new(n).unwrap();
    // Read by a copy queued behind the held stream, then dropped.
    a.copy_to_device_async(&mut out, &s1).unwrap();
    let a_raw = a.as_raw();
    drop(a);
    let mut p = PinnedBuffer::<u32>::new(n).unwrap();
    let d = DeviceBuffer::from_slice(&first).unwrap();
    d.copy_to_pinned_async(&mut p, &s1).unwrap();
    let p_ptr = p.as_host_ptr() as usize;
    drop(p);
    let mut later = Vec::new();
    for i in 0..3 {
        let data = random_u32(&mut r, n);
        let mut b = Array::<u32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
        if b.as_raw() == a_raw {
            assert!(
                s1.query().unwrap(),
                "array {i}: handed out under a queued copy"
            );
        }
        b.copy_from_host_async(&data, &s2).unwrap();
        let q = PinnedBuffer::<u32>::new(n).unwrap();
        if q.as_host_ptr() as usize == p_ptr {
            assert!(
                s1.query().unwrap(),
                "page-locked block {i}: handed out under a copy"
            );
        }
        later.push((b, q, data));
    }
    s2.synchronize().unwrap();
    release.store(true, Ordering::SeqCst);
    s1.synchronize().unwrap();
    assert_same(
        "the queued copy read the first array",
        &out.to_vec().unwrap(),
        &first,
    );
    for (i, (b, q, data)) in later.iter().enumerate() {
        assert_same(&format!("array {i}"), &b.to_vec().unwrap(), data);
        assert!(
            q.as_slice().unwrap().iter().all(|&x| x == 0),
            "page-locked {i}"
        );
    }
    drop(later);
    // Once the copy is done, the first array is handed out again (with the three made later,
    // all cached now).
    crate::common::eventually("the first array back in the cache", || {
        let got: Vec<Array<u32>> = (0..4)
            .map(|_| Array::<u32>::new_2d(w, h, ArrayFlags::empty()).unwrap())
            .collect();
        got.iter().any(|b| b.as_raw() == a_raw)
    });
    let q = PinnedBuffer::<u32>::new(n).unwrap();
    assert!(
        q.as_slice().unwrap().iter().all(|&x| x == 0),
        "a reused block is zeroed"
    );
}

/// With the cache holding much of the device's free memory, an allocation of another size
/// that needs it succeeds: the cache goes back to the driver first.
fn cache_goes_back_to_the_driver_when_an_allocation_would_fail() {
    let dev = Device::current().unwrap();
    dev.synchronize().unwrap();
    dev.release_cached_memory().unwrap();
    let (free, _) = dev.memory_info().unwrap();
    // Under the cache's bound (half the device's memory).
    let big = (free / 10 * 4) & !((2 << 20) - 1);
    let mut r = rng();
    let mut b = DeviceBuffer::<u8>::new(big).unwrap();
    let tail = crate::common::random_bytes(&mut r, 4096);
    b.slice_mut(big - 4096..)
        .unwrap()
        .copy_from_host(&tail)
        .unwrap();
    drop(b);
    // (Cached once the reclaimer has seen the copy's point done.)
    crate::common::eventually("the dropped block in the cache", || {
        dev.cached_memory() >= big
    });
    // Another size, larger than what is free while the first block is cached.
    let other = free - big + (64 << 20);
    let mut c = DeviceBuffer::<u8>::new(other).expect("the cache was not released");
    assert!(dev.cached_memory() < big, "{}", dev.cached_memory());
    let data = crate::common::random_bytes(&mut r, 4096);
    c.slice_mut(other - 4096..)
        .unwrap()
        .copy_from_host(&data)
        .unwrap();
    let mut back = vec![0u8; 4096];
    c.slice(other - 4096..)
        .unwrap()
        .copy_to_host(&mut back)
        .unwrap();
    assert_same("tail of the large buffer", &back, &data);
    drop(c);
    // (Larger than the cache's bound: freed, not cached.) Released on request: a cached block
    // counts as free again.
    let b = DeviceBuffer::<u8>::new(big).unwrap();
    drop(b);
    let other = big;
    crate::common::eventually("the block in the cache", || dev.cached_memory() >= other);
    let (before, _) = dev.memory_info().unwrap();
    dev.release_cached_memory().unwrap();
    assert_eq!(dev.cached_memory(), 0);
    let (after, _) = dev.memory_info().unwrap();
    assert!(
        after >= before + other,
        "releasing the cache gave back {} of {other} bytes",
        after as i64 - before as i64
    );
}

fn drops_and_creations_do_not_wait_for_an_unrelated_stream() {
    let out = run_in_child_within("allocation_unrelated_stream", Duration::from_secs(60));
    assert!(out.contains("unrelated stream child ok"), "{out}");
}

/// While a host function holds an unrelated stream (up to 8 s), drops of page-locked (plain,
/// write-combined, mapped), managed and device memory return at once, and an array made after
/// an earlier array's drop (past any grace a background destroy might take) does too. Each
/// buffer is used on its own stream first, and its data checked. After the hold, every
/// deferred free is made.
fn unrelated_stream_child() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let (held, own) = (non_blocking(), non_blocking());
    // Warm-up: module, host functions, each kind once.
    drop(PinnedBuffer::<u32>::new(16).unwrap());
    drop(ManagedBuffer::<u32>::new(16).unwrap());
    drop(Array::<f32>::new_2d(64, 64, ArrayFlags::empty()).unwrap());
    own.launch_host_fn(|| ()).unwrap();
    dev.synchronize().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    hold(&held, &release, Duration::from_secs(8));
    let limit = Duration::from_millis(500);
    let timed = |what: &str, f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        let took = t.elapsed();
        eprintln!("{what}: {took:?}");
        assert!(
            took < limit,
            "{what} took {took:?} beside a held unrelated stream"
        );
    };
    let n = 1 << 16;
    let data = random_u32(&mut r, n);
    for flags in [
        HostAllocFlags::empty(),
        HostAllocFlags::WRITE_COMBINED,
        HostAllocFlags::MAPPED,
    ] {
        let mut p = PinnedBuffer::<u32>::with_flags(n, flags).unwrap();
        p.as_mut_slice().unwrap().copy_from_slice(&data);
        let mut d = DeviceBuffer::<u32>::new(n).unwrap();
        d.copy_from_pinned_async(&p, &own).unwrap();
        let mut back = vec![0u32; n];
        d.copy_to_host_async(&mut back, &own).unwrap();
        assert_same(&format!("page-locked {flags:?}"), &back, &data);
        let (mut p, mut d) = (Some(p), Some(d));
        timed(
            &format!("drop of page-locked memory {flags:?}"),
            &mut || drop(p.take()),
        );
        timed("drop of a device buffer", &mut || drop(d.take()));
    }
    let mut m = ManagedBuffer::<u32>::new(n).unwrap();
    kernels::spin::write_index(&own, &LaunchConfig::for_elements(n, 256).unwrap(), &mut m).unwrap();
    own.synchronize().unwrap();
    let want: Vec<u32> = (0..n).map(index_value).collect();
    assert_same("managed", &m.as_slice().unwrap(), &want);
    let mut m = Some(m);
    timed("drop of managed memory", &mut || drop(m.take()));
    let mut a = Some(Array::<f32>::new_2d(256, 256, ArrayFlags::empty()).unwrap());
    timed("drop of an array", &mut || drop(a.take()));
    // Past the time a background destroy could be made anyway.
    std::thread::sleep(Duration::from_millis(1500));
    timed("an array made after an array's drop", &mut || {
        drop(Array::<f32>::new_2d(128, 128, ArrayFlags::empty()).unwrap())
    });
    // (The driver's own page-locked allocation is printed, not checked: no free of the crate
    // is behind it.)
    let t = Instant::now();
    drop(PinnedBuffer::<u8>::new(1 << 20).unwrap());
    eprintln!(
        "a pinned buffer made beside the held stream: {:?}",
        t.elapsed()
    );
    release.store(true, Ordering::SeqCst);
    dev.synchronize().unwrap();
    let deferred = dev.take_deferred_errors();
    assert!(deferred.is_empty(), "errors met in drops: {deferred:?}");
    println!("unrelated stream child ok");
}
