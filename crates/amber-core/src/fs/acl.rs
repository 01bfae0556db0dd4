//! POSIX ACLs on inodes: setting one (with the mode it stands for, in one
//! transaction), chmod keeping an access ACL in step, and what a new inode
//! takes from its directory's default ACL. The rules are crate::acl's;
//! the values live in the attribute block like any attribute, so every
//! change here is one journal transaction and atomic across a crash.

use super::namespace::NewNode;
use super::xattr_store::Staged;
use super::Core;
use crate::acl::{self, put};
use crate::error::{FsError, Result};
use crate::inode::InodeState;
use crate::journal::Tx;
use amber_format::acl::{self as format_acl, Acl, ACCESS_XATTR, DEFAULT_XATTR};
use amber_format::inode::mode;
use amber_format::xattr::{self, Xattr};
use amber_format::{FileKind, Inode};
use amber_pmem::PmDevice;

/// Whether `name` is one of the two ACL attributes.
pub(super) fn is_acl_name(name: &[u8]) -> bool {
    name == ACCESS_XATTR || name == DEFAULT_XATTR
}

/// The ACL stored under `name` in `attrs`, if any. A stored value that
/// does not decode is corruption (every value was checked when set).
fn stored(ino: u64, attrs: &[Xattr], name: &[u8]) -> Result<Option<Acl>> {
    let Some(a) = attrs.iter().find(|a| a.name == name) else {
        return Ok(None);
    };
    format_acl::decode(&a.value)
        .map_err(|e| FsError::Corrupted(format!("inode {ino}: {e}")))
        // A stored header without entries would have been removed.
        .and_then(|acl| {
            acl.ok_or_else(|| FsError::Corrupted(format!("inode {ino}: an empty ACL is stored")))
        })
        .map(Some)
}

/// What setting `value` as attribute `name` of a `kind` inode with mode
/// `mode` does: the attribute's new value (None: removed) and, for an
/// access ACL, the mode's new permission bits. Set-group-ID goes when
/// `drop_sgid` (the caller is outside the file's group and not
/// privileged: Linux's posix_acl_update_mode).
fn plan(
    kind: FileKind,
    name: &[u8],
    value: &[u8],
    mode: &mut u32,
    drop_sgid: bool,
) -> Result<Option<Vec<u8>>> {
    let acl = format_acl::decode(value)
        .map_err(|_| FsError::InvalidArgument("the value is not a valid POSIX ACL"))?;
    if kind == FileKind::Symlink {
        return Err(FsError::Unsupported("symbolic links have no ACLs"));
    }
    if name == DEFAULT_XATTR {
        if kind != FileKind::Directory && acl.is_some() {
            return Err(FsError::AccessDenied("only directories have default ACLs"));
        }
        return Ok(acl.map(|a| a.encode()));
    }
    let Some(acl) = acl else {
        return Ok(None);
    };
    *mode = (*mode & !0o777) | acl::mode_bits(&acl);
    if drop_sgid {
        *mode &= !mode::S_ISGID_BIT;
    }
    Ok((!acl::is_minimal(&acl)).then(|| acl.encode()))
}

impl<D: PmDevice> Core<D> {
    /// Whether `ino` has an ACL beyond its mode (an access ACL or a
    /// default one), which `ls -l` marks with `+`.
    pub fn has_acl(&self, ino: u64) -> Result<bool> {
        Ok(self.listxattr(ino)?.iter().any(|n| is_acl_name(n)))
    }

    /// Sets the access or default ACL of `ino` to `value` (Linux's xattr
    /// encoding; a header alone removes it). An access ACL sets the mode's
    /// permission bits in the same transaction, and one the mode says
    /// alone is not stored. `drop_sgid` as Linux when the caller is not in
    /// the file's group and not privileged. Flags (create, replace) do not
    /// apply to ACLs, as on Linux.
    pub fn set_acl(&self, ino: u64, name: &[u8], value: &[u8], drop_sgid: bool) -> Result<()> {
        if !is_acl_name(name) {
            return Err(FsError::InvalidArgument("not an ACL attribute"));
        }
        if value.len() > xattr::VALUE_MAX {
            return Err(FsError::AttributeTooLarge);
        }
        self.change_xattrs(ino, |kind, attrs, mode| {
            let value = plan(kind, name, value, mode, drop_sgid)?;
            put(attrs, name, value);
            Ok(())
        })
    }

    /// After a chmod to `perm`, whose new inode image is `d`: rewrites the
    /// access ACL's owner, mask (or group) and other entries to match, in
    /// the same transaction `tx`, when the inode has one (None otherwise).
    pub(super) fn chmod_acl(
        &self,
        st: &InodeState,
        perm: u32,
        d: &mut Inode,
        tx: &mut Tx,
    ) -> Result<Option<Staged>> {
        if st.disk.xattr_block == 0 {
            return Ok(None);
        }
        let mut attrs = self.xattrs_of(st)?;
        let Some(mut acl) = stored(st.ino, &attrs, ACCESS_XATTR)? else {
            return Ok(None);
        };
        acl::chmod(&mut acl, perm);
        put(&mut attrs, ACCESS_XATTR, Some(acl.encode()));
        self.stage_xattrs(st, &attrs, d, tx).map(Some)
    }

    /// What a node created in directory `p` takes from its default ACL:
    /// the node's permission bits (the ACL limited by the requested mode
    /// where the directory has one, else the requested mode less the
    /// creator's umask) and the ACL attributes it is created with. A
    /// symlink's mode is fixed (0777) and it takes no ACL.
    pub(super) fn creation_acls(
        &self,
        p: &InodeState,
        n: &NewNode<'_>,
    ) -> Result<(u32, Vec<Xattr>)> {
        if n.kind == FileKind::Symlink {
            return Ok((n.perm, Vec::new()));
        }
        let masked = n.perm & !n.owner.umask;
        if p.disk.xattr_block == 0 {
            return Ok((masked, Vec::new()));
        }
        let attrs = self.xattrs_of(p)?;
        let Some(default) = stored(p.ino, &attrs, DEFAULT_XATTR)? else {
            return Ok((masked, Vec::new()));
        };
        let (access, perm) = acl::inherit(&default, n.perm);
        let mut out = Vec::new();
        put(&mut out, ACCESS_XATTR, access.map(|a| a.encode()));
        if n.kind == FileKind::Directory {
            put(&mut out, DEFAULT_XATTR, Some(default.encode()));
        }
        Ok((perm, out))
    }
}
