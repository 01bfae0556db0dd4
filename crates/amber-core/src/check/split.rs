//! HUNTER's split layout: every logical-information record judged by the
//! rule recovery applies (`split::judge`), and each file's chain against
//! its newest attribute entry. After a crash, stale and torn records and
//! stale chains are what an interrupted batch leaves: notes, which mount
//! repairs. On a cleanly unmounted pool every queue was persisted, so
//! they are errors.

use super::inodes::Scan;
use super::Ctx;
use crate::error::FsError;
use crate::split::{judge, walk_chain, LogState, SplitMedia, Verdict};
use amber_format::split::{LogicalInfo, Record, LI_SIZE};
use amber_format::{FileKind, Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;
use rustc_hash::FxHashMap;

/// Most findings of one kind spelled out; the rest are counted.
const MAX_LISTED: usize = 5;

/// The blocks of the split layout's files as their valid records say:
/// (inode, file block) -> (seq, block) of the newest valid record.
pub(super) type Mapped = FxHashMap<(u64, u64), (u64, u64)>;

/// Checks the split layout, if the pool has one; returns the blocks it
/// owns (its regions and the blocks valid records name) and its files'
/// blocks.
pub(super) fn check<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    media: Option<&SplitMedia>,
    scan: &Scan,
    was_clean: bool,
) -> (Vec<u64>, Mapped) {
    let Some(m) = media else {
        return (Vec::new(), Mapped::default());
    };
    let l = cx.layout;
    let first = m.regions.end();
    let mut owned: Vec<u64> = m.regions.blocks(l.total_blocks).collect();
    let mut logs: FxHashMap<u64, LogState> = FxHashMap::default();
    let mut newest = Mapped::default();
    let (mut stale, mut torn, mut superseded) = (Vec::new(), Vec::new(), 0u64);
    let mut errors = Vec::new();
    let free = Inode::free();
    let mut raw = [0u8; LI_SIZE as usize];
    for b in (m.regions.attr_start..l.total_blocks).filter(|&b| m.regions.has_record(b)) {
        cx.media.read(m.regions.li_offset(b), &mut raw);
        let li = match LogicalInfo::decode(&raw) {
            Record::Clear => continue,
            _ if b < first => {
                errors.push(format!(
                    "block {b} holds split-layout metadata but has a logical-information record"
                ));
                continue;
            }
            Record::Torn => {
                torn.push(b);
                continue;
            }
            Record::Valid(li) => li,
        };
        let rec = scan
            .recs
            .get(&li.ino)
            .filter(|r| r.live_kind() == Some(FileKind::Regular));
        let inode = rec.map_or(&free, |r| &r.disk);
        let log = rec.map(|r| {
            *logs
                .entry(li.ino)
                .or_insert_with(|| LogState::read(m, cx.media.dev(), li.ino, r.disk.generation))
        });
        match judge(&li, &l, inode, log.as_ref().and_then(|s| s.newest.as_ref())) {
            Verdict::Corrupt(why) => {
                errors.push(format!("logical information of block {b}: {why}"))
            }
            Verdict::Stale(why) => stale.push((b, why)),
            Verdict::Valid => {
                let keep = newest.entry((li.ino, li.file_block)).or_insert((li.seq, b));
                if keep.1 != b {
                    if keep.0 == li.seq {
                        errors.push(format!(
                            "blocks {} and {b} both hold block {} of inode {} from one write",
                            keep.1, li.file_block, li.ino
                        ));
                    }
                    superseded += 1;
                    if li.seq > keep.0 {
                        *keep = (li.seq, b);
                    }
                }
            }
        }
    }
    for e in errors {
        cx.unfixable(e);
    }
    owned.extend(newest.values().map(|&(_, b)| b));
    let leftovers = !stale.is_empty() || !torn.is_empty() || superseded > 0;
    if leftovers {
        let listed: Vec<String> = stale
            .iter()
            .take(MAX_LISTED)
            .map(|(b, why)| format!("block {b}: {why}"))
            .collect();
        let what = format!(
            "split layout: {} stale, {} torn and {superseded} superseded logical-information \
             record(s) ({})",
            stale.len(),
            torn.len(),
            listed.join("; ")
        );
        if was_clean {
            let offs: Vec<u64> = stale
                .iter()
                .map(|&(b, _)| b)
                .chain(torn.iter().copied())
                .map(|b| m.regions.li_offset(b))
                .collect();
            cx.fixable(what, "the records are cleared", |f| {
                offs.iter().for_each(|&o| f.zero(o, LI_SIZE as usize))
            });
        } else {
            cx.note(format!("{what}, left by a crash; mount clears them"));
        }
    }
    check_chains(cx, m, scan, &newest, was_clean && !leftovers);
    (owned, newest)
}

/// Each live regular file's chain must name exactly its valid blocks, as
/// its newest entry counts them; after a crash mount rewrites chains, so
/// only a clean pool is held to it.
fn check_chains<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    scan: &Scan,
    newest: &Mapped,
    strict: bool,
) {
    let mut counts: FxHashMap<u64, u64> = FxHashMap::default();
    for &(ino, _) in newest.keys() {
        *counts.entry(ino).or_default() += 1;
    }
    let mut bad = Vec::new();
    for (&ino, r) in &scan.recs {
        if r.live_kind() != Some(FileKind::Regular) {
            continue;
        }
        let dev = cx.media.dev();
        let log = LogState::read(m, dev, ino, r.disk.generation);
        let Some(e) = log.newest else {
            if counts.contains_key(&ino) {
                bad.push(format!(
                    "inode {ino} has data blocks but no attribute entry"
                ));
            }
            continue;
        };
        let have = counts.get(&ino).copied().unwrap_or(0);
        if e.size.div_ceil(BLOCK_SIZE) < have {
            bad.push(format!(
                "inode {ino} has {have} block(s) past its size {}",
                e.size
            ));
            continue;
        }
        if let Err(err) = walk_chain(m, dev, &cx.layout, ino, r.disk.generation, e.head, e.blocks) {
            bad.push(match err {
                FsError::Corrupted(what) => what,
                other => other.to_string(),
            });
        } else if e.blocks != have {
            bad.push(format!(
                "inode {ino}'s attributes count {} block(s), its records {have}",
                e.blocks
            ));
        }
    }
    if bad.is_empty() {
        return;
    }
    let n = bad.len();
    bad.truncate(MAX_LISTED);
    let what = format!(
        "split layout: {n} file(s) whose chain is stale ({})",
        bad.join("; ")
    );
    if strict {
        cx.unfixable(what);
    } else {
        cx.note(format!("{what}; mount rewrites chains after a crash"));
    }
}
