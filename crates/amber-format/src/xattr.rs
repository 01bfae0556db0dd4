//! Extended attributes: an inode's attributes live packed in one block
//! named by the inode's xattr-block field (offset 112; 0: none).
//!
//! ```text
//! off size field
//!   0   4  magic "XAT1"
//!   4   2  entry count
//!   6   2  bytes of entries
//!   8   4  CRC-32C of bytes 0..8 and the entries
//!  12   4  reserved, zero
//!  16   .  entries, packed: name length u8, reserved u8, value length u16,
//!          name, value
//! ```
//! The block is rewritten whole inside a journal transaction, so a set or
//! remove is atomic.

use crate::crc::{crc32c, crc32c_append};
use crate::layout::BLOCK_SIZE;
use std::mem::offset_of;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Header bytes.
pub const HEADER: usize = 16;
/// Per-entry header bytes.
pub const ENTRY_HEADER: usize = 4;
/// Block magic.
pub const MAGIC: u32 = u32::from_le_bytes(*b"XAT1");
/// Longest attribute name (XATTR_NAME_MAX).
pub const NAME_MAX: usize = 255;
/// Shortest attribute name: the shortest namespace prefix ("user.") and
/// one byte.
pub const NAME_MIN: usize = 6;
/// Room for all of an inode's entries.
pub const SPACE: usize = BLOCK_SIZE as usize - HEADER;

/// Largest value an attribute named with `name_len` bytes can hold: what
/// fits beside its name and entry header when it is alone in the block
/// (4076 - `name_len`: 4070 for `user.v`, 3821 for a 255-byte name).
/// Other attributes of the inode leave less.
pub const fn value_max(name_len: usize) -> usize {
    SPACE.saturating_sub(ENTRY_HEADER + name_len)
}

const _: () = assert!(value_max(NAME_MIN) == 4070 && value_max(NAME_MAX) == 3821);

/// The block's header as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    magic: U32,
    count: U16,
    used: U16,
    crc: U32,
    reserved: [u8; 4],
}

assert_layout!(RawHeader, HEADER, { magic: 0, count: 4, used: 6, crc: 8, reserved: 12 });

/// Bytes of the header the checksum covers, with the entries.
const CRC_COVERS: usize = offset_of!(RawHeader, crc);

/// An entry's header as it lies on media, its name and value following.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawEntry {
    name_len: u8,
    reserved: u8,
    value_len: U16,
}

assert_layout!(RawEntry, ENTRY_HEADER, { name_len: 0, reserved: 1, value_len: 2 });

/// One attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xattr {
    /// Full name with its namespace prefix (`user.`, `trusted.`,
    /// `security.`, `system.`), [`NAME_MIN`]..=[`NAME_MAX`] bytes.
    pub name: Vec<u8>,
    /// The value, at most [`value_max`]`(name.len())` bytes; may be empty.
    pub value: Vec<u8>,
}

/// Bytes `attrs` take in a block.
pub fn footprint(attrs: &[Xattr]) -> usize {
    attrs
        .iter()
        .map(|a| ENTRY_HEADER + a.name.len() + a.value.len())
        .sum()
}

/// Encodes `attrs` into a block; None if they do not fit.
pub fn encode(attrs: &[Xattr]) -> Option<Vec<u8>> {
    let used = footprint(attrs);
    if used > SPACE {
        return None;
    }
    let mut b = vec![0u8; BLOCK_SIZE as usize];
    let mut at = HEADER;
    for a in attrs {
        assert!(!a.name.is_empty() && a.name.len() <= NAME_MAX);
        let e = RawEntry {
            name_len: a.name.len() as u8,
            reserved: 0,
            value_len: (a.value.len() as u16).into(),
        };
        for part in [e.as_bytes(), &a.name, &a.value] {
            b[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
    }
    let mut h = RawHeader {
        magic: MAGIC.into(),
        count: (attrs.len() as u16).into(),
        used: (used as u16).into(),
        crc: U32::ZERO,
        reserved: [0; 4],
    };
    h.crc = crc32c_append(crc32c(&h.as_bytes()[..CRC_COVERS]), &b[HEADER..at]).into();
    b[..HEADER].copy_from_slice(h.as_bytes());
    Some(b)
}

/// Why a block is not a valid attribute block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrError {
    /// The block is not an attribute block (or not a whole block).
    BadMagic,
    /// Header and entries do not match their CRC-32C: corruption.
    BadChecksum,
    /// An entry's lengths overrun the block, a name is empty, or the
    /// entries do not fill exactly the bytes the header counts.
    BadEntry,
}

impl std::fmt::Display for XattrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            XattrError::BadMagic => "attribute block has a bad magic",
            XattrError::BadChecksum => "attribute block fails its checksum",
            XattrError::BadEntry => "attribute block has an entry that overruns it",
        })
    }
}

impl std::error::Error for XattrError {}

/// Decodes a block, checking every length against the block first.
pub fn decode(b: &[u8]) -> Result<Vec<Xattr>, XattrError> {
    let Ok((h, rest)) = RawHeader::ref_from_prefix(b) else {
        return Err(XattrError::BadMagic);
    };
    if b.len() != BLOCK_SIZE as usize || h.magic.get() != MAGIC {
        return Err(XattrError::BadMagic);
    }
    let count = h.count.get() as usize;
    let used = h.used.get() as usize;
    if used > SPACE {
        return Err(XattrError::BadEntry);
    }
    let mut entries = &rest[..used];
    if h.crc.get() != crc32c_append(crc32c(&b[..CRC_COVERS]), entries) {
        return Err(XattrError::BadChecksum);
    }
    let mut out = Vec::with_capacity(count.min(SPACE / ENTRY_HEADER));
    for _ in 0..count {
        let Ok((e, tail)) = RawEntry::ref_from_prefix(entries) else {
            return Err(XattrError::BadEntry);
        };
        let (nl, vl) = (e.name_len as usize, e.value_len.get() as usize);
        if nl == 0 || nl + vl > tail.len() {
            return Err(XattrError::BadEntry);
        }
        out.push(Xattr {
            name: tail[..nl].to_vec(),
            value: tail[nl..nl + vl].to_vec(),
        });
        entries = &tail[nl + vl..];
    }
    if !entries.is_empty() {
        return Err(XattrError::BadEntry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every set of attributes that fits a block decodes to itself,
        /// and the block encodes back unchanged.
        #[test]
        fn decode_inverts_encode(
            attrs in proptest::collection::vec(
                (
                    proptest::collection::vec(any::<u8>(), 1..=NAME_MAX),
                    proptest::collection::vec(any::<u8>(), 0..600),
                ),
                0..12,
            ),
        ) {
            let attrs: Vec<Xattr> =
                attrs.into_iter().map(|(name, value)| Xattr { name, value }).collect();
            let Some(b) = encode(&attrs) else {
                prop_assert!(footprint(&attrs) > SPACE);
                return Ok(());
            };
            let back = decode(&b).expect("an encoded block decodes");
            prop_assert_eq!(encode(&back), Some(b));
            prop_assert_eq!(back, attrs);
        }
    }

    #[test]
    fn round_trip_and_limits() {
        let attrs = vec![
            Xattr {
                name: b"user.a".to_vec(),
                value: b"1".to_vec(),
            },
            Xattr {
                name: b"user.empty".to_vec(),
                value: vec![],
            },
            Xattr {
                name: vec![b'n'; 255],
                value: vec![9; 1000],
            },
        ];
        let b = encode(&attrs).unwrap();
        assert_eq!(decode(&b).unwrap(), attrs);
        for name_len in [NAME_MIN, 16, NAME_MAX] {
            let alone = |value_len| {
                encode(&[Xattr {
                    name: vec![b'n'; name_len],
                    value: vec![0; value_len],
                }])
            };
            assert!(alone(value_max(name_len)).is_some(), "{name_len}");
            assert!(alone(value_max(name_len) + 1).is_none(), "{name_len}");
        }
        let mut bad = b.clone();
        bad[HEADER + 5] ^= 1;
        assert_eq!(decode(&bad), Err(XattrError::BadChecksum));
        assert_eq!(decode(&vec![0u8; 4096]), Err(XattrError::BadMagic));
    }
}
