//! Reading everything a mounted pool shows, as `ls -lR`, `cat` and
//! `getfattr` would, with bounded work whatever the pool claims: a file's
//! size may be a terabyte of holes, so a file is read at its start and at
//! its end, not whole.

use amber_core::{Core, FsError};
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;
use rustc_hash::FxHashSet;

/// Most nodes a walk visits.
const MAX_NODES: usize = 10_000;
/// Bytes read per call.
const CHUNK: u64 = 64 * 1024;
/// Bytes read from a file's start, and from its end.
const READ_EACH_END: u64 = 1 << 20;

/// Visits every path from the root: stats it, reads it (files, symlinks,
/// attributes), and checks that readdir and lookup agree and that no
/// directory is reached twice. Returns the nodes visited.
pub fn walk<D: PmDevice>(fs: &Core<D>) -> Result<usize, String> {
    let mut stack = vec![("/".to_string(), ROOT_INO)];
    let mut dirs = FxHashSet::default();
    let mut nodes = 0;
    while let Some((path, ino)) = stack.pop() {
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(format!("more than {MAX_NODES} nodes"));
        }
        let what = |e: FsError| format!("{path}: {e}");
        let a = fs.getattr(ino).map_err(what)?;
        match a.kind {
            FileKind::Regular => read_ends(fs, ino, a.size).map_err(what)?,
            FileKind::Symlink => drop(fs.readlink(ino).map_err(what)?),
            FileKind::Directory => {
                if !dirs.insert(ino) {
                    return Err(format!("{path}: directory {ino} is reached twice"));
                }
                fs.lookup(ino, b"..").map_err(what)?;
                stack.extend(children(fs, ino, &path)?);
            }
            _ => {}
        }
        for name in fs.listxattr(ino).map_err(what)? {
            fs.getxattr(ino, &name).map_err(what)?;
        }
    }
    Ok(nodes)
}

/// A directory's entries, each looked up again by name.
fn children<D: PmDevice>(fs: &Core<D>, ino: u64, path: &str) -> Result<Vec<(String, u64)>, String> {
    let mut entries = Vec::new();
    fs.readdir(ino, 0, |e| {
        entries.push(e);
        entries.len() <= MAX_NODES
    })
    .map_err(|e| format!("{path}: readdir: {e}"))?;
    let mut out = Vec::new();
    for e in entries {
        let child = format!("{path}{}/", String::from_utf8_lossy(&e.name));
        let found = fs
            .lookup(ino, &e.name)
            .map_err(|err| format!("{child}: lookup of a listed name: {err}"))?;
        if (found.ino, found.kind) != (e.ino, e.kind) {
            return Err(format!(
                "{child}: readdir says inode {} ({:?}), lookup {} ({:?})",
                e.ino, e.kind, found.ino, found.kind
            ));
        }
        out.push((child, e.ino));
    }
    Ok(out)
}

/// Reads the first and the last `READ_EACH_END` bytes of a file of `size`
/// bytes; every read must return all it asks for.
fn read_ends<D: PmDevice>(fs: &Core<D>, ino: u64, size: u64) -> Result<(), FsError> {
    let head = 0..size.min(READ_EACH_END);
    let tail = size.saturating_sub(READ_EACH_END).max(head.end)..size;
    let mut buf = vec![0u8; CHUNK as usize];
    for range in [head, tail] {
        let mut at = range.start;
        while at < range.end {
            let n = (range.end - at).min(CHUNK) as usize;
            let got = fs.read(ino, at, &mut buf[..n])?;
            if got != n {
                return Err(FsError::Corrupted(format!(
                    "a read at {at} of a {size}-byte file returned {got} of {n} bytes"
                )));
            }
            at += n as u64;
        }
    }
    Ok(())
}
