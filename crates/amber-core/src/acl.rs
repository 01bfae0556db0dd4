//! What POSIX ACLs mean for an inode's mode (POSIX.1e, as Linux's
//! fs/posix_acl.c applies it): an access ACL's owner, mask (or owning
//! group, without a mask) and other entries are the mode's permission
//! bits, so setting one sets the mode and chmod rewrites them; a new
//! inode under a directory with a default ACL takes that ACL, limited by
//! the mode it was created with, instead of the umask. The encoding is
//! the format's (amber_format::acl); enforcement is the kernel's.

use amber_format::acl::{Acl, AclEntry, AclError, Tag, UNDEFINED_ID};
use amber_format::xattr::Xattr;

/// Permission bits of the mode (rwx for user, group, other).
const RWX_ALL: u32 = 0o777;

/// The class whose permissions are the mode's group bits: the mask if
/// there is one, else the owning group.
fn group_class(acl: &Acl) -> Tag {
    if acl.class(Tag::Mask).is_some() {
        Tag::Mask
    } else {
        Tag::GroupObj
    }
}

fn perm_of(acl: &Acl, tag: Tag) -> u32 {
    acl.class(tag).map_or(0, |e| u32::from(e.perm))
}

/// The mode's permission bits an access ACL stands for.
pub fn mode_bits(acl: &Acl) -> u32 {
    perm_of(acl, Tag::UserObj) << 6 | perm_of(acl, group_class(acl)) << 3 | perm_of(acl, Tag::Other)
}

/// Whether the ACL says no more than the mode bits (owner, owning group,
/// other only): Linux then keeps no attribute, and neither do we.
pub fn is_minimal(acl: &Acl) -> bool {
    acl.entries().len() == 3
}

/// Rewrites the classes the mode stands for after a chmod to `perm`
/// (posix_acl_chmod): named entries keep their permissions, which the
/// mask now limits.
pub fn chmod(acl: &mut Acl, perm: u32) {
    let group = group_class(acl);
    for (tag, shift) in [(Tag::UserObj, 6), (group, 3), (Tag::Other, 0)] {
        if let Some(e) = acl.class_mut(tag) {
            e.perm = ((perm >> shift) & 7) as u8;
        }
    }
}

/// A new inode's access ACL from its directory's default ACL and the
/// permission bits `perm` it is created with (posix_acl_create_masq):
/// each class the mode stands for is limited by `perm`, and the mode
/// becomes those classes. Returns the ACL, None when it is minimal, and
/// the mode's new bits (set-id and sticky bits of `perm` kept).
pub fn inherit(default: &Acl, perm: u32) -> (Option<Acl>, u32) {
    let mut acl = default.clone();
    let group = group_class(&acl);
    let mut bits = perm & RWX_ALL;
    for (tag, shift) in [(Tag::UserObj, 6), (group, 3), (Tag::Other, 0)] {
        if let Some(e) = acl.class_mut(tag) {
            e.perm &= ((perm >> shift) & 7) as u8;
            bits &= !(7 << shift) | u32::from(e.perm) << shift;
        }
    }
    let mode = (perm & !RWX_ALL) | bits;
    debug_assert_eq!(mode_bits(&acl), bits);
    ((!is_minimal(&acl)).then_some(acl), mode)
}

/// Sets attribute `name` to `value` in `attrs`, or removes it (None).
pub(crate) fn put(attrs: &mut Vec<Xattr>, name: &[u8], value: Option<Vec<u8>>) {
    let pos = attrs.iter().position(|a| a.name == name);
    match (pos, value) {
        (Some(i), Some(v)) => attrs[i].value = v,
        (Some(i), None) => {
            attrs.remove(i);
        }
        (None, Some(v)) => attrs.push(Xattr {
            name: name.to_vec(),
            value: v,
        }),
        (None, None) => {}
    }
}

/// The short text form getfacl -c prints and setfacl -m takes, entries
/// joined by commas: `u::rw-,u:1000:r--,g::r--,m::r--,o::---`.
pub fn to_text(acl: &Acl) -> String {
    let mut parts = Vec::with_capacity(acl.entries().len());
    for e in acl.entries() {
        let (kind, id) = match e.tag {
            Tag::UserObj | Tag::User => ("u", e.tag.named().then_some(e.id)),
            Tag::GroupObj | Tag::Group => ("g", e.tag.named().then_some(e.id)),
            Tag::Mask => ("m", None),
            Tag::Other => ("o", None),
        };
        let id = id.map(|i| i.to_string()).unwrap_or_default();
        let rwx: String = [(4, 'r'), (2, 'w'), (1, 'x')]
            .iter()
            .map(|&(b, c)| if e.perm & b != 0 { c } else { '-' })
            .collect();
        parts.push(format!("{kind}:{id}:{rwx}"));
    }
    parts.join(",")
}

/// Parses [`to_text`]'s form (numeric ids only; entries in valid order).
pub fn from_text(text: &str) -> Result<Acl, AclError> {
    let mut entries = Vec::new();
    for part in text.split(',') {
        let mut f = part.split(':');
        let (Some(kind), Some(id), Some(rwx), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(AclError::BadEntry);
        };
        let tag = match (kind, id.is_empty()) {
            ("u", true) => Tag::UserObj,
            ("u", false) => Tag::User,
            ("g", true) => Tag::GroupObj,
            ("g", false) => Tag::Group,
            ("m", true) => Tag::Mask,
            ("o", true) => Tag::Other,
            _ => return Err(AclError::BadEntry),
        };
        let id = if tag.named() {
            id.parse().map_err(|_| AclError::BadEntry)?
        } else {
            UNDEFINED_ID
        };
        let perm = parse_rwx(rwx).ok_or(AclError::BadEntry)?;
        entries.push(AclEntry { tag, perm, id });
    }
    Acl::new(entries)
}

fn parse_rwx(s: &str) -> Option<u8> {
    let b = s.as_bytes();
    if b.len() != 3 {
        return None;
    }
    let mut perm = 0;
    for (i, (bit, c)) in [(4, b'r'), (2, b'w'), (1, b'x')].into_iter().enumerate() {
        match b[i] {
            x if x == c => perm |= bit,
            b'-' => {}
            _ => return None,
        }
    }
    Some(perm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_follows_the_mask() {
        let acl = from_text("u::rw-,u:1000:rwx,g::r--,m::r-x,o::---").unwrap();
        assert_eq!(mode_bits(&acl), 0o650);
        assert!(!is_minimal(&acl));
        let plain = from_text("u::rwx,g::r-x,o::r--").unwrap();
        assert_eq!(mode_bits(&plain), 0o754);
        assert!(is_minimal(&plain));
        assert_eq!(to_text(&acl), "u::rw-,u:1000:rwx,g::r--,m::r-x,o::---");
    }

    #[test]
    fn chmod_rewrites_the_mask_not_the_named() {
        let mut acl = from_text("u::rw-,u:1000:rwx,g::r--,m::rwx,o::---").unwrap();
        chmod(&mut acl, 0o604);
        assert_eq!(to_text(&acl), "u::rw-,u:1000:rwx,g::r--,m::---,o::r--");
        let mut plain = from_text("u::rwx,g::r-x,o::r--").unwrap();
        chmod(&mut plain, 0o640);
        assert_eq!(to_text(&plain), "u::rw-,g::r--,o::---");
    }

    #[test]
    fn inherit_limits_by_the_create_mode() {
        let def = from_text("u::rwx,u:1000:rwx,g::r-x,m::rwx,o::r-x").unwrap();
        let (acl, mode) = inherit(&def, 0o2666);
        assert_eq!(mode, 0o2664);
        assert_eq!(
            to_text(&acl.unwrap()),
            "u::rw-,u:1000:rwx,g::r-x,m::rw-,o::r--"
        );
        let plain = from_text("u::rwx,g::r-x,o::---").unwrap();
        let (acl, mode) = inherit(&plain, 0o777);
        assert_eq!((acl, mode), (None, 0o750));
    }

    #[test]
    fn text_refuses_garbage() {
        assert!(from_text("u::rw").is_err());
        assert!(from_text("u::rw-,g::r--").is_err());
        assert!(from_text("x::rw-,g::r--,o::---").is_err());
        assert!(from_text("u:bob:rw-,u::rw-,g::r--,m::r--,o::---").is_err());
    }
}
