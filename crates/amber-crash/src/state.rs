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
    /// Inode flags (immutable, append-only).
    pub flags: u32,
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
            FileKind::Regular => Content::File(capture_file(fs, ino, &path, a.size)?),
            FileKind::Symlink => Content::Symlink(
                fs.readlink(ino)
                    .map_err(|e| format!("readlink /{path}: {e}"))?,
            ),
            FileKind::Directory => {
                let (parent, children) = capture_dir(fs, &st, ino, &path)?;
                stack.extend(children.into_iter().map(|(c, i)| (c, i, depth + 1)));
                Content::Dir { parent }
            }
            _ => Content::Other,
        };
        let node = Node {
            xattrs: capture_xattrs(fs, ino, &path)?,
            ino,
            kind: a.kind,
            perm: a.perm,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            size: a.size,
            flags: a.flags,
            content,
        };
        if st.nodes.insert(path.clone(), node).is_some() {
            return Err(format!("/{path} is listed twice"));
        }
    }
    Ok(st)
}

/// A regular file's `size` bytes, all of which must read.
fn capture_file<D: PmDevice>(
    fs: &Core<D>,
    ino: u64,
    path: &str,
    size: u64,
) -> Result<Vec<u8>, String> {
    let len = usize::try_from(size).map_err(|_| format!("/{path}: size {size}"))?;
    let mut buf = vec![0u8; len];
    let n = fs
        .read(ino, 0, &mut buf)
        .map_err(|e| format!("read /{path}: {e}"))?;
    if n != len {
        return Err(format!("read /{path}: {n} of {len} bytes"));
    }
    Ok(buf)
}

/// A directory's parent and its children (path and inode), each checked
/// against a lookup and against the nodes `st` already holds.
fn capture_dir<D: PmDevice>(
    fs: &Core<D>,
    st: &FsState,
    ino: u64,
    path: &str,
) -> Result<(u64, Vec<(String, u64)>), String> {
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
    let mut children = Vec::with_capacity(entries.len());
    for e in entries {
        let name = String::from_utf8_lossy(&e.name).into_owned();
        let child = join(path, &name);
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
        children.push((child, e.ino));
    }
    Ok((parent, children))
}

/// Every extended attribute of `ino`, by name.
fn capture_xattrs<D: PmDevice>(
    fs: &Core<D>,
    ino: u64,
    path: &str,
) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
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
    Ok(xattrs)
}

/// How the bytes of an interrupted data write may have landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// Each byte in the range old or new, independently: `direct`'s
    /// overwrites, and the in-place zeroing of a punch under every policy.
    ByteWise,
    /// All old or all new: a write() under a policy whose writes are
    /// atomic (`DataPolicy::atomic_writes`), or under any policy when
    /// `CrashConfig::force_atomic_oracle` asks for it.
    Whole,
}

/// The data range an interrupted op was writing and how it may have
/// landed; metadata (size included) is all old or all new either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRange {
    pub ino: u64,
    pub off: u64,
    pub len: u64,
    pub landing: Landing,
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
    field(
        "flags",
        format!("{:#x}", got.flags),
        format!("{:#x}", want.flags),
    );
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
/// possible: bytes outside the write as after it, bytes inside old or new
/// (each on its own, or all of them together for [`Landing::Whole`]),
/// where "old" past the old end of file is zero.
fn torn_ok(got: &[u8], old: &[u8], new: &[u8], w: &WriteRange) -> Result<(), String> {
    let (lo, hi) = (w.off as usize, (w.off + w.len) as usize);
    if w.landing == Landing::Whole {
        whole_ok(got, old, new, lo..hi)?;
    }
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

/// Whether `got`'s bytes in `range` are all old or all new (zero past
/// either end of file); names the first byte of each kind if they mix.
fn whole_ok(
    got: &[u8],
    old: &[u8],
    new: &[u8],
    range: std::ops::Range<usize>,
) -> Result<(), String> {
    let at = |f: &[u8], i: usize| f.get(i).copied().unwrap_or(0);
    let end = range.end.min(got.len());
    let lo = range.start.min(end);
    let first_not = |f: &[u8]| (lo..end).find(|&i| got[i] != at(f, i));
    match (first_not(old), first_not(new)) {
        (None, _) | (_, None) => Ok(()),
        (Some(o), Some(n)) => Err(format!(
            "torn atomic write: bytes {}..{} mix old and new (byte {o} is not old, byte {n} \
             is not new)",
            range.start, range.end
        )),
    }
}

fn neither(got: &FsState, before: &FsState, after: &FsState) -> String {
    format!(
        "neither before nor after: vs before {}; vs after {}",
        diff(got, before).unwrap_or_default(),
        diff(got, after).unwrap_or_default()
    )
}

/// The oracle for a policy whose writes are durable on return: `Ok` if
/// `got` is one of the outcomes the interrupted operation may leave.
///
/// Every operation may leave `before` or `after`. A data write adds
/// nothing more when its range lands [`Landing::Whole`]: an atomic write's
/// outcomes are exactly {before, after}, so its range is all old or all
/// new, with the size that goes with it. A [`Landing::ByteWise`] range
/// adds every mix of the two inside the range: metadata equal to one of
/// them, each byte in the range old or new, every byte outside as after.
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
        return Err(neither(got, before, after));
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
    match w.landing {
        Landing::ByteWise => Ok(()),
        // Metadata and bytes each possible, but not from the same state
        // (the old size with new bytes, say).
        Landing::Whole => Err(format!("atomic write: {}", neither(got, before, after))),
    }
}

/// Contents a crash must not lose: `bytes` at `off` of inode `ino` (the
/// whole file, size included, when `whole`).
#[derive(Debug, Clone)]
struct Durable {
    ino: u64,
    off: usize,
    bytes: Vec<u8>,
    whole: bool,
}

impl Durable {
    /// The parts of `self` a write of `w` leaves alone (all of it for
    /// another file); a whole file's parts no longer pin its size.
    fn outside(self, w: &WriteRange) -> Vec<Durable> {
        let (start, end) = (w.off as usize, (w.off + w.len) as usize);
        let my_end = self.off + self.bytes.len();
        if self.ino != w.ino || end <= self.off || start >= my_end {
            return vec![self];
        }
        let part = |from: usize, to: usize| Durable {
            ino: self.ino,
            off: from,
            bytes: self.bytes[from - self.off..to - self.off].to_vec(),
            whole: false,
        };
        let mut out = Vec::with_capacity(2);
        if start > self.off {
            out.push(part(self.off, start));
        }
        if end < my_end {
            out.push(part(end, my_end));
        }
        out
    }
}

/// What a crash under a policy that buffers writes in DRAM may show,
/// learned from the run: per file, every value each byte ever had (a file
/// never shows a byte never written to it), and what fsync, syncfs and
/// O_SYNC writes made durable since it last changed.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Per inode, per byte offset, the set of values seen (256 bits).
    seen: BTreeMap<u64, Vec<[u64; 4]>>,
    durable: Vec<Durable>,
    /// Per inode, its contents since it was last made durable, in order
    /// (None once there were more than [`MAX_STATES`]): under a policy
    /// whose files change on PM in order, a crash shows one of them.
    states: BTreeMap<u64, Option<Vec<Vec<u8>>>>,
    /// Whether the policy promises that order (`ordered_files`).
    ordered: bool,
}

/// Most contents [`History`] keeps per file between two points that made
/// it durable; past it the file is judged byte by byte only. The suites'
/// workloads stay far below it.
const MAX_STATES: usize = 1024;

/// `st` with every regular file's content and size blanked: what must be
/// exactly before or after under a buffering policy (the namespace,
/// permissions, owners, links, attributes).
fn metadata_only(st: &FsState) -> FsState {
    let mut out = st.clone();
    for n in out.nodes.values_mut() {
        if let Content::File(_) = n.content {
            n.content = Content::Other;
            n.size = 0;
        }
    }
    out
}

fn file_of(st: &FsState, ino: u64) -> Option<&[u8]> {
    st.nodes.values().find_map(|n| match &n.content {
        Content::File(c) if n.ino == ino => Some(c.as_slice()),
        _ => None,
    })
}

impl History {
    /// An empty history; `ordered`: judge each file by the order of its
    /// changes too.
    pub fn new(ordered: bool) -> History {
        History {
            ordered,
            ..History::default()
        }
    }

    /// Records every byte value of every regular file in `st`.
    pub fn observe(&mut self, st: &FsState) {
        for n in st.nodes.values() {
            if let Content::File(c) = &n.content {
                self.add_state(n.ino, c);
                let seen = self.seen.entry(n.ino).or_default();
                if seen.len() < c.len() {
                    seen.resize(c.len(), [0; 4]);
                }
                for (set, &b) in seen.iter_mut().zip(c) {
                    set[b as usize / 64] |= 1 << (b % 64);
                }
            }
        }
    }

    /// Appends `c` to the contents file `ino` had, unless it is the last.
    fn add_state(&mut self, ino: u64, c: &[u8]) {
        let slot = self.states.entry(ino).or_insert_with(|| Some(Vec::new()));
        if let Some(list) = slot {
            if list.last().is_some_and(|l| l[..] == *c) {
                return;
            }
            if list.len() == MAX_STATES {
                *slot = None;
                return;
            }
            list.push(c.to_vec());
        }
    }

    /// File `ino` was made durable as `c`: no earlier content of it may
    /// come back.
    fn made_durable(&mut self, ino: u64, c: &[u8]) {
        self.states.insert(ino, Some(vec![c.to_vec()]));
    }

    /// After an op: forgets durable contents the op changed, then adds
    /// what it made durable: whole files (`synced`) and O_SYNC ranges.
    /// A write (`written`) forgets only the bytes it covers: the rest of
    /// what an fsync made durable must survive any crash after it.
    pub fn persisted(
        &mut self,
        after: &FsState,
        synced: &[u64],
        range: Option<&WriteRange>,
        written: Option<&WriteRange>,
    ) {
        if let Some(w) = written {
            self.durable = std::mem::take(&mut self.durable)
                .into_iter()
                .flat_map(|d| d.outside(w))
                .collect();
        }
        self.durable.retain(|d| {
            file_of(after, d.ino).is_some_and(|c| {
                c.get(d.off..d.off + d.bytes.len()) == Some(&d.bytes[..])
                    && (!d.whole || c.len() == d.bytes.len())
            })
        });
        for &ino in synced {
            if let Some(c) = file_of(after, ino) {
                self.made_durable(ino, c);
                self.durable.push(Durable {
                    ino,
                    off: 0,
                    bytes: c.to_vec(),
                    whole: true,
                });
            }
        }
        if let Some(w) = range {
            let (off, end) = (w.off as usize, (w.off + w.len) as usize);
            if let Some(c) = file_of(after, w.ino) {
                // O_SYNC, punch and zero range persist every earlier
                // change of the file first under an ordered policy.
                self.made_durable(w.ino, c);
            }
            if let Some(bytes) = file_of(after, w.ino).and_then(|c| c.get(off..end)) {
                self.durable.push(Durable {
                    ino: w.ino,
                    off,
                    bytes: bytes.to_vec(),
                    whole: false,
                });
            }
        }
    }

    /// Inodes of every regular file in `st` (what syncfs makes durable).
    pub fn files(st: &FsState) -> Vec<u64> {
        st.nodes
            .values()
            .filter(|n| matches!(n.content, Content::File(_)))
            .map(|n| n.ino)
            .collect()
    }

    /// The oracle under a buffering policy: the namespace and every
    /// attribute but a file's size and contents are exactly before or
    /// after the op (atomic); each file shows only bytes it once held;
    /// and what was durable before the op is intact, or as the op left
    /// it (inside an interrupted write's range torn as its [`Landing`]
    /// allows).
    pub fn judge(
        &self,
        got: &FsState,
        before: &FsState,
        after: &FsState,
        write: Option<&WriteRange>,
    ) -> Result<(), String> {
        let g = metadata_only(got);
        let (b, a) = (metadata_only(before), metadata_only(after));
        if g != b && g != a {
            return Err(format!(
                "namespace/attributes neither before nor after: vs before {}; vs after {}",
                diff(&g, &b).unwrap_or_default(),
                diff(&g, &a).unwrap_or_default()
            ));
        }
        for (path, n) in &got.nodes {
            let Content::File(c) = &n.content else {
                continue;
            };
            let seen = self.seen.get(&n.ino).map_or(&[][..], Vec::as_slice);
            if c.len() > seen.len() {
                return Err(format!(
                    "/{path}: size {} larger than the file ever was ({})",
                    c.len(),
                    seen.len()
                ));
            }
            if let Some(i) = c
                .iter()
                .zip(seen)
                .position(|(&x, set)| set[x as usize / 64] >> (x % 64) & 1 == 0)
            {
                return Err(format!(
                    "/{path}: byte {i} is {:#04x}, a value it never held",
                    c[i]
                ));
            }
            for d in self.durable.iter().filter(|d| d.ino == n.ino) {
                self.check_durable(path, c, d, before, after, write)?;
            }
            if self.ordered {
                self.check_order(path, n.ino, c, before, after, write)?;
            }
        }
        Ok(())
    }

    /// Under an ordered policy: file `ino` shows `c`, one of its contents
    /// since it was last made durable (the interrupted op's result among
    /// them), or the interrupted write's range torn as its [`Landing`]
    /// allows.
    fn check_order(
        &self,
        path: &str,
        ino: u64,
        c: &[u8],
        before: &FsState,
        after: &FsState,
        write: Option<&WriteRange>,
    ) -> Result<(), String> {
        let Some(Some(states)) = self.states.get(&ino) else {
            return Ok(());
        };
        // Newest first: most images show the file as the interrupted op
        // left it or found it, the last two contents.
        if states.iter().rev().any(|s| s[..] == *c) {
            return Ok(());
        }
        let (old, new) = (file_of(before, ino), file_of(after, ino));
        if let (Some(w), Some(old), Some(new)) = (write, old, new) {
            if w.ino == ino && torn_ok(c, old, new, w).is_ok() {
                return Ok(());
            }
        }
        Err(format!(
            "/{path}: {} bytes, none of the {} contents the file had since it was last made \
             durable (its changes reached PM out of order)",
            c.len(),
            states.len()
        ))
    }

    fn check_durable(
        &self,
        path: &str,
        c: &[u8],
        d: &Durable,
        before: &FsState,
        after: &FsState,
        write: Option<&WriteRange>,
    ) -> Result<(), String> {
        let end = d.off + d.bytes.len();
        let new = file_of(after, d.ino).unwrap_or_default();
        let old = file_of(before, d.ino).unwrap_or_default();
        let region = c.get(d.off..end);
        let as_after = region.is_some() && region == new.get(d.off..end);
        let size_ok = !d.whole || c.len() == d.bytes.len() || c.len() == new.len();
        if size_ok && (region == Some(&d.bytes[..]) || as_after) {
            return Ok(());
        }
        if let (Some(w), Some(r), true) = (write, region, size_ok) {
            // The interrupted op writes over the durable range: inside its
            // range each byte old or new, or all of them for an atomic
            // write, as under a policy durable on return.
            let base = d.off as u64;
            let (lo, hi) = (
                w.off.saturating_sub(base),
                (w.off + w.len).saturating_sub(base),
            );
            let rel = WriteRange {
                ino: w.ino,
                off: lo,
                len: hi - lo,
                landing: w.landing,
            };
            let tail = |f: &[u8]| f.get(d.off..).unwrap_or_default().to_vec();
            if w.ino == d.ino && torn_ok(r, &tail(old), &tail(new), &rel).is_ok() {
                return Ok(());
            }
        }
        Err(format!(
            "/{path}: lost durable data: {} bytes at {} (whole file: {}) {}",
            d.bytes.len(),
            d.off,
            d.whole,
            match region {
                None => format!("but the file has only {} bytes", c.len()),
                Some(r) => format!(
                    "differ from byte {}",
                    d.off
                        + r.iter()
                            .zip(&d.bytes)
                            .position(|(x, y)| x != y)
                            .unwrap_or(0)
                ),
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_file(content: &[u8]) -> FsState {
        let node = Node {
            ino: 2,
            kind: FileKind::Regular,
            perm: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            size: content.len() as u64,
            flags: 0,
            content: Content::File(content.to_vec()),
            xattrs: BTreeMap::new(),
        };
        FsState {
            nodes: BTreeMap::from([("f".to_string(), node)]),
        }
    }

    /// Two writes of one file, A then B, neither synced: a crash may show
    /// the file before them, after A or after both. B without A holds
    /// only bytes the file once held, so the byte-wise oracle takes it;
    /// the ordered one must not.
    #[test]
    fn the_ordered_oracle_rejects_a_later_write_without_an_earlier_one() {
        let states = [b"0000".as_slice(), b"AA00", b"AABB"];
        let judged = |ordered: bool, got: &[u8]| {
            let mut h = History::new(ordered);
            for s in states {
                h.observe(&one_file(s));
            }
            let last = one_file(states[2]);
            h.judge(&one_file(got), &last, &last, None)
        };
        for s in states {
            assert!(judged(true, s).is_ok(), "{s:?} is a state the file had");
        }
        assert!(judged(false, b"00BB").is_ok());
        let err = judged(true, b"00BB").unwrap_err();
        assert!(err.contains("out of order"), "{err}");
    }

    /// What a sync made durable bounds how far back a crash may go.
    #[test]
    fn the_ordered_oracle_forgets_contents_before_a_sync() {
        let mut h = History::new(true);
        h.observe(&one_file(b"0000"));
        let synced = one_file(b"AA00");
        h.observe(&synced);
        h.persisted(&synced, &[2], None, None);
        h.observe(&one_file(b"AABB"));
        let last = one_file(b"AABB");
        assert!(h.judge(&one_file(b"AA00"), &last, &last, None).is_ok());
        assert!(h.judge(&one_file(b"AABB"), &last, &last, None).is_ok());
        assert!(h.judge(&one_file(b"0000"), &last, &last, None).is_err());
    }
}
