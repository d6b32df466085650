//! Libraries (`cudaLibraryLoadData`, `cudaLibraryGetKernel`, `cudaLibraryGetGlobal`): loaded
//! once, launched on every device, templated kernels by their readable names, resets.

use crate::common::{assert_same, random_f32, random_u32, rng};
use cuda_runtime::{
    device_count, kernel_args, Device, DeviceBuffer, Error, ErrorCode, KernelArg, LaunchConfig,
    Library, Stream,
};

crate::tests![
    one_load_launches_on_every_device,
    templated_kernels_by_readable_and_mangled_names,
    library_launches_check_their_arguments,
    library_globals_per_device,
    kernels_shared_between_threads,
    ;
    exclusive:
    reset_leaves_the_library_working_and_old_handles_failing,
    ;
    two_gpus:
    loaded_on_one_device_launched_on_another,
    reset_of_one_device_leaves_the_other_alone,
];

/// The PTX of `kernels/library.cu` (templates `scale<float>`, `scale<int>`,
/// `lib::add_k<unsigned int, 7>` and `<.., -3>`, `extern "C"` `apply_coeffs` and
/// `gather_table`, globals `float coeffs[4]` and `int table[6976]`).
const PTX: &str = include_str!("kernels/library.ptx");

fn scale_f32(lib: &Library, stream: &Stream, data: &[f32], factor: f32) -> Vec<f32> {
    let k = lib.kernel("scale<float>").unwrap();
    let mut d = DeviceBuffer::from_slice(data).unwrap();
    let cfg = LaunchConfig::for_elements(data.len(), 128).unwrap();
    // SAFETY: scale<float>(float* data, size_t n, float f) touches data[i] for i < n only.
    unsafe { k.launch(stream, &cfg, &kernel_args![&mut d, data.len(), factor]) }.unwrap();
    d.to_vec().unwrap()
}

/// One `Library::from_ptx`, then the same `Kernel` launched on a stream of each device in
/// turn (every device of the machine), results against the CPU.
fn one_load_launches_on_every_device() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("scale<float>").unwrap();
    for d in 0..device_count().unwrap() {
        Device::new(d).unwrap().set_current().unwrap();
        let data = random_f32(&mut r, 5000 + d as usize);
        let f = r.f32() * 4.0 - 2.0;
        let stream = Stream::new().unwrap();
        let mut buf = DeviceBuffer::from_slice(&data).unwrap();
        let cfg = LaunchConfig::new(7u32, 96u32);
        // SAFETY: as in `scale_f32`.
        unsafe { k.launch(&stream, &cfg, &kernel_args![&mut buf, data.len(), f]) }.unwrap();
        let want: Vec<f32> = data.iter().map(|x| x * f).collect();
        assert_same(
            &format!("scale<float> on device {d}"),
            &buf.to_vec().unwrap(),
            &want,
        );
        // The per-device function (attributes) comes from the same kernel.
        let func = k.function().unwrap();
        assert_eq!(func.params().len(), 3);
        assert!(func.attributes().unwrap().max_threads_per_block > 0);
    }
    Device::new(0).unwrap().set_current().unwrap();
}

/// Readable names (with or without the parameter list, any spacing), mangled names and
/// `extern "C"` names find the same kernel; an ambiguous short name and unknown names are
/// errors naming them.
fn templated_kernels_by_readable_and_mangled_names() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let mut names = lib.kernel_names();
    names.sort();
    assert_eq!(
        names,
        [
            "_Z5scaleIfEvPT_mS0_",
            "_Z5scaleIiEvPT_mS0_",
            "_ZN3lib5add_kIjLi7EEEvPKT_PS1_m",
            "_ZN3lib5add_kIjLin3EEEvPKT_PS1_m",
            "apply_coeffs",
            "gather_table"
        ]
    );
    let by_mangled = lib.kernel("_Z5scaleIfEvPT_mS0_").unwrap();
    for name in [
        "scale<float>",
        " scale< float > ",
        "void scale<float>(float*, unsigned long, float)",
        "voidscale<float>(float*,unsignedlong,float)",
    ] {
        let k = lib.kernel(name).unwrap();
        assert_eq!(k.as_raw(), by_mangled.as_raw(), "{name}");
        assert_eq!(k.name(), "_Z5scaleIfEvPT_mS0_");
        assert_eq!(
            k.readable_name(),
            Some("void scale<float>(float*, unsigned long, float)")
        );
    }
    assert_eq!(lib.kernel("apply_coeffs").unwrap().readable_name(), None);
    // Both instantiations of add_k compute what their template arguments say.
    let s = Stream::new().unwrap();
    let data = random_u32(&mut r, 3000);
    let input = DeviceBuffer::from_slice(&data).unwrap();
    for (name, k) in [
        ("lib::add_k<unsigned int, 7>", 7u32),
        ("lib::add_k<unsigned int,-3>", 3u32.wrapping_neg()),
    ] {
        let kern = lib.kernel(name).unwrap();
        let mut out = DeviceBuffer::<u32>::new(data.len()).unwrap();
        out.fill(0xDEAD_BEEF).unwrap();
        let cfg = LaunchConfig::for_elements(data.len(), 256).unwrap();
        // SAFETY: add_k(const T* in, T* out, size_t n) reads in[i], writes out[i], i < n.
        unsafe { kern.launch(&s, &cfg, &kernel_args![&input, &mut out, data.len()]) }.unwrap();
        let want: Vec<u32> = data.iter().map(|x| x.wrapping_add(k)).collect();
        assert_same(name, &out.to_vec().unwrap(), &want);
    }
    // scale<int> is a different kernel from scale<float>.
    let ints: Vec<i32> = (0..1000).map(|_| r.i32(-1000..1000)).collect();
    let mut di = DeviceBuffer::from_slice(&ints).unwrap();
    let ki = lib.kernel("scale<int>").unwrap();
    assert_ne!(ki.as_raw(), by_mangled.as_raw());
    // SAFETY: scale<int>(int*, size_t, int), as above.
    unsafe {
        ki.launch(
            &s,
            &LaunchConfig::for_elements(1000, 64).unwrap(),
            &kernel_args![&mut di, 1000usize, -3i32],
        )
    }
    .unwrap();
    let want: Vec<i32> = ints.iter().map(|x| x * -3).collect();
    assert_same("scale<int>", &di.to_vec().unwrap(), &want);

    match lib.kernel("scale") {
        Err(Error::InvalidValue { value, .. }) => {
            assert!(
                value.contains("scale<float>") && value.contains("scale<int>"),
                "{value}"
            );
        }
        other => panic!("ambiguous short name: {other:?}"),
    }
    for missing in [
        "scale<double>",
        "lib::add_k<unsigned int, 8>",
        "nope",
        "_Z5scaleIdEvPT_mS0_",
    ] {
        match lib.kernel(missing) {
            Err(Error::NotFound { name, .. }) => assert_eq!(name, missing),
            other => panic!("{missing}: {other:?}"),
        }
    }
    let e = lib.kernel("bad\0name").unwrap_err();
    assert!(
        matches!(e, Error::NotFound { .. } | Error::InvalidValue { .. }),
        "{e}"
    );
}

/// Wrong argument counts and sizes are refused before anything is queued: the buffer keeps
/// its contents.
fn library_launches_check_their_arguments() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("scale<float>").unwrap();
    assert_eq!(
        k.params().iter().map(|p| p.size).collect::<Vec<_>>(),
        [8, 8, 4]
    );
    let data = random_f32(&mut r, 100);
    let mut d = DeviceBuffer::from_slice(&data).unwrap();
    let s = Stream::new().unwrap();
    let cfg = LaunchConfig::for_elements(100, 32).unwrap();
    // SAFETY (all three): refused before launching.
    let e = unsafe { k.launch(&s, &cfg, &kernel_args![&mut d, 100usize]) }.unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e}");
    let e = unsafe { k.launch(&s, &cfg, &kernel_args![&mut d, 100u32, 2.0f32]) }.unwrap_err();
    match &e {
        Error::KernelArguments { kernel, detail } => {
            assert_eq!(kernel, "_Z5scaleIfEvPT_mS0_");
            assert!(
                detail.contains("argument 1 is 4 bytes") && detail.contains("8 bytes"),
                "{detail}"
            );
        }
        other => panic!("{other:?}"),
    }
    let e = unsafe {
        k.launch(
            &s,
            &cfg,
            &[KernelArg::from(&mut d), 100usize.into(), 2.0f64.into()],
        )
    }
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    let bad = LaunchConfig::new(1u32, 4096u32);
    let e = unsafe { k.launch(&s, &bad, &kernel_args![&mut d, 100usize, 2.0f32]) }.unwrap_err();
    assert!(matches!(e, Error::InvalidConfiguration { .. }), "{e}");
    assert_same("untouched", &d.to_vec().unwrap(), &data);
}

/// `cudaLibraryGetGlobal`: each device has its own copy of `coeffs`; a kernel reads it.
fn library_globals_per_device() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("apply_coeffs").unwrap();
    for d in 0..device_count().unwrap() {
        Device::new(d).unwrap().set_current().unwrap();
        let c: [f32; 4] = [r.f32() + 1.0, -r.f32(), 3.0 * r.f32(), 0.5];
        let g = lib.global::<[f32; 4]>("coeffs").unwrap();
        g.copy_from_host(&c).unwrap();
        assert_eq!(g.copy_to_host().unwrap(), c);
        let data = random_f32(&mut r, 999);
        let mut buf = DeviceBuffer::from_slice(&data).unwrap();
        let s = Stream::new().unwrap();
        // SAFETY: apply_coeffs(float* d, size_t n) touches d[i] for i < n.
        unsafe {
            k.launch(
                &s,
                &LaunchConfig::for_elements(999, 128).unwrap(),
                &kernel_args![&mut buf, 999usize],
            )
        }
        .unwrap();
        let want: Vec<f32> = data.iter().enumerate().map(|(i, x)| x * c[i % 4]).collect();
        assert_same("apply_coeffs", &buf.to_vec().unwrap(), &want);
    }
    Device::new(0).unwrap().set_current().unwrap();
    match lib.global::<[f32; 3]>("coeffs") {
        Err(Error::SymbolSize {
            symbol_size: 16,
            host_size: 12,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        lib.global::<f32>("nope"),
        Err(Error::NotFound { .. })
    ));
}

/// One kernel launched from eight threads at once (each resolving it in its own stream's
/// context); the library dropped by the main thread while the others still hold kernels.
fn kernels_shared_between_threads() {
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("scale<float>").unwrap();
    drop(lib);
    std::thread::scope(|sc| {
        for t in 0..8 {
            let k = k.clone();
            sc.spawn(move || {
                let mut r = fastrand::Rng::with_seed(t);
                let data = random_f32(&mut r, 2048);
                let s = Stream::new().unwrap();
                let mut d = DeviceBuffer::from_slice(&data).unwrap();
                for _ in 0..20 {
                    // SAFETY: as in `scale_f32`.
                    unsafe {
                        k.launch(
                            &s,
                            &LaunchConfig::for_elements(2048, 256).unwrap(),
                            &kernel_args![&mut d, 2048usize, 2.0f32],
                        )
                    }
                    .unwrap();
                }
                let want: Vec<f32> = data.iter().map(|x| x * 1_048_576.0).collect();
                assert_same("twenty doublings", &d.to_vec().unwrap(), &want);
            });
        }
    });
}

/// After a reset of the device: functions and symbols taken before fail with
/// `ContextDestroyed`; the library and its kernels work on the fresh context.
fn reset_leaves_the_library_working_and_old_handles_failing() {
    let mut r = rng();
    let dev = Device::new(0).unwrap();
    dev.set_current().unwrap();
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("scale<float>").unwrap();
    let s = Stream::new().unwrap();
    let data = random_f32(&mut r, 500);
    assert_same(
        "before",
        &scale_f32(&lib, &s, &data, 3.0),
        &data.iter().map(|x| x * 3.0).collect::<Vec<_>>(),
    );
    let func = k.function().unwrap();
    let sym = lib.global::<[f32; 4]>("coeffs").unwrap();
    drop(s);
    dev.reset().unwrap();
    assert!(matches!(
        func.attributes(),
        Err(Error::ContextDestroyed { .. })
    ));
    assert!(matches!(
        sym.copy_to_host(),
        Err(Error::ContextDestroyed { .. })
    ));
    // The same kernel and library on the new context.
    let s = Stream::new().unwrap();
    let want: Vec<f32> = data.iter().map(|x| x * -0.5).collect();
    assert_same("after the reset", &scale_f32(&lib, &s, &data, -0.5), &want);
    let mut d = DeviceBuffer::from_slice(&data).unwrap();
    // SAFETY: as in `scale_f32`.
    unsafe {
        k.launch(
            &s,
            &LaunchConfig::for_elements(500, 64).unwrap(),
            &kernel_args![&mut d, 500usize, 4.0f32],
        )
    }
    .unwrap();
    assert_same(
        "old kernel handle after the reset",
        &d.to_vec().unwrap(),
        &data.iter().map(|x| x * 4.0).collect::<Vec<_>>(),
    );
    let sym2 = lib.global::<[f32; 4]>("coeffs").unwrap();
    sym2.copy_from_host(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(sym2.copy_to_host().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert!(k.function().unwrap().attributes().is_ok());
}

/// Loaded while device 0 is current, launched on device 1 (and on 0 again), results checked.
fn loaded_on_one_device_launched_on_another() {
    let mut r = rng();
    Device::new(0).unwrap().set_current().unwrap();
    let lib = Library::from_ptx(PTX).unwrap();
    Device::new(1).unwrap().set_current().unwrap();
    let s1 = Stream::new().unwrap();
    let data = random_f32(&mut r, 4096);
    assert_same(
        "on device 1",
        &scale_f32(&lib, &s1, &data, 1.5),
        &data.iter().map(|x| x * 1.5).collect::<Vec<_>>(),
    );
    // A kernel given a buffer of the other device is refused, not launched.
    let k = lib.kernel("scale<float>").unwrap();
    Device::new(0).unwrap().set_current().unwrap();
    let mut on0 = DeviceBuffer::from_slice(&data).unwrap();
    // SAFETY: refused before launching.
    let e = unsafe {
        k.launch(
            &s1,
            &LaunchConfig::for_elements(4096, 256).unwrap(),
            &kernel_args![&mut on0, 4096usize, 2.0f32],
        )
    }
    .unwrap_err();
    // The stream is checked first: it is not the current device's (libcudart: invalid
    // resource handle); on the stream's device, the buffer of the other is refused.
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                stream_device: 1,
                current_device: 0,
                ..
            }
        ),
        "{e}"
    );
    Device::new(1).unwrap().set_current().unwrap();
    // SAFETY: refused before launching.
    let e = unsafe {
        k.launch(
            &s1,
            &LaunchConfig::for_elements(4096, 256).unwrap(),
            &kernel_args![&mut on0, 4096usize, 2.0f32],
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch { .. }), "{e}");
    Device::new(0).unwrap().set_current().unwrap();
    let s0 = Stream::new().unwrap();
    assert_same(
        "on device 0",
        &scale_f32(&lib, &s0, &data, 2.0),
        &data.iter().map(|x| x * 2.0).collect::<Vec<_>>(),
    );
}

/// A reset of device 1 leaves device 0's function of the same kernel working, and device 1
/// gets the library again on its fresh context.
fn reset_of_one_device_leaves_the_other_alone() {
    let mut r = rng();
    let lib = Library::from_ptx(PTX).unwrap();
    let k = lib.kernel("scale<float>").unwrap();
    Device::new(0).unwrap().set_current().unwrap();
    let f0 = k.function().unwrap();
    let s0 = Stream::new().unwrap();
    Device::new(1).unwrap().set_current().unwrap();
    let f1 = k.function().unwrap();
    Device::new(1).unwrap().reset().unwrap();
    assert!(matches!(
        f1.attributes(),
        Err(Error::ContextDestroyed { device: 1, .. })
    ));
    assert!(f0.attributes().is_ok());
    let data = random_f32(&mut r, 777);
    let mut d0 = {
        Device::new(0).unwrap().set_current().unwrap();
        DeviceBuffer::from_slice(&data).unwrap()
    };
    // SAFETY: as in `scale_f32`, through the device-0 function.
    unsafe {
        f0.launch(
            &s0,
            &LaunchConfig::for_elements(777, 128).unwrap(),
            &kernel_args![&mut d0, 777usize, 3.0f32],
        )
    }
    .unwrap();
    assert_same(
        "device 0 after device 1's reset",
        &d0.to_vec().unwrap(),
        &data.iter().map(|x| x * 3.0).collect::<Vec<_>>(),
    );
    Device::new(1).unwrap().set_current().unwrap();
    let s1 = Stream::new().unwrap();
    assert_same(
        "device 1 after its reset",
        &scale_f32(&lib, &s1, &data, 0.25),
        &data.iter().map(|x| x * 0.25).collect::<Vec<_>>(),
    );
    Device::new(0).unwrap().set_current().unwrap();
}
