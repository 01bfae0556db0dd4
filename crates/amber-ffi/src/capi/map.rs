//! Mapped files: mmap(2) of a descriptor of the pool, and the calls on
//! the ranges it returns. A shared mapping shows the file's own PM pages
//! (design.md §16); a private one is a copy.

use std::ffi::{c_int, c_void};

use super::io::on_fd;
use super::{amberfs, pool};
use crate::abi::ret;
use crate::posix::mapping::{self, Place};
use crate::posix::{Errno, PResult};
use amber_pmem::Window;

/// mmap(2) of pool descriptor `fd`: `MAP_SHARED` (or
/// `MAP_SHARED_VALIDATE`, with `MAP_SYNC` on a DAX pool) shows the file's
/// own blocks, so stores through the mapping and `amberfs_write` meet on
/// one page both ways; `MAP_PRIVATE` is a private copy. Pages past the
/// end of the file raise SIGBUS. `MAP_FIXED` replaces what `addr` held.
/// Returns `MAP_FAILED` with errno set on failure (ENODEV where the pool
/// cannot be mapped again, EACCES for a protection the descriptor does
/// not allow).
///
/// # Safety
/// `fs` is a live handle; with `MAP_FIXED`, nothing in the process may
/// use the memory at `[addr, addr + len)` any more.
#[no_mangle]
pub unsafe extern "C" fn amberfs_mmap(
    fs: *mut amberfs,
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    let map = |pool: &crate::posix::Pool, f: &std::sync::Arc<crate::posix::file::OpenFile>| {
        if !mapping::is_shared(flags) {
            // SAFETY: the caller's contract (MAP_FIXED's range is given up).
            return unsafe { mapping::copy_map(f, addr, len, prot, flags, offset) };
        }
        let (req, pages) = mapping::check(f, len, prot, flags, offset)?;
        let at = addr as usize;
        let place = if flags & libc::MAP_FIXED != 0 {
            pool.core().unmap_range(at, pages)?;
            // SAFETY: the caller gives up `[addr, addr + len)` (MAP_FIXED).
            Place::Reserved(unsafe { Window::reserve_at(pages, at) }.map_err(Errno)?)
        } else if flags & libc::MAP_FIXED_NOREPLACE != 0 {
            Place::FreeAt(at)
        } else {
            Place::Near(at)
        };
        mapping::map_shared(pool, f, req, pages, place).map(|a| a as *mut c_void)
    };
    // SAFETY: forwarded contract.
    let r = unsafe { on_fd(fs, fd, map) };
    ret(r, libc::MAP_FAILED)
}

/// Runs `ours` on pool `fs`'s mappings under the range (the Amber
/// parts), then `kernel` on the rest of it (a private copy, or memory
/// that is no mapping of the pool).
///
/// # Safety
/// `fs` is NULL or a live handle.
unsafe fn on_range(
    fs: *mut amberfs,
    (addr, len): (*mut c_void, usize),
    ours: impl FnOnce(&crate::posix::Pool, usize) -> PResult<Vec<(usize, usize)>>,
    kernel: impl Fn(*mut c_void, usize) -> c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    let r = unsafe { pool(fs) }.and_then(|h| {
        let _pass = h.pool.enter()?;
        let parts = ours(&h.pool, addr as usize)?;
        for (a, n) in mapping::gaps(addr as usize, len, &parts) {
            if kernel(a as *mut c_void, n) != 0 {
                return Err(crate::posix::reserve::last());
            }
        }
        Ok(0)
    });
    ret(r, -1)
}

/// munmap(2) of mappings `amberfs_mmap` made (a shared one's stores are
/// written back first); the rest of the range goes to munmap(2).
///
/// # Safety
/// `fs` is a live handle; nothing uses the range any more.
#[no_mangle]
pub unsafe extern "C" fn amberfs_munmap(fs: *mut amberfs, addr: *mut c_void, len: usize) -> c_int {
    let ours = |p: &crate::posix::Pool, a| Ok(p.core().unmap_range(a, len)?);
    // SAFETY: forwarded contract; the caller gives the range up.
    unsafe { on_range(fs, (addr, len), ours, |a, n| libc::munmap(a, n)) }
}

/// msync(2) with `MS_SYNC`: every store through the shared mappings under
/// the range is durable, with what the pool owes of their files.
/// `MS_ASYNC` and `MS_INVALIDATE` do nothing to them, as on Linux; the
/// rest of the range goes to msync(2).
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_msync(
    fs: *mut amberfs,
    addr: *mut c_void,
    len: usize,
    flags: c_int,
) -> c_int {
    let both = libc::MS_SYNC | libc::MS_ASYNC;
    if flags & both == both || flags & !(both | libc::MS_INVALIDATE) != 0 {
        return ret(Err(Errno(libc::EINVAL)), -1);
    }
    let ours = |p: &crate::posix::Pool, a| {
        let core = p.core();
        Ok(if flags & libc::MS_SYNC != 0 {
            core.sync_range(a, len)?
        } else {
            core.parts_of(a, len)?
        })
    };
    // SAFETY: forwarded contract.
    unsafe { on_range(fs, (addr, len), ours, |a, n| libc::msync(a, n, flags)) }
}

/// mprotect(2) of shared mappings `amberfs_mmap` made; `PROT_WRITE` needs
/// one made through a descriptor open for reading and writing (EACCES).
/// The rest of the range goes to mprotect(2).
///
/// # Safety
/// `fs` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn amberfs_mprotect(
    fs: *mut amberfs,
    addr: *mut c_void,
    len: usize,
    prot: c_int,
) -> c_int {
    let ours = |p: &crate::posix::Pool, a| Ok(p.core().protect_range(a, len, prot)?);
    // SAFETY: forwarded contract.
    unsafe { on_range(fs, (addr, len), ours, |a, n| libc::mprotect(a, n, prot)) }
}
