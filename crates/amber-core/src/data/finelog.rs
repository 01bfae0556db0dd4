//! The `finelog` policy: fine-grained redo logging. Every write is
//! all-or-nothing across a crash and durable on return.
//!
//! "The update (inode, offset, length, data) is committed to a log, then
//! written in place, then the log entry is retired": the per-CPU metadata
//! journal is exactly such a physical redo log (commit, apply in place,
//! retire), so a write that is not a pure append becomes one journal
//! transaction with one entry per block piece (the PM address of the file
//! bytes and their new contents), plus the inode when the size or mode
//! changes (or when the times should be durable now: O_SYNC, or a file
//! fsync'd after nearly every write). The transaction's checksum is the
//! commit point; replay redoes a committed one whose in-place apply a crash
//! interrupted. docs/design.md §10 argues why naming the bytes by PM
//! address is as good as (inode, offset) for redo.
//!
//! Before the transaction, every block of the range must be mapped, so the
//! entries have an address: holes get zeroed blocks linked as
//! `fallocate(KEEP_SIZE)` does. A linked zeroed block reads as the hole did
//! (and one past the size is not read at all), so linking them before the
//! commit changes nothing a crash could show.
//!
//! A pure append (starting at or past the size) goes through `direct`,
//! whose size store already commits it atomically. A write whose
//! transaction would not fit one journal (`Tx::capacity`, about 24 KiB of
//! entries) goes through `cow`'s copy-on-write path instead: equally
//! atomic, and cheaper than logging that much twice anyway.

use super::cow::write_cow;
use super::direct::{allocate_zeroed, block_range, note_write, Direct, FSYNC_HEAVY_WRITES};
use super::DataPolicy;
use crate::data::Context;
use crate::error::Result;
use crate::inode::InodeState;
use crate::journal::Tx;
use amber_format::journal::{entry_footprint, HEADER_SIZE, MAX_ENTRIES};
use amber_format::{Layout, BLOCK_SIZE, INODE_SIZE};
use amber_pmem::PmDevice;

/// The fine-grained redo-logging policy.
pub struct Finelog;

/// The pieces of `[off, end)` within each file block: (file block, start
/// and end byte in the file).
fn pieces(off: u64, end: u64) -> impl Iterator<Item = (u64, u64, u64)> {
    block_range(off, end).map(move |fb| {
        let bstart = fb * BLOCK_SIZE;
        (fb, off.max(bstart), end.min(bstart + BLOCK_SIZE))
    })
}

/// Whether the transaction of a write of `[off, end)` (one entry per block
/// piece, and room for the inode) fits one journal. Stops counting at the
/// first piece over the limit, so a huge write costs little to refuse.
fn fits_journal(layout: &Layout, off: u64, end: u64) -> bool {
    let capacity = Tx::capacity(layout);
    let mut bytes = HEADER_SIZE + entry_footprint(INODE_SIZE);
    let mut entries = 1;
    for (_, s, e) in pieces(off, end) {
        bytes += entry_footprint((e - s) as usize);
        entries += 1;
        if bytes > capacity || entries > MAX_ENTRIES {
            return false;
        }
    }
    true
}

impl<D: PmDevice> DataPolicy<D> for Finelog {
    fn name(&self) -> &'static str {
        "finelog"
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        let old_size = st.disk.size;
        if off >= old_size {
            return Direct.write(fs, st, off, data, sync);
        }
        let end = off + data.len() as u64;
        let l = fs.layout();
        if !fits_journal(l, off, end) {
            return write_cow(fs, st, off, data, sync);
        }
        // 1. Give every hole of the range a zeroed, linked block (durable on
        //    return). Before `note_write`: its inode store must not carry
        //    a mode change ahead of the data.
        if st
            .map
            .next_hole(off / BLOCK_SIZE, end.div_ceil(BLOCK_SIZE))
            .is_some()
        {
            allocate_zeroed(fs, st, off, end, true)?;
        }
        // 2. One transaction: the pieces at their PM addresses, and the
        //    inode when it must change with them or its times should be
        //    durable now.
        let mode_changed = note_write(fs, st);
        let mut tx = Tx::new();
        for (fb, s, e) in pieces(off, end) {
            let b = st.map.get(fb).expect("every block of the range was mapped");
            let at = l.block_offset(b) + (s - fb * BLOCK_SIZE);
            tx.write(at, &data[(s - off) as usize..(e - off) as usize]);
        }
        let with_inode =
            end > old_size || mode_changed || sync || st.writes_since_fsync <= FSYNC_HEAVY_WRITES;
        let mut d = st.disk.clone();
        if with_inode {
            d.size = end.max(old_size);
            tx.inode(l, st.ino, &d);
        }
        // 3. Commit, apply in place, retire.
        fs.commit(tx)?;
        st.disk = d;
        st.times_dirty = !with_inode;
        Ok(data.len())
    }

    fn atomic_writes(&self) -> bool {
        true
    }
}
