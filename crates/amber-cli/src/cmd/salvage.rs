//! `amberfs salvage`: copy every file that can still be read out of a
//! damaged pool, without writing to it.
//!
//! The pool is opened read-only and read through a bounded DRAM overlay
//! (`amber_core::fs::salvage`): a crashed pool is recovered in memory, a
//! damaged one opened leniently, and neither fsck nor a normal mount has
//! to accept it. The tree is copied from the root as `get -r` copies it,
//! each entry that cannot be read skipped with its reason; then every
//! file in use that no path reached (its directory lost) is copied to
//! `lost+found/#INODE`, as e2fsck would reconnect it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use amber_core::{Core, Fs, FsError};
use amber_format::ROOT_INO;
use amber_pmem::{DramOverlay, PmDevice};

use crate::cmd::get::finish_tree;
use crate::common::{open_read_only, pool_error, warn, CliError, CliResult, Shown};
use crate::copytree::TreeCopy;

/// Most DRAM the overlay holding recovery's changes may take.
const OVERLAY_LIMIT: u64 = 256 << 20;

#[derive(clap::Args)]
pub struct Args {
    /// The damaged pool file or device (opened read-only, never written).
    pool: PathBuf,
    /// A new local directory to copy everything into.
    dir: PathBuf,
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    if args.dir.symlink_metadata().is_ok() {
        return Err(CliError::new(format!(
            "{} exists already; salvage copies into a new directory, so nothing there is \
             overwritten — name one that does not exist",
            args.dir.shown()
        )));
    }
    let dev = open_read_only(&args.pool)?;
    let overlay = DramOverlay::new(dev, OVERLAY_LIMIT);
    let (fs, notes) = Fs::salvage(overlay).map_err(|e| pool_error(&args.pool, e))?;
    let core = fs.core();
    for n in &notes {
        warn(format!("note: {n}"));
    }
    std::fs::create_dir(&args.dir).map_err(|e| {
        CliError::new(format!(
            "cannot create {}: {e} — check its parent exists and is writable",
            args.dir.shown()
        ))
    })?;
    let mut walk = TreeCopy::new(core);
    walk.copy_into(ROOT_INO, &args.dir, "/")?;
    lost_and_found(core, &mut walk, &args.dir)?;
    finish_tree(&args.pool.shown().to_string(), &args.dir, &walk.copied)
}

/// Copies every inode in use with links that the walk from the root did
/// not reach into `DIR/lost+found` (created when the first one is found;
/// `lost+found.1` and so on if the pool's root holds that name).
fn lost_and_found<D: PmDevice>(
    core: &Core<D>,
    walk: &mut TreeCopy<'_, D>,
    dir: &Path,
) -> CliResult<()> {
    let mut found: Option<PathBuf> = None;
    for ino in ROOT_INO + 1..core.layout().inode_count {
        if walk.reached(ino) {
            continue;
        }
        match core.getattr(ino) {
            // Free, or unlinked while open (the user deleted it).
            Err(FsError::NotFound) => continue,
            Ok(a) if a.nlink == 0 => continue,
            _ => {}
        }
        let lf = match &found {
            Some(p) => p.clone(),
            None => {
                let p = free_name(dir);
                std::fs::create_dir(&p)
                    .map_err(|e| CliError::new(format!("cannot create {}: {e}", p.shown())))?;
                found = Some(p.clone());
                p
            }
        };
        let name = format!("#{ino}");
        walk.copy(
            ino,
            &lf.join(&name),
            &format!("inode {ino} (no path reaches it)"),
        )?;
    }
    Ok(())
}

/// `DIR/lost+found`, or the first `DIR/lost+found.N` not taken.
fn free_name(dir: &Path) -> PathBuf {
    let mut p = dir.join("lost+found");
    let mut n = 0;
    while p.symlink_metadata().is_ok() {
        n += 1;
        p = dir.join(format!("lost+found.{n}"));
    }
    p
}
