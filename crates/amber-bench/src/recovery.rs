//! `bench recovery`: how long an Amber pool takes to mount after a clean
//! unmount and after a crash, and how much DRAM the policy holds for it
//! (hunter.txt §IV-E: recovery "under a 64GiB write-only workload";
//! HUNTER's failure recovery takes 2.81 s because it "must scan whole
//! logical information for data validation").
//!
//! Each target in turn (never two pools at once: each one is the size of
//! `--data` and lives in memory):
//! 1. setup, untimed: a fresh pool made as [`AmberTarget`](crate::target)
//!    makes one ([`format_pool`]), mounted; `data` bytes written as files
//!    of `file` bytes in one directory, `io` bytes per write;
//! 2. the DRAM the policy says it holds (its `queue_bytes` and
//!    `index_bytes` stats, 0 for a policy without them) right after the
//!    writes, and again after `sync_all`;
//! 3. `reps` rounds on that same pool of: a clean unmount and a timed
//!    mount (`mount_clean_ms`), which must report a clean pool; then
//!    `sync_all` (every file's metadata durable, so recovery has every
//!    record to validate), the handle dropped without unmounting (a crash
//!    as far as the pool can tell) and a timed mount (`mount_crash_ms`),
//!    which must report that it recovered;
//! 4. after the last mount every file must have its size; the pool is
//!    unmounted cleanly and deleted.
//!
//! Only the `Fs::mount` call is timed, by the wall clock. Records carry
//! the medians; the first target is the reference of the ratios, as in
//! `bench compare`.

use crate::compare::Row;
use crate::progress::Progress;
use crate::record::{human_bytes, Record};
use crate::spec::TargetSpec;
use crate::stats::summarize;
use crate::target::{format_pool, BenchDevice};
use amber_core::{Fs, FsError, MountOptions, OpenOptions, RecoveryReport};
use amber_format::FormatParams;
use amber_sim::SplitMix64;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The benchmark's name in records.
pub const BENCHMARK: &str = "recovery";
/// The directory every file is written to.
const DIR: &str = "/recovery";
/// Largest `io`: one buffer of this size is held for the writes.
pub const MAX_IO_BYTES: u64 = 64 << 20;
/// Most files one run writes (the most inodes a default pool has).
pub const MAX_FILES: u64 = 1 << 20;
/// Most repetitions.
pub const MAX_REPS: usize = 1_000;
/// How long a dropped or unmounted handle's threads may keep the device.
const RELEASE_WAIT: Duration = Duration::from_secs(10);
/// Seed of the bytes written (their values do not matter to a mount).
const SEED: u64 = 42;

/// What to write and how often to mount.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes written in all.
    pub data: u64,
    /// Bytes per file; the last file holds what is left.
    pub file: u64,
    /// Bytes per write call.
    pub io: u64,
    /// Clean and crash mounts per target.
    pub reps: usize,
    /// Where each pool is created (RAM-backed, so PM is emulated).
    pub pool_dir: PathBuf,
    pub pool_size: u64,
    /// The emulator preset.
    pub preset: String,
}

/// The pool size when none is given: the data, an eighth more for the
/// file system's own structures, and 64 MiB, rounded up to 2 MiB (the
/// mapping's huge page).
pub fn default_pool_size(data: u64) -> u64 {
    data.saturating_add(data / 8)
        .saturating_add(64 << 20)
        .next_multiple_of(2 << 20)
}

impl Config {
    fn files(&self) -> u64 {
        self.data.div_ceil(self.file)
    }

    /// Length of file `i` (all `file` bytes long but the last).
    fn file_len(&self, i: u64) -> u64 {
        self.file.min(self.data - i * self.file)
    }

    /// Refuses sizes the run cannot hold, naming the flag to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.data == 0 || self.file == 0 || self.io == 0 {
            return Err("--data, --file-size and --io-size must be at least 1 byte".into());
        }
        if self.io > MAX_IO_BYTES {
            return Err(format!(
                "--io-size {} is more than {} MiB; use a smaller one",
                self.io,
                MAX_IO_BYTES >> 20
            ));
        }
        if self.reps == 0 || self.reps > MAX_REPS {
            return Err(format!("--reps must be 1 to {MAX_REPS}"));
        }
        let files = self.files();
        if files > MAX_FILES {
            return Err(format!(
                "--data {} in files of --file-size {} makes {files} files, more than {MAX_FILES}; \
                 raise --file-size",
                self.data, self.file
            ));
        }
        if self.pool_size < self.data {
            return Err(format!(
                "--pool-size {} cannot hold --data {}; raise --pool-size (the default is \
                 --data + 12.5% + 64M) or lower --data",
                self.pool_size, self.data
            ));
        }
        // The root, the directory, the files.
        let inodes = FormatParams::for_size(self.pool_size).inode_count;
        if files + 2 > inodes {
            return Err(format!(
                "{files} files need more inodes than a pool of --pool-size {} has ({inodes}); \
                 raise --file-size or --pool-size",
                self.pool_size
            ));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "{} as {} file(s) of {} in one directory, {} per write; pool {}; {} clean and {} \
             crash mount(s)",
            human_bytes(self.data),
            self.files(),
            human_bytes(self.file),
            human_bytes(self.io),
            human_bytes(self.pool_size),
            self.reps,
            self.reps
        )
    }
}

/// Parses the `--target`s; only Amber pools can be mounted and crashed.
pub fn parse_targets(targets: &[String]) -> Result<Vec<String>, String> {
    if targets.is_empty() {
        return Err("bench recovery needs at least one --target amberfs:POLICY".into());
    }
    targets
        .iter()
        .map(|s| match TargetSpec::parse(s)? {
            TargetSpec::Amber { policy } => Ok(policy),
            TargetSpec::Bare => Err(format!(
                "--target {s:?}: bench recovery times mounting an Amber pool, and bare has no \
                 file system to mount or recover; use amberfs:POLICY"
            )),
            TargetSpec::Dir { .. } => Err(format!(
                "--target {s:?}: bench recovery mounts and crashes the pools it measures itself, \
                 which a directory of a kernel-mounted file system does not allow; use \
                 amberfs:POLICY"
            )),
        })
        .collect()
}

/// What one target's setup and mounts gave.
struct Measured {
    clean_ms: Vec<f64>,
    crash_ms: Vec<f64>,
    /// `RecoveryReport::duration` of each mount.
    clean_report_ms: Vec<f64>,
    crash_report_ms: Vec<f64>,
    /// The policy's DRAM right after the writes, and after `sync_all`.
    written: Dram,
    synced: Dram,
    setup: Duration,
    /// The `sync_all` after the writes (where deferred metadata lands).
    sync: Duration,
    last_crash: RecoveryReport,
    verified_bytes: u64,
}

/// Measures every target in turn (the first is the reference of the
/// ratios): the entry `amberfs bench recovery` uses.
pub fn run(cfg: &Config, targets: &[String]) -> Result<Vec<Row>, String> {
    let policies = parse_targets(targets)?;
    cfg.validate()?;
    if !cfg.pool_dir.is_dir() {
        return Err(format!(
            "--pool-dir {}: not a directory",
            cfg.pool_dir.display()
        ));
    }
    let mut measured = Vec::with_capacity(policies.len());
    for (i, policy) in policies.iter().enumerate() {
        let name = format!("amberfs:{policy}");
        let pool = cfg.pool_dir.join(format!(
            "amber-bench-recovery-{}-{i}.pool",
            std::process::id()
        ));
        let m = measure(cfg, policy, &name, &pool);
        // The pool goes whatever happened, before the next one is made.
        let removed = match std::fs::remove_file(&pool) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!(
                "{name}: cannot remove pool {}: {e}",
                pool.display()
            )),
            _ => Ok(()),
        };
        measured.push(m.map_err(|e| format!("{name}: {e}"))?);
        removed?;
    }
    Ok(rows(cfg, &policies, &measured))
}

fn options(policy: &str) -> Result<MountOptions, String> {
    MountOptions::parse(&format!("policy={policy}")).map_err(|e| e.to_string())
}

/// Setup, DRAM figures, `reps` clean and crash mounts, verification.
fn measure(
    cfg: &Config,
    policy: &str,
    name: &str,
    pool: &std::path::Path,
) -> Result<Measured, String> {
    let opts = options(policy)?;
    let dev = format_pool(pool, cfg.pool_size, &opts, &cfg.preset).map_err(|e| {
        format!(
            "{e} (each pool takes --pool-size {} in --pool-dir {})",
            human_bytes(cfg.pool_size),
            cfg.pool_dir.display()
        )
    })?;
    let (fs, _) = Fs::mount(dev, opts.clone()).map_err(|e| format!("first mount: {e}"))?;
    let started = Instant::now();
    populate(&fs, cfg, name)?;
    let setup = started.elapsed();
    let written = dram(&fs);
    let started = Instant::now();
    fs.core()
        .sync_all()
        .map_err(|e| format!("sync_all after the writes: {e}"))?;
    let sync = started.elapsed();
    let synced = dram(&fs);
    let mut m = Measured {
        clean_ms: Vec::new(),
        crash_ms: Vec::new(),
        clean_report_ms: Vec::new(),
        crash_report_ms: Vec::new(),
        written,
        synced,
        setup,
        sync,
        last_crash: RecoveryReport::default(),
        verified_bytes: 0,
    };
    let bar = Progress::new(2 * cfg.reps as u64, &format!("{name}: mounts"));
    let mut fs = fs;
    for _ in 0..cfg.reps {
        let dev = fs
            .into_device(true, RELEASE_WAIT)
            .map_err(|e| format!("unmount: {e}"))?;
        let (clean, rep, ms) = timed_mount(dev, &opts)?;
        if !rep.was_clean {
            return Err("the mount after a clean unmount ran recovery".into());
        }
        m.clean_ms.push(ms);
        m.clean_report_ms.push(rep.duration.as_secs_f64() * 1e3);
        bar.inc(1);
        clean
            .core()
            .sync_all()
            .map_err(|e| format!("sync_all before the crash: {e}"))?;
        let dev = clean
            .into_device(false, RELEASE_WAIT)
            .map_err(|e| format!("crash: {e}"))?;
        let (crashed, rep, ms) = timed_mount(dev, &opts)?;
        if rep.was_clean {
            return Err("the mount after a crash found the pool marked clean".into());
        }
        m.crash_ms.push(ms);
        m.crash_report_ms.push(rep.duration.as_secs_f64() * 1e3);
        m.last_crash = rep;
        bar.inc(1);
        fs = crashed;
    }
    bar.finish();
    m.verified_bytes = verify(&fs, cfg)?;
    fs.into_device(true, RELEASE_WAIT)
        .map_err(|e| format!("last unmount: {e}"))?;
    Ok(m)
}

/// Mounts `dev`, timing the call alone.
fn timed_mount(
    dev: BenchDevice,
    opts: &MountOptions,
) -> Result<(Fs<BenchDevice>, RecoveryReport, f64), String> {
    let opts = opts.clone();
    let t = Instant::now();
    let mounted = Fs::mount(dev, opts);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let (fs, rep) = mounted.map_err(|e| format!("mount: {e}"))?;
    Ok((fs, rep, ms))
}

/// What the policy says it holds in DRAM (0 where it has no such stat).
#[derive(Debug, Clone, Copy, Default)]
struct Dram {
    /// Updates queued and not yet persisted.
    pending: u64,
    /// DRAM the queues hold (their capacity, not only what is pending).
    queue_bytes: u64,
    /// DRAM the loaded files' indexes hold.
    index_bytes: u64,
}

fn dram(fs: &Fs<BenchDevice>) -> Dram {
    let stats = fs.core().policy_stats();
    let get = |k: &str| stats.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
    Dram {
        pending: get("pending"),
        queue_bytes: get("queue_bytes"),
        index_bytes: get("index_bytes"),
    }
}

fn file_path(i: u64) -> String {
    format!("{DIR}/f{i:07}")
}

/// Writes the data set, front to back, one file after another.
fn populate(fs: &Fs<BenchDevice>, cfg: &Config, name: &str) -> Result<(), String> {
    let mut buf = vec![0u8; cfg.io as usize];
    SplitMix64::new(SEED).fill(&mut buf);
    let files = cfg.files();
    let writes: u64 = (0..files).map(|i| cfg.file_len(i).div_ceil(cfg.io)).sum();
    let bar = Progress::new(
        writes,
        &format!("{name}: writing {}", human_bytes(cfg.data)),
    );
    let mut done = 0u64;
    let fail = |what: String, e: FsError, done: u64| match e {
        FsError::NoSpace => format!(
            "the pool ran out of space ({what}) after {} of --data {}; raise --pool-size \
             (now {}; the default is --data + 12.5% + 64M)",
            human_bytes(done),
            human_bytes(cfg.data),
            human_bytes(cfg.pool_size)
        ),
        e => format!("{what}: {e}"),
    };
    fs.create_dir_all(DIR)
        .map_err(|e| fail(format!("creating {DIR}"), e, 0))?;
    for i in 0..files {
        let path = file_path(i);
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(fs, &path)
            .map_err(|e| fail(format!("creating {path}"), e, done))?;
        let len = cfg.file_len(i);
        let mut off = 0;
        while off < len {
            let n = (len - off).min(cfg.io) as usize;
            let wrote = f
                .write_at(&buf[..n], off)
                .map_err(|e| fail(format!("writing {path}"), e, done))?;
            if wrote == 0 {
                return Err(format!("writing {path}: wrote nothing at offset {off}"));
            }
            off += wrote as u64;
            done += wrote as u64;
            bar.inc(1);
        }
    }
    bar.finish();
    Ok(())
}

/// Every file is there with its size; returns the bytes they hold.
fn verify(fs: &Fs<BenchDevice>, cfg: &Config) -> Result<u64, String> {
    let files = cfg.files();
    let listed = fs
        .read_dir(DIR)
        .map_err(|e| format!("listing {DIR} after the last mount: {e}"))?
        .len() as u64;
    if listed != files {
        return Err(format!(
            "{DIR} holds {listed} entries after the last mount, not {files}"
        ));
    }
    let mut bytes = 0;
    for i in 0..files {
        let path = file_path(i);
        let len = fs
            .metadata(&path)
            .map_err(|e| format!("{path} after the last mount: {e}"))?
            .len();
        if len != cfg.file_len(i) {
            return Err(format!(
                "{path} is {len} bytes after the last mount, not {}",
                cfg.file_len(i)
            ));
        }
        bytes += len;
    }
    Ok(bytes)
}

fn median(xs: &[f64]) -> f64 {
    summarize(xs).median
}

fn notes(cfg: &Config, m: &Measured) -> Vec<String> {
    vec![
        cfg.describe(),
        format!(
            "setup (untimed): written in {:.3} s ({:.0} MiB/s), then sync_all in {:.3} s",
            m.setup.as_secs_f64(),
            cfg.data as f64 / (1 << 20) as f64 / m.setup.as_secs_f64().max(1e-9),
            m.sync.as_secs_f64()
        ),
        format!(
            "policy DRAM after the writes: queue_bytes={} index_bytes={} ({} update(s) \
             pending); after sync_all: queue_bytes={} index_bytes={} ({} pending)",
            m.written.queue_bytes,
            m.written.index_bytes,
            m.written.pending,
            m.synced.queue_bytes,
            m.synced.index_bytes,
            m.synced.pending
        ),
        format!(
            "mount's own RecoveryReport duration, medians: clean {:.3} ms, after a crash \
             {:.3} ms",
            median(&m.clean_report_ms),
            median(&m.crash_report_ms)
        ),
        format!("last crash mount: {}", m.last_crash),
        format!(
            "verified after the last mount: {} files, {} bytes",
            cfg.files(),
            m.verified_bytes
        ),
    ]
}

/// One row per metric per target, with its ratio to the first target's.
fn rows(cfg: &Config, policies: &[String], measured: &[Measured]) -> Vec<Row> {
    let several = policies.len() > 1;
    let mut first: Vec<(&str, f64)> = Vec::new();
    let mut out = Vec::new();
    for (i, (policy, m)) in policies.iter().zip(measured).enumerate() {
        let name = format!("amberfs:{policy}");
        let notes = notes(cfg, m);
        let metrics: [(&str, &str, Vec<f64>); 6] = [
            ("mount_clean_ms", "ms", m.clean_ms.clone()),
            ("mount_crash_ms", "ms", m.crash_ms.clone()),
            ("queue_bytes", "B", vec![m.written.queue_bytes as f64]),
            ("index_bytes", "B", vec![m.written.index_bytes as f64]),
            (
                "queue_bytes_after_sync",
                "B",
                vec![m.synced.queue_bytes as f64],
            ),
            (
                "index_bytes_after_sync",
                "B",
                vec![m.synced.index_bytes as f64],
            ),
        ];
        for (metric, unit, xs) in metrics {
            let summary = summarize(&xs);
            if i == 0 {
                first.push((metric, summary.median));
            }
            let ratio = first
                .iter()
                .find(|(n, _)| *n == metric)
                .filter(|(_, v)| *v > 0.0)
                .map(|(_, v)| summary.median / v)
                .filter(|_| several);
            let mut notes = notes.clone();
            if let Some(r) = ratio {
                notes.push(format!("{r:.3}x amberfs:{}", policies[0]));
            }
            out.push(Row {
                record: Record {
                    benchmark: BENCHMARK.into(),
                    target: name.clone(),
                    policy: policy.split(',').next().unwrap_or_default().to_string(),
                    preset: cfg.preset.clone(),
                    threads: 1,
                    metric: metric.into(),
                    value: summary.median,
                    unit: unit.into(),
                    summary,
                    notes,
                },
                ratio_to_first: ratio,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(data: u64, file: u64) -> Config {
        Config {
            data,
            file,
            io: 64 << 10,
            reps: 1,
            pool_dir: "/tmp".into(),
            pool_size: default_pool_size(data),
            preset: "dram".into(),
        }
    }

    #[test]
    fn default_pool_size_is_data_an_eighth_and_64m_rounded() {
        assert_eq!(
            default_pool_size(8 << 30),
            (8 << 30) + (1 << 30) + (64 << 20)
        );
        assert_eq!(default_pool_size(8 << 20), 74 << 20);
        assert_eq!(default_pool_size(1), 66 << 20);
    }

    #[test]
    fn the_last_file_holds_the_rest() {
        let c = cfg(10 << 20, 4 << 20);
        assert_eq!(c.files(), 3);
        let lens: Vec<u64> = (0..3).map(|i| c.file_len(i)).collect();
        assert_eq!(lens, [4 << 20, 4 << 20, 2 << 20]);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn bad_sizes_name_the_flag_to_change() {
        let mut c = cfg(8 << 20, 2 << 20);
        c.pool_size = 4 << 20;
        assert!(c.validate().unwrap_err().contains("raise --pool-size"));
        let c = cfg(1 << 30, 512);
        assert!(c.validate().unwrap_err().contains("raise --file-size"));
        let mut c = cfg(8 << 20, 2 << 20);
        c.io = MAX_IO_BYTES + 1;
        assert!(c.validate().unwrap_err().contains("--io-size"));
        c.io = 4096;
        c.reps = 0;
        assert!(c.validate().unwrap_err().contains("--reps"));
    }

    #[test]
    fn only_amber_targets_are_taken() {
        assert_eq!(
            parse_targets(&["amberfs:hunter".into(), "amberfs:direct,sync".into()]).unwrap(),
            ["hunter", "direct,sync"]
        );
        assert!(parse_targets(&["bare".into()])
            .unwrap_err()
            .contains("no file system to mount"));
        assert!(parse_targets(&["dir:/tmp".into()])
            .unwrap_err()
            .contains("amberfs:POLICY"));
        assert!(parse_targets(&[]).unwrap_err().contains("at least one"));
    }
}
