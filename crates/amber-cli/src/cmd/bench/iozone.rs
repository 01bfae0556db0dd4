//! `amberfs bench iozone`: IOzone's throughput matrix on directories of any
//! file system (through POSIX calls or a mapping persisted by msync, cache
//! flushes, load/store or non-temporal stores) and on the Amber library.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_bench::iozone::{self, matrix, Matrix, Mode, Test};
use amber_bench::progress::Progress;
use amber_bench::record::{table, Results};
use amber_bench::spec::TargetSpec;
use amber_bench::target::DropCaches;

use crate::common::{parse_size, CliError, CliResult};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Where to run, repeatable: `dir:/path` (a directory on any mounted
    /// file system), `amberfs:POLICY` (the library on a fresh pool,
    /// behind `--emulate`) or `bare` (a fresh pool behind `--emulate` with
    /// no file system: each record one non-temporal copy and a fence).
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    /// Data paths for `dir:` targets, repeatable or comma-separated: posix,
    /// mmap-msync, mmap-flush, loadstore, nt.
    #[arg(long = "mode", value_delimiter = ',', default_value = "posix")]
    modes: Vec<String>,
    /// File sizes, comma-separated (e.g. 64K,1M,3M); overrides
    /// --min-file/--max-file.
    #[arg(long, value_delimiter = ',')]
    file_sizes: Vec<String>,
    /// Record sizes, comma-separated (multiples of 8 bytes); overrides
    /// --min-record/--max-record.
    #[arg(long, value_delimiter = ',')]
    record_sizes: Vec<String>,
    /// Smallest file of the doubling range.
    #[arg(long, default_value = "64K")]
    min_file: String,
    /// Largest file of the doubling range.
    #[arg(long, default_value = "64M")]
    max_file: String,
    /// Smallest record of the doubling range.
    #[arg(long, default_value = "4K")]
    min_record: String,
    /// Largest record of the doubling range.
    #[arg(long, default_value = "1M")]
    max_record: String,
    /// IOzone's whole range: 64K..1G files × 64B..16M records (long).
    #[arg(long, conflicts_with_all = ["file_sizes", "record_sizes"])]
    full: bool,
    /// Tests to run, comma-separated, in IOzone's order: write, rewrite,
    /// read, reread, random-read, random-write, backward-read, stride-read.
    #[arg(long, value_delimiter = ',')]
    tests: Vec<String>,
    /// Trials per cell; the median, mean and relative standard deviation
    /// are reported.
    #[arg(long, default_value_t = 3)]
    trials: usize,
    /// Clean-up before each trial: drop the kernel's page cache, dentries
    /// and inodes, or all (root only); Amber targets are mounted afresh
    /// for any of them.
    #[arg(long, default_value = "none", value_parser = ["none", "page", "dentries", "all"])]
    cleanup: String,
    /// End each POSIX or Amber write test with fsync, inside the timing
    /// (IOzone's -e). Mapped modes persist every record regardless.
    #[arg(long, default_value = "none", value_parser = ["none", "fsync"])]
    sync: String,
    /// Pool file for amberfs: and bare targets (removed afterwards).
    #[arg(long, default_value = "/dev/shm/amber-iozone.pool")]
    pool: PathBuf,
    /// Seed of the data and of the random orders.
    #[arg(long, default_value_t = 42)]
    seed: u64,
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
    let cfg = iozone::Config {
        targets: a
            .targets
            .iter()
            .map(|t| TargetSpec::parse(t).map_err(CliError::new))
            .collect::<CliResult<_>>()?,
        modes: a
            .modes
            .iter()
            .map(|m| {
                Mode::from_name(m).ok_or_else(|| {
                    CliError::new(format!(
                        "--mode: unknown mode {m:?}; use posix, mmap-msync, mmap-flush, loadstore or nt"
                    ))
                })
            })
            .collect::<CliResult<_>>()?,
        matrix: build_matrix(&a)?,
        tests: parse_tests(&a.tests)?,
        trials: a.trials,
        cleanup: match a.cleanup.as_str() {
            "page" => DropCaches::PageCache,
            "dentries" => DropCaches::Dentries,
            "all" => DropCaches::All,
            _ => DropCaches::None,
        },
        sync: if a.sync == "fsync" {
            iozone::Sync::Fsync
        } else {
            iozone::Sync::None
        },
        preset,
        pool: a.pool,
        seed: a.seed,
    };
    if cfg.trials == 0 {
        return Err(CliError::new("--trials must be at least 1"));
    }
    let cells = cfg.matrix.cells().len() as u64;
    let progress = Progress::new(cells, "iozone cells");
    let records = iozone::run(&cfg, &mut |_, _| progress.inc(1))
        .map_err(|e| CliError::new(format!("benchmark failed: {e}")))?;
    progress.finish();
    outln!("{}", table(&records))?;
    let results = Results {
        run: super::run_info(),
        records,
    };
    super::save(&results, a.json.as_deref(), a.csv.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

fn sizes(flag: &str, list: &[String]) -> CliResult<Vec<u64>> {
    list.iter()
        .map(|s| parse_size(s).map_err(|e| CliError::new(format!("{flag}: {e}"))))
        .collect()
}

fn build_matrix(a: &Args) -> CliResult<Matrix> {
    if a.full {
        return Ok(Matrix::full());
    }
    let range = |flag: &str, min: &str, max: &str| -> CliResult<Vec<u64>> {
        let min = parse_size(min).map_err(|e| CliError::new(format!("{flag}: {e}")))?;
        let max = parse_size(max).map_err(|e| CliError::new(format!("{flag}: {e}")))?;
        matrix::doubling(min, max).map_err(|e| CliError::new(format!("{flag}: {e}")))
    };
    let files = if a.file_sizes.is_empty() {
        range("--min-file/--max-file", &a.min_file, &a.max_file)?
    } else {
        sizes("--file-sizes", &a.file_sizes)?
    };
    let records = if a.record_sizes.is_empty() {
        range("--min-record/--max-record", &a.min_record, &a.max_record)?
    } else {
        sizes("--record-sizes", &a.record_sizes)?
    };
    Matrix::new(files, records).map_err(CliError::new)
}

/// The chosen tests, put in IOzone's order whatever order they were given
/// in: each test relies on the file the one before left.
fn parse_tests(names: &[String]) -> CliResult<Vec<Test>> {
    if names.is_empty() {
        return Ok(Test::ALL.to_vec());
    }
    let mut chosen = Vec::new();
    for n in names {
        chosen.push(Test::from_name(n).ok_or_else(|| {
            let all: Vec<&str> = Test::ALL.iter().map(|t| t.name()).collect();
            CliError::new(format!(
                "--tests: unknown test {n:?}; use {}",
                all.join(", ")
            ))
        })?);
    }
    Ok(Test::ALL
        .into_iter()
        .filter(|t| chosen.contains(t))
        .collect())
}
