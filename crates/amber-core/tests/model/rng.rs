//! The project's seeded generator (amber_sim's SplitMix64) with the
//! helpers the model tests draw their operations with: a seed prints as
//! one number and replays bit for bit.

use amber_sim::SplitMix64;

/// SplitMix64 plus range, chance and pick.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `pct`/100.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// One element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The seed to use: `AMBER_MODEL_SEED` from the environment (decimal or
/// 0x-hex) or `default`, so a failure printed by CI replays locally.
pub fn seed_from_env(default: u64) -> u64 {
    match std::env::var("AMBER_MODEL_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("AMBER_MODEL_SEED={s:?} is not a u64"))
        }
        Err(_) => default,
    }
}
