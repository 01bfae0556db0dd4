//! A transaction under construction: the new bytes of every metadata range
//! an operation changes, collected in DRAM and committed at once.

use amber_format::journal::{entry_footprint, push_entry, ENTRY_HEADER, HEADER_SIZE, MAX_ENTRIES};
use amber_format::{Inode, Layout};
use std::cell::Cell;

thread_local! {
    /// The buffers of the thread's last finished transaction, for its
    /// next one: a transaction per fsync (amber's in-place write-back)
    /// otherwise allocates and frees a block's worth of payload each
    /// time. One per thread, at most `MAX_TX_BYTES` of payload and its padding.
    static SPARE: Cell<(Vec<u8>, Vec<Span>)> = const { Cell::new((Vec::new(), Vec::new())) };
}

/// Redo entries of one operation, encoded as they are added: the
/// commit streams the payload as it is, with no copy in between.
#[derive(Default)]
pub struct Tx {
    payload: Vec<u8>,
    /// Each entry's target offset and where its bytes lie in `payload`.
    spans: Vec<Span>,
}

/// Where one entry's new bytes go, and where they are in the payload.
#[derive(Clone, Copy)]
pub(crate) struct Span {
    pub offset: u64,
    pub start: usize,
    pub len: usize,
}

/// Largest transaction any operation builds (a rename exchange of two
/// directories with two long names stays far below; a truncate of a tall
/// tree clears at most one node range per level). Journals are at least
/// 8 blocks, so this always fits.
pub const MAX_TX_BYTES: usize = 24 * 1024;

impl Tx {
    /// An empty transaction; committing it writes nothing.
    pub fn new() -> Tx {
        Tx::with_capacity(0)
    }

    /// An empty transaction with room for `payload` bytes of entries
    /// (`entry_footprint` of each), so a large one is not copied as it
    /// grows.
    pub fn with_capacity(payload: usize) -> Tx {
        let (mut bytes, spans) = SPARE.try_with(Cell::take).unwrap_or_default();
        debug_assert!(bytes.is_empty() && spans.is_empty());
        // With room for the commit's padding to a line (`pad_to`), which
        // would otherwise grow the buffer, copying it, at each commit.
        bytes.reserve(payload.min(MAX_TX_BYTES) + HEADER_SIZE);
        Tx {
            payload: bytes,
            spans,
        }
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
        assert!(
            self.spans.len() < MAX_ENTRIES,
            "transaction has too many entries"
        );
        assert!(
            self.payload.len() + entry_footprint(data.len()) + HEADER_SIZE <= MAX_TX_BYTES,
            "transaction too large"
        );
        let start = self.payload.len() + ENTRY_HEADER;
        push_entry(&mut self.payload, offset, data);
        self.spans.push(Span {
            offset,
            start,
            len: data.len(),
        });
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
        self.spans.is_empty()
    }

    /// Pads the payload with zeros to a multiple of `line` bytes (the
    /// header's size: a payload after it then ends on a line boundary),
    /// after its last entry; returns the length of the entries.
    pub(crate) fn pad_to(&mut self, line: usize) -> usize {
        let len = self.payload.len();
        self.payload.resize(len.next_multiple_of(line), 0);
        len
    }

    /// The encoded entries, and where each one's bytes go.
    pub(crate) fn parts(&self) -> (&[u8], &[Span]) {
        (&self.payload, &self.spans)
    }
}

impl Drop for Tx {
    /// Gives the buffers to the thread's next transaction (`SPARE`),
    /// emptied; a thread being torn down just frees them.
    fn drop(&mut self) {
        if self.payload.capacity() > MAX_TX_BYTES + HEADER_SIZE {
            return;
        }
        let mut bufs = (
            std::mem::take(&mut self.payload),
            std::mem::take(&mut self.spans),
        );
        bufs.0.clear();
        bufs.1.clear();
        let _ = SPARE.try_with(|s| s.set(bufs));
    }
}
