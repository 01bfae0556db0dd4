//! `amberfs rm`: remove a file, symlink or (with -r) a directory tree.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{join, path_error, with_mounted, CliError, CliResult, MountConfig, PoolFs};

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// What to remove.
    path: String,
    /// Remove a directory and everything under it.
    #[arg(short = 'r')]
    recursive: bool,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    if args.path.split('/').all(|c| c.is_empty() || c == ".") {
        return Err(CliError::new(format!(
            "refusing to remove the root directory of pool {}; to start over, use \
             'amberfs mkfs --force {}'",
            args.pool.display(),
            args.pool.display()
        )));
    }
    with_mounted(&args.pool, config, |fs| remove(fs, &args, &args.path))?;
    Ok(ExitCode::SUCCESS)
}

/// Removes `path` without following a final symlink, so `rm -r link`
/// removes the link, never the tree it points to.
fn remove(fs: &PoolFs, args: &Args, path: &str) -> CliResult<()> {
    let fail = |e| path_error(&args.pool, "remove", path, e);
    let meta = fs.symlink_metadata(path).map_err(fail)?;
    if !meta.is_dir() {
        return fs.remove_file(path).map_err(fail);
    }
    if !args.recursive {
        return Err(CliError::new(format!(
            "{path} in pool {} is a directory; use 'amberfs rm -r {} {path}' to remove it \
             and everything under it",
            args.pool.display(),
            args.pool.display()
        )));
    }
    for entry in fs.read_dir(path).map_err(fail)? {
        remove(fs, args, &join(path, &entry.name))?;
    }
    fs.remove_dir(path).map_err(fail)
}
