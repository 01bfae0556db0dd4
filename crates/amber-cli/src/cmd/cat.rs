//! `amberfs cat`: write a file from the pool to standard output.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{copy_out, path_error, with_mounted, CliResult, CopyOutError, MountConfig};
use crate::output::output_error;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// File in the pool.
    path: String,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    with_mounted(&args.pool, config, |fs| {
        let fail = |e| path_error(&args.pool, "read", &args.path, e);
        let file = fs.open(&args.path).map_err(fail)?;
        let mut out = std::io::stdout().lock();
        match copy_out(&file, &mut out).and_then(|_| out.flush().map_err(CopyOutError::Output)) {
            Ok(()) => Ok(()),
            Err(CopyOutError::Output(e)) => Err(output_error(e)),
            Err(CopyOutError::Pool(e)) => Err(fail(e)),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
