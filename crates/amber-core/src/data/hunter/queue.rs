//! File-associated metadata queues (hunter.txt §III-B, §III-C, §III-D):
//! a write queues its metadata updates in DRAM instead of persisting
//! them; whoever persists a queue — a worker, fsync, a writer that finds
//! the queue full, truncate — takes a batch in order and writes it in
//! fenced steps: logical information, then attribute entries, then the
//! clearing of records whose blocks are being freed — deferred to the
//! next persist's first fence when every freed block was replaced by a
//! newer one (design.md §12.3). A file's updates all go to queue
//! `ino mod queues`, so one queue orders them.
//!
//! Locks: a shard's `persist` lock is held by whoever persists it, its
//! `pending` lock only to push or take. Callers may hold an inode lock;
//! persisting never takes one, so there is no cycle.

use super::Stats;
use crate::alloc::Padded;
use crate::data::block_runs;
use crate::data::Context;
use crate::error::{FsError, Result};
use crate::split::LogState;
use amber_format::split::{AttrEntry, LogicalInfo, ENTRIES, LI_SIZE};
use amber_format::Timespec;
use amber_pmem::PmDevice;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

/// What one queued update does to PM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Blocks `block..block + count` hold file blocks `file_block..` as
    /// of write `seq`; the first links to `link`, each other one to the
    /// block before it. `own`: its writer wrote the (one) record already,
    /// an own commit (§13.6), which the persist leaves as it is.
    Data {
        block: u64,
        file_block: u64,
        link: u64,
        seq: u64,
        count: u32,
        own: bool,
    },
    /// Blocks `block..block + count` no longer hold the file's data: once
    /// the entry that says so is durable their records are cleared and
    /// the blocks reused. `replaced`: a write put newer blocks (records of
    /// a higher seq) at the same file blocks, so a surviving record of
    /// these loses to theirs and its clearing may wait (§12.3).
    Free {
        block: u64,
        count: u64,
        replaced: bool,
    },
    /// An update of a file deleted before it was persisted: nothing to
    /// write (it keeps its place, so the numbering of the others holds).
    Dropped,
}

/// A file's attributes after the write that queued them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub seq: u64,
    pub size: u64,
    pub blocks: u64,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub head: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Update {
    pub ino: u64,
    pub generation: u32,
    pub op: Op,
}

/// Most blocks one `Data` update names (a run is split past it): a data
/// log's run, so one update's records are one copy of at most 32 KiB.
pub(super) const MAX_RUN: u32 = 512;

/// README states the queues' bound in bytes from this.
const _: () = assert!(std::mem::size_of::<Update>() == 56);
const _: () = assert!(std::mem::size_of::<Attrs>() == 80);

/// A file's newest queued attributes, usable once the batch reaches the
/// update numbered `upto` (exclusive): the write's last.
#[derive(Debug, Clone, Copy)]
struct Attrs {
    generation: u32,
    snap: Snapshot,
    upto: u64,
}

/// What a shard's persister keeps between persists.
#[derive(Default)]
struct Persisting {
    /// Each file seen to the attribute-log slot its next entry goes to.
    slots: FxHashMap<u64, u64>,
    /// Runs of replaced blocks (`Op::Free` with `replaced`) whose
    /// superseding entry is durable but whose records are not yet
    /// cleared: the next persist clears them before its first fence and
    /// only then frees them. At most one batch's frees.
    deferred: Vec<(u64, u64)>,
    /// The last batch's emptied queue, when small, for the shard's next
    /// queue: a writer that fsyncs each write otherwise allocated a new
    /// queue per persist and pushed into memory it had never touched.
    spare: VecDeque<Update>,
}

/// Most updates a spare queue may have room for (`Persisting::spare`):
/// the bound is for bursts, not for the queue's resting size.
const SPARE_UPDATES: usize = 1024;

/// What a shard holds in DRAM. Only each file's newest attributes are
/// kept: an entry covers every update before it, so an older snapshot
/// adds nothing once a newer one is persisted with it.
#[derive(Default)]
struct Pending {
    updates: VecDeque<Update>,
    /// Updates ever taken from `updates` (numbers the front).
    taken: u64,
    attrs: FxHashMap<u64, Attrs>,
}

impl Pending {
    /// Queues `u`, merged into the last queued update when that is a
    /// `Data` run of the same file that `u`'s run continues (the next
    /// blocks, at the next file blocks, linked to the run's last block):
    /// a sequential writer then rewrites one hot update instead of
    /// storing a new one per write — on a line the persister last read,
    /// which this thread's next fence would wait to own (a hot update
    /// instead gained 7% in an experiment, the merge 2-6%: BENCHMARKS.md,
    /// issue 18's points 3 and 4). The merged blocks keep the run's
    /// seq, older than their write's; that is safe because the run is
    /// still queued: no update of the file, so no record of any of its
    /// blocks and no entry of it, was made after the run's write (§12.2).
    fn append(&mut self, u: Update) {
        if let (
            Some(Update {
                ino,
                generation,
                op:
                    Op::Data {
                        block,
                        file_block,
                        count,
                        own: false,
                        ..
                    },
            }),
            Op::Data {
                block: b,
                file_block: fb,
                link,
                count: n,
                own: false,
                ..
            },
        ) = (self.updates.back_mut(), u.op)
        {
            let end = *block + u64::from(*count);
            if *ino == u.ino
                && *generation == u.generation
                && end == b
                && *file_block + u64::from(*count) == fb
                && link == end - 1
                && *count + n <= MAX_RUN
            {
                *count += n;
                return;
            }
        }
        self.updates.push_back(u);
    }
}

struct Shard {
    pending: Mutex<Pending>,
    /// Held while persisting.
    persist: Mutex<Persisting>,
    /// Pushes ever made (stored under `pending`).
    pushed: AtomicU64,
    /// `pushed` after the last push that is not an own commit's (stored
    /// under `pending`): at most `durable`, every update whose durability
    /// a persist must provide is durable (`settled`).
    hard: AtomicU64,
    /// `pushed` as it was when a persist that left the shard empty began,
    /// stored once that persist is durable. Equal to `pushed`: nothing is
    /// queued or being persisted, and settle and fsync return without a
    /// lock (most zone writes of amber, and fsyncs of files only
    /// overwritten in place).
    durable: AtomicU64,
}

pub(super) struct Queues {
    shards: Vec<Padded<Shard>>,
    /// Most updates a shard holds; a writer that would exceed it persists
    /// the shard itself first.
    max_pending: usize,
    /// Blocks in queued `Free` runs: no longer any file's once the change
    /// that queued them returned, and certain to go back to the allocator
    /// (at the next persist, which a write short of space forces; or, after
    /// a crash, whichever of a replaced block and its replacement loses).
    freeing: AtomicU64,
}

impl Queues {
    pub fn new(count: usize, max_pending: usize) -> Queues {
        assert!(count > 0 && max_pending > 0, "queues and room in them");
        Queues {
            shards: (0..count)
                .map(|_| {
                    Padded(Shard {
                        pending: Mutex::new(Pending::default()),
                        persist: Mutex::new(Persisting::default()),
                        pushed: AtomicU64::new(0),
                        hard: AtomicU64::new(0),
                        durable: AtomicU64::new(0),
                    })
                })
                .collect(),
            max_pending,
            freeing: AtomicU64::new(0),
        }
    }

    /// Blocks whose freeing is queued (`freeing`): statfs counts them free.
    pub fn freeing(&self) -> u64 {
        self.freeing.load(Relaxed)
    }

    pub fn count(&self) -> usize {
        self.shards.len()
    }

    pub fn shard_of(&self, ino: u64) -> usize {
        (ino % self.shards.len() as u64) as usize
    }

    /// Queues a write's updates and the file's attributes after it; when
    /// they do not fit, the shard is persisted first, in this thread (the
    /// queue never grows past its bound). A write larger than the bound
    /// is persisted at once. `own`: the write committed itself (§13.6),
    /// so nothing queued here needs persisting for its durability.
    /// Returns whether this push filled the queue past half its bound
    /// (time to wake a worker).
    #[allow(clippy::too_many_arguments)]
    pub fn push<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        ino: u64,
        generation: u32,
        ops: &[Op],
        snap: Snapshot,
        own: bool,
    ) -> Result<bool> {
        let s = self.shard_of(ino);
        let add = |p: &mut Pending| {
            self.note_push(s, !own);
            for &op in ops {
                if let Op::Free { count, .. } = op {
                    self.freeing.fetch_add(count, Relaxed);
                }
                p.append(Update {
                    ino,
                    generation,
                    op,
                });
            }
            let a = Attrs {
                generation,
                snap,
                upto: p.taken + p.updates.len() as u64,
            };
            match p.attrs.get_mut(&ino) {
                Some(old) => *old = a,
                None => {
                    p.attrs.insert(ino, a);
                }
            }
        };
        {
            let mut p = self.shards[s].pending.lock();
            let before = p.updates.len();
            if before + ops.len() <= self.max_pending {
                add(&mut p);
                let half = self.max_pending / 2;
                return Ok(before < half && p.updates.len() >= half);
            }
        }
        stats.full_queue_persists.fetch_add(1, Relaxed);
        let mut per = self.shards[s].persist.lock();
        self.drain_locked(fs, stats, s, &mut per)?;
        let over = {
            let mut p = self.shards[s].pending.lock();
            add(&mut p);
            p.updates.len() > self.max_pending
        };
        if over {
            self.drain_locked(fs, stats, s, &mut per)?;
        }
        Ok(false)
    }

    /// Persists everything queued on shard `s` (fsync, truncate, O_SYNC,
    /// hunter-sync, unmount).
    pub fn drain<D: PmDevice>(&self, fs: Context<'_, D>, stats: &Stats, s: usize) -> Result<()> {
        if self.idle(s) {
            return Ok(());
        }
        let mut per = self.shards[s].persist.lock();
        self.drain_locked(fs, stats, s, &mut per)
    }

    /// Makes every update queued for file `ino` durable, waiting for a
    /// persist already under way: afterwards the file's blocks are where
    /// its DRAM index says on the media too, own commits included, whose
    /// records then need no checksum to count (so the zone may write a
    /// slice back into their blocks in place). Cheap when nothing is
    /// queued for it (the common case for a file only overwritten in
    /// place). Returns whether anything was.
    pub fn settle<D: PmDevice>(&self, fs: Context<'_, D>, stats: &Stats, ino: u64) -> Result<bool> {
        let s = self.shard_of(ino);
        if self.idle(s) {
            return Ok(false);
        }
        let mut per = self.shards[s].persist.lock();
        let queued = self.queued(ino);
        if queued {
            self.drain_locked(fs, stats, s, &mut per)?;
        }
        Ok(queued)
    }

    /// Whether every update queued on shard `s` that a persist must make
    /// durable is durable: all that may be queued or in flight are own
    /// commits' (§13.6), durable already. A caller's own pushes happened
    /// before (its inode lock orders them), so it reads `hard` at or past
    /// them; a larger value read from another file's push only makes the
    /// answer more cautious.
    pub fn settled(&self, s: usize) -> bool {
        let sh = &self.shards[s];
        sh.hard.load(Acquire) <= sh.durable.load(Acquire)
    }

    /// Whether shard `s` has nothing queued and nothing being persisted.
    /// A caller's own pushes happened before (its inode lock orders them),
    /// so it reads `pushed` at or past them; `durable` equal to it means a
    /// persist that took them all is durable.
    fn idle(&self, s: usize) -> bool {
        let sh = &self.shards[s];
        sh.durable.load(Acquire) == sh.pushed.load(Acquire)
    }

    /// Counts a push into shard `s` (`hard`: one a persist must make
    /// durable); called with its `pending` lock held, which orders the
    /// pushes, so a load and a store suffice.
    fn note_push(&self, s: usize, hard: bool) {
        let sh = &self.shards[s];
        let n = sh.pushed.load(Relaxed) + 1;
        if hard {
            sh.hard.store(n, Release);
        }
        sh.pushed.store(n, Release);
    }

    /// Whether file `ino` has updates queued (a batch being persisted
    /// holds none: they left the queue when it began).
    pub fn queued(&self, ino: u64) -> bool {
        let s = self.shard_of(ino);
        self.shards[s].pending.lock().attrs.contains_key(&ino)
    }

    /// Persists every shard and frees every block a persist deferred
    /// (syncfs, unmount, a writer short of space): afterwards no record
    /// of a freed block is left.
    pub fn drain_all<D: PmDevice>(&self, fs: Context<'_, D>, stats: &Stats) -> Result<()> {
        (0..self.shards.len()).try_for_each(|s| {
            self.drain(fs, stats, s)?;
            let mut per = self.shards[s].persist.lock();
            fs.guard(self.release_deferred(fs, stats, &mut per))
        })
    }

    /// Persists one batch of at most `max` updates from shard `s` (a
    /// worker's turn); returns how many.
    pub fn persist_batch<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        s: usize,
        max: usize,
    ) -> Result<usize> {
        let mut per = self.shards[s].persist.lock();
        let n = self.persist_locked(fs, stats, s, &mut per, max)?;
        if n == 0 {
            // An idle queue's worker frees what the last persist deferred.
            fs.guard(self.release_deferred(fs, stats, &mut per))?;
        }
        Ok(n)
    }

    fn drain_locked<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        s: usize,
        per: &mut Persisting,
    ) -> Result<()> {
        // Bounded: each round takes what was queued when it began, and
        // new updates wait for the persist lock this thread holds only if
        // they would overflow; a round takes at least one update.
        for _ in 0..=self.max_pending {
            if self.persist_locked(fs, stats, s, per, usize::MAX)? == 0 {
                return Ok(());
            }
        }
        Err(FsError::Corrupted(format!(
            "metadata queue {s} kept refilling while it was drained"
        )))
    }

    fn persist_locked<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        s: usize,
        per: &mut Persisting,
        max: usize,
    ) -> Result<usize> {
        let (batch, attrs, covered) = {
            let mut p = self.shards[s].pending.lock();
            let n = p.updates.len().min(max);
            // Taking everything swaps the queue out (writers wait on this
            // lock, so no copy happens under it) for the last batch's,
            // emptied, or a new one.
            let batch: VecDeque<Update> = if n == p.updates.len() {
                std::mem::replace(&mut p.updates, std::mem::take(&mut per.spare))
            } else {
                p.updates.drain(..n).collect()
            };
            p.taken += n as u64;
            let reached = p.taken;
            let ready: Vec<(u64, Attrs)> = p.attrs.extract_if(|_, a| a.upto <= reached).collect();
            // This persist leaves nothing behind: once durable, so is
            // every push so far.
            let all = p.updates.is_empty() && p.attrs.is_empty();
            let covered = all.then(|| self.shards[s].pushed.load(Relaxed));
            (batch, ready, covered)
        };
        let idle_at = |c: Option<u64>| {
            if let Some(c) = c {
                self.shards[s].durable.store(c, Release);
            }
        };
        if batch.is_empty() && attrs.is_empty() {
            // Nothing taken, and no batch is in flight under this lock.
            idle_at(covered);
            return Ok(0);
        }
        let r = self.write_batch(fs, stats, batch.iter(), &attrs, per);
        fs.guard(r)?;
        idle_at(covered);
        stats.batches.fetch_add(1, Relaxed);
        stats.persisted.fetch_add(batch.len() as u64, Relaxed);
        let done = batch.len() + attrs.len();
        if batch.capacity() <= SPARE_UPDATES {
            let mut batch = batch;
            batch.clear();
            per.spare = batch;
        }
        Ok(done)
    }

    /// The steps, each made durable before the next: records (a block's
    /// data was fenced by its writer before it was queued) with the
    /// clearing of the records the last persist deferred, which are then
    /// freed; one entry per file; the clearing of the freed blocks'
    /// records — left to the next persist when every freed block was
    /// replaced. A crash between steps leaves records newer than their
    /// file's entry, which recovery drops, or stale records of freed
    /// blocks, which it clears (docs/design.md §12.3, §12.4).
    fn write_batch<'a, D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        batch: impl Iterator<Item = &'a Update>,
        attrs: &[(u64, Attrs)],
        per: &mut Persisting,
    ) -> Result<()> {
        let dev = &**fs.device();
        let m = super::media(fs);
        let mut frees = Vec::new();
        let mut replaced = true;
        let mut run = RecordRun::default();
        let mut records = 0;
        for u in batch {
            match u.op {
                Op::Data { .. } => records += run.add_data(fs, u),
                Op::Free {
                    block,
                    count,
                    replaced: r,
                } => {
                    replaced &= r;
                    frees.push((block, count));
                }
                Op::Dropped => {}
            }
        }
        run.flush(fs);
        stats.records.fetch_add(records, Relaxed);
        per.deferred
            .iter()
            .for_each(|&(b, n)| m.clear_lis(dev, b, n));
        fs.drain()?;
        self.free_runs(fs, stats, &std::mem::take(&mut per.deferred));
        for &(
            ino,
            Attrs {
                generation, snap, ..
            },
        ) in attrs
        {
            let slot = take_slot(fs, &mut per.slots, ino, generation);
            m.write_entry(dev, ino, slot, &entry(generation, &snap));
            stats.entries.fetch_add(1, Relaxed);
        }
        fs.drain()?;
        per.deferred = frees;
        if !replaced {
            self.release_deferred(fs, stats, per)?;
        }
        Ok(())
    }

    /// Clears the records of the runs the last persist deferred, fences,
    /// and frees them.
    fn release_deferred<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        per: &mut Persisting,
    ) -> Result<()> {
        if per.deferred.is_empty() {
            return Ok(());
        }
        let (dev, m) = (&**fs.device(), super::media(fs));
        per.deferred
            .iter()
            .for_each(|&(b, n)| m.clear_lis(dev, b, n));
        fs.drain()?;
        self.free_runs(fs, stats, &std::mem::take(&mut per.deferred));
        Ok(())
    }

    /// Gives runs whose records are durably clear back to the allocator.
    fn free_runs<D: PmDevice>(&self, fs: Context<'_, D>, stats: &Stats, runs: &[(u64, u64)]) {
        // In block order, neighbours joined: an adopted lease frees a
        // thousand scattered blocks, each a walk of the free extents.
        let mut runs = runs.to_vec();
        runs.sort_unstable();
        runs.dedup_by(|next, run| {
            let joined = run.0 + run.1 == next.0;
            if joined {
                run.1 += next.1;
            }
            joined
        });
        for &(b, n) in &runs {
            // Out of `freeing` first: statfs may briefly count these
            // blocks as used, never twice as free.
            self.freeing.fetch_sub(n, Relaxed);
            fs.blocks().free_run(b, n);
            stats.freed.fetch_add(n, Relaxed);
        }
    }

    /// Persists the file's queue, then puts an entry for `snap` into
    /// `tx` (in the slot the next entry of the file takes), so it commits
    /// with the inode change setattr is making.
    pub fn entry_in_tx<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        stats: &Stats,
        ino: u64,
        generation: u32,
        snap: Snapshot,
        tx: &mut crate::journal::Tx,
    ) -> Result<()> {
        let s = self.shard_of(ino);
        let mut per = self.shards[s].persist.lock();
        self.drain_locked(fs, stats, s, &mut per)?;
        let slot = take_slot(fs, &mut per.slots, ino, generation);
        let at = super::media(fs).regions.entry_offset(ino, slot);
        tx.write(at, &entry(generation, &snap).encode());
        stats.entries.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Forgets which slot of `ino`'s attribute log its next entry takes,
    /// so the next persist reads it from PM: another process wrote entries
    /// of the file under a write lease (design.md §17.11).
    pub fn forget_slot(&self, ino: u64) {
        self.shards[self.shard_of(ino)]
            .persist
            .lock()
            .slots
            .remove(&ino);
    }

    /// Drops a deleted file's queued updates and queues the freeing of
    /// every block it held (`blocks`: its index, in runs). Its records and
    /// entries no longer count — the inode is free, or reused under
    /// another generation — so they are cleared at the next persist.
    pub fn forget(&self, ino: u64, generation: u32, blocks: impl Iterator<Item = u64>) {
        let s = self.shard_of(ino);
        let _slots = self.shards[s].persist.lock();
        let mut p = self.shards[s].pending.lock();
        self.note_push(s, true);
        p.attrs.remove(&ino);
        for u in p.updates.iter_mut().filter(|u| u.ino == ino) {
            if !matches!(u.op, Op::Free { .. }) {
                u.op = Op::Dropped;
            }
        }
        for (block, count) in block_runs(blocks) {
            self.freeing.fetch_add(count, Relaxed);
            p.updates.push_back(Update {
                ino,
                generation,
                op: Op::Free {
                    block,
                    count,
                    replaced: false,
                },
            });
        }
    }

    /// Updates queued but not persisted, and the DRAM they hold.
    pub fn pending(&self) -> (u64, u64) {
        let (mut n, mut bytes) = (0, 0);
        for s in &self.shards {
            let p = s.pending.lock();
            n += p.updates.len() as u64;
            bytes += (p.updates.capacity() * std::mem::size_of::<Update>()
                + p.attrs.capacity() * std::mem::size_of::<(u64, Attrs)>())
                as u64;
        }
        (n, bytes)
    }
}

/// Records that sit next to each other on PM, written as one
/// non-temporal copy: the log hands out blocks in order, so a batch's
/// records are mostly one run in the metadata area (the split layout's
/// point, hunter.txt §III-B) — or, in the log (hunter-lfs), runs of at
/// most 63 broken by the data between summary blocks.
#[derive(Default)]
struct RecordRun {
    /// PM offset of the first buffered record.
    at: u64,
    bytes: Vec<u8>,
}

/// Records buffered before one copy.
const RUN_RECORDS: usize = 64;

impl RecordRun {
    fn add<D: PmDevice>(&mut self, fs: Context<'_, D>, block: u64, li: &LogicalInfo) {
        let at = super::media(fs).regions.li_offset(block);
        let len = self.bytes.len() as u64;
        if len == 0 || at != self.at + len || len == RUN_RECORDS as u64 * LI_SIZE {
            self.flush(fs);
            self.at = at;
        }
        self.bytes.extend_from_slice(&li.encode());
    }

    /// Buffers the records a `Data` update stands for, one per block of
    /// its run (each linking to the block before it); returns how many.
    fn add_data<D: PmDevice>(&mut self, fs: Context<'_, D>, u: &Update) -> u64 {
        let Op::Data {
            block,
            file_block,
            link,
            seq,
            count,
            own,
        } = u.op
        else {
            return 0;
        };
        if own {
            // Written with its data, under the writer's fence.
            return 0;
        }
        for i in 0..u64::from(count) {
            let li = LogicalInfo {
                seq,
                ino: u.ino,
                generation: u.generation,
                file_block: file_block + i,
                link: if i == 0 { link } else { block + i - 1 },
                own: None,
            };
            self.add(fs, block + i, &li);
        }
        u64::from(count)
    }

    /// Writes what is buffered; returns the media for reads that must see it.
    fn flush<'a, D: PmDevice>(&mut self, fs: Context<'a, D>) -> &'a crate::split::SplitMedia {
        let m = super::media(fs);
        if !self.bytes.is_empty() {
            fs.device().write_nt(self.at, &self.bytes);
            self.bytes.clear();
        }
        m
    }
}

/// The attribute-log slot the file's next entry goes to, advanced past
/// it (round robin, which evicts the oldest entry; read from PM the first
/// time a file is seen). The caller holds the shard's persist lock.
fn take_slot<D: PmDevice>(
    fs: Context<'_, D>,
    slots: &mut FxHashMap<u64, u64>,
    ino: u64,
    generation: u32,
) -> u64 {
    let next = slots.entry(ino).or_insert_with(|| {
        LogState::read(super::media(fs), &**fs.device(), ino, generation).next_slot
    });
    let slot = *next;
    *next = (slot + 1) % ENTRIES;
    slot
}

/// The attribute entry a snapshot persists as.
fn entry(generation: u32, a: &Snapshot) -> AttrEntry {
    AttrEntry {
        seq: a.seq,
        generation,
        size: a.size,
        blocks: a.blocks,
        mtime: a.mtime,
        ctime: a.ctime,
        head: a.head,
    }
}

#[cfg(test)]
mod tests {
    use super::{Op, Pending, Update, MAX_RUN};

    fn data(ino: u64, block: u64, file_block: u64, link: u64, count: u32, own: bool) -> Update {
        Update {
            ino,
            generation: 1,
            op: Op::Data {
                block,
                file_block,
                link,
                seq: file_block + 1,
                count,
                own,
            },
        }
    }

    fn counts(p: &Pending) -> Vec<u32> {
        p.updates
            .iter()
            .map(|u| match u.op {
                Op::Data { count, .. } => count,
                _ => 0,
            })
            .collect()
    }

    #[test]
    fn sequential_appends_extend_one_run() {
        let mut p = Pending::default();
        p.append(data(7, 100, 0, 0, 1, false));
        for i in 1..10 {
            p.append(data(7, 100 + i, i, 99 + i, 1, false));
        }
        // 64 KiB writes continue it too.
        p.append(data(7, 110, 10, 109, 16, false));
        assert_eq!(counts(&p), [26]);
        let Op::Data { seq, link, .. } = p.updates[0].op else {
            panic!("a data run")
        };
        assert_eq!(
            (seq, link),
            (1, 0),
            "the run keeps its first write's seq and link"
        );
    }

    #[test]
    fn only_a_continuation_of_the_same_file_merges() {
        let mut p = Pending::default();
        p.append(data(7, 100, 0, 0, 1, false));
        p.append(data(8, 101, 1, 100, 1, false)); // another file
        p.append(data(8, 103, 2, 101, 1, false)); // a gap in the blocks
        p.append(data(8, 104, 4, 103, 1, false)); // a gap in the file
        p.append(data(8, 105, 5, 0, 1, false)); // linked elsewhere
        p.append(data(8, 106, 6, 105, 1, true)); // an own commit
        p.append(data(8, 107, 7, 106, 1, false)); // after an own commit
        p.append(Update {
            ino: 8,
            generation: 1,
            op: Op::Free {
                block: 1,
                count: 1,
                replaced: true,
            },
        });
        p.append(data(8, 108, 8, 107, 1, false)); // after another update
        let mut other = data(8, 109, 9, 108, 1, false);
        other.generation = 2; // the number reused by a new file
        p.append(other);
        assert_eq!(counts(&p), [1, 1, 1, 1, 1, 1, 1, 0, 1, 1]);
    }

    #[test]
    fn a_run_stops_at_its_bound() {
        let mut p = Pending::default();
        p.append(data(7, 100, 0, 0, MAX_RUN - 1, false));
        let end = 100 + u64::from(MAX_RUN) - 1;
        p.append(data(7, end, u64::from(MAX_RUN) - 1, end - 1, 1, false));
        p.append(data(7, end + 1, u64::from(MAX_RUN), end, 1, false));
        assert_eq!(counts(&p), [MAX_RUN, 1]);
    }
}
