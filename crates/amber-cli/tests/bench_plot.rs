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
