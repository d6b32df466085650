//! Texture benchmarks, side by side in one process and primary context: texture object
//! create + destroy through this crate, the raw driver (`cuTexObjectCreate` / `Destroy`) and
//! NVIDIA's libcudart (`cudaCreateTextureObject` / `cudaDestroyTextureObject`, loaded at run time
//! from `/usr/local/cuda/lib64/libcudart.so` or `CUDA_RUNTIME_LIBCUDART`); 2-D host-to-array and
//! device-to-array copies of a 4096 x 4096 float array through the crate, `cuMemcpy2D` and
//! `cudaMemcpy2DToArray`; and streaming reads of 256 MiB of float4 through a linear texture
//! against plain global loads of the same data (the crate's `texture::stream_texture` and
//! `texture::stream_global` kernels). Criterion measures the crate's figures; a summary of
//! medians of interleaved batches with the ratios follows, with the targets.

mod common;

use std::ffi::c_void;
use std::hint::black_box;
use std::time::Instant;

use common::{ck, die, ok, CudaError};
use criterion::Criterion;
use cuda_runtime::{
    kernels, Array, ArrayFlags, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream, TextureDesc,
    TextureObject,
};
use cudarc::driver::sys;

/// libcudart's entry points used here. Its resource and texture descriptions are passed as
/// zeroed buffers larger than `cudaResourceDesc` / `cudaTextureDesc` (13.0 headers), with the
/// array handle at byte 8 of the resource description (after the 4-byte `resType`, 0 = array,
/// and its padding) and the texture description's three address modes set to clamp: all three
/// sides make the texture of the crate's `TextureDesc::default()` (clamp, point, element type).
struct Cudart {
    _lib: libloading::Library,
    create_tex:
        unsafe extern "C" fn(*mut u64, *const c_void, *const c_void, *const c_void) -> CudaError,
    destroy_tex: unsafe extern "C" fn(u64) -> CudaError,
    memcpy_2d_to_array: unsafe extern "C" fn(
        *mut c_void,
        usize,
        usize,
        *const c_void,
        usize,
        usize,
        usize,
        i32,
    ) -> CudaError,
}

impl Cudart {
    fn load() -> Option<Cudart> {
        let lib = common::open_libcudart()?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the field or binding it is stored
                // in (cuda_runtime_api.h of CUDA 13.0).
                unsafe { common::sym(&lib, $name) }
            };
        }
        Some(Cudart {
            create_tex: sym!(b"cudaCreateTextureObject\0"),
            destroy_tex: sym!(b"cudaDestroyTextureObject\0"),
            memcpy_2d_to_array: sym!(b"cudaMemcpy2DToArray\0"),
            _lib: lib,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Way {
    Crate,
    Driver,
    Cudart,
}

const W: usize = 4096;
const H: usize = 4096;
/// float4 texels streamed: 256 MiB.
const STREAM_TEXELS: usize = 16 << 20;

struct Setup {
    array: Array<f32>,
    host: PinnedBuffer<f32>,
    dev: DeviceBuffer<f32>,
    flat: DeviceBuffer<f32>,
    sums: DeviceBuffer<f32>,
    stream: Stream,
    cudart: Option<Cudart>,
}

/// One texture object created and destroyed.
fn create_destroy(s: &Setup, way: Way) {
    match way {
        Way::Crate => {
            let t = TextureObject::from_array(&s.array, &TextureDesc::default())
                .unwrap_or_else(|e| die(&e.to_string()));
            drop(black_box(t));
        }
        Way::Driver => {
            // SAFETY: plain C structs whose all-zero pattern is valid (array resource, wrap,
            // point); the array is live in the current context; valid out-parameter.
            unsafe {
                let mut res: sys::CUDA_RESOURCE_DESC = std::mem::zeroed();
                res.res.array.hArray = s.array.as_raw();
                let mut tex: sys::CUDA_TEXTURE_DESC = std::mem::zeroed();
                // The texture the crate makes from `TextureDesc::default()`: clamped
                // addressing, element-type (integer) reads.
                tex.addressMode = [sys::CUaddress_mode::CU_TR_ADDRESS_MODE_CLAMP; 3];
                tex.flags = sys::CU_TRSF_READ_AS_INTEGER;
                let mut obj: sys::CUtexObject = 0;
                ck(
                    sys::cuTexObjectCreate(&mut obj, &res, &tex, std::ptr::null()),
                    "cuTexObjectCreate",
                );
                ck(
                    sys::cuTexObjectDestroy(black_box(obj)),
                    "cuTexObjectDestroy",
                );
            }
        }
        Way::Cudart => {
            let Some(c) = &s.cudart else { return };
            let mut res = [0u64; 64];
            res[1] = s.array.as_raw() as u64;
            // `cudaTextureDesc.addressMode[0..3]` (ints at bytes 0, 4 and 8) clamped
            // (`cudaAddressModeClamp` = 1), as the crate's default; the rest zero: point
            // filtering, element-type reads.
            let mut tex = [0u64; 64];
            tex[0] = 1 | 1 << 32;
            tex[1] = 1;
            let mut obj = 0u64;
            // SAFETY: zeroed buffers larger than the runtime's structs, the array handle in
            // `res.array.array`; valid out-parameter.
            unsafe {
                ok(
                    (c.create_tex)(
                        &mut obj,
                        res.as_ptr().cast(),
                        tex.as_ptr().cast(),
                        std::ptr::null(),
                    ),
                    "cudaCreateTextureObject",
                );
                ok((c.destroy_tex)(black_box(obj)), "cudaDestroyTextureObject");
            }
        }
    }
}

/// One whole-array 2-D copy from page-locked host memory (`from_host`) or device memory.
fn copy_2d(s: &mut Setup, way: Way, from_host: bool) {
    let (src_host, src_dev) = (
        s.host
            .as_slice()
            .unwrap_or_else(|e| die(&e.to_string()))
            .as_ptr(),
        s.dev.as_raw(),
    );
    match way {
        Way::Crate => {
            let r = if from_host {
                let host = s.host.as_slice().unwrap_or_else(|e| die(&e.to_string()));
                s.array.copy_from_host(&host)
            } else {
                s.array.copy_from_device(&s.dev)
            };
            r.unwrap_or_else(|e| die(&e.to_string()));
            if !from_host {
                cuda_runtime::device::synchronize().unwrap_or_else(|e| die(&e.to_string()));
            }
        }
        Way::Driver => {
            // (Not `mem::zeroed`: the memory-type enumeration has no zero value.)
            let p = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: if from_host {
                    sys::CUmemorytype::CU_MEMORYTYPE_HOST
                } else {
                    sys::CUmemorytype::CU_MEMORYTYPE_DEVICE
                },
                srcHost: if from_host {
                    src_host.cast()
                } else {
                    std::ptr::null()
                },
                srcDevice: if from_host { 0 } else { src_dev },
                srcArray: std::ptr::null_mut(),
                srcPitch: W * 4,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
                dstHost: std::ptr::null_mut(),
                dstDevice: 0,
                dstArray: s.array.as_raw(),
                dstPitch: 0,
                WidthInBytes: W * 4,
                Height: H,
            };
            // SAFETY: both sides hold W x H floats; the array is live in the current context.
            unsafe {
                ck(sys::cuMemcpy2D_v2(&p), "cuMemcpy2D");
                if !from_host {
                    ck(sys::cuCtxSynchronize(), "cuCtxSynchronize");
                }
            }
        }
        Way::Cudart => {
            let Some(c) = &s.cudart else { return };
            let (src, kind) = if from_host {
                (src_host.cast::<c_void>(), 1)
            } else {
                (src_dev as *const c_void, 3)
            };
            // SAFETY: as above; kinds 1 = host to device, 3 = device to device; a CUarray is a
            // cudaArray_t.
            unsafe {
                ok(
                    (c.memcpy_2d_to_array)(
                        s.array.as_raw().cast(),
                        0,
                        0,
                        src,
                        W * 4,
                        W * 4,
                        H,
                        kind,
                    ),
                    "cudaMemcpy2DToArray",
                );
            }
            if !from_host {
                cuda_runtime::device::synchronize().unwrap_or_else(|e| die(&e.to_string()));
            }
        }
    }
}

/// One streaming pass over 256 MiB, through a texture or plain global loads.
fn stream_pass(s: &mut Setup, texture: bool, tex: &TextureObject<'_>) {
    let cfg = LaunchConfig::new(132u32 * 8, 512u32);
    let r = if texture {
        kernels::texture::stream_texture(&s.stream, &cfg, tex, STREAM_TEXELS as u64, &mut s.sums)
    } else {
        // As many bytes, as floats.
        kernels::texture::stream_global(&s.stream, &cfg, &s.flat, &mut s.sums)
    };
    r.unwrap_or_else(|e| die(&e.to_string()));
    s.stream
        .synchronize()
        .unwrap_or_else(|e| die(&e.to_string()));
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn time(n: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_secs_f64() / n as f64
}

fn main() {
    match cuda_runtime::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => {
            println!("texture bench: no CUDA device; nothing to measure");
            return;
        }
        Err(e) => {
            println!("texture bench: {e}; nothing to measure");
            return;
        }
    }
    let mk = || -> cuda_runtime::Result<Setup> {
        let mut host = PinnedBuffer::<f32>::new(W * H)?;
        for (i, v) in host.as_mut_slice()?.iter_mut().enumerate() {
            *v = (i % 1000) as f32;
        }
        let dev = DeviceBuffer::from_slice(&host.as_slice()?)?;
        Ok(Setup {
            array: Array::new_2d(W, H, ArrayFlags::empty())?,
            dev,
            host,
            flat: DeviceBuffer::zeroed(STREAM_TEXELS * 4)?,
            sums: DeviceBuffer::zeroed(132 * 8 * 512)?,
            stream: Stream::new()?,
            cudart: Cudart::load(),
        })
    };
    let mut s = mk().unwrap_or_else(|e| die(&e.to_string()));
    let big =
        DeviceBuffer::<[f32; 4]>::zeroed(STREAM_TEXELS).unwrap_or_else(|e| die(&e.to_string()));
    let big_tex = TextureObject::from_linear(&big, &TextureDesc::default())
        .unwrap_or_else(|e| die(&e.to_string()));

    let mut c = Criterion::default().configure_from_args();
    c.bench_function("texture object create + destroy (crate)", |b| {
        b.iter(|| create_destroy(&s, Way::Crate))
    });
    c.bench_function("2-D host-to-array copy 64 MiB (crate)", |b| {
        b.iter(|| copy_2d(&mut s, Way::Crate, true))
    });
    c.bench_function("2-D device-to-array copy 64 MiB (crate)", |b| {
        b.iter(|| copy_2d(&mut s, Way::Crate, false))
    });
    c.bench_function("streaming 256 MiB through a texture", |b| {
        b.iter(|| stream_pass(&mut s, true, &big_tex))
    });
    c.bench_function("streaming 256 MiB through global loads", |b| {
        b.iter(|| stream_pass(&mut s, false, &big_tex))
    });

    // Interleaved batches, medians.
    let ways = [Way::Crate, Way::Driver, Way::Cudart];
    let rounds = 15;
    let mut create = vec![Vec::new(); 3];
    let mut h2a = vec![Vec::new(); 3];
    let mut d2a = vec![Vec::new(); 3];
    let (mut via_tex, mut via_global) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for i in common::turns(round, ways.len()) {
            let w = ways[i];
            if w == Way::Cudart && s.cudart.is_none() {
                continue;
            }
            create[i].push(time(2000, || create_destroy(&s, w)));
            h2a[i].push(time(3, || copy_2d(&mut s, w, true)));
            d2a[i].push(time(10, || copy_2d(&mut s, w, false)));
        }
        // Each timed batch follows an untimed pass of its own kind, and the two kinds take
        // turns going first: timed right after the 2-D copies above, the first passes of
        // whichever kind came first ran slower (the texture reads, always first, came out at
        // 0.92x the global loads here while criterion's runs and a CUDA C++ probe,
        // probes/tex_stream_configs.cu, gave 0.97x to 0.99x).
        for texture in [round % 2 == 0, round % 2 != 0] {
            stream_pass(&mut s, texture, &big_tex);
            let t = time(10, || stream_pass(&mut s, texture, &big_tex));
            if texture {
                via_tex.push(t);
            } else {
                via_global.push(t);
            }
        }
    }
    let bytes = (W * H * 4) as f64;
    let m = |v: &Vec<f64>| {
        if v.is_empty() {
            f64::NAN
        } else {
            median(v.clone())
        }
    };
    println!();
    println!(
        "{:<44} {:>12} {:>12} {:>12} {:>10} {:>12}",
        "figure", "cuda-runtime", "driver", "libcudart", "vs driver", "vs libcudart"
    );
    let us = |v: f64| v * 1e6;
    let (c0, c1, c2) = (m(&create[0]), m(&create[1]), m(&create[2]));
    println!(
        "{:<44} {:>12.3} {:>12.3} {:>12.3} {:>9.3}x {:>11.3}x",
        "texture object create + destroy (us)",
        us(c0),
        us(c1),
        us(c2),
        c0 / c1,
        c0 / c2
    );
    for (name, v) in [
        ("2-D host-to-array 64 MiB (GB/s)", &h2a),
        ("2-D device-to-array 64 MiB (GB/s)", &d2a),
    ] {
        let gbs = |t: f64| bytes / t / 1e9;
        let (a, b, c) = (gbs(m(&v[0])), gbs(m(&v[1])), gbs(m(&v[2])));
        println!(
            "{name:<44} {a:>12.2} {b:>12.2} {c:>12.2} {:>9.3}x {:>11.3}x",
            a / b,
            a / c
        );
    }
    let sb = (STREAM_TEXELS * 16) as f64;
    let (t, g) = (sb / m(&via_tex) / 1e9, sb / m(&via_global) / 1e9);
    println!(
        "{:<44} {t:>12.1} {g:>12.1} {:>12} {:>9.3}x",
        "stream 256 MiB: texture / global loads (GB/s)",
        "",
        t / g
    );
    println!();
    println!("targets: texture streaming >= 0.95x global loads; 2-D copies >= 0.98x libcudart;");
    println!("         create + destroy <= 1.05x the driver and below libcudart.");
    drop(big_tex);
}
