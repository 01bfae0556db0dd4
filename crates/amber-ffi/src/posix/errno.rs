//! Errors as errno values: the C ABI's and the interposer's edge. A core
//! error becomes an errno here; errors that mean the pool itself is in
//! trouble are also printed once, since the caller only sees EIO.

use std::sync::atomic::{AtomicBool, Ordering};

use amber_core::FsError;

/// An errno value: what every POSIX-shaped call here fails with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// The result of a POSIX-shaped call.
pub type PResult<T> = Result<T, Errno>;

/// A poisoned pool fails every later write the same way; say it once.
static POISON_TOLD: AtomicBool = AtomicBool::new(false);

impl From<FsError> for Errno {
    fn from(e: FsError) -> Errno {
        Errno(match &e {
            FsError::NotFound => libc::ENOENT,
            FsError::AlreadyExists => libc::EEXIST,
            FsError::NotADirectory => libc::ENOTDIR,
            FsError::IsADirectory => libc::EISDIR,
            FsError::DirectoryNotEmpty => libc::ENOTEMPTY,
            FsError::InvalidName | FsError::InvalidArgument(_) => libc::EINVAL,
            FsError::WouldCreateCycle => libc::EINVAL,
            FsError::NameTooLong => libc::ENAMETOOLONG,
            FsError::NoSpace => libc::ENOSPC,
            FsError::TooManyLinks => libc::EMLINK,
            FsError::NotPermitted => libc::EPERM,
            FsError::SymlinkLoop => libc::ELOOP,
            FsError::FileTooLarge => libc::EFBIG,
            FsError::BadHandle => libc::EBADF,
            FsError::Unsupported(_) => libc::EOPNOTSUPP,
            FsError::NoSuchOffset => libc::ENXIO,
            FsError::NoAttribute => libc::ENODATA,
            FsError::AttributeTooLarge => libc::E2BIG,
            FsError::Poisoned(_) => {
                if !POISON_TOLD.swap(true, Ordering::Relaxed) {
                    eprintln!("amberfs: I/O error, every later write fails too: {e}");
                }
                libc::EIO
            }
            // Corruption, unreadable pools, and variants added later.
            _ => {
                eprintln!("amberfs: I/O error: {e}");
                libc::EIO
            }
        })
    }
}

/// Prints `message` on stderr the first time `told` is passed: for calls
/// the interposer cannot serve, which fail with an errno that alone would
/// not say why.
pub fn tell_once(told: &AtomicBool, message: &str) {
    if !told.swap(true, Ordering::Relaxed) {
        eprintln!("amberfs: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_conditions_keep_their_errno() {
        let cases = [
            (FsError::NotFound, libc::ENOENT),
            (FsError::DirectoryNotEmpty, libc::ENOTEMPTY),
            (FsError::NoSuchOffset, libc::ENXIO),
            (FsError::NoAttribute, libc::ENODATA),
            (FsError::Corrupted("x".into()), libc::EIO),
        ];
        for (e, code) in cases {
            assert_eq!(Errno::from(e.clone()), Errno(code), "{e:?}");
        }
    }
}
