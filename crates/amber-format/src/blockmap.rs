//! Block-map nodes: a file's blocks are found through a radix tree rooted
//! in the inode. A node is one block of 512 little-endian u64 block numbers
//! (0: hole). Height 0 with a root means the root is the data block of file
//! block 0; height h >= 1 means the root is a node covering 512^h blocks.
//! Height 4 covers 2^36 blocks (256 TiB), the file size limit.

use crate::layout::BLOCK_SIZE;

/// Pointers per node.
pub const PTRS_PER_NODE: u64 = BLOCK_SIZE / 8;
/// Tallest tree.
pub const MAX_HEIGHT: u8 = 4;
/// Largest file, in bytes.
pub const MAX_FILE_SIZE: u64 = PTRS_PER_NODE.pow(MAX_HEIGHT as u32) * BLOCK_SIZE;

/// Blocks a tree of height `h` covers.
pub fn capacity_blocks(h: u8) -> u64 {
    assert!(h <= MAX_HEIGHT);
    PTRS_PER_NODE.pow(h as u32)
}

/// Smallest height whose tree covers file block `fblock`.
pub fn height_for(fblock: u64) -> u8 {
    let mut h = 0;
    while capacity_blocks(h) <= fblock {
        h += 1;
        assert!(
            h <= MAX_HEIGHT,
            "file block {fblock} beyond the largest file"
        );
    }
    h
}

/// Index into a node at `level` (1 = leaf nodes pointing at data) for
/// file block `fblock`.
pub fn index_at(fblock: u64, level: u8) -> u64 {
    assert!((1..=MAX_HEIGHT).contains(&level));
    (fblock / capacity_blocks(level - 1)) % PTRS_PER_NODE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_and_indexes() {
        assert_eq!(height_for(0), 0);
        assert_eq!(height_for(1), 1);
        assert_eq!(height_for(511), 1);
        assert_eq!(height_for(512), 2);
        assert_eq!(index_at(513, 1), 1);
        assert_eq!(index_at(513, 2), 1);
        assert_eq!(MAX_FILE_SIZE, 1 << 48);
    }
}
