//! HUNTER's data/metadata split layout (feature `FEATURE_SPLIT`,
//! hunter.txt §III-B and §III-D): next to the inode table, a fixed
//! attribute log per inode and a 64-byte logical-information record per
//! block, so a batch of asynchronous metadata updates lands in one
//! metadata area instead of among the data. Both regions are carved from
//! the start of the data area at mkfs, zeroed and marked used; superblock
//! region descriptors 2 and 3 give the attribute logs' first block and
//! length, 4 and 5 the logical-information region's.
//!
//! ```text
//! attribute log of inode n: attr_start * 4096 + n * 256, four entries
//!   0  8  seq of the newest write the entry covers; 0 = free
//!   8  4  inode generation
//!  12  4  CRC-32C of bytes 0..12 and 16..64
//!  16  8  size in bytes
//!  24  8  blocks allocated
//!  32  8  mtime seconds            48  4  mtime nanoseconds
//!  40  8  ctime seconds            52  4  ctime nanoseconds
//!  56  8  head: the file's data block at the highest index (0: none)
//! logical information of block b: li_start * 4096 + b * 64 (every block
//!   of the pool has a record; only file-data blocks ever set theirs)
//!   0  8  seq: the write's timestamp (pool-wide, only grows); 0 = clear
//!   8  8  inode number
//!  16  4  inode generation
//!  20  4  flags: bit 0 = the record commits its own write (below);
//!         other bits zero
//!  24  8  block index in the file (file offset / 4096)
//!  32  8  link: the file's data block at the next lower index (0: none),
//!         so a file's blocks form a chain down from its head
//!  40  8  own commit only (else zero): the write's time, seconds
//!  48  4  ... nanoseconds
//!  52  4  ... CRC-32C of the block's 4096 bytes
//!  56  4  reserved, zero
//!  60  4  CRC-32C of bytes 0..60
//! ```
//!
//! An own-commit record (`FEATURE_OWN_RECORDS`, amber's one-fence block
//! write, docs/design.md §13.6) is written with its block's data and
//! made durable by the same fence; it counts without a newer attribute
//! entry when the block's checksum matches, so a torn write is refused.
//!
//! An entry and a record are each one cache line written with
//! non-temporal stores and a fence; a torn one fails its checksum. The
//! newest valid entry (highest seq, this generation) gives a regular
//! file's size, blocks and times, overriding the inode's; a record counts
//! only if docs/design.md §12's validity rule accepts it.

use crate::crc::{crc32c, crc32c_append};
use crate::error::FormatError;
use crate::inode::Timespec;
use crate::layout::{Layout, BLOCK_SIZE};
use std::mem::offset_of;
use zerocopy::little_endian::{I64, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Incompatible feature bit: regular files keep their data in the data
/// logs, described by logical information and attribute logs rather than
/// by block maps.
pub const FEATURE_SPLIT: u64 = 1 << 1;
/// Superblock region-descriptor index of the attribute logs' first block.
pub const REGION_ATTR_START: usize = 2;
/// ... and of their length in blocks.
pub const REGION_ATTR_BLOCKS: usize = 3;
/// Superblock region-descriptor index of the first logical-information block.
pub const REGION_LI_START: usize = 4;
/// ... and of its length in blocks.
pub const REGION_LI_BLOCKS: usize = 5;

/// Bytes of one logical-information record.
pub const LI_SIZE: u64 = 64;
/// Bytes of one attribute-log entry.
pub const ENTRY_SIZE: u64 = 64;
/// Entries per attribute log: a new entry always finds a free one while
/// at most one older entry waits for eviction.
pub const ENTRIES: u64 = 4;
/// Bytes of one inode's attribute log.
pub const ATTR_LOG_SIZE: u64 = ENTRY_SIZE * ENTRIES;

const _: () = assert!(ATTR_LOG_SIZE == 256);
const _: () = assert!(BLOCK_SIZE.is_multiple_of(LI_SIZE));

/// Incompatible feature bit (with `FEATURE_SPLIT`): the records live in
/// summary blocks inside the data area, one every `SUMMARY_EVERY` blocks,
/// instead of in a table of their own (HUNTER's LFS ablation).
pub const FEATURE_LOG_RECORDS: u64 = 1 << 2;
/// Incompatible feature bit (with `FEATURE_SPLIT`): records may commit
/// their own write ([`OwnCommit`]). A binary without it would judge such
/// a record newer than its file's entry stale and drop a durable write.
pub const FEATURE_OWN_RECORDS: u64 = 1 << 5;
/// With `FEATURE_LOG_RECORDS`, a summary block heads every group of this
/// many blocks and holds the records of the other 63.
pub const SUMMARY_EVERY: u64 = BLOCK_SIZE / LI_SIZE;

/// Where the split layout's regions are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitRegions {
    /// First block of the attribute logs: the data area's first block.
    pub attr_start: u64,
    /// Blocks of attribute logs: 256 bytes per inode-table slot, rounded
    /// up to whole blocks.
    pub attr_blocks: u64,
    /// The table's first block, or (in the log) the first summary block.
    pub li_start: u64,
    /// The table's length in blocks, or (in the log) `SUMMARY_EVERY`.
    pub li_blocks: u64,
    /// Records in summary blocks inside the data area.
    pub in_log: bool,
}

impl SplitRegions {
    /// The regions mkfs carves for `layout`: attribute logs at the start
    /// of the data area, then a record for every block — a table, or a
    /// summary block heading every 64 blocks from there on.
    pub fn for_layout(layout: &Layout, in_log: bool) -> SplitRegions {
        let attr_blocks = (layout.inode_count * ATTR_LOG_SIZE).div_ceil(BLOCK_SIZE);
        let li_blocks = if in_log {
            SUMMARY_EVERY
        } else {
            (layout.total_blocks * LI_SIZE).div_ceil(BLOCK_SIZE)
        };
        SplitRegions {
            attr_start: layout.data_start,
            attr_blocks,
            li_start: layout.data_start + attr_blocks,
            li_blocks,
            in_log,
        }
    }

    /// From the superblock's region descriptors and incompat bits.
    pub fn from_descriptors(regions: &[u64], incompat: u64) -> SplitRegions {
        SplitRegions {
            attr_start: regions[REGION_ATTR_START],
            attr_blocks: regions[REGION_ATTR_BLOCKS],
            li_start: regions[REGION_LI_START],
            li_blocks: regions[REGION_LI_BLOCKS],
            in_log: incompat & FEATURE_LOG_RECORDS != 0,
        }
    }

    /// Writes them into the superblock's region descriptors and returns
    /// the incompat bits they need.
    pub fn to_descriptors(&self, regions: &mut [u64]) -> u64 {
        regions[REGION_ATTR_START] = self.attr_start;
        regions[REGION_ATTR_BLOCKS] = self.attr_blocks;
        regions[REGION_LI_START] = self.li_start;
        regions[REGION_LI_BLOCKS] = self.li_blocks;
        FEATURE_SPLIT | FEATURE_OWN_RECORDS | if self.in_log { FEATURE_LOG_RECORDS } else { 0 }
    }

    /// Checks the descriptors against what mkfs computes for `layout`:
    /// anything else is corruption.
    pub fn check(&self, layout: &Layout) -> Result<(), FormatError> {
        let want = SplitRegions::for_layout(layout, self.in_log);
        let fields = [
            (
                "attribute-log start block",
                self.attr_start,
                want.attr_start,
            ),
            ("attribute-log blocks", self.attr_blocks, want.attr_blocks),
            (
                "logical-information start block",
                self.li_start,
                want.li_start,
            ),
            ("logical-information blocks", self.li_blocks, want.li_blocks),
        ];
        for (what, found, expected) in fields {
            if found != expected {
                return Err(FormatError::InvalidField { what, value: found });
            }
        }
        if self.end() + SUMMARY_EVERY > layout.total_blocks {
            return Err(FormatError::InvalidField {
                what: "pool size (too small for the split layout's metadata)",
                value: layout.total_blocks * BLOCK_SIZE,
            });
        }
        Ok(())
    }

    /// The first block after the regions of their own: where the data
    /// area (and, in the log, the first summary block) begins.
    pub fn end(&self) -> u64 {
        if self.in_log {
            self.li_start
        } else {
            self.li_start + self.li_blocks
        }
    }

    /// Whether `b` is a summary block.
    pub fn is_summary(&self, b: u64) -> bool {
        self.in_log && b >= self.li_start && (b - self.li_start).is_multiple_of(SUMMARY_EVERY)
    }

    /// Whether block `b` has a record: every block from the attribute logs
    /// on in a table (those of the regions stay clear), and every data
    /// block but the summary blocks in the log.
    pub fn has_record(&self, b: u64) -> bool {
        if self.in_log {
            b > self.li_start && !self.is_summary(b)
        } else {
            b >= self.attr_start
        }
    }

    /// The regions' blocks: the attribute logs, then the table or every
    /// summary block of a pool of `total_blocks`.
    pub fn blocks(&self, total_blocks: u64) -> impl Iterator<Item = u64> + '_ {
        let own = self.attr_start..self.end();
        let summaries = (self.li_start..total_blocks)
            .step_by(SUMMARY_EVERY as usize)
            .filter(move |_| self.in_log);
        own.chain(summaries)
    }

    /// The first block of the group of `SUMMARY_EVERY` blocks whose records
    /// are contiguous and hold `b`'s; in the log, that is a summary block.
    pub fn group_of(&self, b: u64) -> u64 {
        let base = if self.in_log { self.li_start } else { 0 };
        assert!(b >= base, "block {b} has no record group");
        b - (b - base) % SUMMARY_EVERY
    }

    /// Byte offset of block `b`'s logical information.
    pub fn li_offset(&self, b: u64) -> u64 {
        if self.in_log {
            assert!(self.has_record(b), "block {b} has no record");
            let g = self.group_of(b);
            g * BLOCK_SIZE + (b - g) * LI_SIZE
        } else {
            assert!(b < self.li_blocks * (BLOCK_SIZE / LI_SIZE), "block {b}");
            self.li_start * BLOCK_SIZE + b * LI_SIZE
        }
    }

    /// Byte offset of the records of group `g` (`group_of`), slot 0 first
    /// (in the log, slot 0 is the summary block's own and stays clear).
    pub fn group_offset(&self, g: u64) -> u64 {
        if self.in_log {
            assert!(self.is_summary(g), "block {g} is not a summary block");
            g * BLOCK_SIZE
        } else {
            assert!(g.is_multiple_of(SUMMARY_EVERY), "block {g} starts no group");
            self.li_start * BLOCK_SIZE + g * LI_SIZE
        }
    }

    /// Byte offset of entry `i` of inode `ino`'s attribute log.
    pub fn entry_offset(&self, ino: u64, i: u64) -> u64 {
        assert!(i < ENTRIES && ino < self.attr_blocks * (BLOCK_SIZE / ATTR_LOG_SIZE));
        self.attr_start * BLOCK_SIZE + ino * ATTR_LOG_SIZE + i * ENTRY_SIZE
    }
}

/// One block's logical information: whose data it holds, where, and from
/// which write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalInfo {
    /// The write that filled the block: a pool-wide timestamp that only
    /// grows, never 0 (0 with all else zero is a clear record).
    pub seq: u64,
    /// The file whose data the block holds.
    pub ino: u64,
    /// That inode's generation when written: a record of an earlier file
    /// of the same number does not count.
    pub generation: u32,
    /// The block's index in the file (file offset / 4096).
    pub file_block: u64,
    /// The file's data block at the next lower index (0: none), so a
    /// file's blocks form a chain down from its attribute entry's head.
    pub link: u64,
    /// Set when the record commits its own write: written with the
    /// block's data under one fence, it counts once that data matches,
    /// with no attribute entry of its seq.
    pub own: Option<OwnCommit>,
}

/// What an own-commit record adds: the write's time (its file's mtime
/// and ctime) and the checksum of the block's data, which tells a write
/// the fence made durable from one a crash tore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnCommit {
    /// The write's time: its file's mtime and ctime after it.
    pub time: Timespec,
    /// CRC-32C of the block's 4096 bytes as the write left them.
    pub data_crc: u32,
}

impl OwnCommit {
    /// The own commit of a write at `time` that leaves `block` (its 4096
    /// bytes) in the record's block.
    pub fn new(time: Timespec, block: &[u8]) -> OwnCommit {
        assert_eq!(block.len() as u64, BLOCK_SIZE, "a whole block");
        OwnCommit {
            time,
            data_crc: crc32c(block),
        }
    }

    /// Whether `block` is the data the commit's write left.
    pub fn matches(&self, block: &[u8]) -> bool {
        block.len() as u64 == BLOCK_SIZE && crc32c(block) == self.data_crc
    }
}

/// Flag bit of an own-commit record.
const OWN_FLAG: u32 = 1;

/// What a record's 64 bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<T> {
    /// All zeros.
    Clear,
    /// Nonzero, with a nonzero seq and a matching checksum: what an
    /// encoder wrote. Whether it still counts is the validity rule's call
    /// (docs/design.md §12.4), not the format's.
    Valid(T),
    /// Not zero and its checksum fails: a record torn by a crash, or
    /// corruption.
    Torn,
}

/// A logical-information record as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawLogicalInfo {
    seq: U64,
    ino: U64,
    generation: U32,
    flags: U32,
    file_block: U64,
    link: U64,
    time_secs: I64,
    time_nsecs: U32,
    data_crc: U32,
    reserved: [u8; 4],
    crc: U32,
}

assert_layout!(RawLogicalInfo, LI_SIZE as usize, {
    seq: 0, ino: 8, generation: 16, flags: 20, file_block: 24, link: 32,
    time_secs: 40, time_nsecs: 48, data_crc: 52, reserved: 56, crc: 60,
});

const LI_CRC: usize = offset_of!(RawLogicalInfo, crc);

impl LogicalInfo {
    /// The record's 64 bytes with their checksum, reserved bytes zero;
    /// stored as one cache line so a crash tears it detectably.
    pub fn encode(&self) -> [u8; LI_SIZE as usize] {
        assert!(self.seq != 0, "a record's seq is never 0");
        let own = self.own.unwrap_or(OwnCommit {
            time: Timespec { secs: 0, nsecs: 0 },
            data_crc: 0,
        });
        let raw = RawLogicalInfo {
            seq: self.seq.into(),
            ino: self.ino.into(),
            generation: self.generation.into(),
            flags: if self.own.is_some() { OWN_FLAG } else { 0 }.into(),
            file_block: self.file_block.into(),
            link: self.link.into(),
            time_secs: own.time.secs.into(),
            time_nsecs: own.time.nsecs.into(),
            data_crc: own.data_crc.into(),
            reserved: [0; 4],
            crc: U32::ZERO,
        };
        let mut b: [u8; LI_SIZE as usize] = zerocopy::transmute!(raw);
        let crc = crc32c(&b[..LI_CRC]);
        b[LI_CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads a record: clear, valid, or torn (checksum fails, seq 0, or
    /// flags or an own commit's fields no encoder writes).
    pub fn decode(b: &[u8; LI_SIZE as usize]) -> Record<LogicalInfo> {
        if b.iter().all(|&x| x == 0) {
            return Record::Clear;
        }
        let raw: RawLogicalInfo = zerocopy::transmute!(*b);
        if crc32c(&b[..LI_CRC]) != raw.crc.get() || raw.seq.get() == 0 {
            return Record::Torn;
        }
        let own = match raw.flags.get() {
            0 if b[40..LI_CRC].iter().all(|&x| x == 0) => None,
            OWN_FLAG if raw.time_nsecs.get() < 1_000_000_000 && raw.reserved == [0; 4] => {
                Some(OwnCommit {
                    time: Timespec {
                        secs: raw.time_secs.get(),
                        nsecs: raw.time_nsecs.get(),
                    },
                    data_crc: raw.data_crc.get(),
                })
            }
            _ => return Record::Torn,
        };
        Record::Valid(LogicalInfo {
            seq: raw.seq.get(),
            ino: raw.ino.get(),
            generation: raw.generation.get(),
            file_block: raw.file_block.get(),
            link: raw.link.get(),
            own,
        })
    }
}

/// One attribute-log entry: a regular file's attributes as of write `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrEntry {
    /// The newest write the entry covers, never 0: of the log's valid
    /// entries of this generation, the highest seq holds the attributes.
    pub seq: u64,
    /// The inode's generation when written: entries of an earlier file of
    /// the same number are ignored.
    pub generation: u32,
    /// File size in bytes, overriding the inode's.
    pub size: u64,
    /// Blocks allocated, in 4096-byte units, overriding the inode's.
    pub blocks: u64,
    /// Last data modification time, overriding the inode's.
    pub mtime: Timespec,
    /// Status change time; the file's ctime is the later of this and the
    /// inode's.
    pub ctime: Timespec,
    /// The file's data block at the highest index (0: none): where the
    /// chain of [`LogicalInfo::link`]s starts.
    pub head: u64,
}

/// An attribute-log entry as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawAttrEntry {
    seq: U64,
    generation: U32,
    crc: U32,
    size: U64,
    blocks: U64,
    mtime_secs: I64,
    ctime_secs: I64,
    mtime_nsecs: U32,
    ctime_nsecs: U32,
    head: U64,
}

assert_layout!(RawAttrEntry, ENTRY_SIZE as usize, {
    seq: 0, generation: 8, crc: 12, size: 16, blocks: 24, mtime_secs: 32,
    ctime_secs: 40, mtime_nsecs: 48, ctime_nsecs: 52, head: 56,
});

/// The entry's checksum: every byte but its own four.
fn entry_crc(b: &[u8]) -> u32 {
    const AT: usize = offset_of!(RawAttrEntry, crc);
    crc32c_append(crc32c(&b[..AT]), &b[AT + 4..])
}

impl AttrEntry {
    /// The entry's 64 bytes with their checksum; stored as one cache line
    /// so a crash tears it detectably.
    pub fn encode(&self) -> [u8; ENTRY_SIZE as usize] {
        assert!(self.seq != 0, "an entry's seq is never 0");
        let mut raw = RawAttrEntry {
            seq: self.seq.into(),
            generation: self.generation.into(),
            crc: U32::ZERO,
            size: self.size.into(),
            blocks: self.blocks.into(),
            mtime_secs: self.mtime.secs.into(),
            ctime_secs: self.ctime.secs.into(),
            mtime_nsecs: self.mtime.nsecs.into(),
            ctime_nsecs: self.ctime.nsecs.into(),
            head: self.head.into(),
        };
        raw.crc = entry_crc(raw.as_bytes()).into();
        zerocopy::transmute!(raw)
    }

    /// Reads an entry: clear (a free entry), valid, or torn (checksum
    /// fails or seq 0).
    pub fn decode(b: &[u8; ENTRY_SIZE as usize]) -> Record<AttrEntry> {
        if b.iter().all(|&x| x == 0) {
            return Record::Clear;
        }
        let raw: RawAttrEntry = zerocopy::transmute!(*b);
        if entry_crc(b) != raw.crc.get() || raw.seq.get() == 0 {
            return Record::Torn;
        }
        let time = |secs: I64, nsecs: U32| Timespec {
            secs: secs.get(),
            nsecs: nsecs.get(),
        };
        Record::Valid(AttrEntry {
            seq: raw.seq.get(),
            generation: raw.generation.get(),
            size: raw.size.get(),
            blocks: raw.blocks.get(),
            mtime: time(raw.mtime_secs, raw.mtime_nsecs),
            ctime: time(raw.ctime_secs, raw.ctime_nsecs),
            head: raw.head.get(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::FormatParams;
    use proptest::prelude::*;

    proptest! {
        /// Any fields with a nonzero seq, reserved bytes zero, the flags
        /// and own-commit fields an encoder writes (zero without the
        /// flag) and the checksum right decode to a record or entry that
        /// encodes back to the same bytes.
        #[test]
        fn encode_inverts_decode(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let mut li = RawLogicalInfo::read_from_bytes(&bytes).expect("64 bytes");
            li.seq = li.seq.get().max(1).into();
            li.reserved = [0; 4];
            li.flags = (li.flags.get() & OWN_FLAG).into();
            li.time_nsecs = (li.time_nsecs.get() % 1_000_000_000).into();
            if li.flags.get() == 0 {
                li.time_secs = 0.into();
                li.time_nsecs = 0.into();
                li.data_crc = 0.into();
            }
            let mut b: [u8; 64] = zerocopy::transmute!(li);
            let crc = crc32c(&b[..LI_CRC]);
            b[LI_CRC..].copy_from_slice(&crc.to_le_bytes());
            let Record::Valid(d) = LogicalInfo::decode(&b) else {
                return Err(TestCaseError::fail("record not valid"));
            };
            prop_assert_eq!(d.encode(), b);
            let mut e = RawAttrEntry::read_from_bytes(&bytes).expect("64 bytes");
            e.seq = e.seq.get().max(1).into();
            e.crc = entry_crc(e.as_bytes()).into();
            let b: [u8; 64] = zerocopy::transmute!(e);
            let Record::Valid(d) = AttrEntry::decode(&b) else {
                return Err(TestCaseError::fail("entry not valid"));
            };
            prop_assert_eq!(d.encode(), b);
        }
    }

    fn li() -> LogicalInfo {
        LogicalInfo {
            seq: 7,
            ino: 42,
            generation: 3,
            file_block: 1 << 33,
            link: 99,
            own: None,
        }
    }

    #[test]
    fn own_commits_round_trip_and_check_their_block() {
        let block = vec![0x5a; BLOCK_SIZE as usize];
        let own = OwnCommit::new(Timespec { secs: 1, nsecs: 2 }, &block);
        let rec = LogicalInfo {
            own: Some(own),
            ..li()
        };
        assert_eq!(LogicalInfo::decode(&rec.encode()), Record::Valid(rec));
        assert!(own.matches(&block));
        let mut torn = block.clone();
        torn[4095] = 0;
        assert!(!own.matches(&torn));
        // A flag no encoder writes, or own-commit fields without the flag.
        for (at, v) in [(20, 2u8), (44, 1), (56, 1)] {
            let mut b = li().encode();
            b[at] = v;
            let crc = crc32c(&b[..LI_CRC]);
            b[LI_CRC..].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(LogicalInfo::decode(&b), Record::Torn, "byte {at}");
        }
    }

    #[test]
    fn records_round_trip_and_tears_are_seen() {
        let b = li().encode();
        assert_eq!(LogicalInfo::decode(&b), Record::Valid(li()));
        assert_eq!(LogicalInfo::decode(&[0; 64]), Record::Clear);
        for i in 0..64 {
            let mut t = b;
            t[i] ^= 0x10;
            assert_eq!(LogicalInfo::decode(&t), Record::Torn, "byte {i}");
        }
        let e = AttrEntry {
            seq: 9,
            generation: 3,
            size: 12345,
            blocks: 4,
            mtime: Timespec { secs: -5, nsecs: 7 },
            ctime: Timespec { secs: 6, nsecs: 8 },
            head: 77,
        };
        let b = e.encode();
        assert_eq!(AttrEntry::decode(&b), Record::Valid(e));
        for i in 0..64 {
            let mut t = b;
            t[i] ^= 1;
            assert_eq!(AttrEntry::decode(&t), Record::Torn, "byte {i}");
        }
    }

    #[test]
    fn regions_follow_the_layout_and_are_checked() {
        let l = Layout::compute(&FormatParams::for_size(64 << 20)).unwrap();
        let r = SplitRegions::for_layout(&l, false);
        assert_eq!(r.attr_start, l.data_start);
        assert_eq!(r.li_blocks * BLOCK_SIZE, l.total_blocks * LI_SIZE);
        r.check(&l).unwrap();
        let mut descs = [0u64; 8];
        let bits = r.to_descriptors(&mut descs);
        assert_eq!(SplitRegions::from_descriptors(&descs, bits), r);
        let mut bad = r;
        bad.li_start += 1;
        assert!(bad.check(&l).is_err());
        assert!(r.li_offset(l.total_blocks - 1) < r.end() * BLOCK_SIZE);
        assert!(r.entry_offset(l.inode_count - 1, 3) < r.li_start * BLOCK_SIZE);
        assert_eq!(
            r.blocks(l.total_blocks).count() as u64,
            r.end() - r.attr_start
        );
    }

    #[test]
    fn records_in_the_log_sit_in_summary_blocks() {
        let l = Layout::compute(&FormatParams::for_size(64 << 20)).unwrap();
        let r = SplitRegions::for_layout(&l, true);
        r.check(&l).unwrap();
        let mut descs = [0u64; 8];
        let bits = r.to_descriptors(&mut descs);
        assert_eq!(
            bits,
            FEATURE_SPLIT | FEATURE_OWN_RECORDS | FEATURE_LOG_RECORDS
        );
        assert_eq!(SplitRegions::from_descriptors(&descs, bits), r);
        let s = r.li_start;
        assert!(r.is_summary(s) && r.is_summary(s + 64) && !r.is_summary(s + 1));
        assert!(!r.has_record(s) && r.has_record(s + 1) && !r.has_record(s - 1));
        assert_eq!(r.li_offset(s + 1), s * BLOCK_SIZE + LI_SIZE);
        assert_eq!(r.li_offset(s + 127), (s + 64) * BLOCK_SIZE + 63 * LI_SIZE);
        assert_eq!(r.group_of(s + 70), s + 64);
        assert_eq!(r.group_offset(s + 64), (s + 64) * BLOCK_SIZE);
        let summaries = r.blocks(l.total_blocks).filter(|&b| b >= s).count() as u64;
        assert_eq!(summaries, (l.total_blocks - s).div_ceil(64));
    }
}
