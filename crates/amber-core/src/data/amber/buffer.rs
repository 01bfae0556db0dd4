//! amber's DRAM write buffer (docs/design.md §13.4): writes POSIX lets
//! persist lazily are held in DRAM as block images (`image.rs`) where
//! buffering pays on this device (HiNFS's calibration and Buffer Benefit
//! Model), and a file's buffered blocks go to PM together as one change —
//! in place under a journal transaction (`redo.rs`) or out of place as one
//! hunter change (`Hunter::write_blocks`, hunter/engine.rs) — so every
//! write() stays atomic across a crash.
//!
//! Invariant: while a file has buffered blocks, nothing else of it goes to
//! PM first. Every other write, truncate, fallocate, setattr, fsync and
//! unmount writes the file's buffer back before it acts, and a write-back
//! takes all of the file's blocks, so every hunter snapshot of the file —
//! whose size is the DRAM size, covering buffered appends — is queued
//! after the records of every block it covers, with the same or a later
//! seq. Hence no durable size ever covers a block still in DRAM.
//!
//! Where it lives: a file's buffered blocks and model are kept with its
//! DRAM inode (hunter's per-file `FileState`, `Hunter::extra`), under the inode's lock, so a read or
//! write reaches them without a lock of the buffer's. The buffer itself
//! keeps only the capacity, the spare images and `oldest`, the files
//! holding blocks with the age of their oldest data (the write-back's
//! victims); that map's mutex is held only briefly and never while an
//! inode lock is taken.

use super::super::control::Control;
use super::super::cost::bbm::{Costs, FileModel};
use super::super::cost::{calibrate, lines_of, LINE};
use super::super::lawn::read_over;
use super::super::{block_runs, BufferOptions, DataPolicy};
use super::image::{edge_lines, fetch_range, Block, ALL};
use super::redo;
use super::table::Table;
use super::AmberBuffer;
use super::{AmberHunter, Engines};
use crate::data::control::spawn as spawn_thread;
use crate::data::hunter;
use crate::data::Context;
use crate::error::Result;
use crate::fs::Core;
use crate::inode::InodeState;
use crate::time::ClockSource;
use amber_format::{FileKind, BLOCK_SIZE};
use amber_pmem::PmDevice;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// One file's buffered blocks and its Buffer Benefit Model.
#[derive(Default)]
pub(super) struct FileBuf {
    blocks: Table<Block>,
    model: FileModel,
    /// The block holding the end of the file's last buffered write. An
    /// fsync's write-back keeps its image, clean: a stream of writes (a
    /// log, SQLite's WAL) continues in that block, which would otherwise
    /// be read back from PM, where the write-back just streamed it past
    /// the cache.
    tail: Option<u64>,
    /// Whether a buffered write moved the size since the last write-back:
    /// then the change cannot go back in place (`redo::plan`).
    grew: bool,
    /// Where the last buffered write ended, and where the last one before
    /// the previous fsync did (`prefetch_next`).
    last_end: u64,
    synced_end: u64,
}

/// What amber keeps per file with hunter's state: the file's buffer, made
/// at its first buffered write (most files never have one).
pub(super) type FileState = Option<Box<FileBuf>>;

/// The file's buffer state, if it has any.
fn file_of(st: &InodeState) -> Option<&FileBuf> {
    AmberHunter::extra(st)?.as_deref()
}

/// The file's buffer state, if it has any, to change.
fn existing_mut(st: &mut InodeState) -> Option<&mut FileBuf> {
    AmberHunter::extra_mut(st)?.as_deref_mut()
}

/// The file's buffer state, made (with the file's hunter state) if it
/// has none yet.
fn file_mut<'a, D: PmDevice>(
    fs: Context<'_, D>,
    eng: &Engines,
    st: &'a mut InodeState,
) -> Result<&'a mut FileBuf> {
    assert_eq!(
        st.kind(),
        FileKind::Regular,
        "only regular files are buffered"
    );
    Ok(eng
        .hunter
        .extra_loaded(fs, st)?
        .get_or_insert_with(Box::default))
}

/// The buffer: shared with its write-back thread.
pub(super) struct Buffer {
    mode: AmberBuffer,
    /// `auto`: whether the calibration found PM slow enough for buffering
    /// to pay at all (`calibrate::buffering_pays`); false until measured.
    pays: AtomicBool,
    costs: Mutex<Costs>,
    /// Most blocks held (`buffer=`), and how many are.
    capacity: u64,
    held: AtomicU64,
    /// Files holding buffered blocks, and when their oldest buffered data
    /// was written: an entry is added and removed under the file's inode
    /// write lock, with its first block and its write-back.
    oldest: Mutex<FxHashMap<u64, Instant>>,
    /// Images of blocks that left the buffer, for the next ones
    /// (`recycle`).
    spare: Mutex<Vec<Box<[u8]>>>,
    /// Data older than this is written back by the thread (`writeback_age`),
    /// which looks every `writeback_interval`.
    age: Duration,
    interval: Duration,
    lazy_after: Duration,
    control: Control,
    buffered_writes: AtomicU64,
    write_backs: AtomicU64,
    blocks_written_back: AtomicU64,
    /// Write-backs that went in place under a journal transaction.
    in_place: AtomicU64,
    unbuffered_full: AtomicU64,
}

/// Reads from PM only: the zone's slices over hunter's blocks.
pub(super) fn read_unbuffered<D: PmDevice>(
    fs: Context<'_, D>,
    eng: &Engines,
    st: &InodeState,
    off: u64,
    buf: &mut [u8],
) -> Result<usize> {
    read_over(fs, st, off, buf, &|pos, b| {
        DataPolicy::<D>::read(&eng.hunter, fs, st, pos, b)
    })
}

/// The file's `dirty` blocks as a write-back takes them: file block,
/// image, dirty lines.
fn changed<'a>(file: &'a FileBuf, dirty: &[u64]) -> Vec<redo::Dirty<'a>> {
    dirty
        .iter()
        .map(|&fb| {
            let b = file.blocks.get(fb).expect("a dirty block is held");
            (fb, &b.image[..], b.dirty)
        })
        .collect()
}

/// After an fsync wrote the file's buffer back: a file written as a
/// stream of records with an fsync after each (a log; SQLite's WAL, whose
/// frames are 4,120 bytes) will end its next record as far past this
/// one's end as this one is past the last's. Where that is mid-line, the
/// next record's write must read that line (`fill`'s edge fetch), cold on
/// PM; its load starts now, while the program works on the record.
fn prefetch_next<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState) {
    let size = st.disk.size;
    let Some(file) = existing_mut(st) else {
        return;
    };
    let end = file.last_end;
    let last = std::mem::replace(&mut file.synced_end, end);
    let Some(at) = next_record_end(last, end, size) else {
        return;
    };
    if let Some(b) = hunter::block_of::<FileState>(st, at / BLOCK_SIZE) {
        let line = at % BLOCK_SIZE / LINE * LINE;
        fs.device()
            .prefetch(fs.layout().block_offset(b) + line, LINE);
    }
}

/// Where the next record of a stream ends if it is as long as the one
/// that ended at `end` after one that ended at `last`, when that is inside
/// a line the next write will read: mid-line and below the file's `size`
/// (past it a block's lines are zeros, held without a read).
fn next_record_end(last: u64, end: u64, size: u64) -> Option<u64> {
    let stride = end.checked_sub(last).filter(|&s| s > 0)?;
    let at = end.checked_add(stride)?;
    (!at.is_multiple_of(LINE) && at < size).then_some(at)
}

/// Records in the model a write that goes through to PM: the ghost lines
/// HiNFS keeps for direct writes, so a block predicted eager is decided
/// again at the next fsync.
fn record_through(model: &mut FileModel, off: u64, end: u64) {
    for fb in off / BLOCK_SIZE..=(end - 1) / BLOCK_SIZE {
        let bstart = fb * BLOCK_SIZE;
        let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
        model.record_write(fb, lines_of(s - bstart, e - bstart), true);
    }
}

impl Buffer {
    pub fn new(opts: &BufferOptions, mode: AmberBuffer) -> Buffer {
        Buffer {
            mode,
            pays: AtomicBool::new(mode == AmberBuffer::Model),
            costs: Mutex::new(Costs {
                l_dram_ns: 0.0,
                l_pm_ns: 0.0,
            }),
            capacity: opts.bytes / BLOCK_SIZE,
            held: AtomicU64::new(0),
            oldest: Mutex::new(FxHashMap::default()),
            spare: Mutex::new(Vec::new()),
            age: opts.age,
            interval: opts.interval,
            lazy_after: opts.lazy_after,
            control: Control::default(),
            buffered_writes: AtomicU64::new(0),
            write_backs: AtomicU64::new(0),
            blocks_written_back: AtomicU64::new(0),
            in_place: AtomicU64::new(0),
            unbuffered_full: AtomicU64::new(0),
        }
    }

    /// Takes the costs measured at mount (`calibrate::measure`, as hinfs
    /// does); under `auto` they decide whether buffering can pay. Never
    /// called under the simulated clock, so `auto` then never buffers
    /// (crash runs stay a function of their seed).
    pub fn calibrated(&self, c: Costs) {
        if self.mode == AmberBuffer::Auto {
            self.pays.store(calibrate::buffering_pays(c), Relaxed);
        }
        *self.costs.lock() = c;
    }

    /// Whether writes that may persist lazily are buffered at all.
    fn buffering(&self) -> bool {
        match self.mode {
            AmberBuffer::Never => false,
            AmberBuffer::Always => true,
            AmberBuffer::Auto | AmberBuffer::Model => self.pays.load(Relaxed),
        }
    }

    /// Whether HiNFS's model decides which blocks are buffered: under
    /// `model`, and under `auto` where buffering pays. Elsewhere nothing
    /// reads the model, so writes are not recorded in it.
    fn modelled(&self) -> bool {
        matches!(self.mode, AmberBuffer::Auto | AmberBuffer::Model) && self.buffering()
    }

    /// Whether the file holds buffered blocks.
    pub fn holds(&self, st: &InodeState) -> bool {
        self.held.load(Relaxed) > 0 && file_of(st).is_some_and(|f| !f.blocks.is_empty())
    }

    /// Runs `f` on the file's buffer state taken out of its inode (which
    /// is write-locked), so `f` may use the inode too, and puts it back.
    fn with_file<D: PmDevice, R>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        f: impl FnOnce(&mut FileBuf, &mut InodeState) -> Result<R>,
    ) -> Result<R> {
        let mut file = std::mem::take(file_mut(fs, eng, st)?);
        let r = f(&mut file, st);
        *file_mut(fs, eng, st)? = file;
        r
    }

    /// Takes `n` blocks of the capacity; false if they are not free.
    fn reserve(&self, n: u64) -> bool {
        self.held
            .fetch_update(Relaxed, Relaxed, |h| {
                h.checked_add(n).filter(|&t| t <= self.capacity)
            })
            .is_ok()
    }

    fn unreserve(&self, n: u64) {
        self.held.fetch_sub(n, Relaxed);
    }

    /// Whether a write of blocks `first..=last` may be buffered, and
    /// whether the model decides it: regular files, never a sync write;
    /// where buffering pays (`auto` on slow PM, `always`, `model`) as
    /// HiNFS decides; where it does not (`auto` on DRAM-speed PM), only to
    /// coalesce a stream of partial overwrites — a `stream` write (the
    /// caller's judgement: §13.4 "Coalescing") or one into a block the
    /// file's buffer holds.
    fn route(
        &self,
        st: &InodeState,
        first: u64,
        last: u64,
        sync: bool,
        stream: bool,
    ) -> (bool, bool) {
        let regular = st.kind() == FileKind::Regular;
        let pays = self.buffering();
        let modelled = regular && self.modelled();
        let coalesce = self.mode == AmberBuffer::Auto
            && !pays
            && (stream
                || file_of(st).is_some_and(|f| f.blocks.first_in(first, last + 1).is_some()));
        (regular && !sync && (pays || coalesce), modelled)
    }

    /// Buffers a write if it goes into the buffer (`route`) and, under the
    /// model, it predicts every block of it lazy. Returns false when it
    /// does not (nothing buffered): the file's buffer has then been
    /// written back and, under the model, the write recorded (the ghost
    /// lines HiNFS keeps for direct writes), so the caller writes it
    /// through. The file's state is reached through its inode, with no
    /// lock of the buffer's; the block images come from the spare list.
    #[allow(clippy::too_many_arguments)]
    pub fn write<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
        stream: bool,
    ) -> Result<bool> {
        let end = off + data.len() as u64;
        let (first, last) = (off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE);
        let (may_buffer, modelled) = self.route(st, first, last, sync, stream);
        if !may_buffer && !modelled {
            self.flush(fs, eng, st)?;
            return Ok(false);
        }
        let lazy = |f: &FileBuf| {
            let now = fs.clock().monotonic_ns();
            (first..=last).all(|fb| !f.model.eager(fb, now, self.lazy_after))
        };
        let missing = |f: Option<&FileBuf>| -> Vec<u64> {
            (first..=last)
                .filter(|&fb| f.is_none_or(|f| !f.blocks.contains(fb)))
                .collect()
        };
        let decided = if may_buffer && (!modelled || file_of(st).is_none_or(lazy)) {
            Some(missing(file_of(st)))
        } else {
            if let Some(f) = existing_mut(st) {
                record_through(&mut f.model, off, end);
            }
            None
        };
        let Some(mut fresh) = decided else {
            self.flush(fs, eng, st)?;
            return Ok(false);
        };
        let mut new = fresh.len() as u64;
        if new > self.capacity || !self.reserve(new) {
            if new <= self.capacity {
                self.write_back_oldest(fs, eng, new, None, Some(st))?;
                fresh = missing(file_of(st));
                new = fresh.len() as u64;
            }
            if new > self.capacity || !self.reserve(new) {
                self.unbuffered_full.fetch_add(1, Relaxed);
                if let Some(f) = existing_mut(st).filter(|_| modelled) {
                    record_through(&mut f.model, off, end);
                }
                self.flush(fs, eng, st)?;
                return Ok(false);
            }
        }
        let r = self.fill(fs, eng, st, off, data, &fresh);
        if r.is_err() {
            self.unreserve(new);
        }
        r.map(|()| true)
    }

    /// `n` block images from the spare list, else new: the list's last
    /// first, so consecutive blocks get the images `recycle` put back for
    /// consecutive blocks, in their order (a read of them then walks
    /// memory upwards; handed out backwards, buffered reads of 64 KiB
    /// and 1 MiB records ran at two thirds the speed).
    fn images(&self, n: usize) -> Vec<Box<[u8]>> {
        let mut out = {
            let mut spare = self.spare.lock();
            let keep = spare.len().saturating_sub(n);
            let mut taken = spare.split_off(keep);
            taken.reverse();
            taken
        };
        while out.len() < n {
            out.push(vec![0u8; BLOCK_SIZE as usize].into_boxed_slice());
        }
        out
    }

    /// Gives images of blocks that left the buffer to the spare list, so
    /// the next buffered blocks neither allocate nor fault in memory: the
    /// list holds at most the capacity's blocks, as hinfs's pool does.
    /// Callers give a file's images last block first (see `images`).
    fn recycle(&self, images: impl Iterator<Item = Box<[u8]>>) {
        let mut spare = self.spare.lock();
        spare.extend(images);
        assert!(
            spare.len() as u64 <= self.capacity,
            "spare images beyond the buffer's capacity"
        );
    }

    /// Puts the write's bytes into the file's images: first the lines it
    /// covers in part and no image holds are fetched (`edge_lines`: at
    /// most two), the blocks it does not hold yet made (`Block::fresh`);
    /// all fallible steps come before any block is added, so an error
    /// leaves the entry as it was.
    fn fill<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        fresh: &[u64],
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let (first, last) = (off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE);
        let size = st.disk.size;
        let within = |fb: u64| size.saturating_sub(fb * BLOCK_SIZE).min(BLOCK_SIZE);
        let mut edges = Vec::with_capacity(2);
        let prepared = (|| {
            if end > size {
                // As a growing log write does: the slice holding the old
                // end would hide bytes past it, and the old last block's
                // bytes past the size must read as zeros once the size
                // covers them.
                eng.lawn.flush_from(fs, st, size)?;
                eng.hunter.zero_past_size(fs, st, end)?;
            }
            for (fb, line) in edge_lines(off, end) {
                let held = match file_of(st).and_then(|f| f.blocks.get(fb)) {
                    Some(b) => b.held,
                    None => Block::fresh_lines(within(fb)),
                };
                if held >> line & 1 == 0 {
                    edges.push((
                        fb,
                        line,
                        self.fetch_line(fs, eng, st, fb, line, within(fb))?,
                    ));
                }
            }
            eng.hunter.note_write(fs, st)?;
            file_mut(fs, eng, st).map(drop)
        })();
        prepared?;
        let images = self.images(fresh.len());
        let model = self.modelled();
        let was_empty = file_of(st).is_none_or(|f| f.blocks.is_empty());
        let file = file_mut(fs, eng, st)?;
        for (&fb, image) in fresh.iter().zip(images) {
            file.blocks.insert(fb, Block::fresh(image, within(fb)));
        }
        for (fb, line, bytes) in &edges {
            let b = file.blocks.get_mut(*fb).expect("an edge's block is held");
            b.hold_line(*line, bytes);
        }
        for fb in first..=last {
            let bstart = fb * BLOCK_SIZE;
            let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
            let b = file
                .blocks
                .get_mut(fb)
                .expect("every block of a buffered write is held");
            let lines = b.write(s - bstart, &data[(s - off) as usize..(e - off) as usize]);
            if model {
                file.model.record_write(fb, lines, false);
            }
        }
        file.tail = Some(last);
        file.last_end = end;
        file.grew |= end > size;
        if was_empty {
            self.oldest.lock().insert(st.ino, Instant::now());
        }
        st.disk.size = size.max(end);
        self.buffered_writes.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Line `line` of file block `fb` from PM (the zone's slices over the
    /// file's block): its bytes below `n`, the file's size within the
    /// block, and zeros past it.
    fn fetch_line<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &InodeState,
        fb: u64,
        line: u64,
        n: u64,
    ) -> Result<[u8; LINE as usize]> {
        let mut bytes = [0u8; LINE as usize];
        let bstart = fb * BLOCK_SIZE;
        fetch_range(line * LINE, n, &mut bytes, &mut |at, out| {
            read_unbuffered(fs, eng, st, bstart + at, out).map(drop)
        })?;
        Ok(bytes)
    }

    /// Writes every dirty buffered block of the file to PM as one change
    /// (`write_dirty`), after the zone's slices of those blocks went back
    /// (a slot must not lie over the block with older bytes), and empties the
    /// file's buffer but for, with `keep_tail`, a clean image of its tail
    /// block; returns how many blocks left it. All or nothing, never part
    /// of a file: a durable size covering a block still in DRAM would show
    /// zeros after a crash.
    fn write_back_file<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        file: &mut FileBuf,
        keep_tail: bool,
    ) -> Result<u64> {
        if file.blocks.is_empty() {
            return Ok(0);
        }
        let dirty: Vec<u64> = file
            .blocks
            .iter()
            .filter(|(_, b)| b.dirty != 0)
            .map(|(fb, _)| fb)
            .collect();
        let written = dirty.len() as u64;
        if written > 0 {
            for (first, n) in block_runs(dirty.iter().copied()) {
                eng.lawn.flush_blocks(fs, st, first, first + n - 1)?;
            }
            self.write_dirty(fs, eng, st, file, &dirty)?;
            self.write_backs.fetch_add(1, Relaxed);
            self.blocks_written_back.fetch_add(written, Relaxed);
        }
        file.grew = false;
        let kept = match (keep_tail, file.tail.take()) {
            (true, Some(fb)) => file.blocks.remove(fb).map(|b| (fb, b)),
            _ => None,
        };
        let left = file.blocks.len() as u64;
        self.unreserve(left);
        self.recycle(file.blocks.drain_backwards().map(|b| b.image));
        if !file.model.has_synced() {
            // A file never synced has no history worth its memory.
            file.model = FileModel::default();
        }
        let mut oldest = self.oldest.lock();
        match kept {
            Some((fb, b)) => {
                file.blocks.insert(fb, Block { dirty: 0, ..b });
                file.tail = Some(fb);
                // Dropped, unwritten, once it is as old as data would be
                // written back, or to make room.
                oldest.insert(st.ino, Instant::now());
            }
            None => {
                oldest.remove(&st.ino);
            }
        }
        Ok(left)
    }

    /// Writes the file's `dirty` blocks to PM as one change: in place
    /// under one journal transaction if it is a small overwrite (§18),
    /// else out of place, every line of their images fetched first.
    fn write_dirty<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        file: &mut FileBuf,
        dirty: &[u64],
    ) -> Result<()> {
        if let Some(mut tx) = redo::plan(fs, st, &changed(file, dirty), file.grew) {
            // The queue persisted first: the blocks durable where the
            // index says, no own-commit record vouching for their old
            // bytes; the times commit with the bytes.
            eng.hunter.attrs_in_tx(fs, st, &mut tx)?;
            fs.commit(tx)?;
            self.in_place.fetch_add(1, Relaxed);
            return Ok(());
        }
        for &fb in dirty {
            let bstart = fb * BLOCK_SIZE;
            let n = st.disk.size.saturating_sub(bstart).min(BLOCK_SIZE);
            let b = file.blocks.get_mut(fb).expect("a dirty block is held");
            b.fetch(ALL, n, |at, out| {
                read_unbuffered(fs, eng, st, bstart + at, out).map(drop)
            })?;
        }
        let images: Vec<(u64, &[u8])> = changed(file, dirty)
            .into_iter()
            .map(|(fb, image, _)| (fb, image))
            .collect();
        eng.hunter.write_blocks(fs, st, &images, false)
    }

    /// Writes the file's buffer back, if it holds any: before anything
    /// else of the file goes to PM (the invariant above). A clean tail
    /// block goes too: PM is about to change under it.
    pub fn flush<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
    ) -> Result<()> {
        self.write_back(fs, eng, st, false).map(drop)
    }

    /// The file's buffer written back, if it holds any, keeping a clean
    /// image of its tail block if `keep_tail`.
    fn write_back<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        keep_tail: bool,
    ) -> Result<u64> {
        if !self.holds(st) {
            return Ok(0);
        }
        self.with_file(fs, eng, st, |file, st| {
            self.write_back_file(fs, eng, st, file, keep_tail)
        })
    }

    /// At an fsync: the model's verdicts (under `auto`), then the file's
    /// buffer written back.
    pub fn fsync<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
    ) -> Result<()> {
        if self.modelled() {
            let costs = *self.costs.lock();
            let file = file_mut(fs, eng, st)?;
            let blocks = &file.blocks;
            file.model.sync(fs.clock().monotonic_ns(), costs, |fb| {
                blocks.get(fb).map_or(0, |b| b.dirty)
            });
            if file.blocks.is_empty() {
                return Ok(());
            }
        }
        if self.write_back(fs, eng, st, true)? > 0 {
            prefetch_next(fs, st);
        }
        Ok(())
    }

    /// Before a truncate to `size`: the buffer written back, and the
    /// model's history past the new end forgotten.
    pub fn truncate<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
        size: u64,
    ) -> Result<()> {
        self.flush(fs, eng, st)?;
        if let Some(f) = existing_mut(st).filter(|_| self.modelled()) {
            f.model.truncate(size.div_ceil(BLOCK_SIZE));
        }
        Ok(())
    }

    /// The file is freed: its buffered blocks are dropped unwritten.
    pub fn forget(&self, st: &mut InodeState) {
        let ino = st.ino;
        let Some(f) = existing_mut(st) else {
            return;
        };
        self.oldest.lock().remove(&ino);
        self.unreserve(f.blocks.len() as u64);
        self.recycle(f.blocks.drain_backwards().map(|b| b.image));
    }

    /// Reads each byte once, from where its newest copy is: a buffered
    /// block's image, else PM (zone over blocks).
    pub fn read<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &InodeState,
        off: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let size = st.disk.size;
        if off >= size || buf.is_empty() || self.held.load(Relaxed) == 0 {
            return read_unbuffered(fs, eng, st, off, buf);
        }
        let Some(file) = file_of(st).filter(|f| !f.blocks.is_empty()) else {
            return read_unbuffered(fs, eng, st, off, buf);
        };
        let n = (buf.len() as u64).min(size - off) as usize;
        let end = off + n as u64;
        let first = off / BLOCK_SIZE;
        if first == (end - 1) / BLOCK_SIZE {
            // Inside one block, the common read: one lookup, where a range
            // would search for both of its bounds.
            let Some(b) = file.blocks.get(first) else {
                return read_unbuffered(fs, eng, st, off, &mut buf[..n]);
            };
            let bstart = first * BLOCK_SIZE;
            b.read(off - bstart, &mut buf[..n], |at, out| {
                read_unbuffered(fs, eng, st, bstart + at, out).map(drop)
            })?;
            return Ok(n);
        }
        let mut pos = off;
        let held =
            (first..=(end - 1) / BLOCK_SIZE).filter_map(|fb| Some((fb, file.blocks.get(fb)?)));
        for (fb, b) in held {
            let bstart = fb * BLOCK_SIZE;
            let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
            if pos < s {
                read_unbuffered(
                    fs,
                    eng,
                    st,
                    pos,
                    &mut buf[(pos - off) as usize..(s - off) as usize],
                )?;
            }
            let out = &mut buf[(s - off) as usize..(e - off) as usize];
            b.read(s - bstart, out, |at, out| {
                read_unbuffered(fs, eng, st, bstart + at, out).map(drop)
            })?;
            pos = e;
        }
        if pos < end {
            read_unbuffered(fs, eng, st, pos, &mut buf[(pos - off) as usize..n])?;
        }
        Ok(n)
    }

    /// The file's first buffered block in `[fb, limit)`.
    pub fn next_buffered(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        if fb >= limit || self.held.load(Relaxed) == 0 {
            return None;
        }
        file_of(st)?.blocks.first_in(fb, limit)
    }

    /// The file's buffered blocks from `fb` on that follow one another:
    /// the end of the run starting at `fb` (`fb` itself if not buffered).
    pub fn buffered_run_end(&self, st: &InodeState, fb: u64) -> u64 {
        if self.held.load(Relaxed) == 0 {
            return fb;
        }
        let Some(file) = file_of(st) else {
            return fb;
        };
        let mut at = fb;
        while file.blocks.contains(at) {
            at += 1;
        }
        at
    }

    /// How many blocks the file holds.
    pub fn count(&self, st: &InodeState) -> usize {
        file_of(st).map_or(0, |f| f.blocks.len())
    }

    /// How many of them are dirty (a walk of the file's blocks: for its
    /// report, not a hot path).
    pub fn dirty_count(&self, st: &InodeState) -> usize {
        file_of(st).map_or(0, |f| f.blocks.iter().filter(|(_, b)| b.dirty != 0).count())
    }

    /// Writes back whole files, oldest data first, until at least
    /// `max_blocks` blocks went back or no file (with data older than
    /// `older_than`, if given) is left; returns how many. `held` is the
    /// file a writer holds locked: others are then only try-locked, so a
    /// writer cannot deadlock with another; without it each is locked.
    /// `oldest`'s lock is never held while an inode lock is taken.
    pub fn write_back_oldest<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        max_blocks: u64,
        older_than: Option<Instant>,
        mut held: Option<&mut InodeState>,
    ) -> Result<u64> {
        if self.held.load(Relaxed) == 0 {
            return Ok(0);
        }
        let mut victims: Vec<(Instant, u64)> = {
            let oldest = self.oldest.lock();
            oldest
                .iter()
                .map(|(&ino, &t)| (t, ino))
                .filter(|&(t, _)| older_than.is_none_or(|o| t <= o))
                .collect()
        };
        victims.sort_unstable();
        let mut done = 0;
        for (_, ino) in victims {
            if done >= max_blocks {
                break;
            }
            if let Some(st) = held.as_deref_mut().filter(|st| st.ino == ino) {
                done += self.write_back_locked(fs, eng, st)?;
                continue;
            }
            // A file freed since the list was taken had its buffer
            // dropped: nothing to write back.
            let Ok(r) = fs.inode(ino) else {
                continue;
            };
            done += match held {
                Some(_) => {
                    let locked = r.try_write();
                    match locked {
                        Some(mut st) => self.write_back_locked(fs, eng, &mut st)?,
                        None => 0,
                    }
                }
                None => {
                    let mut st = r.write();
                    self.write_back_locked(fs, eng, &mut st)?
                }
            };
        }
        Ok(done)
    }

    /// One file's write-back under its inode lock, if it still holds
    /// blocks (it may have been written back or freed meanwhile).
    fn write_back_locked<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        eng: &Engines,
        st: &mut InodeState,
    ) -> Result<u64> {
        if !st.disk.in_use() {
            return Ok(0);
        }
        self.write_back(fs, eng, st, false)
    }

    /// Starts the thread that writes back files whose oldest buffered
    /// data is older than `writeback_age`, every `writeback_interval`.
    /// Not under the simulated clock, where crash runs must stay a
    /// function of their seed (fsync, sync and unmount still write back).
    pub fn spawn<D: PmDevice>(self: &Arc<Self>, eng: Arc<Engines>, core: Weak<Core<D>>) {
        if self.mode == AmberBuffer::Never
            || core
                .upgrade()
                .is_none_or(|fs| fs.options().clock == ClockSource::Simulated)
        {
            return;
        }
        let me = Arc::clone(self);
        // Without the thread the buffer stays correct: fsync, syncfs,
        // unmount and a full buffer write back.
        spawn_thread("amber-buffer-wb".into(), move || me.run(&eng, &core));
    }

    fn run<D: PmDevice>(&self, eng: &Engines, core: &Weak<Core<D>>) {
        while self.control.sleep(Some(self.interval)) {
            let _turn = self.control.turn();
            let Some(fs) = core.upgrade() else { return };
            if fs.check_writable().is_err() {
                return;
            }
            let Some(cutoff) = Instant::now().checked_sub(self.age) else {
                continue;
            };
            if self
                .write_back_oldest(fs.context(), eng, u64::MAX, Some(cutoff), None)
                .is_err()
            {
                // The core is poisoned; writes are refused from now on.
                return;
            }
        }
    }

    /// Stops the thread (waiting out a pass in progress).
    pub fn stop(&self) {
        self.control.stop();
    }

    pub fn stats(&self) -> Vec<(String, u64)> {
        let c = *self.costs.lock();
        let on = self.buffering();
        [
            ("buffer_on", u64::from(on)),
            ("buffered_writes", self.buffered_writes.load(Relaxed)),
            ("buffer_write_backs", self.write_backs.load(Relaxed)),
            (
                "buffer_blocks_written_back",
                self.blocks_written_back.load(Relaxed),
            ),
            ("buffer_in_place_write_backs", self.in_place.load(Relaxed)),
            ("buffer_bytes_held", self.held.load(Relaxed) * BLOCK_SIZE),
            ("buffer_full_unbuffered", self.unbuffered_full.load(Relaxed)),
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
    use super::*;

    /// A WAL after its checkpoint: frames of 4,120 bytes from offset 32,
    /// each fsync'd; the stream backing up (a new pass), standing still,
    /// landing on a line boundary or past the size gives nothing.
    #[test]
    fn the_next_record_of_a_stream() {
        let frame = |n: u64| 32 + n * 4120;
        let size = frame(1000);
        assert_eq!(next_record_end(frame(5), frame(6), size), Some(frame(7)));
        assert_eq!(next_record_end(frame(998), frame(999), size), None);
        assert_eq!(next_record_end(frame(900), frame(2), size), None);
        assert_eq!(next_record_end(frame(2), frame(2), size), None);
        assert_eq!(next_record_end(0, 64, size), None);
        assert_eq!(next_record_end(0, u64::MAX - 1, u64::MAX), None);
    }
}
