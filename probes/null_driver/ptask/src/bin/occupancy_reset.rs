// Review rev-d15: `Function::max_potential_block_size` called the caller's dynamic shared memory
// closure (safe code) while it held the crate's entry of the device. A device reset made from the
// closure was not excluded by that entry (a reset waits for other threads' entries, not its own
// thread's), so it ran under the search, which went on asking the driver about the reset
// context's function: a freed driver handle, in a context no longer current. The closure must run
// outside the entry, and the search must then report the reset (ContextDestroyed), with no
// null-driver violation.
use std::cell::Cell;

use cuda_runtime::{Device, Error, Module};

use ptask::violations;

const PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n";

fn main() {
    let dev = Device::current().unwrap();
    let before = violations();
    let mut bad = 0;

    // A closure that resets the device on its first call.
    let m = Module::from_ptx(PTX).unwrap();
    let f = m.function("k").unwrap();
    let calls = Cell::new(0u32);
    let r = f.max_potential_block_size(
        |b| {
            if calls.replace(calls.get() + 1) == 0 {
                dev.reset().unwrap();
            }
            b as usize * 4
        },
        0,
    );
    println!(
        "reset in the closure: {r:?} after {} calls of the closure",
        calls.get()
    );
    if !matches!(r, Err(Error::ContextDestroyed { .. })) {
        bad += 1;
    }

    // A closure that calls the crate (no reset): the search works as before.
    let m = Module::from_ptx(PTX).unwrap();
    let f = m.function("k").unwrap();
    let r = f.max_potential_block_size(
        |b| {
            let _ = f.attributes().unwrap();
            b as usize
        },
        0,
    );
    println!("crate calls in the closure: {r:?}");
    if r.is_err() {
        bad += 1;
    }

    let v = violations() - before;
    println!("null-driver violations: {v}");
    if bad > 0 || v > 0 {
        println!("FAILED: {bad} unexpected results");
        std::process::exit(1);
    }
    println!("ok");
}
