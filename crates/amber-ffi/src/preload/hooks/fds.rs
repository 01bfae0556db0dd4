//! Calls on descriptors themselves: close, dup, fcntl, flock, the
//! attribute calls through a descriptor, the working directory, umask,
//! and exec and _exit (the pool is synced or unmounted first).

use std::ffi::{c_char, c_int, c_uint, c_ulong};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use amber_core::SetAttr;
use amber_format::FileKind;

use super::on_fd;
use super::paths::{owner, times};
use super::std_streams;
use crate::abi::ret;
use crate::posix::errno::tell_once;
use crate::posix::file::OpenFile;
use crate::posix::resolve::Found;
use crate::posix::{reserve, Errno, PResult, Pool};
use crate::preload::route::{self, on_path, pool_path};
use crate::preload::state::{self, Inside};
use crate::preload::{lessee, real};

static LOCK_TOLD: AtomicBool = AtomicBool::new(false);
static FCNTL_TOLD: AtomicBool = AtomicBool::new(false);

#[inline]
pub unsafe fn close(fd: c_int) -> c_int {
    lessee::forget(fd);
    if state::forked() {
        // An inherited served descriptor: forget it without touching the
        // parent's pool.
        if let Some(pool) = state::pool_any() {
            if let Some(file) = pool.files.remove(fd) {
                std::mem::forget(file);
            }
        }
        // SAFETY: no pointers.
        return unsafe { real::close(fd) };
    }
    if state::is_served(fd) {
        std_streams::no_longer_served(fd);
    }
    match state::served_fd(fd) {
        // SAFETY: no pointers.
        None => unsafe { real::close(fd) },
        Some(r) => ret(
            r.and_then(|(pool, _pass, _inside)| pool.close_fd(fd))
                .map(|()| 0),
            -1,
        ),
    }
}

/// Forgets the served descriptors in `first..=last` before the kernel
/// closes them.
fn forget_range(first: u32, last: u32) {
    let Some(pool) = state::pool_any() else {
        return;
    };
    for fd in pool.files.served() {
        if (first..=last).contains(&(fd as u32)) {
            if !state::forked() {
                std_streams::no_longer_served(fd);
            }
            let _ = pool.files.remove(fd).map(|f| {
                if state::forked() {
                    std::mem::forget(f);
                } else {
                    pool.flocks.release(&f);
                }
            });
        }
    }
}

pub unsafe fn close_range(first: c_uint, last: c_uint, fl: c_int) -> c_int {
    if fl & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        forget_range(first, last);
    }
    // SAFETY: no pointers.
    unsafe { real::close_range(first, last, fl) }
}

pub unsafe fn closefrom(low: c_int) {
    forget_range(low.max(0) as u32, u32::MAX);
    // SAFETY: no pointers.
    unsafe { real::close_range(low.max(0) as u32, u32::MAX, 0) };
}

/// Gives the kernel descriptor `new` (a copy of served `fd`) the same
/// description.
fn share(pool: &Pool, new: c_int, file: &Arc<OpenFile>) -> PResult<c_int> {
    if let Some(old) = pool.files.insert(new, file.clone())? {
        pool.flocks.release(&old);
    }
    Ok(new)
}

/// fcntl(F_DUPFD[_CLOEXEC]) at the kernel, then shared.
fn dup_from(
    pool: &Pool,
    fd: c_int,
    cmd: c_int,
    min: c_int,
    file: &Arc<OpenFile>,
) -> PResult<c_int> {
    // SAFETY: fcntl with integer arguments.
    let new = unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, min) };
    if new < 0 {
        return Err(reserve::last());
    }
    share(pool, new as c_int, file)
}

pub unsafe fn dup(fd: c_int) -> c_int {
    let served = |p: &'static Pool, f: &Arc<OpenFile>| dup_from(p, fd, libc::F_DUPFD, 0, f);
    // SAFETY: no pointers.
    on_fd(fd, || unsafe { real::dup(fd) }, served, -1)
}

pub unsafe fn dup3(old: c_int, new: c_int, fl: c_int) -> c_int {
    let served = |p: &'static Pool, f: &Arc<OpenFile>| {
        if old == new {
            return Err(Errno(libc::EINVAL));
        }
        reserve::dup3(old, new, fl & libc::O_CLOEXEC != 0)?;
        share(p, new, f)
    };
    let kernel = || {
        // SAFETY: no pointers.
        let r = unsafe { real::dup3(old, new, fl) };
        if r >= 0 {
            lessee::forget(new);
            forget_range(new as u32, new as u32);
        }
        r
    };
    let standard = !state::forked() && old != new;
    if standard {
        std_streams::before_dup(state::is_served(old), state::is_served(new), new);
    }
    let r = on_fd(old, kernel, served, -1);
    if standard && r == new && state::is_served(new) {
        std_streams::now_served(new);
    }
    r
}

pub unsafe fn dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        // SAFETY: no pointers; fcntl(F_GETFD) checks `old` is open.
        let open = state::owned().is_some_and(|p| p.files.is_served(old))
            || unsafe { real::fcntl(old, libc::F_GETFD, 0) } >= 0;
        return if open {
            new
        } else {
            ret(Err(Errno(libc::EBADF)), -1)
        };
    }
    // SAFETY: no pointers.
    unsafe { dup3(old, new, 0) }
}

/// fcntl on a served descriptor.
fn fcntl_served(
    p: &Pool,
    fd: c_int,
    f: &Arc<OpenFile>,
    cmd: c_int,
    arg: c_ulong,
) -> PResult<c_int> {
    match cmd {
        libc::F_GETFL => Ok(f.flags()),
        libc::F_SETFL => {
            f.set_flags(arg as c_int);
            Ok(0)
        }
        libc::F_GETFD | libc::F_SETFD => {
            // SAFETY: integer arguments; the reserved descriptor carries
            // FD_CLOEXEC for exec to honour.
            let r = unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) };
            if r < 0 {
                Err(reserve::last())
            } else {
                Ok(r as c_int)
            }
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => dup_from(p, fd, cmd, arg as c_int, f),
        libc::F_GETLK | libc::F_SETLK | libc::F_SETLKW => record_lock(cmd, arg),
        libc::F_OFD_GETLK | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => {
            tell_once(&LOCK_TOLD, "open file description locks (F_OFD_*) are not served on pool files (EINVAL); POSIX locks and flock are");
            Err(Errno(libc::EINVAL))
        }
        _ => {
            tell_once(
                &FCNTL_TOLD,
                &format!("fcntl command {cmd} is not served on pool files (EINVAL)"),
            );
            Err(Errno(libc::EINVAL))
        }
    }
}

/// POSIX record locks belong to the process, and only this process can
/// reach the pool: every lock is granted, and F_GETLK finds none.
fn record_lock(cmd: c_int, arg: c_ulong) -> PResult<c_int> {
    let fl = arg as *mut libc::flock;
    // SAFETY: the caller's contract: `arg` points at a struct flock.
    let fl = unsafe { fl.as_mut() }.ok_or(Errno(libc::EFAULT))?;
    let t = c_int::from(fl.l_type);
    if ![libc::F_RDLCK, libc::F_WRLCK, libc::F_UNLCK].contains(&t) {
        return Err(Errno(libc::EINVAL));
    }
    if cmd == libc::F_GETLK {
        fl.l_type = libc::F_UNLCK as i16;
    }
    Ok(0)
}

pub unsafe fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let served = |p: &'static Pool, f: &Arc<OpenFile>| fcntl_served(p, fd, f, cmd, arg);
    let kernel = || {
        // SAFETY: the caller's contract for `arg`.
        let r = unsafe { real::fcntl(fd, cmd, arg) };
        // The lease paths' hints: flags that changed, a new descriptor.
        match cmd {
            libc::F_SETFL if r >= 0 => lessee::forget(fd),
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC if r >= 0 => lessee::forget(r),
            _ => {}
        }
        r
    };
    on_fd(fd, kernel, served, -1)
}

pub unsafe fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fcntl(fd, cmd, arg) }
}

pub unsafe fn flock(fd: c_int, op: c_int) -> c_int {
    let served = |p: &'static Pool, f: &Arc<OpenFile>| p.flocks.flock(f, op).map(|()| 0);
    // SAFETY: no pointers.
    on_fd(fd, || unsafe { real::flock(fd, op) }, served, -1)
}

fn set_fd(fd: c_int, set: PResult<SetAttr>, kernel: impl FnOnce() -> c_int) -> c_int {
    on_fd(fd, kernel, |_, f| f.setattr(&set.clone()?).map(|_| 0), -1)
}

pub unsafe fn fchmod(fd: c_int, m: libc::mode_t) -> c_int {
    let set = Ok(SetAttr {
        perm: Some(m & 0o7777),
        ..Default::default()
    });
    // SAFETY: no pointers.
    set_fd(fd, set, || unsafe { real::fchmod(fd, m) })
}

pub unsafe fn fchown(fd: c_int, u: libc::uid_t, g: libc::gid_t) -> c_int {
    // SAFETY: no pointers.
    set_fd(fd, Ok(owner(u, g)), || unsafe { real::fchown(fd, u, g) })
}

pub unsafe fn futimens(fd: c_int, t: *const libc::timespec) -> c_int {
    // SAFETY: the caller's contract for `t`.
    let set = unsafe { times(t) };
    // SAFETY: as above.
    set_fd(fd, set, || unsafe { real::futimens(fd, t) })
}

/// Makes directory `ino` the working directory; the kernel's becomes the
/// mount directory itself, so a relative path that reaches the kernel
/// after all fails rather than naming some other file.
fn chdir_pool(pool: &Pool, ino: u64) -> PResult<c_int> {
    if pool.attr(ino)?.kind != FileKind::Directory {
        return Err(Errno(libc::ENOTDIR));
    }
    let cfg = state::config().ok_or(Errno(libc::EIO))?;
    let cwd = [&cfg.mount[..], &pool_path(pool.core(), ino)?].concat();
    let mount = std::ffi::CString::new(cfg.mount.clone()).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: a NUL-terminated path we own.
    unsafe { real::chdir(mount.as_ptr()) };
    route::set_cwd(cfg, cwd);
    Ok(0)
}

/// After a kernel chdir: the working directory is the kernel's again.
fn kernel_cwd_changed(r: c_int) -> c_int {
    if let (true, Some(cfg)) = (r == 0, state::config()) {
        route::set_cwd(cfg, route::kernel_cwd());
    }
    r
}

pub unsafe fn chdir(p: *const c_char) -> c_int {
    let served = |pool: &'static Pool, f: &Found| chdir_pool(pool, f.existing()?);
    // SAFETY: the caller's contract.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            p,
            true,
            |k| kernel_cwd_changed(real::chdir(k)),
            served,
            -1,
        )
    }
}

pub unsafe fn fchdir(fd: c_int) -> c_int {
    let served = |pool: &'static Pool, f: &Arc<OpenFile>| chdir_pool(pool, f.ino());
    // SAFETY: no pointers.
    on_fd(
        fd,
        || kernel_cwd_changed(unsafe { real::fchdir(fd) }),
        served,
        -1,
    )
}

pub unsafe fn getcwd(b: *mut c_char, n: libc::size_t) -> *mut c_char {
    let cwd = state::config().and_then(route::pool_cwd);
    let Some(cwd) = cwd else {
        // SAFETY: the caller's contract.
        return unsafe { real::getcwd(b, n) };
    };
    let need = cwd.len() + 1;
    let out = if b.is_null() {
        // glibc's extension: allocate, at least `n` bytes.
        // SAFETY: malloc has no preconditions.
        unsafe { libc::malloc(need.max(n)) }.cast::<c_char>()
    } else if n < need {
        return ret(Err(Errno(libc::ERANGE)), std::ptr::null_mut());
    } else {
        b
    };
    if out.is_null() {
        return ret(Err(Errno(libc::ENOMEM)), out);
    }
    // SAFETY: `out` holds at least `need` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(cwd.as_ptr().cast(), out, cwd.len());
        *out.add(cwd.len()) = 0;
    }
    out
}

pub unsafe fn __getcwd_chk(b: *mut c_char, n: libc::size_t, _buflen: libc::size_t) -> *mut c_char {
    // SAFETY: forwarded contract.
    unsafe { getcwd(b, n) }
}

pub unsafe fn umask(m: libc::mode_t) -> libc::mode_t {
    // SAFETY: no pointers.
    let old = unsafe { real::umask(m) };
    state::set_umask(m);
    old
}

pub unsafe fn execve(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int {
    state::sync_before_exec();
    // SAFETY: the caller's contract.
    unsafe { real::execve(p, a, e) }
}

pub unsafe fn execv(p: *const c_char, a: *const *const c_char) -> c_int {
    state::sync_before_exec();
    // SAFETY: the caller's contract.
    unsafe { real::execv(p, a) }
}

pub unsafe fn execvp(p: *const c_char, a: *const *const c_char) -> c_int {
    state::sync_before_exec();
    // SAFETY: the caller's contract.
    unsafe { real::execvp(p, a) }
}

pub unsafe fn execvpe(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int {
    state::sync_before_exec();
    // SAFETY: the caller's contract.
    unsafe { real::execvpe(p, a, e) }
}

pub unsafe fn fexecve(fd: c_int, a: *const *const c_char, e: *const *const c_char) -> c_int {
    state::sync_before_exec();
    // SAFETY: the caller's contract.
    unsafe { real::fexecve(fd, a, e) }
}

/// _exit skips atexit handlers: unmount here, then end the process.
pub unsafe fn _exit(status: c_int) -> ! {
    if Inside::enter().is_some() {
        state::exit_now();
    }
    // SAFETY: ends the process; nothing after it runs.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    unreachable!("exit_group returned")
}

#[allow(non_snake_case)]
pub unsafe fn _Exit(status: c_int) -> ! {
    // SAFETY: forwarded contract.
    unsafe { _exit(status) }
}
