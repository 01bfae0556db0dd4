//! Reading the zone's header and chunk table off the media, validated so
//! no value read can send mount, recovery or fsck outside the pool.

use crate::error::{FsError, Result};
use amber_format::zone::{
    Descriptor, ZoneGeometry, DESC_SIZE, FEATURE_ZONE, MAX_CHUNKS, MAX_SUBZONES, REGION_ZONE_START,
};
use amber_format::{Layout, Superblock, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// The zone as the media describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneMedia {
    /// First block of the header (the chunk table follows it).
    pub header: u64,
    pub geo: ZoneGeometry,
    /// Per sub-zone, the first block of each chunk, in table order.
    pub chunks: Vec<Vec<u64>>,
}

fn corrupt(what: String) -> FsError {
    FsError::Corrupted(format!("small-write zone: {what}"))
}

impl ZoneMedia {
    /// The pool's zone, if its superblock has one.
    pub fn read<D: PmDevice>(dev: &D, l: &Layout, sb: &Superblock) -> Result<Option<ZoneMedia>> {
        if sb.feature_incompat & FEATURE_ZONE == 0 {
            return Ok(None);
        }
        // The superblock checked the header's place and length.
        let header = sb.regions[REGION_ZONE_START];
        let mut h = [0u8; 64];
        dev.read(header * BLOCK_SIZE, &mut h);
        let geo = ZoneGeometry::decode(&h).map_err(|e| corrupt(format!("header: {e}")))?;
        let mut chunks = Vec::with_capacity(geo.subzones as usize);
        for s in 0..MAX_SUBZONES {
            let mut row = Vec::new();
            let mut ended = false;
            for c in 0..MAX_CHUNKS {
                let b = dev.load_u64(ZoneGeometry::table_entry(header, s, c));
                if b == 0 {
                    ended = true;
                    continue;
                }
                if ended || s >= geo.subzones {
                    return Err(corrupt(format!(
                        "chunk-table entry {s}/{c} is set after an empty one or past the \
                         sub-zones"
                    )));
                }
                if !l.is_data_block(b) || b + geo.chunk_blocks as u64 > l.total_blocks {
                    return Err(corrupt(format!(
                        "chunk {s}/{c} at block {b} lies outside the data area"
                    )));
                }
                row.push(b);
            }
            if s < geo.subzones {
                chunks.push(row);
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
        let header = self.header..self.header + amber_format::zone::HEADER_BLOCKS;
        let n = self.geo.chunk_blocks as u64;
        header.chain(self.chunks.iter().flatten().flat_map(move |&c| c..c + n))
    }

    /// Calls `f(subzone, slot, descriptor)` for every descriptor in use,
    /// reading each chunk's descriptor blocks in one pass. Slot numbers
    /// count within the sub-zone: chunk index × slots per chunk + index.
    pub fn scan<D: PmDevice>(
        &self,
        dev: &D,
        mut f: impl FnMut(u32, u32, Descriptor) -> Result<()>,
    ) -> Result<()> {
        let g = &self.geo;
        let mut buf = vec![0u8; (g.slots_per_chunk as u64 * DESC_SIZE) as usize];
        for (s, row) in self.chunks.iter().enumerate() {
            for (c, &chunk) in row.iter().enumerate() {
                dev.read(g.desc_offset(chunk, 0), &mut buf);
                for (i, d) in buf.chunks_exact(DESC_SIZE as usize).enumerate() {
                    let d: &[u8; 16] = d.try_into().expect("16 bytes");
                    let slot = c as u32 * g.slots_per_chunk + i as u32;
                    match Descriptor::decode(d) {
                        Ok(None) => {}
                        Ok(Some(d)) => f(s as u32, slot, d)?,
                        Err(e) => {
                            return Err(corrupt(format!("descriptor {s}/{slot}: {e}")));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Where a slot's descriptor and data live, given its sub-zone's chunks.
pub fn slot_place(geo: &ZoneGeometry, chunks: &[u64], slot: u32) -> (u64, u64) {
    let chunk = chunks[(slot / geo.slots_per_chunk) as usize];
    let i = slot % geo.slots_per_chunk;
    (geo.desc_offset(chunk, i), geo.slot_offset(chunk, i))
}
