//! The `amber` policy: HUNTER's split layout and asynchronous metadata
//! for whole blocks, LAWN's zone for small overwrites, over one pool.
//!
//! - A write whose every block is partial and already on PM (a small
//!   overwrite) goes through the small-write zone by Algorithm 1: written
//!   once, atomic, durable on return (`lawn`).
//! - Every other write goes out of place into the CPU's data log with its
//!   metadata queued (`hunter`): appends, whole blocks, holes. The slices
//!   the zone holds in its blocks go back to the file first, since its new
//!   blocks are built from the file.
//! - Where buffering pays on this device (HiNFS's calibration and Buffer
//!   Benefit Model, `amber_buffer=`), writes that may persist lazily are
//!   held in DRAM instead and go out of place later, a whole file's
//!   buffered blocks as one change (`buffer`).
//! - Reads take each byte from the buffer, else the zone's slots over the
//!   file's blocks.
//!
//! Crash argument (docs/design.md §13): a zone slice backs up a file block
//! only once that block's logical information and its file's attribute
//! entry are durable (`Hunter::settle` before the first slice of a file
//! with queued updates), and the block stays the file's while the zone
//! holds slices of it (every path that would move or free it writes them
//! back first). So recovery, which settles the split layout before it
//! judges the zone, always finds a slice's block where the slice's write
//! found it. Every write() is atomic: the zone's by its commit store, the
//! data log's because its records become valid only with an attribute
//! entry of their write's seq or later, which is persisted after them.

mod buffer;
mod image;
pub(crate) mod options;
mod redo;
mod table;

use super::cost::{self, calibrate};
use super::hunter::{self, Hunter};
use super::{
    BufferOptions, DataPolicy, FallocStep, HunterOptions, Lawn, LeaseEnd, LeasedWrites, ZoneOptions,
};
use crate::data::Context;
use crate::error::Result;
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::{FileKind, PoolLayout, Timespec, BLOCK_SIZE};
use amber_pmem::PmDevice;
use buffer::Buffer;
pub use options::{AmberBuffer, AmberZone, AmberZoneMax};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// Blocks `describe` lists by number; the rest are counted.
const MAX_DESCRIBED: usize = 32;

/// Zone slots a write lease gets per granted block (design.md §17.13):
/// 4,096 for a full grant, so a lessee's 128-byte overwrites (two 64-byte
/// slots each) outlast its blocks' 1,024 writes.
const SLOTS_PER_LEASED_BLOCK: usize = 4;

/// hunter as amber's engine, keeping the file's DRAM buffer with its
/// own per-file state (hunter/engine.rs).
type AmberHunter = Hunter<buffer::FileState>;

/// The two paths amber routes writes between, through their documented
/// interfaces only (hunter/engine.rs, `Lawn`'s composition calls): shared
/// with the buffer's write-back thread.
struct Engines {
    hunter: AmberHunter,
    /// The zone, finding a slice's block in hunter's index.
    lawn: Lawn,
}

/// The `amber` policy.
pub struct Amber {
    e: Arc<Engines>,
    buffer: Arc<Buffer>,
    /// Most slices a small overwrite may have and still go through the
    /// zone: where the zone's flushed descriptor lines start to cost more
    /// than one out-of-place block, from the costs measured at mount
    /// (`calibrate`). Every partial write goes there until then, and with
    /// the simulated clock, which measures nothing.
    zone_max: AtomicU64,
    /// The measured costs, in picoseconds: one line of a streamed
    /// non-temporal block copy, and one flushed line with its fence.
    line_ps: AtomicU64,
    flush_ps: AtomicU64,
    /// Writes that went through the zone alone.
    zone_writes: AtomicU64,
    /// Writes that went into the data logs.
    log_writes: AtomicU64,
    /// Zone writes that first had to persist their file's queued updates.
    settles: AtomicU64,
    /// The zone commits by extent heads and one fence (`amber_zone=`).
    extents: bool,
    /// The user's cap on `zone_max` (`amber_zone_max=`).
    zone_cap: u64,
}

impl Amber {
    /// The policy: its buffer (`mode`, sized and drained as `buffer`
    /// says), its zone and its engine, with data logs for `cpus` CPUs.
    pub fn new(
        mode: AmberBuffer,
        zone_mode: AmberZone,
        buffer: &BufferOptions,
        zone: &ZoneOptions,
        hunter: &HunterOptions,
        cpus: usize,
    ) -> Amber {
        Amber {
            e: Arc::new(Engines {
                hunter: Hunter::build(hunter, cpus, false, false).with_own_commits(),
                lawn: Lawn::new(zone, hunter::block_of::<buffer::FileState>),
            }),
            buffer: Arc::new(Buffer::new(buffer, mode)),
            zone_max: AtomicU64::new(u64::MAX),
            line_ps: AtomicU64::new(0),
            flush_ps: AtomicU64::new(0),
            zone_writes: AtomicU64::new(0),
            log_writes: AtomicU64::new(0),
            settles: AtomicU64::new(0),
            extents: zone_mode == AmberZone::Extents,
            zone_cap: u64::MAX,
        }
    }

    /// The policy with zone writes capped at `max` slices, when it names
    /// a cap (`amber_zone_max=`).
    pub fn with_zone_max(mut self, max: AmberZoneMax) -> Amber {
        self.zone_cap = max.0.unwrap_or(u64::MAX);
        self.zone_max = AtomicU64::new(self.zone_cap);
        self
    }

    /// A small overwrite through the zone; None when it cannot go there
    /// (a whole or unmapped block, or no free slot).
    fn through_zone<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<Option<usize>> {
        let end = off + data.len() as u64;
        if end > st.disk.size {
            return Ok(None);
        }
        let Some(numbers) = self.e.lawn.zone_slices(fs, st, off, end) else {
            return Ok(None);
        };
        if numbers.len() as u64 > self.zone_max.load(Relaxed) {
            return Ok(None);
        }
        if self.e.hunter.settle(fs, st)? {
            self.settles.fetch_add(1, Relaxed);
        }
        let Some(n) = self
            .e
            .lawn
            .slices_only(fs, st, &numbers, off, data, sync, true)?
        else {
            return Ok(None);
        };
        self.zone_writes.fetch_add(1, Relaxed);
        if sync {
            // The data is durable; the times go in an attribute entry.
            self.fsync(fs, st)?;
        }
        Ok(Some(n))
    }

    /// Whether a write is an overwrite straddling one block boundary,
    /// partial on both sides, with more slices than the zone takes: SQLite
    /// writes each WAL frame's page so, just past the frame's header. On
    /// its own it would go out of place, merged with both old blocks and
    /// committed through the queue, and the header's zone slice written
    /// back first; the buffer coalesces the two writes instead (§13.4
    /// "Coalescing").
    fn straddles<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        off: u64,
        end: u64,
    ) -> bool {
        let boundary = end.saturating_sub(1) / BLOCK_SIZE * BLOCK_SIZE;
        let one_boundary = off / BLOCK_SIZE + 1 == boundary / BLOCK_SIZE;
        let partial_both = !off.is_multiple_of(BLOCK_SIZE) && !end.is_multiple_of(BLOCK_SIZE);
        if !one_boundary || !partial_both || end > st.disk.size {
            return false;
        }
        let slot = u64::from(Lawn::zone(fs).geo.slot_size);
        let slices =
            (boundary - 1) / slot - off / slot + 1 + (end - 1) / slot - boundary / slot + 1;
        slices > self.zone_max.load(Relaxed)
    }

    /// Measures this device at mount (`calibrate::measure`, HiNFS's
    /// calibration): the cost `l` of one line of a fenced non-temporal
    /// block copy and `f` of one flushed line with its fence set how many
    /// slices a zone write may have (`cost::zone_max_slices`); L_dram
    /// against `l` whether buffering pays. Nothing is measured under the
    /// simulated clock (`calibrate::measure`).
    fn calibrate<D: PmDevice>(&self, fs: Context<'_, D>) -> Result<()> {
        let Some(m) = calibrate::measure(fs)? else {
            return Ok(());
        };
        self.buffer.calibrated(m.costs);
        let (l, f) = (m.costs.l_pm_ns, m.flush_ns);
        let slot = u64::from(Lawn::zone(fs).geo.slot_size);
        let max = cost::zone_max_slices(l, f, slot, self.extents);
        self.zone_max.store(max.min(self.zone_cap), Relaxed);
        self.line_ps.store((l * 1000.0) as u64, Relaxed);
        self.flush_ps.store((f * 1000.0) as u64, Relaxed);
        Ok(())
    }
}

impl<D: PmDevice> DataPolicy<D> for Amber {
    fn name(&self) -> &'static str {
        "amber"
    }

    fn pool_layout(&self) -> PoolLayout {
        PoolLayout::Split
    }

    fn durable_on_return(&self) -> bool {
        false
    }

    /// A sync write is complete (data, size and times durable), but a
    /// front end that sent every write sync to skip fsync would turn off
    /// the buffer and the queued metadata, amber's two ways of deferring
    /// work: fsync stays the front end's to call.
    fn sync_writes_are_complete(&self) -> bool {
        false
    }

    fn atomic_writes(&self) -> bool {
        true
    }

    /// Write-backs, zone writes, own commits and queued changes of a file
    /// reach PM in the order they were made (§13.4 (3), §13.6).
    fn ordered_files(&self) -> bool {
        true
    }

    fn uses_zone(&self) -> bool {
        true
    }

    fn zone_extents(&self) -> bool {
        self.extents
    }

    fn load(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        DataPolicy::<D>::load(&self.e.hunter, fs, st)
    }

    fn mounted(&self, fs: Context<'_, D>) -> Result<()> {
        self.calibrate(fs)
    }

    fn read(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.buffer.read(fs, &self.e, st, off, buf)
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        self.e.lawn.note_activity();
        let end = off + data.len() as u64;
        let stream = self.straddles(fs, st, off, end);
        if self
            .buffer
            .write(fs, &self.e, st, off, data, sync, stream)?
        {
            return Ok(data.len());
        }
        // Not buffered: nothing of the file is left in the buffer to go
        // to PM after this write.
        if let Some(n) = self.through_zone(fs, st, off, data, sync)? {
            return Ok(n);
        }
        if end > st.disk.size {
            // The slice holding the old end would hide bytes written past
            // it.
            self.e.lawn.flush_from(fs, st, st.disk.size)?;
        }
        self.e
            .lawn
            .flush_blocks(fs, st, off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE)?;
        self.log_writes.fetch_add(1, Relaxed);
        self.e.hunter.write(fs, st, off, data, sync)
    }

    /// Hunter's in-place write, after the buffer (whose snapshot must
    /// be the only one covering buffered blocks, §13.4) and, for a write
    /// that grows the file, the slice holding the old end (§13.1).
    fn write_in_place(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        self.buffer.flush(fs, &self.e, st)?;
        if off + data.len() as u64 > st.disk.size {
            self.e.lawn.flush_from(fs, st, st.disk.size)?;
        }
        self.e.hunter.write_in_place(fs, st, off, data, sync)
    }

    /// The buffer and the zone's slices of the file go back (the zone's
    /// whole file, as a write-back does), then its queue is persisted, so
    /// no own-commit record newer than its entry hangs on a pinned
    /// block's bytes (§13.6).
    fn pin(&self, fs: Context<'_, D>, st: &mut InodeState, first: u64, count: u64) -> Result<()> {
        self.buffer.flush(fs, &self.e, st)?;
        self.e.lawn.flush_blocks(fs, st, first, first + count - 1)?;
        self.e.hunter.settle(fs, st)?;
        Ok(())
    }

    fn touch(&self, fs: Context<'_, D>, st: &mut InodeState, now: Timespec) -> Result<()> {
        DataPolicy::<D>::touch(&self.e.hunter, fs, st, now)
    }

    fn lease_writes(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        n: usize,
    ) -> Result<Option<LeasedWrites>> {
        let Some(mut writes) = self.e.hunter.lease_writes(fs, st, n)? else {
            return Ok(None);
        };
        let want = u32::try_from(n.saturating_mul(SLOTS_PER_LEASED_BLOCK)).unwrap_or(u32::MAX);
        match self.e.lawn.lease_slots(fs, st, want) {
            Ok(slots) => writes.slots = slots,
            Err(e) => {
                // The blocks granted go back before the error does.
                self.e.hunter.adopt(fs, st, &writes, LeaseEnd::Unused)?;
                return Err(e);
            }
        }
        Ok(Some(writes))
    }

    fn adopt(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        lease: &LeasedWrites,
        end: LeaseEnd,
    ) -> Result<usize> {
        let blocks = self.e.hunter.adopt(fs, st, lease, end)?;
        let slices = match &lease.slots {
            Some(slots) => self.e.lawn.adopt_slots(fs, st, slots, end)?,
            None => 0,
        };
        Ok(blocks + slices)
    }

    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        self.buffer.truncate(fs, &self.e, st, size)?;
        self.e.lawn.flush_for_size(fs, st, size)?;
        DataPolicy::<D>::truncate(&self.e.hunter, fs, st, size)
    }

    fn fallocate(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<()> {
        self.buffer.flush(fs, &self.e, st)?;
        self.e.lawn.flush_for_fallocate(fs, st, off, len, mode)?;
        DataPolicy::<D>::fallocate(&self.e.hunter, fs, st, off, len, mode)
    }

    /// The file's buffered blocks are written back (one change), and
    /// times zone writes changed in DRAM go into an attribute entry with
    /// the file's queued updates. Not called for a durability=lazy file
    /// (`Core::fsync`): its buffer waits for write-back, syncfs or
    /// unmount.
    /// A directory or symlink has no buffer, zone slices or hunter file
    /// state, and must not be given any: hunter's state would carry a
    /// block count of 0 into the directory's next attribute entry.
    fn fsync(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        if st.kind() != FileKind::Regular {
            return self.e.hunter.fsync(fs, st);
        }
        self.buffer.fsync(fs, &self.e, st)?;
        if st.times_dirty {
            // mtime and ctime go in an entry; hunter's fsync then stores
            // the inode's first line for atime.
            self.e.hunter.queue_attrs(fs, st)?;
        }
        self.e.hunter.fsync(fs, st)
    }

    fn setattr_tx(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        new: &mut amber_format::Inode,
        tx: &mut crate::journal::Tx,
    ) -> Result<()> {
        // The attribute entry it may write carries the DRAM size, which
        // covers buffered appends: their blocks go first.
        self.buffer.flush(fs, &self.e, st)?;
        // `new` was copied from the inode before this call; the write-back
        // may have raised the zone's floor (its slices of the buffered
        // blocks went back first) and mapped blocks. Committing the copy
        // as it was would lower the floor and revive dead heads.
        new.zone_seq = st.disk.zone_seq;
        new.blocks = st.disk.blocks;
        self.e.hunter.setattr_tx(fs, st, new, tx)
    }

    fn sync_all(&self, fs: Context<'_, D>) -> Result<()> {
        DataPolicy::<D>::sync_all(&self.e.hunter, fs)
    }

    fn spawn(&self, core: Weak<Core<D>>) {
        self.buffer.spawn(Arc::clone(&self.e), core.clone());
        self.e.hunter.spawn(core.clone());
        self.e.lawn.spawn(core);
    }

    /// Every file's buffer goes back before hunter stops (and gives its
    /// data logs' unused blocks back): the core's `sync_all` then persists
    /// the queues. A failed write-back has poisoned the core, and the
    /// unmount fails on it.
    fn unmount(&self, fs: Context<'_, D>) {
        self.buffer.stop();
        let _ = self
            .buffer
            .write_back_oldest(fs, &self.e, u64::MAX, None, None);
        self.e.lawn.unmount(fs);
        self.e.hunter.unmount(fs);
    }

    fn seal(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        self.e.hunter.seal(fs, st)
    }

    fn forget(&self, fs: Context<'_, D>, st: &mut InodeState) {
        self.buffer.forget(st);
        self.e.lawn.forget(fs, st);
        self.e.hunter.forget(fs, st);
    }

    fn block_of(&self, st: &InodeState, fb: u64) -> Option<u64> {
        DataPolicy::<D>::block_of(&self.e.hunter, st, fb)
    }

    fn runs_of(&self, st: &InodeState, first: u64, end: u64) -> Vec<(u64, u64, u64)> {
        DataPolicy::<D>::runs_of(&self.e.hunter, st, first, end)
    }

    /// The file's blocks in the data log and its metadata (hunter's),
    /// which of its blocks have their newest copy partly in the zone, and
    /// the rule that sent them there.
    fn describe(&self, fs: Context<'_, D>, st: &InodeState) -> Vec<(String, String)> {
        let mut v = self.e.hunter.describe(fs, st);
        let (held, dirty) = (self.buffer.count(st), self.buffer.dirty_count(st));
        v.push(("buffered_blocks".into(), dirty.to_string()));
        v.push(("clean_blocks".into(), (held - dirty).to_string()));
        if let Some(zone) = fs.zone() {
            let slices = zone.lock(zone.sub_of(st.ino)).all_of(st.ino);
            let per_block = zone.geo.slices_per_block();
            let mut blocks: Vec<u64> = slices.iter().map(|&(s, _)| s as u64 / per_block).collect();
            blocks.sort_unstable();
            blocks.dedup();
            let shown: Vec<String> = blocks
                .iter()
                .take(MAX_DESCRIBED)
                .map(u64::to_string)
                .collect();
            let more = blocks.len().saturating_sub(MAX_DESCRIBED);
            v.push(("zone_slices".into(), slices.len().to_string()));
            v.push((
                "zone_blocks".into(),
                match more {
                    0 => shown.join(","),
                    n => format!("{},... ({n} more)", shown.join(",")),
                },
            ));
        }
        let max = self.zone_max.load(Relaxed);
        v.push((
            "route".into(),
            match max {
                u64::MAX => "overwrites of partial blocks: zone; the rest: data log".into(),
                0 => "every write: data log (no zone write pays on this device)".into(),
                m => format!(
                    "overwrites of partial blocks up to {m} slices: zone; the rest: data log"
                ),
            },
        ));
        v
    }

    /// Buffered blocks hold data too.
    fn next_data_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        let mapped = DataPolicy::<D>::next_data_block(&self.e.hunter, st, fb, limit);
        let limit = mapped.unwrap_or(limit);
        self.buffer.next_buffered(st, fb, limit).or(mapped)
    }

    fn next_hole_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        let mut at = fb;
        // Each step passes one run of buffered blocks: bounded by their
        // number.
        for _ in 0..=self.buffer.count(st) {
            let h = DataPolicy::<D>::next_hole_block(&self.e.hunter, st, at, limit)?;
            let past = self.buffer.buffered_run_end(st, h);
            if past == h {
                return Some(h);
            }
            at = past;
        }
        None
    }

    /// Writes back the buffered files with the oldest data (whole files),
    /// then persists queued metadata (the data logs' write-back), then
    /// moves the oldest zone slices back into their files.
    fn write_back(&self, fs: Context<'_, D>, max_blocks: u64) -> Result<u64> {
        let done = self
            .buffer
            .write_back_oldest(fs, &self.e, max_blocks, None, None)?;
        let done = done
            + DataPolicy::<D>::write_back(&self.e.hunter, fs, max_blocks.saturating_sub(done))?;
        Ok(done
            + self
                .e
                .lawn
                .write_back(fs, max_blocks.saturating_sub(done))?)
    }

    fn free_held_blocks(&self) -> u64 {
        DataPolicy::<D>::free_held_blocks(&self.e.hunter)
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let mut v = vec![
            ("zone_writes".to_string(), self.zone_writes.load(Relaxed)),
            ("log_writes".to_string(), self.log_writes.load(Relaxed)),
            ("settles".to_string(), self.settles.load(Relaxed)),
            ("zone_max_slices".to_string(), self.zone_max.load(Relaxed)),
            ("line_ps".to_string(), self.line_ps.load(Relaxed)),
            ("flush_ps".to_string(), self.flush_ps.load(Relaxed)),
        ];
        v.extend(self.buffer.stats());
        v.extend(DataPolicy::<D>::stats(&self.e.lawn));
        v.extend(DataPolicy::<D>::stats(&self.e.hunter));
        v
    }
}
