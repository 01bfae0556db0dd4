//! Putting an inode's attribute list on PM (format::xattr): a list that
//! stays one block is rewritten in place through the journal; any other
//! (a first list, a list that outgrows its block or shrinks back to one,
//! a run) is written whole into fresh blocks and fenced before the
//! transaction that links it, and the blocks it replaces are freed after
//! that transaction. Either way a set or remove is atomic. The first run
//! a pool holds sets its incompatible feature bit first, so no binary
//! that cannot read runs mounts a pool that has one.

use super::Core;
use crate::error::{FsError, Result};
use crate::inode::{xattr_run, InodeState};
use crate::journal::Tx;
use amber_format::xattr::{self, Xattr, FEATURE_XATTR_RUNS, LIST_MAX};
use amber_format::{Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::ops::Range;

use super::mount::write_superblock;

/// The blocks a staged list took and the ones it replaces: the first go
/// back if the transaction fails, the second once it committed.
#[must_use = "a staged list's blocks must be finished or abandoned"]
pub(super) struct Staged {
    fresh: Range<u64>,
    old: Range<u64>,
}

impl Staged {
    /// After the transaction committed: the replaced blocks are free.
    pub(super) fn finish<D: PmDevice>(self, core: &Core<D>) {
        self.old.for_each(|b| core.blocks.free(b));
    }

    /// After the transaction failed: the fresh blocks are free.
    pub(super) fn abandon<D: PmDevice>(self, core: &Core<D>) {
        self.fresh.for_each(|b| core.blocks.free(b));
    }
}

/// The list's encoding: one block or a run; ENOSPC when even the longest
/// run cannot hold it or listxattr could not return its names.
fn encode(attrs: &[Xattr]) -> Result<Vec<u8>> {
    let names: usize = attrs.iter().map(|a| a.name.len() + 1).sum();
    if names > LIST_MAX {
        return Err(FsError::NoSpace);
    }
    xattr::encode(attrs).ok_or(FsError::NoSpace)
}

impl<D: PmDevice> Core<D> {
    /// Places `attrs` as the list of inode `st`, whose new image is `d`,
    /// in `tx` (see the module's rules).
    pub(super) fn stage_xattrs(
        &self,
        st: &InodeState,
        attrs: &[Xattr],
        d: &mut Inode,
        tx: &mut Tx,
    ) -> Result<Staged> {
        let old = xattr_run(&*self.dev, &self.layout, st.ino, st.disk.xattr_block)?;
        if attrs.is_empty() {
            d.xattr_block = 0;
            return Ok(Staged { fresh: 0..0, old });
        }
        let bytes = encode(attrs)?;
        if bytes.len() == BLOCK_SIZE as usize && old.end - old.start == 1 {
            tx.write(self.layout.block_offset(old.start), &bytes);
            return Ok(Staged {
                fresh: 0..0,
                old: 0..0,
            });
        }
        let fresh = self.place_fresh(&bytes)?;
        if let Err(e) = self.drain() {
            fresh.for_each(|b| self.blocks.free(b));
            return Err(e);
        }
        d.xattr_block = fresh.start;
        Ok(Staged { fresh, old })
    }

    /// Writes a new inode's list into fresh blocks, not yet fenced (its
    /// creator fences once before linking); None for an empty list.
    pub(super) fn write_new_list(&self, attrs: &[Xattr]) -> Result<Option<Range<u64>>> {
        if attrs.is_empty() {
            return Ok(None);
        }
        self.place_fresh(&encode(attrs)?).map(Some)
    }

    /// Allocates blocks for `bytes` (whole blocks; contiguous for a run)
    /// and writes them, unfenced.
    fn place_fresh(&self, bytes: &[u8]) -> Result<Range<u64>> {
        let n = bytes.len() as u64 / BLOCK_SIZE;
        debug_assert_eq!(n * BLOCK_SIZE, bytes.len() as u64);
        let start = if n == 1 {
            self.blocks.alloc(None)
        } else {
            self.allow_runs()?;
            (n <= self.blocks.max_extent())
                .then(|| self.blocks.alloc_extent(n))
                .flatten()
        }
        .ok_or(FsError::NoSpace)?;
        self.dev.write_nt(self.layout.block_offset(start), bytes);
        Ok(start..start + n)
    }

    /// Sets the pool's attribute-run feature bit, durably, unless set.
    fn allow_runs(&self) -> Result<()> {
        let mut sb = self.superblock().lock();
        if sb.feature_incompat & FEATURE_XATTR_RUNS != 0 {
            return Ok(());
        }
        sb.feature_incompat |= FEATURE_XATTR_RUNS;
        sb.generation += 1;
        let r = write_superblock(&*self.dev, &sb);
        self.guard(r)
    }
}
