//! Crash recovery of the split layout (hunter.txt §III-B end, §IV-E):
//! every logical-information record is judged against its file's inode
//! and newest attribute entry; stale and torn records are cleared, the
//! newest valid record of each file block keeps its block, and each
//! file's chain and head are rewritten to match, so the next mount after
//! a clean unmount can follow them instead of scanning. Runs after the
//! journals are replayed, so inodes are final.

use super::{judge, pick, plan_relink, LogState, SplitMedia, ValidBlocks, Verdict};
use crate::alloc::BitSet;
use crate::error::{FsError, Result};
use crate::inode::read_inode;
use amber_format::split::{LogicalInfo, OwnCommit, Record, LI_SIZE};
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
    /// Its records that the validity rule keeps, (block, record).
    valid: Vec<(u64, LogicalInfo)>,
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
    let mut files = live_files(dev, l, media);
    scan_records(dev, l, media, &mut files, &mut rep)?;
    for (&ino, f) in &mut files {
        let picked = pick(std::mem::take(&mut f.valid));
        if let Some((fb, seq, blocks)) = picked.twins.first() {
            return Err(FsError::Corrupted(format!(
                "blocks {blocks:?} all hold block {fb} of inode {ino} from write {seq}"
            )));
        }
        // The older records were superseded before the crash could
        // clear them.
        for &b in &picked.superseded {
            media.clear_li(dev, b);
            rep.cleared += 1;
        }
        relink(dev, media, ino, f, &picked.blocks, used, &mut rep)?;
    }
    dev.drain()?;
    Ok(rep)
}

/// Every in-use regular inode with its attribute log.
fn live_files<D: PmDevice>(dev: &D, l: &Layout, media: &SplitMedia) -> BTreeMap<u64, File> {
    // Ordered, so recovery's stores come in the same order on every run.
    let mut files = BTreeMap::new();
    for ino in 1..l.inode_count {
        let inode = read_inode(dev, l, ino);
        if inode.in_use() && inode.kind() == Some(FileKind::Regular) {
            let log = LogState::read(media, dev, ino, inode.generation);
            let valid = Vec::new();
            files.insert(ino, File { inode, log, valid });
        }
    }
    files
}

/// Reads every record (one block of them per read), clears the torn and
/// stale ones and gives each file its valid ones; fails on a record no
/// protocol writes.
fn scan_records<D: PmDevice>(
    dev: &D,
    l: &Layout,
    media: &SplitMedia,
    files: &mut BTreeMap<u64, File>,
    rep: &mut SplitRecovery,
) -> Result<()> {
    let r = &media.regions;
    let first = r.end();
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    let mut b = r.group_of(first);
    while b < l.total_blocks {
        let n = PER_READ.min(l.total_blocks - b);
        let bytes = &mut buf[..(n * LI_SIZE) as usize];
        dev.read(r.group_offset(b), bytes);
        for (i, rec) in bytes.chunks_exact(LI_SIZE as usize).enumerate() {
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
            let data = |own: &OwnCommit| {
                let mut block = vec![0u8; BLOCK_SIZE as usize];
                dev.read(l.block_offset(blk), &mut block);
                own.matches(&block)
            };
            let verdict = match &file {
                Some(f) => judge(&li, l, &f.inode, f.log.newest.as_ref(), data),
                None => judge(&li, l, &Inode::free(), None, data),
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
                Verdict::Valid => file
                    .expect("judged valid against its file")
                    .valid
                    .push((blk, li)),
            }
        }
        b += n;
    }
    Ok(())
}

/// Marks a file's blocks used and makes its chain and head entry match
/// them: links point to the next lower block, the head entry names the
/// highest and counts them.
fn relink<D: PmDevice>(
    dev: &D,
    media: &SplitMedia,
    ino: u64,
    f: &File,
    blocks: &ValidBlocks,
    used: &mut BitSet,
    rep: &mut SplitRecovery,
) -> Result<()> {
    for &(blk, _) in blocks.values() {
        if used.set(blk) {
            return Err(FsError::Corrupted(format!("block {blk} is owned twice")));
        }
        rep.valid += 1;
    }
    debug_assert!(
        f.log.newest.is_some() || blocks.is_empty(),
        "valid records need an entry"
    );
    let plan = plan_relink(blocks, f.log.newest.as_ref());
    for (blk, li) in &plan.links {
        media.write_li(dev, *blk, li);
    }
    if let Some(e) = &plan.entry {
        media.write_entry(dev, ino, f.log.next_slot, e);
    }
    rep.files_relinked += u64::from(!plan.is_empty());
    Ok(())
}
