//! `amberfs bench workload` and `bench compare` as a user runs them: real
//! processes, pools in a tempdir, JSON results read back.

use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

fn amberfs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_amberfs"))
        .args(args)
        .output()
        .expect("run amberfs")
}

/// The flags that keep a run tiny and inside `dir`.
fn tiny<'a>(dir: &'a str, json: &'a str) -> Vec<&'a str> {
    vec![
        "--files",
        "8",
        "--file-size",
        "8K",
        "--append-size",
        "2K",
        "--ops",
        "200",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--pool-dir",
        dir,
        "--pool-size",
        "64M",
        "--drop-caches",
        "none",
        "--json",
        json,
    ]
}

fn run_json(args: &[&str], json: &str) -> Value {
    let out = amberfs(args);
    assert!(
        out.status.success(),
        "amberfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).expect("JSON parses")
}

#[test]
fn compare_gives_each_target_its_ratio_to_the_first() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let json = format!("{dir}/out.json");
    let posix = format!("dir:{dir}");
    let mut args = vec![
        "--emulate",
        "pcm",
        "bench",
        "compare",
        "--workload",
        "webproxy",
        "--target",
        "amberfs:direct",
        "--target",
        &posix,
    ];
    args.extend(tiny(dir, &json));
    let doc = run_json(&args, &json);
    assert!(doc["run"]["command"].as_str().unwrap().contains("compare"));
    assert!(doc["run"]["cores"].as_u64().unwrap() >= 1);
    let recs = doc["records"].as_array().unwrap();
    assert!(
        recs.len() >= 5,
        "two metrics per target plus write amplification"
    );
    for r in recs {
        for f in &amber_bench::csv::HEADER[..8] {
            assert!(r.get(f).is_some(), "missing {f}: {r}");
        }
        if r["target"] == "amberfs:direct" {
            assert_eq!(r["ratio_to_first"].as_f64(), Some(1.0));
            assert_eq!(r["preset"], "pcm");
            assert_eq!(r["policy"], "direct");
        } else {
            assert!(r["ratio_to_first"].as_f64().unwrap() > 0.0);
        }
    }
    // Pools and workload files are gone afterwards.
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out.json")]);
}

#[test]
fn workload_sweeps_threads() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let json = format!("{dir}/out.json");
    let mut args = vec![
        "bench",
        "workload",
        "varmail",
        "--target",
        "amberfs:direct",
        "--threads",
        "1,2",
    ];
    args.extend(tiny(dir, &json));
    let doc = run_json(&args, &json);
    let threads: Vec<u64> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metric"] == "throughput")
        .map(|r| r["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, vec![1, 2]);
}

#[test]
fn bad_targets_and_parameters_say_why() {
    let err = |args: &[&str]| {
        let out = amberfs(args);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&[
        "bench",
        "workload",
        "fileserver",
        "--target",
        "amberfs:nope",
    ]);
    assert!(e.contains("unknown policy"), "{e}");
    let e = err(&["bench", "workload", "fileserver", "--target", "ext4"]);
    assert!(e.contains("dir:/path"), "{e}");
    let e = err(&[
        "bench",
        "workload",
        "randwrite",
        "--target",
        "amberfs:direct",
        "--io-size",
        "8K",
    ]);
    assert!(e.contains("128..=4096"), "{e}");
    let e = err(&[
        "bench",
        "compare",
        "--workload",
        "varmail",
        "--target",
        "amberfs:direct",
    ]);
    assert!(e.contains("at least two"), "{e}");
    let e = err(&[
        "bench",
        "workload",
        "fileserver",
        "--target",
        "dir:/nonexistent-w1",
    ]);
    assert!(e.contains("not a directory"), "{e}");
}

#[test]
fn randwrite_reads_after_prewrite_with_mount_options_in_the_target() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let json = format!("{dir}/out.json");
    let common = [
        "bench",
        "compare",
        "--workload",
        "randwrite",
        "--target",
        "amberfs:direct",
        "--target",
        "amberfs:hinfs,buffer=16M",
        "--file-size",
        "1M",
        "--io-size",
        "1K",
        "--ops",
        "300",
        "--threads",
        "1,2",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--pool-dir",
        dir,
        "--pool-size",
        "64M",
        "--json",
        &json,
    ];
    let mut args = common.to_vec();
    args.extend(["--read-ratio", "10", "--prewrite", "500"]);
    let doc = run_json(&args, &json);
    let recs = doc["records"].as_array().unwrap();
    let metrics: Vec<&str> = recs.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(
        metrics,
        ["throughput", "bandwidth"].repeat(4),
        "reads only: no PM bytes per write"
    );
    assert!(recs
        .iter()
        .any(|r| r["target"] == "amberfs:hinfs,buffer=16M"
            && r["policy"] == "hinfs"
            && r["threads"] == 2));
    for r in recs {
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("prewrite=500") && notes.contains("seed="),
            "{notes}"
        );
    }

    // Writes only: bytes per write from the device, per target.
    let doc = run_json(&common, &json);
    let per_write: Vec<f64> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metric"] == "pm_bytes_per_write")
        .map(|r| r["value"].as_f64().unwrap())
        .collect();
    assert_eq!(per_write.len(), 4);
    assert!(per_write.iter().all(|b| *b >= 1024.0), "{per_write:?}");

    // A mount option the core does not know stops the run before it starts.
    let mut args = common.to_vec();
    args[7] = "amberfs:direct,no_such_option=1";
    let out = amberfs(&args);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("amberfs:direct,no_such_option=1") && e.contains("unknown mount option"),
        "{e}"
    );
}

/// `bare` beside `amberfs:direct` on populate, as issue 7's comparison
/// runs it; a pool too small for the files stops the run with the reason.
#[test]
fn bare_target_runs_populate_beside_amber() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let json = format!("{dir}/out.json");
    let small_files = ["--files", "2", "--file-size", "1M", "--pool-dir", dir];
    let mut args = vec![
        "bench",
        "compare",
        "--workload",
        "populate",
        "--target",
        "bare",
        "--target",
        "amberfs:direct",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--pool-size",
        "64M",
        "--json",
        &json,
    ];
    args.extend(small_files);
    let doc = run_json(&args, &json);
    let recs = doc["records"].as_array().unwrap();
    let bare: Vec<&Value> = recs.iter().filter(|r| r["target"] == "bare").collect();
    assert_eq!(bare.len(), 7, "seven metrics: {bare:?}");
    for r in &bare {
        for f in &amber_bench::csv::HEADER[..8] {
            assert!(r.get(f).is_some(), "missing {f}: {r}");
        }
        assert_eq!(r["policy"], "-");
        assert_eq!(r["preset"], "dram");
        // No ratio to a reference of zero (no line is flushed).
        let ratio = (r["metric"] != "flushed_lines_per_write").then_some(1.0);
        assert_eq!(r["ratio_to_first"].as_f64(), ratio, "{r}");
        if r["metric"] == "write_amplification" {
            assert_eq!(r["value"].as_f64(), Some(1.0), "data only: {r}");
        }
    }
    assert!(recs
        .iter()
        .any(|r| r["target"] == "amberfs:direct" && r["ratio_to_first"].as_f64().unwrap() > 0.0));
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out.json")]);

    // 2 MiB of files in a 1 MiB pool: ENOSPC from bare, not a panic.
    let mut args = vec![
        "bench",
        "workload",
        "populate",
        "--target",
        "bare",
        "--reps",
        "1",
        "--pool-size",
        "1M",
    ];
    args.extend(small_files);
    let out = amberfs(&args);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("on bare") && e.contains("no space left"), "{e}");

    let out = amberfs(&["bench", "workload", "populate", "--target", "bare:x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no options"));
    let help = amberfs(&["bench", "compare", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("bare"));
}

#[test]
fn recovery_times_clean_and_crash_mounts_of_each_target() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let json = format!("{dir}/out.json");
    let csv = format!("{dir}/out.csv");
    let args = [
        "bench",
        "recovery",
        "--target",
        "amberfs:hunter",
        "--target",
        "amberfs:direct",
        "--data",
        "8M",
        "--file-size",
        "2M",
        "--io-size",
        "64K",
        "--reps",
        "1",
        "--pool-dir",
        dir,
        "--json",
        &json,
        "--csv",
        &csv,
    ];
    let doc = run_json(&args, &json);
    assert!(doc["run"]["command"].as_str().unwrap().contains("recovery"));
    let recs = doc["records"].as_array().unwrap();
    let metrics = [
        "mount_clean_ms",
        "mount_crash_ms",
        "queue_bytes",
        "index_bytes",
        "queue_bytes_after_sync",
        "index_bytes_after_sync",
    ];
    assert_eq!(recs.len(), 2 * metrics.len());
    for (r, metric) in recs.iter().zip(metrics.iter().cycle()) {
        for f in &amber_bench::csv::HEADER[..8] {
            assert!(r.get(f).is_some(), "missing {f}: {r}");
        }
        assert_eq!(r["benchmark"], "recovery");
        assert_eq!(r["metric"], *metric);
        assert_eq!(r["preset"], "dram");
        let notes = r["notes"].to_string();
        assert!(notes.contains("recovered after a crash"), "{notes}");
        assert!(notes.contains("4 files, 8388608 bytes"), "{notes}");
    }
    assert_eq!(recs[0]["target"], "amberfs:hunter");
    assert_eq!(recs[0]["ratio_to_first"].as_f64(), Some(1.0));
    assert_eq!(recs[6]["target"], "amberfs:direct");
    assert!(recs[7]["ratio_to_first"].as_f64().unwrap() > 0.0);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("recovery,")).count(),
        12
    );
    // Only the results are left: each pool was removed.
    let mut left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["out.csv", "out.json"]);
}

#[test]
fn recovery_refuses_bare_and_small_pools_with_the_flag_to_change() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let err = |extra: &[&str]| {
        let mut args = vec!["bench", "recovery", "--data", "8M", "--pool-dir", dir];
        args.extend(extra);
        let out = amberfs(&args);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["--target", "amberfs:direct", "--target", "bare"]);
    assert!(e.contains("bare has no file system"), "{e}");
    let e = err(&["--target", "amberfs:direct", "--pool-size", "4M"]);
    assert!(e.contains("raise --pool-size"), "{e}");
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
}

/// `bench seeds` refuses what it cannot honour before it makes anything:
/// an unknown experiment, and a global --emulate (each experiment runs
/// under its paper's emulation).
#[test]
fn seeds_refuses_unknown_experiments_and_a_global_emulator() {
    let tmp = TempDir::new().unwrap();
    let out = format!("{}/results.md", tmp.path().display());
    let o = amberfs(&["bench", "seeds", "--only", "lawn,zfs", "--out", &out]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown experiment \"zfs\""));
    let o = amberfs(&[
        "--emulate",
        "pcm",
        "bench",
        "seeds",
        "--only",
        "lawn",
        "--out",
        &out,
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("without --emulate"));
    assert!(!std::path::Path::new(&out).exists(), "nothing written");
}
