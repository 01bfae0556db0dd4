//! `amberfs mkdir`: create a directory in the pool.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{path_error, with_mounted, CliResult, MountConfig};

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// Directory to create.
    path: String,
    /// Create missing parents too; an existing directory is not an error.
    #[arg(short = 'p')]
    parents: bool,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    with_mounted(&args.pool, config, |fs| {
        let made = if args.parents {
            fs.create_dir_all(&args.path)
        } else {
            fs.create_dir(&args.path)
        };
        made.map_err(|e| path_error(&args.pool, "create directory", &args.path, e))
    })?;
    Ok(ExitCode::SUCCESS)
}
