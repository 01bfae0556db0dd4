//! `amberfs bench seeds`: each paper's headline experiment, reproduced at a
//! smaller scale on this machine in one command, and a report of what the
//! paper claimed beside what we measured (issue 8).
//!
//! The experiments are the ones BENCHMARKS.md records, run through the
//! suites' own library entries (`compare::run_specs`, `recovery::run`,
//! `legacy::run_study`, `iozone::run`), so a seed measures exactly what the
//! full figure does: interleaved repetitions, medians, verified data.
//! [`experiments`] says what each one runs, [`claims`] holds every paper
//! claim with how it is measured and why our figure differs, and
//! [`report`] writes `results.md`. Every experiment also runs the `amber`
//! policy whenever this build has one (`amber_core::data::POLICIES`).

pub mod claims;
pub mod experiments;
pub mod report;

use crate::record::{Record, RunInfo};
use std::path::PathBuf;
use std::time::Duration;

/// One paper's headline experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    Hinfs,
    Lawn,
    Hunter,
    Legacy,
    Iozone,
}

impl Experiment {
    pub const ALL: [Experiment; 5] = [
        Experiment::Hinfs,
        Experiment::Lawn,
        Experiment::Hunter,
        Experiment::Legacy,
        Experiment::Iozone,
    ];

    /// The name `--only` takes.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Hinfs => "hinfs",
            Experiment::Lawn => "lawn",
            Experiment::Hunter => "hunter",
            Experiment::Legacy => "legacy",
            Experiment::Iozone => "iozone",
        }
    }

    /// The paper, as the report names it (the files in ../shared/papers/).
    pub fn paper(self) -> &'static str {
        match self {
            Experiment::Hinfs => "HiNFS (hinfs.txt)",
            Experiment::Lawn => "LAWN (lawn.txt)",
            Experiment::Hunter => "HUNTER (hunter.txt)",
            Experiment::Legacy => "Legacy-FS study (legacy-fs-on-nvm-study.txt)",
            Experiment::Iozone => "NVMFS-IOzone (nvmfs-iozone.txt)",
        }
    }

    /// Parses `--only` names, comma-separated in the CLI; refuses unknown
    /// ones by listing the known.
    pub fn parse_list(names: &[String]) -> Result<Vec<Experiment>, String> {
        let mut out = Vec::new();
        for n in names {
            let e = Experiment::ALL
                .into_iter()
                .find(|e| e.name() == n.trim())
                .ok_or_else(|| {
                    let all: Vec<&str> = Experiment::ALL.iter().map(|e| e.name()).collect();
                    format!("--only: unknown experiment {n:?}; use {}", all.join(", "))
                })?;
            if !out.contains(&e) {
                out.push(e);
            }
        }
        Ok(out)
    }
}

/// The policy the goals are about; measured when the build has it.
pub const AMBER_POLICY: &str = "amber";

/// Whether this build has the `amber` policy: every experiment adds it as
/// a target then, so the command needs no change once it lands.
pub fn amber_in_build() -> bool {
    amber_core::data::POLICIES.contains(&AMBER_POLICY)
}

/// How big each experiment is. [`Scale::quick`] and [`Scale::full`] are
/// what the command runs; tests build smaller ones field by field.
#[derive(Debug, Clone)]
pub struct Scale {
    /// Timed repetitions per target (medians), and untimed ones first.
    pub reps: usize,
    pub warmup: usize,
    /// Each Amber or bare pool of the workload runs.
    pub pool_size: u64,
    /// Operations per repetition of fileserver, varmail and webproxy.
    pub filebench_ops: u64,
    /// Each filebench-like workload's file count is its default divided
    /// by this (1: the papers' set as scaled in `workload/`).
    pub file_set_divisor: u64,
    /// HiNFS's latency sweep (webproxy): write latency per line, ns.
    pub latencies_ns: Vec<u64>,
    /// LAWN's random-write sizes, bytes.
    pub lawn_sizes: Vec<u64>,
    /// Each LAWN repetition's length, its preallocated file, and each
    /// pool (the zone is a share of it: 512 MiB as lawn/commands.sh).
    pub lawn_duration: Duration,
    pub lawn_file: u64,
    pub lawn_pool: u64,
    /// HUNTER: the file one thread populates, and the data a recovered
    /// pool holds.
    pub populate_file: u64,
    pub recovery_data: u64,
    /// The legacy study: each loop device, and operations per repetition.
    pub legacy_device: u64,
    pub legacy_ops: u64,
    /// NVMFS-IOzone: the file, and the record sizes.
    pub iozone_file: u64,
    pub iozone_records: Vec<u64>,
}

impl Scale {
    /// Under five minutes on the project's 2-vCPU machine.
    pub fn quick() -> Scale {
        Scale {
            reps: 3,
            warmup: 1,
            pool_size: 512 << 20,
            filebench_ops: 8_000,
            file_set_divisor: 4,
            latencies_ns: vec![100, 800],
            lawn_sizes: vec![128, 1 << 10, 4 << 10],
            lawn_duration: Duration::from_millis(200),
            lawn_file: 32 << 20,
            lawn_pool: 512 << 20,
            populate_file: 256 << 20,
            recovery_data: 256 << 20,
            legacy_device: crate::legacy::MIN_DEVICE,
            legacy_ops: 8_000,
            iozone_file: 16 << 20,
            iozone_records: vec![4 << 10, 64 << 10],
        }
    }

    /// The seeds at the scale BENCHMARKS.md's figures used, where a run
    /// stays in this machine's memory and a sitting.
    pub fn full() -> Scale {
        Scale {
            reps: 5,
            warmup: 1,
            pool_size: 2 << 30,
            // At 20,000 a buffered fileserver repetition took ~0.15 s and
            // its medians of five swung 0.65x-1.6x between runs (25% RSD);
            // at 100,000, 4-11%.
            filebench_ops: 60_000,
            file_set_divisor: 1,
            latencies_ns: vec![50, 100, 200, 400, 800],
            lawn_sizes: vec![128, 256, 512, 1 << 10, 2 << 10, 4 << 10],
            lawn_duration: Duration::from_millis(400),
            lawn_file: 32 << 20,
            lawn_pool: 512 << 20,
            populate_file: 1 << 30,
            recovery_data: 2 << 30,
            legacy_device: 3 << 30,
            legacy_ops: 20_000,
            iozone_file: 64 << 20,
            iozone_records: vec![4 << 10, 64 << 10, 1 << 20],
        }
    }
}

/// What to run and where to write.
#[derive(Debug, Clone)]
pub struct Config {
    pub experiments: Vec<Experiment>,
    pub scale: Scale,
    /// `quick` or `full`, as the report names the mode.
    pub mode: String,
    /// Where pools, loop images and iozone's directory go (a tmpfs).
    pub pool_dir: PathBuf,
    /// `results.md`; plots go to `plots_dir`, JSON to `records_dir`.
    pub out: PathBuf,
    pub plots_dir: PathBuf,
    pub records_dir: PathBuf,
    /// The command line and machine facts every JSON file carries.
    pub info: RunInfo,
    /// What the run was expected to take ([`estimate`]), for the report.
    pub estimate: Duration,
}

/// Which records the goals compare `amber` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Not a workload (recovery times).
    None,
    /// This metric (throughput, bandwidth).
    Metric(&'static str),
    /// Every metric (iozone: one per test and cell).
    EveryMetric,
}

/// One suite run of an experiment and its records.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub experiment: Experiment,
    /// Names the JSON file and what claims select, e.g. `lawn-randwrite-128B`.
    pub name: String,
    /// What ran, one line for the report.
    pub what: String,
    pub goal: Goal,
    pub records: Vec<Record>,
}

/// What happened to one experiment.
#[derive(Debug, Clone)]
pub enum Status {
    Done,
    /// Could not run here (e.g. no root for loop devices): not a failure.
    Skipped(String),
    /// Not asked for (`--only`).
    NotSelected,
    Failed(String),
}

/// Everything the report is written from.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub runs: Vec<RunResult>,
    pub status: Vec<(Experiment, Status, Duration)>,
    /// Plot files written (relative names are resolved by the report).
    pub plots: Vec<(Experiment, PathBuf)>,
    pub amber: bool,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn status(&self, e: Experiment) -> &Status {
        self.status
            .iter()
            .find(|(x, _, _)| *x == e)
            .map(|(_, s, _)| s)
            .unwrap_or(&Status::NotSelected)
    }

    pub fn failed(&self) -> bool {
        self.status
            .iter()
            .any(|(_, s, _)| matches!(s, Status::Failed(_)))
    }
}

/// Runs the chosen experiments in order, writing each run's records and
/// plots as it goes; `progress` hears one line per finished run. An
/// experiment that fails is recorded as failed and the rest still run.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Outcome, String> {
    for d in [&cfg.plots_dir, &cfg.records_dir] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    if !cfg.pool_dir.is_dir() {
        return Err(format!(
            "pool directory {} is not a directory",
            cfg.pool_dir.display()
        ));
    }
    let start = std::time::Instant::now();
    let mut out = Outcome {
        runs: Vec::new(),
        status: Vec::new(),
        plots: Vec::new(),
        amber: amber_in_build(),
        elapsed: Duration::ZERO,
    };
    for e in Experiment::ALL {
        if !cfg.experiments.contains(&e) {
            out.status.push((e, Status::NotSelected, Duration::ZERO));
            continue;
        }
        let began = std::time::Instant::now();
        progress(format!("{}: starting", e.name()));
        let status = match experiments::run(e, cfg, progress) {
            Ok(experiments::Ran::Skipped(why)) => Status::Skipped(why),
            Ok(experiments::Ran::Runs(runs)) => {
                match experiments::save(e, cfg, &runs) {
                    Ok(plots) => out.plots.extend(plots.into_iter().map(|p| (e, p))),
                    Err(err) => progress(format!("{}: plots or records: {err}", e.name())),
                }
                out.runs.extend(runs);
                Status::Done
            }
            Err(err) => Status::Failed(err),
        };
        let took = began.elapsed();
        progress(format!(
            "{}: {} in {:.0} s",
            e.name(),
            label(&status),
            took.as_secs_f64()
        ));
        out.status.push((e, status, took));
    }
    out.elapsed = start.elapsed();
    Ok(out)
}

fn label(s: &Status) -> &str {
    match s {
        Status::Done => "done",
        Status::Skipped(_) => "skipped",
        Status::NotSelected => "not selected",
        Status::Failed(_) => "FAILED",
    }
}

/// The expected duration, printed before a run starts: what each
/// experiment took (seconds) on the project's shared 2-vCPU machine
/// (`--quick` about 1 minute on 2026-11-22; the full mode 7.5 minutes on
/// 2026-11-22 with 60,000 operations per filebench-like repetition),
/// scaled by the repetitions asked for (each adds a round to the
/// warm-up's). Other work on the machine stretches it: another run of the
/// full mode, beside a build, took 9.0 minutes.
pub fn estimate(
    experiments: &[Experiment],
    full: bool,
    reps: usize,
    scale_reps: usize,
) -> Duration {
    let secs: f64 = experiments
        .iter()
        .map(|e| {
            let (quick, full_s) = match e {
                Experiment::Hinfs => (17.0, 210.0),
                Experiment::Lawn => (20.0, 92.0),
                Experiment::Hunter => (5.0, 76.0),
                Experiment::Legacy => (10.0, 34.0),
                Experiment::Iozone => (5.0, 37.0),
            };
            if full {
                full_s
            } else {
                quick
            }
        })
        .sum();
    let factor = (reps.max(1) as f64 + 1.0) / (scale_reps.max(1) as f64 + 1.0);
    Duration::from_secs_f64(secs * factor)
}
