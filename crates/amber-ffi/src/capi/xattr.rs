//! Extended attributes by path, following symlinks as getxattr(2) does.

use std::ffi::{c_char, c_int, c_void};

use super::amberfs;
use super::paths::on_path;
use crate::abi::{buf, buf_mut, bytes, ret};

/// getxattr(2): the value of attribute `name` copied to `value`; with
/// `size` 0, only its length. ERANGE if `size` is too small, ENODATA if
/// there is none.
///
/// # Safety
/// `fs` is a live handle; `path` and `name` NUL-terminated strings;
/// `value` valid for writes of `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn amberfs_getxattr(
    fs: *mut amberfs,
    path: *const c_char,
    name: *const c_char,
    value: *mut c_void,
    size: usize,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_path(fs, path, true, |p, f| {
            p.getxattr(f.existing()?, bytes(name)?, buf_mut(value, size)?)
        })
    };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// setxattr(2): `flags` 0, XATTR_CREATE (1) or XATTR_REPLACE (2).
/// Durable on return. `user.amberfs.durability` and
/// `user.amberfs.atomicity` set the file's guarantees (see README).
///
/// # Safety
/// `fs` is a live handle; `path` and `name` NUL-terminated strings;
/// `value` valid for reads of `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn amberfs_setxattr(
    fs: *mut amberfs,
    path: *const c_char,
    name: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_path(fs, path, true, |p, f| {
            p.setxattr(f.existing()?, bytes(name)?, buf(value, size)?, flags)
        })
    };
    ret(r.map(|()| 0), -1)
}

/// listxattr(2): the names, each NUL-terminated, into `list`; with
/// `size` 0, only the length.
///
/// # Safety
/// `fs` is a live handle; `path` a NUL-terminated string; `list` valid
/// for writes of `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn amberfs_listxattr(
    fs: *mut amberfs,
    path: *const c_char,
    list: *mut c_char,
    size: usize,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_path(fs, path, true, |p, f| {
            p.listxattr(f.existing()?, buf_mut(list.cast(), size)?)
        })
    };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// removexattr(2). Durable on return.
///
/// # Safety
/// `fs` is a live handle; `path` and `name` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn amberfs_removexattr(
    fs: *mut amberfs,
    path: *const c_char,
    name: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_path(fs, path, true, |p, f| {
            p.removexattr(f.existing()?, bytes(name)?)
        })
    };
    ret(r.map(|()| 0), -1)
}
