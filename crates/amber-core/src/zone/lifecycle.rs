//! The zone's life: recovered at every mount, created by the first mount
//! that asks for it, grown while mounted, and folded back into the files
//! and removed by a mount that does not use it (or wants another shape).
//!
//! Crash argument, in short (docs/design.md §11): the zone's blocks belong
//! to it only once the superblock names it, and a chunk only once its
//! table entry is set; both are written after everything they point to is
//! durable, so a crash before leaves blocks nobody references, which the
//! allocator's rebuild finds free. Folding back writes each valid slice
//! into its file while the descriptor still vouches for the slot, fences,
//! and only then clears descriptors and drops the feature.

use super::media::{header_offsets, read_header, HeaderCopy, Place, ZoneMedia};
use super::{extents, judge, Recovered, Verdict, Zone};
use crate::data::Context;
use crate::data::ZoneOptions;
use crate::error::{FsError, Result};
use crate::fs::{write_superblock, Core};
use crate::inode::read_inode;
use amber_format::zone::{
    Descriptor, ZoneGeometry, FEATURE_ZONE, FEATURE_ZONE_EXTENTS, HEADER_BLOCKS, MAX_CHUNKS,
    MAX_CHUNK_BLOCKS, MIN_CHUNK_BLOCKS, REGION_ZONE_BLOCKS, REGION_ZONE_START,
};
use amber_format::{Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::hash_map::Entry;

/// Why a zone could not be created: said in terms of the options a user
/// can change.
const NO_ROOM: FsError = FsError::InvalidArgument(
    "the pool has no room for the small-write zone lawn_zone and lawn_subzones ask for: \
     free some space, lower lawn_zone or lawn_subzones, or use a larger pool",
);

/// Chunks a sub-zone starts with: growth then adds one at a time.
const INITIAL_CHUNKS: u64 = 4;

/// What mount does with the zone: recovers the one on the pool, keeps it
/// when `want` asks for its shape, folds it back and removes it
/// otherwise, and creates one when `want` asks and none is left. Runs
/// after the journals are replayed and orphans freed, before any file is
/// used. Returns the zone to use, and how many stale descriptors were
/// cleared. A read-only mount writes nothing: it keeps the pool's zone
/// whatever its shape (or has none), and stale descriptors stay.
pub fn attach<D: PmDevice>(
    fs: &Core<D>,
    media: Option<ZoneMedia>,
    want: Option<&ZoneOptions>,
) -> Result<(Option<Zone>, u64)> {
    if fs.options().read_only {
        return attach_read_only(fs, media, want.is_some());
    }
    let mut cleared = 0;
    if let Some(media) = media {
        let (found, stale) = recover(fs, &media)?;
        cleared = stale;
        let g = &media.geo;
        let fits = want.is_some_and(|w| {
            (w.slot, w.subzones, w.extents) == (g.slot_size, g.subzones, g.extents)
        });
        if fits {
            mend_header(fs, &media)?;
            return Ok((Some(Zone::new(media, &found)), cleared));
        }
        fold_back(fs, &media, &found.valid)?;
        remove(fs, &media)?;
    }
    match want {
        Some(w) => Ok((Some(create(fs, w)?), cleared)),
        None => Ok((None, cleared)),
    }
}

/// A read-only mount's zone: the pool's own, judged but not cleaned. A
/// policy that does not read through a zone would show files without
/// their newest slices, and folding them back would write: refused.
fn attach_read_only<D: PmDevice>(
    fs: &Core<D>,
    media: Option<ZoneMedia>,
    uses_zone: bool,
) -> Result<(Option<Zone>, u64)> {
    let Some(media) = media else {
        return Ok((None, 0));
    };
    if !uses_zone {
        return Err(FsError::InvalidArgument(
            "this pool holds a small-write zone, which only a policy that reads through it \
             shows and a read-only mount cannot fold back into the files: mount it read-only \
             with policy=amber (split layout) or policy=lawn (classic layout)",
        ));
    }
    let judged = judge_all(fs, &media, false)?;
    Ok((Some(Zone::new(media, &judged.found)), 0))
}

/// Salvage's zone: the pool's own, judged descriptor by descriptor; one
/// that cannot be judged (its file does not load, or a second copy of a
/// slice) is left out, with the reason, instead of failing the rest.
pub fn attach_lenient<D: PmDevice>(fs: &Core<D>, media: ZoneMedia) -> Result<(Zone, Vec<String>)> {
    let judged = judge_all(fs, &media, true)?;
    Ok((Zone::new(media, &judged.found), judged.skipped))
}

/// Every descriptor in use, judged.
struct Judged {
    found: Recovered,
    /// Where the stale descriptors lie.
    stale: Vec<u64>,
    /// Descriptors a lenient judge left out, with the reason.
    skipped: Vec<String>,
}

/// Judges every descriptor. Strict: fails on corruption (bytes no store
/// writes, a committed descriptor no protocol leaves, or two for one
/// slice). Lenient: leaves such descriptors out and says why.
fn judge_all<D: PmDevice>(fs: &Core<D>, media: &ZoneMedia, lenient: bool) -> Result<Judged> {
    if media.geo.extents {
        let j = extents::judge_mounted(fs, media, lenient)?;
        return Ok(Judged {
            found: j.rec,
            stale: j.stale,
            skipped: j.bad.into_iter().map(|(_, why)| why).collect(),
        });
    }
    let mut inodes: FxHashMap<u64, Inode> = FxHashMap::default();
    let mut seen: FxHashSet<(u64, u32)> = FxHashSet::default();
    let mut j = Judged {
        found: Recovered::default(),
        stale: Vec::new(),
        skipped: Vec::new(),
    };
    media.scan(&**fs.device(), |p, d| {
        let (sub, slot) = (p.sub, p.slot);
        let judged = d
            .map_err(|e| {
                FsError::Corrupted(format!("small-write zone: descriptor {sub}/{slot}: {e}"))
            })
            .and_then(|d| Ok((judge_one(fs, media, &mut inodes, p, &d)?, d)));
        match judged {
            Ok((false, _)) => j.stale.push(p.at),
            Ok((true, d)) if seen.insert((d.ino as u64, d.slice)) => {
                j.found.valid.push((sub, slot, d.ino as u64, d.slice))
            }
            Ok((true, d)) if lenient => j.skipped.push(format!(
                "small-write zone slot {sub}/{slot}: a second committed copy of slice {} of \
                 inode {}",
                d.slice, d.ino
            )),
            Ok((true, d)) => {
                return Err(FsError::Corrupted(format!(
                    "small-write zone: two committed copies of slice {} of inode {}",
                    d.slice, d.ino
                )))
            }
            Err(e) if lenient => j
                .skipped
                .push(format!("small-write zone slot {sub}/{slot}: {e}")),
            Err(e) => return Err(e),
        }
        Ok(())
    })?;
    Ok(j)
}

/// Whether descriptor `d` at `p` is valid (true) or stale (false); an
/// error for corruption. `inodes` caches the inodes judged.
fn judge_one<D: PmDevice>(
    fs: &Core<D>,
    media: &ZoneMedia,
    inodes: &mut FxHashMap<u64, Inode>,
    p: Place,
    d: &Descriptor,
) -> Result<bool> {
    let ino = d.ino as u64;
    let inode = loaded_inode(fs, inodes, ino)?;
    let verdict = judge(d, fs.layout(), &inode, &media.geo, p.sub, |fb| {
        mapped(fs, ino, fb)
    });
    match verdict {
        Verdict::Stale => Ok(false),
        Verdict::Valid => Ok(true),
        Verdict::Corrupt(why) => Err(FsError::Corrupted(format!("small-write zone: {why}"))),
    }
}

/// Inode `ino` as a zone entry is judged against: a file in use as its
/// policy loaded it (a split-layout file's size is its attribute log's), a
/// free inode as it lies, a number outside the table as a free inode (it
/// is not read). `inodes` caches them.
pub(super) fn loaded_inode<D: PmDevice>(
    fs: &Core<D>,
    inodes: &mut FxHashMap<u64, Inode>,
    ino: u64,
) -> Result<Inode> {
    let (dev, l) = (&**fs.device(), fs.layout());
    Ok(match inodes.entry(ino) {
        _ if !l.is_valid_ino(ino) => Inode::free(),
        Entry::Occupied(e) => e.get().clone(),
        Entry::Vacant(e) => {
            let raw = read_inode(dev, l, ino);
            e.insert(match raw.in_use() {
                true => fs.inode(ino)?.read().disk.clone(),
                false => raw,
            })
            .clone()
        }
    })
}

/// Whether file block `fb` of inode `ino` is mapped, as its policy says.
pub(super) fn mapped<D: PmDevice>(fs: &Core<D>, ino: u64, fb: u64) -> bool {
    fs.inode(ino)
        .map(|r| fs.policy().block_of(&r.read(), fb).is_some())
        .unwrap_or(false)
}

/// Judges every descriptor; clears the stale ones (durably) and returns
/// the valid ones. Fails on corruption.
fn recover<D: PmDevice>(fs: &Core<D>, media: &ZoneMedia) -> Result<(Recovered, u64)> {
    let j = judge_all(fs, media, false)?;
    // Stale descriptors must go before any file writes again: a stale
    // uncommitted one would become valid when its file's commit number
    // reaches its sequence number; a torn head could check once a later
    // write puts the bytes it names back.
    for &at in &j.stale {
        Zone::clear_entry(&**fs.device(), &media.geo, at);
    }
    fs.drain()?;
    Ok((j.found, j.stale.len() as u64))
}

/// Rewrites a header copy that is not the geometry's own bytes (damaged,
/// or missing in a zone an older amberfs made), so the zone keeps two.
fn mend_header<D: PmDevice>(fs: &Core<D>, media: &ZoneMedia) -> Result<()> {
    let copies = read_header(&**fs.device(), media.header);
    let good = media.geo.encode();
    for (copy, off) in copies.iter().zip(header_offsets(media.header)) {
        if *copy != HeaderCopy::Valid(media.geo) {
            fs.device().write(off, &good);
            fs.device().flush(off, good.len() as u64);
        }
    }
    fs.drain()
}

/// Writes every valid slice into its file, then clears the descriptors
/// (a one-fence zone's heads need not be: once the slices are in their
/// files, each valid head's copy equals its file's, and `remove` follows).
fn fold_back<D: PmDevice>(
    fs: &Core<D>,
    media: &ZoneMedia,
    found: &[(u32, u32, u64, u32)],
) -> Result<()> {
    let dev = &**fs.device();
    let size = media.geo.slot_size as u64;
    let mut buf = vec![0u8; size as usize];
    for &(sub, slot, ino, slice) in found {
        let (_, data) = super::slot_place(&media.geo, &media.chunks[sub as usize], slot);
        let off = slice as u64 * size;
        let r = fs.inode(ino)?;
        let st = r.read();
        let b = fs.policy().block_of(&st, off / BLOCK_SIZE).ok_or_else(|| {
            FsError::Corrupted(format!("zone slice of inode {ino} lost its block"))
        })?;
        dev.read(data, &mut buf);
        let at = fs.layout().block_offset(b) + off % BLOCK_SIZE;
        dev.write(at, &buf);
        dev.flush(at, size);
    }
    fs.drain()?;
    if media.geo.extents {
        return Ok(());
    }
    for &(sub, slot, ..) in found {
        let (at, _) = super::slot_place(&media.geo, &media.chunks[sub as usize], slot);
        Zone::clear_desc(dev, at);
    }
    fs.drain()
}

/// Drops the feature from the superblock and frees the zone's blocks. Every
/// descriptor must be clear.
fn remove<D: PmDevice>(fs: &Core<D>, media: &ZoneMedia) -> Result<()> {
    {
        let mut sb = fs.superblock().lock();
        sb.feature_incompat &= !(FEATURE_ZONE | FEATURE_ZONE_EXTENTS);
        sb.regions[REGION_ZONE_START] = 0;
        sb.regions[REGION_ZONE_BLOCKS] = 0;
        sb.generation += 1;
        let r = write_superblock(&**fs.device(), &sb);
        fs.guard(r)?;
    }
    let blocks: Vec<u64> = media.blocks().collect();
    fs.blocks().free_all(&blocks);
    Ok(())
}

/// The geometry a new zone gets: `initial_pct` of the pool, split evenly,
/// in chunks of a quarter of a sub-zone's first size.
fn plan<D: PmDevice>(fs: &Core<D>, w: &ZoneOptions) -> Result<(ZoneGeometry, u64)> {
    let total = fs.layout().total_blocks * w.initial_pct as u64 / 100;
    let per_sub = total / w.subzones as u64;
    let max = fs.blocks().max_extent().min(MAX_CHUNK_BLOCKS as u64);
    let chunk = (per_sub / INITIAL_CHUNKS).clamp(MIN_CHUNK_BLOCKS as u64, max);
    let chunks = (per_sub / chunk).clamp(1, MAX_CHUNKS as u64 / 2);
    let geo = ZoneGeometry::new(w.slot, w.subzones, chunk as u32, w.extents)?;
    Ok((geo, chunks))
}

/// Creates a zone of the asked shape: blocks allocated, header, table and
/// descriptors written and durable, then the superblock names it.
fn create<D: PmDevice>(fs: &Core<D>, w: &ZoneOptions) -> Result<Zone> {
    let dev = &**fs.device();
    let (geo, per_sub) = plan(fs, w)?;
    let mut taken: Vec<(u64, u64)> = Vec::new();
    let give_back = |taken: &[(u64, u64)]| {
        for &(s, n) in taken {
            fs.blocks().free_all(&(s..s + n).collect::<Vec<_>>());
        }
    };
    let Some(header) = fs.blocks().alloc_extent(HEADER_BLOCKS) else {
        return Err(NO_ROOM);
    };
    taken.push((header, HEADER_BLOCKS));
    let mut chunks = vec![Vec::new(); geo.subzones as usize];
    for row in chunks.iter_mut() {
        for _ in 0..per_sub {
            match fs.blocks().alloc_extent(geo.chunk_blocks as u64) {
                Some(c) => {
                    taken.push((c, geo.chunk_blocks as u64));
                    row.push(c);
                }
                None => {
                    give_back(&taken);
                    return Err(NO_ROOM);
                }
            }
        }
    }
    dev.zero_nt(header * BLOCK_SIZE, HEADER_BLOCKS * BLOCK_SIZE);
    for off in header_offsets(header) {
        dev.write_nt(off, &geo.encode());
    }
    for (s, row) in chunks.iter().enumerate() {
        for (c, &chunk) in row.iter().enumerate() {
            dev.zero_nt(chunk * BLOCK_SIZE, geo.desc_blocks as u64 * BLOCK_SIZE);
            let at = ZoneGeometry::table_entry(header, s as u32, c as u32);
            dev.store_u64(at, chunk);
            dev.flush(at, 8);
        }
    }
    fs.drain()?;
    {
        let mut sb = fs.superblock().lock();
        sb.feature_incompat |= FEATURE_ZONE;
        if geo.extents {
            sb.feature_incompat |= FEATURE_ZONE_EXTENTS;
        }
        sb.regions[REGION_ZONE_START] = header;
        sb.regions[REGION_ZONE_BLOCKS] = HEADER_BLOCKS;
        sb.generation += 1;
        let r = write_superblock(dev, &sb);
        fs.guard(r)?;
    }
    Ok(Zone::new(
        ZoneMedia {
            header,
            geo,
            chunks,
        },
        &Recovered::default(),
    ))
}

impl Zone {
    /// Adds a chunk to sub-zone `idx` (locked as `sub`): descriptors zeroed
    /// and durable before the table entry that makes the chunk part of
    /// the zone. Returns false when the sub-zone is at its largest or the
    /// pool has no room to spare (a zone never takes the last 5% of the
    /// pool's data blocks).
    pub fn grow<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        idx: usize,
        sub: &mut super::SubZone,
    ) -> Result<bool> {
        let n = sub.chunks().len();
        let blocks = self.geo.chunk_blocks as u64;
        if n >= MAX_CHUNKS as usize
            || fs.blocks().free_count() < blocks + fs.layout().data_blocks() / 20
        {
            return Ok(false);
        }
        let Some(chunk) = fs.blocks().alloc_extent(blocks) else {
            return Ok(false);
        };
        let dev = &**fs.device();
        dev.zero_nt(chunk * BLOCK_SIZE, self.geo.desc_blocks as u64 * BLOCK_SIZE);
        fs.drain()?;
        let at = ZoneGeometry::table_entry(self.header, idx as u32, n as u32);
        dev.store_u64(at, chunk);
        dev.flush(at, 8);
        fs.drain()?;
        sub.add_chunk(chunk, self.geo.slots_per_chunk);
        Ok(true)
    }

    /// Gives back the chunks growth added whose slots are all free, from
    /// the end of each sub-zone's row down to its first `INITIAL_CHUNKS`
    /// (a clean unmount, after every slice went back: §11.5): each table
    /// entry cleared and durable before its blocks are free.
    pub fn shrink<D: PmDevice>(&self, fs: Context<'_, D>) -> Result<()> {
        for idx in 0..self.count() {
            let mut sub = self.lock(idx);
            // At most one pass per chunk: each either drops one or stops.
            while sub.chunks().len() > INITIAL_CHUNKS as usize {
                let n = sub.chunks().len();
                let Some(chunk) = sub.drop_last_chunk() else {
                    break;
                };
                let dev = &**fs.device();
                let at = ZoneGeometry::table_entry(self.header, idx as u32, (n - 1) as u32);
                dev.store_u64(at, 0);
                dev.flush(at, 8);
                fs.drain()?;
                fs.blocks().free_run(chunk, self.geo.chunk_blocks as u64);
            }
        }
        Ok(())
    }
}
