//! `amberfs bench workload NAME`: one of the papers' workloads on one or
//! more targets, with the papers' parameters unless the command line says
//! otherwise. The flags here are shared with `bench compare`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use amber_bench::compare::{self, Plan, Row};
use amber_bench::progress::Progress;
use amber_bench::spec::{default_drop_caches, parse_drop_caches, SpecOptions, TargetSpec};
use amber_bench::workload::{self, Fsync, Limit, Params};

use crate::common::{parse_size, CliError, CliResult};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// fileserver, webserver, webproxy, varmail, randwrite or populate.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(workload::NAMES))]
    name: String,
    #[command(flatten)]
    run: RunArgs,
}

/// Workload parameters (defaults: the papers', scaled to this machine)
/// and how to run and report.
#[derive(clap::Args)]
pub struct RunArgs {
    /// What to measure, repeatable: amberfs:POLICY (a fresh pool), bare
    /// (a fresh pool with no file system: each write one non-temporal copy
    /// and a fence, the baseline of a file system's cost) or dir:/path (a
    /// directory on any mounted file system).
    #[arg(long = "target", required = true, value_name = "SPEC")]
    pub(super) targets: Vec<String>,
    /// Files in the set.
    #[arg(long)]
    files: Option<u64>,
    /// Mean file size (exact for randwrite and populate), e.g. 128K, 1G.
    #[arg(long)]
    file_size: Option<String>,
    /// Bytes per read or write call.
    #[arg(long)]
    io_size: Option<String>,
    /// Mean append size.
    #[arg(long)]
    append_size: Option<String>,
    /// Entries per directory.
    #[arg(long)]
    dir_width: Option<u64>,
    /// Operations per repetition, over all threads (the same work on every
    /// target).
    #[arg(long, conflicts_with = "duration")]
    ops: Option<u64>,
    /// Run each repetition this long instead, e.g. 10s or 500ms.
    #[arg(long)]
    duration: Option<String>,
    /// Thread counts, comma-separated: `1,2` runs both.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    threads: Vec<usize>,
    /// randwrite: reads per ten operations (3, 5, 7: lawn's mixes).
    #[arg(long)]
    read_ratio: Option<u32>,
    /// randwrite: this many random writes after setup, untimed (then
    /// `--read-ratio 10` times random reads of a scattered file).
    #[arg(long, value_name = "OPS")]
    prewrite: Option<u64>,
    /// randwrite and populate: `every`, `none` or N (after every Nth write).
    #[arg(long)]
    fsync: Option<String>,
    /// Seed of the access pattern and the file contents.
    #[arg(long)]
    seed: Option<u64>,
    /// Timed repetitions per target (medians are reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Untimed runs per target first.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Where the pools of amberfs: and bare targets are created.
    #[arg(long, default_value = "/dev/shm")]
    pool_dir: PathBuf,
    /// Size of each pool (amberfs: and bare targets).
    #[arg(long, default_value = "2G")]
    pool_size: String,
    /// Clean-up of dir: targets between runs: none, page, dentries or all
    /// (default: all as root, else none).
    #[arg(long)]
    drop_caches: Option<String>,
    /// Also write {run, records} as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    run_plan(&a.name, a.run, emulate)
}

fn size(flag: &str, v: &Option<String>, default: u64) -> CliResult<u64> {
    v.as_deref().map_or(Ok(default), |s| {
        parse_size(s).map_err(|e| CliError::new(format!("--{flag}: {e}")))
    })
}

/// A run's length: a duration in the one grammar (`amber_core::units`),
/// positive and under a day.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = amber_core::units::parse_duration(s).map_err(|e| format!("--duration: {e}"))?;
    if d.is_zero() || d >= Duration::from_secs(86_400) {
        return Err(format!(
            "--duration {s:?}: use a positive time under a day, e.g. 10s, 500ms or 2m"
        ));
    }
    Ok(d)
}

/// The workload's defaults with the command line's overrides applied.
fn params(name: &str, a: &RunArgs) -> CliResult<Params> {
    let d = workload::defaults(name).map_err(CliError::new)?;
    let limit = match (a.ops, &a.duration) {
        (Some(n), _) => Limit::Ops(n),
        (None, Some(s)) => Limit::Duration(parse_duration(s).map_err(CliError::new)?),
        (None, None) => d.limit,
    };
    let fsync = match &a.fsync {
        Some(s) => Fsync::parse(s).map_err(CliError::new)?,
        None => d.fsync,
    };
    let p = Params {
        files: a.files.unwrap_or(d.files),
        file_size: size("file-size", &a.file_size, d.file_size)?,
        io_size: size("io-size", &a.io_size, d.io_size)?,
        append_size: size("append-size", &a.append_size, d.append_size)?,
        dir_width: a.dir_width.unwrap_or(d.dir_width),
        threads: a.threads[0],
        limit,
        read_ratio: a.read_ratio.unwrap_or(d.read_ratio),
        prewrite: a.prewrite.unwrap_or(d.prewrite),
        fsync,
        seed: a.seed.unwrap_or(d.seed),
    };
    for &t in &a.threads {
        workload::validate(
            name,
            &Params {
                threads: t,
                ..p.clone()
            },
        )
        .map_err(CliError::new)?;
    }
    Ok(p)
}

/// Runs `name` on every target, interleaved, and reports each target's
/// medians with their ratio to the first target's.
pub fn run_plan(name: &str, a: RunArgs, emulate: Option<&str>) -> CliResult<ExitCode> {
    let preset = emulate.unwrap_or("dram").to_string();
    amber_pmem::EmulatorSpec::parse(&preset)
        .map_err(|e| CliError::new(format!("--emulate: {e}")))?;
    if a.reps == 0 {
        return Err(CliError::new("--reps must be at least 1"));
    }
    let plan = Plan {
        workload: name.to_string(),
        params: params(name, &a)?,
        threads: a.threads.clone(),
        reps: a.reps,
        warmup: a.warmup,
    };
    let specs = a
        .targets
        .iter()
        .map(|s| TargetSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CliError::new)?;
    let opts = SpecOptions {
        pool_dir: a.pool_dir.clone(),
        pool_size: size("pool-size", &Some(a.pool_size.clone()), 0)?,
        preset,
        drop_caches: match &a.drop_caches {
            Some(s) => parse_drop_caches(s).map_err(CliError::new)?,
            None => default_drop_caches(),
        },
    };
    let runs = plan.threads.len() * plan.reps * specs.len();
    let bar = Progress::new(runs as u64, &format!("{name} runs"));
    let result = compare::run_specs(&plan, &specs, &opts, &mut |_| bar.inc(1));
    bar.finish();
    let rows = result.map_err(|e| CliError::new(format!("benchmark failed: {e}")))?;
    outln!("{}", compare::rows_table(&rows))?;
    if let Some(path) = &a.json {
        write_json(path, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes rows (with their ratios) and the run's facts as JSON.
pub(super) fn write_json(path: &PathBuf, rows: &[Row]) -> CliResult<()> {
    let doc = serde_json::json!({ "run": super::run_info(), "records": rows });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| CliError::new(e.to_string()))?;
    std::fs::write(path, text)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}
