//! amber's in-place write-back of small overwrites (docs/design.md §18).
//!
//! A buffered change that is a small overwrite — at most `REDO_MAX` dirty
//! bytes, every block already the file's on PM, the size unchanged since
//! the buffer took it — goes back in place under one journal transaction
//! (the per-CPU physical redo log: commit, apply, retire) instead of out
//! of place: SQLite's WAL frames after its first checkpoint. Out of
//! place, each such frame took two fresh blocks (streamed whole, half of
//! one read back first), their records, the relink of the block above,
//! the `Free` of both old blocks and an entry; in place it is its dirty
//! lines written twice and three fences, and nothing is queued.
//!
//! Crash argument: the transaction is the write's commit point, and it is
//! retired before the inode lock is released, so it never outlives the
//! file's hold on its blocks (no later path can free a block a committed
//! transaction still names). Its blocks must be where the file's index
//! says on the media too, and no own-commit record may vouch for their
//! old bytes (§13.6): the caller settles the file's queue first, after
//! the zone's slices of those blocks went back (a slot must not lie over
//! the block with older bytes). Replay redoes a committed, unapplied
//! transaction into the same blocks, which are still the file's.

use super::super::cost::LINE;
use super::buffer;
use super::image::line_runs;
use crate::data::hunter;
use crate::data::Context;
use crate::inode::InodeState;
use crate::journal::Tx;
use amber_format::journal::{entry_footprint, ENTRY_HEADER, HEADER_SIZE};
use amber_format::split::ENTRY_SIZE;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// Most dirty bytes a write-back takes in place: a WAL frame's page and
/// header straddle two blocks. Larger changes go out of place, where
/// writing them once beats logging them twice.
const REDO_MAX: u64 = 2 * BLOCK_SIZE;

/// One dirty block of a write-back: its file block, its image and the
/// mask of its lines written since it was buffered.
pub(super) type Dirty<'a> = (u64, &'a [u8], u64);

/// The transaction writing the dirty lines of `blocks` in place, or None
/// when the change may not go in place: too large, or a block not yet
/// the file's on PM (a hole, an append). `grew` says whether a buffered
/// write moved the size: the new size would need its own commit.
pub(super) fn plan<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    blocks: &[Dirty<'_>],
    grew: bool,
) -> Option<Tx> {
    if grew || blocks.is_empty() {
        return None;
    }
    let bytes: u64 = blocks
        .iter()
        .map(|&(_, _, d)| u64::from(d.count_ones()) * LINE)
        .sum();
    if bytes > REDO_MAX {
        return None;
    }
    // Room for the attribute entry the commit carries (`attrs_in_tx`).
    let entry = entry_footprint(ENTRY_SIZE as usize);
    let room = Tx::capacity(fs.layout()) - entry;
    // Every run of lines is an entry: its header and its bytes.
    let runs: usize = blocks.iter().map(|&(_, _, d)| line_runs(d).count()).sum();
    let mut tx = Tx::with_capacity(bytes as usize + runs * ENTRY_HEADER + entry);
    let mut footprint = HEADER_SIZE;
    for &(fb, image, dirty) in blocks {
        assert_eq!(image.len() as u64, BLOCK_SIZE, "a whole-block image");
        let b = hunter::block_of::<buffer::FileState>(st, fb)?;
        let base = fs.layout().block_offset(b);
        for (first, run) in line_runs(dirty) {
            let (s, e) = ((first * LINE) as usize, ((first + run) * LINE) as usize);
            footprint += entry_footprint(e - s);
            if footprint > room {
                return None;
            }
            tx.write(base + s as u64, &image[s..e]);
        }
    }
    Some(tx)
}
