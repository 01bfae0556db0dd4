//! Write leases on the split layout (design.md §17.4-§17.5, §17.10-§17.11):
//! another process writes a file's blocks into blocks granted to it — an
//! overwrite inside one block by an own commit (§13.6), any other write
//! by records its own attribute entry then covers, a truncate by an entry
//! alone — and the daemon adopts what it finds there when the lease comes
//! back. The verifier trusts nothing it did not check: a record counts
//! only as recovery would count it after a crash at that moment
//! (`split::judge`), inside the grant's blocks and seqs, and an entry only
//! if the grant allowed its seq and it does not pass the largest file.

use super::{map_write, media, push_frees, snapshot, Hunter, HunterFile, Op, PerFile};
use crate::data::{Context, LeaseEnd, LeasedWrites};
use crate::error::Result;
use crate::inode::InodeState;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::split::{AttrEntry, LogicalInfo, Record};
use amber_format::{Timespec, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;

/// Most blocks one write lease is granted: its adoption's updates (a
/// `Data` and a free per block) stay well inside one queue.
pub(crate) const MAX_LEASED_BLOCKS: usize = 1024;

/// A granted block's record the verifier keeps, and the block.
type Kept = (LogicalInfo, u64);

impl<X: PerFile> Hunter<X> {
    /// Grants `n` blocks for a lessee's writes on a file the caller pinned
    /// whole. The file's queue is persisted first, so the file's durable
    /// state is all of it and a lessee's commits add to it in order
    /// (§13.6's "why only when settled", per file: the daemon queues
    /// nothing of the file while the lease is out). Files with a set-ID
    /// bit are not leased: their writes must drop it.
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
            // The lessee maps them ahead in its own mapping; the daemon
            // never writes them (mapping them here cost it a fifth of
            // its time under two leased writers).
            self.take_blocks_for(fs, (n, None), &mut blocks, false)?;
            hf.lease_out = true;
            Ok(Some(LeasedWrites {
                seq: hf.next_seq,
                blocks,
                mapped: hf.index.count(),
                head: hf.index.last(),
                slots: None,
            }))
        })
    }

    /// Adopts a returned lease: the lessee's newest sound entry, and the
    /// granted blocks whose records are its valid commits, become the
    /// file's in seq order, as if the daemon had written them, and the
    /// queue is persisted; every other granted block has its record
    /// cleared (fenced before anything is adopted) and is freed.
    pub(in crate::data) fn adopt<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        lease: &LeasedWrites,
        end: LeaseEnd,
    ) -> Result<usize> {
        let loaded = st.policy.as_mut();
        if let Some(hf) = loaded.and_then(|p| p.downcast_mut::<HunterFile<X>>()) {
            hf.lease_out = false;
        }
        if end == LeaseEnd::Unused {
            lease.blocks.iter().for_each(|&b| fs.blocks().free(b));
            return Ok(0);
        }
        let entry = self.lessee_entry(fs, st, lease)?;
        let (kept, unused, dropped) = self.sort_granted(fs, st, (lease, end), entry.as_ref());
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
        // The lessee's entries moved the log's newest: the next persist
        // reads where its entry goes.
        self.shared.queues.forget_slot(st.ino);
        if kept.is_empty() && entry.is_none() {
            return Ok(0);
        }
        let n = kept.len();
        self.with_file(fs, st, |hf, st| {
            self.map_adopted(fs, hf, st, &kept, entry.as_ref())
        })?;
        self.shared.stats.adopted.fetch_add(n as u64, Relaxed);
        Ok(n)
    }

    /// The newest entry the lessee wrote in the file's log, if every
    /// entry it wrote is sound: of this generation with a seq of the
    /// grant, and no larger than the largest file.
    /// Otherwise each is cleared — fenced, so recovery too falls back to
    /// the entry the grant found, which the lessee never overwrites — and
    /// none counts.
    fn lessee_entry<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        lease: &LeasedWrites,
    ) -> Result<Option<AttrEntry>> {
        let m = media(fs);
        let dev = &**fs.device();
        let theirs: Vec<(u64, AttrEntry)> = (0u64..)
            .zip(m.read_log(dev, st.ino))
            .filter_map(|(i, r)| match r {
                Record::Valid(e) if e.generation == st.disk.generation && e.seq >= lease.seq => {
                    Some((i, e))
                }
                _ => None,
            })
            .collect();
        let seqs = granted_seqs(lease);
        let sound = |e: &AttrEntry| seqs.contains(&e.seq) && e.size <= MAX_FILE_SIZE;
        if theirs.iter().all(|(_, e)| sound(e)) {
            return Ok(theirs.into_iter().map(|(_, e)| e).max_by_key(|e| e.seq));
        }
        for &(i, _) in &theirs {
            m.clear_entry(dev, st.ino, i);
        }
        fs.drain()?;
        Ok(None)
    }

    /// The granted blocks as (adoptable records in seq and file order,
    /// unused blocks, blocks whose records must go). Of two records of
    /// one file block with one seq — no lessee writes them; recovery would
    /// refuse the pool — the first is kept.
    fn sort_granted<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &InodeState,
        (lease, end): (&LeasedWrites, LeaseEnd),
        entry: Option<&AttrEntry>,
    ) -> (Vec<Kept>, Vec<u64>, Vec<u64>) {
        let dev = &**fs.device();
        let (mut kept, mut unused, mut dropped) = (Vec::new(), Vec::new(), Vec::new());
        for &b in &lease.blocks {
            match media(fs).read_li(dev, b) {
                Record::Clear => unused.push(b),
                Record::Valid(li) if adoptable(fs, st, (lease, end), entry, &li, b) => {
                    kept.push((li, b));
                }
                _ => dropped.push(b),
            }
        }
        kept.sort_by_key(|(li, _)| (li.seq, li.file_block));
        let mut last = None;
        kept.retain(|(li, b)| {
            let fresh = last != Some((li.seq, li.file_block));
            last = Some((li.seq, li.file_block));
            if !fresh {
                dropped.push(*b);
            }
            fresh
        });
        (kept, unused, dropped)
    }

    /// Maps the adopted blocks, one write (a run of one seq) at a time,
    /// and queues their updates with the size the lessee's entry gave and
    /// the times its newest commit left, then persists the queue under a
    /// seq past every one the lessee used.
    fn map_adopted<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        hf: &mut HunterFile<X>,
        st: &mut InodeState,
        kept: &[Kept],
        entry: Option<&AttrEntry>,
    ) -> Result<()> {
        let fbs = kept.iter().map(|k| k.0.file_block);
        if let (Some(lo), Some(hi)) = (fbs.clone().min(), fbs.max()) {
            hf.index.make_room(lo, hi, kept.len() as u64)?;
        }
        let mut ops = Vec::with_capacity(kept.len() * 3);
        if let Some(e) = entry.filter(|e| e.size < st.disk.size) {
            // The lessee shrank the file (its last act under the lease):
            // the blocks past the size go, as a truncate's do.
            push_frees(
                &mut ops,
                hf.index.truncate(e.size.div_ceil(BLOCK_SIZE)),
                false,
            );
        }
        let mut newest = entry.map_or(Timespec { secs: 0, nsecs: 0 }, |e| e.mtime);
        for write in
            kept.chunk_by(|a, b| a.0.seq == b.0.seq && a.0.file_block + 1 == b.0.file_block)
        {
            map_one(hf, write, &mut ops);
            let own = write.iter().filter_map(|(li, _)| li.own);
            newest = own.fold(newest, |t, o| t.max(o.time));
        }
        let last = kept
            .iter()
            .map(|k| k.0.seq)
            .chain(entry.map(|e| e.seq))
            .max()
            .expect("something adopted");
        hf.next_seq = hf.next_seq.max(last + 2);
        if let Some(e) = entry {
            st.disk.size = e.size;
        }
        st.disk.blocks = hf.index.count();
        // As recovery would take them from the lessee's newest entry and
        // own commits (§13.6).
        st.disk.mtime = newest;
        st.disk.ctime = st.disk.ctime.max(newest);
        st.times_dirty = false;
        let snap = snapshot(hf, st, last + 1);
        self.queue(fs, st, &ops, snap, true, false)
    }
}

/// Maps one write's adopted blocks (consecutive file blocks, one seq),
/// marking the file's links stale from the first whose record's link is
/// not the block below it now (`chain.rs`).
fn map_one<X>(hf: &mut HunterFile<X>, write: &[Kept], ops: &mut Vec<Op>) {
    let (first, last) = (write[0].0.file_block, write[write.len() - 1].0.file_block);
    let blocks: Vec<u64> = write.iter().map(|&(_, b)| b).collect();
    let mut link = hf.index.below(first);
    let stale = write.iter().find(|&&(li, b)| {
        let wrong = li.link != link;
        link = b;
        wrong
    });
    let stale = stale.map(|&(li, _)| li.file_block);
    map_write(hf, (first, last), &blocks, write[0].0.seq, true, ops);
    if let Some(fb) = stale {
        hf.links_stale_from(fb);
    }
}

/// The seqs a grant lets its lessee use: one per write, so at most one
/// per granted block.
fn granted_seqs(lease: &LeasedWrites) -> Range<u64> {
    lease.seq..lease.seq + lease.blocks.len() as u64
}

/// Whether the record in granted block `b` is one the lessee may have
/// written and a crash now would leave valid: of this file and
/// generation with a seq of the grant, and either covered by the lessee's
/// sound `entry` (a seq no higher, a block below its size) or an own
/// commit of a block wholly below the size whose data matches — read only
/// for a lease `Abandoned` (a returned one's writes all completed).
fn adoptable<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    (lease, end): (&LeasedWrites, LeaseEnd),
    entry: Option<&AttrEntry>,
    li: &LogicalInfo,
    b: u64,
) -> bool {
    if li.ino != st.ino
        || li.generation != st.disk.generation
        || !granted_seqs(lease).contains(&li.seq)
    {
        return false;
    }
    let size = entry.map_or(st.disk.size, |e| e.size);
    if entry.is_some_and(|e| li.seq <= e.seq) {
        return li.file_block < size.div_ceil(BLOCK_SIZE);
    }
    let Some(own) = li.own else {
        return false;
    };
    if (li.file_block.saturating_add(1)).saturating_mul(BLOCK_SIZE) > size {
        return false;
    }
    if end == LeaseEnd::Returned {
        return true;
    }
    let mut block = vec![0u8; BLOCK_SIZE as usize];
    fs.device().read(fs.layout().block_offset(b), &mut block);
    own.matches(&block)
}
