//! LAWN's small-write zone (feature `FEATURE_ZONE`): cache-line-aligned
//! slots that hold the newest copy of small slices of files, each described
//! by a 16-byte descriptor set and cleared with one atomic store
//! (lawn.txt §4.1). The zone's blocks come from the data area; superblock
//! region descriptor 0 holds its header block, 1 the header's length.
//!
//! ```text
//! header block h: the header at byte 0 and its copy at byte 4032
//! (`HEADER_COPY_B`), 64 bytes each, the same bytes; the rest zero
//!   0  8  magic "AMBZONE\0"
//!   8  4  version (1)
//!  12  4  slot size in bytes (64, 128, 256 or 512)
//!  16  4  sub-zone count (1..=16)
//!  20  4  blocks per chunk
//!  24  4  descriptor blocks per chunk
//!  28  4  slots per chunk
//!  32  4  chunk-table entries per sub-zone (64)
//!  36 24  reserved, zero
//!  60  4  CRC-32C of bytes 0..60
//! blocks h+1, h+2: the chunk table, u64 [16 sub-zones][64 chunks]: the
//!   first block of each chunk, 0 for none. A sub-zone's chunks fill its
//!   row from entry 0; an entry is set by one 8-byte store only after the
//!   chunk's descriptor blocks are zero and durable.
//! chunk: `desc_blocks` blocks of descriptors, then the slots.
//! descriptor (16 bytes, one atomic store):
//!   0  8  seq (bits 0..63) | DOOMED (bit 63)
//!   8  4  slice index in the file (file offset / slot size)
//!  12  4  inode number (0: the slot is free)
//! ```
//!
//! A descriptor is valid (its slot holds the newest copy of the slice)
//! when its inode is a live regular file whose zone commit number `C`
//! (inode offset 240) satisfies `seq <= C` — or, with DOOMED, `seq > C` —
//! the slice starts below the file's size and its block is mapped.
//! docs/design.md §11 gives the protocols that keep this true.

use crate::crc::crc32c;
use crate::error::FormatError;
use crate::layout::BLOCK_SIZE;
use std::mem::offset_of;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Incompatible feature bit: the pool has a small-write zone whose slots
/// may hold the newest copy of file data.
pub const FEATURE_ZONE: u64 = 1 << 0;
/// Superblock region-descriptor index of the zone's header block.
pub const REGION_ZONE_START: usize = 0;
/// Superblock region-descriptor index of the header's length in blocks.
pub const REGION_ZONE_BLOCKS: usize = 1;

/// The zone header's first bytes.
pub const ZONE_MAGIC: [u8; 8] = *b"AMBZONE\0";
/// The zone format version of LAWN's 16-byte descriptors.
pub const ZONE_VERSION: u32 = 1;
/// The zone format version of checksummed extent heads (`zone_extent`,
/// `FEATURE_ZONE_EXTENTS`): 32 bytes per slot's entry.
pub const ZONE_VERSION_EXTENTS: u32 = 2;
/// Bytes of one descriptor.
pub const DESC_SIZE: u64 = 16;
/// Incompatible feature bit (with `FEATURE_ZONE`): the zone's entries are
/// checksummed extent heads committed with one fence (`zone_extent`), which
/// an amberfs that knows only LAWN's descriptors would misread.
pub const FEATURE_ZONE_EXTENTS: u64 = 1 << 4;
/// Most sub-zones (one per CPU, capped).
pub const MAX_SUBZONES: u32 = 16;
/// Chunk-table entries per sub-zone: the most a sub-zone can grow to.
pub const MAX_CHUNKS: u32 = 64;
/// Byte offset in the header block of the header's second copy: the
/// zone's geometry survives a damaged first copy (its last line, so one
/// torn or changed line never holds both).
pub const HEADER_COPY_B: u64 = BLOCK_SIZE - HEADER_LEN as u64;
/// Header block plus chunk-table blocks.
pub const HEADER_BLOCKS: u64 = 1 + (MAX_SUBZONES as u64 * MAX_CHUNKS as u64 * 8) / BLOCK_SIZE;
/// Slot sizes the zone supports: whole cache lines that divide a block.
pub const SLOT_SIZES: [u32; 4] = [64, 128, 256, 512];
/// Smallest chunk: a descriptor block and at least a block of slots.
pub const MIN_CHUNK_BLOCKS: u32 = 8;
/// Largest chunk (16 MiB), so one growth step stays bounded.
pub const MAX_CHUNK_BLOCKS: u32 = 4096;

/// Bytes of one header copy.
pub const HEADER_LEN: usize = 64;
const OFF_CRC: usize = offset_of!(RawHeader, crc);
const DOOMED: u64 = 1 << 63;

/// One header copy as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    magic: [u8; 8],
    version: U32,
    slot_size: U32,
    subzones: U32,
    chunk_blocks: U32,
    desc_blocks: U32,
    slots_per_chunk: U32,
    table_width: U32,
    reserved: [u8; 24],
    crc: U32,
}

assert_layout!(RawHeader, HEADER_LEN, {
    magic: 0, version: 8, slot_size: 12, subzones: 16, chunk_blocks: 20,
    desc_blocks: 24, slots_per_chunk: 28, table_width: 32, reserved: 36, crc: 60,
});

/// A descriptor as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawDescriptor {
    seq: U64,
    slice: U32,
    ino: U32,
}

assert_layout!(RawDescriptor, DESC_SIZE as usize, { seq: 0, slice: 8, ino: 12 });

const _: () = assert!((MAX_SUBZONES as u64 * MAX_CHUNKS as u64 * 8).is_multiple_of(BLOCK_SIZE));
const _: () = assert!(HEADER_BLOCKS == 3);

/// The zone's fixed shape, from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneGeometry {
    /// Bytes per slot, one of [`SLOT_SIZES`]: also the slice size, the
    /// unit in which the zone holds file data.
    pub slot_size: u32,
    /// Sub-zones, 1..=[`MAX_SUBZONES`]; a file's slices live in sub-zone
    /// `ino mod subzones`, so writers of different files rarely share one.
    pub subzones: u32,
    /// Blocks per chunk, [`MIN_CHUNK_BLOCKS`]..=[`MAX_CHUNK_BLOCKS`]: the
    /// unit a sub-zone grows by.
    pub chunk_blocks: u32,
    /// Descriptor blocks at the start of each chunk; derived from the
    /// three above.
    pub desc_blocks: u32,
    /// Slots per chunk, each with its descriptor; derived from the three
    /// above.
    pub slots_per_chunk: u32,
    /// Entries are 32-byte checksummed extent heads (version 2,
    /// `zone_extent`) rather than LAWN's 16-byte descriptors (version 1).
    pub extents: bool,
}

fn entry_size(extents: bool) -> u64 {
    if extents {
        crate::zone_extent::EXTENT_SIZE
    } else {
        DESC_SIZE
    }
}

fn invalid(what: &'static str, value: u64) -> FormatError {
    FormatError::InvalidField { what, value }
}

impl ZoneGeometry {
    /// The geometry for chunks of `chunk_blocks` blocks of `slot_size`
    /// slots: as many slots as both the descriptor blocks and the slot
    /// blocks have room for.
    pub fn new(
        slot_size: u32,
        subzones: u32,
        chunk_blocks: u32,
        extents: bool,
    ) -> Result<Self, FormatError> {
        if !SLOT_SIZES.contains(&slot_size) {
            return Err(invalid("zone slot size", slot_size as u64));
        }
        if subzones == 0 || subzones > MAX_SUBZONES {
            return Err(invalid("zone sub-zone count", subzones as u64));
        }
        if !(MIN_CHUNK_BLOCKS..=MAX_CHUNK_BLOCKS).contains(&chunk_blocks) {
            return Err(invalid("zone chunk blocks", chunk_blocks as u64));
        }
        let entry = entry_size(extents);
        let per_block = (BLOCK_SIZE / entry) as u32;
        // Each slot costs slot_size bytes plus its entry.
        let desc_blocks = (chunk_blocks as u64 * entry).div_ceil(slot_size as u64 + entry) as u32;
        let slot_bytes = (chunk_blocks - desc_blocks) as u64 * BLOCK_SIZE;
        let slots = (slot_bytes / slot_size as u64).min((desc_blocks * per_block) as u64) as u32;
        assert!(slots > 0 && desc_blocks > 0 && desc_blocks < chunk_blocks);
        Ok(ZoneGeometry {
            slot_size,
            subzones,
            chunk_blocks,
            desc_blocks,
            slots_per_chunk: slots,
            extents,
        })
    }

    /// Bytes of each slot's entry in the descriptor blocks.
    pub fn entry_size(&self) -> u64 {
        entry_size(self.extents)
    }

    /// The header's 64 bytes, with checksum.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let raw = RawHeader {
            magic: ZONE_MAGIC,
            version: if self.extents {
                ZONE_VERSION_EXTENTS
            } else {
                ZONE_VERSION
            }
            .into(),
            slot_size: self.slot_size.into(),
            subzones: self.subzones.into(),
            chunk_blocks: self.chunk_blocks.into(),
            desc_blocks: self.desc_blocks.into(),
            slots_per_chunk: self.slots_per_chunk.into(),
            table_width: MAX_CHUNKS.into(),
            reserved: [0; 24],
            crc: U32::ZERO,
        };
        let mut b: [u8; HEADER_LEN] = zerocopy::transmute!(raw);
        let crc = crc32c(&b[..OFF_CRC]);
        b[OFF_CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and validates a header: magic, checksum, version, and a
    /// geometry equal to the one `new` computes from its inputs.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Self, FormatError> {
        let raw: RawHeader = zerocopy::transmute!(*b);
        if raw.magic != ZONE_MAGIC {
            return Err(invalid("zone header magic", u64::from_le_bytes(raw.magic)));
        }
        if raw.crc.get() != crc32c(&b[..OFF_CRC]) {
            return Err(invalid("zone header checksum", raw.crc.get() as u64));
        }
        let version = raw.version.get();
        if version != ZONE_VERSION && version != ZONE_VERSION_EXTENTS {
            return Err(FormatError::UnsupportedVersion {
                found: version,
                supported: ZONE_VERSION_EXTENTS,
            });
        }
        let g = ZoneGeometry::new(
            raw.slot_size.get(),
            raw.subzones.get(),
            raw.chunk_blocks.get(),
            version == ZONE_VERSION_EXTENTS,
        )?;
        if raw.desc_blocks.get() != g.desc_blocks || raw.slots_per_chunk.get() != g.slots_per_chunk
        {
            return Err(invalid(
                "zone chunk shape",
                raw.slots_per_chunk.get() as u64,
            ));
        }
        if raw.table_width.get() != MAX_CHUNKS {
            return Err(invalid(
                "zone chunk-table width",
                raw.table_width.get() as u64,
            ));
        }
        Ok(g)
    }

    /// Byte offset of the chunk-table entry of `chunk` in `subzone`.
    pub fn table_entry(header_block: u64, subzone: u32, chunk: u32) -> u64 {
        assert!(subzone < MAX_SUBZONES && chunk < MAX_CHUNKS);
        (header_block + 1) * BLOCK_SIZE + (subzone as u64 * MAX_CHUNKS as u64 + chunk as u64) * 8
    }

    /// Byte offset of the entry (descriptor or extent head) of slot `i`
    /// of the chunk starting at `chunk_block`.
    pub fn desc_offset(&self, chunk_block: u64, i: u32) -> u64 {
        assert!(i < self.slots_per_chunk);
        chunk_block * BLOCK_SIZE + i as u64 * self.entry_size()
    }

    /// Byte offset of slot `i` of the chunk starting at `chunk_block`.
    pub fn slot_offset(&self, chunk_block: u64, i: u32) -> u64 {
        assert!(i < self.slots_per_chunk);
        (chunk_block + self.desc_blocks as u64) * BLOCK_SIZE + i as u64 * self.slot_size as u64
    }

    /// Slices per file block.
    pub fn slices_per_block(&self) -> u64 {
        BLOCK_SIZE / self.slot_size as u64
    }
}

/// One slot's descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// The file whose slice the slot holds; never 0 (an all-zero
    /// descriptor is a free slot).
    pub ino: u32,
    /// The slice's index in the file (file offset / slot size).
    pub slice: u32,
    /// The write that stored it (or, when `doomed`, the write that makes it
    /// obsolete once committed).
    pub seq: u64,
    /// Stored as bit 63 of the seq word: the slot's copy stays the newest
    /// only until the file's zone commit number reaches `seq`, so a
    /// multi-slice write that moves the slice back to the file retires
    /// the slot with the very store that commits the write.
    pub doomed: bool,
}

/// Largest sequence number a descriptor can carry.
pub const MAX_SEQ: u64 = DOOMED - 1;

impl Descriptor {
    /// The 16 bytes as one value for a 16-byte atomic store (bytes 0..8
    /// are the low half).
    pub fn encode(&self) -> u128 {
        assert!(self.ino != 0 && self.seq <= MAX_SEQ);
        let raw = RawDescriptor {
            seq: (self.seq | if self.doomed { DOOMED } else { 0 }).into(),
            slice: self.slice.into(),
            ino: self.ino.into(),
        };
        u128::from_le_bytes(zerocopy::transmute!(raw))
    }

    /// None for a free slot (all zero); an error for bytes no store ever
    /// writes (a zero inode with a nonzero rest).
    pub fn decode(b: &[u8; DESC_SIZE as usize]) -> Result<Option<Descriptor>, FormatError> {
        let raw: RawDescriptor = zerocopy::transmute!(*b);
        let w0 = raw.seq.get();
        if raw.ino.get() == 0 {
            if w0 != 0 || raw.slice.get() != 0 {
                return Err(invalid("zone descriptor with no inode", w0));
            }
            return Ok(None);
        }
        Ok(Some(Descriptor {
            ino: raw.ino.get(),
            slice: raw.slice.get(),
            seq: w0 & !DOOMED,
            doomed: w0 & DOOMED != 0,
        }))
    }

    /// Whether the slot holds the slice's newest copy, by the sequence
    /// rule alone, for a file whose zone commit number is `committed`.
    pub fn committed(&self, committed: u64) -> bool {
        if self.doomed {
            self.seq > committed
        } else {
            self.seq <= committed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every header `new` accepts decodes to itself and its bytes
        /// encode back unchanged.
        #[test]
        fn headers_round_trip(slot in 0..4usize, subzones in 1..=MAX_SUBZONES, chunk in MIN_CHUNK_BLOCKS..=MAX_CHUNK_BLOCKS, extents: bool) {
            let g = ZoneGeometry::new(SLOT_SIZES[slot], subzones, chunk, extents).expect("a geometry");
            let b = g.encode();
            prop_assert_eq!(ZoneGeometry::decode(&b), Ok(g));
        }

        /// Every 16 bytes a descriptor accepts encode back to themselves.
        #[test]
        fn descriptors_encode_back(b: [u8; 16]) {
            match Descriptor::decode(&b) {
                Ok(Some(d)) => prop_assert_eq!(d.encode().to_le_bytes(), b),
                Ok(None) => prop_assert_eq!(b, [0; 16]),
                Err(_) => prop_assert!(b[12..] == [0; 4]),
            }
        }
    }

    #[test]
    fn geometry_fits_its_chunk() {
        for s in SLOT_SIZES {
            for (c, extents) in [MIN_CHUNK_BLOCKS, 100, 1024, MAX_CHUNK_BLOCKS]
                .into_iter()
                .flat_map(|c| [(c, false), (c, true)])
            {
                let g = ZoneGeometry::new(s, 2, c, extents).unwrap();
                let desc = g.slots_per_chunk as u64 * g.entry_size();
                assert!(desc <= g.desc_blocks as u64 * BLOCK_SIZE);
                let slots = g.slots_per_chunk as u64 * s as u64;
                assert!(slots <= (c - g.desc_blocks) as u64 * BLOCK_SIZE);
                // Little waste: within a block's worth on each side.
                assert!(desc + BLOCK_SIZE >= g.desc_blocks as u64 * BLOCK_SIZE);
                assert_eq!(ZoneGeometry::decode(&g.encode()).unwrap(), g);
            }
        }
        assert!(ZoneGeometry::new(96, 2, 64, false).is_err());
        assert!(ZoneGeometry::new(64, 0, 64, true).is_err());
        assert!(ZoneGeometry::new(64, 2, 4, false).is_err());
    }

    #[test]
    fn header_corruption_is_detected() {
        let g = ZoneGeometry::new(64, 2, 256, true).unwrap();
        let mut b = g.encode();
        b[13] ^= 1;
        assert!(ZoneGeometry::decode(&b).is_err());
    }

    #[test]
    fn descriptors_round_trip() {
        let d = Descriptor {
            ino: 7,
            slice: 0xdead_beef,
            seq: 12345,
            doomed: true,
        };
        let bytes = d.encode().to_le_bytes();
        assert_eq!(Descriptor::decode(&bytes).unwrap(), Some(d));
        assert_eq!(Descriptor::decode(&[0; 16]).unwrap(), None);
        let mut bad = [0u8; 16];
        bad[0] = 1;
        assert!(Descriptor::decode(&bad).is_err());
        assert!(d.committed(12344) && !d.committed(12345));
        let live = Descriptor { doomed: false, ..d };
        assert!(live.committed(12345) && !live.committed(12344));
    }
}
