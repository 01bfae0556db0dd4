//! `amberfs bench`: measurements beside their baselines, in one run. One
//! module per suite.

use std::process::ExitCode;

use crate::common::CliResult;

pub mod foundation;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    suite: Suite,
}

#[derive(clap::Subcommand)]
enum Suite {
    /// The foundation figures: 4 KiB sequential writes against a bare
    /// non-temporal copy, 128 B random overwrite + fsync against a bare
    /// store + flush + fence, two-thread scaling, mount time with many files.
    Foundation(foundation::Args),
}

pub fn run(args: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    match args.suite {
        Suite::Foundation(a) => foundation::run(a, emulate),
    }
}
