//! The simpleSurfaceWrite study: a kernel writes an image into a CUDA array through a surface
//! object, a second kernel reads and rewrites it in place (scaled), and a texture over the same
//! array reads it back in a later launch. Verifies every texel exactly.

use std::process::ExitCode;

use cuda_runtime::{
    kernels, Array, ArrayFlags, DeviceBuffer, LaunchConfig, Stream, SurfaceObject, TextureDesc,
    TextureObject,
};

fn run() -> Result<bool, cuda_runtime::Error> {
    let (w, h) = (640usize, 480usize);
    let img: Vec<f32> = (0..w * h)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.25)
        .collect();
    let src = DeviceBuffer::from_slice(&img)?;
    let array = Array::<f32>::new_2d(w, h, ArrayFlags::SURFACE_LOAD_STORE)?;
    let mut surf = SurfaceObject::new(&array)?;
    let stream = Stream::new()?;
    let cfg = LaunchConfig::for_elements(w * h, 256)?;
    kernels::texture::surf_write_2d(&stream, &cfg, &mut surf, &src, w as i32, h as i32)?;
    kernels::texture::surf_scale_2d(&stream, &cfg, &mut surf, w as i32, h as i32, 3.0)?;
    // Read back through a texture (a later launch sees the surface's writes).
    let tex = TextureObject::from_array(&array, &TextureDesc::default())?;
    let xy: Vec<f32> = (0..w * h)
        .flat_map(|i| [(i % w) as f32 + 0.5, (i / w) as f32 + 0.5])
        .collect();
    let xy = DeviceBuffer::from_slice(&xy)?;
    let mut out = DeviceBuffer::<f32>::new(4 * w * h)?;
    kernels::texture::sample_2d(&stream, &cfg, &tex, &xy, &mut out)?;
    stream.synchronize()?;
    let direct = array.to_vec()?;
    let through_tex = out.to_vec()?;
    let bad = (0..w * h)
        .filter(|&i| direct[i] != img[i] * 3.0 || through_tex[4 * i] != img[i] * 3.0)
        .count();
    println!(
        "surface_write: {w}x{h} floats written and scaled through a surface, {bad} mismatches"
    );
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("surface_write: {e}");
            ExitCode::FAILURE
        }
    }
}
