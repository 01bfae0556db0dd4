//! `amberfs get`: copy a file, or with -r a tree, out of the pool.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use amber_core::Escaped;

use crate::common::{
    base_name, copy_out, human_bytes, path_error, warn, with_mounted, CliError, CliResult,
    CopyOutError, MountConfig, Shown,
};
use crate::copytree::{Copied, TreeCopy};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// File (with -r, file or directory) in the pool.
    path: String,
    /// Local destination; an existing directory receives the copy under
    /// its name in the pool.
    local: PathBuf,
    /// Copy directories with everything under them (files, directories
    /// and symlinks; not owners, modes or times). What cannot be read is
    /// skipped and listed, and the command then fails.
    #[arg(short = 'r', long)]
    recursive: bool,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    if args.recursive {
        return run_recursive(&args, config);
    }
    let shown = Escaped(args.path.as_bytes());
    let (dest, bytes) = with_mounted(&args.pool, config, |fs| {
        let fail = |e| path_error(&args.pool, "read", &args.path, e);
        if fs.metadata(&args.path).map_err(fail)?.is_dir() {
            return Err(CliError::new(format!(
                "{shown} in pool {} is a directory; copy it with 'amberfs get -r {} {shown} {}', \
                 or list it with 'amberfs ls {} {shown}'",
                args.pool.shown(),
                args.pool.shown(),
                args.local.shown(),
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

/// `get -r`: the tree at PATH (not following a final symlink) copied
/// to LOCAL, or into LOCAL when PATH is the root and LOCAL a directory.
fn run_recursive(args: &Args, config: &MountConfig) -> CliResult<ExitCode> {
    let (dest, copied) = with_mounted(&args.pool, config, |fs| {
        let fail = |e| path_error(&args.pool, "read", &args.path, e);
        let ino = fs.symlink_metadata(&args.path).map_err(fail)?.attr().ino;
        let mut walk = TreeCopy::new(fs.core());
        let dest = if base_name(&args.path).is_none() && args.local.is_dir() {
            walk.copy_into(ino, &args.local, &args.path)?;
            args.local.clone()
        } else {
            let dest = destination(args)?;
            walk.copy(ino, &dest, &args.path)?;
            dest
        };
        Ok((dest, walk.copied))
    })?;
    finish_tree(&args.path, &dest, &copied)
}

/// Says what a tree copy did: each skipped entry, then the totals; fails
/// (exit 1) if anything was skipped, so a script knows the copy is not
/// whole.
pub fn finish_tree(what: &str, dest: &Path, copied: &Copied) -> CliResult<ExitCode> {
    for s in &copied.skipped {
        warn(format!("skipped {s}"));
    }
    outln!("copied {what} to {}: {copied}", dest.shown())?;
    if copied.skipped.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    Err(CliError::new(format!(
        "{} entr{} could not be read and {} skipped (listed above); everything else was copied",
        copied.skipped.len(),
        if copied.skipped.len() == 1 {
            "y"
        } else {
            "ies"
        },
        if copied.skipped.len() == 1 {
            "was"
        } else {
            "were"
        }
    )))
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
