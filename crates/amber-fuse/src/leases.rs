//! The adapter's side of the leases (design.md §17.3): every request
//! that changes a regular file's data, size or blocks, or frees it, runs
//! inside `amber_lease::Leases::exclusive`, which recalls the leases
//! other processes hold on it first; every request that reads a file's
//! data or attributes, or changes its attributes, first recalls a write
//! lease on it (`settled`), whose holder's writes the core then has. The
//! root's `user.amberfs.control` names the socket where they are granted.

use std::path::PathBuf;
use std::sync::Arc;

use amber_core::Core;
use amber_lease::{Closes, Exclusive, Leases};
use amber_pmem::PmDevice;
use fuser::Errno;

/// The leases this mount grants, and where.
pub(crate) struct Granting {
    pub(crate) leases: Arc<Leases>,
    pub(crate) socket: PathBuf,
    /// Advanced at every FUSE_FLUSH, before the answer.
    pub(crate) closes: Closes,
}

/// Recalls the leases on `ino` and holds new ones off until the guard
/// drops; nothing to do on a mount that grants none. A client that
/// neither answers nor dies in time fails the change with EIO.
pub(crate) fn changing(g: Option<&Granting>, ino: u64) -> Result<Option<Exclusive<'_>>, Errno> {
    let Some(g) = g else {
        return Ok(None);
    };
    match g.leases.exclusive(ino) {
        Ok(guard) => Ok(Some(guard)),
        Err(u) => {
            crate::log(format_args!(
                "a change of inode {ino} failed: process {} holds a lease it does not return",
                u.pid
            ));
            Err(Errno::EIO)
        }
    }
}

/// Recalls a write lease on `ino` (its holder's writes become the core's)
/// and holds new ones off until the guard drops, before a request reads
/// its attributes — or, for `data`, its bytes, which also recalls the
/// mappings that store into it behind the kernel (design.md §17.14);
/// nothing to do, beyond a look at the table, for a file no one writes
/// under a lease.
pub(crate) fn settled(
    g: Option<&Granting>,
    ino: u64,
    data: bool,
) -> Result<Option<Exclusive<'_>>, Errno> {
    let Some(g) = g else {
        return Ok(None);
    };
    let settled = if data {
        g.leases.settle_reads(ino)
    } else {
        g.leases.settle_writes(ino)
    };
    settled.map_err(|u| {
        crate::log(format_args!(
            "a request on inode {ino} failed: process {} holds a write lease it does not return",
            u.pid
        ));
        Errno::EIO
    })
}

/// The inode a name in `parent` holds now, whose leases an unlink or a
/// rename over it must recall: it may be freed.
pub(crate) fn victim<D: PmDevice>(core: &Core<D>, parent: u64, name: &[u8]) -> Option<u64> {
    core.lookup(parent, name).ok().map(|a| a.ino)
}

/// The root's virtual attribute naming the lease socket, if asked for.
pub(crate) fn control_value(g: Option<&Granting>, ino: u64, name: &[u8]) -> Option<Vec<u8>> {
    let g = g?;
    (ino == amber_format::ROOT_INO && name == amber_lease::CONTROL_XATTR.as_bytes())
        .then(|| g.socket.as_os_str().as_encoded_bytes().to_vec())
}
