//! The 256-byte on-media inode. Inode number `n` lives at
//! `itable_start * 4096 + n * 256`; inode 0 is never used and inode 1 is
//! the root directory.
//!
//! The fields an ordinary write changes (size, blocks, mtime, ctime) share
//! the first cache line, so a size-growing write persists them with one
//! flush, and a crash leaves a prefix of that line's stores.
//!
//! ```text
//! off size field                      off size field
//!   0   4  mode (type | permissions)    64   8  atime seconds
//!   4   4  link count                   72   4  atime nanoseconds
//!   8   4  uid                          76   4  crtime nanoseconds
//!  12   4  gid                          80   8  crtime seconds
//!  16   4  flags (see [`flags`])        88   8  rdev (device nodes)
//!  20   4  generation                   96   8  block-map root block (0: none)
//!  24   8  size in bytes               104   1  block-map height (0..=4)
//!  32   8  blocks allocated (data+map) 105   7  reserved, zero
//!  40   8  mtime seconds               112   8  xattr block (0: none)
//!  48   4  mtime nanoseconds           120   8  parent directory (directories)
//!  52   4  ctime nanoseconds           128 112  inline symlink target
//!  56   8  ctime seconds               240   8  zone commit number (LAWN)
//!                                      248   8  reserved, zero
//! ```
//! A slot is free when `mode == 0`. An inode with `mode != 0` and link count
//! 0 is an orphan (unlinked while open); recovery frees it.

use crate::le::*;

/// Bytes per inode.
pub const INODE_SIZE: usize = 256;
/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// Longest symlink target stored inside the inode.
pub const INLINE_MAX: usize = 112;
/// Byte offset of the first-line fields a write updates.
pub const OFF_SIZE: usize = 24;
/// Byte offset of the block-map root.
pub const OFF_MAP_ROOT: usize = 96;
/// Byte offset of the zone commit number: the last multi-slice write whose
/// zone descriptors are committed (format::zone). It only grows, and a
/// freed inode keeps it for the next file of that number, so a superseded
/// descriptor of an earlier file can never become valid again.
pub const OFF_ZONE_SEQ: usize = 240;

const OFF_INLINE: usize = 128;

/// Bits of the `flags` field: Linux's FS_IOC_GETFLAGS values (chattr,
/// lsattr), so the FUSE adapter passes them through unchanged. Older
/// versions wrote 0 and ignore the field; other bits are not used (fsck
/// reports and clears them).
pub mod flags {
    /// FS_IMMUTABLE_FL (`chattr +i`): no change at all but of the flags.
    pub const IMMUTABLE: u32 = 0x10;
    /// FS_APPEND_FL (`chattr +a`): data only appended; not removed,
    /// renamed, truncated or relinked.
    pub const APPEND: u32 = 0x20;
    /// Every bit with a meaning.
    pub const KNOWN: u32 = IMMUTABLE | APPEND;
}

/// POSIX file-type bits of `mode`.
pub mod mode {
    pub const S_IFMT: u32 = 0o170000;
    pub const S_IFSOCK: u32 = 0o140000;
    pub const S_IFLNK: u32 = 0o120000;
    pub const S_IFREG: u32 = 0o100000;
    pub const S_IFBLK: u32 = 0o060000;
    pub const S_IFDIR: u32 = 0o040000;
    pub const S_IFCHR: u32 = 0o020000;
    pub const S_IFIFO: u32 = 0o010000;
    /// Permission and set-id bits.
    pub const PERM_MASK: u32 = 0o7777;
    /// Set-user-id bit.
    pub const S_ISUID_BIT: u32 = 0o4000;
    /// Set-group-id bit (on a directory: new entries take its group).
    pub const S_ISGID_BIT: u32 = 0o2000;
    /// Sticky bit.
    pub const S_ISVTX_BIT: u32 = 0o1000;
}

/// A point in time, nanosecond resolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    pub secs: i64,
    pub nsecs: u32,
}

/// The kind of an inode, from its mode bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileKind {
    /// The S_IFMT bits of this kind.
    pub fn mode_bits(self) -> u32 {
        use mode::*;
        match self {
            FileKind::Regular => S_IFREG,
            FileKind::Directory => S_IFDIR,
            FileKind::Symlink => S_IFLNK,
            FileKind::Fifo => S_IFIFO,
            FileKind::Socket => S_IFSOCK,
            FileKind::CharDevice => S_IFCHR,
            FileKind::BlockDevice => S_IFBLK,
        }
    }

    /// The kind named by `mode`, if it names one.
    pub fn from_mode(m: u32) -> Option<FileKind> {
        use mode::*;
        Some(match m & S_IFMT {
            S_IFREG => FileKind::Regular,
            S_IFDIR => FileKind::Directory,
            S_IFLNK => FileKind::Symlink,
            S_IFIFO => FileKind::Fifo,
            S_IFSOCK => FileKind::Socket,
            S_IFCHR => FileKind::CharDevice,
            S_IFBLK => FileKind::BlockDevice,
            _ => return None,
        })
    }

    /// The d_type byte stored in directory entries (Linux DT_* values).
    pub fn dtype(self) -> u8 {
        (self.mode_bits() >> 12) as u8
    }

    /// The kind a directory entry's d_type byte names.
    pub fn from_dtype(t: u8) -> Option<FileKind> {
        FileKind::from_mode((t as u32) << 12)
    }
}

/// Decoded inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub flags: u32,
    pub generation: u32,
    pub size: u64,
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub crtime: Timespec,
    pub rdev: u64,
    pub map_root: u64,
    pub map_height: u8,
    pub xattr_block: u64,
    pub parent: u64,
    pub inline: [u8; INLINE_MAX],
    /// Zone commit number (see `OFF_ZONE_SEQ`).
    pub zone_seq: u64,
}

impl Inode {
    /// An unused slot.
    pub fn free() -> Inode {
        Inode {
            mode: 0,
            nlink: 0,
            uid: 0,
            gid: 0,
            flags: 0,
            generation: 0,
            size: 0,
            blocks: 0,
            atime: Timespec::default(),
            mtime: Timespec::default(),
            ctime: Timespec::default(),
            crtime: Timespec::default(),
            rdev: 0,
            map_root: 0,
            map_height: 0,
            xattr_block: 0,
            parent: 0,
            inline: [0; INLINE_MAX],
            zone_seq: 0,
        }
    }

    /// Whether the slot holds an inode.
    pub fn in_use(&self) -> bool {
        self.mode != 0
    }

    /// The inode's kind, or None for a free slot or garbage mode bits.
    pub fn kind(&self) -> Option<FileKind> {
        FileKind::from_mode(self.mode)
    }

    pub fn encode(&self) -> [u8; INODE_SIZE] {
        let mut b = [0u8; INODE_SIZE];
        put_u32(&mut b, 0, self.mode);
        put_u32(&mut b, 4, self.nlink);
        put_u32(&mut b, 8, self.uid);
        put_u32(&mut b, 12, self.gid);
        put_u32(&mut b, 16, self.flags);
        put_u32(&mut b, 20, self.generation);
        put_u64(&mut b, 24, self.size);
        put_u64(&mut b, 32, self.blocks);
        put_i64(&mut b, 40, self.mtime.secs);
        put_u32(&mut b, 48, self.mtime.nsecs);
        put_u32(&mut b, 52, self.ctime.nsecs);
        put_i64(&mut b, 56, self.ctime.secs);
        put_i64(&mut b, 64, self.atime.secs);
        put_u32(&mut b, 72, self.atime.nsecs);
        put_u32(&mut b, 76, self.crtime.nsecs);
        put_i64(&mut b, 80, self.crtime.secs);
        put_u64(&mut b, 88, self.rdev);
        put_u64(&mut b, 96, self.map_root);
        b[104] = self.map_height;
        put_u64(&mut b, 112, self.xattr_block);
        put_u64(&mut b, 120, self.parent);
        b[OFF_INLINE..OFF_INLINE + INLINE_MAX].copy_from_slice(&self.inline);
        put_u64(&mut b, OFF_ZONE_SEQ, self.zone_seq);
        b
    }

    /// Decodes without judging the values: the caller (mount, fsck)
    /// validates what it uses.
    pub fn decode(b: &[u8; INODE_SIZE]) -> Inode {
        let mut inline = [0u8; INLINE_MAX];
        inline.copy_from_slice(&b[OFF_INLINE..OFF_INLINE + INLINE_MAX]);
        Inode {
            mode: get_u32(b, 0),
            nlink: get_u32(b, 4),
            uid: get_u32(b, 8),
            gid: get_u32(b, 12),
            flags: get_u32(b, 16),
            generation: get_u32(b, 20),
            size: get_u64(b, 24),
            blocks: get_u64(b, 32),
            mtime: Timespec {
                secs: get_i64(b, 40),
                nsecs: get_u32(b, 48),
            },
            ctime: Timespec {
                secs: get_i64(b, 56),
                nsecs: get_u32(b, 52),
            },
            atime: Timespec {
                secs: get_i64(b, 64),
                nsecs: get_u32(b, 72),
            },
            crtime: Timespec {
                secs: get_i64(b, 80),
                nsecs: get_u32(b, 76),
            },
            rdev: get_u64(b, 88),
            map_root: get_u64(b, 96),
            map_height: b[104],
            xattr_block: get_u64(b, 112),
            parent: get_u64(b, 120),
            inline,
            zone_seq: get_u64(b, OFF_ZONE_SEQ),
        }
    }
}

const _: () = assert!(OFF_INLINE + INLINE_MAX == OFF_ZONE_SEQ && OFF_ZONE_SEQ + 16 == INODE_SIZE);
const _: () = assert!(
    OFF_SIZE + 40 == 64,
    "write-path fields must fill the first line"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut i = Inode::free();
        i.mode = mode::S_IFREG | 0o644;
        i.nlink = 1;
        i.size = 12345;
        i.blocks = 4;
        i.mtime = Timespec {
            secs: 1_700_000_000,
            nsecs: 5,
        };
        i.ctime = Timespec {
            secs: -3,
            nsecs: 999_999_999,
        };
        i.inline[..3].copy_from_slice(b"abc");
        i.map_root = 77;
        i.map_height = 2;
        i.zone_seq = 99;
        let b = i.encode();
        assert_eq!(Inode::decode(&b), i);
    }

    #[test]
    fn kinds_round_trip_through_dtype() {
        for k in [
            FileKind::Regular,
            FileKind::Directory,
            FileKind::Symlink,
            FileKind::Fifo,
            FileKind::Socket,
            FileKind::CharDevice,
            FileKind::BlockDevice,
        ] {
            assert_eq!(FileKind::from_dtype(k.dtype()), Some(k));
            assert_eq!(FileKind::from_mode(k.mode_bits() | 0o755), Some(k));
        }
        assert_eq!(FileKind::from_mode(0), None);
    }
}
