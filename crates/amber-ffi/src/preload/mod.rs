//! The LD_PRELOAD interposer (libamberfs_preload.so, built by the package
//! amber-ffi-preload through [`crate::export_preload!`]). `state` decides
//! who serves a call, `route` where a path leads, `real` reaches libc's
//! own functions, and `hooks` has one function per covered libc call.

pub mod hooks;
pub mod lessee;
pub mod lessee_write;
pub mod real;
pub mod route;
pub mod state;

/// The C types the exported hooks' signatures use.
pub mod types {
    pub use libc::{
        dirent64, gid_t, iovec, mode_t, off64_t, size_t, ssize_t, stat64, statfs64, statvfs64,
        statx, timespec, uid_t, DIR, FILE,
    };
    pub use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
}
