//! `amberfs bench plot` end to end: a suite's --json in, SVG, PNG and CSV
//! out, through the same binary a user runs.

use std::process::Command;

#[test]
fn foundation_json_plots_as_bars_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("f.json");
    let bin = env!("CARGO_BIN_EXE_amberfs");
    let pool = dir.path().join("p.pool");
    let out = Command::new(bin)
        .args(["bench", "foundation", "--quick", "--pool"])
        .arg(&pool)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (kind, extra) in [("bars", vec![]), ("lines", vec!["--x", "threads"])] {
        let prefix = dir.path().join(kind);
        let out = Command::new(bin)
            .args(["bench", "plot", "--kind", kind, "--input"])
            .arg(&json)
            .args(&extra)
            .arg("--out")
            .arg(&prefix)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for ext in ["svg", "png", "csv"] {
            let p = prefix.with_extension(ext);
            assert!(
                std::fs::metadata(&p).unwrap().len() > 100,
                "{}",
                p.display()
            );
        }
        let png = std::fs::read(prefix.with_extension("png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let csv = std::fs::read_to_string(prefix.with_extension("csv")).unwrap();
        assert!(csv.starts_with("# command: "));
        assert!(csv.contains("\nbenchmark,target,policy,preset,threads,metric,value,unit,"));
    }
    let out = Command::new(bin)
        .args(["bench", "plot", "--baseline", "no-such-target", "--input"])
        .arg(&json)
        .arg("--out")
        .arg(dir.path().join("x"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-target"));
}

#[test]
fn a_sweep_run_point_by_point_plots_as_one_figure_per_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_amberfs");
    let d = dir.path().to_str().unwrap();
    let mut inputs = Vec::new();
    for size in ["128", "256"] {
        let json = format!("{d}/rw-{size}.json");
        let out = Command::new(bin)
            .args(["bench", "--quiet", "compare", "--workload", "randwrite"])
            .args(["--target", "amberfs:direct", "--target", "amberfs:hinfs"])
            .args(["--io-size", size, "--file-size", "256K", "--ops", "100"])
            .args(["--threads", "1,2", "--reps", "1", "--warmup", "0"])
            .args(["--pool-dir", d, "--pool-size", "64M", "--json", &json])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        inputs.push(json);
    }
    let plot = |threads: &str| {
        let mut c = Command::new(bin);
        c.args(["bench", "plot", "--kind", "lines", "--x", "io_size"])
            .args(["--metric", "bandwidth", "--threads", threads]);
        for i in &inputs {
            c.args(["--input", i]);
        }
        c.args(["--out", &format!("{d}/fig-{threads}")])
            .output()
            .unwrap()
    };
    let out = plot("2");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(format!("{d}/fig-2.csv")).unwrap();
    // Both runs' commands, then 2 sizes x 2 targets at 2 threads.
    assert_eq!(csv.lines().next().unwrap().matches("--io-size").count(), 2);
    let rows: Vec<&str> = csv
        .lines()
        .filter(|l| l.starts_with("randwrite,"))
        .collect();
    assert_eq!(rows.len(), 4, "{csv}");
    assert!(rows.iter().all(|r| r.contains(",2,bandwidth,")), "{csv}");
    assert!(rows.iter().any(|r| r.contains("io_size=128 ")));
    assert!(rows.iter().any(|r| r.contains("io_size=256 ")));
    let svg = std::fs::read_to_string(format!("{d}/fig-2.svg")).unwrap();
    assert!(svg.contains("amberfs:hinfs"));

    let out = plot("3");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads"));
}
