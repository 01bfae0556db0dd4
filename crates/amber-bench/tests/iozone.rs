//! Every iozone data path runs a tiny matrix end to end, verifying what it
//! read back, and its records carry the fields the output needs.

use amber_bench::iozone::{self, Config, Matrix, Mode, Test};
use amber_bench::spec::TargetSpec;
use amber_bench::target::DropCaches;

fn tiny(dir: &std::path::Path, targets: Vec<TargetSpec>) -> Config {
    Config {
        targets,
        modes: Mode::ALL.to_vec(),
        matrix: Matrix::new(vec![64 << 10], vec![4 << 10]).unwrap(),
        trials: 2,
        cleanup: DropCaches::None,
        pool: dir.join("iozone.pool"),
        ..Config::default()
    }
}

#[test]
fn every_mode_amber_and_bare_run_all_tests_on_a_tiny_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let cfg = tiny(
        dir.path(),
        vec![
            TargetSpec::Dir { path: data.clone() },
            TargetSpec::Amber {
                policy: "direct".into(),
            },
            TargetSpec::Bare,
        ],
    );
    let mut calls = Vec::new();
    let records = iozone::run(&cfg, &mut |done, total| calls.push((done, total))).unwrap();
    assert_eq!(calls, vec![(1, 1)]);
    // Five modes on the directory, the Amber library and bare, eight tests
    // each.
    assert_eq!(records.len(), 7 * 8);
    for mode in Mode::ALL {
        let label = format!("{}:{}", mode.name(), data.display());
        assert_eq!(records.iter().filter(|r| r.target == label).count(), 8);
    }
    for r in &records {
        assert!(r.value.is_finite() && r.value > 0.0, "{r:?}");
        assert_eq!(r.summary.samples, 2);
        assert!(r.notes[0].contains("mean="), "{r:?}");
    }
    let amber: Vec<_> = records
        .iter()
        .filter(|r| r.target == "amberfs:direct")
        .collect();
    assert_eq!(amber.len(), 8);
    for r in amber {
        assert_eq!(r.preset, "dram");
        let writes = Test::ALL
            .iter()
            .any(|t| t.writes() && r.metric.starts_with(&format!("{} ", t.name())));
        assert_eq!(r.notes[0].contains("write_amplification="), writes, "{r:?}");
    }
    let bare: Vec<_> = records.iter().filter(|r| r.target == "bare").collect();
    assert_eq!(bare.len(), 8);
    for r in bare {
        assert_eq!((r.policy.as_str(), r.preset.as_str()), ("-", "dram"));
        // Every write test stores the data and nothing else.
        let writes = Test::ALL
            .iter()
            .any(|t| t.writes() && r.metric.starts_with(&format!("{} ", t.name())));
        assert_eq!(
            r.notes[0].contains("write_amplification=1.000"),
            writes,
            "{r:?}"
        );
    }
    // Nothing left behind.
    assert!(!data.join(iozone::FILE_NAME).exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("data")],
        "pools removed"
    );
}

#[test]
fn a_selection_without_write_writes_the_file_first_and_records_carry_the_fields() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = tiny(
        dir.path(),
        vec![TargetSpec::Dir {
            path: dir.path().to_path_buf(),
        }],
    );
    cfg.modes = vec![Mode::Posix, Mode::LoadStore];
    cfg.tests = vec![Test::BackwardRead, Test::RandomWrite, Test::StrideRead];
    cfg.trials = 1;
    let records = iozone::run(&cfg, &mut |_, _| {}).unwrap();
    assert_eq!(records.len(), 2 * 3);
    let json = serde_json::to_value(&records).unwrap();
    for r in json.as_array().unwrap() {
        for field in &amber_bench::csv::HEADER[..8] {
            assert!(r.get(field).is_some(), "{field} missing from {r}");
        }
        assert_eq!(r["benchmark"], "iozone");
        assert_eq!(r["unit"], "MiB/s");
        assert_eq!(r["threads"], 1);
    }
    assert_eq!(json[0]["metric"], "backward-read f=64KiB r=4KiB");
}

#[test]
fn bad_targets_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = tiny(
        dir.path(),
        vec![TargetSpec::Dir {
            path: dir.path().join("nope"),
        }],
    );
    assert!(iozone::run(&missing, &mut |_, _| {}).is_err());
    let policy = tiny(
        dir.path(),
        vec![TargetSpec::Amber {
            policy: "no-such-policy".into(),
        }],
    );
    assert!(iozone::run(&policy, &mut |_, _| {}).is_err());
}
