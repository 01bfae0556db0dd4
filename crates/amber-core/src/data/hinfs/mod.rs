//! The hinfs policy (HiNFS, EuroSys'16) and its two ablations: writes that
//! POSIX lets persist lazily are buffered in a DRAM block pool at
//! cache-line granularity and written back later (fsync, the background
//! threads, unmount); reads copy straight from DRAM and PM; writes that
//! must be durable on return, and writes the Buffer Benefit Model predicts
//! are cheaper direct, go straight to PM through the direct policy's code.
//!
//! Crash argument (docs/design.md, "hinfs policy"): `disk.size` is the
//! durable size and only grows over durable data (the durable-prefix
//! rule, kept by `writeback::persist_prefix`); everything past it, and
//! every dirty DRAM line, is invisible after a crash, so recovery sees an
//! older but consistent file, and every metadata transaction writes only
//! durable state (ordered mode).

mod buffer;
mod index;
pub(crate) mod options;
mod writeback;

use super::cost::{bbm, calibrate, lines_of, LINE, LINES};
use super::direct::{self, Direct};
use super::{DataPolicy, FallocStep};
use crate::data::Context;
use crate::error::{FsError, Result};
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use bbm::Costs;
use buffer::Pool;
use index::FileBuf;
pub use options::{BufferOptions, MAX_WRITEBACK_THREADS, MIN_BUFFER};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Which of the paper's configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// HiNFS: cache-line fetch and write-back, the eager checker on.
    Full,
    /// HiNFS-WB: every write buffered (the eager checker off).
    WriteBuffer,
    /// HiNFS-NCLFW: whole-block fetch and write-back.
    NoClfw,
}

/// Costs assumed when nothing was measured (no free block to calibrate
/// on, or the simulated clock): a ratio typical of PCM-class media, so the
/// model still discriminates.
const FALLBACK_COSTS: Costs = Costs {
    l_dram_ns: 5.0,
    l_pm_ns: 50.0,
};

/// Counters, for the workbench (`Core::policy_stats`).
#[derive(Default)]
struct Stats {
    lazy_writes: AtomicU64,
    eager_writes: AtomicU64,
    write_throughs: AtomicU64,
    lines_fetched: AtomicU64,
    lines_written_back: AtomicU64,
    blocks_written_back: AtomicU64,
    fsyncs: AtomicU64,
    decisions: AtomicU64,
    predictions: AtomicU64,
    accurate: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}

/// What the policy and its write-back threads share.
pub(super) struct Shared {
    variant: Variant,
    pool: Mutex<Pool>,
    /// Wakes the write-back threads (waited on with the pool lock).
    wake: Condvar,
    stop: AtomicBool,
    costs: Mutex<Costs>,
    /// Whether the calibration found PM slow enough for buffering to pay
    /// (`MIN_PM_DRAM_RATIO`); when not, hinfs writes everything directly
    /// (hinfs-wb still buffers: it is the ablation without the checker).
    buffering_pays: AtomicBool,
    /// `buffering=always`: the calibration does not switch buffering off.
    always_buffer: bool,
    stats: Stats,
    /// Free-block marks, in blocks.
    low: u32,
    high: u32,
    interval: Duration,
    age: Duration,
    lazy_after: Duration,
    threads: usize,
    /// The file-system-wide prior for files never synced (a mail spool
    /// creates a file, appends, fsyncs, and never writes it again: its own
    /// model never has history). What the latest fsync that decided
    /// anything decided for most blocks, valid for `lazy_after` after it.
    fs_prior_eager: AtomicBool,
    /// When that fsync ran, by `Clock::monotonic_ns` (0: never).
    fs_last_sync_ns: AtomicU64,
}

/// The policy.
pub struct Hinfs {
    shared: Arc<Shared>,
}

impl Hinfs {
    /// A policy with a pool of `opts.bytes` bytes (checked by
    /// `BufferOptions::validate`).
    pub fn new(variant: Variant, opts: &BufferOptions) -> Hinfs {
        let blocks = u32::try_from(opts.bytes / BLOCK_SIZE).unwrap_or(u32::MAX - 1);
        let pct = |p: u8| ((blocks as u64 * p as u64 / 100) as u32).max(1);
        Hinfs {
            shared: Arc::new(Shared {
                variant,
                pool: Mutex::new(Pool::new(blocks.max(1))),
                wake: Condvar::new(),
                stop: AtomicBool::new(false),
                costs: Mutex::new(FALLBACK_COSTS),
                buffering_pays: AtomicBool::new(true),
                always_buffer: opts.always,
                fs_prior_eager: AtomicBool::new(false),
                fs_last_sync_ns: AtomicU64::new(0),
                stats: Stats::default(),
                low: pct(opts.low),
                high: pct(opts.high),
                interval: opts.interval,
                age: opts.age,
                lazy_after: opts.lazy_after,
                threads: opts.threads,
            }),
        }
    }

    fn stop(&self) {
        self.shared.stop.store(true, Relaxed);
        // Taking the lock orders the store before a thread's re-check.
        let _p = self.shared.pool.lock();
        self.shared.wake.notify_all();
    }
}

impl Drop for Hinfs {
    /// The threads hold only a weak core handle: telling them to stop is
    /// enough; they exit at their next wake-up.
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    /// Whether a write to block `fb` goes directly to PM.
    fn eager(&self, file: &FileBuf, fb: u64, sync: bool, now: u64) -> bool {
        sync || (self.variant != Variant::WriteBuffer
            && (!self.buffering_pays.load(Relaxed) || self.predicted_eager(file, fb, now)))
    }

    /// The Buffer Benefit Model's prediction for a write to `fb`: the
    /// file's own history, or for a file never synced the file system's.
    fn predicted_eager(&self, file: &FileBuf, fb: u64, now: u64) -> bool {
        if file.model.has_synced() {
            return file.model.eager(fb, now, self.lazy_after);
        }
        let at = self.fs_last_sync_ns.load(Relaxed);
        at != 0 && bbm::within(now, at, self.lazy_after) && self.fs_prior_eager.load(Relaxed)
    }

    /// Copies lines `mask` of file block `fb` into buffer block `slot`
    /// from PM where they lie below the durable size and are mapped,
    /// zeros elsewhere (past the durable size PM may hold anything).
    fn fetch<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        p: &mut Pool,
        slot: u32,
        fb: u64,
        mask: u64,
    ) {
        let bstart = fb * BLOCK_SIZE;
        let pm = st.map.get(fb).map(|b| fs.layout().block_offset(b));
        let durable_in_block = st.disk.size.saturating_sub(bstart).min(BLOCK_SIZE);
        let blk = p.block_mut(slot);
        for (rs, re) in runs(mask) {
            let pm_end = durable_in_block.clamp(rs, re);
            if let (Some(at), true) = (pm, pm_end > rs) {
                fs.device()
                    .read(at + rs, &mut blk[rs as usize..pm_end as usize]);
            } else {
                blk[rs as usize..pm_end as usize].fill(0);
            }
            blk[pm_end as usize..re as usize].fill(0);
        }
        p.mark(slot, mask, false);
        bump(&self.stats.lines_fetched, mask.count_ones() as u64);
    }

    /// Writes `src` at byte `s` of file block `fb` into the buffer.
    /// Returns false (nothing done) if the block is not buffered and the
    /// pool is full: the caller writes it through, and the threads are
    /// woken to make room. The writer never evicts another file's block:
    /// that would need its inode lock while holding ours.
    fn buffer_write<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        file: &mut FileBuf,
        fb: u64,
        s: u64,
        src: &[u8],
    ) -> bool {
        let mut p = self.pool.lock();
        let slot = match file.blocks.get(&fb) {
            Some(&b) => b,
            None => {
                let got = p.alloc((st.ino, fb));
                if p.free_count() < self.low {
                    self.wake.notify_one();
                }
                match got {
                    Some(b) => {
                        file.blocks.insert(fb, b);
                        b
                    }
                    None => return false,
                }
            }
        };
        assert_eq!(p.owner(slot), Some((st.ino, fb)), "buffer block owner");
        let e = s + src.len() as u64;
        let touched = lines_of(s, e);
        let partial = match self.variant {
            Variant::NoClfw if s > 0 || e < BLOCK_SIZE => u64::MAX,
            Variant::NoClfw => 0,
            _ => {
                let first = if !s.is_multiple_of(LINE) {
                    1u64 << (s / LINE)
                } else {
                    0
                };
                let last = if !e.is_multiple_of(LINE) {
                    1u64 << ((e - 1) / LINE)
                } else {
                    0
                };
                first | last
            }
        };
        let fetch = partial & !p.valid(slot);
        if fetch != 0 {
            self.fetch(fs, st, &mut p, slot, fb, fetch);
        }
        p.block_mut(slot)[s as usize..e as usize].copy_from_slice(src);
        p.mark(slot, touched, true);
        p.touch(slot);
        file.dirty.insert(fb);
        true
    }

    /// Drops every buffered block of the file from file block `from` on,
    /// without writing it back.
    fn drop_from(&self, file: &mut FileBuf, from: u64) {
        file.dirty.split_off(&from);
        let gone = file.blocks.split_off(&from);
        let mut p = self.pool.lock();
        for (_, slot) in gone {
            p.release(slot);
        }
    }

    /// Writes back everything the file has buffered and evicts it, so
    /// the direct policy's operations see the whole file on PM.
    fn flush_and_evict<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        file: &mut FileBuf,
    ) -> Result<()> {
        let size = st.size();
        writeback::persist_prefix(self, fs, st, file, u64::MAX, size)?;
        self.drop_from(file, 0);
        assert!(
            st.buffered_size.is_none(),
            "a flushed file has no buffered size"
        );
        Ok(())
    }

    /// Direct (eager) write of `[off, off + data.len())`, none of whose
    /// blocks is buffered: first the buffered blocks below it are written
    /// back if the write grows the durable size (the durable-prefix
    /// rule), then the direct policy's write.
    fn direct_write<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        file: &mut FileBuf,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let first = off / BLOCK_SIZE;
        if end > st.disk.size {
            let target = st.size().min(first * BLOCK_SIZE);
            writeback::persist_prefix(self, fs, st, file, first, target)?;
        }
        Direct.write(fs, st, off, data, sync)?;
        st.buffered_size = st.buffered_size.filter(|&s| s > st.disk.size);
        bump(&self.stats.eager_writes, 1);
        if !self.buffering_pays.load(Relaxed) {
            // The model is not consulted: do not pay for feeding it.
            return Ok(());
        }
        for fb in off / BLOCK_SIZE..=(end - 1) / BLOCK_SIZE {
            let bstart = fb * BLOCK_SIZE;
            let (s, e) = (
                off.max(bstart) - bstart,
                end.min(bstart + BLOCK_SIZE) - bstart,
            );
            file.model.record_write(fb, lines_of(s, e), true);
        }
        Ok(())
    }

    fn write<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        file: &mut FileBuf,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let now = fs.clock().monotonic_ns();
        let mut buffered_any = false;
        // A run of consecutive blocks going straight to PM, written with
        // one direct write (one fence) when the run ends.
        let mut run: Option<(u64, u64)> = None;
        let mut pos = off;
        while pos < end {
            let fb = pos / BLOCK_SIZE;
            let bstart = fb * BLOCK_SIZE;
            let e = end.min(bstart + BLOCK_SIZE);
            let src = &data[(pos - off) as usize..(e - off) as usize];
            let eager = self.eager(file, fb, sync, now);
            if eager && file.blocks.contains_key(&fb) && !file.dirty.contains(&fb) {
                // A clean copy of a block about to be written directly:
                // PM holds the same bytes, so drop it instead of writing
                // into DRAM and back.
                self.drop_from_one(file, fb);
            }
            let buffered = file.blocks.contains_key(&fb);
            let direct = if eager && !buffered {
                true
            } else {
                if let Some((a, b)) = run.take() {
                    let d = &data[(a - off) as usize..(b - off) as usize];
                    self.direct_write(fs, st, file, a, d, sync)?;
                }
                if self.buffer_write(fs, st, file, fb, pos - bstart, src) {
                    if e > st.size() {
                        st.buffered_size = Some(e);
                    }
                    file.model
                        .record_write(fb, lines_of(pos - bstart, e - bstart), false);
                    buffered_any = true;
                    if eager {
                        // Written in DRAM; now durable, and out of the
                        // buffer before returning.
                        writeback::persist_block(self, fs, st, file, fb)?;
                        self.drop_from_one(file, fb);
                        bump(&self.stats.eager_writes, 1);
                    } else {
                        bump(&self.stats.lazy_writes, 1);
                    }
                    false
                } else {
                    bump(&self.stats.write_throughs, 1);
                    true
                }
            };
            if direct {
                run = Some(run.map_or((pos, e), |(a, _)| (a, e)));
            }
            pos = e;
        }
        if let Some((a, b)) = run {
            let d = &data[(a - off) as usize..(b - off) as usize];
            self.direct_write(fs, st, file, a, d, sync)?;
        }
        if buffered_any {
            touch_metadata(fs, st, sync)?;
        }
        Ok(())
    }

    /// Evicts one (clean) block.
    fn drop_from_one(&self, file: &mut FileBuf, fb: u64) {
        if let Some(slot) = file.blocks.remove(&fb) {
            let mut p = self.pool.lock();
            assert!(
                p.dirty(slot) == 0 && !file.dirty.contains(&fb),
                "evicting a dirty block"
            );
            p.release(slot);
        }
    }

    /// Reads `[off, off + buf.len())`, all below the logical size: per
    /// cache line from DRAM if valid there, else from PM below the durable
    /// size, else zeros, one copy per run of lines in the same place.
    fn read<D: PmDevice>(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) {
        let file = index::get(st);
        let end = off + buf.len() as u64;
        let mut pos = off;
        while pos < end {
            let fb = pos / BLOCK_SIZE;
            let bstart = fb * BLOCK_SIZE;
            let e = end.min(bstart + BLOCK_SIZE);
            let dst = &mut buf[(pos - off) as usize..(e - off) as usize];
            match file.and_then(|f| f.blocks.get(&fb)) {
                None => read_pm(fs, st, pos, dst),
                Some(&slot) => {
                    let p = self.pool.lock();
                    let valid = p.valid(slot);
                    let (s, e) = (pos - bstart, e - bstart);
                    let mut at = s;
                    while at < e {
                        // Extend a run of lines with the same source.
                        let line = at / LINE;
                        let in_dram = valid >> line & 1 == 1;
                        let mut stop = ((line + 1) * LINE).min(e);
                        while stop < e && (valid >> (stop / LINE) & 1 == 1) == in_dram {
                            stop = ((stop / LINE + 1) * LINE).min(e);
                        }
                        let d = &mut dst[(at - s) as usize..(stop - s) as usize];
                        if in_dram {
                            d.copy_from_slice(&p.block(slot)[at as usize..stop as usize]);
                        } else {
                            read_pm(fs, st, bstart + at, d);
                        }
                        at = stop;
                    }
                }
            }
            pos = e;
        }
    }

    /// At an fsync: the model's verdicts, then everything written back.
    fn fsync<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        file: &mut FileBuf,
    ) -> Result<()> {
        if self.variant != Variant::WriteBuffer {
            let now = fs.clock().monotonic_ns();
            let costs = *self.costs.lock();
            let v = {
                let p = self.pool.lock();
                let blocks = &file.blocks;
                file.model.sync(now, costs, |fb| {
                    blocks.get(&fb).map_or(0, |&slot| p.dirty(slot))
                })
            };
            bump(&self.stats.decisions, v.decisions);
            bump(&self.stats.predictions, v.predicted);
            bump(&self.stats.accurate, v.accurate);
            if v.decisions > 0 {
                self.fs_prior_eager
                    .store(v.eager * 2 > v.decisions, Relaxed);
                self.fs_last_sync_ns.store(now.max(1), Relaxed);
            }
        }
        let size = st.size();
        writeback::persist_prefix(self, fs, st, file, u64::MAX, size)?;
        bump(&self.stats.fsyncs, 1);
        Direct.fsync(fs, st)
    }

    /// Calibrates the model at mount (`calibrate::measure`) and, unless
    /// told to buffer always, turns buffering off where it cannot pay.
    fn calibrate<D: PmDevice>(&self, fs: Context<'_, D>) -> Result<()> {
        let Some(m) = calibrate::measure(fs)? else {
            return Ok(());
        };
        let c = m.costs;
        if !self.always_buffer {
            self.buffering_pays
                .store(calibrate::buffering_pays(c), Relaxed);
        }
        *self.costs.lock() = c;
        Ok(())
    }
}

/// Reads `dst.len()` bytes at `off` from PM below the durable size and
/// as zeros past it (or in a hole).
fn read_pm<D: PmDevice>(fs: Context<'_, D>, st: &InodeState, off: u64, dst: &mut [u8]) {
    let durable = st.disk.size;
    let n = durable.saturating_sub(off).min(dst.len() as u64) as usize;
    let (pm, zero) = dst.split_at_mut(n);
    if n > 0 {
        let fb = off / BLOCK_SIZE;
        match st.map.get(fb) {
            Some(b) => fs
                .device()
                .read(fs.layout().block_offset(b) + off % BLOCK_SIZE, pm),
            None => pm.fill(0),
        }
    }
    zero.fill(0);
}

/// Runs of set bits of `mask` as byte ranges `[start, end)` of a block.
fn runs(mask: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let first = m.trailing_zeros() as u64;
        let len = (m >> first).trailing_ones() as u64;
        m &= if first + len >= LINES {
            0
        } else {
            !((1u64 << (first + len)) - 1)
        };
        Some((first * LINE, (first + len) * LINE))
    })
}

/// After a buffered write: times in DRAM (persisted by fsync, write-back
/// growing the size, or the inode's next transaction) unless the write is
/// sync (O_SYNC, `-o sync`, durability=sync: data, size and times durable
/// on return), and the POSIX kill-privileges rule, persisted at once when
/// it changes the mode so no crash shows the set-id bits on a file already
/// written.
fn touch_metadata<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState, sync: bool) -> Result<()> {
    if direct::note_write(fs, st) || sync {
        direct::store_first_line(fs, st)?;
        st.times_dirty = false;
    } else {
        st.times_dirty = true;
    }
    Ok(())
}

impl<D: PmDevice> DataPolicy<D> for Hinfs {
    fn name(&self) -> &'static str {
        match self.shared.variant {
            Variant::Full => "hinfs",
            Variant::WriteBuffer => "hinfs-wb",
            Variant::NoClfw => "hinfs-nclfw",
        }
    }

    fn read(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        let size = st.size();
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        self.shared.read(fs, st, off, &mut buf[..n]);
        Ok(n)
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        index::with(st, |st, file| {
            self.shared.write(fs, st, file, off, data, sync)
        })?;
        Ok(data.len())
    }

    /// The eager path: `direct`'s write, after the buffered blocks below
    /// it when it grows the durable size (none of the range is buffered:
    /// pinned blocks never are).
    fn write_in_place(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        index::with(st, |st, file| {
            self.shared.direct_write(fs, st, file, off, data, sync)
        })?;
        Ok(data.len())
    }

    /// The file's buffer is written back and evicted: a mapping must find
    /// the newest bytes on PM, and a later write-back in place would
    /// overwrite a program's stores.
    fn pin(&self, fs: Context<'_, D>, st: &mut InodeState, _first: u64, _count: u64) -> Result<()> {
        if st.policy.is_none() {
            return Ok(());
        }
        index::with(st, |st, file| self.shared.flush_and_evict(fs, st, file))
    }

    /// Blocks past the new size are dropped unwritten; the rest of the
    /// file is written back and evicted, and the direct policy truncates
    /// the (now whole) file on PM.
    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        if size > MAX_FILE_SIZE {
            return Err(FsError::FileTooLarge);
        }
        index::with(st, |st, file| {
            let keep = size.div_ceil(BLOCK_SIZE);
            self.shared.drop_from(file, keep);
            file.model.truncate(keep);
            if st.size() > size {
                st.buffered_size = Some(size).filter(|&s| s > st.disk.size);
            }
            self.shared.flush_and_evict(fs, st, file)
        })?;
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
        index::with(st, |st, file| self.shared.flush_and_evict(fs, st, file))?;
        Direct.fallocate(fs, st, off, len, mode)
    }

    /// A sync write makes its own range durable (data, size, times), not
    /// what earlier writes left in the buffer: the front end must still
    /// call fsync, and must not send every write sync (that would turn
    /// the buffer off).
    fn sync_writes_are_complete(&self) -> bool {
        false
    }

    fn durable_on_return(&self) -> bool {
        false
    }

    fn fsync(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        if st.policy.is_none() {
            return Direct.fsync(fs, st);
        }
        index::with(st, |st, file| self.shared.fsync(fs, st, file))
    }

    fn mounted(&self, fs: Context<'_, D>) -> Result<()> {
        self.shared.calibrate(fs)
    }

    fn spawn(&self, core: Weak<Core<D>>) {
        writeback::spawn(&self.shared, core);
    }

    fn unmount(&self, _fs: Context<'_, D>) {
        self.stop();
    }

    fn forget(&self, _fs: Context<'_, D>, st: &mut InodeState) {
        if st.policy.is_some() {
            index::with(st, |_, file| self.shared.drop_from(file, 0));
        }
        st.policy = None;
        st.buffered_size = None;
    }

    fn next_data_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        let mapped = st.map.next_mapped(fb, limit);
        let buffered =
            index::get(st).and_then(|f| f.blocks.range(fb..limit).next().map(|(b, _)| *b));
        match (mapped, buffered) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn next_hole_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        let Some(file) = index::get(st) else {
            return st.map.next_hole(fb, limit);
        };
        let mut at = fb;
        // Each step passes one buffered block: bounded by their number.
        for _ in 0..=file.blocks.len() {
            let h = st.map.next_hole(at, limit)?;
            if !file.blocks.contains_key(&h) {
                return Some(h);
            }
            at = h + 1;
        }
        unreachable!("more buffered blocks than the file has")
    }

    fn write_back(&self, fs: Context<'_, D>, max_blocks: u64) -> Result<u64> {
        writeback::evict_oldest(fs, &self.shared, max_blocks)
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = &self.shared.stats;
        let c = *self.shared.costs.lock();
        let p = self.shared.pool.lock();
        [
            ("lazy_writes", s.lazy_writes.load(Relaxed)),
            ("eager_writes", s.eager_writes.load(Relaxed)),
            ("write_throughs", s.write_throughs.load(Relaxed)),
            ("lines_fetched", s.lines_fetched.load(Relaxed)),
            ("lines_written_back", s.lines_written_back.load(Relaxed)),
            ("blocks_written_back", s.blocks_written_back.load(Relaxed)),
            ("fsyncs", s.fsyncs.load(Relaxed)),
            ("bbm_decisions", s.decisions.load(Relaxed)),
            ("bbm_predictions", s.predictions.load(Relaxed)),
            ("bbm_accurate", s.accurate.load(Relaxed)),
            ("buffer_blocks", p.capacity() as u64),
            ("buffer_free", p.free_count() as u64),
            (
                "buffer_on",
                u64::from(self.shared.buffering_pays.load(Relaxed)),
            ),
            ("l_dram_ps", (c.l_dram_ns * 1000.0) as u64),
            ("l_pm_ps", (c.l_pm_ns * 1000.0) as u64),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_split_a_bitmap() {
        assert_eq!(runs(0).count(), 0);
        assert_eq!(runs(0b1101).collect::<Vec<_>>(), vec![(0, 64), (128, 256)]);
        assert_eq!(runs(u64::MAX).collect::<Vec<_>>(), vec![(0, 4096)]);
        assert_eq!(runs(1 << 63).collect::<Vec<_>>(), vec![(4032, 4096)]);
    }
}
