//! Which logical-information records count: the one rule recovery and
//! fsck share (docs/design.md §12.4).

use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::split::{AttrEntry, LogicalInfo, OwnCommit};
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

/// Why no protocol could have written `li`, whatever its file holds.
pub fn impossible(li: &LogicalInfo, l: &Layout) -> Option<&'static str> {
    if !l.is_valid_ino(li.ino) {
        Some("it names an inode outside the table")
    } else if li.file_block >= MAX_FILE_SIZE / BLOCK_SIZE {
        Some("it names a block past the largest file")
    } else {
        None
    }
}

/// Judges `li` against its file's inode and newest attribute entry (of
/// the inode's generation). An own-commit record newer than the entry
/// counts when `data_matches` finds its block's data intact: only then
/// did its write's one fence complete (§13.6). Records the entry covers
/// need no such check — their entry was queued after their data's fence.
pub fn judge(
    li: &LogicalInfo,
    l: &Layout,
    inode: &Inode,
    newest: Option<&AttrEntry>,
    data_matches: impl FnOnce(&OwnCommit) -> bool,
) -> Verdict {
    if let Some(why) = impossible(li, l) {
        return Verdict::Corrupt(why);
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
    if li.file_block >= e.size.div_ceil(BLOCK_SIZE) {
        return Verdict::Stale("it lies past its file's durable size");
    }
    if li.seq > e.seq {
        return match &li.own {
            None => Verdict::Stale("it is newer than its file's durable attributes"),
            Some(own) if !data_matches(own) => {
                Verdict::Stale("its write was torn: its block's checksum fails")
            }
            Some(_) => Verdict::Valid,
        };
    }
    Verdict::Valid
}
