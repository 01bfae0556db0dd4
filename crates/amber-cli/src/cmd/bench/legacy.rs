//! `amberfs bench legacy`: the legacy study's method — the kernel's file
//! systems on RAM-backed loop devices (ext2; ext4 default, nodelalloc,
//! data=journal; xfs with 4 and many allocation groups) running the
//! papers' workloads beside Amber, normalized to a reference.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_bench::compare::rows_table;
use amber_bench::legacy::{self, Config, AMBER_POLICY, MIN_DEVICE};
use amber_bench::plot::{self, bars::bars};
use amber_bench::record::Results;

use crate::common::{parse_size, CliError, CliResult};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Workloads to run (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fileserver,webserver,webproxy,varmail"
    )]
    workloads: Vec<String>,
    /// File systems (comma-separated; default all six): ext2, ext4,
    /// ext4-nodelalloc, ext4-data-journal, xfs-ag4, xfs-agN.
    #[arg(long, value_delimiter = ',')]
    filesystems: Vec<String>,
    /// The target every result is normalized to.
    #[arg(long, default_value = "ext4")]
    baseline: String,
    /// Size of each RAM-backed device (sparse: only written pages use
    /// memory); it also bounds xfs's large allocation-group count.
    #[arg(long, default_value = "3G")]
    device_size: String,
    /// Size of the Amber pool (fully backed by memory).
    #[arg(long, default_value = "1G")]
    pool_size: String,
    /// A tmpfs directory for images, mount points and the pool.
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Overrides each workload's file count.
    #[arg(long)]
    files: Option<u64>,
    /// Overrides each workload's operations per repetition.
    #[arg(long)]
    ops: Option<u64>,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Timed repetitions per target (medians are reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Untimed runs per target first.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Kernel file systems only.
    #[arg(long)]
    no_amber: bool,
    /// Also write the records as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the records as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also draw the throughput normalized to the baseline as
    /// PREFIX.svg and PREFIX.png.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub fn run(a: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    if let Some(why) = legacy::unavailable() {
        outln!("bench legacy: skipped: {why} (run it as root, e.g. with sudo)")?;
        return Ok(ExitCode::SUCCESS);
    }
    let preset = emulate.unwrap_or("dram").to_string();
    amber_pmem::EmulatorSpec::parse(&preset)
        .map_err(|e| CliError::new(format!("--emulate: {e}")))?;
    let size =
        |flag: &str, s: &str| parse_size(s).map_err(|e| CliError::new(format!("--{flag}: {e}")));
    let device_size = size("device-size", &a.device_size)?;
    if device_size < MIN_DEVICE {
        return Err(CliError::new(format!(
            "--device-size must be at least {} MiB (mkfs.xfs refuses smaller)",
            MIN_DEVICE >> 20
        )));
    }
    if a.reps == 0 {
        return Err(CliError::new("--reps must be at least 1"));
    }
    let cfg = Config {
        dir: a.dir,
        device_size,
        pool_size: size("pool-size", &a.pool_size)?,
        preset,
        filesystems: a.filesystems,
        workloads: a.workloads,
        files: a.files,
        ops: a.ops,
        threads: a.threads,
        reps: a.reps,
        warmup: a.warmup,
        baseline: a.baseline.clone(),
        amber: if a.no_amber {
            Vec::new()
        } else {
            vec![AMBER_POLICY.into()]
        },
    };
    let rows = legacy::run_study(&cfg).map_err(|e| CliError::new(format!("legacy study: {e}")))?;
    outln!("{}", rows_table(&rows))?;
    let results = Results {
        run: super::run_info(),
        records: rows.into_iter().map(|r| r.record).collect(),
    };
    super::save(&results, a.json.as_deref(), a.csv.as_deref())?;
    if let Some(prefix) = &a.plot {
        let tput: Vec<_> = results
            .records
            .iter()
            .filter(|r| r.metric == "throughput")
            .cloned()
            .collect();
        let title = format!(
            "Legacy file systems and Amber on RAM, relative to {}",
            a.baseline
        );
        let (scene, _) = bars(&tput, Some(&a.baseline), &title).map_err(CliError::new)?;
        for p in plot::write_files(&scene, prefix).map_err(CliError::new)? {
            outln!("wrote {}", p.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
