//! The superblock: identity, version, feature flags, geometry and the clean
//! flag. Two copies (blocks 0 and 1) each carry a CRC-32C and a generation;
//! an update writes and persists copy A, then copy B, so at every instant at
//! least one copy is whole. Mount takes the valid copy with the higher
//! generation (redb's two commit slots, TigerBeetle's superblock copies).
//!
//! ```text
//! off  size  field
//!   0     8  magic "AMBERFS\0"
//!   8     4  version (1)
//!  12     4  superblock size (256)
//!  16     8  feature_compat      (unknown bits: mount anyway)
//!  24     8  feature_incompat    (unknown bits: refuse to mount)
//!  32     8  feature_ro_compat   (unknown bits: mount read-only -> refused in v1)
//!  40     8  pool size in bytes
//!  48     4  block size (4096)
//!  52     4  journal count
//!  56     4  blocks per journal
//!  60     4  inode size (256)
//!  64     8  inode count
//!  72     8  journal start block
//!  80     8  inode table start block
//!  88     8  bitmap start block
//!  96     8  bitmap blocks
//! 104     8  data start block
//! 112     8  total blocks
//! 120    16  uuid
//! 136     8  generation (bumped by every superblock update)
//! 144     4  state: 1 clean (bitmap valid, journals empty), 0 mounted
//! 148     4  reserved, zero
//! 152     8  mount count
//! 160     8  last mount time (seconds since the epoch)
//! 168     8  last clean-unmount time
//! 176    64  region descriptors of optional features, zero when the
//!            feature is off: [small-write zone header block, its blocks
//!            (FEATURE_ZONE), attribute-log start, blocks,
//!            logical-information start, blocks (FEATURE_SPLIT), 2 spare]
//! 240    12  reserved, zero
//! 252     4  CRC-32C of bytes 0..252
//! ```

use crate::crc::crc32c;
use crate::error::FormatError;
use crate::inode::INODE_SIZE;
use crate::layout::{FormatParams, Layout, PoolLayout, BLOCK_SIZE};
use crate::nova::FEATURE_NOVA;
use crate::split::{
    SplitRegions, FEATURE_LOG_RECORDS, FEATURE_OWN_RECORDS, FEATURE_SPLIT, REGION_ATTR_START,
    REGION_LI_BLOCKS,
};
use crate::xattr::FEATURE_XATTR_RUNS;
use crate::zone::{
    FEATURE_ZONE, FEATURE_ZONE_EXTENTS, HEADER_BLOCKS, REGION_ZONE_BLOCKS, REGION_ZONE_START,
};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of one superblock copy.
pub const SUPERBLOCK_SIZE: usize = 256;
/// The pool's first bytes.
pub const MAGIC: [u8; 8] = *b"AMBERFS\0";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Incompatible features this version understands: LAWN's small-write
/// zone and HUNTER's split layout, with its records in a table or in the
/// log (HiNFS needs none).
pub const KNOWN_INCOMPAT: u64 = FEATURE_ZONE
    | FEATURE_SPLIT
    | FEATURE_LOG_RECORDS
    | FEATURE_NOVA
    | FEATURE_ZONE_EXTENTS
    | FEATURE_OWN_RECORDS
    | FEATURE_XATTR_RUNS;
/// The incompatible features by the names `amberfs info` shows.
pub const INCOMPAT_NAMES: [(u64, &str); 7] = [
    (FEATURE_ZONE, "zone"),
    (FEATURE_SPLIT, "split"),
    (FEATURE_LOG_RECORDS, "log-records"),
    (FEATURE_NOVA, "nova"),
    (FEATURE_ZONE_EXTENTS, "zone-extents"),
    (FEATURE_OWN_RECORDS, "own-records"),
    (FEATURE_XATTR_RUNS, "xattr-runs"),
];

const _: () = {
    let mut all = 0;
    let mut i = 0;
    while i < INCOMPAT_NAMES.len() {
        all |= INCOMPAT_NAMES[i].0;
        i += 1;
    }
    assert!(all == KNOWN_INCOMPAT, "every known feature has a name");
};

/// Read-only-compatible features this version understands.
pub const KNOWN_RO_COMPAT: u64 = 0;
/// Number of u64 region descriptors reserved for later features.
pub const RESERVED_REGIONS: usize = 8;

const OFF_CRC: usize = std::mem::offset_of!(RawSuperblock, crc);

/// One copy as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawSuperblock {
    magic: [u8; 8],
    version: U32,
    superblock_size: U32,
    feature_compat: U64,
    feature_incompat: U64,
    feature_ro_compat: U64,
    pool_size: U64,
    block_size: U32,
    journal_count: U32,
    journal_blocks: U32,
    inode_size: U32,
    inode_count: U64,
    journal_start: U64,
    itable_start: U64,
    bitmap_start: U64,
    bitmap_blocks: U64,
    data_start: U64,
    total_blocks: U64,
    uuid: [u8; 16],
    generation: U64,
    state: U32,
    reserved: [u8; 4],
    mount_count: U64,
    last_mount_secs: U64,
    last_clean_secs: U64,
    regions: [U64; RESERVED_REGIONS],
    reserved_tail: [u8; 12],
    crc: U32,
}

assert_layout!(RawSuperblock, SUPERBLOCK_SIZE, {
    magic: 0, version: 8, superblock_size: 12, feature_compat: 16,
    feature_incompat: 24, feature_ro_compat: 32, pool_size: 40, block_size: 48,
    journal_count: 52, journal_blocks: 56, inode_size: 60, inode_count: 64,
    journal_start: 72, itable_start: 80, bitmap_start: 88, bitmap_blocks: 96,
    data_start: 104, total_blocks: 112, uuid: 120, generation: 136, state: 144,
    reserved: 148, mount_count: 152, last_mount_secs: 160, last_clean_secs: 168,
    regions: 176, reserved_tail: 240, crc: 252,
});

/// Mount state stored in the superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolState {
    /// Cleanly unmounted: journals are empty and the saved bitmap is valid.
    Clean,
    /// Mounted, or crashed while mounted: recovery must run.
    Dirty,
}

/// Decoded superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Format version; always [`VERSION`] once decoded.
    pub version: u32,
    /// Features an older version may ignore; none are defined in v1.
    pub feature_compat: u64,
    /// Features an older version must refuse to mount (`FEATURE_ZONE`,
    /// `FEATURE_SPLIT`, `FEATURE_LOG_RECORDS`); only [`KNOWN_INCOMPAT`]
    /// bits once decoded.
    pub feature_incompat: u64,
    /// Features an older version may only read; none are defined in v1,
    /// so any bit is refused.
    pub feature_ro_compat: u64,
    /// Pool size in bytes, as mkfs was given it: a shorter device is a
    /// truncated pool.
    pub pool_size: u64,
    /// The geometry, recomputed from the counts and equal to the stored
    /// offsets once decoded.
    pub layout: Layout,
    /// The pool's identity, random at mkfs, never changed.
    pub uuid: [u8; 16],
    /// Bumped by every superblock update: of two valid copies, the higher
    /// one is current.
    pub generation: u64,
    /// Whether the pool was cleanly unmounted (saved bitmap valid,
    /// journals empty) or needs recovery.
    pub state: PoolState,
    /// Mounts since mkfs, for the operator.
    pub mount_count: u64,
    /// Last mount, seconds since the epoch (0: never).
    pub last_mount_secs: u64,
    /// Last clean unmount, seconds since the epoch (0: never).
    pub last_clean_secs: u64,
    /// Region descriptors of optional features (block numbers and
    /// lengths, indexed by the `REGION_*` constants of [`crate::zone`] and
    /// [`crate::split`]): nonzero only for a feature whose bit is set.
    pub regions: [u64; RESERVED_REGIONS],
}

impl Superblock {
    /// A fresh superblock for mkfs.
    pub fn new(params: &FormatParams, uuid: [u8; 16]) -> Result<Superblock, FormatError> {
        let layout = Layout::compute(params)?;
        let mut regions = [0; RESERVED_REGIONS];
        let mut feature_incompat = 0;
        if params.layout == PoolLayout::Nova {
            feature_incompat |= FEATURE_NOVA;
        } else if params.layout != PoolLayout::Classic {
            let r = SplitRegions::for_layout(&layout, params.layout == PoolLayout::Lfs);
            feature_incompat |= r.to_descriptors(&mut regions);
            r.check(&layout)?;
        }
        Ok(Superblock {
            version: VERSION,
            feature_compat: 0,
            feature_incompat,
            feature_ro_compat: 0,
            pool_size: params.pool_size,
            layout,
            uuid,
            generation: 1,
            state: PoolState::Clean,
            mount_count: 0,
            last_mount_secs: 0,
            last_clean_secs: 0,
            regions,
        })
    }

    /// The split layout's regions, when the pool has them.
    pub fn split_regions(&self) -> Option<SplitRegions> {
        (self.feature_incompat & FEATURE_SPLIT != 0)
            .then(|| SplitRegions::from_descriptors(&self.regions, self.feature_incompat))
    }

    /// The layout mkfs made.
    pub fn pool_layout(&self) -> PoolLayout {
        match self.split_regions() {
            None if self.feature_incompat & FEATURE_NOVA != 0 => PoolLayout::Nova,
            None => PoolLayout::Classic,
            Some(r) if r.in_log => PoolLayout::Lfs,
            Some(_) => PoolLayout::Split,
        }
    }

    /// Encodes with its checksum.
    pub fn encode(&self) -> [u8; SUPERBLOCK_SIZE] {
        let l = &self.layout;
        let raw = RawSuperblock {
            magic: MAGIC,
            version: self.version.into(),
            superblock_size: (SUPERBLOCK_SIZE as u32).into(),
            feature_compat: self.feature_compat.into(),
            feature_incompat: self.feature_incompat.into(),
            feature_ro_compat: self.feature_ro_compat.into(),
            pool_size: self.pool_size.into(),
            block_size: (BLOCK_SIZE as u32).into(),
            journal_count: l.journal_count.into(),
            journal_blocks: l.journal_blocks.into(),
            inode_size: (INODE_SIZE as u32).into(),
            inode_count: l.inode_count.into(),
            journal_start: l.journal_start.into(),
            itable_start: l.itable_start.into(),
            bitmap_start: l.bitmap_start.into(),
            bitmap_blocks: l.bitmap_blocks.into(),
            data_start: l.data_start.into(),
            total_blocks: l.total_blocks.into(),
            uuid: self.uuid,
            generation: self.generation.into(),
            state: U32::new(matches!(self.state, PoolState::Clean) as u32),
            reserved: [0; 4],
            mount_count: self.mount_count.into(),
            last_mount_secs: self.last_mount_secs.into(),
            last_clean_secs: self.last_clean_secs.into(),
            regions: self.regions.map(U64::new),
            reserved_tail: [0; 12],
            crc: U32::ZERO,
        };
        let mut b: [u8; SUPERBLOCK_SIZE] = zerocopy::transmute!(raw);
        let crc = crc32c(&b[..OFF_CRC]);
        b[OFF_CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes one copy, checking magic, checksum, version, features and
    /// that the geometry is the one mkfs would compute (so no field read
    /// from media can send the core out of bounds).
    pub fn decode(b: &[u8; SUPERBLOCK_SIZE]) -> Result<Superblock, FormatError> {
        let raw: RawSuperblock = zerocopy::transmute!(*b);
        if raw.magic != MAGIC {
            return Err(FormatError::BadMagic);
        }
        if raw.crc.get() != crc32c(&b[..OFF_CRC]) {
            return Err(FormatError::BadChecksum);
        }
        Superblock::decode_unverified(b)
    }

    /// Decodes one copy without checking its magic and checksum, for
    /// salvaging a pool whose two copies are both damaged: every other
    /// check of [`Superblock::decode`] still holds (version, features,
    /// geometry recomputed from the counts and equal to the stored
    /// offsets, region descriptors), so what it returns can be trusted not
    /// to point outside the pool, only not to be what mkfs wrote.
    pub fn decode_unverified(b: &[u8; SUPERBLOCK_SIZE]) -> Result<Superblock, FormatError> {
        let raw: RawSuperblock = zerocopy::transmute!(*b);
        let version = raw.version.get();
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        let feature_incompat = raw.feature_incompat.get();
        if feature_incompat & !KNOWN_INCOMPAT != 0 {
            return Err(FormatError::UnknownIncompatFeatures(
                feature_incompat & !KNOWN_INCOMPAT,
            ));
        }
        let feature_ro_compat = raw.feature_ro_compat.get();
        if feature_ro_compat & !KNOWN_RO_COMPAT != 0 {
            return Err(FormatError::UnknownIncompatFeatures(feature_ro_compat));
        }
        expect(
            "superblock size",
            raw.superblock_size.get() as u64,
            SUPERBLOCK_SIZE as u64,
        )?;
        expect("block size", raw.block_size.get() as u64, BLOCK_SIZE)?;
        expect("inode size", raw.inode_size.get() as u64, INODE_SIZE as u64)?;
        let layout = raw.layout(feature_incompat)?;
        let state = match raw.state.get() {
            1 => PoolState::Clean,
            0 => PoolState::Dirty,
            v => {
                return Err(FormatError::InvalidField {
                    what: "state",
                    value: v as u64,
                })
            }
        };
        let regions = raw.regions.map(U64::get);
        check_regions(&regions, feature_incompat, &layout)?;
        Ok(Superblock {
            version,
            feature_compat: raw.feature_compat.get(),
            feature_incompat,
            feature_ro_compat,
            pool_size: raw.pool_size.get(),
            layout,
            uuid: raw.uuid,
            generation: raw.generation.get(),
            state,
            mount_count: raw.mount_count.get(),
            last_mount_secs: raw.last_mount_secs.get(),
            last_clean_secs: raw.last_clean_secs.get(),
            regions,
        })
    }

    /// Picks the copy to trust from the two read from blocks 0 and 1:
    /// the valid one with the higher generation. If neither is valid, the
    /// error of copy A is returned (it says the most about what the pool is).
    pub fn choose(
        a: &[u8; SUPERBLOCK_SIZE],
        b: &[u8; SUPERBLOCK_SIZE],
    ) -> Result<Superblock, FormatError> {
        match (Superblock::decode(a), Superblock::decode(b)) {
            (Ok(x), Ok(y)) => Ok(if y.generation > x.generation { y } else { x }),
            (Ok(x), Err(_)) | (Err(_), Ok(x)) => Ok(x),
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// Byte offsets of the two copies.
    pub fn copy_offsets() -> [u64; 2] {
        [0, BLOCK_SIZE]
    }
}

impl RawSuperblock {
    /// The geometry mkfs computes from the stored counts, checked equal to
    /// the stored offsets.
    fn layout(&self, feature_incompat: u64) -> Result<Layout, FormatError> {
        let params = FormatParams {
            pool_size: self.pool_size.get(),
            inode_count: self.inode_count.get(),
            journal_count: self.journal_count.get(),
            journal_blocks: self.journal_blocks.get(),
            layout: match (
                feature_incompat & FEATURE_SPLIT != 0,
                feature_incompat & FEATURE_LOG_RECORDS != 0,
            ) {
                (false, _) if feature_incompat & FEATURE_NOVA != 0 => PoolLayout::Nova,
                (false, _) => PoolLayout::Classic,
                (true, false) => PoolLayout::Split,
                (true, true) => PoolLayout::Lfs,
            },
        };
        let layout = Layout::compute(&params)?;
        let stored = [
            ("journal start", self.journal_start, layout.journal_start),
            ("inode table start", self.itable_start, layout.itable_start),
            ("bitmap start", self.bitmap_start, layout.bitmap_start),
            ("bitmap blocks", self.bitmap_blocks, layout.bitmap_blocks),
            ("data start", self.data_start, layout.data_start),
            ("total blocks", self.total_blocks, layout.total_blocks),
        ];
        for (what, found, want) in stored {
            expect(what, found.get(), want)?;
        }
        Ok(layout)
    }
}

/// A region descriptor is set exactly when its feature is: the zone's
/// header lies in the data area and has its fixed length, the split
/// layout's regions are where mkfs puts them; descriptors of features not
/// yet defined are zero.
fn check_regions(
    regions: &[u64; RESERVED_REGIONS],
    incompat: u64,
    layout: &Layout,
) -> Result<(), FormatError> {
    for (i, &r) in regions.iter().enumerate() {
        let zone = i == REGION_ZONE_START || i == REGION_ZONE_BLOCKS;
        let split = (REGION_ATTR_START..=REGION_LI_BLOCKS).contains(&i);
        if !(zone && incompat & FEATURE_ZONE != 0 || split && incompat & FEATURE_SPLIT != 0) {
            expect("reserved region descriptor", r, 0)?;
        }
    }
    if incompat & FEATURE_ZONE_EXTENTS != 0 && incompat & FEATURE_ZONE == 0 {
        return Err(FormatError::InvalidField {
            what: "zone-extents feature without a zone",
            value: incompat,
        });
    }
    if incompat & FEATURE_ZONE != 0 {
        let start = regions[REGION_ZONE_START];
        if start < layout.data_start || start + HEADER_BLOCKS > layout.total_blocks {
            return Err(FormatError::InvalidField {
                what: "zone header block",
                value: start,
            });
        }
        expect(
            "zone header blocks",
            regions[REGION_ZONE_BLOCKS],
            HEADER_BLOCKS,
        )?;
    }
    if incompat & FEATURE_SPLIT != 0 {
        SplitRegions::from_descriptors(regions, incompat).check(layout)?;
    } else if incompat & (FEATURE_LOG_RECORDS | FEATURE_OWN_RECORDS) != 0 {
        return Err(FormatError::InvalidField {
            what:
                "feature bits (records in the log or own-commit records without the split layout)",
            value: incompat,
        });
    }
    if incompat & FEATURE_NOVA != 0 && incompat & (FEATURE_SPLIT | FEATURE_ZONE) != 0 {
        return Err(FormatError::InvalidField {
            what: "feature bits (NOVA's logs with the split layout or the zone)",
            value: incompat,
        });
    }
    Ok(())
}

fn expect(what: &'static str, found: u64, want: u64) -> Result<(), FormatError> {
    if found == want {
        Ok(())
    } else {
        Err(FormatError::InvalidField { what, value: found })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every superblock mkfs can make, with any counters, decodes to
        /// itself, and its bytes encode back unchanged.
        #[test]
        fn decode_inverts_encode(
            mib in 1u64..4096,
            layout in 0..4usize,
            uuid: [u8; 16],
            counters in any::<(u64, u64, u64, u64)>(),
            feature_compat: u64,
            dirty: bool,
        ) {
            let layout = [PoolLayout::Classic, PoolLayout::Split, PoolLayout::Lfs, PoolLayout::Nova][layout];
            let p = FormatParams { layout, ..FormatParams::for_size(mib << 20) };
            let Ok(mut s) = Superblock::new(&p, uuid) else {
                return Err(TestCaseError::reject("too small for its layout"));
            };
            (s.generation, s.mount_count, s.last_mount_secs, s.last_clean_secs) = counters;
            s.feature_compat = feature_compat;
            s.state = if dirty { PoolState::Dirty } else { PoolState::Clean };
            let b = s.encode();
            prop_assert_eq!(Superblock::decode(&b), Ok(s));
            prop_assert_eq!(Superblock::decode(&b).map(|s| s.encode()), Ok(b));
        }
    }

    /// A classic pool's superblock: no feature bits, so each test below
    /// adds the ones it is about.
    fn sample() -> Superblock {
        let p = FormatParams {
            layout: PoolLayout::Classic,
            ..FormatParams::for_size(8 << 20)
        };
        Superblock::new(&p, [7; 16]).unwrap()
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(Superblock::decode(&s.encode()).unwrap(), s);
    }

    #[test]
    fn detects_corruption_and_versions() {
        let s = sample();
        let mut b = s.encode();
        b[70] ^= 1;
        assert_eq!(Superblock::decode(&b), Err(FormatError::BadChecksum));
        let mut b = s.encode();
        b[0] = b'X';
        assert_eq!(Superblock::decode(&b), Err(FormatError::BadMagic));
        let mut newer = s.clone();
        newer.version = 2;
        assert!(matches!(
            Superblock::decode(&newer.encode()),
            Err(FormatError::UnsupportedVersion { found: 2, .. })
        ));
        let mut zone = s.clone();
        zone.feature_incompat = FEATURE_ZONE;
        assert!(
            Superblock::decode(&zone.encode()).is_err(),
            "zone without region"
        );
        zone.regions[REGION_ZONE_START] = zone.layout.data_start;
        zone.regions[REGION_ZONE_BLOCKS] = HEADER_BLOCKS;
        assert_eq!(Superblock::decode(&zone.encode()).unwrap(), zone);
        zone.feature_incompat = 0;
        assert!(
            Superblock::decode(&zone.encode()).is_err(),
            "region without zone"
        );
        let mut p = FormatParams::for_size(64 << 20);
        p.layout = PoolLayout::Split;
        let split = Superblock::new(&p, [3; 16]).unwrap();
        assert_eq!(split.feature_incompat, FEATURE_SPLIT | FEATURE_OWN_RECORDS);
        assert_eq!(Superblock::decode(&split.encode()).unwrap(), split);
        let mut moved = split.clone();
        moved.regions[REGION_LI_BLOCKS] -= 1;
        assert!(Superblock::decode(&moved.encode()).is_err(), "region moved");
        assert_eq!(split.pool_layout(), PoolLayout::Split);
        p.layout = PoolLayout::Lfs;
        let lfs = Superblock::new(&p, [3; 16]).unwrap();
        assert_eq!(
            Superblock::decode(&lfs.encode()).unwrap().pool_layout(),
            PoolLayout::Lfs
        );
        let mut bare = split.clone();
        bare.feature_incompat = 0;
        assert!(
            Superblock::decode(&bare.encode()).is_err(),
            "regions without feature"
        );
        let mut feat = s.clone();
        feat.feature_incompat = 1 << 40;
        assert!(matches!(
            Superblock::decode(&feat.encode()),
            Err(FormatError::UnknownIncompatFeatures(_))
        ));
    }

    #[test]
    fn chooses_newest_valid_copy() {
        let a = sample();
        let mut b = a.clone();
        b.generation = 9;
        b.state = PoolState::Dirty;
        assert_eq!(Superblock::choose(&a.encode(), &b.encode()).unwrap(), b);
        let mut torn = b.encode();
        torn[200] ^= 0xff;
        assert_eq!(Superblock::choose(&a.encode(), &torn).unwrap(), a);
    }
}
