//! Which logical-information records count: the one rule recovery and
//! fsck share (docs/design.md §12.4).

use amber_format::split::{AttrEntry, LogicalInfo};
use amber_format::{FileKind, Inode, Layout, BLOCK_SIZE};

/// What a valid-checksum record means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its block holds file data, unless a newer record of the same file
    /// block exists (the caller keeps the newest).
    Valid,
    /// Left behind by an interrupted write, a truncate or a deleted file:
    /// recovery clears it and frees its block.
    Stale(&'static str),
    /// No protocol writes such a record.
    Corrupt(&'static str),
}

/// Judges `li` against its file's inode and newest attribute entry (of
/// the inode's generation).
pub fn judge(li: &LogicalInfo, l: &Layout, inode: &Inode, newest: Option<&AttrEntry>) -> Verdict {
    if !l.is_valid_ino(li.ino) {
        return Verdict::Corrupt("it names an inode outside the table");
    }
    if !inode.in_use()
        || inode.kind() != Some(FileKind::Regular)
        || inode.generation != li.generation
    {
        return Verdict::Stale("its file was deleted");
    }
    let Some(e) = newest else {
        return Verdict::Stale("no durable attributes of its file cover it");
    };
    if li.seq > e.seq {
        return Verdict::Stale("it is newer than its file's durable attributes");
    }
    if li.file_block >= e.size.div_ceil(BLOCK_SIZE) {
        return Verdict::Stale("it lies past its file's durable size");
    }
    Verdict::Valid
}
