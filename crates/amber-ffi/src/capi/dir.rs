//! Directory iteration: a stream opened on a path, read an entry at a
//! time into a caller's `amberfs_dirent`.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::paths::on_path;
use super::{amberfs, pool};
use crate::abi::ret;
use crate::posix::dir::{d_type, DirStream};
use crate::posix::{Errno, PResult};

/// An open directory stream (opaque to C).
#[allow(non_camel_case_types)]
pub struct amberfs_dir {
    fs: *const amberfs,
    stream: parking_lot::Mutex<DirStream>,
}

/// One directory entry.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct amberfs_dirent {
    /// Inode number.
    pub ino: u64,
    /// DT_REG, DT_DIR, DT_LNK, ... as in `struct dirent`.
    pub kind: u8,
    /// The name, NUL-terminated.
    pub name: [c_char; 256],
}

/// Opens directory `path` for listing; "." and ".." come first. Returns
/// NULL with errno set on failure (ENOTDIR for a file).
///
/// # Safety
/// `fs` is a live handle; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn amberfs_opendir(
    fs: *mut amberfs,
    path: *const c_char,
) -> *mut amberfs_dir {
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_path(fs, path, true, |p, f| {
            let file = p.open_found(f, libc::O_RDONLY | libc::O_DIRECTORY, 0, 0)?;
            DirStream::new(Arc::new(file))
        })
    };
    let r = r.and_then(|stream| {
        // SAFETY: `fs` was just used as a live handle.
        unsafe { pool(fs) }?.dirs.fetch_add(1, Ordering::SeqCst);
        let fs = fs.cast_const();
        let dir = amberfs_dir {
            fs,
            stream: parking_lot::Mutex::new(stream),
        };
        Ok(Box::into_raw(Box::new(dir)))
    });
    ret(r, std::ptr::null_mut())
}

/// The next entry of `dir` into `out`: returns 1, or 0 at the end, or -1
/// with errno set.
///
/// # Safety
/// `dir` is a stream from `amberfs_opendir` not yet closed; `out` is
/// valid for writes of an `amberfs_dirent`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_readdir(dir: *mut amberfs_dir, out: *mut amberfs_dirent) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { next(dir, out) };
    ret(r, -1)
}

/// # Safety
/// As `amberfs_readdir`.
unsafe fn next(dir: *mut amberfs_dir, out: *mut amberfs_dirent) -> PResult<c_int> {
    // SAFETY: the caller's contract: NULL or a live stream.
    let d = unsafe { dir.as_ref() }.ok_or(Errno(libc::EINVAL))?;
    // SAFETY: the stream's handle outlives it (unmount refuses while a
    // stream is open).
    let h = unsafe { pool(d.fs) }?;
    let _pass = h.pool.enter()?;
    let Some(e) = d.stream.lock().next(h.pool.core())? else {
        return Ok(0);
    };
    // SAFETY: the caller's contract: NULL or writable.
    let out = unsafe { out.as_mut() }.ok_or(Errno(libc::EFAULT))?;
    out.ino = e.ino;
    out.kind = d_type(e.kind);
    out.name = [0; 256];
    for (o, &b) in out.name.iter_mut().zip(e.name.iter().take(255)) {
        *o = b as c_char;
    }
    Ok(1)
}

/// Closes `dir`.
///
/// # Safety
/// `dir` is a stream from `amberfs_opendir`, not used again.
#[no_mangle]
pub unsafe extern "C" fn amberfs_closedir(dir: *mut amberfs_dir) -> c_int {
    if dir.is_null() {
        return ret(Err(Errno(libc::EINVAL)), -1);
    }
    // SAFETY: from Box::into_raw in amberfs_opendir; the caller gives it up.
    let d = unsafe { Box::from_raw(dir) };
    // SAFETY: the stream's handle outlives it.
    if let Ok(h) = unsafe { pool(d.fs) } {
        drop(d.stream);
        h.dirs.fetch_sub(1, Ordering::SeqCst);
    }
    0
}
