//! Applies one operation to Amber (through the public `Fs` API, under a
//! path prefix so threads can own subtrees) and to the model, and compares
//! the two results, errors included.

use super::ops::{pattern, Op};
use super::tree::{Kind, Mode, Stat, Tree, E};
use amber_core::{FileType, Fs, FsError, Metadata, OpenOptions, Permissions, RenameMode};
use amber_pmem::MmapDevice;

/// What an operation returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Unit,
    Written(usize),
    Bytes(Vec<u8>),
    Target(String),
    Stat(Stat),
    Dir(Vec<(String, Kind)>),
}

pub type Res = Result<Out, E>;

/// Amber's error as a model error kind.
pub fn to_e(e: FsError) -> E {
    match e {
        FsError::NotFound => E::NotFound,
        FsError::AlreadyExists => E::AlreadyExists,
        FsError::NotADirectory => E::NotADirectory,
        FsError::IsADirectory => E::IsADirectory,
        FsError::DirectoryNotEmpty => E::DirectoryNotEmpty,
        FsError::WouldCreateCycle => E::WouldCreateCycle,
        FsError::NotPermitted => E::NotPermitted,
        FsError::SymlinkLoop => E::SymlinkLoop,
        FsError::InvalidArgument(_) => E::InvalidArgument,
        FsError::InvalidName => E::InvalidName,
        other => E::Other(format!("{other:?}")),
    }
}

pub fn kind_of(t: FileType) -> Kind {
    if t.is_dir() {
        Kind::Dir
    } else if t.is_file() {
        Kind::File
    } else if t.is_symlink() {
        Kind::Symlink
    } else {
        panic!("the model creates no {t:?}")
    }
}

pub fn stat_of(m: &Metadata) -> Stat {
    let kind = kind_of(m.file_type());
    Stat {
        kind,
        perm: m.permissions().mode(),
        nlink: m.attr().nlink,
        size: (kind != Kind::Dir).then_some(m.len()),
    }
}

fn rename_mode(m: Mode) -> RenameMode {
    match m {
        Mode::Replace => RenameMode::Replace,
        Mode::NoReplace => RenameMode::NoReplace,
        Mode::Exchange => RenameMode::Exchange,
    }
}

/// Runs `op` on Amber with every path under `pre` ("" or "/t0").
// Tests are exempt from the 80-line limit: one arm per operation.
#[allow(clippy::too_many_lines)]
pub fn amber(fs: &Fs<MmapDevice>, pre: &str, op: &Op) -> Res {
    let p = |s: &str| format!("{pre}{s}");
    let r: amber_core::Result<Out> = (|| {
        Ok(match op {
            Op::CreateFile { path, perm } => {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(*perm)
                    .open(fs, &p(path))?;
                Out::Unit
            }
            Op::Mkdir { path } => fs.create_dir(&p(path)).map(|_| Out::Unit)?,
            Op::Write {
                path,
                off,
                len,
                fill,
                create,
            } => {
                let f = OpenOptions::new()
                    .write(true)
                    .create(*create)
                    .open(fs, &p(path))?;
                Out::Written(f.write_at(&pattern(*len, *fill), *off)?)
            }
            Op::Append {
                path,
                len,
                fill,
                create,
            } => {
                let f = OpenOptions::new()
                    .append(true)
                    .create(*create)
                    .open(fs, &p(path))?;
                Out::Written(f.write_at(&pattern(*len, *fill), 0)?)
            }
            Op::SetLen { path, size } => {
                let f = OpenOptions::new().write(true).open(fs, &p(path))?;
                f.set_len(*size)?;
                Out::Unit
            }
            Op::Read { path } => Out::Bytes(fs.read(&p(path))?),
            Op::ReadAt { path, off, len } => {
                let f = fs.open(&p(path))?;
                let mut buf = vec![0u8; *len as usize];
                let n = f.read_at(&mut buf, *off)?;
                buf.truncate(n);
                Out::Bytes(buf)
            }
            Op::Unlink { path } => fs.remove_file(&p(path)).map(|_| Out::Unit)?,
            Op::Rmdir { path } => fs.remove_dir(&p(path)).map(|_| Out::Unit)?,
            Op::Rename { from, to, mode } => fs
                .rename_with(&p(from), &p(to), rename_mode(*mode))
                .map(|_| Out::Unit)?,
            Op::HardLink { orig, link } => fs.hard_link(&p(orig), &p(link)).map(|_| Out::Unit)?,
            Op::Symlink { target, link } => fs.symlink(target, &p(link)).map(|_| Out::Unit)?,
            Op::ReadLink { path } => Out::Target(fs.read_link(&p(path))?),
            Op::SetPerm { path, perm } => fs
                .set_permissions(&p(path), Permissions::from_mode(*perm))
                .map(|_| Out::Unit)?,
            Op::Stat { path, follow } => {
                let m = if *follow {
                    fs.metadata(&p(path))?
                } else {
                    fs.symlink_metadata(&p(path))?
                };
                Out::Stat(stat_of(&m))
            }
            Op::ReadDir { path } => {
                let mut v: Vec<_> = fs
                    .read_dir(&p(path))?
                    .into_iter()
                    .map(|e| (e.name, kind_of(e.file_type)))
                    .collect();
                v.sort();
                Out::Dir(v)
            }
            _ => unreachable!("the driver runs {op:?}"),
        })
    })();
    r.map_err(to_e)
}

/// Runs `op` on the model.
pub fn model(t: &mut Tree, op: &Op) -> Res {
    let unit = |r: Result<(), E>| r.map(|_| Out::Unit);
    match op {
        Op::CreateFile { path, perm } => unit(t.create_file(path, *perm)),
        Op::Mkdir { path } => unit(t.mkdir(path)),
        Op::Write {
            path,
            off,
            len,
            fill,
            create,
        } => t
            .write(path, *off, &pattern(*len, *fill), false, *create)
            .map(Out::Written),
        Op::Append {
            path,
            len,
            fill,
            create,
        } => t
            .write(path, 0, &pattern(*len, *fill), true, *create)
            .map(Out::Written),
        Op::SetLen { path, size } => unit(t.set_len(path, *size)),
        Op::Read { path } => t.read(path).map(Out::Bytes),
        Op::ReadAt { path, off, len } => t.read_at(path, *off, *len).map(Out::Bytes),
        Op::Unlink { path } => unit(t.unlink(path)),
        Op::Rmdir { path } => unit(t.rmdir(path)),
        Op::Rename { from, to, mode } => unit(t.rename(from, to, *mode)),
        Op::HardLink { orig, link } => unit(t.hard_link(orig, link)),
        Op::Symlink { target, link } => unit(t.symlink(target, link)),
        Op::ReadLink { path } => t.read_link(path).map(Out::Target),
        Op::SetPerm { path, perm } => unit(t.set_perm(path, *perm)),
        Op::Stat { path, follow } => t.stat(path, *follow).map(Out::Stat),
        Op::ReadDir { path } => t.read_dir(path).map(Out::Dir),
        _ => unreachable!("the driver runs {op:?}"),
    }
}

/// A result for a failure message: byte strings by length and a digest
/// rather than in full.
pub fn show(r: &Res) -> String {
    match r {
        Ok(Out::Bytes(b)) => format!("Ok({} bytes, sum {:#x})", b.len(), digest(b)),
        other => format!("{other:?}"),
    }
}

pub fn digest(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Where two byte strings first differ.
pub fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

/// Applies `op` to both and compares; the error describes the mismatch.
pub fn compare(fs: &Fs<MmapDevice>, pre: &str, t: &mut Tree, op: &Op) -> Result<(), String> {
    let a = amber(fs, pre, op);
    let m = model(t, op);
    if a == m {
        return Ok(());
    }
    let mut msg = format!("{op:?}\n  amber: {}\n  model: {}", show(&a), show(&m));
    if let (Ok(Out::Bytes(x)), Ok(Out::Bytes(y))) = (&a, &m) {
        if let Some(i) = first_diff(x, y) {
            msg += &format!("\n  first difference at byte {i}");
        }
    }
    Err(msg)
}
