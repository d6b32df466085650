// Review rev-b14: two handles of one mipmap level (`MipmappedArray::level` twice) in one
// `Copy3DBatch`, both copies writing the same texel. The driver runs a batch's copies in no
// order, so the texel is unspecified: the submission must be refused before the driver (before:
// accepted, both copies reached cuMemcpy3DBatchAsync). Copies of disjoint handles still go.
use cuda_runtime::{
    ArrayFlags, ArrayShape, Copy3D, Copy3DBatch, Device, Extent, MipmappedArray, PitchedBuffer,
    Stream,
};

use ptask::{count, violations};

fn main() {
    Device::current().unwrap();
    let before = violations();
    let s = Stream::new().unwrap();
    // The null driver's mipmapped limits are 1 x 1: one level of one texel.
    let shape = ArrayShape::D2 {
        width: 1,
        height: 1,
    };
    let mip = MipmappedArray::<f32>::new(shape, 1, ArrayFlags::empty()).unwrap();
    let (mut a, mut b) = (mip.level(0).unwrap(), mip.level(0).unwrap());
    assert_eq!(a.as_raw(), b.as_raw(), "one level, one handle");
    let (x, y) = (
        PitchedBuffer::<f32>::new_2d(1, 1).unwrap(),
        PitchedBuffer::<f32>::new_2d(1, 1).unwrap(),
    );
    let ops0 = count("nulldrv_batch_ops");
    let mut batch = Copy3DBatch::new();
    batch.copy(&mut a, &x, Copy3D::new(Extent::d2(1, 1)));
    batch.copy(&mut b, &y, Copy3D::new(Extent::d2(1, 1)));
    let r = batch.submit(&s);
    s.synchronize().unwrap();
    let sent = count("nulldrv_batch_ops") - ops0;
    let mut bad = 0;
    match &r {
        Err(e) => {
            println!("two writes of one level's texel in a batch: refused ({e}); ops sent {sent}")
        }
        Ok(()) => {
            println!(
                "BAD: two writes of one level's texel in a batch were accepted; ops sent {sent}"
            );
            bad += 1;
        }
    }
    if sent != 0 {
        bad += 1;
    }
    // One handle written, another array read: accepted.
    let other = MipmappedArray::<f32>::new(shape, 1, ArrayFlags::empty()).unwrap();
    let c = other.level(0).unwrap();
    let mut batch = Copy3DBatch::new();
    batch.copy(&mut a, &c, Copy3D::new(Extent::d2(1, 1)));
    let r = batch.submit(&s);
    s.synchronize().unwrap();
    if r.is_err() {
        println!("BAD: a copy between two arrays was refused: {r:?}");
        bad += 1;
    }
    let v = violations() - before;
    println!("violations {v}, bad {bad}");
    if v != 0 || bad != 0 {
        std::process::exit(1);
    }
}
