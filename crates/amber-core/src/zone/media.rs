//! Reading the zone's header and chunk table off the media, validated so
//! no value read can send mount, recovery or fsck outside the pool. The
//! rules here (which header copy counts, which table entries can be
//! chunks) are the ones mount refuses a pool by and fsck repairs by.

use crate::error::{FsError, Result};
use amber_format::zone::{
    Descriptor, ZoneGeometry, FEATURE_ZONE, FEATURE_ZONE_EXTENTS, HEADER_BLOCKS, HEADER_COPY_B,
    HEADER_LEN, MAX_CHUNKS, MAX_SUBZONES, REGION_ZONE_START,
};
use amber_format::zone_extent::EXTENT_SIZE;
use amber_format::{FormatError, Layout, Superblock, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// The zone as the media describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneMedia {
    /// First block of the header (the chunk table follows it).
    pub header: u64,
    /// The slot size, sub-zone count and chunk shape, from a valid header
    /// copy.
    pub geo: ZoneGeometry,
    /// Per sub-zone, the first block of each chunk, in table order.
    pub chunks: Vec<Vec<u64>>,
}

/// One copy of the zone header as the media holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderCopy {
    /// Magic, checksum and geometry check out.
    Valid(ZoneGeometry),
    /// All zero: what an amberfs older than the second copy left there.
    Missing,
    /// Neither valid nor zero: why it was refused.
    Damaged(FormatError),
}

/// Where one descriptor lives: its sub-zone, its slot there and its byte
/// offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub sub: u32,
    pub slot: u32,
    pub at: u64,
}

/// What a descriptor that does not decode holds.
const UNDECODABLE: &str = "its bytes name no inode, yet are not all zero";

fn corrupt(what: String) -> FsError {
    FsError::Corrupted(format!("small-write zone: {what}"))
}

/// Byte offsets of the two header copies of the zone whose header block
/// is `header`.
pub fn header_offsets(header: u64) -> [u64; 2] {
    [header * BLOCK_SIZE, header * BLOCK_SIZE + HEADER_COPY_B]
}

/// Both copies of the header of the zone at `header`.
pub fn read_header<D: PmDevice>(dev: &D, header: u64) -> [HeaderCopy; 2] {
    header_offsets(header).map(|off| {
        let mut h = [0u8; HEADER_LEN];
        dev.read(off, &mut h);
        if h.iter().all(|&b| b == 0) {
            return HeaderCopy::Missing;
        }
        match ZoneGeometry::decode(&h) {
            Ok(g) => HeaderCopy::Valid(g),
            Err(e) => HeaderCopy::Damaged(e),
        }
    })
}

/// The geometry the header gives: its first valid copy's.
pub fn geometry(copies: &[HeaderCopy; 2]) -> Option<ZoneGeometry> {
    copies.iter().find_map(|c| match c {
        HeaderCopy::Valid(g) => Some(*g),
        _ => None,
    })
}

impl HeaderCopy {
    /// What the copy holds, in words.
    pub fn describe(&self) -> String {
        match self {
            HeaderCopy::Valid(_) => "valid".into(),
            HeaderCopy::Missing => "all zero".into(),
            // FormatError's own words name the superblock.
            HeaderCopy::Damaged(FormatError::InvalidField { what, value }) => {
                format!("damaged: its {what} {value} is impossible")
            }
            HeaderCopy::Damaged(e) => format!("damaged: {e}"),
        }
    }
}

/// Why the header cannot be read, naming what each copy holds.
pub fn header_fault(copies: &[HeaderCopy; 2]) -> String {
    format!(
        "neither copy of the zone header is readable (first: {}; second: {})",
        copies[0].describe(),
        copies[1].describe()
    )
}

/// The chunk table's sixteen rows, as stored: one read of the whole table
/// (a load per entry was a third of a crash test's image check, each one a
/// lookup in the crash image's overlay).
pub fn read_table<D: PmDevice>(dev: &D, header: u64) -> Vec<[u64; MAX_CHUNKS as usize]> {
    const ROW: usize = MAX_CHUNKS as usize * 8;
    let mut bytes = vec![0u8; MAX_SUBZONES as usize * ROW];
    dev.read(ZoneGeometry::table_entry(header, 0, 0), &mut bytes);
    bytes
        .chunks_exact(ROW)
        .map(|row| {
            std::array::from_fn(|c| {
                u64::from_le_bytes(row[c * 8..c * 8 + 8].try_into().expect("8 bytes"))
            })
        })
        .collect()
}

/// Why a set chunk-table entry of sub-zone `sub` naming block `b` cannot
/// be a chunk, `ended` saying an earlier entry of its row is empty (rows
/// fill from entry 0); None when it can be. Mount refuses a pool by this
/// rule and fsck drops the entries it names.
pub fn entry_fault(
    l: &Layout,
    geo: &ZoneGeometry,
    sub: u32,
    b: u64,
    ended: bool,
) -> Option<&'static str> {
    if sub >= geo.subzones {
        Some("is set past the zone's sub-zones")
    } else if ended {
        Some("is set after an empty one")
    } else if !l.is_data_block(b) || b + geo.chunk_blocks as u64 > l.total_blocks {
        Some("names a chunk outside the data area")
    } else {
        None
    }
}

impl ZoneMedia {
    /// The pool's zone, if its superblock has one. Either header copy
    /// serves; a table entry `entry_fault` names refuses the pool.
    pub fn read<D: PmDevice>(dev: &D, l: &Layout, sb: &Superblock) -> Result<Option<ZoneMedia>> {
        if sb.feature_incompat & FEATURE_ZONE == 0 {
            return Ok(None);
        }
        // The superblock checked the header's place and length.
        let header = sb.regions[REGION_ZONE_START];
        let copies = read_header(dev, header);
        let geo = geometry(&copies).ok_or_else(|| corrupt(header_fault(&copies)))?;
        if geo.extents != (sb.feature_incompat & FEATURE_ZONE_EXTENTS != 0) {
            return Err(corrupt(format!(
                "its header is version {}, which the superblock's zone-extents feature bit \
                 contradicts",
                if geo.extents { 2 } else { 1 }
            )));
        }
        let mut chunks = Vec::with_capacity(geo.subzones as usize);
        for (s, row) in read_table(dev, header).iter().enumerate() {
            let mut kept = Vec::new();
            for (c, &b) in row.iter().enumerate().filter(|(_, &b)| b != 0) {
                let ended = c > kept.len();
                if let Some(why) = entry_fault(l, &geo, s as u32, b, ended) {
                    return Err(corrupt(format!(
                        "chunk-table entry {s}/{c} (block {b}) {why}"
                    )));
                }
                kept.push(b);
            }
            if (s as u32) < geo.subzones {
                chunks.push(kept);
            }
        }
        Ok(Some(ZoneMedia {
            header,
            geo,
            chunks,
        }))
    }

    /// Every block the zone occupies: header, chunk table and chunks.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let header = self.header..self.header + HEADER_BLOCKS;
        let n = self.geo.chunk_blocks as u64;
        header.chain(self.chunks.iter().flatten().flat_map(move |&c| c..c + n))
    }

    /// Calls `f` for every descriptor in use, with its place and what its
    /// bytes decode to (Err: bytes no store writes, in words), reading
    /// each chunk's descriptor blocks in one pass. Slot numbers count
    /// within the sub-zone: chunk index × slots per chunk + index.
    pub fn scan<D: PmDevice>(
        &self,
        dev: &D,
        mut f: impl FnMut(Place, std::result::Result<Descriptor, &'static str>) -> Result<()>,
    ) -> Result<()> {
        assert!(
            !self.geo.extents,
            "a one-fence zone has heads, not descriptors"
        );
        self.entries(dev, |place, d| {
            let d: &[u8; 16] = d.try_into().expect("16 bytes");
            match Descriptor::decode(d) {
                Ok(None) => Ok(()),
                Ok(Some(d)) => f(place, Ok(d)),
                Err(_) => f(place, Err(UNDECODABLE)),
            }
        })
    }

    /// One-fence zone: calls `f` for every slot entry that names an inode
    /// (a head, or older bytes a reused slot kept), with its place and
    /// bytes.
    pub fn scan_heads<D: PmDevice>(
        &self,
        dev: &D,
        mut f: impl FnMut(Place, &[u8; EXTENT_SIZE as usize]) -> Result<()>,
    ) -> Result<()> {
        assert!(self.geo.extents, "a LAWN zone has descriptors, not heads");
        self.entries(dev, |place, e| {
            let e: &[u8; EXTENT_SIZE as usize] = e.try_into().expect("32 bytes");
            match e[12..16] == [0; 4] {
                true => Ok(()),
                false => f(place, e),
            }
        })
    }

    /// Calls `f` for every slot's entry with its place and bytes, reading
    /// each chunk's entry blocks in one pass. Slot numbers count within
    /// the sub-zone: chunk index × slots per chunk + index.
    fn entries<D: PmDevice>(
        &self,
        dev: &D,
        mut f: impl FnMut(Place, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let g = &self.geo;
        let size = g.entry_size();
        let mut buf = vec![0u8; (g.slots_per_chunk as u64 * size) as usize];
        for (s, row) in self.chunks.iter().enumerate() {
            for (c, &chunk) in row.iter().enumerate() {
                let base = g.desc_offset(chunk, 0);
                dev.read(base, &mut buf);
                for (i, e) in buf.chunks_exact(size as usize).enumerate() {
                    let place = Place {
                        sub: s as u32,
                        slot: c as u32 * g.slots_per_chunk + i as u32,
                        at: base + i as u64 * size,
                    };
                    f(place, e)?;
                }
            }
        }
        Ok(())
    }

    /// One-fence zone: where the `n` slots of an extent headed at `p` lie
    /// (they are consecutive), or None when they would leave its chunk.
    pub fn extent_data(&self, p: Place, n: u32) -> Option<u64> {
        let per = self.geo.slots_per_chunk;
        (p.slot % per + n <= per)
            .then(|| slot_place(&self.geo, &self.chunks[p.sub as usize], p.slot).1)
    }
}

/// Where a slot's descriptor and data live, given its sub-zone's chunks.
pub fn slot_place(geo: &ZoneGeometry, chunks: &[u64], slot: u32) -> (u64, u64) {
    let chunk = chunks[(slot / geo.slots_per_chunk) as usize];
    let i = slot % geo.slots_per_chunk;
    (geo.desc_offset(chunk, i), geo.slot_offset(chunk, i))
}
