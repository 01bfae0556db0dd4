//! POSIX access control lists, kept as the values of the attributes
//! `system.posix_acl_access` and `system.posix_acl_default` in the inode's
//! attribute block (format::xattr), in exactly the encoding Linux passes
//! through getxattr and setxattr, so a value goes between the kernel and
//! the block unchanged:
//!
//! ```text
//! off size field
//!   0   4  version, 2
//!   4   8  each entry: tag u16, permissions u16 (r 4, w 2, x 1), id u32
//! ```
//! Tags: user owner 0x01, named user 0x02, owning group 0x04, named group
//! 0x08, mask 0x10, other 0x20. The id is a uid or gid for the named tags
//! and 0xffffffff for the others. A valid list is ordered as Linux's
//! posix_acl_valid demands: one owner entry, named users, one owning
//! group entry, named groups, the mask (required when any named entry is
//! present, allowed alone), one other entry.

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The attribute holding a file's access ACL.
pub const ACCESS_XATTR: &[u8] = b"system.posix_acl_access";
/// The attribute holding a directory's default ACL.
pub const DEFAULT_XATTR: &[u8] = b"system.posix_acl_default";
/// The only version Linux writes.
pub const VERSION: u32 = 2;
/// Bytes of the version header.
pub const HEADER: usize = 4;
/// Bytes of one entry.
pub const ENTRY: usize = 8;
/// Id of the entries that name no user or group.
pub const UNDEFINED_ID: u32 = u32::MAX;
/// Most entries a value may hold: what fits an attribute block beside the
/// longer name (Linux bounds a value only by the file system's room).
pub const ENTRIES_MAX: usize = (crate::xattr::value_max(DEFAULT_XATTR.len()) - HEADER) / ENTRY;

const _: () = assert!(ENTRIES_MAX == 506);

/// An entry as it lies in the value.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawEntry {
    tag: U16,
    perm: U16,
    id: U32,
}

assert_layout!(RawEntry, ENTRY, { tag: 0, perm: 2, id: 4 });

/// What an entry grants permissions to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tag {
    /// The file's owner (the mode's user bits).
    UserObj,
    /// The user `id`.
    User,
    /// The file's group.
    GroupObj,
    /// The group `id`.
    Group,
    /// The most any named entry or the owning group is granted (the
    /// mode's group bits when present).
    Mask,
    /// Everyone else (the mode's other bits).
    Other,
}

impl Tag {
    const ALL: [(Tag, u16); 6] = [
        (Tag::UserObj, 0x01),
        (Tag::User, 0x02),
        (Tag::GroupObj, 0x04),
        (Tag::Group, 0x08),
        (Tag::Mask, 0x10),
        (Tag::Other, 0x20),
    ];

    fn code(self) -> u16 {
        Self::ALL[self as usize].1
    }

    fn of(code: u16) -> Option<Tag> {
        Self::ALL.iter().find(|(_, c)| *c == code).map(|(t, _)| *t)
    }

    /// Whether entries with this tag name a user or group by id.
    pub fn named(self) -> bool {
        matches!(self, Tag::User | Tag::Group)
    }
}

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    /// Whom it applies to.
    pub tag: Tag,
    /// Read 4, write 2, execute 1.
    pub perm: u8,
    /// The uid or gid of a named entry; [`UNDEFINED_ID`] otherwise.
    pub id: u32,
}

/// A valid access control list (see the module's ordering rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<AclEntry>,
}

/// Why a value is not a valid ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclError {
    /// Not a version-2 header followed by whole entries, or too many.
    BadLength,
    /// A version other than 2.
    BadVersion,
    /// An unknown tag, permission bits beyond rwx, or an id on an entry
    /// that names nobody.
    BadEntry,
    /// Entries out of order, missing or repeated, or named entries
    /// without a mask.
    BadOrder,
}

impl std::fmt::Display for AclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AclError::BadLength => "ACL value is not a header and whole entries",
            AclError::BadVersion => "ACL value has a version other than 2",
            AclError::BadEntry => "ACL has an entry with an unknown tag or permission",
            AclError::BadOrder => "ACL entries are missing, repeated or out of order",
        })
    }
}

impl std::error::Error for AclError {}

impl Acl {
    /// Checks `entries` against the ordering rules.
    pub fn new(entries: Vec<AclEntry>) -> Result<Acl, AclError> {
        if entries.len() > ENTRIES_MAX {
            return Err(AclError::BadLength);
        }
        for e in &entries {
            let id_ok = e.tag.named() || e.id == UNDEFINED_ID;
            if e.perm > 7 || !id_ok {
                return Err(AclError::BadEntry);
            }
        }
        check_order(&entries)?;
        Ok(Acl { entries })
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[AclEntry] {
        &self.entries
    }

    /// The entry with `tag` that names nobody (owner, owning group, mask,
    /// other); at most one exists.
    pub fn class(&self, tag: Tag) -> Option<&AclEntry> {
        debug_assert!(!tag.named());
        self.entries.iter().find(|e| e.tag == tag)
    }

    /// The same, to change its permissions (the order cannot change).
    pub fn class_mut(&mut self, tag: Tag) -> Option<&mut AclEntry> {
        debug_assert!(!tag.named());
        self.entries.iter_mut().find(|e| e.tag == tag)
    }

    /// The value's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + ENTRY * self.entries.len());
        out.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.entries {
            let raw = RawEntry {
                tag: e.tag.code().into(),
                perm: u16::from(e.perm).into(),
                id: e.id.into(),
            };
            out.extend_from_slice(raw.as_bytes());
        }
        out
    }
}

/// The ordering state machine of Linux's posix_acl_valid: the tags'
/// codes rise through the list, only named tags repeat, and a mask is
/// required once a named entry was seen. Like Linux it does not order
/// or deduplicate named ids (setfacl sorts them; the first match counts).
fn check_order(entries: &[AclEntry]) -> Result<(), AclError> {
    let mut prev: Option<&AclEntry> = None;
    let mut named = false;
    let mut seen = [false; 6];
    for e in entries {
        if let Some(p) = prev {
            if e.tag < p.tag || (e.tag == p.tag && !e.tag.named()) {
                return Err(AclError::BadOrder);
            }
        }
        named |= e.tag.named();
        seen[e.tag as usize] = true;
        prev = Some(e);
    }
    let required = [Tag::UserObj, Tag::GroupObj, Tag::Other];
    if required.iter().any(|t| !seen[*t as usize]) || (named && !seen[Tag::Mask as usize]) {
        return Err(AclError::BadOrder);
    }
    Ok(())
}

/// Decodes a value. A header with no entries is no ACL (None): setting
/// one removes the attribute, as Linux's posix_acl_from_xattr reads it.
pub fn decode(value: &[u8]) -> Result<Option<Acl>, AclError> {
    let Some((version, body)) = value.split_first_chunk::<HEADER>() else {
        return Err(AclError::BadLength);
    };
    if u32::from_le_bytes(*version) != VERSION {
        return Err(AclError::BadVersion);
    }
    let Ok(raws) = <[RawEntry]>::ref_from_bytes(body) else {
        return Err(AclError::BadLength);
    };
    if raws.is_empty() {
        return Ok(None);
    }
    if raws.len() > ENTRIES_MAX {
        return Err(AclError::BadLength);
    }
    let mut entries = Vec::with_capacity(raws.len());
    for r in raws {
        let tag = Tag::of(r.tag.get()).ok_or(AclError::BadEntry)?;
        let perm = u8::try_from(r.perm.get()).map_err(|_| AclError::BadEntry)?;
        entries.push(AclEntry {
            tag,
            perm,
            id: r.id.get(),
        });
    }
    Acl::new(entries).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any value a user or the media hands in is refused or is an ACL
        /// that encodes back to the same bytes.
        #[test]
        fn values_are_refused_or_round_trip(
            entries in proptest::collection::vec((0u16..0x41, 0u16..9, any::<u32>()), 0..12),
        ) {
            let mut value = VERSION.to_le_bytes().to_vec();
            for (tag, perm, id) in entries {
                value.extend_from_slice(&tag.to_le_bytes());
                value.extend_from_slice(&perm.to_le_bytes());
                value.extend_from_slice(&id.to_le_bytes());
            }
            if let Ok(Some(acl)) = decode(&value) {
                prop_assert_eq!(acl.encode(), value);
            }
        }
    }

    fn e(tag: Tag, perm: u8, id: u32) -> AclEntry {
        AclEntry { tag, perm, id }
    }

    fn base() -> Vec<AclEntry> {
        vec![
            e(Tag::UserObj, 6, UNDEFINED_ID),
            e(Tag::GroupObj, 4, UNDEFINED_ID),
            e(Tag::Other, 0, UNDEFINED_ID),
        ]
    }

    #[test]
    fn round_trips_linux_bytes() {
        let mut v = base();
        v.insert(1, e(Tag::User, 4, 1000));
        v.insert(3, e(Tag::Mask, 4, UNDEFINED_ID));
        let acl = Acl::new(v).unwrap();
        let bytes = acl.encode();
        // What setfacl -m u:1000:r passes for a 0640 file.
        assert_eq!(&bytes[..12], &[2, 0, 0, 0, 1, 0, 6, 0, 255, 255, 255, 255]);
        assert_eq!(&bytes[12..20], &[2, 0, 4, 0, 0xe8, 3, 0, 0]);
        assert_eq!(decode(&bytes), Ok(Some(acl)));
        assert_eq!(decode(&VERSION.to_le_bytes()), Ok(None));
    }

    #[test]
    fn refuses_what_linux_refuses() {
        assert_eq!(decode(&[2, 0, 0]), Err(AclError::BadLength));
        assert_eq!(decode(&[3, 0, 0, 0]), Err(AclError::BadVersion));
        let named_without_mask = {
            let mut v = base();
            v.insert(1, e(Tag::User, 4, 7));
            v
        };
        assert_eq!(Acl::new(named_without_mask), Err(AclError::BadOrder));
        let mut v = base();
        v.swap(0, 1);
        assert_eq!(Acl::new(v), Err(AclError::BadOrder));
        let mut v = base();
        v[2].perm = 8;
        assert_eq!(Acl::new(v), Err(AclError::BadEntry));
        let mut v = base();
        v.remove(2);
        assert_eq!(Acl::new(v), Err(AclError::BadOrder));
        let mut v = base();
        v.insert(1, e(Tag::Mask, 4, UNDEFINED_ID));
        v.insert(1, e(Tag::Mask, 4, UNDEFINED_ID));
        assert_eq!(Acl::new(v), Err(AclError::BadOrder));
        let mut bytes = Acl::new(base()).unwrap().encode();
        bytes[4] = 0x40;
        assert_eq!(decode(&bytes), Err(AclError::BadEntry));
    }

    #[test]
    fn a_mask_alone_is_valid() {
        let mut v = base();
        v.insert(2, e(Tag::Mask, 4, UNDEFINED_ID));
        assert!(Acl::new(v).is_ok());
    }

    #[test]
    fn bounded_by_the_block() {
        let mut v = base();
        let named: Vec<_> = (0..ENTRIES_MAX as u32)
            .map(|i| e(Tag::User, 4, i))
            .collect();
        v.splice(1..1, named);
        v.insert(v.len() - 1, e(Tag::Mask, 4, UNDEFINED_ID));
        assert_eq!(Acl::new(v), Err(AclError::BadLength));
    }
}
