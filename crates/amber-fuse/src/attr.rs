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

#[cfg(test)]
mod tests {
    use super::*;

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
