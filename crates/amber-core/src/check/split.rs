//! HUNTER's split layout: every logical-information record judged by the
//! rule recovery applies (`split::judge`), and each file's chain against
//! its valid blocks (`split::plan_relink`, recovery's own plan).
//!
//! After a crash, stale and torn records and stale chains are what an
//! interrupted batch leaves: notes, which mount repairs. On a cleanly
//! unmounted pool every queue was persisted, so they are damage, and
//! repair does what recovery would: clears the records and rewrites the
//! chains and head entries. There, records newer than every entry of
//! their file's attribute log mean the log lost its newest entries (a
//! torn or zeroed line): repair rebuilds an entry from the records rather
//! than dropping the file's blocks. Records no protocol writes refuse a
//! mount, so repair clears them on any pool.

use super::inodes::Scan;
use super::Ctx;
use crate::split::{
    impossible, judge, pick, plan_relink, LogState, Relink, SplitMedia, ValidBlocks, Verdict,
};
use amber_format::split::{AttrEntry, LogicalInfo, Record, LI_SIZE};
use amber_format::{FileKind, Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;

/// Most findings of one kind spelled out; the rest are counted.
const MAX_LISTED: usize = 5;

/// What the phases after this one need of the split layout.
#[derive(Default)]
pub(super) struct SplitFiles {
    /// Blocks the layout owns: its regions and the blocks valid records
    /// name.
    pub owned: Vec<u64>,
    /// (inode, file block) of every valid block.
    pub mapped: FxHashSet<(u64, u64)>,
    /// Each live regular file's size: its newest entry's, or the one
    /// repair rebuilds.
    pub sizes: FxHashMap<u64, u64>,
}

/// A live regular file: its attribute log and the records of its
/// generation.
struct File {
    inode: Inode,
    log: LogState,
    recs: Vec<(u64, LogicalInfo)>,
}

/// Records that do not count: cleared by repair on a clean pool, by
/// mount after a crash.
#[derive(Default)]
struct Leftovers {
    stale: Vec<(u64, &'static str)>,
    torn: Vec<u64>,
    superseded: Vec<u64>,
}

/// Checks the split layout, if the pool has one.
pub(super) fn check<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    media: Option<&SplitMedia>,
    scan: &Scan,
    was_clean: bool,
) -> SplitFiles {
    let Some(m) = media else {
        return SplitFiles::default();
    };
    let adopted = super::generations::check(cx, m, scan);
    let mut files = live_files(cx, m, scan, &adopted);
    let mut left = Leftovers::default();
    read_records(cx, m, &mut files, &mut left);
    let mut out = SplitFiles {
        owned: m.regions.blocks(cx.layout.total_blocks).collect(),
        ..SplitFiles::default()
    };
    let mut relinks = Vec::new();
    for (&ino, f) in &files {
        let entry = entry_of(cx, ino, f, was_clean);
        let blocks = valid_blocks(cx, m, ino, f, entry.as_ref(), &mut left);
        out.sizes.insert(ino, entry.map_or(0, |e| e.size));
        out.mapped.extend(blocks.keys().map(|&fb| (ino, fb)));
        out.owned.extend(blocks.values().map(|&(b, _)| b));
        let plan = plan_relink(&blocks, entry.as_ref());
        if !plan.is_empty() {
            relinks.push((ino, f.log.next_slot, plan));
        }
    }
    report_leftovers(cx, m, &left, was_clean);
    report_relinks(cx, m, &relinks, was_clean);
    out
}

/// Every live regular file, by the generation it is judged by: its own,
/// or the one `generations::check` gives it.
fn live_files<D: PmDevice>(
    cx: &Ctx<'_, D>,
    m: &SplitMedia,
    scan: &Scan,
    adopted: &[(u64, u32)],
) -> BTreeMap<u64, File> {
    let dev = cx.media.dev();
    scan.recs
        .iter()
        .filter(|(_, r)| r.live_kind() == Some(FileKind::Regular))
        .map(|(&ino, r)| {
            let mut inode = r.disk.clone();
            if let Some(&(_, g)) = adopted.iter().find(|(i, _)| *i == ino) {
                inode.generation = g;
            }
            let log = LogState::read(m, dev, ino, inode.generation);
            let recs = Vec::new();
            (ino, File { inode, log, recs })
        })
        .collect()
}

/// Reads every record: those of live files of their generation go to
/// their file for judging; the rest are stale, torn or impossible.
fn read_records<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    files: &mut BTreeMap<u64, File>,
    left: &mut Leftovers,
) {
    let l = cx.layout;
    let first = m.regions.end();
    let mut raw = [0u8; LI_SIZE as usize];
    for b in (m.regions.attr_start..l.total_blocks).filter(|&b| m.regions.has_record(b)) {
        cx.media.read(m.regions.li_offset(b), &mut raw);
        let li = match LogicalInfo::decode(&raw) {
            Record::Clear => continue,
            _ if b < first => {
                let why = "the block holds split-layout metadata, which has no record";
                clear_impossible(cx, m, b, why);
                continue;
            }
            Record::Torn => {
                left.torn.push(b);
                continue;
            }
            Record::Valid(li) => li,
        };
        if let Some(why) = impossible(&li, &l) {
            clear_impossible(cx, m, b, why);
            continue;
        }
        match files.get_mut(&li.ino) {
            Some(f) if f.inode.generation == li.generation => f.recs.push((b, li)),
            _ => left.stale.push((b, "its file was deleted")),
        }
    }
}

/// A record no protocol writes: recovery refuses a pool over it, so
/// repair clears it on any pool (the block belongs to no file it names).
fn clear_impossible<D: PmDevice>(cx: &mut Ctx<'_, D>, m: &SplitMedia, b: u64, why: &str) {
    let off = m.regions.li_offset(b);
    cx.fixable(
        format!(
            "logical information of block {b}: {why}, which no protocol writes (recovery \
             refuses the pool over it)"
        ),
        "the record is cleared",
        |f| f.zero(off, LI_SIZE as usize),
    );
}

/// The entry a file's records are judged by: its newest; or, on a clean
/// pool where records are newer than any entry left (the log lost its
/// newest entries), one rebuilt from the records, written by the relink.
fn entry_of<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    ino: u64,
    f: &File,
    was_clean: bool,
) -> Option<AttrEntry> {
    let newest = f.log.newest;
    let Some(top) = f.recs.iter().map(|(_, li)| li.seq).max() else {
        return newest;
    };
    if !was_clean || newest.is_some_and(|e| e.seq >= top) {
        return newest;
    }
    let e = rebuilt(&f.inode, newest.as_ref(), &f.recs);
    let had = match newest {
        Some(n) => format!("ends at write {}", n.seq),
        None => "holds no entry".to_string(),
    };
    let size = if newest.is_some_and(|n| n.size == e.size) {
        format!("its size {} kept", e.size)
    } else {
        format!("its size rounded up to whole blocks ({} bytes)", e.size)
    };
    cx.fixable(
        format!(
            "inode {ino}'s attribute log {had} but its records reach write {top}: its newest \
             attributes are lost"
        ),
        &format!(
            "an entry is rebuilt from its {} block record(s), {size}",
            f.recs.len()
        ),
        |_| {},
    );
    Some(e)
}

/// An entry covering every record of the file: the newest record's seq,
/// a size reaching the highest block (the old entry's when it ends in
/// that block, else whole blocks), the old entry's times or the inode's.
/// Its head and count are the relink's to set.
fn rebuilt(inode: &Inode, newest: Option<&AttrEntry>, recs: &[(u64, LogicalInfo)]) -> AttrEntry {
    let seq = recs.iter().map(|(_, li)| li.seq).max().unwrap_or(0);
    // impossible() keeps file blocks below the largest file's.
    let blocks = recs
        .iter()
        .map(|(_, li)| li.file_block + 1)
        .max()
        .unwrap_or(0);
    let size = match newest {
        Some(e) if e.size.div_ceil(BLOCK_SIZE) == blocks => e.size,
        _ => blocks * BLOCK_SIZE,
    };
    AttrEntry {
        seq: seq.max(newest.map_or(0, |e| e.seq)),
        generation: inode.generation,
        size,
        blocks: 0,
        mtime: newest.map_or(inode.ctime, |e| e.mtime),
        ctime: newest.map_or(inode.ctime, |e| e.ctime.max(inode.ctime)),
        head: 0,
    }
}

/// Judges a file's records against `entry` and picks each file block's
/// (`split::pick`); two records tying for the newest of one file block
/// refuse a mount, so repair clears both on any pool.
fn valid_blocks<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    ino: u64,
    f: &File,
    entry: Option<&AttrEntry>,
    left: &mut Leftovers,
) -> ValidBlocks {
    let l = cx.layout;
    let mut valid = Vec::new();
    for &(b, li) in &f.recs {
        match judge(&li, &l, &f.inode, entry, |own| {
            own.matches(&cx.media.block(b))
        }) {
            Verdict::Valid => valid.push((b, li)),
            Verdict::Stale(why) | Verdict::Corrupt(why) => left.stale.push((b, why)),
        }
    }
    let picked = pick(valid);
    left.superseded.extend(picked.superseded);
    for (fb, seq, blocks) in picked.twins {
        let offs: Vec<u64> = blocks.iter().map(|&b| m.regions.li_offset(b)).collect();
        cx.fixable(
            format!(
                "blocks {blocks:?} all hold block {fb} of inode {ino} from write {seq}, which \
                 no protocol writes (recovery refuses the pool over it)"
            ),
            "their records are cleared (the file reads zeros there)",
            |fx| offs.iter().for_each(|&o| fx.zero(o, LI_SIZE as usize)),
        );
    }
    picked.blocks
}

fn report_leftovers<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    left: &Leftovers,
    was_clean: bool,
) {
    let n = left.stale.len() + left.torn.len() + left.superseded.len();
    if n == 0 {
        return;
    }
    let listed: Vec<String> = left
        .stale
        .iter()
        .take(MAX_LISTED)
        .map(|(b, why)| format!("block {b}: {why}"))
        .chain(
            left.torn
                .iter()
                .take(MAX_LISTED)
                .map(|b| format!("block {b}: torn")),
        )
        .collect();
    let what = format!(
        "split layout: {} stale, {} torn and {} superseded logical-information record(s) ({})",
        left.stale.len(),
        left.torn.len(),
        left.superseded.len(),
        listed.join("; ")
    );
    if !was_clean {
        cx.note(format!("{what}, left by a crash; mount clears them"));
        return;
    }
    let offs: Vec<u64> = (left.stale.iter().map(|&(b, _)| b))
        .chain(left.torn.iter().copied())
        .chain(left.superseded.iter().copied())
        .map(|b| m.regions.li_offset(b))
        .collect();
    let fix = if left.torn.is_empty() {
        "the records are cleared"
    } else {
        "the records are cleared (a block whose record is torn leaves its file, which reads \
         zeros there)"
    };
    cx.fixable(what, fix, |f| {
        offs.iter().for_each(|&o| f.zero(o, LI_SIZE as usize))
    });
}

fn report_relinks<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    relinks: &[(u64, u64, Relink)],
    was_clean: bool,
) {
    if relinks.is_empty() {
        return;
    }
    let listed: Vec<String> = relinks
        .iter()
        .take(MAX_LISTED)
        .map(|(ino, _, p)| {
            let what = match (p.links.len(), p.entry.is_some()) {
                (0, _) => "its head entry".to_string(),
                (n, false) => format!("{n} link(s)"),
                (n, true) => format!("{n} link(s) and its head entry"),
            };
            format!("inode {ino}: {what}")
        })
        .collect();
    let what = format!(
        "split layout: {} file(s) whose chain does not name exactly their blocks ({})",
        relinks.len(),
        listed.join("; ")
    );
    if !was_clean {
        cx.note(format!("{what}; mount rewrites chains after a crash"));
        return;
    }
    cx.fixable(what, "the chains and head entries are rewritten", |f| {
        for (ino, slot, p) in relinks {
            for (b, li) in &p.links {
                f.write(m.regions.li_offset(*b), &li.encode());
            }
            if let Some(e) = &p.entry {
                f.write(m.regions.entry_offset(*ino, *slot), &e.encode());
            }
        }
    });
}
