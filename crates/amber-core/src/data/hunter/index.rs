//! The per-file DRAM index (hunter.txt §III-B "light-weight data
//! structures"): a dynamic array from file block to PM block, so finding
//! an offset is one array access, pre-sized by workload-aware
//! pre-allocation (§III-D) from a window of recent file sizes.

use parking_lot::Mutex;
use std::collections::VecDeque;

/// File block -> PM block (0: a hole).
#[derive(Debug, Default)]
pub(super) struct FileIndex {
    blocks: Vec<u64>,
    /// Entries that are not holes.
    count: u64,
}

impl FileIndex {
    /// An empty index with room for `capacity` blocks.
    pub fn with_capacity(capacity: usize) -> FileIndex {
        FileIndex {
            blocks: Vec::with_capacity(capacity),
            count: 0,
        }
    }

    pub fn get(&self, fb: u64) -> Option<u64> {
        self.blocks.get(fb as usize).copied().filter(|&b| b != 0)
    }

    /// Maps `fb` to `b`, returning the block it replaces.
    pub fn set(&mut self, fb: u64, b: u64) -> Option<u64> {
        assert!(b != 0, "block 0 is never file data");
        let i = usize::try_from(fb).expect("file blocks fit usize");
        if i >= self.blocks.len() {
            self.blocks.resize(i + 1, 0);
        }
        let old = std::mem::replace(&mut self.blocks[i], b);
        if old == 0 {
            self.count += 1;
        }
        (old != 0).then_some(old)
    }

    /// Drops every block at or past `fb`, returning them.
    pub fn truncate(&mut self, fb: u64) -> Vec<u64> {
        let from = (fb as usize).min(self.blocks.len());
        let gone: Vec<u64> = self.blocks.drain(from..).filter(|&b| b != 0).collect();
        self.count -= gone.len() as u64;
        self.trim();
        gone
    }

    /// Drops the blocks at indexes `[first, last]` (a punched hole),
    /// returning them.
    pub fn clear(&mut self, first: u64, last: u64) -> Vec<u64> {
        let end = (last as usize).saturating_add(1).min(self.blocks.len());
        let start = (first as usize).min(end);
        let gone: Vec<u64> = self.blocks[start..end]
            .iter_mut()
            .filter(|b| **b != 0)
            .map(std::mem::take)
            .collect();
        self.count -= gone.len() as u64;
        self.trim();
        gone
    }

    /// Keeps the array ending at its last block, so `last` is O(1).
    fn trim(&mut self) {
        while self.blocks.last() == Some(&0) {
            self.blocks.pop();
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Entries in `[first, stop)` that are not holes: bounded by the
    /// array, whatever the range.
    pub fn count_in(&self, first: u64, stop: u64) -> u64 {
        let len = self.blocks.len() as u64;
        let (a, b) = (first.min(len) as usize, stop.min(len) as usize);
        self.blocks[a..b.max(a)].iter().filter(|&&b| b != 0).count() as u64
    }

    /// The block at the highest index (the chain's head), 0 if none.
    pub fn head(&self) -> u64 {
        self.blocks.last().copied().unwrap_or(0)
    }

    /// The block at the nearest index below `fb`, 0 if none.
    pub fn below(&self, fb: u64) -> u64 {
        let end = (fb as usize).min(self.blocks.len());
        self.blocks[..end]
            .iter()
            .rev()
            .find(|&&b| b != 0)
            .copied()
            .unwrap_or(0)
    }

    /// The block at the nearest index above `fb`, if any.
    pub fn above(&self, fb: u64) -> Option<u64> {
        let from = (fb as usize).saturating_add(1).min(self.blocks.len());
        self.blocks[from..].iter().find(|&&b| b != 0).copied()
    }

    /// The first index in `[fb, limit)` holding data.
    pub fn next_data(&self, fb: u64, limit: u64) -> Option<u64> {
        (fb..limit.min(self.blocks.len() as u64)).find(|&i| self.blocks[i as usize] != 0)
    }

    /// The first index in `[fb, limit)` without data.
    pub fn next_hole(&self, fb: u64, limit: u64) -> Option<u64> {
        (fb..limit).find(|&i| self.get(i).is_none())
    }

    /// Every block, for freeing the file.
    pub fn all(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.iter().copied().filter(|&b| b != 0)
    }

    /// DRAM the index holds.
    pub fn bytes(&self) -> u64 {
        (self.blocks.capacity() * std::mem::size_of::<u64>()) as u64
    }
}

/// Workload-aware pre-allocation: a file's index gets room for the
/// average size of the last `window` files that were loaded from PM (with
/// data), fsync'd or deleted, or the configured default before there is
/// any history; a loaded file's own size when larger.
pub(super) struct Sizer {
    default_blocks: usize,
    window: usize,
    recent: Mutex<VecDeque<u64>>,
}

impl Sizer {
    pub fn new(default_blocks: usize, window: usize) -> Sizer {
        assert!(window > 0, "a window of at least one file");
        Sizer {
            default_blocks,
            window,
            recent: Mutex::new(VecDeque::with_capacity(window)),
        }
    }

    /// Notes a file's size in blocks.
    pub fn sample(&self, blocks: u64) {
        let mut r = self.recent.lock();
        if r.len() == self.window {
            r.pop_front();
        }
        r.push_back(blocks);
    }

    /// Entries to reserve for a new file's index.
    pub fn capacity(&self) -> usize {
        let r = self.recent.lock();
        if r.is_empty() {
            return self.default_blocks;
        }
        let avg = r.iter().sum::<u64>() / r.len() as u64;
        usize::try_from(avg).unwrap_or(self.default_blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_maps_counts_and_finds_neighbours() {
        let mut x = FileIndex::with_capacity(4);
        assert_eq!(x.set(0, 10), None);
        assert_eq!(x.set(5, 15), None);
        assert_eq!(x.set(5, 16), Some(15));
        assert_eq!((x.count(), x.head()), (2, 16));
        assert_eq!(x.below(5), 10);
        assert_eq!(x.below(0), 0);
        assert_eq!(x.above(0), Some(16));
        assert_eq!(x.above(5), None);
        assert_eq!(x.next_data(1, 100), Some(5));
        assert_eq!(x.next_hole(0, 100), Some(1));
        assert_eq!(x.count_in(0, 100), 2);
        assert_eq!(x.count_in(1, 5), 0);
        assert_eq!(x.count_in(5, 6), 1);
        assert_eq!(x.count_in(7, u64::MAX), 0);
        assert_eq!(x.truncate(3), vec![16]);
        assert_eq!((x.count(), x.head()), (1, 10));
        assert_eq!(x.all().collect::<Vec<_>>(), vec![10]);
    }

    #[test]
    fn sizer_averages_its_window() {
        let s = Sizer::new(512, 2);
        assert_eq!(s.capacity(), 512);
        s.sample(10);
        s.sample(20);
        s.sample(40);
        assert_eq!(s.capacity(), 30);
    }
}
