//! POSIX ACLs in attribute blocks: each stored ACL decodes and is valid,
//! sits on an inode that may hold it (an access ACL on anything but a
//! symlink, a default ACL on a directory), and an access ACL grants what
//! the mode's permission bits say (both are set in one transaction, so
//! a difference is damage). Repair rewrites the attribute block: a bad
//! or misplaced ACL is removed, so the mode's bits stand alone (named
//! users and groups lose what it granted them; nobody gains access), and
//! an access ACL that disagrees with the mode is brought in line with the
//! mode, as chmod would, since the mode is what stat shows.

use super::Ctx;
use crate::acl::{chmod, mode_bits, put};
use amber_format::acl::{decode, ACCESS_XATTR, DEFAULT_XATTR};
use amber_format::xattr::{self, Xattr};
use amber_format::FileKind;
use amber_pmem::PmDevice;

/// Checks the ACLs among `attrs`, the attributes of inode `ino` (a `kind`
/// with `mode`) held in the blocks `run`.
pub(super) fn check_acls<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    ino: u64,
    (kind, mode): (FileKind, u32),
    run: &[u64],
    attrs: &[Xattr],
) {
    let mut fixed = attrs.to_vec();
    let mut found = Vec::new();
    for name in [ACCESS_XATTR, DEFAULT_XATTR] {
        let Some(a) = attrs.iter().find(|a| a.name == name) else {
            continue;
        };
        let shown = String::from_utf8_lossy(name);
        let placed =
            kind != FileKind::Symlink && (name == ACCESS_XATTR || kind == FileKind::Directory);
        let acl = match decode(&a.value) {
            Err(e) => Err(format!("{e}")),
            Ok(None) => Err("an ACL without entries is stored".to_string()),
            Ok(Some(_)) if !placed => Err(format!("a {kind:?} cannot hold it")),
            Ok(Some(acl)) => Ok(acl),
        };
        match acl {
            Err(why) => {
                found.push((format!("inode {ino}: {shown}: {why}"), "the ACL is removed"));
                put(&mut fixed, name, None);
            }
            Ok(mut acl) if name == ACCESS_XATTR && mode_bits(&acl) != mode & 0o777 => {
                let what = format!(
                    "inode {ino}: {shown} grants {:03o} but the mode says {:03o}",
                    mode_bits(&acl),
                    mode & 0o777
                );
                found.push((what, "the ACL is set from the mode, as chmod does"));
                chmod(&mut acl, mode);
                put(&mut fixed, name, Some(acl.encode()));
            }
            Ok(_) => {}
        }
    }
    if found.is_empty() {
        return;
    }
    // Removing or rewriting entries in place never grows the list, so it
    // fits the blocks it had (all of them stay the inode's).
    let Some(bytes) = xattr::encode_as(&fixed, run.len() as u64) else {
        for (what, _) in found {
            cx.unfixable(format!(
                "{what}; its attributes cannot be rewritten in place"
            ));
        }
        return;
    };
    let off = cx.layout.block_offset(run[0]);
    for (what, fix) in found {
        cx.fixable(what, fix, |f| f.write(off, &bytes));
    }
}
