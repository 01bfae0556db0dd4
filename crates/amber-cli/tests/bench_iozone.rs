//! `amberfs bench iozone` end to end through the binary: a tiny matrix on a
//! directory and on Amber, with the JSON and CSV files it promises.

use std::process::Command;

#[test]
fn bench_iozone_writes_json_and_csv_for_every_lane() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let json = dir.path().join("out.json");
    let csv = dir.path().join("out.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_amberfs"))
        .args(["bench", "iozone", "--target"])
        .arg(format!("dir:{}", data.display()))
        .args([
            "--target",
            "amberfs:direct",
            "--mode",
            "posix,mmap-flush,nt",
        ])
        .args([
            "--file-sizes",
            "64K",
            "--record-sizes",
            "4K,16K",
            "--trials",
            "1",
        ])
        .args(["--tests", "read,write", "--pool"])
        .arg(dir.path().join("p.pool"))
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(doc["run"]["command"].as_str().unwrap().contains("iozone"));
    let records = doc["records"].as_array().unwrap();
    // (3 modes + Amber) × 2 cells × 2 tests, the tests in IOzone's order.
    assert_eq!(records.len(), 4 * 2 * 2);
    assert_eq!(records[0]["metric"], "write f=64KiB r=4KiB");
    assert_eq!(records[1]["metric"], "read f=64KiB r=4KiB");
    assert!(records.iter().any(|r| r["target"] == "amberfs:direct"));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("iozone,")).count(),
        16
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_amberfs"))
        .args(["bench", "iozone", "--target", "dir:/x", "--mode", "dax"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown mode"));
}
