//! The coarse wall clock, as the kernel uses for file timestamps
//! (`ktime_get_coarse_real_ts64`): a few nanoseconds to read instead of
//! ~20-80 ns for the precise clock, with jiffy resolution (1-4 ms). A file
//! system that stamps every write can tell the difference.

/// Seconds and nanoseconds since the Unix epoch, from CLOCK_REALTIME_COARSE.
pub fn coarse_realtime() -> (i64, u32) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration,
    // and CLOCK_REALTIME_COARSE is a clock id every Linux since 2.6.32 has.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if rc != 0 {
        // Cannot happen for a valid clock id; fall back to the precise clock.
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        return (d.as_secs() as i64, d.subsec_nanos());
    }
    (ts.tv_sec, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// Nanoseconds on CLOCK_MONOTONIC_COARSE: never going back, jiffy
/// resolution, a few nanoseconds to read. For deadlines of seconds read
/// on every write (the Buffer Benefit Model's `lazy_after`), where the
/// precise clock's ~22 ns here was a fifth of the model's cost.
pub fn coarse_monotonic_ns() -> u64 {
    // The precise clock if the coarse one were refused (neither can be,
    // for these ids): the same origin, so readings stay comparable.
    monotonic_ns(libc::CLOCK_MONOTONIC_COARSE)
        .or_else(|| monotonic_ns(libc::CLOCK_MONOTONIC))
        .unwrap_or(0)
}

fn monotonic_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration;
    // an unknown clock id makes the call fail, not misbehave.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| {
        (ts.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec.clamp(0, 999_999_999) as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_clock_is_near_the_precise_one() {
        let (s, ns) = coarse_realtime();
        assert!(ns < 1_000_000_000);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        assert!((now.as_secs() as i64 - s).abs() <= 1);
    }

    #[test]
    fn coarse_monotonic_clock_moves_forward_with_the_precise_one() {
        let a = coarse_monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = coarse_monotonic_ns();
        assert!(b >= a + 20_000_000, "{a} then {b}");
    }
}
