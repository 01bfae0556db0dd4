//! Crash recovery of the split layout (hunter.txt §III-B end, §IV-E):
//! every logical-information record is judged against its file's inode
//! and newest attribute entry; stale and torn records are cleared, the
//! newest valid record of each file block keeps its block, and each
//! file's chain and head are rewritten to match, so the next mount after
//! a clean unmount can follow them instead of scanning. Runs after the
//! journals are replayed, so inodes are final.

use super::{judge, LogState, SplitMedia, Verdict};
use crate::alloc::BitSet;
use crate::error::{FsError, Result};
use crate::inode::read_inode;
use amber_format::split::{AttrEntry, LogicalInfo, Record, LI_SIZE};
use amber_format::{FileKind, Inode, Layout, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::collections::BTreeMap;

/// What recovery found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitRecovery {
    /// Records whose blocks hold file data.
    pub valid: u64,
    /// Stale, superseded and torn records cleared.
    pub cleared: u64,
    /// Files whose chain or head entry was rewritten.
    pub files_relinked: u64,
}

/// One live regular file, as recovery sees it.
struct File {
    inode: Inode,
    log: LogState,
    /// file block -> (seq, block) of the newest valid record.
    blocks: BTreeMap<u64, (u64, u64)>,
}

/// Records per read: one block of them.
const PER_READ: u64 = BLOCK_SIZE / LI_SIZE;

/// Recovers the split layout of a crashed pool and marks every block that
/// holds file data in `used`.
pub fn recover<D: PmDevice>(
    dev: &D,
    l: &Layout,
    media: &SplitMedia,
    used: &mut BitSet,
) -> Result<SplitRecovery> {
    let mut rep = SplitRecovery::default();
    // Ordered, so recovery's stores come in the same order on every run.
    let mut files: BTreeMap<u64, File> = BTreeMap::new();
    for ino in 1..l.inode_count {
        let inode = read_inode(dev, l, ino);
        if inode.in_use() && inode.kind() == Some(FileKind::Regular) {
            let log = LogState::read(media, dev, ino, inode.generation);
            files.insert(
                ino,
                File {
                    inode,
                    log,
                    blocks: BTreeMap::new(),
                },
            );
        }
    }
    let r = &media.regions;
    let first = r.end();
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    let mut b = r.group_of(first);
    while b < l.total_blocks {
        let n = PER_READ.min(l.total_blocks - b);
        dev.read(r.group_offset(b), &mut buf[..(n * LI_SIZE) as usize]);
        for (i, rec) in buf[..(n * LI_SIZE) as usize]
            .chunks_exact(LI_SIZE as usize)
            .enumerate()
        {
            let blk = b + i as u64;
            if !r.has_record(blk) {
                continue;
            }
            let rec: &[u8; LI_SIZE as usize] = rec.try_into().expect("64 bytes");
            let li = match LogicalInfo::decode(rec) {
                Record::Clear => continue,
                _ if blk < first => {
                    return Err(FsError::Corrupted(format!(
                    "block {blk} holds split-layout metadata but has a logical-information record"
                )))
                }
                Record::Torn => {
                    media.clear_li(dev, blk);
                    rep.cleared += 1;
                    continue;
                }
                Record::Valid(li) => li,
            };
            let file = files.get_mut(&li.ino);
            let verdict = match &file {
                Some(f) => judge(&li, l, &f.inode, f.log.newest.as_ref()),
                None if l.is_valid_ino(li.ino) => Verdict::Stale("its file was deleted"),
                None => judge(&li, l, &Inode::free(), None),
            };
            match verdict {
                Verdict::Corrupt(why) => {
                    return Err(FsError::Corrupted(format!(
                        "logical information of block {blk}: {why}"
                    )))
                }
                Verdict::Stale(_) => {
                    media.clear_li(dev, blk);
                    rep.cleared += 1;
                }
                Verdict::Valid => {
                    let f = file.expect("judged valid against its file");
                    let keep = f.blocks.entry(li.file_block).or_insert((li.seq, blk));
                    if keep.1 != blk {
                        if keep.0 == li.seq {
                            return Err(FsError::Corrupted(format!(
                                "blocks {} and {blk} both hold block {} of inode {} from write {}",
                                keep.1, li.file_block, li.ino, li.seq
                            )));
                        }
                        // The older of the two was superseded before the
                        // crash could clear it.
                        let loser = if li.seq > keep.0 {
                            std::mem::replace(keep, (li.seq, blk)).1
                        } else {
                            blk
                        };
                        media.clear_li(dev, loser);
                        rep.cleared += 1;
                    }
                }
            }
        }
        b += n;
    }
    for (&ino, f) in &files {
        relink(dev, media, ino, f, used, &mut rep)?;
    }
    dev.drain()?;
    Ok(rep)
}

/// Marks a file's blocks used and makes its chain and head entry match
/// them: links point to the next lower block, the head entry names the
/// highest and counts them.
fn relink<D: PmDevice>(
    dev: &D,
    media: &SplitMedia,
    ino: u64,
    f: &File,
    used: &mut BitSet,
    rep: &mut SplitRecovery,
) -> Result<()> {
    let mut link = 0;
    let mut changed = false;
    for (&fb, &(seq, blk)) in &f.blocks {
        if used.set(blk) {
            return Err(FsError::Corrupted(format!("block {blk} is owned twice")));
        }
        rep.valid += 1;
        if let Record::Valid(li) = media.read_li(dev, blk) {
            if li.link != link {
                let fixed = LogicalInfo { link, ..li };
                debug_assert_eq!((fixed.seq, fixed.file_block), (seq, fb));
                media.write_li(dev, blk, &fixed);
                changed = true;
            }
        }
        link = blk;
    }
    let count = f.blocks.len() as u64;
    let Some(newest) = f.log.newest else {
        debug_assert!(f.blocks.is_empty(), "valid records need an entry");
        return Ok(());
    };
    if newest.head != link || newest.blocks != count {
        let e = AttrEntry {
            seq: newest.seq + 1,
            head: link,
            blocks: count,
            ..newest
        };
        media.write_entry(dev, ino, f.log.next_slot, &e);
        changed = true;
    }
    rep.files_relinked += u64::from(changed);
    Ok(())
}
