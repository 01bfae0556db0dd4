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

use crate::layout::BLOCK_SIZE;
use crate::le::*;

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

/// One attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xattr {
    pub name: Vec<u8>,
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
    put_u32(&mut b, 0, MAGIC);
    put_u16(&mut b, 4, attrs.len() as u16);
    put_u16(&mut b, 6, used as u16);
    let mut at = HEADER;
    for a in attrs {
        assert!(!a.name.is_empty() && a.name.len() <= NAME_MAX);
        b[at] = a.name.len() as u8;
        put_u16(&mut b, at + 2, a.value.len() as u16);
        at += ENTRY_HEADER;
        b[at..at + a.name.len()].copy_from_slice(&a.name);
        at += a.name.len();
        b[at..at + a.value.len()].copy_from_slice(&a.value);
        at += a.value.len();
    }
    let crc = crc32c_append(crc32c(&b[..8]), &b[HEADER..HEADER + used]);
    put_u32(&mut b, 8, crc);
    Some(b)
}

/// Why a block is not a valid attribute block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrError {
    BadMagic,
    BadChecksum,
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

/// Decodes a block, checking every length against the block first.
pub fn decode(b: &[u8]) -> Result<Vec<Xattr>, XattrError> {
    if b.len() != BLOCK_SIZE as usize || get_u32(b, 0) != MAGIC {
        return Err(XattrError::BadMagic);
    }
    let count = get_u16(b, 4) as usize;
    let used = get_u16(b, 6) as usize;
    if used > SPACE {
        return Err(XattrError::BadEntry);
    }
    if get_u32(b, 8) != crc32c_append(crc32c(&b[..8]), &b[HEADER..HEADER + used]) {
        return Err(XattrError::BadChecksum);
    }
    let mut out = Vec::with_capacity(count.min(SPACE / ENTRY_HEADER));
    let mut at = HEADER;
    let end = HEADER + used;
    for _ in 0..count {
        if at + ENTRY_HEADER > end {
            return Err(XattrError::BadEntry);
        }
        let nl = b[at] as usize;
        let vl = get_u16(b, at + 2) as usize;
        at += ENTRY_HEADER;
        if nl == 0 || at + nl + vl > end {
            return Err(XattrError::BadEntry);
        }
        let name = b[at..at + nl].to_vec();
        let value = b[at + nl..at + nl + vl].to_vec();
        at += nl + vl;
        out.push(Xattr { name, value });
    }
    if at != end {
        return Err(XattrError::BadEntry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
