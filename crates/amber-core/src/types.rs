//! Plain data types of the inode-level API.

use amber_format::{FileKind, Timespec};

/// Who creates an inode: its owner and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    /// The calling process's effective owner, read from /proc/self so the
    /// core needs no unsafe libc call; root if that cannot be read.
    pub fn current_process() -> Owner {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata("/proc/self") {
            Ok(m) => Owner {
                uid: m.uid(),
                gid: m.gid(),
            },
            Err(_) => Owner { uid: 0, gid: 0 },
        }
    }
}

/// Attributes of an inode, as stat reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: FileKind,
    /// Permission and set-id bits.
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Space used, in 512-byte units.
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub crtime: Timespec,
    pub rdev: u64,
    pub generation: u32,
    /// Inode flags (format::inode::flags: immutable, append-only), as
    /// FS_IOC_GETFLAGS reports them.
    pub flags: u32,
}

/// A time to set: now, or a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSet {
    Now,
    At(Timespec),
}

/// Attribute changes; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

/// How rename treats an existing target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RenameMode {
    /// Replace the target if it exists (POSIX rename).
    #[default]
    Replace,
    /// Fail if the target exists (RENAME_NOREPLACE).
    NoReplace,
    /// Swap source and target, which must both exist (RENAME_EXCHANGE).
    Exchange,
}

/// One directory entry as readdir returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: FileKind,
    pub name: Vec<u8>,
    /// Pass this back to continue after this entry.
    pub cookie: u64,
}

/// File-system usage, as statfs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    pub inodes: u64,
    pub inodes_free: u64,
    pub name_max: u64,
}
