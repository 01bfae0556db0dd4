//! Data policies: how file contents move between the caller and PM. The
//! core calls the mounted policy for every read, write, truncate and fsync
//! with the inode locked; a policy is chosen by name at mount
//! ([`by_name`]). To add one, implement [`DataPolicy`] in a module of its
//! own and give it a row in [`registry`] (ARCHITECTURE.md).

mod amber;
mod context;
mod control;
mod cost;
mod cow;
mod direct;
mod finelog;
mod hinfs;
mod hunter;
mod lawn;
mod nova;
pub mod registry;

pub use context::Context;
pub use control::on_background_thread_start;

use crate::error::Result;
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::{PoolLayout, Timespec, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::sync::Weak;

pub use amber::{Amber, AmberBuffer, AmberZone, AmberZoneMax};
pub use cow::{Cow, CowStage};
pub use direct::Direct;
pub use finelog::Finelog;
pub use hinfs::{BufferOptions, Hinfs, Variant, MAX_WRITEBACK_THREADS, MIN_BUFFER};
pub use hunter::{HunterOptions, MAX_HUNTER_QUEUES, MAX_HUNTER_WORKERS};
pub use lawn::{Lawn, ZoneOptions};
pub use nova::Nova;
pub use registry::{by_name, layout_for, register, Policy, POLICIES};

/// A data path. Every method is called with the inode's write lock held
/// (read lock for `read`). Methods whose default is "`direct`'s" delegate
/// to [`Direct`], which implements each of them itself.
pub trait DataPolicy<D: PmDevice>: Send + Sync {
    /// The name it is selected by.
    fn name(&self) -> &'static str;

    /// Reads into `buf` from `off`; returns bytes read (0 at or past EOF).
    /// By default `direct`'s: straight from the file's blocks on PM.
    fn read(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        Direct.read(fs, st, off, buf)
    }

    /// Writes `data` at `off`, growing the file as needed. `sync` asks for
    /// the data to be durable on return (O_SYNC/O_DSYNC). `Core::write`
    /// guarantees `data` is not empty and ends within `MAX_FILE_SIZE`.
    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize>;

    /// Writes `data` at `off` in place: every block the range touches is
    /// pinned by a mapping (design.md §16), so it has a block on PM that
    /// must stay where it is, and a program's stores reach it directly.
    /// The size may grow, within the last of those blocks. Each byte is
    /// old or new after a crash, as for any in-place write; durable as
    /// the policy's other writes are (`sync` as for `write`). By default
    /// `direct`'s write, which writes in place; a policy whose files live
    /// outside block maps (the split layouts, NOVA's logs) has its own.
    fn write_in_place(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        Direct.write(fs, st, off, data, sync)
    }

    /// A mapping pins file blocks `[first, first + count)`, all below the
    /// end of file (design.md §16): until they are unpinned, every write
    /// to them goes through `write_in_place` and a program's stores
    /// change their PM bytes. Before returning, the policy makes those
    /// blocks' PM bytes the file's newest — writing back what it holds of
    /// them in DRAM or in the zone — and leaves no record whose validity
    /// hangs on their bytes (an own commit's checksum). Holes may stay:
    /// the core fills them next. Nothing by default: the inode's blocks
    /// are the file's.
    fn pin(
        &self,
        _fs: Context<'_, D>,
        _st: &mut InodeState,
        _first: u64,
        _count: u64,
    ) -> Result<()> {
        Ok(())
    }

    /// The file's mtime and ctime move to `now` without a write: a
    /// program stored through a mapping of it, noticed at msync or fsync
    /// (Linux moves them at the page fault). The policy keeps them where
    /// it keeps a file's times. By default in the DRAM inode, persisted
    /// with the other lazy times (fsync, unmount).
    fn touch(&self, _fs: Context<'_, D>, st: &mut InodeState, now: Timespec) -> Result<()> {
        st.disk.mtime = now;
        st.disk.ctime = now;
        st.times_dirty = true;
        Ok(())
    }

    /// Sets the file's size, freeing blocks past it or exposing zeros.
    /// By default `direct`'s: a journal transaction down, zeroing and one
    /// size store up, so atomic already.
    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        Direct.truncate(fs, st, size)
    }

    /// Allocates (zeroed) or punches out the blocks of `[off, off + len)`,
    /// a range `Core::fallocate` has checked (not empty, inside the largest
    /// file), so `off + len` cannot overflow; one step of a [`FallocMode`].
    /// By default `direct`'s.
    fn fallocate(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<()> {
        Direct.fallocate(fs, st, off, len, mode)
    }

    /// Whether a write made with `sync = true` leaves nothing for fsync to
    /// do (data, size and times durable on return). A front end that sends
    /// every write with `sync` may then skip fsync: the FUSE adapter tells
    /// the kernel fsync is not implemented, saving a round trip per call.
    /// True by default, as for every policy durable on return.
    fn sync_writes_are_complete(&self) -> bool {
        true
    }

    /// Whether a write is durable when it returns, without fsync: true for
    /// the direct-access and data-atomic policies, false for a policy that
    /// buffers writes in DRAM until fsync or write-back.
    fn durable_on_return(&self) -> bool {
        true
    }

    /// Whether the policy keeps data in the small-write zone: mount then
    /// recovers and keeps (or creates) the zone of the shape the options
    /// ask for. Without it mount folds any zone back into the files and
    /// removes it.
    fn uses_zone(&self) -> bool {
        false
    }

    /// With `uses_zone`: whether its zone commits a write by checksummed
    /// extent heads and one fence (zone version 2, amber's) rather than by
    /// LAWN's Algorithm 1 (version 1). A zone of the other kind is folded
    /// back at mount and one of this kind created.
    fn zone_extents(&self) -> bool {
        false
    }

    /// The pool layout the policy keeps regular files in (HUNTER's split
    /// layouts, format::split): mount refuses a pool made otherwise.
    fn pool_layout(&self) -> PoolLayout {
        PoolLayout::Classic
    }

    /// Called when a regular file is loaded from PM, before anyone uses
    /// it: a policy whose files are described by more than the inode
    /// (the split layout's attribute logs) completes the DRAM inode here.
    fn load(&self, _fs: Context<'_, D>, _st: &mut InodeState) -> Result<()> {
        Ok(())
    }

    /// Whether every write() is all-or-nothing across a crash: afterwards
    /// the range one write covered shows all its old bytes or all its new
    /// ones (amber, cow, finelog, lawn, nova). Without it each byte is old or new.
    fn atomic_writes(&self) -> bool {
        false
    }

    /// Whether the changes of one file reach PM in the order they were
    /// made, so that after a crash each file is as it was at some point
    /// of its history since it was last made durable (hunter's queues,
    /// amber: docs/design.md §12.4, §13.4). A policy that writes buffered
    /// blocks back one by one (hinfs) keeps each byte, not the order.
    fn ordered_files(&self) -> bool {
        false
    }

    /// Makes everything written to this file durable.
    /// By default `direct`'s: data was durable on return; times an
    /// overwrite left in DRAM are stored, or a fence keeps the promise.
    fn fsync(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        Direct.fsync(fs, st)
    }

    /// Called by setattr before it commits the inode's new attributes
    /// (`new`) in `tx`: a policy that keeps some of them elsewhere (the
    /// split layout's mtime, in attribute entries) adds its own bytes to
    /// the same transaction, so the change stays atomic.
    fn setattr_tx(
        &self,
        _fs: Context<'_, D>,
        _st: &mut InodeState,
        _new: &mut amber_format::Inode,
        _tx: &mut crate::journal::Tx,
    ) -> Result<()> {
        Ok(())
    }

    /// Called by syncfs (and unmount) after every file's fsync: persists
    /// what the policy holds that no file's fsync covers (the freeing of
    /// deleted files' blocks, say).
    fn sync_all(&self, _fs: Context<'_, D>) -> Result<()> {
        Ok(())
    }

    /// Called once at the end of mount, before the file system is used
    /// (a policy may calibrate against the device here).
    fn mounted(&self, _fs: Context<'_, D>) -> Result<()> {
        Ok(())
    }

    /// Starts background work (write-back threads) once the mounted core
    /// is shared; the handle is weak so the threads never keep a dropped
    /// file system alive. Front ends that keep the core in an `Arc` call
    /// it (`Fs::mount` does); without it a policy must still be correct.
    fn spawn(&self, _core: Weak<Core<D>>) {}

    /// Called by unmount before it fsyncs every file: background work
    /// stops here, so nothing is written after the pool is marked clean.
    fn unmount(&self, _fs: Context<'_, D>) {}

    /// Called by unmount for each loaded regular file once every queue is
    /// persisted, before the pool is marked clean: stores what only a
    /// clean mount reads (the split layout's chains, design.md §12.5).
    /// Unmount fences after the last file.
    fn seal(&self, _fs: Context<'_, D>, _st: &mut InodeState) -> Result<()> {
        Ok(())
    }

    /// The file is being freed: drop whatever the policy holds for it,
    /// without writing it back (its blocks are freed with it).
    fn forget(&self, _fs: Context<'_, D>, _st: &mut InodeState) {}

    /// The PM block holding file block `fb` on the media (not a DRAM
    /// buffer): where the small-write zone writes a slice back. By default
    /// the inode's block map; the split layout's files say it by their
    /// index.
    fn block_of(&self, st: &InodeState, fb: u64) -> Option<u64> {
        st.map.get(fb)
    }

    /// The PM runs holding file blocks `[first, end)` as `block_of` says,
    /// ascending, holes skipped: `(file block, block, count)` each. A
    /// lease's view is one call over its window (design.md §17.9). By
    /// default `block_of` block by block; a policy with an index walks it
    /// once.
    fn runs_of(&self, st: &InodeState, first: u64, end: u64) -> Vec<(u64, u64, u64)> {
        file_runs((first..end).filter_map(|fb| Some((fb, self.block_of(st, fb)?))))
    }

    /// The first block in `[fb, limit)` holding data (SEEK_DATA): mapped
    /// on PM, or held by the policy.
    fn next_data_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        st.map.next_mapped(fb, limit)
    }

    /// The first block in `[fb, limit)` without data (SEEK_HOLE).
    fn next_hole_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        st.map.next_hole(fb, limit)
    }

    /// Writes back (and evicts) up to `max_blocks` buffered blocks, least
    /// recently written first, as the policy's background threads do,
    /// returning how many; for the crash tests and tools. Nothing to do
    /// without a buffer.
    fn write_back(&self, _fs: Context<'_, D>, _max_blocks: u64) -> Result<u64> {
        Ok(0)
    }

    /// Blocks the allocator does not have but that are free to the user:
    /// taken for the policy's own allocation and not yet written
    /// (data-log tails), or freed by a change that returned but held until
    /// the freeing is durable (hunter's queued frees: a block is reused
    /// only after its record is cleared). statfs and ENOSPC prechecks
    /// count them free; a crash gives them back.
    fn free_held_blocks(&self) -> u64 {
        0
    }

    /// The file's own state under the policy, for `user.amberfs.policy`:
    /// where its blocks' newest copies are and what waits in DRAM, so a
    /// user can see what the policy did with it. Nothing by default.
    fn describe(&self, _fs: Context<'_, D>, _st: &InodeState) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Counters for the workbench, by name.
    fn stats(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Another process is to overwrite the file's blocks itself, each
    /// write committing itself (design.md §17.4): the caller pinned the
    /// whole file, so PM holds all of it; the policy hands out `n` free
    /// blocks with clear records to write into and the first seq the
    /// lessee may give a record. `None`: the policy takes no such writes
    /// (by default; only own-commit records make one atomic and durable
    /// by itself).
    fn lease_writes(
        &self,
        _fs: Context<'_, D>,
        _st: &mut InodeState,
        _n: usize,
    ) -> Result<Option<LeasedWrites>> {
        Ok(None)
    }

    /// The lease `lease_writes` gave came back (design.md §17.5), as
    /// `end` says: the lessee's commits among its blocks become the
    /// file's, everything else in them is cleared and freed. Returns how
    /// many were adopted.
    fn adopt(
        &self,
        _fs: Context<'_, D>,
        _st: &mut InodeState,
        _lease: &LeasedWrites,
        _end: LeaseEnd,
    ) -> Result<usize> {
        Err(crate::error::FsError::Unsupported(
            "this policy grants no write leases",
        ))
    }
}

/// How a write lease came back, which decides what the verifier reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Its holder gave it back after every write of it returned, each
    /// fenced: a record's checksum cannot fail, and only the records are
    /// read.
    Returned,
    /// Its holder died or was cut off, maybe in the middle of a write:
    /// each kept record's block is read and must match its checksum.
    Abandoned,
    /// It was never sent (refused after the daemon prepared it): nothing
    /// was written under it, and its blocks only go back. Nothing of the
    /// file is read — another lease's writes may be there.
    Unused,
}

/// What a write lease lets another process write (`lease_writes`): free
/// blocks, the seqs from `seq` on (one per write, so at most one per
/// block), and where the file's blocks end — what the entry of a write
/// that changes the file's blocks or size must say (design.md §17.11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedWrites {
    /// The first seq a lessee's record or entry may carry.
    pub seq: u64,
    /// The granted blocks, whose records were clear when granted.
    pub blocks: Vec<u64>,
    /// Blocks the file mapped when granted.
    pub mapped: u64,
    /// Its block at the highest index then, as (file block, block).
    pub head: Option<(u64, u64)>,
    /// Zone slots for the lessee's small overwrites, where the policy
    /// keeps a one-fence zone (design.md §17.13).
    pub slots: Option<LeasedSlots>,
}

/// Zone slots a write lease's holder commits small overwrites into, as
/// extents of the one-fence zone (design.md §11.7, §17.13): runs of free
/// slots of the file's sub-zone, each inside one chunk, and the write
/// numbers its heads may carry, `seq..seq + ` the slots (one per extent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedSlots {
    /// The first write number a head may carry: above the file's floor
    /// and every head it had.
    pub seq: u64,
    /// Bytes per slot.
    pub slot_size: u32,
    /// The runs, in the order the lessee fills them.
    pub runs: Vec<SlotRun>,
}

impl LeasedSlots {
    /// Slots in all runs: also how many write numbers the lease has.
    pub fn count(&self) -> u64 {
        self.runs.iter().map(|r| u64::from(r.slots)).sum()
    }
}

/// Most runs of slots one grant carries.
pub const MAX_SLOT_RUNS: usize = 16;

/// Consecutive free slots of one chunk, granted: slot `i` of the run has
/// its head at `head_at + 32 i` and its data at `data_at + i × slot size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRun {
    /// The sub-zone's number of its first slot (the daemon's, for
    /// adoption; the lessee needs only the offsets).
    pub first: u32,
    /// Slots in the run.
    pub slots: u32,
    /// The pool offset of its first slot's head.
    pub head_at: u64,
    /// The pool offset of its first slot's data.
    pub data_at: u64,
}

/// What fallocate does: the modes of Linux's fallocate(2) Amber has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallocMode {
    /// Allocate zeroed blocks; grow the size unless `keep_size` (mode 0,
    /// FALLOC_FL_KEEP_SIZE).
    Allocate {
        /// Leave the size as it is (FALLOC_FL_KEEP_SIZE).
        keep_size: bool,
    },
    /// Free the blocks of the range; it reads as zeros (size unchanged;
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE).
    PunchHole,
    /// Make the range read as zeros with its blocks allocated; grow the
    /// size unless `keep_size` (FALLOC_FL_ZERO_RANGE). A punch, then an
    /// allocation of the range: each policy's own two steps, each durable
    /// on return, so a crash between them leaves the range zero or old
    /// byte by byte and the size old.
    ZeroRange {
        /// Leave the size as it is (FALLOC_FL_KEEP_SIZE).
        keep_size: bool,
    },
}

impl FallocMode {
    /// The policy steps this mode takes, in order.
    pub(crate) fn steps(self) -> impl Iterator<Item = FallocStep> {
        let (first, then) = match self {
            FallocMode::Allocate { keep_size } => (FallocStep::Allocate { keep_size }, None),
            FallocMode::PunchHole => (FallocStep::PunchHole, None),
            FallocMode::ZeroRange { keep_size } => (
                FallocStep::PunchHole,
                Some(FallocStep::Allocate { keep_size }),
            ),
        };
        std::iter::once(first).chain(then)
    }
}

/// One step of a fallocate, as a policy carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallocStep {
    /// Allocate zeroed blocks; grow the size unless `keep_size`.
    Allocate {
        /// Leave the size as it is.
        keep_size: bool,
    },
    /// Free the blocks of the range; it reads as zeros (size unchanged).
    PunchHole,
}

/// Blocks one piece of a fallocate fills: a large range goes in several
/// changes, so no single one outgrows hunter's queue or holds a list of
/// every block of the range.
const FALLOC_CHUNK: usize = 4096;

/// Walks bytes `[off, off + len)` of file `ino` block by block through
/// the blocks `block_of` names: `f(pool offset, from, to)` for each
/// piece, `from..to` its place among the `len` bytes. For writes in place
/// and stores through a mapping, which touch only blocks the file has: a
/// hole among them is corruption, reported before `f` sees it.
pub(crate) fn in_blocks(
    layout: &amber_format::Layout,
    ino: u64,
    (off, len): (u64, usize),
    block_of: impl Fn(u64) -> Option<u64>,
    mut f: impl FnMut(u64, usize, usize),
) -> Result<()> {
    let mut done = 0;
    // Each round passes at least one byte: bounded by `len`.
    while done < len {
        let pos = off + done as u64;
        let (fb, inb) = (pos / BLOCK_SIZE, pos % BLOCK_SIZE);
        let n = ((BLOCK_SIZE - inb) as usize).min(len - done);
        let b = block_of(fb).ok_or_else(|| {
            crate::error::FsError::Corrupted(format!(
                "inode {ino}: block {fb} of a write in place is a hole"
            ))
        })?;
        f(layout.block_offset(b) + inb, done, done + n);
        done += n;
    }
    Ok(())
}

/// Writes `data` at byte `off` of file `ino` into the blocks `block_of`
/// names, in place, with non-temporal stores (the caller fences): a write
/// over blocks a mapping pins, or an append inside the last block.
pub(super) fn write_in_blocks<D: PmDevice>(
    fs: Context<'_, D>,
    ino: u64,
    (off, data): (u64, &[u8]),
    block_of: impl Fn(u64) -> Option<u64>,
) -> Result<()> {
    let dev = &**fs.device();
    in_blocks(fs.layout(), ino, (off, data.len()), block_of, |at, a, b| {
        dev.write_nt(at, &data[a..b]);
    })
}

/// `(file block, block)` pairs, ascending in the file, as `(file block,
/// block, count)` runs of blocks consecutive both in the file and on PM.
fn file_runs(pairs: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for (fb, b) in pairs {
        match out.last_mut() {
            Some((f, s, n)) if *f + *n == fb && *s + *n == b => *n += 1,
            _ => out.push((fb, b, 1)),
        }
    }
    out
}

/// Consecutive blocks as (first, count) runs.
fn block_runs(blocks: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let runs = file_runs(blocks.map(|b| (b, b)));
    runs.into_iter().map(|(b, _, n)| (b, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MountOptions;

    /// A run continues only where both the file block and the PM block
    /// follow on from it.
    #[test]
    fn file_runs_need_both_sides_consecutive() {
        let pairs = [(0, 10), (1, 11), (2, 13), (4, 14), (5, 15), (6, 9)];
        let runs = file_runs(pairs.into_iter());
        assert_eq!(runs, [(0, 10, 2), (2, 13, 1), (4, 14, 2), (6, 9, 1)]);
        assert!(file_runs(std::iter::empty()).is_empty());
    }

    /// The defaults go together: a pool made with the default format
    /// mounts with the default options.
    #[test]
    fn default_policy_wants_the_default_layout() {
        assert_eq!(layout_for(&MountOptions::default()), PoolLayout::default());
    }
}
