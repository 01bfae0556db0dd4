//! The one place a core error becomes an errno. Errors that mean the pool
//! itself is in trouble are logged here as well, because the process that
//! sees the errno (EIO) cannot tell the administrator anything more.

use std::sync::atomic::{AtomicBool, Ordering};

use amber_core::FsError;
use fuser::Errno;

/// A poisoned pool fails every later write the same way; one log line
/// says it, thousands would bury it.
static POISON_LOGGED: AtomicBool = AtomicBool::new(false);

/// The errno a failed core operation returns to the kernel.
pub fn errno(e: &FsError) -> Errno {
    let code = match e {
        FsError::NotFound => libc::ENOENT,
        FsError::AlreadyExists => libc::EEXIST,
        FsError::NotADirectory => libc::ENOTDIR,
        FsError::IsADirectory => libc::EISDIR,
        FsError::DirectoryNotEmpty => libc::ENOTEMPTY,
        FsError::InvalidName => libc::EINVAL,
        FsError::NameTooLong => libc::ENAMETOOLONG,
        FsError::InvalidArgument(_) => libc::EINVAL,
        FsError::NoSpace => libc::ENOSPC,
        FsError::OutOfMemory => libc::ENOMEM,
        FsError::TooManyLinks => libc::EMLINK,
        FsError::NotPermitted => libc::EPERM,
        FsError::SymlinkLoop => libc::ELOOP,
        FsError::FileTooLarge => libc::EFBIG,
        FsError::BadHandle => libc::EBADF,
        FsError::WouldCreateCycle => libc::EINVAL,
        FsError::Unsupported(_) => libc::EOPNOTSUPP,
        FsError::NoSuchOffset => libc::ENXIO,
        FsError::NoAttribute => libc::ENODATA,
        FsError::AttributeTooLarge => libc::E2BIG,
        FsError::Corrupted(_) | FsError::Format(_) => {
            eprintln!("amberfs: I/O error: {e}");
            libc::EIO
        }
        FsError::Poisoned(_) => {
            if !POISON_LOGGED.swap(true, Ordering::Relaxed) {
                eprintln!("amberfs: I/O error, every later write fails too: {e}");
            }
            libc::EIO
        }
        FsError::Device(_) => libc::EIO,
        // FsError is non-exhaustive: a variant added later is an I/O
        // error until it is given its own errno here.
        _ => {
            eprintln!("amberfs: I/O error: {e}");
            libc::EIO
        }
    };
    Errno::from_i32(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_conditions_keep_their_errno() {
        let cases = [
            (FsError::NotFound, libc::ENOENT),
            (FsError::DirectoryNotEmpty, libc::ENOTEMPTY),
            (FsError::WouldCreateCycle, libc::EINVAL),
            (FsError::NoSuchOffset, libc::ENXIO),
            (FsError::OutOfMemory, libc::ENOMEM),
            (FsError::NoAttribute, libc::ENODATA),
            (FsError::AttributeTooLarge, libc::E2BIG),
            (FsError::Corrupted("x".into()), libc::EIO),
        ];
        for (e, code) in cases {
            assert_eq!(errno(&e).code(), code, "{e:?}");
        }
    }
}
