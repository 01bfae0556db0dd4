//! Adding and removing directory entries inside a transaction. The DRAM
//! index changes only after the transaction commits.

use super::Core;
use crate::dir::{DirIndex, DirSlot};
use crate::error::{FsError, Result};
use crate::inode::{plan_insert, InodeState, MapPlan};
use crate::journal::Tx;
use amber_format::dirent::{self, SLOT_SIZE};
use amber_format::{Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// A directory block appended for a new entry.
pub struct NewDirBlock {
    fblock: u64,
    pblock: u64,
    /// Map nodes allocated to link it.
    nodes: Vec<u64>,
}

/// Where a new entry goes.
pub struct EntryPlace {
    block: u32,
    slot: u8,
    nslots: u8,
    new_block: Option<NewDirBlock>,
}

impl<D: PmDevice> Core<D> {
    /// Finds room for `name` in directory `st` (appending a zeroed block if
    /// needed, made durable before the transaction links it), records the
    /// entry in `tx` and the directory's new size and block map in `pd`.
    /// On error nothing was allocated.
    pub(crate) fn plan_add_entry(
        &self,
        tx: &mut Tx,
        st: &InodeState,
        pd: &mut Inode,
        name: &[u8],
        ino: u64,
        dtype: u8,
    ) -> Result<EntryPlace> {
        let dir = st.dir()?;
        let nslots = dirent::slots_for(name.len());
        let (place, pblock) = match dir.find_space(nslots) {
            Some((block, slot)) => {
                let pb = st
                    .map
                    .get(block as u64)
                    .expect("directory blocks are mapped");
                (
                    EntryPlace {
                        block,
                        slot,
                        nslots: nslots as u8,
                        new_block: None,
                    },
                    pb,
                )
            }
            None => self.grow_dir(tx, st, pd, dir.blocks(), nslots)?,
        };
        let off = DirIndex::slot_offset(&self.layout, pblock, place.slot);
        tx.write(off, &dirent::encode(ino, dtype, name));
        Ok(place)
    }

    /// Appends a zeroed block at file block `fblock` of the full directory
    /// `st` for an entry of `nslots` slots: the block and any map nodes it
    /// needs are allocated, written and drained, their links recorded in
    /// `tx` and the new size and map in `pd`. On error nothing stays
    /// allocated.
    fn grow_dir(
        &self,
        tx: &mut Tx,
        st: &InodeState,
        pd: &mut Inode,
        fblock: u64,
        nslots: usize,
    ) -> Result<(EntryPlace, u64)> {
        let hint = fblock
            .checked_sub(1)
            .and_then(|f| st.map.get(f))
            .map(|b| b + 1);
        let pblock = self.blocks.alloc(hint).ok_or(FsError::NoSpace)?;
        let mut plan = MapPlan::new(pd.map_root, pd.map_height);
        let mut taken = Vec::new();
        let r = plan_insert(
            &*self.dev,
            &self.layout,
            &mut plan,
            fblock,
            pblock,
            &mut || {
                let b = self.blocks.alloc(None)?;
                taken.push(b);
                Some(b)
            },
        );
        if let Err(e) = r {
            self.blocks.free_all(&taken);
            self.blocks.free(pblock);
            return Err(e);
        }
        self.dev
            .zero_nt(self.layout.block_offset(pblock), BLOCK_SIZE);
        plan.write_nodes(&*self.dev, &self.layout);
        if let Err(e) = self.drain() {
            self.blocks.free_all(&taken);
            self.blocks.free(pblock);
            return Err(e);
        }
        for &(off, v) in &plan.stores {
            tx.write_u64(off, v);
        }
        if let Some((root, height)) = plan.new_root() {
            pd.map_root = root;
            pd.map_height = height;
        }
        pd.size += BLOCK_SIZE;
        pd.blocks += 1 + plan.new_nodes.len() as u64;
        let place = EntryPlace {
            block: fblock as u32,
            slot: 0,
            nslots: nslots as u8,
            new_block: Some(NewDirBlock {
                fblock,
                pblock,
                nodes: taken,
            }),
        };
        Ok((place, pblock))
    }

    /// Gives back a planned entry's blocks when the operation fails before
    /// committing: nothing durable links to them yet.
    pub(crate) fn abandon_entry(&self, place: EntryPlace) {
        if let Some(nb) = place.new_block {
            self.blocks.free(nb.pblock);
            self.blocks.free_all(&nb.nodes);
        }
    }

    /// Records in DRAM an entry whose transaction committed.
    pub(crate) fn apply_add_entry(
        &self,
        st: &mut InodeState,
        place: EntryPlace,
        name: &[u8],
        ino: u64,
        dtype: u8,
    ) {
        if let Some(nb) = place.new_block {
            st.map.set(nb.fblock, nb.pblock);
            let b = st.dir_mut().expect("directory").add_block();
            assert_eq!(b as u64, nb.fblock);
        }
        let slot = DirSlot {
            ino,
            dtype,
            block: place.block,
            slot: place.slot,
            nslots: place.nslots,
        };
        st.dir_mut().expect("directory").insert(name, slot);
    }

    /// Records in `tx` the zeroing of entry `s` of directory `st`
    /// (free slots are all zeros, an invariant fsck checks).
    pub(crate) fn plan_remove_entry(&self, tx: &mut Tx, st: &InodeState, s: DirSlot) {
        let pb = st
            .map
            .get(s.block as u64)
            .expect("directory blocks are mapped");
        let off = DirIndex::slot_offset(&self.layout, pb, s.slot);
        tx.write(off, &vec![0u8; s.nslots as usize * SLOT_SIZE]);
    }

    /// Records in `tx` an existing entry re-pointed at another inode.
    pub(crate) fn plan_retarget_entry(
        &self,
        tx: &mut Tx,
        st: &InodeState,
        s: DirSlot,
        name: &[u8],
        ino: u64,
        dtype: u8,
    ) {
        let pb = st
            .map
            .get(s.block as u64)
            .expect("directory blocks are mapped");
        let off = DirIndex::slot_offset(&self.layout, pb, s.slot);
        tx.write(off, &dirent::encode(ino, dtype, name));
    }
}
