//! The interposer's hooks: one function per libc function it covers,
//! with libc's signature, which the shim libamberfs_preload.so calls,
//! through the served library's table (`preload::table`), for the libc
//! function of the same name. A hook serves its call when the
//! descriptor is served or the path leads into the pool, and otherwise
//! calls libc's own function with the same arguments. Every hook's safety
//! contract is its libc namesake's: valid pointers for what the call
//! reads and writes.
#![allow(clippy::missing_safety_doc)]

mod dirs;
mod fds;
mod io;
mod mmap;
mod paths;
mod stat;
mod std_streams;
mod stdio;
mod xattr;

pub use dirs::*;
pub use fds::*;
pub use io::*;
pub use mmap::*;
pub use paths::*;
pub use stat::*;
pub use stdio::*;
pub use xattr::*;

use std::sync::Arc;

use super::state;
use crate::abi::ret;
use crate::posix::file::OpenFile;
use crate::posix::{Errno, PResult, Pool};

/// Runs `served` on the description of `fd` if it is served, else
/// `kernel`; `fail` with errno set on error.
fn on_fd<T>(
    fd: libc::c_int,
    kernel: impl FnOnce() -> T,
    served: impl FnOnce(&'static Pool, &Arc<OpenFile>) -> PResult<T>,
    fail: T,
) -> T {
    match state::served_fd(fd) {
        None => kernel(),
        Some(Err(e)) => ret(Err(e), fail),
        Some(Ok((pool, _pass, _inside))) => {
            let r = pool.files.with(fd, |f| served(pool, f));
            ret(r.unwrap_or(Err(Errno(libc::EBADF))), fail)
        }
    }
}

/// An offset argument as the pool takes it.
fn offset(off: i64) -> PResult<u64> {
    u64::try_from(off).map_err(|_| Errno(libc::EINVAL))
}
