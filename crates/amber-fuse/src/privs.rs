//! The set-group-ID rule the kernel's FUSE code leaves to the daemon.
//! Linux drops set-group-ID from a file without group-execute when a
//! caller outside the file's group, and not root, changes its data
//! (`setattr_should_drop_sgid`); FUSE's kernel side, refreshing the mode
//! for the kill, drops it only with group-execute set. So after a
//! fallocate (allocating, punching, zeroing) the daemon applies the rest.
//! Setting an access ACL drops it for such a caller too
//! (posix_acl_update_mode), which the kernel leaves to daemons that lack
//! FUSE_SETXATTR_EXT (fuser's request parsing has no room for it).

use amber_core::{Core, FsError, SetAttr};
use amber_format::FileKind;
use amber_pmem::PmDevice;
use fuser::Request;

const S_ISGID: u32 = 0o2000;
const S_IXGRP: u32 = 0o010;

/// After `req`'s caller changed the data of `ino`: drops set-group-ID
/// where Linux would and the kernel did not.
pub fn drop_sgid_of_outsider<D: PmDevice>(
    core: &Core<D>,
    req: &Request,
    ino: u64,
) -> Result<(), FsError> {
    if req.uid() == 0 {
        return Ok(());
    }
    let a = core.getattr(ino)?;
    if a.kind != FileKind::Regular || a.perm & (S_ISGID | S_IXGRP) != S_ISGID {
        return Ok(());
    }
    if in_group_or_root(req, a.gid) {
        return Ok(());
    }
    let set = SetAttr {
        perm: Some(a.perm & !S_ISGID),
        ..SetAttr::default()
    };
    core.setattr(ino, &set).map(drop)
}

/// Whether `req`'s caller is root or in group `gid` (its own or a
/// supplementary one): who keeps set-group-ID when it changes a file.
pub fn in_group_or_root(req: &Request, gid: u32) -> bool {
    req.uid() == 0 || req.gid() == gid || in_supplementary_groups(req.pid(), gid)
}

/// Whether process `pid` has `gid` among its supplementary groups, by its
/// /proc status; when that cannot be read, no — the bit is dropped, the
/// safe side.
fn in_supplementary_groups(pid: u32, gid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Groups:"))
                .map(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
        })
        .unwrap_or(false)
}
