//! Calls on paths. Paths are absolute within the pool ("/a/b"; a missing
//! leading slash means the same); symlinks are followed as the kernel
//! would, with absolute targets starting at the pool's root.

use std::ffi::{c_char, c_int, c_uint};

use amber_format::ROOT_INO;

use super::{amberfs, pool};
use crate::abi::{bytes, ret};
use crate::posix::resolve::{Found, Place};
use crate::posix::{stat, Errno, PResult, Pool};

/// Resolves `path` in `fs` and runs `f` on where it leads.
///
/// # Safety
/// `fs` is NULL or a live handle; `path` is NULL or a NUL-terminated
/// string.
pub(super) unsafe fn on_path<T>(
    fs: *const amberfs,
    path: *const c_char,
    follow: bool,
    f: impl FnOnce(&Pool, &Found) -> PResult<T>,
) -> PResult<T> {
    // SAFETY: forwarded contract.
    let (h, p) = unsafe { (pool(fs)?, bytes(path)?) };
    let _pass = h.pool.enter()?;
    match h.pool.walker(None).walk(ROOT_INO, p, follow)? {
        Place::Pool(found) => f(&h.pool, &found),
        // Without a mount directory nothing leads out of the pool.
        Place::Kernel(_) => Err(Errno(libc::EXDEV)),
    }
}

/// open(2): O_RDONLY, O_WRONLY or O_RDWR, with O_CREAT, O_EXCL, O_TRUNC,
/// O_APPEND, O_SYNC/O_DSYNC, O_DIRECTORY, O_NOFOLLOW, O_PATH as open(2)
/// reads them (`mode` for a created file, taken as given: no umask).
/// Returns a descriptor for the other calls.
///
/// # Safety
/// `fs` is a live handle; `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn amberfs_open(
    fs: *mut amberfs,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    let follow = flags & libc::O_NOFOLLOW == 0
        && flags & (libc::O_CREAT | libc::O_EXCL) != (libc::O_CREAT | libc::O_EXCL);
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_path(fs, path, follow, |p, found| {
            let file = p.open_found(found, flags, mode, 0)?;
            p.install(file, true)
        })
    };
    ret(r, -1)
}

/// stat(2) (`follow`) or lstat(2) into `st`.
///
/// # Safety
/// As `amberfs_stat`.
unsafe fn stat_path(
    fs: *mut amberfs,
    path: *const c_char,
    st: *mut libc::stat,
    follow: bool,
) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { on_path(fs, path, follow, |p, f| p.attr(f.existing()?)) }.and_then(|a| {
        // SAFETY: `st` is NULL or writable, per the caller's contract.
        let out = unsafe { st.as_mut() }.ok_or(Errno(libc::EFAULT))?;
        *out = stat::stat(&a);
        Ok(0)
    });
    ret(r, -1)
}

/// stat(2): attributes of what `path` names, following symlinks.
///
/// # Safety
/// `fs` is a live handle; `path` a NUL-terminated string; `st` valid for
/// writes of a `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_stat(
    fs: *mut amberfs,
    path: *const c_char,
    st: *mut libc::stat,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { stat_path(fs, path, st, true) }
}

/// lstat(2): as `amberfs_stat`, but a final symlink is described itself.
///
/// # Safety
/// As `amberfs_stat`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_lstat(
    fs: *mut amberfs,
    path: *const c_char,
    st: *mut libc::stat,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { stat_path(fs, path, st, false) }
}

/// unlink(2): removes a name; the file goes when its last name and last
/// descriptor are gone. Durable on return.
///
/// # Safety
/// `fs` is a live handle; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn amberfs_unlink(fs: *mut amberfs, path: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    ret(
        unsafe { on_path(fs, path, false, |p, f| p.remove_found(f, false)) }.map(|()| 0),
        -1,
    )
}

/// mkdir(2) with permission bits `mode` (no umask). Durable on return.
///
/// # Safety
/// `fs` is a live handle; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn amberfs_mkdir(
    fs: *mut amberfs,
    path: *const c_char,
    mode: libc::mode_t,
) -> c_int {
    // SAFETY: the caller's contract.
    ret(
        unsafe { on_path(fs, path, false, |p, f| p.mkdir_found(f, mode, 0)) }.map(|()| 0),
        -1,
    )
}

/// rmdir(2): removes an empty directory. Durable on return.
///
/// # Safety
/// `fs` is a live handle; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn amberfs_rmdir(fs: *mut amberfs, path: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    ret(
        unsafe { on_path(fs, path, false, |p, f| p.remove_found(f, true)) }.map(|()| 0),
        -1,
    )
}

/// renameat2(2): `flags` 0 (replace the target), RENAME_NOREPLACE (1) or
/// RENAME_EXCHANGE (2). Atomic and durable on return.
///
/// # Safety
/// `fs` is a live handle; `from` and `to` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn amberfs_rename(
    fs: *mut amberfs,
    from: *const c_char,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: the caller's contract (twice).
    let r = unsafe {
        on_path(fs, from, false, |_, src| {
            on_path(fs, to, false, |p, dst| p.rename_found(src, dst, flags))
        })
    };
    ret(r.map(|()| 0), -1)
}

/// statvfs(3) of the pool: block size, blocks and inodes, free counts.
///
/// # Safety
/// `fs` is a live handle; `out` valid for writes of a `struct statvfs`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_statfs(fs: *mut amberfs, out: *mut libc::statvfs) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { pool(fs) }.and_then(|h| {
        let _pass = h.pool.enter()?;
        // SAFETY: `out` is NULL or writable, per the caller's contract.
        let out = unsafe { out.as_mut() }.ok_or(Errno(libc::EFAULT))?;
        *out = stat::statvfs(&h.pool.core().statfs());
        Ok(0)
    });
    ret(r, -1)
}
