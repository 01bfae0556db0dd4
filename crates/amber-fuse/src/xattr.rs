//! Who may use which attribute namespace, and the size protocol of
//! getxattr/listxattr. The kernel already applies Linux's namespace rules
//! before a request reaches FUSE (xattr_permission); they are repeated
//! here so the adapter answers as Linux does on its own, and listxattr
//! must filter itself because the kernel passes the whole list through.

use amber_core::fs::XattrSet;
use amber_format::acl::{ACCESS_XATTR, DEFAULT_XATTR};
use amber_format::FileKind;
use fuser::{Errno, ReplyXattr};

/// Whether a request reads or changes an attribute: Linux answers a
/// forbidden read "no such attribute" and a forbidden write EPERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Checks that `uid` may read or write attribute `name` of a `kind` file.
pub fn check(name: &[u8], kind: FileKind, uid: u32, access: Access) -> Result<(), Errno> {
    let denied = match access {
        Access::Read => Errno::ENODATA,
        Access::Write => Errno::EPERM,
    };
    if name.starts_with(b"trusted.") {
        return if uid == 0 { Ok(()) } else { Err(denied) };
    }
    if name.starts_with(b"user.") {
        // As Linux: user attributes only on regular files and
        // directories (on others the permission bits mean something else).
        return match kind {
            FileKind::Regular | FileKind::Directory => Ok(()),
            _ => Err(denied),
        };
    }
    if name.starts_with(b"security.") || is_acl(name) {
        // The kernel checked an ACL's setter owns the file.
        return Ok(());
    }
    // Other system.* names (Linux has none on a local file system) and
    // any other prefix are no namespace Amber keeps.
    Err(Errno::EOPNOTSUPP)
}

/// Whether `name` is one of the POSIX ACL attributes.
pub fn is_acl(name: &[u8]) -> bool {
    name == ACCESS_XATTR || name == DEFAULT_XATTR
}

/// Whether listxattr shows `name` to `uid`: trusted attributes are
/// invisible to everyone but root, as on Linux.
pub fn visible(name: &[u8], uid: u32) -> bool {
    uid == 0 || !name.starts_with(b"trusted.")
}

/// The setxattr mode its flags ask for.
pub fn set_mode(flags: i32) -> Result<XattrSet, Errno> {
    match flags {
        0 => Ok(XattrSet::Either),
        libc::XATTR_CREATE => Ok(XattrSet::Create),
        libc::XATTR_REPLACE => Ok(XattrSet::Replace),
        _ => Err(Errno::EINVAL),
    }
}

/// Replies with `data`, or with its size when the caller asked for the
/// size only (`size` 0), or ERANGE when its buffer is too small.
pub fn reply_sized(data: &[u8], size: u32, reply: ReplyXattr) {
    match u32::try_from(data.len()) {
        Ok(len) if size == 0 => reply.size(len),
        Ok(len) if len <= size => reply.data(data),
        _ => reply.error(Errno::ERANGE),
    }
}

/// The names as listxattr returns them: each followed by a NUL.
pub fn name_list(names: &[Vec<u8>], uid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names.iter().filter(|n| visible(n, uid)) {
        out.extend_from_slice(n);
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_follow_linux() {
        let f = FileKind::Regular;
        assert_eq!(check(b"user.a", f, 1000, Access::Write), Ok(()));
        assert_eq!(
            check(b"user.a", FileKind::Symlink, 0, Access::Write),
            Err(Errno::EPERM)
        );
        assert_eq!(
            check(b"user.a", FileKind::Fifo, 0, Access::Read),
            Err(Errno::ENODATA)
        );
        assert_eq!(check(b"trusted.a", f, 0, Access::Write), Ok(()));
        assert_eq!(check(b"trusted.a", f, 1, Access::Write), Err(Errno::EPERM));
        assert_eq!(check(b"trusted.a", f, 1, Access::Read), Err(Errno::ENODATA));
        assert_eq!(check(b"security.selinux", f, 1, Access::Write), Ok(()));
        assert_eq!(
            check(b"system.posix_acl_access", f, 1, Access::Read),
            Ok(())
        );
        assert_eq!(
            check(b"system.posix_acl_default", f, 1, Access::Write),
            Ok(())
        );
        assert_eq!(
            check(b"system.other", f, 0, Access::Read),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            check(b"other.x", f, 0, Access::Read),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn lists_hide_trusted_from_users() {
        let names = vec![b"user.a".to_vec(), b"trusted.b".to_vec()];
        assert_eq!(name_list(&names, 0), b"user.a\0trusted.b\0");
        assert_eq!(name_list(&names, 1000), b"user.a\0");
    }

    #[test]
    fn set_flags() {
        assert_eq!(set_mode(0), Ok(XattrSet::Either));
        assert_eq!(set_mode(libc::XATTR_CREATE), Ok(XattrSet::Create));
        assert_eq!(set_mode(libc::XATTR_REPLACE), Ok(XattrSet::Replace));
        assert_eq!(
            set_mode(libc::XATTR_CREATE | libc::XATTR_REPLACE),
            Err(Errno::EINVAL)
        );
    }
}
