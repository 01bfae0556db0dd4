//! Extended attributes by path (following symlinks or not) and by
//! descriptor, with getxattr's size protocol.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use libc::{size_t, ssize_t, AT_FDCWD};

use super::on_fd;
use crate::abi::{buf, buf_mut, bytes};
use crate::posix::file::OpenFile;
use crate::posix::resolve::Found;
use crate::posix::{PResult, Pool};
use crate::preload::real;
use crate::preload::route::on_path;

/// An xattr call on a path, served by `op` on the inode it names.
unsafe fn by_path<T>(
    p: *const c_char,
    follow: bool,
    kernel: impl FnOnce(*const c_char) -> T,
    op: impl FnOnce(&Pool, u64) -> PResult<T>,
    fail: T,
) -> T {
    let served = |pool: &'static Pool, f: &Found| op(pool, f.existing()?);
    // SAFETY: the caller's contract.
    unsafe { on_path(AT_FDCWD, p, follow, kernel, served, fail) }
}

/// An xattr call on a descriptor.
fn by_fd<T>(
    fd: c_int,
    kernel: impl FnOnce() -> T,
    op: impl FnOnce(&Pool, u64) -> PResult<T>,
    fail: T,
) -> T {
    on_fd(
        fd,
        kernel,
        |pool, f: &Arc<OpenFile>| op(pool, f.ino()),
        fail,
    )
}

/// getxattr's served part.
///
/// # Safety
/// `n` NUL-terminated; `v` valid for writes of `s` bytes.
unsafe fn get(
    pool: &Pool,
    ino: u64,
    n: *const c_char,
    v: *mut c_void,
    s: size_t,
) -> PResult<ssize_t> {
    // SAFETY: the caller's contract.
    Ok(pool.getxattr(ino, unsafe { bytes(n) }?, unsafe { buf_mut(v, s) }?)? as ssize_t)
}

/// setxattr's served part.
///
/// # Safety
/// `n` NUL-terminated; `v` valid for reads of `s` bytes.
unsafe fn set(
    pool: &Pool,
    ino: u64,
    n: *const c_char,
    v: *const c_void,
    s: size_t,
    fl: c_int,
) -> PResult<c_int> {
    // SAFETY: the caller's contract.
    pool.setxattr(ino, unsafe { bytes(n) }?, unsafe { buf(v, s) }?, fl)
        .map(|()| 0)
}

/// listxattr's served part.
///
/// # Safety
/// `l` valid for writes of `s` bytes.
unsafe fn list(pool: &Pool, ino: u64, l: *mut c_char, s: size_t) -> PResult<ssize_t> {
    // SAFETY: the caller's contract.
    Ok(pool.listxattr(ino, unsafe { buf_mut(l.cast(), s) }?)? as ssize_t)
}

/// removexattr's served part.
///
/// # Safety
/// `n` NUL-terminated.
unsafe fn remove(pool: &Pool, ino: u64, n: *const c_char) -> PResult<c_int> {
    // SAFETY: the caller's contract.
    pool.removexattr(ino, unsafe { bytes(n) }?).map(|()| 0)
}

pub unsafe fn getxattr(p: *const c_char, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            true,
            |k| real::getxattr(k, n, v, s),
            |pl, i| get(pl, i, n, v, s),
            -1,
        )
    }
}

pub unsafe fn lgetxattr(p: *const c_char, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            false,
            |k| real::lgetxattr(k, n, v, s),
            |pl, i| get(pl, i, n, v, s),
            -1,
        )
    }
}

pub unsafe fn fgetxattr(fd: c_int, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t {
    // SAFETY: the caller's contract (every unsafe call below).
    by_fd(
        fd,
        || unsafe { real::fgetxattr(fd, n, v, s) },
        |pl, i| unsafe { get(pl, i, n, v, s) },
        -1,
    )
}

pub unsafe fn setxattr(
    p: *const c_char,
    n: *const c_char,
    v: *const c_void,
    s: size_t,
    fl: c_int,
) -> c_int {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            true,
            |k| real::setxattr(k, n, v, s, fl),
            |pl, i| set(pl, i, n, v, s, fl),
            -1,
        )
    }
}

pub unsafe fn lsetxattr(
    p: *const c_char,
    n: *const c_char,
    v: *const c_void,
    s: size_t,
    fl: c_int,
) -> c_int {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            false,
            |k| real::lsetxattr(k, n, v, s, fl),
            |pl, i| set(pl, i, n, v, s, fl),
            -1,
        )
    }
}

pub unsafe fn fsetxattr(
    fd: c_int,
    n: *const c_char,
    v: *const c_void,
    s: size_t,
    fl: c_int,
) -> c_int {
    // SAFETY: the caller's contract (every unsafe call below).
    by_fd(
        fd,
        || unsafe { real::fsetxattr(fd, n, v, s, fl) },
        |pl, i| unsafe { set(pl, i, n, v, s, fl) },
        -1,
    )
}

pub unsafe fn listxattr(p: *const c_char, l: *mut c_char, s: size_t) -> ssize_t {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            true,
            |k| real::listxattr(k, l, s),
            |pl, i| list(pl, i, l, s),
            -1,
        )
    }
}

pub unsafe fn llistxattr(p: *const c_char, l: *mut c_char, s: size_t) -> ssize_t {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            false,
            |k| real::llistxattr(k, l, s),
            |pl, i| list(pl, i, l, s),
            -1,
        )
    }
}

pub unsafe fn flistxattr(fd: c_int, l: *mut c_char, s: size_t) -> ssize_t {
    // SAFETY: the caller's contract (every unsafe call below).
    by_fd(
        fd,
        || unsafe { real::flistxattr(fd, l, s) },
        |pl, i| unsafe { list(pl, i, l, s) },
        -1,
    )
}

pub unsafe fn removexattr(p: *const c_char, n: *const c_char) -> c_int {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            true,
            |k| real::removexattr(k, n),
            |pl, i| remove(pl, i, n),
            -1,
        )
    }
}

pub unsafe fn lremovexattr(p: *const c_char, n: *const c_char) -> c_int {
    // SAFETY: the caller's contract (every unsafe call below).
    unsafe {
        by_path(
            p,
            false,
            |k| real::lremovexattr(k, n),
            |pl, i| remove(pl, i, n),
            -1,
        )
    }
}

pub unsafe fn fremovexattr(fd: c_int, n: *const c_char) -> c_int {
    // SAFETY: the caller's contract (every unsafe call below).
    by_fd(
        fd,
        || unsafe { real::fremovexattr(fd, n) },
        |pl, i| unsafe { remove(pl, i, n) },
        -1,
    )
}
