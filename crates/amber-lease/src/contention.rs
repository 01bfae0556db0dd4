//! The contention rule (design.md §17.3): a file whose leases are
//! recalled again and again — one process reads it while another writes
//! it — is read through the kernel for a while. Each recall there costs
//! the writer a round trip to the reader and the reader a new grant, and
//! a grant asked for during a change is refused (`Busy`) after a round
//! trip of its own; measured, a writer and a preloaded reader of one file
//! both ran slower than with a reader that was not preloaded.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Recalls of one file within `SPAN` after which it is contended.
pub const BOUNCES: u32 = 8;
/// The span those recalls are counted over.
const SPAN: Duration = Duration::from_millis(100);
/// How long a contended file is refused leases.
pub const COOL_DOWN: Duration = Duration::from_secs(1);
/// Most files whose recalls are counted: beyond it, the oldest count is
/// dropped (a file forgotten is only leased sooner).
const MAX_COUNTED: usize = 4096;

struct Count {
    since: Instant,
    recalls: u32,
    refused_until: Option<Instant>,
}

/// Recent recalls per file.
#[derive(Default)]
pub(crate) struct Bounces {
    files: HashMap<u64, Count>,
}

impl Bounces {
    /// Counts a recall of `ino` at `now`.
    pub(crate) fn recalled(&mut self, ino: u64, now: Instant) {
        if self.files.len() >= MAX_COUNTED && !self.files.contains_key(&ino) {
            self.forget_oldest();
        }
        let c = self.files.entry(ino).or_insert(Count {
            since: now,
            recalls: 0,
            refused_until: None,
        });
        if now.duration_since(c.since) > SPAN {
            c.since = now;
            c.recalls = 0;
        }
        c.recalls += 1;
        if c.recalls > BOUNCES {
            c.refused_until = Some(now + COOL_DOWN);
        }
    }

    /// Whether `ino` is refused leases at `now`.
    pub(crate) fn contended(&self, ino: u64, now: Instant) -> bool {
        self.files
            .get(&ino)
            .and_then(|c| c.refused_until)
            .is_some_and(|until| now < until)
    }

    fn forget_oldest(&mut self) {
        let oldest = self
            .files
            .iter()
            .min_by_key(|(_, c)| c.since)
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            self.files.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_recalled_often_is_refused_for_a_while() {
        let mut b = Bounces::default();
        let t = Instant::now();
        for i in 0..BOUNCES {
            b.recalled(7, t + Duration::from_millis(u64::from(i)));
        }
        assert!(!b.contended(7, t + Duration::from_millis(10)));
        b.recalled(7, t + Duration::from_millis(20));
        assert!(b.contended(7, t + Duration::from_millis(21)));
        assert!(!b.contended(8, t + Duration::from_millis(21)));
        assert!(!b.contended(7, t + Duration::from_millis(21) + COOL_DOWN));
    }

    #[test]
    fn recalls_spread_out_never_contend() {
        let mut b = Bounces::default();
        let t = Instant::now();
        for i in 0..100 {
            let now = t + SPAN * i;
            b.recalled(7, now);
            assert!(!b.contended(7, now));
        }
    }

    #[test]
    fn the_count_is_bounded() {
        let mut b = Bounces::default();
        let t = Instant::now();
        for ino in 0..(MAX_COUNTED as u64 * 2) {
            b.recalled(ino, t);
        }
        assert!(b.files.len() <= MAX_COUNTED);
    }
}
