//! Calls that fail inside the driver on purpose, each checked against what libcudart returns
//! in the same case (measured with `probes/launch_semantics.cu` and `probes/device_semantics.cu`).
//! Kept apart because compute-sanitizer counts every failing driver call as an error: its runs
//! skip this module (`--skip driver_errors`).

use cuda_runtime::{kernels, Device, Error, ErrorCode, Event, EventFlags, Limit, Module, Stream};

crate::tests![
    event_errors_follow_the_runtime,
    bad_ptx_reports_the_jit_log,
    unknown_names_are_symbol_not_found,
    unsupported_limit,
    ipc_handle_opened_in_its_own_process,
];

fn ipc_handle_opened_in_its_own_process() {
    let b = cuda_runtime::DeviceBuffer::<u32>::zeroed(64).unwrap();
    let h = b.ipc_handle().unwrap();
    // The driver refuses to open a handle in the process that made it
    // (CUDA_ERROR_INVALID_CONTEXT, the runtime's cudaErrorDeviceUninitialized).
    let e = cuda_runtime::DeviceBuffer::<u32>::open_ipc(&h, 64).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DeviceUninitialized, "{e}");
    assert_eq!(e.driver_code(), Some(201));
    // An interprocess event's handle likewise: no second owner of the event here, and the
    // event itself goes on working.
    let ev = Event::with_flags(EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING).unwrap();
    let eh = ev.ipc_handle().unwrap();
    let e = Event::open_ipc(&eh).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DeviceUninitialized, "{e}");
    assert_eq!(e.driver_code(), Some(201));
    let s = Stream::new().unwrap();
    ev.record(&s).unwrap();
    ev.synchronize().unwrap();
    assert!(ev.query().unwrap());
}

fn event_errors_follow_the_runtime() {
    let s = Stream::new().unwrap();
    let e = Event::with_flags(EventFlags::INTERPROCESS).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    let nt = Event::with_flags(EventFlags::DISABLE_TIMING).unwrap();
    let t = Event::new().unwrap();
    nt.record(&s).unwrap();
    t.record(&s).unwrap();
    s.synchronize().unwrap();
    let e = Event::elapsed_time(&nt, &t).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidResourceHandle, "{e}");
    let never = Event::new().unwrap();
    let e = Event::elapsed_time(&t, &never).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidResourceHandle, "{e}");
    let _ = Event::with_flags(EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING).unwrap();
}

fn bad_ptx_reports_the_jit_log() {
    let e = Module::from_ptx(
        ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus; }",
    )
    .unwrap_err();
    match &e {
        Error::ModuleLoad { log, .. } => assert!(!log.is_empty(), "{e}"),
        other => panic!("expected ModuleLoad, got {other}"),
    }
    let e = Module::from_file("/nonexistent/k.ptx").unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
}

fn unknown_names_are_symbol_not_found() {
    let module = Module::from_ptx(crate::launch::USER_PTX).unwrap();
    let e = module.function("nope").unwrap_err();
    assert_eq!(e.code(), ErrorCode::SymbolNotFound);
    assert!(e.to_string().contains("nope"), "{e}");
    let e = kernels::constant_memory::MODULE
        .global::<u32>("nope")
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::SymbolNotFound);
}

fn unsupported_limit() {
    // As libcudart on this device: the sync-depth limit is unsupported (no device runtime
    // linked).
    let e = Device::current()
        .unwrap()
        .limit(Limit::DevRuntimeSyncDepth)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::UnsupportedLimit, "{e}");
}
