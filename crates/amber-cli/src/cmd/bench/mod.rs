//! `amberfs bench`: measurements beside their baselines, in one run. One
//! module per suite.

use std::process::ExitCode;

use std::path::Path;

use amber_bench::record::{Results, RunInfo};

use crate::common::{CliError, CliResult};

pub mod compare;
pub mod foundation;
pub mod iozone;
pub mod legacy;
pub mod plot;
pub mod recovery;
pub mod seeds;
pub mod workload;

#[derive(clap::Args)]
pub struct Args {
    /// No progress bars (they are also off when stderr is not a terminal).
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    suite: Suite,
}

#[derive(clap::Subcommand)]
enum Suite {
    /// The foundation figures: 4 KiB sequential writes against a bare
    /// non-temporal copy, 128 B random overwrite + fsync against a bare
    /// store + flush + fence, two-thread scaling, mount time with many files.
    Foundation(foundation::Args),
    /// IOzone's throughput matrix through POSIX, mmap + msync or flushes,
    /// load/store, non-temporal stores, or the Amber library.
    Iozone(iozone::Args),
    /// One of the papers' workloads (filebench-like, lawn's random small
    /// writes, hunter's populate) on one or more targets.
    Workload(workload::Args),
    /// A workload on several targets interleaved (A, B, A, B, ...), each
    /// target's median and its ratio to the first.
    Compare(compare::Args),
    /// The legacy study: ext2, ext4 (default, nodelalloc, data=journal)
    /// and xfs (4 and many allocation groups) on RAM-backed loop devices
    /// beside Amber, normalized to a reference. Needs root.
    Legacy(legacy::Args),
    /// Mount time after a clean unmount and after a crash of a pool
    /// holding --data bytes, and the DRAM the policy holds for it (hunter's
    /// recovery figures), on one or more amberfs: targets.
    Recovery(recovery::Args),
    /// Each paper's headline experiment at a smaller scale (hinfs, lawn,
    /// hunter, legacy, iozone), every one also on `amber` when the build
    /// has it, and a report of the papers' claims beside our measurements
    /// (docs/results.md, plots and JSON records beside it).
    Seeds(seeds::Args),
    /// Draw a results file as grouped bars normalized to a baseline, or as
    /// lines over threads, I/O size or emulated write latency (SVG + PNG).
    Plot(plot::Args),
}

pub fn run(args: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    amber_bench::progress::set_quiet(args.quiet);
    match args.suite {
        Suite::Foundation(a) => foundation::run(a, emulate),
        Suite::Iozone(a) => iozone::run(a, emulate),
        Suite::Workload(a) => workload::run(a, emulate),
        Suite::Compare(a) => compare::run(a, emulate),
        Suite::Legacy(a) => legacy::run(a, emulate),
        Suite::Recovery(a) => recovery::run(a, emulate),
        Suite::Seeds(a) => seeds::run(a, emulate),
        Suite::Plot(a) => plot::run(a),
    }
}

/// The facts every result file carries: this command line, the machine,
/// and the flush instruction this CPU offers.
pub fn run_info() -> RunInfo {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    RunInfo::collect(command, amber_pmem::FlushKind::best_cpu().to_string())
}

/// Writes `results` as JSON and as CSV where the user asked for them.
pub fn save(results: &Results, json: Option<&Path>, csv: Option<&Path>) -> CliResult<()> {
    if let Some(p) = json {
        results.write_json(p).map_err(CliError::new)?;
    }
    if let Some(p) = csv {
        results.write_csv(p).map_err(CliError::new)?;
    }
    Ok(())
}
