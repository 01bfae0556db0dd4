//! `amberfs rm`: remove a file, symlink or (with -r) a directory tree.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_core::Escaped;
use amber_format::FileKind;

use crate::common::{
    join, path_error, with_mounted, CliError, CliResult, MountConfig, PoolFs, Shown,
};

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
            args.pool.shown(),
            args.pool.shown()
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
        let (p, shown) = (args.pool.shown(), Escaped(path.as_bytes()));
        return Err(CliError::new(format!(
            "{shown} in pool {p} is a directory; use 'amberfs rm -r {p} {shown}' to remove it \
             and everything under it"
        )));
    }
    remove_contents(fs, args, meta.attr().ino, path.as_bytes())?;
    fs.remove_dir(path).map_err(fail)
}

/// Empties directory `dir` (at `path`), depth first. Entries are taken by
/// inode and name bytes, so names that are not UTF-8 go too; a symlink is
/// an entry like any other, never followed.
fn remove_contents(fs: &PoolFs, args: &Args, dir: u64, path: &[u8]) -> CliResult<()> {
    let core = fs.core();
    let mut entries = Vec::new();
    let fail = |at: &[u8], e| path_error(&args.pool, "remove", at, e);
    core.readdir(dir, 0, |e| {
        entries.push(e);
        true
    })
    .map_err(|e| fail(path, e))?;
    for e in entries {
        let full = join(path, &e.name);
        if e.kind == FileKind::Directory {
            remove_contents(fs, args, e.ino, &full)?;
            core.rmdir(dir, &e.name).map_err(|err| fail(&full, err))?;
        } else {
            core.unlink(dir, &e.name).map_err(|err| fail(&full, err))?;
        }
    }
    Ok(())
}
