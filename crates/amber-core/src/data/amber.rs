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
//! - Reads take each byte from the zone's slots over the file's blocks.
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

use super::lawn::slices;
use super::{DataPolicy, FallocMode, Hunter, Lawn};
use crate::error::Result;
use crate::fs::{Core, MountOptions};
use crate::inode::InodeState;
use amber_format::{PoolLayout, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Weak;

/// The `amber` policy.
pub struct Amber {
    hunter: Hunter,
    lawn: Lawn,
    /// Writes that went through the zone alone.
    zone_writes: AtomicU64,
    /// Writes that went into the data logs.
    log_writes: AtomicU64,
    /// Zone writes that first had to persist their file's queued updates.
    settles: AtomicU64,
}

impl Amber {
    pub fn new(opts: &MountOptions) -> Amber {
        Amber {
            hunter: Hunter::new(opts, false, false),
            lawn: Lawn::new(opts),
            zone_writes: AtomicU64::new(0),
            log_writes: AtomicU64::new(0),
            settles: AtomicU64::new(0),
        }
    }

    /// A small overwrite through the zone; None when it cannot go there
    /// (a whole or unmapped block, or no free slot).
    fn through_zone<D: PmDevice>(
        &self,
        fs: &Core<D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<Option<usize>> {
        let end = off + data.len() as u64;
        if end > st.disk.size {
            return Ok(None);
        }
        let Some(numbers) = Lawn::zone_slices(fs, st, off, end) else {
            return Ok(None);
        };
        if self.hunter.settle(fs, st)? {
            self.settles.fetch_add(1, Relaxed);
        }
        let Some(n) = self
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

    fn atomic_writes(&self) -> bool {
        true
    }

    fn uses_zone(&self) -> bool {
        true
    }

    fn load(&self, fs: &Core<D>, st: &mut InodeState) -> Result<()> {
        DataPolicy::<D>::load(&self.hunter, fs, st)
    }

    fn read(&self, fs: &Core<D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        super::lawn::read_over(fs, st, off, buf, &|pos, b| {
            DataPolicy::<D>::read(&self.hunter, fs, st, pos, b)
        })
    }

    fn write(
        &self,
        fs: &Core<D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        if let Some(n) = self.through_zone(fs, st, off, data, sync)? {
            return Ok(n);
        }
        let zone = Lawn::zone(fs);
        let end = off + data.len() as u64;
        if end > st.disk.size {
            // The slice holding the old end would hide bytes written past
            // it.
            slices::flush_from(fs, zone, st, st.disk.size)?;
        }
        slices::flush_blocks(fs, zone, st, off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE)?;
        self.log_writes.fetch_add(1, Relaxed);
        self.hunter.write(fs, st, off, data, sync)
    }

    /// Slices at or past the smaller of the two sizes go back first: they
    /// would be cut, or hide bytes the new size exposes.
    fn truncate(&self, fs: &Core<D>, st: &mut InodeState, size: u64) -> Result<()> {
        slices::flush_from(fs, Lawn::zone(fs), st, size.min(st.disk.size))?;
        DataPolicy::<D>::truncate(&self.hunter, fs, st, size)
    }

    fn fallocate(
        &self,
        fs: &Core<D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocMode,
    ) -> Result<()> {
        self.hunter.fallocate(fs, st, off, len, mode)
    }

    /// Times zone writes changed in DRAM go into an attribute entry with
    /// the file's queued updates.
    fn fsync(&self, fs: &Core<D>, st: &mut InodeState) -> Result<()> {
        if st.times_dirty {
            self.hunter.queue_attrs(fs, st)?;
        }
        self.hunter.fsync(fs, st)
    }

    fn setattr_tx(
        &self,
        fs: &Core<D>,
        st: &mut InodeState,
        new: &amber_format::Inode,
        tx: &mut crate::journal::Tx,
    ) -> Result<()> {
        self.hunter.setattr_tx(fs, st, new, tx)
    }

    fn sync_all(&self, fs: &Core<D>) -> Result<()> {
        DataPolicy::<D>::sync_all(&self.hunter, fs)
    }

    fn spawn(&self, core: Weak<Core<D>>) {
        self.hunter.spawn(core.clone());
        self.lawn.spawn(core);
    }

    fn unmount(&self, fs: &Core<D>) {
        self.lawn.unmount(fs);
        self.hunter.unmount(fs);
    }

    fn forget(&self, fs: &Core<D>, st: &mut InodeState) {
        self.lawn.forget(fs, st);
        self.hunter.forget(fs, st);
    }

    fn block_of(&self, st: &InodeState, fb: u64) -> Option<u64> {
        DataPolicy::<D>::block_of(&self.hunter, st, fb)
    }

    fn next_data_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        DataPolicy::<D>::next_data_block(&self.hunter, st, fb, limit)
    }

    fn next_hole_block(&self, st: &InodeState, fb: u64, limit: u64) -> Option<u64> {
        DataPolicy::<D>::next_hole_block(&self.hunter, st, fb, limit)
    }

    /// Persists queued metadata first (the data logs' write-back), then
    /// moves the oldest zone slices back into their files.
    fn write_back(&self, fs: &Core<D>, max_blocks: u64) -> Result<u64> {
        let done = self.hunter.write_back(fs, max_blocks)?;
        Ok(done + self.lawn.write_back(fs, max_blocks.saturating_sub(done))?)
    }

    fn reserved_blocks(&self) -> u64 {
        DataPolicy::<D>::reserved_blocks(&self.hunter)
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let mut v = vec![
            ("zone_writes".to_string(), self.zone_writes.load(Relaxed)),
            ("log_writes".to_string(), self.log_writes.load(Relaxed)),
            ("settles".to_string(), self.settles.load(Relaxed)),
        ];
        v.extend(DataPolicy::<D>::stats(&self.lawn));
        v.extend(DataPolicy::<D>::stats(&self.hunter));
        v
    }
}
