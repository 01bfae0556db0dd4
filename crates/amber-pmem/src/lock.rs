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

    /// The locked file, for mapping and sizing it.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}
