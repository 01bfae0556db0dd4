//! Copying a tree out of a pool, for `amberfs get -r` and `amberfs
//! salvage`: directories, regular files with their data, and symlinks;
//! not owners, modes or times.
//!
//! It walks the inode-level interface, so what the pool cannot give (an
//! inode that does not load, a directory block that does not decode, a
//! file whose blocks cannot be found) costs that entry alone: it is
//! skipped with its reason and the walk goes on. Failures on the local
//! side (disk full, a directory not writable) stop the copy: going on
//! would only fail the same way. Nothing read from the pool can steer a
//! write outside the destination: names holding '/' or NUL, or "." and
//! "..", are skipped; every file and directory is created new (never
//! through an existing path), and a directory is descended into only if
//! this walk created it. Each directory is walked once, so a cycle in a
//! damaged pool ends; the walk keeps its own stack, so depth costs heap,
//! not the call stack.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use amber_core::{Attr, Core, DirEntry, Escaped, FsError};
use amber_format::FileKind;
use amber_pmem::PmDevice;

use crate::common::{human_bytes, CliError, CliResult, Shown, CHUNK};

/// What a copy did.
#[derive(Default)]
pub struct Copied {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
    /// Each entry not copied: its path in the pool and why.
    pub skipped: Vec<String>,
}

impl std::fmt::Display for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dirs = if self.dirs == 1 {
            "directory"
        } else {
            "directories"
        };
        write!(
            f,
            "{} file(s) ({} bytes, {}), {} {dirs}, {} symlink(s)",
            self.files,
            self.bytes,
            human_bytes(self.bytes),
            self.dirs,
            self.symlinks
        )
    }
}

/// A walk over one pool: the inodes it has reached, so each directory
/// is entered once and salvage can find those no path reaches.
pub struct TreeCopy<'a, D: PmDevice> {
    core: &'a Core<D>,
    reached: HashSet<u64>,
    pub copied: Copied,
}

/// A directory to walk: its inode, where its copy is, its pool path, and
/// whether it failed to load (then its entries that decode are walked).
struct Pending {
    ino: u64,
    local: PathBuf,
    shown: String,
    damaged: bool,
}

/// What an inode turned out to be.
enum Node {
    /// A directory that loads.
    Dir,
    /// A directory that does not load, though some of its entries read.
    DamagedDir,
    /// A file, symlink or special file.
    Leaf(Attr),
    /// Nothing that can be read (skipped, with the reason).
    Unreadable,
}

impl<'a, D: PmDevice> TreeCopy<'a, D> {
    pub fn new(core: &'a Core<D>) -> Self {
        TreeCopy {
            core,
            reached: HashSet::new(),
            copied: Copied::default(),
        }
    }

    /// Whether the walk has reached `ino`.
    pub fn reached(&self, ino: u64) -> bool {
        self.reached.contains(&ino)
    }

    /// Copies inode `ino` (shown as `shown`) to `local`, which must not
    /// exist; a directory is copied with everything under it.
    pub fn copy(&mut self, ino: u64, local: &Path, shown: &str) -> CliResult<()> {
        let damaged = match self.look(ino, shown) {
            Node::Leaf(attr) => return self.copy_leaf(&attr, local, shown),
            Node::Unreadable => return Ok(()),
            Node::Dir => false,
            Node::DamagedDir => true,
        };
        if self.make_dir(local, shown)? {
            self.walk(ino, local, shown, damaged)?;
        }
        Ok(())
    }

    /// Copies what directory `ino` holds into `local`, an existing
    /// directory; a name already there is skipped, never overwritten.
    pub fn copy_into(&mut self, ino: u64, local: &Path, shown: &str) -> CliResult<()> {
        match self.look(ino, shown) {
            Node::Dir => self.walk(ino, local, shown, false),
            Node::DamagedDir => self.walk(ino, local, shown, true),
            Node::Leaf(_) => {
                self.note_skip(shown, "not a directory");
                Ok(())
            }
            Node::Unreadable => Ok(()),
        }
    }

    /// Marks `ino` reached and finds what it is; a failure to load is
    /// skipped with its reason, and for a directory whose entries still
    /// partly decode, so noted.
    fn look(&mut self, ino: u64, shown: &str) -> Node {
        self.reached.insert(ino);
        match self.core.getattr(ino) {
            Ok(a) if a.kind == FileKind::Directory => Node::Dir,
            Ok(a) => Node::Leaf(a),
            Err(e) => {
                let damaged_dir =
                    matches!(e, FsError::Corrupted(_)) && self.core.readdir_lenient(ino).is_ok();
                let tail = match damaged_dir {
                    true => "; the entries of it that still read are copied",
                    false => "",
                };
                self.note_skip(shown, &format!("{e}{tail}"));
                match damaged_dir {
                    true => Node::DamagedDir,
                    false => Node::Unreadable,
                }
            }
        }
    }

    /// Walks the tree under directory `ino`, whose copy is `local`.
    fn walk(&mut self, ino: u64, local: &Path, shown: &str, damaged: bool) -> CliResult<()> {
        let mut stack = vec![Pending {
            ino,
            local: local.to_path_buf(),
            shown: shown.to_string(),
            damaged,
        }];
        while let Some(dir) = stack.pop() {
            self.walk_dir(dir, &mut stack)?;
        }
        Ok(())
    }

    /// The entries of one directory: all of them, or for a damaged one
    /// those that decode (each one that does not is skipped).
    fn list(&mut self, dir: &Pending) -> Vec<DirEntry> {
        if dir.damaged {
            return match self.core.readdir_lenient(dir.ino) {
                Ok((entries, bad)) => {
                    for why in bad {
                        self.note_skip(&dir.shown, &why);
                    }
                    entries
                }
                Err(e) => {
                    self.skip(&dir.shown, &e);
                    Vec::new()
                }
            };
        }
        let mut entries = Vec::new();
        let listed = self.core.readdir(dir.ino, 0, |e| {
            entries.push(e);
            true
        });
        if let Err(e) = listed {
            // The entries decoded before the failure are still good.
            self.skip(&format!("{} (part of it)", dir.shown), &e);
        }
        entries
    }

    /// Copies every entry of one directory; pushes its subdirectories.
    fn walk_dir(&mut self, dir: Pending, stack: &mut Vec<Pending>) -> CliResult<()> {
        for e in self.list(&dir) {
            let shown = child(&dir.shown, &e.name);
            if !safe_name(&e.name) {
                self.note_skip(&shown, "a name no file may have");
                continue;
            }
            let seen = self.reached(e.ino);
            let local = dir.local.join(OsStr::from_bytes(&e.name));
            let damaged = match self.look(e.ino, &shown) {
                Node::Leaf(attr) => {
                    self.copy_leaf(&attr, &local, &shown)?;
                    continue;
                }
                Node::Unreadable => continue,
                _ if seen => {
                    self.note_skip(
                        &shown,
                        "a directory already copied (a cycle or a second name)",
                    );
                    continue;
                }
                Node::Dir => false,
                Node::DamagedDir => true,
            };
            if self.make_dir(&local, &shown)? {
                stack.push(Pending {
                    ino: e.ino,
                    local,
                    shown,
                    damaged,
                });
            }
        }
        Ok(())
    }

    /// Creates the copy of a directory; false (skipped) if the name is
    /// taken already, as a duplicate name in a damaged directory makes it.
    fn make_dir(&mut self, local: &Path, shown: &str) -> CliResult<bool> {
        match std::fs::create_dir(local) {
            Ok(()) => {
                self.copied.dirs += 1;
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                self.note_skip(shown, "its name is taken in the copy already");
                Ok(false)
            }
            Err(e) => Err(local_error(local, &e)),
        }
    }

    /// Copies a file or symlink; other kinds are skipped by name.
    fn copy_leaf(&mut self, attr: &Attr, local: &Path, shown: &str) -> CliResult<()> {
        match attr.kind {
            FileKind::Regular => self.copy_file(attr, local, shown),
            FileKind::Symlink => self.copy_symlink(attr.ino, local, shown),
            other => {
                self.note_skip(shown, &format!("a {} is not copied", kind_name(other)));
                Ok(())
            }
        }
    }

    fn copy_file(&mut self, attr: &Attr, local: &Path, shown: &str) -> CliResult<()> {
        let mut out = match std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(local)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                self.note_skip(shown, "its name is taken in the copy already");
                return Ok(());
            }
            Err(e) => return Err(local_error(local, &e)),
        };
        let mut buf = vec![0u8; CHUNK];
        let mut at = 0u64;
        while at < attr.size {
            let n = match self.core.read(attr.ino, at, &mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    drop(out);
                    std::fs::remove_file(local).map_err(|le| local_error(local, &le))?;
                    self.skip(shown, &e);
                    return Ok(());
                }
            };
            out.write_all(&buf[..n])
                .map_err(|e| local_error(local, &e))?;
            at += n as u64;
        }
        self.copied.files += 1;
        self.copied.bytes += at;
        Ok(())
    }

    fn copy_symlink(&mut self, ino: u64, local: &Path, shown: &str) -> CliResult<()> {
        let target = match self.core.readlink(ino) {
            Ok(t) => t,
            Err(e) => {
                self.skip(shown, &e);
                return Ok(());
            }
        };
        match std::os::unix::fs::symlink(OsStr::from_bytes(&target), local) {
            Ok(()) => {
                self.copied.symlinks += 1;
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                self.note_skip(shown, "its name is taken in the copy already");
                Ok(())
            }
            Err(e) => Err(local_error(local, &e)),
        }
    }

    fn skip(&mut self, shown: &str, e: &FsError) {
        self.note_skip(shown, &e.to_string());
    }

    fn note_skip(&mut self, shown: &str, why: &str) {
        self.copied.skipped.push(format!("{shown}: {why}"));
    }
}

/// A name the walk may create: what a directory entry holds on a healthy
/// pool (`amber_core` refuses any other), checked again because a damaged
/// one could hold anything.
fn safe_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

/// The pool path of entry `name` of directory `dir`, for messages.
/// The shown path of `name` inside `dir`, escaped as every name amberfs
/// prints (control characters and bytes that are not UTF-8 as `\xNN`).
fn child(dir: &str, name: &[u8]) -> String {
    let name = Escaped(name);
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Fifo => "FIFO",
        FileKind::Socket => "socket",
        FileKind::CharDevice => "character device",
        FileKind::BlockDevice => "block device",
        FileKind::Regular => "regular file",
        FileKind::Directory => "directory",
        FileKind::Symlink => "symbolic link",
    }
}

fn local_error(local: &Path, e: &std::io::Error) -> CliError {
    CliError::new(format!(
        "writing the copy at {} failed: {e} — free space there or choose another destination; \
         nothing in the pool was changed",
        local.shown()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_destination_are_refused() {
        for bad in [&b""[..], b".", b"..", b"a/b", b"/", b"a\0b"] {
            assert!(!safe_name(bad), "{bad:?}");
        }
        for good in [&b"a"[..], b"...", b"a b", b"\xff\xfe"] {
            assert!(safe_name(good), "{good:?}");
        }
        assert_eq!(child("/", b"a"), "/a");
        assert_eq!(child("/d", b"a"), "/d/a");
    }
}
