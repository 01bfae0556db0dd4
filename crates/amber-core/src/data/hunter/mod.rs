//! HUNTER (hunter.txt): asynchronous metadata over the split layout. A
//! write takes blocks at the tail of its CPU's data log, copies the data
//! there out of place and fences it, queues the metadata update (the
//! blocks' logical information and the file's new attributes) on the
//! file's queue, and makes the data visible in the file's DRAM index; a
//! worker, fsync or a full queue persists the queue later in batches
//! (`queue`). `hunter-sync` persists each write's updates before it
//! returns — the paper's ablation of the asynchronous path.
//!
//! Only regular files' data takes this path; directories, symlinks and
//! namespace operations keep the core's synchronous journal transactions,
//! as HUNTER's own implementation does (§IV-C: "HUNTER does not
//! specifically optimize these operations").

mod chain;
mod engine;
mod index;
mod lease;
mod log;
pub(crate) mod options;
mod own;
mod prefault;
mod queue;
mod worker;

use super::control::Control;
use super::direct::partial_edges;
use super::{block_runs, file_runs, write_in_blocks, DataPolicy, Direct, FallocStep, FALLOC_CHUNK};
use crate::data::Context;
use crate::error::{FsError, Result};
use crate::fs::Core;
use crate::inode::InodeState;
use crate::split::{effective, walk_chain, LogState, SplitMedia};
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::{FileKind, PoolLayout, Timespec, BLOCK_SIZE};
use amber_pmem::PmDevice;
pub(in crate::data) use engine::block_of;
use index::{FileIndex, Sizer};
use log::DataLogs;
pub use options::{HunterOptions, MAX_HUNTER_QUEUES, MAX_HUNTER_WORKERS};
use prefault::Prefault;
use queue::{Op, Queues, Snapshot, MAX_RUN};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// Counters for the workbench.
#[derive(Default)]
pub(super) struct Stats {
    persisted: AtomicU64,
    batches: AtomicU64,
    full_queue_persists: AtomicU64,
    records: AtomicU64,
    entries: AtomicU64,
    freed: AtomicU64,
    worker_turns: AtomicU64,
    index_bytes: AtomicU64,
    /// Appends written in place inside the last block.
    in_place: AtomicU64,
    /// Appends that started inside the last block and ran past it: that
    /// block's part in place, the rest out of place (`append_across`).
    appends_across: AtomicU64,
    /// Whole-block overwrites that committed themselves (own.rs).
    own_commits: AtomicU64,
    /// Blocks a lessee wrote that became the file's (lease.rs).
    adopted: AtomicU64,
}

/// What the policy and its workers share.
pub(super) struct Shared {
    opts: HunterOptions,
    queues: Queues,
    logs: DataLogs,
    sizer: Sizer,
    stats: Stats,
    control: Control,
    prefault: Arc<Prefault>,
}

/// The `hunter`, `hunter-sync` and `hunter-lfs` policies; as the engine
/// of a composed policy (`engine`), `X` is what that policy keeps per file
/// beside hunter's own state (nothing for hunter itself).
pub(crate) struct Hunter<X = ()> {
    /// Persist every write's metadata before returning (`hunter-sync`).
    sync: bool,
    /// Records in summary blocks inside the data log (`hunter-lfs`).
    lfs: bool,
    /// Whole-block overwrites commit themselves with one fence (`own`;
    /// amber's, not the paper's).
    own: bool,
    shared: Arc<Shared>,
    extra: PhantomData<fn() -> X>,
}

/// What a composed policy may keep per file with hunter's state: made
/// empty when the file's state is, dropped with it.
pub(crate) trait PerFile: Default + Send + Sync + 'static {}
impl<X: Default + Send + Sync + 'static> PerFile for X {}

/// A regular file's DRAM state: its index and the seq its next write
/// gets (one more than the newest its attribute log has seen).
struct HunterFile<X> {
    index: FileIndex,
    next_seq: u64,
    /// Scratch lists of a write (its blocks and queued updates), kept
    /// between writes up to `SCRATCH_KEPT` entries.
    blocks: Vec<u64>,
    ops: Vec<Op>,
    /// What a policy built on hunter keeps per file (amber's DRAM
    /// buffer): it lives and dies with the file's DRAM state, under the
    /// same inode lock, so reaching it takes no lock of its own.
    extra: X,
    /// The lowest file block whose record's link may be stale: unmount
    /// rewrites the links from there up (`chain.rs`).
    stale_links: Option<u64>,
    /// A write lease on the file is out: its seqs from `next_seq` are
    /// the lessee's until the lease is adopted (`lease.rs`).
    lease_out: bool,
}

/// Entries of scratch a file keeps between writes (a 256 KiB write's).
const SCRATCH_KEPT: usize = 64;

impl<X> HunterFile<X> {
    /// The seq of the change being made (one per write, truncate or
    /// setattr).
    fn take_seq(&mut self) -> u64 {
        // The daemon recalls a write lease before any change of its file;
        // a seq taken now could overwrite the lessee's newest entry.
        debug_assert!(
            !self.lease_out,
            "a change of a file whose write lease is out"
        );
        self.next_seq += 1;
        self.next_seq - 1
    }

    fn keep_scratch(&mut self, mut blocks: Vec<u64>, mut ops: Vec<Op>) {
        if blocks.capacity() <= SCRATCH_KEPT {
            blocks.clear();
            self.blocks = blocks;
        }
        if ops.capacity() <= 2 * SCRATCH_KEPT {
            ops.clear();
            self.ops = ops;
        }
    }
}

impl Hunter {
    /// One of the hunter policies (`sync`: hunter-sync, `lfs`:
    /// hunter-lfs), with data logs for `cpus` CPUs.
    pub(crate) fn new(opts: &HunterOptions, cpus: usize, sync: bool, lfs: bool) -> Hunter {
        Hunter::build(opts, cpus, sync, lfs)
    }
}

impl<X: PerFile> Hunter<X> {
    /// The engine, keeping an `X` per file for the policy built on it.
    pub(super) fn build(opts: &HunterOptions, cpus: usize, sync: bool, lfs: bool) -> Self {
        let h = *opts;
        let default_blocks = (h.index_bytes / 8) as usize;
        Hunter {
            sync,
            lfs,
            own: false,
            extra: PhantomData,
            shared: Arc::new(Shared {
                opts: h,
                queues: Queues::new(h.queues, h.queue_max),
                logs: DataLogs::new(cpus.clamp(1, 16)),
                sizer: Sizer::new(default_blocks, h.window),
                stats: Stats::default(),
                control: Control::default(),
                prefault: Arc::default(),
            }),
        }
    }

    /// Builds a file's state from PM: its newest entry gives size, blocks
    /// and head, its chain the index (design.md §12.5).
    fn open_file<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
    ) -> Result<HunterFile<X>> {
        let m = media(fs);
        let dev = &**fs.device();
        let log = LogState::read(m, dev, st.ino, st.disk.generation);
        let eff = effective(&st.disk, log.newest.as_ref());
        let (head, seq) = log.newest.map_or((0, 0), |e| (e.head, e.seq));
        let chain = walk_chain(
            m,
            dev,
            fs.layout(),
            st.ino,
            st.disk.generation,
            head,
            eff.blocks,
        )?;
        // The chain runs from the head down: the first is the highest. It
        // takes the room it needs; the pre-allocation waits for a write.
        let mut index = FileIndex::default();
        let highest = chain.first().map_or(0, |&(fb, _)| fb);
        index.make_room(0, highest, chain.len() as u64)?;
        for (fb, b) in chain.into_iter().rev() {
            index.set(fb, b);
        }
        index.plan(self.shared.sizer.capacity());
        if eff.blocks > 0 {
            // A file read from PM is history too (hunter.txt §III-D
            // samples file sizes): without it, a workload that opens
            // many existing files and never fsyncs or deletes one gave
            // each the 2 MiB default (webserver's 5,000 files: 9 GB of
            // index reserved, and 0.56-0.9x `direct` from the allocations).
            self.shared.sizer.sample(eff.blocks);
        }
        self.shared
            .stats
            .index_bytes
            .fetch_add(index.bytes(), Relaxed);
        st.disk.size = eff.size;
        st.disk.blocks = eff.blocks;
        st.disk.mtime = eff.mtime;
        st.disk.ctime = eff.ctime;
        Ok(HunterFile {
            index,
            next_seq: seq + 1,
            blocks: Vec::new(),
            ops: Vec::new(),
            extra: X::default(),
            stale_links: None,
            lease_out: false,
        })
    }

    /// Runs `f` on the file's state, loading it on first use.
    fn with_file<D: PmDevice, R>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        f: impl FnOnce(&mut HunterFile<X>, &mut InodeState) -> Result<R>,
    ) -> Result<R> {
        let mut hf = match st.policy.take().map(|b| b.downcast::<HunterFile<X>>()) {
            Some(Ok(hf)) => hf,
            _ => Box::new(self.open_file(fs, st)?),
        };
        let before = hf.index.bytes();
        let r = f(&mut hf, st);
        let after = hf.index.bytes();
        let s = &self.shared.stats.index_bytes;
        if after > before {
            s.fetch_add(after - before, Relaxed);
        } else if after < before {
            s.fetch_sub(before - after, Relaxed);
        }
        st.policy = Some(hf);
        r
    }

    /// `n` blocks for file blocks `first..`, from the data log that goes
    /// on from the file's block before `first` (`index`), else from this
    /// CPU's: a file written in turns by several threads stays in one
    /// run. When the pool has none left, the blocks that queued frees are
    /// holding come back first: every queue is persisted, which clears
    /// their records, every log gives back its unwritten tail, and the
    /// log tries again (gap-write without a cleaner).
    fn take_blocks<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        (index, first): (&FileIndex, u64),
        n: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        // Only a write placing a new block (an append, a hole filled)
        // looks for the log that follows the file's previous block: an
        // overwrite's look read every other CPU's log tail, two cache
        // misses a write (12% of a single-process writer's random 4 KiB
        // overwrites), and its file is not laid out in order anyway.
        let after = first
            .checked_sub(1)
            .filter(|_| index.get(first).is_none())
            .and_then(|p| index.get(p))
            .map(|b| b + 1);
        self.take_blocks_for(fs, (n, after), out, true)
    }

    /// Room in `hf`'s index for file blocks `first..=last` and a new
    /// block for each, in the file's scratch lists (kept empty between
    /// writes, so a small write allocates nothing): the blocks, and the
    /// list for the write's metadata operations.
    fn new_blocks<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        hf: &mut HunterFile<X>,
        (first, last): (u64, u64),
    ) -> Result<(Vec<u64>, Vec<Op>)> {
        hf.index.make_room(first, last, last - first + 1)?;
        let mut blocks = std::mem::take(&mut hf.blocks);
        let ops = std::mem::take(&mut hf.ops);
        let n = (last - first + 1) as usize;
        self.take_blocks(fs, (&hf.index, first), n, &mut blocks)?;
        Ok((blocks, ops))
    }

    /// `take_blocks`, with the fresh runs' pages mapped ahead in this
    /// process only if `here` (not for a lessee, which writes the blocks
    /// through its own mapping and maps them ahead there).
    fn take_blocks_for<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        (n, after): (usize, Option<u64>),
        out: &mut Vec<u64>,
        here: bool,
    ) -> Result<()> {
        debug_assert!(out.is_empty());
        let logs = &self.shared.logs;
        // The log writes a run's blocks one after another: its pages are
        // mapped ahead, not a fault per block (prefault.rs).
        let layout = fs.layout();
        let fresh = |b: u64, len: u64| {
            if here {
                let dev = &**fs.device();
                let pf = &self.shared.prefault;
                pf.request(dev, layout.block_offset(b), len * BLOCK_SIZE);
            }
        };
        logs.take(fs.blocks(), fs.homes(), (n, after), out, &fresh);
        if out.len() < n {
            self.shared.queues.drain_all(fs, &self.shared.stats)?;
            // Other logs' unwritten tails too: statfs counts them free.
            logs.release(fs.blocks());
            logs.take(fs.blocks(), fs.homes(), (n - out.len(), None), out, &fresh);
        }
        if out.len() < n {
            out.drain(..).for_each(|b| fs.blocks().free(b));
            return Err(FsError::NoSpace);
        }
        Ok(())
    }

    /// Queues a change and, when it must be durable now, persists the
    /// file's queue. `own`: the change committed itself (§13.6), so a
    /// persist owes it nothing.
    fn queue<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        ops: &[Op],
        snap: Snapshot,
        now: bool,
        own: bool,
    ) -> Result<()> {
        let q = &self.shared.queues;
        let sh = &self.shared;
        let filling = q.push(fs, &sh.stats, st.ino, st.disk.generation, ops, snap, own)?;
        if filling && sh.opts.interval.is_some() {
            sh.control.wake();
        }
        if now {
            q.drain(fs, &self.shared.stats, q.shard_of(st.ino))?;
        }
        Ok(())
    }

    /// The end of every data-log write, once its data is streamed and its
    /// DRAM side built: the fence that makes the data durable before any
    /// record can name it, then the updates queued (`queue`'s `now` and
    /// `own`), and the scratch lists (`blocks`, `ops`) back to the file.
    #[allow(clippy::too_many_arguments)]
    fn fence_and_queue<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        hf: &mut HunterFile<X>,
        (blocks, ops): (Vec<u64>, Vec<Op>),
        snap: Snapshot,
        now: bool,
        own: bool,
    ) -> Result<()> {
        fs.drain()?;
        let queued = self.queue(fs, st, &ops, snap, now, own);
        hf.keep_scratch(blocks, ops);
        queued
    }
}

/// The mounted pool's split layout: mount refuses the hunter policies on
/// a pool without one.
fn media<D: PmDevice>(fs: Context<'_, D>) -> &SplitMedia {
    fs.split()
        .as_ref()
        .expect("hunter policies mount only pools with the split layout")
}

/// The file's state, if it is loaded (a file never loaded holds no data).
fn file_of<X: PerFile>(st: &InodeState) -> Option<&HunterFile<X>> {
    st.policy.as_ref()?.downcast_ref::<HunterFile<X>>()
}

/// Maps file blocks `fbs` to the new `blocks` (ascending file blocks, as
/// many as blocks) in the file's index and queues their records as
/// `Data` updates of write `seq`: one per run of consecutive file blocks
/// in consecutive blocks — a data log hands blocks out in order, so a
/// write is mostly one run, and a 64 KiB write queues one update, not 16.
/// Each run links to the block just below its first (set by the run
/// before it); `own`: the write committed itself (§13.6). Returns the
/// blocks the new ones replace.
fn map_blocks<X>(
    hf: &mut HunterFile<X>,
    fbs: impl Iterator<Item = u64>,
    blocks: &[u64],
    seq: u64,
    own: bool,
    ops: &mut Vec<Op>,
) -> Vec<u64> {
    let mut freed = Vec::new();
    let mut run: Option<Op> = None;
    for (fb, &b) in fbs.zip(blocks) {
        match &mut run {
            Some(Op::Data {
                block,
                file_block,
                count,
                ..
            }) if *block + u64::from(*count) == b
                && *file_block + u64::from(*count) == fb
                && *count < MAX_RUN =>
            {
                *count += 1;
            }
            _ => ops.extend(run.replace(Op::Data {
                block: b,
                file_block: fb,
                link: hf.index.below(fb),
                seq,
                count: 1,
                own,
            })),
        }
        freed.extend(hf.index.set(fb, b));
    }
    ops.extend(run);
    freed
}

/// Maps a write of file blocks `first..=last` into `blocks` (consecutive
/// file blocks, so the one link it leaves stale is the block above
/// `last`'s, `chain.rs`) and adds its updates to `ops`: the `Data` runs
/// and the frees of the blocks it replaced.
fn map_write<X>(
    hf: &mut HunterFile<X>,
    (first, last): (u64, u64),
    blocks: &[u64],
    seq: u64,
    own: bool,
    ops: &mut Vec<Op>,
) {
    let freed = map_blocks(hf, first..=last, blocks, seq, own, ops);
    if hf.index.above(last).is_some() {
        hf.links_stale_from(last + 1);
    }
    push_frees(ops, freed, true);
}

/// Adds `Free` updates for the blocks a change released, in runs (most
/// writes release none: nothing to sort or collect then); `replaced`
/// when the change put newer blocks at the same file blocks (a write),
/// not for a truncate or a punch.
fn push_frees(ops: &mut Vec<Op>, mut freed: Vec<u64>, replaced: bool) {
    if freed.is_empty() {
        return;
    }
    freed.sort_unstable();
    let runs = block_runs(freed.into_iter()).into_iter();
    ops.extend(runs.map(|(block, count)| Op::Free {
        block,
        count,
        replaced,
    }));
}

/// A write's DRAM inode changes (`direct::note_write`); a mode the write
/// changed (set-id bits dropped) is the inode's, stored at once.
fn note_write<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
    if super::direct::note_write(fs, st) {
        super::direct::store_first_line(fs, st)?;
    }
    Ok(())
}

fn snapshot<X>(hf: &HunterFile<X>, st: &InodeState, seq: u64) -> Snapshot {
    Snapshot {
        seq,
        size: st.disk.size,
        blocks: hf.index.count(),
        mtime: st.disk.mtime,
        ctime: st.disk.ctime,
        head: hf.index.head(),
    }
}

/// Zeroes, in place, the bytes of the block holding `size` from `size`
/// up to `to` (at most the block's end), and fences: a file's last block
/// may hold bytes past its size (a shrink leaves them, a crash may leave
/// an in-place append's), which must read as zeros once the size grows
/// over them. They lie past the durable size, so no crash shows the
/// zeroing either.
fn zero_past_end<D: PmDevice, X>(
    fs: Context<'_, D>,
    hf: &HunterFile<X>,
    size: u64,
    to: u64,
) -> Result<()> {
    let fb = size / BLOCK_SIZE;
    let bstart = fb * BLOCK_SIZE;
    let to = to.min(bstart + BLOCK_SIZE);
    match hf.index.get(fb) {
        Some(b) if to > size => {
            fs.device()
                .zero_nt(fs.layout().block_offset(b) + (size - bstart), to - size);
            fs.drain()
        }
        _ => Ok(()),
    }
}

/// Copies a write's bytes into its new blocks: whole blocks straight from
/// the caller (one copy per run of consecutive blocks), partial ones
/// merged with the bytes they keep. Non-temporal; the caller fences.
fn copy_in<D: PmDevice, X>(
    fs: Context<'_, D>,
    hf: &HunterFile<X>,
    old_size: u64,
    off: u64,
    data: &[u8],
    blocks: &[u64],
) {
    let dev = &**fs.device();
    let l = fs.layout();
    let end = off + data.len() as u64;
    let first = off / BLOCK_SIZE;
    let mut i = 0;
    while i < blocks.len() {
        let fb = first + i as u64;
        let bstart = fb * BLOCK_SIZE;
        let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
        if e - s == BLOCK_SIZE {
            let mut j = i + 1;
            while j < blocks.len()
                && blocks[j] == blocks[j - 1] + 1
                && end >= (first + j as u64 + 1) * BLOCK_SIZE
            {
                j += 1;
            }
            let from = (bstart - off) as usize;
            let len = (j - i) * BLOCK_SIZE as usize;
            dev.write_nt(l.block_offset(blocks[i]), &data[from..from + len]);
            i = j;
            continue;
        }
        let buf = merged_block(fs, hf, old_size, fb, off, data);
        dev.write_nt(l.block_offset(blocks[i]), &buf);
        i += 1;
    }
}

/// File block `fb` as a write of `data` at `off` leaves it: the bytes the
/// write covers, the old block's below the old size, zeros past it.
fn merged_block<D: PmDevice, X>(
    fs: Context<'_, D>,
    hf: &HunterFile<X>,
    old_size: u64,
    fb: u64,
    off: u64,
    data: &[u8],
) -> [u8; BLOCK_SIZE as usize] {
    let bstart = fb * BLOCK_SIZE;
    let end = off + data.len() as u64;
    let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
    debug_assert!(s < e, "the write touches block {fb}");
    let mut buf = [0u8; BLOCK_SIZE as usize];
    if let Some(old) = hf.index.get(fb) {
        let keep = old_size.saturating_sub(bstart).min(BLOCK_SIZE) as usize;
        fs.device()
            .read(fs.layout().block_offset(old), &mut buf[..keep]);
    }
    buf[(s - bstart) as usize..(e - bstart) as usize]
        .copy_from_slice(&data[(s - off) as usize..(e - off) as usize]);
    buf
}

impl<X: PerFile> Hunter<X> {
    /// Persists the file's queue, then puts an attribute entry of its DRAM
    /// attributes (with `times` for mtime and ctime, if given) into `tx`,
    /// under a seq of its own.
    fn entry_in_tx<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        tx: &mut crate::journal::Tx,
        times: Option<(Timespec, Timespec)>,
    ) -> Result<()> {
        self.with_file(fs, st, |hf, st| {
            let seq = hf.take_seq();
            let mut snap = snapshot(hf, st, seq);
            if let Some((mtime, ctime)) = times {
                (snap.mtime, snap.ctime) = (mtime, ctime);
            }
            let sh = &self.shared;
            sh.queues
                .entry_in_tx(fs, &sh.stats, st.ino, st.disk.generation, snap, tx)
        })
    }
}

impl<X: PerFile> Hunter<X> {
    /// Writes `data` at `off` into the file's own blocks, which it maps
    /// (an append inside the last block, or blocks a mapping pins), zeroing
    /// first what the write exposes past the size in the last block;
    /// fences, then queues the file's new attributes alone (no record
    /// changes: the blocks are the ones their records already name).
    fn in_place<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        hf: &mut HunterFile<X>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<()> {
        let size = st.disk.size;
        let end = off + data.len() as u64;
        if off > size {
            zero_past_end(fs, hf, size, off)?;
        }
        write_in_blocks(fs, st.ino, (off, data), |fb| hf.index.get(fb))?;
        fs.drain()?;
        let seq = hf.take_seq();
        note_write(fs, st)?;
        st.disk.size = size.max(end);
        self.shared.stats.in_place.fetch_add(1, Relaxed);
        let snap = snapshot(hf, st, seq);
        self.queue(fs, st, &[], snap, sync || self.sync, false)
    }
}

impl<X: PerFile> Hunter<X> {
    /// An append that starts inside the file's partial last block
    /// (`last_block`) and runs past it (a log's or a WAL's unaligned
    /// records): that block's part goes in place, past the durable size
    /// as an append inside the block does, and only the blocks past it
    /// out of place — all one change: one seq for their records and the
    /// snapshot with the new size, queued after the one fence. After a
    /// crash an entry of that seq covers both, or the old size hides the
    /// bytes in place and the records are stale (design.md §12.2, §12.4):
    /// the append is whole or absent, and the old block is neither read
    /// nor copied.
    fn append_across<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        hf: &mut HunterFile<X>,
        st: &mut InodeState,
        (off, data, last_block): (u64, &[u8], u64),
        sync: bool,
    ) -> Result<()> {
        let size = st.disk.size;
        let end = off + data.len() as u64;
        let split = (off / BLOCK_SIZE + 1) * BLOCK_SIZE;
        debug_assert!(off >= size && size > split - BLOCK_SIZE && end > split);
        let (head, tail) = data.split_at((split - off) as usize);
        let (first, last) = (split / BLOCK_SIZE, (end - 1) / BLOCK_SIZE);
        let (blocks, mut ops) = self.new_blocks(fs, hf, (first, last))?;
        // A gap between the size and the append is zeroed (and fenced)
        // first, as any growth zeroes it.
        zero_past_end(fs, hf, size, off)?;
        let at = fs.layout().block_offset(last_block) + off % BLOCK_SIZE;
        fs.device().write_nt(at, head);
        copy_in(fs, hf, size, split, tail, &blocks);
        let seq = hf.take_seq();
        map_write(hf, (first, last), &blocks, seq, false, &mut ops);
        note_write(fs, st)?;
        st.disk.size = end;
        st.disk.blocks = hf.index.count();
        self.shared.stats.appends_across.fetch_add(1, Relaxed);
        let snap = snapshot(hf, st, seq);
        self.fence_and_queue(fs, st, hf, (blocks, ops), snap, sync || self.sync, false)
    }
}

/// Zeros for fallocate's blocks and a punch's edges.
static ZEROS: [u8; BLOCK_SIZE as usize] = [0; BLOCK_SIZE as usize];

/// fallocate under the hunter policies (design.md §12.7).
impl<X: PerFile> Hunter<X> {
    /// The holes of `[off, end)` below the file's size (grown to `end`
    /// first unless `keep_size`) get zeroed blocks, each `FALLOC_CHUNK`
    /// of them one change (`write_blocks`), found chunk by chunk so a huge
    /// range costs no memory. Past the size nothing is allocated with
    /// `keep_size`: a record past its file's size is not valid (§12.4),
    /// and a later write would not use the block anyway. A range with
    /// more holes than the pool has free blocks fails with ENOSPC before
    /// anything changes; one that runs out midway (other writers took the
    /// space) keeps the chunks already filled and the grown size.
    fn allocate<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        end: u64,
        keep_size: bool,
    ) -> Result<()> {
        let old = st.disk.size;
        let grows = !keep_size && end > old;
        let size = if grows { end } else { old };
        let (first, stop) = (off / BLOCK_SIZE, end.min(size).div_ceil(BLOCK_SIZE));
        let span = stop.saturating_sub(first);
        let mapped = self.with_file(fs, st, |hf, _| Ok(hf.index.count_in(first, stop)))?;
        let holes = span > mapped;
        let free = fs.blocks().free_count() + DataPolicy::<D>::free_held_blocks(self);
        if span - mapped > free {
            return Err(FsError::NoSpace);
        }
        if !grows && !holes {
            return Ok(());
        }
        if grows {
            self.with_file(fs, st, |hf, st| zero_past_end(fs, hf, st.disk.size, end))?;
        }
        let now = fs.now();
        if grows {
            st.disk.size = end;
            st.disk.mtime = now;
        }
        st.disk.ctime = now;
        if !holes {
            let snap = self.with_file(fs, st, |hf, st| {
                let seq = hf.take_seq();
                Ok(snapshot(hf, st, seq))
            })?;
            return self.queue(fs, st, &[], snap, true, false);
        }
        let mut at = first;
        // Each round fills at least one hole or ends: bounded by the span.
        while at < stop {
            let chunk = self.with_file(fs, st, |hf, _| {
                let mut chunk = Vec::with_capacity(FALLOC_CHUNK);
                while at < stop && chunk.len() < FALLOC_CHUNK {
                    if hf.index.get(at).is_none() {
                        chunk.push(at);
                    }
                    at += 1;
                }
                Ok(chunk)
            })?;
            let images: Vec<(u64, &[u8])> = chunk.iter().map(|&fb| (fb, &ZEROS[..])).collect();
            self.write_blocks(fs, st, &images, true)?;
        }
        Ok(())
    }

    /// Punches `[off, end)` (cut at the size): the edges of mapped partial
    /// blocks are overwritten with zeros (out of place, like any write),
    /// then the whole blocks leave the index in one change: a `Free` run
    /// per run of them, the block above marked for a new link at unmount
    /// (`chain.rs`), and the file's snapshot; then the file's queue is persisted. Until
    /// the punched blocks' records are cleared (the last step of that), a
    /// crash leaves them valid with the data they had: each byte of the
    /// range is old or zero, as for a write of zeros.
    fn punch<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        end: u64,
    ) -> Result<()> {
        let end = end.min(st.disk.size);
        if off >= end {
            return Ok(());
        }
        let first_whole = off.div_ceil(BLOCK_SIZE);
        let end_whole = end / BLOCK_SIZE;
        for (fb, s, e) in partial_edges(off, end) {
            let mapped = self.with_file(fs, st, |hf, _| Ok(hf.index.get(fb).is_some()))?;
            if mapped {
                DataPolicy::<D>::write(self, fs, st, s, &ZEROS[..(e - s) as usize], false)?;
            }
        }
        let change = self.with_file(fs, st, |hf, st| {
            if first_whole >= end_whole {
                return Ok(None);
            }
            let gone = hf.index.clear(first_whole, end_whole - 1);
            if gone.is_empty() {
                return Ok(None);
            }
            let seq = hf.take_seq();
            let mut ops = Vec::new();
            if hf.index.above(end_whole - 1).is_some() {
                hf.links_stale_from(end_whole);
            }
            push_frees(&mut ops, gone, false);
            let now = fs.now();
            st.disk.mtime = now;
            st.disk.ctime = now;
            st.disk.blocks = hf.index.count();
            Ok(Some((ops, snapshot(hf, st, seq))))
        })?;
        match change {
            Some((ops, snap)) => self.queue(fs, st, &ops, snap, true, false),
            None => {
                let q = &self.shared.queues;
                q.drain(fs, &self.shared.stats, q.shard_of(st.ino))
            }
        }
    }
}

impl<D: PmDevice, X: PerFile> DataPolicy<D> for Hunter<X> {
    fn name(&self) -> &'static str {
        match (self.sync, self.lfs) {
            (true, _) => "hunter-sync",
            (false, true) => "hunter-lfs",
            (false, false) => "hunter",
        }
    }

    fn pool_layout(&self) -> PoolLayout {
        if self.lfs {
            PoolLayout::Lfs
        } else {
            PoolLayout::Split
        }
    }

    fn durable_on_return(&self) -> bool {
        self.sync
    }

    /// A persist takes a prefix of the queue, and an entry covers every
    /// update of its file before it (§12.4).
    fn ordered_files(&self) -> bool {
        true
    }

    /// As for `durable_on_return`: a front end sending every write sync
    /// (to skip fsync) would make hunter and hunter-lfs persist every
    /// write's metadata at once, which is hunter-sync.
    fn sync_writes_are_complete(&self) -> bool {
        self.sync
    }

    fn load(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        if st.kind() == FileKind::Regular {
            let hf = self.open_file(fs, st)?;
            st.policy = Some(Box::new(hf));
        }
        Ok(())
    }

    fn read(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        let size = st.disk.size;
        if off >= size {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        let hf = file_of::<X>(st);
        let dev = &**fs.device();
        let l = fs.layout();
        let mut done = 0;
        while done < n {
            let pos = off + done as u64;
            let fb = pos / BLOCK_SIZE;
            let inb = pos % BLOCK_SIZE;
            let mut k = ((BLOCK_SIZE - inb) as usize).min(n - done);
            match hf.and_then(|hf| hf.index.get(fb)) {
                Some(b) => {
                    // Extend over blocks that follow on PM as in the file.
                    let mut next = 1;
                    while done + k < n
                        && hf.and_then(|hf| hf.index.get(fb + next)) == Some(b + next)
                    {
                        k = (k + BLOCK_SIZE as usize).min(n - done);
                        next += 1;
                    }
                    dev.read(l.block_offset(b) + inb, &mut buf[done..done + k]);
                }
                None => buf[done..done + k].fill(0),
            }
            done += k;
        }
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
        let end = off + data.len() as u64;
        let first = off / BLOCK_SIZE;
        let last = (end - 1) / BLOCK_SIZE;
        self.with_file(fs, st, |hf, st| {
            if self.may_own(fs, st, hf, off, data.len()) {
                return self.write_own(fs, hf, st, off, data);
            }
            let size = st.disk.size;
            let partial_last = off >= size && size > first * BLOCK_SIZE;
            match hf.index.get(first).filter(|_| partial_last) {
                // An append inside the last block goes in place: its
                // bytes lie past the durable size, so no crash shows
                // them until an entry with the new size is durable, and
                // that entry is queued after their fence.
                Some(_) if first == last => return self.in_place(fs, hf, st, off, data, sync),
                Some(b) => return self.append_across(fs, hf, st, (off, data, b), sync),
                None => {}
            }
            let (blocks, mut ops) = self.new_blocks(fs, hf, (first, last))?;
            if end > size {
                zero_past_end(fs, hf, size, end)?;
            }
            copy_in(fs, hf, size, off, data, &blocks);
            // The DRAM side runs while the copy's last lines stream out:
            // nothing else sees it before the inode lock is released,
            // and a failed drain poisons the file system.
            let seq = hf.take_seq();
            map_write(hf, (first, last), &blocks, seq, false, &mut ops);
            note_write(fs, st)?;
            st.disk.size = size.max(end);
            st.disk.blocks = hf.index.count();
            let snap = snapshot(hf, st, seq);
            self.fence_and_queue(fs, st, hf, (blocks, ops), snap, sync || self.sync, false)
        })?;
        Ok(data.len())
    }

    /// In place, with the attributes queued as any hunter write's: the
    /// blocks keep their records, so after a crash each byte of the range
    /// is old or new and the size is a queued one's.
    fn write_in_place(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        self.with_file(fs, st, |hf, st| self.in_place(fs, hf, st, off, data, sync))?;
        Ok(data.len())
    }

    /// The new times go in an attribute entry of their own, as a write's.
    fn touch(&self, fs: Context<'_, D>, st: &mut InodeState, now: Timespec) -> Result<()> {
        st.disk.mtime = now;
        st.disk.ctime = now;
        self.queue_attrs(fs, st)
    }

    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        if size > MAX_FILE_SIZE {
            return Err(FsError::FileTooLarge);
        }
        let old = st.disk.size;
        let (ops, snap) = self.with_file(fs, st, |hf, st| {
            if size > old {
                // Growing exposes the rest of the last block: zeroed first
                // (its bytes past the size may be an earlier file end's).
                zero_past_end(fs, hf, old, size)?;
            }
            let seq = hf.take_seq();
            // Shrinking leaves the last block's bytes past the new size as
            // they are: nothing shows them, and growing zeroes them.
            let mut ops = Vec::new();
            push_frees(
                &mut ops,
                hf.index.truncate(size.div_ceil(BLOCK_SIZE)),
                false,
            );
            if size != old {
                let now = fs.now();
                st.disk.mtime = now;
                st.disk.ctime = now;
            }
            st.disk.size = size;
            st.disk.blocks = hf.index.count();
            Ok((ops, snapshot(hf, st, seq)))
        })?;
        self.queue(fs, st, &ops, snap, true, false)
    }

    /// Allocation fills the range's holes with zeroed blocks and grows
    /// the size unless `keep_size`; a punch zeroes the edges by writes of
    /// zeros and unmaps the whole blocks. Both go through the file's queue
    /// and persist it before returning, as truncate does (durable on
    /// return, design.md §14). Neither reserves space for later writes:
    /// every write goes out of place, into blocks it takes then.
    fn fallocate(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<()> {
        let end = off + len;
        match mode {
            FallocStep::Allocate { keep_size } => self.allocate(fs, st, off, end, keep_size),
            FallocStep::PunchHole => self.punch(fs, st, off, end),
        }
    }

    /// Own commits (§13.6) are durable already: a queue holding nothing
    /// else the file needs is left to its worker.
    fn fsync(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        let q = &self.shared.queues;
        let s = q.shard_of(st.ino);
        if !q.settled(s) {
            q.drain(fs, &self.shared.stats, s)?;
        }
        self.shared.sizer.sample(st.disk.blocks);
        Direct.fsync(fs, st)
    }

    /// utimens can set mtime back, so an entry's mtime is the file's, not
    /// the later of the entry's and the inode's: a new mtime goes into a
    /// new entry, written by the same journal transaction as the inode.
    fn setattr_tx(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        new: &mut amber_format::Inode,
        tx: &mut crate::journal::Tx,
    ) -> Result<()> {
        if st.kind() != FileKind::Regular || new.mtime == st.disk.mtime {
            return Ok(());
        }
        self.entry_in_tx(fs, st, tx, Some((new.mtime, new.ctime)))
    }

    fn sync_all(&self, fs: Context<'_, D>) -> Result<()> {
        self.shared.queues.drain_all(fs, &self.shared.stats)
    }

    fn spawn(&self, core: Weak<Core<D>>) {
        self.shared.prefault.spawn(core.clone());
        worker::spawn(&self.shared, core);
    }

    fn unmount(&self, fs: Context<'_, D>) {
        self.shared.prefault.stop();
        self.shared.control.stop();
        self.shared.logs.release(fs.blocks());
    }

    fn seal(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        let file = (st.ino, st.disk.generation);
        match st
            .policy
            .as_mut()
            .and_then(|p| p.downcast_mut::<HunterFile<X>>())
        {
            Some(hf) => chain::seal(fs, file, hf).map(drop),
            None => Ok(()),
        }
    }

    fn forget(&self, _fs: Context<'_, D>, st: &mut InodeState) {
        if let Some(Ok(hf)) = st.policy.take().map(|b| b.downcast::<HunterFile<X>>()) {
            self.shared.sizer.sample(hf.index.count());
            self.shared
                .stats
                .index_bytes
                .fetch_sub(hf.index.bytes(), Relaxed);
            self.shared
                .queues
                .forget(st.ino, st.disk.generation, hf.index.all());
        }
    }

    fn block_of(&self, st: &InodeState, fb: u64) -> Option<u64> {
        block_of::<X>(st, fb)
    }

    fn runs_of(&self, st: &InodeState, first: u64, end: u64) -> Vec<(u64, u64, u64)> {
        let Some(hf) = file_of::<X>(st) else {
            return Vec::new();
        };
        file_runs(hf.index.from(first).take_while(|&(fb, _)| fb < end))
    }

    fn describe(&self, _fs: Context<'_, D>, st: &InodeState) -> Vec<(String, String)> {
        let Some(hf) = file_of::<X>(st) else {
            return Vec::new();
        };
        let queued = self.shared.queues.queued(st.ino);
        let chain = match hf.stale_links() {
            Some(fb) => format!("stale from block {fb}"),
            None => "sound".into(),
        };
        vec![
            ("log_blocks".into(), hf.index.count().to_string()),
            (
                "metadata".into(),
                if queued { "queued" } else { "durable" }.into(),
            ),
            ("chain".into(), chain),
        ]
    }

    fn next_data_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        file_of::<X>(st)?.index.next_data(fb, limit)
    }

    fn next_hole_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        match file_of::<X>(st) {
            Some(hf) => hf.index.next_hole(fb, limit),
            None => (fb < limit).then_some(fb),
        }
    }

    fn write_back(&self, fs: Context<'_, D>, max_blocks: u64) -> Result<u64> {
        let q = &self.shared.queues;
        let mut left = usize::try_from(max_blocks).unwrap_or(usize::MAX);
        let mut done = 0;
        for s in 0..q.count() {
            let n = q.persist_batch(fs, &self.shared.stats, s, left)?;
            done += n as u64;
            left = left.saturating_sub(n);
            if left == 0 {
                break;
            }
        }
        Ok(done)
    }

    fn free_held_blocks(&self) -> u64 {
        self.shared.logs.reserved() + self.shared.queues.freeing()
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Relaxed);
        let (pending, pending_bytes) = self.shared.queues.pending();
        vec![
            ("queued".into(), get(&s.persisted) + pending),
            ("persisted".into(), get(&s.persisted)),
            ("batches".into(), get(&s.batches)),
            ("full_queue_persists".into(), get(&s.full_queue_persists)),
            ("records".into(), get(&s.records)),
            ("entries".into(), get(&s.entries)),
            ("freed".into(), get(&s.freed)),
            ("worker_turns".into(), get(&s.worker_turns)),
            ("in_place_appends".into(), get(&s.in_place)),
            ("appends_across".into(), get(&s.appends_across)),
            ("own_commits".into(), get(&s.own_commits)),
            ("adopted".into(), get(&s.adopted)),
            ("log_runs".into(), get(&self.shared.logs.runs)),
            ("gap_runs".into(), get(&self.shared.logs.gap_runs)),
            ("pending".into(), pending),
            ("queue_bytes".into(), pending_bytes),
            ("index_bytes".into(), get(&s.index_bytes)),
        ]
    }
}
