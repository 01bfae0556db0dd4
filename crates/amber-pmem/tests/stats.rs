//! The write counters stay exact when threads come and go: a thread
//! counts in a shard it owns with plain stores, gives it back at exit, and
//! threads past the owned shards share one with locked adds.

use amber_pmem::StatsCounter;
use std::sync::{Arc, Barrier};

/// Rounds of threads, each round more than there are shards and all
/// holding one at once (most share the last), then threads one at a time
/// (each reuses a shard the one before gave back): every count arrives.
#[test]
fn counts_are_exact_across_many_threads() {
    let stats = Arc::new(StatsCounter::default());
    let per_thread = 200_000u64;
    let mut threads = 0u64;
    for _ in 0..3 {
        let n = 40;
        let leased = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (stats, leased) = (stats.clone(), leased.clone());
                std::thread::spawn(move || {
                    // Every thread holds its shard (or the shared one)
                    // before any counts in bulk.
                    count(&stats, 1);
                    leased.wait();
                    count(&stats, per_thread - 1);
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        threads += n as u64;
    }
    for _ in 0..20 {
        let s = stats.clone();
        std::thread::spawn(move || count(&s, per_thread))
            .join()
            .unwrap();
        threads += 1;
    }
    let got = stats.snapshot();
    assert_eq!(got.bytes_stored, threads * per_thread * 8);
    assert_eq!(got.bytes_nt, threads * per_thread * 64);
    assert_eq!(got.lines_flushed, threads * per_thread);
    assert_eq!(got.fences, threads * per_thread);
}

fn count(stats: &StatsCounter, n: u64) {
    for _ in 0..n {
        let stats = std::hint::black_box(stats);
        stats.stored(8);
        stats.stored_nt(64);
        stats.flushed(1);
        stats.fenced();
    }
}
