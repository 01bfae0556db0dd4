//! `bare`: no file system at all, the baseline HUNTER measures against
//! ("a bare non-temporal copy of the same volume into the same pool",
//! hunter.txt §IV-B, the dashed "bare PM" line).
//!
//! The pool is made as an Amber target's is ([`open_pool`]: same file,
//! size and emulator preset, so every byte pays the same emulated cost).
//! Each file is a list of extents of that pool in a DRAM map
//! (`file.rs` says how files grow); free space is a first-fit map of
//! free runs (`space.rs`). A `write_at` is one non-temporal copy of the
//! caller's buffer into the file's extent (one per extent it crosses,
//! rare: a file written front to back is one extent) and one drain, so
//! each write is durable when it returns, as under Amber's `direct`
//! policy; `fsync` has nothing left to do. Nothing but file data is ever
//! stored to the pool: names, sizes and extent maps live only in DRAM, so
//! the PM traffic it reports is the data alone.
//!
//! The namespace is one mutex over two hash maps: creates, opens, removes
//! and listings take it in turn (reads and writes of open files take only
//! their file's lock), so `bare` is a baseline for the data path, not for
//! how metadata operations scale over threads.
//!
//! Out of space is an `io::Error` of kind `StorageFull` (ENOSPC), never a
//! panic.

mod file;
mod space;

pub use space::BLOCK;

use crate::target::{open_pool, Target, TargetFile};
use amber_pmem::{PmDevice, WriteStats};
use file::{Node, Shared};
use space::Space;
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Longest name in a path, as NAME_MAX.
const NAME_MAX: usize = 255;

/// Directories and files, by path relative to the root ("" is the root).
#[derive(Default)]
struct Namespace {
    /// Every directory and the names in it.
    dirs: HashMap<String, BTreeSet<String>>,
    files: HashMap<String, Arc<Node>>,
}

impl Namespace {
    /// Drops a name from its parent's listing.
    fn detach(&mut self, path: &str) {
        let (parent, name) = split(path);
        if let Some(names) = self.dirs.get_mut(parent) {
            names.remove(name);
        }
    }
}

/// The bare pool as a [`Target`].
pub struct BareTarget {
    pool: PathBuf,
    preset: String,
    shared: Arc<Shared>,
    ns: Mutex<Namespace>,
}

fn err(kind: io::ErrorKind, path: &str, what: &str) -> io::Error {
    io::Error::new(kind, format!("bare: {path:?}: {what}"))
}

/// `a//b/./c/` → `a/b/c`; `..` and over-long names are refused.
fn norm(path: &str) -> io::Result<String> {
    let mut out = Vec::new();
    for c in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if c == ".." || c.len() > NAME_MAX {
            return Err(err(
                io::ErrorKind::InvalidInput,
                path,
                "`..` or a name longer than 255 bytes",
            ));
        }
        out.push(c);
    }
    Ok(out.join("/"))
}

/// (parent, name) of a normalized path.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl BareTarget {
    /// Makes a fresh pool of `size` bytes at `pool` (replacing any file
    /// there) behind emulator `preset`, with no files in it.
    pub fn create(pool: &Path, size: u64, preset: &str) -> Result<BareTarget, String> {
        if size < BLOCK {
            return Err(format!(
                "a pool of {size} bytes holds no {BLOCK}-byte block; give a larger --pool-size"
            ));
        }
        let dev = open_pool(pool, size, preset)?;
        let mut ns = Namespace::default();
        ns.dirs.insert(String::new(), BTreeSet::new());
        Ok(BareTarget {
            pool: pool.to_path_buf(),
            preset: preset.to_string(),
            shared: Arc::new(Shared {
                dev,
                space: Mutex::new(Space::new(size)),
            }),
            ns: Mutex::new(ns),
        })
    }

    /// Removes the pool file (the mapping goes with the last open file).
    pub fn destroy(self) -> io::Result<()> {
        std::fs::remove_file(&self.pool)
    }

    fn ns(&self) -> std::sync::MutexGuard<'_, Namespace> {
        self.ns.lock().expect("bare: namespace lock")
    }
}

/// An open bare file. Appends and writes take the file's lock, so an
/// append lands at the end however many handles append at once.
struct BareFile(Arc<Node>);

impl TargetFile for BareFile {
    /// One NT copy and one drain: durable on return.
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write(buf, Some(off))
    }

    fn read_at(&mut self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        Ok(self.0.read(buf, off))
    }

    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write(buf, None)
    }

    /// Nothing to do: every write was drained before it returned.
    fn fsync(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn size(&mut self) -> io::Result<u64> {
        Ok(self.0.size())
    }
}

impl Target for BareTarget {
    fn name(&self) -> String {
        "bare".into()
    }

    fn policy(&self) -> String {
        "-".into()
    }

    fn preset(&self) -> String {
        self.preset.clone()
    }

    /// `sync` changes nothing: every write is durable on return.
    fn create(&self, path: &str, _sync: bool) -> io::Result<Box<dyn TargetFile>> {
        let p = norm(path)?;
        if p.is_empty() {
            return Err(err(io::ErrorKind::IsADirectory, path, "is the root"));
        }
        let mut ns = self.ns();
        if ns.dirs.contains_key(&p) {
            return Err(err(io::ErrorKind::IsADirectory, path, "is a directory"));
        }
        if let Some(node) = ns.files.get(&p) {
            node.truncate();
            return Ok(Box::new(BareFile(node.clone())));
        }
        let (parent, name) = split(&p);
        let Some(names) = ns.dirs.get_mut(parent) else {
            return Err(err(io::ErrorKind::NotFound, path, "no such directory"));
        };
        names.insert(name.to_string());
        let node = Arc::new(Node::new(self.shared.clone()));
        ns.files.insert(p, node.clone());
        Ok(Box::new(BareFile(node)))
    }

    /// `append` changes nothing: [`TargetFile::append`] always writes at
    /// the end, under the file's lock.
    fn open(&self, path: &str, _append: bool) -> io::Result<Box<dyn TargetFile>> {
        let p = norm(path)?;
        match self.ns().files.get(&p) {
            Some(node) => Ok(Box::new(BareFile(node.clone()))),
            None => Err(err(io::ErrorKind::NotFound, path, "no such file")),
        }
    }

    fn mkdir_all(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let mut ns = self.ns();
        let mut at = String::new();
        for c in p.split('/').filter(|c| !c.is_empty()) {
            let parent = std::mem::take(&mut at);
            at = join(&parent, c);
            if ns.files.contains_key(&at) {
                return Err(err(io::ErrorKind::AlreadyExists, &at, "is a file"));
            }
            if !ns.dirs.contains_key(&at) {
                ns.dirs.insert(at.clone(), BTreeSet::new());
                ns.dirs
                    .get_mut(&parent)
                    .expect("parents are made first")
                    .insert(c.to_string());
            }
        }
        Ok(())
    }

    /// Unlinks; the bytes are freed when the last open handle goes too.
    fn remove_file(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let mut ns = self.ns();
        if ns.files.remove(&p).is_none() {
            let kind = if ns.dirs.contains_key(&p) {
                io::ErrorKind::IsADirectory
            } else {
                io::ErrorKind::NotFound
            };
            return Err(err(kind, path, "no such file"));
        }
        ns.detach(&p);
        Ok(())
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let mut ns = self.ns();
        if ns.files.remove(&p).is_some() {
            ns.detach(&p);
            return Ok(());
        }
        if !ns.dirs.contains_key(&p) {
            return Ok(());
        }
        // Each directory is taken out of the map once, so this ends.
        let mut stack = vec![p.clone()];
        while let Some(dir) = stack.pop() {
            for name in ns.dirs.remove(&dir).unwrap_or_default() {
                let child = join(&dir, &name);
                if ns.files.remove(&child).is_none() {
                    stack.push(child);
                }
            }
        }
        if p.is_empty() {
            ns.dirs.insert(String::new(), BTreeSet::new());
        } else {
            ns.detach(&p);
        }
        Ok(())
    }

    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        let p = norm(path)?;
        let ns = self.ns();
        match ns.dirs.get(&p) {
            Some(names) => Ok(names.iter().cloned().collect()),
            None if ns.files.contains_key(&p) => {
                Err(err(io::ErrorKind::NotADirectory, path, "is a file"))
            }
            None => Err(err(io::ErrorKind::NotFound, path, "no such directory")),
        }
    }

    /// A file's size; 0 for a directory.
    fn size(&self, path: &str) -> io::Result<u64> {
        let p = norm(path)?;
        let ns = self.ns();
        match ns.files.get(&p) {
            Some(node) => Ok(node.size()),
            None if ns.dirs.contains_key(&p) => Ok(0),
            None => Err(err(io::ErrorKind::NotFound, path, "no such file")),
        }
    }

    /// Nothing to do. Amber's reset remounts so its DRAM state starts cold
    /// while PM keeps everything; bare has no state but its namespace and
    /// extent maps, which live in DRAM for the target's life (there is no
    /// mount to redo and no cache to drop), and the pool keeps every byte.
    fn reset(&self) -> io::Result<()> {
        Ok(())
    }

    /// The device's counters: file data only (see the module doc).
    fn pm_stats(&self) -> Option<WriteStats> {
        Some(self.shared.dev.stats())
    }
}
