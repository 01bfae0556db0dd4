//! `amberfs bench compare --workload NAME --target A --target B ...`: the
//! same workload on every target, interleaved round by round, each
//! target's median beside its ratio to the first target's.

use std::process::ExitCode;

use amber_bench::workload;

use super::workload::{run_plan, RunArgs};
use crate::common::{CliError, CliResult};

#[derive(clap::Args)]
pub struct Args {
    /// The workload every target runs.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(workload::NAMES))]
    workload: String,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(a: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    if a.run.targets.len() < 2 {
        return Err(CliError::new(
            "compare needs at least two --target (the first is the reference)",
        ));
    }
    run_plan(&a.workload, a.run, emulate)
}
