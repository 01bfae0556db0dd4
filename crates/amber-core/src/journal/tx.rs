//! A transaction under construction: the new bytes of every metadata range
//! an operation changes, collected in DRAM and committed at once.

use amber_format::journal::{entry_footprint, Entry, HEADER_SIZE, MAX_ENTRIES};
use amber_format::{Inode, Layout};

/// Redo entries of one operation.
#[derive(Default)]
pub struct Tx {
    entries: Vec<Entry>,
    bytes: usize,
}

/// Largest transaction any operation builds (a rename exchange of two
/// directories with two long names stays far below; a truncate of a tall
/// tree clears at most one node range per level). Journals are at least
/// 8 blocks, so this always fits.
pub const MAX_TX_BYTES: usize = 24 * 1024;

impl Tx {
    /// An empty transaction; committing it writes nothing.
    pub fn new() -> Tx {
        Tx::default()
    }

    /// Encoded bytes (header included) of the largest transaction the
    /// journals of `layout` take: what a caller sizing a transaction from
    /// its data (finelog) must stay within.
    pub fn capacity(layout: &Layout) -> usize {
        MAX_TX_BYTES.min(layout.journal_bytes() as usize)
    }

    /// Records new bytes for `[offset, offset + data.len())`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        assert!(!data.is_empty());
        self.bytes += entry_footprint(data.len());
        self.entries.push(Entry {
            offset,
            data: data.to_vec(),
        });
        assert!(
            self.entries.len() <= MAX_ENTRIES,
            "transaction has too many entries"
        );
        assert!(
            self.bytes + HEADER_SIZE <= MAX_TX_BYTES,
            "transaction too large"
        );
    }

    /// Records a little-endian u64.
    pub fn write_u64(&mut self, offset: u64, v: u64) {
        self.write(offset, &v.to_le_bytes());
    }

    /// Records a whole inode.
    pub fn inode(&mut self, layout: &Layout, ino: u64, inode: &Inode) {
        self.write(layout.inode_offset(ino), &inode.encode());
    }

    /// Whether no range has been added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn into_entries(self) -> Vec<Entry> {
        self.entries
    }
}
