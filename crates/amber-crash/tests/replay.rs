//! Crash runs replay from their seed: the store stream a run leaves —
//! every crash point's pending stores and each workload's final image,
//! fingerprinted in `CrashReport::digest` — is the same on every run of
//! one seed: again in the same thread, and in fresh threads running side
//! by side. (Before, a thread's block group, journal and data log came
//! from a process-wide thread counter, so a fresh thread laid out other
//! images; `amberfs crashtest` under fewer CPUs is tested in the CLI's
//! tests.)

use amber_crash::{run, CrashConfig};

/// The digest of `workload` under `policy` for `seed`; no image is
/// checked (the stream is fingerprinted either way).
fn digest(policy: &str, workload: &str, seed: u64) -> String {
    let mut cfg = CrashConfig::new(workload, seed);
    cfg.policy = policy.into();
    cfg.max_images = Some(0);
    run(&cfg).unwrap_or_else(|e| panic!("{e}")).digest
}

#[test]
fn one_seed_one_store_stream_in_any_thread() {
    let seed = 7;
    println!("seed {seed}");
    let runs = [
        ("amber", "all"),
        ("hunter", "random"),
        ("hinfs", "random"),
        ("lawn", "random"),
        ("direct", "random"),
    ];
    for (policy, workload) in runs {
        let first = digest(policy, workload, seed);
        assert_eq!(digest(policy, workload, seed), first, "{policy}: again");
        let fresh: Vec<String> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..2)
                .map(|_| s.spawn(|| digest(policy, workload, seed)))
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        for d in fresh {
            assert_eq!(d, first, "{policy}: in a fresh thread");
        }
        let other = digest(policy, workload, seed + 1);
        assert_ne!(other, first, "{policy}: another seed");
    }
}
