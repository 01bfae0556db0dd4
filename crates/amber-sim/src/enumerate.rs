//! Which crash images to check at one crash point.
//!
//! Policy (Chipmunk's k = 2 subsets with Vinter's per-line prefixes): the
//! nothing-persisted and everything-persisted images always; every subset of
//! pending lines when few lines are pending, else every subset of at most
//! `max_subset` lines; each chosen line at each of its store prefixes. When
//! that exceeds the per-fence cap, the full-prefix image of every subset goes
//! first (most bugs need only "this line persisted, that one did not"), then
//! a seeded random sample of prefix combinations fills the rest.
//!
//! Candidates are deduplicated by content per line: a prefix that leaves the
//! line as it was durably is the same as not choosing the line, and two
//! prefixes with equal content are one candidate. So every image produced is
//! distinct, and recovery is never run twice on the same bytes.

use crate::crash_point::CrashPoint;
use crate::rng::SplitMix64;
use crate::Line;
use std::collections::{BTreeSet, HashSet};

/// Bounds on the images checked per crash point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumConfig {
    /// Up to this many pending lines, every subset is tried (2^n).
    pub max_exhaustive_lines: usize,
    /// Beyond that, subsets of at most this many lines (Chipmunk's k).
    pub max_subset: usize,
    /// Cap on images per crash point, beyond which combinations are sampled.
    pub max_images_per_fence: usize,
    /// Seed of the sample; with the fence number it fixes every image.
    pub seed: u64,
}

impl Default for EnumConfig {
    fn default() -> Self {
        EnumConfig {
            max_exhaustive_lines: 10,
            max_subset: 2,
            max_images_per_fence: 4096,
            seed: 0,
        }
    }
}

/// One pending line persisted up to its first `prefix` stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineChoice {
    /// Index into [`CrashPoint::lines`].
    pub slot: u32,
    /// Number of the line's pending stores that persisted (`1..=stores`).
    pub prefix: u32,
}

/// One crash image: the lines laid over the durable image, by increasing
/// slot. Lines not listed keep their durable content.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CrashImage {
    choices: Vec<LineChoice>,
}

impl CrashImage {
    /// Builds an image from choices (e.g. read back from a failure report).
    ///
    /// # Panics
    /// If the slots are not strictly increasing or a prefix is 0.
    pub fn new(choices: Vec<LineChoice>) -> Self {
        for pair in choices.windows(2) {
            assert!(pair[0].slot < pair[1].slot, "choices out of order");
        }
        assert!(
            choices.iter().all(|c| c.prefix >= 1),
            "prefix 0 is no choice"
        );
        CrashImage { choices }
    }

    /// The chosen lines and prefixes.
    pub fn choices(&self) -> &[LineChoice] {
        &self.choices
    }

    /// Whether this is the image with no pending store persisted.
    pub fn is_nothing_persisted(&self) -> bool {
        self.choices.is_empty()
    }

    /// `(line index, content)` of every line this image changes.
    pub fn lines<'a>(&'a self, point: &'a CrashPoint) -> impl Iterator<Item = (u64, &'a Line)> {
        self.choices.iter().map(move |c| {
            let pending = &point.lines()[c.slot as usize];
            (pending.line(), pending.prefix(c.prefix as usize))
        })
    }
}

/// The images chosen at one crash point.
#[derive(Debug, Clone)]
pub struct Enumeration {
    /// Distinct images, nothing-persisted first, then everything-persisted
    /// (when it differs).
    pub images: Vec<CrashImage>,
    /// How many distinct images the policy allows before the cap
    /// (saturating).
    pub candidates: u128,
    /// Whether the cap forced a sample.
    pub sampled: bool,
}

/// A line's distinct contents other than its durable one, as prefix lengths.
struct Candidates {
    slot: u32,
    /// Increasing; for equal contents the longest prefix is kept, so the
    /// line's final content (if it differs from durable) is the last entry.
    prefixes: Vec<u32>,
}

impl Candidates {
    fn choice(&self, i: usize) -> LineChoice {
        LineChoice {
            slot: self.slot,
            prefix: self.prefixes[i],
        }
    }

    fn last(&self) -> LineChoice {
        self.choice(self.prefixes.len() - 1)
    }
}

fn candidates(point: &CrashPoint) -> Vec<Candidates> {
    let mut out = Vec::with_capacity(point.lines().len());
    for (slot, pending) in point.lines().iter().enumerate() {
        let durable = point.durable_line(pending.line());
        let mut seen: HashSet<&Line> = HashSet::new();
        let mut prefixes = Vec::new();
        for k in (1..=pending.stores()).rev() {
            let content = pending.prefix(k);
            if content.as_slice() != durable && seen.insert(content) {
                prefixes.push(u32::try_from(k).expect("stores per line fit u32"));
            }
        }
        if !prefixes.is_empty() {
            prefixes.reverse();
            out.push(Candidates {
                slot: u32::try_from(slot).expect("pending lines fit u32"),
                prefixes,
            });
        }
    }
    out
}

/// Collects distinct images up to the cap.
struct Emitter {
    images: Vec<CrashImage>,
    seen: HashSet<CrashImage>,
    cap: usize,
}

impl Emitter {
    fn full(&self) -> bool {
        self.images.len() >= self.cap
    }

    fn emit(&mut self, mut choices: Vec<LineChoice>) {
        if self.full() {
            return;
        }
        choices.sort_unstable();
        let image = CrashImage::new(choices);
        if self.seen.insert(image.clone()) {
            self.images.push(image);
        }
    }
}

/// Advances `idx` (strictly increasing indices below `m`) to the next
/// combination in lexicographic order; false after the last.
fn next_combination(idx: &mut [usize], m: usize) -> bool {
    let s = idx.len();
    for i in (0..s).rev() {
        if idx[i] < m - s + i {
            idx[i] += 1;
            for j in i + 1..s {
                idx[j] = idx[j - 1] + 1;
            }
            return true;
        }
    }
    false
}

/// Advances a mixed-radix counter (`digits[i] < radix(i)`); false on wrap.
fn next_digits(digits: &mut [usize], radix: impl Fn(usize) -> usize) -> bool {
    for (i, d) in digits.iter_mut().enumerate() {
        *d += 1;
        if *d < radix(i) {
            return true;
        }
        *d = 0;
    }
    false
}

/// `C(n, k)`, saturating.
fn binomial(n: usize, k: usize) -> u128 {
    if k > n {
        return 0;
    }
    let mut r: u128 = 1;
    for i in 0..k.min(n - k) {
        r = r.saturating_mul((n - i) as u128) / (i as u128 + 1);
    }
    r
}

/// Elementary symmetric sums `e_1..=e_k` of the candidate counts: `e_s` is
/// the number of images choosing exactly `s` lines.
fn images_by_size(cands: &[Candidates], k: usize) -> Vec<u128> {
    let mut e = vec![0u128; k + 1];
    e[0] = 1;
    for c in cands {
        let n = c.prefixes.len() as u128;
        for s in (1..=k).rev() {
            e[s] = e[s].saturating_add(e[s - 1].saturating_mul(n));
        }
    }
    e
}

/// Draws subsets of the policy's sizes, uniformly over all of them.
struct SubsetSampler {
    m: usize,
    /// Number of subsets of each size `1..=k`, saturated to u64.
    weights: Vec<u64>,
    total: u64,
}

impl SubsetSampler {
    fn new(m: usize, k: usize) -> Self {
        let weights: Vec<u64> = (1..=k)
            .map(|s| u64::try_from(binomial(m, s)).unwrap_or(u64::MAX))
            .collect();
        let total = weights.iter().fold(0u64, |a, w| a.saturating_add(*w));
        assert!(total > 0, "no subsets to sample");
        SubsetSampler { m, weights, total }
    }

    fn draw(&self, rng: &mut SplitMix64) -> Vec<usize> {
        let mut r = rng.below(self.total);
        let mut size = self.weights.len();
        for (i, w) in self.weights.iter().enumerate() {
            if r < *w {
                size = i + 1;
                break;
            }
            r -= w;
        }
        // Floyd's algorithm: `size` distinct indices in exactly `size` draws.
        let mut set = BTreeSet::new();
        for j in self.m - size..self.m {
            let t = rng.below(j as u64 + 1) as usize;
            if !set.insert(t) {
                set.insert(j);
            }
        }
        set.into_iter().collect()
    }
}

/// Chooses the crash images to check at `point`; deterministic in
/// `(point, cfg)`.
pub fn enumerate(point: &CrashPoint, cfg: &EnumConfig) -> Enumeration {
    assert!(
        cfg.max_images_per_fence >= 2,
        "the cap must admit none and all"
    );
    assert!(cfg.max_subset >= 1, "subsets of at least one line");
    let cap = cfg.max_images_per_fence;
    let cands = candidates(point);
    let m = cands.len();
    let k = if m <= cfg.max_exhaustive_lines {
        m
    } else {
        cfg.max_subset.min(m)
    };

    let everything: Vec<LineChoice> = cands
        .iter()
        .filter(|c| {
            *c.prefixes.last().expect("nonempty") as usize
                == point.lines()[c.slot as usize].stores()
        })
        .map(Candidates::last)
        .collect();
    let by_size = images_by_size(&cands, k);
    let everything_extra = u128::from(everything.len() > k);
    let candidates = by_size
        .iter()
        .fold(everything_extra, |a, e| a.saturating_add(*e));

    let mut out = Emitter {
        images: Vec::new(),
        seen: HashSet::new(),
        cap,
    };
    out.emit(Vec::new());
    out.emit(everything);

    let sampled = candidates > cap as u128;
    if sampled {
        let seed = cfg.seed ^ point.fence().wrapping_mul(0xD134_2543_DE82_EF95);
        emit_sampled(&mut out, &cands, k, seed);
    } else {
        emit_every(&mut out, &cands, k);
        assert_eq!(
            out.images.len() as u128,
            candidates,
            "count matches the policy"
        );
    }
    Enumeration {
        images: out.images,
        candidates,
        sampled,
    }
}

/// Every image the policy admits: each subset of up to `k` candidate
/// lines, with every combination of their contents.
fn emit_every(out: &mut Emitter, cands: &[Candidates], k: usize) {
    let m = cands.len();
    for s in 1..=k {
        for_each_subset_of_size(m, s, |subset| {
            let mut digits = vec![0usize; s];
            loop {
                out.emit(
                    subset
                        .iter()
                        .zip(&digits)
                        .map(|(&i, &d)| cands[i].choice(d))
                        .collect(),
                );
                if !next_digits(&mut digits, |j| cands[subset[j]].prefixes.len()) {
                    break;
                }
            }
        });
    }
}

/// Samples up to the cap: first each line's newest content over every
/// subset of up to `k` lines (or a uniform sample of the subsets when
/// they do not fit), then random subsets with random contents. `seed`
/// makes the draws deterministic per fence.
fn emit_sampled(out: &mut Emitter, cands: &[Candidates], k: usize, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let m = cands.len();
    let sampler = SubsetSampler::new(m, k);
    let attempts = 4 * out.cap + 64;
    let subsets: u128 = (1..=k)
        .map(|s| binomial(m, s))
        .fold(0, u128::saturating_add);
    if subsets <= (out.cap - out.images.len()) as u128 {
        for s in 1..=k {
            for_each_subset_of_size(m, s, |subset| {
                out.emit(subset.iter().map(|&i| cands[i].last()).collect());
            });
        }
    } else {
        for _ in 0..attempts {
            if out.full() {
                break;
            }
            let subset = sampler.draw(&mut rng);
            out.emit(subset.iter().map(|&i| cands[i].last()).collect());
        }
    }
    for _ in 0..attempts {
        if out.full() {
            break;
        }
        let subset = sampler.draw(&mut rng);
        out.emit(
            subset
                .iter()
                .map(|&i| {
                    let n = cands[i].prefixes.len() as u64;
                    cands[i].choice(rng.below(n) as usize)
                })
                .collect(),
        );
    }
}

/// Calls `f` on every `s`-subset of `0..m` in lexicographic order.
fn for_each_subset_of_size(m: usize, s: usize, mut f: impl FnMut(&[usize])) {
    assert!(s >= 1 && s <= m);
    let mut idx: Vec<usize> = (0..s).collect();
    loop {
        f(&idx);
        if !next_combination(&mut idx, m) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{binomial, next_combination};

    #[test]
    fn combinations_in_order() {
        let mut idx = vec![0, 1];
        let mut all = vec![idx.clone()];
        while next_combination(&mut idx, 4) {
            all.push(idx.clone());
        }
        assert_eq!(all.len() as u128, binomial(4, 2));
        assert_eq!(all[1], vec![0, 2]);
        assert_eq!(all.last().unwrap(), &vec![2, 3]);
    }

    #[test]
    fn binomials() {
        assert_eq!(binomial(12, 2), 66);
        assert_eq!(binomial(10, 0), 1);
        assert_eq!(binomial(3, 4), 0);
    }
}
