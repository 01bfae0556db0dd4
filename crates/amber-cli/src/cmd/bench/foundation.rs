//! `amberfs bench foundation`: the foundation issue's figures beside their
//! baselines, in one run.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_bench::foundation;
use amber_bench::record::{table, Results};

use crate::common::{parse_size, CliError, CliResult};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file to create for the run (removed afterwards).
    #[arg(long, default_value = "/dev/shm/amber-bench.pool")]
    pool: PathBuf,
    /// Repetitions of each measurement (medians are reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Size of the sequentially written file.
    #[arg(long, default_value = "1G")]
    seq_size: String,
    /// Random 128 B overwrites per repetition.
    #[arg(long, default_value_t = 200_000)]
    rand_ops: u64,
    /// Files in the pool whose mount time is measured.
    #[arg(long, default_value_t = 1_000_000)]
    mount_files: u64,
    /// A small, fast configuration (for smoke tests).
    #[arg(long)]
    quick: bool,
    /// Also write the records as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the records as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
}

pub fn run(a: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    let preset = emulate.unwrap_or("dram").to_string();
    amber_pmem::EmulatorSpec::parse(&preset)
        .map_err(|e| CliError::new(format!("--emulate: {e}")))?;
    let seq = parse_size(&a.seq_size).map_err(|e| CliError::new(format!("--seq-size: {e}")))?;
    if a.reps == 0 || seq < 1 << 20 {
        return Err(CliError::new(
            "--reps must be at least 1 and --seq-size at least 1M",
        ));
    }
    let mut cfg = foundation::Config {
        pool: a.pool,
        preset,
        reps: a.reps,
        seq_file_bytes: seq,
        rand_ops: a.rand_ops,
        mount_files: a.mount_files,
        ..foundation::Config::default()
    };
    if a.quick {
        cfg.reps = 1;
        cfg.seq_file_bytes = 16 << 20;
        cfg.rand_file_bytes = 4 << 20;
        cfg.rand_ops = 2_000;
        cfg.mount_files = 2_000;
    }
    let records =
        foundation::run(&cfg).map_err(|e| CliError::new(format!("benchmark failed: {e}")))?;
    outln!("{}", table(&records))?;
    let results = Results {
        run: super::run_info(),
        records,
    };
    super::save(&results, a.json.as_deref(), a.csv.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
