//! One write-bandwidth limit shared by every thread.
//!
//! PM bandwidth is a property of the DIMMs, not of a thread, so all writers
//! draw from a single bucket. It is kept as a "theoretical arrival time"
//! (the GCRA form of a token bucket): the instant at which everything
//! reserved so far has been transferred. A writer reserves its bytes by
//! pushing that instant forward with one compare-and-swap, then waits
//! (at its next fence) until its own transfer would have finished. No
//! burst credit is granted, so an idle period does not let a later write
//! exceed the rate.

use std::sync::atomic::{AtomicU64, Ordering};

const PS_PER_SEC: u128 = 1_000_000_000_000;

pub(crate) struct TokenBucket {
    bytes_per_sec: u64,
    /// When the last reserved byte finishes, in picoseconds of
    /// `spin::now_ns` time
    /// (picoseconds so that an 8-byte store at tens of GB/s still costs
    /// something instead of rounding to zero).
    busy_until_ps: AtomicU64,
}

impl TokenBucket {
    pub(crate) fn new(bytes_per_sec: u64) -> TokenBucket {
        assert!(bytes_per_sec > 0, "bandwidth must be positive");
        TokenBucket {
            bytes_per_sec,
            busy_until_ps: AtomicU64::new(0),
        }
    }

    /// Reserves `bytes` of the shared bandwidth at `now_ns`; returns when
    /// (in nanoseconds) they would have been written: the caller waits.
    pub(crate) fn reserve(&self, bytes: u64, now_ns: u64) -> u64 {
        let cost = u128::from(bytes) * PS_PER_SEC / u128::from(self.bytes_per_sec);
        let cost = u64::try_from(cost).unwrap_or(u64::MAX);
        let now = now_ns.saturating_mul(1000);
        let mut current = self.busy_until_ps.load(Ordering::Relaxed);
        let done = loop {
            let done = current.max(now).saturating_add(cost);
            match self.busy_until_ps.compare_exchange_weak(
                current,
                done,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break done,
                Err(seen) => current = seen,
            }
        };
        done / 1000
    }
}
