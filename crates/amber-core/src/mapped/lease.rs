//! A read lease's view of a file (design.md §17.3): where each of its
//! blocks lies on PM, so another process can read the file from its own
//! mapping of the pool while the daemon that owns the pool promises not
//! to change the file without first recalling the lease.

use super::{MapId, MapRequest};
use crate::data::{LeaseEnd, LeasedWrites};
use crate::error::Result;
use crate::fs::{flags, regular, Core};
use crate::inode::InodeState;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// One run of a file's blocks that lie one after another on PM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The run's first file block.
    pub file_block: u64,
    /// The pool byte offset of that block.
    pub pool_off: u64,
    /// Blocks in the run.
    pub blocks: u64,
}

/// A window of a file as a lessee reads it: the file's size and
/// generation, and the window's data blocks in file order; a block of the
/// window no run names is a hole (zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// The file's generation, so a lease never outlives the inode number.
    pub generation: u32,
    /// The file's size in bytes.
    pub size: u64,
    /// Its blocks, in file order.
    pub runs: Vec<Run>,
}

/// A write lease's grant (design.md §17.4): the window's view, the
/// blocks and seqs the lessee writes with, where the pool keeps block
/// `b`'s record (`records + 64 b`) and where the file's attribute log
/// lies (its four entries from `log`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteLease {
    /// The window, as a read lease sees it.
    pub view: LeaseView,
    /// The blocks and seqs granted.
    pub writes: LeasedWrites,
    /// The pool offset of block 0's record.
    pub records: u64,
    /// The pool offset of the file's attribute log.
    pub log: u64,
}

impl<D: PmDevice> Core<D> {
    /// Settles file blocks `[first, first + count)` of regular file `ino`
    /// to PM, as mapping them does (`DataPolicy::pin`: the policy's DRAM
    /// buffer, zone slices and queued records go to PM), and returns where
    /// those of them below the end of file lie: at most `count` runs, so a
    /// lessee's map is bounded by the window it asked for.
    ///
    /// The view stays true only while nothing changes the file: the
    /// caller (the daemon's lease table) recalls it before any change.
    pub fn lease_view(&self, ino: u64, first: u64, count: u64) -> Result<LeaseView> {
        let r = self.inode(ino)?;
        let mut st = r.write();
        regular(&st)?;
        let end = st
            .size()
            .div_ceil(BLOCK_SIZE)
            .min(first.saturating_add(count));
        if first < end && !self.is_read_only() {
            self.check_writable()?;
            self.guard(
                self.policy()
                    .pin(self.context(), &mut st, first, end - first),
            )?;
        }
        Ok(self.view_of(&st, first, count))
    }

    /// A write lease on window `[first, first + count)` of `ino` with `n`
    /// granted blocks, or `None` if the policy grants none. The whole
    /// file is pinned first (every block of it on PM, nothing in the
    /// policy's DRAM or zone), so the lessee's commits add to the file's
    /// durable state; the caller recalls every other lease on the file
    /// before, and this one before any change of the file.
    pub fn write_lease(
        &self,
        ino: u64,
        (first, count): (u64, u64),
        n: usize,
    ) -> Result<Option<WriteLease>> {
        self.check_writable()?;
        let Some(split) = self.split() else {
            return Ok(None);
        };
        let records = split.regions.li_start * BLOCK_SIZE;
        let log = split.regions.entry_offset(ino, 0);
        let r = self.inode(ino)?;
        let mut st = r.write();
        regular(&st)?;
        // A lessee writes out of place, which would move blocks a mapping
        // shows (§16.2): a mapped file takes the kernel's writes instead;
        // so does an immutable or append-only one, whose every write the
        // core checks (`fs::flags`), and a lessee would not.
        if st.maps.as_ref().is_some_and(|m| !m.is_empty()) || flags::unchangeable(&st).is_err() {
            return Ok(None);
        }
        let blocks = st.size().div_ceil(BLOCK_SIZE);
        let ctx = self.context();
        if blocks > 0 {
            self.guard(self.policy().pin(ctx, &mut st, 0, blocks))?;
        }
        if st.times_dirty {
            // Times a read or write left in DRAM go to PM first: the
            // grant takes the file's next seqs, and a stray fsync with the
            // lease out would queue them under one of those (§17.11).
            self.fsync_policy(&mut st)?;
        }
        let Some(writes) = self.guard(self.policy().lease_writes(ctx, &mut st, n))? else {
            return Ok(None);
        };
        Ok(Some(WriteLease {
            view: self.view_of(&st, first, count),
            writes,
            records,
            log,
        }))
    }

    /// Takes back a write lease of `ino`, ended as `end` says: the policy
    /// adopts the lessee's valid commits and frees the rest of the grant
    /// (`DataPolicy::adopt`). Returns how many blocks became the file's.
    pub fn adopt(&self, ino: u64, writes: &LeasedWrites, end: LeaseEnd) -> Result<usize> {
        self.check_writable()?;
        let r = self.inode(ino)?;
        let mut st = r.write();
        regular(&st)?;
        self.guard(self.policy().adopt(self.context(), &mut st, writes, end))
    }

    /// A map lease (design.md §17.14): blocks `[first, first + count)`
    /// of `ino` pinned for another process that maps them `MAP_SHARED`
    /// from its own mapping of the pool, as a library mapping of this
    /// mount (§16: settled, holes given blocks, written only in place
    /// while pinned; `writable` if that process may store into them),
    /// and where those below the end of file lie. Held until
    /// `end_map_lease`.
    pub fn map_lease(
        &self,
        ino: u64,
        (first, count): (u64, u64),
        writable: bool,
    ) -> Result<(MapId, LeaseView)> {
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        let req = MapRequest {
            off: first.saturating_mul(BLOCK_SIZE),
            len: count.saturating_mul(BLOCK_SIZE),
            prot,
            may_write: writable,
            sync: false,
        };
        let info = self.map(ino, req, None)?;
        let r = self.inode(ino)?;
        let view = self.view_of(&r.read(), first, count);
        Ok((info.id, view))
    }

    /// A map lease is over: its blocks' lines written back and fenced
    /// when it was writable, and unpinned (`unmap`).
    pub fn end_map_lease(&self, id: MapId) -> Result<()> {
        self.unmap(id)
    }

    /// Where the file's blocks in `[first, first + count)` below its end
    /// lie, as runs.
    fn view_of(&self, st: &InodeState, first: u64, count: u64) -> LeaseView {
        let size = st.size();
        let end = size.div_ceil(BLOCK_SIZE).min(first.saturating_add(count));
        let runs: Vec<Run> = (self.policy().runs_of(st, first, end).into_iter())
            .map(|(file_block, start, blocks)| Run {
                file_block,
                pool_off: self.layout().block_offset(start),
                blocks,
            })
            .collect();
        debug_assert!(runs.len() as u64 <= count);
        LeaseView {
            generation: st.disk.generation,
            size,
            runs,
        }
    }
}
