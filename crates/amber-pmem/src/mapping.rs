//! An address-space mapping placed on a huge-page boundary.
//!
//! The kernel only backs a mapping with 2 MiB pages (or device-DAX with its
//! native alignment) when the virtual address is aligned to that size, and a
//! plain `mmap` gives no such guarantee. So, like libpmem2, reserve a larger
//! anonymous region, map the pool over an aligned address inside it and
//! give back the slack.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// The huge-page size the mapping is aligned to unless the device asks for
/// more.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// A live `mmap`ed range, unmapped on drop.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Mapping` is plain memory owned by this value; synchronising the
// bytes inside it is the job of the device that uses it.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only hands out the address.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` (anonymous memory when `fd` is `None`) at an
    /// address aligned to `align` (a power of two), readable and writable,
    /// with `flags` (`MAP_SHARED` and friends; `MAP_FIXED` is added here).
    /// Fails with the `errno` of the failing `mmap`.
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
    /// of a descriptor opened without write access).
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
        let total = len.checked_add(align).ok_or(libc::ENOMEM)?;
        // SAFETY: a fresh PROT_NONE anonymous reservation touches no
        // existing memory.
        let reserve = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if reserve == libc::MAP_FAILED {
            return Err(errno());
        }
        let start = reserve as usize;
        let aligned = (start + align - 1) & !(align - 1);
        let (fd, flags) = match fd {
            Some(fd) => (fd, flags),
            None => (-1, flags | libc::MAP_ANONYMOUS),
        };
        // SAFETY: `[aligned, aligned + len)` lies inside the reservation we
        // own, so MAP_FIXED replaces only our own PROT_NONE pages.
        let mapped = unsafe {
            libc::mmap(
                aligned as *mut libc::c_void,
                len,
                prot,
                flags | libc::MAP_FIXED,
                fd,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            let err = errno();
            // SAFETY: the whole reservation is ours and nothing points into it.
            unsafe { libc::munmap(reserve, total) };
            return Err(err);
        }
        let page = page_size();
        let used_end = aligned + len.div_ceil(page) * page;
        if aligned > start {
            // SAFETY: the head slack is part of our reservation, unused.
            unsafe { libc::munmap(reserve, aligned - start) };
        }
        if start + total > used_end {
            // SAFETY: the tail slack is part of our reservation, unused.
            unsafe { libc::munmap(used_end as *mut libc::c_void, start + total - used_end) };
        }
        // Huge pages are an optimisation: a kernel without THP for this
        // memory (or DAX, which manages its own) refusing is fine.
        // SAFETY: advising our own mapping changes no memory contents.
        unsafe { libc::madvise(mapped, len, libc::MADV_HUGEPAGE) };
        let ptr = NonNull::new(mapped.cast::<u8>()).ok_or(libc::ENOMEM)?;
        Ok(Mapping { ptr, len })
    }

    /// Start of the mapping.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
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

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
