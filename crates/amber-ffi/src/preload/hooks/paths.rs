//! Calls on paths: open and creat in all their forms, unlink, rmdir,
//! mkdir, rename, link, symlink, readlink, truncate, access, chmod,
//! chown, utimensat.

use std::ffi::{c_char, c_int};

use amber_core::{SetAttr, TimeSet};
use amber_format::Timespec;
use libc::{mode_t, off64_t, size_t, ssize_t, AT_FDCWD};

use super::offset;
use crate::abi::{bytes, ret};
use crate::posix::resolve::Found;
use crate::posix::{Errno, PResult, Pool};
use crate::preload::real;
use crate::preload::route::{on_path, route, Where};
use crate::preload::state::{self, Inside};

const NOFOLLOW: c_int = libc::AT_SYMLINK_NOFOLLOW;

pub unsafe fn openat64(d: c_int, p: *const c_char, fl: c_int, m: mode_t) -> c_int {
    let excl = libc::O_CREAT | libc::O_EXCL;
    let follow = fl & libc::O_NOFOLLOW == 0 && fl & excl != excl;
    let served = |pool: &'static Pool, f: &Found| {
        let file = pool.open_found(f, fl, m, state::umask())?;
        pool.install(file, fl & libc::O_CLOEXEC != 0)
    };
    // A new descriptor's number may carry the lease path's hints of one
    // closed behind the hooks (glibc's own closes): they go.
    let kernel = |k| {
        // SAFETY: the caller's contract, with `k` the path to open.
        let fd = unsafe { real::openat(d, k, fl, m) };
        crate::preload::lessee::forget(fd);
        fd
    };
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, follow, kernel, served, -1) }
}

pub unsafe fn openat(d: c_int, p: *const c_char, fl: c_int, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(d, p, fl, m) }
}

pub unsafe fn open(p: *const c_char, fl: c_int, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(AT_FDCWD, p, fl, m) }
}

pub unsafe fn open64(p: *const c_char, fl: c_int, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(AT_FDCWD, p, fl, m) }
}

pub unsafe fn creat(p: *const c_char, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        openat64(
            AT_FDCWD,
            p,
            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            m,
        )
    }
}

pub unsafe fn creat64(p: *const c_char, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { creat(p, m) }
}

/// The fortified opens (_FORTIFY_SOURCE), called when the compiler could
/// not see the flags: no mode argument.
pub unsafe fn __open_2(p: *const c_char, fl: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(AT_FDCWD, p, fl, 0) }
}

pub unsafe fn __open64_2(p: *const c_char, fl: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(AT_FDCWD, p, fl, 0) }
}

pub unsafe fn __openat_2(d: c_int, p: *const c_char, fl: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(d, p, fl, 0) }
}

pub unsafe fn __openat64_2(d: c_int, p: *const c_char, fl: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { openat64(d, p, fl, 0) }
}

pub unsafe fn unlinkat(d: c_int, p: *const c_char, fl: c_int) -> c_int {
    let dir = fl & libc::AT_REMOVEDIR != 0;
    let served = |pool: &'static Pool, f: &Found| pool.remove_found(f, dir).map(|()| 0);
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, false, |k| real::unlinkat(d, k, fl), served, -1) }
}

pub unsafe fn unlink(p: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { unlinkat(AT_FDCWD, p, 0) }
}

pub unsafe fn rmdir(p: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { unlinkat(AT_FDCWD, p, libc::AT_REMOVEDIR) }
}

pub unsafe fn mkdirat(d: c_int, p: *const c_char, m: mode_t) -> c_int {
    let served =
        |pool: &'static Pool, f: &Found| pool.mkdir_found(f, m, state::umask()).map(|()| 0);
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, false, |k| real::mkdirat(d, k, m), served, -1) }
}

pub unsafe fn mkdir(p: *const c_char, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { mkdirat(AT_FDCWD, p, m) }
}

/// A call on two paths: both in the pool, both the kernel's, or EXDEV.
unsafe fn on_two(
    (d1, p1): (c_int, *const c_char),
    (d2, p2): (c_int, *const c_char),
    follow_first: bool,
    kernel: impl FnOnce(*const c_char, *const c_char) -> c_int,
    served: impl FnOnce(&'static Pool, &Found, &Found) -> PResult<()>,
) -> c_int {
    let (Some(cfg), Some(_inside)) = (state::config(), Inside::enter()) else {
        return kernel(p1, p2);
    };
    // SAFETY: the caller's contract.
    let (Ok(b1), Ok(b2)) = (unsafe { bytes(p1) }, unsafe { bytes(p2) }) else {
        return kernel(p1, p2);
    };
    let both = route(cfg, d1, b1, follow_first).and_then(|w1| Ok((w1, route(cfg, d2, b2, false)?)));
    let r = match both {
        Err(e) => Err(e),
        Ok((Where::Pool(pool, f1), Where::Pool(_, f2))) => {
            pool.enter().and_then(|_pass| served(pool, &f1, &f2))
        }
        Ok((Where::Pool(..), _)) | Ok((_, Where::Pool(..))) => Err(Errno(libc::EXDEV)),
        Ok((w1, w2)) => {
            let k1 = match &w1 {
                Where::Rewritten(c) => c.as_ptr(),
                _ => p1,
            };
            let k2 = match &w2 {
                Where::Rewritten(c) => c.as_ptr(),
                _ => p2,
            };
            return kernel(k1, k2);
        }
    };
    ret(r.map(|()| 0), -1)
}

pub unsafe fn renameat2(
    d1: c_int,
    p1: *const c_char,
    d2: c_int,
    p2: *const c_char,
    fl: u32,
) -> c_int {
    // SAFETY: the caller's contract, with the paths routing chose.
    let kernel = |k1, k2| unsafe { real::renameat2(d1, k1, d2, k2, fl) };
    // SAFETY: the caller's contract.
    unsafe {
        on_two((d1, p1), (d2, p2), false, kernel, |pool, a, b| {
            pool.rename_found(a, b, fl)
        })
    }
}

pub unsafe fn renameat(d1: c_int, p1: *const c_char, d2: c_int, p2: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { renameat2(d1, p1, d2, p2, 0) }
}

pub unsafe fn rename(p1: *const c_char, p2: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { renameat2(AT_FDCWD, p1, AT_FDCWD, p2, 0) }
}

pub unsafe fn linkat(
    d1: c_int,
    p1: *const c_char,
    d2: c_int,
    p2: *const c_char,
    fl: c_int,
) -> c_int {
    let follow = fl & libc::AT_SYMLINK_FOLLOW != 0;
    // SAFETY: the caller's contract, with the paths routing chose.
    let kernel = |k1, k2| unsafe { real::linkat(d1, k1, d2, k2, fl) };
    let served = |pool: &'static Pool, a: &Found, b: &Found| pool.link_found(a.existing()?, b);
    // SAFETY: the caller's contract.
    unsafe { on_two((d1, p1), (d2, p2), follow, kernel, served) }
}

pub unsafe fn link(p1: *const c_char, p2: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { linkat(AT_FDCWD, p1, AT_FDCWD, p2, 0) }
}

pub unsafe fn symlinkat(t: *const c_char, d: c_int, p: *const c_char) -> c_int {
    let served = |pool: &'static Pool, f: &Found| {
        // SAFETY: the caller's contract for the target string.
        pool.symlink_found(unsafe { bytes(t) }?, f).map(|()| 0)
    };
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, false, |k| real::symlinkat(t, d, k), served, -1) }
}

pub unsafe fn symlink(t: *const c_char, p: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { symlinkat(t, AT_FDCWD, p) }
}

pub unsafe fn readlinkat(d: c_int, p: *const c_char, b: *mut c_char, n: size_t) -> ssize_t {
    let served = |pool: &'static Pool, f: &Found| {
        let target = pool.readlink(f.existing()?)?;
        let k = target.len().min(n);
        // SAFETY: the caller's contract: `b` holds `n` bytes.
        unsafe { crate::abi::buf_mut(b.cast(), k) }?.copy_from_slice(&target[..k]);
        Ok(k as ssize_t)
    };
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, false, |k| real::readlinkat(d, k, b, n), served, -1) }
}

pub unsafe fn readlink(p: *const c_char, b: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { readlinkat(AT_FDCWD, p, b, n) }
}

pub unsafe fn __readlink_chk(
    p: *const c_char,
    b: *mut c_char,
    n: size_t,
    _buflen: size_t,
) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { readlinkat(AT_FDCWD, p, b, n) }
}

pub unsafe fn __readlinkat_chk(
    d: c_int,
    p: *const c_char,
    b: *mut c_char,
    n: size_t,
    _buflen: size_t,
) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { readlinkat(d, p, b, n) }
}

pub unsafe fn truncate64(p: *const c_char, l: off64_t) -> c_int {
    let served = |pool: &'static Pool, f: &Found| {
        let set = SetAttr {
            size: Some(offset(l)?),
            ..Default::default()
        };
        pool.setattr(f.existing()?, &set).map(|_| 0)
    };
    // SAFETY: the caller's contract.
    unsafe { on_path(AT_FDCWD, p, true, |k| real::truncate64(k, l), served, -1) }
}

pub unsafe fn truncate(p: *const c_char, l: off64_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { truncate64(p, l) }
}

pub unsafe fn faccessat(d: c_int, p: *const c_char, m: c_int, fl: c_int) -> c_int {
    let served = |pool: &'static Pool, f: &Found| {
        // SAFETY: get*id have no preconditions.
        let (u, g) = unsafe {
            if fl & libc::AT_EACCESS != 0 {
                (libc::geteuid(), libc::getegid())
            } else {
                (libc::getuid(), libc::getgid())
            }
        };
        pool.access(f.existing()?, m, u, g).map(|()| 0)
    };
    let follow = fl & NOFOLLOW == 0;
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, follow, |k| real::faccessat(d, k, m, fl), served, -1) }
}

pub unsafe fn access(p: *const c_char, m: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { faccessat(AT_FDCWD, p, m, 0) }
}

pub unsafe fn euidaccess(p: *const c_char, m: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { faccessat(AT_FDCWD, p, m, libc::AT_EACCESS) }
}

pub unsafe fn eaccess(p: *const c_char, m: c_int) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { euidaccess(p, m) }
}

/// Runs an attribute change on what a path names.
unsafe fn set_path(
    d: c_int,
    p: *const c_char,
    fl: c_int,
    set: PResult<SetAttr>,
    kernel: impl FnOnce(*const c_char) -> c_int,
) -> c_int {
    let served =
        |pool: &'static Pool, f: &Found| pool.setattr(f.existing()?, &set.clone()?).map(|_| 0);
    // SAFETY: the caller's contract.
    unsafe { on_path(d, p, fl & NOFOLLOW == 0, kernel, served, -1) }
}

pub unsafe fn fchmodat(d: c_int, p: *const c_char, m: mode_t, fl: c_int) -> c_int {
    let set = Ok(SetAttr {
        perm: Some(m & 0o7777),
        ..Default::default()
    });
    // SAFETY: forwarded contract.
    unsafe { set_path(d, p, fl, set, |k| real::fchmodat(d, k, m, fl)) }
}

pub unsafe fn chmod(p: *const c_char, m: mode_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fchmodat(AT_FDCWD, p, m, 0) }
}

/// The SetAttr of chown's arguments (-1 leaves one alone).
pub fn owner(u: libc::uid_t, g: libc::gid_t) -> SetAttr {
    SetAttr {
        uid: (u != u32::MAX).then_some(u),
        gid: (g != u32::MAX).then_some(g),
        ..Default::default()
    }
}

pub unsafe fn fchownat(
    d: c_int,
    p: *const c_char,
    u: libc::uid_t,
    g: libc::gid_t,
    fl: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        set_path(d, p, fl, Ok(owner(u, g)), |k| {
            real::fchownat(d, k, u, g, fl)
        })
    }
}

pub unsafe fn chown(p: *const c_char, u: libc::uid_t, g: libc::gid_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fchownat(AT_FDCWD, p, u, g, 0) }
}

pub unsafe fn lchown(p: *const c_char, u: libc::uid_t, g: libc::gid_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fchownat(AT_FDCWD, p, u, g, NOFOLLOW) }
}

/// The SetAttr of utimensat's times (NULL: both now).
///
/// # Safety
/// `t` is NULL or points at two timespecs.
pub unsafe fn times(t: *const libc::timespec) -> PResult<SetAttr> {
    let one = |ts: &libc::timespec| match ts.tv_nsec {
        libc::UTIME_NOW => Ok(Some(TimeSet::Now)),
        libc::UTIME_OMIT => Ok(None),
        n if (0..1_000_000_000).contains(&n) => Ok(Some(TimeSet::At(Timespec {
            secs: ts.tv_sec,
            nsecs: n as u32,
        }))),
        _ => Err(Errno(libc::EINVAL)),
    };
    if t.is_null() {
        return Ok(SetAttr {
            atime: Some(TimeSet::Now),
            mtime: Some(TimeSet::Now),
            ..Default::default()
        });
    }
    // SAFETY: the caller's contract: two timespecs.
    let (a, m) = unsafe { (&*t, &*t.add(1)) };
    Ok(SetAttr {
        atime: one(a)?,
        mtime: one(m)?,
        ..Default::default()
    })
}

pub unsafe fn utimensat(d: c_int, p: *const c_char, t: *const libc::timespec, fl: c_int) -> c_int {
    if p.is_null() {
        // Linux: a NULL path changes the times of `d` itself.
        // SAFETY: forwarded contract.
        return unsafe { super::futimens(d, t) };
    }
    // SAFETY: the caller's contract for `t`.
    let set = unsafe { times(t) };
    // SAFETY: forwarded contract.
    unsafe { set_path(d, p, fl, set, |k| real::utimensat(d, k, t, fl)) }
}
