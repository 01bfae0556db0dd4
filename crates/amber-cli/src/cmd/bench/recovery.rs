//! `amberfs bench recovery --target A --target B ...`: mount time after a
//! clean unmount and after a crash of a pool holding `--data` bytes, and
//! the DRAM the policy holds for it, each target's median beside its
//! ratio to the first target's (hunter.txt §IV-E).

use std::path::PathBuf;
use std::process::ExitCode;

use amber_bench::compare::rows_table;
use amber_bench::record::Results;
use amber_bench::recovery::{self, default_pool_size, Config};

use super::workload::write_json;
use crate::common::{parse_size, CliError, CliResult};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// What to measure, repeatable: amberfs:POLICY, optionally with mount
    /// options (amberfs:hunter,hunter_workers=2); each gets a fresh pool.
    /// The first is the reference of the ratios.
    #[arg(long = "target", required = true, value_name = "SPEC")]
    targets: Vec<String>,
    /// Bytes written to each pool before its mounts are timed.
    #[arg(long, default_value = "8G")]
    data: String,
    /// Size of each file (the last one holds what is left).
    #[arg(long, default_value = "1G")]
    file_size: String,
    /// Bytes per write call.
    #[arg(long, default_value = "1M")]
    io_size: String,
    /// Clean and crash mounts per target (medians are reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Where each pool is created (one at a time).
    #[arg(long, default_value = "/dev/shm")]
    pool_dir: PathBuf,
    /// Size of each pool (default: --data + 12.5% + 64M, rounded up to
    /// 2 MiB).
    #[arg(long)]
    pool_size: Option<String>,
    /// Also write {run, records} as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the records as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
}

fn size(flag: &str, s: &str) -> CliResult<u64> {
    parse_size(s).map_err(|e| CliError::new(format!("--{flag}: {e}")))
}

pub fn run(a: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    let preset = emulate.unwrap_or("dram").to_string();
    amber_pmem::EmulatorSpec::parse(&preset)
        .map_err(|e| CliError::new(format!("--emulate: {e}")))?;
    let data = size("data", &a.data)?;
    let cfg = Config {
        data,
        file: size("file-size", &a.file_size)?,
        io: size("io-size", &a.io_size)?,
        reps: a.reps,
        pool_dir: a.pool_dir,
        pool_size: match &a.pool_size {
            Some(s) => size("pool-size", s)?,
            None => default_pool_size(data),
        },
        preset,
    };
    let rows = recovery::run(&cfg, &a.targets)
        .map_err(|e| CliError::new(format!("benchmark failed: {e}")))?;
    outln!("{}", rows_table(&rows))?;
    if let Some(path) = &a.json {
        write_json(path, &rows)?;
    }
    if let Some(path) = &a.csv {
        let results = Results {
            run: super::run_info(),
            records: rows.into_iter().map(|r| r.record).collect(),
        };
        results.write_csv(path).map_err(CliError::new)?;
    }
    Ok(ExitCode::SUCCESS)
}
