//! Pitched and 3-D memory: allocation, 2-D/3-D copies between host, linear and pitched memory,
//! 3-D memsets, validation.

use crate::common::{assert_same, random_u32, rng};
use cuda_runtime::{
    copy_3d, copy_3d_async, Copy3D, DeviceBuffer, Error, ErrorCode, Extent, HostPitched,
    HostPitchedMut, PitchedBuffer, Pos, Stream,
};

crate::tests![
    pitched_copies_match_a_cpu_model,
    memset_3d_matches_a_cpu_model,
    invalid_regions_are_refused_with_the_runtime_codes,
];

/// The CPU model: copies `e` from `src` (pitch `sp` elements, `sr` rows per slice) at `a` to
/// `dst` (pitch `dp`, `dr` rows) at `b`.
#[allow(clippy::too_many_arguments)]
fn model(
    dst: &mut [u32],
    dp: usize,
    dr: usize,
    b: Pos,
    src: &[u32],
    sp: usize,
    sr: usize,
    a: Pos,
    e: Extent,
) {
    for z in 0..e.depth {
        for y in 0..e.height {
            for x in 0..e.width {
                dst[((b.z + z) * dr + b.y + y) * dp + b.x + x] =
                    src[((a.z + z) * sr + a.y + y) * sp + a.x + x];
            }
        }
    }
}

fn pitched_copies_match_a_cpu_model() {
    let mut r = rng();
    // A blocking stream: it orders after the memsets issued on the legacy stream below.
    let s = Stream::new().unwrap();
    for round in 0..12 {
        let full = Extent::new(r.usize(1..300), r.usize(1..40), r.usize(1..6));
        let mut img = PitchedBuffer::<u32>::new_3d(full).unwrap();
        assert!(img.pitch() >= full.width * 4 && img.pitch().is_multiple_of(4));
        assert_eq!(img.extent(), full);
        // Host source with its own pitch.
        let hp = full.width + r.usize(0..20);
        let host = random_u32(&mut r, hp * full.height * full.depth);
        let whole = Copy3D::new(full);
        copy_3d(
            &mut img,
            &HostPitched::new(&host, hp, full.height).unwrap(),
            &whole,
        )
        .unwrap();
        // A random sub-region: pitched -> linear (as pitched) on a stream.
        let e = Extent::new(
            r.usize(1..=full.width),
            r.usize(1..=full.height),
            r.usize(1..=full.depth),
        );
        let a = Pos::new(
            r.usize(0..=full.width - e.width),
            r.usize(0..=full.height - e.height),
            r.usize(0..=full.depth - e.depth),
        );
        let (lp, lr) = (e.width + r.usize(0..9), e.height + r.usize(0..3));
        let lz = e.depth;
        let b = Pos::new(r.usize(0..=lp - e.width), r.usize(0..=lr - e.height), 0);
        let mut lin = DeviceBuffer::<u32>::new(lp * lr * lz).unwrap();
        let poison = 0xDEAD_0000 + round;
        lin.memset_u32(poison).unwrap();
        let region = Copy3D::new(e).src_pos(a).dst_pos(b);
        copy_3d_async(&mut lin.as_pitched(lp, lr).unwrap(), &img, &region, &s).unwrap();
        let mut want = vec![poison; lp * lr * lz];
        model(&mut want, lp, lr, b, &host, hp, full.height, a, e);
        s.synchronize().unwrap();
        assert_same(
            &format!("round {round}: pitched -> linear"),
            &lin.to_vec().unwrap(),
            &want,
        );
        // Linear -> host with yet another pitch, synchronously.
        let (op, or) = (e.width + r.usize(0..5), e.height);
        let mut out = vec![1u32; op * or * e.depth];
        let back = Copy3D::new(e).src_pos(b);
        copy_3d(
            &mut HostPitchedMut::new(&mut out, op, or).unwrap(),
            &lin.as_pitched(lp, lr).unwrap(),
            &back,
        )
        .unwrap();
        let mut want2 = vec![1u32; op * or * e.depth];
        model(&mut want2, op, or, Pos::default(), &want, lp, lr, b, e);
        assert_same(&format!("round {round}: linear -> host"), &out, &want2);
        // 2-D: pitched -> pitched (device to device) then back to the host whole.
        let mut img2 = PitchedBuffer::<u32>::new_2d(full.width, full.height).unwrap();
        img2.memset(0).unwrap();
        let e2 = Extent::d2(e.width, e.height);
        copy_3d(
            &mut img2,
            &img,
            &Copy3D::new(e2).src_pos(Pos::new(a.x, a.y, a.z)),
        )
        .unwrap();
        let mut got = vec![7u32; full.width * full.height];
        copy_3d(
            &mut HostPitchedMut::new(&mut got, full.width, full.height).unwrap(),
            &img2,
            &Copy3D::new(Extent::d2(full.width, full.height)),
        )
        .unwrap();
        let mut want3 = vec![0u32; full.width * full.height];
        model(
            &mut want3,
            full.width,
            full.height,
            Pos::default(),
            &host,
            hp,
            full.height,
            a,
            e2,
        );
        assert_same(&format!("round {round}: 2-D device copy"), &got, &want3);
    }
}

fn memset_3d_matches_a_cpu_model() {
    let mut r = rng();
    for _ in 0..8 {
        let full = Extent::new(r.usize(1..200), r.usize(1..30), r.usize(1..5));
        let mut img = PitchedBuffer::<u8>::new_3d(full).unwrap();
        let host: Vec<u8> = (0..full.count().unwrap()).map(|_| r.u8(..)).collect();
        copy_3d(
            &mut img,
            &HostPitched::new(&host, full.width, full.height).unwrap(),
            &Copy3D::new(full),
        )
        .unwrap();
        let e = Extent::new(
            r.usize(1..=full.width),
            r.usize(1..=full.height),
            r.usize(1..=full.depth),
        );
        let p = Pos::new(
            r.usize(0..=full.width - e.width),
            r.usize(0..=full.height - e.height),
            r.usize(0..=full.depth - e.depth),
        );
        let v = r.u8(..);
        img.memset_region(v, p, e).unwrap();
        let mut want = host.clone();
        for z in 0..e.depth {
            for y in 0..e.height {
                for x in 0..e.width {
                    want[((p.z + z) * full.height + p.y + y) * full.width + p.x + x] = v;
                }
            }
        }
        let mut got = vec![0u8; host.len()];
        copy_3d(
            &mut HostPitchedMut::new(&mut got, full.width, full.height).unwrap(),
            &img,
            &Copy3D::new(full),
        )
        .unwrap();
        assert_same("memset 3-D", &got, &want);
    }
}

fn invalid_regions_are_refused_with_the_runtime_codes() {
    let mut img = PitchedBuffer::<f32>::new_2d(100, 10).unwrap();
    let pitch_elems = img.pitch() / 4;
    let host = vec![0f32; (pitch_elems + 1) * 10];
    // A row wider than the destination's pitch.
    let e = copy_3d(
        &mut img,
        &HostPitched::new(&host, pitch_elems + 1, 10).unwrap(),
        &Copy3D::new(Extent::d2(pitch_elems + 1, 1)),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidPitch { .. }), "{e}");
    assert_eq!(e.code(), ErrorCode::InvalidPitchValue);
    // A row that fits the pitch but starts too far right.
    let e = copy_3d(
        &mut img,
        &HostPitched::new(&host, pitch_elems + 1, 10).unwrap(),
        &Copy3D::new(Extent::d2(10, 1)).dst_pos(Pos::new(pitch_elems - 5, 0, 0)),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidPitchValue, "{e}");
    // Past the last row of the allocation.
    let e = copy_3d(
        &mut img,
        &HostPitched::new(&host, pitch_elems + 1, 10).unwrap(),
        &Copy3D::new(Extent::d2(10, 2)).dst_pos(Pos::new(0, 9, 0)),
    )
    .unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    assert_eq!(e.code(), ErrorCode::InvalidValue);
    // A host side too short for the region.
    let e = copy_3d(
        &mut img,
        &HostPitched::new(&host[..50], 100, 10).unwrap(),
        &Copy3D::new(Extent::d2(100, 1)),
    )
    .unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    assert!(PitchedBuffer::<u8>::new_3d(Extent::new(0, 1, 1)).is_err());
    assert!(HostPitched::new(&host, 0, 1).is_err());
    assert!(img
        .memset_region(0, Pos::new(0, 0, 1), Extent::d2(1, 1))
        .is_err());
}
