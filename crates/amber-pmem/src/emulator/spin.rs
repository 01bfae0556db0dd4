//! Busy-waits with nanosecond resolution.
//!
//! PM's extra costs are tens to hundreds of nanoseconds, far below what a
//! sleep can express, and a sleeping thread would let others run in time
//! the real device would have kept the core busy. So the emulator spins.

use std::sync::OnceLock;
use std::time::Instant;

static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the emulator first read the time in this process.
pub(crate) fn now_ns() -> u64 {
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Spins until `deadline` (in `now_ns` time); returns the time it saw
/// past it (a read of the clock costs tens of nanoseconds, so the wait
/// ends up to that much late).
pub(crate) fn until(deadline: u64) -> u64 {
    loop {
        let now = now_ns();
        if now >= deadline {
            return now;
        }
        std::hint::spin_loop();
    }
}
