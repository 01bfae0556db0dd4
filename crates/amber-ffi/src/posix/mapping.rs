//! mmap and its family for served files, shared by the interposer's hooks
//! and libamberfs's `amberfs_mmap` calls: a `MAP_SHARED` mapping shows the
//! file's own pool blocks (the core's mappings, design.md §16), the
//! calls on an address range act on the Amber mappings under it and
//! leave the rest (`gaps`) to the kernel.

use amber_core::{MapInfo, MapRequest};
use amber_pmem::{page_size, Window};

use super::errno::{Errno, PResult};
use super::file::OpenFile;
use super::pool::Pool;
use super::reserve;

/// A `MAP_PRIVATE` mapping of `f`: anonymous memory holding a copy of
/// the file's bytes from `off` (what MAP_PRIVATE promises until the file
/// changes), at `addr` as a hint, or exactly there with MAP_FIXED. By
/// system call: in the interposer, libc's mmap is its own.
///
/// # Safety
/// With `MAP_FIXED` in `flags`, nothing may use `[addr, addr + len)`.
pub unsafe fn copy_map(
    f: &OpenFile,
    addr: *mut libc::c_void,
    len: usize,
    prot: i32,
    flags: i32,
    off: i64,
) -> PResult<*mut libc::c_void> {
    let off = u64::try_from(off).map_err(|_| Errno(libc::EINVAL))?;
    if len == 0 || !off.is_multiple_of(page_size() as u64) {
        return Err(Errno(libc::EINVAL));
    }
    let keep = flags
        & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE | libc::MAP_POPULATE | libc::MAP_NORESERVE);
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | keep;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: an anonymous mapping; `addr` is only a hint unless the
    // caller asked for MAP_FIXED, whose contract is the caller's.
    let m = unsafe { libc::syscall(libc::SYS_mmap, addr, len, rw, anon, -1, 0) };
    if m == -1 {
        return Err(reserve::last());
    }
    let m = m as *mut libc::c_void;
    // SAFETY: `m` is a fresh read-write mapping of `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(m.cast::<u8>(), len) };
    let mut done = 0;
    while done < len {
        let n = f.pread(&mut bytes[done..], off + done as u64)?;
        if n == 0 {
            break; // past the end: zeros, as the kernel's last page
        }
        done += n;
    }
    // SAFETY: changing the protection of our own fresh mapping.
    if unsafe { libc::syscall(libc::SYS_mprotect, m, len, prot) } != 0 {
        let e = reserve::last();
        // SAFETY: unmapping our own fresh mapping.
        unsafe { libc::syscall(libc::SYS_munmap, m, len) };
        return Err(e);
    }
    Ok(m)
}

/// The mmap flags a shared mapping of a served file takes; with
/// `MAP_SHARED_VALIDATE` any other fails with EOPNOTSUPP, as Linux's.
const KNOWN_FLAGS: i32 = libc::MAP_SHARED
    | libc::MAP_PRIVATE
    | libc::MAP_FIXED
    | libc::MAP_FIXED_NOREPLACE
    | libc::MAP_POPULATE
    | libc::MAP_NONBLOCK
    | libc::MAP_NORESERVE
    | libc::MAP_SYNC
    | libc::MAP_STACK
    | libc::MAP_LOCKED
    | libc::MAP_DENYWRITE
    | libc::MAP_EXECUTABLE;

/// Where a new mapping goes: its window, reserved by the caller (which
/// alone may replace memory for a program's `MAP_FIXED`), or a hint.
pub enum Place {
    /// A window the caller reserved where the program asked.
    Reserved(Window),
    /// Where the kernel chooses, near `hint` if it is free (none: 0).
    Near(usize),
    /// Exactly at this address or not at all (`MAP_FIXED_NOREPLACE`).
    FreeAt(usize),
}

/// Whether mmap's `flags` make a shared mapping.
pub fn is_shared(flags: i32) -> bool {
    // The type is the low two bits: MAP_PRIVATE (2) shares a bit with
    // MAP_SHARED_VALIDATE (3).
    matches!(flags & 3, libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE)
}

/// Checks mmap's arguments for a shared mapping of served file `f` as
/// Linux does (mm/mmap.c): the length, the offset, the flags, and the
/// description's access mode against the protection. Returns the
/// request and its length in whole pages.
pub fn check(
    f: &OpenFile,
    len: usize,
    prot: i32,
    flags: i32,
    off: i64,
) -> PResult<(MapRequest, usize)> {
    let page = page_size();
    if flags & libc::MAP_SHARED_VALIDATE == libc::MAP_SHARED_VALIDATE && flags & !KNOWN_FLAGS != 0 {
        return Err(Errno(libc::EOPNOTSUPP));
    }
    let off = u64::try_from(off).map_err(|_| Errno(libc::EINVAL))?;
    let pages = len
        .checked_next_multiple_of(page)
        .ok_or(Errno(libc::ENOMEM))?;
    if len == 0 || !off.is_multiple_of(page as u64) {
        return Err(Errno(libc::EINVAL));
    }
    if off.checked_add(pages as u64).is_none() {
        return Err(Errno(libc::EOVERFLOW));
    }
    let mode = f.flags() & libc::O_ACCMODE;
    if f.flags() & libc::O_PATH != 0 {
        return Err(Errno(libc::EBADF));
    }
    if mode == libc::O_WRONLY || prot & libc::PROT_WRITE != 0 && mode != libc::O_RDWR {
        return Err(Errno(libc::EACCES));
    }
    let validated = flags & libc::MAP_SHARED_VALIDATE == libc::MAP_SHARED_VALIDATE;
    let req = MapRequest {
        off,
        len: pages as u64,
        prot,
        may_write: mode == libc::O_RDWR,
        sync: validated && flags & libc::MAP_SYNC != 0,
    };
    Ok((req, pages))
}

/// Maps `req` of served file `f` shared, at `place`; returns the
/// address.
pub fn map_shared(
    pool: &Pool,
    f: &OpenFile,
    req: MapRequest,
    pages: usize,
    place: Place,
) -> PResult<usize> {
    let core = pool.core();
    let window = match place {
        Place::Reserved(w) => w,
        Place::Near(hint) => Window::reserve(pages, hint & !(page_size() - 1)).map_err(Errno)?,
        Place::FreeAt(addr) => Window::reserve_free_at(pages, addr).map_err(Errno)?,
    };
    let info = core.map(f.ino(), req, Some(window)).map_err(map_errno)?;
    info.addr.ok_or(Errno(libc::EIO))
}

/// mmap's errno for a core error: ENOMEM where Linux says a mapping
/// could not be made for want of room (a hole's block included).
fn map_errno(e: amber_core::FsError) -> Errno {
    match Errno::from(e) {
        Errno(libc::ENOSPC) => Errno(libc::ENOMEM),
        e => e,
    }
}

/// The parts of `[addr, addr + len)` (whole pages) that are not in
/// `parts` (sorted, inside the range): what the kernel still has to see.
pub fn gaps(addr: usize, len: usize, parts: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let end = addr.saturating_add(len.next_multiple_of(page_size()));
    let mut out = Vec::new();
    let mut at = addr;
    for &(a, n) in parts {
        if a > at {
            out.push((at, a - at));
        }
        at = at.max(a + n);
    }
    if at < end {
        out.push((at, end - at));
    }
    out
}

/// The Amber mapping under `addr`, if any.
pub fn at(pool: &Pool, addr: usize) -> Option<MapInfo> {
    pool.core().mapping_at(addr)
}

/// mremap of an Amber mapping: `[old, old + old_len)` must lie in one
/// mapping. A shrink unmaps the tail; a growth maps the next file range
/// right after it when that room is free, or else (with
/// `MREMAP_MAYMOVE`, or at `new_addr` with `MREMAP_FIXED`) maps the whole
/// new range anew and unmaps the old one: both show the same pool pages,
/// so nothing is copied. Returns the new address.
pub fn remap(
    pool: &Pool,
    old: usize,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_at: Option<Window>,
) -> PResult<usize> {
    let page = page_size();
    let (old_len, new_len) = (
        old_len.next_multiple_of(page),
        new_len.next_multiple_of(page),
    );
    if flags & libc::MREMAP_DONTUNMAP != 0 || new_len == 0 || !old.is_multiple_of(page) {
        return Err(Errno(libc::EINVAL));
    }
    let (m, file_off) = one_range(pool, old, old_len)?;
    let core = pool.core();
    let req = |off: u64, len: usize| MapRequest {
        off,
        len: len as u64,
        ..request_of(&m)
    };
    if new_at.is_none() && new_len <= old_len {
        core.unmap_range(old + new_len, old_len - new_len)
            .map_err(Errno::from)?;
        return Ok(old);
    }
    if new_at.is_none() {
        let extra = new_len - old_len;
        if let Ok(w) = Window::reserve_free_at(extra, old + old_len) {
            core.map(m.ino, req(file_off + old_len as u64, extra), Some(w))
                .map_err(map_errno)?;
            return Ok(old);
        }
        if flags & libc::MREMAP_MAYMOVE == 0 {
            return Err(Errno(libc::ENOMEM));
        }
    }
    let w = match new_at {
        Some(w) => w,
        None => Window::reserve(new_len, 0).map_err(Errno)?,
    };
    let info = core
        .map(m.ino, req(file_off, new_len), Some(w))
        .map_err(map_errno)?;
    core.unmap_range(old, old_len).map_err(Errno::from)?;
    info.addr.ok_or(Errno(libc::EIO))
}

/// The mapping under `[addr, addr + len)` as one: the Amber mappings
/// there must show one file's consecutive range with one protection
/// (what Linux would have merged into one area; EFAULT otherwise).
/// Returns the first and the file offset of `addr`.
fn one_range(pool: &Pool, addr: usize, len: usize) -> PResult<(MapInfo, u64)> {
    let first = at(pool, addr).ok_or(Errno(libc::EFAULT))?;
    let off_of = |m: &MapInfo, a: usize| m.off + (a - m.addr.unwrap_or(a)) as u64;
    let file_off = off_of(&first, addr);
    let mut pos = addr;
    // Each round passes one mapping: bounded by the table.
    while pos < addr + len {
        let m = at(pool, pos).ok_or(Errno(libc::EFAULT))?;
        let same = m.ino == first.ino && m.prot == first.prot && m.sync == first.sync;
        if !same || off_of(&m, pos) != file_off + (pos - addr) as u64 {
            return Err(Errno(libc::EFAULT));
        }
        pos = m.addr.ok_or(Errno(libc::EFAULT))? + m.len as usize;
    }
    Ok((first, file_off))
}

/// The request that made `m`, for mapping more of its file the same way.
fn request_of(m: &MapInfo) -> MapRequest {
    MapRequest {
        off: m.off,
        len: m.len,
        prot: m.prot,
        may_write: m.may_write,
        sync: m.sync,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_what_the_parts_leave() {
        let p = page_size();
        assert_eq!(gaps(0, 4 * p, &[]), vec![(0, 4 * p)]);
        assert_eq!(gaps(0, 4 * p, &[(p, p)]), vec![(0, p), (2 * p, 2 * p)]);
        assert_eq!(gaps(0, 4 * p, &[(0, p), (p, 3 * p)]), vec![]);
        assert_eq!(gaps(0, 4 * p - 1, &[(0, 2 * p)]), vec![(2 * p, 2 * p)]);
    }
}
