//! Directory entries. A directory's data blocks are arrays of 64 slots of
//! 64 bytes; an entry takes 1 to 5 consecutive slots of one block:
//!
//! ```text
//! off size field
//!   0   8  inode number (0: the slot is free)
//!   8   1  name length (1..=255)
//!   9   1  d_type (DT_* of the inode's kind)
//!  10   1  slots used by this entry (1..=5)
//!  11   1  reserved, zero
//!  12   4  CRC-32C of bytes 0..12 and the name
//!  16   n  name, continuing into the following slots
//! ```
//! "." and ".." are not stored: the inode's parent field gives "..".
//! Entries are written only inside journal transactions, so a whole entry
//! appears or disappears atomically; the checksum catches media corruption.

use crate::crc::{crc32c, crc32c_append};
use std::mem::offset_of;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes per slot.
pub const SLOT_SIZE: usize = 64;
/// Slots per directory block.
pub const SLOTS_PER_BLOCK: usize = 64;
/// Longest name.
pub const NAME_MAX: usize = 255;
/// Header bytes before the name.
pub const HEADER: usize = 16;
/// Most slots one entry can take.
pub const MAX_SLOTS: usize = (HEADER + NAME_MAX).div_ceil(SLOT_SIZE);

/// An entry's header as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    ino: U64,
    name_len: u8,
    dtype: u8,
    nslots: u8,
    reserved: u8,
    crc: U32,
}

assert_layout!(RawHeader, HEADER, {
    ino: 0, name_len: 8, dtype: 9, nslots: 10, reserved: 11, crc: 12,
});

/// Bytes of the header the checksum covers, with the name.
const CRC_COVERS: usize = offset_of!(RawHeader, crc);

/// Slots needed for a name of `len` bytes.
pub fn slots_for(len: usize) -> usize {
    assert!((1..=NAME_MAX).contains(&len));
    (HEADER + len).div_ceil(SLOT_SIZE)
}

/// Encodes an entry into `slots_for(name.len()) * 64` bytes.
pub fn encode(ino: u64, dtype: u8, name: &[u8]) -> Vec<u8> {
    let n = slots_for(name.len());
    let mut h = RawHeader {
        ino: ino.into(),
        name_len: name.len() as u8,
        dtype,
        nslots: n as u8,
        reserved: 0,
        crc: U32::ZERO,
    };
    h.crc = crc32c_append(crc32c(&h.as_bytes()[..CRC_COVERS]), name).into();
    let mut b = vec![0u8; n * SLOT_SIZE];
    b[..HEADER].copy_from_slice(h.as_bytes());
    b[HEADER..HEADER + name.len()].copy_from_slice(name);
    b
}

/// A decoded entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirent {
    /// The inode the name refers to; never 0 (0 marks a free slot).
    pub ino: u64,
    /// The DT_* value of the inode's kind ([`crate::FileKind::dtype`]), so
    /// readdir need not read the inode.
    pub dtype: u8,
    /// Slots the entry takes, from its first: always
    /// [`slots_for`]`(name.len())`, within one block.
    pub nslots: usize,
    /// The name, 1..=[`NAME_MAX`] bytes, any bytes but `/` and NUL.
    pub name: Vec<u8>,
}

/// Why a slot could not be decoded as an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirentError {
    /// The slot names an inode but a name of zero bytes.
    BadLength,
    /// The slot count is not the one the name needs, or the entry would
    /// run past the end of its block.
    BadSlotCount,
    /// The header and name do not match their CRC-32C: corruption.
    BadChecksum,
}

impl std::fmt::Display for DirentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DirentError::BadLength => "name length is zero",
            DirentError::BadSlotCount => "slot count does not match the name or crosses the block",
            DirentError::BadChecksum => "checksum mismatch",
        })
    }
}

impl std::error::Error for DirentError {}

/// Decodes the entry starting at `slot` of a directory block. Ok(None) for
/// a free slot.
pub fn decode(block: &[u8], slot: usize) -> Result<Option<Dirent>, DirentError> {
    assert_eq!(block.len(), SLOT_SIZE * SLOTS_PER_BLOCK);
    assert!(slot < SLOTS_PER_BLOCK);
    let s = &block[slot * SLOT_SIZE..];
    let (h, rest) = RawHeader::ref_from_prefix(s).expect("a slot holds a header");
    let ino = h.ino.get();
    if ino == 0 {
        return Ok(None);
    }
    let len = h.name_len as usize;
    if len == 0 {
        return Err(DirentError::BadLength);
    }
    let n = h.nslots as usize;
    if n != slots_for(len) || slot + n > SLOTS_PER_BLOCK {
        return Err(DirentError::BadSlotCount);
    }
    let name = &rest[..len];
    if h.crc.get() != crc32c_append(crc32c(&s[..CRC_COVERS]), name) {
        return Err(DirentError::BadChecksum);
    }
    Ok(Some(Dirent {
        ino,
        dtype: h.dtype,
        nslots: n,
        name: name.to_vec(),
    }))
}

const _: () = assert!(MAX_SLOTS == 5);
const _: () = assert!(SLOT_SIZE * SLOTS_PER_BLOCK == crate::layout::BLOCK_SIZE as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every entry decodes to itself wherever it fits in a block.
        #[test]
        fn decode_inverts_encode(
            ino in 1u64..,
            dtype: u8,
            name in proptest::collection::vec(any::<u8>(), 1..=NAME_MAX),
            slot in 0..SLOTS_PER_BLOCK,
        ) {
            let e = encode(ino, dtype, &name);
            let slot = slot.min(SLOTS_PER_BLOCK - e.len() / SLOT_SIZE);
            let mut block = vec![0u8; SLOT_SIZE * SLOTS_PER_BLOCK];
            block[slot * SLOT_SIZE..][..e.len()].copy_from_slice(&e);
            let d = Dirent { ino, dtype, nslots: e.len() / SLOT_SIZE, name: name.clone() };
            prop_assert_eq!(decode(&block, slot), Ok(Some(d)));
        }
    }

    #[test]
    fn round_trip_short_and_long_names() {
        for len in [1usize, 47, 48, 49, 200, 255] {
            let name = vec![b'x'; len];
            let e = encode(42, 8, &name);
            let mut block = vec![0u8; 4096];
            block[128..128 + e.len()].copy_from_slice(&e);
            let d = decode(&block, 2).unwrap().unwrap();
            assert_eq!(d.name, name);
            assert_eq!(d.ino, 42);
            assert_eq!(d.nslots, slots_for(len));
            assert_eq!(decode(&block, 0).unwrap(), None);
        }
    }

    #[test]
    fn detects_corruption() {
        let e = encode(42, 8, b"hello");
        let mut block = vec![0u8; 4096];
        block[..e.len()].copy_from_slice(&e);
        block[17] ^= 1;
        assert_eq!(decode(&block, 0), Err(DirentError::BadChecksum));
        let mut block = vec![0u8; 4096];
        block[63 * 64..63 * 64 + e.len()].copy_from_slice(&e);
        block[63 * 64 + 8] = 200; // needs 4 slots from the last slot
        assert!(decode(&block, 63).is_err());
    }
}
