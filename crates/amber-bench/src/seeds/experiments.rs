//! What each seed runs: the headline command of each paper's figures in
//! BENCHMARKS.md (docs/results/hinfs-policy/commands.sh, lawn/commands.sh,
//! hunter/commands.sh, bench/workbench-figures.sh), at [`Scale`]'s size,
//! under the emulator that paper's experiment used, with `amberfs:amber`
//! added to every run's targets when the build has it.

use super::{amber_in_build, Config, Experiment, Goal, RunResult, Scale, AMBER_POLICY};
use crate::compare::{self, Plan};
use crate::iozone::{self, matrix::size_label, Matrix, Mode, Test};
use crate::legacy;
use crate::plot::{self, bars::bars, lines::lines, lines::XParam};
use crate::record::{Record, Results};
use crate::recovery;
use crate::spec::{SpecOptions, TargetSpec};
use crate::target::DropCaches;
use crate::workload::{self, Fsync, Limit, Params};
use std::path::PathBuf;

/// What an experiment gave.
pub enum Ran {
    Runs(Vec<RunResult>),
    /// It cannot run on this machine, and why.
    Skipped(String),
}

/// The seed of every run's access pattern and data (the figures' own).
const SEED: u64 = 42;

/// `targets`, then `amberfs:amber` when this build has the policy.
fn with_amber(targets: &[&str]) -> Vec<String> {
    let mut t: Vec<String> = targets.iter().map(|s| s.to_string()).collect();
    if amber_in_build() {
        t.push(format!("amberfs:{AMBER_POLICY}"));
    }
    t
}

/// Runs experiment `e` at `cfg`'s scale.
pub fn run(e: Experiment, cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Ran, String> {
    match e {
        Experiment::Hinfs => hinfs(cfg, progress).map(Ran::Runs),
        Experiment::Lawn => lawn(cfg, progress).map(Ran::Runs),
        Experiment::Hunter => hunter(cfg, progress).map(Ran::Runs),
        Experiment::Legacy => legacy_study(cfg, progress),
        Experiment::Iozone => nvmfs_iozone(cfg, progress).map(Ran::Runs),
    }
}

/// A workload's defaults with the scale's file set and operation count.
fn filebench(name: &str, s: &Scale) -> Result<Params, String> {
    let d = workload::defaults(name)?;
    Ok(Params {
        files: (d.files / s.file_set_divisor.max(1)).max(2),
        limit: Limit::Ops(s.filebench_ops),
        ..d
    })
}

/// One `bench compare` run of an experiment: `targets` interleaved under
/// `preset`, the first the reference of the ratios, one thread.
struct CompareRun<'a> {
    experiment: Experiment,
    /// `RunResult::name`.
    name: String,
    workload: &'a str,
    params: Params,
    targets: &'a [String],
    preset: &'a str,
    pool_size: u64,
    goal: Goal,
}

fn compare_run(
    cfg: &Config,
    run: CompareRun,
    progress: &mut dyn FnMut(String),
) -> Result<RunResult, String> {
    let CompareRun {
        experiment: e,
        name,
        workload,
        params,
        targets,
        preset,
        pool_size,
        goal,
    } = run;
    workload::validate(workload, &params)?;
    let plan = Plan {
        workload: workload.to_string(),
        params: params.clone(),
        threads: vec![params.threads],
        reps: cfg.scale.reps,
        warmup: cfg.scale.warmup,
    };
    let specs = targets
        .iter()
        .map(|t| TargetSpec::parse(t))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = SpecOptions {
        pool_dir: cfg.pool_dir.clone(),
        pool_size,
        preset: preset.to_string(),
        drop_caches: DropCaches::None,
    };
    let rows = compare::run_specs(&plan, &specs, &opts, &mut |_| {})
        .map_err(|err| format!("{name}: {err}"))?;
    let what = format!(
        "`bench compare --workload {workload}` under `{preset}`, targets {}; {}; {} \
         repetitions after {} warm-up",
        targets.join(", "),
        params.describe(),
        cfg.scale.reps,
        cfg.scale.warmup
    );
    progress(format!("{}: {name} done", e.name()));
    Ok(RunResult {
        experiment: e,
        name,
        what,
        goal,
        records: rows.into_iter().map(|r| r.record).collect(),
    })
}

/// HiNFS (docs/results/hinfs-policy/commands.sh): fileserver and varmail
/// under `pcm`, `hinfs` against `direct`; then Figure 12's sweep of the
/// write latency per line (webproxy, the workload of the paper's numbers).
fn hinfs(cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Vec<RunResult>, String> {
    let s = &cfg.scale;
    let targets = with_amber(&["amberfs:direct", "amberfs:hinfs"]);
    let mut runs = Vec::new();
    for w in ["fileserver", "varmail"] {
        runs.push(compare_run(
            cfg,
            CompareRun {
                experiment: Experiment::Hinfs,
                name: format!("hinfs-{w}-pcm"),
                workload: w,
                params: filebench(w, s)?,
                targets: &targets,
                preset: "pcm",
                pool_size: s.pool_size,
                goal: Goal::Metric("throughput"),
            },
            progress,
        )?);
    }
    for &ns in &s.latencies_ns {
        runs.push(compare_run(
            cfg,
            CompareRun {
                experiment: Experiment::Hinfs,
                name: format!("hinfs-webproxy-lat{ns}"),
                workload: "webproxy",
                params: filebench("webproxy", s)?,
                targets: &targets,
                preset: &format!("lat={ns}ns,per=line,bw=1GB/s"),
                pool_size: s.pool_size,
                goal: Goal::Metric("throughput"),
            },
            progress,
        )?);
    }
    Ok(runs)
}

/// LAWN (docs/results/lawn/commands.sh, Figures 5 and 6): random
/// fsync'd writes of each size into one preallocated file under `pcm`,
/// `lawn` against `nova` (the paper's baseline), `cow` and `finelog` (and
/// `direct`, not atomic); and 128 B writes under `dram`, where what is
/// left is the fences and the CPU's work.
fn lawn(cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Vec<RunResult>, String> {
    let s = &cfg.scale;
    let targets = with_amber(&[
        "amberfs:nova",
        "amberfs:cow",
        "amberfs:finelog",
        "amberfs:direct",
        "amberfs:lawn",
    ]);
    let mut runs = Vec::new();
    let sizes = s.lawn_sizes.iter().map(|&size| (size, "pcm"));
    for (size, preset) in sizes.chain([(128, "dram")]) {
        let params = Params {
            file_size: s.lawn_file,
            io_size: size,
            limit: Limit::Duration(s.lawn_duration),
            fsync: Fsync::Every,
            seed: SEED,
            ..workload::defaults("randwrite")?
        };
        runs.push(compare_run(
            cfg,
            CompareRun {
                experiment: Experiment::Lawn,
                name: lawn_run(size, preset),
                workload: "randwrite",
                params,
                targets: &targets,
                preset,
                pool_size: s.lawn_pool,
                goal: Goal::Metric("throughput"),
            },
            progress,
        )?);
    }
    Ok(runs)
}

/// The name of LAWN's run of `size`-byte writes under `preset` (`pcm`'s
/// carry no suffix: they are the paper's figures).
pub(super) fn lawn_run(size: u64, preset: &str) -> String {
    match preset {
        "pcm" => format!("lawn-randwrite-{}", size_label(size)),
        _ => format!("lawn-randwrite-{}-{preset}", size_label(size)),
    }
}

/// A pool for one file of `bytes` plus HUNTER's metadata and the inode
/// tables (hunter/commands.sh's `pool`).
fn populate_pool(bytes: u64) -> u64 {
    (bytes + bytes / 8 + (96 << 20)).next_multiple_of(2 << 20)
}

/// HUNTER (docs/results/hunter/commands.sh): one thread populating one
/// file in 4 KiB writes under `optane` against the bare copy and `nova` (Figures 6
/// and 10), and mount time after a crash (§IV-E) under `dram`.
fn hunter(cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Vec<RunResult>, String> {
    let s = &cfg.scale;
    let targets = with_amber(&[
        "bare",
        "amberfs:hunter",
        "amberfs:hunter-sync",
        "amberfs:nova",
        "amberfs:direct",
    ]);
    let params = Params {
        file_size: s.populate_file,
        seed: SEED,
        ..workload::defaults("populate")?
    };
    let mut runs = vec![compare_run(
        cfg,
        CompareRun {
            experiment: Experiment::Hunter,
            name: "hunter-populate-optane".into(),
            workload: "populate",
            params,
            targets: &targets,
            preset: "optane",
            pool_size: populate_pool(s.populate_file),
            goal: Goal::Metric("bandwidth"),
        },
        progress,
    )?];
    let rcfg = recovery::Config {
        data: s.recovery_data,
        file: s.recovery_data.min(1 << 30),
        io: 1 << 20,
        reps: s.reps,
        pool_dir: cfg.pool_dir.clone(),
        pool_size: recovery::default_pool_size(s.recovery_data),
        preset: "dram".into(),
    };
    let rtargets = with_amber(&["amberfs:hunter", "amberfs:direct"]);
    let rows = recovery::run(&rcfg, &rtargets).map_err(|e| format!("hunter-recovery: {e}"))?;
    progress("hunter: hunter-recovery-dram done".into());
    runs.push(RunResult {
        experiment: Experiment::Hunter,
        name: "hunter-recovery-dram".into(),
        what: format!(
            "`bench recovery` under `dram`, targets {}: {} of data in files of up to 1 GiB, \
             1 MiB writes, {} clean and crash mounts each",
            rtargets.join(", "),
            crate::record::human_bytes(s.recovery_data),
            s.reps
        ),
        goal: Goal::None,
        records: rows.into_iter().map(|r| r.record).collect(),
    });
    Ok(runs)
}

/// The kernel file systems the legacy seed runs: the study's plain ext2,
/// ext4 and xfs (the tuned variants are `bench legacy`'s).
const LEGACY_FILESYSTEMS: [&str; 3] = ["ext2", "ext4", "xfs-ag4"];

/// The legacy study (`bench legacy`): fileserver, webproxy and webserver on
/// ext2/ext4/xfs over RAM-backed loop devices against Amber `direct`
/// (the in-place design the study holds up), all on DRAM.
fn legacy_study(cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Ran, String> {
    if let Some(why) = legacy::unavailable() {
        return Ok(Ran::Skipped(why));
    }
    if let Err(why) = legacy::ensure_tools() {
        return Ok(Ran::Skipped(why));
    }
    let s = &cfg.scale;
    let mut amber = vec![legacy::AMBER_POLICY.to_string(), "hinfs".to_string()];
    if amber_in_build() {
        amber.push(AMBER_POLICY.into());
    }
    let workloads = ["fileserver", "webproxy", "webserver"];
    // The smallest file set of the three, so one override fits all.
    let files = workloads
        .iter()
        .map(|w| filebench(w, s).map(|p| p.files))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .min();
    let lcfg = legacy::Config {
        dir: cfg.pool_dir.clone(),
        device_size: s.legacy_device,
        pool_size: s.pool_size,
        preset: "dram".into(),
        filesystems: LEGACY_FILESYSTEMS.iter().map(|f| f.to_string()).collect(),
        workloads: workloads.iter().map(|w| w.to_string()).collect(),
        files: files.filter(|_| s.file_set_divisor > 1),
        ops: Some(s.legacy_ops),
        threads: 1,
        reps: s.reps,
        warmup: s.warmup,
        baseline: format!("amberfs:{}", legacy::AMBER_POLICY),
        amber: amber.clone(),
    };
    let rows = legacy::run_study(&lcfg).map_err(|e| format!("legacy: {e}"))?;
    progress("legacy: legacy-dram done".into());
    Ok(Ran::Runs(vec![RunResult {
        experiment: Experiment::Legacy,
        name: "legacy-dram".into(),
        what: format!(
            "`bench legacy` under `dram`: {} on {} RAM-backed loop devices of {} beside \
             amberfs:{} (the reference); {} operations per repetition{}, {} repetitions after \
             {} warm-up, caches dropped between runs",
            workloads.join(", "),
            LEGACY_FILESYSTEMS.join(", "),
            crate::record::human_bytes(s.legacy_device),
            amber.join(", amberfs:"),
            s.legacy_ops,
            lcfg.files
                .map(|f| format!(", {f} files"))
                .unwrap_or_default(),
            s.reps,
            s.warmup
        ),
        goal: Goal::Metric("throughput"),
        records: rows.into_iter().map(|r| r.record).collect(),
    }]))
}

/// NVMFS-IOzone (bench/workbench-figures.sh's msync run): writes and reads
/// through a mapping persisted by msync or by CPU flushes, and the
/// load/store and non-temporal paths, on a tmpfs directory; beside them
/// the Amber library under `pcm`.
fn nvmfs_iozone(cfg: &Config, progress: &mut dyn FnMut(String)) -> Result<Vec<RunResult>, String> {
    let s = &cfg.scale;
    let dir = cfg
        .pool_dir
        .join(format!("amber-seeds-iozone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut targets = vec![TargetSpec::Dir { path: dir.clone() }];
    let amber = with_amber(&["amberfs:direct", "amberfs:hinfs"]);
    for t in &amber {
        targets.push(TargetSpec::parse(t)?);
    }
    let modes = [Mode::MmapMsync, Mode::MmapFlush, Mode::LoadStore, Mode::Nt];
    let tests = [Test::Write, Test::Rewrite, Test::Read, Test::RandomWrite];
    let icfg = iozone::Config {
        targets,
        modes: modes.to_vec(),
        matrix: Matrix::new(vec![s.iozone_file], s.iozone_records.clone())?,
        // In IOzone's order, as `bench iozone` puts them.
        tests: Test::ALL
            .into_iter()
            .filter(|t| tests.contains(t))
            .collect(),
        trials: s.reps,
        cleanup: DropCaches::None,
        sync: iozone::Sync::None,
        preset: "pcm".into(),
        pool: cfg
            .pool_dir
            .join(format!("amber-seeds-iozone-{}.pool", std::process::id())),
        seed: SEED,
    };
    let result = iozone::run(&icfg, &mut |_, _| {});
    let _ = std::fs::remove_dir_all(&dir);
    let records = result.map_err(|e| format!("iozone: {e}"))?;
    progress("iozone: iozone-pcm done".into());
    Ok(vec![RunResult {
        experiment: Experiment::Iozone,
        name: "iozone-pcm".into(),
        what: format!(
            "`bench iozone` on a tmpfs directory through {} and on {} (the library, `pcm`): \
             a {} file, records {}, tests {}, {} trials",
            modes.map(|m| m.name()).join(", "),
            amber.join(", "),
            size_label(s.iozone_file),
            s.iozone_records
                .iter()
                .map(|r| size_label(*r))
                .collect::<Vec<_>>()
                .join(", "),
            icfg.tests
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", "),
            s.reps
        ),
        goal: Goal::EveryMetric,
        records,
    }])
}

/// The records of `runs` whose metric is `metric`.
fn metric(runs: &[RunResult], prefix: &str, metric: &str) -> Vec<Record> {
    runs.iter()
        .filter(|r| r.name.starts_with(prefix))
        .flat_map(|r| r.records.iter())
        .filter(|r| r.metric == metric)
        .cloned()
        .collect()
}

/// One figure per experiment's headline: (file stem, records, kind).
enum Figure {
    /// Bars divided by the named target, or by each group's first record
    /// (the one every suite measures first).
    Bars(Option<&'static str>),
    Lines(XParam),
}

/// IOzone's figure: one group per test at the smallest record (4 KiB),
/// every lane.
fn iozone_records(runs: &[RunResult]) -> Vec<Record> {
    runs.iter()
        .flat_map(|r| r.records.iter())
        .filter(|r| r.note("record_bytes").as_deref() == Some("4096"))
        .cloned()
        .map(|mut r| {
            r.benchmark = r.metric.clone();
            // A lane's name carries the directory's path; the
            // legend needs only the data path.
            if r.policy == "-" {
                if let Some(mode) = r.target.split(':').next() {
                    r.target = format!("{mode} (tmpfs)");
                }
            }
            r
        })
        .collect()
}

/// LAWN's figures are its `pcm` runs (the `dram` one would put a second
/// point at 128 B).
fn under_pcm(records: Vec<Record>) -> Vec<Record> {
    records.into_iter().filter(|r| r.preset == "pcm").collect()
}

fn figures(e: Experiment, runs: &[RunResult]) -> Vec<(String, String, Vec<Record>, Figure)> {
    let fig = |stem: &str, title: &str, records: Vec<Record>, f: Figure| {
        (stem.to_string(), title.to_string(), records, f)
    };
    match e {
        Experiment::Hinfs => vec![
            fig(
                "seeds-hinfs-workloads",
                "HiNFS: fileserver and varmail under pcm, relative to direct",
                [
                    metric(runs, "hinfs-fileserver", "throughput"),
                    metric(runs, "hinfs-varmail", "throughput"),
                ]
                .concat(),
                Figure::Bars(Some("amberfs:direct")),
            ),
            fig(
                "seeds-hinfs-latency",
                "HiNFS: webproxy over the emulated write latency, ops/s",
                metric(runs, "hinfs-webproxy-lat", "throughput"),
                Figure::Lines(XParam::Latency),
            ),
        ],
        Experiment::Lawn => vec![
            fig(
                "seeds-lawn-throughput",
                "LAWN: fsync'd random writes under pcm, ops/s",
                under_pcm(metric(runs, "lawn-", "throughput")),
                Figure::Lines(XParam::IoSize),
            ),
            fig(
                "seeds-lawn-bytes",
                "LAWN: PM bytes written per write request",
                under_pcm(metric(runs, "lawn-", "pm_bytes_per_write")),
                Figure::Lines(XParam::IoSize),
            ),
        ],
        Experiment::Hunter => vec![
            fig(
                "seeds-hunter-populate",
                "HUNTER: populating one file in 4 KiB writes, optane, relative to bare",
                metric(runs, "hunter-populate", "bandwidth"),
                Figure::Bars(Some("bare")),
            ),
            fig(
                "seeds-hunter-recovery",
                "HUNTER: mount after a crash, relative to hunter",
                metric(runs, "hunter-recovery", "mount_crash_ms"),
                Figure::Bars(Some("amberfs:hunter")),
            ),
        ],
        Experiment::Legacy => vec![fig(
            "seeds-legacy",
            "Legacy study: kernel file systems on RAM and Amber, relative to direct",
            metric(runs, "legacy", "throughput"),
            Figure::Bars(Some("amberfs:direct")),
        )],
        Experiment::Iozone => {
            let records = iozone_records(runs);
            vec![(
                "seeds-iozone".into(),
                "NVMFS-IOzone: 4 KiB records (Amber under pcm), MiB/s relative to mmap + msync"
                    .into(),
                records,
                // The msync lane comes first: iozone runs the modes in
                // the order given.
                Figure::Bars(None),
            )]
        }
    }
}

/// Writes each run's records as `records_dir/NAME.json` and the
/// experiment's figures as `plots_dir/seeds-*.svg/png`; returns the plots.
pub fn save(e: Experiment, cfg: &Config, runs: &[RunResult]) -> Result<Vec<PathBuf>, String> {
    for r in runs {
        let results = Results {
            run: cfg.info.clone(),
            records: r.records.clone(),
        };
        results.write_json(&cfg.records_dir.join(format!("{}.json", r.name)))?;
    }
    let mut written = Vec::new();
    for (stem, title, records, f) in figures(e, runs) {
        if records.is_empty() {
            continue;
        }
        let (scene, _) = match f {
            Figure::Bars(base) => bars(&records, base, &title)?,
            Figure::Lines(x) => lines(&records, x, &title)?,
        };
        let files = plot::write_files(&scene, &cfg.plots_dir.join(&stem))?;
        written.extend(
            files
                .into_iter()
                .filter(|p| p.extension().is_some_and(|x| x == "png")),
        );
    }
    Ok(written)
}
