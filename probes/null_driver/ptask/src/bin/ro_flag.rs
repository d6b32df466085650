// Review rev-f15: `HostRegistration::with` given `HostRegisterFlags::READ_ONLY` registered the
// slice read-only with the driver but marked the registration writable (only `with_read_only`
// set the crate's flag), so copies into it and kernels writing it passed the crate's check and
// reached the driver: a DMA or kernel write into memory the device maps read-only (a fault, or
// a write that silently does not happen). Now the flag decides, whichever call asked for it.
use cuda_runtime::{DeviceBuffer, HostAccess, HostRegisterFlags, HostRegistration, Stream};

use ptask::{finish, violations};

fn main() {
    let s = Stream::new().unwrap();
    let before = violations();
    let d = DeviceBuffer::<u32>::zeroed(64).unwrap();
    let mut host = vec![5u32; 64];
    let mut bad = 0;
    let r = HostRegistration::with(&mut host, HostRegisterFlags::READ_ONLY, |reg| {
        let copy = d.copy_to_pinned_async(reg, &s);
        println!(
            "copy into a READ_ONLY registration: {:?}",
            copy.as_ref().map(|_| ())
        );
        let part = reg
            .slice_mut(..8)
            .and_then(|mut v| d.slice(..8)?.copy_to_pinned_async(&mut v, &s));
        println!("copy into part of it: {:?}", part.as_ref().map(|_| ()));
        // The CPU may still write it (the slice is borrowed exclusively; read-only is the
        // device's side).
        let view = reg.as_mut_slice().map(|mut v| v[0] = 9);
        println!("CPU write view: {view:?}");
        let hview = HostAccess::as_mut_slice(reg).map(|_| ());
        [copy.is_ok(), part.is_ok(), view.is_err(), hview.is_err()]
    })
    .unwrap();
    for (what, wrong) in [
        "copy accepted",
        "partial copy accepted",
        "as_mut_slice refused",
        "HostAccess::as_mut_slice refused",
    ]
    .iter()
    .zip(r)
    {
        if wrong {
            println!("BAD: {what} (a READ_ONLY registration)");
            bad += 1;
        }
    }
    if host[0] != 9 {
        println!("BAD: the CPU write did not land");
        bad += 1;
    }
    // Reads from it still work.
    let mut d2 = DeviceBuffer::<u32>::zeroed(64).unwrap();
    HostRegistration::with(&mut host, HostRegisterFlags::READ_ONLY, |reg| {
        d2.copy_from_pinned_async(reg, &s)
    })
    .unwrap()
    .unwrap();
    finish(bad, before);
}
