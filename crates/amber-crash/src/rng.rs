//! The harness's own seeded generator, so a `random` workload and every
//! written byte can be rebuilt from the seed printed in a failure report,
//! whatever version of any outside crate is in use.

/// SplitMix64 (Steele, Lea, Flood 2014): every seed, including 0, gives a
/// full-period stream.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n`, in one step (Lemire's multiply-shift; the bias
    /// is negligible for the small ranges the generator uses).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "empty range");
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// `len` bytes determined by `seed`, so a write's contents need not be
/// stored in the workload.
pub(crate) fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut r = SplitMix64::new(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}
