//! The logical state of a pool as a user sees it, and the oracle that
//! compares a recovered pool with the states before and after the
//! interrupted operation.
//!
//! Times are left out: recovery may legitimately keep an old mtime next to
//! new data (an in-place overwrite persists the data before the inode
//! line), and comparing them would need a model of every op's time rules.
//! Block counts are left out too: an interrupted size-growing write may
//! leave its new blocks linked past EOF, which is invisible to readers and
//! accounted by recovery; fsck judges the accounting.

use amber_core::Core;
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Most nodes a walk visits; far above what a test pool holds, so only a
/// corrupt tree (a directory cycle) reaches it.
const MAX_NODES: usize = 100_000;
/// Deepest path a walk follows, for the same reason.
const MAX_DEPTH: usize = 256;

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    File(Vec<u8>),
    Symlink(Vec<u8>),
    /// A directory and the inode its ".." names.
    Dir {
        parent: u64,
    },
    Other,
}

/// One path's inode as stat and read show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub ino: u64,
    pub kind: FileKind,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub content: Content,
    /// Extended attributes, by name.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// Every path reachable from the root ("" is the root itself).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FsState {
    pub nodes: BTreeMap<String, Node>,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Reads the whole tree. Fails (with the path) on anything a consistent
/// pool cannot show: readdir naming an entry lookup cannot find, kinds that
/// disagree, a cycle.
pub fn capture<D: PmDevice>(fs: &Core<D>) -> Result<FsState, String> {
    let mut st = FsState::default();
    let mut stack: Vec<(String, u64, usize)> = vec![(String::new(), ROOT_INO, 0)];
    while let Some((path, ino, depth)) = stack.pop() {
        if st.nodes.len() >= MAX_NODES || depth > MAX_DEPTH {
            return Err(format!(
                "tree walk passed {MAX_NODES} nodes or depth {MAX_DEPTH} at /{path}: a cycle?"
            ));
        }
        let a = fs
            .getattr(ino)
            .map_err(|e| format!("getattr /{path}: {e}"))?;
        let content = match a.kind {
            FileKind::Regular => {
                let len =
                    usize::try_from(a.size).map_err(|_| format!("/{path}: size {}", a.size))?;
                let mut buf = vec![0u8; len];
                let n = fs
                    .read(ino, 0, &mut buf)
                    .map_err(|e| format!("read /{path}: {e}"))?;
                if n != len {
                    return Err(format!("read /{path}: {n} of {len} bytes"));
                }
                Content::File(buf)
            }
            FileKind::Symlink => Content::Symlink(
                fs.readlink(ino)
                    .map_err(|e| format!("readlink /{path}: {e}"))?,
            ),
            FileKind::Directory => {
                let parent = fs
                    .lookup(ino, b"..")
                    .map_err(|e| format!("lookup /{path}/..: {e}"))?
                    .ino;
                let mut entries = Vec::new();
                fs.readdir(ino, 0, |e| {
                    entries.push(e);
                    entries.len() < MAX_NODES
                })
                .map_err(|e| format!("readdir /{path}: {e}"))?;
                for e in entries {
                    let name = String::from_utf8_lossy(&e.name).into_owned();
                    let child = join(&path, &name);
                    let found = fs
                        .lookup(ino, &e.name)
                        .map_err(|err| format!("lookup /{child} (listed by readdir): {err}"))?;
                    if found.ino != e.ino || found.kind != e.kind {
                        return Err(format!(
                            "/{child}: readdir says ino {} {:?}, lookup says ino {} {:?}",
                            e.ino, e.kind, found.ino, found.kind
                        ));
                    }
                    if st.nodes.contains_key(&child) {
                        return Err(format!("/{child} is listed twice"));
                    }
                    stack.push((child, e.ino, depth + 1));
                }
                Content::Dir { parent }
            }
            _ => Content::Other,
        };
        let mut xattrs = BTreeMap::new();
        for name in fs
            .listxattr(ino)
            .map_err(|e| format!("listxattr /{path}: {e}"))?
        {
            let value = fs
                .getxattr(ino, &name)
                .map_err(|e| format!("getxattr /{path}: {e}"))?;
            if xattrs.insert(name, value).is_some() {
                return Err(format!("/{path} lists an attribute twice"));
            }
        }
        let node = Node {
            xattrs,
            ino,
            kind: a.kind,
            perm: a.perm,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            size: a.size,
            content,
        };
        if st.nodes.insert(path.clone(), node).is_some() {
            return Err(format!("/{path} is listed twice"));
        }
    }
    Ok(st)
}

/// How an interrupted data write may have landed: each byte in the range
/// is old or new, metadata is all old or all new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRange {
    pub ino: u64,
    pub off: u64,
    pub len: u64,
}

/// The first difference between two states, for a failure message.
pub fn diff(got: &FsState, want: &FsState) -> Option<String> {
    for (path, n) in &got.nodes {
        match want.nodes.get(path) {
            None => return Some(format!("/{path} exists but should not")),
            Some(w) if w != n => return Some(node_diff(path, n, w)),
            Some(_) => {}
        }
    }
    want.nodes
        .keys()
        .find(|p| !got.nodes.contains_key(*p))
        .map(|p| format!("/{p} is missing"))
}

fn node_diff(path: &str, got: &Node, want: &Node) -> String {
    let mut out = format!("/{path}:");
    let mut field = |name: &str, g: String, w: String| {
        if g != w {
            let _ = write!(out, " {name} {g} (want {w})");
        }
    };
    field("ino", got.ino.to_string(), want.ino.to_string());
    field(
        "kind",
        format!("{:?}", got.kind),
        format!("{:?}", want.kind),
    );
    field(
        "perm",
        format!("{:o}", got.perm),
        format!("{:o}", want.perm),
    );
    field("uid", got.uid.to_string(), want.uid.to_string());
    field("gid", got.gid.to_string(), want.gid.to_string());
    field("nlink", got.nlink.to_string(), want.nlink.to_string());
    field("size", got.size.to_string(), want.size.to_string());
    match (&got.content, &want.content) {
        (Content::File(g), Content::File(w)) if g != w => {
            let at = g
                .iter()
                .zip(w)
                .position(|(a, b)| a != b)
                .unwrap_or(g.len().min(w.len()));
            let _ = write!(out, " content differs from byte {at}");
        }
        (g, w) if g != w => {
            let _ = write!(out, " content {g:?} (want {w:?})");
        }
        _ => {}
    }
    out
}

/// `st` with the content of inode `ino` blanked, so metadata can be
/// compared apart from a torn data range.
fn without_content(st: &FsState, ino: u64) -> FsState {
    let mut out = st.clone();
    for n in out.nodes.values_mut() {
        if n.ino == ino {
            n.content = Content::Other;
        }
    }
    out
}

/// Whether the content of a file recovered from an interrupted write is
/// possible: bytes outside the write as after it, bytes inside old or new,
/// where "old" past the old end of file is zero.
fn torn_ok(got: &[u8], old: &[u8], new: &[u8], w: &WriteRange) -> Result<(), String> {
    let (lo, hi) = (w.off as usize, (w.off + w.len) as usize);
    for (i, &b) in got.iter().enumerate() {
        let n = new.get(i).copied().unwrap_or(0);
        let o = old.get(i).copied().unwrap_or(0);
        let fine = if (lo..hi).contains(&i) {
            b == o || b == n
        } else {
            b == n
        };
        if !fine {
            return Err(format!(
                "byte {i} is {b:#04x}; want {} (old {o:#04x}, new {n:#04x}; write covered {lo}..{hi})",
                if (lo..hi).contains(&i) { "old or new" } else { "unchanged" }
            ));
        }
    }
    Ok(())
}

/// The oracle: `Ok` if `got` is a state the interrupted operation may
/// leave. Without a write range it must equal `before` or `after`; with
/// one, metadata must equal one of them and the written file's bytes may
/// be torn within the range.
pub fn judge(
    got: &FsState,
    before: &FsState,
    after: &FsState,
    write: Option<&WriteRange>,
) -> Result<(), String> {
    if got == before || got == after {
        return Ok(());
    }
    let Some(w) = write else {
        return Err(format!(
            "neither before nor after: vs before {}; vs after {}",
            diff(got, before).unwrap_or_default(),
            diff(got, after).unwrap_or_default()
        ));
    };
    let g = without_content(got, w.ino);
    let (b, a) = (
        without_content(before, w.ino),
        without_content(after, w.ino),
    );
    if g != b && g != a {
        return Err(format!(
            "metadata neither before nor after: vs before {}; vs after {}",
            diff(&g, &b).unwrap_or_default(),
            diff(&g, &a).unwrap_or_default()
        ));
    }
    let file = |s: &FsState| -> Vec<u8> {
        s.nodes
            .values()
            .find_map(|n| match (&n.content, n.ino == w.ino) {
                (Content::File(c), true) => Some(c.clone()),
                _ => None,
            })
            .unwrap_or_default()
    };
    let (old, new) = (file(before), file(after));
    for (path, n) in &got.nodes {
        if let (Content::File(c), true) = (&n.content, n.ino == w.ino) {
            torn_ok(c, &old, &new, w).map_err(|e| format!("/{path}: {e}"))?;
        }
    }
    Ok(())
}
