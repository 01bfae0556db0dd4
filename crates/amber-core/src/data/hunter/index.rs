//! The per-file DRAM index (hunter.txt §III-B "light-weight data
//! structures"): file block to PM block. A dense array covers the file
//! from block 0, so for a file written from its start (nearly every file)
//! finding an offset is one array access, as in the paper; it is
//! pre-sized by workload-aware pre-allocation (§III-D) from a window of
//! recent file sizes. Blocks far past what the array may cover go into a
//! sparse upper level, an ordered map of 16-block chunks, so the index
//! grows with the blocks a file maps, never with its offsets: one 4 KiB
//! write at 256 GiB costs one chunk, not 512 MiB of array.
//!
//! The array may reach block `max(its capacity, 2 × mapped blocks + 16)`:
//! at least half of what it grows into is mapped, so with `Vec`'s
//! doubling the array costs at most ~32 bytes per mapped block beyond its
//! pre-allocation, and a chunk of the upper level at most ~160 bytes
//! (under 4% of the 4 KiB block it may be the only entry for).

use crate::error::{FsError, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Blocks per chunk of the sparse level.
const CHUNK: u64 = 16;
/// A chunk's DRAM: its array and, roughly, its share of the map's nodes.
const CHUNK_BYTES: u64 = CHUNK * 8 + 32;

type Chunk = Box<[u64; CHUNK as usize]>;

/// File block -> PM block (0: a hole).
#[derive(Debug, Default)]
pub(super) struct FileIndex {
    /// Blocks `[0, dense.len())`; never ends with a hole, so the array's
    /// last entry is its highest block.
    dense: Vec<u64>,
    /// Blocks at or past `dense.len()` that the array may not reach yet,
    /// by chunk number; no chunk is empty.
    sparse: BTreeMap<u64, Chunk>,
    /// Entries that are not holes.
    count: u64,
    /// Blocks the array reserves when it first grows (the workload-aware
    /// pre-allocation): taken then rather than when the file is opened,
    /// so a file that is only read, stat'd or deleted never allocates it
    /// (a 2 MiB allocation and free per deleted file was 13% of a crash
    /// test's image check).
    planned: usize,
}

impl FileIndex {
    /// Sets the room the array takes when it next grows.
    pub fn plan(&mut self, capacity: usize) {
        self.planned = capacity;
    }

    fn len(&self) -> u64 {
        self.dense.len() as u64
    }

    /// How far the array may grow now (exclusive).
    fn dense_limit(&self, count: u64) -> u64 {
        (self.dense.capacity().max(self.planned) as u64).max(2 * count + CHUNK)
    }

    pub fn get(&self, fb: u64) -> Option<u64> {
        let b = if fb < self.len() {
            self.dense[fb as usize]
        } else if self.sparse.is_empty() {
            0
        } else {
            self.sparse.get(&(fb / CHUNK))?[(fb % CHUNK) as usize]
        };
        (b != 0).then_some(b)
    }

    /// Reserves what mapping up to `n` more blocks in `[first, last]`
    /// may grow the array by, so the `set`s of one change cannot fail
    /// halfway: ENOMEM here, before anything changed, instead.
    pub fn make_room(&mut self, first: u64, last: u64, n: u64) -> Result<()> {
        let target = last
            .saturating_add(1)
            .min(self.dense_limit(self.count.saturating_add(n)));
        if target <= self.len() || first >= target {
            return Ok(());
        }
        let more = usize::try_from(target - self.len()).map_err(|_| FsError::OutOfMemory)?;
        let more = more.max(self.planned.saturating_sub(self.dense.len()));
        self.dense
            .try_reserve(more)
            .map_err(|_| FsError::OutOfMemory)
    }

    /// Maps `fb` to `b`, returning the block it replaces.
    pub fn set(&mut self, fb: u64, b: u64) -> Option<u64> {
        assert!(b != 0, "block 0 is never file data");
        if fb >= self.len() && fb < self.dense_limit(self.count + 1) {
            self.grow_to(fb + 1);
        }
        let slot = if fb < self.len() {
            &mut self.dense[fb as usize]
        } else {
            let chunk = self
                .sparse
                .entry(fb / CHUNK)
                .or_insert_with(|| Box::new([0; CHUNK as usize]));
            &mut chunk[(fb % CHUNK) as usize]
        };
        let old = std::mem::replace(slot, b);
        if old == 0 {
            self.count += 1;
        }
        (old != 0).then_some(old)
    }

    /// Extends the array to `len` blocks, taking in the sparse entries
    /// below it.
    fn grow_to(&mut self, len: u64) {
        let from = self.len();
        self.dense.resize(len as usize, 0);
        if self.sparse.is_empty() {
            return;
        }
        let below: Vec<u64> = self
            .sparse
            .range(..=(len - 1) / CHUNK)
            .map(|(&c, _)| c)
            .collect();
        for c in below {
            let chunk = self.sparse.get_mut(&c).expect("a key just listed");
            for (i, e) in chunk.iter_mut().enumerate() {
                let fb = c * CHUNK + i as u64;
                if *e != 0 && (from..len).contains(&fb) {
                    self.dense[fb as usize] = std::mem::take(e);
                }
            }
            if chunk.iter().all(|&e| e == 0) {
                self.sparse.remove(&c);
            }
        }
    }

    /// Drops every block at or past `fb`, returning them.
    pub fn truncate(&mut self, fb: u64) -> Vec<u64> {
        let from = fb.min(self.len()) as usize;
        let mut gone: Vec<u64> = self.dense.drain(from..).filter(|&b| b != 0).collect();
        let mut tail = self.sparse.split_off(&(fb / CHUNK));
        if let Some(mut first) = tail.remove(&(fb / CHUNK)) {
            gone.extend(take_from(&mut first, fb % CHUNK, CHUNK));
            if first.iter().any(|&e| e != 0) {
                self.sparse.insert(fb / CHUNK, first);
            }
        }
        gone.extend(
            tail.values()
                .flat_map(|c| c.iter().copied().filter(|&b| b != 0)),
        );
        self.count -= gone.len() as u64;
        self.trim();
        gone
    }

    /// Drops the blocks at indexes `[first, last]` (a punched hole),
    /// returning them.
    pub fn clear(&mut self, first: u64, last: u64) -> Vec<u64> {
        let end = last.saturating_add(1).min(self.len()) as usize;
        let start = (first as usize).min(end);
        let mut gone: Vec<u64> = self.dense[start..end]
            .iter_mut()
            .filter(|b| **b != 0)
            .map(std::mem::take)
            .collect();
        let mut emptied = Vec::new();
        for (&c, chunk) in self.sparse.range_mut(first / CHUNK..=last / CHUNK) {
            let lo = first.saturating_sub(c * CHUNK).min(CHUNK);
            let hi = (last - c * CHUNK).min(CHUNK - 1) + 1;
            gone.extend(take_from(chunk, lo, hi));
            if chunk.iter().all(|&e| e == 0) {
                emptied.push(c);
            }
        }
        emptied.iter().for_each(|c| drop(self.sparse.remove(c)));
        self.count -= gone.len() as u64;
        self.trim();
        gone
    }

    /// Keeps the array ending at its last block, so `head` is O(1).
    fn trim(&mut self) {
        while self.dense.last() == Some(&0) {
            self.dense.pop();
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Entries in `[first, stop)` that are not holes: bounded by the
    /// blocks mapped, whatever the range.
    pub fn count_in(&self, first: u64, stop: u64) -> u64 {
        let len = self.len();
        let (a, b) = (first.min(len) as usize, stop.min(len) as usize);
        let dense = self.dense[a..b.max(a)].iter().filter(|&&b| b != 0).count() as u64;
        dense + self.sparse_in(first, stop).count() as u64
    }

    /// The sparse entries in `[first, stop)` as (file block, block), in
    /// order.
    fn sparse_in(&self, first: u64, stop: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let chunks = (first < stop).then(|| self.sparse.range(first / CHUNK..=(stop - 1) / CHUNK));
        chunks
            .into_iter()
            .flatten()
            .flat_map(|(&c, chunk)| {
                chunk
                    .iter()
                    .enumerate()
                    .map(move |(i, &b)| (c * CHUNK + i as u64, b))
            })
            .filter(move |&(fb, b)| b != 0 && (first..stop).contains(&fb))
    }

    /// The block at the highest index (the chain's head), 0 if none.
    pub fn head(&self) -> u64 {
        self.last().map_or(0, |(_, b)| b)
    }

    /// The highest index mapped and its block, if any (no chunk of the
    /// sparse level is empty, and the array never ends with a hole).
    pub fn last(&self) -> Option<(u64, u64)> {
        if let Some((&c, chunk)) = self.sparse.last_key_value() {
            let (i, &b) = chunk.iter().enumerate().rev().find(|&(_, &b)| b != 0)?;
            return Some((c * CHUNK + i as u64, b));
        }
        let b = *self.dense.last()?;
        Some((self.len() - 1, b))
    }

    /// The block at the nearest index below `fb`, 0 if none.
    pub fn below(&self, fb: u64) -> u64 {
        if fb > self.len() {
            let above_dense = self.sparse.range(..=(fb - 1) / CHUNK).rev();
            for (&c, chunk) in above_dense {
                let hi = (fb - c * CHUNK).min(CHUNK) as usize;
                if let Some(&b) = chunk[..hi].iter().rev().find(|&&b| b != 0) {
                    return b;
                }
            }
        }
        let end = fb.min(self.len()) as usize;
        self.dense[..end]
            .iter()
            .rev()
            .find(|&&b| b != 0)
            .copied()
            .unwrap_or(0)
    }

    /// The block at the nearest index above `fb`, if any.
    pub fn above(&self, fb: u64) -> Option<u64> {
        let from = fb.saturating_add(1);
        let start = from.min(self.len()) as usize;
        if let Some(&b) = self.dense[start..].iter().find(|&&b| b != 0) {
            return Some(b);
        }
        // Every append asks: a file with no sparse level answers at once.
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse_in(from, u64::MAX).next().map(|(_, b)| b)
    }

    /// The first index in `[fb, limit)` holding data.
    pub fn next_data(&self, fb: u64, limit: u64) -> Option<u64> {
        (fb..limit.min(self.len()))
            .find(|&i| self.dense[i as usize] != 0)
            .or_else(|| self.sparse_in(fb, limit).next().map(|(i, _)| i))
    }

    /// The first index in `[fb, limit)` without data: each step passes a
    /// mapped block, so bounded by their number.
    pub fn next_hole(&self, fb: u64, limit: u64) -> Option<u64> {
        (fb..limit).find(|&i| self.get(i).is_none())
    }

    /// Every mapped index at or above `fb` with its block, ascending (the
    /// unmount's walk of a file's stale links, `chain.rs`).
    pub fn from(&self, fb: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let start = fb.min(self.len()) as usize;
        let dense = self.dense[start..]
            .iter()
            .enumerate()
            .map(move |(i, &b)| ((start + i) as u64, b))
            .filter(|&(_, b)| b != 0);
        dense.chain(self.sparse_in(fb.max(self.len()), u64::MAX))
    }

    /// Every block, for freeing the file.
    pub fn all(&self) -> impl Iterator<Item = u64> + '_ {
        let sparse = self.sparse.values().flat_map(|c| c.iter().copied());
        self.dense.iter().copied().chain(sparse).filter(|&b| b != 0)
    }

    /// DRAM the index holds.
    pub fn bytes(&self) -> u64 {
        (self.dense.capacity() * std::mem::size_of::<u64>()) as u64
            + self.sparse.len() as u64 * CHUNK_BYTES
    }
}

/// Takes the entries `[lo, hi)` of a chunk out, returning the blocks.
fn take_from(chunk: &mut Chunk, lo: u64, hi: u64) -> Vec<u64> {
    chunk[lo as usize..hi as usize]
        .iter_mut()
        .filter(|b| **b != 0)
        .map(std::mem::take)
        .collect()
}

/// Workload-aware pre-allocation: a file's index gets room for the
/// average size of the last `window` files that were loaded from PM (with
/// data), fsync'd or deleted, or the configured `hunter_index` before
/// there is any history — and never more than that, so one huge file in
/// the window cannot make every new file reserve its size.
pub(super) struct Sizer {
    default_blocks: usize,
    window: usize,
    recent: Mutex<VecDeque<u64>>,
    /// The last size sampled: the same size again in a row (a file
    /// fsync'd after every write) is one file's, not more history, and
    /// skipping it keeps a shared lock off every fsync.
    last: AtomicU64,
}

impl Sizer {
    pub fn new(default_blocks: usize, window: usize) -> Sizer {
        assert!(window > 0, "a window of at least one file");
        Sizer {
            default_blocks,
            window,
            recent: Mutex::new(VecDeque::with_capacity(window)),
            last: AtomicU64::new(u64::MAX),
        }
    }

    /// Notes a file's size in blocks.
    pub fn sample(&self, blocks: u64) {
        // Two threads may race here; a sample lost or doubled only
        // nudges an average.
        if self.last.load(Relaxed) == blocks {
            return;
        }
        self.last.store(blocks, Relaxed);
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
        usize::try_from(avg).map_or(self.default_blocks, |a| a.min(self.default_blocks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_sim::rng::SplitMix64;

    #[test]
    fn index_maps_counts_and_finds_neighbours() {
        let mut x = FileIndex::default();
        x.plan(4);
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

    /// A block at the last index a file can have costs one chunk; the
    /// array stays as pre-allocated.
    #[test]
    fn a_far_block_costs_a_chunk_not_an_array() {
        let mut x = FileIndex::default();
        x.plan(4);
        let far = (1u64 << 36) - 1;
        x.make_room(far, far, 1).unwrap();
        x.set(0, 7);
        x.set(far, 9);
        assert!(x.bytes() <= 4 * 8 + CHUNK_BYTES, "{} bytes", x.bytes());
        assert_eq!((x.get(far), x.head(), x.below(far)), (Some(9), 9, 7));
        assert_eq!(x.next_data(1, u64::MAX), Some(far));
        assert_eq!(x.above(0), Some(9));
        assert_eq!(x.clear(1, far - 1), Vec::<u64>::new());
        assert_eq!(x.truncate(1), vec![9]);
        assert_eq!((x.count(), x.head()), (1, 7));
    }

    /// Against a BTreeMap, on random sets, clears and truncates over a
    /// file whose blocks start dense and scatter: every query agrees, and
    /// the index's memory stays within its bound per mapped block.
    #[test]
    fn matches_an_ordered_map() {
        let seed = 0x1dec5;
        println!("seed {seed:#x} (change it here to replay another)");
        let mut rng = SplitMix64::new(seed);
        let mut x = FileIndex::default();
        x.plan(8);
        let mut m = BTreeMap::new();
        let mut peak = 0;
        for step in 0..20_000u64 {
            let fb = match rng.below(4) {
                0 => rng.below(64),
                1 => x.len() + rng.below(4),
                2 => rng.below(1 << 12),
                _ => rng.below(1 << 40),
            };
            match rng.below(50) {
                0 => {
                    let got: Vec<u64> = x.truncate(fb);
                    let want: Vec<u64> = m.split_off(&fb).into_values().collect();
                    assert_eq!(sorted(got), sorted(want), "truncate({fb}) at step {step}");
                }
                1 => {
                    let last = fb + rng.below(1 << 13);
                    let got = x.clear(fb, last);
                    let keys: Vec<u64> = m.range(fb..=last).map(|(&k, _)| k).collect();
                    let want: Vec<u64> = keys.iter().map(|k| m.remove(k).unwrap()).collect();
                    assert_eq!(sorted(got), sorted(want), "clear at step {step}");
                }
                _ => {
                    let b = step + 1;
                    x.make_room(fb, fb, 1).unwrap();
                    let cap = x.dense.capacity();
                    assert_eq!(x.set(fb, b), m.insert(fb, b), "set({fb}) at step {step}");
                    assert_eq!(x.dense.capacity(), cap, "make_room reserved the set");
                }
            }
            peak = peak.max(x.count());
            agree(&x, &m, fb, &mut rng);
            // The array keeps its capacity when blocks go: bounded by the
            // most the file ever mapped.
            let bound = 8 * 8 + 2 * 8 * (2 * peak + CHUNK) + CHUNK_BYTES * x.count();
            assert!(x.bytes() <= bound, "{} bytes, peak {peak}", x.bytes());
        }
    }

    fn sorted(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v
    }

    /// Every query of `x` at and around `fb` against the map.
    fn agree(x: &FileIndex, m: &BTreeMap<u64, u64>, fb: u64, rng: &mut SplitMix64) {
        let probe = [
            fb,
            fb.saturating_sub(1),
            fb + 1,
            rng.below(1 << 12),
            x.len(),
        ];
        for p in probe {
            assert_eq!(x.get(p), m.get(&p).copied(), "get({p})");
            let below = m.range(..p).next_back().map_or(0, |(_, &b)| b);
            assert_eq!(x.below(p), below, "below({p})");
            let above = m.range(p + 1..).next().map(|(_, &b)| b);
            assert_eq!(x.above(p), above, "above({p})");
            let limit = p + rng.below(1 << 41);
            let data = m.range(p..limit).next().map(|(&k, _)| k);
            assert_eq!(x.next_data(p, limit), data, "next_data({p}, {limit})");
            assert_eq!(x.count_in(p, limit), m.range(p..limit).count() as u64);
            let from: Vec<(u64, u64)> = x.from(p).take(3).collect();
            let want: Vec<(u64, u64)> = m.range(p..).take(3).map(|(&k, &b)| (k, b)).collect();
            assert_eq!(from, want, "from({p})");
        }
        assert_eq!(x.count(), m.len() as u64);
        assert_eq!(x.head(), m.values().next_back().copied().unwrap_or(0));
    }

    #[test]
    fn sizer_averages_its_window_up_to_the_default() {
        let s = Sizer::new(512, 2);
        assert_eq!(s.capacity(), 512);
        s.sample(10);
        s.sample(20);
        s.sample(40);
        assert_eq!(s.capacity(), 30);
        s.sample(1 << 30);
        assert_eq!(s.capacity(), 512);
        // One file fsync'd again and again at one size is one sample.
        let s = Sizer::new(512, 2);
        s.sample(100);
        for _ in 0..5 {
            s.sample(10);
        }
        assert_eq!(s.capacity(), 55);
    }
}
