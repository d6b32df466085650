//! The simpleTexture study: an image in a CUDA array is rotated through a texture object with
//! normalised, wrapping coordinates and bilinear filtering. Every output pixel is checked
//! against the crate's CPU model of the texture unit (within 2/256 of the image's range: the
//! hardware's 8-bit filtering weights may round differently where the rotated coordinate,
//! computed with the device's `sinf`/`cosf`, differs in its last bits). The input and the output
//! are written as `simple_texture_input.png` and `simple_texture_output.png` (or into the
//! directory given as the first argument).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cuda_runtime::texture::cpu::CpuTexture;
use cuda_runtime::{
    kernels, AddressMode, Array, ArrayFlags, ArrayShape, DeviceBuffer, FilterMode, LaunchConfig,
    Stream, TextureDesc, TextureObject,
};

/// A test image in [0, 1]: rings, a gradient and a checkerboard corner.
fn image(w: usize, h: usize) -> Vec<f32> {
    (0..w * h)
        .map(|i| {
            let (x, y) = ((i % w) as f32 / w as f32, (i / w) as f32 / h as f32);
            let r = ((x - 0.5).powi(2) + (y - 0.5).powi(2)).sqrt();
            let rings = 0.5 + 0.5 * (r * 40.0).cos();
            let checker = if x < 0.3 && y < 0.3 && ((x * 20.0) as i32 + (y * 20.0) as i32) % 2 == 0
            {
                1.0
            } else {
                0.0
            };
            (0.6 * rings + 0.3 * x + checker * 0.4).clamp(0.0, 1.0)
        })
        .collect()
}

fn write_png(path: &Path, w: usize, h: usize, px: &[f32]) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    let bytes: Vec<u8> = px
        .iter()
        .map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8)
        .collect();
    enc.write_header()
        .and_then(|mut wr| wr.write_image_data(&bytes))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn run(dir: &Path) -> Result<bool, String> {
    let (w, h) = (512usize, 512usize);
    let angle = 0.5f32;
    let input = image(w, h);
    let e = |e: cuda_runtime::Error| e.to_string();

    let mut array = Array::<f32>::new_2d(w, h, ArrayFlags::empty()).map_err(e)?;
    array.copy_from_host(&input).map_err(e)?;
    let desc = TextureDesc {
        address_mode: [AddressMode::Wrap; 3],
        filter_mode: FilterMode::Linear,
        normalized_coords: true,
        ..TextureDesc::default()
    };
    let tex = TextureObject::from_array(&array, &desc).map_err(e)?;
    let mut out = DeviceBuffer::<f32>::new(w * h).map_err(e)?;
    let stream = Stream::new().map_err(e)?;
    kernels::texture::rotate(
        &stream,
        &LaunchConfig::for_elements(w * h, 256).map_err(|e| e.to_string())?,
        &tex,
        &mut out,
        w as i32,
        h as i32,
        angle,
    )
    .map_err(e)?;
    stream.synchronize().map_err(e)?;
    let output = out.to_vec().map_err(e)?;

    // The same rotation on the CPU, sampled by the model of the texture unit.
    let cpu = CpuTexture::new(
        &input,
        ArrayShape::D2 {
            width: w,
            height: h,
        },
        desc,
    )
    .map_err(e)?;
    let (s, c) = angle.sin_cos();
    let mut worst = 0f32;
    let mut bad = 0;
    for (i, &got) in output.iter().enumerate() {
        let (x, y) = ((i % w) as f32, (i / w) as f32);
        let u = (x + 0.5) / w as f32 - 0.5;
        let v = (y + 0.5) / h as f32 - 0.5;
        let want = cpu.sample_2d(u * c - v * s + 0.5, v * c + u * s + 0.5)[0];
        let d = (got - want).abs();
        worst = worst.max(d);
        if d.is_nan() || d > 2.0 / 256.0 {
            bad += 1;
        }
    }
    let (pin, pout) = (
        dir.join("simple_texture_input.png"),
        dir.join("simple_texture_output.png"),
    );
    write_png(&pin, w, h, &input)?;
    write_png(&pout, w, h, &output)?;
    println!(
        "simple_texture: {w}x{h} image rotated by {angle} rad through a texture; largest difference \
         from the CPU model {worst:.2e}, {bad} pixels beyond 2/256; wrote {} and {}",
        pin.display(),
        pout.display()
    );
    Ok(bad == 0)
}

fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    match run(&dir) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("simple_texture: {e}");
            ExitCode::FAILURE
        }
    }
}
