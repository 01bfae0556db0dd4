//! Salvage: a read-only view of a damaged pool, to copy out whatever can
//! still be read when fsck cannot make the pool whole or mount refuses it.
//!
//! It reads through the same code as mount (the superblock, journal,
//! zone, split-layout and inode readers), over a [`DramOverlay`], so the
//! pool itself is never written: first a mount as a user would make it is
//! tried (read-only, or for a crashed pool a writable mount whose stores
//! all land in the overlay, so recovery runs exactly as it would on the
//! pool, turned read-only after); if that refuses, the pool is opened
//! leniently, each
//! part that cannot be read left out with the reason: a superblock pair
//! that fails its checksums is taken without them if its geometry holds,
//! recovery goes as far as it can, the zone is dropped (or the
//! descriptors that cannot be judged), and nothing else is checked up
//! front. What remains damaged shows up file by file, as errors of the
//! inode-level calls the caller walks the tree with.

use super::mount::{check_root, read_superblock, recover};
use super::{mount, Core, MountOptions, RecoveryReport};
use crate::alloc::BitSet;
use crate::data;
use crate::error::{FsError, Result};
use crate::inode::{read_inode, walk};
use crate::split::SplitMedia;
use crate::time::{Clock, ClockSource};
use crate::types::DirEntry;
use crate::zone::{self, ZoneMedia};
use amber_format::dirent::{self, SLOTS_PER_BLOCK};
use amber_format::superblock::SUPERBLOCK_SIZE;
use amber_format::zone::FEATURE_ZONE;
use amber_format::{FileKind, FormatParams, PoolLayout, PoolState, Superblock, BLOCK_SIZE};
use amber_pmem::{DramOverlay, PmDevice};
use std::sync::Arc;

/// Opens the pool under `dev` for salvage; returns a read-only core and
/// what was found wrong and worked around, one line each. Fails only
/// when no superblock, checked or not, describes the pool.
pub fn salvage<D: PmDevice>(
    dev: Arc<DramOverlay<D>>,
) -> Result<(Core<DramOverlay<D>>, Vec<String>)> {
    let mut notes = Vec::new();
    let (sb, checked) = superblock(&*dev, &mut notes)?;
    let opts = reading_options(&*dev, &sb);
    if checked {
        match mount_in_dram(&dev, &sb, &opts) {
            Ok((core, report)) => {
                if !report.was_clean {
                    notes.push(format!("{report} (in memory only; the pool is unchanged)"));
                }
                return Ok((core, notes));
            }
            Err(e) => notes.push(format!(
                "a read-only mount refused the pool ({e}); reading it as it lies instead, \
                 skipping what cannot be read"
            )),
        }
        dev.discard();
    }
    Ok((lenient(dev, sb, opts, &mut notes)?, notes))
}

/// A mount as a user would make it: read-only for a clean pool; for one
/// that needs recovery, a writable mount whose every store lands in the
/// overlay, turned read-only once recovered.
fn mount_in_dram<D: PmDevice>(
    dev: &Arc<DramOverlay<D>>,
    sb: &Superblock,
    opts: &MountOptions,
) -> Result<(Core<DramOverlay<D>>, RecoveryReport)> {
    if sb.state == PoolState::Clean {
        return mount(dev.clone(), opts.clone());
    }
    let writable = MountOptions {
        read_only: false,
        ..opts.clone()
    };
    let (mut core, report) = mount(dev.clone(), writable)?;
    core.opts.read_only = true;
    Ok((core, report))
}

/// Mount options that read a pool of `sb`'s layout: read-only, with the
/// policy that reads its files (through its zone, if it has one, whose
/// shape they take so a mount keeps it rather than folding it back), on
/// the simulated clock (no calibration: nothing is written).
fn reading_options<D: PmDevice>(dev: &D, sb: &Superblock) -> MountOptions {
    let policy = match sb.pool_layout() {
        PoolLayout::Split => "amber",
        PoolLayout::Lfs => "hunter-lfs",
        PoolLayout::Nova => "nova",
        PoolLayout::Classic if sb.feature_incompat & FEATURE_ZONE != 0 => "lawn",
        PoolLayout::Classic => "direct",
    };
    let mut opts = MountOptions {
        policy: policy.into(),
        read_only: true,
        clock: ClockSource::Simulated,
        ..MountOptions::default()
    };
    if let Ok(Some(zone)) = ZoneMedia::read(dev, &sb.layout, sb) {
        opts.zone.slot = zone.geo.slot_size;
        opts.zone.subzones = zone.geo.subzones;
    }
    opts
}

/// The superblock to read the pool by, and whether it passed every check.
/// When neither copy does, a copy whose checksum (or magic) alone is
/// wrong, or else the geometry mkfs gives a pool of this size, is used if
/// its root inode is a directory.
fn superblock<D: PmDevice>(dev: &D, notes: &mut Vec<String>) -> Result<(Superblock, bool)> {
    let refused = match read_superblock(dev) {
        Ok(sb) => return Ok((sb, true)),
        Err(e @ FsError::Format(amber_format::FormatError::Truncated { .. })) => return Err(e),
        Err(e) => e,
    };
    let mut candidates: Vec<(Superblock, String)> = Vec::new();
    for (name, off) in ["A", "B"].into_iter().zip(Superblock::copy_offsets()) {
        let mut bytes = [0u8; SUPERBLOCK_SIZE];
        dev.read(off, &mut bytes);
        if let Ok(sb) = Superblock::decode_unverified(&bytes) {
            let why = format!("superblock copy {name} with its checksum and magic not checked");
            candidates.push((sb, why));
        }
    }
    candidates.sort_by_key(|(sb, _)| std::cmp::Reverse(sb.generation));
    for layout in [PoolLayout::Split, PoolLayout::Classic, PoolLayout::Lfs] {
        let params = FormatParams {
            layout,
            ..FormatParams::for_size(dev.size())
        };
        if let Ok(sb) = Superblock::new(&params, [0; 16]) {
            let why = format!(
                "the geometry mkfs gives a pool of this size ({layout:?} layout, defaults); \
                 a small-write zone, if the pool had one, is lost with it"
            );
            candidates.push((sb, why));
        }
    }
    let usable = candidates
        .into_iter()
        .find(|(sb, _)| sb.pool_size <= dev.size() && check_root(dev, &sb.layout).is_ok());
    match usable {
        Some((sb, why)) => {
            notes.push(format!(
                "both superblock copies are unusable ({refused}); using {why}"
            ));
            Ok((sb, false))
        }
        None => Err(refused),
    }
}

/// Opens the pool as it lies: recovery (if it needs any) as far as it
/// goes, the zone if it reads, no allocator (nothing is allocated).
fn lenient<D: PmDevice>(
    dev: Arc<DramOverlay<D>>,
    sb: Superblock,
    opts: MountOptions,
    notes: &mut Vec<String>,
) -> Result<Core<DramOverlay<D>>> {
    let l = sb.layout;
    let policy = data::by_name(&opts)?;
    let zone_media = ZoneMedia::read(&*dev, &l, &sb).unwrap_or_else(|e| {
        notes.push(format!(
            "{e}; files are read without the zone (the newest bytes of small overwrites may \
             be missing)"
        ));
        None
    });
    if sb.state != PoolState::Clean {
        let split = SplitMedia::of(&sb);
        let mut report = RecoveryReport::default();
        let files = (split.as_ref(), sb.pool_layout() == PoolLayout::Nova);
        if let Err(e) = recover(&*dev, &l, zone_media.as_ref(), files, &mut report) {
            notes.push(format!(
                "the pool was not unmounted cleanly and recovery (in memory) stopped: {e}; \
                 what it did not reach is read as it lies"
            ));
        }
    }
    // Every block taken and no inode free: a read-only core allocates
    // nothing, and must not try.
    let bytes = vec![0xff; l.total_blocks.div_ceil(8) as usize];
    let every_block = BitSet::from_bytes(&bytes, l.total_blocks);
    let clock = Clock::new(opts.clock);
    let mut core = Core::assemble(dev, sb, &every_block, Vec::new(), 1, policy, opts, clock);
    if let Some(media) = zone_media {
        match zone::attach_lenient(&core, media) {
            Ok((z, skipped)) => {
                notes.extend(skipped);
                core.zone = Some(z);
            }
            Err(e) => notes.push(format!(
                "{e}; files are read without the zone (the newest bytes of small overwrites \
                 may be missing)"
            )),
        }
    }
    Ok(core)
}

impl<D: PmDevice> Core<D> {
    /// The entries of directory `ino` that still decode, with why each
    /// other slot or block did not: for salvage, when the directory does
    /// not load (mount reads a directory whole, and one bad slot fails
    /// it). Reads the inode and block map as the loaders do; fails only
    /// if those do not read.
    pub fn readdir_lenient(&self, ino: u64) -> Result<(Vec<DirEntry>, Vec<String>)> {
        let l = &self.layout;
        if !l.is_valid_ino(ino) {
            return Err(FsError::NotFound);
        }
        let disk = read_inode(&*self.dev, l, ino);
        if disk.kind() != Some(FileKind::Directory) {
            return Err(FsError::NotADirectory);
        }
        let tree = walk(&*self.dev, l, disk.map_root, disk.map_height)?;
        let nblocks = disk.size / BLOCK_SIZE;
        let (mut entries, mut bad) = (Vec::new(), Vec::new());
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        for &(fb, pb) in tree.data.iter().filter(|&&(fb, _)| fb < nblocks) {
            self.dev.read(l.block_offset(pb), &mut buf);
            // The slots after a bad one may be the rest of its name: one
            // note per run of bad slots.
            let (mut slot, mut in_bad_run) = (0, false);
            while slot < SLOTS_PER_BLOCK {
                let at = format!("block {fb} slot {slot}");
                let decoded = dirent::decode(&buf, slot);
                let was_bad = std::mem::replace(&mut in_bad_run, decoded.is_err());
                match decoded {
                    Ok(None) => slot += 1,
                    Ok(Some(e)) => {
                        slot += e.nslots;
                        match FileKind::from_dtype(e.dtype).filter(|_| l.is_valid_ino(e.ino)) {
                            Some(kind) => entries.push(DirEntry {
                                ino: e.ino,
                                kind,
                                name: e.name,
                                cookie: 0,
                            }),
                            None => bad.push(format!("{at}: names no valid inode or kind")),
                        }
                    }
                    Err(err) => {
                        if !was_bad {
                            bad.push(format!("{at}: {err}"));
                        }
                        slot += 1;
                    }
                }
            }
        }
        Ok((entries, bad))
    }
}
