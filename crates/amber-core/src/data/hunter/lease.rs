//! Write leases on the split layout (design.md §17.4-§17.5): another
//! process overwrites a file's blocks by own commits (§13.6) into blocks
//! granted to it, and the daemon adopts what it finds there when the
//! lease comes back — the verifier, which trusts nothing it did not
//! check: a record counts only as recovery would count it after a crash
//! at that moment (`split::judge`'s own-commit rule), inside the grant's
//! blocks and seqs.

use super::{map_write, media, snapshot, Hunter, HunterFile, Op, PerFile};
use crate::data::{Context, LeaseEnd, LeasedWrites};
use crate::error::Result;
use crate::inode::InodeState;
use amber_format::split::{LogicalInfo, Record};
use amber_format::{Timespec, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;

/// Most blocks one write lease is granted: its adoption's updates (a
/// `Data`, a relink and a free per block) stay well inside one queue.
pub(crate) const MAX_LEASED_BLOCKS: usize = 1024;

impl<X: PerFile> Hunter<X> {
    /// Grants `n` blocks for a lessee's own commits on a file the caller
    /// pinned whole. The file's queue is persisted first, so the file's
    /// durable state is all of it and a lessee's commits add to it in
    /// order (§13.6's "why only when settled", per file: the daemon
    /// queues nothing of the file while the lease is out). Files with a
    /// set-ID bit are not leased: their writes must drop it.
    pub(in crate::data) fn lease_writes<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        n: usize,
    ) -> Result<Option<LeasedWrites>> {
        assert!(n <= MAX_LEASED_BLOCKS, "a grant of {n} blocks");
        if !self.own || self.lfs || !media(fs).own_records || st.disk.mode & 0o6000 != 0 {
            return Ok(None);
        }
        self.settle(fs, st)?;
        self.with_file(fs, st, |hf, _| {
            let mut blocks = Vec::with_capacity(n);
            self.take_blocks(fs, n, &mut blocks)?;
            Ok(Some(LeasedWrites {
                seq: hf.next_seq,
                blocks,
            }))
        })
    }

    /// Adopts a returned lease: the granted blocks whose records are the
    /// lessee's valid commits become the file's in seq order, as if the
    /// daemon had written them (`own::write_own`'s updates), and the
    /// queue is persisted; every other granted block has its record
    /// cleared (fenced before anything is adopted) and is freed.
    pub(in crate::data) fn adopt<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        lease: &LeasedWrites,
        end: LeaseEnd,
    ) -> Result<usize> {
        let (kept, unused, dropped) = self.sort_granted(fs, st, lease, end);
        let dev = &**fs.device();
        for &b in &dropped {
            media(fs).clear_li(dev, b);
        }
        if !dropped.is_empty() {
            fs.drain()?;
        }
        unused
            .iter()
            .chain(&dropped)
            .for_each(|&b| fs.blocks().free(b));
        if kept.is_empty() {
            return Ok(0);
        }
        let n = kept.len();
        self.with_file(fs, st, |hf, st| self.map_adopted(fs, hf, st, &kept))?;
        self.shared.stats.adopted.fetch_add(n as u64, Relaxed);
        Ok(n)
    }

    /// The granted blocks as (adoptable records in seq order, unused
    /// blocks, blocks whose records must go). Of two records with one
    /// seq — no lessee writes them; recovery would refuse the pool — the
    /// first is kept.
    fn sort_granted<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        lease: &LeasedWrites,
        end: LeaseEnd,
    ) -> (Vec<(LogicalInfo, u64)>, Vec<u64>, Vec<u64>) {
        let dev = &**fs.device();
        let (mut kept, mut unused, mut dropped) = (Vec::new(), Vec::new(), Vec::new());
        for &b in &lease.blocks {
            match media(fs).read_li(dev, b) {
                Record::Clear => unused.push(b),
                Record::Valid(li) if adoptable(fs, st, (lease, end), &li, b) => {
                    kept.push((li, b));
                }
                _ => dropped.push(b),
            }
        }
        kept.sort_by_key(|(li, _)| li.seq);
        let mut last = None;
        kept.retain(|(li, b)| {
            let fresh = last != Some(li.seq);
            last = Some(li.seq);
            if !fresh {
                dropped.push(*b);
            }
            fresh
        });
        (kept, unused, dropped)
    }

    /// Maps the adopted blocks and queues their updates with the file's
    /// times as the newest commit left them, then persists the queue.
    fn map_adopted<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        hf: &mut HunterFile<X>,
        st: &mut InodeState,
        kept: &[(LogicalInfo, u64)],
    ) -> Result<()> {
        let mut ops = Vec::with_capacity(kept.len() * 3);
        let mut newest = Timespec { secs: 0, nsecs: 0 };
        for (li, b) in kept {
            let below = hf.index.below(li.file_block);
            map_write(
                hf,
                (li.file_block, li.file_block),
                &[*b],
                li.seq,
                true,
                &mut ops,
            );
            if li.link != below {
                ops.push(Op::Relink {
                    block: *b,
                    link: below,
                });
            }
            if let Some(own) = li.own {
                newest = newest.max(own.time);
            }
        }
        let last = kept[kept.len() - 1].0.seq;
        hf.next_seq = hf.next_seq.max(last + 1);
        // As recovery would take them from the newest own commit (§13.6).
        st.disk.mtime = newest;
        st.disk.ctime = st.disk.ctime.max(newest);
        st.times_dirty = false;
        let snap = snapshot(hf, st, last);
        self.queue(fs, st, &ops, snap, true, false)
    }
}

/// Whether the record in granted block `b` is one the lessee may have
/// written and a crash now would leave valid: an own commit of this file
/// and generation, with a seq of the grant, of a block wholly below the
/// size (a lessee never changes the size), whose data matches — read
/// only for a lease `Abandoned` (a returned one's writes all completed).
fn adoptable<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    (lease, end): (&LeasedWrites, LeaseEnd),
    li: &LogicalInfo,
    b: u64,
) -> bool {
    let seqs = lease.seq..lease.seq + lease.blocks.len() as u64;
    let Some(own) = li.own else {
        return false;
    };
    if li.ino != st.ino
        || li.generation != st.disk.generation
        || !seqs.contains(&li.seq)
        || (li.file_block.saturating_add(1)).saturating_mul(BLOCK_SIZE) > st.disk.size
    {
        return false;
    }
    if end == LeaseEnd::Returned {
        return true;
    }
    let mut block = vec![0u8; BLOCK_SIZE as usize];
    fs.device().read(fs.layout().block_offset(b), &mut block);
    own.matches(&block)
}
