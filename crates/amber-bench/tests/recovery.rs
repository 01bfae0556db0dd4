//! `bench recovery` through the entry the CLI uses: what each record
//! says, that every crash mount recovered, and the refusals. Behaviour
//! only; no timing is judged.

use amber_bench::recovery::{self, default_pool_size, Config};

const MIB: u64 = 1 << 20;

fn config(dir: &std::path::Path) -> Config {
    Config {
        data: 8 * MIB,
        file: 2 * MIB,
        io: 64 << 10,
        reps: 1,
        pool_dir: dir.to_path_buf(),
        pool_size: default_pool_size(8 * MIB),
        preset: "dram".into(),
    }
}

fn targets(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| s.to_string()).collect()
}

fn left_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

const METRICS: [(&str, &str); 6] = [
    ("mount_clean_ms", "ms"),
    ("mount_crash_ms", "ms"),
    ("queue_bytes", "B"),
    ("index_bytes", "B"),
    ("queue_bytes_after_sync", "B"),
    ("index_bytes_after_sync", "B"),
];

#[test]
fn hunter_and_direct_mount_clean_and_recover_with_every_field_set() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.reps = 2;
    let rows = recovery::run(&cfg, &targets(&["amberfs:hunter", "amberfs:direct"])).unwrap();
    assert_eq!(rows.len(), 2 * METRICS.len());
    let (hunter, direct) = rows.split_at(METRICS.len());
    for (target, policy, rows) in [
        ("amberfs:hunter", "hunter", hunter),
        ("amberfs:direct", "direct", direct),
    ] {
        for (row, (metric, unit)) in rows.iter().zip(METRICS) {
            let r = &row.record;
            assert_eq!(r.benchmark, recovery::BENCHMARK);
            assert_eq!(r.target, target);
            assert_eq!(r.policy, policy);
            assert_eq!(r.preset, "dram");
            assert_eq!(r.threads, 1);
            assert_eq!(r.metric, metric);
            assert_eq!(r.unit, unit);
            assert_eq!(r.value, r.summary.median);
            assert!(r.summary.min <= r.value && r.value <= r.summary.max);
            assert!(r.summary.rsd_percent >= 0.0);
            let samples = if unit == "ms" { 2 } else { 1 };
            assert_eq!(r.summary.samples, samples, "{metric}");
            if unit == "ms" {
                assert!(r.value > 0.0, "{target} {metric}");
            }
            let notes = r.notes.join("\n");
            assert!(notes.contains("4 file(s) of 2.0 MiB"), "{notes}");
            assert!(notes.contains("2 clean and 2 crash mount(s)"), "{notes}");
            // The crash mount recovered (run fails if it found the pool
            // clean), and every file came back whole in size.
            assert!(notes.contains("last crash mount: recovered after a crash"));
            assert!(notes.contains("verified after the last mount: 4 files, 8388608 bytes"));
            assert!(notes.contains("after sync_all"), "{notes}");
            assert!(
                notes.contains("(0 pending)"),
                "sync_all drains the queues: {notes}"
            );
        }
    }
    // The first target is the reference of every ratio it can be one of.
    for row in hunter {
        assert_eq!(row.ratio_to_first, Some(1.0), "{}", row.record.metric);
    }
    for row in &direct[..2] {
        assert!(row.ratio_to_first.unwrap() > 0.0);
        assert!(row
            .record
            .notes
            .last()
            .unwrap()
            .ends_with("x amberfs:hunter"));
    }
    // Direct keeps no queues and no indexes of its own; hunter keeps an
    // index for each of the files it wrote.
    for row in &direct[2..] {
        assert_eq!(row.record.value, 0.0, "{}", row.record.metric);
    }
    assert!(hunter[3].record.value > 0.0);
    assert_eq!(hunter[3].record.value, hunter[5].record.value);
    assert_eq!(left_in(dir.path()), 0, "every pool removed");
}

#[test]
fn bare_and_directories_are_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let e = recovery::run(&cfg, &targets(&["amberfs:direct", "bare"])).unwrap_err();
    assert!(
        e.contains("\"bare\"") && e.contains("amberfs:POLICY"),
        "{e}"
    );
    let e = recovery::run(&cfg, &targets(&["dir:/tmp"])).unwrap_err();
    assert!(e.contains("amberfs:POLICY"), "{e}");
    let e = recovery::run(&cfg, &targets(&["amberfs:nope"])).unwrap_err();
    assert!(e.contains("unknown policy"), "{e}");
    assert_eq!(left_in(dir.path()), 0);
}

#[test]
fn a_pool_too_small_says_to_raise_pool_size() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        pool_size: 8 * MIB,
        ..config(dir.path())
    };
    for t in ["amberfs:hunter", "amberfs:direct"] {
        let e = recovery::run(&cfg, &targets(&[t])).unwrap_err();
        assert!(e.starts_with(t), "{e}");
        assert!(
            e.contains("ran out of space") && e.contains("raise --pool-size"),
            "{e}"
        );
        assert_eq!(
            left_in(dir.path()),
            0,
            "the pool is removed after a failure"
        );
    }
}
