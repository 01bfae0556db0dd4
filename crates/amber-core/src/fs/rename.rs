//! rename, including across directories, over an existing target,
//! RENAME_NOREPLACE and RENAME_EXCHANGE — one journal transaction each.
//! Renames are serialized by `rename_lock`, so the check that a directory
//! is not moved into its own subtree walks a parent chain no other rename
//! can change meanwhile.

use super::lock::{find, lock_sorted};
use super::{check_name, live, Core};
use crate::error::{FsError, Result};
use crate::journal::Tx;
use crate::types::RenameMode;
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;

/// Deepest directory tree the cycle check walks before calling it corrupt.
const MAX_DEPTH: usize = 1 << 16;

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
        let src_is_dir = FileKind::from_dtype(src.dtype) == Some(FileKind::Directory);
        let tgt_is_dir =
            tgt.is_some_and(|t| FileKind::from_dtype(t.dtype) == Some(FileKind::Directory));
        if src_is_dir && self.is_within(newparent, src.ino)? {
            return Err(FsError::WouldCreateCycle);
        }
        if mode == RenameMode::Exchange
            && tgt_is_dir
            && self.is_within(parent, tgt.expect("exchange").ino)?
        {
            return Err(FsError::WouldCreateCycle);
        }
        let mut refs = vec![
            (parent, self.inode(parent)?),
            (newparent, self.inode(newparent)?),
        ];
        refs.push((src.ino, self.inode(src.ino)?));
        if let Some(t) = tgt {
            refs.push((t.ino, self.inode(t.ino)?));
        }
        let mut g = lock_sorted(refs);
        let (op, np, si) = (
            find(&mut g, parent),
            find(&mut g, newparent),
            find(&mut g, src.ino),
        );
        let ti = tgt.map(|t| find(&mut g, t.ino));
        live(&g[op])?;
        if g[np].disk.nlink == 0 {
            return Err(FsError::NotFound);
        }
        // Other renames are excluded, and unlink/create hold the directory
        // locks we now hold: the entries cannot have changed, but check.
        if g[op].dir()?.get(name) != Some(src) || g[np].dir()?.get(newname) != tgt {
            return Err(FsError::Corrupted("directory changed during rename".into()));
        }
        if let Some(ti) = ti {
            if mode == RenameMode::Replace {
                match (src_is_dir, tgt_is_dir) {
                    (true, false) => return Err(FsError::NotADirectory),
                    (false, true) => return Err(FsError::IsADirectory),
                    (true, true) if !g[ti].dir()?.is_empty() => {
                        return Err(FsError::DirectoryNotEmpty)
                    }
                    _ => {}
                }
            }
        }
        let now = self.now();
        let mut tx = Tx::new();
        let mut opd = g[op].disk.clone();
        let mut npd = g[np].disk.clone();
        let mut sd = g[si].disk.clone();
        opd.mtime = now;
        opd.ctime = now;
        npd.mtime = now;
        npd.ctime = now;
        sd.ctime = now;
        let cross = parent != newparent;
        // Link-count changes of the two directories, applied at the end so
        // that a rename within one directory adds both to the one inode.
        let (mut op_links, mut np_links) = (0i64, 0i64);
        let mut place = None;
        let mut tgt_freed = None;
        let mut td = None;
        match (mode, tgt, ti) {
            (RenameMode::Exchange, Some(t), Some(ti)) => {
                self.plan_retarget_entry(&mut tx, &g[op], src, name, t.ino, t.dtype);
                self.plan_retarget_entry(&mut tx, &g[np], t, newname, src.ino, src.dtype);
                let mut d = g[ti].disk.clone();
                d.ctime = now;
                if cross {
                    if src_is_dir {
                        sd.parent = newparent;
                        op_links -= 1;
                        np_links += 1;
                    }
                    if tgt_is_dir {
                        d.parent = parent;
                        np_links -= 1;
                        op_links += 1;
                    }
                }
                td = Some(d);
            }
            (_, Some(t), Some(ti)) => {
                self.plan_retarget_entry(&mut tx, &g[np], t, newname, src.ino, src.dtype);
                self.plan_remove_entry(&mut tx, &g[op], src);
                tgt_freed = Some(self.drop_link_tx(&mut tx, &mut g[ti], now)?);
                if tgt_is_dir {
                    np_links -= 1;
                }
                if src_is_dir {
                    op_links -= 1;
                    np_links += 1;
                    sd.parent = newparent;
                }
            }
            _ => {
                let p =
                    self.plan_add_entry(&mut tx, &g[np], &mut npd, newname, src.ino, src.dtype)?;
                place = Some(p);
                self.plan_remove_entry(&mut tx, &g[op], src);
                if src_is_dir {
                    op_links -= 1;
                    np_links += 1;
                    sd.parent = newparent;
                }
            }
        }
        let adjust = |links: u32, delta: i64| (links as i64 + delta) as u32;
        if cross {
            opd.nlink = adjust(opd.nlink, op_links);
            npd.nlink = adjust(npd.nlink, np_links);
            tx.inode(&self.layout, parent, &opd);
        } else {
            // One directory: npd carries any new block, both deltas apply.
            npd.nlink = adjust(npd.nlink, op_links + np_links);
        }
        tx.inode(&self.layout, newparent, &npd);
        tx.inode(&self.layout, src.ino, &sd);
        if let Some(d) = &td {
            tx.inode(&self.layout, tgt.expect("exchange target").ino, d);
        }
        if let Err(e) = self.commit(tx) {
            if let Some(p) = place {
                self.abandon_entry(p);
            }
            return Err(e);
        }
        // DRAM follows the committed transaction.
        match (mode, tgt, ti) {
            (RenameMode::Exchange, Some(t), Some(ti)) => {
                g[op].dir_mut()?.retarget(name, t.ino, t.dtype);
                g[np].dir_mut()?.retarget(newname, src.ino, src.dtype);
                g[ti].disk = td.expect("exchange target image");
            }
            (_, Some(_), Some(ti)) => {
                g[op].dir_mut()?.remove(name);
                g[np].dir_mut()?.retarget(newname, src.ino, src.dtype);
                self.finish_drop_link(&mut g[ti], tgt_freed.expect("target dropped"), now);
            }
            _ => {
                g[op].dir_mut()?.remove(name);
                let p = place.expect("entry placed");
                self.apply_add_entry(&mut g[np], p, newname, src.ino, src.dtype);
            }
        }
        if cross {
            g[op].disk = opd;
        }
        g[np].disk = npd;
        g[si].disk = sd;
        Ok(())
    }
}
