//! Crash tests of the workloads aimed at data-atomic policies (`atomic`,
//! `atomic-random`, `zone-pressure`) under every policy this build has,
//! and the proof that the atomic-write oracle can fail.

use amber_crash::{run, run_workloads, CrashConfig, CrashReport, Op, Workload, WriteAt};
use amber_sim::EnumConfig;

/// What a policy that promises atomic, durable writes must be judged by.
const ATOMIC_ORACLE: &str = "durable on return, atomic writes";

/// Options that shrink LAWN's zone so `zone-pressure` overflows it: the
/// smallest zone (1% of the pool, one sub-zone of one eight-block chunk)
/// with the largest slots (512 bytes), so 64 slots; `zone-pressure`'s 66
/// slices of one file make it grow, and its write-back folds slices back.
const LAWN_SMALL_ZONE: &str = "lawn_zone=1,lawn_slot=512,lawn_subzones=1";

fn config(workload: &str, seed: u64, policy: &str, mount_options: &str) -> CrashConfig {
    let mut cfg = CrashConfig::new(workload, seed);
    cfg.policy = policy.to_string();
    cfg.mount_options = mount_options.to_string();
    cfg
}

/// Runs `cfg` and requires every image it checked to pass; the message
/// carries the command line that replays the run from its seed.
fn check(cfg: &CrashConfig) -> CrashReport {
    let rep = run(cfg).unwrap_or_else(|e| panic!("{e}"));
    let (w, seed, policy, opts) = (&cfg.workload, cfg.seed, &cfg.policy, &cfg.mount_options);
    println!("{policy} {opts}: {rep}");
    assert!(rep.images_checked > 0, "{w}: no image checked");
    assert!(!rep.capped);
    assert!(
        rep.is_clean(),
        "{w} under {policy} has crash-consistency violations; replay with \
         `amberfs crashtest --workload {w} --seed {seed} --policy {policy}{}`:\n{rep}",
        if opts.is_empty() {
            String::new()
        } else {
            format!(" --mount-options {opts}")
        }
    );
    rep
}

fn check_under(workload: &str, seed: u64, policy: &str) -> CrashReport {
    check(&config(workload, seed, policy, ""))
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

/// Overwrites of two lines and of two partial blocks on a fsync'd file:
/// `direct` tears them byte-wise, which it is allowed to do.
fn torn_overwrites() -> Workload {
    let write = |off, len, seed| Op::Write {
        path: "f".into(),
        at: WriteAt::Offset(off),
        len,
        seed,
    };
    Workload {
        name: "torn-overwrites".into(),
        ops: vec![
            Op::Create { path: "f".into() },
            write(0, 8192, 1),
            Op::Fsync { path: "f".into() },
            write(256, 128, 2),
            write(1024, 6144, 3),
        ],
        tolerate_errors: false,
    }
}

/// The atomic-write oracle is not vacuous: forced on under `direct`,
/// whose overwrites tear, it reports torn writes; without forcing, the
/// same run passes, so the violations come from the oracle alone.
#[test]
fn atomic_oracle_catches_torn_writes_under_direct() {
    let mut cfg = CrashConfig::new("torn-overwrites", 1);
    let honest = run_workloads(&cfg, &[torn_overwrites()]).unwrap_or_else(|e| panic!("{e}"));
    println!("{honest}");
    assert_eq!(honest.oracle, "durable on return");
    assert!(honest.is_clean(), "direct as it is judged:\n{honest}");
    cfg.force_atomic_oracle = true;
    let forced = run_workloads(&cfg, &[torn_overwrites()]).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "forced: {} violation(s), the first: {:?}",
        forced.violation_count,
        forced.violations.first().map(ToString::to_string)
    );
    assert_eq!(forced.oracle, ATOMIC_ORACLE);
    assert!(
        forced.violation_count > 0,
        "no torn write caught:\n{forced}"
    );
    for v in &forced.violations {
        assert!(
            v.op.starts_with("write f @"),
            "only the overwrites tear: {v}"
        );
        assert!(v.what.contains("torn atomic write"), "{v}");
    }
    for (op, off) in [(3, 256), (4, 1024)] {
        assert!(
            forced.violations.iter().any(|v| v.op_index == op),
            "the overwrite at {off} is never caught torn:\n{forced}"
        );
    }
}

/// A policy name the build does not have fails the run with a message
/// naming it, rather than being judged by some default.
#[test]
fn unknown_policy_fails_cleanly() {
    let mut cfg = CrashConfig::new("files", 1);
    cfg.policy = "no-such-policy".into();
    let e = run(&cfg).unwrap_err();
    assert!(e.contains("no-such-policy"), "{e}");
}

/// The workloads whose ops reach a data policy's write, truncate,
/// fallocate, fsync and write-back paths; the namespace workloads (dirs,
/// rename, links, attrs, xattrs) go through the journal alike under every
/// policy and run under `direct` and `hinfs` already.
const DATA_WORKLOADS: [&str; 9] = [
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

/// Images per crash point under the data-atomic policies, beyond which
/// the enumerator samples (the default is 4096). Copy-on-write leaves a
/// whole new block in flight (64 lines, 2,000 pairs) for every small
/// write; a torn write shows in most pairs that split its range, so a
/// sample finds it, and the suites stay within CI's budget.
const IMAGES_PER_FENCE: usize = 512;

/// `workload` under `policy` with its own options and sampled fences.
fn atomic_config(workload: &str, policy: &str, mount_options: &str) -> CrashConfig {
    let mut cfg = config(workload, 1, policy, mount_options);
    cfg.enum_config = EnumConfig {
        max_images_per_fence: IMAGES_PER_FENCE,
        ..EnumConfig::default()
    };
    cfg
}

/// The data workloads under a policy that promises atomic, durable
/// writes, which it must be judged by.
fn atomic_policy_suite(policy: &str) {
    for w in DATA_WORKLOADS {
        let rep = check(&atomic_config(w, policy, ""));
        assert_eq!(rep.oracle, ATOMIC_ORACLE, "{policy} must declare it");
    }
}

#[test]
fn cow_data_workloads() {
    atomic_policy_suite("cow");
}

#[test]
fn finelog_data_workloads() {
    atomic_policy_suite("finelog");
}

/// NOVA's data path: copy-on-write pages committed by the log tail, and
/// its garbage collection interrupted at every fence (`log-gc`); `attrs`
/// too, since utimens appends an entry committed by a transaction.
#[test]
fn nova_data_workloads() {
    atomic_policy_suite("nova");
    for w in ["log-gc", "attrs", "files"] {
        let rep = check(&atomic_config(w, "nova", ""));
        assert_eq!(rep.oracle, ATOMIC_ORACLE);
    }
    for seed in RANDOM_SEEDS {
        let mut cfg = atomic_config("random", "nova", "");
        cfg.seed = seed;
        check(&cfg);
    }
}

#[test]
fn lawn_data_workloads() {
    atomic_policy_suite("lawn");
}

/// LAWN's images recovered by `direct`: every recovery judges the zone's
/// descriptors, writes each valid slice into its file and removes the
/// zone, and must still find the state before or after each write.
#[test]
fn lawn_images_folded_back_by_direct() {
    for w in DATA_WORKLOADS {
        let mut cfg = atomic_config(w, "lawn", "");
        cfg.recover_policy = Some("direct".into());
        let rep = check(&cfg);
        assert_eq!(rep.oracle, ATOMIC_ORACLE);
    }
}

/// LAWN with a zone too small for `zone-pressure`'s slices: crashes in
/// the middle of growth, and (growth off) of the write-back a full zone
/// forces inside a write.
#[test]
fn lawn_small_zone() {
    let no_growth = format!("{LAWN_SMALL_ZONE},lawn_grow=0");
    for opts in [LAWN_SMALL_ZONE, no_growth.as_str()] {
        for w in ["zone-pressure", "atomic"] {
            let rep = check(&atomic_config(w, "lawn", opts));
            assert_eq!(rep.oracle, ATOMIC_ORACLE);
        }
    }
}

/// What `amber` is judged by: its metadata is persisted later (HUNTER),
/// and every write() is atomic (the zone's commit, the data log's seqs).
const AMBER_ORACLE: &str = "buffering, ordered files, atomic writes";

/// The data workloads under `amber`, small zones included, so crashes
/// fall inside zone writes, the settling of queued metadata before them,
/// write-backs of slices before out-of-place writes, and growth; with
/// the one-fence zone (the default), with LAWN's commit, and with no
/// zone writes at all (small overwrites commit with their own records).
#[test]
fn amber_data_workloads() {
    let no_growth = format!("{LAWN_SMALL_ZONE},lawn_grow=0");
    let lawn_commit = format!("{LAWN_SMALL_ZONE},amber_zone=lawn");
    // No zone writes: small overwrites inside a block commit themselves.
    let no_zone = "amber_zone_max=0";
    for opts in ["", LAWN_SMALL_ZONE, &no_growth, &lawn_commit, no_zone] {
        for w in DATA_WORKLOADS {
            if !opts.is_empty() && !["zone-pressure", "atomic", "writes"].contains(&w) {
                continue;
            }
            let rep = check(&atomic_config(w, "amber", opts));
            assert_eq!(rep.oracle, AMBER_ORACLE);
        }
    }
}

/// `amber` with every lazy write held in its DRAM buffer: crashes fall
/// inside whole-file write-backs (fsync, truncate, syncfs, the write-back
/// step, a zone or log write after buffered data), and the oracle must
/// still find every write() whole or absent, no zeros inside a size, and
/// everything synced intact.
#[test]
fn amber_buffered_data_workloads() {
    for w in DATA_WORKLOADS {
        let rep = check(&atomic_config(w, "amber", "amber_buffer=always"));
        assert_eq!(rep.oracle, AMBER_ORACLE);
    }
}

/// `amber`'s images recovered by `hunter`, which keeps no zone: recovery
/// settles the split layout, then writes every valid slice into the block
/// its file's records name and removes the zone.
#[test]
fn amber_images_folded_back_by_hunter() {
    for w in ["atomic", "zone-pressure", "writes"] {
        let mut cfg = atomic_config(w, "amber", "");
        cfg.recover_policy = Some("hunter".into());
        let rep = check(&cfg);
        assert_eq!(rep.oracle, AMBER_ORACLE);
    }
}

/// A write of `len` seeded bytes at `off`.
fn write(path: &str, off: u64, len: u64, seed: u64) -> Op {
    Op::Write {
        path: path.into(),
        at: WriteAt::Offset(off),
        len,
        seed,
    }
}

fn fsync(path: &str) -> Op {
    Op::Fsync { path: path.into() }
}

/// Whole-block overwrites of a fsync'd file under `amber`, which commit
/// themselves (design.md §13.6): the block and its checksummed record
/// under one fence. Crashes fall inside each, tearing the data lines and
/// the record; inside fsyncs; over the file's head block; over one block
/// twice; while an append is queued (the next whole block takes the
/// queue's path); beside zone writes; and, with a zone too small for a
/// second file's slices, inside the eviction that writes a slice back
/// into an own commit's block. The harness mounts `noatime`, so an fsync
/// of a settled file here persists nothing, as a user's does; the
/// ordered-files oracle rejects an own commit kept without an earlier
/// queued write. The settling before a zone write is pinned by
/// amber-core's tests/hunter.rs too.
fn own_commits() -> Workload {
    let mut ops = vec![
        Op::Create { path: "f".into() },
        write("f", 0, 16384, 1),
        fsync("f"),
        // g's blocks first: taking blocks may persist every queue.
        Op::Create { path: "g".into() },
        write("g", 0, 40960, 12),
        fsync("g"),
        write("f", 4096, 4096, 2),
        write("f", 4096, 4096, 3),
        write("f", 12288, 4096, 4),
        fsync("f"),
        write("f", 0, 4096, 5),
        write("f", 16384, 4096, 6),
        write("f", 8192, 4096, 7),
        fsync("f"),
        write("f", 8192, 4096, 8),
        write("f", 100, 300, 9),
        write("f", 8192, 4096, 10),
        fsync("f"),
        write("f", 8292, 200, 11),
    ];
    ops.extend((0..20).map(|i| write("g", i % 10 * 4096 + 100, 3000, 13 + i)));
    Workload {
        name: "own-commits".into(),
        ops,
        tolerate_errors: false,
    }
}

/// SQLite's WAL frames (a 24-byte header, then a 4 KiB page just past it,
/// straddling a block boundary) over a fsync'd file, one or two frames
/// per fsync, wrapping round to overwrite the first frames, then a small
/// write elsewhere. With the zone capped below a page's slices the buffer
/// coalesces them on the default (`auto`) path (design.md §13.4
/// "Coalescing"): crashes fall inside the write-backs of the frames'
/// blocks, after which the tail block stays buffered, clean, and takes
/// the next header.
fn wal_frames() -> Workload {
    let write = |off, len, seed| Op::Write {
        path: "wal".into(),
        at: WriteAt::Offset(off),
        len,
        seed,
    };
    let fsync = || Op::Fsync { path: "wal".into() };
    let mut ops = vec![
        Op::Create { path: "wal".into() },
        write(0, 8 * 4096, 1),
        fsync(),
    ];
    for (i, k) in [0, 1, 2, 3, 4, 5, 0, 1, 2].into_iter().enumerate() {
        let at = 32 + k * 4120;
        ops.push(write(at, 24, 10 + 2 * i as u64));
        ops.push(write(at + 24, 4096, 11 + 2 * i as u64));
        if i % 3 != 1 {
            ops.push(fsync());
        }
    }
    ops.push(write(7 * 4096 + 5, 9, 40));
    ops.push(fsync());
    Workload {
        name: "wal-frames".into(),
        ops,
        tolerate_errors: false,
    }
}

#[test]
fn amber_wal_frames() {
    for opts in ["amber_zone_max=8", "", "amber_buffer=always"] {
        let cfg = atomic_config("wal-frames", "amber", opts);
        let rep = run_workloads(&cfg, &[wal_frames()]).unwrap_or_else(|e| panic!("{e}"));
        println!("amber {opts}: {rep}");
        assert_eq!(rep.oracle, AMBER_ORACLE);
        assert!(rep.images_checked > 0 && !rep.capped);
        assert!(rep.is_clean(), "WAL frames under amber {opts}:\n{rep}");
    }
}

/// Small overwrites that amber writes back in place under one journal
/// transaction (design.md §18: WAL frames, a lone header, a background
/// write-back), between changes that move or free the very blocks such a
/// transaction names: whole blocks committed by their own records, a
/// larger overwrite and an append out of place (the
/// frame after each finds its blocks freshly relinked, the queue not yet
/// persisted), a shrink, a punched block written again, the freed blocks
/// taken by another file, and the file unlinked. Crashes fall inside
/// every commit, apply and retire, and inside the moves after them.
fn wal_moves() -> Workload {
    let frame = |at, seed| {
        vec![
            write("w", at, 24, seed),
            write("w", at + 24, 4096, seed + 1),
            fsync("w"),
        ]
    };
    let mut ops = vec![
        Op::Create { path: "w".into() },
        write("w", 0, 6 * 4096, 1),
        fsync("w"),
    ];
    // A whole block that commits itself with its own record (one
    // fence, its queue not persisted), then a frame over it in place.
    ops.extend([write("w", 0, 4096, 40)]);
    ops.extend(frame(32, 2));
    ops.extend([write("w", 0, 32, 4), fsync("w")]);
    ops.extend([
        write("w", 4096, 4096, 41),
        write("w", 4196, 4096, 42),
        fsync("w"),
    ]);
    ops.extend([write("w", 2048, 10_000, 5)]);
    ops.extend(frame(4152, 6));
    ops.extend([
        Op::Write {
            path: "w".into(),
            at: WriteAt::Append,
            len: 100,
            seed: 8,
        },
        fsync("w"),
    ]);
    ops.extend(frame(5 * 4096 + 40, 9));
    ops.extend([
        Op::Truncate {
            path: "w".into(),
            size: 3 * 4096 + 10,
        },
        Op::Punch {
            path: "w".into(),
            off: 4096,
            len: 4096,
        },
        Op::Create { path: "x".into() },
        write("x", 0, 3 * 4096, 11),
        fsync("x"),
    ]);
    ops.extend(frame(4000, 12));
    ops.extend(frame(8192 + 100, 14));
    ops.extend([
        write("w", 300, 500, 16),
        Op::WriteBack { blocks: 4 },
        Op::Unlink { path: "w".into() },
        write("x", 4096 + 8, 4000, 17),
        fsync("x"),
        Op::SyncAll,
    ]);
    Workload {
        name: "wal-moves".into(),
        ops,
        tolerate_errors: false,
    }
}

#[test]
fn amber_in_place_write_backs() {
    for opts in ["amber_buffer=always", "amber_zone_max=8"] {
        let cfg = atomic_config("wal-moves", "amber", opts);
        let rep = run_workloads(&cfg, &[wal_moves()]).unwrap_or_else(|e| panic!("{e}"));
        println!("amber {opts}: {rep}");
        assert_eq!(rep.oracle, AMBER_ORACLE);
        assert!(rep.images_checked > 0 && !rep.capped);
        assert!(
            rep.is_clean(),
            "in-place write-backs under amber {opts}:\n{rep}"
        );
    }
}

/// Writes another process makes under a write lease (design.md §17.4).
/// A grant pins and settles the file — a daemon write of it still queued
/// (an append), or a slice in the zone, goes to PM first — and the
/// lessee's own commits go into granted blocks: whole blocks, partial
/// ones merged with the old bytes, one block twice, blocks inside the
/// append; small overwrites and a block's worth across blocks holding
/// them as zone extents (§17.13); then covered writes (§17.11) with
/// entries of their own:
/// appends inside a partial last block (in place), past it and from past
/// it, a write across
/// blocks, one into a hole past the end, one after a truncate left old
/// bytes past the size; leased truncates that grow the file (its tail
/// zeroed) and shrink it (ending the lease), the file grown again after;
/// meanwhile the daemon writes and fsyncs another file and syncs
/// everything. The return adopts them (clearing and freeing the unused
/// grant, persisting the file's queue). Crashes fall inside all of it: a
/// leased write that returned must survive every later crash.
/// A leased write of `len` bytes of seed `seed` at `off` of "f".
fn leased(off: u64, len: u64, seed: u64) -> Op {
    Op::LeaseWrite {
        path: "f".into(),
        off,
        len,
        seed,
    }
}

/// A leased truncate of "f" to `size`.
fn leased_truncate(size: u64) -> Op {
    Op::LeaseTruncate {
        path: "f".into(),
        size,
    }
}

fn leased_writes() -> Workload {
    let f = || "f".to_string();
    let mut ops = vec![
        Op::Create { path: f() },
        write("f", 0, 32768, 1),
        fsync("f"),
        Op::Create { path: "g".into() },
        write("g", 0, 16384, 2),
        fsync("g"),
        write("f", 1000, 200, 3),
        write("f", 32768, 14000, 4),
        Op::LeaseGrant { path: f() },
        leased(1100, 2000, 5),
        leased(36864, 4096, 6),
        leased(4096, 4096, 7),
        write("g", 100, 200, 8),
        leased(4096, 4096, 9),
        leased(8242, 128, 10),
        // SQLite's WAL frames over old ones: a 24-byte header in one
        // block (a zone slice), then a block's worth across it and the
        // next (one extent, §17.13), twice.
        leased(12296, 24, 25),
        leased(12320, 4096, 26),
        leased(16416, 24, 27),
        leased(16440, 4096, 28),
        fsync("g"),
        leased(20580, 2000, 11),
        Op::SyncAll,
        leased(0, 4096, 12),
        // Growing: inside the partial last block (in place, the second
        // over a gap), past it, from past it (its tail zeroed in place),
        // across blocks below the size, into a hole.
        leased(46768, 1000, 23),
        leased(47900, 200, 24),
        leased(48100, 3000, 17),
        leased(53248, 9000, 18),
        write("g", 0, 100, 19),
        leased(8000, 5000, 20),
        leased(70000, 100, 21),
        // Grown by a leased truncate: the partial tail zeroed first.
        leased_truncate(90000),
        Op::LeaseReturn { path: f() },
    ];
    ops.extend(leased_allocations());
    ops.extend(leased_shrinks());
    Workload {
        name: "leased-writes".into(),
        ops,
        tolerate_errors: false,
    }
}

/// Allocations of "f" (90,000 bytes, holes from block 18 on) under a
/// lease: holes below the size (the first block of the range has data),
/// KEEP_SIZE inside the size, and a range past the size, which grows the
/// file.
fn leased_allocations() -> Vec<Op> {
    let allocate = |off, len, keep_size| Op::LeaseAllocate {
        path: "f".into(),
        off,
        len,
        keep_size,
    };
    vec![
        Op::LeaseGrant { path: "f".into() },
        allocate(72000, 12000, false),
        allocate(86000, 2000, true),
        allocate(88000, 6000, false),
        Op::LeaseReturn { path: "f".into() },
    ]
}

/// Leased writes after the daemon shrank "f", and leased shrinks.
fn leased_shrinks() -> Vec<Op> {
    let f = || "f".to_string();
    vec![
        write("f", 8192, 4096, 13),
        Op::Truncate {
            path: f(),
            size: 30000,
        },
        Op::LeaseGrant { path: f() },
        leased(24576, 100, 14),
        leased(8192, 4096, 15),
        // In place over a gap the truncate left old bytes in.
        leased(30100, 50, 25),
        Op::LeaseReturn { path: f() },
        fsync("f"),
        Op::LeaseGrant { path: f() },
        leased(12288, 4096, 16),
        leased(33000, 500, 22),
        // A leased shrink ends the lease; the file then grows again, by
        // the daemon and under a new lease, over the dropped blocks.
        leased_truncate(10000),
        // Up over the old bytes the shrink left past the size: zeros.
        Op::LeaseGrant { path: f() },
        leased_truncate(11000),
        Op::LeaseReturn { path: f() },
        write("f", 20000, 100, 26),
        Op::LeaseGrant { path: f() },
        leased(24000, 3000, 27),
        leased_truncate(5000),
    ]
}

#[test]
fn amber_leased_writes() {
    for opts in ["", "amber_zone_max=0"] {
        let cfg = atomic_config("leased-writes", "amber", opts);
        let rep = run_workloads(&cfg, &[leased_writes()]).unwrap_or_else(|e| panic!("{e}"));
        println!("amber {opts}: {rep}");
        assert_eq!(rep.oracle, AMBER_ORACLE);
        assert!(rep.images_checked > 0 && !rep.capped);
        assert!(
            rep.is_clean(),
            "leased writes under amber {opts}:
{rep}"
        );
    }
}

#[test]
fn amber_own_commits() {
    let small = format!("{LAWN_SMALL_ZONE},lawn_grow=0");
    let configs = [
        ("", None),
        ("", Some("hunter")),
        (small.as_str(), None),
        ("amber_zone_max=0", None),
    ];
    for (opts, recover) in configs {
        let mut cfg = atomic_config("own-commits", "amber", opts);
        cfg.recover_policy = recover.map(Into::into);
        let rep = run_workloads(&cfg, &[own_commits()]).unwrap_or_else(|e| panic!("{e}"));
        println!("amber {opts}, recovered by {recover:?}: {rep}");
        assert_eq!(rep.oracle, AMBER_ORACLE);
        assert!(rep.images_checked > 0 && !rep.capped);
        assert!(rep.is_clean(), "own commits under amber {opts}:\n{rep}");
    }
}
