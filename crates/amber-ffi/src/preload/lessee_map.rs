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
//!
//! A file this process maps `MAP_SHARED` is never written under a write
//! lease here (`maps_file`), nor by any other process while this one
//! lives (`Client::note_mapping`): the kernel's pages past what it takes
//! for the end of file fault with SIGBUS, and a lessee's write that grows
//! the file tells the kernel nothing (LMDB maps its file and then grows
//! it with `pwritev`: its loads of the new pages died with SIGBUS). Its
//! writes go through the kernel, which learns every new size from the
//! daemon.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use amber_lease::{Client, MapWin, ALL_FILES};
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
    note_mapped(fd, d.ino);
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

/// Most files this process tells apart as mapped; past them, every file
/// counts as mapped (no write is leased).
const MAX_MAPPED_FILES: usize = 64;

/// The inodes of files this process mapped `MAP_SHARED` (`maps_file`):
/// static, so a forked child, which inherits the mappings, keeps them.
static MAPPED_FILES: [AtomicU64; MAX_MAPPED_FILES] =
    [const { AtomicU64::new(0) }; MAX_MAPPED_FILES];
/// Entries of `MAPPED_FILES` in use; past `MAX_MAPPED_FILES`: all files.
static MAPPED_COUNT: AtomicUsize = AtomicUsize::new(0);
static MAPPED_ADDING: parking_lot::Mutex<()> = parking_lot::const_mutex(());

/// Whether this process ever mapped file `ino` `MAP_SHARED`: its writes
/// then go to the kernel (the module's doc). One load while it mapped
/// none.
pub(super) fn maps_file(ino: u64) -> bool {
    let n = MAPPED_COUNT.load(Ordering::Acquire);
    n > MAX_MAPPED_FILES
        || MAPPED_FILES[..n]
            .iter()
            .any(|m| m.load(Ordering::Relaxed) == ino)
}

/// File `ino`, open as kernel descriptor `fd`, is now mapped shared: its
/// writes stop being leased, here and (told to the daemon, which answers
/// once it holds) in every other process; a write lease this process
/// holds on it goes back (adopted by the daemon); and then the kernel
/// asks the daemon for the file's size, which recalls any other
/// process's write lease on it, so the new mapping's end of file is
/// every lessee's (also after a lease that went back earlier: the kernel
/// keeps the size it last heard, whatever the daemon adopted since).
fn note_mapped(fd: c_int, ino: u64) {
    let told = if maps_file(ino) {
        None
    } else {
        Some(add_mapped(ino))
    };
    let connected = lessee::connected();
    // A connection made now tells the daemon every file mapped so far.
    let Some(c) = connected.or_else(lessee::client_now) else {
        return;
    };
    if let (Some(told), Some(_)) = (told, connected) {
        c.note_mapping(told);
    }
    if let Some(held) = c.held_write(ino) {
        c.renew(&held);
    }
    let _ = super::state::statx_synced(fd, c"", libc::STATX_SIZE);
}

/// Adds `ino` to the files this process maps; what to tell the daemon:
/// the file, or `ALL_FILES` once they are more than it tells apart.
fn add_mapped(ino: u64) -> u64 {
    let _adding = MAPPED_ADDING.lock();
    let n = MAPPED_COUNT.load(Ordering::Acquire);
    if n < MAX_MAPPED_FILES {
        MAPPED_FILES[n].store(ino, Ordering::Relaxed);
    }
    MAPPED_COUNT.store(n + 1, Ordering::Release);
    if n < MAX_MAPPED_FILES {
        ino
    } else {
        ALL_FILES
    }
}

/// Tells a new connection `c` every file this process maps (some from
/// before a fork, whose child inherits the mappings), so no other
/// process writes one under a write lease while this one lives.
pub(super) fn tell_mapped(c: &Client) {
    let n = MAPPED_COUNT.load(Ordering::Acquire);
    for m in &MAPPED_FILES[..n.min(MAX_MAPPED_FILES)] {
        c.note_mapping(m.load(Ordering::Relaxed));
    }
    if n > MAX_MAPPED_FILES {
        c.note_mapping(ALL_FILES);
    }
}
