//! Hunter as an engine for a policy composed over it (`amber`): the calls
//! such a policy makes besides `DataPolicy`'s, and the contract they keep.
//!
//! - Every call is made with the file's inode write-locked, as the core
//!   calls a policy; the per-file state `X` lives with hunter's DRAM state
//!   for the file (in the inode), so reaching it takes no other lock.
//! - `X` is made empty (`Default`) when hunter loads the file and dropped
//!   at `forget`; the engine never looks inside it.
//! - `write_blocks` is one change: after a crash every image it was given
//!   is the file's, or none is (design.md §12.4).
//! - `settle` returns with the file's blocks durable where its index says,
//!   so another structure (the zone) may back one of them up.
//! - `zero_past_size` and `note_write` are the parts of a hunter write a
//!   policy needs when it changes the file's size or times without one
//!   (amber's buffered writes); `queue_attrs` queues the file's DRAM
//!   attributes as an entry of their own (times changed by a zone write).
//! - `block_of` is the file's block lookup, for the zone's slices.

use super::{
    file_of, map_blocks, note_write, push_frees, snapshot, zero_past_end, Hunter, HunterFile,
    PerFile,
};
use crate::data::Context;
use crate::error::Result;
use crate::inode::InodeState;
use crate::journal::Tx;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// Where file block `fb` lies on PM in hunter's index (None if the file's
/// state is not loaded: such a file holds no slices either).
pub(in crate::data) fn block_of<X: PerFile>(st: &InodeState, fb: u64) -> Option<u64> {
    file_of::<X>(st)?.index.get(fb)
}

impl<X: PerFile> Hunter<X> {
    /// The engine with whole-block overwrites committing themselves with
    /// one fence (own.rs, design.md §13.6): amber's, on pools that take
    /// own-commit records.
    pub(in crate::data) fn with_own_commits(mut self) -> Self {
        self.own = true;
        self
    }

    /// The composed policy's state of the file, if hunter's is loaded.
    pub(in crate::data) fn extra(st: &InodeState) -> Option<&X> {
        Some(&file_of::<X>(st)?.extra)
    }

    /// The composed policy's state of the file to change, if hunter's is
    /// loaded.
    pub(in crate::data) fn extra_mut(st: &mut InodeState) -> Option<&mut X> {
        let hf = st.policy.as_mut()?.downcast_mut::<HunterFile<X>>()?;
        Some(&mut hf.extra)
    }

    /// The composed policy's state of the file, loading hunter's state of
    /// it first if it is not loaded yet.
    pub(in crate::data) fn extra_loaded<'a, D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &'a mut InodeState,
    ) -> Result<&'a mut X> {
        if file_of::<X>(st).is_none() {
            self.with_file(fs, st, |_, _| Ok(()))?;
        }
        Ok(Self::extra_mut(st).expect("with_file leaves the file's hunter state loaded"))
    }

    /// Persists the file's queued updates, so its blocks are where its
    /// index says on the media too: a zone slice may then back one up.
    /// Returns whether anything was queued.
    pub(in crate::data) fn settle<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
    ) -> Result<bool> {
        let sh = &self.shared;
        sh.queues.settle(fs, &sh.stats, st.ino)
    }

    /// Writes whole-block images of file blocks `images` (ascending, no
    /// file block twice) out of place as ONE change: every block copied
    /// and fenced, then one seq for all their records (the links of the
    /// blocks above them marked stale, `chain.rs`) and one snapshot with
    /// the file's current (DRAM) size and times. A record becomes valid only with an entry of its
    /// seq or later (design.md §12.4), so after a crash either every
    /// image is the file's or none is: amber's DRAM buffer writes a
    /// file back with it. The caller zeroed the old last block's bytes
    /// past the size before the size grew (`zero_past_size`).
    pub(in crate::data) fn write_blocks<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        images: &[(u64, &[u8])],
        sync: bool,
    ) -> Result<()> {
        if images.is_empty() {
            return Ok(());
        }
        assert!(
            images.windows(2).all(|w| w[0].0 < w[1].0),
            "write-back images ascending, each file block once"
        );
        self.with_file(fs, st, |hf, st| {
            let (first, last) = (images[0].0, images[images.len() - 1].0);
            hf.index.make_room(first, last, images.len() as u64)?;
            let mut blocks = std::mem::take(&mut hf.blocks);
            let mut ops = std::mem::take(&mut hf.ops);
            self.take_blocks(fs, (&hf.index, first), images.len(), &mut blocks)?;
            let dev = &**fs.device();
            for (&(_, image), &b) in images.iter().zip(&blocks) {
                assert_eq!(image.len() as u64, BLOCK_SIZE, "a whole-block image");
                dev.write_nt(fs.layout().block_offset(b), image);
            }
            // The DRAM side is built while the images stream out, as in
            // `Hunter::write`. Ascending: each run's link is the block
            // just set below it.
            let seq = hf.take_seq();
            let fbs = images.iter().map(|&(fb, _)| fb);
            let freed = map_blocks(hf, fbs, &blocks, seq, false, &mut ops);
            // Ours link by construction; a block of the file between or
            // above them links to a replaced one. Contiguous images with
            // nothing above leave none; otherwise the mark may take in a
            // few right links, which unmount's walk only reads.
            let contiguous = last - first + 1 == images.len() as u64;
            if !contiguous || hf.index.above(last).is_some() {
                hf.links_stale_from(first + 1);
            }
            push_frees(&mut ops, freed, true);
            st.disk.blocks = hf.index.count();
            let snap = snapshot(hf, st, seq);
            self.fence_and_queue(fs, st, hf, (blocks, ops), snap, sync || self.sync, false)
        })
    }

    /// Before the file's size grows from `st.disk.size` to `to` without a
    /// hunter write (amber's buffered appends): zeroes the old last
    /// block's bytes past the size, as a growing write does.
    pub(in crate::data) fn zero_past_size<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        to: u64,
    ) -> Result<()> {
        self.with_file(fs, st, |hf, st| zero_past_end(fs, hf, st.disk.size, to))
    }

    /// A write's DRAM inode changes (times, set-id bits dropped and stored
    /// at once) for a write amber holds in DRAM.
    pub(in crate::data) fn note_write<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
    ) -> Result<()> {
        note_write(fs, st)
    }

    /// Persists the file's queued updates, as `settle` does, and puts an
    /// attribute entry of its DRAM size and times into `tx`: the change
    /// `tx` commits then carries them, and nothing is left to queue
    /// (amber's in-place write-back, design.md §18).
    pub(in crate::data) fn attrs_in_tx<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        tx: &mut Tx,
    ) -> Result<()> {
        self.entry_in_tx(fs, st, tx, None)?;
        st.times_dirty = false;
        Ok(())
    }

    /// Queues the file's current attributes (times a zone write changed
    /// in DRAM only) with no other update.
    pub(in crate::data) fn queue_attrs<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
    ) -> Result<()> {
        let snap = self.with_file(fs, st, |hf, st| {
            let seq = hf.take_seq();
            Ok(snapshot(hf, st, seq))
        })?;
        self.queue(fs, st, &[], snap, false, false)
    }
}
