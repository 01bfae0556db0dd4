//! A preloaded process's writes under a write lease (design.md §17.4,
//! §17.10-§17.11): a regular file it has open for writing on the FUSE
//! mount and writes again and again is written from its own mapping of
//! the pool into blocks the daemon granted — an overwrite inside one
//! block as an own commit, any other write of at most 1 MiB inside the
//! lease's 16 MiB window (appends, writes across blocks or into holes,
//! and every write of an `O_APPEND` descriptor, at the end of file the
//! lease knows) covered by an attribute entry of its own — each durable
//! and atomic on return, with no FUSE round trip, so `fsync` of it has
//! nothing left to do. Every other write goes to the kernel, whose
//! daemon recalls the lease first. `fstat` shows the size, blocks and
//! times of the writes the daemon has not adopted yet.

use std::ffi::c_int;

use amber_lease::{At, Client, Held, NotMine};
use amber_pmem::PersistError;

use super::state;

use super::lessee::{self, connected, descriptor, position, seek, Descriptor, Dir};

/// The largest write served under a write lease: a grant's quarter, so
/// a process writing big chunks still makes four writes per grant.
const MAX_LEASED_WRITE: usize = 256 * amber_format::BLOCK_SIZE as usize;

/// Serves a write of `data` to kernel descriptor `fd` at `at` or (None)
/// at the descriptor's offset, which it then moves — or, open with
/// `O_APPEND`, at the end of file whatever `at` says (as Linux's `pwrite`
/// does); None when the kernel must serve it (the hooks' `kernel` path).
pub fn write(fd: c_int, data: &[u8], at: Option<u64>) -> Option<isize> {
    if data.is_empty() || data.len() > MAX_LEASED_WRITE {
        return None;
    }
    write_as(lessee::leasable(fd, Dir::Write)?, fd, data, at)
}

/// `write` of descriptor `fd`, which `leasable` found to be `d`.
fn write_as(d: Descriptor, fd: c_int, data: &[u8], at: Option<u64>) -> Option<isize> {
    let (_position, off) = position(fd, d.i, at)?;
    // An append's lease is the window of the end as this process last
    // saw it; the write itself takes the end under the lease's lock.
    let (to, near) = if d.appends {
        let end = connected().and_then(|c| c.written(d.ino));
        (At::End, end.map_or_else(|| d.size(), |w| w.size))
    } else {
        (At::Offset(off), off)
    };
    let (c, held) = d.lease(connected(), near)?;
    let wrote = renewing(c, &held, (d.ino, near), |h| c.write(h, to, data))?;
    let Ok(start) = wrote else {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EIO };
        return Some(-1);
    };
    let n = data.len();
    if at.is_none() {
        seek(fd, i64::try_from(start + n as u64).ok()?, libc::SEEK_SET)?;
    }
    isize::try_from(n).ok()
}

/// lseek of kernel descriptor `fd` to `off` from the end of file while
/// this process holds a write lease on its file: the end is the lease's
/// (the kernel's would be asked of the daemon, which recalls this very
/// lease first). None: the kernel's (any other `whence`, no lease).
pub fn seek_end(fd: c_int, off: i64, whence: c_int) -> Option<i64> {
    if whence != libc::SEEK_END {
        return None;
    }
    state::config()?;
    let c = connected()?;
    let size = c.written(either(fd)?.ino)?.size;
    let Some(to) = i64::try_from(size)
        .ok()
        .and_then(|s| s.checked_add(off))
        .filter(|&t| t >= 0)
    else {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return Some(-1);
    };
    seek(fd, to, libc::SEEK_SET)
}

/// ftruncate of kernel descriptor `fd` to `len` while this process holds
/// a write lease on its file: an entry of the lease's (`Writer::truncate`),
/// durable on return; a shrink then gives the lease back. None: the
/// kernel's, with no lease held (a truncate alone never asks for one).
pub fn truncate(fd: c_int, len: i64) -> Option<c_int> {
    state::config()?;
    let len = u64::try_from(len).ok()?;
    let c = connected()?;
    let d = descriptor(fd, Dir::Write)?;
    let held = c.held_write(d.ino)?;
    if c.written(d.ino).is_none() {
        c.renew(&held);
        return None;
    }
    if c.truncate(&held, len).ok()?.is_err() {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EIO };
        return Some(-1);
    }
    Some(0)
}

/// fallocate of kernel descriptor `fd` — `mode` 0 or
/// `FALLOC_FL_KEEP_SIZE` — while this process holds a write lease on its
/// file: `Writer::allocate`, durable on return. None: the kernel's (any
/// other mode, a range the lease cannot make, no lease held: an
/// allocation alone never asks for one).
pub fn allocate(fd: c_int, mode: c_int, off: i64, len: i64) -> Option<c_int> {
    let keep_size = match mode {
        0 => false,
        libc::FALLOC_FL_KEEP_SIZE => true,
        _ => return None,
    };
    state::config()?;
    let range = (u64::try_from(off).ok()?, u64::try_from(len).ok()?);
    let c = connected()?;
    let d = descriptor(fd, Dir::Write)?;
    let held = c.held_write(d.ino)?;
    let done = renewing(c, &held, (d.ino, range.0), |h| {
        c.allocate(h, range, keep_size)
    })?;
    if done.is_err() {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EIO };
        return Some(-1);
    }
    Some(0)
}

/// `op` under `held`, and once more under a new write grant of `ino`'s
/// window holding byte `near` if `held` had too few granted blocks left
/// (returned first: the daemon adopts them). None: the kernel's.
fn renewing<T>(
    c: &Client,
    held: &Held,
    (ino, near): (u64, u64),
    op: impl Fn(&Held) -> Result<Result<T, PersistError>, NotMine>,
) -> Option<Result<T, PersistError>> {
    match op(held) {
        Err(NotMine::Spent) => {
            c.renew(held);
            op(&*c.ask_write(ino, near)?).ok()
        }
        other => other.ok(),
    }
}

/// `write` of the buffers `bufs` in turn to descriptor `fd`, which
/// `leasable` found to be `d`, as one write (writev's atomicity): a
/// single buffer as it is, several gathered into one.
pub(super) fn write_vectored(
    d: Descriptor,
    fd: c_int,
    bufs: &[&[u8]],
    at: Option<u64>,
) -> Option<isize> {
    let total = bufs
        .iter()
        .try_fold(0usize, |t, b| t.checked_add(b.len()))?;
    if total == 0 || total > MAX_LEASED_WRITE {
        return None;
    }
    if let [one] = bufs {
        return write_as(d, fd, one, at);
    }
    write_as(d, fd, &bufs.concat(), at)
}

/// fsync or fdatasync of kernel descriptor `fd`: nothing to do while this
/// process holds a write lease on its file — every write of it since the
/// grant was this process's, durable on return, and the grant found the
/// file's earlier changes durable (it pins the file). None: the kernel's.
pub fn fsync(fd: c_int) -> Option<c_int> {
    state::config()?;
    let c = connected()?;
    c.written(either(fd)?.ino).map(|_| 0)
}

/// Descriptor `fd` as a leased call in either direction sees it.
fn either(fd: c_int) -> Option<Descriptor> {
    descriptor(fd, Dir::Write).or_else(|| descriptor(fd, Dir::Read))
}

/// fstat of kernel descriptor `fd` while this process holds a write lease
/// on its file: the kernel's cached attributes (statx without a FUSE
/// request — one would recall this very lease: the grant dropped the
/// kernel's cache so that other processes' `stat` does) with the size,
/// blocks and times of the writes the daemon has not adopted yet. Nothing
/// else of the file can change while the lease is out. None: the
/// kernel's fstat.
pub fn fstat(fd: c_int) -> Option<libc::stat64> {
    state::config()?;
    // Connected first: a process that is not asks the kernel nothing.
    let c = connected()?;
    let written = c.written(either(fd)?.ino)?;
    let x = lessee::statx_cached(fd)?;
    let time = |t: libc::statx_timestamp| (t.tv_sec, i64::from(t.tv_nsec));
    let (mut mtime, mut ctime) = (time(x.stx_mtime), time(x.stx_ctime));
    if let Some(t) = written.newest.map(|t| (t.secs, i64::from(t.nsecs))) {
        mtime = mtime.max(t);
        ctime = ctime.max(t);
    }
    // SAFETY: an all-zero stat64 is a valid value of the plain C struct.
    let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
    st.st_dev = libc::makedev(x.stx_dev_major, x.stx_dev_minor);
    st.st_ino = x.stx_ino;
    st.st_nlink = u64::from(x.stx_nlink);
    st.st_mode = u32::from(x.stx_mode);
    (st.st_uid, st.st_gid) = (x.stx_uid, x.stx_gid);
    st.st_rdev = libc::makedev(x.stx_rdev_major, x.stx_rdev_minor);
    st.st_size = i64::try_from(written.size).ok()?;
    st.st_blksize = i64::from(x.stx_blksize);
    // Amber counts 4,096-byte blocks; stat's are 512 bytes.
    st.st_blocks = i64::try_from(written.blocks.saturating_mul(8)).ok()?;
    (st.st_atime, st.st_atime_nsec) = time(x.stx_atime);
    (st.st_mtime, st.st_mtime_nsec) = mtime;
    (st.st_ctime, st.st_ctime_nsec) = ctime;
    Some(st)
}
