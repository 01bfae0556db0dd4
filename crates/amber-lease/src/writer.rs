//! A lessee's writes (design.md §17.4, §17.10-§17.11), each into blocks
//! of the lease's grant, out of place, with the old block's bytes merged
//! for a partial block:
//!
//! * an overwrite of part of one block the file maps, wholly below its
//!   size, with the grant's zone slots, is an extent of the zone
//!   (`slices`, §17.13): the slices' bytes, a head, one fence; so is any
//!   write of a block this lease wrote slices of, which no other kind of
//!   write may touch until the daemon has written them back;
//! * any other overwrite inside one block the file maps, wholly below its
//!   size, is an own commit (§13.6): the block and its record — the file,
//!   the block's index, a seq of the grant, the write's time and the
//!   checksum of the 4,096 bytes — and one fence;
//! * any other write inside the lease's window (across blocks, into a
//!   hole, at or past the size) is a **covered write**: each block with a
//!   plain record of the write's seq, one fence, then the file's
//!   attribute entry of that seq with its size, blocks, times and head,
//!   and a second fence. Until the entry is durable the records are newer
//!   than every entry and not own commits — stale to recovery — so the
//!   write is whole or absent.
//!
//! Either is durable and atomic on return, before the daemon knows of it;
//! the daemon's verifier, or a recovery after a crash, finds it on PM.

use std::ops::Range;

use amber_core::Run;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::split::{
    AttrEntry, LogicalInfo, OwnCommit, Record, ENTRIES, ENTRY_SIZE, LI_SIZE,
};
use amber_format::{Timespec, BLOCK_SIZE};
use amber_pmem::{PersistError, PmDevice};

use crate::moved::Moved;
use crate::slices::Slices;
use crate::wire::{Writes, WINDOW_BLOCKS};

/// The state of one write-leased window: what is granted, what is used,
/// and the file as this lease's writes left it.
#[derive(Debug)]
pub struct Writer {
    ino: u64,
    grant: Writes,
    /// The file blocks the grant's runs describe.
    window: Range<u64>,
    /// Granted blocks used.
    used: usize,
    /// Seqs used, one per write: at most one per granted block, so the
    /// grant's seqs never run out before its blocks.
    seqs: usize,
    /// Granted blocks whose pages this process mapped ahead of its
    /// writes (`populate_ahead`).
    populated: usize,
    /// File blocks this lease wrote, and their pool offsets now (a
    /// write's link is the nearest one below it).
    moved: Moved,
    /// The newest write's time: the file's mtime and ctime since.
    newest: Option<Timespec>,
    /// The file's size now.
    size: u64,
    /// Blocks the file maps now.
    mapped: u64,
    /// Its block at the highest index now: (file block, block).
    head: Option<(u64, u64)>,
    /// The lowest block index a shrink of this lease dropped (`u64::MAX`:
    /// none): the grant's runs no longer hold from there.
    cut: u64,
    /// The log's slots: the one holding the newest entry when granted,
    /// which this lease never overwrites, and the one its next entry
    /// takes; read from PM at the first covered write.
    slots: Option<(Option<u64>, u64)>,
    /// A partial own commit's block image (the old bytes and the write's),
    /// one buffer for the grant's writes.
    image: Vec<u8>,
    /// The grant's zone slots and the slices written into them.
    slices: Option<Slices>,
    /// A zone write is newer than every time this lease put on PM.
    unsealed: bool,
    /// Per window block, its pool offset as the grant's runs say (0: a
    /// hole), made at the first write: a binary search of the runs per
    /// write was 5% of a 128-byte writer's time.
    granted: Vec<u64>,
}

/// Granted blocks mapped ahead at a time (1 MiB).
const POPULATE_AHEAD: usize = 256;

/// Why a write is not the lessee's to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotMine {
    /// Outside the window, past the largest file, or more blocks than a
    /// grant holds: the kernel's.
    Shape,
    /// Too few granted blocks or slots are left, or the write needs
    /// slices this lease wrote back in the file first: return the lease
    /// and ask again.
    Spent,
}

impl Writer {
    /// The writer of a grant for `ino` whose runs describe `window` of a
    /// file of `size` bytes, if every granted block, its record and the
    /// file's log lie inside a pool of `pool_size` bytes: a grant is the
    /// daemon's word, but a bad one must not make this process store
    /// outside its mapping.
    pub fn new(
        ino: u64,
        grant: Writes,
        (window, size): (Range<u64>, u64),
        pool_size: u64,
    ) -> Option<Writer> {
        let inside = |at: u64, len: u64| at.checked_add(len).is_some_and(|e| e <= pool_size);
        let fits = |b: u64| {
            b.checked_mul(BLOCK_SIZE)
                .is_some_and(|at| inside(at, BLOCK_SIZE))
                && b.checked_mul(LI_SIZE)
                    .and_then(|o| o.checked_add(grant.records))
                    .is_some_and(|at| inside(at, LI_SIZE))
        };
        let sound = grant.blocks.iter().all(|&b| fits(b))
            && inside(grant.log, ENTRIES * ENTRY_SIZE)
            && size <= MAX_FILE_SIZE;
        let moved = Moved::new(window.clone(), WINDOW_BLOCKS)?;
        let slices = match grant.slots.clone() {
            Some(z) => Some(Slices::new(
                ino,
                z,
                (window.clone(), WINDOW_BLOCKS),
                pool_size,
            )?),
            None => None,
        };
        sound.then_some(Writer {
            ino,
            mapped: grant.mapped,
            head: grant.head,
            grant,
            window,
            used: 0,
            seqs: 0,
            populated: 0,
            cut: u64::MAX,
            moved,
            newest: None,
            size,
            slots: None,
            image: Vec::new(),
            slices,
            unsealed: false,
            granted: Vec::new(),
        })
    }

    /// Where file block `fb` lies now: written by this lease, or as the
    /// grant's `runs` say below any shrink of this lease (`None`: a hole).
    pub fn locate(&self, runs: &[Run], fb: u64) -> Option<u64> {
        let granted = || {
            let i = fb.checked_sub(self.window.start).map(usize::try_from);
            match i {
                _ if fb >= self.cut => None,
                Some(Ok(i)) if i < self.granted.len() => Some(self.granted[i]).filter(|&a| a != 0),
                _ => located(runs, fb),
            }
        };
        self.moved.get(fb).or_else(granted)
    }

    /// Makes `granted` from `runs`, once.
    fn index_runs(&mut self, runs: &[Run]) {
        if !self.granted.is_empty() {
            return;
        }
        let len = usize::try_from(self.window.end - self.window.start).expect("a bounded window");
        self.granted = vec![0; len];
        for r in runs {
            for fb in r.file_block..r.file_block + r.blocks {
                if let Some(i) = fb
                    .checked_sub(self.window.start)
                    .filter(|&i| i < len as u64)
                {
                    self.granted[i as usize] = r.pool_off + (fb - r.file_block) * BLOCK_SIZE;
                }
            }
        }
    }

    /// The file blocks this lease wrote and their pool offsets now.
    pub fn moved(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.moved.iter()
    }

    /// Whether this lease wrote any block or slice: reads must then go
    /// block by block (`locate`, `overlay`).
    pub fn moved_any(&self) -> bool {
        !self.moved.is_empty() || self.slices.as_ref().is_some_and(Slices::any)
    }

    /// Lays the slices this lease wrote of file block `fb` over `buf`,
    /// which holds the block's bytes from byte `from` of it.
    pub fn overlay<D: PmDevice>(&self, dev: &D, fb: u64, from: u64, buf: &mut [u8]) {
        if let Some(z) = &self.slices {
            z.overlay(dev, fb, from, buf);
        }
    }

    /// Whether this lease wrote slices of any block in `fbs`.
    fn sliced(&self, fbs: Range<u64>) -> bool {
        self.slices
            .as_ref()
            .is_some_and(|z| z.any() && fbs.into_iter().any(|fb| z.holds(fb)))
    }

    /// The newest write's time, if this lease wrote.
    pub fn newest(&self) -> Option<Timespec> {
        self.newest
    }

    /// The file's size as this lease's writes left it.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Blocks the file maps as this lease's writes left it (an estimate
    /// past the window: the daemon counts again when it adopts).
    pub fn mapped(&self) -> u64 {
        self.mapped
    }

    /// Writes `data` at byte `off` of the file (mapped as `runs` and this
    /// lease's writes say) at `time`: an own commit when it overwrites
    /// one mapped block below the size, else a covered write.
    pub fn write<D: PmDevice>(
        &mut self,
        dev: &D,
        runs: &[Run],
        off: u64,
        data: &[u8],
        time: Timespec,
    ) -> Result<Result<(), PersistError>, NotMine> {
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_FILE_SIZE && !data.is_empty())
            .ok_or(NotMine::Shape)?;
        let (first, last) = (off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE);
        if !self.window.contains(&first) || !self.window.contains(&last) {
            return Err(NotMine::Shape);
        }
        self.index_runs(runs);
        if first == last && (first + 1) * BLOCK_SIZE <= self.size {
            if let Some(old) = self.locate(runs, first) {
                if let Some(done) = self.through_zone(dev, (first, old), off, data)? {
                    self.newest = Some(time);
                    self.unsealed = true;
                    return Ok(done);
                }
                if !self.room(1) {
                    return Err(NotMine::Spent);
                }
                return self.own_commit(dev, runs, (first, old), off, data, time);
            }
        }
        if self.sliced(first..last + 1) {
            return self.across_zone(dev, runs, (first, last), off, (data, time));
        }
        if !self.room(1) {
            return Err(NotMine::Spent);
        }
        let tail = self.size / BLOCK_SIZE;
        if off >= self.size && last == tail && !self.size.is_multiple_of(BLOCK_SIZE) {
            if let Some(at) = self.locate(runs, tail) {
                return Ok(self.append_in_place(dev, at, off, data, time));
            }
        }
        self.covered(dev, runs, (first..last + 1, off), data, time)
    }

    /// A write of part of block `fb` (at pool offset `old`) as a zone
    /// extent, or of any of a block this lease wrote slices of. `None`:
    /// not the zone's (a whole block, or no slots granted); `Spent` when
    /// it must be but the slots ran out.
    fn through_zone<D: PmDevice>(
        &mut self,
        dev: &D,
        (fb, old): (u64, u64),
        off: u64,
        data: &[u8],
    ) -> Result<Option<Result<(), PersistError>>, NotMine> {
        let Some(z) = &mut self.slices else {
            return Ok(None);
        };
        let held = z.holds(fb);
        if !held && data.len() as u64 == BLOCK_SIZE {
            return Ok(None);
        }
        match z.write(dev, [(fb, old); 2], off, data) {
            Some(done) => Ok(Some(done)),
            None if held => Err(NotMine::Spent),
            None => Ok(None),
        }
    }

    /// A write across blocks `first..=last`, some holding this lease's
    /// slices, as one extent: blocks wholly below the size (so are its
    /// slices, as recovery and the verifier want) and mapped (a
    /// database's page written at an offset that is not a block's, just
    /// after a small write to its header: SQLite's WAL frames). `Spent`
    /// otherwise, or when the slots ran out: only the daemon writes
    /// slices back.
    fn across_zone<D: PmDevice>(
        &mut self,
        dev: &D,
        runs: &[Run],
        (first, last): (u64, u64),
        off: u64,
        (data, time): (&[u8], Timespec),
    ) -> Result<Result<(), PersistError>, NotMine> {
        let below = (last + 1) * BLOCK_SIZE <= self.size;
        let between = (first + 1..last).all(|fb| self.locate(runs, fb).is_some());
        let ends = (self.locate(runs, first), self.locate(runs, last));
        let ((Some(a), Some(b)), true) = (ends, below && between) else {
            return Err(NotMine::Spent);
        };
        let z = self.slices.as_mut().expect("a lease with slices");
        let done = z
            .write(dev, [(first, a), (last, b)], off, data)
            .ok_or(NotMine::Spent)?;
        self.newest = Some(time);
        self.unsealed = true;
        Ok(done)
    }

    /// An append inside the partial last block (at pool offset `at`), in
    /// place as the daemon's own (§12.2): the gap zeroed, the bytes
    /// written past the size, where no crash shows them; fence; then the
    /// entry with the new size; fence. No granted block, no record.
    fn append_in_place<D: PmDevice>(
        &mut self,
        dev: &D,
        at: u64,
        off: u64,
        data: &[u8],
        time: Timespec,
    ) -> Result<(), PersistError> {
        let start = self.size / BLOCK_SIZE * BLOCK_SIZE;
        let slot = self.next_slot(dev);
        dev.zero_nt(at + (self.size - start), off - self.size);
        dev.write_nt(at + (off - start), data);
        dev.drain()?;
        let seq = self.take_seq();
        self.newest = Some(time);
        self.unsealed = false;
        self.size = off + data.len() as u64;
        self.commit_entry(dev, slot, seq, time)
    }

    /// Maps the pages of the granted blocks the next `n` writes of blocks
    /// take, and more ahead, into this process in runs
    /// (`MADV_POPULATE_WRITE`): a first touch of each fresh page otherwise
    /// costs a fault and its clearing in the middle of a write (6.8% of a
    /// 4 KiB appender's cycles). Only as far as blocks are used: a writer
    /// appending in place uses none.
    fn populate_ahead<D: PmDevice>(&mut self, dev: &D, n: usize) {
        if self.used + n <= self.populated {
            return;
        }
        let len = self.grant.blocks.len();
        let to = (self.used + n)
            .max(self.populated + POPULATE_AHEAD)
            .min(len);
        for run in self.grant.blocks[self.populated..to].chunk_by(|a, b| a + 1 == *b) {
            dev.populate(run[0] * BLOCK_SIZE, run.len() as u64 * BLOCK_SIZE);
        }
        self.populated = to;
    }

    /// Sets the file's size to `len` (`ftruncate`) at `time`, by an entry
    /// of its own after, for growth, the partial last block's bytes past
    /// the size are zeroed in place and fenced. A shrink leaves every
    /// record as it is — past the entry's size they are stale to recovery,
    /// and the daemon's adoption frees their blocks — and ends the lease:
    /// a write after it could grow the file back over them and make them
    /// count again, so the caller returns the lease (`Ok(Ok(true))`).
    pub fn truncate<D: PmDevice>(
        &mut self,
        dev: &D,
        runs: &[Run],
        len: u64,
        time: Timespec,
    ) -> Result<Result<bool, PersistError>, NotMine> {
        if len > MAX_FILE_SIZE {
            return Err(NotMine::Shape);
        }
        if !self.room(1) {
            return Err(NotMine::Spent);
        }
        if len == self.size {
            return Ok(Ok(false));
        }
        // A shrink past a slice would leave a head past the size, which
        // recovery takes for corruption: the daemon writes them back first.
        if len < self.size && self.slices.as_ref().is_some_and(Slices::any) {
            return Err(NotMine::Spent);
        }
        let tail = self.tail_to_zero(len, u64::MAX);
        if tail.is_some_and(|t| !self.window.contains(&t)) {
            return Err(NotMine::Shape);
        }
        let slot = self.next_slot(dev);
        if let Some(at) = tail.and_then(|t| self.locate(runs, t)) {
            let keep = self.size % BLOCK_SIZE;
            dev.zero_nt(at + keep, BLOCK_SIZE - keep);
            if let Err(e) = dev.drain() {
                return Ok(Err(e));
            }
        }
        let seq = self.take_seq();
        let shrinks = len < self.size;
        if shrinks {
            self.drop_from(runs, len.div_ceil(BLOCK_SIZE));
            self.seqs = self.grant.blocks.len();
        }
        self.size = len;
        self.newest = Some(time);
        self.unsealed = false;
        Ok(self.commit_entry(dev, slot, seq, time).map(|()| shrinks))
    }

    /// Allocates bytes `[off, off + len)` of the file (`fallocate` mode
    /// 0, or `FALLOC_FL_KEEP_SIZE` if `keep_size`) at `time`: each run of
    /// holes below the size becomes a covered write of zeros, and without
    /// `keep_size` so does the range past the size, which grows the file;
    /// blocks the file has keep their bytes. A `keep_size` range must end
    /// at or below the size (the verifier keeps no block past it). The
    /// blocks and seqs of all of it are counted first, so it is made
    /// whole under this lease or not started (`Spent`); each covered write
    /// is atomic, and a crash between two leaves holes that read as the
    /// zeros they would have held.
    pub fn allocate<D: PmDevice>(
        &mut self,
        dev: &D,
        runs: &[Run],
        (off, len): (u64, u64),
        keep_size: bool,
        time: Timespec,
    ) -> Result<Result<(), PersistError>, NotMine> {
        let end = off
            .checked_add(len)
            .filter(|&e| e <= MAX_FILE_SIZE && len > 0 && !(keep_size && e > self.size))
            .ok_or(NotMine::Shape)?;
        if !self.window.contains(&(off / BLOCK_SIZE))
            || !self.window.contains(&((end - 1) / BLOCK_SIZE))
        {
            return Err(NotMine::Shape);
        }
        let mut ranges = self.holes(runs, off..end.min(self.size));
        if !keep_size && end > self.size {
            ranges.push(self.size.max(off)..end);
        }
        let blocks: u64 = ranges
            .iter()
            .map(|r| (r.end - 1) / BLOCK_SIZE - r.start / BLOCK_SIZE + 1)
            .sum();
        let granted = self.grant.blocks.len();
        if blocks > granted as u64 || ranges.len() > granted {
            return Err(NotMine::Shape);
        }
        let touched = |r: &Range<u64>| r.start / BLOCK_SIZE..(r.end - 1) / BLOCK_SIZE + 1;
        if ranges.iter().any(|r| self.sliced(touched(r))) {
            return Err(NotMine::Spent);
        }
        if self.used + blocks as usize > granted || !self.room(ranges.len()) {
            return Err(NotMine::Spent);
        }
        // At most a grant's blocks (checked above): one buffer for all.
        let longest = ranges.iter().map(|r| r.end - r.start).max().unwrap_or(0);
        let zeros = vec![0u8; usize::try_from(longest).map_err(|_| NotMine::Shape)?];
        for r in ranges {
            let len = usize::try_from(r.end - r.start).expect("no longer than the longest");
            let fbs = r.start / BLOCK_SIZE..(r.end - 1) / BLOCK_SIZE + 1;
            if let Err(e) = self.covered(dev, runs, (fbs, r.start), &zeros[..len], time)? {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// The byte ranges inside `bytes` whose blocks are holes, one per run
    /// of consecutive holes (a hole block partly inside counts whole).
    fn holes(&self, runs: &[Run], bytes: Range<u64>) -> Vec<Range<u64>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        if bytes.is_empty() {
            return out;
        }
        for fb in bytes.start / BLOCK_SIZE..=(bytes.end - 1) / BLOCK_SIZE {
            if self.locate(runs, fb).is_some() {
                continue;
            }
            let r = (fb * BLOCK_SIZE).max(bytes.start)..((fb + 1) * BLOCK_SIZE).min(bytes.end);
            match out.last_mut() {
                Some(last) if last.end == r.start => last.end = r.end,
                _ => out.push(r),
            }
        }
        out
    }

    /// Forgets the file's blocks from index `cut` on, as a shrink to it
    /// leaves the file: the count and head its entry gives (estimates
    /// past the window, as every lessee's; the daemon counts again), and
    /// reads past it find holes.
    fn drop_from(&mut self, runs: &[Run], cut: u64) {
        let in_runs: u64 = runs
            .iter()
            .map(|r| (r.file_block + r.blocks).saturating_sub(r.file_block.max(cut)))
            .sum();
        let moved = self.moved.split_off(cut);
        let only_moved = moved
            .iter()
            .filter(|&&fb| located(runs, fb).is_none())
            .count();
        self.mapped = self.mapped.saturating_sub(in_runs + only_moved as u64);
        self.cut = self.cut.min(cut);
        let below_run = runs
            .iter()
            .rev()
            .find(|r| r.file_block < cut)
            .map(|r| (r.file_block + r.blocks - 1).min(cut - 1));
        let below_moved = self.moved.last();
        let top = below_run.into_iter().chain(below_moved).max();
        self.head = top.and_then(|fb| self.locate(runs, fb).map(|at| (fb, at / BLOCK_SIZE)));
    }

    /// Whether `n` more of the grant's seqs are left for writes: with
    /// zone slots, the last stays for `seal`.
    fn room(&self, n: usize) -> bool {
        self.seqs + n + usize::from(self.slices.is_some()) <= self.grant.blocks.len()
    }

    /// Before the lease goes back: if zone writes came after this
    /// lease's last entry or own commit, an attribute entry of the file
    /// as it is with the newest write's time, fenced (a head carries no
    /// time), so the daemon's adoption — or a recovery — gives the file
    /// the mtime this process's `fstat` showed. The grant's last seq is
    /// kept for it.
    pub fn seal<D: PmDevice>(&mut self, dev: &D) -> Result<(), PersistError> {
        let Some(time) = self.newest.filter(|_| self.unsealed) else {
            return Ok(());
        };
        if self.seqs == self.grant.blocks.len() {
            return Ok(());
        }
        let slot = self.next_slot(dev);
        let seq = self.take_seq();
        self.unsealed = false;
        self.commit_entry(dev, slot, seq, time)
    }

    /// The next of the grant's seqs.
    fn take_seq(&mut self) -> u64 {
        assert!(
            self.seqs < self.grant.blocks.len(),
            "a grant's seqs ran out"
        );
        self.seqs += 1;
        self.grant.seq + self.seqs as u64 - 1
    }

    /// Writes the file's attribute entry of write `seq` — its size,
    /// blocks, head and `time` as this lease's writes left them — into
    /// log slot `slot`, and fences.
    fn commit_entry<D: PmDevice>(
        &self,
        dev: &D,
        slot: u64,
        seq: u64,
        time: Timespec,
    ) -> Result<(), PersistError> {
        let entry = AttrEntry {
            seq,
            generation: self.grant.generation,
            size: self.size,
            blocks: self.mapped,
            mtime: time,
            ctime: time,
            head: self.head.map_or(0, |(_, b)| b),
        };
        dev.write_nt(self.grant.log + slot * ENTRY_SIZE, &entry.encode());
        dev.drain()
    }

    /// §13.6's own commit of block `fb` (now at pool offset `old`).
    fn own_commit<D: PmDevice>(
        &mut self,
        dev: &D,
        runs: &[Run],
        (fb, old): (u64, u64),
        off: u64,
        data: &[u8],
        time: Timespec,
    ) -> Result<Result<(), PersistError>, NotMine> {
        let Some(&block) = self.grant.blocks.get(self.used) else {
            return Err(NotMine::Spent);
        };
        self.populate_ahead(dev, 1);
        let link = self.link(dev, runs, fb, Some(old));
        let seq = self.take_seq();
        let li = self.record(fb, link, seq);
        // A whole block streams from the caller's buffer; a part is merged
        // over the old block first.
        let image: &[u8] = if data.len() as u64 == BLOCK_SIZE {
            debug_assert_eq!(off, fb * BLOCK_SIZE);
            data
        } else {
            self.image.resize(BLOCK_SIZE as usize, 0);
            dev.read(old, &mut self.image);
            let at = usize::try_from(off - fb * BLOCK_SIZE).expect("inside a block");
            self.image[at..at + data.len()].copy_from_slice(data);
            &self.image
        };
        dev.write_nt(block * BLOCK_SIZE, image);
        let li = LogicalInfo {
            own: Some(OwnCommit::new(time, image)),
            ..li
        };
        dev.write_nt(self.grant.records + block * LI_SIZE, &li.encode());
        let done = dev.drain();
        // A failed fence may still have made the block durable: the block
        // is spent either way, and the caller refuses further writes.
        self.used += 1;
        if done.is_ok() {
            self.wrote(fb, block, time);
        }
        Ok(done)
    }

    /// A covered write of file blocks `fbs`, `data` from byte `off`.
    fn covered<D: PmDevice>(
        &mut self,
        dev: &D,
        runs: &[Run],
        (fbs, off): (Range<u64>, u64),
        data: &[u8],
        time: Timespec,
    ) -> Result<Result<(), PersistError>, NotMine> {
        let n = usize::try_from(fbs.end - fbs.start).map_err(|_| NotMine::Shape)?;
        if n > self.grant.blocks.len() {
            return Err(NotMine::Shape);
        }
        let end = off + data.len() as u64;
        let tail = self.tail_to_zero(end, fbs.start);
        if tail.is_some_and(|t| !self.window.contains(&t)) {
            return Err(NotMine::Shape);
        }
        let blocks = self.grant.blocks[self.used..]
            .get(..n)
            .ok_or(NotMine::Spent)?
            .to_vec();
        let slot = self.next_slot(dev);
        self.populate_ahead(dev, n);
        if let Some(at) = tail.and_then(|t| self.locate(runs, t)) {
            let keep = self.size % BLOCK_SIZE;
            dev.zero_nt(at + keep, BLOCK_SIZE - keep);
        }
        let seq = self.take_seq();
        let new = self.stream_blocks(dev, runs, (fbs.clone(), &blocks), (off, seq), data);
        let done = dev.drain();
        self.used += n;
        if done.is_err() {
            return Ok(done);
        }
        for (fb, &b) in fbs.zip(&blocks) {
            self.wrote(fb, b, time);
        }
        self.size = self.size.max(end);
        self.mapped += new;
        Ok(self.commit_entry(dev, slot, seq, time))
    }

    /// The old last block, when a write ending at `end` and starting at
    /// file block `first` grows the file past it without writing it: its
    /// bytes past the size must read as zeros once the size covers them
    /// (§12.2's "past the end"). Zeroed in place, past the durable size,
    /// where no crash can show it.
    fn tail_to_zero(&self, end: u64, first: u64) -> Option<u64> {
        let t = self.size / BLOCK_SIZE;
        (end > self.size && !self.size.is_multiple_of(BLOCK_SIZE) && t < first).then_some(t)
    }

    /// Streams each block of a covered write — the old bytes below the
    /// size, zeros past it, `data` from byte `off` — into its granted
    /// block, with its record. Returns how many were holes.
    fn stream_blocks<D: PmDevice>(
        &self,
        dev: &D,
        runs: &[Run],
        (fbs, blocks): (Range<u64>, &[u64]),
        (off, seq): (u64, u64),
        data: &[u8],
    ) -> u64 {
        let bs = BLOCK_SIZE as usize;
        let mut link = self.link(dev, runs, fbs.start, self.locate(runs, fbs.start));
        let mut holes = 0;
        let mut image = vec![0u8; bs];
        for (fb, &block) in fbs.zip(blocks) {
            let start = fb * BLOCK_SIZE;
            image.fill(0);
            let old = self.locate(runs, fb);
            let keep = usize::try_from(self.size.saturating_sub(start)).map_or(bs, |k| k.min(bs));
            match old {
                Some(at) if keep > 0 => dev.read(at, &mut image[..keep]),
                Some(_) => {}
                None => holes += 1,
            }
            let from = off.max(start);
            let to = (off + data.len() as u64).min(start + BLOCK_SIZE);
            let src = usize::try_from(from - off).expect("inside the write");
            let dst = usize::try_from(from - start).expect("inside the block");
            let len = usize::try_from(to - from).expect("inside the block");
            image[dst..dst + len].copy_from_slice(&data[src..src + len]);
            dev.write_nt(block * BLOCK_SIZE, &image);
            let li = self.record(fb, link, seq);
            dev.write_nt(self.grant.records + block * LI_SIZE, &li.encode());
            link = block;
        }
        holes
    }

    /// The plain record of file block `fb` for write `seq`, linking to
    /// block `link`.
    fn record(&self, fb: u64, link: u64, seq: u64) -> LogicalInfo {
        LogicalInfo {
            seq,
            ino: self.ino,
            generation: self.grant.generation,
            file_block: fb,
            link,
            own: None,
        }
    }

    /// Notes that file block `fb` now lies in granted block `block`.
    fn wrote(&mut self, fb: u64, block: u64, time: Timespec) {
        self.moved.insert(fb, block * BLOCK_SIZE);
        self.newest = Some(time);
        self.unsealed = false;
        if self.head.is_none_or(|(h, _)| fb >= h) {
            self.head = Some((fb, block));
        }
    }

    /// The slot the next entry goes to: round robin over the log's slots
    /// but the one the grant found newest, so a lessee's entries never
    /// evict the entry the daemon's verifier falls back to.
    fn next_slot<D: PmDevice>(&mut self, dev: &D) -> u64 {
        let (base, next) = *self.slots.get_or_insert_with(|| {
            let base = newest_slot(dev, self.grant.log);
            (base, base.map_or(0, |b| (b + 1) % ENTRIES))
        });
        let mut after = (next + 1) % ENTRIES;
        if Some(after) == base {
            after = (after + 1) % ENTRIES;
        }
        self.slots = Some((base, after));
        next
    }

    /// The block below `fb` in the chain: the nearest lower mapped block
    /// this window knows, else what the old block's record links to (the
    /// daemon's verifier rewrites a wrong one).
    fn link<D: PmDevice>(&self, dev: &D, runs: &[Run], fb: u64, old: Option<u64>) -> u64 {
        let below_run = |fb: u64| {
            let i = runs.partition_point(|r| r.file_block < fb);
            i.checked_sub(1).map(|i| {
                let r = &runs[i];
                (r.file_block + r.blocks - 1).min(fb - 1)
            })
        };
        let moved_below = self.moved.below(fb);
        let nearest = below_run(fb).into_iter().chain(moved_below).max();
        if let Some(n) = nearest.and_then(|n| self.locate(runs, n)) {
            return n / BLOCK_SIZE;
        }
        let Some(old) = old else {
            return 0;
        };
        let mut raw = [0u8; LI_SIZE as usize];
        dev.read(self.grant.records + (old / BLOCK_SIZE) * LI_SIZE, &mut raw);
        match LogicalInfo::decode(&raw) {
            Record::Valid(li) if li.ino == self.ino => li.link,
            _ => 0,
        }
    }
}

/// The slot of the log at `log` holding its newest valid entry of any
/// generation (the one the daemon's next entry would follow), if any.
fn newest_slot<D: PmDevice>(dev: &D, log: u64) -> Option<u64> {
    let mut newest: Option<(u64, u64)> = None;
    for i in 0..ENTRIES {
        let mut raw = [0u8; ENTRY_SIZE as usize];
        dev.read(log + i * ENTRY_SIZE, &mut raw);
        if let Record::Valid(e) = AttrEntry::decode(&raw) {
            if newest.is_none_or(|(seq, _)| e.seq > seq) {
                newest = Some((e.seq, i));
            }
        }
    }
    newest.map(|(_, i)| i)
}

/// The pool offset of file block `fb` in `runs` (sorted, disjoint).
fn located(runs: &[Run], fb: u64) -> Option<u64> {
    let i = runs.partition_point(|r| r.file_block + r.blocks <= fb);
    runs.get(i)
        .filter(|r| r.file_block <= fb)
        .map(|r| r.pool_off + (fb - r.file_block) * BLOCK_SIZE)
}
