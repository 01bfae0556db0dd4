//! Runs the matrix on every lane (a target through one data path) and
//! turns the trials into records.
//!
//! Per cell, trials are interleaved across lanes (A, B, A, B, ...) so a
//! noisy stretch of the run hits every lane alike. Each trial starts with
//! the chosen clean-up and runs the tests in IOzone's order on one file.
//! Only the loop over records (and the closing fsync when asked) is timed;
//! every test is then checked against the seed-derived data in a separate
//! pass, so a skipped or misplaced record fails the run instead of
//! flattering it.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_pmem::{Durability, FlushKind, MapOptions, MmapDevice, PmDevice};
use amber_sim::SplitMix64;

use super::matrix::{Cell, Matrix};
use super::modes::Mode;
use super::tests::Test;
use crate::bare::BareTarget;
use crate::record::Record;
use crate::spec::TargetSpec;
use crate::stats::summarize;
use crate::target::{AmberTarget, DropCaches, PosixTarget, Target};

/// The test file's name inside a target.
pub const FILE_NAME: &str = "iozone.tmp";

/// Unit of the verification pass: large enough that per-call costs vanish,
/// small enough to keep memory flat whatever the file size.
const VERIFY_CHUNK: u64 = 1 << 20;

/// Whether the file interface's write tests end with an fsync (IOzone's
/// `-e`: the flush is part of the timed test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    None,
    Fsync,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub targets: Vec<TargetSpec>,
    /// Data paths for directory targets (Amber targets use the library's
    /// file interface whatever is chosen here).
    pub modes: Vec<Mode>,
    pub matrix: Matrix,
    /// Tests in IOzone's order; a selection not starting with `write`
    /// first writes the file untimed.
    pub tests: Vec<Test>,
    pub trials: usize,
    pub cleanup: DropCaches,
    pub sync: Sync,
    /// Emulator preset for Amber targets.
    pub preset: String,
    /// Pool file for Amber targets (a suffix tells several apart).
    pub pool: PathBuf,
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            targets: Vec::new(),
            modes: vec![Mode::Posix],
            matrix: Matrix::default(),
            tests: Test::ALL.to_vec(),
            trials: 3,
            cleanup: DropCaches::None,
            sync: Sync::None,
            preset: "dram".into(),
            pool: PathBuf::from("/dev/shm/amber-iozone.pool"),
            seed: 42,
        }
    }
}

/// One target through one data path.
enum Lane {
    /// A directory; `fs` serves the POSIX mode and the clean-ups.
    Dir {
        dir: PathBuf,
        mode: Mode,
        fs: PosixTarget,
    },
    Amber(AmberTarget),
    /// No file system: each record one non-temporal copy into the pool.
    Bare(BareTarget),
}

impl Lane {
    fn label(&self) -> String {
        match self {
            Lane::Dir { dir, mode, .. } => format!("{}:{}", mode.name(), dir.display()),
            Lane::Amber(t) => t.name(),
            Lane::Bare(t) => t.name(),
        }
    }

    fn mode_name(&self) -> &'static str {
        match self {
            Lane::Dir { mode, .. } => mode.name(),
            Lane::Amber(_) => "library",
            Lane::Bare(_) => "bare",
        }
    }

    fn cleanup(&self, cleanup: DropCaches) -> Result<(), String> {
        let done = match self {
            Lane::Dir { fs, .. } => fs.reset(),
            Lane::Amber(t) if cleanup != DropCaches::None => t.reset(),
            Lane::Amber(_) => Ok(()),
            // Nothing to drop (`BareTarget::reset`).
            Lane::Bare(_) => Ok(()),
        };
        done.map_err(|e| format!("clean-up of {} failed: {e}", self.label()))
    }

    fn pm_bytes(&self) -> Option<u64> {
        match self {
            Lane::Dir { .. } => None,
            Lane::Amber(t) => t.pm_stats().map(|s| s.bytes_written()),
            Lane::Bare(t) => t.pm_stats().map(|s| s.bytes_written()),
        }
    }
}

/// One timed test on one lane.
struct Step<'a> {
    test: Test,
    cell: Cell,
    order: &'a [u64],
    /// The file's whole expected contents after the test: what a write
    /// test stores, what a read test must find.
    data: &'a [u8],
    /// The seed `data` was generated from, for the modes that generate it
    /// in registers instead.
    seed: u64,
    sync: Sync,
}

/// Runs the matrix. `progress` hears (cells done, cells in all) after each
/// cell. The test files and Amber pools are removed afterwards, on failure
/// too: a 1 GiB file left in a user's directory would be a surprise.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Record>, String> {
    if cfg.trials == 0 || cfg.tests.is_empty() || cfg.targets.is_empty() {
        return Err("need at least one target, one test and one trial".into());
    }
    let cells = cfg.matrix.cells();
    let lanes = open_lanes(cfg)?;
    let result = run_lanes(cfg, &cells, &lanes, progress);
    let mut cleanup_errors = Vec::new();
    for lane in lanes {
        let removed = match lane {
            Lane::Dir { dir, .. } => match std::fs::remove_file(dir.join(FILE_NAME)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                r => r,
            },
            Lane::Amber(t) => t.destroy(),
            Lane::Bare(t) => t.destroy(),
        };
        if let Err(e) = removed {
            cleanup_errors.push(e.to_string());
        }
    }
    let records = result?;
    if cleanup_errors.is_empty() {
        Ok(records)
    } else {
        Err(format!(
            "could not remove the test files: {}",
            cleanup_errors.join("; ")
        ))
    }
}

fn open_lanes(cfg: &Config) -> Result<Vec<Lane>, String> {
    let biggest = cfg.matrix.file_sizes.iter().max().copied().unwrap_or(0);
    // Room for the file, its block maps and the metadata areas, in whole
    // huge pages.
    let pool_size = (biggest + biggest / 4 + (64 << 20)).next_multiple_of(2 << 20);
    let mut lanes = Vec::new();
    for (i, spec) in cfg.targets.iter().enumerate() {
        match spec {
            TargetSpec::Dir { path: dir } => {
                if !dir.is_dir() {
                    return Err(format!("{} is not a directory", dir.display()));
                }
                for &mode in &cfg.modes {
                    lanes.push(Lane::Dir {
                        dir: dir.clone(),
                        mode,
                        fs: PosixTarget::new(dir.clone(), cfg.cleanup),
                    });
                }
            }
            TargetSpec::Amber { policy } => {
                let t = AmberTarget::create(&lane_pool(cfg, i), pool_size, policy, &cfg.preset)?;
                lanes.push(Lane::Amber(t));
            }
            TargetSpec::Bare => {
                let t = BareTarget::create(&lane_pool(cfg, i), pool_size, &cfg.preset)?;
                lanes.push(Lane::Bare(t));
            }
        }
    }
    Ok(lanes)
}

/// The pool file of the `i`th target: `cfg.pool`, with a suffix after the
/// first.
fn lane_pool(cfg: &Config, i: usize) -> PathBuf {
    let mut pool = cfg.pool.clone().into_os_string();
    if i > 0 {
        pool.push(format!(".{i}"));
    }
    PathBuf::from(pool)
}

/// Throughput samples (MiB/s) and write amplifications of one lane and
/// test over the trials of one cell.
#[derive(Default)]
struct Samples {
    mib_s: Vec<f64>,
    write_amp: Vec<f64>,
}

fn run_lanes(
    cfg: &Config,
    cells: &[Cell],
    lanes: &[Lane],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Record>, String> {
    let mut images = Images::default();
    let mut records = Vec::new();
    for (done, &cell) in cells.iter().enumerate() {
        let orders = orders(cfg, cell);
        if done == 0 {
            // Warm-up: one untimed pass over the first cell faults in the
            // code paths, the files and the pools before anything counts.
            for lane in lanes {
                run_trial(cfg, cell, lane, &orders, &mut images)?;
            }
        }
        let mut samples: Vec<Vec<Samples>> = lanes
            .iter()
            .map(|_| cfg.tests.iter().map(|_| Samples::default()).collect())
            .collect();
        for _ in 0..cfg.trials {
            for (lane, lane_samples) in lanes.iter().zip(&mut samples) {
                lane.cleanup(cfg.cleanup)?;
                let trial = run_trial(cfg, cell, lane, &orders, &mut images)?;
                for (s, (secs, wa)) in lane_samples.iter_mut().zip(trial) {
                    s.mib_s
                        .push(cell.bytes() as f64 / secs / (1u64 << 20) as f64);
                    s.write_amp.extend(wa);
                }
            }
        }
        for (lane, lane_samples) in lanes.iter().zip(&samples) {
            for (&test, s) in cfg.tests.iter().zip(lane_samples) {
                records.push(record(cfg, lane, cell, test, s));
            }
        }
        progress(done + 1, cells.len());
    }
    Ok(records)
}

/// The record order of every selected test (and of the untimed write that
/// may precede them), computed once per cell.
fn orders(cfg: &Config, cell: Cell) -> HashMap<Test, Vec<u64>> {
    let seed = cfg.seed ^ cell.file ^ cell.record.rotate_left(32);
    cfg.tests
        .iter()
        .chain([&Test::Write])
        .map(|&t| (t, t.order(cell.records(), seed)))
        .collect()
}

/// The seed-derived file images of the current file size, one per data
/// seed: generated once, outside any timing, and reused by every trial.
#[derive(Default)]
struct Images {
    file: u64,
    by_seed: HashMap<u64, Vec<u8>>,
}

impl Images {
    fn get(&mut self, file: u64, seed: u64) -> &[u8] {
        if self.file != file {
            self.by_seed.clear();
            self.file = file;
        }
        self.by_seed.entry(seed).or_insert_with(|| {
            let mut v = vec![0u8; file as usize];
            SplitMix64::new(seed).fill(&mut v);
            v
        })
    }
}

/// One trial: every selected test in order on one lane. Returns, per test,
/// the timed seconds and (Amber write tests) the write amplification.
fn run_trial(
    cfg: &Config,
    cell: Cell,
    lane: &Lane,
    orders: &HashMap<Test, Vec<u64>>,
    images: &mut Images,
) -> Result<Vec<(f64, Option<f64>)>, String> {
    let mut content: Option<u64> = None;
    let mut out = Vec::with_capacity(cfg.tests.len());
    for &test in &cfg.tests {
        if content.is_none() && test != Test::Write {
            let seed = Test::Write.data_seed(cfg.seed).expect("write stores data");
            let step = Step {
                test: Test::Write,
                cell,
                order: &orders[&Test::Write],
                data: images.get(cell.file, seed),
                seed,
                sync: cfg.sync,
            };
            run_step(lane, &step)?;
            content = Some(seed);
        }
        let seed = test
            .data_seed(cfg.seed)
            .or(content)
            .expect("the file was written before any other test");
        let step = Step {
            test,
            cell,
            order: &orders[&test],
            data: images.get(cell.file, seed),
            seed,
            sync: cfg.sync,
        };
        let before = lane.pm_bytes();
        let elapsed = run_step(lane, &step)?;
        let wa = match (test.writes(), before, lane.pm_bytes()) {
            (true, Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / cell.bytes() as f64),
            _ => None,
        };
        // A test too fast for the clock still gets a finite throughput.
        out.push((elapsed.as_secs_f64().max(1e-9), wa));
        content = Some(seed);
    }
    Ok(out)
}

fn run_step(lane: &Lane, s: &Step) -> Result<Duration, String> {
    let context = |e: String| {
        format!(
            "{} {} on {}: {e}",
            s.test.name(),
            s.cell.label(),
            lane.label()
        )
    };
    match lane {
        Lane::Dir {
            mode: Mode::Posix,
            fs,
            ..
        } => file_step(fs, s),
        Lane::Dir { dir, mode, .. } => map_step(dir, *mode, s),
        Lane::Amber(t) => file_step(t, s),
        Lane::Bare(t) => file_step(t, s),
    }
    .map_err(context)
}

/// A test through a target's file interface, from and into DRAM buffers.
fn file_step(t: &dyn Target, s: &Step) -> Result<Duration, String> {
    let io = |e: std::io::Error| e.to_string();
    let mut f = if s.test == Test::Write {
        t.create(FILE_NAME, false)
    } else {
        t.open(FILE_NAME, false)
    }
    .map_err(io)?;
    let rec = s.cell.record;
    let mut buf = vec![0u8; rec as usize];
    let start = Instant::now();
    if s.test.writes() {
        for &r in s.order {
            let off = r * rec;
            f.write_at(&s.data[off as usize..(off + rec) as usize], off)
                .map_err(io)?;
        }
        if s.sync == Sync::Fsync {
            f.fsync().map_err(io)?;
        }
    } else {
        for &r in s.order {
            let n = f.read_at(&mut buf, r * rec).map_err(io)?;
            if n != buf.len() {
                return Err(format!("short read of record {r}: {n} bytes"));
            }
            black_box(&mut buf);
        }
    }
    let elapsed = start.elapsed();
    verify(s, |off, chunk| {
        let n = f.read_at(chunk, off).map_err(io)?;
        if n == chunk.len() {
            Ok(())
        } else {
            Err(format!("short read at {off}: {n} bytes"))
        }
    })?;
    Ok(elapsed)
}

/// A test through a mapping of the file, persisted per record as the mode
/// says.
fn map_step(dir: &Path, mode: Mode, s: &Step) -> Result<Duration, String> {
    let dev = map_file(dir, mode, s)?;
    let persist = |e: amber_pmem::PersistError| e.to_string();
    let rec = s.cell.record;
    let mut buf = vec![0u8; rec as usize];
    let mut sum = 0u64;
    let start = Instant::now();
    match (mode, s.test.writes()) {
        (Mode::MmapMsync | Mode::MmapFlush, true) => {
            for &r in s.order {
                let off = r * rec;
                dev.write(off, &s.data[off as usize..(off + rec) as usize]);
                dev.persist(off, rec).map_err(persist)?;
            }
        }
        (Mode::LoadStore, true) => {
            for &r in s.order {
                dev.store_generated(r * rec, rec, s.seed);
                dev.persist(r * rec, rec).map_err(persist)?;
            }
        }
        (Mode::Nt, true) => {
            for &r in s.order {
                dev.store_generated_nt(r * rec, rec, s.seed);
                dev.drain().map_err(persist)?;
            }
        }
        (Mode::MmapMsync | Mode::MmapFlush, false) => {
            for &r in s.order {
                dev.read(r * rec, &mut buf);
                black_box(&mut buf);
            }
        }
        (Mode::LoadStore | Mode::Nt, false) => {
            for &r in s.order {
                sum = sum.wrapping_add(dev.load_sum(r * rec, rec));
            }
        }
        (Mode::Posix, _) => unreachable!("posix goes through the file interface"),
    }
    let elapsed = start.elapsed();
    if !s.test.writes() && matches!(mode, Mode::LoadStore | Mode::Nt) {
        check_sum(s, sum)?;
    }
    verify(s, |off, chunk| {
        dev.read(off, chunk);
        Ok(())
    })?;
    Ok(elapsed)
}

/// Maps the test file as `mode` says: created afresh for the write test,
/// else the one the write test left. A flushing mode refuses a mapping
/// that could only persist with msync.
fn map_file(dir: &Path, mode: Mode, s: &Step) -> Result<MmapDevice, String> {
    let path = dir.join(FILE_NAME);
    let msync = mode == Mode::MmapMsync;
    let options = MapOptions {
        durability: if msync {
            Durability::Msync
        } else {
            Durability::Auto
        },
        // Explicit, so AMBER_FLUSH cannot turn the msync baseline into
        // flushes; the other modes take the CPU's best or AMBER_FLUSH.
        flush_override: msync.then_some(FlushKind::Msync),
    };
    let dev = if s.test == Test::Write {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.to_string()),
            _ => {}
        }
        MmapDevice::create(&path, s.cell.file, &options)
    } else {
        MmapDevice::open(&path, &options)
    }
    .map_err(|e| e.to_string())?;
    if !msync && dev.info().flush == FlushKind::Msync {
        return Err(
            "the mapping persists with msync (no cache-flush instruction, or AMBER_FLUSH=msync); \
             use --mode mmap-msync for that"
                .into(),
        );
    }
    Ok(dev)
}

/// The untimed check of a load test: the loads' sum must match the data's.
fn check_sum(s: &Step, sum: u64) -> Result<(), String> {
    let expected = s.data[..s.cell.bytes() as usize]
        .chunks_exact(8)
        .fold(0u64, |acc, w| {
            acc.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")))
        });
    if sum != expected {
        return Err(format!(
            "the loads summed to {sum:#x}, the data sums to {expected:#x}"
        ));
    }
    Ok(())
}

/// The untimed check: the file's first `cell.bytes()` bytes must equal the
/// expected data, read back chunk by chunk through `read`.
fn verify(
    s: &Step,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<(), String>,
) -> Result<(), String> {
    let total = s.cell.bytes();
    let mut chunk = vec![0u8; VERIFY_CHUNK.min(total) as usize];
    for off in (0..total).step_by(VERIFY_CHUNK as usize) {
        let len = VERIFY_CHUNK.min(total - off) as usize;
        read(off, &mut chunk[..len])?;
        let want = &s.data[off as usize..off as usize + len];
        if let Some(i) = chunk[..len].iter().zip(want).position(|(a, b)| a != b) {
            return Err(format!(
                "verification failed: byte {} differs from the data written",
                off + i as u64
            ));
        }
    }
    Ok(())
}

fn record(cfg: &Config, lane: &Lane, cell: Cell, test: Test, s: &Samples) -> Record {
    let summary = summarize(&s.mib_s);
    let mean = s.mib_s.iter().sum::<f64>() / s.mib_s.len() as f64;
    let mut note = format!(
        "mean={mean:.1} mode={} test={} file_bytes={} record_bytes={}",
        lane.mode_name(),
        test.name(),
        cell.file,
        cell.record
    );
    if !s.write_amp.is_empty() {
        note.push_str(&format!(
            " write_amplification={:.3}",
            summarize(&s.write_amp).median
        ));
    }
    let (policy, preset) = match lane {
        Lane::Dir { .. } => ("-".to_string(), "-".to_string()),
        Lane::Amber(t) => (t.policy(), cfg.preset.clone()),
        Lane::Bare(t) => (t.policy(), cfg.preset.clone()),
    };
    Record {
        benchmark: "iozone".into(),
        target: lane.label(),
        policy,
        preset,
        threads: 1,
        metric: format!("{} {}", test.name(), cell.label()),
        value: summary.median,
        unit: "MiB/s".into(),
        summary,
        notes: vec![note],
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;

    fn step<'a>(test: Test, order: &'a [u64], data: &'a [u8], seed: u64) -> Step<'a> {
        Step {
            test,
            cell: Cell {
                file: 64 << 10,
                record: 4 << 10,
            },
            order,
            data,
            seed,
            sync: Sync::None,
        }
    }

    #[test]
    fn generated_stores_write_the_same_bytes_as_the_dram_image() {
        let mut images = Images::default();
        let image = images.get(4096, 77).to_vec();
        let words: Vec<u8> = (0..512)
            .flat_map(|i| amber_pmem::pattern_word(77, i).to_le_bytes())
            .collect();
        assert_eq!(image, words);
    }

    #[test]
    fn msync_and_flush_writes_are_in_the_file_after_it_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let order = Test::Write.order(16, 0);
        for (mode, seed) in [
            (Mode::MmapMsync, 1),
            (Mode::MmapFlush, 2),
            (Mode::LoadStore, 3),
            (Mode::Nt, 4),
        ] {
            let data = amber_sim::rng::bytes(seed, 64 << 10);
            map_step(dir.path(), mode, &step(Test::Write, &order, &data, seed)).unwrap();
            // The mapping is gone; a fresh open must see every record.
            let on_disk = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
            assert!(on_disk == data, "{} lost data", mode.name());
        }
    }

    #[test]
    fn a_read_of_data_that_was_not_written_fails_verification() {
        let dir = tempfile::tempdir().unwrap();
        let written = amber_sim::rng::bytes(5, 64 << 10);
        let order = Test::Write.order(16, 0);
        map_step(
            dir.path(),
            Mode::MmapFlush,
            &step(Test::Write, &order, &written, 5),
        )
        .unwrap();
        let other = amber_sim::rng::bytes(6, 64 << 10);
        for mode in [Mode::MmapFlush, Mode::LoadStore] {
            let err = map_step(dir.path(), mode, &step(Test::Read, &order, &other, 6)).unwrap_err();
            assert!(err.contains("sum") || err.contains("verification"), "{err}");
        }
        let fs = PosixTarget::new(dir.path().to_path_buf(), DropCaches::None);
        let err = file_step(&fs, &step(Test::Read, &order, &other, 6)).unwrap_err();
        assert!(err.contains("verification"), "{err}");
    }
}
