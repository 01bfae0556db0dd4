//! `amberfs ls`: list a directory in the pool, like `ls -1` / `ls -l`.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_core::{Attr, Escaped};
use amber_format::inode::mode;
use amber_format::FileKind;

use crate::common::{format_time, join, path_error, with_mounted, CliResult, MountConfig, PoolFs};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// Directory (or file) in the pool.
    #[arg(default_value = "/")]
    path: String,
    /// Long form: mode (`+` after it: the file has an ACL), links, owner,
    /// group, size, mtime (UTC), name.
    #[arg(short = 'l')]
    long: bool,
}

pub fn run(args: Args, config: &MountConfig) -> CliResult<ExitCode> {
    let lines = with_mounted(&args.pool, config, |fs| listing(fs, &args))?;
    for line in lines {
        outln!("{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the whole listing before printing, so that the pool is unmounted
/// before a slow reader of stdout could hold it. Entries are read by inode,
/// so names and targets of any bytes are listed (escaped), not only UTF-8.
fn listing(fs: &PoolFs, args: &Args) -> CliResult<Vec<String>> {
    let fail = |e| path_error(&args.pool, "list", &args.path, e);
    let meta = fs.metadata(&args.path).map_err(fail)?;
    if !meta.is_dir() {
        let shown = fs.symlink_metadata(&args.path).map_err(fail)?;
        let path = args.path.as_bytes();
        return Ok(vec![line(fs, args, path, path, shown.attr())?]);
    }
    let core = fs.core();
    let mut entries = Vec::new();
    core.readdir(meta.attr().ino, 0, |e| {
        entries.push(e);
        true
    })
    .map_err(fail)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
        .iter()
        .map(|e| {
            let full = join(args.path.as_bytes(), &e.name);
            let attr = core
                .getattr(e.ino)
                .map_err(|err| path_error(&args.pool, "list", &full, err))?;
            line(fs, args, &full, &e.name, &attr)
        })
        .collect()
}

/// One line of the listing: `name` (escaped), or with -l its attributes
/// and, for a symlink, its target; `full` is its path, for errors.
fn line(fs: &PoolFs, args: &Args, full: &[u8], name: &[u8], a: &Attr) -> CliResult<String> {
    let shown = Escaped(name);
    if !args.long {
        return Ok(shown.to_string());
    }
    let acl = fs
        .core()
        .has_acl(a.ino)
        .map_err(|e| path_error(&args.pool, "list the attributes of", full, e))?;
    let mut text = format!(
        "{}{} {:>3} {:>5} {:>5} {:>10} {} {shown}",
        mode_string(a.kind, a.perm),
        if acl { "+" } else { "" },
        a.nlink,
        a.uid,
        a.gid,
        a.size,
        format_time(a.mtime),
    );
    if a.kind == FileKind::Symlink {
        let target = fs
            .core()
            .readlink(a.ino)
            .map_err(|e| path_error(&args.pool, "read link", full, e))?;
        text.push_str(" -> ");
        text.push_str(&Escaped(&target).to_string());
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
