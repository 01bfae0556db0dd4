//! The stat family: stat, lstat, fstat, fstatat, statx, and statfs and
//! statvfs, each with its 64 form (the same layout on x86-64).

use std::ffi::{c_char, c_int, CStr};

use libc::AT_FDCWD;

use std::sync::Arc;

use super::on_fd;
use crate::abi::outside_user_space;
use crate::posix::file::OpenFile;
use crate::posix::resolve::Found;
use crate::posix::{stat, Errno, PResult, Pool};
use crate::preload::real;
use crate::preload::route::on_path;

/// Writes `v` through `out`, or EFAULT.
///
/// # Safety
/// `out` is NULL or valid for writes of a `T`.
unsafe fn put<T>(out: *mut T, v: T) -> PResult<c_int> {
    // SAFETY: the caller's contract.
    let out = unsafe { out.as_mut() }.ok_or(Errno(libc::EFAULT))?;
    *out = v;
    Ok(0)
}

#[inline]
pub unsafe fn fstat64(fd: c_int, st: *mut libc::stat64) -> c_int {
    // SAFETY: the caller's contract (stat and stat64 share a layout).
    on_fd(
        fd,
        || match crate::preload::lessee_write::fstat(fd) {
            // SAFETY: the caller's contract for `st`.
            Some(leased) => crate::abi::ret(unsafe { put(st, leased) }, -1),
            // SAFETY: the caller's contract for `st`.
            None => unsafe { real::fstat64(fd, st) },
        },
        |_, f| unsafe { put(st.cast(), stat::stat(&f.attr()?)) },
        -1,
    )
}

#[inline]
pub unsafe fn fstat(fd: c_int, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstat64(fd, st) }
}

#[inline]
pub unsafe fn fstatat64(d: c_int, p: *const c_char, st: *mut libc::stat64, fl: c_int) -> c_int {
    // SAFETY: a user-space pointer, NUL-terminated by the caller's contract.
    let empty = fl & libc::AT_EMPTY_PATH != 0
        && !outside_user_space(p)
        && unsafe { CStr::from_ptr(p) }.is_empty();
    if empty {
        // SAFETY: forwarded contract.
        return unsafe { fstat64(d, st) };
    }
    let served = |pool: &'static Pool, f: &Found| {
        let a = pool.attr(f.existing()?)?;
        if f.dir_only && a.kind != amber_format::FileKind::Directory {
            return Err(Errno(libc::ENOTDIR));
        }
        // SAFETY: the caller's contract for `st`.
        unsafe { put(st.cast(), stat::stat(&a)) }
    };
    let follow = fl & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, follow, |k| real::fstatat64(d, k, st, fl), served, -1) }
}

#[inline]
pub unsafe fn fstatat(d: c_int, p: *const c_char, st: *mut libc::stat64, fl: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstatat64(d, p, st, fl) }
}

#[inline]
pub unsafe fn stat64(p: *const c_char, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstatat64(AT_FDCWD, p, st, 0) }
}

#[inline]
pub unsafe fn stat(p: *const c_char, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstatat64(AT_FDCWD, p, st, 0) }
}

#[inline]
pub unsafe fn lstat64(p: *const c_char, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstatat64(AT_FDCWD, p, st, libc::AT_SYMLINK_NOFOLLOW) }
}

#[inline]
pub unsafe fn lstat(p: *const c_char, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { lstat64(p, st) }
}

pub unsafe fn statx(
    d: c_int,
    p: *const c_char,
    fl: c_int,
    mask: u32,
    sx: *mut libc::statx,
) -> c_int {
    // SAFETY: the caller's contract for `p`.
    let empty = !outside_user_space(p) && unsafe { CStr::from_ptr(p) }.is_empty();
    if fl & libc::AT_EMPTY_PATH != 0 && empty {
        let served = |_: &Pool, f: &Arc<OpenFile>| {
            // SAFETY: the caller's contract for `sx`.
            unsafe { put(sx, stat::statx(&f.attr()?)) }
        };
        // SAFETY: the caller's contract.
        return on_fd(d, || unsafe { real::statx(d, p, fl, mask, sx) }, served, -1);
    }
    let served = |pool: &'static Pool, f: &Found| {
        // SAFETY: the caller's contract for `sx`.
        unsafe { put(sx, stat::statx(&pool.attr(f.existing()?)?)) }
    };
    let follow = fl & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: the caller's contract.
    unsafe {
        on_path(
            d,
            p,
            follow,
            |k| real::statx(d, k, fl, mask, sx),
            served,
            -1,
        )
    }
}

pub unsafe fn statfs64(p: *const c_char, out: *mut libc::statfs64) -> c_int {
    // SAFETY: the caller's contract (statfs and statfs64 share a layout).
    let served = |pool: &'static Pool, _: &Found| unsafe {
        put(out.cast(), stat::statfs(&pool.core().statfs()))
    };
    // SAFETY: the caller's contract.
    unsafe { on_path(AT_FDCWD, p, true, |k| real::statfs64(k, out), served, -1) }
}

pub unsafe fn statfs(p: *const c_char, out: *mut libc::statfs64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { statfs64(p, out) }
}

pub unsafe fn fstatfs64(fd: c_int, out: *mut libc::statfs64) -> c_int {
    // SAFETY: the caller's contract.
    let served = |pool: &'static Pool, _: &_| unsafe {
        put(out.cast(), stat::statfs(&pool.core().statfs()))
    };
    // SAFETY: the caller's contract.
    on_fd(fd, || unsafe { real::fstatfs64(fd, out) }, served, -1)
}

pub unsafe fn fstatfs(fd: c_int, out: *mut libc::statfs64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstatfs64(fd, out) }
}

pub unsafe fn statvfs64(p: *const c_char, out: *mut libc::statvfs64) -> c_int {
    // SAFETY: the caller's contract (statvfs and statvfs64 share a layout).
    let served = |pool: &'static Pool, _: &Found| unsafe {
        put(out.cast(), stat::statvfs(&pool.core().statfs()))
    };
    // SAFETY: the caller's contract.
    unsafe { on_path(AT_FDCWD, p, true, |k| real::statvfs64(k, out), served, -1) }
}

pub unsafe fn statvfs(p: *const c_char, out: *mut libc::statvfs64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { statvfs64(p, out) }
}

pub unsafe fn fstatvfs64(fd: c_int, out: *mut libc::statvfs64) -> c_int {
    // SAFETY: the caller's contract.
    let served = |pool: &'static Pool, _: &_| unsafe {
        put(out.cast(), stat::statvfs(&pool.core().statfs()))
    };
    // SAFETY: the caller's contract.
    on_fd(fd, || unsafe { real::fstatvfs64(fd, out) }, served, -1)
}

pub unsafe fn fstatvfs(fd: c_int, out: *mut libc::statvfs64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fstatvfs64(fd, out) }
}
