//! Two devices: peer access, peer copies, cross-device events. Ignored with fewer than two GPUs.

use crate::common::{assert_same, random_u32, rng};
use cuda_runtime::{Device, DeviceBuffer, ErrorCode, Event, Stream, StreamFlags};

crate::tests![; two_gpus: peer_access_rules_and_copies, cross_device_event_wait];

fn peer_access_rules_and_copies() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    let can = d0.can_access_peer(d1).unwrap();
    eprintln!("device 0 can access device 1: {can}");
    if can {
        d0.enable_peer_access(d1).unwrap();
        let e = d0.enable_peer_access(d1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::PeerAccessAlreadyEnabled, "{e}");
        d0.disable_peer_access(d1).unwrap();
        let e = d0.disable_peer_access(d1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::PeerAccessNotEnabled, "{e}");
        d0.enable_peer_access(d1).unwrap();
    }
    let e = d0.enable_peer_access(d0).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidDevice, "{e}");
    let mut r = rng();
    let n = (3 << 20) + 5;
    let data = random_u32(&mut r, n);
    d0.set_current().unwrap();
    let a = DeviceBuffer::from_slice(&data).unwrap();
    d1.set_current().unwrap();
    let mut b = DeviceBuffer::<u32>::new(n).unwrap();
    b.memset_u32(0xFFFF_FFFF).unwrap();
    // Synchronous peer copy, device 0 -> device 1 (cudaMemcpyPeer).
    b.copy_from_device(&a).unwrap();
    assert_same("peer copy 0 -> 1", &b.to_vec().unwrap(), &data);
    // On a stream of device 0, device 1 -> device 0, into a sub-range.
    d0.set_current().unwrap();
    let s0 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut c = DeviceBuffer::<u32>::zeroed(n).unwrap();
    c.slice_mut(100..n)
        .unwrap()
        .copy_from_device_async(&b.slice(0..n - 100).unwrap(), &s0)
        .unwrap();
    // Drop the source on device 1 right away: its drop waits for device 0's copy.
    drop(b);
    s0.synchronize().unwrap();
    let got = c.to_vec().unwrap();
    assert!(got[..100].iter().all(|&x| x == 0));
    assert_same(
        "peer copy 1 -> 0 on a stream",
        &got[100..],
        &data[..n - 100],
    );
    if can {
        d0.disable_peer_access(d1).unwrap();
    }
}

fn cross_device_event_wait() {
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    d0.set_current().unwrap();
    let s0 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut stamps = DeviceBuffer::<u64>::zeroed(2).unwrap();
    cuda_runtime::kernels::spin::spin(
        &s0,
        &cuda_runtime::LaunchConfig::new(1u32, 1u32),
        &mut stamps,
        50_000_000,
        0,
    )
    .unwrap();
    let ev = Event::new().unwrap();
    ev.record(&s0).unwrap();
    d1.set_current().unwrap();
    let s1 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    s1.wait_event(&ev).unwrap();
    let mark = Event::new().unwrap();
    mark.record(&s1).unwrap();
    mark.synchronize().unwrap();
    // Device 1's stream could only pass the wait once device 0's kernel finished.
    assert!(
        ev.query().unwrap(),
        "device 1 passed the wait before device 0's event"
    );
    d0.set_current().unwrap();
    let st = stamps.to_vec().unwrap();
    assert!(st[1] > st[0] && st[1] - st[0] >= 50_000_000, "{st:?}");
}
