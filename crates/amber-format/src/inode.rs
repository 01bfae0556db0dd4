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

use std::mem::offset_of;
use zerocopy::little_endian::{I64, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes per inode.
pub const INODE_SIZE: usize = 256;
/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// Longest symlink target stored inside the inode.
pub const INLINE_MAX: usize = 112;
/// Byte offset of the link count (fsck mends it alone).
pub const OFF_NLINK: usize = offset_of!(RawInode, nlink);
/// Byte offset of the flags (fsck clears unknown bits alone).
pub const OFF_FLAGS: usize = offset_of!(RawInode, flags);
/// Byte offset of the generation (fsck bumps it alone).
pub const OFF_GENERATION: usize = offset_of!(RawInode, generation);
/// Byte offset of the first-line fields a write updates.
pub const OFF_SIZE: usize = offset_of!(RawInode, size);
/// Byte offset of the blocks-allocated count, beside the size.
pub const OFF_BLOCKS: usize = offset_of!(RawInode, blocks);
/// Byte offset of the block-map root.
pub const OFF_MAP_ROOT: usize = offset_of!(RawInode, map_root);
/// Byte offset of the xattr block number.
pub const OFF_XATTR: usize = offset_of!(RawInode, xattr_block);
/// Byte offset of the parent directory.
pub const OFF_PARENT: usize = offset_of!(RawInode, parent);
/// Byte offset of the zone commit number: the last multi-slice write whose
/// zone descriptors are committed (format::zone). It only grows, and a
/// freed inode keeps it for the next file of that number, so a superseded
/// descriptor of an earlier file can never become valid again.
pub const OFF_ZONE_SEQ: usize = offset_of!(RawInode, zone_seq);

/// The reserved byte ranges `[start, end)`: a v1 pool leaves them zero
/// (fsck checks it).
pub const RESERVED: [(usize, usize); 2] = [
    (offset_of!(RawInode, reserved), OFF_XATTR),
    (offset_of!(RawInode, reserved_tail), INODE_SIZE),
];

/// An inode as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawInode {
    mode: U32,
    nlink: U32,
    uid: U32,
    gid: U32,
    flags: U32,
    generation: U32,
    size: U64,
    blocks: U64,
    mtime_secs: I64,
    mtime_nsecs: U32,
    ctime_nsecs: U32,
    ctime_secs: I64,
    atime_secs: I64,
    atime_nsecs: U32,
    crtime_nsecs: U32,
    crtime_secs: I64,
    rdev: U64,
    map_root: U64,
    map_height: u8,
    reserved: [u8; 7],
    xattr_block: U64,
    parent: U64,
    inline: [u8; INLINE_MAX],
    zone_seq: U64,
    reserved_tail: [u8; 8],
}

assert_layout!(RawInode, INODE_SIZE, {
    mode: 0, nlink: 4, uid: 8, gid: 12, flags: 16, generation: 20, size: 24,
    blocks: 32, mtime_secs: 40, mtime_nsecs: 48, ctime_nsecs: 52, ctime_secs: 56,
    atime_secs: 64, atime_nsecs: 72, crtime_nsecs: 76, crtime_secs: 80, rdev: 88,
    map_root: 96, map_height: 104, reserved: 105, xattr_block: 112, parent: 120,
    inline: 128, zone_seq: 240, reserved_tail: 248,
});

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
    /// Mask of the file-type bits; the values below are what it selects.
    pub const S_IFMT: u32 = 0o170000;
    /// Type bits of a Unix-domain socket.
    pub const S_IFSOCK: u32 = 0o140000;
    /// Type bits of a symbolic link.
    pub const S_IFLNK: u32 = 0o120000;
    /// Type bits of a regular file.
    pub const S_IFREG: u32 = 0o100000;
    /// Type bits of a block device node.
    pub const S_IFBLK: u32 = 0o060000;
    /// Type bits of a directory.
    pub const S_IFDIR: u32 = 0o040000;
    /// Type bits of a character device node.
    pub const S_IFCHR: u32 = 0o020000;
    /// Type bits of a named pipe.
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

/// A point in time, nanosecond resolution, as the inode and the
/// attribute log store it (seconds and nanoseconds in separate fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    /// Seconds since the Unix epoch; negative for times before it.
    pub secs: i64,
    /// Nanoseconds past `secs`, normally below 10^9; decode does not
    /// judge it.
    pub nsecs: u32,
}

/// The kind of an inode, from its mode bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A regular file: its data is found through the data policy.
    Regular,
    /// A directory: its data blocks hold directory entries ([`crate::dirent`]).
    Directory,
    /// A symbolic link: its target is inline or in data block 0.
    Symlink,
    /// A named pipe: no data, only the inode.
    Fifo,
    /// A Unix-domain socket: no data, only the inode.
    Socket,
    /// A character device node: `rdev` names the device.
    CharDevice,
    /// A block device node: `rdev` names the device.
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

/// An inode's fields as the core works with them; [`Inode::encode`] and
/// [`Inode::decode`] convert to and from the 256 bytes of the table above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// File type ([`mode`]'s `S_IF*`) and permission bits; 0 marks a free
    /// slot.
    pub mode: u32,
    /// Directory entries naming the inode; 0 with a nonzero mode is an
    /// orphan that recovery frees.
    pub nlink: u32,
    /// Owner's user id.
    pub uid: u32,
    /// Owner's group id.
    pub gid: u32,
    /// Linux inode flags ([`flags`]); only the bits of [`flags::KNOWN`]
    /// may be set.
    pub flags: u32,
    /// Bumped each time the slot is reused, so records of an earlier file
    /// of the same number (split layout, zone) are told apart.
    pub generation: u32,
    /// File size in bytes (for a directory, its blocks times 4096). In a
    /// split pool a regular file's size lives in its attribute log instead.
    pub size: u64,
    /// Blocks allocated to the file, data and block-map nodes, in 4096-byte
    /// units (the xattr block is not counted).
    pub blocks: u64,
    /// Last access time.
    pub atime: Timespec,
    /// Last data modification time.
    pub mtime: Timespec,
    /// Last status change time.
    pub ctime: Timespec,
    /// Creation (birth) time.
    pub crtime: Timespec,
    /// Device number of a character or block device node; 0 otherwise.
    pub rdev: u64,
    /// Block-map root block (see [`crate::blockmap`]); 0: no block mapped.
    pub map_root: u64,
    /// Block-map height, 0..=4; stored beside the root so the two change
    /// with one 16-byte atomic store.
    pub map_height: u8,
    /// The block holding the extended attributes ([`crate::xattr`]); 0:
    /// none.
    pub xattr_block: u64,
    /// A directory's parent inode number, which names its ".." (the root
    /// names itself); 0 for other kinds.
    pub parent: u64,
    /// A symlink target of at most [`INLINE_MAX`] bytes, zero-padded;
    /// longer targets live in data block 0.
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

    /// The 256 bytes stored for this inode, reserved bytes zero.
    pub fn encode(&self) -> [u8; INODE_SIZE] {
        let raw = RawInode {
            mode: self.mode.into(),
            nlink: self.nlink.into(),
            uid: self.uid.into(),
            gid: self.gid.into(),
            flags: self.flags.into(),
            generation: self.generation.into(),
            size: self.size.into(),
            blocks: self.blocks.into(),
            mtime_secs: self.mtime.secs.into(),
            mtime_nsecs: self.mtime.nsecs.into(),
            ctime_nsecs: self.ctime.nsecs.into(),
            ctime_secs: self.ctime.secs.into(),
            atime_secs: self.atime.secs.into(),
            atime_nsecs: self.atime.nsecs.into(),
            crtime_nsecs: self.crtime.nsecs.into(),
            crtime_secs: self.crtime.secs.into(),
            rdev: self.rdev.into(),
            map_root: self.map_root.into(),
            map_height: self.map_height,
            reserved: [0; 7],
            xattr_block: self.xattr_block.into(),
            parent: self.parent.into(),
            inline: self.inline,
            zone_seq: self.zone_seq.into(),
            reserved_tail: [0; 8],
        };
        zerocopy::transmute!(raw)
    }

    /// Decodes without judging the values: the caller (mount, fsck)
    /// validates what it uses.
    pub fn decode(b: &[u8; INODE_SIZE]) -> Inode {
        let raw: RawInode = zerocopy::transmute!(*b);
        let time = |secs: I64, nsecs: U32| Timespec {
            secs: secs.get(),
            nsecs: nsecs.get(),
        };
        Inode {
            mode: raw.mode.get(),
            nlink: raw.nlink.get(),
            uid: raw.uid.get(),
            gid: raw.gid.get(),
            flags: raw.flags.get(),
            generation: raw.generation.get(),
            size: raw.size.get(),
            blocks: raw.blocks.get(),
            mtime: time(raw.mtime_secs, raw.mtime_nsecs),
            ctime: time(raw.ctime_secs, raw.ctime_nsecs),
            atime: time(raw.atime_secs, raw.atime_nsecs),
            crtime: time(raw.crtime_secs, raw.crtime_nsecs),
            rdev: raw.rdev.get(),
            map_root: raw.map_root.get(),
            map_height: raw.map_height,
            xattr_block: raw.xattr_block.get(),
            parent: raw.parent.get(),
            inline: raw.inline,
            zone_seq: raw.zone_seq.get(),
        }
    }
}

const _: () = assert!(
    offset_of!(RawInode, ctime_secs) + 8 == 64 && OFF_SIZE < 64,
    "write-path fields must fill the first line"
);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every 256 bytes with the reserved ones zero (all an encoder
        /// writes) decode to an inode that encodes back to them; so
        /// decode inverts encode too.
        #[test]
        fn encode_inverts_decode(bytes in proptest::collection::vec(any::<u8>(), INODE_SIZE)) {
            let mut raw = RawInode::read_from_bytes(&bytes).expect("an inode's bytes");
            raw.reserved = [0; 7];
            raw.reserved_tail = [0; 8];
            let b: [u8; INODE_SIZE] = zerocopy::transmute!(raw);
            let i = Inode::decode(&b);
            prop_assert_eq!(i.encode(), b);
            prop_assert_eq!(Inode::decode(&i.encode()), i);
        }
    }

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
