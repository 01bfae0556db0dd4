//! The `lawn` policy: logless alternate writing (lawn.txt §4). A small
//! overwrite is cut into slot-sized slices; a slice whose newest copy is in
//! its file goes to a free slot of the zone, one whose newest copy is in a
//! slot goes back to the file, and the descriptor store decides which copy
//! counts. Each slice is written once and is atomic.
//!
//! Beyond the paper, a write() of several slices is atomic as a whole:
//! its descriptors carry the sequence number `s = C + 1` of the file's
//! next zone commit (`C` is the commit number in the inode) — new slots as
//! valid once `C >= s`, superseded slots as DOOMED, valid while `C < s` —
//! and one 8-byte store of `C = s` into the inode commits every slice at
//! once. Whole blocks go by copy-on-write; when a write has both, one
//! journal transaction carries the copy-on-write's pointer switch and the
//! inode with its new commit number. docs/design.md §11 has the argument.
//!
//! Writes that grow the file go by `direct` (a pure append, atomic by its
//! size store) or by copy-on-write (a write straddling the end); the slice
//! holding the old end is written back first, since its slot would hide
//! the bytes written past the end.

mod background;
mod lease;
mod onefence;
pub(crate) mod options;
mod slices;

use super::cow::{merge_write, write_cow, CowStage};
use super::direct::{block_range, note_write, write_first_line, Direct, FSYNC_HEAVY_WRITES};
use super::{DataPolicy, FallocStep};
use crate::data::Context;
use crate::error::Result;
use crate::fs::Core;
use crate::inode::InodeState;
use crate::journal::Tx;
use crate::zone::{SubZone, Zone};
use amber_format::inode::OFF_ZONE_SEQ;
use amber_format::zone::{Descriptor, MAX_SEQ};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
pub use options::ZoneOptions;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// Rounds of growing or writing back before a write that found no free
/// slot goes by copy-on-write instead.
const SLOT_ROUNDS: usize = 3;

/// Slices a write's bookkeeping holds without a heap allocation: a small
/// write's few short lists were as many allocations and frees (~6% of a
/// 128-byte write's time under `dram` in `perf`).
pub(super) const INLINE_SLICES: usize = 16;

/// A write's zone slices, in order (or the slots taken for them).
pub(super) type Slices = SmallVec<[u32; INLINE_SLICES]>;

/// Per slice of a write, the slot of its older copy (None: the file's
/// block).
pub(super) type Olds = SmallVec<[Option<u32>; INLINE_SLICES]>;

/// A write's slices with where each goes.
type Pieces = SmallVec<[Piece; INLINE_SLICES]>;

/// Bytes of a run of neighbouring slices a write builds on the stack
/// (16 slices of 64 bytes); a longer run spills to the heap.
const RUN_INLINE: usize = 1024;

/// Where a file block lies on PM, as the file's own policy keeps it (the
/// inode's block map for `lawn`, hunter's index for `amber`): a slice goes
/// back to, and is patched from, that block. Given at construction, so the
/// zone never calls back into the mounted policy.
pub(super) type BlockLookup = fn(&InodeState, u64) -> Option<u64>;

/// The inode's block map: `lawn`'s own files' lookup.
pub(super) fn mapped_block(st: &InodeState, fb: u64) -> Option<u64> {
    st.map.get(fb)
}

/// The LAWN policy.
pub struct Lawn {
    shared: Arc<background::Shared>,
}

/// Counters for the workbench.
#[derive(Default)]
struct Stats {
    /// Slices written to a zone slot (their newest copy was in the file).
    to_zone: AtomicU64,
    /// Slices written to the file (their newest copy was in a slot).
    to_file: AtomicU64,
    /// Writes committed by the commit-number store or with a transaction.
    multi_slice_writes: AtomicU64,
    /// Writes that went (wholly or partly) by copy-on-write.
    cow_writes: AtomicU64,
    /// Slices written back to make room during a write.
    evicted: AtomicU64,
    /// Slices written back by the idle-time thread, and at a clean unmount.
    idle_written_back: AtomicU64,
    /// Chunks added to sub-zones.
    growths: AtomicU64,
}

/// Where a zone write's new times go, which decides whether they ride on
/// its data's fence.
#[derive(Clone, Copy)]
pub(super) struct TimesAt {
    /// The write is synchronous.
    pub sync: bool,
    /// The file's times live in its attribute log (`amber`): fsync queues
    /// them, so they are left dirty.
    pub split: bool,
}

/// One slice of a write and where it goes.
struct Piece {
    slice: u32,
    /// The slot this write touches: the one holding the slice's newest
    /// copy (the write then goes to the file and dooms it), or a free one
    /// taken for it (the write goes there).
    slot: u32,
    /// Whether `slot` held the newest copy before this write.
    in_zone: bool,
    /// Byte offsets of the slot's descriptor and data.
    desc: u64,
    data: u64,
}

impl Lawn {
    /// The policy over a zone shaped by `opts`, finding its files' blocks
    /// with `lookup`.
    pub(super) fn new(opts: &ZoneOptions, lookup: BlockLookup) -> Lawn {
        Lawn {
            shared: Arc::new(background::Shared::new(*opts, lookup)),
        }
    }

    fn lookup(&self) -> BlockLookup {
        self.shared.lookup
    }

    pub(super) fn zone<D: PmDevice>(fs: Context<'_, D>) -> &Zone {
        fs.zone().expect("lawn is mounted with its zone")
    }

    /// Slices of a write inside the file: the partial (head and tail)
    /// blocks that are mapped go through the zone; whole blocks, holes and
    /// blocks past what a descriptor can number go by copy-on-write, as
    /// one run (only head and tail can be partial, so the run is
    /// contiguous).
    fn classify(
        &self,
        zone: &Zone,
        st: &InodeState,
        off: u64,
        end: u64,
    ) -> (Slices, Option<(u64, u64)>) {
        let size = zone.geo.slot_size as u64;
        let mut slices = Slices::new();
        let mut run: Option<(u64, u64)> = None;
        for fb in block_range(off, end) {
            let bstart = fb * BLOCK_SIZE;
            let s = off.max(bstart);
            let e = end.min(bstart + BLOCK_SIZE);
            let partial = s != bstart || e != bstart + BLOCK_SIZE;
            let mapped = (self.lookup())(st, fb).is_some();
            if partial && mapped && (e - 1) / size <= u32::MAX as u64 {
                slices.extend((s / size) as u32..=((e - 1) / size) as u32);
            } else {
                run = Some(run.map_or((fb, fb), |(a, _)| (a, fb)));
            }
        }
        (slices, run)
    }

    /// Tells the idle-time write-back thread a write is under way: it
    /// writes slices back only when writes pause (lawn.txt §4.2).
    pub(super) fn note_activity(&self) {
        self.shared.note_activity();
    }

    /// The slices of a write of `[off, end)` when all of it can go through
    /// the zone (every block it touches partial and mapped), for the
    /// `amber` policy; None when some of it cannot.
    pub(super) fn zone_slices<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        off: u64,
        end: u64,
    ) -> Option<Slices> {
        match self.classify(Self::zone(fs), st, off, end) {
            (numbers, None) if !numbers.is_empty() => Some(numbers),
            _ => None,
        }
    }

    /// Free slots for `need` slices of `st`'s sub-zone, growing it when its
    /// free slots fall under the threshold and writing back the least
    /// recently written slices (never `pieces`' own) when it cannot grow.
    /// None when no slot can be had: the write then goes by copy-on-write.
    fn take_slots<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        zone: &Zone,
        st: &InodeState,
        numbers: &[u32],
        need: usize,
    ) -> Result<Option<Slices>> {
        let idx = zone.sub_of(st.ino);
        let grow_pct = fs.options().zone.grow_pct as u64;
        let mut got = Slices::new();
        for _ in 0..SLOT_ROUNDS {
            {
                let mut sub = zone.lock(idx);
                let n = need - got.len();
                sub.take_near(n, &mut got);
                if (sub.free_count() as u64) * 100 < sub.slot_count() as u64 * grow_pct
                    && zone.grow(fs, idx, &mut sub)?
                {
                    self.shared.stats.growths.fetch_add(1, Relaxed);
                    continue;
                }
                if got.len() == need {
                    return Ok(Some(got));
                }
            }
            let keep = |s: u32| numbers.contains(&s);
            let n = need - got.len();
            let freed =
                slices::write_back_oldest(fs, zone, self.lookup(), idx, n, Some((st, &keep)))?;
            self.shared.stats.evicted.fetch_add(freed as u64, Relaxed);
        }
        let mut sub = zone.lock(idx);
        if got.len() == need {
            return Ok(Some(got));
        }
        got.into_iter().for_each(|s| sub.give_back(s));
        Ok(None)
    }

    /// Where each slice of a write goes (into `pieces`, empty on entry),
    /// in one pass under the sub-zone lock when the sub-zone has room (the
    /// common case); otherwise after `take_slots` grew it or wrote slices
    /// back. False: no slot could be had, the write goes by copy-on-write.
    /// The list is the caller's so its 16 inline pieces are never moved
    /// (a returned list was two 0.5 KiB copies, 5% of a 128 B write).
    fn prepare<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        zone: &Zone,
        st: &InodeState,
        numbers: &[u32],
        pieces: &mut Pieces,
    ) -> Result<bool> {
        debug_assert!(pieces.is_empty());
        let idx = zone.sub_of(st.ino);
        let grow_pct = fs.options().zone.grow_pct as u64;
        let mut sub = zone.lock(idx);
        let olds = older_copies(&sub, st.ino, numbers);
        let need = olds.iter().filter(|o| o.is_none()).count();
        let free = sub.free_count() as u64;
        let n = need as u64;
        // Room for every slice, leaving the sub-zone above its growth mark:
        // no growth or write-back is due, and one lock pass does it all.
        let got = if free >= n && (free - n) * 100 >= sub.slot_count() as u64 * grow_pct {
            let mut got = Slices::new();
            sub.take_near(need, &mut got);
            got
        } else {
            drop(sub);
            let Some(got) = self.take_slots(fs, zone, st, numbers, need)? else {
                return Ok(false);
            };
            sub = zone.lock(idx);
            got
        };
        let mut fresh = got.into_iter();
        pieces.extend(numbers.iter().zip(&olds).map(|(&slice, &old)| {
            let (slot, in_zone) = match old {
                Some(z) => (z, true),
                None => (
                    fresh
                        .next()
                        .expect("a slot for every slice going to the zone"),
                    false,
                ),
            };
            let (desc, data) = zone.place(&sub, slot);
            Piece {
                slice,
                slot,
                in_zone,
                desc,
                data,
            }
        }));
        Ok(true)
    }

    /// A write by copy-on-write alone, after the slices of its blocks went
    /// back to the file (the new blocks are built from the file's bytes).
    fn by_cow<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        let zone = Self::zone(fs);
        let end = off + data.len() as u64;
        slices::flush_blocks(
            fs,
            zone,
            self.lookup(),
            st,
            off / BLOCK_SIZE,
            (end - 1) / BLOCK_SIZE,
        )?;
        self.shared.stats.cow_writes.fetch_add(1, Relaxed);
        write_cow(fs, st, off, data, sync)
    }

    /// An overwrite inside the file: its slices by alternate writing, its
    /// whole blocks (if any) by copy-on-write, all committed at once.
    fn overwrite<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        let zone = Self::zone(fs);
        let end = off + data.len() as u64;
        let (numbers, run) = self.classify(zone, st, off, end);
        let Some((first, last)) = run.filter(|_| !numbers.is_empty()) else {
            if !numbers.is_empty() {
                if let Some(n) = self.slices_only(fs, st, &numbers, off, data, sync, false)? {
                    return Ok(n);
                }
            }
            return self.by_cow(fs, st, off, data, sync);
        };
        // Slices inside the run's blocks are superseded by its new blocks,
        // which are built from the file.
        slices::flush_blocks(fs, zone, self.lookup(), st, first, last)?;
        let idx = zone.sub_of(st.ino);
        let mut pieces = Pieces::new();
        if !self.prepare(fs, zone, st, &numbers, &mut pieces)? {
            return self.by_cow(fs, st, off, data, sync);
        }
        let old_size = st.disk.size;
        let staged = CowStage::stage(fs, st, first, last, &mut |fb, buf| {
            merge_write(fb, buf, old_size, off, data)
        });
        let stage = match staged {
            Ok(s) => s,
            Err(e) => {
                let mut sub = zone.lock(idx);
                for p in pieces.iter().filter(|p| !p.in_zone) {
                    sub.give_back(p.slot);
                }
                return Err(e);
            }
        };
        let seq = st.disk.zone_seq + 1;
        assert!(seq <= MAX_SEQ, "zone commit number exhausted");
        self.write_slices(fs, zone, st, &pieces, off, data, true, seq);
        note_write(fs, st);
        self.count(&pieces);
        // Copy-on-write blocks and slices: one transaction switches the
        // blocks and commits the slices with the inode.
        let stats = &self.shared.stats;
        stats.multi_slice_writes.fetch_add(1, Relaxed);
        stats.cow_writes.fetch_add(1, Relaxed);
        let mut d = st.disk.clone();
        d.zone_seq = seq;
        let mut tx = Tx::new();
        stage.add_to_tx(fs, st.ino, &mut d, &mut tx)?;
        fs.commit(tx)?;
        st.disk = d;
        stage.finish(fs, st);
        st.times_dirty = false;
        rebind(zone, st, &pieces);
        Ok(data.len())
    }

    /// A write of zone slices alone (`numbers`, from `classify`), by
    /// Algorithm 1 and, for several slices, the commit-number store. None
    /// when no slot could be had: the caller writes it another way.
    /// `split`: the file's times live in its attribute log (the `amber`
    /// policy), so they are left dirty for fsync to queue rather than
    /// stored in the inode.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn slices_only<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        numbers: &[u32],
        off: u64,
        data: &[u8],
        sync: bool,
        split: bool,
    ) -> Result<Option<usize>> {
        let zone = Self::zone(fs);
        let times = TimesAt { sync, split };
        if zone.geo.extents {
            return self.write_extent(fs, st, numbers, off, data, times);
        }
        let mut pieces = Pieces::new();
        if !self.prepare(fs, zone, st, numbers, &mut pieces)? {
            return Ok(None);
        }
        let multi = pieces.len() > 1;
        let committed = st.disk.zone_seq;
        let seq = if multi { committed + 1 } else { committed };
        assert!(seq <= MAX_SEQ, "zone commit number exhausted");
        self.write_slices(fs, zone, st, &pieces, off, data, multi, seq);
        let dirty = self.note_times(fs, st, times);
        self.count(&pieces);
        fs.drain()?;
        let dev = &**fs.device();
        if multi {
            self.shared.stats.multi_slice_writes.fetch_add(1, Relaxed);
            let at = fs.layout().inode_offset(st.ino) + OFF_ZONE_SEQ as u64;
            dev.store_u64(at, seq);
            dev.flush(at, 8);
        } else {
            // Algorithm 1: the descriptor store decides which copy counts.
            let p = &pieces[0];
            if p.in_zone {
                Zone::clear_desc(dev, p.desc);
            } else {
                let d = Descriptor {
                    ino: st.ino as u32,
                    slice: p.slice,
                    seq,
                    doomed: false,
                };
                Zone::set_desc(dev, p.desc, &d);
            }
        }
        fs.drain()?;
        st.disk.zone_seq = seq;
        st.times_dirty = dirty;
        rebind(zone, st, &pieces);
        Ok(Some(data.len()))
    }

    /// Notes a zone write's new times and, when they must be durable with
    /// it, stores the inode's first line (the caller's fence covers it).
    /// Returns whether the times stay dirty in DRAM after the commit.
    fn note_times<D: PmDevice>(&self, fs: Context<'_, D>, st: &mut InodeState, t: TimesAt) -> bool {
        let before = (st.disk.mtime, st.disk.ctime);
        let mode_changed = note_write(fs, st);
        // The coarse clock often leaves the times as they were: then the
        // inode's first line needs no store.
        let times_changed = st.times_dirty || (st.disk.mtime, st.disk.ctime) != before;
        let eager =
            mode_changed || !t.split && (t.sync || st.writes_since_fsync <= FSYNC_HEAVY_WRITES);
        if eager && (times_changed || mode_changed) {
            // Times (and a dropped set-id bit) ride on the data's fence.
            write_first_line(fs, st);
        }
        times_changed && (t.split || !eager)
    }

    /// Counts where a write's slices went.
    fn count(&self, pieces: &[Piece]) {
        let to_zone = pieces.iter().filter(|p| !p.in_zone).count() as u64;
        let to_file = pieces.len() as u64 - to_zone;
        let stats = &self.shared.stats;
        // A shared counter's add is a locked instruction: none for zero.
        if to_file > 0 {
            stats.to_file.fetch_add(to_file, Relaxed);
        }
        if to_zone > 0 {
            stats.to_zone.fetch_add(to_zone, Relaxed);
        }
    }

    /// Writes every slice's new contents where Algorithm 1 sends it (the
    /// file if its newest copy is in a slot, else the new slot), without a
    /// fence. For a multi-slice write it also stores each descriptor with
    /// `seq` (new slots pending, superseded slots DOOMED), none of which
    /// changes what is valid until the commit. A single slice's one
    /// descriptor store, which commits it, is the caller's.
    #[allow(clippy::too_many_arguments)]
    fn write_slices<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        zone: &Zone,
        st: &InodeState,
        pieces: &[Piece],
        off: u64,
        data: &[u8],
        multi: bool,
        seq: u64,
    ) {
        let dev = &**fs.device();
        let size = zone.geo.slot_size as u64;
        let mut img = [0u8; 512];
        let img = &mut img[..size as usize];
        let mut marks: SmallVec<[(u64, Descriptor); INLINE_SLICES]> = SmallVec::new();
        // Slices bound for neighbouring places (the file's, or neighbouring
        // slots) go out as one non-temporal copy, built on the stack; a
        // slice the write covers whole is copied from the caller's bytes.
        let mut run: SmallVec<[u8; RUN_INLINE]> = SmallVec::new();
        let mut run_at = 0;
        for p in pieces {
            let start = p.slice as u64 * size;
            let file_at = file_place(fs, self.lookup(), st, start);
            // Whole aligned cache lines: non-temporal stores, no flush.
            let to = if p.in_zone { file_at } else { p.data };
            if !run.is_empty() && to != run_at + run.len() as u64 {
                dev.write_nt(run_at, &run);
                run.clear();
            }
            if run.is_empty() {
                run_at = to;
            }
            if start >= off && start + size <= off + data.len() as u64 {
                let from = (start - off) as usize;
                run.extend_from_slice(&data[from..from + size as usize]);
            } else {
                let src = if p.in_zone { p.data } else { file_at };
                slice_image(fs, st, start, src, off, data, img);
                run.extend_from_slice(img);
            }
            if multi {
                let d = Descriptor {
                    ino: st.ino as u32,
                    slice: p.slice,
                    seq,
                    doomed: p.in_zone,
                };
                marks.push((p.desc, d));
            }
        }
        if !run.is_empty() {
            dev.write_nt(run_at, &run);
        }
        Zone::set_descs(dev, &marks);
    }
}

/// The slot of each slice's older copy in the zone (None: the file
/// holds it): one probe per block when the slices run on without a gap
/// (always but for a write with whole blocks between its partial ones).
fn older_copies(sub: &SubZone, ino: u64, numbers: &[u32]) -> Olds {
    debug_assert!(numbers.windows(2).all(|w| w[0] < w[1]), "slices in order");
    let mut olds: Olds = smallvec::smallvec![None; numbers.len()];
    let (first, last) = (numbers[0], numbers[numbers.len() - 1]);
    if last.wrapping_sub(first) as usize + 1 == numbers.len() {
        sub.lookup_run(ino, first, &mut olds);
    } else {
        for (o, &n) in olds.iter_mut().zip(numbers) {
            *o = sub.lookup(ino, n);
        }
    }
    olds
}

/// Where file byte `start` of a slice the zone holds (or is about to)
/// lies on PM: in its block, which the zone's invariants keep mapped.
fn file_place<D: PmDevice>(
    fs: Context<'_, D>,
    lookup: BlockLookup,
    st: &InodeState,
    start: u64,
) -> u64 {
    let b = lookup(st, start / BLOCK_SIZE).expect("a zone slice lies in a mapped block");
    fs.layout().block_offset(b) + start % BLOCK_SIZE
}

/// Slice `img` (starting at file byte `start`) of a write of `data` at
/// `off`: the write's bytes over the slice's newest copy, read from `src`
/// when the write covers it only partly (zeros past the size).
fn slice_image<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    start: u64,
    src: u64,
    off: u64,
    data: &[u8],
    img: &mut [u8],
) {
    let size = img.len() as u64;
    let lo = off.max(start);
    let hi = (off + data.len() as u64).min(start + size);
    if lo != start || hi != start + size {
        fs.device().read(src, img);
        let visible = st.disk.size.saturating_sub(start).min(size) as usize;
        img[visible..].fill(0);
    }
    img[(lo - start) as usize..(hi - start) as usize]
        .copy_from_slice(&data[(lo - off) as usize..(hi - off) as usize]);
}

/// What a policy composed over the zone (`amber`) asks of it: moving a
/// file's slices back into its blocks before a change that does not go
/// through the zone, so no slot lies over a block it no longer backs up
/// (design.md §11, invariant 12). Each is durable on return.
impl Lawn {
    /// Writes back every slice of `st` in file blocks `[first, last]`.
    pub(super) fn flush_blocks<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        first: u64,
        last: u64,
    ) -> Result<usize> {
        slices::flush_blocks(fs, Self::zone(fs), self.lookup(), st, first, last)
    }

    /// Writes back every slice of `st` that ends past byte `from`.
    pub(super) fn flush_from<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        from: u64,
    ) -> Result<usize> {
        slices::flush_from(fs, Self::zone(fs), self.lookup(), st, from)
    }

    /// Before the file's size changes to `size` (`slices::flush_for_size`).
    pub(super) fn flush_for_size<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        size: u64,
    ) -> Result<usize> {
        slices::flush_for_size(fs, Self::zone(fs), self.lookup(), st, size)
    }

    /// Before a fallocate step (`slices::flush_for_fallocate`).
    pub(super) fn flush_for_fallocate<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<usize> {
        slices::flush_for_fallocate(fs, Self::zone(fs), self.lookup(), st, off, len, mode)
    }
}

/// Reads each byte once, from where its newest copy is: the zone's slots
/// for the slices it holds, `base` (the file's own read) between them.
pub(super) fn read_over<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    off: u64,
    buf: &mut [u8],
    base: &dyn Fn(u64, &mut [u8]) -> Result<usize>,
) -> Result<usize> {
    let size = st.disk.size;
    if off >= size || buf.is_empty() {
        return Ok(0);
    }
    let n = (buf.len() as u64).min(size - off) as usize;
    let end = off + n as u64;
    // No zone: a read-only mount of a pool that never had one (only a
    // writable mount creates it), or salvage of one it could not read.
    let Some(zone) = fs.zone() else {
        return base(off, &mut buf[..n]);
    };
    if zone.is_empty(zone.sub_of(st.ino)) {
        return base(off, &mut buf[..n]);
    }
    let slot = zone.geo.slot_size as u64;
    let first = (off / slot).min(u32::MAX as u64) as u32;
    let last = ((end - 1) / slot).min(u32::MAX as u64) as u32;
    // Neighbouring slices in neighbouring slots (written together) are
    // one copy.
    let mut runs: Vec<(u64, u64, u64)> = Vec::new();
    {
        let sub = zone.lock(zone.sub_of(st.ino));
        for (slice, s) in sub.range(st.ino, first, last) {
            let (start, at) = (slice as u64 * slot, zone.place(&sub, s).1);
            match runs.last_mut() {
                Some((s0, a0, len)) if *s0 + *len == start && *a0 + *len == at => *len += slot,
                _ => runs.push((start, at, slot)),
            }
        }
    }
    let dev = &**fs.device();
    let mut pos = off;
    for (start, at, len) in runs {
        let lo = off.max(start);
        let hi = end.min(start + len);
        if pos < lo {
            base(pos, &mut buf[(pos - off) as usize..(lo - off) as usize])?;
        }
        dev.read(
            at + (lo - start),
            &mut buf[(lo - off) as usize..(hi - off) as usize],
        );
        pos = hi;
    }
    if pos < end {
        base(pos, &mut buf[(pos - off) as usize..n])?;
    }
    Ok(n)
}

/// After a write's commit: slots whose copy went back to the file are
/// free, the new ones hold their slices.
fn rebind(zone: &Zone, st: &InodeState, pieces: &[Piece]) {
    let mut sub = zone.lock(zone.sub_of(st.ino));
    for p in pieces.iter().filter(|p| p.in_zone) {
        sub.unbind(p.slot);
    }
    for p in pieces.iter().filter(|p| !p.in_zone) {
        sub.bind(p.slot, st.ino, p.slice);
    }
}

impl<D: PmDevice> DataPolicy<D> for Lawn {
    fn name(&self) -> &'static str {
        "lawn"
    }

    fn read(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        read_over(fs, st, off, buf, &|pos, b| Direct.read(fs, st, pos, b))
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        self.note_activity();
        let end = off + data.len() as u64;
        let old_size = st.disk.size;
        if end <= old_size {
            return self.overwrite(fs, st, off, data, sync);
        }
        // The size grows: the slice holding the old end goes back first.
        self.flush_from(fs, st, old_size)?;
        if off >= old_size {
            return Direct.write(fs, st, off, data, sync);
        }
        self.by_cow(fs, st, off, data, sync)
    }

    /// `direct`'s write; one that grows the file first writes back the
    /// slice holding the old end, as `write` does.
    fn write_in_place(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        if off + data.len() as u64 > st.disk.size {
            self.flush_from(fs, st, st.disk.size)?;
        }
        Direct.write(fs, st, off, data, sync)
    }

    /// The zone's slices of the pinned blocks go back into them.
    fn pin(&self, fs: Context<'_, D>, st: &mut InodeState, first: u64, count: u64) -> Result<()> {
        self.flush_blocks(fs, st, first, first + count - 1)?;
        Ok(())
    }

    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        self.flush_for_size(fs, st, size)?;
        Direct.truncate(fs, st, size)
    }

    fn fallocate(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<()> {
        self.flush_for_fallocate(fs, st, off, len, mode)?;
        Direct.fallocate(fs, st, off, len, mode)
    }

    fn atomic_writes(&self) -> bool {
        true
    }

    fn uses_zone(&self) -> bool {
        true
    }

    fn spawn(&self, core: Weak<Core<D>>) {
        background::spawn(&self.shared, core);
    }

    /// The thread stops, slices go back to their files as when idle
    /// (every one, by default), and the chunks growth added that are left
    /// empty go back to the pool (design.md §11.5); a failed write-back
    /// poisons the core, and the unmount fails on it.
    fn unmount(&self, fs: Context<'_, D>) {
        self.shared.stop();
        let emptied = background::write_back_at_unmount(&self.shared, fs);
        let shrunk = emptied.and_then(|()| fs.zone().map_or(Ok(()), |z| z.shrink(fs)));
        let _ = fs.guard(shrunk);
    }

    /// The file is gone: its descriptors are cleared (durably, before its
    /// inode number can be reused) without writing anything back.
    fn forget(&self, fs: Context<'_, D>, st: &mut InodeState) {
        let Some(zone) = fs.zone() else { return };
        if zone.geo.extents {
            return onefence::forget(fs, zone, st);
        }
        let mut sub = zone.lock(zone.sub_of(st.ino));
        let all = sub.all_of(st.ino);
        if all.is_empty() {
            return;
        }
        let dev = &**fs.device();
        for &(_, slot) in &all {
            Zone::clear_desc(dev, zone.place(&sub, slot).0);
        }
        // A failed fence poisons the core; the descriptors are stale by
        // then anyway (their inode is free), and mount clears stale ones.
        let _ = fs.drain();
        for (_, slot) in all {
            sub.unbind(slot);
        }
    }

    /// Writes back up to `max_blocks` slices (least recently written
    /// first, sub-zone by sub-zone), as the idle-time thread does.
    fn write_back(&self, fs: Context<'_, D>, max_blocks: u64) -> Result<u64> {
        let zone = Self::zone(fs);
        let mut done = 0u64;
        for idx in 0..zone.count() {
            let left = max_blocks.saturating_sub(done) as usize;
            if left == 0 {
                break;
            }
            done += slices::write_back_oldest(fs, zone, self.lookup(), idx, left, None)? as u64;
        }
        Ok(done)
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Relaxed);
        vec![
            ("to_zone".into(), get(&s.to_zone)),
            ("to_file".into(), get(&s.to_file)),
            ("multi_slice_writes".into(), get(&s.multi_slice_writes)),
            ("cow_writes".into(), get(&s.cow_writes)),
            ("evicted".into(), get(&s.evicted)),
            ("idle_written_back".into(), get(&s.idle_written_back)),
            ("zone_growths".into(), get(&s.growths)),
        ]
    }
}
