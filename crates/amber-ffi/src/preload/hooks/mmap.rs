//! mmap of a served file. A served file has no pages the kernel could
//! map, so MAP_PRIVATE gets anonymous memory filled with the file's bytes
//! (a private copy is what MAP_PRIVATE promises until the file changes).
//! A read-only MAP_SHARED mapping gets the same copy: a snapshot, which
//! later writes to the file do not update (files mapped read-only, such
//! as LevelDB's tables, are not written again). A writable MAP_SHARED
//! mapping cannot be served: ENODEV, said once.

use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use libc::{off64_t, size_t};

use super::on_fd;
use crate::posix::errno::tell_once;
use crate::posix::file::OpenFile;
use crate::posix::{reserve, Errno, PResult};
use crate::preload::real;

static SHARED_TOLD: AtomicBool = AtomicBool::new(false);

/// The copy of `f`'s bytes from `off` mapped at `addr` (a hint, or the
/// address for MAP_FIXED).
fn copy_map(
    f: &OpenFile,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off64_t,
) -> PResult<*mut c_void> {
    let off = u64::try_from(off).map_err(|_| Errno(libc::EINVAL))?;
    if len == 0 || off % 4096 != 0 {
        return Err(Errno(libc::EINVAL));
    }
    let keep = flags
        & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE | libc::MAP_POPULATE | libc::MAP_NORESERVE);
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | keep;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: an anonymous mapping; `addr` is only a hint unless the
    // caller asked for MAP_FIXED, whose contract is the caller's.
    let m = unsafe { real::mmap64(addr, len, rw, anon, -1, 0) };
    if m == libc::MAP_FAILED {
        return Err(reserve::last());
    }
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
    if unsafe { libc::mprotect(m, len, prot) } != 0 {
        let e = reserve::last();
        // SAFETY: unmapping our own fresh mapping.
        unsafe { real::munmap(m, len) };
        return Err(e);
    }
    Ok(m)
}

pub unsafe fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off64_t,
) -> *mut c_void {
    let served = |_: &_, f: &Arc<OpenFile>| {
        // The mapping type is the low two bits: MAP_PRIVATE (2) shares
        // a bit with MAP_SHARED_VALIDATE (3).
        let shared = matches!(flags & 3, libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE);
        if shared && prot & libc::PROT_WRITE != 0 {
            tell_once(&SHARED_TOLD, "a writable MAP_SHARED mapping of a served file cannot be served (ENODEV); MAP_PRIVATE and read-only mappings can");
            return Err(Errno(libc::ENODEV));
        }
        copy_map(f, addr, len, prot, flags, off)
    };
    // SAFETY: the caller's contract.
    on_fd(
        fd,
        || unsafe { real::mmap64(addr, len, prot, flags, fd, off) },
        served,
        libc::MAP_FAILED,
    )
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
