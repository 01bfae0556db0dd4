//! Windows: ranges of the address space that show a pool's own pages, for
//! a program that maps a file on the pool (`mmap` with `MAP_SHARED`
//! through the interposer or libamberfs, design.md §16).
//!
//! A window is first reserved (`PROT_NONE`, no memory behind it), then its
//! pages are placed: each run of a file's consecutive pool blocks is the
//! pool file (or device-DAX node) mapped again at that block's offset
//! with `MAP_FIXED` over the window's own range, so a store through the
//! window and a store through the pool's mapping reach one physical page
//! — no copy, no userfaultfd, no work per page — and pages past the end
//! of the file are an empty memfd mapped the same way, which the kernel
//! answers with SIGBUS as it does past the end of any mapped file.
//!
//! A `Window` owns its range: placing pages replaces only what it already
//! holds, and dropping it unmaps the range. Only [`Window::reserve_at`]
//! (the program's own `MAP_FIXED`) may replace memory it does not own,
//! which is why it is `unsafe`. Every call is a raw system call: in the
//! interposer, libc's `mmap` family is the interposer's own.

use std::ffi::c_void;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// The protection bits a window's pages may have (`PROT_NONE` is 0).
const PROT_MASK: i32 = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;

/// A pool whose pages can be mapped again: its descriptor and what
/// mapping it allows. Lent by the device that mapped the pool
/// ([`crate::PmDevice::pages`]), which keeps the descriptor open.
#[derive(Debug)]
pub struct PoolPages {
    fd: RawFd,
    /// Smallest unit a mapping of the pool may start at and cover: the
    /// page size, or device-DAX's alignment.
    granule: usize,
    /// The pool is DAX (a DAX file mapped with `MAP_SYNC`, or
    /// device-DAX): a mapping of it may ask for `MAP_SYNC` too.
    sync_capable: bool,
    /// The descriptor is open read-only: no writable mapping.
    read_only: bool,
}

impl PoolPages {
    /// The pages of the pool open as `fd`.
    pub(crate) fn new(fd: RawFd, granule: usize, sync_capable: bool, read_only: bool) -> Self {
        PoolPages {
            fd,
            granule,
            sync_capable,
            read_only,
        }
    }

    /// The smallest unit a window may map the pool in: a mapping of
    /// `granule` bytes at a multiple of it.
    pub fn granule(&self) -> usize {
        self.granule
    }

    /// Whether the pool is DAX, so a window's pages may be mapped with
    /// `MAP_SYNC`: a store and a cache-line flush are then durable, with
    /// no msync (Linux refuses `MAP_SYNC` anywhere else, EOPNOTSUPP).
    pub fn sync_capable(&self) -> bool {
        self.sync_capable
    }

    /// Whether the pool is open read-only (no writable window).
    pub fn read_only(&self) -> bool {
        self.read_only
    }
}

/// A range of the address space showing a file's pages (module docs).
#[derive(Debug)]
pub struct Window {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a window is a range of addresses owned by this value; the bytes
// behind it are pool memory, shared with the program as any file mapping
// is, and no reference into them is handed out.
unsafe impl Send for Window {}
// SAFETY: as above; `&Window` only changes mappings inside its own range.
unsafe impl Sync for Window {}

impl Window {
    /// Reserves `len` bytes (a multiple of the page size) where the kernel
    /// chooses, near `hint` when it is free (never replacing anything).
    pub fn reserve(len: usize, hint: usize) -> Result<Window, i32> {
        Window::reserve_flags(len, hint, 0)
    }

    /// Reserves `len` bytes exactly at `addr`, failing with EEXIST when
    /// any of it is in use (`MAP_FIXED_NOREPLACE`).
    pub fn reserve_free_at(len: usize, addr: usize) -> Result<Window, i32> {
        let w = Window::reserve_flags(len, addr, libc::MAP_FIXED_NOREPLACE)?;
        if w.addr() != addr {
            // A kernel before 4.17 takes the flag as a hint.
            return Err(libc::EEXIST);
        }
        Ok(w)
    }

    /// Reserves `len` bytes at `addr`, replacing whatever the range held
    /// (`MAP_FIXED`: a program's request for exactly that address).
    ///
    /// # Safety
    /// Nothing in this process may use the memory `[addr, addr + len)`
    /// held before: it is gone when this returns.
    pub unsafe fn reserve_at(len: usize, addr: usize) -> Result<Window, i32> {
        Window::reserve_flags(len, addr, libc::MAP_FIXED)
    }

    /// Takes over `[addr, addr + len)`, a mapping the caller just made
    /// (a program's `mmap` of a file, which a map lease then shows the
    /// pool's pages in, design.md §17.14). Dropping the window unmaps it;
    /// [`Window::leave_mapped`] hands it back.
    ///
    /// # Safety
    /// The range must be one mapping this process made and nothing else
    /// owns as a `Window`: the window's calls replace its pages.
    pub unsafe fn adopt(addr: usize, len: usize) -> Result<Window, i32> {
        let page = page_size();
        if len == 0 || !len.is_multiple_of(page) || !addr.is_multiple_of(page) {
            return Err(libc::EINVAL);
        }
        let base = NonNull::new(addr as *mut u8).ok_or(libc::EINVAL)?;
        Ok(Window { base, len })
    }

    fn reserve_flags(len: usize, addr: usize, fixed: i32) -> Result<Window, i32> {
        if len == 0 || !len.is_multiple_of(page_size()) || !addr.is_multiple_of(page_size()) {
            return Err(libc::EINVAL);
        }
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | fixed;
        // SAFETY: without MAP_FIXED nothing is replaced; MAP_FIXED_NOREPLACE
        // fails rather than replace; MAP_FIXED is only passed by
        // `reserve_at`, whose caller gives up the range.
        let p = unsafe { sys_mmap(addr as *mut c_void, len, libc::PROT_NONE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or(libc::ENOMEM)?;
        Ok(Window { base, len })
    }

    /// Start of the range.
    pub fn addr(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// Length of the range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: a window has at least a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks that `[at, at + len)` lies inside the window, on page
    /// boundaries, and `prot` holds only protection bits.
    fn check(&self, at: usize, len: usize, prot: i32) -> Result<*mut c_void, i32> {
        let page = page_size();
        let inside = at.checked_add(len).is_some_and(|e| e <= self.len);
        if !inside || len == 0 || !at.is_multiple_of(page) || !len.is_multiple_of(page) {
            return Err(libc::EINVAL);
        }
        if prot & !PROT_MASK != 0 {
            return Err(libc::EINVAL);
        }
        Ok(self.base.as_ptr().wrapping_add(at).cast())
    }

    /// Shows the pool's bytes `[pool_off, pool_off + len)` at `[at, at +
    /// len)` of the window with protection `prot`, `MAP_SYNC` when
    /// `sync` (the pool must be [`PoolPages::sync_capable`]). Offsets and
    /// length must be multiples of the pool's granule.
    pub fn map_pool(
        &self,
        pages: &PoolPages,
        (at, pool_off, len): (usize, u64, usize),
        prot: i32,
        sync: bool,
    ) -> Result<(), i32> {
        let dst = self.check(at, len, prot)?;
        let g = pages.granule;
        let aligned = |x: usize| x.is_multiple_of(g);
        let off = libc::off_t::try_from(pool_off).map_err(|_| libc::EINVAL)?;
        if !aligned(at) || !aligned(len) || !pool_off.is_multiple_of(g as u64) {
            return Err(libc::EINVAL);
        }
        if sync && !pages.sync_capable {
            return Err(libc::EOPNOTSUPP);
        }
        if prot & libc::PROT_WRITE != 0 && pages.read_only {
            return Err(libc::EACCES);
        }
        let kind = if sync {
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC
        } else {
            libc::MAP_SHARED
        };
        // SAFETY: the range is this window's own (checked above), so
        // MAP_FIXED replaces only what the window held; the descriptor is
        // kept open by the device that lent `pages`.
        let p = unsafe { sys_mmap(dst, len, prot, kind | libc::MAP_FIXED, pages.fd, off) };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        debug_assert_eq!(p, dst, "MAP_FIXED maps where it is asked to");
        Ok(())
    }

    /// Makes `shadow`, a window of this one's length, a second mapping
    /// of the pages this one shows (mremap with an old size of 0: Linux
    /// duplicates a shared mapping), so they can be put back here later
    /// ([`Window::move_into`]): a map lease keeps the kernel's mapping of
    /// the file aside while its window shows the pool (design.md §17.14).
    pub fn duplicate_into(&self, shadow: &Window) -> Result<(), i32> {
        if shadow.len != self.len {
            return Err(libc::EINVAL);
        }
        let flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
        // SAFETY: both ranges are windows' own; MREMAP_FIXED replaces only
        // the shadow's reservation.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mremap,
                self.base.as_ptr(),
                0usize,
                self.len,
                flags,
                shadow.base.as_ptr(),
            )
        };
        if r == -1 {
            return Err(errno());
        }
        Ok(())
    }

    /// Moves this window's pages over `to`'s (the same length), replacing
    /// what `to` showed, atomically for any thread touching `to`. This
    /// window's range is left empty and no longer owned (nothing unmaps
    /// it later); on failure it comes back unchanged.
    pub fn move_into(self, to: &Window) -> Result<(), (Window, i32)> {
        if to.len != self.len {
            return Err((self, libc::EINVAL));
        }
        let flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
        // SAFETY: both ranges are windows' own; MREMAP_FIXED replaces only
        // `to`'s pages, and this window's emptied range is forgotten, so
        // no later drop unmaps memory placed there since.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mremap,
                self.base.as_ptr(),
                self.len,
                to.len,
                flags,
                to.base.as_ptr(),
            )
        };
        if r == -1 {
            return Err((self, errno()));
        }
        std::mem::forget(self);
        Ok(())
    }

    /// Makes `[at, at + len)` of the window lie past the end of a file:
    /// any access there is a SIGBUS, as past the last page of a mapped
    /// file (an empty memfd, mapped with protection `prot`).
    pub fn map_past_end(&self, at: usize, len: usize, prot: i32) -> Result<(), i32> {
        let dst = self.check(at, len, prot)?;
        let fd = past_end_fd()?;
        // SAFETY: the range is this window's own, so MAP_FIXED replaces
        // only what it held; the memfd is never closed.
        let p = unsafe { sys_mmap(dst, len, prot, libc::MAP_SHARED | libc::MAP_FIXED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        Ok(())
    }

    /// Shows zeros at `[at, at + len)` of the window, readable only (a
    /// hole of a file on a pool mounted read-only, which can take no
    /// block): private anonymous pages.
    pub fn map_zeros(&self, at: usize, len: usize, prot: i32) -> Result<(), i32> {
        let dst = self.check(at, len, prot)?;
        let prot = prot & !libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED;
        // SAFETY: the range is this window's own, so MAP_FIXED replaces
        // only what it held.
        let p = unsafe { sys_mmap(dst, len, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        Ok(())
    }

    /// Changes the protection of `[at, at + len)` of the window.
    pub fn protect(&self, at: usize, len: usize, prot: i32) -> Result<(), i32> {
        let dst = self.check(at, len, prot)?;
        // SAFETY: the range is this window's own; changing its protection
        // touches no memory of anyone else's.
        if unsafe { libc::syscall(libc::SYS_mprotect, dst, len, prot) } != 0 {
            return Err(errno());
        }
        Ok(())
    }

    /// Splits the window at `at` (a page boundary inside it): `self`
    /// keeps `[0, at)`, the result owns the rest. No mapping changes.
    pub fn split_off(&mut self, at: usize) -> Result<Window, i32> {
        if at == 0 || at >= self.len || !at.is_multiple_of(page_size()) {
            return Err(libc::EINVAL);
        }
        let rest = Window {
            base: NonNull::new(self.base.as_ptr().wrapping_add(at)).ok_or(libc::EINVAL)?,
            len: self.len - at,
        };
        self.len = at;
        Ok(rest)
    }

    /// Hands the range to the program for good: it stays mapped after
    /// this value is gone (a pool closed while a program still maps its
    /// files: the pages stay valid until the program unmaps them or
    /// exits).
    pub fn leave_mapped(self) {
        std::mem::forget(self);
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the range is this window's own and nothing in this
        // process holds a reference into it.
        unsafe { libc::syscall(libc::SYS_munmap, self.base.as_ptr(), self.len) };
    }
}

/// An empty memfd, made once: what a window shows past the end of a file.
fn past_end_fd() -> Result<RawFd, i32> {
    static FD: OnceLock<Result<RawFd, i32>> = OnceLock::new();
    *FD.get_or_init(|| {
        // SAFETY: the name is a NUL-terminated literal; the descriptor
        // made is kept for the life of the process.
        let fd = unsafe { libc::memfd_create(c"amberfs-past-end".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            Err(errno())
        } else {
            Ok(fd)
        }
    })
}

/// mmap(2) by system call; `MAP_FAILED` on failure, errno set.
///
/// # Safety
/// As mmap(2): with `MAP_FIXED` the range's old contents are gone.
unsafe fn sys_mmap(
    addr: *mut c_void,
    len: usize,
    prot: i32,
    flags: i32,
    fd: RawFd,
    off: libc::off_t,
) -> *mut c_void {
    // SAFETY: the caller's contract; the arguments are mmap's.
    let r = unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) };
    if r == -1 {
        libc::MAP_FAILED
    } else {
        r as *mut c_void
    }
}

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The page size windows are made of.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
