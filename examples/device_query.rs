//! Lists every CUDA device and all of its properties, in the spirit of NVIDIA's `deviceQuery`
//! sample.
//!
//! The report has two parts for each device: readable `label: value` lines grouped by topic, and
//! a machine-comparable section of `prop <cName> <value>` lines, one per `cudaDeviceProp` field,
//! in the format `probes/device_props.cu` prints for libcudart, so that
//!
//! ```text
//! diff <(cargo run --example device_query | grep ^prop) <(./device_props | grep ^prop)
//! ```
//!
//! compares the two field by field. Without a driver or a device it prints one line on stderr
//! and exits with status 1.

use std::process::ExitCode;

use cuda_runtime::{Device, DeviceAttribute, DeviceProperties, Error};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("device_query: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    // Asked first, so that a machine without a driver or device gets one line and nothing else.
    let count = cuda_runtime::device_count()?;
    if count == 0 {
        return Err(Error::NoDevice);
    }
    println!(
        "CUDA driver version:  {}",
        version(cuda_runtime::driver_version())
    );
    println!(
        "CUDA runtime version: {} (cuda-runtime crate)",
        version(cuda_runtime::runtime_version())
    );
    println!("CUDA devices:         {count}");

    let devices = Device::all()?;
    for &dev in &devices {
        let p = dev.properties()?;
        println!();
        println!("Device {}: \"{}\"", dev.ordinal(), p.name);
        print_readable(dev, &p)?;
        println!();
        for (name, value) in prop_lines(&p) {
            println!("prop {name} {value}");
        }
    }

    if devices.len() > 1 {
        println!();
        println!("Peer access:");
        for &a in &devices {
            for &b in &devices {
                if a != b {
                    let yes = a.can_access_peer(b)?;
                    println!(
                        "  device {} -> device {}: {}",
                        a.ordinal(),
                        b.ordinal(),
                        if yes { "yes" } else { "no" }
                    );
                }
            }
        }
    }
    Ok(())
}

fn version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn mib(bytes: usize) -> String {
    format!(
        "{bytes} bytes ({:.1} MiB)",
        bytes as f64 / (1024.0 * 1024.0)
    )
}

fn kib(bytes: usize) -> String {
    format!("{bytes} bytes ({:.1} KiB)", bytes as f64 / 1024.0)
}

fn dims(d: &[i32]) -> String {
    d.iter().map(i32::to_string).collect::<Vec<_>>().join(" x ")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The UUID in its usual 8-4-4-4-12 form, as `nvidia-smi` prints it after `GPU-`.
fn uuid_string(u: &[u8; 16]) -> String {
    let h = hex(u);
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn line(label: &str, value: impl std::fmt::Display) {
    println!("  {label:<52} {value}");
}

fn print_readable(dev: Device, p: &DeviceProperties) -> Result<(), Error> {
    println!(" Identity");
    line("Name:", &p.name);
    line("UUID:", uuid_string(&p.uuid));
    line("LUID:", hex(&p.luid));
    line("LUID device node mask:", p.luid_device_node_mask);
    line("Compute capability:", format!("{}.{}", p.major, p.minor));
    line("Integrated GPU:", yes(p.integrated));
    line("On a multi-GPU board:", yes(p.is_multi_gpu_board));
    line("Multi-GPU board group id:", p.multi_gpu_board_group_id);
    line("Windows TCC driver:", yes(p.tcc_driver));
    line("MPS enabled:", yes(p.mps_enabled));

    println!(" PCI");
    line(
        "Domain / bus / device:",
        format!(
            "{:04x}:{:02x}:{:02x}",
            p.pci_domain_id, p.pci_bus_id, p.pci_device_id
        ),
    );
    line("PCI bus id (cudaDeviceGetPCIBusId):", dev.pci_bus_id()?);
    line(
        "PCI device / vendor id:",
        format!(
            "{:#06x} / {:#06x}",
            p.gpu_pci_device_id >> 16,
            p.gpu_pci_device_id & 0xffff
        ),
    );
    line(
        "PCI subsystem / subsystem vendor id:",
        format!(
            "{:#06x} / {:#06x}",
            p.gpu_pci_subsystem_id >> 16,
            p.gpu_pci_subsystem_id & 0xffff
        ),
    );

    println!(" Multiprocessors and execution");
    line("Multiprocessors:", p.multi_processor_count);
    line("Warp size:", p.warp_size);
    line("Max threads per block:", p.max_threads_per_block);
    line("Max block dimensions:", dims(&p.max_threads_dim));
    line("Max grid dimensions:", dims(&p.max_grid_size));
    line(
        "Max resident threads per multiprocessor:",
        p.max_threads_per_multi_processor,
    );
    line(
        "Max resident blocks per multiprocessor:",
        p.max_blocks_per_multi_processor,
    );
    line("Registers per block:", p.regs_per_block);
    line("Registers per multiprocessor:", p.regs_per_multiprocessor);
    line("Concurrent kernels:", yes(p.concurrent_kernels));
    line("Copy engines (async engine count):", p.async_engine_count);
    line("Stream priorities:", yes(p.stream_priorities_supported));
    line("Compute preemption:", yes(p.compute_preemption_supported));
    line("Cooperative launch:", yes(p.cooperative_launch));
    line("Cluster launch:", yes(p.cluster_launch));
    line(
        "Unified function pointers:",
        yes(p.unified_function_pointers),
    );

    println!(" Memory");
    line("Total global memory:", mib(p.total_global_mem));
    line("Constant memory:", kib(p.total_const_mem));
    line("Memory bus width:", format!("{} bits", p.memory_bus_width));
    line("L2 cache:", mib(p.l2_cache_size as usize));
    line(
        "Max persisting L2 set-aside:",
        mib(p.persisting_l2_cache_max_size as usize),
    );
    line(
        "Max access policy window:",
        mib(p.access_policy_max_window_size as usize),
    );
    line("Globals cached in L1:", yes(p.global_l1_cache_supported));
    line("Locals cached in L1:", yes(p.local_l1_cache_supported));
    line("Max memory pitch:", format!("{} bytes", p.mem_pitch));
    line("ECC enabled:", yes(p.ecc_enabled));

    println!(" Shared memory");
    line("Shared memory per block:", kib(p.shared_mem_per_block));
    line(
        "Shared memory per block (opt-in):",
        kib(p.shared_mem_per_block_optin),
    );
    line(
        "Shared memory per multiprocessor:",
        kib(p.shared_mem_per_multiprocessor),
    );
    line(
        "Shared memory reserved per block:",
        kib(p.reserved_shared_mem_per_block),
    );

    println!(" Host memory and unified addressing");
    line("Unified addressing:", yes(p.unified_addressing));
    line("Can map host memory:", yes(p.can_map_host_memory));
    line("Host memory registration:", yes(p.host_register_supported));
    line(
        "Read-only host registration:",
        yes(p.host_register_read_only_supported),
    );
    line(
        "Registered memory at the host's address:",
        yes(p.can_use_host_pointer_for_registered_mem),
    );
    line("Managed memory:", yes(p.managed_memory));
    line(
        "Concurrent managed access:",
        yes(p.concurrent_managed_access),
    );
    line(
        "Host accesses managed memory directly:",
        yes(p.direct_managed_mem_access_from_host),
    );
    line("Pageable memory access:", yes(p.pageable_memory_access));
    line(
        "Pageable access uses host page tables:",
        yes(p.pageable_memory_access_uses_host_page_tables),
    );
    line(
        "Native atomics over the host link:",
        yes(p.host_native_atomic_supported),
    );
    line("Memory pools:", yes(p.memory_pools_supported));
    line(
        "Memory pool IPC handle types (bitmask):",
        format!("{:#x}", p.memory_pool_supported_handle_types),
    );
    line("IPC events:", yes(p.ipc_event_supported));
    line(
        "Host NUMA multi-node IPC:",
        yes(p.host_numa_multinode_ipc_supported),
    );
    line("Device NUMA config:", p.device_numa_config);
    line("Device NUMA id:", p.device_numa_id);
    line("Host NUMA id:", p.host_numa_id);
    line("GPUDirect RDMA:", yes(p.gpu_direct_rdma_supported));
    line(
        "GPUDirect RDMA flush options (bitmask):",
        format!("{:#x}", p.gpu_direct_rdma_flush_writes_options),
    );
    line(
        "GPUDirect RDMA writes ordering:",
        p.gpu_direct_rdma_writes_ordering,
    );
    line(
        "External timeline semaphores:",
        yes(p.timeline_semaphore_interop_supported),
    );

    println!(" Textures and surfaces");
    line(
        "Texture alignment:",
        format!("{} bytes", p.texture_alignment),
    );
    line(
        "Texture pitch alignment:",
        format!("{} bytes", p.texture_pitch_alignment),
    );
    line(
        "Surface alignment:",
        format!("{} bytes", p.surface_alignment),
    );
    line("Max 1D texture:", p.max_texture_1d);
    line("Max 1D mipmapped texture:", p.max_texture_1d_mipmap);
    line("Max 2D texture:", dims(&p.max_texture_2d));
    line("Max 2D mipmapped texture:", dims(&p.max_texture_2d_mipmap));
    line(
        "Max 2D linear texture (width x height x pitch):",
        dims(&p.max_texture_2d_linear),
    );
    line("Max 2D gather texture:", dims(&p.max_texture_2d_gather));
    line("Max 3D texture:", dims(&p.max_texture_3d));
    line("Max 3D texture (alternate):", dims(&p.max_texture_3d_alt));
    line("Max cubemap texture:", p.max_texture_cubemap);
    line(
        "Max 1D layered texture (width x layers):",
        dims(&p.max_texture_1d_layered),
    );
    line(
        "Max 2D layered texture (w x h x layers):",
        dims(&p.max_texture_2d_layered),
    );
    line(
        "Max cubemap layered texture (width x layers):",
        dims(&p.max_texture_cubemap_layered),
    );
    line("Max 1D surface:", p.max_surface_1d);
    line("Max 2D surface:", dims(&p.max_surface_2d));
    line("Max 3D surface:", dims(&p.max_surface_3d));
    line(
        "Max 1D layered surface (width x layers):",
        dims(&p.max_surface_1d_layered),
    );
    line(
        "Max 2D layered surface (w x h x layers):",
        dims(&p.max_surface_2d_layered),
    );
    line("Max cubemap surface:", p.max_surface_cubemap);
    line(
        "Max cubemap layered surface (width x layers):",
        dims(&p.max_surface_cubemap_layered),
    );
    line("Sparse CUDA arrays:", yes(p.sparse_cuda_array_supported));
    line(
        "Deferred-mapping CUDA arrays:",
        yes(p.deferred_mapping_cuda_array_supported),
    );

    // Values CUDA 13.0 dropped from cudaDeviceProp, still available as attributes, and figures
    // derived from the properties.
    println!(" Derived");
    let clock_khz = dev.attribute(DeviceAttribute::ClockRate)?;
    let mem_clock_khz = dev.attribute(DeviceAttribute::MemoryClockRate)?;
    line(
        "SM clock (cudaDevAttrClockRate):",
        format!("{:.0} MHz", clock_khz as f64 / 1000.0),
    );
    line(
        "Memory clock (cudaDevAttrMemoryClockRate):",
        format!("{:.0} MHz", mem_clock_khz as f64 / 1000.0),
    );
    // Double data rate: two transfers per clock.
    let bandwidth = 2.0 * mem_clock_khz as f64 * 1e3 * (p.memory_bus_width as f64 / 8.0);
    line(
        "Peak memory bandwidth (2 x clock x bus width):",
        format!("{:.1} GB/s", bandwidth / 1e9),
    );
    line(
        "Max resident threads on the device:",
        p.multi_processor_count as i64 * p.max_threads_per_multi_processor as i64,
    );
    line(
        "Compute mode (cudaDevAttrComputeMode):",
        match dev.attribute(DeviceAttribute::ComputeMode)? {
            0 => "default".to_string(),
            2 => "prohibited".to_string(),
            3 => "exclusive process".to_string(),
            n => n.to_string(),
        },
    );
    line(
        "Kernel run-time limit (cudaDevAttrKernelExecTimeout):",
        yes(dev.attribute(DeviceAttribute::KernelExecTimeout)? != 0),
    );
    let (free, total) = dev.memory_info()?;
    line(
        "Free / total memory (cudaMemGetInfo):",
        format!("{} / {}", mib(free), mib(total)),
    );
    Ok(())
}

fn ints(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(" ")
}

fn flag(b: bool) -> String {
    u8::from(b).to_string()
}

/// One `(cName, value)` per `cudaDeviceProp` field of CUDA 13.0, in the struct's order (but
/// `reserved`). Arrays are space-separated, `uuid` and `luid` are hex digits, `name` verbatim.
fn prop_lines(p: &DeviceProperties) -> Vec<(&'static str, String)> {
    vec![
        ("name", p.name.clone()),
        ("uuid", hex(&p.uuid)),
        ("luid", hex(&p.luid)),
        ("luidDeviceNodeMask", p.luid_device_node_mask.to_string()),
        ("totalGlobalMem", p.total_global_mem.to_string()),
        ("sharedMemPerBlock", p.shared_mem_per_block.to_string()),
        ("regsPerBlock", p.regs_per_block.to_string()),
        ("warpSize", p.warp_size.to_string()),
        ("memPitch", p.mem_pitch.to_string()),
        ("maxThreadsPerBlock", p.max_threads_per_block.to_string()),
        ("maxThreadsDim", ints(&p.max_threads_dim)),
        ("maxGridSize", ints(&p.max_grid_size)),
        ("totalConstMem", p.total_const_mem.to_string()),
        ("major", p.major.to_string()),
        ("minor", p.minor.to_string()),
        ("textureAlignment", p.texture_alignment.to_string()),
        (
            "texturePitchAlignment",
            p.texture_pitch_alignment.to_string(),
        ),
        ("multiProcessorCount", p.multi_processor_count.to_string()),
        ("integrated", flag(p.integrated)),
        ("canMapHostMemory", flag(p.can_map_host_memory)),
        ("maxTexture1D", p.max_texture_1d.to_string()),
        ("maxTexture1DMipmap", p.max_texture_1d_mipmap.to_string()),
        ("maxTexture2D", ints(&p.max_texture_2d)),
        ("maxTexture2DMipmap", ints(&p.max_texture_2d_mipmap)),
        ("maxTexture2DLinear", ints(&p.max_texture_2d_linear)),
        ("maxTexture2DGather", ints(&p.max_texture_2d_gather)),
        ("maxTexture3D", ints(&p.max_texture_3d)),
        ("maxTexture3DAlt", ints(&p.max_texture_3d_alt)),
        ("maxTextureCubemap", p.max_texture_cubemap.to_string()),
        ("maxTexture1DLayered", ints(&p.max_texture_1d_layered)),
        ("maxTexture2DLayered", ints(&p.max_texture_2d_layered)),
        (
            "maxTextureCubemapLayered",
            ints(&p.max_texture_cubemap_layered),
        ),
        ("maxSurface1D", p.max_surface_1d.to_string()),
        ("maxSurface2D", ints(&p.max_surface_2d)),
        ("maxSurface3D", ints(&p.max_surface_3d)),
        ("maxSurface1DLayered", ints(&p.max_surface_1d_layered)),
        ("maxSurface2DLayered", ints(&p.max_surface_2d_layered)),
        ("maxSurfaceCubemap", p.max_surface_cubemap.to_string()),
        (
            "maxSurfaceCubemapLayered",
            ints(&p.max_surface_cubemap_layered),
        ),
        ("surfaceAlignment", p.surface_alignment.to_string()),
        ("concurrentKernels", flag(p.concurrent_kernels)),
        ("ECCEnabled", flag(p.ecc_enabled)),
        ("pciBusID", p.pci_bus_id.to_string()),
        ("pciDeviceID", p.pci_device_id.to_string()),
        ("pciDomainID", p.pci_domain_id.to_string()),
        ("tccDriver", flag(p.tcc_driver)),
        ("asyncEngineCount", p.async_engine_count.to_string()),
        ("unifiedAddressing", flag(p.unified_addressing)),
        ("memoryBusWidth", p.memory_bus_width.to_string()),
        ("l2CacheSize", p.l2_cache_size.to_string()),
        (
            "persistingL2CacheMaxSize",
            p.persisting_l2_cache_max_size.to_string(),
        ),
        (
            "maxThreadsPerMultiProcessor",
            p.max_threads_per_multi_processor.to_string(),
        ),
        (
            "streamPrioritiesSupported",
            flag(p.stream_priorities_supported),
        ),
        ("globalL1CacheSupported", flag(p.global_l1_cache_supported)),
        ("localL1CacheSupported", flag(p.local_l1_cache_supported)),
        (
            "sharedMemPerMultiprocessor",
            p.shared_mem_per_multiprocessor.to_string(),
        ),
        (
            "regsPerMultiprocessor",
            p.regs_per_multiprocessor.to_string(),
        ),
        ("managedMemory", flag(p.managed_memory)),
        ("isMultiGpuBoard", flag(p.is_multi_gpu_board)),
        (
            "multiGpuBoardGroupID",
            p.multi_gpu_board_group_id.to_string(),
        ),
        (
            "hostNativeAtomicSupported",
            flag(p.host_native_atomic_supported),
        ),
        ("pageableMemoryAccess", flag(p.pageable_memory_access)),
        ("concurrentManagedAccess", flag(p.concurrent_managed_access)),
        (
            "computePreemptionSupported",
            flag(p.compute_preemption_supported),
        ),
        (
            "canUseHostPointerForRegisteredMem",
            flag(p.can_use_host_pointer_for_registered_mem),
        ),
        ("cooperativeLaunch", flag(p.cooperative_launch)),
        (
            "sharedMemPerBlockOptin",
            p.shared_mem_per_block_optin.to_string(),
        ),
        (
            "pageableMemoryAccessUsesHostPageTables",
            flag(p.pageable_memory_access_uses_host_page_tables),
        ),
        (
            "directManagedMemAccessFromHost",
            flag(p.direct_managed_mem_access_from_host),
        ),
        (
            "maxBlocksPerMultiProcessor",
            p.max_blocks_per_multi_processor.to_string(),
        ),
        (
            "accessPolicyMaxWindowSize",
            p.access_policy_max_window_size.to_string(),
        ),
        (
            "reservedSharedMemPerBlock",
            p.reserved_shared_mem_per_block.to_string(),
        ),
        ("hostRegisterSupported", flag(p.host_register_supported)),
        (
            "sparseCudaArraySupported",
            flag(p.sparse_cuda_array_supported),
        ),
        (
            "hostRegisterReadOnlySupported",
            flag(p.host_register_read_only_supported),
        ),
        (
            "timelineSemaphoreInteropSupported",
            flag(p.timeline_semaphore_interop_supported),
        ),
        ("memoryPoolsSupported", flag(p.memory_pools_supported)),
        ("gpuDirectRDMASupported", flag(p.gpu_direct_rdma_supported)),
        (
            "gpuDirectRDMAFlushWritesOptions",
            p.gpu_direct_rdma_flush_writes_options.to_string(),
        ),
        (
            "gpuDirectRDMAWritesOrdering",
            p.gpu_direct_rdma_writes_ordering.to_string(),
        ),
        (
            "memoryPoolSupportedHandleTypes",
            p.memory_pool_supported_handle_types.to_string(),
        ),
        (
            "deferredMappingCudaArraySupported",
            flag(p.deferred_mapping_cuda_array_supported),
        ),
        ("ipcEventSupported", flag(p.ipc_event_supported)),
        ("clusterLaunch", flag(p.cluster_launch)),
        ("unifiedFunctionPointers", flag(p.unified_function_pointers)),
        ("deviceNumaConfig", p.device_numa_config.to_string()),
        ("deviceNumaId", p.device_numa_id.to_string()),
        ("mpsEnabled", flag(p.mps_enabled)),
        ("hostNumaId", p.host_numa_id.to_string()),
        ("gpuPciDeviceID", p.gpu_pci_device_id.to_string()),
        ("gpuPciSubsystemID", p.gpu_pci_subsystem_id.to_string()),
        (
            "hostNumaMultinodeIpcSupported",
            flag(p.host_numa_multinode_ipc_supported),
        ),
    ]
}
