//! `amberfs bench seeds`: each paper's headline experiment at a smaller
//! scale, and `docs/results.md` comparing the papers' claims with what this
//! machine measured (amber_bench::seeds does the work).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use amber_bench::seeds::{self, report, Experiment, Scale};

use crate::common::{CliError, CliResult};
use crate::output::{note, outln};

#[derive(clap::Args)]
pub struct Args {
    /// Smaller files, fewer operations and sizes: under 5 minutes on a
    /// 2-vCPU machine. Without it, the figures' scale (the estimate is
    /// printed before it starts).
    #[arg(long)]
    quick: bool,
    /// The report; plots go to `plots/` and JSON records to
    /// `results/seeds/` beside it.
    #[arg(long, default_value = "docs/results.md")]
    out: PathBuf,
    /// Timed repetitions per target (default 3 with --quick, else 5).
    #[arg(long)]
    reps: Option<usize>,
    /// Only these experiments (comma-separated): hinfs, lawn, hunter,
    /// legacy, iozone.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Where pools, loop-device images and iozone's directory are made (a
    /// tmpfs: PM is emulated in memory).
    #[arg(long, default_value = "/dev/shm")]
    pool_dir: PathBuf,
}

/// Most repetitions: each one reruns every target of every experiment.
const MAX_REPS: usize = 100;

/// The build's commit, when this runs inside its git checkout.
fn commit() -> Option<String> {
    let out = Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn minutes(d: Duration) -> String {
    format!("{:.1} min", d.as_secs_f64() / 60.0)
}

pub fn run(a: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    if let Some(e) = emulate {
        return Err(CliError::new(format!(
            "--emulate {e}: bench seeds runs each experiment under the emulation its paper \
             used (pcm for hinfs, lawn and iozone, optane and dram for hunter, dram for \
             legacy); run it without --emulate"
        )));
    }
    let experiments = if a.only.is_empty() {
        Experiment::ALL.to_vec()
    } else {
        Experiment::parse_list(&a.only).map_err(CliError::new)?
    };
    let mut scale = if a.quick {
        Scale::quick()
    } else {
        Scale::full()
    };
    let default_reps = scale.reps;
    if let Some(r) = a.reps {
        if r == 0 || r > MAX_REPS {
            return Err(CliError::new(format!("--reps must be 1 to {MAX_REPS}")));
        }
        scale.reps = r;
    }
    let estimate = seeds::estimate(&experiments, !a.quick, scale.reps, default_reps);
    let base = a.out.parent().unwrap_or(Path::new(".")).to_path_buf();
    let cfg = seeds::Config {
        experiments,
        mode: if a.quick { "quick" } else { "full" }.into(),
        pool_dir: a.pool_dir,
        plots_dir: base.join("plots"),
        records_dir: base.join("results").join("seeds"),
        out: a.out,
        info: super::run_info(),
        estimate,
        scale,
    };
    let names: Vec<&str> = cfg.experiments.iter().map(|e| e.name()).collect();
    note(format_args!(
        "bench seeds: {} ({} mode), expected to take about {}",
        names.join(", "),
        cfg.mode,
        minutes(estimate)
    ));
    // Before the run: its own outputs may be tracked files it rewrites,
    // which would mark the build dirty.
    let build = commit();
    let outcome = seeds::run(&cfg, &mut |line| note(format_args!("bench seeds: {line}")))
        .map_err(CliError::new)?;
    let md = report::render(&cfg, &outcome, build.as_deref());
    std::fs::write(&cfg.out, md)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", cfg.out.display())))?;
    outln!("wrote {}", cfg.out.display())?;
    outln!("elapsed: {}", minutes(outcome.elapsed))?;
    if outcome.failed() {
        return Err(CliError::new(format!(
            "an experiment failed; {} says which and why",
            cfg.out.display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}
