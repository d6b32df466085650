//! What the scenarios share: the null driver's count of protocol violations.

extern "C" {
    fn dlopen(n: *const std::ffi::c_char, f: i32) -> *mut std::ffi::c_void;
    fn dlsym(h: *mut std::ffi::c_void, s: *const std::ffi::c_char) -> *mut std::ffi::c_void;
}

/// `nulldrv_violations()` of the loaded null driver (`libcuda.so.1`).
pub fn violations() -> u64 {
    // SAFETY: the null driver is loaded (the crate loaded it) and exports
    // `uint64_t nulldrv_violations(void)`; RTLD_LAZY | RTLD_NOLOAD only finds it.
    unsafe {
        let lib = std::ffi::CString::new("libcuda.so.1").unwrap();
        let sym = std::ffi::CString::new("nulldrv_violations").unwrap();
        let f = dlsym(dlopen(lib.as_ptr(), 1 | 4), sym.as_ptr());
        assert!(!f.is_null(), "not running against the null driver");
        let f: extern "C" fn() -> u64 = std::mem::transmute(f);
        f()
    }
}

/// A `uint64_t name(void)` counter of the loaded null driver (e.g. `nulldrv_tex_destroys`).
pub fn count(name: &str) -> u64 {
    // SAFETY: as in `violations`: the null driver is loaded and exports the counter.
    unsafe {
        let lib = std::ffi::CString::new("libcuda.so.1").unwrap();
        let sym = std::ffi::CString::new(name).unwrap();
        let f = dlsym(dlopen(lib.as_ptr(), 1 | 4), sym.as_ptr());
        assert!(
            !f.is_null(),
            "not running against the null driver: no {name}"
        );
        let f: extern "C" fn() -> u64 = std::mem::transmute(f);
        f()
    }
}

/// Ends a scenario: prints the null driver's violations since `before`, and exits with 1 and
/// `FAILED` when there were any or `bad` checks failed, else prints `ok`.
pub fn finish(bad: u32, before: u64) {
    let v = violations() - before;
    println!("null-driver violations: {v}");
    if bad > 0 || v > 0 {
        println!("FAILED");
        std::process::exit(1);
    }
    println!("ok");
}
