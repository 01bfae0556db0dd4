//! The reference model: an in-memory file tree with inode identities (so
//! hard links share content and link counts are observable), and path
//! resolution that follows symlinks the way Amber's library API documents
//! it (intermediate components always, the last one when asked; "." and
//! ".."; at most 40 symlinks per resolution). Every operation checks its
//! error conditions in the order the POSIX-shaped API promises, so the
//! harness can compare error kinds, not only successes.

use std::collections::BTreeMap;

/// A model inode number (unrelated to Amber's numbers; the checker maps
/// one to the other and requires the mapping to be a bijection).
pub type Id = usize;
/// The model's root directory.
pub const ROOT: Id = 0;
/// Most symlinks one path resolution follows (Linux's ELOOP limit, which
/// the API documents).
pub const MAX_SYMLINKS: usize = 40;

/// Error kinds the model can predict; anything else Amber returns is a
/// mismatch by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum E {
    NotFound,
    AlreadyExists,
    NotADirectory,
    IsADirectory,
    DirectoryNotEmpty,
    WouldCreateCycle,
    NotPermitted,
    SymlinkLoop,
    InvalidArgument,
    InvalidName,
    /// Not predicted by the model (NoSpace, Corrupted, ...): the text.
    Other(String),
}

/// The kind of a node, as compared against Amber's `FileType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

#[derive(Debug, Clone)]
pub enum Body {
    Dir {
        entries: BTreeMap<String, Id>,
        parent: Id,
    },
    File(Vec<u8>),
    Symlink(String),
}

#[derive(Debug, Clone)]
pub struct Node {
    /// Permission bits including set-id and sticky (mode & 0o7777).
    pub perm: u32,
    /// Directory entries naming this node (non-directories only; a
    /// directory's link count is derived from its subdirectories).
    pub links: u32,
    pub body: Body,
}

/// What `stat` shows, minus times and owners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    pub perm: u32,
    pub nlink: u32,
    /// Files: bytes; symlinks: target length; directories: not compared
    /// (their size is a whole number of directory blocks).
    pub size: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Tree {
    pub nodes: BTreeMap<Id, Node>,
    next: Id,
    /// Open handles per node: an unlinked file lives until the last closes.
    open: BTreeMap<Id, u32>,
}

/// How `rename` treats an existing target (mirrors `RenameMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Replace,
    NoReplace,
    Exchange,
}

/// The components of `p` without empty ones and ".", as the API splits.
pub fn components(p: &str) -> Vec<&str> {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

/// Clears set-user-id, and set-group-id when group-execute is set: what a
/// write does to the mode (POSIX "kill privileges").
pub fn kill_privs(perm: u32) -> u32 {
    let mut p = perm & !0o4000;
    if p & 0o010 != 0 {
        p &= !0o2000;
    }
    p
}

impl Tree {
    /// An empty tree whose root has `root_perm`.
    pub fn new(root_perm: u32) -> Tree {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            ROOT,
            Node {
                perm: root_perm,
                links: 1,
                body: Body::Dir {
                    entries: BTreeMap::new(),
                    parent: ROOT,
                },
            },
        );
        Tree {
            nodes,
            next: 1,
            open: BTreeMap::new(),
        }
    }

    pub fn node(&self, id: Id) -> &Node {
        &self.nodes[&id]
    }

    pub fn kind(&self, id: Id) -> Kind {
        match self.node(id).body {
            Body::Dir { .. } => Kind::Dir,
            Body::File(_) => Kind::File,
            Body::Symlink(_) => Kind::Symlink,
        }
    }

    /// The entries of directory `id`, or NotADirectory.
    pub fn entries(&self, id: Id) -> Result<&BTreeMap<String, Id>, E> {
        match &self.node(id).body {
            Body::Dir { entries, .. } => Ok(entries),
            _ => Err(E::NotADirectory),
        }
    }

    fn entries_mut(&mut self, id: Id) -> &mut BTreeMap<String, Id> {
        match &mut self.nodes.get_mut(&id).expect("node").body {
            Body::Dir { entries, .. } => entries,
            _ => panic!("model: {id} is not a directory"),
        }
    }

    fn parent_of_dir(&self, id: Id) -> Id {
        match self.node(id).body {
            Body::Dir { parent, .. } => parent,
            _ => panic!("model: {id} is not a directory"),
        }
    }

    fn set_parent(&mut self, id: Id, to: Id) {
        if let Body::Dir { parent, .. } = &mut self.nodes.get_mut(&id).expect("node").body {
            *parent = to;
        }
    }

    /// Link count as stat shows it.
    pub fn nlink(&self, id: Id) -> u32 {
        match &self.node(id).body {
            Body::Dir { entries, .. } => {
                2 + entries
                    .values()
                    .filter(|c| self.kind(**c) == Kind::Dir)
                    .count() as u32
            }
            _ => self.node(id).links,
        }
    }

    pub fn stat_of(&self, id: Id) -> Stat {
        let n = self.node(id);
        let size = match &n.body {
            Body::Dir { .. } => None,
            Body::File(d) => Some(d.len() as u64),
            Body::Symlink(t) => Some(t.len() as u64),
        };
        Stat {
            kind: self.kind(id),
            perm: n.perm,
            nlink: self.nlink(id),
            size,
        }
    }

    fn walk(
        &self,
        start: Id,
        comps: &[&str],
        follow_last: bool,
        budget: &mut usize,
    ) -> Result<Id, E> {
        let mut at = start;
        for (i, c) in comps.iter().enumerate() {
            let entries = self.entries(at)?;
            let child = if *c == ".." {
                self.parent_of_dir(at)
            } else {
                *entries.get(*c).ok_or(E::NotFound)?
            };
            let last = i + 1 == comps.len();
            match &self.node(child).body {
                Body::Symlink(t) if !last || follow_last => {
                    if *budget == 0 {
                        return Err(E::SymlinkLoop);
                    }
                    *budget -= 1;
                    let base = if t.starts_with('/') { ROOT } else { at };
                    at = self.walk(base, &components(t), true, budget)?;
                }
                _ => at = child,
            }
        }
        Ok(at)
    }

    /// The node `p` names.
    pub fn resolve(&self, p: &str, follow_last: bool) -> Result<Id, E> {
        let mut budget = MAX_SYMLINKS;
        self.walk(ROOT, &components(p), follow_last, &mut budget)
    }

    /// The node that would hold `p`, and `p`'s last component. The parent
    /// is not checked to be a directory here (the operation does that).
    pub fn resolve_parent(&self, p: &str) -> Result<(Id, String), E> {
        let comps = components(p);
        let Some((last, dirs)) = comps.split_last() else {
            return Err(E::InvalidName);
        };
        if *last == ".." {
            return Err(E::InvalidName);
        }
        let mut budget = MAX_SYMLINKS;
        let parent = self.walk(ROOT, dirs, true, &mut budget)?;
        Ok((parent, last.to_string()))
    }

    fn insert_new(&mut self, parent: Id, name: &str, perm: u32, body: Body) -> Result<Id, E> {
        if self.entries(parent)?.contains_key(name) {
            return Err(E::AlreadyExists);
        }
        let id = self.next;
        self.next += 1;
        self.nodes.insert(
            id,
            Node {
                perm,
                links: 1,
                body,
            },
        );
        self.entries_mut(parent).insert(name.to_string(), id);
        Ok(id)
    }

    /// O_CREAT|O_EXCL of a regular file with `perm`.
    pub fn create_file(&mut self, p: &str, perm: u32) -> Result<(), E> {
        let (parent, name) = self.resolve_parent(p)?;
        self.insert_new(parent, &name, perm & 0o7777, Body::File(Vec::new()))
            .map(|_| ())
    }

    /// mkdir with mode 0755; a set-group-id parent passes its bit on.
    pub fn mkdir(&mut self, p: &str) -> Result<(), E> {
        let (parent, name) = self.resolve_parent(p)?;
        let inherit = if self.entries(parent).is_ok() {
            self.node(parent).perm & 0o2000
        } else {
            0
        };
        let body = Body::Dir {
            entries: BTreeMap::new(),
            parent,
        };
        self.insert_new(parent, &name, 0o755 | inherit, body)
            .map(|_| ())
    }

    pub fn symlink(&mut self, target: &str, p: &str) -> Result<(), E> {
        if target.is_empty() {
            return Err(E::InvalidArgument);
        }
        let (parent, name) = self.resolve_parent(p)?;
        self.insert_new(parent, &name, 0o777, Body::Symlink(target.to_string()))
            .map(|_| ())
    }

    /// The regular file `p` names (following symlinks), as opening it
    /// for writing would find it.
    fn file_for_write(&self, p: &str) -> Result<Id, E> {
        let id = self.resolve(p, true)?;
        match self.kind(id) {
            Kind::Dir => Err(E::IsADirectory),
            _ => Ok(id),
        }
    }

    /// What opening `p` with O_CREAT (no O_EXCL) finds: the file, or a
    /// new one (mode 0644) if the path does not resolve. A dangling
    /// symlink is not followed to create its target: the create finds the
    /// name taken and the second lookup reports NotFound.
    fn open_create(&mut self, p: &str) -> Result<Id, E> {
        match self.resolve(p, true) {
            Err(E::NotFound) => {
                let (parent, name) = self.resolve_parent(p)?;
                match self.insert_new(parent, &name, 0o644, Body::File(Vec::new())) {
                    Err(E::AlreadyExists) => self.resolve(p, true),
                    r => r,
                }
            }
            r => r,
        }
    }

    /// write at `off` (at the end when `append`), creating the file first
    /// when `create`; returns bytes written.
    pub fn write(
        &mut self,
        p: &str,
        off: u64,
        data: &[u8],
        append: bool,
        create: bool,
    ) -> Result<usize, E> {
        if create {
            self.open_create(p)?;
        }
        let id = self.file_for_write(p)?;
        if data.is_empty() {
            return Ok(0);
        }
        let n = self.nodes.get_mut(&id).expect("node");
        n.perm = kill_privs(n.perm);
        let Body::File(bytes) = &mut n.body else {
            unreachable!("resolve follows symlinks")
        };
        let at = if append { bytes.len() } else { off as usize };
        if bytes.len() < at + data.len() {
            bytes.resize(at + data.len(), 0);
        }
        bytes[at..at + data.len()].copy_from_slice(data);
        Ok(data.len())
    }

    pub fn set_len(&mut self, p: &str, size: u64) -> Result<(), E> {
        let id = self.file_for_write(p)?;
        let Body::File(bytes) = &mut self.nodes.get_mut(&id).expect("node").body else {
            unreachable!("resolve follows symlinks")
        };
        bytes.resize(size as usize, 0);
        Ok(())
    }

    /// Whole contents (following symlinks).
    pub fn read(&self, p: &str) -> Result<Vec<u8>, E> {
        let id = self.resolve(p, true)?;
        match &self.node(id).body {
            Body::File(d) => Ok(d.clone()),
            _ => Err(E::IsADirectory),
        }
    }

    /// `len` bytes at `off`, cut at the end of the file.
    pub fn read_at(&self, p: &str, off: u64, len: u64) -> Result<Vec<u8>, E> {
        let d = self.read(p)?;
        let s = (off as usize).min(d.len());
        let e = (off.saturating_add(len) as usize).min(d.len());
        Ok(d[s..e].to_vec())
    }

    /// Drops one directory entry's reference to `id`, freeing it with the
    /// last one (a directory is removed only when empty, so it goes at once).
    fn drop_link(&mut self, id: Id) {
        let n = self.nodes.get_mut(&id).expect("node");
        if matches!(n.body, Body::Dir { .. }) {
            self.nodes.remove(&id);
            return;
        }
        n.links -= 1;
        if n.links == 0 && !self.open.contains_key(&id) {
            self.nodes.remove(&id);
        }
    }

    /// Opens `p` for reading and writing (no create): the node a handle
    /// keeps alive.
    pub fn open(&mut self, p: &str) -> Result<Id, E> {
        let id = self.file_for_write(p)?;
        *self.open.entry(id).or_insert(0) += 1;
        Ok(id)
    }

    /// Closes a handle of `id`, freeing the file if it was unlinked.
    pub fn close(&mut self, id: Id) {
        let n = self.open.get_mut(&id).expect("open handle");
        *n -= 1;
        if *n == 0 {
            self.open.remove(&id);
            if self.node(id).links == 0 {
                self.nodes.remove(&id);
            }
        }
    }

    /// Writes through a handle of `id` (the file may be unlinked).
    pub fn write_id(&mut self, id: Id, off: u64, data: &[u8]) -> usize {
        let n = self.nodes.get_mut(&id).expect("open node");
        n.perm = kill_privs(n.perm);
        let Body::File(bytes) = &mut n.body else {
            unreachable!("handles are opened on files")
        };
        let at = off as usize;
        if bytes.len() < at + data.len() {
            bytes.resize(at + data.len(), 0);
        }
        bytes[at..at + data.len()].copy_from_slice(data);
        data.len()
    }

    fn remove(&mut self, p: &str, want_dir: bool) -> Result<(), E> {
        let (parent, name) = self.resolve_parent(p)?;
        let id = *self.entries(parent)?.get(&name).ok_or(E::NotFound)?;
        match (want_dir, self.kind(id) == Kind::Dir) {
            (false, true) => return Err(E::IsADirectory),
            (true, false) => return Err(E::NotADirectory),
            (true, true) if !self.entries(id)?.is_empty() => return Err(E::DirectoryNotEmpty),
            _ => {}
        }
        self.entries_mut(parent).remove(&name);
        self.drop_link(id);
        Ok(())
    }

    pub fn unlink(&mut self, p: &str) -> Result<(), E> {
        self.remove(p, false)
    }

    pub fn rmdir(&mut self, p: &str) -> Result<(), E> {
        self.remove(p, true)
    }

    /// Whether directory `dir` is `ancestor` or lies below it.
    fn is_within(&self, dir: Id, ancestor: Id) -> bool {
        let mut at = dir;
        // A tree of n nodes has no parent chain longer than n.
        for _ in 0..=self.nodes.len() {
            if at == ancestor {
                return true;
            }
            if at == ROOT {
                return false;
            }
            at = self.parent_of_dir(at);
        }
        panic!("model: directory {dir} has no path to the root")
    }

    pub fn rename(&mut self, from: &str, to: &str, mode: Mode) -> Result<(), E> {
        let (op, on) = self.resolve_parent(from)?;
        let (np, nn) = self.resolve_parent(to)?;
        let src = *self.entries(op)?.get(&on).ok_or(E::NotFound)?;
        let tgt = self.entries(np)?.get(&nn).copied();
        match (mode, tgt) {
            (Mode::NoReplace, Some(_)) => return Err(E::AlreadyExists),
            (Mode::Exchange, None) => return Err(E::NotFound),
            _ => {}
        }
        if tgt == Some(src) {
            return Ok(()); // two names of one inode: nothing to do
        }
        let src_dir = self.kind(src) == Kind::Dir;
        let tgt_dir = tgt.is_some_and(|t| self.kind(t) == Kind::Dir);
        if src_dir && self.is_within(np, src) {
            return Err(E::WouldCreateCycle);
        }
        if mode == Mode::Exchange && tgt_dir && self.is_within(op, tgt.expect("target")) {
            return Err(E::WouldCreateCycle);
        }
        if let (Mode::Replace, Some(t)) = (mode, tgt) {
            match (src_dir, tgt_dir) {
                (true, false) => return Err(E::NotADirectory),
                (false, true) => return Err(E::IsADirectory),
                (true, true) if !self.entries(t)?.is_empty() => return Err(E::DirectoryNotEmpty),
                _ => {}
            }
        }
        match (mode, tgt) {
            (Mode::Exchange, Some(t)) => {
                self.entries_mut(op).insert(on, t);
                self.entries_mut(np).insert(nn, src);
                self.set_parent(src, np);
                self.set_parent(t, op);
            }
            (_, t) => {
                self.entries_mut(op).remove(&on);
                self.entries_mut(np).insert(nn, src);
                self.set_parent(src, np);
                if let Some(t) = t {
                    self.drop_link(t);
                }
            }
        }
        Ok(())
    }

    /// Another name for `orig` (not following a final symlink).
    pub fn hard_link(&mut self, orig: &str, link: &str) -> Result<(), E> {
        let id = self.resolve(orig, false)?;
        let (np, nn) = self.resolve_parent(link)?;
        // The new parent must be a directory before the source's kind is
        // looked at (Linux: ENOTDIR from the lookup before EPERM).
        let entries = self.entries(np)?;
        if self.kind(id) == Kind::Dir {
            return Err(E::NotPermitted);
        }
        if entries.contains_key(&nn) {
            return Err(E::AlreadyExists);
        }
        self.entries_mut(np).insert(nn, id);
        self.nodes.get_mut(&id).expect("node").links += 1;
        Ok(())
    }

    pub fn read_link(&self, p: &str) -> Result<String, E> {
        let id = self.resolve(p, false)?;
        match &self.node(id).body {
            Body::Symlink(t) => Ok(t.clone()),
            _ => Err(E::InvalidArgument),
        }
    }

    pub fn set_perm(&mut self, p: &str, perm: u32) -> Result<(), E> {
        let id = self.resolve(p, true)?;
        self.nodes.get_mut(&id).expect("node").perm = perm & 0o7777;
        Ok(())
    }

    pub fn stat(&self, p: &str, follow: bool) -> Result<Stat, E> {
        Ok(self.stat_of(self.resolve(p, follow)?))
    }

    /// Names and kinds in directory `p`, sorted by name.
    pub fn read_dir(&self, p: &str) -> Result<Vec<(String, Kind)>, E> {
        let id = self.resolve(p, true)?;
        Ok(self
            .entries(id)?
            .iter()
            .map(|(n, c)| (n.clone(), self.kind(*c)))
            .collect())
    }
}
