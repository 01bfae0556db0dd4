//! In-memory inodes: the DRAM mirror of each on-media inode together with
//! its block index and, for directories, its hash index. An inode is loaded
//! when first used and kept; every change to it happens under its lock, and
//! its PM copy is changed only through the journal or the data path's
//! ordered in-place stores.

mod blockmap;
mod cache;
mod pathcopy;

pub use blockmap::{load_index, plan_insert, plan_punch, plan_truncate, walk, BlockIndex, MapPlan};
pub use cache::{InodeCache, InodeRef};
pub use pathcopy::{plan_path_copy, CommitStore, PathCopy};

use crate::dir::DirIndex;
use crate::durability::{self, Atomicity, Durability};
use crate::error::{FsError, Result};
use crate::mapped::FileMaps;
use amber_format::xattr::{self, Xattr};
use amber_format::{FileKind, Inode, Layout, BLOCK_SIZE, INODE_SIZE};
use amber_pmem::PmDevice;
use std::any::Any;
use std::ops::Range;

/// One inode in DRAM: what every data policy is handed, under the
/// inode's lock, for the file it works on.
pub struct InodeState {
    /// The inode's number: its slot in the inode table.
    pub ino: u64,
    /// Mirror of the on-media inode as last made durable.
    pub disk: Inode,
    /// File blocks of regular files, directories and long symlinks.
    pub map: BlockIndex,
    /// Entries of a directory.
    pub dir: Option<DirIndex>,
    /// Open handles; an unlinked inode is freed when the last one closes.
    pub open_count: u32,
    /// `disk` holds newer times than PM: an overwrite changed mtime/ctime
    /// or a read moved atime; they are persisted by fsync, unmount or the
    /// next transaction that writes this inode.
    pub times_dirty: bool,
    /// Writes since the last fsync (saturating; u32::MAX before the
    /// first): a file fsync'd after nearly every write gets its times
    /// persisted with the data instead of in a fence of their own.
    pub writes_since_fsync: u32,
    /// State the mounted data policy keeps per file (a DRAM write
    /// buffer's block index, say). Owned and typed by that policy; the
    /// core only drops it with the inode.
    pub policy: Option<Box<dyn Any + Send + Sync>>,
    /// The file's logical size when a data policy holds data past the
    /// durable size in DRAM; `disk.size` stays the durable size, so every
    /// journal transaction that writes this inode persists only durable
    /// state. `None` when the two agree.
    pub buffered_size: Option<u64>,
    /// `user.amberfs.durability`, parsed when the inode is loaded and
    /// whenever the attribute changes, so a write or fsync reads a field
    /// instead of the attribute block. On a directory it is only what new
    /// entries inherit.
    pub durability: Durability,
    /// `user.amberfs.atomicity`, kept as `durability` is: what the file
    /// asks of the policy (which refused `Write` at setxattr if it cannot
    /// honour it).
    pub atomicity: Atomicity,
    /// Whether the file has `security.capability`, kept as `durability`
    /// is: a write drops it (`Core::drop_capability`) without reading the
    /// attribute block of every file that has attributes.
    pub capability: bool,
    /// The file's mappings and the blocks they pin (design.md §16); none
    /// while it has none.
    pub(crate) maps: Option<Box<FileMaps>>,
}

/// Reads inode `ino` from the table, without judging it.
pub fn read_inode<D: PmDevice>(dev: &D, layout: &Layout, ino: u64) -> Inode {
    let mut buf = [0u8; INODE_SIZE];
    dev.read(layout.inode_offset(ino), &mut buf);
    Inode::decode(&buf)
}

/// The attribute holding a program's file capabilities, which any write
/// to the file drops (Linux's file_remove_privs).
pub(crate) const CAPABILITY_XATTR: &[u8] = b"security.capability";

/// Whether `attrs` hold file capabilities.
pub(crate) fn has_capability(attrs: &[Xattr]) -> bool {
    attrs.iter().any(|a| a.name == CAPABILITY_XATTR)
}

/// The blocks of inode `ino`'s attributes, whose first block is `block`
/// (none if 0): one block, or a run its head counts. Each is checked to
/// be a data block before anything trusts it.
pub fn xattr_run<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    ino: u64,
    block: u64,
) -> Result<Range<u64>> {
    if block == 0 {
        return Ok(0..0);
    }
    let outside = || FsError::Corrupted(format!("inode {ino} has xattr block {block}"));
    if !layout.is_data_block(block) {
        return Err(outside());
    }
    let mut head = vec![0u8; BLOCK_SIZE as usize];
    dev.read(layout.block_offset(block), &mut head);
    let n = xattr::blocks_of(&head).map_err(|e| FsError::Corrupted(format!("inode {ino}: {e}")))?;
    let run = block..block + n;
    if !run.clone().all(|b| layout.is_data_block(b)) {
        return Err(outside());
    }
    Ok(run)
}

/// The extended attributes of inode `ino`, whose first attribute block is
/// `block` (none if 0).
pub fn read_xattrs<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    ino: u64,
    block: u64,
) -> Result<Vec<Xattr>> {
    let run = xattr_run(dev, layout, ino, block)?;
    if run.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = vec![0u8; ((run.end - run.start) * BLOCK_SIZE) as usize];
    dev.read(layout.block_offset(run.start), &mut buf);
    xattr::decode(&buf).map_err(|e| FsError::Corrupted(format!("inode {ino}: {e}")))
}

impl InodeState {
    /// Reads and validates inode `ino` from PM.
    pub fn load<D: PmDevice>(dev: &D, layout: &Layout, ino: u64) -> Result<InodeState> {
        let disk = read_inode(dev, layout, ino);
        if !disk.in_use() {
            return Err(FsError::NotFound);
        }
        let Some(kind) = disk.kind() else {
            return Err(FsError::Corrupted(format!(
                "inode {ino} has invalid mode {:o}",
                disk.mode
            )));
        };
        let (map, _) = load_index(dev, layout, disk.map_root, disk.map_height)?;
        let dir = if kind == FileKind::Directory {
            if !disk.size.is_multiple_of(BLOCK_SIZE) {
                return Err(FsError::Corrupted(format!(
                    "directory {ino} size {} is not whole blocks",
                    disk.size
                )));
            }
            Some(DirIndex::load(
                dev,
                layout,
                ino,
                &map,
                disk.size / BLOCK_SIZE,
            )?)
        } else {
            None
        };
        let attrs = read_xattrs(dev, layout, ino, disk.xattr_block)?;
        let (durability, atomicity) = durability::of(&attrs);
        let capability = has_capability(&attrs);
        Ok(InodeState {
            ino,
            disk,
            map,
            dir,
            open_count: 0,
            times_dirty: false,
            writes_since_fsync: u32::MAX,
            policy: None,
            buffered_size: None,
            durability,
            atomicity,
            capability,
            maps: None,
        })
    }

    /// The size readers see: the buffered (logical) size if a data policy
    /// set one, else the durable size.
    pub fn size(&self) -> u64 {
        match self.buffered_size {
            Some(s) => {
                debug_assert!(s >= self.disk.size, "logical size below the durable size");
                s
            }
            None => self.disk.size,
        }
    }

    /// Whether file block `fb` is pinned by a mapping (design.md §16):
    /// it must stay where it is, written only in place.
    pub(crate) fn pinned(&self, fb: u64) -> bool {
        self.maps.as_ref().is_some_and(|m| m.any_pinned(fb, fb))
    }

    /// The file's type; a loaded inode always has one (load refuses
    /// garbage mode bits).
    pub fn kind(&self) -> FileKind {
        self.disk.kind().expect("loaded inodes have a valid kind")
    }

    /// The directory index, or NotADirectory.
    pub fn dir(&self) -> Result<&DirIndex> {
        self.dir.as_ref().ok_or(FsError::NotADirectory)
    }

    /// The directory index to change, or NotADirectory.
    pub fn dir_mut(&mut self) -> Result<&mut DirIndex> {
        self.dir.as_mut().ok_or(FsError::NotADirectory)
    }
}
