//! HUNTER's split layout on PM (format::split): reading and writing
//! logical-information records and attribute-log entries, the rule that
//! says which records count (shared by recovery and fsck), and crash
//! recovery. The policy that writes them lives in `data::hunter`.

mod judge;
mod recover;

pub use judge::{impossible, judge, Verdict};
pub use recover::recover;

use crate::error::Result;
use amber_format::split::{
    AttrEntry, LogicalInfo, Record, SplitRegions, ENTRIES, ENTRY_SIZE, FEATURE_OWN_RECORDS, LI_SIZE,
};
use amber_format::{Inode, Layout, Superblock};
use amber_pmem::PmDevice;
use std::collections::BTreeMap;

/// A file's blocks as its valid records name them: file block ->
/// (block, its record).
pub type ValidBlocks = BTreeMap<u64, (u64, LogicalInfo)>;

/// A file's valid records, one file block at a time: the newest counts,
/// older ones are superseded. Two sharing the newest seq were written by
/// one write, which no protocol does: that file block keeps neither.
#[derive(Debug, Default)]
pub struct Picked {
    pub blocks: ValidBlocks,
    /// Blocks whose records a newer one superseded.
    pub superseded: Vec<u64>,
    /// (file block, seq, blocks) of records that tie for the newest.
    pub twins: Vec<(u64, u64, Vec<u64>)>,
}

/// Sorts a file's valid records (block, record) into [`Picked`]: the one
/// rule recovery and fsck share.
pub fn pick(mut recs: Vec<(u64, LogicalInfo)>) -> Picked {
    recs.sort_by_key(|(b, li)| (li.file_block, std::cmp::Reverse(li.seq), *b));
    let mut out = Picked::default();
    for group in recs.chunk_by(|a, b| a.1.file_block == b.1.file_block) {
        let (top, rest) = (group[0], &group[1..]);
        let ties = rest
            .iter()
            .take_while(|(_, li)| li.seq == top.1.seq)
            .count();
        if ties > 0 {
            let blocks = group[..=ties].iter().map(|&(b, _)| b).collect();
            out.twins.push((top.1.file_block, top.1.seq, blocks));
            out.superseded.extend(rest[ties..].iter().map(|&(b, _)| b));
        } else {
            out.superseded.extend(rest.iter().map(|&(b, _)| b));
            out.blocks.insert(top.1.file_block, top);
        }
    }
    out
}

/// The stores that make a file's chain and head entry name exactly its
/// valid blocks (§12.5) and the entry cover every own-commit record that
/// counts (§13.6), planned by recovery and by fsck alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relink {
    /// Records whose link must change: (block, the record with its link).
    pub links: Vec<(u64, LogicalInfo)>,
    /// A new head entry, when the head or the count differ or a valid
    /// record is newer than the entry: one seq past the newest of both,
    /// naming the highest block, counting them, and stamped with the
    /// newest own commit's time when one is newer than the entry.
    pub entry: Option<AttrEntry>,
}

impl Relink {
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.entry.is_none()
    }
}

/// Plans the relink of a file whose valid blocks are `blocks` and whose
/// newest entry is `newest` (a file with no entry has no blocks either).
pub fn plan_relink(blocks: &ValidBlocks, newest: Option<&AttrEntry>) -> Relink {
    let mut links = Vec::new();
    let mut link = 0;
    for &(b, li) in blocks.values() {
        if li.link != link {
            links.push((b, LogicalInfo { link, ..li }));
        }
        link = b;
    }
    let count = blocks.len() as u64;
    let entry = newest.and_then(|e| {
        let own = blocks
            .values()
            .filter(|(_, li)| li.seq > e.seq)
            .max_by_key(|(_, li)| li.seq)
            .map(|&(_, li)| (li.seq, li.own.map(|o| o.time)));
        if e.head == link && e.blocks == count && own.is_none() {
            return None;
        }
        let mut next = AttrEntry {
            seq: e.seq.max(own.map_or(0, |(seq, _)| seq)) + 1,
            head: link,
            blocks: count,
            ..*e
        };
        if let Some((_, Some(t))) = own {
            next.mtime = t;
            next.ctime = next.ctime.max(t);
        }
        Some(next)
    });
    Relink { links, entry }
}

/// The split layout's regions of a mounted or checked pool.
#[derive(Debug, Clone, Copy)]
pub struct SplitMedia {
    pub regions: SplitRegions,
    /// The pool takes own-commit records (`FEATURE_OWN_RECORDS`; every
    /// split pool mkfs makes since they exist).
    pub own_records: bool,
}

impl SplitMedia {
    /// The pool's split layout, if it has one (the superblock was
    /// validated when it was read).
    pub fn of(sb: &Superblock) -> Option<SplitMedia> {
        sb.split_regions().map(|regions| SplitMedia {
            regions,
            own_records: sb.feature_incompat & FEATURE_OWN_RECORDS != 0,
        })
    }

    pub fn read_li<D: PmDevice>(&self, dev: &D, b: u64) -> Record<LogicalInfo> {
        let mut buf = [0u8; LI_SIZE as usize];
        dev.read(self.regions.li_offset(b), &mut buf);
        LogicalInfo::decode(&buf)
    }

    /// Writes block `b`'s record (non-temporal; the caller drains).
    pub fn write_li<D: PmDevice>(&self, dev: &D, b: u64, li: &LogicalInfo) {
        dev.write_nt(self.regions.li_offset(b), &li.encode());
    }

    /// Clears block `b`'s record (non-temporal; the caller drains).
    pub fn clear_li<D: PmDevice>(&self, dev: &D, b: u64) {
        dev.zero_nt(self.regions.li_offset(b), LI_SIZE);
    }

    /// Clears the records of blocks `b..b + n` (non-temporal; the caller
    /// drains).
    pub fn clear_lis<D: PmDevice>(&self, dev: &D, b: u64, n: u64) {
        let at = self.regions.li_offset(b);
        // A run of data blocks never spans a summary block, so its records
        // are contiguous in either placement.
        debug_assert_eq!(self.regions.li_offset(b + n - 1), at + (n - 1) * LI_SIZE);
        dev.zero_nt(at, n * LI_SIZE);
    }

    /// The four entries of `ino`'s attribute log.
    pub fn read_log<D: PmDevice>(
        &self,
        dev: &D,
        ino: u64,
    ) -> [Record<AttrEntry>; ENTRIES as usize] {
        std::array::from_fn(|i| {
            let mut buf = [0u8; ENTRY_SIZE as usize];
            dev.read(self.regions.entry_offset(ino, i as u64), &mut buf);
            AttrEntry::decode(&buf)
        })
    }

    /// Writes entry `slot` of `ino`'s log (non-temporal; the caller drains).
    pub fn write_entry<D: PmDevice>(&self, dev: &D, ino: u64, slot: u64, e: &AttrEntry) {
        dev.write_nt(self.regions.entry_offset(ino, slot), &e.encode());
    }

    /// Clears entry `slot` of `ino`'s attribute log (non-temporal; the
    /// caller drains).
    pub fn clear_entry<D: PmDevice>(&self, dev: &D, ino: u64, slot: u64) {
        dev.zero_nt(self.regions.entry_offset(ino, slot), ENTRY_SIZE);
    }
}

/// What an attribute log says about the file of generation `generation`:
/// its newest valid entry, and the slot the next entry goes to — the one
/// after the newest entry of any generation, so writing it evicts the
/// oldest (superseded) entry and never the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogState {
    pub newest: Option<AttrEntry>,
    pub next_slot: u64,
}

impl LogState {
    pub fn from_entries(entries: &[Record<AttrEntry>], generation: u32) -> LogState {
        let mut newest: Option<AttrEntry> = None;
        let mut top: Option<(u64, u64)> = None;
        for (i, r) in entries.iter().enumerate() {
            let Record::Valid(e) = r else { continue };
            if top.is_none_or(|(seq, _)| e.seq > seq) {
                top = Some((e.seq, i as u64));
            }
            if e.generation == generation && newest.is_none_or(|n| e.seq > n.seq) {
                newest = Some(*e);
            }
        }
        LogState {
            newest,
            next_slot: top.map_or(0, |(_, i)| (i + 1) % ENTRIES),
        }
    }

    pub fn read<D: PmDevice>(media: &SplitMedia, dev: &D, ino: u64, generation: u32) -> LogState {
        LogState::from_entries(&media.read_log(dev, ino), generation)
    }
}

/// A regular file's durable attributes in a split pool: the inode's,
/// with size, blocks and mtime from its newest entry — none yet means an
/// empty file, whatever the inode's own fields say, since only entries
/// carry a regular file's size — and the later of the two ctimes (a
/// synchronous change such as chmod or link stamps the inode itself; a
/// setattr that sets mtime writes a new entry in its transaction).
pub fn effective(inode: &Inode, newest: Option<&AttrEntry>) -> Inode {
    let mut i = inode.clone();
    match newest {
        Some(e) => {
            i.size = e.size;
            i.blocks = e.blocks;
            i.mtime = e.mtime;
            i.ctime = i.ctime.max(e.ctime);
        }
        None => {
            i.size = 0;
            i.blocks = 0;
        }
    }
    i
}

/// Walks a file's chain from `head` down, returning (file block, block)
/// pairs from the highest index; every step must be a valid record of
/// this file at a strictly lower index, so a broken chain is an error and
/// the walk is bounded by the file's block count.
pub fn walk_chain<D: PmDevice>(
    media: &SplitMedia,
    dev: &D,
    l: &Layout,
    ino: u64,
    generation: u32,
    head: u64,
    blocks: u64,
) -> Result<Vec<(u64, u64)>> {
    let corrupt = |what: String| crate::error::FsError::Corrupted(format!("inode {ino}: {what}"));
    let mut out = Vec::new();
    let mut b = head;
    let mut below = u64::MAX;
    while b != 0 {
        if out.len() as u64 >= blocks {
            return Err(corrupt(format!(
                "its chain is longer than its {blocks} blocks"
            )));
        }
        if !l.is_data_block(b) || !media.regions.has_record(b) || b < media.regions.end() {
            return Err(corrupt(format!(
                "its chain names block {b}, not a data block"
            )));
        }
        let li = match media.read_li(dev, b) {
            Record::Valid(li) if li.ino == ino && li.generation == generation => li,
            _ => {
                return Err(corrupt(format!(
                    "its chain reaches block {b}, which is not its"
                )))
            }
        };
        if li.file_block >= below {
            return Err(corrupt(format!("its chain is out of order at block {b}")));
        }
        below = li.file_block;
        out.push((li.file_block, b));
        b = li.link;
    }
    if out.len() as u64 != blocks {
        return Err(corrupt(format!(
            "its chain has {} blocks, its attributes say {blocks}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(fb: u64, seq: u64, link: u64) -> LogicalInfo {
        LogicalInfo {
            seq,
            ino: 5,
            generation: 1,
            file_block: fb,
            link,
            own: None,
        }
    }

    #[test]
    fn the_newest_record_of_a_file_block_counts_and_ties_keep_none() {
        // Two older records of one write lose to a newer one: no tie.
        let p = pick(vec![
            (10, rec(0, 5, 0)),
            (11, rec(0, 9, 0)),
            (12, rec(0, 5, 0)),
        ]);
        assert_eq!(p.blocks.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(p.blocks[&0].0, 11);
        assert_eq!(p.superseded, vec![10, 12]);
        assert!(p.twins.is_empty());
        // Two tying for the newest: the file block keeps neither.
        let p = pick(vec![
            (20, rec(3, 7, 0)),
            (21, rec(3, 7, 0)),
            (22, rec(3, 2, 0)),
        ]);
        assert!(p.blocks.is_empty());
        assert_eq!(p.twins, vec![(3, 7, vec![20, 21])]);
        assert_eq!(p.superseded, vec![22]);
    }

    #[test]
    fn a_relink_plans_only_what_differs() {
        let mut blocks = ValidBlocks::new();
        blocks.insert(0, (40, rec(0, 1, 0)));
        blocks.insert(2, (41, rec(2, 1, 99)));
        let e = AttrEntry {
            seq: 4,
            generation: 1,
            size: 12288,
            blocks: 2,
            mtime: Default::default(),
            ctime: Default::default(),
            head: 41,
        };
        let p = plan_relink(&blocks, Some(&e));
        assert_eq!(p.links, vec![(41, rec(2, 1, 40))]);
        assert_eq!(p.entry, None);
        let stale = AttrEntry { head: 40, ..e };
        let p = plan_relink(&blocks, Some(&stale));
        assert_eq!(p.entry.map(|e| (e.seq, e.head, e.blocks)), Some((5, 41, 2)));
    }
}
