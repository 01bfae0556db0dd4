//! Every workload in a tiny configuration on an Amber pool and on a
//! directory: it runs, its files hold what the workload wrote, the
//! verification pass catches a corrupted file, and its records carry the
//! fields results files need.

use amber_bench::compare::{self, Plan};
use amber_bench::target::{AmberTarget, DropCaches, PosixTarget, Target};
use amber_bench::workload::{self, Fsync, Limit, Params, NAMES};
use tempfile::TempDir;

/// A few files of a few KiB: well under a second per workload.
fn tiny(name: &str) -> Params {
    let mut p = workload::defaults(name).expect("known workload");
    p.files = 8;
    p.file_size = 8 << 10;
    p.io_size = 4 << 10;
    p.append_size = 2 << 10;
    p.limit = Limit::Ops(300);
    p.threads = 2;
    match name {
        "randwrite" => {
            p.files = 1;
            p.file_size = 256 << 10;
            p.io_size = 512;
            p.read_ratio = 3;
            p.fsync = Fsync::EveryN(4);
        }
        "populate" => {
            p.files = 3;
            p.file_size = 64 << 10;
            p.limit = Limit::Complete;
        }
        _ => {}
    }
    p
}

fn targets(dir: &TempDir) -> (AmberTarget, PosixTarget) {
    let amber = AmberTarget::create(&dir.path().join("pool"), 64 << 20, "direct", "dram")
        .expect("amber target");
    let posix = PosixTarget::new(dir.path().join("posix"), DropCaches::None).with_root_created();
    (amber, posix)
}

/// Every regular file under `dir` on the target (lists fail on files).
fn files(t: &dyn Target, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_string()];
    while let Some(d) = stack.pop() {
        for name in t.list(&d).expect("list") {
            let p = format!("{d}/{name}");
            if t.list(&p).is_ok() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_workload_runs_verifies_and_catches_corruption() {
    let dir = TempDir::new().unwrap();
    let (amber, posix) = targets(&dir);
    for name in NAMES {
        let p = tiny(name);
        for t in [&amber as &dyn Target, &posix] {
            let mut s = workload::session(name, t, &p).expect("session");
            s.setup().unwrap();
            for _ in 0..2 {
                s.prepare().unwrap();
                t.reset().unwrap();
                let o = s.run_once().unwrap();
                assert!(o.ops > 0 && o.bytes_written > 0, "{name} on {}", t.name());
            }
            let v = s
                .verify()
                .unwrap_or_else(|e| panic!("{name} on {}: {e}", t.name()));
            assert!(v.files > 0 && v.bytes > 0, "{name} verified nothing");

            let root = format!("wl-{name}");
            let all = files(t, &root);
            match *name {
                "populate" => {
                    assert_eq!(all.len(), 3);
                    for f in &all {
                        assert_eq!(t.size(f).unwrap(), p.file_size, "{f}");
                    }
                }
                "randwrite" => assert_eq!(t.size(&all[0]).unwrap(), p.file_size),
                "webserver" => {
                    let log = t.size(&format!("{root}/log")).unwrap();
                    // One 2 KiB record per loop of ten 2-op reads + append.
                    assert_eq!(log % p.append_size, 0);
                    assert!(log >= 2 * 300 / 21 * p.append_size, "log {log}");
                }
                _ => assert!(!all.is_empty() && all.len() <= 8),
            }

            // Flip one byte in the middle of a non-empty file.
            let victim = all
                .iter()
                .find(|f| t.size(f).unwrap() > 0)
                .expect("a non-empty file");
            let mut f = t.open(victim, false).unwrap();
            let at = f.size().unwrap() / 2;
            let mut b = [0u8; 1];
            f.read_at(&mut b, at).unwrap();
            b[0] ^= 0xff;
            f.write_at(&b, at).unwrap();
            drop(f);
            let err = s
                .verify()
                .expect_err("corruption must be caught")
                .to_string();
            assert!(err.contains("content differs"), "{name}: {err}");

            // A lost tail is caught as a size mismatch.
            let mut f = t.open(victim, false).unwrap();
            let size = f.size().unwrap();
            f.write_at(&[0], size).unwrap();
            drop(f);
            assert!(s.verify().unwrap_err().to_string().contains("expected"));

            s.cleanup().unwrap();
            assert!(t.list(&root).is_err(), "{name} left its files");
        }
    }
    amber.destroy().unwrap();
}

#[test]
fn compare_interleaves_and_reports_ratios_to_the_first() {
    let dir = TempDir::new().unwrap();
    let (amber, posix) = targets(&dir);
    let plan = Plan {
        workload: "webproxy".into(),
        params: tiny("webproxy"),
        threads: vec![1, 2],
        reps: 3,
        warmup: 1,
    };
    let mut lines = Vec::new();
    let rows = compare::run(&plan, &[&amber, &posix], &mut |l| lines.push(l)).unwrap();
    // Interleaved: amber, posix, amber, posix, ...
    let order: Vec<bool> = lines.iter().map(|l| l.contains("amberfs")).collect();
    assert_eq!(order.len(), 2 * 2 * 3);
    assert!(order.chunks(2).all(|c| c == [true, false]), "{lines:?}");

    for threads in [1, 2] {
        let of = |t: &str, m: &str| {
            rows.iter()
                .find(|r| {
                    r.record.threads == threads
                        && r.record.target.starts_with(t)
                        && r.record.metric == m
                })
                .unwrap_or_else(|| panic!("{t} {m} at {threads} threads"))
        };
        let a = of("amberfs:direct", "throughput");
        assert_eq!(a.ratio_to_first, Some(1.0));
        let p = of("posix:", "throughput");
        let r = p.ratio_to_first.unwrap();
        assert!((r - p.record.value / a.record.value).abs() < 1e-9);
        assert_eq!(a.record.summary.samples, 3);
        let wa = of("amberfs:direct", "write_amplification");
        assert!(wa.record.value >= 1.0, "PM bytes per requested byte");
        assert!(rows.iter().all(
            |r| r.record.target != p.record.target || r.record.metric != "write_amplification"
        ));
    }

    let text = serde_json::to_string(&rows).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    for r in parsed.as_array().unwrap() {
        for field in &amber_bench::csv::HEADER[..8] {
            assert!(r.get(field).is_some(), "record without {field}: {r}");
        }
        assert_eq!(r["benchmark"], "webproxy");
        assert!(r["ratio_to_first"].is_number());
    }
    amber.destroy().unwrap();
}

#[test]
fn run_one_serves_a_single_target() {
    let dir = TempDir::new().unwrap();
    let (_, posix) = targets(&dir);
    let recs = compare::run_one("varmail", &posix, &tiny("varmail"), 2, 0).unwrap();
    assert_eq!(
        recs.len(),
        2,
        "throughput and bandwidth; no PM on a directory"
    );
    assert!(recs
        .iter()
        .all(|r| r.value > 0.0 && r.policy == "-" && r.threads == 2));
}

/// randwrite with a file per thread: each thread writes and reads only
/// its own file, and verification checks both.
#[test]
fn randwrite_gives_each_thread_its_own_file() {
    let dir = TempDir::new().unwrap();
    let (amber, _) = targets(&dir);
    let mut p = tiny("randwrite");
    p.files = 2;
    workload::validate("randwrite", &p).unwrap();
    let mut s = workload::session("randwrite", &amber, &p).expect("session");
    s.setup().unwrap();
    s.prepare().unwrap();
    let o = s.run_once().unwrap();
    assert!(o.ops > 0 && o.bytes_written > 0);
    let v = s.verify().unwrap();
    assert_eq!(v.files, 2);
    let all = files(&amber, "wl-randwrite");
    assert_eq!(all.len(), 2);
    for f in &all {
        assert_eq!(amber.size(f).unwrap(), p.file_size, "{f}");
    }
    p.files = 3;
    assert!(workload::validate("randwrite", &p)
        .unwrap_err()
        .contains("one file per thread"));
}

#[test]
fn bad_parameters_are_refused_before_anything_runs() {
    let mut p = tiny("randwrite");
    p.io_size = 64;
    assert!(workload::validate("randwrite", &p)
        .unwrap_err()
        .contains("128"));
    let mut p = tiny("varmail");
    p.fsync = Fsync::None;
    assert!(workload::validate("varmail", &p).is_err());
    let mut p = tiny("fileserver");
    p.files = 3;
    assert!(workload::validate("fileserver", &p).is_err());
    assert!(workload::validate("populate", &tiny("fileserver")).is_err());
    let mut p = tiny("fileserver");
    p.prewrite = 10;
    assert!(workload::validate("fileserver", &p)
        .unwrap_err()
        .contains("randwrite only"));
    let mut p = tiny("randwrite");
    p.prewrite = 1 << 40;
    assert!(workload::validate("randwrite", &p)
        .unwrap_err()
        .contains("at most"));
    p.prewrite = 1000;
    assert!(workload::validate("randwrite", &p).is_ok());
    assert!(workload::defaults("nope").is_err());
}

#[test]
fn pm_bytes_per_write_counts_every_pm_byte_per_write_call() {
    let dir = TempDir::new().unwrap();
    let (amber, posix) = targets(&dir);
    let mut p = tiny("randwrite");
    p.threads = 1;
    p.fsync = Fsync::Every;
    let plan = Plan {
        workload: "randwrite".into(),
        params: p.clone(),
        threads: vec![1, 2],
        reps: 2,
        warmup: 0,
    };
    let rows = compare::run(&plan, &[&amber, &posix], &mut |_| {}).unwrap();
    for threads in [1, 2] {
        let of = |t: &str, m: &str| {
            rows.iter().find(|r| {
                r.record.threads == threads
                    && r.record.target.starts_with(t)
                    && r.record.metric == m
            })
        };
        let per_write = of("amberfs:", "pm_bytes_per_write").expect("amber has PM accounting");
        assert_eq!(per_write.record.unit, "PM B/op");
        // Each write call stores its whole request to PM, and more
        // (whatever the policy needs to make it durable) counts too.
        assert!(
            per_write.record.value >= p.io_size as f64,
            "{} PM bytes per {}-byte write",
            per_write.record.value,
            p.io_size
        );
        // randwrite's write calls are all io_size bytes, so per write is
        // per byte times io_size, sample by sample.
        let wa = of("amberfs:", "write_amplification").unwrap();
        let scaled = wa.record.value * p.io_size as f64;
        assert!((per_write.record.value - scaled).abs() < 1e-6 * scaled);
        assert!(of("posix:", "pm_bytes_per_write").is_none(), "no PM there");
    }

    // A timed phase without writes has no bytes per write to report.
    p.read_ratio = 10;
    let plan = Plan {
        params: p,
        threads: vec![1],
        ..plan
    };
    let rows = compare::run(&plan, &[&amber, &posix], &mut |_| {}).unwrap();
    assert!(rows.iter().any(|r| r.record.metric == "throughput"));
    assert!(rows.iter().all(|r| ![
        "pm_bytes_per_write",
        "write_amplification",
        "flushed_lines_per_write",
        "fences_per_write",
        "charged_lines_per_write"
    ]
    .contains(&r.record.metric.as_str())));
    amber.destroy().unwrap();
}

/// Reads a whole file through the target.
fn read_all(t: &dyn Target, path: &str) -> Vec<u8> {
    let mut f = t.open(path, false).unwrap();
    let mut buf = vec![0u8; f.size().unwrap() as usize];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), buf.len());
    buf
}

#[test]
fn prewrite_scatters_writes_untimed_and_verification_checks_them() {
    let dir = TempDir::new().unwrap();
    let (amber, posix) = targets(&dir);
    let mut p = tiny("randwrite");
    p.fsync = Fsync::Every;
    p.read_ratio = 10;
    let plain = p.clone();
    p.prewrite = 200;
    for threads in [1, 2] {
        let (p, plain) = (
            Params {
                threads,
                ..p.clone()
            },
            Params {
                threads,
                ..plain.clone()
            },
        );
        // The same file set without and with the untimed writes.
        let mut before = workload::session("randwrite", &posix, &plain).unwrap();
        before.setup().unwrap();
        let mut s = workload::session("randwrite", &amber, &p).unwrap();
        s.setup().unwrap();
        let path = files(&amber, "wl-randwrite").remove(0);
        let old = read_all(&posix, &path);
        let new = read_all(&amber, &path);
        assert_eq!(old.len(), new.len());
        let unit = p.io_size as usize;
        let changed: Vec<usize> = (0..old.len() / unit)
            .filter(|b| old[b * unit..(b + 1) * unit] != new[b * unit..(b + 1) * unit])
            .collect();
        // 200 writes over 512 blocks: some land twice, none is lost.
        assert!(
            changed.len() > 100 && changed.len() <= 200,
            "{}",
            changed.len()
        );
        // Every thread wrote in its stripe.
        let stripe = old.len() / unit / threads;
        for t in 0..threads {
            assert!(
                changed.iter().any(|b| b / stripe == t),
                "thread {t} wrote nothing"
            );
        }

        // The timed runs only read.
        amber.reset().unwrap();
        let o = s.run_once().unwrap();
        assert!(o.ops > 0 && o.bytes_read == o.ops * p.io_size);
        assert_eq!((o.writes, o.bytes_written), (0, 0));
        s.verify().unwrap();

        // A prewritten block that reads back as before the prewrite (a
        // lost write) fails verification.
        let b = changed[changed.len() / 2];
        let mut f = amber.open(&path, false).unwrap();
        f.write_at(&old[b * unit..(b + 1) * unit], (b * unit) as u64)
            .unwrap();
        drop(f);
        let err = s.verify().expect_err("lost write caught").to_string();
        assert!(err.contains("content differs"), "{err}");
        s.cleanup().unwrap();
        before.cleanup().unwrap();
    }
    amber.destroy().unwrap();
}
