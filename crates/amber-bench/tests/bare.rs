//! The `bare` target: what is written reads back, across extents, holes,
//! overwrites, appends and reused space; a full pool is a clean error; and
//! a comparison run through the CLI's entry (`TargetSpec` + `compare`)
//! gives records with every field.

use amber_bench::bare::BareTarget;
use amber_bench::compare::{self, Plan};
use amber_bench::spec::{SpecOptions, TargetSpec};
use amber_bench::target::{DropCaches, Target, TargetFile};
use amber_bench::workload::{self, Limit};
use amber_sim::SplitMix64;
use std::io;

fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    SplitMix64::new(seed).fill(&mut v);
    v
}

fn read_all(f: &mut dyn TargetFile) -> Vec<u8> {
    let mut buf = vec![0u8; f.size().unwrap() as usize + 100];
    let n = f.read_at(&mut buf, 0).unwrap();
    buf.truncate(n);
    buf
}

/// Writes `data` at `off` into both the file and its model.
fn write(f: &mut dyn TargetFile, model: &mut Vec<u8>, data: &[u8], off: usize) {
    f.write_at(data, off as u64).unwrap();
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
}

#[test]
fn what_is_written_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let t = BareTarget::create(&dir.path().join("p"), 16 << 20, "dram").unwrap();
    t.mkdir_all("d").unwrap();
    // Two files growing side by side: each gets several extents.
    let mut a = t.create("d/a", false).unwrap();
    let mut b = t.create("d/b", false).unwrap();
    let (mut ma, mut mb) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let n = 1000 + 3001 * i;
        let off = ma.len();
        write(a.as_mut(), &mut ma, &bytes(i as u64, n), off);
        let off = mb.len();
        write(b.as_mut(), &mut mb, &bytes(1000 + i as u64, n / 2), off);
    }
    // Overwrites across extent boundaries, a write past the end (the gap
    // reads as zeros), appends through a second handle.
    write(a.as_mut(), &mut ma, &bytes(7, 300_000), 12_345);
    let end = ma.len();
    write(a.as_mut(), &mut ma, &bytes(8, 5000), end + 70_000);
    let mut a2 = t.open("d/a", true).unwrap();
    a2.append(b"appended").unwrap();
    ma.extend_from_slice(b"appended");
    assert_eq!(read_all(a.as_mut()), ma);
    assert_eq!(read_all(b.as_mut()), mb);
    assert_eq!(t.size("d/a").unwrap(), ma.len() as u64);
    // Reads at and past the end are short.
    let mut buf = [0u8; 10];
    assert_eq!(a.read_at(&mut buf, ma.len() as u64 - 4).unwrap(), 4);
    assert_eq!(a.read_at(&mut buf, ma.len() as u64 + 1).unwrap(), 0);
    // Space freed by b goes to a new file, whose holes still read zeros,
    // not b's old bytes.
    drop(b);
    t.remove_file("d/b").unwrap();
    let mut c = t.create("d/c", false).unwrap();
    let mut mc = Vec::new();
    write(c.as_mut(), &mut mc, &bytes(9, 100), 200_000);
    assert_eq!(read_all(c.as_mut()), mc);
    // Re-creating truncates.
    let mut c = t.create("d/c", false).unwrap();
    assert_eq!(c.size().unwrap(), 0);
    // After a reset everything is still there.
    t.reset().unwrap();
    assert_eq!(read_all(t.open("d/a", false).unwrap().as_mut()), ma);
    assert_eq!(t.list("d").unwrap(), vec!["a", "c"]);
    assert_eq!(
        t.open("d/b", false).err().map(|e| e.kind()),
        Some(io::ErrorKind::NotFound)
    );
    assert_eq!(
        t.create("nodir/x", false).err().map(|e| e.kind()),
        Some(io::ErrorKind::NotFound)
    );
    t.destroy().unwrap();
}

#[test]
fn a_full_pool_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p");
    let e = BareTarget::create(&pool, 1000, "dram").err().unwrap();
    assert!(e.contains("--pool-size"), "{e}");

    let t = BareTarget::create(&pool, 1 << 20, "dram").unwrap();
    let mut f = t.create("f", false).unwrap();
    f.write_at(&[1; 4096], 0).unwrap();
    let e = f.write_at(&vec![2; 2 << 20], 4096).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::StorageFull);
    assert!(e.to_string().contains("ENOSPC"), "{e}");
    // Nothing changed, and what fits still goes in.
    assert_eq!(f.size().unwrap(), 4096);
    f.write_at(&[3; 512 << 10], 4096).unwrap();
    assert_eq!(f.size().unwrap(), 4096 + (512 << 10));
    drop(f);
    // Freeing gives the space back.
    t.remove_all("").unwrap();
    let mut g = t.create("g", false).unwrap();
    g.write_at(&vec![4; 1 << 20], 0).unwrap();

    // Through a workload: the run fails with the reason.
    drop(g);
    t.remove_all("").unwrap();
    let mut p = workload::defaults("populate").unwrap();
    p.files = 2;
    p.file_size = 1 << 20;
    let err = compare::run_one("populate", &t, &p, 1, 0).unwrap_err();
    assert!(err.contains("no space left"), "{err}");
    t.destroy().unwrap();
}

#[test]
fn populate_compares_bare_with_amber_through_specs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SpecOptions {
        pool_dir: dir.path().to_path_buf(),
        pool_size: 64 << 20,
        preset: "dram".into(),
        drop_caches: DropCaches::None,
    };
    let opened: Vec<_> = ["bare", "amberfs:direct"]
        .iter()
        .enumerate()
        .map(|(i, s)| TargetSpec::parse(s).unwrap().open(&opts, i).unwrap())
        .collect();
    let targets: Vec<&dyn Target> = opened.iter().map(|t| t.target()).collect();
    let mut params = workload::defaults("populate").unwrap();
    params.files = 2;
    params.file_size = 1 << 20;
    assert_eq!(params.limit, Limit::Complete);
    let plan = Plan {
        workload: "populate".into(),
        params,
        threads: vec![1, 2],
        reps: 2,
        warmup: 1,
    };
    let rows = compare::run(&plan, &targets, &mut |_| {}).unwrap();
    for t in opened {
        t.close().unwrap();
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "pools removed: {left:?}");

    let bare: Vec<_> = rows.iter().filter(|r| r.record.target == "bare").collect();
    let metrics: Vec<(&str, u32)> = bare
        .iter()
        .map(|r| (r.record.metric.as_str(), r.record.threads))
        .collect();
    let seven = [
        "throughput",
        "bandwidth",
        "write_amplification",
        "pm_bytes_per_write",
        "flushed_lines_per_write",
        "fences_per_write",
        "charged_lines_per_write",
    ];
    let want: Vec<(&str, u32)> = [1, 2]
        .iter()
        .flat_map(|&t| seven.iter().map(move |m| (*m, t)))
        .collect();
    assert_eq!(metrics, want);
    for r in &bare {
        let c = &r.record;
        assert_eq!((c.benchmark.as_str(), c.policy.as_str()), ("populate", "-"));
        assert_eq!(c.preset, "dram");
        assert_eq!(c.summary.samples, 2, "{c:?}");
        if c.metric == "flushed_lines_per_write" {
            // Zero: no ratio to a zero reference.
            assert_eq!(r.ratio_to_first, None);
        } else {
            assert!(c.value > 0.0, "{c:?}");
            assert_eq!(r.ratio_to_first, Some(1.0), "bare is the reference");
        }
        let notes = c.notes.join("; ");
        assert!(
            notes.contains("verified after the runs: 2 files, 2097152 bytes"),
            "{notes}"
        );
        // Nothing but the data reaches PM: 4 KiB per 4 KiB write, one
        // non-temporal copy (no flushed line) and one fence.
        match c.metric.as_str() {
            "write_amplification" => assert_eq!(c.value, 1.0),
            "pm_bytes_per_write" => assert_eq!(c.value, 4096.0),
            "flushed_lines_per_write" => assert_eq!(c.value, 0.0),
            "fences_per_write" => assert_eq!(c.value, 1.0),
            "charged_lines_per_write" => assert_eq!(c.value, 64.0),
            _ => {}
        }
    }
    let amber = rows
        .iter()
        .filter(|r| r.record.target == "amberfs:direct")
        .count();
    assert_eq!(amber, 14);
}
