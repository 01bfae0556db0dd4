//! setattr: permissions, ownership, times (one journal transaction), and
//! size (through the data policy's truncate).

use super::{attr_of, flags, live, Core};
use crate::error::{FsError, Result};
use crate::inode::InodeState;
use crate::journal::Tx;
use crate::types::{Attr, SetAttr, TimeSet};
use amber_format::inode::mode;
use amber_format::{FileKind, Inode};
use amber_pmem::PmDevice;

/// What the file's flags allow of `set`: times set to now on an
/// append-only file, nothing on an immutable one (Linux's notify_change).
fn check_flags(st: &InodeState, set: &SetAttr) -> Result<()> {
    let explicit = |t: Option<TimeSet>| matches!(t, Some(TimeSet::At(_)));
    let owner_or_size = set.perm.is_some() || set.uid.is_some() || set.gid.is_some();
    if owner_or_size || set.size.is_some() || explicit(set.atime) || explicit(set.mtime) {
        flags::unchangeable(st)
    } else if set.atime.is_some() || set.mtime.is_some() {
        flags::not_immutable(st)
    } else {
        Ok(())
    }
}

impl<D: PmDevice> Core<D> {
    /// Sets a regular file's size through the policy's truncate. Under
    /// mappings a shrink hides the pages it cuts off first (refused if it
    /// cannot: their blocks must not be freed while shown), then zeroes
    /// what a mapping's new last page shows past the end, as Linux does;
    /// a growth shows the new blocks where it can (`follow_size`).
    fn set_size(&self, st: &mut InodeState, size: u64) -> Result<()> {
        let old = st.size();
        if st.maps.is_some() && size < old {
            self.before_shrink(st, size)?;
        }
        let res = self.policy.truncate(self.context(), st, size);
        self.guard(res)?;
        if st.maps.is_none() {
            return Ok(());
        }
        if size < old && Self::touches_pins(st, size, 1) {
            self.zero_tail(st, size)?;
        }
        self.follow_size(st, old);
        Ok(())
    }

    /// Changes the attributes `set` names. A size change is applied first
    /// (as its own atomic step); the rest commit together.
    pub fn setattr(&self, ino: u64, set: &SetAttr) -> Result<Attr> {
        self.check_writable()?;
        let r = self.inode(ino)?;
        let mut st = r.write();
        live(&st)?;
        check_flags(&st, set)?;
        let now = self.now();
        if let Some(size) = set.size {
            match st.kind() {
                FileKind::Directory => return Err(FsError::IsADirectory),
                FileKind::Regular => {}
                _ => {
                    return Err(FsError::InvalidArgument(
                        "only regular files have a settable size",
                    ))
                }
            }
            self.set_size(&mut st, size)?;
        }
        let mut d = st.disk.clone();
        let mut changed = false;
        if let Some(p) = set.perm {
            d.mode = (d.mode & mode::S_IFMT) | (p & mode::PERM_MASK);
            changed = true;
        }
        if set.uid.is_some() || set.gid.is_some() {
            d.uid = set.uid.unwrap_or(d.uid);
            d.gid = set.gid.unwrap_or(d.gid);
            // chown clears set-user-id and set-group-id on non-directories
            // (the group bit only when group-execute is set, as Linux does).
            if st.kind() != FileKind::Directory {
                d.mode &= !mode::S_ISUID_BIT;
                if d.mode & 0o010 != 0 {
                    d.mode &= !mode::S_ISGID_BIT;
                }
            }
            changed = true;
        }
        let pick = |t: TimeSet| match t {
            TimeSet::Now => now,
            TimeSet::At(t) => t,
        };
        if let Some(t) = set.atime {
            d.atime = pick(t);
            changed = true;
        }
        if let Some(t) = set.mtime {
            d.mtime = pick(t);
            changed = true;
        }
        if changed {
            d.ctime = now;
            self.commit_attrs(&mut st, d, set.perm)?;
        }
        Ok(attr_of(&st))
    }

    /// Commits `st`'s new image `d` with, after a chmod to `perm`, its
    /// access ACL in step, and what the policy owes, in one transaction.
    /// The ACL is staged first: it may fail (no space for its blocks)
    /// before the policy has changed anything.
    fn commit_attrs(&self, st: &mut InodeState, mut d: Inode, perm: Option<u32>) -> Result<()> {
        let mut tx = Tx::new();
        let staged = match perm {
            Some(p) => self.chmod_acl(st, p, &mut d, &mut tx)?,
            None => None,
        };
        let res = self.policy.setattr_tx(self.context(), st, &mut d, &mut tx);
        let res = self.guard(res).and_then(|()| {
            tx.inode(&self.layout, st.ino, &d);
            self.commit(tx)
        });
        if let Err(e) = res {
            staged.into_iter().for_each(|s| s.abandon(self));
            return Err(e);
        }
        staged.into_iter().for_each(|s| s.finish(self));
        st.disk = d;
        Ok(())
    }
}
