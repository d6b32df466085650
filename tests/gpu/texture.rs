//! CUDA arrays, texture and surface objects: formats and shapes through the driver, copies
//! against a CPU model, every kind of fetch against the crate's CPU sampler
//! (`cuda_runtime::texture::cpu`) on fresh random data, surfaces, refusals, and the lifetime of
//! textures and arrays under queued kernels.
//!
//! Precision: point sampling is compared exactly (normalised integer reads within 1e-6, sRGB
//! within 1/256). Linear filtering is compared within 2^-12 of the data's range plus 2/256 per
//! filtered axis, at coordinates whose fraction is a multiple of 1/256 too (the H200 differed
//! from the model there by up to 0.003): the hardware may take another 1/256 step of a weight
//! than the model, an error of up to 1/256 of the neighbours' difference, which is up to 2 for
//! data in [-1, 1].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{assert_same, rng, run_in_child_within};
use cuda_runtime::texture::cpu::{cubemap_direction, CpuTexture};
use cuda_runtime::{
    copy_3d, copy_3d_async, graph::capture::CaptureMode, kernels, AddressMode, Array, ArrayFlags,
    ArrayFormat, ArrayShape, ChannelDesc, Copy3D, Device, DeviceAttribute, DeviceBuffer, Error,
    ErrorCode, Extent, FilterMode, HostPitched, HostPitchedMut, LaunchConfig, MipmappedArray,
    PitchedBuffer, Pos, ReadMode, Stream, StreamFlags, SurfaceObject, Texel, TexelScalar,
    TextureDesc, TextureObject,
};

// Exclusive: tests that assert a call returned while a host function stalls a stream. Another
// test's call that waits for the whole device (`cuMemFreeHost`, `cuMemHostUnregister`, ...) holds a
// driver lock that async copies and object creation need, for as long as the stall lasts (seen
// on the H200 pair): libcudart programs see the same coupling.
crate::tests![
    array_formats_and_shapes_round_trip_through_the_driver,
    array_copies_match_a_cpu_model,
    refusals_name_their_values_before_the_driver,
    linear_fetches_match_the_buffer,
    streaming_kernels_sum_exactly_what_they_read,
    texture_2d_fetches_match_the_cpu_sampler,
    integer_element_reads_are_exact,
    texture_3d_and_layered_fetches_match_the_cpu_sampler,
    cubemap_fetches_match_the_cpu_sampler,
    gather_matches_the_cpu_sampler,
    mipmap_levels_are_sampled_by_level_of_detail,
    pitched_texture_matches_the_cpu_sampler,
    surfaces_write_what_the_array_holds,
    array_drops_beside_stream_ordered_allocations_do_not_hang,
    user_launch_with_a_texture_keeps_it_until_the_kernel_ran,
    overlapping_copies_within_one_mipmap_level_are_refused,
    crate_kernels_refuse_textures_of_another_kind,
    ;
    exclusive:
    // A global capture on a blocking stream refuses other threads' legacy-stream work.
    crate_texture_kernels_are_refused_in_captures,
    dropping_textures_and_arrays_under_queued_kernels_is_safe,
    an_array_dropped_beside_a_stalled_stream_holds_up_no_other_call,
];

/// Child processes of this module (see `main.rs`).
pub const CHILDREN: &[(&str, fn())] = &[("texture_array_drops", array_drops_child)];

type Rng = fastrand::Rng;

fn cfg(n: usize) -> LaunchConfig {
    LaunchConfig::for_elements(n, 128).unwrap()
}

/// Random texels over each format's whole range (floats in [-1, 1]).
fn random_texels<T: Texel>(r: &mut Rng, n: usize) -> Vec<T> {
    let (lo, hi) = match T::FORMAT {
        ArrayFormat::U8 => (0.0, 255.0),
        ArrayFormat::U16 => (0.0, 65535.0),
        ArrayFormat::U32 => (0.0, 4.0e9),
        ArrayFormat::I8 => (-128.0, 127.0),
        ArrayFormat::I16 => (-32768.0, 32767.0),
        ArrayFormat::I32 => (-2.0e9, 2.0e9),
        ArrayFormat::F16 | ArrayFormat::F32 => (-1.0, 1.0),
    };
    (0..n)
        .map(|_| {
            let c: Vec<T::Scalar> = (0..T::CHANNELS)
                .map(|_| T::Scalar::from_f32(lo + r.f32() * (hi - lo)))
                .collect();
            T::from_channels(&c)
        })
        .collect()
}

/// What a sampling kernel does with its coordinates.
#[derive(Clone, Copy, Debug)]
enum Fetch {
    D1,
    D2,
    D3,
    Layered1,
    Layered2,
    Cube,
    CubeLayered,
    Lod,
    Gather(i32),
}

/// Runs the kernel of `fetch` over `coords` (and `layers`, for layered kinds); returns 4
/// floats per point.
fn gpu_fetch(fetch: Fetch, tex: &TextureObject<'_>, coords: &[f32], layers: &[i32]) -> Vec<f32> {
    use kernels::texture as k;
    let per = match fetch {
        Fetch::D1 | Fetch::Layered1 => 1,
        Fetch::D2 | Fetch::Layered2 | Fetch::Gather(_) => 2,
        _ => 3,
    };
    let n = coords.len() / per;
    let s = Stream::new().unwrap();
    let c = DeviceBuffer::from_slice(coords).unwrap();
    let l = DeviceBuffer::from_slice(if layers.is_empty() { &[0] } else { layers }).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * n]).unwrap();
    let g = cfg(n);
    match fetch {
        Fetch::D1 => k::sample_1d(&s, &g, tex, &c, &mut out),
        Fetch::D2 => k::sample_2d(&s, &g, tex, &c, &mut out),
        Fetch::D3 => k::sample_3d(&s, &g, tex, &c, &mut out),
        Fetch::Layered1 => k::sample_1d_layered(&s, &g, tex, &c, &l, &mut out),
        Fetch::Layered2 => k::sample_2d_layered(&s, &g, tex, &c, &l, &mut out),
        Fetch::Cube => k::sample_cubemap(&s, &g, tex, &c, &mut out),
        Fetch::CubeLayered => k::sample_cubemap_layered(&s, &g, tex, &c, &l, &mut out),
        Fetch::Lod => k::sample_2d_lod(&s, &g, tex, &c, &mut out),
        Fetch::Gather(comp) => k::gather_2d(&s, &g, tex, &c, comp, &mut out),
    }
    .unwrap();
    s.synchronize().unwrap();
    out.to_vec().unwrap()
}

/// Compares the first `channels` of each 4-float result within `tol`.
fn assert_fetches(what: &str, got: &[f32], want: &[[f32; 4]], channels: usize, tol: f32) {
    assert_eq!(got.len(), 4 * want.len(), "{what}: lengths");
    let mut bad = Vec::new();
    for (i, w) in want.iter().enumerate() {
        for c in 0..channels {
            let g = got[4 * i + c];
            // NaN (a missed write) is never within the tolerance.
            let within = (g - w[c]).abs() <= tol;
            if !within {
                bad.push((i, c, g, w[c]));
            }
        }
    }
    if let Some(&(i, c, g, w)) = bad.first() {
        panic!(
            "{what}: {} of {} values differ by more than {tol}; first: point {i} channel {c}: got {g}, expected {w}",
            bad.len(),
            want.len() * channels
        );
    }
}

/// How coordinates are drawn on one axis of `len` texels.
#[derive(Clone, Copy, PartialEq)]
enum Coords {
    /// Inside a texel (10% from its edges), from two texels before to two after the texture.
    Interior,
    /// `i + 0.5 + k / 256`: where the model's weights are exactly the hardware's.
    Exact,
    /// Anywhere from two texels before to two after.
    Random,
}

fn coord(r: &mut Rng, len: usize, how: Coords, normalized: bool) -> f32 {
    let l = len as i64;
    let t = match how {
        Coords::Interior => r.i64(-2..l + 2) as f32 + 0.1 + 0.8 * r.f32(),
        Coords::Exact => r.i64(-2..l + 1) as f32 + 0.5 + r.u32(0..256) as f32 / 256.0,
        Coords::Random => -2.0 + r.f32() * (len + 4) as f32,
    };
    // Lengths are powers of two where coordinates are normalised: the division is exact.
    if normalized {
        t / len as f32
    } else {
        t
    }
}

/// The tolerance of a comparison (see the module docs).
fn tolerance(desc: &TextureDesc, axes: usize) -> f32 {
    let norm_int = desc.read_mode == ReadMode::NormalizedFloat;
    let mut tol = if desc.srgb {
        // The hardware's sRGB conversion differs from the formula by up to 0.0016 (seen on the
        // H200: 0.90625 for the formula's 0.90466).
        1.0 / 256.0
    } else if norm_int {
        1e-6
    } else {
        0.0
    };
    if desc.filter_mode == FilterMode::Linear {
        tol += 2.0 * f32::powi(2.0, -12);
        // The hardware may take another 1/256 step of a weight than the model, even where the
        // fraction is a multiple of 1/256 (seen on the H200 with driver 580: 0.0005 to 0.003
        // off at such coordinates): 1/256 of a neighbour difference of up to 2 (data in
        // [-1, 1]) per filtered axis.
        tol += axes as f32 * 2.0 / 256.0;
    }
    tol
}

fn array_formats_and_shapes_round_trip_through_the_driver() {
    fn one<T: Texel>(r: &mut Rng) {
        let (w, h) = (r.usize(1..70), r.usize(1..40));
        let data = random_texels::<T>(r, w * h);
        let mut a = Array::<T>::new_2d(w, h, ArrayFlags::empty()).unwrap();
        a.copy_from_host(&data).unwrap();
        let info = a.info().unwrap();
        assert_eq!(
            info.desc,
            ChannelDesc::of::<T>(),
            "{}",
            std::any::type_name::<T>()
        );
        assert_eq!(info.desc.format().unwrap(), (T::FORMAT, T::CHANNELS));
        assert_eq!(info.extent, Extent::new(w, h, 0));
        assert_eq!(a.channel_desc(), info.desc);
        assert_same(std::any::type_name::<T>(), &a.to_vec().unwrap(), &data);
    }
    let mut r = rng();
    one::<u8>(&mut r);
    one::<[u8; 2]>(&mut r);
    one::<[u8; 4]>(&mut r);
    one::<i8>(&mut r);
    one::<[i8; 4]>(&mut r);
    one::<u16>(&mut r);
    one::<[u16; 2]>(&mut r);
    one::<i16>(&mut r);
    one::<[i16; 4]>(&mut r);
    one::<u32>(&mut r);
    one::<[u32; 4]>(&mut r);
    one::<i32>(&mut r);
    one::<[i32; 2]>(&mut r);
    one::<half::f16>(&mut r);
    one::<[half::f16; 2]>(&mut r);
    one::<[half::f16; 4]>(&mut r);
    one::<f32>(&mut r);
    one::<[f32; 2]>(&mut r);
    one::<[f32; 4]>(&mut r);
    // Every shape, with the runtime's extent and flags as the driver reports them.
    let s = ArrayFlags::SURFACE_LOAD_STORE;
    for (shape, flags) in [
        (ArrayShape::D1 { width: 77 }, ArrayFlags::empty()),
        (
            ArrayShape::D2 {
                width: 33,
                height: 9,
            },
            ArrayFlags::TEXTURE_GATHER,
        ),
        (
            ArrayShape::D3 {
                width: 5,
                height: 6,
                depth: 7,
            },
            s,
        ),
        (
            ArrayShape::Layered1D {
                width: 40,
                layers: 3,
            },
            s,
        ),
        (
            ArrayShape::Layered2D {
                width: 12,
                height: 10,
                layers: 4,
            },
            ArrayFlags::empty(),
        ),
        (ArrayShape::Cubemap { width: 16 }, s),
        (ArrayShape::LayeredCubemap { width: 8, cubes: 2 }, s),
    ] {
        let mut a = Array::<f32>::new(shape, flags).unwrap();
        let info = a.info().unwrap();
        let (extent, kind) = shape.raw();
        assert_eq!(info.extent, extent, "{shape:?}");
        assert_eq!(info.flags, kind | flags.bits(), "{shape:?}");
        assert_eq!(
            ArrayShape::from_raw(info.extent, info.flags).unwrap(),
            shape
        );
        let data = random_texels::<f32>(&mut r, a.len());
        a.copy_from_host(&data).unwrap();
        assert_same(&format!("{shape:?}"), &a.to_vec().unwrap(), &data);
    }
}

/// The CPU model of a region copy between dense 3-D layouts (elements).
#[allow(clippy::too_many_arguments)]
fn model<T: Copy>(dst: &mut [T], de: Extent, dp: Pos, src: &[T], se: Extent, sp: Pos, e: Extent) {
    for z in 0..e.depth {
        for y in 0..e.height {
            for x in 0..e.width {
                dst[((dp.z + z) * de.height + dp.y + y) * de.width + dp.x + x] =
                    src[((sp.z + z) * se.height + sp.y + y) * se.width + sp.x + x];
            }
        }
    }
}

fn array_copies_match_a_cpu_model() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    for round in 0..8 {
        let full = Extent::new(r.usize(1..80), r.usize(1..20), r.usize(1..6));
        let mut a = Array::<[u16; 2]>::new_3d(full, ArrayFlags::empty()).unwrap();
        let host = random_texels::<[u16; 2]>(&mut r, full.count().unwrap());
        a.copy_from_host(&host).unwrap();
        // A random region: array -> host (with its own pitch), on a stream.
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
        let (hp, hr) = (e.width + r.usize(0..5), e.height + r.usize(0..3));
        let mut out = vec![[7u16, 7]; hp * hr * e.depth];
        copy_3d_async(
            &mut HostPitchedMut::new(&mut out, hp, hr).unwrap(),
            &a,
            &Copy3D::new(e).src_pos(p),
            &s,
        )
        .unwrap();
        let mut want = vec![[7u16, 7]; hp * hr * e.depth];
        model(
            &mut want,
            Extent::new(hp, hr, e.depth),
            Pos::default(),
            &host,
            full,
            p,
            e,
        );
        assert_same(&format!("round {round}: array -> host region"), &out, &want);
        // Host region -> array at another place, then array -> device (dense) -> host.
        let q = Pos::new(
            r.usize(0..=full.width - e.width),
            r.usize(0..=full.height - e.height),
            r.usize(0..=full.depth - e.depth),
        );
        let patch = random_texels::<[u16; 2]>(&mut r, e.count().unwrap());
        copy_3d(
            &mut a,
            &HostPitched::new(&patch, e.width, e.height).unwrap(),
            &Copy3D::new(e).dst_pos(q),
        )
        .unwrap();
        let mut all = host.clone();
        model(&mut all, full, q, &patch, e, Pos::default(), e);
        let mut dev = DeviceBuffer::<[u16; 2]>::new(a.len()).unwrap();
        a.copy_to_device(&mut dev).unwrap();
        assert_same(
            &format!("round {round}: array -> device"),
            &dev.to_vec().unwrap(),
            &all,
        );
        // Device -> a second array, array -> array (a region), and back.
        let mut b = Array::<[u16; 2]>::new_3d(full, ArrayFlags::empty()).unwrap();
        b.copy_from_device_async(&dev, &s).unwrap();
        let mut c = Array::<[u16; 2]>::new_3d(full, ArrayFlags::empty()).unwrap();
        c.copy_from_host(&host).unwrap();
        s.synchronize().unwrap();
        copy_3d(&mut c, &b, &Copy3D::new(e).src_pos(q).dst_pos(p)).unwrap();
        let mut want_c = host.clone();
        model(&mut want_c, full, p, &all, full, q, e);
        assert_same(
            &format!("round {round}: array -> array"),
            &c.to_vec().unwrap(),
            &want_c,
        );
        let mut d = Array::<[u16; 2]>::new_3d(full, ArrayFlags::empty()).unwrap();
        d.copy_from_array(&c).unwrap();
        let mut back = vec![[0u16; 2]; a.len()];
        d.copy_to_host_async(&mut back, &s).unwrap();
        assert_same(&format!("round {round}: whole array copy"), &back, &want_c);
    }
    // 2-D arrays with pitched device memory (cudaMemcpy2DToArray / FromArray).
    let (w, h) = (r.usize(1..300), r.usize(1..50));
    let host = random_texels::<f32>(&mut r, w * h);
    let mut p = PitchedBuffer::<f32>::new_2d(w, h).unwrap();
    copy_3d(
        &mut p,
        &HostPitched::new(&host, w, h).unwrap(),
        &Copy3D::new(Extent::d2(w, h)),
    )
    .unwrap();
    let mut a = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
    copy_3d(&mut a, &p, &Copy3D::new(Extent::d2(w, h))).unwrap();
    assert_same("pitched -> 2-D array", &a.to_vec().unwrap(), &host);
    let mut p2 = PitchedBuffer::<f32>::new_2d(w, h).unwrap();
    copy_3d_async(&mut p2, &a, &Copy3D::new(Extent::d2(w, h)), &s).unwrap();
    let mut back = vec![0f32; w * h];
    copy_3d(
        &mut HostPitchedMut::new(&mut back, w, h).unwrap(),
        &p2,
        &Copy3D::new(Extent::d2(w, h)),
    )
    .unwrap();
    assert_same("2-D array -> pitched", &back, &host);
    // Layered and cubemap arrays: z is the layer or face.
    let mut cube = Array::<f32>::new_cubemap(8, ArrayFlags::empty()).unwrap();
    let faces = random_texels::<f32>(&mut r, 8 * 8 * 6);
    cube.copy_from_host(&faces).unwrap();
    let mut face3 = vec![0f32; 64];
    copy_3d(
        &mut HostPitchedMut::new(&mut face3, 8, 8).unwrap(),
        &cube,
        &Copy3D::new(Extent::d2(8, 8)).src_pos(Pos::new(0, 0, 3)),
    )
    .unwrap();
    assert_same("cubemap face 3", &face3, &faces[3 * 64..4 * 64]);
}

fn refusals_name_their_values_before_the_driver() {
    let dev = Device::current().unwrap();
    let max1d = dev.attribute(DeviceAttribute::MaxTexture1DWidth).unwrap() as usize;
    let e = Array::<f32>::new_1d(max1d + 1, ArrayFlags::empty()).unwrap_err();
    assert_eq!(
        e,
        Error::SizeLimit {
            what: "1-D array width",
            value: max1d + 1,
            limit: max1d,
            limit_name: "cudaDevAttrMaxTexture1DWidth"
        }
    );
    assert_eq!(cuda_runtime::get_last_error(), Some(e));
    let maxs = dev.attribute(DeviceAttribute::MaxSurface2DHeight).unwrap() as usize;
    let e = Array::<f32>::new_2d(4, maxs + 1, ArrayFlags::SURFACE_LOAD_STORE).unwrap_err();
    assert!(
        matches!(e, Error::SizeLimit { value, .. } if value == maxs + 1),
        "{e}"
    );
    let layers = dev
        .attribute(DeviceAttribute::MaxTexture2DLayeredLayers)
        .unwrap() as usize;
    let e = Array::<u8>::new_layered_2d(4, 4, layers + 1, ArrayFlags::empty()).unwrap_err();
    assert!(
        matches!(e, Error::SizeLimit { value, .. } if value == layers + 1),
        "{e}"
    );
    assert_eq!(
        Array::<u8>::new_cubemap(0, ArrayFlags::empty())
            .unwrap_err()
            .code(),
        ErrorCode::InvalidValue
    );
    assert_eq!(
        Array::<u8>::new_1d(8, ArrayFlags::TEXTURE_GATHER)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidValue
    );
    // Regions outside an array.
    let mut a = Array::<f32>::new_2d(16, 8, ArrayFlags::empty()).unwrap();
    let host = vec![0f32; 16 * 9];
    let e = copy_3d(
        &mut a,
        &HostPitched::new(&host, 16, 9).unwrap(),
        &Copy3D::new(Extent::d2(16, 9)),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 0,
                end: 9,
                len: 8,
                ..
            }
        ),
        "{e}"
    );
    let e = copy_3d(
        &mut a,
        &HostPitched::new(&host, 16, 9).unwrap(),
        &Copy3D::new(Extent::d2(4, 4)).dst_pos(Pos::new(13, 0, 0)),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 13,
                end: 17,
                len: 16,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        a.copy_from_host(&[0f32; 5]).unwrap_err(),
        Error::LengthMismatch {
            expected: 128,
            actual: 5,
            ..
        }
    ));
    // Surfaces need the load/store flag (the driver would accept this).
    assert_eq!(
        SurfaceObject::new(&a).unwrap_err(),
        Error::SurfaceNotLoadStore { flags: 0 }
    );
    // Descriptions the driver would refuse or change.
    let ints = Array::<i32>::new_2d(4, 4, ArrayFlags::empty()).unwrap();
    let lin = TextureDesc {
        filter_mode: FilterMode::Linear,
        ..TextureDesc::default()
    };
    assert_eq!(
        TextureObject::from_array(&ints, &lin).unwrap_err().code(),
        ErrorCode::InvalidFilterSetting
    );
    let norm = TextureDesc {
        read_mode: ReadMode::NormalizedFloat,
        ..TextureDesc::default()
    };
    assert_eq!(
        TextureObject::from_array(&ints, &norm).unwrap_err().code(),
        ErrorCode::InvalidNormSetting
    );
    let wrap = TextureDesc {
        address_mode: [AddressMode::Wrap; 3],
        ..TextureDesc::default()
    };
    assert_eq!(
        TextureObject::from_array(&a, &wrap).unwrap_err().code(),
        ErrorCode::InvalidValue
    );
    let seamless = TextureDesc {
        seamless_cubemap: true,
        ..TextureDesc::default()
    };
    assert_eq!(
        TextureObject::from_array(&a, &seamless).unwrap_err().code(),
        ErrorCode::InvalidValue
    );
    let mip = MipmappedArray::<f32>::new(
        ArrayShape::D2 {
            width: 16,
            height: 16,
        },
        5,
        ArrayFlags::empty(),
    )
    .unwrap();
    assert_eq!(
        TextureObject::from_mipmapped(&mip, &TextureDesc::default())
            .unwrap_err()
            .code(),
        ErrorCode::InvalidValue,
        "mipmaps need normalised coordinates"
    );
    assert!(MipmappedArray::<f32>::new(
        ArrayShape::D2 {
            width: 16,
            height: 16
        },
        6,
        ArrayFlags::empty()
    )
    .is_err());
    assert!(matches!(
        mip.level(5).unwrap_err(),
        Error::OutOfRange {
            start: 5,
            len: 5,
            ..
        }
    ));
    // Linear textures: the address must be aligned, the description the default.
    let align = dev.attribute(DeviceAttribute::TextureAlignment).unwrap() as usize;
    let buf = DeviceBuffer::<f32>::new(4096).unwrap();
    // The first element at an aligned address (the allocation's own alignment may be less).
    let first = (align - buf.as_raw() as usize % align) % align / 4;
    let e = TextureObject::from_linear(&buf.slice(first + 1..).unwrap(), &TextureDesc::default())
        .unwrap_err();
    assert!(
        matches!(e, Error::TextureAlignment { alignment, .. } if alignment as usize == align),
        "{e}"
    );
    let aligned = buf.slice(first..).unwrap();
    let ok = TextureObject::from_linear(&aligned, &TextureDesc::default());
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(
        TextureObject::from_linear(&buf, &lin).unwrap_err().code(),
        ErrorCode::InvalidValue
    );
    assert!(
        TextureObject::from_linear(&buf.slice(0..0).unwrap(), &TextureDesc::default()).is_err()
    );
}

/// The streaming kernels of the texture bench (four loads in flight per thread) sum every value
/// once: through a float4 linear texture (fetches past its end read zero), and through global
/// loads of an aligned buffer whose length is no multiple of 4 and of a misaligned view.
fn streaming_kernels_sum_exactly_what_they_read() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let n4 = r.usize(20_000..120_000);
    let data = random_texels::<[f32; 4]>(&mut r, n4);
    // Sums of values in (-1, 1) per thread: compared with a tolerance for f32 accumulation.
    let check = |what: &str, sums: &DeviceBuffer<f32>, values: &[f32]| {
        let got: f64 = sums.to_vec().unwrap().iter().map(|&v| f64::from(v)).sum();
        let want: f64 = values.iter().map(|&v| f64::from(v)).sum();
        let scale: f64 = values
            .iter()
            .map(|&v| f64::from(v.abs()))
            .sum::<f64>()
            .max(1.0);
        assert!(
            (got - want).abs() <= 1e-5 * scale,
            "{what}: sum {got}, expected {want} (tolerance {})",
            1e-5 * scale
        );
    };
    let flat: Vec<f32> = data.iter().flatten().copied().collect();
    for _ in 0..3 {
        let cfg = LaunchConfig::new(r.u32(1..300), 32 * r.u32(1..17));
        let threads = (cfg.grid.x * cfg.block.x) as usize;
        // Texture: n4 texels, asked for up to 1000 more (they read zero).
        let buf = DeviceBuffer::from_slice(&data).unwrap();
        let tex = TextureObject::from_linear(&buf, &TextureDesc::default()).unwrap();
        let mut sums = DeviceBuffer::from_slice(&vec![f32::NAN; threads]).unwrap();
        let asked = n4 + r.usize(0..1000);
        kernels::texture::stream_texture(&s, &cfg, &tex, asked as u64, &mut sums).unwrap();
        check(&format!("texture, {n4} texels, {cfg:?}"), &sums, &flat);
        // Global loads: an aligned buffer of 4 * n4 - k floats (k < 4), and a view one float
        // past an aligned start (the float path).
        let len = 4 * n4 - r.usize(0..4);
        let g = DeviceBuffer::from_slice(&flat[..len]).unwrap();
        kernels::texture::stream_global(&s, &cfg, &g, &mut sums).unwrap();
        check(
            &format!("global loads, {len} floats, {cfg:?}"),
            &sums,
            &flat[..len],
        );
        let view = g.slice(1..).unwrap();
        kernels::texture::stream_global(&s, &cfg, &view, &mut sums).unwrap();
        check(
            &format!(
                "global loads, misaligned view of {} floats, {cfg:?}",
                len - 1
            ),
            &sums,
            &flat[1..len],
        );
    }
}

fn linear_fetches_match_the_buffer() {
    let mut r = rng();
    let n = r.usize(1000..5000);
    let data = random_texels::<[f32; 4]>(&mut r, n);
    let buf = DeviceBuffer::from_slice(&data).unwrap();
    // A view at an aligned offset past the start: the texture reads exactly the view.
    let align = Device::current()
        .unwrap()
        .attribute(DeviceAttribute::TextureAlignment)
        .unwrap() as usize;
    let off = (align - buf.as_raw() as usize % align) % align / 16 + align / 16;
    let view = buf.slice(off..).unwrap();
    let tex = TextureObject::from_linear(&view, &TextureDesc::default()).unwrap();
    let len = n - off;
    let idx: Vec<i32> = (0..2000).map(|_| r.i32(-20..len as i32 + 20)).collect();
    let s = Stream::new().unwrap();
    let di = DeviceBuffer::from_slice(&idx).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * idx.len()]).unwrap();
    kernels::texture::fetch_linear(&s, &cfg(idx.len()), &tex, &di, &mut out).unwrap();
    s.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    let want: Vec<f32> = idx
        .iter()
        .flat_map(|&i| {
            if i >= 0 && (i as usize) < len {
                data[off + i as usize]
            } else {
                [0.0; 4] // outside a linear texture: zero
            }
        })
        .collect();
    assert_same("tex1Dfetch of a float4 view", &got, &want);
    // Unsigned integers read as stored, and bytes read as normalised floats.
    let words: Vec<u32> = (0..n).map(|_| r.u32(..)).collect();
    let wb = DeviceBuffer::from_slice(&words).unwrap();
    let wt = TextureObject::from_linear(&wb, &TextureDesc::default()).unwrap();
    let idx: Vec<i32> = (0..1000).map(|_| r.i32(0..n as i32)).collect();
    let di = DeviceBuffer::from_slice(&idx).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![0u32; 4 * idx.len()]).unwrap();
    kernels::texture::fetch_linear_u(&s, &cfg(idx.len()), &wt, &di, &mut out).unwrap();
    s.synchronize().unwrap();
    let got: Vec<u32> = out.to_vec().unwrap().chunks(4).map(|c| c[0]).collect();
    let want: Vec<u32> = idx.iter().map(|&i| words[i as usize]).collect();
    assert_same("tex1Dfetch of u32", &got, &want);
    let bytes = random_texels::<[u8; 4]>(&mut r, n);
    let bb = DeviceBuffer::from_slice(&bytes).unwrap();
    let norm = TextureDesc {
        read_mode: ReadMode::NormalizedFloat,
        ..TextureDesc::default()
    };
    let bt = TextureObject::from_linear(&bb, &norm).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * idx.len()]).unwrap();
    kernels::texture::fetch_linear(&s, &cfg(idx.len()), &bt, &di, &mut out).unwrap();
    s.synchronize().unwrap();
    let want: Vec<[f32; 4]> = idx
        .iter()
        .map(|&i| bytes[i as usize].map(|v| v.to_normalized()))
        .collect();
    assert_fetches(
        "tex1Dfetch of uchar4 as normalised floats",
        &out.to_vec().unwrap(),
        &want,
        4,
        1e-6,
    );
}

/// One 2-D configuration: random texels in an array, fetched by the hardware and by the model.
fn check_2d<T: Texel>(r: &mut Rng, mut desc: TextureDesc) {
    // Normalised 8- and 16-bit reads hold the border colour in the texel's format, and the
    // hardware's rounding of a colour between two steps is not the model's (seen on the H200:
    // 52.97 / 127 read back as 53 / 127, -67.52 / 127 as -67 / 127): the colour is put on a step.
    let max = match T::FORMAT {
        ArrayFormat::U8 => 255.0,
        ArrayFormat::I8 => 127.0,
        ArrayFormat::U16 => 65535.0,
        ArrayFormat::I16 => 32767.0,
        _ => 0.0,
    };
    if max > 0.0 && desc.read_mode == ReadMode::NormalizedFloat {
        desc.border_color = desc.border_color.map(|c| (c * max).round() / max);
    }
    let what = format!("{} {desc:?}", std::any::type_name::<T>());
    let (w, h) = if desc.normalized_coords {
        (1 << r.u32(1..7), 1 << r.u32(1..6))
    } else {
        (r.usize(1..70), r.usize(1..40))
    };
    let data = random_texels::<T>(r, w * h);
    let shape = ArrayShape::D2 {
        width: w,
        height: h,
    };
    let mut a = Array::<T>::new(shape, ArrayFlags::empty()).unwrap();
    a.copy_from_host(&data).unwrap();
    let tex = TextureObject::from_array(&a, &desc).unwrap();
    let cpu = CpuTexture::new(&data, shape, desc).unwrap();
    let classes: &[Coords] = if desc.filter_mode == FilterMode::Point {
        &[Coords::Interior]
    } else {
        &[Coords::Exact, Coords::Random]
    };
    for &how in classes {
        let n = 3000;
        let mut xy = Vec::with_capacity(2 * n);
        for _ in 0..n {
            xy.push(coord(r, w, how, desc.normalized_coords));
            xy.push(coord(r, h, how, desc.normalized_coords));
        }
        let want: Vec<[f32; 4]> = xy.chunks(2).map(|p| cpu.sample_2d(p[0], p[1])).collect();
        let got = gpu_fetch(Fetch::D2, &tex, &xy, &[]);
        assert_fetches(
            &format!("{what}, {w}x{h}"),
            &got,
            &want,
            T::CHANNELS as usize,
            tolerance(&desc, 2),
        );
    }
}

fn texture_2d_fetches_match_the_cpu_sampler() {
    let mut r = rng();
    let d = TextureDesc::default();
    let border = [r.f32(), -r.f32(), 0.5, 1.0];
    let point = |m: AddressMode, normalized: bool| TextureDesc {
        address_mode: [m; 3],
        normalized_coords: normalized,
        border_color: border,
        ..d
    };
    let linear = |m: AddressMode, normalized: bool| TextureDesc {
        filter_mode: FilterMode::Linear,
        ..point(m, normalized)
    };
    let norm = |t: TextureDesc| TextureDesc {
        read_mode: ReadMode::NormalizedFloat,
        ..t
    };
    check_2d::<f32>(&mut r, point(AddressMode::Clamp, false));
    check_2d::<f32>(&mut r, point(AddressMode::Border, false));
    check_2d::<[f32; 4]>(&mut r, point(AddressMode::Wrap, true));
    check_2d::<[f32; 2]>(&mut r, point(AddressMode::Mirror, true));
    check_2d::<f32>(&mut r, linear(AddressMode::Clamp, false));
    check_2d::<f32>(&mut r, linear(AddressMode::Border, true));
    check_2d::<[f32; 4]>(&mut r, linear(AddressMode::Wrap, true));
    check_2d::<[f32; 2]>(&mut r, linear(AddressMode::Mirror, true));
    // fp16 texels are read as floats.
    check_2d::<half::f16>(&mut r, point(AddressMode::Clamp, false));
    check_2d::<[half::f16; 4]>(&mut r, linear(AddressMode::Wrap, true));
    // Normalised integers and sRGB.
    check_2d::<[u8; 4]>(&mut r, norm(point(AddressMode::Clamp, false)));
    check_2d::<[u8; 4]>(&mut r, norm(linear(AddressMode::Clamp, false)));
    check_2d::<u16>(&mut r, norm(linear(AddressMode::Mirror, true)));
    check_2d::<[i8; 2]>(&mut r, norm(point(AddressMode::Border, false)));
    check_2d::<[i16; 4]>(&mut r, norm(linear(AddressMode::Clamp, true)));
    check_2d::<[u8; 4]>(
        &mut r,
        TextureDesc {
            srgb: true,
            ..norm(point(AddressMode::Clamp, false))
        },
    );
    check_2d::<[u8; 4]>(
        &mut r,
        TextureDesc {
            srgb: true,
            ..norm(linear(AddressMode::Wrap, true))
        },
    );
}

fn integer_element_reads_are_exact() {
    fn one<T: Texel>(r: &mut Rng, signed: bool)
    where
        T::Scalar: Into<i64>,
    {
        let (w, h) = (r.usize(1..50), r.usize(1..50));
        let data = random_texels::<T>(r, w * h);
        let shape = ArrayShape::D2 {
            width: w,
            height: h,
        };
        let mut a = Array::<T>::new(shape, ArrayFlags::empty()).unwrap();
        a.copy_from_host(&data).unwrap();
        let desc = TextureDesc::default();
        let tex = TextureObject::from_array(&a, &desc).unwrap();
        let cpu = CpuTexture::new(&data, shape, desc).unwrap();
        let n = 2000;
        let mut xy = Vec::new();
        for _ in 0..n {
            xy.push(coord(r, w, Coords::Interior, false));
            xy.push(coord(r, h, Coords::Interior, false));
        }
        let s = Stream::new().unwrap();
        let c = DeviceBuffer::from_slice(&xy).unwrap();
        let got: Vec<i64> = if signed {
            let mut out = DeviceBuffer::from_slice(&vec![0x5a5a_5a5ai32; 4 * n]).unwrap();
            kernels::texture::sample_2d_i(&s, &cfg(n), &tex, &c, &mut out).unwrap();
            s.synchronize().unwrap();
            out.to_vec().unwrap().into_iter().map(i64::from).collect()
        } else {
            let mut out = DeviceBuffer::from_slice(&vec![0x5a5a_5a5au32; 4 * n]).unwrap();
            kernels::texture::sample_2d_u(&s, &cfg(n), &tex, &c, &mut out).unwrap();
            s.synchronize().unwrap();
            out.to_vec().unwrap().into_iter().map(i64::from).collect()
        };
        let ch = T::CHANNELS as usize;
        for (i, p) in xy.chunks(2).enumerate() {
            let at = cpu
                .point_index_2d(p[0], p[1], 0)
                .expect("clamped: never the border");
            for c in 0..ch {
                let want: i64 = data[at].channels()[c].into();
                assert_eq!(
                    got[4 * i + c],
                    want,
                    "{}: point {i} ({}, {}) channel {c}",
                    std::any::type_name::<T>(),
                    p[0],
                    p[1]
                );
            }
        }
    }
    let mut r = rng();
    one::<u8>(&mut r, false);
    one::<[u8; 4]>(&mut r, false);
    one::<[u16; 2]>(&mut r, false);
    one::<u32>(&mut r, false);
    one::<[u32; 4]>(&mut r, false);
    one::<[i8; 4]>(&mut r, true);
    one::<i16>(&mut r, true);
    one::<[i32; 2]>(&mut r, true);
}

fn texture_3d_and_layered_fetches_match_the_cpu_sampler() {
    let mut r = rng();
    for filter in [FilterMode::Point, FilterMode::Linear] {
        let desc = TextureDesc {
            filter_mode: filter,
            address_mode: [AddressMode::Clamp, AddressMode::Border, AddressMode::Clamp],
            border_color: [0.25, 0.5, 0.75, 1.0],
            ..TextureDesc::default()
        };
        let classes: &[Coords] = if filter == FilterMode::Point {
            &[Coords::Interior]
        } else {
            &[Coords::Exact, Coords::Random]
        };
        // 3-D.
        let (w, h, d) = (r.usize(1..20), r.usize(1..20), r.usize(1..20));
        let shape = ArrayShape::D3 {
            width: w,
            height: h,
            depth: d,
        };
        let data = random_texels::<[f32; 2]>(&mut r, w * h * d);
        let mut a = Array::<[f32; 2]>::new(shape, ArrayFlags::empty()).unwrap();
        a.copy_from_host(&data).unwrap();
        let tex = TextureObject::from_array(&a, &desc).unwrap();
        let cpu = CpuTexture::new(&data, shape, desc).unwrap();
        for &how in classes {
            let xyz: Vec<f32> = (0..2000)
                .flat_map(|_| {
                    [
                        coord(&mut r, w, how, false),
                        coord(&mut r, h, how, false),
                        coord(&mut r, d, how, false),
                    ]
                })
                .collect();
            let want: Vec<[f32; 4]> = xyz
                .chunks(3)
                .map(|p| cpu.sample_3d(p[0], p[1], p[2]))
                .collect();
            assert_fetches(
                &format!("3-D {filter:?} {w}x{h}x{d}"),
                &gpu_fetch(Fetch::D3, &tex, &xyz, &[]),
                &want,
                2,
                tolerance(&desc, 3),
            );
        }
        // 1-D.
        let w1 = r.usize(1..500);
        let s1 = ArrayShape::D1 { width: w1 };
        let d1 = random_texels::<[f32; 4]>(&mut r, w1);
        let mut a1 = Array::<[f32; 4]>::new(s1, ArrayFlags::empty()).unwrap();
        a1.copy_from_host(&d1).unwrap();
        let t1 = TextureObject::from_array(&a1, &desc).unwrap();
        let c1 = CpuTexture::new(&d1, s1, desc).unwrap();
        for &how in classes {
            let x: Vec<f32> = (0..2000).map(|_| coord(&mut r, w1, how, false)).collect();
            let want: Vec<[f32; 4]> = x.iter().map(|&x| c1.sample_1d(x)).collect();
            assert_fetches(
                &format!("1-D {filter:?} {w1}"),
                &gpu_fetch(Fetch::D1, &t1, &x, &[]),
                &want,
                4,
                tolerance(&desc, 1),
            );
        }
        // Layered 1-D and 2-D.
        let layers = r.usize(1..8);
        let (w, h) = (r.usize(1..40), r.usize(1..20));
        let l1 = ArrayShape::Layered1D { width: w, layers };
        let l2 = ArrayShape::Layered2D {
            width: w,
            height: h,
            layers,
        };
        let d1 = random_texels::<f32>(&mut r, w * layers);
        let d2 = random_texels::<[half::f16; 4]>(&mut r, w * h * layers);
        let mut a1 = Array::<f32>::new(l1, ArrayFlags::empty()).unwrap();
        a1.copy_from_host(&d1).unwrap();
        let mut a2 = Array::<[half::f16; 4]>::new(l2, ArrayFlags::empty()).unwrap();
        a2.copy_from_host(&d2).unwrap();
        let (t1, t2) = (
            TextureObject::from_array(&a1, &desc).unwrap(),
            TextureObject::from_array(&a2, &desc).unwrap(),
        );
        let (c1, c2) = (
            CpuTexture::new(&d1, l1, desc).unwrap(),
            CpuTexture::new(&d2, l2, desc).unwrap(),
        );
        for &how in classes {
            let n = 2000;
            let lay: Vec<i32> = (0..n).map(|_| r.i32(0..layers as i32)).collect();
            let x: Vec<f32> = (0..n).map(|_| coord(&mut r, w, how, false)).collect();
            let want: Vec<[f32; 4]> = x
                .iter()
                .zip(&lay)
                .map(|(&x, &l)| c1.sample_1d_layered(x, l as usize))
                .collect();
            assert_fetches(
                &format!("layered 1-D {filter:?}"),
                &gpu_fetch(Fetch::Layered1, &t1, &x, &lay),
                &want,
                1,
                tolerance(&desc, 1),
            );
            let xy: Vec<f32> = (0..n)
                .flat_map(|_| [coord(&mut r, w, how, false), coord(&mut r, h, how, false)])
                .collect();
            let want: Vec<[f32; 4]> = xy
                .chunks(2)
                .zip(&lay)
                .map(|(p, &l)| c2.sample_2d_layered(p[0], p[1], l as usize))
                .collect();
            assert_fetches(
                &format!("layered 2-D half4 {filter:?}"),
                &gpu_fetch(Fetch::Layered2, &t2, &xy, &lay),
                &want,
                4,
                tolerance(&desc, 2),
            );
        }
    }
}

/// Directions to points inside texels of random faces (`s`, `t` at least 10% of a texel from
/// its edges), with the cube index for layered cubemaps.
fn cube_points(r: &mut Rng, w: usize, n: usize, cubes: usize) -> (Vec<f32>, Vec<i32>) {
    let mut xyz = Vec::new();
    let mut cube = Vec::new();
    for _ in 0..n {
        let face = r.usize(0..6);
        let s = (r.usize(0..w) as f32 + 0.1 + 0.8 * r.f32()) / w as f32;
        let t = (r.usize(0..w) as f32 + 0.1 + 0.8 * r.f32()) / w as f32;
        xyz.extend(cubemap_direction(face, s, t));
        cube.push(r.i32(0..cubes as i32));
    }
    (xyz, cube)
}

fn cubemap_fetches_match_the_cpu_sampler() {
    let mut r = rng();
    let desc = TextureDesc {
        normalized_coords: true,
        ..TextureDesc::default()
    };
    let w = 1 << r.u32(2..6);
    let shape = ArrayShape::Cubemap { width: w };
    let data = random_texels::<[f32; 4]>(&mut r, w * w * 6);
    let mut a = Array::<[f32; 4]>::new(shape, ArrayFlags::empty()).unwrap();
    a.copy_from_host(&data).unwrap();
    let tex = TextureObject::from_array(&a, &desc).unwrap();
    let cpu = CpuTexture::new(&data, shape, desc).unwrap();
    let (xyz, _) = cube_points(&mut r, w, 3000, 1);
    let want: Vec<[f32; 4]> = xyz
        .chunks(3)
        .map(|p| cpu.sample_cubemap(p[0], p[1], p[2]))
        .collect();
    assert_fetches(
        "cubemap",
        &gpu_fetch(Fetch::Cube, &tex, &xyz, &[]),
        &want,
        4,
        0.0,
    );
    // Layered cubemaps.
    let cubes = r.usize(1..4);
    let shape = ArrayShape::LayeredCubemap { width: w, cubes };
    let data = random_texels::<f32>(&mut r, w * w * 6 * cubes);
    let mut a = Array::<f32>::new(shape, ArrayFlags::empty()).unwrap();
    a.copy_from_host(&data).unwrap();
    let tex = TextureObject::from_array(&a, &desc).unwrap();
    let cpu = CpuTexture::new(&data, shape, desc).unwrap();
    let (xyz, cube) = cube_points(&mut r, w, 3000, cubes);
    let want: Vec<[f32; 4]> = xyz
        .chunks(3)
        .zip(&cube)
        .map(|(p, &c)| cpu.sample_cubemap_layered(p[0], p[1], p[2], c as usize))
        .collect();
    assert_fetches(
        "layered cubemap",
        &gpu_fetch(Fetch::CubeLayered, &tex, &xyz, &cube),
        &want,
        1,
        0.0,
    );
}

fn gather_matches_the_cpu_sampler() {
    let mut r = rng();
    let (w, h) = (r.usize(2..60), r.usize(2..60));
    let shape = ArrayShape::D2 {
        width: w,
        height: h,
    };
    let data = random_texels::<[f32; 4]>(&mut r, w * h);
    let mut a = Array::<[f32; 4]>::new(shape, ArrayFlags::TEXTURE_GATHER).unwrap();
    a.copy_from_host(&data).unwrap();
    let desc = TextureDesc::default();
    let tex = TextureObject::from_array(&a, &desc).unwrap();
    let cpu = CpuTexture::new(&data, shape, desc).unwrap();
    for comp in 0..4 {
        let xy: Vec<f32> = (0..2000)
            .flat_map(|_| {
                [
                    coord(&mut r, w, Coords::Exact, false),
                    coord(&mut r, h, Coords::Exact, false),
                ]
            })
            .collect();
        let want: Vec<[f32; 4]> = xy
            .chunks(2)
            .map(|p| cpu.gather_2d(p[0], p[1], comp as usize))
            .collect();
        assert_fetches(
            &format!("tex2Dgather component {comp}"),
            &gpu_fetch(Fetch::Gather(comp), &tex, &xy, &[]),
            &want,
            4,
            0.0,
        );
    }
}

fn mipmap_levels_are_sampled_by_level_of_detail() {
    let mut r = rng();
    let (w, h) = (1 << r.u32(3..8), 1 << r.u32(3..7));
    let shape = ArrayShape::D2 {
        width: w,
        height: h,
    };
    let levels = shape.max_levels();
    let mip = MipmappedArray::<[f32; 2]>::new(shape, levels, ArrayFlags::empty()).unwrap();
    let mut data = Vec::new();
    for l in 0..levels {
        let mut lv = mip.level(l).unwrap();
        assert_eq!(lv.shape(), shape.level(l));
        let d = random_texels::<[f32; 2]>(&mut r, lv.len());
        lv.copy_from_host(&d).unwrap();
        data.push(d);
    }
    let desc = TextureDesc {
        normalized_coords: true,
        ..TextureDesc::default()
    };
    let tex = TextureObject::from_mipmapped(&mip, &desc).unwrap();
    // A level view keeps the mipmapped array alive.
    let keep = mip.level(1).unwrap();
    drop(mip);
    assert_same(
        "level 1 after its mipmapped array's handle is gone",
        &keep.to_vec().unwrap(),
        &data[1],
    );
    let n = 3000;
    let mut xyl = Vec::new();
    let mut want = Vec::new();
    for _ in 0..n {
        let l = r.u32(0..levels);
        let ls = shape.level(l);
        let e = ls.extent();
        let cpu = CpuTexture::new(&data[l as usize], ls, desc).unwrap();
        let (x, y) = (
            coord(&mut r, e.width, Coords::Interior, true),
            coord(&mut r, e.height, Coords::Interior, true),
        );
        xyl.extend([x, y, l as f32]);
        want.push(cpu.sample_2d(x, y));
    }
    assert_fetches(
        "tex2DLod at whole levels",
        &gpu_fetch(Fetch::Lod, &tex, &xyl, &[]),
        &want,
        2,
        0.0,
    );
}

fn pitched_texture_matches_the_cpu_sampler() {
    let mut r = rng();
    let (w, h) = (r.usize(1..300), r.usize(1..60));
    let data = random_texels::<f32>(&mut r, w * h);
    let mut p = PitchedBuffer::<f32>::new_2d(w, h).unwrap();
    copy_3d(
        &mut p,
        &HostPitched::new(&data, w, h).unwrap(),
        &Copy3D::new(Extent::d2(w, h)),
    )
    .unwrap();
    let shape = ArrayShape::D2 {
        width: w,
        height: h,
    };
    for filter in [FilterMode::Point, FilterMode::Linear] {
        let desc = TextureDesc {
            filter_mode: filter,
            ..TextureDesc::default()
        };
        let tex = TextureObject::from_pitched(&p, &desc).unwrap();
        let cpu = CpuTexture::new(&data, shape, desc).unwrap();
        let how = if filter == FilterMode::Point {
            Coords::Interior
        } else {
            Coords::Exact
        };
        let xy: Vec<f32> = (0..3000)
            .flat_map(|_| [coord(&mut r, w, how, false), coord(&mut r, h, how, false)])
            .collect();
        let want: Vec<[f32; 4]> = xy.chunks(2).map(|q| cpu.sample_2d(q[0], q[1])).collect();
        assert_fetches(
            &format!("pitch-2D {filter:?} {w}x{h}"),
            &gpu_fetch(Fetch::D2, &tex, &xy, &[]),
            &want,
            1,
            tolerance(&desc, 2),
        );
    }
}

fn surfaces_write_what_the_array_holds() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let flags = ArrayFlags::SURFACE_LOAD_STORE;
    // 2-D: write, then read-modify-write, then read through a texture.
    let (w, h) = (r.usize(1..200), r.usize(1..100));
    let src = random_texels::<f32>(&mut r, w * h);
    let mut a = Array::<f32>::new_2d(w, h, flags).unwrap();
    a.copy_from_host(&vec![f32::NAN; w * h]).unwrap();
    let mut surf = SurfaceObject::new(&a).unwrap();
    let d = DeviceBuffer::from_slice(&src).unwrap();
    // Larger width and height than the surface: writes outside are dropped, not faults.
    kernels::texture::surf_write_2d(&s, &cfg(w * h), &mut surf, &d, w as i32, h as i32).unwrap();
    kernels::texture::surf_scale_2d(&s, &cfg(w * h), &mut surf, w as i32 + 3, h as i32 + 2, -2.0)
        .unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = src.iter().map(|v| v * -2.0).collect();
    assert_same("surface write then scale", &a.to_vec().unwrap(), &want);
    // Widths whose byte offsets would wrap an int are refused before the launch (review
    // finding: they re-read and re-wrote texels near 0), and nothing runs.
    let e = kernels::texture::surf_scale_2d(&s, &cfg(w * h), &mut surf, 536_870_912, 1, 7.0)
        .unwrap_err();
    assert!(matches!(e, Error::KernelPrecondition { .. }), "{e}");
    assert!(e.to_string().contains("536870911"), "{e}");
    s.synchronize().unwrap();
    assert_same("after a refused launch", &a.to_vec().unwrap(), &want);
    let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
    let xy: Vec<f32> = (0..w * h)
        .flat_map(|i| [(i % w) as f32 + 0.5, (i / w) as f32 + 0.5])
        .collect();
    let got: Vec<f32> = gpu_fetch(Fetch::D2, &tex, &xy, &[])
        .chunks(4)
        .map(|c| c[0])
        .collect();
    assert_same(
        "texture read of the surface's writes (a later launch)",
        &got,
        &want,
    );
    // Layered 2-D.
    let layers = r.usize(1..5);
    let (w, h) = (r.usize(1..64), r.usize(1..32));
    let src = random_texels::<f32>(&mut r, w * h * layers);
    let la = Array::<f32>::new_layered_2d(w, h, layers, flags).unwrap();
    let mut ls = SurfaceObject::new(&la).unwrap();
    let d = DeviceBuffer::from_slice(&src).unwrap();
    kernels::texture::surf_write_2d_layered(
        &s,
        &cfg(src.len()),
        &mut ls,
        &d,
        w as i32,
        h as i32,
        layers as i32,
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_same("layered surface", &la.to_vec().unwrap(), &src);
    // Cubemap faces.
    let w = r.usize(1..32);
    let src = random_texels::<f32>(&mut r, 6 * w * w);
    let ca = Array::<f32>::new_cubemap(w, flags).unwrap();
    let mut cs = SurfaceObject::new(&ca).unwrap();
    let d = DeviceBuffer::from_slice(&src).unwrap();
    kernels::texture::surf_write_cubemap(&s, &cfg(src.len()), &mut cs, &d, w as i32).unwrap();
    s.synchronize().unwrap();
    assert_same("cubemap surface", &ca.to_vec().unwrap(), &src);
}

/// A host function that blocks its stream until `release` is set (or 20 s passed), then sets
/// `done`: while `done` is unset, nothing queued behind it on its stream has run.
fn stall_until(release: Arc<AtomicBool>, done: Arc<AtomicBool>) -> impl FnOnce() + Send + 'static {
    move || {
        let t = Instant::now();
        while !release.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        done.store(true, Ordering::SeqCst);
    }
}

fn dropping_textures_and_arrays_under_queued_kernels_is_safe() {
    let mut r = rng();
    let dev = Device::current().unwrap();
    let s1 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let s2 = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let (w, h) = (64usize, 48usize);
    let xy: Vec<f32> = (0..w * h)
        .flat_map(|i| [(i % w) as f32 + 0.5, (i / w) as f32 + 0.5])
        .collect();
    let dxy = DeviceBuffer::from_slice(&xy).unwrap();
    // The kernel's module is loaded first: loading a module waits for the context's host
    // functions to return (seen on the H200 pair, driver 580: a first launch behind the
    // stalled streams took their 20 s), which is the driver's, not a drop's, wait.
    kernels::texture::SAMPLE_2D.function().unwrap();
    for linear in [false, true] {
        let data = random_texels::<f32>(&mut r, w * h);
        let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * w * h]).unwrap();
        // An unrelated stream stalled by a host function: no drop may wait for it.
        let release = Arc::new(AtomicBool::new(false));
        let (done1, done2) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        // The memory is made and filled before the streams stall: a synchronous copy from
        // pageable memory into an array waited for the stalled streams' host functions (seen
        // on the H200 pair, driver 580), which is not what this test is about.
        let mut pitched = PitchedBuffer::<f32>::new_2d(w, h).unwrap();
        copy_3d(
            &mut pitched,
            &HostPitched::new(&data, w, h).unwrap(),
            &Copy3D::new(Extent::d2(w, h)),
        )
        .unwrap();
        let mut array = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
        array.copy_from_host(&data).unwrap();
        s2.launch_host_fn(stall_until(release.clone(), done2.clone()))
            .unwrap();
        // The texture's kernel waits on s1 behind a host function held until `release`.
        s1.launch_host_fn(stall_until(release.clone(), done1.clone()))
            .unwrap();
        if linear {
            drop(array);
            // A pitched buffer is the memory; the texture borrows it, so the buffer can only be
            // dropped after the texture (a compile error otherwise; see TextureObject docs).
            let p = pitched;
            let tex = TextureObject::from_pitched(&p, &TextureDesc::default()).unwrap();
            kernels::texture::sample_2d(&s1, &cfg(w * h), &tex, &dxy, &mut out).unwrap();
            drop(tex);
            drop(p);
        } else {
            drop(pitched);
            let t = std::time::Instant::now();
            let a = array;
            let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
            let t_tex = t.elapsed();
            kernels::texture::sample_2d(&s1, &cfg(w * h), &tex, &dxy, &mut out).unwrap();
            let t_launch = t.elapsed();
            drop(tex);
            let t_drop_tex = t.elapsed();
            drop(a);
            eprintln!(
                "array round: texture {t_tex:?}, launch {t_launch:?}, texture dropped \
                 {t_drop_tex:?}, array dropped {:?}",
                t.elapsed()
            );
        }
        // Neither gate has opened: the drops returned without waiting for the queued kernel
        // or the stalled stream (had they waited, the gates' 20 s limit would have passed).
        assert!(
            !done1.load(Ordering::SeqCst) && !done2.load(Ordering::SeqCst),
            "linear {linear}: dropping the texture and its memory waited for the queued kernel or the stalled stream"
        );
        // Objects made now would take the old handle numbers and memory, were those freed.
        let other = vec![12345.0f32; w * h];
        let mut decoys = Vec::new();
        for _ in 0..4 {
            let mut a = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
            a.copy_from_host(&other).unwrap();
            let t = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
            decoys.push((a, t));
        }
        release.store(true, Ordering::SeqCst);
        s1.synchronize().unwrap();
        let got: Vec<f32> = out.to_vec().unwrap().chunks(4).map(|c| c[0]).collect();
        assert_same(
            &format!("linear {linear}: the kernel queued before the drop read the dropped texture"),
            &got,
            &data,
        );
        s2.synchronize().unwrap();
        drop(decoys);
        // The arrays' destruction (which waits for the whole device) is done before the next
        // round stalls a stream again.
        dev.synchronize().unwrap();
    }
    dev.synchronize().unwrap();
    let deferred = dev.take_deferred_errors();
    assert!(deferred.is_empty(), "errors met in drops: {deferred:?}");
}

fn array_drops_beside_stream_ordered_allocations_do_not_hang() {
    let out = run_in_child_within("texture_array_drops", Duration::from_secs(90));
    assert!(out.contains("array drops child ok"), "{out}");
}

/// One thread allocates and frees in stream order while another makes, uses and drops arrays
/// and textures (whose destruction waits for the whole device, from the crate's background
/// thread): the mix that deadlocked the driver for host-memory frees.
fn array_drops_child() {
    let stop = Arc::new(AtomicBool::new(false));
    let pool = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
            let mut rounds = 0u32;
            while !stop.load(Ordering::SeqCst) {
                let mut b = DeviceBuffer::<u32>::new_async(1 << 20, &s).unwrap();
                kernels::spin::write_index(
                    &s,
                    &LaunchConfig::for_elements(1 << 20, 256).unwrap(),
                    &mut b,
                )
                .unwrap();
                drop(b);
                s.synchronize().unwrap();
                rounds += 1;
            }
            rounds
        })
    };
    let mut r = rng();
    let s = Stream::new().unwrap();
    let start = Instant::now();
    let mut arrays = 0;
    while start.elapsed() < Duration::from_secs(5) {
        let (w, h) = (r.usize(1..512), r.usize(1..512));
        let data = random_texels::<f32>(&mut r, w * h);
        let mut a = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
        a.copy_from_host_async(&data, &s).unwrap();
        let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
        let xy = DeviceBuffer::from_slice(&[0.5f32, 0.5]).unwrap();
        let mut out = DeviceBuffer::<f32>::new(4).unwrap();
        kernels::texture::sample_2d(&s, &cfg(1), &tex, &xy, &mut out).unwrap();
        drop(tex);
        drop(a);
        if arrays % 16 == 0 {
            s.synchronize().unwrap();
            assert_eq!(out.to_vec().unwrap()[0], data[0]);
        }
        arrays += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let rounds = pool.join().unwrap();
    Device::current().unwrap().synchronize().unwrap();
    println!("{arrays} arrays beside {rounds} stream-ordered allocations");
    println!("array drops child ok");
}

/// A user kernel (the crate's texture PTX loaded as a user module) given a texture through
/// `kernel_args!`: the texture and its array are dropped while the launch waits behind a spin;
/// decoys made right after must not take over the handle or the memory (review finding: the
/// raw handle's use was not noted, so the texture was destroyed at once).
fn user_launch_with_a_texture_keeps_it_until_the_kernel_ran() {
    use cuda_runtime::{kernel_args, Module};
    let mut r = rng();
    let m = Module::from_ptx(kernels::texture::PTX).unwrap();
    let sample = m.function("sample_2d").unwrap();
    let (w, h) = (r.usize(8..64), r.usize(8..32));
    let data = random_texels::<f32>(&mut r, w * h);
    let s = Stream::new().unwrap();
    let xy: Vec<f32> = (0..w * h)
        .flat_map(|i| [(i % w) as f32 + 0.5, (i / w) as f32 + 0.5])
        .collect();
    let xy = DeviceBuffer::from_slice(&xy).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * w * h]).unwrap();
    let mut stamps = DeviceBuffer::<u64>::new(2).unwrap();
    {
        let mut a = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
        a.copy_from_host(&data).unwrap();
        let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
        kernels::spin::spin(
            &s,
            &LaunchConfig::new(1u32, 1u32),
            &mut stamps,
            200_000_000,
            0,
        )
        .unwrap();
        let (xy_len, out_len) = (xy.len(), out.len());
        // SAFETY: sample_2d reads min(xy_len / 2, out_len / 4) coordinate pairs and writes as
        // many float4 results: both lengths are the buffers' own.
        unsafe {
            sample.launch(
                &s,
                &cfg(w * h),
                &kernel_args![&tex, &xy, xy_len, &mut out, out_len],
            )
        }
        .unwrap();
        drop(tex);
        drop(a);
    }
    // Decoys: new arrays and textures with other data, made while the launch still waits.
    let junk = vec![-1.0e6f32; w * h];
    let mut decoys = Vec::new();
    for _ in 0..4 {
        let mut d = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
        d.copy_from_host(&junk).unwrap();
        decoys.push(d);
    }
    let decoy_tex: Vec<_> = decoys
        .iter()
        .map(|d| TextureObject::from_array(d, &TextureDesc::default()).unwrap())
        .collect();
    s.synchronize().unwrap();
    let got: Vec<f32> = out.to_vec().unwrap().chunks(4).map(|c| c[0]).collect();
    assert_same("user kernel's fetches of the dropped texture", &got, &data);
    // The module is unloaded before the decoys are destroyed, and after the dropped array's
    // destroy had its chance (`Device::synchronize` buries what is ready): under
    // compute-sanitizer racecheck, `cuModuleUnload` beside the reclaimer's `cuArrayDestroy`
    // stalled in 6 of 20 runs (sixteenth session, H200 x2, driver 580: the unload inside the
    // tool's callback waiting on a driver mutex, the destroy on a driver rwlock, no crate lock
    // held; never without the tool; not reproduced with the driver alone,
    // `probes/racecheck_unload_destroy.cu`). The order changes nothing the test checks.
    Device::current().unwrap().synchronize().unwrap();
    drop(sample);
    drop(m);
    drop(decoy_tex);
    drop(decoys);
    let errors = Device::current().unwrap().take_deferred_errors();
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

/// Two handles to one mipmap level (review finding): a copy between overlapping regions of the
/// same array is refused (undefined for the driver), a disjoint one works and is checked.
fn overlapping_copies_within_one_mipmap_level_are_refused() {
    let mut r = rng();
    let (w, h) = (64usize, 64usize);
    let mip = MipmappedArray::<f32>::new(
        ArrayShape::D2 {
            width: w,
            height: h,
        },
        2,
        ArrayFlags::empty(),
    )
    .unwrap();
    let mut a = mip.level(0).unwrap();
    let b = mip.level(0).unwrap();
    let data = random_texels::<f32>(&mut r, w * h);
    a.copy_from_host(&data).unwrap();
    let e = copy_3d(
        &mut a,
        &b,
        &Copy3D::new(Extent::d2(32, 32)).dst_pos(Pos::new(1, 1, 0)),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    assert_same("after the refused copy", &b.to_vec().unwrap(), &data);
    // Disjoint: the left half's top 32 rows copied to the right half.
    copy_3d(
        &mut a,
        &b,
        &Copy3D::new(Extent::d2(32, 32)).dst_pos(Pos::new(32, 0, 0)),
    )
    .unwrap();
    let mut want = data.clone();
    for y in 0..32 {
        for x in 0..32 {
            want[y * w + 32 + x] = data[y * w + x];
        }
    }
    assert_same("after the disjoint copy", &b.to_vec().unwrap(), &want);
}

/// Review finding: the crate's texture kernels declare what they fetch, and the wrappers refuse
/// a texture or surface of another shape or element type (which would return garbage, silently)
/// before anything is queued.
fn crate_kernels_refuse_textures_of_another_kind() {
    let s = Stream::new().unwrap();
    let n = 64usize;
    let ints = DeviceBuffer::from_slice(&(0..4 * n as u32).collect::<Vec<u32>>()).unwrap();
    let linear_u = TextureObject::from_linear(&ints, &TextureDesc::default()).unwrap();
    let xy = DeviceBuffer::from_slice(&vec![0.5f32; 2 * n]).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * n]).unwrap();
    // A 2-D float fetch of a 1-D integer texture.
    let e = kernels::texture::sample_2d(&s, &cfg(n), &linear_u, &xy, &mut out).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    assert!(e.to_string().contains("linear"), "{e}");
    // A 4-byte float surface kernel on a surface of 1-byte texels.
    let small = Array::<u8>::new_2d(8, 8, ArrayFlags::SURFACE_LOAD_STORE).unwrap();
    let mut surf = SurfaceObject::new(&small).unwrap();
    let e = kernels::texture::surf_scale_2d(&s, &cfg(64), &mut surf, 8, 8, 2.0).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    // Nothing ran: the output is untouched.
    s.synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|v| v.is_nan()));
    // The right kinds still work.
    let floats = random_texels::<f32>(&mut rng(), 16 * 16);
    let mut a = Array::<f32>::new_2d(16, 16, ArrayFlags::empty()).unwrap();
    a.copy_from_host(&floats).unwrap();
    let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
    kernels::texture::sample_2d(&s, &cfg(n), &tex, &xy, &mut out).unwrap();
    s.synchronize().unwrap();
    assert!(out.to_vec().unwrap().chunks(4).all(|c| c[0] == floats[0]));
}

/// Found on the H200 pair: `cuArrayDestroy` waits for the whole device and meanwhile holds a
/// lock of the driver that creating arrays, events and texture objects needs. An array dropped
/// (unused) while an unrelated stream is stalled by a host function must not make this
/// thread's next creations and copies wait for the stall (the crate destroys arrays once the
/// device is idle, or after a grace period much longer than this test's calls).
fn an_array_dropped_beside_a_stalled_stream_holds_up_no_other_call() {
    let mut r = rng();
    let (w, h) = (r.usize(8..64), r.usize(8..64));
    let data = random_texels::<f32>(&mut r, w * h);
    let stalled = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    stalled
        .launch_host_fn(stall_until(release.clone(), done.clone()))
        .unwrap();
    // Let the host function start (it then runs until released, or 20 s).
    std::thread::sleep(Duration::from_millis(20));
    let old = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
    drop(old);
    // Creations and an asynchronous copy on another stream, right after the drop.
    let mut a = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).unwrap();
    let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
    let ev = cuda_runtime::Event::new().unwrap();
    let s = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let pinned = cuda_runtime::PinnedBuffer::from_slice(&data).unwrap();
    let mut dev = DeviceBuffer::<f32>::new(w * h).unwrap();
    dev.copy_from_pinned_async(&pinned, &s).unwrap();
    assert!(
        !done.load(Ordering::SeqCst),
        "creating an array, a texture and an event beside a dropped array waited for the \
         stalled stream"
    );
    release.store(true, Ordering::SeqCst);
    stalled.synchronize().unwrap();
    s.synchronize().unwrap();
    // The new array works: its contents round-trip.
    a.copy_from_host(&data).unwrap();
    assert_same("array after the stall", &a.to_vec().unwrap(), &data);
    assert_same(
        "copy queued beside the stall",
        &dev.to_vec().unwrap(),
        &data,
    );
    drop((tex, ev));
}

/// The crate's own texture and surface kernels on a captured stream are refused, and the
/// capture's end fails (review finding, fourteenth session: they were captured; the graph kept
/// the memory, not the objects, so dropping the texture, the surface and the array let their
/// handles be destroyed while the executable could still replay them). Outside the capture the
/// same launches work and their results match the data.
fn crate_texture_kernels_are_refused_in_captures() {
    let mut r = rng();
    let s = Stream::new().unwrap();
    let (w, h) = (r.usize(1..64), r.usize(1..32));
    let data = random_texels::<f32>(&mut r, w * h);
    let mut a = Array::<f32>::new_2d(w, h, ArrayFlags::SURFACE_LOAD_STORE).unwrap();
    a.copy_from_host(&vec![f32::NAN; w * h]).unwrap();
    let tex = TextureObject::from_array(&a, &TextureDesc::default()).unwrap();
    let xy: Vec<f32> = (0..w * h)
        .flat_map(|i| [(i % w) as f32 + 0.5, (i / w) as f32 + 0.5])
        .collect();
    let xy = DeviceBuffer::from_slice(&xy).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; 4 * w * h]).unwrap();
    let d = DeviceBuffer::from_slice(&data).unwrap();
    {
        let mut surf = SurfaceObject::new(&a).unwrap();
        let cap = s.begin_capture(CaptureMode::Global).unwrap();
        let e = kernels::texture::surf_write_2d(&s, &cfg(w * h), &mut surf, &d, w as i32, h as i32)
            .unwrap_err();
        assert!(matches!(e, Error::NotCapturable { .. }), "surface: {e:?}");
        assert!(cap.end().is_err(), "the capture's end must fail");
        // Outside a capture the same write works.
        kernels::texture::surf_write_2d(&s, &cfg(w * h), &mut surf, &d, w as i32, h as i32)
            .unwrap();
    }
    let cap = s.begin_capture(CaptureMode::Relaxed).unwrap();
    let e = kernels::texture::sample_2d(&s, &cfg(w * h), &tex, &xy, &mut out).unwrap_err();
    assert!(matches!(e, Error::NotCapturable { .. }), "texture: {e:?}");
    assert!(cap.end().is_err(), "the capture's end must fail");
    kernels::texture::sample_2d(&s, &cfg(w * h), &tex, &xy, &mut out).unwrap();
    s.synchronize().unwrap();
    let got: Vec<f32> = out.to_vec().unwrap().chunks(4).map(|c| c[0]).collect();
    assert_same("fetches after the refused capture", &got, &data);
}
