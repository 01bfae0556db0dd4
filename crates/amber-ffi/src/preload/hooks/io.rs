//! read, write and their positioned and vectored forms; lseek; fsync and
//! friends; ftruncate, fallocate, posix_fadvise.

use std::ffi::{c_int, c_void};

use libc::{iovec, off64_t, size_t, ssize_t};

use std::sync::Arc;

use super::{offset, on_fd};
use crate::abi::{buf, buf_mut, gather, iovecs, scatter};
use crate::posix::file::OpenFile;
use crate::posix::Pool;
use crate::posix::{vectored, Errno};
use crate::preload::state;
use crate::preload::{lessee, lessee_write, real};

/// A kernel descriptor's read of `n` bytes into `b` served under a read
/// lease (`lessee`), at `at` or the descriptor's offset; None when the
/// kernel serves it.
///
/// # Safety
/// `b` is valid for writes of `n` bytes.
unsafe fn leased(fd: c_int, b: *mut c_void, n: size_t, at: Option<u64>) -> Option<ssize_t> {
    if n == 0 {
        return None;
    }
    // SAFETY: the caller's contract for `b`.
    let b = unsafe { buf_mut(b, n) }.ok()?;
    lessee::read(fd, &mut [b], at)
}

/// A kernel descriptor's write of `n` bytes from `b` served under a write
/// lease (`lessee_write`), at `at` or the descriptor's offset; None when
/// the kernel serves it.
///
/// # Safety
/// `b` is valid for reads of `n` bytes.
unsafe fn leased_write(fd: c_int, b: *const c_void, n: size_t, at: Option<u64>) -> Option<ssize_t> {
    if n == 0 {
        return None;
    }
    // SAFETY: the caller's contract for `b`.
    let b = unsafe { buf(b, n) }.ok()?;
    lessee_write::write(fd, b, at)
}

#[inline]
pub unsafe fn read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t {
    // SAFETY: the caller's contract for `b`.
    let kernel = || unsafe { leased(fd, b, n, None).unwrap_or_else(|| real::read(fd, b, n)) };
    let served = |_: &Pool, f: &Arc<OpenFile>| {
        // SAFETY: the caller's contract for `b`.
        let b = unsafe { buf_mut(b, n) }?;
        Ok(f.read(b)? as ssize_t)
    };
    on_fd(fd, kernel, served, -1)
}

#[inline]
pub unsafe fn write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t {
    // SAFETY: the caller's contract for `b`.
    let kernel =
        || unsafe { leased_write(fd, b, n, None).unwrap_or_else(|| real::write(fd, b, n)) };
    let served = |_: &Pool, f: &Arc<OpenFile>| {
        // SAFETY: the caller's contract for `b`.
        let b = unsafe { buf(b, n) }?;
        Ok(f.write(b)? as ssize_t)
    };
    on_fd(fd, kernel, served, -1)
}

#[inline]
pub unsafe fn pread64(fd: c_int, b: *mut c_void, n: size_t, o: off64_t) -> ssize_t {
    // SAFETY: the caller's contract for `b`; a negative offset is the
    // kernel's to refuse.
    let kernel = || unsafe {
        u64::try_from(o)
            .ok()
            .and_then(|at| leased(fd, b, n, Some(at)))
            .unwrap_or_else(|| real::pread64(fd, b, n, o))
    };
    let served = |_: &Pool, f: &Arc<OpenFile>| {
        // SAFETY: the caller's contract for `b`.
        let b = unsafe { buf_mut(b, n) }?;
        Ok(f.pread(b, offset(o)?)? as ssize_t)
    };
    on_fd(fd, kernel, served, -1)
}

#[inline]
pub unsafe fn pwrite64(fd: c_int, b: *const c_void, n: size_t, o: off64_t) -> ssize_t {
    // SAFETY: the caller's contract for `b`.
    let kernel = || unsafe {
        u64::try_from(o)
            .ok()
            .and_then(|at| leased_write(fd, b, n, Some(at)))
            .unwrap_or_else(|| real::pwrite64(fd, b, n, o))
    };
    let served = |_: &Pool, f: &Arc<OpenFile>| {
        // SAFETY: the caller's contract for `b`.
        let b = unsafe { buf(b, n) }?;
        Ok(f.pwrite(b, offset(o)?, false)? as ssize_t)
    };
    on_fd(fd, kernel, served, -1)
}

#[inline]
pub unsafe fn pread(fd: c_int, b: *mut c_void, n: size_t, o: off64_t) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { pread64(fd, b, n, o) }
}

#[inline]
pub unsafe fn pwrite(fd: c_int, b: *const c_void, n: size_t, o: off64_t) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { pwrite64(fd, b, n, o) }
}

/// Vectored reads at `at` (None: the offset), for every readv form; a
/// kernel descriptor's under a read lease if `leasable` (the offset is
/// one the kernel would take).
unsafe fn readv_at(
    fd: c_int,
    v: *const iovec,
    n: c_int,
    (at, leasable): (Option<u64>, bool),
    kernel: impl FnOnce() -> ssize_t,
) -> ssize_t {
    let kernel = || {
        let leased = || {
            // Asked first, so a socket's or a pipe's readv scatters nothing.
            let d = lessee::leasable(fd, lessee::Dir::Read)?;
            // SAFETY: the caller's contract for the iovecs.
            let mut bufs = unsafe { scatter(iovecs(v, n).ok()?) }.ok()?;
            lessee::read_as(d, fd, &mut bufs, at)
        };
        leasable.then(leased).flatten().unwrap_or_else(kernel)
    };
    let served = |_: &Pool, f: &Arc<OpenFile>| {
        // SAFETY: the caller's contract for the iovecs.
        let mut bufs = unsafe { scatter(iovecs(v, n)?) }?;
        Ok(vectored::read(f, &mut bufs, at)? as ssize_t)
    };
    on_fd(fd, kernel, served, -1)
}

/// Vectored writes at `at` (None: the offset), for every writev form; a
/// kernel descriptor's under a write lease if `leasable` (the kernel
/// would take the offset and flags as given).
unsafe fn writev_at(
    fd: c_int,
    v: *const iovec,
    n: c_int,
    (at, leasable): (Option<u64>, bool),
    sync: bool,
    kernel: impl FnOnce() -> ssize_t,
) -> ssize_t {
    let kernel = || {
        let leased = || {
            // Asked first, so a socket's or a pipe's writev gathers nothing.
            let d = lessee::leasable(fd, lessee::Dir::Write)?;
            // SAFETY: the caller's contract for the iovecs.
            let bufs = unsafe { gather(iovecs(v, n).ok()?) }.ok()?;
            lessee_write::write_vectored(d, fd, &bufs, at)
        };
        leasable.then(leased).flatten().unwrap_or_else(kernel)
    };
    let served = |_: &Pool, f: &Arc<OpenFile>| {
        // SAFETY: the caller's contract for the iovecs.
        let bufs = unsafe { gather(iovecs(v, n)?) }?;
        Ok(vectored::write(f, &bufs, at, sync)? as ssize_t)
    };
    on_fd(fd, kernel, served, -1)
}

pub unsafe fn readv(fd: c_int, v: *const iovec, n: c_int) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { readv_at(fd, v, n, (None, true), || real::readv(fd, v, n)) }
}

pub unsafe fn writev(fd: c_int, v: *const iovec, n: c_int) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { writev_at(fd, v, n, (None, true), false, || real::writev(fd, v, n)) }
}

pub unsafe fn preadv64(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t {
    if o < 0 && state::owned().is_some_and(|p| p.files.is_served(fd)) {
        return crate::abi::ret(Err(Errno(libc::EINVAL)), -1);
    }
    // SAFETY: forwarded contract.
    unsafe {
        readv_at(fd, v, n, (u64::try_from(o).ok(), o >= 0), || {
            real::preadv64(fd, v, n, o)
        })
    }
}

pub unsafe fn pwritev64(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t {
    if o < 0 && state::owned().is_some_and(|p| p.files.is_served(fd)) {
        return crate::abi::ret(Err(Errno(libc::EINVAL)), -1);
    }
    // SAFETY: forwarded contract.
    unsafe {
        writev_at(fd, v, n, (u64::try_from(o).ok(), o >= 0), false, || {
            real::pwritev64(fd, v, n, o)
        })
    }
}

pub unsafe fn preadv(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { preadv64(fd, v, n, o) }
}

pub unsafe fn pwritev(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { pwritev64(fd, v, n, o) }
}

/// preadv2: offset -1 reads at the descriptor's offset; flags are hints.
pub unsafe fn preadv64v2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, fl: c_int) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe {
        readv_at(fd, v, n, (u64::try_from(o).ok(), o >= -1), || {
            real::preadv64v2(fd, v, n, o, fl)
        })
    }
}

/// pwritev2: offset -1 writes at the descriptor's offset; RWF_SYNC and
/// RWF_DSYNC make this write durable on return.
pub unsafe fn pwritev64v2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, fl: c_int) -> ssize_t {
    let sync = fl & (libc::RWF_SYNC | libc::RWF_DSYNC) != 0;
    // A leased write is durable on return anyway; any other flag (append,
    // no-wait) is the kernel's to honour.
    let plain = fl & !(libc::RWF_SYNC | libc::RWF_DSYNC | libc::RWF_HIPRI) == 0;
    // SAFETY: forwarded contract.
    unsafe {
        writev_at(
            fd,
            v,
            n,
            (u64::try_from(o).ok(), o >= -1 && plain),
            sync,
            || real::pwritev64v2(fd, v, n, o, fl),
        )
    }
}

pub unsafe fn preadv2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, fl: c_int) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { preadv64v2(fd, v, n, o, fl) }
}

pub unsafe fn pwritev2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, fl: c_int) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { pwritev64v2(fd, v, n, o, fl) }
}

/// The fortified read (_FORTIFY_SOURCE): glibc's own calls the kernel
/// directly, so it is covered here.
pub unsafe fn __read_chk(fd: c_int, b: *mut c_void, n: size_t, buflen: size_t) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's own answer to an overflow.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded contract.
    unsafe { read(fd, b, n) }
}

pub unsafe fn __pread64_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    o: off64_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's own answer to an overflow.
        unsafe { libc::abort() };
    }
    // SAFETY: forwarded contract.
    unsafe { pread64(fd, b, n, o) }
}

pub unsafe fn __pread_chk(
    fd: c_int,
    b: *mut c_void,
    n: size_t,
    o: off64_t,
    buflen: size_t,
) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { __pread64_chk(fd, b, n, o, buflen) }
}

#[inline]
pub unsafe fn lseek64(fd: c_int, o: off64_t, w: c_int) -> off64_t {
    // SAFETY: no pointers.
    let kernel =
        || lessee_write::seek_end(fd, o, w).unwrap_or_else(|| unsafe { real::lseek64(fd, o, w) });
    on_fd(fd, kernel, |_, f| Ok(f.lseek(o, w)? as off64_t), -1)
}

#[inline]
pub unsafe fn lseek(fd: c_int, o: off64_t, w: c_int) -> off64_t {
    // SAFETY: no pointers.
    unsafe { lseek64(fd, o, w) }
}

pub unsafe fn fsync(fd: c_int) -> c_int {
    // SAFETY: no pointers.
    on_fd(
        fd,
        || lessee_write::fsync(fd).unwrap_or_else(|| unsafe { real::fsync(fd) }),
        |_, f| f.fsync().map(|()| 0),
        -1,
    )
}

pub unsafe fn fdatasync(fd: c_int) -> c_int {
    // SAFETY: no pointers.
    on_fd(
        fd,
        || lessee_write::fsync(fd).unwrap_or_else(|| unsafe { real::fdatasync(fd) }),
        |_, f| f.fsync().map(|()| 0),
        -1,
    )
}

/// syncfs on a served descriptor makes the whole pool durable.
pub unsafe fn syncfs(fd: c_int) -> c_int {
    let all = |p: &Pool, _: &Arc<OpenFile>| p.core().sync_all().map(|()| 0).map_err(Errno::from);
    // SAFETY: no pointers.
    on_fd(fd, || unsafe { real::syncfs(fd) }, all, -1)
}

/// sync_file_range on a served file: the whole file is made durable.
pub unsafe fn sync_file_range(fd: c_int, o: off64_t, n: off64_t, fl: u32) -> c_int {
    // SAFETY: no pointers.
    on_fd(
        fd,
        || unsafe { real::sync_file_range(fd, o, n, fl) },
        |_, f| f.fsync().map(|()| 0),
        -1,
    )
}

pub unsafe fn ftruncate64(fd: c_int, l: off64_t) -> c_int {
    // SAFETY: no pointers.
    let kernel =
        || lessee_write::truncate(fd, l).unwrap_or_else(|| unsafe { real::ftruncate64(fd, l) });
    on_fd(fd, kernel, |_, f| f.ftruncate(offset(l)?).map(|()| 0), -1)
}

pub unsafe fn ftruncate(fd: c_int, l: off64_t) -> c_int {
    // SAFETY: no pointers.
    unsafe { ftruncate64(fd, l) }
}

pub unsafe fn fallocate64(fd: c_int, m: c_int, o: off64_t, l: off64_t) -> c_int {
    let served = |_: &Pool, f: &Arc<OpenFile>| f.fallocate(m, offset(o)?, offset(l)?).map(|()| 0);
    let kernel = || {
        // SAFETY: no pointers.
        lessee_write::allocate(fd, m, o, l)
            .unwrap_or_else(|| unsafe { real::fallocate64(fd, m, o, l) })
    };
    on_fd(fd, kernel, served, -1)
}

pub unsafe fn fallocate(fd: c_int, m: c_int, o: off64_t, l: off64_t) -> c_int {
    // SAFETY: no pointers.
    unsafe { fallocate64(fd, m, o, l) }
}

/// posix_fallocate returns the error instead of setting errno.
pub unsafe fn posix_fallocate64(fd: c_int, o: off64_t, l: off64_t) -> c_int {
    let Some(served) = state::served_fd(fd) else {
        // A leased allocation's failure is a failed persist: EIO.
        return match lessee_write::allocate(fd, 0, o, l) {
            Some(0) => 0,
            Some(_) => libc::EIO,
            // SAFETY: no pointers.
            None => unsafe { real::posix_fallocate64(fd, o, l) },
        };
    };
    let r = served.and_then(|(pool, _pass, _inside)| {
        let f = pool
            .files
            .with(fd, |f| f.clone())
            .ok_or(Errno(libc::EBADF))?;
        // Mode 0 fills holes and grows the size; data stays.
        f.fallocate(0, offset(o)?, offset(l)?)
    });
    r.err().map_or(0, |Errno(e)| e)
}

pub unsafe fn posix_fallocate(fd: c_int, o: off64_t, l: off64_t) -> c_int {
    // SAFETY: no pointers.
    unsafe { posix_fallocate64(fd, o, l) }
}

/// Advice is only advice: accepted and ignored on a served file.
pub unsafe fn posix_fadvise64(fd: c_int, o: off64_t, l: off64_t, a: c_int) -> c_int {
    match state::served_fd(fd) {
        // SAFETY: no pointers.
        None => unsafe { real::posix_fadvise64(fd, o, l, a) },
        Some(Err(Errno(e))) => e,
        Some(Ok(_)) => 0,
    }
}

pub unsafe fn posix_fadvise(fd: c_int, o: off64_t, l: off64_t, a: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { posix_fadvise64(fd, o, l, a) }
}
