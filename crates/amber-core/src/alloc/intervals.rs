//! A set of numbers kept as runs (start -> length): the interval list both
//! allocators hand out from — blocks per group, inode numbers — so free
//! space costs one entry per run, not per number (HUNTER's interval list
//! of reusable space and file numbers, hunter.txt §III-B).

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub(crate) struct Intervals {
    runs: BTreeMap<u64, u64>,
    count: u64,
    /// Runs of at least `LONG` numbers, so a caller that wants one knows
    /// without scanning whether any exists.
    long: u64,
}

/// What counts as a long run (a data log's 512 blocks).
pub(crate) const LONG: u64 = 512;

impl Intervals {
    /// Adds the run `start..start + len`, which must not touch a run
    /// already present (construction from a scan, in order).
    pub fn add_run(&mut self, start: u64, len: u64) {
        assert!(len > 0, "an empty run");
        debug_assert!(self
            .runs
            .range(..start + len)
            .next_back()
            .is_none_or(|(&s, &l)| s + l < start));
        self.put(start, len);
        self.count += len;
    }

    fn put(&mut self, start: u64, len: u64) {
        self.runs.insert(start, len);
        self.long += u64::from(len >= LONG);
    }

    fn drop_run(&mut self, start: u64) -> Option<u64> {
        let len = self.runs.remove(&start)?;
        self.long -= u64::from(len >= LONG);
        Some(len)
    }

    /// Adds `x`, merging it with the runs on either side.
    pub fn give(&mut self, x: u64) {
        self.give_run(x, 1);
    }

    /// Adds `x..x + n`, merging it with the runs on either side. A run
    /// that ends at `x` grows in place: a fragmented list (a log whose
    /// every other block was freed) holds ~10^5 runs, where each extra
    /// tree operation is a few cache misses.
    pub fn give_run(&mut self, x: u64, n: u64) {
        assert!(n > 0, "an empty run");
        let right = self.drop_run(x + n).unwrap_or(0);
        let left = self.runs.range_mut(..x + n).next_back();
        if let Some((&s, l)) = left {
            assert!(s + *l <= x, "{x}..{} freed twice", x + n);
            if s + *l == x {
                let was_long = *l >= LONG;
                *l += n + right;
                self.long += u64::from(!was_long && *l >= LONG);
                self.count += n;
                return;
            }
        }
        self.put(x, n + right);
        self.count += n;
    }

    /// `hint` if it is present, else the lowest number.
    pub fn take(&mut self, hint: Option<u64>) -> Option<u64> {
        if let Some(h) = hint {
            if let Some((&start, &len)) = self.runs.range(..=h).next_back() {
                if h < start + len {
                    self.drop_run(start);
                    if h > start {
                        self.put(start, h - start);
                    }
                    if h + 1 < start + len {
                        self.put(h + 1, start + len - h - 1);
                    }
                    self.count -= 1;
                    return Some(h);
                }
            }
        }
        self.take_run(1).map(|(s, _)| s)
    }

    /// The lowest run, cut to at most `max` numbers.
    pub fn take_run(&mut self, max: u64) -> Option<(u64, u64)> {
        assert!(max > 0, "a run of at least one");
        let (&start, &len) = self.runs.iter().next()?;
        Some(self.cut(start, len, max))
    }

    /// The first run of at least `n` numbers, cut to `n`.
    pub fn take_fit(&mut self, n: u64) -> Option<u64> {
        let (&start, &len) = self.runs.iter().find(|(_, &len)| len >= n)?;
        Some(self.cut(start, len, n).0)
    }

    /// `at..at + n` when a run starts at `at` and holds `n` numbers.
    pub fn take_at(&mut self, at: u64, n: u64) -> Option<u64> {
        let len = *self.runs.get(&at)?;
        (len >= n).then(|| self.cut(at, len, n).0)
    }

    /// The highest run of at least `n` numbers, cut to `n` from its
    /// start; None (without scanning) when no run is `LONG` and `n` is.
    pub fn take_long(&mut self, n: u64) -> Option<u64> {
        if n >= LONG && self.long == 0 {
            return None;
        }
        let (&start, &len) = self.runs.iter().rev().find(|(_, &len)| len >= n)?;
        Some(self.cut(start, len, n).0)
    }

    fn cut(&mut self, start: u64, len: u64, max: u64) -> (u64, u64) {
        let n = len.min(max);
        self.drop_run(start);
        if len > n {
            self.put(start + n, len - n);
        }
        self.count -= n;
        (start, n)
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Every run, in order.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.iter().map(|(&s, &l)| (s, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_split_and_count() {
        let mut s = Intervals::default();
        s.add_run(10, 5);
        s.give(3);
        s.give(2);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(2, 2), (10, 5)]);
        assert_eq!(s.take(Some(12)), Some(12));
        assert_eq!(s.take(Some(99)), Some(2));
        assert_eq!(s.take_fit(2), Some(10));
        assert_eq!(s.take_run(9), Some((3, 1)));
        assert_eq!(s.count(), 2);
        s.give(12);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(12, 3)]);
        s.add_run(100, LONG + 5);
        s.give(50);
        assert_eq!(s.take_long(LONG), Some(100));
        assert_eq!(s.take_long(LONG), None, "5 left at the top, no long run");
        assert_eq!(
            s.take_run(LONG),
            Some((12, 3)),
            "then the gaps, lowest first"
        );
    }

    /// A run is taken at a number only where one starts there and is
    /// long enough: a log goes on from its last run, never into a gap.
    #[test]
    fn a_run_is_taken_at_its_start_only() {
        let mut s = Intervals::default();
        s.add_run(10, 8);
        s.add_run(30, 2);
        assert_eq!(s.take_at(11, 2), None, "inside a run");
        assert_eq!(s.take_at(30, 4), None, "too short");
        assert_eq!(s.take_at(10, 4), Some(10));
        assert_eq!(s.take_at(14, 4), Some(14), "what is left goes on");
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(30, 2)]);
        assert_eq!(s.count(), 2);
    }

    #[test]
    fn a_run_given_back_merges_once() {
        let mut s = Intervals::default();
        s.add_run(12, 3);
        s.give_run(15, 3);
        s.give_run(9, 3);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(9, 9)]);
        assert_eq!(s.count(), 9);
        assert_eq!(s.take_run(4), Some((9, 4)));
    }

    /// Random frees and takes against a set of free numbers: the runs are
    /// the set's maximal runs, and the counts (all, long) agree.
    #[test]
    fn matches_a_set_of_free_numbers() {
        let seed = 0x1a7e_5ca9;
        println!("seed {seed:#x}");
        let mut rng = amber_sim::rng::SplitMix64::new(seed);
        let mut s = Intervals::default();
        let mut free = std::collections::BTreeSet::new();
        s.add_run(0, 2 * LONG);
        free.extend(0..2 * LONG);
        for _ in 0..20_000 {
            if rng.next_u64().is_multiple_of(2) {
                let Some((start, len)) = s.take_run(1 + rng.next_u64() % 8) else {
                    continue;
                };
                (start..start + len).for_each(|x| assert!(free.remove(&x)));
            } else {
                let x = rng.next_u64() % (2 * LONG);
                let n = (1 + rng.next_u64() % 4).min(2 * LONG - x);
                if (x..x + n).all(|y| !free.contains(&y)) {
                    s.give_run(x, n);
                    free.extend(x..x + n);
                }
            }
            let mut runs: Vec<(u64, u64)> = Vec::new();
            for &x in &free {
                match runs.last_mut() {
                    Some((a, l)) if *a + *l == x => *l += 1,
                    _ => runs.push((x, 1)),
                }
            }
            assert_eq!(s.runs().collect::<Vec<_>>(), runs);
            assert_eq!(s.count(), free.len() as u64);
            let long = runs.iter().filter(|&&(_, l)| l >= LONG).count() as u64;
            assert_eq!(s.long, long);
        }
    }
}
