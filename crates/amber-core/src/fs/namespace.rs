//! Namespace operations: lookup, create (files, directories, symlinks,
//! special files), link, unlink, rmdir, readdir, readlink. Each change is
//! one journal transaction, committed while every inode it touches is
//! write-locked, so it is atomic across a crash and isolated from other
//! threads.

use super::lock::{find, lock_sorted};
use super::{attr_of, check_name, flags, live, Core};
use crate::dir::{DirIndex, DirSlot};
use crate::durability::{Atomicity, Durability};
use crate::error::{FsError, Result};
use crate::inode::{read_inode, walk, xattr_run, BlockIndex, InodeRef, InodeState};
use crate::journal::Tx;
use crate::types::{Attr, DirEntry, Owner};
use amber_format::dirent::{self, SLOTS_PER_BLOCK};
use amber_format::inode::{mode, INLINE_MAX};
use amber_format::xattr::Xattr;
use amber_format::{FileKind, Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// Most links to one inode.
pub const LINK_MAX: u32 = 65_000;
/// Longest symlink target (PATH_MAX less the terminating NUL).
pub const SYMLINK_MAX: usize = 4095;
/// How often an operation retries after a concurrent change moved a name
/// between its unlocked lookup and taking the locks.
const RETRIES: usize = 1000;

/// Fails unless `st` is a directory that still has a name: entries
/// cannot be added to a removed directory that someone still holds open.
/// Whether `name` may be added to the directory `p`: a live directory
/// that accepts new entries, without `name`, and below the link limit
/// when the new node is a directory (its `..` links `p`).
fn may_create_in(p: &InodeState, name: &[u8], is_dir: bool) -> Result<()> {
    live_dir(p)?;
    flags::may_add_to(p)?;
    if p.dir()?.get(name).is_some() {
        return Err(FsError::AlreadyExists);
    }
    if is_dir && p.disk.nlink >= LINK_MAX {
        return Err(FsError::TooManyLinks);
    }
    Ok(())
}

fn live_dir(st: &InodeState) -> Result<()> {
    live(st)?;
    st.dir()?;
    if st.disk.nlink == 0 {
        return Err(FsError::NotFound);
    }
    Ok(())
}

/// What to create.
pub(crate) struct NewNode<'a> {
    pub kind: FileKind,
    pub perm: u32,
    pub rdev: u64,
    pub owner: Owner,
    pub target: Option<&'a [u8]>,
}

impl<D: PmDevice> Core<D> {
    /// The entry `name` of directory `parent`.
    pub(crate) fn lookup_slot(&self, parent: u64, name: &[u8]) -> Result<DirSlot> {
        check_name(name)?;
        let r = self.inode(parent)?;
        let st = r.read();
        live(&st)?;
        st.dir()?.get(name).ok_or(FsError::NotFound)
    }

    /// Attributes of `name` in `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        if name == b"." {
            return self.getattr(parent);
        }
        if name == b".." {
            let r = self.inode(parent)?;
            let p = r.read().disk.parent;
            return self.getattr(p);
        }
        let s = self.lookup_slot(parent, name)?;
        self.getattr(s.ino)
    }

    /// Creates a regular file, FIFO, socket or device node.
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        owner: Owner,
    ) -> Result<Attr> {
        if kind == FileKind::Directory || kind == FileKind::Symlink {
            return Err(FsError::InvalidArgument(
                "mknod makes files, not directories or links",
            ));
        }
        self.create_node(
            parent,
            name,
            NewNode {
                kind,
                perm,
                rdev,
                owner,
                target: None,
            },
        )
    }

    /// Creates a directory.
    pub fn mkdir(&self, parent: u64, name: &[u8], perm: u32, owner: Owner) -> Result<Attr> {
        let kind = FileKind::Directory;
        self.create_node(
            parent,
            name,
            NewNode {
                kind,
                perm,
                rdev: 0,
                owner,
                target: None,
            },
        )
    }

    /// Creates a symbolic link to `target`.
    pub fn symlink(&self, parent: u64, name: &[u8], target: &[u8], owner: Owner) -> Result<Attr> {
        if target.is_empty() || target.contains(&0) {
            return Err(FsError::InvalidArgument(
                "symlink target is empty or contains NUL",
            ));
        }
        if target.len() > SYMLINK_MAX {
            return Err(FsError::NameTooLong);
        }
        let kind = FileKind::Symlink;
        let node = NewNode {
            kind,
            perm: 0o777,
            rdev: 0,
            owner,
            target: Some(target),
        };
        self.create_node(parent, name, node)
    }

    pub(crate) fn create_node(&self, parent: u64, name: &[u8], mut n: NewNode<'_>) -> Result<Attr> {
        check_name(name)?;
        self.check_writable()?;
        let pr = self.inode(parent)?;
        let mut p = pr.write();
        let is_dir = n.kind == FileKind::Directory;
        may_create_in(&p, name, is_dir)?;
        let (perm, acls) = self.creation_acls(&p, &n)?;
        n.perm = perm;
        let ino = self.inos.alloc().ok_or(FsError::NoSpace)?;
        let now = self.now();
        let mut child = self.new_inode(ino, &p, &n, now);
        let mut map = BlockIndex::default();
        let written = self.write_node_blocks(&p, &n, acls, &mut child, &mut map);
        let (fresh, durability, atomicity) = match written {
            Ok(w) => w,
            Err(e) => {
                self.inos.free(ino);
                return Err(e);
            }
        };
        let mut tx = Tx::new();
        let mut pd = p.disk.clone();
        let dtype = n.kind.dtype();
        let place = match self.plan_add_entry(&mut tx, &p, &mut pd, name, ino, dtype) {
            Ok(place) => place,
            Err(e) => {
                self.inos.free(ino);
                fresh.iter().for_each(|&b| self.blocks.free(b));
                return Err(e);
            }
        };
        if !fresh.is_empty() {
            // The target's and attributes' blocks must be durable before
            // the inode links them.
            self.drain()?;
        }
        pd.mtime = now;
        pd.ctime = now;
        if is_dir {
            pd.nlink += 1;
        }
        tx.inode(&self.layout, parent, &pd);
        tx.inode(&self.layout, ino, &child);
        if let Err(e) = self.commit(tx) {
            self.abandon_entry(place);
            return Err(e);
        }
        p.disk = pd;
        self.apply_add_entry(&mut p, place, name, ino, dtype);
        Ok(self.cache_new(ino, child, map, durability, atomicity))
    }

    /// Writes what a new node `child` links besides itself, unfenced: a
    /// long symlink's target, and the attributes it takes from directory
    /// `p` in its creating transaction (no crash shows it without them) —
    /// durability and atomicity for a file or directory (other kinds take
    /// no user. attributes, as on Linux, and have no data or entries to
    /// use them) and its ACLs `acls`. Returns those blocks and the
    /// durability and atomicity; on failure frees what it took.
    fn write_node_blocks(
        &self,
        p: &InodeState,
        n: &NewNode<'_>,
        acls: Vec<Xattr>,
        child: &mut Inode,
        map: &mut BlockIndex,
    ) -> Result<(Vec<u64>, Durability, Atomicity)> {
        let target_block = match n.target {
            Some(t) => self.store_target(child, map, t)?,
            None => None,
        };
        let inherits = matches!(n.kind, FileKind::Regular | FileKind::Directory);
        let (durability, atomicity) = if inherits {
            (p.durability, p.atomicity)
        } else {
            Default::default()
        };
        let run = match self.write_inherited(durability, atomicity, acls) {
            Ok(r) => r.unwrap_or(0..0),
            Err(e) => {
                target_block.into_iter().for_each(|b| self.blocks.free(b));
                return Err(e);
            }
        };
        child.xattr_block = if run.is_empty() { 0 } else { run.start };
        let fresh = target_block.into_iter().chain(run).collect();
        Ok((fresh, durability, atomicity))
    }

    /// Stores a symlink's target in the new inode `child`: inline when it
    /// fits, else in a block of its own (returned), written but not yet
    /// drained.
    fn store_target(
        &self,
        child: &mut Inode,
        map: &mut BlockIndex,
        t: &[u8],
    ) -> Result<Option<u64>> {
        child.size = t.len() as u64;
        if t.len() <= INLINE_MAX {
            child.inline[..t.len()].copy_from_slice(t);
            return Ok(None);
        }
        let b = self.blocks.alloc(None).ok_or(FsError::NoSpace)?;
        let off = self.layout.block_offset(b);
        self.dev.write_nt(off, t);
        self.dev
            .zero_nt(off + t.len() as u64, BLOCK_SIZE - t.len() as u64);
        child.map_root = b;
        child.blocks = 1;
        map.set(0, b);
        Ok(Some(b))
    }

    /// The on-media image of new inode `ino`, created now in directory
    /// `p` as `n` says: the directory's set-group-id rule applied, the
    /// slot's generation advanced and its zone commit number kept.
    pub(crate) fn new_inode(
        &self,
        ino: u64,
        p: &InodeState,
        n: &NewNode<'_>,
        now: amber_format::Timespec,
    ) -> Inode {
        let is_dir = n.kind == FileKind::Directory;
        let old = read_inode(&*self.dev, &self.layout, ino);
        let mut child = Inode::free();
        let setgid_dir = p.disk.mode & mode::S_ISGID_BIT != 0;
        let mut perm = n.perm & mode::PERM_MASK;
        if setgid_dir && is_dir {
            perm |= mode::S_ISGID_BIT;
        }
        child.mode = n.kind.mode_bits() | perm;
        child.nlink = if is_dir { 2 } else { 1 };
        child.uid = n.owner.uid;
        child.gid = if setgid_dir { p.disk.gid } else { n.owner.gid };
        child.generation = old.generation.wrapping_add(1).max(1);
        // The zone commit number carries over: superseded (DOOMED)
        // descriptors of the number's last file stay dead (format::zone).
        child.zone_seq = old.zone_seq;
        child.atime = now;
        child.mtime = now;
        child.ctime = now;
        child.crtime = now;
        child.rdev = n.rdev;
        child.parent = if is_dir { p.ino } else { 0 };
        child
    }

    /// Puts an inode whose creation committed into the cache; returns its
    /// attributes.
    pub(crate) fn cache_new(
        &self,
        ino: u64,
        disk: Inode,
        map: BlockIndex,
        durability: Durability,
        atomicity: Atomicity,
    ) -> Attr {
        let is_dir = disk.mode & mode::S_IFMT == mode::S_IFDIR;
        let state = InodeState {
            ino,
            disk,
            map,
            dir: is_dir.then(DirIndex::default),
            open_count: 0,
            times_dirty: false,
            writes_since_fsync: u32::MAX,
            policy: None,
            buffered_size: None,
            durability,
            atomicity,
            // New files inherit only Amber's own attributes.
            capability: false,
            maps: None,
        };
        let attr = attr_of(&state);
        self.cache.insert(ino, state);
        attr
    }

    /// Adds a hard link `newname` in `newparent` to `ino`.
    pub fn link(&self, ino: u64, newparent: u64, newname: &[u8]) -> Result<Attr> {
        check_name(newname)?;
        self.check_writable()?;
        let mut g = lock_sorted(vec![
            (ino, self.inode(ino)?),
            (newparent, self.inode(newparent)?),
        ]);
        let (ci, pi) = (find(&mut g, ino), find(&mut g, newparent));
        live(&g[ci])?;
        live_dir(&g[pi])?;
        if g[ci].kind() == FileKind::Directory {
            return Err(FsError::NotPermitted);
        }
        flags::unchangeable(&g[ci])?;
        flags::may_add_to(&g[pi])?;
        if g[ci].disk.nlink >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        if g[pi].dir()?.get(newname).is_some() {
            return Err(FsError::AlreadyExists);
        }
        let now = self.now();
        let mut tx = Tx::new();
        let mut pd = g[pi].disk.clone();
        let dtype = g[ci].kind().dtype();
        let place = self.plan_add_entry(&mut tx, &g[pi], &mut pd, newname, ino, dtype)?;
        pd.mtime = now;
        pd.ctime = now;
        let mut cd = g[ci].disk.clone();
        cd.nlink += 1;
        cd.ctime = now;
        tx.inode(&self.layout, newparent, &pd);
        tx.inode(&self.layout, ino, &cd);
        if let Err(e) = self.commit(tx) {
            self.abandon_entry(place);
            return Err(e);
        }
        g[pi].disk = pd;
        self.apply_add_entry(&mut g[pi], place, newname, ino, dtype);
        g[ci].disk = cd;
        Ok(attr_of(&g[ci]))
    }

    /// Removes the non-directory `name` from `parent`.
    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, false)
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, true)
    }

    fn remove_entry(&self, parent: u64, name: &[u8], want_dir: bool) -> Result<()> {
        self.check_writable()?;
        for _ in 0..RETRIES {
            let s = self.lookup_slot(parent, name)?;
            let mut g = lock_sorted(vec![
                (parent, self.inode(parent)?),
                (s.ino, self.inode(s.ino)?),
            ]);
            let (pi, ci) = (find(&mut g, parent), find(&mut g, s.ino));
            live(&g[pi])?;
            if g[pi].dir()?.get(name) != Some(s) || !g[ci].disk.in_use() {
                continue; // renamed or removed meanwhile: look again
            }
            // The flags first, as Linux's may_delete: EPERM before the
            // kind or a directory's entries say anything.
            flags::may_remove_from(&g[pi])?;
            flags::unchangeable(&g[ci])?;
            let is_dir = g[ci].kind() == FileKind::Directory;
            match (want_dir, is_dir) {
                (false, true) => return Err(FsError::IsADirectory),
                (true, false) => return Err(FsError::NotADirectory),
                (true, true) if !g[ci].dir()?.is_empty() => return Err(FsError::DirectoryNotEmpty),
                _ => {}
            }
            let now = self.now();
            let mut tx = Tx::new();
            self.plan_remove_entry(&mut tx, &g[pi], s);
            let mut pd = g[pi].disk.clone();
            pd.mtime = now;
            pd.ctime = now;
            if is_dir {
                pd.nlink -= 1;
            }
            tx.inode(&self.layout, parent, &pd);
            let freed = self.drop_link_tx(&mut tx, &mut g[ci], now)?;
            self.commit(tx)?;
            g[pi].disk = pd;
            g[pi].dir_mut()?.remove(name);
            self.finish_drop_link(&mut g[ci], freed, now);
            return Ok(());
        }
        Err(FsError::Corrupted(
            "directory kept changing under unlink".into(),
        ))
    }

    /// Records in `tx` one link fewer for `st`: the inode is freed when no
    /// link and no open handle is left (a directory loses both its links).
    /// Returns the blocks to free after commit, if it is freed.
    pub(crate) fn drop_link_tx(
        &self,
        tx: &mut Tx,
        st: &mut InodeState,
        now: amber_format::Timespec,
    ) -> Result<Option<Vec<u64>>> {
        let is_dir = st.kind() == FileKind::Directory;
        let left = if is_dir {
            0
        } else {
            st.disk.nlink.saturating_sub(1)
        };
        if left == 0 && st.open_count == 0 {
            return Ok(Some(self.free_inode_tx(tx, st)?));
        }
        let mut d = st.disk.clone();
        d.nlink = left;
        d.ctime = now;
        tx.inode(&self.layout, st.ino, &d);
        Ok(None)
    }

    /// Updates DRAM after `drop_link_tx` committed.
    pub(crate) fn finish_drop_link(
        &self,
        st: &mut InodeState,
        freed: Option<Vec<u64>>,
        now: amber_format::Timespec,
    ) {
        match freed {
            Some(blocks) => self.finish_free(st, blocks),
            None => {
                st.disk.nlink = if st.kind() == FileKind::Directory {
                    0
                } else {
                    st.disk.nlink - 1
                };
                st.disk.ctime = now;
            }
        }
    }

    /// Records in `tx` the freeing of inode `st` (mode 0; generation and
    /// zone commit number kept, so a reused number gets a new generation
    /// and continues the commit numbers). Returns its blocks.
    pub(crate) fn free_inode_tx(&self, tx: &mut Tx, st: &mut InodeState) -> Result<Vec<u64>> {
        let t = walk(
            &*self.dev,
            &self.layout,
            st.disk.map_root,
            st.disk.map_height,
        )?;
        let mut blocks: Vec<u64> = t.data.iter().map(|(_, b)| *b).collect();
        blocks.extend(t.nodes);
        blocks.extend(xattr_run(
            &*self.dev,
            &self.layout,
            st.ino,
            st.disk.xattr_block,
        )?);
        let mut free = Inode::free();
        free.generation = st.disk.generation;
        free.zone_seq = st.disk.zone_seq;
        tx.inode(&self.layout, st.ino, &free);
        Ok(blocks)
    }

    /// Updates DRAM after a free committed: blocks and number go back.
    pub(crate) fn finish_free(&self, st: &mut InodeState, blocks: Vec<u64>) {
        // Data the policy buffered for a file that no longer exists is
        // dropped, never written back.
        self.policy.forget(self.context(), st);
        let (generation, zone_seq) = (st.disk.generation, st.disk.zone_seq);
        st.disk = Inode::free();
        st.disk.generation = generation;
        st.disk.zone_seq = zone_seq;
        st.map = BlockIndex::default();
        st.dir = None;
        self.blocks.free_all(&blocks);
        self.cache.remove(st.ino);
        self.inos.free(st.ino);
    }

    /// Calls `f` for each entry of directory `ino` from position `pos`
    /// (0: the start; otherwise a cookie from an earlier entry) until `f`
    /// returns false. "." and ".." are not included. Moves the directory's
    /// atime as the mount's rule says (Linux's getdents does).
    pub fn readdir(&self, ino: u64, pos: u64, f: impl FnMut(DirEntry) -> bool) -> Result<()> {
        let r = self.inode(ino)?;
        self.entries(&r, ino, pos, f)?;
        // The write lock only when the rule moves the atime (never under
        // noatime, nodiratime or a read-only mount).
        if self.atime_due(&r.read().disk, true, self.now()) {
            self.accessed(&r, true);
        }
        Ok(())
    }

    fn entries(
        &self,
        r: &InodeRef,
        ino: u64,
        pos: u64,
        mut f: impl FnMut(DirEntry) -> bool,
    ) -> Result<()> {
        let st = r.read();
        live(&st)?;
        st.dir()?;
        let nblocks = st.disk.size / BLOCK_SIZE;
        let per = SLOTS_PER_BLOCK as u64;
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        let mut at = pos;
        while at < nblocks * per {
            let (b, first) = (at / per, (at % per) as usize);
            let pb = st.map.get(b).ok_or_else(|| {
                FsError::Corrupted(format!("directory {ino} has a hole at block {b}"))
            })?;
            self.dev.read(self.layout.block_offset(pb), &mut buf);
            // Decode from the block's first slot: entries may have been
            // removed and others written since the cookie was handed out,
            // so `first` may fall inside an entry now.
            let mut slot = 0;
            while slot < SLOTS_PER_BLOCK {
                let e = dirent::decode(&buf, slot).map_err(|e| {
                    FsError::Corrupted(format!("directory {ino} block {b} slot {slot}: {e}"))
                })?;
                let Some(e) = e else {
                    slot += 1;
                    continue;
                };
                let start = slot;
                slot += e.nslots;
                if start < first {
                    continue;
                }
                let Some(kind) = FileKind::from_dtype(e.dtype) else {
                    return Err(FsError::Corrupted(format!(
                        "directory {ino} has a bad d_type"
                    )));
                };
                let cookie = b * per + slot as u64;
                if !f(DirEntry {
                    ino: e.ino,
                    kind,
                    name: e.name,
                    cookie,
                }) {
                    return Ok(());
                }
            }
            at = (b + 1) * per;
        }
        Ok(())
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        if st.kind() != FileKind::Symlink {
            return Err(FsError::InvalidArgument("not a symbolic link"));
        }
        let len = st.disk.size as usize;
        if len <= INLINE_MAX {
            return Ok(st.disk.inline[..len].to_vec());
        }
        if len > SYMLINK_MAX {
            return Err(FsError::Corrupted(format!(
                "symlink {ino} is {len} bytes long"
            )));
        }
        let b = st.map.get(0).ok_or_else(|| {
            FsError::Corrupted(format!("symlink {ino} has no block for its target"))
        })?;
        let mut t = vec![0u8; len];
        self.dev.read(self.layout.block_offset(b), &mut t);
        Ok(t)
    }
}
