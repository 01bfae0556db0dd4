//! `bench seeds` end to end at a tiny scale: LAWN's experiment runs on real
//! pools, and the report, records and plots land where the command puts
//! them.

use amber_bench::record::{Results, RunInfo};
use amber_bench::seeds::{self, report, Experiment, Scale, Status};
use std::time::Duration;

// Tests are exempt from the 80-line limit: a scenario reads top to bottom.
#[allow(clippy::too_many_lines)]
#[test]
fn lawn_seed_writes_its_rows_records_and_plots() {
    let shm = std::path::Path::new("/dev/shm");
    let pools = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let out = tempfile::tempdir().unwrap();
    let scale = Scale {
        reps: 1,
        warmup: 0,
        lawn_sizes: vec![128, 1024],
        lawn_duration: Duration::from_millis(30),
        lawn_file: 4 << 20,
        lawn_pool: 64 << 20,
        ..Scale::quick()
    };
    let cfg = seeds::Config {
        experiments: vec![Experiment::Lawn],
        scale,
        mode: "quick".into(),
        pool_dir: pools.path().to_path_buf(),
        out: out.path().join("results.md"),
        plots_dir: out.path().join("plots"),
        records_dir: out.path().join("results/seeds"),
        info: RunInfo::collect("amberfs bench seeds --only lawn".into(), "clwb".into()),
        estimate: Duration::ZERO,
    };
    let outcome = seeds::run(&cfg, &mut |_| {}).unwrap();
    assert!(matches!(outcome.status(Experiment::Lawn), Status::Done));
    assert!(matches!(
        outcome.status(Experiment::Hinfs),
        Status::NotSelected
    ));
    let md = report::render(&cfg, &outcome, None);

    // Every LAWN claim is measured; the others say they were not run.
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| LAWN")).collect();
    assert_eq!(rows.len(), 8, "{md}");
    for r in &rows {
        assert!(r.contains("x** (amberfs:lawn "), "{r}");
        let judged = ["| yes (", "| **no** (", "| within 10% of the bound ("];
        assert!(judged.iter().any(|j| r.contains(j)), "{r}");
    }
    assert!(md
        .lines()
        .filter(|l| l.starts_with("| HUNTER"))
        .all(|l| l.contains("not run (not in `--only`)")));
    // One goal row per size, with amber measured or said missing.
    for size in ["128B", "1KiB"] {
        let goal = md
            .lines()
            .find(|l| l.starts_with(&format!("| lawn-randwrite-{size} | throughput |")))
            .unwrap_or_else(|| panic!("no goal row for {size}:\n{md}"));
        if seeds::amber_in_build() {
            assert!(
                goal.contains("(met)") || goal.contains("(**not met**)"),
                "{goal}"
            );
        } else {
            assert!(goal.contains("not in this build"), "{goal}");
        }
    }

    // Records read back with every target, plots as SVG and PNG.
    let records = Results::read(&cfg.records_dir.join("lawn-randwrite-128B.json")).unwrap();
    let targets: Vec<&str> = records
        .records
        .iter()
        .filter(|r| r.metric == "throughput")
        .map(|r| r.target.as_str())
        .collect();
    assert_eq!(
        &targets[..5],
        [
            "amberfs:nova",
            "amberfs:cow",
            "amberfs:finelog",
            "amberfs:direct",
            "amberfs:lawn"
        ]
    );
    for stem in ["seeds-lawn-throughput", "seeds-lawn-bytes"] {
        for ext in ["svg", "png"] {
            let p = cfg.plots_dir.join(format!("{stem}.{ext}"));
            assert!(p.is_file(), "{} missing", p.display());
        }
        assert!(md.contains(&format!("(plots/{stem}.png)")), "{md}");
    }
    let left: Vec<_> = std::fs::read_dir(pools.path()).unwrap().collect();
    assert!(left.is_empty(), "pools removed: {left:?}");
}
