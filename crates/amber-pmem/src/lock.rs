//! The pool lock.
//!
//! Two processes mapping one pool would corrupt it (each has its own
//! allocator and journal state), so the device holds `flock(LOCK_EX)` on its
//! descriptor for its whole life. A pool opened read-only takes
//! `LOCK_SH` instead: readers may share it with each other, never with a
//! writer, whose changes they would see half made. `flock` locks belong to the open file
//! description, so a second open in the same process is refused too, and the
//! kernel drops the lock if the process dies. A forked child shares the
//! descriptor (and so the lock) until it execs or exits: descriptors are
//! close-on-exec, but a fork without exec keeps the pool locked.
//!
//! A process writing under a daemon's write lease (design.md §17.6)
//! cannot share the daemon's flock; it holds an open-file-description
//! read lock on byte 0 instead (independent of flock), from its mapping
//! until it stops writing. Opening a pool to write it then also waits a
//! while for every such lock to go: no mount recovers a pool that a
//! lessee of a killed daemon may still store into.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::MapError;

/// An open pool file or device, locked until dropped.
pub(crate) struct PoolLock {
    file: File,
}

impl PoolLock {
    /// Locks `file` without waiting, exclusively unless `shared`: an
    /// in-use pool is an error to report, not something to queue for.
    pub(crate) fn acquire(file: File, path: &Path, shared: bool) -> Result<PoolLock, MapError> {
        let how = if shared { libc::LOCK_SH } else { libc::LOCK_EX };
        loop {
            // SAFETY: the descriptor is owned by `file` and open.
            let rc = unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) };
            if rc == 0 {
                if !shared {
                    no_lessees(&file, path)?;
                }
                return Ok(PoolLock { file });
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) => {
                    return Err(MapError::InUse {
                        path: path.to_path_buf(),
                    })
                }
                _ => return Err(MapError::io(path, "lock", err)),
            }
        }
    }

    /// `file` without a lock: a lease reader's view of a pool a running
    /// daemon holds exclusively (`MmapDevice::open_for_lessee`). The
    /// daemon's lease, not a lock, vouches for what it reads.
    pub(crate) fn unlocked(file: File) -> PoolLock {
        PoolLock { file }
    }

    /// `file` for a process writing under a daemon's write lease: the
    /// daemon holds the flock; this holds a read lock on byte 0 until
    /// [`PoolLock::release_lessee`], which the next exclusive open waits
    /// for.
    pub(crate) fn lessee_writer(file: File, path: &Path) -> Result<PoolLock, MapError> {
        ofd_lock(&file, libc::F_RDLCK).map_err(|e| MapError::io(path, "lock", e))?;
        Ok(PoolLock { file })
    }

    /// Drops a lessee's read lock: it stores nothing more.
    pub(crate) fn release_lessee(&self) {
        let _ = ofd_lock(&self.file, libc::F_UNLCK);
    }

    /// The locked file, for mapping and sizing it.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

/// How long an exclusive open waits for lessees of a killed daemon to
/// stop (their lease thread sees the daemon's socket end, waits out the
/// write in flight and drops the lock: microseconds, unless stopped).
const LESSEE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits until no lessee holds its read lock on byte 0 (a write lock
/// then succeeds; it is dropped at once), or fails with `InUse`.
fn no_lessees(file: &File, path: &Path) -> Result<(), MapError> {
    let deadline = std::time::Instant::now() + LESSEE_WAIT;
    loop {
        match ofd_lock(file, libc::F_WRLCK) {
            Ok(()) => {
                let _ = ofd_lock(file, libc::F_UNLCK);
                return Ok(());
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
                if std::time::Instant::now() >= deadline {
                    return Err(MapError::InUse {
                        path: path.to_path_buf(),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(MapError::io(path, "lock", e)),
        }
    }
}

/// Sets an open-file-description lock of `kind` on byte 0 of `file`,
/// without waiting.
fn ofd_lock(file: &File, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: an all-zero `flock` is a valid value of the plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = i16::try_from(kind).expect("lock kinds fit");
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = 0;
    fl.l_len = 1;
    loop {
        // SAFETY: the descriptor is owned by `file` and open; `fl` is a
        // valid `flock` that outlives the call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}
