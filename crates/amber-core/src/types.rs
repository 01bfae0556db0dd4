//! Plain data types of the inode-level API.

use amber_format::{FileKind, Timespec};

/// Who creates an inode: its owner and group, and the umask that limits
/// its permissions when its directory has no default ACL (a default ACL
/// replaces the umask, as on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// User id the new inode is owned by.
    pub uid: u32,
    /// Group id; a set-group-id parent directory overrides it with its own.
    pub gid: u32,
    /// Permission bits the creator's umask removes: 0 where the caller
    /// applied its umask already (the library takes modes as given).
    pub umask: u32,
}

impl Owner {
    /// `uid` and `gid`, with no umask.
    pub const fn new(uid: u32, gid: u32) -> Owner {
        Owner { uid, gid, umask: 0 }
    }

    /// The same owner with `umask` applied to what it creates (where no
    /// default ACL replaces it).
    #[must_use]
    pub const fn with_umask(self, umask: u32) -> Owner {
        Owner {
            umask: umask & 0o777,
            ..self
        }
    }

    /// The calling process's effective owner, read from /proc/self so the
    /// core needs no unsafe libc call; root if that cannot be read.
    pub fn current_process() -> Owner {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata("/proc/self") {
            Ok(m) => Owner::new(m.uid(), m.gid()),
            Err(_) => Owner::new(0, 0),
        }
    }
}

/// Attributes of an inode, as stat reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// Inode number: stable while the file exists, reused after it is
    /// freed (with a new `generation`).
    pub ino: u64,
    /// File type.
    pub kind: FileKind,
    /// Permission and set-id bits.
    pub perm: u32,
    /// Hard links: directory entries naming the inode (a directory counts
    /// its subdirectories' "..").
    pub nlink: u32,
    /// Owner's user id.
    pub uid: u32,
    /// Owner's group id.
    pub gid: u32,
    /// Size in bytes, including what a buffering policy holds in DRAM.
    pub size: u64,
    /// Space used, in 512-byte units.
    pub blocks: u64,
    /// Last access time.
    pub atime: Timespec,
    /// Last data modification time.
    pub mtime: Timespec,
    /// Last status change time.
    pub ctime: Timespec,
    /// Creation (birth) time, as statx reports it.
    pub crtime: Timespec,
    /// Device number of a device node; 0 otherwise.
    pub rdev: u64,
    /// Bumped each time the inode number is reused, so NFS-style handles
    /// (ino, generation) of a deleted file do not reach its successor.
    pub generation: u32,
    /// Inode flags (format::inode::flags: immutable, append-only), as
    /// FS_IOC_GETFLAGS reports them.
    pub flags: u32,
}

/// A time to set: now, or a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSet {
    /// The mount's clock at the time of the change (UTIME_NOW).
    Now,
    /// This instant, as given.
    At(Timespec),
}

/// Attribute changes; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission and set-id bits (chmod); the type bits stay.
    pub perm: Option<u32>,
    /// New owner (chown).
    pub uid: Option<u32>,
    /// New group (chown).
    pub gid: Option<u32>,
    /// New size (truncate), through the mounted data policy.
    pub size: Option<u64>,
    /// New access time (utimens).
    pub atime: Option<TimeSet>,
    /// New modification time (utimens).
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
    /// The inode the entry names.
    pub ino: u64,
    /// Its type, from the entry itself (no inode read).
    pub kind: FileKind,
    /// The name: any bytes but '/' and NUL, not necessarily UTF-8.
    pub name: Vec<u8>,
    /// Pass this back to continue after this entry.
    pub cookie: u64,
}

/// File-system usage, as statfs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFs {
    /// Bytes per block (4096): the unit of `blocks` and `blocks_free`.
    pub block_size: u64,
    /// Blocks of the data area (metadata regions are not counted).
    pub blocks: u64,
    /// Blocks free, including those a policy holds but would give back.
    pub blocks_free: u64,
    /// Inodes the table holds (slot 0 is never used).
    pub inodes: u64,
    /// Inodes free.
    pub inodes_free: u64,
    /// Longest name a directory entry takes, in bytes (255).
    pub name_max: u64,
}
