//! Recovery of a one-fence zone (`FEATURE_ZONE_EXTENTS`, docs/design.md
//! §11.7): every entry that names an inode is judged as a head
//! (`judge_head`), then the valid heads are resolved: of the heads naming
//! a slice, the highest write number holds its newest copy; the slots of
//! the others stay held for their file until its write-back. Mount clears
//! the stale heads (torn writes) before any file is written; fsck applies
//! the same rules (`check/zone.rs`).

use super::lifecycle::{loaded_inode, mapped};
use super::media::{Place, ZoneMedia};
use super::{judge_head, HeadVerdict, Recovered};
use crate::error::{FsError, Result};
use crate::fs::Core;
use amber_format::zone_extent::Extent;
use amber_format::Inode;
use amber_pmem::PmDevice;
use rustc_hash::FxHashMap;

/// A head judged valid: where it lies and what it names.
pub(crate) struct Head {
    pub place: Place,
    pub e: Extent,
}

/// What judging a zone's heads found.
pub(crate) struct JudgedHeads {
    pub rec: Recovered,
    /// Entry offsets of stale heads (mount clears them).
    pub stale: Vec<u64>,
    /// Heads left out, each with where it lies and why: by a lenient
    /// judge (salvage) or fsck, which clears them.
    pub bad: Vec<(u64, String)>,
    /// Heads under their file's floor, left in place.
    pub dead: u64,
}

/// Judges every head of `media` by `verdict` (the head's place, its bytes
/// decoded, and whether its data's checksum matches, read on demand), then
/// resolves the valid ones.
pub(crate) fn judge_heads<D: PmDevice>(
    dev: &D,
    media: &ZoneMedia,
    mut verdict: impl FnMut(Place, &Extent, bool, &dyn Fn() -> bool) -> Result<HeadVerdict>,
) -> Result<JudgedHeads> {
    let mut heads = Vec::new();
    let mut j = JudgedHeads {
        rec: Recovered::default(),
        stale: Vec::new(),
        bad: Vec::new(),
        dead: 0,
    };
    let slot = media.geo.slot_size as usize;
    media.scan_heads(dev, |p, raw| {
        let Ok(Some(e)) = Extent::decode(raw) else {
            // Bytes no head has: a head torn by a crash.
            j.stale.push(p.at);
            return Ok(());
        };
        let at = media.extent_data(p, e.slots as u32);
        let checks = || {
            let Some(at) = at else { return false };
            let mut data = vec![0u8; e.slots as usize * slot];
            dev.read(at, &mut data);
            Extent::matches(raw, &data)
        };
        match verdict(p, &e, at.is_some(), &checks)? {
            HeadVerdict::Valid => heads.push(Head { place: p, e }),
            HeadVerdict::Dead => j.dead += 1,
            HeadVerdict::Stale => j.stale.push(p.at),
            HeadVerdict::Corrupt(why) => j
                .bad
                .push((p.at, format!("slot {}/{}: {why}", p.sub, p.slot))),
        }
        Ok(())
    })?;
    let (rec, conflicts) = resolve(heads);
    j.rec = rec;
    j.bad.extend(conflicts);
    Ok(j)
}

/// Mount's judge: each head against its file as its policy loaded it.
/// Strict (mount): a corrupt head fails; lenient (salvage): it is left
/// out, in `bad`.
pub(super) fn judge_mounted<D: PmDevice>(
    fs: &Core<D>,
    media: &ZoneMedia,
    lenient: bool,
) -> Result<JudgedHeads> {
    let mut inodes: FxHashMap<u64, Inode> = FxHashMap::default();
    let j = judge_heads(&**fs.device(), media, |p, e, fits, checks| {
        let ino = e.ino as u64;
        let inode = loaded_inode(fs, &mut inodes, ino)?;
        Ok(judge_head(
            e,
            fs.layout(),
            &inode,
            &media.geo,
            p.sub,
            fits,
            checks,
            |fb| mapped(fs, ino, fb),
        ))
    })?;
    match j.bad.first() {
        Some((_, why)) if !lenient => Err(FsError::Corrupted(format!("small-write zone: {why}"))),
        _ => Ok(j),
    }
}

/// The DRAM state the valid heads give, and the heads that contradict each
/// other (two over one slot, two of one write number for a slice), which
/// are left out.
pub(crate) fn resolve(mut heads: Vec<Head>) -> (Recovered, Vec<(u64, String)>) {
    heads.sort_by_key(|h| (h.place.sub, h.place.slot));
    let mut bad = Vec::new();
    let mut out = vec![false; heads.len()];
    for i in 1..heads.len() {
        let (a, b) = (&heads[i - 1], &heads[i]);
        if a.place.sub == b.place.sub && a.place.slot + a.e.slots as u32 > b.place.slot {
            out[i - 1] = true;
            out[i] = true;
        }
    }
    // (inode, slice) -> (write number, head, slot)
    let mut newest: FxHashMap<(u64, u32), (u64, usize, u32)> = FxHashMap::default();
    for (i, h) in heads.iter().enumerate() {
        if out[i] {
            continue;
        }
        for k in 0..h.e.slots as u32 {
            let key = (h.e.ino as u64, h.e.slice + k);
            let cand = (h.e.seq, i, h.place.slot + k);
            match newest.get(&key) {
                Some(&(seq, j, _)) if seq == h.e.seq => {
                    out[i] = true;
                    out[j] = true;
                }
                Some(&(seq, ..)) if seq > h.e.seq => {}
                _ => {
                    newest.insert(key, cand);
                }
            }
        }
    }
    let mut rec = Recovered::default();
    let mut tops: FxHashMap<u64, u64> = FxHashMap::default();
    for (i, h) in heads.iter().enumerate() {
        if out[i] {
            let why = "it overlaps another head, or names a slice another head of the same \
                       write number names";
            let p = h.place;
            bad.push((p.at, format!("slot {}/{}: {why}", p.sub, p.slot)));
            continue;
        }
        let ino = h.e.ino as u64;
        let top = tops.entry(ino).or_insert(0);
        *top = (*top).max(h.e.seq);
        for k in 0..h.e.slots as u32 {
            let slot = h.place.slot + k;
            match newest.get(&(ino, h.e.slice + k)) {
                Some(&(_, j, s)) if j == i && s == slot => {
                    rec.valid.push((h.place.sub, slot, ino, h.e.slice + k));
                }
                _ => rec.held.push((h.place.sub, slot, ino)),
            }
        }
    }
    rec.tops = tops.into_iter().collect();
    (rec, bad)
}
