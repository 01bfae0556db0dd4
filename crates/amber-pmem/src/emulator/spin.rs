//! Busy-waits with nanosecond resolution.
//!
//! PM's extra costs are tens to hundreds of nanoseconds, far below what a
//! sleep can express, and a sleeping thread would let others run in time
//! the real device would have kept the core busy. So the emulator spins.

use std::time::{Duration, Instant};

/// Spins until `deadline`.
pub(crate) fn until(deadline: Instant) {
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Spins for `ns` nanoseconds from now.
pub(crate) fn for_ns(ns: u64) {
    if ns > 0 {
        until(Instant::now() + Duration::from_nanos(ns));
    }
}
