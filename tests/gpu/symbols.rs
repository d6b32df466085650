//! Module globals: arrays of any length, partial copies (offset and count), and truly
//! asynchronous copies from and to page-locked memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{assert_same, rng};
use crate::host_chunks::stall;
use cuda_runtime::{
    kernel_args, DeviceBuffer, Error, ErrorCode, HostRegisterFlags, HostRegistration, LaunchConfig,
    Library, PinnedBuffer, Stream, StreamFlags, Symbol,
};

// Exclusive: tests that assert a call returned while a host function stalls a stream. Another
// test's call that waits for the whole device (`cuMemFreeHost`, `cuMemHostUnregister`, ...) holds a
// driver lock that async copies and object creation need, for as long as the stall lasts (seen
// on the H200 pair): libcudart programs see the same coupling.
crate::tests![
    array_symbols_of_any_length_with_partial_copies,
    library_stays_loaded_for_queued_symbol_copies,
    ;
    exclusive:
    symbol_copies_with_page_locked_memory_are_asynchronous,
];

const PTX: &str = include_str!("kernels/library.ptx");
const N: usize = 6976;

/// Holds `s` with a host function until the returned flag is set (or 20 s passed): until then
/// nothing queued after it on `s` runs, so `s.query()` is deterministically false.
fn gate(s: &Stream) -> Arc<AtomicBool> {
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    s.launch_host_fn(move || {
        let t = Instant::now();
        while !r.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .unwrap();
    release
}

/// The table as a kernel sees it (`gather_table`), not only as copies read it.
fn gathered(lib: &Library, s: &Stream) -> Vec<i32> {
    let k = lib.kernel("gather_table").unwrap();
    let mut out = DeviceBuffer::<i32>::new(N).unwrap();
    // On `s`, and `s` waited for before the read-back: it may be non-blocking, which the
    // legacy stream's fill and copy are not ordered with.
    out.fill_async(-1, s).unwrap();
    // SAFETY: gather_table(int* out, size_t n) writes out[i] for i < n only.
    unsafe {
        k.launch(
            s,
            &LaunchConfig::for_elements(N, 128).unwrap(),
            &kernel_args![&mut out, N],
        )
    }
    .unwrap();
    s.synchronize().unwrap();
    out.to_vec().unwrap()
}

/// `Symbol<[i32; 6976]>` (no bytemuck feature asked of the user): whole and partial copies
/// at random offsets, synchronous and in stream order, against a host model of the table;
/// ranges that do not fit are errors with their values and change nothing.
fn array_symbols_of_any_length_with_partial_copies() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let table: Symbol<[i32; N]> = lib.global("table").unwrap();
    assert_eq!((table.len(), table.size()), (N, 4 * N));
    let mut model = [0i32; N];
    model.iter_mut().for_each(|x| *x = r.i32(..));
    table.copy_from_host(&model).unwrap();
    let s = Stream::new().unwrap();
    for round in 0..40 {
        let start = r.usize(..N);
        let count = r.usize(..=N - start);
        let vals: Vec<i32> = (0..count).map(|_| r.i32(..)).collect();
        if round % 2 == 0 {
            table.copy_from_host_at(start, &vals).unwrap();
        } else {
            table.copy_from_host_at_async(start, &vals, &s).unwrap();
        }
        model[start..start + count].copy_from_slice(&vals);
        let (a, b) = (r.usize(..N), r.usize(..N));
        let (lo, hi) = (a.min(b), a.max(b));
        let mut part = vec![0x5A5A_5A5Ai32; hi - lo];
        if round % 3 == 0 {
            table.copy_to_host_at_async(lo, &mut part, &s).unwrap();
        } else {
            table.copy_to_host_at(lo, &mut part).unwrap();
        }
        assert_same(
            &format!("round {round}: elements {lo}..{hi}"),
            &part,
            &model[lo..hi],
        );
    }
    assert_same("the whole table", &table.copy_to_host().unwrap(), &model);
    assert_same(
        "the table as the kernel reads it",
        &gathered(&lib, &s),
        &model,
    );
    // Ranges that do not fit.
    let e = table.copy_from_host_at(N - 6, &[1; 10]).unwrap_err();
    assert_eq!(
        e,
        Error::OutOfRange {
            what: "cudaMemcpyToSymbol range",
            start: N - 6,
            end: N + 4,
            len: N
        }
    );
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    let mut big = vec![0; 2];
    let e = table.copy_to_host_at(usize::MAX, &mut big).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: usize::MAX,
                len: N,
                ..
            }
        ),
        "{e}"
    );
    let e = table.copy_from_host_at_async(N + 1, &[], &s).unwrap_err();
    assert!(
        matches!(e, Error::OutOfRange { start, .. } if start == N + 1),
        "{e}"
    );
    table.copy_from_host_at(N, &[]).unwrap();
    assert_same(
        "unchanged by refused copies",
        &table.copy_to_host().unwrap(),
        &model,
    );
    // The wrong size for the variable is refused at lookup.
    assert!(matches!(
        lib.global::<[i32; N - 1]>("table"),
        Err(Error::SymbolSize { symbol_size, host_size, .. }) if symbol_size == 4 * N && host_size == 4 * (N - 1)
    ));
}

/// Copies between a symbol and page-locked memory return before the copy runs (the stream is
/// stalled behind a spinning kernel), and the page-locked side's CPU access waits for them while
/// its drop does not; chunks of a buffer go to parts of the table.
fn symbol_copies_with_page_locked_memory_are_asynchronous() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let table: Symbol<[i32; N]> = lib.global("table").unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut model = [0i32; N];
    table.copy_from_host(&model).unwrap();

    // From a chunk of page-locked memory into part of the table.
    let vals: Vec<i32> = (0..N).map(|_| r.i32(..)).collect();
    let mut src = PinnedBuffer::from_slice(&vals).unwrap();
    let (lo, hi) = (1000, 5000);
    let release = gate(&s);
    table
        .copy_from_pinned_at_async(lo - 10, &src.slice(lo..hi).unwrap(), &s)
        .unwrap();
    assert!(!s.query().unwrap(), "the copy waited for the stream");
    model[lo - 10..hi - 10].copy_from_slice(&vals[lo..hi]);
    // Writing the source from the CPU (once the gate is open) waits for the copy's read of it.
    release.store(true, Ordering::SeqCst);
    src.as_mut_slice().unwrap().fill(0);
    assert!(s.query().unwrap(), "a CPU write passed the queued copy");
    assert_same("table after the async copy", &gathered(&lib, &s), &model);

    // From part of the table into a chunk of page-locked memory.
    let mut out = PinnedBuffer::<i32>::new(N).unwrap();
    out.as_mut_slice().unwrap().fill(-7);
    let release = gate(&s);
    table
        .copy_to_pinned_at_async(lo - 10, &mut out.slice_mut(0..hi - lo).unwrap(), &s)
        .unwrap();
    assert!(!s.query().unwrap(), "the copy waited for the stream");
    release.store(true, Ordering::SeqCst);
    let got = out.as_slice().unwrap();
    assert_same(
        "read into page-locked memory",
        &got[..hi - lo],
        &vals[lo..hi],
    );
    assert!(got[hi - lo..].iter().all(|&x| x == -7));
    drop(got);

    // Dropped while a copy into it is queued: the drop returns at once, the memory stays for
    // the copy (which completes without error).
    let mut gone = PinnedBuffer::<i32>::new(N).unwrap();
    stall(&s, 100);
    table.copy_to_pinned_at_async(0, &mut gone, &s).unwrap();
    drop(gone);
    assert!(!s.query().unwrap(), "the drop waited for the copy into it");
    s.synchronize().unwrap();

    // A whole-symbol copy of one element, and the element-count check.
    let coeffs: Symbol<[f32; 4]> = lib.global("coeffs").unwrap();
    let c = [r.f32(), r.f32(), -r.f32(), 2.0];
    let one = PinnedBuffer::from_slice(&[c]).unwrap();
    coeffs.copy_from_pinned_async(&one, &s).unwrap();
    let mut back = PinnedBuffer::<[f32; 4]>::new(1).unwrap();
    coeffs.copy_to_pinned_async(&mut back, &s).unwrap();
    assert_eq!(back.as_slice().unwrap()[0], c);
    let two = PinnedBuffer::<[f32; 4]>::new(2).unwrap();
    let e = coeffs.copy_from_pinned_async(&two, &s).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = table
        .copy_from_pinned_at_async(N - 1, &src.slice(0..2).unwrap(), &s)
        .unwrap_err();
    assert!(matches!(e, Error::OutOfRange { len: N, .. }), "{e}");
    // A read-only registration is not a destination (where the device registers host memory
    // read-only; elsewhere the driver refuses the registration itself).
    // A whole page of its own: a registration of a few bytes covers their page, which other
    // threads' registrations of the heap beside it may overlap (the driver then refused the
    // read-only registration with InvalidValue, seen in the full GPU suite).
    let backing = vec![0i32; 3 * 1024];
    let skip = backing.as_ptr().align_offset(4096);
    let host = &backing[skip..skip + 1024];
    let read_only = cuda_runtime::Device::current()
        .unwrap()
        .attribute(cuda_runtime::DeviceAttribute::HostRegisterReadOnlySupported)
        .unwrap()
        != 0;
    let r = HostRegistration::with_read_only(host, HostRegisterFlags::empty(), |reg| {
        let e = table.copy_to_pinned_at_async(0, reg, &s).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    });
    match r {
        Ok(()) => assert!(read_only),
        Err(e) => {
            assert!(!read_only, "{e}");
            assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
        }
    }
    assert!(host.iter().all(|&x| x == 0));
}

/// Review finding: the symbol and its library dropped while an asynchronous copy out of the
/// variable is still queued. The library must stay loaded until the copy ran, so the
/// page-locked destination receives the variable's values, not freed memory's.
fn library_stays_loaded_for_queued_symbol_copies() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let vals: Vec<i32> = (0..N).map(|_| r.i32(..)).collect();
    let mut out = PinnedBuffer::<i32>::new(N).unwrap();
    out.as_mut_slice().unwrap().fill(-7);
    {
        let lib = Library::from_ptx(PTX).unwrap();
        let table: Symbol<[i32; N]> = lib.global("table").unwrap();
        let mut arr = [0i32; N];
        arr.copy_from_slice(&vals);
        table.copy_from_host(&arr).unwrap();
        stall(&s, 200);
        table
            .copy_to_pinned_at_async(0, &mut out.slice_mut(0..N).unwrap(), &s)
            .unwrap();
        drop(table);
        drop(lib);
    }
    // Other libraries loaded meanwhile may take the freed memory.
    let decoys: Vec<Library> = (0..4).map(|_| Library::from_ptx(PTX).unwrap()).collect();
    for d in &decoys {
        let t: Symbol<[i32; N]> = d.global("table").unwrap();
        t.copy_from_host(&[1234i32; N]).unwrap();
    }
    assert_same("the queued copy's values", &out.as_slice().unwrap(), &vals);
    let errors = cuda_runtime::Device::current()
        .unwrap()
        .take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}
