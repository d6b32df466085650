//! Chunks of page-locked, registered and managed memory (`PinnedView`, `PinnedViewMut`): async
//! copies of parts of one host array on several streams, their uses noted on the whole
//! allocation; the CPU-access trait shared by the host-reachable kinds; portable page-locked
//! memory used by a second device; `cudaStreamAttachMemAsync`.

use crate::common::{assert_same, random_u32, rng};
use cuda_runtime::{
    kernels, Device, DeviceBuffer, Error, ErrorCode, HostAccess, HostAllocFlags, HostRegisterFlags,
    HostRegistration, LaunchConfig, ManagedBuffer, MemAttach, PinnedBuffer, Stream, StreamFlags,
};

crate::tests![
    chunked_copies_on_four_streams_match_the_cpu,
    chunks_of_registered_and_managed_memory,
    chunks_handed_to_other_threads,
    dropping_the_parent_keeps_it_for_queued_chunk_copies,
    a_mapped_chunk_as_a_kernel_argument,
    bad_chunks_are_refused_with_their_values,
    host_access_is_one_trait_for_every_kind,
    pinned_new_is_portable,
    attach_managed_memory_to_a_stream,
    ;
    two_gpus:
    portable_pinned_memory_on_a_second_device,
];

/// The kernel `simple_streams::mix_repeat`, on the CPU.
fn mix(mut x: u32, factor: u32, iterations: i32) -> u32 {
    for _ in 0..iterations {
        x = x.wrapping_mul(1_664_525).wrapping_add(factor);
    }
    x
}

/// Keeps `s` busy for `ms` milliseconds (one thread spinning), so that work queued after it is
/// still in flight when the CPU looks.
pub fn stall(s: &Stream, ms: u64) {
    let mut stamps = DeviceBuffer::<u64>::new(2).unwrap();
    kernels::spin::spin(
        s,
        &LaunchConfig::new(1u32, 1u32),
        &mut stamps,
        ms * 1_000_000,
        0,
    )
    .unwrap();
}

/// Chunk boundaries of `n` elements in `k` parts, the last one taking the remainder.
fn bounds(n: usize, k: usize) -> Vec<std::ops::Range<usize>> {
    let c = n / k;
    (0..k)
        .map(|i| i * c..if i + 1 == k { n } else { (i + 1) * c })
        .collect()
}

/// simpleStreams: one page-locked array copied in chunks on 4 streams, a kernel per chunk,
/// copied back in chunks; the whole output read at once, with no synchronisation, while every
/// stream is still stalled behind a spinning kernel. The read must wait for every chunk.
fn chunked_copies_on_four_streams_match_the_cpu() {
    let mut r = rng();
    let n = 4 * 65_536 + 13;
    let input = random_u32(&mut r, n);
    let (factor, iterations) = (r.u32(..) | 1, r.i32(1..40));
    let expected: Vec<u32> = input.iter().map(|&x| mix(x, factor, iterations)).collect();
    let streams: Vec<Stream> = (0..4)
        .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
        .collect();
    for flags in [
        HostAllocFlags::empty(),
        HostAllocFlags::WRITE_COMBINED,
        HostAllocFlags::MAPPED | HostAllocFlags::PORTABLE,
    ] {
        let mut src = PinnedBuffer::<u32>::with_flags(n, flags).unwrap();
        src.as_mut_slice().unwrap().copy_from_slice(&input);
        let mut out = PinnedBuffer::<u32>::new(n).unwrap();
        out.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
        let mut dev = DeviceBuffer::<u32>::new(n).unwrap();
        for (i, (s, rg)) in streams.iter().zip(bounds(n, 4)).enumerate() {
            let mut d = dev.slice_mut(rg.clone()).unwrap();
            // Poison, on the chunk's own stream: a `fill` in the legacy stream is not ordered
            // before these non-blocking streams, and waits for every blocking stream's work,
            // other tests' included (a 200 ms spin on a per-thread stream held it past chunk
            // 0's copy in, which it then overwrote: tenth session).
            d.fill_async(0x5A5A_5A5A, s).unwrap();
            stall(s, 40 + 10 * i as u64);
            d.copy_from_pinned_async(&src.slice(rg.clone()).unwrap(), s)
                .unwrap();
            let cfg = LaunchConfig::for_elements(rg.len(), 128).unwrap();
            kernels::simple_streams::mix_repeat(s, &cfg, &mut d, factor, iterations).unwrap();
            d.copy_to_pinned_async(&mut out.slice_mut(rg).unwrap(), s)
                .unwrap();
        }
        // No stream is synchronised: the view of the whole buffer waits for all four chunks.
        assert_same(
            &format!("{flags:?}: chunks copied back"),
            &out.as_slice().unwrap(),
            &expected,
        );
        for s in &streams {
            assert!(
                s.query().unwrap(),
                "the CPU view returned before a chunk's stream finished"
            );
        }
        // Writing the source from the CPU after chunk reads were queued waits for them too.
        stall(&streams[0], 40);
        let mut d = dev.slice_mut(0..n / 2).unwrap();
        d.copy_from_pinned_async(&src.slice(0..n / 2).unwrap(), &streams[0])
            .unwrap();
        src.as_mut_slice().unwrap().fill(0);
        assert!(
            streams[0].query().unwrap(),
            "a CPU write of the source passed a queued chunk read"
        );
        assert_same(
            "re-read chunk",
            &dev.slice(0..n / 2).unwrap().to_vec().unwrap(),
            &input[..n / 2],
        );
    }
}

/// Chunks of a registration of the program's own memory and of managed memory.
fn chunks_of_registered_and_managed_memory() {
    let mut r = rng();
    let n = 3 * 4096 + 7;
    let data = random_u32(&mut r, n);
    let streams: Vec<Stream> = (0..3).map(|_| Stream::new().unwrap()).collect();
    let mut dev = DeviceBuffer::<u32>::new(n).unwrap();
    let mut back = vec![0xDEAD_BEEFu32; n];
    let mut src = data.clone();
    HostRegistration::with(&mut src, HostRegisterFlags::empty(), |reg| {
        for (s, rg) in streams.iter().zip(bounds(n, 3)) {
            stall(s, 30);
            dev.slice_mut(rg.clone())
                .unwrap()
                .copy_from_pinned_async(&reg.slice(rg).unwrap(), s)
                .unwrap();
        }
    })
    .unwrap();
    HostRegistration::with(&mut back, HostRegisterFlags::empty(), |reg| {
        for (s, rg) in streams.iter().zip(bounds(n, 3)).rev() {
            dev.slice(rg.clone())
                .unwrap()
                .copy_to_pinned_async(&mut reg.slice_mut(rg).unwrap(), s)
                .unwrap();
        }
        // A CPU view of one chunk (the trait's) waits for the whole registration's copies.
        let mut chunk = reg.slice_mut(0..5).unwrap();
        assert_same(
            "first chunk",
            &HostAccess::as_slice(&chunk).unwrap(),
            &data[..5],
        );
        chunk.as_mut_slice().unwrap()[0] = 7;
    })
    .unwrap();
    let mut want = data.clone();
    want[0] = 7;
    assert_same("registered chunks", &back, &want);

    let mut m = ManagedBuffer::<u32>::new(n).unwrap();
    m.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
    for (s, rg) in streams.iter().zip(bounds(n, 3)) {
        stall(s, 30);
        dev.slice(rg.clone())
            .unwrap()
            .copy_to_pinned_async(&mut m.slice_mut(rg).unwrap(), s)
            .unwrap();
    }
    assert_same("managed chunks", &m.as_slice().unwrap(), &data);
}

/// Exclusive chunks split off one buffer and moved to four threads, each copying its chunk on
/// its own stream; the owner's CPU view afterwards waits for all of them.
fn chunks_handed_to_other_threads() {
    let mut r = rng();
    let n = 4 * 10_000 + 3;
    let data = random_u32(&mut r, n);
    let dev = DeviceBuffer::from_slice(&data).unwrap();
    for _ in 0..3 {
        let mut out = PinnedBuffer::<u32>::new(n).unwrap();
        out.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
        {
            let whole = out.slice_mut(..).unwrap();
            let (a, rest) = whole.split_at_mut(n / 4).unwrap();
            let (b, rest) = rest.split_at_mut(n / 4).unwrap();
            let (c, d) = rest.split_at_mut(n / 4).unwrap();
            assert_eq!(a.len() + b.len() + c.len() + d.len(), n);
            let dev = &dev;
            std::thread::scope(|sc| {
                for (i, mut v) in [a, b, c, d].into_iter().enumerate() {
                    sc.spawn(move || {
                        let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
                        stall(&s, 20 + 10 * i as u64);
                        let start = i * (n / 4);
                        dev.slice(start..start + v.len())
                            .unwrap()
                            .copy_to_pinned_async(&mut v, &s)
                            .unwrap();
                        // The stream is dropped here with its copy still queued.
                    });
                }
            });
        }
        assert_same("chunks from four threads", &out.as_slice().unwrap(), &data);
    }
}

/// Dropping the page-locked buffer right after chunk copies were queued (behind stalled
/// streams) returns at once, and the memory stays alive for those copies: a source's zeros
/// reach the device after its drop.
fn dropping_the_parent_keeps_it_for_queued_chunk_copies() {
    let mut r = rng();
    let n = 4 * 1024;
    let data = random_u32(&mut r, n);
    let streams: Vec<Stream> = (0..4)
        .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
        .collect();
    let mut dev = DeviceBuffer::from_slice(&data).unwrap();
    for write_combined in [false, true] {
        let flags = if write_combined {
            HostAllocFlags::WRITE_COMBINED
        } else {
            HostAllocFlags::empty()
        };
        // The buffer as a destination: dropped at once, the copies still run into it.
        let mut dst = PinnedBuffer::<u32>::with_flags(n, flags).unwrap();
        let t0 = std::time::Instant::now();
        for (s, rg) in streams.iter().zip(bounds(n, 4)) {
            stall(s, 400);
            dev.slice(rg.clone())
                .unwrap()
                .copy_to_pinned_async(&mut dst.slice_mut(rg).unwrap(), s)
                .unwrap();
        }
        let queued = t0.elapsed();
        // (Queuing the stalls can itself take as long as a stall on a loaded machine: the
        // drop's own time is what is checked, and how many copies it found pending is shown.)
        let busy = streams.iter().filter(|s| !s.query().unwrap()).count();
        let t = std::time::Instant::now();
        drop(dst);
        let took = t.elapsed();
        eprintln!(
            "{flags:?}: copies queued in {queued:?}; the drop took {took:?} with {busy} of 4 \
             streams still copying into it"
        );
        assert!(
            took < std::time::Duration::from_millis(100),
            "{flags:?}: the drop took {took:?} with {busy} streams still copying into it"
        );
        // ...and as a source: its zeros reach the device after the drop.
        let src = PinnedBuffer::<u32>::with_flags(n, flags).unwrap();
        for (s, rg) in streams.iter().zip(bounds(n, 4)) {
            stall(s, 400);
            dev.slice_mut(rg.clone())
                .unwrap()
                .copy_from_pinned_async(&src.slice(rg).unwrap(), s)
                .unwrap();
        }
        let t = std::time::Instant::now();
        drop(src);
        let took = t.elapsed();
        assert!(
            took < std::time::Duration::from_millis(100),
            "{flags:?}: the drop took {took:?} with copies from it queued"
        );
        for s in &streams {
            s.synchronize().unwrap();
        }
        // The copies read the zeroed buffer after its drop, before it was freed.
        assert!(dev.to_vec().unwrap().iter().all(|&x| x == 0));
        dev.copy_from_host(&data).unwrap();
    }
    let deferred = cuda_runtime::Device::current()
        .unwrap()
        .take_deferred_errors();
    assert!(deferred.is_empty(), "errors met in drops: {deferred:?}");
}

/// A view of mapped page-locked memory passed to a kernel writes exactly its elements, at its
/// offset; an unmapped view is refused as a kernel argument.
fn a_mapped_chunk_as_a_kernel_argument() {
    let n = 10_000;
    let s = Stream::new().unwrap();
    let mut m = PinnedBuffer::<u32>::with_flags(n, HostAllocFlags::MAPPED).unwrap();
    m.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
    let (lo, hi) = (1234, 7777);
    {
        let mut v = m.slice_mut(lo..hi).unwrap();
        kernels::spin::write_index(
            &s,
            &LaunchConfig::for_elements(hi - lo, 64).unwrap(),
            &mut v,
        )
        .unwrap();
    }
    let got = m.as_slice().unwrap();
    let want: Vec<u32> = (0..n)
        .map(|i| {
            if (lo..hi).contains(&i) {
                ((i - lo) as u32).wrapping_mul(2_654_435_761)
            } else {
                0xDEAD_BEEF
            }
        })
        .collect();
    assert_same("kernel on a mapped chunk", &got, &want);
    drop(got);
    let mut plain = PinnedBuffer::<u32>::new(16).unwrap();
    let mut v = plain.slice_mut(4..8).unwrap();
    let e = kernels::spin::write_index(&s, &LaunchConfig::for_elements(4, 32).unwrap(), &mut v)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
}

/// Out-of-range views, mismatched chunk lengths, writes into read-only registrations and bad
/// splits are errors with the values, never panics, and queue nothing.
fn bad_chunks_are_refused_with_their_values() {
    let s = Stream::new().unwrap();
    let mut p = PinnedBuffer::<u32>::new(100).unwrap();
    match p.slice(90..101) {
        Err(Error::OutOfRange {
            start: 90,
            end: 101,
            len: 100,
            ..
        }) => {}
        other => panic!("slice 90..101 of 100: {other:?}"),
    }
    #[allow(clippy::reversed_empty_ranges)]
    let e = p.slice_mut(50..40).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 50,
                end: 40,
                ..
            }
        ),
        "{e}"
    );
    let e = p.slice(..).unwrap().slice(3..200).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 3,
                end: 200,
                len: 100,
                ..
            }
        ),
        "{e}"
    );
    let e = p.slice_mut(10..20).unwrap().split_at_mut(11).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { len: 10, .. }), "{e}");
    // A nested view is relative to its parent view.
    p.as_mut_slice()
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = i as u32);
    let inner = p.slice(10..60).unwrap().slice(5..8).unwrap();
    assert_eq!(&*inner.as_slice().unwrap(), &[15, 16, 17]);

    let mut dev = DeviceBuffer::<u32>::new(10).unwrap();
    let e = dev
        .copy_from_pinned_async(&p.slice(0..9).unwrap(), &s)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 10,
                actual: 9,
                ..
            }
        ),
        "{e}"
    );
    let e = dev
        .copy_to_pinned_async(&mut p.slice_mut(0..11).unwrap(), &s)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 10,
                actual: 11,
                ..
            }
        ),
        "{e}"
    );
    // A page of its own for the read-only registration: a registration of a few heap bytes
    // covers their whole page, which another thread's registration of the heap beside it may
    // overlap (the driver then refuses the read-only one with InvalidValue, seen in the full
    // GPU suite; see symbols' read-only test).
    let mut backing = vec![0u32; 3 * 1024];
    let skip = backing.as_ptr().align_offset(4096);
    let page = &mut backing[skip..skip + 1024];
    for (i, x) in page.iter_mut().take(10).enumerate() {
        *x = i as u32;
    }
    let data = &page[..10];
    HostRegistration::with_read_only(data, HostRegisterFlags::empty(), |reg| {
        let e = dev
            .copy_to_pinned_async(&mut reg.slice_mut(0..10).unwrap(), &s)
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
        let mut v = reg.slice_mut(0..2).unwrap();
        assert_eq!(
            v.as_mut_slice().unwrap_err().code(),
            ErrorCode::InvalidValue
        );
        // Reading through it is fine.
        dev.copy_from_pinned_async(&reg.slice(..).unwrap(), &s)
            .unwrap();
    })
    .unwrap();
    assert_same("from a read-only chunk", &dev.to_vec().unwrap(), data);
    // Nothing was written by the refused copies.
    assert_eq!(
        &p.as_slice().unwrap()[..11],
        &(0..11).collect::<Vec<u32>>()[..]
    );
}

/// Generic CPU code over `HostAccess`: page-locked, registered, managed memory and a chunk.
fn host_access_is_one_trait_for_every_kind() {
    fn round_trip<M: HostAccess<u32>>(m: &mut M, data: &[u32], s: &Stream) {
        m.as_mut_slice().unwrap().copy_from_slice(data);
        let mut dev = DeviceBuffer::<u32>::new(data.len()).unwrap();
        dev.copy_from_pinned_async(&*m, s).unwrap();
        // Poison from the CPU: waits for the copy's read.
        m.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
        stall(s, 20);
        dev.copy_to_pinned_async(m, s).unwrap();
        assert_same("HostAccess::to_vec", &m.to_vec().unwrap(), data);
        m.synchronize().unwrap();
        assert!(s.query().unwrap());
    }
    let mut r = rng();
    let n = 5000;
    let data = random_u32(&mut r, n);
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    round_trip(&mut PinnedBuffer::<u32>::new(n).unwrap(), &data, &s);
    round_trip(&mut ManagedBuffer::<u32>::new(n).unwrap(), &data, &s);
    let mut own = vec![0u32; n];
    HostRegistration::with(&mut own, HostRegisterFlags::empty(), |reg| {
        round_trip(reg, &data, &s)
    })
    .unwrap();
    let mut big = PinnedBuffer::<u32>::new(3 * n).unwrap();
    round_trip(&mut big.slice_mut(n..2 * n).unwrap(), &data, &s);
    let whole = big.as_slice().unwrap();
    assert!(whole[..n].iter().chain(&whole[2 * n..]).all(|&x| x == 0));
}

/// `PinnedBuffer::new` is `cudaMallocHost`: portable, like libcudart's.
fn pinned_new_is_portable() {
    let p = PinnedBuffer::<u8>::new(4096).unwrap();
    assert_eq!(p.flags(), HostAllocFlags::PORTABLE);
    assert_eq!(
        PinnedBuffer::<u8>::with_flags(1, HostAllocFlags::empty())
            .unwrap()
            .flags(),
        HostAllocFlags::empty()
    );
}

/// `cudaStreamAttachMemAsync`: managed memory attached to one stream, then to the host, then
/// globally; kernels on that stream use it and the CPU reads the results.
fn attach_managed_memory_to_a_stream() {
    let mut r = rng();
    let n = 4096;
    let data = random_u32(&mut r, n);
    let (factor, iterations) = (r.u32(..) | 1, r.i32(1..20));
    let s = Stream::new().unwrap();
    let mut m = ManagedBuffer::<u32>::with_attach(n, MemAttach::Host).unwrap();
    m.as_mut_slice().unwrap().copy_from_slice(&data);
    m.attach_async(&s, MemAttach::Single).unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    stall(&s, 20);
    kernels::simple_streams::mix_repeat(&s, &cfg, &mut m, factor, iterations).unwrap();
    // The CPU view waits for the kernel (and the attach) on `s`.
    let want: Vec<u32> = data.iter().map(|&x| mix(x, factor, iterations)).collect();
    assert_same(
        "kernel on stream-attached memory",
        &m.as_slice().unwrap(),
        &want,
    );
    m.attach_async(&s, MemAttach::Host).unwrap();
    m.attach_async(&s, MemAttach::Global).unwrap();
    kernels::simple_streams::mix_repeat(&s, &cfg, &mut m, factor, iterations).unwrap();
    let want2: Vec<u32> = want.iter().map(|&x| mix(x, factor, iterations)).collect();
    assert_same("after attaching globally", &m.to_vec().unwrap(), &want2);
    // The per-thread stream is a stream like any other here.
    m.attach_async(&Stream::per_thread().unwrap(), MemAttach::Global)
        .unwrap();
    m.synchronize().unwrap();
    // `Single` is not an allocation flag.
    let e = ManagedBuffer::<u32>::with_attach(4, MemAttach::Single).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
}

/// Page-locked memory from `PinnedBuffer::new` on device 0 is copied asynchronously from and to
/// by device 1's streams, in chunks, and device 1 sees it as page-locked host memory.
fn portable_pinned_memory_on_a_second_device() {
    let mut r = rng();
    let n = 2 * 100_000 + 1;
    let data = random_u32(&mut r, n);
    Device::new(0).unwrap().set_current().unwrap();
    let src = PinnedBuffer::from_slice(&data).unwrap();
    let mut back = PinnedBuffer::<u32>::new(n).unwrap();
    back.as_mut_slice().unwrap().fill(0xDEAD_BEEF);
    Device::new(1).unwrap().set_current().unwrap();
    let attrs = cuda_runtime::pointer_attributes(src.as_host_ptr() as u64).unwrap();
    assert_eq!(attrs.memory_type, cuda_runtime::MemoryType::Host);
    let streams = [Stream::new().unwrap(), Stream::new().unwrap()];
    let mut dev1 = DeviceBuffer::<u32>::new(n).unwrap();
    for (s, rg) in streams.iter().zip(bounds(n, 2)) {
        stall(s, 30);
        let mut d = dev1.slice_mut(rg.clone()).unwrap();
        d.copy_from_pinned_async(&src.slice(rg.clone()).unwrap(), s)
            .unwrap();
        d.copy_to_pinned_async(&mut back.slice_mut(rg).unwrap(), s)
            .unwrap();
    }
    // Dropped on device 1 while both streams still work: waits for them.
    assert_same("through device 1", &back.as_slice().unwrap(), &data);
    assert_same("device 1's copy", &dev1.to_vec().unwrap(), &data);
    drop(src);
    for s in &streams {
        assert!(s.query().unwrap());
    }
    Device::new(0).unwrap().set_current().unwrap();
}
