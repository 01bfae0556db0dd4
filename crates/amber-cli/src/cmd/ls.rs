//! `amberfs ls`: list a directory in the pool, like `ls -1` / `ls -l`.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_core::Attr;
use amber_format::inode::mode;
use amber_format::FileKind;

use crate::common::{format_time, join, path_error, with_mounted, CliResult, MountConfig, PoolFs};

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// Directory (or file) in the pool.
    #[arg(default_value = "/")]
    path: String,
    /// Long form: mode, links, owner, group, size, mtime (UTC), name.
    #[arg(short = 'l')]
    long: bool,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    let lines = with_mounted(&args.pool, config, |fs| listing(fs, &args))?;
    for line in lines {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the whole listing before printing, so that the pool is unmounted
/// before a slow reader of stdout could hold it.
fn listing(fs: &PoolFs, args: &Args) -> CliResult<Vec<String>> {
    let fail = |e| path_error(&args.pool, "list", &args.path, e);
    let meta = fs.metadata(&args.path).map_err(fail)?;
    if !meta.is_dir() {
        let shown = fs.symlink_metadata(&args.path).map_err(fail)?;
        return Ok(vec![line(fs, args, &args.path, &args.path, shown.attr())?]);
    }
    let mut entries = fs.read_dir(&args.path).map_err(fail)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
        .iter()
        .map(|e| {
            let full = join(&args.path, &e.name);
            let meta = fs
                .symlink_metadata(&full)
                .map_err(|err| path_error(&args.pool, "list", &full, err))?;
            line(fs, args, &full, &e.name, meta.attr())
        })
        .collect()
}

fn line(fs: &PoolFs, args: &Args, full: &str, name: &str, a: &Attr) -> CliResult<String> {
    if !args.long {
        return Ok(name.to_string());
    }
    let mut text = format!(
        "{} {:>3} {:>5} {:>5} {:>10} {} {name}",
        mode_string(a.kind, a.perm),
        a.nlink,
        a.uid,
        a.gid,
        a.size,
        format_time(a.mtime),
    );
    if a.kind == FileKind::Symlink {
        let target = fs
            .read_link(full)
            .map_err(|e| path_error(&args.pool, "read link", full, e))?;
        text.push_str(" -> ");
        text.push_str(&target);
    }
    Ok(text)
}

/// `drwxr-xr-x`, with set-id and sticky bits shown the way ls(1) does.
fn mode_string(kind: FileKind, perm: u32) -> String {
    let kind = match kind {
        FileKind::Regular => '-',
        FileKind::Directory => 'd',
        FileKind::Symlink => 'l',
        FileKind::Fifo => 'p',
        FileKind::Socket => 's',
        FileKind::CharDevice => 'c',
        FileKind::BlockDevice => 'b',
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    let special = [
        (mode::S_ISUID_BIT, 's'),
        (mode::S_ISGID_BIT, 's'),
        (mode::S_ISVTX_BIT, 't'),
    ];
    for (who, (bit, mark)) in special.into_iter().enumerate() {
        let shift = 6 - 3 * who;
        let rwx = (perm >> shift) & 7;
        s.push(if rwx & 4 != 0 { 'r' } else { '-' });
        s.push(if rwx & 2 != 0 { 'w' } else { '-' });
        s.push(match (rwx & 1 != 0, perm & bit != 0) {
            (true, true) => mark,
            (false, true) => mark.to_ascii_uppercase(),
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_like_ls() {
        assert_eq!(mode_string(FileKind::Directory, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(FileKind::Regular, 0o644), "-rw-r--r--");
        assert_eq!(mode_string(FileKind::Symlink, 0o777), "lrwxrwxrwx");
        assert_eq!(mode_string(FileKind::Regular, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(FileKind::Directory, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(FileKind::Regular, 0o2640), "-rw-r-S---");
    }
}
