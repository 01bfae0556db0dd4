//! Amber for C and for unmodified programs.
//!
//! * `libamberfs` (this crate as a cdylib or staticlib, with
//!   `include/amberfs.h`): a pool handle and POSIX-shaped calls on it
//!   (`capi/`).
//! * The LD_PRELOAD interposer's code (`preload/`): the package
//!   `amber-ffi-preload` builds `libamberfs_preload.so` by expanding
//!   [`export_preload!`], so its exported libc-named symbols are defined
//!   here, with every unsafe block of both.
//!
//! Both sit on `posix/`: POSIX semantics over a mounted pool in safe Rust
//! (descriptors, open file descriptions, path resolution as the kernel
//! does it, errno values). This and amber-pmem are the only crates with
//! unsafe code; every unsafe block says why it is sound.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod capi;
pub mod posix;
