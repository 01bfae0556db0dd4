//! The small-write zone: its header and chunk table, and every descriptor
//! judged by the rule mount applies (`zone::judge`). Stale descriptors
//! are a note (interrupted or superseded writes leave them; mount clears
//! them); a committed descriptor no protocol leaves, or two for one slice,
//! is an error fsck does not guess about.

use super::inodes::Scan;
use super::split::Mapped;
use super::Ctx;
use crate::inode::walk;
use crate::split::LogState;
use crate::zone::{judge, Verdict, ZoneMedia};
use amber_format::{FileKind, Inode, PoolState, Superblock};
use amber_pmem::PmDevice;
use rustc_hash::{FxHashMap, FxHashSet};

/// Checks the zone, if the pool has one; returns the blocks it occupies
/// (none if its header or table cannot be trusted).
/// `mapped`: the split layout's files' blocks (`split::check`), whose sizes
/// are their newest attribute entries'.
pub(super) fn check<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    sb: &Superblock,
    scan: &Scan,
    mapped: &Mapped,
) -> Vec<u64> {
    let dev = cx.media.dev();
    let l = cx.layout;
    let media = match ZoneMedia::read(dev, &l, sb) {
        Ok(Some(m)) => m,
        Ok(None) => return Vec::new(),
        Err(e) => {
            cx.unfixable(format!("{e}"));
            return Vec::new();
        }
    };
    let free = Inode::free();
    let mut maps: FxHashMap<u64, FxHashSet<u64>> = FxHashMap::default();
    let mut seen: FxHashSet<(u32, u32)> = FxHashSet::default();
    let (mut stale, mut valid) = (0u64, 0u64);
    let mut errors = Vec::new();
    let split = cx.split.as_ref();
    let scanned = media.scan(dev, |sub, slot, d| {
        let ino = d.ino as u64;
        let rec = scan.recs.get(&ino).filter(|r| r.live_kind().is_some());
        let split_file = split
            .zip(rec)
            .filter(|(_, r)| r.live_kind() == Some(FileKind::Regular));
        let inode = match split_file {
            Some((m, r)) => {
                let log = LogState::read(m, dev, ino, r.disk.generation);
                Inode {
                    size: log.newest.map_or(0, |e| e.size),
                    ..r.disk.clone()
                }
            }
            None => rec.map_or_else(|| free.clone(), |r| r.disk.clone()),
        };
        let verdict = judge(&d, &inode, &media.geo, sub, |fb| match split_file {
            Some(_) => mapped.contains_key(&(ino, fb)),
            None => maps
                .entry(ino)
                .or_insert_with(|| {
                    walk(dev, &l, inode.map_root, inode.map_height)
                        .map(|t| t.data.into_iter().map(|(f, _)| f).collect())
                        .unwrap_or_default()
                })
                .contains(&fb),
        });
        match verdict {
            Verdict::Stale => stale += 1,
            Verdict::Corrupt(why) => {
                errors.push(format!("small-write zone slot {sub}/{slot}: {why}"))
            }
            Verdict::Valid if !seen.insert((d.ino, d.slice)) => errors.push(format!(
                "small-write zone: two committed copies of slice {} of inode {}",
                d.slice, d.ino
            )),
            Verdict::Valid => valid += 1,
        }
        Ok(())
    });
    if let Err(e) = scanned {
        errors.push(format!("{e}"));
    }
    for e in errors {
        cx.unfixable(e);
    }
    if stale > 0 && sb.state == PoolState::Clean {
        // No write was interrupted: these are slots freed in DRAM, whose
        // descriptors stay on PM until the slot is written again (clearing
        // each at once would cost a flushed line LAWN saves).
        cx.note(format!(
            "small-write zone: {stale} descriptor(s) of superseded slices ({valid} valid), \
             kept on PM until their slots are reused; mount clears them"
        ));
    } else if stale > 0 {
        cx.note(format!(
            "small-write zone: {stale} descriptor(s) left by interrupted or superseded writes \
             ({valid} valid); mount clears them"
        ));
    }
    let blocks: Vec<u64> = media.blocks().collect();
    let mut seen = FxHashSet::default();
    let twice: Vec<u64> = blocks
        .iter()
        .copied()
        .filter(|b| !seen.insert(*b))
        .collect();
    if let Some(b) = twice.first() {
        cx.unfixable(format!(
            "small-write zone: {} block(s) belong to two of its chunks (block {b})",
            twice.len()
        ));
    }
    blocks
}
