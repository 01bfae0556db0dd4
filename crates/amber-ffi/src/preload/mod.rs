//! The LD_PRELOAD interposer. A program preloads the shim,
//! libamberfs_preload.so (`shim`, built by the package amber-ffi-preload
//! through [`crate::export_shim!`]), which loads the interposer itself,
//! libamberfs_served.so (the package amber-ffi-served,
//! [`crate::export_served!`]), when the process has a reason to, and
//! calls its hooks through `table` from then on. In the served library
//! `state` decides who serves a call, `route` where a path leads, and
//! `hooks` has one function per covered libc call; `real` reaches libc's
//! own functions in both.

pub mod hooks;
pub mod lessee;
mod lessee_map;
pub mod lessee_write;
pub mod real;
pub mod route;
pub mod shim;
pub mod state;
pub mod table;

/// The C types the exported hooks' signatures use.
pub mod types {
    pub use libc::{
        dirent64, gid_t, iovec, mode_t, off64_t, size_t, ssize_t, stat64, statfs64, statvfs64,
        statx, timespec, uid_t, DIR, FILE,
    };
    pub use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
}
