//! A crate with its own CUDA kernels (`kernels/*.cu`), launched through the safe wrappers that
//! `cuda-runtime-build` generates: `saxpy::saxpy`, `reduce::block_sums` and
//! `reduce::tile_reverse`, plus CPU references for each.

cuda_runtime::include_kernels!();

/// `y[i] = a * x[i] + y[i]` over the shorter length, as `saxpy` computes it (one `f32` fused
/// multiply-add per element is what nvcc emits for `a * x[i] + y[i]` at `-O3`).
pub fn saxpy_cpu(y: &mut [f32], x: &[f32], a: f32) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = a.mul_add(x, *y);
    }
}

/// The sums of consecutive 256-element chunks of `x` (the last may be shorter).
pub fn block_sums_cpu(x: &[f32]) -> Vec<f32> {
    x.chunks(256).map(|c| c.iter().sum()).collect()
}

/// `input` with each tile of `tile` elements reversed (the last may be shorter).
pub fn tile_reverse_cpu(input: &[i32], tile: usize) -> Vec<i32> {
    input
        .chunks(tile.max(1))
        .flat_map(|c| c.iter().rev().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_references() {
        assert_eq!(tile_reverse_cpu(&[1, 2, 3, 4, 5], 2), [2, 1, 4, 3, 5]);
        assert_eq!(tile_reverse_cpu(&[1, 2, 3], 5), [3, 2, 1]);
        let x: Vec<f32> = (0..600).map(|i| i as f32).collect();
        assert_eq!(
            block_sums_cpu(&x),
            [32640.0, 98176.0, (512..600).sum::<i32>() as f32]
        );
        let mut y = [1.0f32, 2.0, 3.0];
        saxpy_cpu(&mut y, &[10.0, 20.0], 0.5);
        assert_eq!(y, [6.0, 12.0, 3.0]);
    }
}
