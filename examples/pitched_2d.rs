//! A 2-D image processed in pitched memory: allocated with `cudaMallocPitch`, filled from the
//! host with a 2-D copy, transformed by a kernel that indexes rows by the pitch, and copied back
//! with a 2-D copy into a tightly packed host array. Verifies every pixel.

use std::process::ExitCode;

use cuda_runtime::{
    copy_3d, kernels, Copy3D, Dim3, Extent, HostPitched, HostPitchedMut, LaunchConfig,
    PitchedBuffer, Stream,
};

fn run() -> Result<bool, cuda_runtime::Error> {
    let (w, h) = (1000usize, 700usize);
    let img: Vec<f32> = (0..w * h)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.5)
        .collect();

    let mut dev = PitchedBuffer::<f32>::new_2d(w, h)?;
    println!(
        "pitched_2d: {w} x {h} floats, row of {} bytes padded to a pitch of {} bytes",
        w * 4,
        dev.pitch()
    );
    let all = Copy3D::new(Extent::d2(w, h));
    copy_3d(&mut dev, &HostPitched::new(&img, w, h)?, &all)?;

    let stream = Stream::new()?;
    let block = Dim3::new(32, 8, 1);
    let grid = Dim3::new(w.div_ceil(32) as u32, h.div_ceil(8) as u32, 1);
    let pitch_elems = dev.pitch() / 4;
    kernels::pitched::scale_rows(
        &stream,
        &LaunchConfig::new(grid, block),
        &mut dev,
        pitch_elems,
        w as i32,
        h as i32,
        2.0,
    )?;
    stream.synchronize()?;

    let mut out = vec![f32::NAN; w * h];
    copy_3d(&mut HostPitchedMut::new(&mut out, w, h)?, &dev, &all)?;
    let bad = (0..w * h)
        .filter(|&i| out[i] != img[i] * 2.0 + (i / w) as f32)
        .count();
    println!("pitched_2d: {bad} mismatches");
    Ok(bad == 0)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("pitched_2d: {e}");
            ExitCode::FAILURE
        }
    }
}
