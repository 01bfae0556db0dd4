//! A fingerprint of a run's store stream: every crash point's pending
//! lines with the content each store prefix gives them, and each
//! workload's final image. Crash images are a function of the seed alone
//! (ARCHITECTURE.md), so two runs of one seed print the same digest on
//! any machine, in any thread; a different one says the run cannot be
//! replayed from its seed.

use amber_sim::CrashPoint;

/// FNV-1a, 64 bits: stable across builds and platforms, unlike std's
/// hasher, and fast enough for the few lines a fence leaves pending.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn number(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Adds a crash point: its fence and every pending line's prefixes.
    pub fn point(&mut self, p: &CrashPoint) {
        self.number(p.fence());
        for line in p.lines() {
            self.number(line.line());
            self.number(line.stores() as u64);
            line.prefixes().iter().for_each(|c| self.bytes(c));
        }
    }

    /// Adds a durable image (a workload's end).
    pub fn image(&mut self, image: &[u8]) {
        self.number(image.len() as u64);
        self.bytes(image);
    }

    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}
