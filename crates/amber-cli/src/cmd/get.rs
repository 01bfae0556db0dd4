//! `amberfs get`: copy a file out of the pool.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use amber_core::Escaped;

use crate::common::{
    base_name, copy_out, human_bytes, path_error, warn, with_mounted, CliError, CliResult,
    CopyOutError, MountConfig, Shown,
};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// File in the pool.
    path: String,
    /// Local destination; an existing directory receives the file under
    /// its name in the pool.
    local: PathBuf,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    let shown = Escaped(args.path.as_bytes());
    let (dest, bytes) = with_mounted(&args.pool, config, |fs| {
        let fail = |e| path_error(&args.pool, "read", &args.path, e);
        if fs.metadata(&args.path).map_err(fail)?.is_dir() {
            return Err(CliError::new(format!(
                "{shown} in pool {} is a directory; get copies one file — list it with \
                 'amberfs ls {} {shown}'",
                args.pool.shown(),
                args.pool.shown(),
            )));
        }
        // Opened before the local file is created, so a pool-side failure
        // leaves nothing behind on the local side.
        let file = fs.open(&args.path).map_err(fail)?;
        let dest = destination(&args)?;
        let mut out = std::fs::File::create(&dest).map_err(|e| {
            CliError::new(format!(
                "cannot create local file {}: {e} — check the directory exists and is writable",
                dest.shown()
            ))
        })?;
        match copy_out(&file, &mut out) {
            Ok(n) => Ok((dest, n)),
            Err(e) => {
                drop(out);
                if std::fs::remove_file(&dest).is_ok() {
                    warn(format!("removed the partial copy {}", dest.shown()));
                }
                Err(match e {
                    CopyOutError::Pool(e) => fail(e),
                    CopyOutError::Output(e) => CliError::new(format!(
                        "writing local file {} failed: {e} — free space there or choose \
                         another destination",
                        dest.shown()
                    )),
                })
            }
        }
    })?;
    outln!(
        "copied {shown} to {} ({bytes} bytes, {})",
        dest.shown(),
        human_bytes(bytes)
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `LOCAL` itself, or `LOCAL/<name in the pool>` when `LOCAL` is a
/// directory, as cp(1) does.
fn destination(args: &Args) -> CliResult<PathBuf> {
    if !args.local.is_dir() {
        return Ok(args.local.clone());
    }
    let name = base_name(&args.path).ok_or_else(|| {
        CliError::new(format!(
            "{} names no file to copy; give a file path in the pool",
            Escaped(args.path.as_bytes())
        ))
    })?;
    Ok(Path::new(&args.local).join(name))
}
