//! `amberfs crashtest`: run the crash-consistency harness on this build.
//!
//! Needs no pool: workloads run on the crash simulator's in-memory device.
//! Exposed in the CLI so a user can check the build they are about to
//! trust with data, on their own machine, the way CI checks it.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_crash::{workload_names, CrashConfig};

use crate::common::{CliError, CliResult, Shown};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Workload to run (files, dirs, rename, links, truncate, writes,
    /// appends, attrs, orphan, xattrs, fallocate, buffered, durability,
    /// writeback, atomic, atomic-random, zone-pressure, log-gc, random, or
    /// all).
    #[arg(long, default_value = "all")]
    workload: String,
    /// Seed of the random and atomic-random workloads and of crash-image
    /// sampling; the same seed replays the same run.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Stop checking after this many crash images (a quick run).
    #[arg(long)]
    max_images: Option<u64>,
    /// Save the images that fail to this directory, for replay.
    #[arg(long)]
    save_dir: Option<PathBuf>,
    /// Data policy the workloads run under (see `amberfs mount -o
    /// policy=`). It is judged by what it declares: a policy durable on
    /// return by the state before or after each operation; a buffering
    /// one by what it promises (fsync'd and O_SYNC data intact, no byte
    /// never written, namespace operations atomic); and one with atomic
    /// writes with each write's range all old or all new. The default is
    /// the default policy, the one a pool is mounted with unless told.
    #[arg(long, default_value = "amber")]
    policy: String,
    /// More mount options, comma-separated, appended to policy=NAME for
    /// the run and for every recovery (a policy's own sizing, say).
    #[arg(long, default_value = "")]
    mount_options: String,
    /// Recover every crash image under this policy instead (e.g. `direct`
    /// after `lawn`: each recovery folds the small-write zone back).
    #[arg(long)]
    recover_policy: Option<String>,
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    if !workload_names().contains(&args.workload.as_str()) {
        return Err(CliError::new(format!(
            "unknown workload {:?}; choose one of {}",
            args.workload,
            workload_names().join(", ")
        )));
    }
    if let Some(dir) = &args.save_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::new(format!(
                "cannot create --save-dir {}: {e} — choose a writable directory",
                dir.shown()
            ))
        })?;
    }
    for p in std::iter::once(&args.policy).chain(&args.recover_policy) {
        if !amber_core::data::POLICIES.contains(&p.as_str()) {
            return Err(CliError::new(format!(
                "unknown policy {p:?}; choose one of {}",
                amber_core::data::POLICIES.join(", ")
            )));
        }
    }
    let mut config = CrashConfig::new(&args.workload, args.seed);
    config.policy = args.policy;
    config.mount_options = args.mount_options;
    config.recover_policy = args.recover_policy;
    config.max_images = args.max_images;
    config.save_dir = args.save_dir;
    let report = amber_crash::run(&config)
        .map_err(|e| CliError::new(format!("crash test could not run: {e}")))?;
    if args.json {
        outln!("{}", report.to_json())?;
    } else {
        outln!("{report}")?;
    }
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
