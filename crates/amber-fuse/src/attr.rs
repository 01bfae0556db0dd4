//! Core attributes in the shape the kernel caches them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use amber_core::Attr;
use amber_format::{FileKind, Timespec, BLOCK_SIZE};
use fuser::{FileAttr, FileType, INodeNo};

/// The file type the kernel is told.
pub fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Regular => FileType::RegularFile,
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}

/// A core timestamp as a `SystemTime`; times before 1970 count back.
pub fn system_time(t: Timespec) -> SystemTime {
    let whole = Duration::from_secs(t.secs.unsigned_abs());
    let base = if t.secs >= 0 {
        UNIX_EPOCH + whole
    } else {
        UNIX_EPOCH - whole
    };
    // nsecs counts forward from secs, also before the epoch.
    base + Duration::from_nanos(t.nsecs.into())
}

/// A `SystemTime` as a core timestamp (nanosecond precision kept).
pub fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            secs: d.as_secs() as i64,
            nsecs: d.subsec_nanos(),
        },
        Err(before) => {
            let d = before.duration();
            let (secs, nsecs) = (d.as_secs() as i64, d.subsec_nanos());
            if nsecs == 0 {
                Timespec {
                    secs: -secs,
                    nsecs: 0,
                }
            } else {
                Timespec {
                    secs: -secs - 1,
                    nsecs: 1_000_000_000 - nsecs,
                }
            }
        }
    }
}

/// The attributes the kernel caches for an inode.
pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.crtime),
        kind: file_type(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        // FUSE carries the device number in 32 bits (new_encode_dev form),
        // the form mknod handed it to us in.
        rdev: a.rdev as u32,
        blksize: BLOCK_SIZE as u32,
        flags: 0,
    }
}

/// Whether `uid`/`gid` may access a file with attributes `a` as `mask`
/// (R_OK/W_OK/X_OK bits; 0 is F_OK) asks. Only the primary group is
/// known here; with `default_permissions` the kernel decides instead,
/// with every group of the caller.
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
    fn times_round_trip_both_sides_of_the_epoch() {
        for t in [
            Timespec { secs: 0, nsecs: 0 },
            Timespec {
                secs: 1_700_000_000,
                nsecs: 123_456_789,
            },
            Timespec {
                secs: -1,
                nsecs: 500,
            },
            Timespec {
                secs: -86_400,
                nsecs: 0,
            },
        ] {
            assert_eq!(timespec(system_time(t)), t);
        }
    }
}
