//! The data-block allocator: the data area is split into groups, each with
//! its own lock and free-extent map, and a thread allocates from "its"
//! group first (the legacy-file-system study's parallel allocation), so two
//! threads writing two files do not contend. A hint (the block after the
//! file's previous one) keeps sequential files contiguous.

use super::intervals::Intervals;
use super::{BitSet, Homes, Padded};
use amber_format::Layout;
use parking_lot::Mutex;
use rustc_hash::FxHashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Most groups; a group is at least 64 blocks.
const MAX_GROUPS: u64 = 64;

/// Per-CPU-group block allocator.
pub struct BlockAllocator {
    groups: Vec<Padded<Mutex<Intervals>>>,
    group_blocks: u64,
    data_start: u64,
    total_blocks: u64,
    /// Which group a thread starts from (its home in this mount).
    homes: Homes,
    /// Blocks a forked child may still map (`mapped/`): freed, they stay
    /// out of circulation until `release_held`.
    held: Mutex<Held>,
    /// Whether `held` names any block: the one load a free pays
    /// otherwise.
    holding: AtomicBool,
}

/// Blocks to hold back when freed, and those freed since.
#[derive(Default)]
struct Held {
    wanted: FxHashSet<u64>,
    parked: Vec<u64>,
}

impl BlockAllocator {
    /// An allocator whose free blocks are the data blocks not set in
    /// `used`; a thread starts from its home group among `homes`.
    pub(crate) fn new(layout: &Layout, used: &BitSet, homes: Homes) -> BlockAllocator {
        assert_eq!(used.len(), layout.total_blocks);
        let data = layout.data_blocks();
        let ngroups = (data / 64).clamp(1, MAX_GROUPS);
        let group_blocks = data.div_ceil(ngroups);
        let mut groups: Vec<Intervals> = (0..ngroups).map(|_| Intervals::default()).collect();
        let mut b = layout.data_start;
        while b < layout.total_blocks {
            if used.get(b) {
                b += 1;
                continue;
            }
            let g = ((b - layout.data_start) / group_blocks) as usize;
            let group_end = layout.data_start + (g as u64 + 1) * group_blocks;
            let start = b;
            while b < layout.total_blocks && b < group_end && !used.get(b) {
                b += 1;
            }
            groups[g].add_run(start, b - start);
        }
        BlockAllocator {
            groups: groups.into_iter().map(|g| Padded(Mutex::new(g))).collect(),
            group_blocks,
            data_start: layout.data_start,
            total_blocks: layout.total_blocks,
            homes,
            held: Mutex::new(Held::default()),
            holding: AtomicBool::new(false),
        }
    }

    /// When any of `blocks` is freed, keeps it from reuse until
    /// `release_held`: a forked child may still map it (design.md §16).
    pub fn hold(&self, blocks: impl Iterator<Item = u64>) {
        let mut h = self.held.lock();
        h.wanted.extend(blocks);
        self.holding.store(!h.wanted.is_empty(), Relaxed);
    }

    /// Gives back every block held since `hold` (the pool is closing).
    pub fn release_held(&self) {
        let parked = {
            let mut h = self.held.lock();
            self.holding.store(false, Relaxed);
            h.wanted.clear();
            std::mem::take(&mut h.parked)
        };
        for b in parked {
            self.give(b);
        }
    }

    /// Holds back `b` if it is wanted; true when it was.
    fn parked(&self, b: u64) -> bool {
        if !self.holding.load(Relaxed) {
            return false;
        }
        let mut h = self.held.lock();
        if !h.wanted.remove(&b) {
            return false;
        }
        h.parked.push(b);
        true
    }

    fn group_of(&self, b: u64) -> usize {
        ((b - self.data_start) / self.group_blocks) as usize
    }

    /// One block, near `hint` if it is free; None when the pool is full.
    pub fn alloc(&self, hint: Option<u64>) -> Option<u64> {
        let hint = hint.filter(|&h| h >= self.data_start && h < self.total_blocks);
        let n = self.groups.len();
        let first = hint
            .map(|h| self.group_of(h))
            .unwrap_or_else(|| self.homes.slot(n));
        for k in 0..n {
            let g = (first + k) % n;
            let h = if k == 0 { hint } else { None };
            if let Some(b) = self.groups[g].lock().take(h) {
                return Some(b);
            }
        }
        None
    }

    /// `n` blocks, all or none, the first near `hint` and the rest
    /// following it where possible.
    pub fn alloc_many(&self, n: usize, hint: Option<u64>) -> Option<Vec<u64>> {
        let mut out = Vec::with_capacity(n);
        let mut h = hint;
        for _ in 0..n {
            match self.alloc(h) {
                Some(b) => {
                    out.push(b);
                    h = Some(b + 1);
                }
                None => {
                    self.free_all(&out);
                    return None;
                }
            }
        }
        Some(out)
    }

    /// `n` contiguous blocks (the zone's chunks are addressed by their
    /// first block), first fit within one group; None if no group has such
    /// an extent. `n` is at most `max_extent()`.
    pub fn alloc_extent(&self, n: u64) -> Option<u64> {
        assert!(n > 0 && n <= self.max_extent(), "extent of {n} blocks");
        let count = self.groups.len();
        let first = self.homes.slot(count);
        for k in 0..count {
            if let Some(start) = self.groups[(first + k) % count].lock().take_fit(n) {
                return Some(start);
            }
        }
        None
    }

    /// A run of at most `max` contiguous blocks for a data log: a whole
    /// `max` from this thread's group or the next one that has such a run
    /// (fresh space, while the pool has any), else the lowest free extent
    /// — the gaps freed blocks left, which HUNTER's gap-write reuses once
    /// the log is full (hunter.txt §III-B). A whole `max` starting at
    /// `at` comes first, where there is one: the log's previous run goes
    /// on. Returns (first block, length); None when the pool is full.
    pub fn alloc_run(&self, max: u64, at: Option<u64>) -> Option<(u64, u64)> {
        assert!(max > 0, "a run of at least one block");
        let at = at.filter(|&a| a >= self.data_start && a < self.total_blocks);
        if let Some(start) = at.and_then(|a| self.groups[self.group_of(a)].lock().take_at(a, max)) {
            return Some((start, max));
        }
        let count = self.groups.len();
        let first = self.homes.slot(count);
        let group = |k: usize| self.groups[(first + k) % count].lock();
        (0..count)
            .find_map(|k| group(k).take_long(max).map(|s| (s, max)))
            .or_else(|| (0..count).find_map(|k| group(k).take_run(max)))
    }

    /// The longest extent `alloc_extent` can ever return: a group.
    pub fn max_extent(&self) -> u64 {
        self.group_blocks
    }

    /// Returns a block to its group (unless it is held back).
    pub fn free(&self, b: u64) {
        assert!(
            b >= self.data_start && b < self.total_blocks,
            "freeing non-data block {b}"
        );
        if !self.parked(b) {
            self.give(b);
        }
    }

    fn give(&self, b: u64) {
        self.groups[self.group_of(b)].lock().give(b);
    }

    /// Returns blocks `start..start + n`, one lock and one merge per group
    /// they span.
    pub fn free_run(&self, start: u64, n: u64) {
        let end = start + n;
        assert!(
            start >= self.data_start && end <= self.total_blocks,
            "freeing non-data blocks {start}..{end}"
        );
        if self.holding.load(Relaxed) {
            (start..end).for_each(|b| self.free(b));
            return;
        }
        let mut b = start;
        while b < end {
            let g = self.group_of(b);
            let group_end = (self.data_start + (g as u64 + 1) * self.group_blocks).min(end);
            self.groups[g].lock().give_run(b, group_end - b);
            b = group_end;
        }
    }

    pub fn free_all(&self, blocks: &[u64]) {
        for &b in blocks {
            self.free(b);
        }
    }

    pub fn free_count(&self) -> u64 {
        // Each group counts its own (one shared counter would be a cache
        // line every allocation on every CPU writes).
        self.groups.iter().map(|g| g.lock().count()).sum()
    }

    /// Which blocks are in use (metadata blocks included), for saving at
    /// clean unmount.
    pub fn used_bitmap(&self) -> BitSet {
        let mut s = BitSet::new(self.total_blocks);
        for b in 0..self.total_blocks {
            s.set(b);
        }
        for g in &self.groups {
            for (start, len) in g.lock().runs() {
                for b in start..start + len {
                    s.clear(b);
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_format::FormatParams;

    fn layout() -> Layout {
        Layout::compute(&FormatParams::for_size(4 << 20)).unwrap()
    }

    fn metadata_used(l: &Layout) -> BitSet {
        let mut u = BitSet::new(l.total_blocks);
        for b in 0..l.data_start {
            u.set(b);
        }
        u
    }

    #[test]
    fn allocates_every_block_once_then_reports_full() {
        let l = layout();
        let a = BlockAllocator::new(&l, &metadata_used(&l), Homes::default());
        let n = l.data_blocks();
        assert_eq!(a.free_count(), n);
        let mut seen = BitSet::new(l.total_blocks);
        for _ in 0..n {
            let b = a.alloc(None).unwrap();
            assert!(l.is_data_block(b));
            assert!(!seen.set(b));
        }
        assert_eq!(a.alloc(None), None);
        assert_eq!(a.alloc_many(1, None), None);
        a.free(l.data_start + 3);
        assert_eq!(a.alloc(None), Some(l.data_start + 3));
    }

    #[test]
    fn hint_gives_contiguous_blocks_and_bitmap_round_trips() {
        let l = layout();
        let a = BlockAllocator::new(&l, &metadata_used(&l), Homes::default());
        let v = a.alloc_many(10, Some(l.data_start + 100)).unwrap();
        assert_eq!(
            v,
            (l.data_start + 100..l.data_start + 110).collect::<Vec<_>>()
        );
        let used = a.used_bitmap();
        let b = BlockAllocator::new(&l, &used, Homes::default());
        assert_eq!(b.free_count(), a.free_count());
        a.free_all(&v);
        assert_eq!(a.free_count(), l.data_blocks());
    }

    #[test]
    fn extents_are_contiguous_and_bounded() {
        let l = layout();
        let a = BlockAllocator::new(&l, &metadata_used(&l), Homes::default());
        let n = a.max_extent();
        let s = a.alloc_extent(n).unwrap();
        assert_eq!(a.free_count(), l.data_blocks() - n);
        let one = a.alloc(None).unwrap();
        assert!(one < s || one >= s + n);
        a.free_all(&(s..s + n).collect::<Vec<_>>());
        a.free(one);
        assert_eq!(a.free_count(), l.data_blocks());
        // Fragment every group: no extent of two blocks is left.
        let all: Vec<u64> = std::iter::from_fn(|| a.alloc(None)).collect();
        for b in all.iter().step_by(2) {
            a.free(*b);
        }
        assert_eq!(a.alloc_extent(2), None);
    }

    #[test]
    fn runs_take_fresh_space_then_gaps() {
        let l = layout();
        let a = BlockAllocator::new(&l, &metadata_used(&l), Homes::default());
        let mut got = 0;
        while let Some((s, n)) = a.alloc_run(7, None) {
            assert!((1..=7).contains(&n) && l.is_data_block(s) && l.is_data_block(s + n - 1));
            got += n;
        }
        assert_eq!(got, l.data_blocks());
        a.free(l.data_start + 10);
        a.free(l.data_start + 11);
        assert_eq!(a.alloc_run(7, None), Some((l.data_start + 10, 2)));
    }

    /// A log's next run goes on from its last where those blocks are
    /// free, from any thread's group; elsewhere it is a fresh run.
    #[test]
    fn a_run_goes_on_where_the_last_ended() {
        let l = layout();
        let a = BlockAllocator::new(&l, &metadata_used(&l), Homes::default());
        let (s, n) = a.alloc_run(7, None).unwrap();
        assert_eq!(a.alloc_run(7, Some(s + n)), Some((s + n, 7)));
        let taken = a.alloc(Some(s + n + 7)).unwrap();
        assert_eq!(taken, s + n + 7);
        let (t, _) = a.alloc_run(7, Some(s + n + 7)).unwrap();
        assert_ne!(t, s + n + 7, "a used block starts no run");
        let (u, _) = a.alloc_run(7, Some(0)).unwrap();
        assert!(
            l.is_data_block(u),
            "a place outside the data area is ignored"
        );
    }
}
