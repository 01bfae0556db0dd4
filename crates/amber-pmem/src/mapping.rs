//! An address-space mapping placed on a huge-page boundary.
//!
//! The kernel only backs a mapping with 2 MiB pages (or device-DAX with its
//! native alignment) when the virtual address is aligned to that size, and a
//! plain `mmap` gives no such guarantee. So, like libpmem2, find a free
//! range large enough to hold an aligned one, and map the pool there.
//!
//! The pool is mapped with that address as a hint, never with `MAP_FIXED`
//! over a reservation: a `MAP_FIXED` map that fails (ext4 refusing
//! `MAP_SYNC` on a file that is not DAX) has already unmapped the
//! reservation, another thread may map into the hole, and unmapping the
//! reservation then tore out that thread's pool (a SIGSEGV in a test that
//! created two pools at once). A hinted map replaces nothing: the kernel
//! takes the hint when the range is free and places the mapping elsewhere
//! when not. (`MAP_FIXED_NOREPLACE` would say so with `EEXIST`, but the
//! kernel refuses it beside `MAP_SHARED_VALIDATE`, which `MAP_SYNC` needs.)

use crate::window::{errno, page_size};
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// The huge-page size the mapping is aligned to unless the device asks for
/// more.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Aligned places tried before the kernel is left to place the mapping:
/// each misses only when another thread maps into the range just found.
const PLACE_TRIES: usize = 8;

/// A live `mmap`ed range, unmapped on drop.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// One bit per `HUGE_PAGE` of the mapping: its pages were mapped
    /// (`populate`). 64 KiB for a 1 TiB pool.
    populated: Box<[AtomicU64]>,
}

// SAFETY: a `Mapping` is plain memory owned by this value; synchronising the
// bytes inside it is the job of the device that uses it.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only hands out the address.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` (anonymous memory when `fd` is `None`) at an
    /// address aligned to `align` (a power of two), readable and writable,
    /// with `flags` (`MAP_SHARED` and friends). Fails with the `errno` of
    /// the failing `mmap`.
    pub(crate) fn map(
        fd: Option<RawFd>,
        len: usize,
        align: usize,
        flags: libc::c_int,
    ) -> Result<Mapping, i32> {
        Mapping::map_prot(fd, len, align, flags, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// As [`Mapping::map`], with protection `prot`: `PROT_READ` alone for a
    /// pool opened read-only (the kernel refuses a writable shared mapping
    /// of a descriptor opened without write access). Aligned when a free
    /// aligned range stays free long enough to map it (every try but a
    /// race with another thread's mapping); otherwise where the kernel
    /// places it, which device-DAX aligns by itself.
    pub(crate) fn map_prot(
        fd: Option<RawFd>,
        len: usize,
        align: usize,
        flags: libc::c_int,
        prot: libc::c_int,
    ) -> Result<Mapping, i32> {
        debug_assert!(align.is_power_of_two());
        if len == 0 {
            return Err(libc::EINVAL);
        }
        let (fd, flags) = match fd {
            Some(fd) => (fd, flags),
            None => (-1, flags | libc::MAP_ANONYMOUS),
        };
        for _ in 0..PLACE_TRIES {
            let hint = free_aligned_range(len, align)?;
            let ptr = mmap(hint, len, prot, flags, fd)?;
            if ptr.as_ptr() == hint.cast() {
                return Ok(Mapping::advised(ptr, len));
            }
            // SAFETY: the mapping was just made by us, away from the hint,
            // and nothing points into it.
            unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
        }
        let ptr = mmap(std::ptr::null_mut(), len, prot, flags, fd)?;
        Ok(Mapping::advised(ptr, len))
    }

    /// Takes ownership of a fresh mapping and asks for huge pages, an
    /// optimisation a kernel without THP for this memory (or DAX, which
    /// manages its own) may refuse.
    fn advised(ptr: NonNull<u8>, len: usize) -> Mapping {
        // SAFETY: advising our own mapping changes no memory contents.
        unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
        let chunks = len.div_ceil(HUGE_PAGE).div_ceil(64);
        Mapping {
            ptr,
            len,
            populated: (0..chunks).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Start of the mapping.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Maps the pages covering `[off, off + len)` now
    /// (`MADV_POPULATE_WRITE`, Linux 5.14), each `HUGE_PAGE` of the
    /// mapping once: its pages then stay mapped (a shared mapping's page
    /// is unmapped only if the kernel reclaims it, and a touch then
    /// faults it back), and asking again walked every page table entry
    /// anew — a tenth of a leased writer's time once its data logs had
    /// gone round the pool. Its failure is ignored: an older kernel
    /// (EINVAL) or a full tmpfs leaves the pages to be mapped on first
    /// touch, where a store that cannot get its page faults as it would
    /// have without the hint.
    pub(crate) fn populate(&self, off: usize, len: usize) {
        let end = off.saturating_add(len).min(self.len);
        if end <= off {
            return;
        }
        for chunk in off / HUGE_PAGE..=(end - 1) / HUGE_PAGE {
            let (word, bit) = (&self.populated[chunk / 64], 1u64 << (chunk % 64));
            if word.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
                continue;
            }
            let first = chunk * HUGE_PAGE;
            let to = (first + HUGE_PAGE).min(self.len);
            // SAFETY: `[first, to)` is inside the mapping (which starts
            // page aligned); the advice maps pages without changing any
            // byte of them.
            unsafe {
                libc::madvise(
                    self.as_ptr().add(first).cast(),
                    to - first,
                    libc::MADV_POPULATE_WRITE,
                )
            };
        }
    }

    /// Writes back the pages covering `[off, off + len)` and waits for them.
    pub(crate) fn msync(&self, off: usize, len: usize) -> io::Result<()> {
        let page = page_size();
        let first = off & !(page - 1);
        let end = (off + len).min(self.len);
        if end <= first {
            return Ok(());
        }
        // SAFETY: `[first, end)` is inside the mapping; msync reads only
        // page-cache state.
        let rc =
            unsafe { libc::msync(self.as_ptr().add(first).cast(), end - first, libc::MS_SYNC) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by `Mapping::map` and every pointer
        // into it is derived from `self`, which is going away.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// An `align`-aligned address with `len + align` free bytes after it a
/// moment ago: a reservation large enough to hold them, given straight
/// back. The extra `align` is for device-DAX, which looks for that much
/// room at the hint before it takes it (to align the map itself).
fn free_aligned_range(len: usize, align: usize) -> Result<*mut libc::c_void, i32> {
    let total = len
        .checked_add(align.checked_mul(2).ok_or(libc::ENOMEM)?)
        .ok_or(libc::ENOMEM)?;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let reserve = mmap(std::ptr::null_mut(), total, libc::PROT_NONE, flags, -1)?;
    let start = reserve.as_ptr() as usize;
    // SAFETY: the reservation was just made by us and nothing points into
    // it; only its address is kept, as a hint for the next map.
    unsafe { libc::munmap(reserve.as_ptr().cast(), total) };
    Ok(start.next_multiple_of(align) as *mut libc::c_void)
}

/// One `mmap` of `len` bytes of `fd` at offset 0 (anonymous when `fd` is
/// -1), at `addr` if that range is free and elsewhere if not.
fn mmap(
    addr: *mut libc::c_void,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: RawFd,
) -> Result<NonNull<u8>, i32> {
    debug_assert_eq!(flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE), 0);
    // SAFETY: without MAP_FIXED the kernel replaces no existing mapping, so
    // no memory anyone holds changes; the result is checked below.
    let p = unsafe { libc::mmap(addr, len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    NonNull::new(p.cast::<u8>()).ok_or(libc::ENOMEM)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each huge page of the mapping is mapped once, whatever ranges ask
    /// for it, and no byte changes.
    #[test]
    fn populate_maps_each_huge_page_once_and_changes_nothing() {
        let len = 3 * HUGE_PAGE + 4096;
        let m = Mapping::map(None, len, HUGE_PAGE, libc::MAP_PRIVATE).unwrap();
        // SAFETY: inside the mapping, which nothing else uses.
        unsafe { m.as_ptr().add(HUGE_PAGE + 5).write(7) };
        let marked = |m: &Mapping| m.populated[0].load(Ordering::Relaxed);
        m.populate(HUGE_PAGE + 4096, 1);
        assert_eq!(marked(&m), 0b10);
        m.populate(HUGE_PAGE - 1, 2);
        assert_eq!(marked(&m), 0b11);
        m.populate(3 * HUGE_PAGE, 1 << 30);
        assert_eq!(marked(&m), 0b1011);
        m.populate(len, 10);
        assert_eq!(marked(&m), 0b1011);
        // SAFETY: as above.
        assert_eq!(unsafe { m.as_ptr().add(HUGE_PAGE + 5).read() }, 7);
    }
}
