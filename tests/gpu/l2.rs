//! L2 persistence: access policy windows on streams (set, read back, restored by the guard,
//! copied between streams, refused when invalid), the persisting set-aside and its reset, and
//! kernels under a window computing what they compute without one.

use crate::common::{assert_same, random_f32, rng};
use cuda_runtime::{
    kernels, AccessPolicyWindow, AccessProperty, Device, DeviceAttribute, DeviceBuffer, Error,
    LaunchConfig, Limit, Stream,
};

crate::tests![
    windows_read_back_and_the_guard_restores_the_previous_one,
    invalid_windows_are_refused_with_their_values,
    ;
    exclusive:
    persisting_set_aside_and_reset,
];

fn windows_read_back_and_the_guard_restores_the_previous_one() {
    let dev = Device::current().unwrap();
    let buf = DeviceBuffer::<f32>::zeroed(1 << 16).unwrap();
    let s = Stream::new().unwrap();
    let before = s.access_policy_window().unwrap();
    let w = AccessPolicyWindow::over(
        &buf,
        0.5,
        AccessProperty::Persisting,
        AccessProperty::Streaming,
    );
    {
        let _g = s.set_access_policy_window(&w).unwrap();
        let got = s.access_policy_window().unwrap();
        assert_eq!(got, w, "the window read back");
        // Copied to another stream.
        let s2 = Stream::new().unwrap();
        s2.copy_attributes_from(&s).unwrap();
        assert_eq!(s2.access_policy_window().unwrap(), w, "the copied window");
    }
    assert_eq!(
        s.access_policy_window().unwrap(),
        before,
        "restored by the guard"
    );
    // `keep` keeps it.
    s.set_access_policy_window(&w).unwrap().keep();
    assert_eq!(s.access_policy_window().unwrap(), w, "kept");
    s.set_access_policy_window(&AccessPolicyWindow::NONE)
        .unwrap()
        .keep();
    let errors = dev.take_deferred_errors();
    assert!(errors.is_empty(), "{errors:?}");
}

fn invalid_windows_are_refused_with_their_values() {
    let buf = DeviceBuffer::<f32>::zeroed(1024).unwrap();
    let s = Stream::new().unwrap();
    let before = s.access_policy_window().unwrap();
    for ratio in [1.5f32, -0.1, f32::NAN] {
        let w = AccessPolicyWindow::over(
            &buf,
            ratio,
            AccessProperty::Persisting,
            AccessProperty::Normal,
        );
        let e = s.set_access_policy_window(&w).unwrap_err();
        assert!(matches!(e, Error::InvalidValue { .. }), "{ratio}: {e}");
    }
    let max = Device::current()
        .unwrap()
        .attribute(DeviceAttribute::MaxAccessPolicyWindowSize)
        .unwrap() as usize;
    let w = AccessPolicyWindow {
        base: buf.as_raw(),
        num_bytes: max + 1,
        hit_ratio: 1.0,
        hit_prop: AccessProperty::Persisting,
        miss_prop: AccessProperty::Streaming,
    };
    let e = s.set_access_policy_window(&w).unwrap_err();
    assert!(e.to_string().contains(&(max + 1).to_string()), "{e}");
    assert_eq!(s.access_policy_window().unwrap(), before, "nothing was set");
}

fn persisting_set_aside_and_reset() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let max = dev
        .attribute(DeviceAttribute::MaxPersistingL2CacheSize)
        .unwrap() as usize;
    let old = dev.limit(Limit::PersistingL2CacheSize).unwrap();
    dev.set_limit(Limit::PersistingL2CacheSize, max).unwrap();
    assert!(dev.limit(Limit::PersistingL2CacheSize).unwrap() > 0);
    // A kernel under a persisting window computes what it computes without one.
    let (nh, nc) = (r.usize(1..1 << 18), r.usize(1..1 << 22));
    let (hot, cold) = (random_f32(&mut r, nh), random_f32(&mut r, nc));
    let dh = DeviceBuffer::from_slice(&hot).unwrap();
    let dc = DeviceBuffer::from_slice(&cold).unwrap();
    let mut out = DeviceBuffer::<f32>::new(nc).unwrap();
    let s = Stream::new().unwrap();
    let w = AccessPolicyWindow::over(
        &dh,
        1.0,
        AccessProperty::Persisting,
        AccessProperty::Streaming,
    );
    {
        let _g = s.set_access_policy_window(&w).unwrap();
        kernels::l2::hot_cold(
            &s,
            &LaunchConfig::for_elements(nc, 256).unwrap(),
            &dh,
            &dc,
            &mut out,
        )
        .unwrap();
        s.synchronize().unwrap();
    }
    let want: Vec<f32> = (0..nc).map(|i| cold[i] + hot[i % nh]).collect();
    assert_same(
        "hot_cold under a persisting window",
        &out.to_vec().unwrap(),
        &want,
    );
    dev.reset_persisting_l2_cache().unwrap();
    dev.set_limit(Limit::PersistingL2CacheSize, old).unwrap();
}
