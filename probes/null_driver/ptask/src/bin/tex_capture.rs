// Review of wip/perf14 (fourteenth session): a texture or surface object handed to one of the
// crate's own kernel wrappers (`kernels::texture::*`, launched through `EmbeddedKernel::launch`)
// while the stream is captured. User kernels refuse it (`submit_launch`), and so do explicit
// kernel nodes: the graph would keep the memory's tracker, not the object, so the object's
// handle (and an array behind it) could be destroyed while the graph can still replay. Here the
// launch must be refused too (NotCapturable, the capture's end failing). Were it captured, the
// texture's and the array's destroys reach the driver while the executable still refers to them.
use std::time::{Duration, Instant};

use cuda_runtime::graph::CaptureMode;
use cuda_runtime::{
    kernels, Array, ArrayFlags, Device, DeviceBuffer, Error, LaunchConfig, Stream, SurfaceObject,
    TextureDesc, TextureObject,
};

use ptask::{count, violations};

fn main() {
    Device::current().unwrap();
    let before = violations();
    let s = Stream::new().unwrap();
    let cfg = LaunchConfig::new(1u32, 32u32);
    let src = DeviceBuffer::<f32>::zeroed(32).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(64).unwrap();
    let mut bad = 0;
    for surface in [false, true] {
        let what = if surface { "surface" } else { "texture" };
        let (tex0, surf0, arr0) = (
            count("nulldrv_tex_destroys"),
            count("nulldrv_surf_destroys"),
            count("nulldrv_array_destroys"),
        );
        let arr = Array::<f32>::new_2d(1, 1, ArrayFlags::SURFACE_LOAD_STORE).unwrap();
        let tex = TextureObject::from_array(&arr, &TextureDesc::default()).unwrap();
        let mut surf = SurfaceObject::new(&arr).unwrap();
        let cap = s.begin_capture(CaptureMode::Global).unwrap();
        let r = if surface {
            kernels::texture::surf_write_2d(&s, &cfg, &mut surf, &src, 1, 1)
        } else {
            kernels::texture::sample_2d(&s, &cfg, &tex, &src, &mut out)
        };
        let g = cap.end();
        match (&r, &g) {
            (Err(Error::NotCapturable { .. }), Err(_)) => {
                println!(
                    "{what}: captured launch refused ({}), capture end failed",
                    r.unwrap_err()
                );
                continue;
            }
            _ => {}
        }
        println!(
            "{what}: captured launch {:?}, capture end {:?}",
            r,
            g.as_ref().map(|_| ())
        );
        let Ok(g) = g else {
            bad += 1;
            continue;
        };
        let exec = g.instantiate().unwrap();
        drop(g);
        // The program is done with the object and the array: the executable still refers to
        // them.
        drop(tex);
        drop(surf);
        drop(arr);
        let end = Instant::now() + Duration::from_secs(2);
        while count("nulldrv_array_destroys") == arr0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let destroyed = (
            count("nulldrv_tex_destroys") - tex0,
            count("nulldrv_surf_destroys") - surf0,
            count("nulldrv_array_destroys") - arr0,
        );
        let launched = exec.launch(&s);
        println!(
            "{what}: BAD: with the executable alive, destroyed (texture, surface, array) = {destroyed:?}; \
             a launch of it then: {launched:?}"
        );
        if destroyed != (0, 0, 0) {
            bad += 1;
        }
        s.synchronize().unwrap();
        drop(exec);
    }
    let v = violations() - before;
    println!("null-driver violations: {v}");
    if bad > 0 || v > 0 {
        println!("FAILED: {bad} objects destroyed while a graph referred to them");
        std::process::exit(1);
    }
    println!("ok");
}
