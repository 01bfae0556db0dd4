//! IOzone's eight throughput tests and the record order each visits.
//!
//! Every test moves each record of the file exactly once, so each moves the
//! same volume and a read test can be checked against the whole file.

use amber_sim::SplitMix64;

/// IOzone's stride factor (`-j`, default 17): the stride-read test jumps 17
/// records ahead each read.
pub const STRIDE: u64 = 17;

/// One IOzone test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Test {
    /// Writes a new file sequentially: includes allocating its space.
    Write,
    /// Writes the existing file again sequentially: no allocation.
    Rewrite,
    /// Reads the file sequentially.
    Read,
    /// Reads it again at once: what caches keep.
    Reread,
    /// Reads every record once in a random order.
    RandomRead,
    /// Writes every record once in a random order.
    RandomWrite,
    /// Reads from the last record to the first (programs that scan
    /// backwards defeat read-ahead).
    BackwardRead,
    /// Reads every `STRIDE`-th record, wrapping one record further on each
    /// pass (IOzone's strided read).
    StrideRead,
}

impl Test {
    /// IOzone's run order: each test finds the file the previous one left.
    pub const ALL: [Test; 8] = [
        Test::Write,
        Test::Rewrite,
        Test::Read,
        Test::Reread,
        Test::RandomRead,
        Test::RandomWrite,
        Test::BackwardRead,
        Test::StrideRead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::Write => "write",
            Test::Rewrite => "rewrite",
            Test::Read => "read",
            Test::Reread => "reread",
            Test::RandomRead => "random-read",
            Test::RandomWrite => "random-write",
            Test::BackwardRead => "backward-read",
            Test::StrideRead => "stride-read",
        }
    }

    pub fn from_name(name: &str) -> Option<Test> {
        Test::ALL.into_iter().find(|t| t.name() == name.trim())
    }

    pub fn writes(self) -> bool {
        matches!(self, Test::Write | Test::Rewrite | Test::RandomWrite)
    }

    /// The seed of the data a write test stores: each write test stores
    /// different bytes from the last, so a write that did not happen shows
    /// in the read-back.
    pub fn data_seed(self, base: u64) -> Option<u64> {
        match self {
            Test::Write => Some(base),
            Test::Rewrite => Some(base ^ 0x5245_5752_4954_4500),
            Test::RandomWrite => Some(base ^ 0x524e_4457_5249_5445),
            _ => None,
        }
    }

    /// The record indices in the order the test visits them, for a file of
    /// `records` records; random orders come from `seed`.
    pub fn order(self, records: u64, seed: u64) -> Vec<u64> {
        match self {
            Test::Write | Test::Rewrite | Test::Read | Test::Reread => (0..records).collect(),
            Test::BackwardRead => (0..records).rev().collect(),
            Test::RandomRead | Test::RandomWrite => shuffled(records, seed),
            Test::StrideRead => strided(records, STRIDE),
        }
    }
}

/// A Fisher-Yates permutation of `0..n`: random like IOzone's random tests,
/// but without repeats, so every record is moved exactly once.
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// Pass `p` reads records `p, p + stride, p + 2 stride, ...` below `n`;
/// passes `0..stride` together read every record once.
fn strided(n: u64, stride: u64) -> Vec<u64> {
    (0..stride.min(n))
        .flat_map(|pass| (pass..n).step_by(stride as usize))
        .collect()
}

#[cfg(test)]
mod order_tests {
    use super::*;

    fn is_permutation(v: &[u64], n: u64) -> bool {
        let mut s = v.to_vec();
        s.sort_unstable();
        s == (0..n).collect::<Vec<_>>()
    }

    #[test]
    fn every_test_visits_every_record_exactly_once() {
        for n in [1, 2, 16, 17, 18, 100, 1024] {
            for t in Test::ALL {
                assert!(is_permutation(&t.order(n, 9), n), "{} n={n}", t.name());
            }
        }
    }

    #[test]
    fn sequential_backward_and_stride_orders() {
        assert_eq!(Test::Read.order(4, 0), vec![0, 1, 2, 3]);
        assert_eq!(Test::BackwardRead.order(4, 0), vec![3, 2, 1, 0]);
        let s = Test::StrideRead.order(40, 0);
        assert_eq!(&s[..4], &[0, 17, 34, 1]);
        // The last pass starts one record short of the stride.
        assert_eq!(&s[s.len() - 3..], &[32, 16, 33]);
        // Fewer records than the stride: one record per pass.
        assert_eq!(Test::StrideRead.order(3, 0), vec![0, 1, 2]);
    }

    #[test]
    fn random_orders_are_shuffled_and_reproducible() {
        let a = Test::RandomRead.order(1000, 5);
        assert_eq!(a, Test::RandomWrite.order(1000, 5));
        assert_ne!(a, Test::RandomRead.order(1000, 6));
        assert_ne!(a, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn names_round_trip_and_write_tests_store_distinct_data() {
        for t in Test::ALL {
            assert_eq!(Test::from_name(t.name()), Some(t));
            assert_eq!(t.writes(), t.data_seed(1).is_some());
        }
        let seeds: Vec<u64> = Test::ALL.iter().filter_map(|t| t.data_seed(1)).collect();
        assert_eq!(seeds.len(), 3);
        assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2] && seeds[0] != seeds[2]);
    }
}
