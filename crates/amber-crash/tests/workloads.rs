//! The project's crash test suite: every workload, every crash image the
//! default enumeration picks (nothing, everything, all subsets of up to
//! two pending lines, all subsets when ten or fewer are pending, each line
//! at each store prefix), and zero violations allowed.

use amber_crash::{random, run, run_workloads, CrashConfig, Workload};

fn check(workload: &str, seed: u64) {
    check_under(workload, seed, "direct");
}

fn check_under(workload: &str, seed: u64, policy: &str) {
    check_with(workload, seed, policy, "");
}

fn check_with(workload: &str, seed: u64, policy: &str, mount_options: &str) {
    let mut cfg = CrashConfig::new(workload, seed);
    cfg.policy = policy.to_string();
    cfg.mount_options = mount_options.to_string();
    let rep = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
    println!("{policy} {mount_options}: {rep}");
    assert!(rep.images_checked > 0, "{workload}: no image checked");
    assert!(!rep.capped);
    assert!(
        rep.is_clean(),
        "{workload} (seed {seed}, {policy} {mount_options}) has crash-consistency violations:\n{rep}"
    );
}

#[test]
fn buffered() {
    check("buffered", 1);
}

#[test]
fn writeback() {
    check("writeback", 1);
}

/// Every named workload under hinfs (buffered writes, write-back in
/// fsync, syncfs and WriteBack ops, O_SYNC evictions), judged by what a
/// buffering policy promises; the workloads aimed at atomic policies run
/// under hinfs in tests/atomic.rs.
#[test]
fn hinfs_named_workloads() {
    for w in amber_crash::workload_names() {
        if !["all", "random", "atomic", "atomic-random", "zone-pressure"].contains(&w) {
            check_under(w, 1, "hinfs");
        }
    }
}

#[test]
fn hinfs_random() {
    for seed in [1, 2, 3] {
        check_under("random", seed, "hinfs");
    }
}

/// The ablations write back whole blocks (nclfw) or never go direct
/// (wb): the same promises hold.
#[test]
fn hinfs_ablations_buffered_workloads() {
    for policy in ["hinfs-wb", "hinfs-nclfw"] {
        for w in ["buffered", "writeback", "writes"] {
            check_under(w, 1, policy);
        }
    }
}

/// Every named workload under hunter and hunter-lfs (metadata queued in
/// DRAM and persisted by fsync, syncfs, WriteBack ops, truncate and full
/// queues), judged as buffering policies, and under hunter-sync, judged
/// as durable on return.
#[test]
fn hunter_named_workloads() {
    for policy in ["hunter", "hunter-sync", "hunter-lfs"] {
        for w in amber_crash::workload_names() {
            let skip = ["all", "random", "atomic", "atomic-random", "zone-pressure"];
            if !skip.contains(&w) {
                check_under(w, 1, policy);
            }
        }
    }
}

/// The other named workloads (namespace, links, attributes, orphans)
/// under `amber`; its data workloads run in tests/atomic.rs.
#[test]
fn amber_named_workloads() {
    let data = [
        "all",
        "random",
        "writes",
        "truncate",
        "fallocate",
        "orphan",
        "buffered",
        "writeback",
        "atomic",
        "atomic-random",
        "zone-pressure",
    ];
    for w in amber_crash::workload_names() {
        if !data.contains(&w) {
            check_under(w, 1, "amber");
        }
    }
}

#[test]
fn amber_random() {
    for seed in [1, 2, 3] {
        check_under("random", seed, "amber");
    }
}

/// `amber` holding every lazy write in its DRAM buffer, under the mixed
/// workloads (namespace operations between buffered writes, renames and
/// unlinks of files with buffered data) and the random one.
#[test]
fn amber_buffered_named_and_random() {
    for w in ["files", "rename", "links", "attrs", "durability"] {
        check_with(w, 1, "amber", "amber_buffer=always");
    }
    for seed in [1, 2] {
        check_with("random", seed, "amber", "amber_buffer=always");
    }
}

/// `amber` as it runs on slow PM by default: HiNFS's model decides which
/// blocks the buffer holds, whatever the device measured.
#[test]
fn amber_modelled_named_and_random() {
    for w in ["files", "durability", "buffered"] {
        check_with(w, 1, "amber", "amber_buffer=model");
    }
    check_with("random", 1, "amber", "amber_buffer=model");
}

#[test]
fn hunter_random() {
    for seed in [1, 2, 3] {
        check_under("random", seed, "hunter");
    }
}

/// Queues of two updates: writers persist batches themselves, cut in the
/// middle of a file's updates (where an append that starts inside the
/// last block and runs past it must stay one change: split in two, it
/// gave 2,088 violations here).
#[test]
fn hunter_tiny_queues() {
    for w in ["writes", "buffered", "fallocate", "appends", "random"] {
        let mut cfg = CrashConfig::new(w, 2);
        cfg.policy = "hunter".into();
        cfg.mount_options = "hunter_queue=2,hunter_queues=1".into();
        let rep = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
        assert!(rep.images_checked > 0 && !rep.capped);
        assert!(rep.is_clean(), "{w} with tiny queues:\n{rep}");
    }
}

#[test]
fn files() {
    check("files", 1);
}

#[test]
fn dirs() {
    check("dirs", 1);
}

#[test]
fn rename() {
    check("rename", 1);
}

#[test]
fn links() {
    check("links", 1);
}

#[test]
fn truncate() {
    check("truncate", 1);
}

#[test]
fn writes() {
    check("writes", 1);
}

#[test]
fn attrs() {
    check("attrs", 1);
}

#[test]
fn xattrs() {
    check("xattrs", 1);
}

#[test]
fn acls() {
    check("acls", 1);
}

/// Under `direct` (every write durable on return, so `lazy` changes
/// nothing); hinfs and the hunter policies run it with every named
/// workload.
#[test]
fn durability() {
    check("durability", 1);
}

#[test]
fn fallocate() {
    check("fallocate", 1);
}

#[test]
fn orphan() {
    check("orphan", 1);
}

#[test]
fn random_seed_1() {
    check("random", 1);
}

/// More seeds reach op orders the first one does not (renames over
/// non-empty trees, links to renamed files, exchanges of symlinks).
#[test]
fn random_more_seeds() {
    for seed in [2, 3, 4, 5, 6, 0xDEAD_BEEF] {
        check("random", seed);
    }
}

/// A longer history: later ops run on a tree with many freed and reused
/// inodes, slots and blocks, where stale on-media bytes can mislead
/// recovery.
#[test]
fn random_long() {
    let seed = 11;
    let w = Workload {
        name: "random-long".into(),
        ops: random(seed, 120),
        tolerate_errors: true,
    };
    let rep =
        run_workloads(&CrashConfig::new("random", seed), &[w]).unwrap_or_else(|e| panic!("{e}"));
    println!("{rep}");
    assert!(rep.is_clean(), "random-long (seed {seed}):\n{rep}");
}
