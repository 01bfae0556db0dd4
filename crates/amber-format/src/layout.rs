//! Where each region of a pool lives, computed once at mkfs from the pool
//! size and the format parameters and stored in the superblock.
//!
//! ```text
//! block 0            superblock copy A
//! block 1            superblock copy B
//! journal_start      journal_count journals of journal_blocks blocks each
//! itable_start       inode table: inode_count inodes of 256 bytes
//! bitmap_start       saved block-allocation bitmap (valid only when clean)
//! data_start ..      data area: file data, directory blocks, block-map nodes
//! ```

use crate::error::FormatError;
use crate::inode::INODE_SIZE;

/// Bytes per block; fixed in format v1.
pub const BLOCK_SIZE: u64 = 4096;
/// Smallest pool mkfs accepts.
pub const MIN_POOL_SIZE: u64 = 256 * 1024;
/// Largest pool format v1 describes (block numbers must fit in 48 bits so
/// block-map entries leave room for flags in later versions).
pub const MAX_POOL_SIZE: u64 = 1 << 50;
/// Upper bound on journals: one per CPU, with headroom.
pub const MAX_JOURNALS: u32 = 256;
/// Upper bound on one journal's size in blocks (1 MiB).
pub const MAX_JOURNAL_BLOCKS: u32 = 256;
/// Smallest journal: must hold the largest transaction (see `journal`).
pub const MIN_JOURNAL_BLOCKS: u32 = 8;
/// Upper bound on inodes, 2^32: LAWN's zone descriptors store an inode
/// number in 4 bytes, so every inode number must fit in a u32.
pub const MAX_INODES: u64 = 1 << 32;

/// What mkfs was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatParams {
    /// Pool size in bytes, [`MIN_POOL_SIZE`]..=[`MAX_POOL_SIZE`]; a tail
    /// short of a whole block is not used.
    pub pool_size: u64,
    /// Slots in the inode table, 2..=[`MAX_INODES`], slot 0 unused: the
    /// most files the pool can hold, plus one.
    pub inode_count: u64,
    /// Metadata journals, 1..=[`MAX_JOURNALS`]: how many namespace
    /// operations can commit at once.
    pub journal_count: u32,
    /// Blocks per journal,
    /// [`MIN_JOURNAL_BLOCKS`]..=[`MAX_JOURNAL_BLOCKS`].
    pub journal_blocks: u32,
    /// Where regular files' metadata lives.
    pub layout: PoolLayout,
}

/// The pool layouts mkfs makes (`amberfs mkfs --layout`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PoolLayout {
    /// Block maps, for every policy but amber and HUNTER's.
    Classic,
    /// HUNTER's data/metadata split: attribute logs and a table of
    /// logical-information records in their own area (`FEATURE_SPLIT`).
    /// The default: it is the layout of the default policy, amber.
    #[default]
    Split,
    /// HUNTER's LFS ablation: the same records, but each in a summary
    /// block inside the data log, one every 64 blocks (`FEATURE_SPLIT` and
    /// `FEATURE_LOG_RECORDS`).
    Lfs,
    /// NOVA's per-inode logs for regular files (`FEATURE_NOVA`), block
    /// maps for everything else: the `nova` policy's.
    Nova,
}

impl FormatParams {
    /// Defaults that fit the pool: one inode per 16 KiB (at least 64, at
    /// most 2^20 unless asked), 8 journals of 64 KiB, and the default
    /// layout (split), so a pool made with defaults mounts with the default
    /// mount options (policy amber).
    pub fn for_size(pool_size: u64) -> FormatParams {
        let inode_count = (pool_size / (16 * 1024)).clamp(64, 1 << 20);
        FormatParams {
            pool_size,
            inode_count,
            journal_count: 8,
            journal_blocks: 16,
            layout: PoolLayout::default(),
        }
    }
}

/// The computed geometry, as stored in the superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Whole 4096-byte blocks in the pool; every block number is below it.
    pub total_blocks: u64,
    /// First block of journal 0 (always 2, after the superblock copies).
    pub journal_start: u64,
    /// Number of journals, laid end to end from `journal_start`.
    pub journal_count: u32,
    /// Blocks per journal.
    pub journal_blocks: u32,
    /// First block of the inode table, right after the journals.
    pub itable_start: u64,
    /// Slots in the inode table (inode numbers are below it; 0 unused).
    pub inode_count: u64,
    /// First block of the saved allocation bitmap, right after the table.
    pub bitmap_start: u64,
    /// Blocks of the bitmap: one bit per pool block, rounded up.
    pub bitmap_blocks: u64,
    /// First block of the data area, right after the bitmap; everything
    /// before it is metadata at fixed places.
    pub data_start: u64,
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

impl Layout {
    /// Computes the geometry for `p`, or says which parameter cannot work.
    pub fn compute(p: &FormatParams) -> Result<Layout, FormatError> {
        if p.pool_size < MIN_POOL_SIZE || p.pool_size > MAX_POOL_SIZE {
            return Err(FormatError::InvalidField {
                what: "pool size",
                value: p.pool_size,
            });
        }
        if p.journal_count == 0 || p.journal_count > MAX_JOURNALS {
            return Err(FormatError::InvalidField {
                what: "journal count",
                value: p.journal_count as u64,
            });
        }
        if p.journal_blocks < MIN_JOURNAL_BLOCKS || p.journal_blocks > MAX_JOURNAL_BLOCKS {
            return Err(FormatError::InvalidField {
                what: "journal blocks",
                value: p.journal_blocks as u64,
            });
        }
        if p.inode_count < 2 || p.inode_count > MAX_INODES {
            return Err(FormatError::InvalidField {
                what: "inode count",
                value: p.inode_count,
            });
        }
        let total_blocks = p.pool_size / BLOCK_SIZE;
        let journal_start = 2;
        let itable_start = journal_start + p.journal_count as u64 * p.journal_blocks as u64;
        let itable_blocks = div_ceil(p.inode_count * INODE_SIZE as u64, BLOCK_SIZE);
        let bitmap_start = itable_start + itable_blocks;
        let bitmap_blocks = div_ceil(total_blocks, BLOCK_SIZE * 8);
        let data_start = bitmap_start + bitmap_blocks;
        // A pool whose metadata leaves fewer than 16 data blocks is useless.
        if data_start + 16 > total_blocks {
            return Err(FormatError::InvalidField {
                what: "pool size (too small for the inode table and journals)",
                value: p.pool_size,
            });
        }
        Ok(Layout {
            total_blocks,
            journal_start,
            journal_count: p.journal_count,
            journal_blocks: p.journal_blocks,
            itable_start,
            inode_count: p.inode_count,
            bitmap_start,
            bitmap_blocks,
            data_start,
        })
    }

    /// Byte offset of inode `ino` (0 is never used: it means "no inode").
    pub fn inode_offset(&self, ino: u64) -> u64 {
        assert!(
            ino > 0 && ino < self.inode_count,
            "inode {ino} out of range"
        );
        self.itable_start * BLOCK_SIZE + ino * INODE_SIZE as u64
    }

    /// Byte offset of block `b`.
    pub fn block_offset(&self, b: u64) -> u64 {
        assert!(b < self.total_blocks, "block {b} out of range");
        b * BLOCK_SIZE
    }

    /// Byte offset of journal `j`.
    pub fn journal_offset(&self, j: u32) -> u64 {
        assert!(j < self.journal_count);
        (self.journal_start + j as u64 * self.journal_blocks as u64) * BLOCK_SIZE
    }

    /// Bytes in one journal.
    pub fn journal_bytes(&self) -> u64 {
        self.journal_blocks as u64 * BLOCK_SIZE
    }

    /// Number of blocks in the data area.
    pub fn data_blocks(&self) -> u64 {
        self.total_blocks - self.data_start
    }

    /// Whether `b` is a block number file data may use.
    pub fn is_data_block(&self, b: u64) -> bool {
        b >= self.data_start && b < self.total_blocks
    }

    /// Whether `ino` names a slot of the inode table other than 0.
    pub fn is_valid_ino(&self, ino: u64) -> bool {
        ino > 0 && ino < self.inode_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_ordered_and_fits() {
        let l = Layout::compute(&FormatParams::for_size(64 << 20)).unwrap();
        assert!(l.journal_start < l.itable_start);
        assert!(l.itable_start < l.bitmap_start);
        assert!(l.bitmap_start < l.data_start);
        assert!(l.data_start < l.total_blocks);
        assert_eq!(l.total_blocks, (64 << 20) / BLOCK_SIZE);
    }

    #[test]
    fn rejects_impossible_parameters() {
        assert!(Layout::compute(&FormatParams::for_size(1024)).is_err());
        let mut p = FormatParams::for_size(64 << 20);
        p.journal_count = 0;
        assert!(Layout::compute(&p).is_err());
        let mut p = FormatParams::for_size(1 << 20);
        p.inode_count = 1 << 20;
        assert!(Layout::compute(&p).is_err());
    }
}
