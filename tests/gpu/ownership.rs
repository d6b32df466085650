//! One owner per driver handle, whatever a process exports and imports back (pools, pool
//! pointers, interprocess events), and modules that stay loaded while queued work uses their
//! functions or variables.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::common::{assert_same, random_u32, rng, slow_factor};
use crate::host_chunks::stall;
use cuda_runtime::{
    kernel_args, Device, DeviceBuffer, ErrorCode, Event, EventFlags, IpcEventHandle, LaunchConfig,
    Library, MemPool, MemPoolProps, Module, PinnedBuffer, ShareableHandle, Stream, StreamFlags,
    Symbol,
};

// Exclusive: the module tests assert that calls return while a kernel holds a stream. Another
// test's call that waits for the whole device holds a driver lock that copies and module loads
// need, for as long as the hold lasts (see tests/gpu/symbols.rs).
crate::tests![
    pool_imported_twice_is_one_owner,
    own_pool_pointer_export_is_not_imported_back,
    ipc_event_opened_twice_has_one_owner,
    ;
    exclusive:
    module_drop_leaves_its_queued_kernel_loaded_and_does_not_wait,
    library_drop_leaves_its_queued_kernel_loaded_and_does_not_wait,
    module_stays_loaded_for_a_queued_copy_into_its_variable,
];

pub const CHILDREN: &[(&str, fn())] = &[("ipc_event_twice_child", ipc_event_twice_child)];

const PTX: &str = include_str!("kernels/library.ptx");
/// The length of the module variable `table` (kernels/library.cu).
const N: usize = 6976;

fn shareable_pool() -> MemPool {
    MemPool::new(
        Device::current().unwrap(),
        MemPoolProps {
            handle_type: ShareableHandle::PosixFileDescriptor,
            ..Default::default()
        },
    )
    .unwrap()
}

/// A pool exported as a file descriptor and imported back twice in the same process: the
/// driver hands out one handle for both imports, so they must be one owner. Dropping the first
/// import must leave the second usable, and no handle may be destroyed twice (the second
/// destroy is a deferred error, or destroys whatever pool has the number by then).
fn pool_imported_twice_is_one_owner() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let pool = shareable_pool();
    let fd = pool.export_fd().unwrap();
    let first = MemPool::import_fd(fd.as_fd(), dev).unwrap();
    let second = MemPool::import_fd(fd.as_fd(), dev).unwrap();
    eprintln!(
        "own pool {:p}, imported {:p} and {:p}",
        pool.as_raw(),
        first.as_raw(),
        second.as_raw()
    );
    // (The driver refuses attribute reads on an imported pool: the imports are checked by their
    // drops, which must destroy the handle once, and by the exporter's pool, below.)
    let one_handle = first.as_raw() == second.as_raw();
    drop(first);
    // A third import while the second is held, then everything dropped.
    let third = MemPool::import_fd(fd.as_fd(), dev).unwrap();
    let one_handle = one_handle && third.as_raw() == second.as_raw();
    drop(second);
    drop(third);
    eprintln!("one handle for the three imports: {one_handle}");
    let deferred = dev.take_deferred_errors();
    assert!(
        deferred.is_empty(),
        "errors met in the imports' drops: {deferred:?}"
    );
    // The exporter's own pool is untouched by the imports' drops: it still allocates, and the
    // allocation holds what was written.
    let s = Stream::new().unwrap();
    let data = random_u32(&mut r, 4096);
    let mut b = DeviceBuffer::<u32>::new_from_pool_async(data.len(), &pool, &s).unwrap();
    b.copy_from_host_async(&data, &s).unwrap();
    s.synchronize().unwrap();
    assert_same(
        "allocation of the exporter's pool",
        &b.to_vec().unwrap(),
        &data,
    );
    drop(b);
    drop(pool);
    dev.synchronize().unwrap();
    let errors = dev.take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

/// A pointer of this process's own pool, exported and imported back through an import of the
/// pool: the import would be a second owner of the allocation's memory, which outlives the
/// exporter's free and then reaches the next allocation the pool gives that memory. Refused,
/// with the exporting allocation's address, before and after the exporter's buffer is dropped;
/// the exporter's data and the next allocation's stay intact.
fn own_pool_pointer_export_is_not_imported_back() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let pool = shareable_pool();
    let s = Stream::new().unwrap();
    let data = random_u32(&mut r, 100_000);
    let mut buf = DeviceBuffer::<u32>::new_from_pool_async(data.len(), &pool, &s).unwrap();
    buf.copy_from_host_async(&data, &s).unwrap();
    s.synchronize().unwrap();
    let export = match buf.pool_export() {
        Ok(x) => x,
        Err(e) => {
            // libcudart refuses the same export on some machines (probes/pool_ipc/export.cu):
            // nothing to import then.
            assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
            eprintln!("pool pointer export unavailable here (libcudart too): {e}");
            return;
        }
    };
    let fd = pool.export_fd().unwrap();
    let imported = MemPool::import_fd(fd.as_fd(), dev).unwrap();
    let addr = format!("{:#x}", buf.as_raw());
    let refused = |what: &str| {
        match DeviceBuffer::<u32>::import_from_pool(&imported, &export, data.len()) {
            Ok(b) => {
                let at = b.as_raw();
                // Not dropped: its free would release memory another buffer owns.
                std::mem::forget(b);
                panic!("{what}: imported back as a second buffer at {at:#x} (the allocation is at {addr})");
            }
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::InvalidValue, "{what}: {e}");
                assert!(e.to_string().contains(&addr), "{what}: {e}");
            }
        }
    };
    refused("while the exporter's buffer lives");
    assert_same("the exporter's data", &buf.to_vec().unwrap(), &data);
    drop(buf);
    s.synchronize().unwrap();
    // The pool may give the same memory to the next allocation: the old data still reaches
    // nothing.
    let next_data = random_u32(&mut r, data.len());
    let mut next = DeviceBuffer::<u32>::new_from_pool_async(data.len(), &pool, &s).unwrap();
    next.copy_from_host_async(&next_data, &s).unwrap();
    s.synchronize().unwrap();
    eprintln!(
        "exported allocation at {addr}, next allocation at {:#x}",
        next.as_raw()
    );
    refused("after the exporter's buffer was dropped");
    assert_same(
        "the next allocation's data",
        &next.to_vec().unwrap(),
        &next_data,
    );
    drop(next);
    drop(imported);
    drop(pool);
    dev.synchronize().unwrap();
    let errors = dev.take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

const EVENT_HANDLE: &str = "CUDA_RUNTIME_TEST_OWN_EVENT";

/// An interprocess event's handle opened twice by another process: two `Event`s there must be
/// two driver events (or the second open refused), each destroyed once; both work, and the
/// parent's event sees the child's record. (Opening it in this process fails in the driver:
/// `driver_errors::ipc_handle_opened_in_its_own_process`.)
fn ipc_event_opened_twice_has_one_owner() {
    let ev = Event::with_flags(EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING).unwrap();
    let h = ev.ipc_handle().unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .env(crate::common::CHILD_VAR, "ipc_event_twice_child")
        .env(EVENT_HANDLE, h.to_hex())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("ipc event twice ok"), "{text}");
    // The child's last record is complete: waiting for the event here returns.
    ev.synchronize().unwrap();
    let s = Stream::new().unwrap();
    ev.record(&s).unwrap();
    ev.synchronize().unwrap();
    let errors = Device::current().unwrap().take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

fn ipc_event_twice_child() {
    let h = IpcEventHandle::from_hex(&std::env::var(EVENT_HANDLE).unwrap()).unwrap();
    let a = Event::open_ipc(&h).unwrap();
    let s = Stream::new().unwrap();
    match Event::open_ipc(&h) {
        Ok(b) => {
            println!("opened twice: events {:p} and {:p}", a.as_raw(), b.as_raw());
            assert_ne!(a.as_raw(), b.as_raw(), "one driver event, two owners");
            b.record(&s).unwrap();
            b.synchronize().unwrap();
            drop(b);
        }
        Err(e) => {
            println!("second open refused: {e}");
            assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
            assert!(e.to_string().contains("open already"), "{e}");
        }
    }
    // The first is intact whatever became of the second.
    a.record(&s).unwrap();
    a.synchronize().unwrap();
    drop(a);
    // Opened again after both were dropped.
    let again = Event::open_ipc(&h).unwrap();
    again.record(&s).unwrap();
    s.synchronize().unwrap();
    drop(again);
    cuda_runtime::device::synchronize().unwrap();
    let errors = Device::current().unwrap().take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
    println!("ipc event twice ok");
}

/// How long the spinning kernel holds the stream in the module tests.
fn hold_ms() -> u64 {
    2000 * slow_factor() as u64
}

/// Loads the module again `n` times while `s` is held, each time noting whether its `table`
/// got `old`, the address of a variable of a module dropped with work still queued on it.
/// Returns the loads made while `s` was still busy (the ones that count) and keeps every
/// module loaded until the caller drops them.
fn reload_while_held(s: &Stream, old: u64, n: usize) -> (usize, Vec<Module>) {
    let mut busy = 0;
    let mut kept = Vec::new();
    for i in 0..n {
        let m = Module::from_ptx(PTX).unwrap();
        let t: Symbol<[i32; N]> = m.global("table").unwrap();
        let held = !s.query().unwrap();
        assert!(
            !(held && t.as_raw() == old),
            "load {i}: a new module's variable got the address {old:#x} of the dropped \
             module's while work on it was still queued"
        );
        busy += held as usize;
        drop(t);
        kept.push(m);
    }
    (busy, kept)
}

/// A module dropped (with its function) while a kernel of it is queued behind a held stream:
/// the drop returns at once (it waited in `cuModuleUnload` for the kernel, so for the whole
/// hold; with a host function waiting for the dropping thread, forever), the module stays
/// loaded until the kernel ran (new modules loaded meanwhile never get its variable's
/// address), and the kernel reads the variable's values.
fn module_drop_leaves_its_queued_kernel_loaded_and_does_not_wait() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut vals = [0i32; N];
    vals.iter_mut().for_each(|v| *v = r.i32(..));
    let mut out = DeviceBuffer::<i32>::new(N).unwrap();
    out.fill(-1).unwrap();
    let m = Module::from_ptx(PTX).unwrap();
    let f = m.function("gather_table").unwrap();
    let table: Symbol<[i32; N]> = m.global("table").unwrap();
    // Written synchronously: only the kernel is queued on the module.
    table.copy_from_host(&vals).unwrap();
    let old = table.as_raw();
    drop(table);
    stall(&s, hold_ms());
    // SAFETY: gather_table(int* out, size_t n) writes out[i] for i < n only.
    unsafe {
        f.launch(
            &s,
            &LaunchConfig::for_elements(N, 128).unwrap(),
            &kernel_args![&mut out, N],
        )
    }
    .unwrap();
    assert!(
        !s.query().unwrap(),
        "the setup outlasted the hold: nothing left to check"
    );
    drop(f);
    let t0 = Instant::now();
    drop(m);
    let took = t0.elapsed();
    assert!(
        !s.query().unwrap(),
        "the module's drop waited for its queued kernel ({took:?})"
    );
    assert!(took < Duration::from_millis(500), "the drop took {took:?}");
    let (busy, decoys) = reload_while_held(&s, old, 8);
    eprintln!("drop took {took:?}; {busy} of 8 loads made while the stream was held");
    s.synchronize().unwrap();
    assert_same(
        "read by the dropped module's kernel",
        &out.to_vec().unwrap(),
        &vals,
    );
    drop(decoys);
    dev.synchronize().unwrap();
    let errors = dev.take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

/// As [`module_drop_leaves_its_queued_kernel_loaded_and_does_not_wait`], for a library and a
/// kernel of it launched through the library's handle (`cudaLibrary_t`, `cudaKernel_t`).
fn library_drop_leaves_its_queued_kernel_loaded_and_does_not_wait() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut vals = [0i32; N];
    vals.iter_mut().for_each(|v| *v = r.i32(..));
    let mut out = DeviceBuffer::<i32>::new(N).unwrap();
    out.fill(-1).unwrap();
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("gather_table").unwrap();
    let table: Symbol<[i32; N]> = lib.global("table").unwrap();
    table.copy_from_host(&vals).unwrap();
    let old = table.as_raw();
    drop(table);
    stall(&s, hold_ms());
    // SAFETY: gather_table(int* out, size_t n) writes out[i] for i < n only.
    unsafe {
        k.launch(
            &s,
            &LaunchConfig::for_elements(N, 128).unwrap(),
            &kernel_args![&mut out, N],
        )
    }
    .unwrap();
    assert!(
        !s.query().unwrap(),
        "the setup outlasted the hold: nothing left to check"
    );
    drop(k);
    let t0 = Instant::now();
    drop(lib);
    let took = t0.elapsed();
    assert!(
        !s.query().unwrap(),
        "the library's drop waited for its queued kernel ({took:?})"
    );
    assert!(took < Duration::from_millis(500), "the drop took {took:?}");
    let mut busy = 0;
    let mut decoys = Vec::new();
    for i in 0..8 {
        let l = Library::from_ptx(PTX).unwrap();
        let t: Symbol<[i32; N]> = l.global("table").unwrap();
        let held = !s.query().unwrap();
        assert!(
            !(held && t.as_raw() == old),
            "load {i}: a new library's variable got the address {old:#x} of the dropped \
             library's while its kernel was still queued"
        );
        busy += held as usize;
        drop(t);
        decoys.push(l);
    }
    eprintln!("drop took {took:?}; {busy} of 8 loads made while the stream was held");
    s.synchronize().unwrap();
    assert_same(
        "read by the dropped library's kernel",
        &out.to_vec().unwrap(),
        &vals,
    );
    drop(decoys);
    dev.synchronize().unwrap();
    let errors = dev.take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

/// A copy from page-locked memory into a module variable queued behind a held stream, and a
/// copy of the variable back into page-locked memory after it; the symbol and the module are
/// dropped, and the same module is loaded again repeatedly while the stream is held. No new
/// module may get the variable's address before the copies ran, and the copy back reads the
/// first copy's values.
fn module_stays_loaded_for_a_queued_copy_into_its_variable() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let vals: Vec<i32> = (0..N).map(|_| r.i32(..)).collect();
    let src = PinnedBuffer::from_slice(&vals).unwrap();
    let mut back = PinnedBuffer::<i32>::new(N).unwrap();
    back.as_mut_slice().unwrap().fill(-7);
    let m = Module::from_ptx(PTX).unwrap();
    let table: Symbol<[i32; N]> = m.global("table").unwrap();
    table.copy_from_host(&[0; N]).unwrap();
    let old = table.as_raw();
    stall(&s, hold_ms());
    // Two chunks of the page-locked buffer, into the two halves of the variable.
    let half = N / 2;
    table
        .copy_from_pinned_at_async(0, &src.slice(..half).unwrap(), &s)
        .unwrap();
    table
        .copy_from_pinned_at_async(half, &src.slice(half..).unwrap(), &s)
        .unwrap();
    table.copy_to_pinned_at_async(0, &mut back, &s).unwrap();
    assert!(
        !s.query().unwrap(),
        "the setup outlasted the hold: nothing left to check"
    );
    drop(table);
    drop(m);
    let (busy, decoys) = reload_while_held(&s, old, 16);
    eprintln!("{busy} of 16 loads made while the stream was held");
    // Reading the page-locked destination waits for the copy back.
    assert_same(
        "the dropped module's variable, copied back",
        &back.as_slice().unwrap(),
        &vals,
    );
    drop(decoys);
    drop(src);
    dev.synchronize().unwrap();
    let errors = dev.take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}
