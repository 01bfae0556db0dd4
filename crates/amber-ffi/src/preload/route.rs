//! Where a path call goes: to the kernel unchanged, to the kernel with a
//! path rewritten (a symlink in the pool that leads out of it), or to the
//! pool. Absolute paths are compared with the mount directory lexically;
//! relative ones are joined to the working directory this module tracks
//! (the kernel's, or a directory in the pool after chdir there), or to a
//! served directory descriptor for the *at() calls.

use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicBool, Ordering};

use amber_core::Core;
use amber_format::ROOT_INO;
use parking_lot::RwLock;

use super::state::{self, Config, Inside};
use crate::abi::{bytes, ret};
use crate::posix::resolve::{is_plain, under_mount, Found, Place};
use crate::posix::{Dev, Errno, PResult, Pool};

/// The working directory as the process names it (absolute).
static CWD: RwLock<Vec<u8>> = RwLock::new(Vec::new());
/// Whether a relative path without ".." can reach the mount: the working
/// directory is in it or above it.
static CWD_NEAR: AtomicBool = AtomicBool::new(false);
static CWD_READ: std::sync::Once = std::sync::Once::new();

/// Where a path leads.
pub enum Where {
    Kernel,
    Rewritten(CString),
    Pool(&'static Pool, Found),
}

/// The kernel's working directory, by system call (no hook sees it).
pub fn kernel_cwd() -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: getcwd into a buffer we own of the given length.
    let n = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    buf.truncate(usize::try_from(n).unwrap_or(0).saturating_sub(1));
    buf
}

/// Records the working directory `cwd` (absolute).
pub fn set_cwd(cfg: &Config, cwd: Vec<u8>) {
    let m = &cfg.mount;
    let near = under_mount(m, &cwd).is_some() || under_mount(&cwd, m).is_some();
    CWD_NEAR.store(near, Ordering::Relaxed);
    *CWD.write() = cwd;
}

/// The working directory if it lies in the pool (as the process names it).
pub fn pool_cwd(cfg: &Config) -> Option<Vec<u8>> {
    let cwd = CWD.read();
    under_mount(&cfg.mount, &cwd).map(|_| cwd.clone())
}

fn has_dotdot(p: &[u8]) -> bool {
    p.split(|&b| b == b'/').any(|c| c == b"..")
}

/// Whether `p` (relative to `dirfd`) surely goes to the kernel, decided
/// without allocating or thread-local state, as most calls a program
/// makes are: a literal absolute path away from the mount, a literal
/// relative one from a working directory away from it, or one relative
/// to a kernel directory descriptor.
#[inline]
fn surely_kernel(cfg: &Config, dirfd: c_int, p: &[u8]) -> bool {
    let m = &cfg.mount[..];
    if p.starts_with(b"/") {
        let spelled = p.starts_with(m) && (p.len() == m.len() || p[m.len()] == b'/' || m == b"/");
        return !spelled && is_plain(p);
    }
    if dirfd != libc::AT_FDCWD {
        return !state::is_served(dirfd);
    }
    CWD_READ.is_completed()
        && !CWD_NEAR.load(Ordering::Relaxed)
        && !p.starts_with(b".")
        && is_plain(p)
}

/// Where `path` (relative to `dirfd`) leads.
pub fn route(cfg: &Config, dirfd: c_int, p: &[u8], follow: bool) -> PResult<Where> {
    if p.is_empty() {
        return Ok(Where::Kernel);
    }
    if !p.starts_with(b"/") && dirfd != libc::AT_FDCWD {
        let Some(served) = state::served_fd(dirfd) else {
            return Ok(Where::Kernel);
        };
        let (pool, _pass, _inside) = served?;
        let start = pool
            .files
            .with(dirfd, |f| f.ino())
            .ok_or(Errno(libc::EBADF))?;
        return walk(cfg, pool, start, p, follow);
    }
    CWD_READ.call_once(|| set_cwd(cfg, kernel_cwd()));
    let joined;
    let abs = if p.starts_with(b"/") {
        p
    } else {
        if !CWD_NEAR.load(Ordering::Relaxed) && !has_dotdot(p) {
            return Ok(Where::Kernel);
        }
        joined = [&CWD.read()[..], b"/", p].concat();
        &joined[..]
    };
    let Some(rest) = under_mount(&cfg.mount, abs) else {
        return Ok(Where::Kernel);
    };
    let Some(pool) = state::own(cfg) else {
        state::unserved(cfg)?;
        return Ok(Where::Kernel);
    };
    let rest = if rest.is_empty() { b"/".to_vec() } else { rest };
    walk(cfg, pool, ROOT_INO, &rest, follow)
}

fn walk(cfg: &Config, pool: &'static Pool, start: u64, p: &[u8], follow: bool) -> PResult<Where> {
    let _pass = pool.enter()?;
    Ok(
        match pool.walker(Some(&cfg.mount)).walk(start, p, follow)? {
            Place::Pool(found) => Where::Pool(pool, found),
            Place::Kernel(k) => Where::Rewritten(CString::new(k).map_err(|_| Errno(libc::EINVAL))?),
        },
    )
}

/// Runs a path call: `kernel` with the path (maybe rewritten) when the
/// kernel serves it, `served` on the pool when it does; `fail` with errno
/// set on error.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn on_path<T>(
    dirfd: c_int,
    path: *const c_char,
    follow: bool,
    kernel: impl FnOnce(*const c_char) -> T,
    served: impl FnOnce(&'static Pool, &Found) -> PResult<T>,
    fail: T,
) -> T {
    let Some(cfg) = state::config() else {
        return kernel(path);
    };
    // SAFETY: the caller's contract.
    let Ok(p) = (unsafe { bytes(path) }) else {
        return kernel(path);
    };
    if surely_kernel(cfg, dirfd, p) {
        return kernel(path);
    }
    let Some(_inside) = Inside::enter() else {
        return kernel(path);
    };
    match route(cfg, dirfd, p, follow) {
        Ok(Where::Kernel) => kernel(path),
        Ok(Where::Rewritten(k)) => kernel(k.as_ptr()),
        Ok(Where::Pool(pool, found)) => {
            ret(pool.enter().and_then(|_pass| served(pool, &found)), fail)
        }
        Err(e) => ret(Err(e), fail),
    }
}

/// The path of directory `ino` from the pool's root, found by walking
/// ".." up and looking for each directory in its parent.
pub fn pool_path(core: &Core<Dev>, mut ino: u64) -> PResult<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    while ino != ROOT_INO {
        let parent = core.lookup(ino, b"..")?.ino;
        let mut name = None;
        core.readdir(parent, 0, |e| {
            if e.ino == ino {
                name = Some(e.name);
            }
            name.is_none()
        })?;
        names.push(name.ok_or(Errno(libc::ENOENT))?);
        if names.len() > 4096 {
            return Err(Errno(libc::ELOOP));
        }
        ino = parent;
    }
    let mut out = Vec::new();
    for n in names.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(n);
    }
    Ok(out)
}
