//! Device images for [cuda-runtime](https://crates.io/crates/cuda-runtime): its kernel files
//! that use the CUDA device runtime (marked `// cuda-runtime: device-runtime`: kernels that
//! launch kernels, `cudaGraphSetConditional`), linked ahead of time with NVIDIA's
//! `libcudadevrt.a` into fat binaries, so that they load with only the driver
//! (`cuModuleLoadData`), no CUDA toolkit at build or run time.
//!
//! One module per kernel file, named by its stem, with the image ([`cdp::FATBIN`]) and the
//! SHA-256 of the kernel sources it was built from ([`cdp::SOURCES_SHA256`], as the committed
//! PTX's header records it), which cuda-runtime's generated code compares with its own sources
//! at compile time. cuda-runtime's `scripts/update-ptx` builds the images with the pinned nvcc
//! from PyPI and `scripts/check-ptx` (CI) checks them byte for byte.
//!
//! The images contain NVIDIA's device runtime in object form, redistributed under the CUDA
//! Toolkit EULA: see the NOTICE file. cuda-runtime uses this crate through its default feature
//! `device-runtime`; `default-features = false` leaves it out.

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The GPU architectures every image has machine code (SASS) for, as `major * 10 + minor`: one
/// per architecture family, since a cubin runs on its own compute capability and later minor
/// versions of the same major one (sm_80's on 8.6, 8.7 and 8.9; sm_100's on 10.3; sm_120's on
/// 12.1). The images hold no PTX (the device runtime cannot be JIT-linked without the library),
/// so other GPUs cannot load them. An image of a file built for a newer architecture
/// (`// cuda-runtime: arch = sm_90`) holds only the ones from it on.
pub const ARCHS: &[u32] = &[75, 80, 90, 100, 120];

/// Bytes aligned as the driver reads a fat binary's header and entries (8-byte fields).
#[repr(C, align(16))]
struct Aligned<B: ?Sized>(B);

macro_rules! image {
    ($stem:ident) => {
        #[doc = concat!("The device image of cuda-runtime's `kernels/", stringify!($stem), ".cu`.")]
        pub mod $stem {
            static BYTES: &super::Aligned<[u8]> = &super::Aligned(*include_bytes!(concat!(
                "../images/",
                stringify!($stem),
                ".fatbin"
            )));

            /// The fat binary (`nvcc -dlink -fatbin`, compressed), aligned to 16 bytes.
            pub static FATBIN: &[u8] = &BYTES.0;

            /// The SHA-256 of the kernel sources the image was built from, in hexadecimal (the
            /// file name and contents of the source and its local headers, as cuda-runtime-build
            /// hashes them).
            pub const SOURCES_SHA256: &str =
                include_str!(concat!("../images/", stringify!($stem), ".sha256"));
        }
    };
}

// One line per image (scripts/check-ptx checks that every image has one).
image!(cdp);
image!(graph_cond);

#[cfg(test)]
mod tests {
    const IMAGES: [(&str, &[u8], &str); 2] = [
        ("cdp", super::cdp::FATBIN, super::cdp::SOURCES_SHA256),
        (
            "graph_cond",
            super::graph_cond::FATBIN,
            super::graph_cond::SOURCES_SHA256,
        ),
    ];

    #[test]
    fn images_are_aligned_fat_binaries_with_a_source_hash() {
        for (stem, image, hash) in IMAGES {
            assert_eq!(image.as_ptr() as usize % 16, 0, "{stem}");
            // The fat binary magic, little-endian, and the declared size inside the file.
            assert_eq!(image[..4], 0xBA55_ED50u32.to_le_bytes(), "{stem}");
            let header = u16::from_le_bytes([image[6], image[7]]) as u64;
            let mut size = [0u8; 8];
            size.copy_from_slice(&image[8..16]);
            assert!(
                header + u64::from_le_bytes(size) <= image.len() as u64,
                "{stem}"
            );
            // The entries (each a 16-bit kind, a 32-bit header size at 4, a 64-bit padded
            // payload size at 8 and the architecture at 28) tile the declared size exactly, and
            // are all machine code (kind 2, ELF; no PTX), one per architecture of ARCHS.
            let (mut at, end) = (
                header as usize,
                header as usize + u64::from_le_bytes(size) as usize,
            );
            let mut archs = std::vec::Vec::new();
            while at < end {
                let word = |o: usize, n: usize| {
                    image[at + o..at + o + n]
                        .iter()
                        .rev()
                        .fold(0u64, |v, &b| v << 8 | b as u64)
                };
                assert_eq!(word(0, 2), 2, "{stem}: an entry that is not machine code");
                archs.push(word(28, 4) as u32);
                at += (word(4, 4) + word(8, 8)) as usize;
            }
            assert_eq!(at, end, "{stem}");
            assert_eq!(archs, super::ARCHS, "{stem}");
            let hex = hash.trim_end();
            assert_eq!(hex.len(), 64, "{stem}");
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{stem}");
        }
    }
}
