//! The simpleCubemapTexture study: a cubemap array of six faces, read with `texCubemap` at the
//! direction of every texel centre of every face. Verifies that each fetch returns exactly that
//! texel (the face and face coordinates follow the programming guide's cubemap table, as the
//! crate's CPU model does).

use std::process::ExitCode;

use cuda_runtime::texture::cpu::cubemap_direction;
use cuda_runtime::{
    kernels, Array, ArrayFlags, DeviceBuffer, LaunchConfig, Stream, TextureDesc, TextureObject,
};

fn run() -> Result<bool, cuda_runtime::Error> {
    let w = 64usize;
    let n = 6 * w * w;
    let data: Vec<[f32; 2]> = (0..n).map(|i| [i as f32, -(i as f32) * 0.5]).collect();
    let mut cube = Array::<[f32; 2]>::new_cubemap(w, ArrayFlags::empty())?;
    cube.copy_from_host(&data)?;
    let desc = TextureDesc {
        normalized_coords: true,
        ..TextureDesc::default()
    };
    let tex = TextureObject::from_array(&cube, &desc)?;
    let mut xyz = Vec::with_capacity(3 * n);
    for i in 0..n {
        let (face, y, x) = (i / (w * w), (i / w) % w, i % w);
        let s = (x as f32 + 0.5) / w as f32;
        let t = (y as f32 + 0.5) / w as f32;
        xyz.extend(cubemap_direction(face, s, t));
    }
    let dxyz = DeviceBuffer::from_slice(&xyz)?;
    let mut out = DeviceBuffer::<f32>::new(4 * n)?;
    let stream = Stream::new()?;
    kernels::texture::sample_cubemap(
        &stream,
        &LaunchConfig::for_elements(n, 256)?,
        &tex,
        &dxyz,
        &mut out,
    )?;
    stream.synchronize()?;
    let got = out.to_vec()?;
    let bad = (0..n)
        .filter(|&i| got[4 * i] != data[i][0] || got[4 * i + 1] != data[i][1])
        .count();
    println!(
        "cubemap_texture: 6 faces of {w}x{w}, every texel fetched by direction, {bad} mismatches"
    );
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cubemap_texture: {e}");
            ExitCode::FAILURE
        }
    }
}
