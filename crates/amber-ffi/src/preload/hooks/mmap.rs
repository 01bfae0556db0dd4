//! mmap and its family. A `MAP_SHARED` mapping of a served file shows the
//! file's own pool blocks (posix/mapping.rs, design.md §16): stores
//! through it and write() meet on one page, msync and fsync make its
//! stores durable. `MAP_PRIVATE` gets anonymous memory filled with the
//! file's bytes (a private copy is what MAP_PRIVATE promises until the
//! file changes). munmap, mprotect, msync, madvise and mremap act on the
//! Amber mappings under their range and hand the rest to the kernel.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use libc::{off64_t, size_t};

use super::on_fd;
use crate::abi::ret;
use crate::posix::file::OpenFile;
use crate::posix::mapping::{self, Place};
use crate::posix::{reserve, Errno, PResult, Pool};
use crate::preload::state::{self, Inside};
use crate::preload::{lessee_map, real};
use amber_pmem::Window;

/// A shared mapping of served file `f`: its window placed as the flags
/// say, a `MAP_FIXED` one replacing what the range held (Amber mappings
/// there are unmapped first, so the table never names memory gone).
fn shared_map(
    pool: &Pool,
    f: &OpenFile,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off64_t,
) -> PResult<*mut c_void> {
    let (req, pages) = mapping::check(f, len, prot, flags, off)?;
    let at = addr as usize;
    let place = if flags & libc::MAP_FIXED != 0 {
        pool.core().unmap_range(at, pages).map_err(Errno::from)?;
        // SAFETY: the program asked for exactly this range with
        // MAP_FIXED, which gives up whatever it held.
        Place::Reserved(unsafe { Window::reserve_at(pages, at) }.map_err(Errno)?)
    } else if flags & libc::MAP_FIXED_NOREPLACE != 0 {
        Place::FreeAt(at)
    } else {
        Place::Near(at)
    };
    let mapped = mapping::map_shared(pool, f, req, pages, place)?;
    Ok(mapped as *mut c_void)
}

pub unsafe fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off64_t,
) -> *mut c_void {
    let served = |pool: &'static Pool, f: &Arc<OpenFile>| {
        if mapping::is_shared(flags) {
            shared_map(pool, f, addr, len, prot, flags, off)
        } else {
            // SAFETY: the caller's contract (MAP_FIXED's range is given up).
            unsafe { mapping::copy_map(f, addr, len, prot, flags, off) }
        }
    };
    let kernel = || {
        if flags & libc::MAP_FIXED != 0 {
            forget_replaced(addr, len);
            lessee_map::before_change(addr, len);
        }
        // SAFETY: the caller's contract.
        let p = unsafe { real::mmap64(addr, len, prot, flags, fd, off) };
        lessee_map::mapped(p, len, (prot, flags), fd, off);
        p
    };
    on_fd(fd, kernel, served, libc::MAP_FAILED)
}

/// A kernel mapping with MAP_FIXED is about to replace `[addr, addr +
/// len)`: the Amber mappings there are unmapped first, so the table never
/// names memory that is another mapping now (a later munmap of it would
/// unmap the program's new one).
fn forget_replaced(addr: *mut c_void, len: size_t) {
    if let Some((pool, _inside)) = mapping_pool() {
        if let Ok(_pass) = pool.enter() {
            // A failure here leaves the Amber part mapped until the kernel
            // replaces it: its blocks stay pinned, which is safe.
            let _ = pool.core().unmap_range(addr as usize, len);
        }
    }
}

pub unsafe fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off64_t,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { mmap64(addr, len, prot, flags, fd, off) }
}

/// The pool, when this process holds one with Amber mappings and the
/// call is the program's (not the library's own), with a pass through
/// its gate; None sends the call to the kernel unchanged. A malloc's
/// munmap pays one load and a branch.
fn mapping_pool() -> Option<(&'static Pool, Inside)> {
    let pool = state::owned()?;
    if !pool.core().has_mappings() {
        return None;
    }
    Some((pool, Inside::enter()?))
}

/// Runs `ours` on the pool's mappings under `[addr, addr + len)`, then
/// `kernel` on every part of the range that was not Amber's.
fn split_range(
    pool: &Pool,
    addr: *mut c_void,
    len: size_t,
    ours: impl FnOnce(usize) -> PResult<Vec<(usize, usize)>>,
    kernel: impl Fn(*mut c_void, size_t) -> c_int,
) -> c_int {
    let r = (|| {
        let _pass = pool.enter()?;
        let parts = ours(addr as usize)?;
        for (a, n) in mapping::gaps(addr as usize, len, &parts) {
            if kernel(a as *mut c_void, n) != 0 {
                return Err(reserve::last());
            }
        }
        Ok(0)
    })();
    ret(r, -1)
}

pub unsafe fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    lessee_map::before_change(addr, len);
    let Some((pool, _inside)) = mapping_pool() else {
        // SAFETY: the caller's contract.
        return unsafe { real::munmap(addr, len) };
    };
    let ours = |a| Ok(pool.core().unmap_range(a, len)?);
    // SAFETY: the caller's contract, for the parts that are not Amber's.
    split_range(pool, addr, len, ours, |a, n| unsafe { real::munmap(a, n) })
}

pub unsafe fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    lessee_map::before_change(addr, len);
    let Some((pool, _inside)) = mapping_pool() else {
        // SAFETY: the caller's contract.
        return unsafe { real::mprotect(addr, len, prot) };
    };
    let ours = |a| Ok(pool.core().protect_range(a, len, prot)?);
    // SAFETY: the caller's contract, for the parts that are not Amber's.
    split_range(pool, addr, len, ours, |a, n| unsafe {
        real::mprotect(a, n, prot)
    })
}

pub unsafe fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    let Some((pool, _inside)) = mapping_pool() else {
        // SAFETY: the caller's contract.
        return unsafe { real::msync(addr, len, flags) };
    };
    let both = libc::MS_SYNC | libc::MS_ASYNC;
    if flags & both == both || flags & !(both | libc::MS_INVALIDATE) != 0 {
        return ret(Err(Errno(libc::EINVAL)), -1);
    }
    let ours = |a| {
        if flags & libc::MS_SYNC != 0 {
            Ok(pool.core().sync_range(a, len)?)
        } else {
            // MS_ASYNC and MS_INVALIDATE do nothing, as on Linux; the
            // parts are still Amber's, not the kernel's to see.
            Ok(pool.core().parts_of(a, len)?)
        }
    };
    // SAFETY: the caller's contract, for the parts that are not Amber's.
    split_range(pool, addr, len, ours, |a, n| unsafe {
        real::msync(a, n, flags)
    })
}

pub unsafe fn madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    let remove = advice == libc::MADV_REMOVE;
    // MADV_REMOVE over the pool's own pages would punch the pool file.
    lessee_map::before_change(addr, len);
    let Some((pool, _inside)) = mapping_pool().filter(|_| remove) else {
        // Every other advice means to an Amber mapping what it means to
        // any shared mapping of a file, and the kernel's is that.
        // SAFETY: the caller's contract.
        return unsafe { real::madvise(addr, len, advice) };
    };
    // MADV_REMOVE punches the file's range: through the core, never
    // into the pool file itself.
    let ours = |a| Ok(pool.core().remove_range(a, len)?);
    // SAFETY: the caller's contract, for the parts that are not Amber's.
    split_range(pool, addr, len, ours, |a, n| unsafe {
        real::madvise(a, n, advice)
    })
}

/// mremap; `new_addr` is read only with MREMAP_FIXED (the C function is
/// variadic; x86-64 passes the fifth argument in a register either way).
pub unsafe fn mremap(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let kernel = || {
        // SAFETY: the caller's contract.
        unsafe { real::mremap(old, old_len, new_len, flags, new_addr) }
    };
    lessee_map::before_change(old, old_len.max(1));
    if flags & libc::MREMAP_FIXED != 0 {
        lessee_map::before_change(new_addr, new_len);
    }
    let Some((pool, _inside)) = mapping_pool() else {
        return kernel();
    };
    if mapping::at(pool, old as usize).is_none() {
        if flags & libc::MREMAP_FIXED != 0 {
            if let Ok(_pass) = pool.enter() {
                let _ = pool.core().unmap_range(new_addr as usize, new_len);
            }
        }
        return kernel();
    }
    let r = (|| {
        let _pass = pool.enter()?;
        let fixed = flags & libc::MREMAP_FIXED != 0;
        if fixed && flags & libc::MREMAP_MAYMOVE == 0 {
            return Err(Errno(libc::EINVAL));
        }
        let at = if fixed {
            let n = new_len.next_multiple_of(amber_pmem::page_size());
            pool.core().unmap_range(new_addr as usize, n)?;
            // SAFETY: MREMAP_FIXED gives up the range at `new_addr`.
            Some(unsafe { Window::reserve_at(n, new_addr as usize) }.map_err(Errno)?)
        } else {
            None
        };
        mapping::remap(pool, old as usize, old_len, new_len, flags, at)
    })();
    ret(r.map(|a| a as *mut c_void), libc::MAP_FAILED)
}
