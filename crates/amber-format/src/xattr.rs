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
//!
//! Attributes that outgrow one block (more than 4080 bytes of entries, or
//! a value longer than 65535 bytes) take a **run** of 2 to
//! [`RUN_BLOCKS_MAX`] contiguous blocks instead, named by the same field,
//! under incompatible feature [`FEATURE_XATTR_RUNS`]:
//!
//! ```text
//! off size field
//!   0   4  magic "XAT2"
//!   4   4  entry count
//!   8   4  bytes of entries
//!  12   4  CRC-32C of bytes 0..12, 16..32 and the entries
//!  16   2  blocks in the run (2..=32)
//!  18  14  reserved, zero
//!  32   .  entries, packed: name length u8, 3 reserved bytes, value
//!          length u32, name, value (the run's blocks read as one buffer)
//! ```
//! A run is written whole into fresh blocks and linked by a transaction.

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
/// Run magic.
pub const RUN_MAGIC: u32 = u32::from_le_bytes(*b"XAT2");
/// Incompatible feature bit: attribute runs may exist; a binary without
/// it would judge a run's head damaged and lose its attributes.
pub const FEATURE_XATTR_RUNS: u64 = 1 << 6;
/// Longest run, in blocks: one inode's attributes take at most 128 KiB,
/// which holds a value of [`VALUE_MAX`] beside a 255-byte name and more.
pub const RUN_BLOCKS_MAX: u64 = 32;
/// Longest value (Linux's XATTR_SIZE_MAX).
pub const VALUE_MAX: usize = 65_536;
/// Most bytes listxattr may return: names and their NULs (Linux's
/// XATTR_LIST_MAX).
pub const LIST_MAX: usize = 65_536;
/// Run header bytes.
pub const RUN_HEADER: usize = 32;
/// Per-entry header bytes in a run.
pub const RUN_ENTRY_HEADER: usize = 8;

const _: () = assert!(
    RUN_HEADER + RUN_ENTRY_HEADER + NAME_MAX + VALUE_MAX <= (RUN_BLOCKS_MAX * BLOCK_SIZE) as usize
);
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

/// The run's header as it lies on media (the second table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawRunHeader {
    magic: U32,
    count: U32,
    used: U32,
    crc: U32,
    blocks: U16,
    reserved: [u8; 14],
}

assert_layout!(RawRunHeader, RUN_HEADER, {
    magic: 0, count: 4, used: 8, crc: 12, blocks: 16, reserved: 18,
});

/// A run entry's header as it lies on media, its name and value following.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawRunEntry {
    name_len: u8,
    reserved: [u8; 3],
    value_len: U32,
}

assert_layout!(RawRunEntry, RUN_ENTRY_HEADER, { name_len: 0, reserved: 1, value_len: 4 });

/// Bytes `attrs` take in a block.
pub fn footprint(attrs: &[Xattr]) -> usize {
    attrs
        .iter()
        .map(|a| ENTRY_HEADER + a.name.len() + a.value.len())
        .sum()
}

/// Encodes `attrs` into one block if they fit, else into a run (2 or more
/// whole blocks); None if not even the longest run holds them.
pub fn encode(attrs: &[Xattr]) -> Option<Vec<u8>> {
    encode_block(attrs).or_else(|| encode_run(attrs, 2))
}

/// Encodes `attrs` into exactly `blocks` blocks (a block when 1, else a
/// run that long), as fsck rewrites a list in the blocks it had; None if
/// they do not fit.
pub fn encode_as(attrs: &[Xattr], blocks: u64) -> Option<Vec<u8>> {
    let b = if blocks == 1 {
        encode_block(attrs)
    } else {
        encode_run(attrs, blocks)
    }?;
    (b.len() as u64 == blocks * BLOCK_SIZE).then_some(b)
}

/// Encodes `attrs` into one block; None if they do not fit.
fn encode_block(attrs: &[Xattr]) -> Option<Vec<u8>> {
    let used = footprint(attrs);
    if used > SPACE || attrs.iter().any(|a| a.value.len() > u16::MAX as usize) {
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
        at = put_entry(&mut b, at, e.as_bytes(), a);
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

/// Writes an entry (its header, name and value) into `b` at `at`;
/// returns where the next one starts.
fn put_entry(b: &mut [u8], mut at: usize, header: &[u8], a: &Xattr) -> usize {
    for part in [header, &a.name, &a.value] {
        b[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    at
}

/// Encodes `attrs` into a run of at least `min_blocks` (2 or more)
/// blocks; None if longer than [`RUN_BLOCKS_MAX`].
fn encode_run(attrs: &[Xattr], min_blocks: u64) -> Option<Vec<u8>> {
    debug_assert!(min_blocks >= 2);
    let used: usize = attrs
        .iter()
        .map(|a| RUN_ENTRY_HEADER + a.name.len() + a.value.len())
        .sum();
    let blocks = (RUN_HEADER + used)
        .div_ceil(BLOCK_SIZE as usize)
        .max(min_blocks as usize);
    if blocks as u64 > RUN_BLOCKS_MAX {
        return None;
    }
    let mut b = vec![0u8; blocks * BLOCK_SIZE as usize];
    let mut at = RUN_HEADER;
    for a in attrs {
        assert!(!a.name.is_empty() && a.name.len() <= NAME_MAX);
        let e = RawRunEntry {
            name_len: a.name.len() as u8,
            reserved: [0; 3],
            value_len: (a.value.len() as u32).into(),
        };
        at = put_entry(&mut b, at, e.as_bytes(), a);
    }
    let mut h = RawRunHeader {
        magic: RUN_MAGIC.into(),
        count: (attrs.len() as u32).into(),
        used: (used as u32).into(),
        crc: U32::ZERO,
        blocks: (blocks as u16).into(),
        reserved: [0; 14],
    };
    h.crc = run_crc(h.as_bytes(), &b[RUN_HEADER..at]).into();
    b[..RUN_HEADER].copy_from_slice(h.as_bytes());
    Some(b)
}

/// The run checksum: the header but its CRC field, then the entries.
fn run_crc(header: &[u8], entries: &[u8]) -> u32 {
    let crc_at = offset_of!(RawRunHeader, crc);
    let c = crc32c(&header[..crc_at]);
    let c = crc32c_append(c, &header[crc_at + 4..RUN_HEADER]);
    crc32c_append(c, entries)
}

/// How many blocks the attributes whose first block is `head` take: 1 for
/// a block, the run's length for a run's head.
pub fn blocks_of(head: &[u8]) -> Result<u64, XattrError> {
    if head.len() != BLOCK_SIZE as usize {
        return Err(XattrError::BadMagic);
    }
    if let Ok((h, _)) = RawRunHeader::ref_from_prefix(head) {
        if h.magic.get() == RUN_MAGIC {
            let n = u64::from(h.blocks.get());
            return if (2..=RUN_BLOCKS_MAX).contains(&n) {
                Ok(n)
            } else {
                Err(XattrError::BadEntry)
            };
        }
    }
    Ok(1)
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

/// Decodes a block, or a whole run (its blocks as one buffer), checking
/// every length against the buffer first.
pub fn decode(b: &[u8]) -> Result<Vec<Xattr>, XattrError> {
    match RawRunHeader::ref_from_prefix(b) {
        Ok((h, _)) if h.magic.get() == RUN_MAGIC => decode_run(b),
        _ => decode_block(b),
    }
}

/// Decodes a run whose blocks are `b`.
fn decode_run(b: &[u8]) -> Result<Vec<Xattr>, XattrError> {
    let Ok((h, rest)) = RawRunHeader::ref_from_prefix(b) else {
        return Err(XattrError::BadMagic);
    };
    let blocks = u64::from(h.blocks.get());
    if !(2..=RUN_BLOCKS_MAX).contains(&blocks) || b.len() as u64 != blocks * BLOCK_SIZE {
        return Err(XattrError::BadEntry);
    }
    let used = h.used.get() as usize;
    if used > rest.len() {
        return Err(XattrError::BadEntry);
    }
    let entries = &rest[..used];
    if h.crc.get() != run_crc(&b[..RUN_HEADER], entries) {
        return Err(XattrError::BadChecksum);
    }
    read_entries(entries, h.count.get() as usize, RUN_ENTRY_HEADER, |h| {
        let e = RawRunEntry::ref_from_bytes(h).ok()?;
        Some((e.name_len as usize, e.value_len.get() as usize))
    })
}

/// Reads `count` entries packed in `entries`: each a `header`-byte
/// header whose name and value lengths `lens` reads, then the name and
/// the value. Every length is checked against what is left, and the
/// entries must fill `entries` exactly.
fn read_entries(
    mut entries: &[u8],
    count: usize,
    header: usize,
    lens: impl Fn(&[u8]) -> Option<(usize, usize)>,
) -> Result<Vec<Xattr>, XattrError> {
    let mut out = Vec::with_capacity(count.min(entries.len() / header));
    for _ in 0..count {
        if entries.len() < header {
            return Err(XattrError::BadEntry);
        }
        let (h, tail) = entries.split_at(header);
        let (nl, vl) = lens(h).ok_or(XattrError::BadEntry)?;
        if nl == 0 || vl > tail.len() || nl + vl > tail.len() {
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

/// Decodes one block.
fn decode_block(b: &[u8]) -> Result<Vec<Xattr>, XattrError> {
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
    let entries = &rest[..used];
    if h.crc.get() != crc32c_append(crc32c(&b[..CRC_COVERS]), entries) {
        return Err(XattrError::BadChecksum);
    }
    read_entries(entries, count, ENTRY_HEADER, |h| {
        let e = RawEntry::ref_from_bytes(h).ok()?;
        Some((e.name_len as usize, e.value_len.get() as usize))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Bytes from media with a run's magic never panic the decoder,
        /// whatever the header claims, and what it accepts encodes back.
        #[test]
        fn garbage_runs_are_refused_or_sound(
            blocks in 2usize..5,
            claimed in any::<u16>(),
            count in any::<u32>(),
            used in any::<u32>(),
            seed in proptest::collection::vec(any::<u8>(), 64),
        ) {
            let mut b: Vec<u8> = seed.iter().cycle().take(blocks * BLOCK_SIZE as usize).copied().collect();
            b[..4].copy_from_slice(&RUN_MAGIC.to_le_bytes());
            b[4..8].copy_from_slice(&count.to_le_bytes());
            b[8..12].copy_from_slice(&used.to_le_bytes());
            b[16..18].copy_from_slice(&claimed.to_le_bytes());
            let _ = blocks_of(&b[..BLOCK_SIZE as usize]);
            if let Ok(attrs) = decode(&b) {
                let again = encode(&attrs).expect("what decoded fits");
                prop_assert_eq!(decode(&again), Ok(attrs));
            }
        }

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
                prop_assert!(footprint(&attrs) > (RUN_BLOCKS_MAX * BLOCK_SIZE) as usize / 2);
                return Ok(());
            };
            prop_assert_eq!(b.len() == BLOCK_SIZE as usize, footprint(&attrs) <= SPACE);
            prop_assert_eq!(blocks_of(&b[..BLOCK_SIZE as usize]), Ok(b.len() as u64 / BLOCK_SIZE));
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
            let one = alone(value_max(name_len)).unwrap();
            assert_eq!(one.len(), BLOCK_SIZE as usize, "{name_len}");
            let run = alone(value_max(name_len) + 1).unwrap();
            assert_eq!(run.len(), 2 * BLOCK_SIZE as usize, "{name_len}");
            let most = alone(VALUE_MAX).unwrap();
            assert_eq!(decode(&most).unwrap()[0].value.len(), VALUE_MAX);
        }
        let many: Vec<Xattr> = (0..1000)
            .map(|i| Xattr {
                name: format!("user.attr{i:04}").into_bytes(),
                value: vec![i as u8; 32],
            })
            .collect();
        let b = encode(&many).unwrap();
        assert_eq!(blocks_of(&b[..4096]), Ok(13));
        let padded = encode_as(&many, 20).unwrap();
        assert_eq!(blocks_of(&padded[..4096]), Ok(20));
        assert_eq!(decode(&padded).unwrap(), many);
        assert_eq!(encode_as(&many, 1), None);
        assert_eq!(decode(&b).unwrap(), many);
        let huge = vec![Xattr {
            name: b"user.big".to_vec(),
            value: vec![0; (RUN_BLOCKS_MAX * BLOCK_SIZE) as usize],
        }];
        assert_eq!(encode(&huge), None);
        let mut bad = b.clone();
        bad[HEADER + 5] ^= 1;
        assert_eq!(decode(&bad), Err(XattrError::BadChecksum));
        assert_eq!(decode(&vec![0u8; 4096]), Err(XattrError::BadMagic));
        let mut run = encode(&many).unwrap();
        run[RUN_HEADER + 40] ^= 1;
        assert_eq!(decode(&run), Err(XattrError::BadChecksum));
        assert_eq!(decode(&run[..4096]), Err(XattrError::BadEntry));
        run[16] = 99;
        assert_eq!(blocks_of(&run[..4096]), Err(XattrError::BadEntry));
    }
}
