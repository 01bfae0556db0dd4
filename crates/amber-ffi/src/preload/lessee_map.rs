//! A preloaded process's `MAP_SHARED` mappings of files on the mount, on
//! the pool's own blocks (design.md §17.14): the kernel makes the mapping
//! as on any mount — every check of mmap(2) is its own — and then, under
//! a map lease from the daemon, the pages of the file's blocks below the
//! end of file become the pool's, pinned while the lease holds. Every
//! process mapping the file so shares those pages, as on a DAX file
//! system, and a page fault is the pool's, not a FUSE request. Anything
//! that changes a range holding such a mapping — munmap, mremap,
//! mprotect, madvise, a `MAP_FIXED` mapping over it — or a fork gives the
//! lease back first, the pages becoming the kernel's mapping again (the
//! same bytes through the page cache), so no page of the pool stays
//! shown without a pin.

use std::ffi::{c_int, c_void};

use amber_lease::MapWin;
use amber_pmem::Window;

use super::lessee::{self, Dir};

/// After the kernel mapped `[addr, addr + len)` of descriptor `fd` from
/// byte `off` with `prot` and `flags`, for the program: a shared
/// mapping of a regular file on the mount asks for a map lease, one that
/// may store if the descriptor is open for writing (Linux's
/// VM_MAYWRITE). Without one the mapping stays the kernel's.
pub(super) fn mapped(
    addr: *mut c_void,
    len: usize,
    (prot, flags): (c_int, c_int),
    fd: c_int,
    off: i64,
) {
    let kind = flags & libc::MAP_TYPE;
    let shared = kind == libc::MAP_SHARED || kind == libc::MAP_SHARED_VALIDATE;
    if !shared || flags & libc::MAP_SYNC != 0 || addr == libc::MAP_FAILED || len == 0 {
        return;
    }
    let Ok(off) = u64::try_from(off) else {
        return;
    };
    let Some(d) = lessee::leasable(fd, Dir::Read) else {
        return;
    };
    let Some(client) = lessee::client_now() else {
        return;
    };
    let len = len.next_multiple_of(amber_pmem::page_size());
    // SAFETY: the kernel just made this mapping for the program's call,
    // which has not returned yet: nothing else holds it as a window.
    let Ok(window) = (unsafe { Window::adopt(addr as usize, len) }) else {
        return;
    };
    match MapWin::new(d.ino, window, off, prot) {
        Ok(win) => {
            client.map(win, lessee::open_for_writing(fd));
        }
        Err(window) => window.leave_mapped(),
    }
}

/// Before the program changes `[addr, addr + len)` (munmap, mremap,
/// mprotect, madvise, a `MAP_FIXED` mapping): the map leases of the
/// mappings there go back, their pages the kernel's again. One load and
/// a branch while this process shows no pool page.
pub(super) fn before_change(addr: *mut c_void, len: usize) {
    if let Some(c) = lessee::connected().filter(|c| c.maps_held()) {
        c.return_maps(Some((addr as usize, len)));
    }
}

/// Before a fork: every map lease goes back, so the child inherits the
/// kernel's mappings, which need no pin (its parent's leases end with
/// the parent).
pub(super) extern "C" fn before_fork() {
    if let Some(c) = lessee::connected().filter(|c| c.maps_held()) {
        c.return_maps(None);
    }
}
