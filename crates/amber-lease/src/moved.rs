//! The file blocks a write lease moved and where each lies now, for the
//! lease's window: every leased write looks a block up and, for its
//! record's link, the nearest moved block below it, which as B-tree
//! lookups took 8% of a leased writer's time. One slot per window block
//! and a bitmap make both a few word reads.

use std::ops::Range;

use amber_format::BLOCK_SIZE;

/// A window's moved blocks: file block → pool offset.
#[derive(Debug)]
pub(crate) struct Moved {
    window: Range<u64>,
    /// Pool offset per window block, where its bit is set.
    at: Vec<u64>,
    /// One bit per window block: moved.
    bits: Vec<u64>,
    count: usize,
}

impl Moved {
    /// None for `window`: at most `max` blocks long (the caller's bound
    /// on what it allocates).
    pub(crate) fn new(window: Range<u64>, max: u64) -> Option<Moved> {
        let len = usize::try_from(window.end.checked_sub(window.start)?)
            .ok()
            .filter(|&l| l as u64 <= max)?;
        Some(Moved {
            window,
            at: vec![0; len],
            bits: vec![0; len.div_ceil(64)],
            count: 0,
        })
    }

    fn slot(&self, fb: u64) -> Option<usize> {
        self.window
            .contains(&fb)
            .then(|| usize::try_from(fb - self.window.start).ok())
            .flatten()
    }

    fn is_set(&self, i: usize) -> bool {
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Where moved block `fb` lies (a pool offset), if it moved.
    pub(crate) fn get(&self, fb: u64) -> Option<u64> {
        let i = self.slot(fb)?;
        self.is_set(i).then(|| self.at[i])
    }

    /// Notes that `fb`, a block of the window, now lies at pool offset
    /// `at`.
    pub(crate) fn insert(&mut self, fb: u64, at: u64) {
        let i = self.slot(fb).expect("a leased write inside its window");
        debug_assert!(at.is_multiple_of(BLOCK_SIZE));
        if !self.is_set(i) {
            self.bits[i / 64] |= 1 << (i % 64);
            self.count += 1;
        }
        self.at[i] = at;
    }

    /// The highest moved block below `fb`.
    pub(crate) fn below(&self, fb: u64) -> Option<u64> {
        let end = usize::try_from(fb.clamp(self.window.start, self.window.end) - self.window.start)
            .ok()?;
        self.highest_before(end)
    }

    /// The highest moved block.
    pub(crate) fn last(&self) -> Option<u64> {
        self.highest_before(self.at.len())
    }

    /// The highest moved block whose slot is below `end`.
    fn highest_before(&self, end: usize) -> Option<u64> {
        let mut w = end / 64;
        // The partial word holding `end`, then whole words down: at most
        // one pass over the bitmap.
        let mut word = match end % 64 {
            0 => 0,
            r => self.bits[w] & ((1u64 << r) - 1),
        };
        loop {
            if word != 0 {
                let i = w * 64 + 63 - word.leading_zeros() as usize;
                return Some(self.window.start + i as u64);
            }
            w = w.checked_sub(1)?;
            word = self.bits[w];
        }
    }

    /// Every moved block and its pool offset, lowest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.at.len())
            .filter(|&i| self.is_set(i))
            .map(|i| (self.window.start + i as u64, self.at[i]))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Forgets every moved block from `cut` on; returns them.
    pub(crate) fn split_off(&mut self, cut: u64) -> Vec<u64> {
        let from =
            usize::try_from(cut.clamp(self.window.start, self.window.end) - self.window.start)
                .unwrap_or(self.at.len());
        let gone: Vec<u64> = (from..self.at.len())
            .filter(|&i| self.is_set(i))
            .map(|i| self.window.start + i as u64)
            .collect();
        for fb in &gone {
            let i = (fb - self.window.start) as usize;
            self.bits[i / 64] &= !(1 << (i % 64));
        }
        self.count -= gone.len();
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_match_a_sorted_map() {
        let mut rng = amber_sim::SplitMix64::new(7);
        let window = 4096..4096 + 300;
        let mut m = Moved::new(window.clone(), 4096).unwrap();
        let mut model = std::collections::BTreeMap::new();
        for round in 0..2000u64 {
            let fb = window.start + rng.next_u64() % 300;
            let at = (rng.next_u64() % 1000) * BLOCK_SIZE;
            m.insert(fb, at);
            model.insert(fb, at);
            let probe = window.start + rng.next_u64() % 310 - 5;
            assert_eq!(m.get(probe), model.get(&probe).copied(), "round {round}");
            let below = model.range(..probe).next_back().map(|(&k, _)| k);
            assert_eq!(m.below(probe), below, "round {round}: below {probe}");
            if round % 500 == 499 {
                let cut = window.start + rng.next_u64() % 300;
                let gone: Vec<u64> = model.split_off(&cut).into_keys().collect();
                assert_eq!(m.split_off(cut), gone);
            }
            assert_eq!(m.last(), model.keys().next_back().copied());
            assert_eq!(m.is_empty(), model.is_empty());
        }
        let all: Vec<(u64, u64)> = model.into_iter().collect();
        assert_eq!(m.iter().collect::<Vec<_>>(), all);
        assert!(Moved::new(0..4097, 4096).is_none());
    }
}
