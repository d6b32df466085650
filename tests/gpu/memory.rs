//! Device memory: allocation, views, copies, memsets, fills.

use crate::common::{assert_same, random_bytes, random_f32, random_u32, rng};
use cuda_runtime::{DeviceBuffer, Error, ErrorCode, Stream, StreamFlags};

crate::tests![
    round_trip_random_lengths,
    length_mismatch_is_an_error_with_both_lengths,
    views_copy_into_sub_ranges,
    out_of_range_view_is_an_error,
    memsets_match_a_cpu_model,
    typed_fill_any_element_size,
    device_to_device_sync_and_async,
    stream_ordered_allocation,
    zeroed_is_zero_and_poisoned_buffers_are_overwritten,
];

fn round_trip_random_lengths() {
    let mut r = rng();
    for n in [0usize, 1, 3, 1000, 65_537, 1 << 20] {
        let host = random_f32(&mut r, n);
        let dev = DeviceBuffer::from_slice(&host).unwrap();
        assert_eq!(dev.len(), n);
        let mut back = vec![f32::NAN; n];
        dev.copy_to_host(&mut back).unwrap();
        assert_same("f32 round trip", &back, &host);
        let bytes = random_bytes(&mut r, n + 7);
        let d = DeviceBuffer::from_slice(&bytes).unwrap();
        assert_same("byte round trip", &d.to_vec().unwrap(), &bytes);
    }
}

fn length_mismatch_is_an_error_with_both_lengths() {
    let mut r = rng();
    let mut dev = DeviceBuffer::<u32>::new(10).unwrap();
    let e = dev.copy_from_host(&random_u32(&mut r, 12)).unwrap_err();
    assert_eq!(
        e,
        Error::LengthMismatch {
            what: "cudaMemcpy (host to device)",
            expected: 10,
            actual: 12
        }
    );
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    let mut small = vec![0u32; 9];
    let e = dev.copy_to_host(&mut small).unwrap_err();
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
}

fn views_copy_into_sub_ranges() {
    let mut r = rng();
    let n = 4096;
    let mut model = random_u32(&mut r, n);
    let mut dev = DeviceBuffer::from_slice(&model).unwrap();
    for _ in 0..20 {
        let a = r.usize(0..n);
        let b = r.usize(a..=n);
        let patch = random_u32(&mut r, b - a);
        dev.slice_mut(a..b).unwrap().copy_from_host(&patch).unwrap();
        model[a..b].copy_from_slice(&patch);
        let c = r.usize(0..n);
        let d = r.usize(c..=n);
        let got = dev.slice(c..d).unwrap().to_vec().unwrap();
        assert_same("view read", &got, &model[c..d]);
    }
    assert_same("whole buffer", &dev.to_vec().unwrap(), &model);
    // Nested views.
    let v = dev.slice(100..200).unwrap();
    let w = v.slice(10..20).unwrap();
    assert_same("nested view", &w.to_vec().unwrap(), &model[110..120]);
}

fn out_of_range_view_is_an_error() {
    let dev = DeviceBuffer::<f32>::new(100).unwrap();
    let e = dev.slice(50..101).unwrap_err();
    assert_eq!(
        e,
        Error::OutOfRange {
            what: "device buffer view",
            start: 50,
            end: 101,
            len: 100
        }
    );
    #[allow(clippy::reversed_empty_ranges)]
    let e = dev.slice(60..50).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }));
    assert_eq!(
        cuda_runtime::get_last_error().map(|e| e.code()),
        Some(ErrorCode::InvalidValue)
    );
}

fn memsets_match_a_cpu_model() {
    let mut r = rng();
    let n = 10_000;
    let init = random_bytes(&mut r, n);
    let mut dev = DeviceBuffer::from_slice(&init).unwrap();
    let mut model = init.clone();
    let (a, b) = (r.usize(0..n / 2), r.usize(n / 2..n));
    let v = r.u8(..);
    dev.slice_mut(a..b).unwrap().memset_u8(v).unwrap();
    model[a..b].fill(v);
    assert_same("memset_u8", &dev.to_vec().unwrap(), &model);

    let init16: Vec<u16> = (0..n).map(|_| r.u16(..)).collect();
    let mut d16 = DeviceBuffer::from_slice(&init16).unwrap();
    let v16 = r.u16(..);
    d16.memset_u16(v16).unwrap();
    assert_same("memset_u16", &d16.to_vec().unwrap(), &vec![v16; n]);

    let init32 = random_u32(&mut r, n);
    let mut d32 = DeviceBuffer::from_slice(&init32).unwrap();
    let v32 = r.u32(..);
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    d32.slice_mut(7..n - 3)
        .unwrap()
        .memset_u32_async(v32, &s)
        .unwrap();
    s.synchronize().unwrap();
    let mut m32 = init32.clone();
    m32[7..n - 3].fill(v32);
    assert_same("memset_u32_async", &d32.to_vec().unwrap(), &m32);

    // A 32-bit pattern on memory not aligned to 4 bytes is refused, not truncated.
    let e = dev.slice_mut(1..9).unwrap().memset_u32(1).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    assert_same("untouched after refusal", &dev.to_vec().unwrap(), &model);
}

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Vec3 {
    x: f32,
    y: f32,
    z: f32,
}

fn typed_fill_any_element_size() {
    let mut r = rng();
    let n = 3001;
    let v = Vec3 {
        x: r.f32(),
        y: r.f32() + 1.0,
        z: -r.f32(),
    };
    let mut d = DeviceBuffer::from_slice(&vec![
        Vec3 {
            x: 9.0,
            y: 9.0,
            z: 9.0
        };
        n
    ])
    .unwrap();
    d.fill(v).unwrap();
    assert_same("fill Vec3", &d.to_vec().unwrap(), &vec![v; n]);

    let w = r.u64(..);
    let mut d64 = DeviceBuffer::from_slice(&vec![1u64; n]).unwrap();
    d64.slice_mut(5..n).unwrap().fill(w).unwrap();
    let mut m = vec![1u64; n];
    m[5..].fill(w);
    assert_same("fill u64", &d64.to_vec().unwrap(), &m);

    let t = [r.u8(..), r.u8(..), r.u8(..)];
    let mut d3 = DeviceBuffer::from_slice(&vec![[0u8; 3]; n]).unwrap();
    d3.fill(t).unwrap();
    assert_same("fill [u8; 3]", &d3.to_vec().unwrap(), &vec![t; n]);

    let h = r.u16(..);
    let mut dh = DeviceBuffer::from_slice(&vec![[0u16; 3]; n]).unwrap();
    dh.fill([h, h.wrapping_add(1), h.wrapping_add(2)]).unwrap();
    assert_same(
        "fill [u16; 3]",
        &dh.to_vec().unwrap(),
        &vec![[h, h.wrapping_add(1), h.wrapping_add(2)]; n],
    );
}

fn device_to_device_sync_and_async() {
    let mut r = rng();
    let n = 1 << 18;
    let src_h = random_f32(&mut r, n);
    let src = DeviceBuffer::from_slice(&src_h).unwrap();
    let mut dst = DeviceBuffer::<f32>::new(n).unwrap();
    dst.fill(f32::NAN).unwrap();
    dst.copy_from_device(&src).unwrap();
    assert_same("d2d", &dst.to_vec().unwrap(), &src_h);
    let s = Stream::new().unwrap();
    let mut dst2 = DeviceBuffer::<f32>::new(n / 2).unwrap();
    dst2.copy_from_device_async(&src.slice(n / 2..).unwrap(), &s)
        .unwrap();
    s.synchronize().unwrap();
    assert_same("d2d async view", &dst2.to_vec().unwrap(), &src_h[n / 2..]);
    let e = dst2.copy_from_device(&src).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }));
}

fn stream_ordered_allocation() {
    let mut r = rng();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    for n in [1usize, 1000, 1 << 20] {
        let host = random_u32(&mut r, n);
        let mut d = DeviceBuffer::<u32>::new_async(n, &s).unwrap();
        assert_eq!(d.stream(), Some(&s));
        d.copy_from_host_async(&host, &s).unwrap();
        let mut back = vec![0u32; n];
        d.copy_to_host_async(&mut back, &s).unwrap();
        assert_same("async alloc round trip", &back, &host);
        let z = DeviceBuffer::<u32>::zeroed_async(n, &s).unwrap();
        let mut zb = vec![1u32; n];
        z.copy_to_host_async(&mut zb, &s).unwrap();
        assert!(zb.iter().all(|&x| x == 0));
    }
    s.synchronize().unwrap();
    // The per-thread default stream is a different stream on each thread that uses or drops
    // the buffer: refused. The legacy default stream is one stream for all threads.
    let e = DeviceBuffer::<u32>::new_async(16, &Stream::per_thread().unwrap()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue, "{e}");
    assert!(e.to_string().contains("per-thread"), "{e}");
    let legacy = Stream::legacy().unwrap();
    let host = random_u32(&mut r, 4099);
    let d = DeviceBuffer::from_slice(&host).unwrap();
    let mut l = DeviceBuffer::<u32>::new_async(host.len(), &legacy).unwrap();
    l.copy_from_device_async(&d, &legacy).unwrap();
    let got = std::thread::scope(|t| t.spawn(|| l.to_vec().unwrap()).join().unwrap());
    assert_same(
        "legacy-stream allocation used on another thread",
        &got,
        &host,
    );
}

fn zeroed_is_zero_and_poisoned_buffers_are_overwritten() {
    let mut r = rng();
    let z = DeviceBuffer::<f64>::zeroed(12345).unwrap();
    assert!(z.to_vec().unwrap().iter().all(|&x| x == 0.0));
    let host = random_u32(&mut r, 777);
    let mut d = DeviceBuffer::<u32>::new(777).unwrap();
    d.fill(0xDEAD_BEEF).unwrap();
    d.copy_from_host(&host).unwrap();
    assert_same("overwrite poison", &d.to_vec().unwrap(), &host);
}
