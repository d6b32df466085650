//! The simpleLayeredTexture study: a layered 2-D array (one image per layer) read through one
//! texture object with `tex2DLayered`, with bilinear filtering between texels of a layer and
//! never across layers. Verifies every fetch against the crate's CPU model of the texture unit
//! (exact weights: the coordinates' fractions are multiples of 1/256).

use std::process::ExitCode;

use cuda_runtime::texture::cpu::CpuTexture;
use cuda_runtime::{
    kernels, Array, ArrayFlags, ArrayShape, DeviceBuffer, FilterMode, LaunchConfig, Stream,
    TextureDesc, TextureObject,
};

fn run() -> Result<bool, cuda_runtime::Error> {
    let (w, h, layers) = (128usize, 96usize, 5usize);
    let data: Vec<f32> = (0..w * h * layers)
        .map(|i| ((i * 2654435761usize) % 10007) as f32 / 10007.0 + (i / (w * h)) as f32)
        .collect();
    let shape = ArrayShape::Layered2D {
        width: w,
        height: h,
        layers,
    };
    let mut array = Array::<f32>::new(shape, ArrayFlags::empty())?;
    array.copy_from_host(&data)?;
    let desc = TextureDesc {
        filter_mode: FilterMode::Linear,
        ..TextureDesc::default()
    };
    let tex = TextureObject::from_array(&array, &desc)?;
    // Every texel of every layer, a quarter texel right and 3/8 down of its centre.
    let n = w * h * layers;
    let mut xy = Vec::with_capacity(2 * n);
    let mut layer = Vec::with_capacity(n);
    for i in 0..n {
        xy.push((i % w) as f32 + 0.75);
        xy.push(((i / w) % h) as f32 + 0.875);
        layer.push((i / (w * h)) as i32);
    }
    let (dxy, dl) = (
        DeviceBuffer::from_slice(&xy)?,
        DeviceBuffer::from_slice(&layer)?,
    );
    let mut out = DeviceBuffer::<f32>::new(4 * n)?;
    let stream = Stream::new()?;
    kernels::texture::sample_2d_layered(
        &stream,
        &LaunchConfig::for_elements(n, 256)?,
        &tex,
        &dxy,
        &dl,
        &mut out,
    )?;
    stream.synchronize()?;
    let got = out.to_vec()?;
    let cpu = CpuTexture::new(&data, shape, desc)?;
    let bad = (0..n)
        .filter(|&i| {
            let want = cpu.sample_2d_layered(xy[2 * i], xy[2 * i + 1], layer[i] as usize)[0];
            let d = (got[4 * i] - want).abs();
            d.is_nan() || d > 1e-3
        })
        .count();
    println!("layered_texture: {layers} layers of {w}x{h}, {n} filtered fetches, {bad} mismatches");
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("layered_texture: {e}");
            ExitCode::FAILURE
        }
    }
}
