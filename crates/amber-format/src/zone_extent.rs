//! The one-fence zone's extent heads (`FEATURE_ZONE_EXTENTS`, zone
//! version 2): a write of consecutive slices of one file goes into
//! consecutive free slots, and the entry of the first slot holds a head
//! naming them, whose checksum covers the head and every slot's new bytes.
//! Data and head are stored together and made durable by one fence; a
//! crash before it leaves a head whose checksum does not match (torn head
//! or torn data), which recovery ignores — the checksum replaces LAWN's
//! fence between data and descriptor, as PMDK's logs validate entries by
//! checksum.
//!
//! ```text
//! extent head (32 bytes, the entry of the extent's first slot)
//!   0  8  seq: the file's write number, > the inode's zone floor C
//!   8  4  first slice (file offset / slot size)
//!  12  4  inode number (0: no head)
//!  16  2  slots n (1..=MAX_EXTENT_SLOTS), slot i holds slice first + i
//!  18 10  reserved, zero
//!  28  4  CRC-32C of bytes 0..28, then the n slots' bytes
//! ```
//!
//! A head is valid when its checksum matches, `seq > C` (the floor in the
//! inode at offset 240, raised past every head of the file when the file's
//! slices are written back), and its slots lie in one chunk; of the valid
//! heads naming a slice, the highest `seq` holds its newest copy, and with
//! none the file does. Entries of slots that do not start an extent are
//! never read. docs/design.md §11.7 gives the protocol and its argument.

use crate::crc::{crc32c, crc32c_append};
use crate::error::FormatError;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of one extent head (and of every slot's entry in a version-2
/// zone).
pub const EXTENT_SIZE: u64 = 32;
/// Most slots one extent names: a zone write covers at most two partial
/// blocks, 64 slices each at the smallest slot.
pub const MAX_EXTENT_SLOTS: u16 = 128;

/// An extent head as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawExtent {
    seq: U64,
    slice: U32,
    ino: U32,
    slots: U16,
    reserved: [u8; 10],
    crc: U32,
}

assert_layout!(RawExtent, EXTENT_SIZE as usize, {
    seq: 0, slice: 8, ino: 12, slots: 16, reserved: 18, crc: 28,
});

const OFF_CRC: usize = 28;

/// One extent head's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The file's write number; never 0.
    pub seq: u64,
    /// The first slice the extent holds.
    pub slice: u32,
    /// The file; never 0.
    pub ino: u32,
    /// Slots (and slices) in the extent, 1..=[`MAX_EXTENT_SLOTS`].
    pub slots: u16,
}

impl Extent {
    /// The head's 32 bytes, its checksum taken over them and `data`, the
    /// extent's slots as they will lie on media.
    pub fn encode(&self, data: &[u8]) -> [u8; EXTENT_SIZE as usize] {
        assert!(self.ino != 0 && self.seq != 0);
        assert!((1..=MAX_EXTENT_SLOTS).contains(&self.slots));
        let raw = RawExtent {
            seq: self.seq.into(),
            slice: self.slice.into(),
            ino: self.ino.into(),
            slots: self.slots.into(),
            reserved: [0; 10],
            crc: U32::ZERO,
        };
        let mut b: [u8; EXTENT_SIZE as usize] = zerocopy::transmute!(raw);
        let crc = crc32c_append(crc32c(&b[..OFF_CRC]), data);
        b[OFF_CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// None for an entry with no head (inode 0, whatever the rest: a slot
    /// inside an extent keeps older bytes); an error for fields no head
    /// has. The checksum is `matches`' to judge, with the slots' bytes.
    pub fn decode(b: &[u8; EXTENT_SIZE as usize]) -> Result<Option<Extent>, FormatError> {
        let raw: RawExtent = zerocopy::transmute!(*b);
        if raw.ino.get() == 0 {
            return Ok(None);
        }
        let slots = raw.slots.get();
        if !(1..=MAX_EXTENT_SLOTS).contains(&slots) {
            return Err(FormatError::InvalidField {
                what: "zone extent slot count",
                value: slots as u64,
            });
        }
        if raw.seq.get() == 0 || raw.reserved != [0; 10] {
            return Err(FormatError::InvalidField {
                what: "zone extent head",
                value: raw.seq.get(),
            });
        }
        Ok(Some(Extent {
            seq: raw.seq.get(),
            slice: raw.slice.get(),
            ino: raw.ino.get(),
            slots,
        }))
    }

    /// Whether head bytes `b` carry the checksum of themselves and `data`:
    /// false for a torn head, torn data, or data changed since.
    pub fn matches(b: &[u8; EXTENT_SIZE as usize], data: &[u8]) -> bool {
        let stored = u32::from_le_bytes(b[OFF_CRC..].try_into().expect("4 bytes"));
        crc32c_append(crc32c(&b[..OFF_CRC]), data) == stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn head() -> Extent {
        Extent {
            seq: 42,
            slice: 0xdead_beef,
            ino: 7,
            slots: 3,
        }
    }

    #[test]
    fn heads_round_trip_and_match_their_data() {
        let data = vec![0xa5u8; 3 * 64];
        let b = head().encode(&data);
        assert_eq!(Extent::decode(&b).unwrap(), Some(head()));
        assert!(Extent::matches(&b, &data));
        assert_eq!(Extent::decode(&[0; 32]).unwrap(), None);
        let mut bad = b;
        bad[16] = 0;
        bad[17] = 0;
        assert!(Extent::decode(&bad).is_err());
    }

    proptest! {
        /// Any one changed byte of the head or of its data fails the
        /// checksum: a torn head or a torn data line is never accepted.
        #[test]
        fn one_changed_byte_fails_the_checksum(at in 0usize..(32 + 192), bit in 0u8..8) {
            let mut data = vec![0x5au8; 192];
            let mut b = head().encode(&data);
            if at < 32 {
                b[at] ^= 1 << bit;
            } else {
                data[at - 32] ^= 1 << bit;
            }
            prop_assert!(!Extent::matches(&b, &data));
        }

        /// Every 32 bytes a head decodes from encode back to themselves
        /// when their checksum matches.
        #[test]
        fn decoded_heads_encode_back(b: [u8; 32], data: [u8; 64]) {
            if let Ok(Some(e)) = Extent::decode(&b) {
                if Extent::matches(&b, &data[..]) {
                    prop_assert_eq!(e.encode(&data[..]), b);
                }
            }
        }
    }
}
