//! Timestamps for inodes, from the clock a mount chose.

use amber_format::Timespec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a mounted core's timestamps come from (`clock=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClockSource {
    /// The coarse wall clock (`clock=wall`, the default).
    #[default]
    Wall,
    /// A clock that starts at [`SIMULATED_EPOCH`] and advances one
    /// microsecond per reading (`clock=simulated`). The wall clock makes a
    /// timestamp store a no-op or not depending on whether two operations
    /// fell in the same jiffy, and so changes which crash images exist;
    /// with this clock a single-threaded run stores the same bytes every
    /// time, and a crash run is a function of its seed alone.
    Simulated,
}

/// 2026-01-01T00:00:00Z, the first reading of a simulated clock.
pub const SIMULATED_EPOCH: i64 = 1_767_225_600;

/// One mount's clock.
#[derive(Debug)]
pub struct Clock {
    source: ClockSource,
    /// Readings taken so far (simulated clock only).
    ticks: AtomicU64,
}

impl Clock {
    pub fn new(source: ClockSource) -> Clock {
        Clock {
            source,
            ticks: AtomicU64::new(0),
        }
    }

    /// The clock the Buffer Benefit Model reads (HiNFS's `lazy_after`),
    /// in nanoseconds: the coarse monotonic clock, or under the simulated
    /// clock the simulated time so far (read without a tick), so whether a
    /// file counts as recently synced depends on the run's operations, not
    /// on how fast the machine ran them.
    pub fn monotonic_ns(&self) -> u64 {
        match self.source {
            ClockSource::Wall => amber_pmem::clock::coarse_monotonic_ns(),
            ClockSource::Simulated => self.ticks.load(Ordering::Relaxed) * 1000,
        }
    }

    /// The current time for file timestamps.
    pub fn now(&self) -> Timespec {
        match self.source {
            ClockSource::Wall => wall(),
            ClockSource::Simulated => {
                let micros = self.ticks.fetch_add(1, Ordering::Relaxed);
                Timespec {
                    secs: SIMULATED_EPOCH + (micros / 1_000_000) as i64,
                    nsecs: (micros % 1_000_000) as u32 * 1000,
                }
            }
        }
    }
}

/// The wall clock for file timestamps: the coarse clock, as Linux stamps
/// files (jiffy resolution, a few ns to read; the precise clock cost ~14%
/// of a small write's CPU time here).
pub fn wall() -> Timespec {
    let (secs, nsecs) = amber_pmem::clock::coarse_realtime();
    Timespec { secs, nsecs }
}

/// Converts a timestamp to a `SystemTime`, including times before 1970.
pub fn to_system(t: Timespec) -> SystemTime {
    let nanos = std::time::Duration::from_nanos(t.nsecs as u64);
    if t.secs >= 0 {
        UNIX_EPOCH + std::time::Duration::from_secs(t.secs as u64) + nanos
    } else {
        UNIX_EPOCH - std::time::Duration::from_secs(t.secs.unsigned_abs()) + nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_clock_replays_and_advances() {
        let (a, b) = (
            Clock::new(ClockSource::Simulated),
            Clock::new(ClockSource::Simulated),
        );
        let first: Vec<Timespec> = (0..3).map(|_| a.now()).collect();
        let again: Vec<Timespec> = (0..3).map(|_| b.now()).collect();
        assert_eq!(first, again);
        assert!(first.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(first[0].secs, SIMULATED_EPOCH);
    }

    #[test]
    fn converts_before_and_after_epoch() {
        let d = std::time::Duration::new(5, 7);
        let after = Timespec { secs: 5, nsecs: 7 };
        let before = Timespec {
            secs: -6,
            nsecs: 999_999_993,
        };
        assert_eq!(to_system(after), UNIX_EPOCH + d);
        assert_eq!(to_system(before), UNIX_EPOCH - d);
    }
}
