//! Calls on descriptors.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::{amberfs, pool};
use crate::abi::{buf, buf_mut, gather, iovecs, ret, scatter};
use crate::posix::file::OpenFile;
use crate::posix::{stat, vectored, Errno, PResult, Pool};

/// Runs `f` on the description `fd` names in pool `fs`; EBADF if none.
///
/// # Safety
/// `fs` is NULL or a live handle.
pub(super) unsafe fn on_fd<T>(
    fs: *const amberfs,
    fd: c_int,
    f: impl FnOnce(&Pool, &Arc<OpenFile>) -> PResult<T>,
) -> PResult<T> {
    // SAFETY: forwarded contract.
    let h = unsafe { pool(fs) }?;
    let _pass = h.pool.enter()?;
    h.pool
        .files
        .with(fd, |file| f(&h.pool, file))
        .unwrap_or(Err(Errno(libc::EBADF)))
}

/// Closes `fd`; the file is released when no other descriptor shares it.
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_close(fs: *mut amberfs, fd: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let r = unsafe { pool(fs) }.and_then(|h| {
        let _pass = h.pool.enter()?;
        h.pool.close_fd(fd)
    });
    ret(r.map(|()| 0), -1)
}

/// read(2): up to `count` bytes at the descriptor's offset, which moves
/// past them. Returns the bytes read, 0 at the end of the file.
///
/// # Safety
/// `fs` is a live handle; `buf` is valid for writes of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn amberfs_read(
    fs: *mut amberfs,
    fd: c_int,
    buf: *mut c_void,
    count: usize,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    let r = unsafe { on_fd(fs, fd, |_, f| f.read(buf_mut(buf, count)?)) };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// write(2): `count` bytes at the descriptor's offset (at the end of the
/// file under O_APPEND); the offset moves past them. Durable on return
/// under O_SYNC/O_DSYNC, else once fsync returns (or sooner, as the
/// mounted policy promises).
///
/// # Safety
/// `fs` is a live handle; `buf` is valid for reads of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn amberfs_write(
    fs: *mut amberfs,
    fd: c_int,
    buf: *const c_void,
    count: usize,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    let r = unsafe { on_fd(fs, fd, |_, f| f.write(self::buf(buf, count)?)) };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// pread(2): as `amberfs_read` at `offset`, leaving the offset alone.
///
/// # Safety
/// As `amberfs_read`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_pread(
    fs: *mut amberfs,
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    offset: libc::off_t,
) -> libc::ssize_t {
    let off = u64::try_from(offset).map_err(|_| Errno(libc::EINVAL));
    // SAFETY: the caller's contract.
    let r = unsafe { on_fd(fs, fd, |_, f| f.pread(buf_mut(buf, count)?, off?)) };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// pwrite(2): as `amberfs_write` at `offset`, leaving the offset alone.
///
/// # Safety
/// As `amberfs_write`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_pwrite(
    fs: *mut amberfs,
    fd: c_int,
    buf: *const c_void,
    count: usize,
    offset: libc::off_t,
) -> libc::ssize_t {
    let off = u64::try_from(offset).map_err(|_| Errno(libc::EINVAL));
    // SAFETY: the caller's contract.
    let r = unsafe { on_fd(fs, fd, |_, f| f.pwrite(self::buf(buf, count)?, off?, false)) };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// Vectored reads (`offset` < 0: at the descriptor's offset).
///
/// # Safety
/// `iov[..iovcnt]` are valid iovecs naming writable, disjoint memory.
unsafe fn readv_at(
    fs: *mut amberfs,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: libc::off_t,
) -> libc::ssize_t {
    let at = u64::try_from(offset).ok();
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_fd(fs, fd, |_, f| {
            vectored::read(f, &mut scatter(iovecs(iov, iovcnt)?)?, at)
        })
    };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// Vectored writes (`offset` < 0: at the descriptor's offset).
///
/// # Safety
/// `iov[..iovcnt]` are valid iovecs naming readable memory.
unsafe fn writev_at(
    fs: *mut amberfs,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: libc::off_t,
) -> libc::ssize_t {
    let at = u64::try_from(offset).ok();
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_fd(fs, fd, |_, f| {
            vectored::write(f, &gather(iovecs(iov, iovcnt)?)?, at, false)
        })
    };
    ret(r.map(|n| n as libc::ssize_t), -1)
}

/// readv(2): one read scattered over `iovcnt` buffers (at most 64 MiB).
///
/// # Safety
/// `fs` is a live handle; `iov[..iovcnt]` name writable, disjoint memory.
#[no_mangle]
pub unsafe extern "C" fn amberfs_readv(
    fs: *mut amberfs,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    unsafe { readv_at(fs, fd, iov, iovcnt, -1) }
}

/// writev(2): the buffers gathered into one write (at most 64 MiB), as
/// atomic as `amberfs_write`.
///
/// # Safety
/// `fs` is a live handle; `iov[..iovcnt]` name readable memory.
#[no_mangle]
pub unsafe extern "C" fn amberfs_writev(
    fs: *mut amberfs,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    unsafe { writev_at(fs, fd, iov, iovcnt, -1) }
}

/// preadv(2): `amberfs_readv` at `offset` (>= 0), offset left alone.
///
/// # Safety
/// As `amberfs_readv`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_preadv(
    fs: *mut amberfs,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: libc::off_t,
) -> libc::ssize_t {
    if offset < 0 {
        return ret(Err(Errno(libc::EINVAL)), -1);
    }
    // SAFETY: the caller's contract.
    unsafe { readv_at(fs, fd, iov, iovcnt, offset) }
}

/// pwritev(2): `amberfs_writev` at `offset` (>= 0), offset left alone.
///
/// # Safety
/// As `amberfs_writev`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_pwritev(
    fs: *mut amberfs,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: libc::off_t,
) -> libc::ssize_t {
    if offset < 0 {
        return ret(Err(Errno(libc::EINVAL)), -1);
    }
    // SAFETY: the caller's contract.
    unsafe { writev_at(fs, fd, iov, iovcnt, offset) }
}

/// lseek(2): SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE. Returns
/// the new offset.
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_lseek(
    fs: *mut amberfs,
    fd: c_int,
    offset: libc::off_t,
    whence: c_int,
) -> libc::off_t {
    // SAFETY: the caller's contract.
    let r = unsafe { on_fd(fs, fd, |_, f| f.lseek(offset, whence)) };
    ret(r.map(|p| p as libc::off_t), -1)
}

/// fstat(2).
///
/// # Safety
/// `fs` is a live handle; `st` is valid for writes of a `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn amberfs_fstat(fs: *mut amberfs, fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { on_fd(fs, fd, |_, f| f.attr()) }.and_then(|a| {
        // SAFETY: `st` is NULL or writable, per the caller's contract.
        let out = unsafe { st.as_mut() }.ok_or(Errno(libc::EFAULT))?;
        *out = stat::stat(&a);
        Ok(0)
    });
    ret(r, -1)
}

/// fsync(2): the file's data and metadata are durable on return.
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_fsync(fs: *mut amberfs, fd: c_int) -> c_int {
    // SAFETY: the caller's contract.
    ret(unsafe { on_fd(fs, fd, |_, f| f.fsync()) }.map(|()| 0), -1)
}

/// fdatasync(2): as `amberfs_fsync` (the metadata needed to read the data
/// back is all there is to persist).
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_fdatasync(fs: *mut amberfs, fd: c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { amberfs_fsync(fs, fd) }
}

/// ftruncate(2): durable on return.
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_ftruncate(
    fs: *mut amberfs,
    fd: c_int,
    length: libc::off_t,
) -> c_int {
    let len = u64::try_from(length).map_err(|_| Errno(libc::EINVAL));
    // SAFETY: the caller's contract.
    ret(
        unsafe { on_fd(fs, fd, |_, f| f.ftruncate(len?)) }.map(|()| 0),
        -1,
    )
}

/// fallocate(2) with mode 0, FALLOC_FL_KEEP_SIZE, or
/// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (others: EOPNOTSUPP).
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_fallocate(
    fs: *mut amberfs,
    fd: c_int,
    mode: c_int,
    offset: libc::off_t,
    len: libc::off_t,
) -> c_int {
    let range = u64::try_from(offset).and_then(|o| Ok((o, u64::try_from(len)?)));
    let range = range.map_err(|_| Errno(libc::EINVAL));
    // SAFETY: the caller's contract.
    let r = unsafe {
        on_fd(fs, fd, |_, f| {
            range.and_then(|(o, l)| f.fallocate(mode, o, l))
        })
    };
    ret(r.map(|()| 0), -1)
}
