//! rename, including across directories, over an existing target,
//! RENAME_NOREPLACE, RENAME_EXCHANGE and RENAME_WHITEOUT — one journal
//! transaction each. Renames are serialized by `rename_lock`, so the check
//! that a directory is not moved into its own subtree walks a parent chain
//! no other rename can change meanwhile.

use super::entry::EntryPlace;
use super::lock::{find, lock_sorted, Locked};
use super::namespace::NewNode;
use super::{check_name, flags, live, Core};
use crate::dir::DirSlot;
use crate::durability::{Atomicity, Durability};
use crate::error::{FsError, Result};
use crate::inode::BlockIndex;
use crate::journal::Tx;
use crate::types::{Owner, RenameMode};
use amber_format::{FileKind, Inode, Timespec, ROOT_INO};
use amber_pmem::PmDevice;

/// Deepest directory tree the cycle check walks before calling it corrupt.
const MAX_DEPTH: usize = 1 << 16;

/// One rename, its entries looked up and checked.
struct Move<'a> {
    parent: u64,
    name: &'a [u8],
    newparent: u64,
    newname: &'a [u8],
    mode: RenameMode,
    src: DirSlot,
    tgt: Option<DirSlot>,
    src_is_dir: bool,
    tgt_is_dir: bool,
}

/// Positions of the rename's inodes among the locked guards.
struct Guards {
    op: usize,
    np: usize,
    si: usize,
    ti: Option<usize>,
}

/// The new images a rename commits, and what DRAM does once it has.
struct Plan {
    opd: Inode,
    npd: Inode,
    sd: Inode,
    /// An exchanged target's new image.
    td: Option<Inode>,
    /// Where a new entry went (a rename to a name that did not exist).
    place: Option<EntryPlace>,
    /// A replaced target's blocks, when the rename freed it.
    tgt_freed: Option<Option<Vec<u64>>>,
    /// The whiteout left at the source name: its number and image.
    whiteout: Option<(u64, Inode)>,
}

impl<D: PmDevice> Core<D> {
    /// Whether directory `dir` is `ancestor` or lies below it.
    fn is_within(&self, dir: u64, ancestor: u64) -> Result<bool> {
        let mut at = dir;
        for _ in 0..MAX_DEPTH {
            if at == ancestor {
                return Ok(true);
            }
            if at == ROOT_INO {
                return Ok(false);
            }
            at = self.inode(at)?.read().disk.parent;
        }
        Err(FsError::Corrupted(format!(
            "directory {dir} has no path to the root"
        )))
    }

    /// Renames `parent/name` to `newparent/newname`.
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        self.rename_with(parent, name, newparent, newname, mode, None)
    }

    /// RENAME_WHITEOUT (overlayfs): renames `parent/name` to
    /// `newparent/newname` (failing if that exists when `no_replace`) and
    /// leaves at the source name a whiteout, a character device 0/0 owned
    /// by `owner`, in the same transaction: no crash shows the name empty,
    /// or both names on the moved inode.
    pub fn rename_whiteout(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        no_replace: bool,
        owner: Owner,
    ) -> Result<()> {
        let mode = if no_replace {
            RenameMode::NoReplace
        } else {
            RenameMode::Replace
        };
        self.rename_with(parent, name, newparent, newname, mode, Some(owner))
    }

    /// Looks both names up, refuses what the mode and the tree forbid,
    /// locks every inode involved and commits.
    fn rename_with(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        mode: RenameMode,
        whiteout: Option<Owner>,
    ) -> Result<()> {
        check_name(name)?;
        check_name(newname)?;
        self.check_writable()?;
        let _serial = self.rename_lock.lock();
        let src = self.lookup_slot(parent, name)?;
        let tgt = match self.lookup_slot(newparent, newname) {
            Ok(s) => Some(s),
            Err(FsError::NotFound) => None,
            Err(e) => return Err(e),
        };
        match (mode, tgt) {
            (RenameMode::NoReplace, Some(_)) => return Err(FsError::AlreadyExists),
            (RenameMode::Exchange, None) => return Err(FsError::NotFound),
            _ => {}
        }
        if tgt.is_some_and(|t| t.ino == src.ino) {
            return Ok(()); // two names of one inode: POSIX says do nothing
        }
        let is_dir = |s: DirSlot| FileKind::from_dtype(s.dtype) == Some(FileKind::Directory);
        let m = Move {
            parent,
            name,
            newparent,
            newname,
            mode,
            src,
            tgt,
            src_is_dir: is_dir(src),
            tgt_is_dir: tgt.is_some_and(is_dir),
        };
        if m.src_is_dir && self.is_within(newparent, src.ino)? {
            return Err(FsError::WouldCreateCycle);
        }
        if let (RenameMode::Exchange, Some(t), true) = (mode, tgt, m.tgt_is_dir) {
            if self.is_within(parent, t.ino)? {
                return Err(FsError::WouldCreateCycle);
            }
        }
        let mut refs = vec![
            (parent, self.inode(parent)?),
            (newparent, self.inode(newparent)?),
            (src.ino, self.inode(src.ino)?),
        ];
        if let Some(t) = tgt {
            refs.push((t.ino, self.inode(t.ino)?));
        }
        let mut g = lock_sorted(refs);
        let at = Guards {
            op: find(&mut g, parent),
            np: find(&mut g, newparent),
            si: find(&mut g, src.ino),
            ti: tgt.map(|t| find(&mut g, t.ino)),
        };
        self.check_locked(&g, &at, &m)?;
        self.commit_rename(&mut g, &at, &m, whiteout)
    }

    /// Checks, under the locks, what could not be checked before them.
    fn check_locked(&self, g: &[Locked], at: &Guards, m: &Move<'_>) -> Result<()> {
        live(&g[at.op])?;
        if g[at.np].disk.nlink == 0 {
            return Err(FsError::NotFound);
        }
        // Other renames are excluded, and unlink/create hold the directory
        // locks we now hold: the entries cannot have changed, but check.
        if g[at.op].dir()?.get(m.name) != Some(m.src) || g[at.np].dir()?.get(m.newname) != m.tgt {
            return Err(FsError::Corrupted("directory changed during rename".into()));
        }
        flags::may_remove_from(&g[at.op])?;
        flags::unchangeable(&g[at.si])?;
        match at.ti {
            Some(ti) => {
                flags::may_remove_from(&g[at.np])?;
                flags::unchangeable(&g[ti])?;
            }
            None => flags::may_add_to(&g[at.np])?,
        }
        if let (Some(ti), RenameMode::Replace) = (at.ti, m.mode) {
            match (m.src_is_dir, m.tgt_is_dir) {
                (true, false) => return Err(FsError::NotADirectory),
                (false, true) => return Err(FsError::IsADirectory),
                (true, true) if !g[ti].dir()?.is_empty() => return Err(FsError::DirectoryNotEmpty),
                _ => {}
            }
        }
        Ok(())
    }

    /// Builds the transaction, commits it and brings DRAM along. A whiteout
    /// takes its inode number first and gives it back on failure.
    fn commit_rename(
        &self,
        g: &mut [Locked],
        at: &Guards,
        m: &Move<'_>,
        whiteout: Option<Owner>,
    ) -> Result<()> {
        let now = self.now();
        let whiteout = match whiteout {
            None => None,
            Some(owner) => {
                let ino = self.inos.alloc().ok_or(FsError::NoSpace)?;
                let node = NewNode {
                    kind: FileKind::CharDevice,
                    perm: 0,
                    rdev: 0,
                    owner,
                    target: None,
                };
                Some((ino, self.new_inode(ino, &g[at.op], &node, now)))
            }
        };
        let taken = whiteout.as_ref().map(|w| w.0);
        let mut tx = Tx::new();
        let done = self
            .plan_rename(&mut tx, g, at, m, whiteout, now)
            .and_then(|plan| match self.commit(tx) {
                Ok(()) => Ok(plan),
                Err(e) => {
                    if let Some(p) = plan.place {
                        self.abandon_entry(p);
                    }
                    Err(e)
                }
            });
        match done {
            Ok(plan) => self.apply_rename(g, at, m, plan, now),
            Err(e) => {
                if let Some(ino) = taken {
                    self.inos.free(ino);
                }
                Err(e)
            }
        }
    }

    /// Records in `tx` every entry and inode the rename changes.
    fn plan_rename(
        &self,
        tx: &mut Tx,
        g: &mut [Locked],
        at: &Guards,
        m: &Move<'_>,
        whiteout: Option<(u64, Inode)>,
        now: Timespec,
    ) -> Result<Plan> {
        let (op, np, si) = (at.op, at.np, at.si);
        let mut plan = Plan {
            opd: g[op].disk.clone(),
            npd: g[np].disk.clone(),
            sd: g[si].disk.clone(),
            td: None,
            place: None,
            tgt_freed: None,
            whiteout,
        };
        for d in [&mut plan.opd, &mut plan.npd] {
            d.mtime = now;
            d.ctime = now;
        }
        plan.sd.ctime = now;
        let cross = m.parent != m.newparent;
        let (src, srct) = (m.src, m.src.dtype);
        // Link-count changes of the two directories, applied at the end so
        // that a rename within one directory adds both to the one inode.
        let (mut op_links, mut np_links) = (0i64, 0i64);
        if m.src_is_dir && (cross || m.mode != RenameMode::Exchange) {
            op_links -= 1;
            np_links += 1;
            plan.sd.parent = m.newparent;
        }
        match (m.mode, m.tgt, at.ti) {
            (RenameMode::Exchange, Some(t), Some(ti)) => {
                self.plan_retarget_entry(tx, &g[op], src, m.name, t.ino, t.dtype);
                self.plan_retarget_entry(tx, &g[np], t, m.newname, src.ino, srct);
                let mut d = g[ti].disk.clone();
                d.ctime = now;
                if cross && m.tgt_is_dir {
                    d.parent = m.parent;
                    np_links -= 1;
                    op_links += 1;
                }
                plan.td = Some(d);
            }
            (_, Some(t), Some(ti)) => {
                self.plan_retarget_entry(tx, &g[np], t, m.newname, src.ino, srct);
                self.plan_leave_source(tx, &g[op], m, &plan.whiteout);
                plan.tgt_freed = Some(self.drop_link_tx(tx, &mut g[ti], now)?);
                if m.tgt_is_dir {
                    np_links -= 1;
                }
            }
            _ => {
                let p = self.plan_add_entry(tx, &g[np], &mut plan.npd, m.newname, src.ino, srct)?;
                plan.place = Some(p);
                self.plan_leave_source(tx, &g[op], m, &plan.whiteout);
            }
        }
        let adjust = |links: u32, delta: i64| (links as i64 + delta) as u32;
        if cross {
            plan.opd.nlink = adjust(plan.opd.nlink, op_links);
            plan.npd.nlink = adjust(plan.npd.nlink, np_links);
            tx.inode(&self.layout, m.parent, &plan.opd);
        } else {
            // One directory: npd carries any new block, both deltas apply.
            plan.npd.nlink = adjust(plan.npd.nlink, op_links + np_links);
        }
        tx.inode(&self.layout, m.newparent, &plan.npd);
        tx.inode(&self.layout, src.ino, &plan.sd);
        if let (Some(d), Some(t)) = (&plan.td, m.tgt) {
            tx.inode(&self.layout, t.ino, d);
        }
        if let Some((ino, d)) = &plan.whiteout {
            tx.inode(&self.layout, *ino, d);
        }
        Ok(plan)
    }

    /// The source entry goes, or names the whiteout instead.
    fn plan_leave_source(
        &self,
        tx: &mut Tx,
        dir: &Locked,
        m: &Move<'_>,
        whiteout: &Option<(u64, Inode)>,
    ) {
        match whiteout {
            Some((ino, _)) => {
                let dtype = FileKind::CharDevice.dtype();
                self.plan_retarget_entry(tx, dir, m.src, m.name, *ino, dtype);
            }
            None => self.plan_remove_entry(tx, dir, m.src),
        }
    }

    /// DRAM follows the committed transaction.
    fn apply_rename(
        &self,
        g: &mut [Locked],
        at: &Guards,
        m: &Move<'_>,
        plan: Plan,
        now: Timespec,
    ) -> Result<()> {
        let (op, np, si) = (at.op, at.np, at.si);
        let (src, srct) = (m.src, m.src.dtype);
        match (m.mode, m.tgt, at.ti) {
            (RenameMode::Exchange, Some(t), Some(ti)) => {
                g[op].dir_mut()?.retarget(m.name, t.ino, t.dtype);
                g[np].dir_mut()?.retarget(m.newname, src.ino, srct);
                g[ti].disk = plan.td.expect("exchange target image");
            }
            (_, Some(_), Some(ti)) => {
                g[np].dir_mut()?.retarget(m.newname, src.ino, srct);
                let freed = plan.tgt_freed.expect("target dropped");
                self.finish_drop_link(&mut g[ti], freed, now);
            }
            _ => {
                let p = plan.place.expect("entry placed");
                self.apply_add_entry(&mut g[np], p, m.newname, src.ino, srct);
            }
        }
        if m.mode != RenameMode::Exchange {
            match plan.whiteout {
                Some((ino, disk)) => {
                    let dtype = FileKind::CharDevice.dtype();
                    g[op].dir_mut()?.retarget(m.name, ino, dtype);
                    let map = BlockIndex::default();
                    self.cache_new(ino, disk, map, Durability::Posix, Atomicity::None);
                }
                None => {
                    g[op].dir_mut()?.remove(m.name);
                }
            }
        }
        if m.parent != m.newparent {
            g[op].disk = plan.opd;
        }
        g[np].disk = plan.npd;
        g[si].disk = plan.sd;
        Ok(())
    }
}
