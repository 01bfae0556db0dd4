//! The `bare` target's free space: runs of whole blocks, first fit,
//! coalesced on free. Once every file is gone the pool is one run again,
//! so a populate that removes its files between repetitions lays them out
//! the same way every time.

use std::collections::BTreeMap;

/// Unit of allocation, in bytes: Amber's block size, so both sides round
/// a file to the same size.
pub const BLOCK: u64 = 4096;

/// A contiguous piece of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Device offset of the first byte.
    pub dev: u64,
    /// Bytes, a multiple of [`BLOCK`].
    pub len: u64,
}

/// The free runs of a pool, by device offset.
#[derive(Debug)]
pub struct Space {
    /// Start of each free run → its length; no two runs touch.
    runs: BTreeMap<u64, u64>,
    free_bytes: u64,
    size_bytes: u64,
}

impl Space {
    /// All whole blocks of a pool of `size` bytes, free.
    pub fn new(size: u64) -> Space {
        let size_bytes = size - size % BLOCK;
        let mut runs = BTreeMap::new();
        if size_bytes > 0 {
            runs.insert(0, size_bytes);
        }
        Space {
            runs,
            free_bytes: size_bytes,
            size_bytes,
        }
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Takes at least `need` and at most `want` bytes (block multiples,
    /// `need <= want`): first from the run starting at `hint` (the end of
    /// the caller's last extent, which then grows in place), then from the
    /// lowest-addressed runs. All or nothing: `None` when fewer than `need`
    /// bytes are free.
    pub fn take(&mut self, need: u64, want: u64, hint: Option<u64>) -> Option<Vec<Run>> {
        assert!(need > 0, "take: nothing asked for");
        assert!(need <= want, "take: need {need} > want {want}");
        assert_eq!(need % BLOCK, 0, "take: need not in blocks");
        assert_eq!(want % BLOCK, 0, "take: want not in blocks");
        if need > self.free_bytes {
            return None;
        }
        let mut got = Vec::new();
        let mut total = 0;
        if let Some(start) = hint.filter(|h| self.runs.contains_key(h)) {
            total += self.carve(start, want, &mut got);
        }
        // Each pass empties or shortens one run; the free-byte count above
        // guarantees the runs hold `need`.
        while total < need {
            let (&start, _) = self
                .runs
                .first_key_value()
                .expect("free bytes are counted in runs");
            total += self.carve(start, want - total, &mut got);
        }
        self.free_bytes -= total;
        Some(got)
    }

    /// Takes up to `max` bytes from the front of the run at `start`.
    fn carve(&mut self, start: u64, max: u64, got: &mut Vec<Run>) -> u64 {
        let len = self.runs.remove(&start).expect("carve: a free run");
        let n = len.min(max);
        if len > n {
            self.runs.insert(start + n, len - n);
        }
        got.push(Run { dev: start, len: n });
        n
    }

    /// Returns a run, merging it with the free runs it touches.
    pub fn give(&mut self, run: Run) {
        assert!(run.len > 0, "give: empty run");
        assert_eq!(run.dev % BLOCK, 0, "give: run not block-aligned");
        assert_eq!(run.len % BLOCK, 0, "give: run not in blocks");
        let end = run.dev + run.len;
        assert!(end <= self.size_bytes, "give: run past the pool");
        let (mut start, mut len) = (run.dev, run.len);
        if let Some((&p, &pl)) = self.runs.range(..run.dev).next_back() {
            assert!(
                p + pl <= run.dev,
                "give: run overlaps a free run (double free)"
            );
            if p + pl == run.dev {
                self.runs.remove(&p);
                start = p;
                len += pl;
            }
        }
        if let Some((&n, _)) = self.runs.range(run.dev..).next() {
            assert!(n >= end, "give: run overlaps a free run (double free)");
        }
        if let Some(nl) = self.runs.remove(&end) {
            len += nl;
        }
        self.runs.insert(start, len);
        self.free_bytes += run.len;
        assert!(
            self.free_bytes <= self.size_bytes,
            "give: more free than the pool"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = BLOCK;

    #[test]
    fn takes_in_place_first_then_lowest_and_coalesces_back() {
        let mut s = Space::new(10 * B + 100);
        assert_eq!(s.free_bytes(), 10 * B, "a partial block is not used");
        let a = s.take(B, B, None).unwrap();
        assert_eq!(a, vec![Run { dev: 0, len: B }]);
        let b = s.take(B, 2 * B, None).unwrap();
        assert_eq!(b, vec![Run { dev: B, len: 2 * B }]);
        // `a` cannot grow in place (b is there): it gets the lowest run.
        let a2 = s.take(B, B, Some(B)).unwrap();
        assert_eq!(a2, vec![Run { dev: 3 * B, len: B }]);
        // In place when the run at the hint is free.
        let a3 = s.take(B, 2 * B, Some(4 * B)).unwrap();
        assert_eq!(
            a3,
            vec![Run {
                dev: 4 * B,
                len: 2 * B
            }]
        );
        s.give(b[0]);
        // Fragmented: at least `need`, in pieces, the hint's run first.
        let c = s.take(5 * B, 5 * B, Some(6 * B)).unwrap();
        assert_eq!(
            c,
            vec![
                Run {
                    dev: 6 * B,
                    len: 4 * B
                },
                Run { dev: B, len: B }
            ]
        );
        assert_eq!(s.free_bytes(), B);
        assert!(s.take(2 * B, 2 * B, None).is_none(), "all or nothing");
        assert_eq!(s.free_bytes(), B);
        for r in a.iter().chain(&a2).chain(&a3).chain(&c) {
            s.give(*r);
        }
        assert_eq!(s.free_bytes(), 10 * B);
        assert_eq!(s.runs.len(), 1, "one run again: {:?}", s.runs);
    }

    #[test]
    #[should_panic(expected = "double free")]
    fn a_double_free_is_caught() {
        let mut s = Space::new(4 * B);
        let r = s.take(B, B, None).unwrap()[0];
        s.give(r);
        s.give(r);
    }
}
