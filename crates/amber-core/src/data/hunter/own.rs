//! amber's one-fence block write (docs/design.md §13.6): an overwrite
//! inside one mapped block wholly below the durable size goes out of
//! place into a new block (the write's bytes merged with the old block's)
//! whose record commits it — written with the data, carrying
//! the block's checksum and the write's time — and one fence makes both
//! durable. Recovery counts such a record without an attribute entry of
//! its seq when the block's checksum matches, so the write is atomic
//! (old block or new, whole) and durable on return; its queued updates
//! (the replaced block's freeing, a relink, the file's attributes) are
//! persisted later like any other, and fsync need not wait for them.
//!
//! It is taken only when every update of the file's queue that a persist
//! must make durable already is (`Queues::settled`): a crash then leaves
//! the durable state plus some of the own commits after it, in order —
//! never a later write without an earlier one.

use super::{map_write, media, merged_block, note_write, snapshot, Hunter, HunterFile, PerFile};
use crate::data::Context;
use crate::error::Result;
use crate::inode::InodeState;
use amber_format::split::{LogicalInfo, OwnCommit};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;

impl<X: PerFile> Hunter<X> {
    /// Whether a write of `len` bytes at `off` may commit itself: inside
    /// one block the file already maps, wholly below its size (so its
    /// durable entry covers the block, and no growth ever zeroes the
    /// block's tail in place), on a pool that takes own-commit records.
    pub(super) fn may_own<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        hf: &HunterFile<X>,
        off: u64,
        len: usize,
    ) -> bool {
        let q = &self.shared.queues;
        let fb = off / BLOCK_SIZE;
        self.own
            && len > 0
            && (off + len as u64 - 1) / BLOCK_SIZE == fb
            && (fb + 1) * BLOCK_SIZE <= st.disk.size
            && hf.index.get(fb).is_some()
            && media(fs).own_records
            && q.settled(q.shard_of(st.ino))
    }

    /// Writes the block `data` at `off` leaves (`may_own`: the caller's
    /// bytes, or merged with the old block's) into a new block with its
    /// own-commit record, one fence for both, then maps it and queues the
    /// rest.
    pub(super) fn write_own<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        hf: &mut HunterFile<X>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        let fb = off / BLOCK_SIZE;
        let mut blocks = std::mem::take(&mut hf.blocks);
        let mut ops = std::mem::take(&mut hf.ops);
        self.take_blocks(fs, (&hf.index, fb), 1, &mut blocks)?;
        let b = blocks[0];
        let dev = &**fs.device();
        let merged;
        let image = if data.len() as u64 == BLOCK_SIZE {
            data
        } else {
            merged = merged_block(fs, hf, st.disk.size, fb, off, data);
            &merged[..]
        };
        dev.write_nt(fs.layout().block_offset(b), image);
        note_write(fs, st)?;
        let seq = hf.take_seq();
        let li = LogicalInfo {
            seq,
            ino: st.ino,
            generation: st.disk.generation,
            file_block: fb,
            link: hf.index.below(fb),
            own: Some(OwnCommit::new(st.disk.mtime, image)),
        };
        media(fs).write_li(dev, b, &li);
        // The DRAM side runs while the block streams out, as in
        // `Hunter::write`. The record carries the file's times as this
        // write left them, newer than any a zone write left in DRAM.
        st.times_dirty = false;
        map_write(hf, (fb, fb), &blocks, seq, true, &mut ops);
        let snap = snapshot(hf, st, seq);
        // The one fence: the block and the record that commits it.
        self.fence_and_queue(fs, st, hf, (blocks, ops), snap, false, true)?;
        self.shared.stats.own_commits.fetch_add(1, Relaxed);
        Ok(())
    }
}
