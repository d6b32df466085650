//! A histogram in distributed shared memory (the programming guide's "Distributed Shared
//! Memory" example): blocks launched in thread-block clusters (`cudaLaunchKernelEx` with
//! `cudaLaunchAttributeClusterDimension`), each block holding a slice of the bins, every thread
//! adding into the block that owns its bin. Checked against a CPU histogram. Needs compute
//! capability 9.0; on an older GPU it says so and exits non-zero.

use std::process::ExitCode;

use cuda_runtime::{kernels, ClusterSchedulingPolicy, DeviceBuffer, LaunchConfig, Stream};

fn run() -> Result<bool, cuda_runtime::Error> {
    let n = 1 << 22;
    let bins = 2048u32;
    // A fixed pseudo-random input (xorshift), so that every run checks the same numbers.
    let mut x = 0x9e37_79b9u32;
    let data: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect();
    let mut want = vec![0u32; bins as usize];
    for &v in &data {
        want[(v % bins) as usize] += 1;
    }

    let d_data = DeviceBuffer::from_slice(&data)?;
    let stream = Stream::new()?;
    let function = kernels::cluster::CLUSTER_HISTOGRAM.function()?;
    let mut all_ok = true;
    for cluster in [1u32, 2, 4, 8] {
        let mut d_hist = DeviceBuffer::<u32>::zeroed(bins as usize)?;
        // Each block has room for every bin (the kernel's declared precondition); with a
        // cluster of c blocks it uses 1/c of it.
        let cfg = LaunchConfig::new(132 * 2, 256)
            .with_shared_mem(4 * bins)
            .with_cluster(cluster)
            .cluster_scheduling_policy(ClusterSchedulingPolicy::Spread);
        let active = function.max_active_clusters(&cfg)?;
        kernels::cluster::cluster_histogram(&stream, &cfg, &d_data, &mut d_hist, bins)?;
        stream.synchronize()?;
        let got = d_hist.to_vec()?;
        let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        println!(
            "clusters of {cluster}: {active} clusters fit at once; {bins} bins, {bad} mismatches"
        );
        all_ok &= bad == 0;
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cluster_histogram: {e}");
            ExitCode::FAILURE
        }
    }
}
