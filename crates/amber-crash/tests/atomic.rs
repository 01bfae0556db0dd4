//! Crash tests of the workloads aimed at data-atomic policies (`atomic`,
//! `atomic-random`, `zone-pressure`) under every policy this build has.

use amber_crash::{run, CrashConfig};

/// Runs `workload` and requires every image it checked to pass; the
/// message carries the command line that replays the run from its seed.
fn check_under(workload: &str, seed: u64, policy: &str) {
    let mut cfg = CrashConfig::new(workload, seed);
    cfg.policy = policy.to_string();
    let rep = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
    println!("{policy}: {rep}");
    assert!(rep.images_checked > 0, "{workload}: no image checked");
    assert!(!rep.capped);
    assert!(
        rep.is_clean(),
        "{workload} under {policy} has crash-consistency violations; replay with \
         `amberfs crashtest --workload {workload} --seed {seed} --policy {policy}`:\n{rep}"
    );
}

/// Seeds every `atomic-random` test runs; each is printed by the report
/// and named in a failure's replay line.
const RANDOM_SEEDS: [u64; 2] = [1, 2];

#[test]
fn atomic_direct() {
    check_under("atomic", 1, "direct");
}

#[test]
fn atomic_hinfs() {
    check_under("atomic", 1, "hinfs");
}

#[test]
fn atomic_random_direct() {
    for seed in RANDOM_SEEDS {
        check_under("atomic-random", seed, "direct");
    }
}

#[test]
fn atomic_random_hinfs() {
    for seed in RANDOM_SEEDS {
        check_under("atomic-random", seed, "hinfs");
    }
}

#[test]
fn zone_pressure_direct() {
    check_under("zone-pressure", 1, "direct");
}

#[test]
fn zone_pressure_hinfs() {
    check_under("zone-pressure", 1, "hinfs");
}
