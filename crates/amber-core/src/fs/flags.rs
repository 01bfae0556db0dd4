//! Inode flags (chattr, lsattr): immutable and append-only, kept in the
//! inode's flags field (format::inode::flags) and enforced here, in the
//! core, so the library, the FUSE mount and the offline tools obey them
//! alike (through FUSE the kernel knows nothing of them). The rules are
//! Linux's (fs/namei.c, fs/attr.c, fs/open.c):
//!
//! * immutable: no write, truncate, fallocate, attribute or extended
//!   attribute change, link, unlink or rename of the inode; a directory
//!   takes no new entries and loses none;
//! * append-only: writes only at the end of the file, fallocate only
//!   allocating, no truncate, no chmod/chown or explicit times (times set
//!   to now are allowed), no extended attribute change, no link, unlink
//!   or rename of the inode; a directory takes new entries but loses none.
//!
//! Changing the flags is always allowed (it is how they are cleared);
//! who may change them is the front end's decision (the FUSE adapter:
//! root, as Linux asks CAP_LINUX_IMMUTABLE).

use super::{attr_of, live, Core};
use crate::error::{FsError, Result};
use crate::inode::InodeState;
use crate::journal::Tx;
use crate::types::Attr;
use amber_format::inode::flags::{APPEND, IMMUTABLE, KNOWN};
use amber_pmem::PmDevice;

const IMMUTABLE_WHY: &str = "the file is immutable (chattr -i clears it)";
const APPEND_WHY: &str = "the file is append-only (chattr -a clears it)";

fn has(st: &InodeState, flag: u32) -> bool {
    st.disk.flags & flag != 0
}

/// Fails if `st` is immutable.
pub(crate) fn not_immutable(st: &InodeState) -> Result<()> {
    if has(st, IMMUTABLE) {
        return Err(FsError::Protected(IMMUTABLE_WHY));
    }
    Ok(())
}

/// Fails if `st` is immutable or append-only: for changes other than
/// appending data (truncate, chmod, xattrs, link, unlink, rename).
pub(crate) fn unchangeable(st: &InodeState) -> Result<()> {
    not_immutable(st)?;
    if has(st, APPEND) {
        return Err(FsError::Protected(APPEND_WHY));
    }
    Ok(())
}

/// A shared mapping of `st` through a handle that writes (`may_write`):
/// Linux refuses it for an append-only file, whose bytes a store could
/// change anywhere (EACCES, mm/mmap.c).
pub(crate) fn may_map_shared(st: &InodeState, may_write: bool) -> Result<()> {
    if may_write && has(st, APPEND) {
        return Err(FsError::AccessDenied(
            "a shared mapping of an append-only file through a handle that writes",
        ));
    }
    Ok(())
}

/// A write at `off` (None: at the end, O_APPEND) of a file `st`.
pub(crate) fn may_write(st: &InodeState, off: Option<u64>) -> Result<()> {
    not_immutable(st)?;
    if has(st, APPEND) && off.is_some_and(|o| o != st.size()) {
        return Err(FsError::Protected(APPEND_WHY));
    }
    Ok(())
}

/// Directory `st` takes a new entry.
pub(crate) fn may_add_to(st: &InodeState) -> Result<()> {
    not_immutable(st).map_err(|_| FsError::Protected("the directory is immutable"))
}

/// Directory `st` loses (or has replaced) an entry.
pub(crate) fn may_remove_from(st: &InodeState) -> Result<()> {
    unchangeable(st).map_err(|_| FsError::Protected("the directory is immutable or append-only"))
}

impl<D: PmDevice> Core<D> {
    /// The flags of `ino` (format::inode::flags bits).
    pub fn flags(&self, ino: u64) -> Result<u32> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        Ok(st.disk.flags)
    }

    /// Sets the flags of `ino` to `flags` in one journal transaction (with
    /// the ctime). Only immutable and append-only exist: any other bit is
    /// `Unsupported` (EOPNOTSUPP), as on file systems without it.
    pub fn set_flags(&self, ino: u64, flags: u32) -> Result<Attr> {
        if flags & !KNOWN != 0 {
            return Err(FsError::Unsupported(
                "only the immutable (i) and append-only (a) flags exist",
            ));
        }
        self.check_writable()?;
        let r = self.inode(ino)?;
        let mut st = r.write();
        live(&st)?;
        if st.disk.flags != flags {
            let mut d = st.disk.clone();
            d.flags = flags;
            d.ctime = self.now();
            let mut tx = Tx::new();
            tx.inode(&self.layout, ino, &d);
            self.commit(tx)?;
            st.disk = d;
        }
        Ok(attr_of(&st))
    }

    /// Whether `ino` may be opened for writing (`write`), and with O_APPEND
    /// (`append`): never when immutable, only with O_APPEND when
    /// append-only (Linux's may_open); never on a read-only mount.
    pub fn may_open(&self, ino: u64, write: bool, append: bool) -> Result<()> {
        // As open(2) on a read-only mount: refused at open, so the caller
        // learns at once, not at the first write.
        if write && self.is_read_only() {
            return Err(FsError::ReadOnly);
        }
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        if !write {
            return Ok(());
        }
        if append {
            not_immutable(&st)
        } else {
            unchangeable(&st)
        }
    }
}
