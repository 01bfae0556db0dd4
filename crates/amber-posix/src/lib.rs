//! The POSIX edge's shared vocabulary. Amber's core speaks typed errors
//! ([`FsError`]); errno values exist only where a POSIX caller is answered:
//! the FUSE adapter (`amber-fuse`) and the C ABI and interposer
//! (`amber-ffi`). Both answer from the one table here, so a core error
//! means the same errno through every front end, and both check
//! `access(2)` with [`may_access`].
#![forbid(unsafe_code)]

use amber_core::{Attr, FsError};
use amber_format::FileKind;

/// The errno a failed core operation returns to a POSIX caller.
pub fn errno(e: &FsError) -> i32 {
    match e {
        FsError::NotFound => libc::ENOENT,
        FsError::AlreadyExists => libc::EEXIST,
        FsError::NotADirectory => libc::ENOTDIR,
        FsError::IsADirectory => libc::EISDIR,
        FsError::DirectoryNotEmpty => libc::ENOTEMPTY,
        FsError::InvalidName | FsError::InvalidArgument(_) => libc::EINVAL,
        FsError::NameTooLong => libc::ENAMETOOLONG,
        FsError::NoSpace => libc::ENOSPC,
        FsError::OutOfMemory => libc::ENOMEM,
        FsError::TooManyLinks => libc::EMLINK,
        FsError::NotPermitted | FsError::Protected(_) => libc::EPERM,
        FsError::SymlinkLoop => libc::ELOOP,
        FsError::FileTooLarge => libc::EFBIG,
        FsError::BadHandle => libc::EBADF,
        FsError::WouldCreateCycle => libc::EINVAL,
        FsError::Unsupported(_) => libc::EOPNOTSUPP,
        FsError::NoSuchOffset => libc::ENXIO,
        FsError::NoAttribute => libc::ENODATA,
        FsError::AttributeTooLarge => libc::E2BIG,
        FsError::ReadOnly | FsError::NeedsRecovery => libc::EROFS,
        FsError::AccessDenied(_) => libc::EACCES,
        FsError::NotMappable(_) => libc::ENODEV,
        // Corruption, a poisoned pool, a failing device, and (FsError is
        // non-exhaustive) any variant added later until it is given its
        // own errno here.
        _ => libc::EIO,
    }
}

/// Whether `e` means the pool itself is in trouble (corrupt, poisoned,
/// failing): the caller sees only EIO, so each edge also tells its
/// administrator (the daemon's log, the program's stderr) what happened.
pub fn is_pool_trouble(e: &FsError) -> bool {
    errno(e) == libc::EIO
}

/// Whether `uid`/`gid` may access a file with attributes `a` as `mask`
/// (R_OK/W_OK/X_OK bits; 0 is F_OK) asks. Only the primary group is
/// known here; the FUSE mount with `default_permissions` leaves the
/// decision to the kernel, with every group of the caller.
pub fn may_access(a: &Attr, uid: u32, gid: u32, mask: i32) -> bool {
    let want = (mask & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32;
    if uid == 0 {
        // Root reads and writes anything, and executes what anyone may.
        return want & libc::X_OK as u32 == 0
            || a.kind == FileKind::Directory
            || a.perm & 0o111 != 0;
    }
    let granted = if uid == a.uid {
        a.perm >> 6
    } else if gid == a.gid {
        a.perm >> 3
    } else {
        a.perm
    } & 7;
    want & !granted == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_format::Timespec;

    fn attr(kind: FileKind, perm: u32) -> Attr {
        let t = Timespec { secs: 0, nsecs: 0 };
        Attr {
            ino: 2,
            kind,
            perm,
            nlink: 1,
            uid: 10,
            gid: 20,
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            rdev: 0,
            generation: 1,
            flags: 0,
        }
    }

    #[test]
    fn access_by_owner_group_other_and_root() {
        let (r, w, x) = (libc::R_OK, libc::W_OK, libc::X_OK);
        let a = attr(FileKind::Regular, 0o640);
        assert!(may_access(&a, 10, 99, r | w));
        assert!(!may_access(&a, 10, 99, x));
        assert!(may_access(&a, 11, 20, r));
        assert!(!may_access(&a, 11, 20, w));
        assert!(!may_access(&a, 11, 21, r));
        assert!(may_access(&a, 11, 21, libc::F_OK));
        assert!(may_access(&a, 0, 0, r | w));
        assert!(!may_access(&a, 0, 0, x));
        assert!(may_access(&attr(FileKind::Regular, 0o001), 0, 0, x));
        assert!(may_access(&attr(FileKind::Directory, 0o000), 0, 0, x));
    }

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
            (FsError::Protected("immutable"), libc::EPERM),
            (FsError::Corrupted("x".into()), libc::EIO),
            (FsError::ReadOnly, libc::EROFS),
            (FsError::AccessDenied("append-only"), libc::EACCES),
            (FsError::NotMappable("anonymous memory"), libc::ENODEV),
        ];
        for (e, code) in cases {
            assert_eq!(errno(&e), code, "{e:?}");
        }
        assert!(is_pool_trouble(&FsError::Corrupted("x".into())));
        assert!(!is_pool_trouble(&FsError::NotFound));
    }
}
