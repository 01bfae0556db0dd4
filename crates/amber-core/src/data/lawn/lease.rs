//! Zone slots for a write lease (design.md §17.13): another process
//! commits its small overwrites of a leased file as one-fence extents
//! (§11.7) into runs of the file's sub-zone granted to it, and the daemon
//! binds the extents it finds there when the lease comes back. The
//! verifier keeps a head only as recovery would keep it at that moment,
//! and only inside the grant: this file, a write number of the grant, its
//! slots inside one granted run and no other kept head's, its slices
//! wholly below the size in mapped blocks, its checksum matching.

use super::Lawn;
use crate::data::{Context, LeaseEnd, LeasedSlots, SlotRun, MAX_SLOT_RUNS};
use crate::error::Result;
use crate::inode::InodeState;
use crate::zone::Zone;
use amber_format::zone_extent::{Extent, EXTENT_SIZE};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// A head the verifier keeps: its extent and its first slot.
type KeptHead = (Extent, u32);

impl Lawn {
    /// Up to `want` free slots of `st`'s sub-zone for a lessee's extents,
    /// in at most [`MAX_SLOT_RUNS`] runs of at least a block's slices (a
    /// write inside one block always fits one run), or `None` without a
    /// one-fence zone or a run. The caller pinned the whole file, so the
    /// zone holds nothing of it and every write number past its floor is
    /// free.
    pub(in crate::data) fn lease_slots<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        want: u32,
    ) -> Result<Option<LeasedSlots>> {
        let Some(zone) = fs.zone() else {
            return Ok(None);
        };
        if !zone.geo.extents || u32::try_from(st.ino).is_err() {
            return Ok(None);
        }
        let per_block = zone.geo.slices_per_block() as u32;
        let idx = zone.sub_of(st.ino);
        let mut runs = Vec::new();
        let (mut left, mut len) = (want, want.min(zone.geo.slots_per_chunk));
        // Each round takes a run or halves its length: bounded.
        while left >= per_block && len >= per_block && runs.len() < MAX_SLOT_RUNS {
            let n = len.min(left);
            let taken = match self.take_run(fs, zone, st, n) {
                Ok(t) => t,
                Err(e) => {
                    // A failed eviction: the runs taken go back first.
                    give_back_runs(zone, st.ino, &runs);
                    return Err(e);
                }
            };
            let Some(first) = taken else {
                len /= 2;
                continue;
            };
            let (head_at, data_at) = zone.place(&zone.lock(idx), first);
            runs.push(SlotRun {
                first,
                slots: n,
                head_at,
                data_at,
            });
            left -= n;
        }
        if runs.is_empty() {
            return Ok(None);
        }
        let top = zone.lock(idx).top(st.ino).unwrap_or(0);
        Ok(Some(LeasedSlots {
            seq: top.max(st.disk.zone_seq) + 1,
            slot_size: zone.geo.slot_size,
            runs,
        }))
    }

    /// Takes granted slots back (after the file's blocks were adopted, so
    /// its size and map are the lessee's): the lessee's sound extents
    /// become the file's newest copies of their slices, as if the daemon
    /// had written them; its other heads are cleared, fenced before any
    /// is bound; every other slot is free again. A head carries no time:
    /// a lessee that gives its lease back seals its newest write's time
    /// into an entry first, which the blocks' adoption took; for one that
    /// died, a file with kept extents gets the adoption's time as its
    /// mtime, left for fsync to persist as a zone write's is. Returns the
    /// slices bound.
    pub(in crate::data) fn adopt_slots<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        slots: &LeasedSlots,
        end: LeaseEnd,
    ) -> Result<usize> {
        let zone = Self::zone(fs);
        let (kept, cleared) = if end == LeaseEnd::Unused {
            (Vec::new(), Vec::new())
        } else {
            self.judge_leased(fs, zone, st, slots)
        };
        let dev = &**fs.device();
        for &at in &cleared {
            Zone::clear_entry(dev, &zone.geo, at);
        }
        if !cleared.is_empty() {
            fs.drain()?;
        }
        let bound = bind_kept(zone, st.ino, slots, &kept);
        if bound > 0 && end == LeaseEnd::Abandoned {
            let now = fs.now();
            st.disk.mtime = st.disk.mtime.max(now);
            st.disk.ctime = st.disk.ctime.max(now);
            st.times_dirty = true;
        }
        Ok(bound)
    }

    /// The granted slots' heads as (kept, in write-number order; entries
    /// to clear). Every slot's entry is read, so a head hidden inside a
    /// kept extent is found too.
    fn judge_leased<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        zone: &Zone,
        st: &InodeState,
        slots: &LeasedSlots,
    ) -> (Vec<KeptHead>, Vec<u64>) {
        let dev = &**fs.device();
        let seqs = slots.seq..slots.seq + slots.count();
        let (mut kept, mut cleared) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for run in &slots.runs {
            let mut covered = 0;
            for i in 0..run.slots {
                let at = run.head_at + u64::from(i) * EXTENT_SIZE;
                let mut raw = [0u8; EXTENT_SIZE as usize];
                dev.read(at, &mut raw);
                let e = match Extent::decode(&raw) {
                    Ok(Some(e)) if u64::from(e.ino) == st.ino && e.seq > st.disk.zone_seq => e,
                    // Recovery clears bytes no head has.
                    Err(_) => {
                        cleared.push(at);
                        continue;
                    }
                    // Dead, or another file's: as the grant found it.
                    Ok(_) => continue,
                };
                let sound = i >= covered
                    && seqs.contains(&e.seq)
                    && i + u32::from(e.slots) <= run.slots
                    && self.inside_file(st, zone, &e)
                    && checks(fs, zone, run, i, &raw, &e)
                    && seen.insert(e.seq);
                if sound {
                    covered = i + u32::from(e.slots);
                    kept.push((e, run.first + i));
                } else {
                    cleared.push(at);
                }
            }
        }
        kept.sort_by_key(|(e, _)| e.seq);
        (kept, cleared)
    }

    /// Whether extent `e` names slices wholly below `st`'s size, in
    /// blocks the file maps.
    fn inside_file(&self, st: &InodeState, zone: &Zone, e: &Extent) -> bool {
        let size = u64::from(zone.geo.slot_size);
        let last = u64::from(e.slice) + u64::from(e.slots) - 1;
        let end = (last + 1) * size;
        let first = u64::from(e.slice) * size / BLOCK_SIZE;
        last <= u64::from(u32::MAX)
            && end <= st.disk.size
            && (first..=(end - 1) / BLOCK_SIZE).all(|fb| (self.lookup())(st, fb).is_some())
    }
}

/// Whether the head `raw` (`e`, at slot `i` of `run`) carries the
/// checksum of its slots' bytes.
fn checks<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    run: &SlotRun,
    i: u32,
    raw: &[u8; EXTENT_SIZE as usize],
    e: &Extent,
) -> bool {
    let size = u64::from(zone.geo.slot_size);
    let mut data = vec![0u8; usize::from(e.slots) * zone.geo.slot_size as usize];
    fs.device()
        .read(run.data_at + u64::from(i) * size, &mut data);
    Extent::matches(raw, &data)
}

/// Binds the kept extents (in write-number order) as the file's, and
/// frees every other granted slot. Returns the slices bound.
fn bind_kept(zone: &Zone, ino: u64, slots: &LeasedSlots, kept: &[KeptHead]) -> usize {
    let mut sub = zone.lock(zone.sub_of(ino));
    let mut used = std::collections::HashSet::new();
    let mut bound = 0;
    for (e, first) in kept {
        let numbers: Vec<u32> = (0..u32::from(e.slots)).map(|k| e.slice + k).collect();
        let mut olds = vec![None; numbers.len()];
        sub.lookup_run(ino, e.slice, &mut olds);
        sub.bind_extent(ino, *first, &numbers, &olds);
        used.extend(*first..*first + u32::from(e.slots));
        bound += numbers.len();
    }
    if let Some((e, _)) = kept.last() {
        sub.set_top(ino, e.seq);
    }
    for run in &slots.runs {
        (run.first..run.first + run.slots)
            .filter(|s| !used.contains(s))
            .for_each(|s| sub.give_back(s));
    }
    bound
}

/// Frees every slot of `runs`, taken for `ino`'s grant and never bound.
fn give_back_runs(zone: &Zone, ino: u64, runs: &[SlotRun]) {
    let mut sub = zone.lock(zone.sub_of(ino));
    for run in runs {
        (run.first..run.first + run.slots).for_each(|s| sub.give_back(s));
    }
}
