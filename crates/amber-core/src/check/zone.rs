//! The small-write zone: its header copies, its chunk table and every
//! descriptor, judged by the rules mount applies (`zone::media`,
//! `zone::judge`).
//!
//! Stale descriptors are a note (interrupted or superseded writes leave
//! them; mount clears them). Everything mount refuses, repair mends,
//! losing at most the slices the damaged bytes held: a damaged header
//! copy is rewritten from the other; a chunk-table entry that cannot be a
//! chunk leaves the table (its slices with it) and the row is compacted;
//! a descriptor no protocol leaves is cleared, so its file shows its own,
//! older copy of the slice; a zone with neither header copy is dropped.

use super::inodes::Scan;
use super::split::SplitFiles;
use super::Ctx;
use crate::alloc::BitSet;
use crate::inode::walk;
use crate::zone::{
    entry_fault, geometry, header_fault, header_offsets, judge, judge_head, judge_heads,
    read_header, read_table, HeaderCopy, JudgedHeads, Verdict, ZoneMedia,
};
use amber_format::zone::{
    ZoneGeometry, FEATURE_ZONE, FEATURE_ZONE_EXTENTS, HEADER_BLOCKS, MAX_CHUNKS,
    REGION_ZONE_BLOCKS, REGION_ZONE_START,
};
use amber_format::{Inode, PoolState, Superblock};
use amber_pmem::PmDevice;
use rustc_hash::{FxHashMap, FxHashSet};

/// Most findings of one kind spelled out; the rest are counted.
const MAX_LISTED: usize = 5;

/// What the newest bytes of a dropped slice become.
const LOST: &str = "the newest bytes of its small writes are lost: those ranges show their \
                    previous contents";

/// Checks the zone, if the pool has one; returns the blocks it keeps.
/// `claimed`: every block something else owns (metadata, files, the split
/// layout), which no part of the zone may overlap.
pub(super) fn check<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    sb: &Superblock,
    scan: &Scan,
    split: &SplitFiles,
    claimed: &BitSet,
) -> Vec<u64> {
    if sb.feature_incompat & FEATURE_ZONE == 0 {
        return Vec::new();
    }
    let header = sb.regions[REGION_ZONE_START];
    let copies = read_header(cx.media.dev(), header);
    let geo = match geometry(&copies) {
        _ if (header..header + HEADER_BLOCKS).any(|b| claimed.get(b)) => {
            drop_zone(cx, sb, "its header blocks belong to something else".into());
            return Vec::new();
        }
        Some(g) => g,
        None => {
            drop_zone(cx, sb, header_fault(&copies));
            return Vec::new();
        }
    };
    mend_header(cx, header, &geo, &copies);
    check_feature(cx, sb, &geo);
    let chunks = check_table(cx, header, &geo, claimed);
    let media = ZoneMedia {
        header,
        geo,
        chunks,
    };
    check_descriptors(cx, &media, scan, split, sb.state == PoolState::Clean);
    media.blocks().collect()
}

/// The superblock's zone-extents bit must say what the (checksummed,
/// twice-written) header's version says; repair sets it from the header.
fn check_feature<D: PmDevice>(cx: &mut Ctx<'_, D>, sb: &Superblock, geo: &ZoneGeometry) {
    if geo.extents == (sb.feature_incompat & FEATURE_ZONE_EXTENTS != 0) {
        return;
    }
    let mut new = sb.clone();
    new.feature_incompat ^= FEATURE_ZONE_EXTENTS;
    new.generation += 1;
    cx.fixable(
        "small-write zone: the superblock's zone-extents feature bit contradicts the zone \
         header's version, so mount refuses the pool"
            .into(),
        "the bit is set from the header",
        |f| f.superblock(&new),
    );
}

/// Removes the zone from the superblock (mount folds a zone back the same
/// way, once its slices are in their files).
fn drop_zone<D: PmDevice>(cx: &mut Ctx<'_, D>, sb: &Superblock, why: String) {
    let mut new = sb.clone();
    new.feature_incompat &= !(FEATURE_ZONE | FEATURE_ZONE_EXTENTS);
    new.regions[REGION_ZONE_START] = 0;
    new.regions[REGION_ZONE_BLOCKS] = 0;
    new.generation += 1;
    cx.fixable(
        format!("small-write zone: {why}, so mount refuses the pool"),
        &format!("the zone is dropped and its blocks freed; {LOST}"),
        |f| f.superblock(&new),
    );
}

/// Each header copy must hold the geometry's bytes; a zone made before
/// the second copy existed gets one (a note: nothing was damaged).
fn mend_header<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    header: u64,
    geo: &ZoneGeometry,
    copies: &[HeaderCopy; 2],
) {
    let good = geo.encode();
    let offs = header_offsets(header);
    for (i, copy) in copies.iter().enumerate() {
        let (off, name) = (offs[i], ["first", "second"][i]);
        let why = match copy {
            HeaderCopy::Valid(g) if g == geo => continue,
            HeaderCopy::Missing if i == 1 => {
                let done = if cx.repair {
                    cx.fixes.write(off, &good);
                    "written"
                } else {
                    "the next mount or --repair writes it"
                };
                cx.note(format!(
                    "small-write zone: its header has no second copy (an older amberfs made \
                     the zone); {done}"
                ));
                continue;
            }
            HeaderCopy::Valid(_) => "disagrees with the first".to_string(),
            damaged => format!("is {}", damaged.describe()),
        };
        cx.fixable(
            format!("small-write zone: the {name} copy of its header {why}"),
            "rewritten from the other copy",
            |f| f.write(off, &good),
        );
    }
}

/// The chunks the table can keep, per sub-zone in table order. An entry
/// mount would refuse leaves the table, and so does one whose chunk
/// overlaps another chunk, the header or anything `claimed`; a row with
/// an entry gone or an empty entry before a set one is rewritten
/// compacted (slot numbers are not stored, so chunks may move up a row).
fn check_table<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    header: u64,
    geo: &ZoneGeometry,
    claimed: &BitSet,
) -> Vec<Vec<u64>> {
    let l = cx.layout;
    let rows = read_table(cx.media.dev(), header);
    let n = geo.chunk_blocks as u64;
    let fit = |s: usize, b: u64| entry_fault(&l, geo, s as u32, b, false).is_none();
    let mut claims: FxHashMap<u64, u32> =
        (header..header + HEADER_BLOCKS).map(|b| (b, 1)).collect();
    for (s, row) in rows.iter().enumerate() {
        for &b in row.iter().filter(|&&b| b != 0 && fit(s, b)) {
            (b..b + n).for_each(|x| *claims.entry(x).or_default() += 1);
        }
    }
    let mut kept = Vec::new();
    for (s, row) in rows.iter().enumerate() {
        let mut good = Vec::new();
        let mut faults = Vec::new();
        for (c, &b) in row.iter().enumerate().filter(|(_, &b)| b != 0) {
            let why = entry_fault(&l, geo, s as u32, b, false).or_else(|| {
                (b..b + n)
                    .any(|x| claims[&x] > 1 || claimed.get(x))
                    .then_some("names a chunk overlapping another part of the pool")
            });
            match why {
                Some(why) => faults.push(format!("entry {s}/{c} (block {b}) {why}")),
                None => good.push(b),
            }
        }
        let mut fixed = [0u64; MAX_CHUNKS as usize];
        fixed[..good.len()].copy_from_slice(&good);
        if fixed != *row {
            report_row(cx, header, s, &fixed, faults);
        }
        if (s as u32) < geo.subzones {
            kept.push(good);
        }
    }
    kept
}

fn report_row<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    header: u64,
    s: usize,
    fixed: &[u64; MAX_CHUNKS as usize],
    faults: Vec<String>,
) {
    let at = ZoneGeometry::table_entry(header, s as u32, 0);
    let bytes: Vec<u8> = fixed.iter().flat_map(|b| b.to_le_bytes()).collect();
    let (what, fix) = if faults.is_empty() {
        (
            format!("row {s} has an empty entry before a set one"),
            "the row is compacted".to_string(),
        )
    } else {
        (
            faults.join("; "),
            format!("the chunk leaves the zone and the row is compacted; {LOST}"),
        )
    };
    cx.fixable(
        format!("small-write zone: chunk table {what}, so mount refuses the pool"),
        &fix,
        |f| f.write(at, &bytes),
    );
}

/// What the descriptor scan found.
#[derive(Default)]
struct Found {
    valid: u64,
    stale: u64,
    /// One-fence zone: heads under their file's floor.
    dead: u64,
    /// Descriptors mount refuses: where, and why.
    bad: Vec<(u64, String)>,
}

/// Judges every descriptor as mount does; the ones mount refuses are
/// cleared by repair.
fn check_descriptors<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    media: &ZoneMedia,
    scan: &Scan,
    split: &SplitFiles,
    clean: bool,
) {
    let found = if media.geo.extents {
        judge_heads_as_mount(cx, media, scan, split)
    } else {
        judge_all(cx, media, scan, split)
    };
    let entry = media.geo.entry_size() as usize;
    if !found.bad.is_empty() {
        let listed: Vec<&str> = found
            .bad
            .iter()
            .take(MAX_LISTED)
            .map(|(_, w)| w.as_str())
            .collect();
        let offs: Vec<u64> = found.bad.iter().map(|&(at, _)| at).collect();
        cx.fixable(
            format!(
                "small-write zone: {} descriptor(s) mount refuses ({})",
                found.bad.len(),
                listed.join("; ")
            ),
            "they are cleared (each file shows its own, older copy of those slices)",
            |f| offs.iter().for_each(|&o| f.zero(o, entry)),
        );
    }
    let (stale, valid) = (found.stale, found.valid);
    if media.geo.extents {
        return note_heads(cx, &found);
    }
    if stale > 0 && clean {
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
}

/// One-fence zone: dead heads are what write-back leaves (a note); stale
/// ones what a crash leaves (a note: mount clears them, and each file
/// shows its older copy of the slices an interrupted write held).
fn note_heads<D: PmDevice>(cx: &mut Ctx<'_, D>, found: &Found) {
    let (dead, stale, valid) = (found.dead, found.stale, found.valid);
    if dead > 0 {
        cx.note(format!(
            "small-write zone: {dead} head(s) of written-back extents ({valid} slices valid), \
             dead under their files' floors and kept on PM until their slots are reused"
        ));
    }
    if stale > 0 {
        cx.note(format!(
            "small-write zone: {stale} head(s) whose checksum fails (writes a crash \
             interrupted, or damaged bytes) or whose file was freed; mount clears them, and \
             their files show the older copies"
        ));
    }
}

/// A file as mount would load it, for judging zone entries: a
/// split-layout file's size is its (possibly rebuilt) newest entry's and
/// its mapped blocks its valid records'; a classic file's blocks its map's.
struct Files<'a, D: PmDevice> {
    cx: &'a Ctx<'a, D>,
    scan: &'a Scan,
    split: &'a SplitFiles,
    maps: FxHashMap<u64, FxHashSet<u64>>,
}

impl<'a, D: PmDevice> Files<'a, D> {
    fn new(cx: &'a Ctx<'a, D>, scan: &'a Scan, split: &'a SplitFiles) -> Self {
        Files {
            cx,
            scan,
            split,
            maps: FxHashMap::default(),
        }
    }

    fn inode(&self, ino: u64) -> Inode {
        let rec = self.scan.recs.get(&ino).filter(|r| r.live_kind().is_some());
        match (rec, self.split.sizes.get(&ino).copied()) {
            (Some(r), Some(size)) => Inode {
                size,
                ..r.disk.clone()
            },
            (Some(r), None) => r.disk.clone(),
            (None, _) => Inode::free(),
        }
    }

    fn mapped(&mut self, ino: u64, inode: &Inode, fb: u64) -> bool {
        if self.split.sizes.contains_key(&ino) {
            return self.split.mapped.contains(&(ino, fb));
        }
        let (dev, l) = (self.cx.media.dev(), self.cx.layout);
        self.maps
            .entry(ino)
            .or_insert_with(|| {
                walk(dev, &l, inode.map_root, inode.map_height)
                    .map(|t| t.data.into_iter().map(|(f, _)| f).collect())
                    .unwrap_or_default()
            })
            .contains(&fb)
    }
}

/// One-fence zone: every head judged and resolved as mount does
/// (`zone::judge_heads`); stale heads (torn writes) are a note, mount
/// clears them.
fn judge_heads_as_mount<D: PmDevice>(
    cx: &Ctx<'_, D>,
    media: &ZoneMedia,
    scan: &Scan,
    split: &SplitFiles,
) -> Found {
    let mut files = Files::new(cx, scan, split);
    let l = cx.layout;
    let judged = judge_heads(cx.media.dev(), media, |p, e, fits, checks| {
        let inode = files.inode(e.ino as u64);
        Ok(judge_head(
            e,
            &l,
            &inode,
            &media.geo,
            p.sub,
            fits,
            checks,
            |fb| files.mapped(e.ino as u64, &inode, fb),
        ))
    });
    let j: JudgedHeads = judged.expect("the callback never fails");
    Found {
        valid: j.rec.valid.len() as u64,
        stale: j.stale.len() as u64,
        dead: j.dead,
        bad: j.bad,
    }
}

/// Judges every descriptor in use against its inode as mount would load
/// it (`Files`).
fn judge_all<D: PmDevice>(
    cx: &Ctx<'_, D>,
    media: &ZoneMedia,
    scan: &Scan,
    split: &SplitFiles,
) -> Found {
    let dev = cx.media.dev();
    let l = cx.layout;
    let mut files = Files::new(cx, scan, split);
    let mut seen: FxHashMap<(u32, u32), (u64, String)> = FxHashMap::default();
    let mut out = Found::default();
    let scanned = media.scan(dev, |p, d| {
        let place = format!("slot {}/{}", p.sub, p.slot);
        let d = match d {
            Ok(d) => d,
            Err(why) => {
                out.bad.push((p.at, format!("{place}: {why}")));
                return Ok(());
            }
        };
        let ino = d.ino as u64;
        let inode = files.inode(ino);
        let verdict = judge(&d, &l, &inode, &media.geo, p.sub, |fb| {
            files.mapped(ino, &inode, fb)
        });
        match verdict {
            Verdict::Stale => out.stale += 1,
            Verdict::Corrupt(why) => out.bad.push((p.at, format!("{place}: {why}"))),
            Verdict::Valid => match seen.insert((d.ino, d.slice), (p.at, place.clone())) {
                Some((first, there)) => {
                    let why = format!("two committed copies of slice {} of inode {ino}", d.slice);
                    out.bad.push((first, format!("{there}: {why}")));
                    out.bad.push((p.at, format!("{place}: {why}")));
                }
                None => out.valid += 1,
            },
        }
        Ok(())
    });
    debug_assert!(scanned.is_ok(), "the callback never fails");
    out
}
