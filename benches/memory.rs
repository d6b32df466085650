//! Memory benchmarks: page-locked, write-combined and pageable copies, allocation, and the drop
//! of a buffer still in use on a busy stream, each through this crate, the raw driver call and
//! NVIDIA's libcudart (loaded at run time from `/usr/local/cuda/lib64/libcudart.so`, or
//! `CUDA_RUNTIME_LIBCUDART`), in the same process and primary context. Criterion measures each;
//! a summary of medians of interleaved batches with the ratios follows.
//!
//! The drop figure times the drop call alone (`cuMemFree` / `cudaFree` for the others): a 1 MiB
//! buffer is used by a kernel queued on a stream that a spin kernel keeps busy for about 2 ms.
//! The crate's drop must not wait for that work (the memory is freed once its use is done);
//! `cuMemFree` and `cudaFree` synchronise the device.
//!
//! "1 MiB malloc + free" is `DeviceBuffer::new` and the drop of the unused buffer (a block of
//! the crate's device memory cache, taken and given back) against `cuMemAlloc` + `cuMemFree`
//! and `cudaMalloc` + `cudaFree`. "1 MiB malloc + memsetAsync + free loop" uses each buffer on
//! one stream before the free (the crate's drop gives the block back with its use still
//! queued; `cuMemFree` and `cudaFree` wait for the device).

mod common;

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{ck, die, ok, CudaError};
use criterion::Criterion;
use cuda_runtime::{kernels, DeviceBuffer, HostAllocFlags, LaunchConfig, PinnedBuffer, Stream};
use cudarc::driver::sys;

type CudaStream = *mut c_void;

struct Cudart {
    _lib: libloading::Library,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, i32) -> CudaError,
    memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, i32, CudaStream) -> CudaError,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> CudaError,
    free: unsafe extern "C" fn(*mut c_void) -> CudaError,
    malloc_async: unsafe extern "C" fn(*mut *mut c_void, usize, CudaStream) -> CudaError,
    free_async: unsafe extern "C" fn(*mut c_void, CudaStream) -> CudaError,
    memset_async: unsafe extern "C" fn(*mut c_void, i32, usize, CudaStream) -> CudaError,
    stream_sync: unsafe extern "C" fn(CudaStream) -> CudaError,
    stream: CudaStream,
}

impl Cudart {
    fn load() -> Option<Cudart> {
        let lib = common::open_libcudart()?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the field or binding it is stored
                // in (cuda_runtime_api.h of CUDA 13.0).
                unsafe { common::sym(&lib, $name) }
            };
        }
        let stream_create: unsafe extern "C" fn(*mut CudaStream) -> CudaError =
            sym!(b"cudaStreamCreate\0");
        let mut c = Cudart {
            memcpy: sym!(b"cudaMemcpy\0"),
            memcpy_async: sym!(b"cudaMemcpyAsync\0"),
            malloc: sym!(b"cudaMalloc\0"),
            free: sym!(b"cudaFree\0"),
            malloc_async: sym!(b"cudaMallocAsync\0"),
            free_async: sym!(b"cudaFreeAsync\0"),
            memset_async: sym!(b"cudaMemsetAsync\0"),
            stream_sync: sym!(b"cudaStreamSynchronize\0"),
            _lib: lib,
            stream: std::ptr::null_mut(),
        };
        // SAFETY: valid out-parameter.
        ok(unsafe { stream_create(&mut c.stream) }, "cudaStreamCreate");
        Some(c)
    }
}

const BIG: usize = 256 << 20;
const SMALL: usize = 1 << 20;
/// How long the spin kernel keeps the stream of the drop figure busy.
const BUSY_NS: u64 = 2_000_000;

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Crate,
    Driver,
    Cudart,
}

#[derive(Clone, Copy, PartialEq)]
enum Figure {
    PinnedH2D,
    PinnedD2H,
    WriteCombinedH2D,
    PageableH2D,
    PageableD2H,
    AllocAsync,
    Alloc,
    AllocUseFree,
    DropInUse,
}

impl Figure {
    const ALL: [Figure; 9] = [
        Figure::PinnedH2D,
        Figure::PinnedD2H,
        Figure::WriteCombinedH2D,
        Figure::PageableH2D,
        Figure::PageableD2H,
        Figure::AllocAsync,
        Figure::Alloc,
        Figure::AllocUseFree,
        Figure::DropInUse,
    ];
    fn name(self) -> &'static str {
        match self {
            Figure::PinnedH2D => "page-locked H2D 256 MiB",
            Figure::PinnedD2H => "page-locked D2H 256 MiB",
            Figure::WriteCombinedH2D => "write-combined H2D 256 MiB",
            Figure::PageableH2D => "pageable H2D 256 MiB (memcpy)",
            Figure::PageableD2H => "pageable D2H 256 MiB (memcpy)",
            Figure::AllocAsync => "1 MiB mallocAsync + freeAsync",
            Figure::Alloc => "1 MiB malloc + free",
            Figure::AllocUseFree => "1 MiB malloc + memsetAsync + free loop",
            Figure::DropInUse => "drop of a buffer in use on another stream",
        }
    }
    fn is_copy(self) -> bool {
        !matches!(
            self,
            Figure::AllocAsync | Figure::Alloc | Figure::AllocUseFree | Figure::DropInUse
        )
    }
    /// Whether only part of each operation is timed (the drop), not the whole batch.
    fn times_part(self) -> bool {
        self == Figure::DropInUse
    }
    fn batch(self) -> u64 {
        match self {
            Figure::AllocAsync => 2000,
            Figure::Alloc | Figure::AllocUseFree => 50,
            Figure::DropInUse => 20,
            _ => 2,
        }
    }
}

/// Launches the `spin` kernel (`kernels/spin.cu`) with the raw driver: one thread spins for
/// `ns` nanoseconds on `stream`, with `len` elements at `stamps` as its argument (slot -1: it
/// writes nothing).
fn launch_spin(f: sys::CUfunction, stream: sys::CUstream, stamps: u64, len: usize, ns: u64) {
    let (mut p, mut l, mut d, mut slot) = (stamps, len, ns, -1i32);
    let mut params = [
        (&mut p as *mut u64).cast::<c_void>(),
        (&mut l as *mut usize).cast::<c_void>(),
        (&mut d as *mut u64).cast::<c_void>(),
        (&mut slot as *mut i32).cast::<c_void>(),
    ];
    // SAFETY: `f` is `spin(unsigned long long*, size_t, unsigned long long, int)` of a module
    // loaded in the current context; the parameters match it; the kernel writes nothing with
    // slot -1.
    ck(
        unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    );
}

/// Whether the stream has no work left (`cuStreamQuery`).
fn idle(stream: sys::CUstream) -> bool {
    // SAFETY: live stream of the current context.
    unsafe { sys::cuStreamQuery(stream) == sys::CUresult::CUDA_SUCCESS }
}

struct Setup {
    stream: Stream,
    raw_stream: sys::CUstream,
    /// The `spin` kernel, loaded with the raw driver (for the driver and libcudart columns).
    spin: sys::CUfunction,
    /// The crate's spin kernel's argument when it only keeps the stream busy.
    stamps: DeviceBuffer<u64>,
    dev: DeviceBuffer<u8>,
    pinned: PinnedBuffer<u8>,
    wc: PinnedBuffer<u8>,
    pageable: Vec<u8>,
    cudart: Option<Cudart>,
}

impl Setup {
    /// One operation; `None` when `way` is not available. Returns the time of the part that
    /// is measured alone (the drop), zero for figures timed as a whole.
    fn op(&mut self, fig: Figure, way: Way) -> Option<Duration> {
        let s = &self.stream;
        let d = self.dev.as_raw();
        let mut part = Duration::ZERO;
        match way {
            Way::Crate => {
                let r = match fig {
                    Figure::PinnedH2D => self
                        .dev
                        .copy_from_pinned_async(&self.pinned, s)
                        .and_then(|_| s.synchronize()),
                    Figure::PinnedD2H => self
                        .dev
                        .copy_to_pinned_async(&mut self.pinned, s)
                        .and_then(|_| self.pinned.synchronize()),
                    Figure::WriteCombinedH2D => self
                        .dev
                        .copy_from_pinned_async(&self.wc, s)
                        .and_then(|_| s.synchronize()),
                    Figure::PageableH2D => self.dev.copy_from_host(&self.pageable),
                    Figure::PageableD2H => self.dev.copy_to_host(&mut self.pageable),
                    Figure::AllocAsync => DeviceBuffer::<u8>::new_async(SMALL, s).map(drop),
                    Figure::Alloc => DeviceBuffer::<u8>::new(SMALL).map(drop),
                    Figure::AllocUseFree => {
                        DeviceBuffer::<u8>::new(SMALL).and_then(|mut b| b.memset_u8_async(1, s))
                    }
                    Figure::DropInUse => (|| -> cuda_runtime::Result<()> {
                        let one = LaunchConfig::new(1u32, 1u32);
                        if s.query()? {
                            kernels::spin::spin(s, &one, &mut self.stamps, BUSY_NS, -1)?;
                        }
                        let mut b = DeviceBuffer::<u64>::new(SMALL / 8)?;
                        // Uses the buffer behind the busy spin.
                        kernels::spin::spin(s, &one, &mut b, 0, -1)?;
                        let t = Instant::now();
                        drop(b);
                        part = t.elapsed();
                        Ok(())
                    })(),
                };
                if let Err(e) = r {
                    die(&format!("{}: {e}", fig.name()));
                }
            }
            Way::Driver => {
                let rs = self.raw_stream;
                let hp = self.pinned.as_host_ptr() as *mut c_void;
                // SAFETY: live device buffer and page-locked / pageable host memory of the
                // sizes used; the crate's context is current on this thread.
                unsafe {
                    match fig {
                        Figure::PinnedH2D => {
                            ck(
                                sys::cuMemcpyHtoDAsync_v2(d, hp, BIG, rs),
                                "cuMemcpyHtoDAsync",
                            );
                            ck(sys::cuStreamSynchronize(rs), "cuStreamSynchronize");
                        }
                        Figure::PinnedD2H => {
                            ck(
                                sys::cuMemcpyDtoHAsync_v2(hp, d, BIG, rs),
                                "cuMemcpyDtoHAsync",
                            );
                            ck(sys::cuStreamSynchronize(rs), "cuStreamSynchronize");
                        }
                        Figure::WriteCombinedH2D => {
                            let wp = self.wc.as_host_ptr() as *const c_void;
                            ck(
                                sys::cuMemcpyHtoDAsync_v2(d, wp, BIG, rs),
                                "cuMemcpyHtoDAsync",
                            );
                            ck(sys::cuStreamSynchronize(rs), "cuStreamSynchronize");
                        }
                        Figure::PageableH2D => ck(
                            sys::cuMemcpyHtoD_v2(d, self.pageable.as_ptr().cast(), BIG),
                            "cuMemcpyHtoD",
                        ),
                        Figure::PageableD2H => ck(
                            sys::cuMemcpyDtoH_v2(self.pageable.as_mut_ptr().cast(), d, BIG),
                            "cuMemcpyDtoH",
                        ),
                        Figure::AllocAsync => {
                            let mut p = 0u64;
                            ck(sys::cuMemAllocAsync(&mut p, SMALL, rs), "cuMemAllocAsync");
                            ck(sys::cuMemFreeAsync(p, rs), "cuMemFreeAsync");
                        }
                        Figure::Alloc => {
                            let mut p = 0u64;
                            ck(sys::cuMemAlloc_v2(&mut p, SMALL), "cuMemAlloc");
                            ck(sys::cuMemFree_v2(p), "cuMemFree");
                        }
                        Figure::AllocUseFree => {
                            let mut p = 0u64;
                            ck(sys::cuMemAlloc_v2(&mut p, SMALL), "cuMemAlloc");
                            ck(sys::cuMemsetD8Async(p, 1, SMALL, rs), "cuMemsetD8Async");
                            ck(sys::cuMemFree_v2(p), "cuMemFree");
                        }
                        Figure::DropInUse => {
                            if idle(rs) {
                                launch_spin(self.spin, rs, 0, 0, BUSY_NS);
                            }
                            let mut p = 0u64;
                            ck(sys::cuMemAlloc_v2(&mut p, SMALL), "cuMemAlloc");
                            launch_spin(self.spin, rs, p, SMALL / 8, 0);
                            let t = Instant::now();
                            ck(sys::cuMemFree_v2(p), "cuMemFree");
                            part = t.elapsed();
                        }
                    }
                }
            }
            Way::Cudart => {
                let Some(c) = &self.cudart else { return None };
                let dp = d as *mut c_void;
                let hp = self.pinned.as_host_ptr() as *mut c_void;
                // SAFETY: as above, through libcudart's entry points (kinds: 1 H2D, 2 D2H).
                unsafe {
                    match fig {
                        Figure::PinnedH2D => {
                            ok(
                                (c.memcpy_async)(dp, hp, BIG, 1, c.stream),
                                "cudaMemcpyAsync",
                            );
                            ok((c.stream_sync)(c.stream), "cudaStreamSynchronize");
                        }
                        Figure::PinnedD2H => {
                            ok(
                                (c.memcpy_async)(hp, dp, BIG, 2, c.stream),
                                "cudaMemcpyAsync",
                            );
                            ok((c.stream_sync)(c.stream), "cudaStreamSynchronize");
                        }
                        Figure::WriteCombinedH2D => {
                            let wp = self.wc.as_host_ptr() as *const c_void;
                            ok(
                                (c.memcpy_async)(dp, wp, BIG, 1, c.stream),
                                "cudaMemcpyAsync",
                            );
                            ok((c.stream_sync)(c.stream), "cudaStreamSynchronize");
                        }
                        Figure::PageableH2D => ok(
                            (c.memcpy)(dp, self.pageable.as_ptr().cast(), BIG, 1),
                            "cudaMemcpy",
                        ),
                        Figure::PageableD2H => ok(
                            (c.memcpy)(self.pageable.as_mut_ptr().cast(), dp, BIG, 2),
                            "cudaMemcpy",
                        ),
                        Figure::AllocAsync => {
                            let mut p = std::ptr::null_mut();
                            ok((c.malloc_async)(&mut p, SMALL, c.stream), "cudaMallocAsync");
                            ok((c.free_async)(p, c.stream), "cudaFreeAsync");
                        }
                        Figure::Alloc => {
                            let mut p = std::ptr::null_mut();
                            ok((c.malloc)(&mut p, SMALL), "cudaMalloc");
                            ok((c.free)(p), "cudaFree");
                        }
                        Figure::AllocUseFree => {
                            let mut p = std::ptr::null_mut();
                            ok((c.malloc)(&mut p, SMALL), "cudaMalloc");
                            ok((c.memset_async)(p, 1, SMALL, c.stream), "cudaMemsetAsync");
                            ok((c.free)(p), "cudaFree");
                        }
                        Figure::DropInUse => {
                            // libcudart's stream is a driver stream of the same context.
                            let cs = c.stream as sys::CUstream;
                            if idle(cs) {
                                launch_spin(self.spin, cs, 0, 0, BUSY_NS);
                            }
                            let mut p = std::ptr::null_mut();
                            ok((c.malloc)(&mut p, SMALL), "cudaMalloc");
                            launch_spin(self.spin, cs, p as u64, SMALL / 8, 0);
                            let t = Instant::now();
                            ok((c.free)(p), "cudaFree");
                            part = t.elapsed();
                        }
                    }
                }
            }
        }
        Some(part)
    }

    fn sync_all(&self) {
        if let Err(e) = self.stream.synchronize() {
            die(&format!("synchronize: {e}"));
        }
        // SAFETY: live streams.
        unsafe {
            ck(
                sys::cuStreamSynchronize(self.raw_stream),
                "cuStreamSynchronize",
            )
        };
        if let Some(c) = &self.cudart {
            // SAFETY: live stream.
            ok(
                unsafe { (c.stream_sync)(c.stream) },
                "cudaStreamSynchronize",
            );
        }
    }

    fn batch(&mut self, fig: Figure, way: Way, n: u64) -> Option<Duration> {
        self.sync_all();
        let t = Instant::now();
        let mut parts = Duration::ZERO;
        for _ in 0..n {
            parts += self.op(fig, way)?;
        }
        self.sync_all();
        Some(if fig.times_part() { parts } else { t.elapsed() })
    }

    fn medians_us(&mut self, fig: Figure, reps: usize) -> [Option<f64>; 3] {
        let n = fig.batch();
        let ways = [Way::Crate, Way::Driver, Way::Cudart];
        let mut v: [Vec<f64>; 3] = Default::default();
        for rep in 0..=reps {
            for i in common::turns(rep, ways.len()) {
                if let Some(d) = self.batch(fig, ways[i], n) {
                    if rep > 0 {
                        v[i].push(d.as_secs_f64() * 1e6 / n as f64);
                    }
                }
            }
        }
        v.map(|mut x| {
            x.sort_by(f64::total_cmp);
            x.get(x.len() / 2).copied()
        })
    }
}

fn main() {
    match cuda_runtime::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => {
            println!("memory bench: no CUDA device; nothing to measure");
            return;
        }
        Err(e) => {
            println!("memory bench: {e}; nothing to measure");
            return;
        }
    }
    let mk = || -> cuda_runtime::Result<Setup> {
        let stream = Stream::new()?;
        let dev = DeviceBuffer::<u8>::zeroed(BIG)?;
        let pinned = PinnedBuffer::<u8>::new(BIG)?;
        let wc = PinnedBuffer::<u8>::with_flags(BIG, HostAllocFlags::WRITE_COMBINED)?;
        let stamps = DeviceBuffer::<u64>::new(2)?;
        let mut raw_stream: sys::CUstream = std::ptr::null_mut();
        let ptx = CString::new(kernels::spin::PTX).unwrap_or_else(|_| die("PTX has a NUL"));
        let mut module: sys::CUmodule = std::ptr::null_mut();
        let mut spin: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the crate made its primary context current on this thread above; valid
        // out-parameters; NUL-terminated image and name.
        unsafe {
            ck(sys::cuStreamCreate(&mut raw_stream, 0), "cuStreamCreate");
            ck(
                sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()),
                "cuModuleLoadData",
            );
            ck(
                sys::cuModuleGetFunction(&mut spin, module, c"spin".as_ptr()),
                "cuModuleGetFunction",
            );
        }
        Ok(Setup {
            stream,
            raw_stream,
            spin,
            stamps,
            dev,
            pinned,
            wc,
            pageable: vec![1u8; BIG],
            cudart: None,
        })
    };
    let mut setup = mk().unwrap_or_else(|e| die(&e.to_string()));
    setup.cudart = Cudart::load();
    let quick = std::env::var("MEMORY_BENCH_QUICK").is_ok();

    if !quick {
        let mut c = Criterion::default()
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(1000))
            .sample_size(10)
            .configure_from_args();
        for fig in Figure::ALL {
            let mut g = c.benchmark_group(fig.name());
            for (way, label) in [
                (Way::Crate, "cuda-runtime"),
                (Way::Driver, "driver"),
                (Way::Cudart, "libcudart"),
            ] {
                if way == Way::Cudart && setup.cudart.is_none() {
                    continue;
                }
                g.bench_function(label, |b| {
                    b.iter_custom(|iters| {
                        setup.batch(fig, way, black_box(iters)).unwrap_or_default()
                    })
                });
            }
            g.finish();
        }
    }

    println!("\nSummary: medians of interleaved batches, 11 per copy and 41 per allocation figure (copies: GB/s; allocation and drop: us)");
    println!(
        "{:<42} {:>12} {:>12} {:>12} {:>10} {:>12}",
        "figure", "cuda-runtime", "driver", "libcudart", "vs driver", "vs libcudart"
    );
    for fig in Figure::ALL {
        let reps = if fig.is_copy() { 11 } else { 41 };
        let [ours, raw, rt] = setup.medians_us(fig, reps);
        let show = |v: Option<f64>| match v {
            Some(us) if fig.is_copy() => format!("{:.2}", BIG as f64 / (us * 1e3)),
            Some(us) => format!("{us:.3}"),
            None => "-".into(),
        };
        // Speed ratios: above 1 means the crate is faster.
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if a > 0.0 => format!("{:.3}x", b / a),
            _ => "-".into(),
        };
        println!(
            "{:<42} {:>12} {:>12} {:>12} {:>10} {:>12}",
            fig.name(),
            show(ours),
            show(raw),
            show(rt),
            ratio(ours, raw),
            ratio(ours, rt)
        );
    }
    println!("(ratios are speed ratios: above 1 means this crate is faster)");
    println!(
        "targets: page-locked >= 0.98x libcudart; pageable H2D >= 1.5x, D2H >= 1.25x libcudart;"
    );
    println!("         mallocAsync+freeAsync >= 1.0x libcudart and >= 50x cudaMalloc+cudaFree;");
    println!("         malloc+free and the malloc + memsetAsync + free loop >= 1.0x libcudart;");
    println!(
        "         drop of a buffer in use: the drop alone (1 MiB used behind a {} ms spin on its \
         stream), far below cuMemFree / cudaFree, which wait for the device",
        BUSY_NS / 1_000_000
    );
}
