//! `amberfs put`: copy a local file into the pool.

use std::fs::File as LocalFile;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use amber_core::{Escaped, FsError};

use crate::common::{
    base_name, human_bytes, join, path_error, warn, with_mounted, CliError, CliResult, MountConfig,
    PoolDevice, PoolFs, Shown, CHUNK,
};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// Local file to copy.
    local: PathBuf,
    /// Destination in the pool; an existing directory receives the file
    /// under its local name.
    path: String,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    // The local side is checked before the pool is mounted: a typo in the
    // local path must not cost a mount (and a superblock update).
    let local_display = args.local.shown().to_string();
    let mut source = LocalFile::open(&args.local).map_err(|e| {
        CliError::new(format!(
            "cannot read local file {local_display}: {e} — check the path"
        ))
    })?;
    let is_file = source.metadata().map(|m| m.is_file()).unwrap_or(false);
    if !is_file {
        return Err(CliError::new(format!(
            "{local_display} is not a regular file; put copies one file at a time"
        )));
    }
    let (dest, bytes) = with_mounted(&args.pool, config, |fs| {
        let dest = destination(fs, &args)?;
        let bytes = copy_in(fs, &mut source, &dest, &args)?;
        Ok((dest, bytes))
    })?;
    outln!(
        "copied {local_display} to {} ({bytes} bytes, {})",
        Escaped(dest.as_bytes()),
        human_bytes(bytes)
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Where the copy goes: `PATH` itself, or `PATH/<local name>` when `PATH`
/// is a directory, as cp(1) does.
fn destination(fs: &PoolFs, args: &Args) -> CliResult<String> {
    match fs.metadata(&args.path) {
        Ok(m) if m.is_dir() => {
            let name = args.local.file_name().and_then(|n| n.to_str());
            name.and_then(base_name)
                .and_then(|n| String::from_utf8(join(args.path.as_bytes(), n.as_bytes())).ok())
                .ok_or_else(|| {
                    CliError::new(format!(
                        "local file name {} cannot be used in the pool (not UTF-8); \
                         give the full destination path instead of a directory",
                        args.local.shown()
                    ))
                })
        }
        Ok(_) | Err(FsError::NotFound) => Ok(args.path.clone()),
        Err(e) => Err(path_error(&args.pool, "write", &args.path, e)),
    }
}

/// Streams `source` into `dest`, removing the partial file if the copy
/// fails so that a half-written file is never mistaken for the real one.
fn copy_in(fs: &PoolFs, source: &mut LocalFile, dest: &str, args: &Args) -> CliResult<u64> {
    let file = fs
        .create(dest)
        .map_err(|e| path_error(&args.pool, "create", dest, e))?;
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    let copied = loop {
        let n = match fill(source, &mut buf) {
            Ok(0) => break Ok(at),
            Ok(n) => n,
            Err(e) => {
                break Err(CliError::new(format!(
                    "reading {} failed after {at} bytes: {e}",
                    args.local.shown()
                )))
            }
        };
        if let Err(e) = write_all_at(&file, &buf[..n], at) {
            break Err(path_error(&args.pool, "write", dest, e));
        }
        at += n as u64;
    };
    drop(file);
    if copied.is_err() && fs.remove_file(dest).is_ok() {
        warn(format!(
            "removed the partial copy {}",
            Escaped(dest.as_bytes())
        ));
    }
    copied
}

/// Reads until `buf` is full or the source ends, so every write but the
/// last is a whole chunk.
fn fill(source: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn write_all_at(
    file: &amber_core::File<PoolDevice>,
    mut data: &[u8],
    mut at: u64,
) -> Result<(), FsError> {
    while !data.is_empty() {
        match file.write_at(data, at)? {
            0 => return Err(FsError::NoSpace),
            n => {
                data = &data[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
}
