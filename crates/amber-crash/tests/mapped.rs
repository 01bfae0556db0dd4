//! The `mapped` workload (design.md §16.5) under the policies the named
//! suites do not already run it under (hinfs and the hunter policies run
//! every named workload; amber with its defaults too): stores through a
//! mapping, msync, writes over pinned blocks, growth, shrink and a punch
//! under the mapping, an unlinked mapped file. Judged by the buffering
//! oracle, byte-wise and unordered, under every policy.

use amber_crash::{run, CrashConfig};

fn check(policy: &str, mount_options: &str) {
    let mut cfg = CrashConfig::new("mapped", 1);
    cfg.policy = policy.to_string();
    cfg.mount_options = mount_options.to_string();
    let rep = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
    println!("{policy} {mount_options}: {rep}");
    assert!(rep.images_checked > 0 && !rep.capped);
    assert!(rep.oracle.contains("mapped files"), "{}", rep.oracle);
    assert!(
        !rep.oracle.contains("atomic") && !rep.oracle.contains("ordered"),
        "{}",
        rep.oracle
    );
    assert!(
        rep.is_clean(),
        "mapped under {policy} {mount_options} has crash-consistency violations:\n{rep}"
    );
}

#[test]
fn mapped_under_the_block_map_policies() {
    for policy in ["direct", "cow", "finelog", "lawn"] {
        check(policy, "");
    }
}

#[test]
fn mapped_under_nova() {
    check("nova", "");
}

/// amber holding every lazy write in its DRAM buffer: pinning writes the
/// buffer back first.
#[test]
fn mapped_under_amber_buffering() {
    check("amber", "amber_buffer=always");
}
