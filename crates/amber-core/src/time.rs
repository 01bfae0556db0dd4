//! Wall-clock timestamps for inodes.

use amber_format::Timespec;
use std::time::{SystemTime, UNIX_EPOCH};

/// The current time for file timestamps: the coarse clock, as Linux
/// stamps files (jiffy resolution, a few ns to read; the precise clock cost
/// ~14% of a small write's CPU time here).
pub fn now() -> Timespec {
    let (secs, nsecs) = amber_pmem::clock::coarse_realtime();
    Timespec { secs, nsecs }
}

/// Converts a `SystemTime`, including times before 1970.
pub fn from_system(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            secs: d.as_secs() as i64,
            nsecs: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            let mut secs = -(d.as_secs() as i64);
            let mut nsecs = d.subsec_nanos();
            if nsecs > 0 {
                secs -= 1;
                nsecs = 1_000_000_000 - nsecs;
            }
            Timespec { secs, nsecs }
        }
    }
}

/// Converts back to a `SystemTime`.
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
    fn round_trips_before_and_after_epoch() {
        for t in [
            UNIX_EPOCH + std::time::Duration::new(5, 7),
            UNIX_EPOCH - std::time::Duration::new(5, 7),
        ] {
            assert_eq!(to_system(from_system(t)), t);
        }
    }
}
