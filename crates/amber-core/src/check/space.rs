//! Free space: the blocks the inodes own, against the bitmap a clean
//! unmount saved (mount trusts that bitmap without looking at the inodes,
//! so a wrong bit there becomes a block handed out twice).

use super::inodes::{Rec, Scan};
use super::Ctx;
use crate::alloc::BitSet;
use amber_format::{FileKind, BLOCK_SIZE};
use amber_pmem::PmDevice;

pub(super) struct Counts {
    pub inodes: u64,
    pub directories: u64,
    pub files: u64,
    pub blocks_in_use: u64,
    pub blocks_free: u64,
}

pub(super) fn check<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    scan: &Scan,
    owned: &[u64],
    was_clean: bool,
) -> Counts {
    let l = cx.layout;
    let mut used = inode_blocks(cx, scan);
    let mut c = Counts {
        inodes: 0,
        directories: 0,
        files: 0,
        blocks_in_use: 0,
        blocks_free: 0,
    };
    for rec in kept(cx, scan) {
        c.inodes += 1;
        match rec.kind {
            Some(FileKind::Directory) => c.directories += 1,
            Some(FileKind::Regular) => c.files += 1,
            _ => {}
        }
    }
    let shared: Vec<u64> = owned.iter().copied().filter(|&b| used.set(b)).collect();
    if !shared.is_empty() {
        cx.unfixable(format!(
            "{} block(s) belong both to a file's block map and to the small-write zone, the \
             split layout or a nova log, or to two nova logs ({})",
            shared.len(),
            sample(&shared)
        ));
    }
    c.blocks_in_use = used.count_ones() - l.data_start;
    c.blocks_free = l.data_blocks() - c.blocks_in_use;
    if !was_clean {
        // Mount rebuilds the allocator from the inodes; the bitmap is stale
        // by design.
        return c;
    }
    check_bitmap(cx, &used);
    c
}

/// Compares the bitmap a clean unmount saved with the blocks in `used`
/// (which mount trusts without looking at the inodes) and rewrites it
/// from `used` when they differ.
fn check_bitmap<D: PmDevice>(cx: &mut Ctx<'_, D>, used: &BitSet) {
    let l = cx.layout;
    let mut bytes = vec![0u8; l.total_blocks.div_ceil(8) as usize];
    cx.media.read(l.bitmap_start * BLOCK_SIZE, &mut bytes);
    let saved = BitSet::from_bytes(&bytes, l.total_blocks);
    let (mut lost, mut leaked) = (Vec::new(), Vec::new());
    for b in 0..l.total_blocks {
        match (used.get(b), saved.get(b)) {
            (true, false) => lost.push(b),
            (false, true) => leaked.push(b),
            _ => {}
        }
    }
    if lost.is_empty() && leaked.is_empty() {
        return;
    }
    let mut parts = Vec::new();
    if !lost.is_empty() {
        parts.push(format!(
            "{} block(s) in use are marked free ({}), so mount would hand them out again",
            lost.len(),
            sample(&lost)
        ));
    }
    if !leaked.is_empty() {
        parts.push(format!(
            "{} free block(s) are marked in use ({}), so their space is lost",
            leaked.len(),
            sample(&leaked)
        ));
    }
    let fixed = used.to_bytes();
    let off = l.bitmap_start * BLOCK_SIZE;
    cx.fixable(
        format!("the saved free-space bitmap is wrong: {}", parts.join("; ")),
        "the bitmap is rewritten from the block maps",
        |f| f.write(off, &fixed),
    );
}

/// The inodes the pool keeps: in repair mode the condemned ones are gone;
/// otherwise the pool is described as it is.
fn kept<'s, D: PmDevice>(cx: &Ctx<'_, D>, scan: &'s Scan) -> impl Iterator<Item = &'s Rec> {
    let repair = cx.repair;
    scan.recs.values().filter(move |r| !(repair && r.condemned))
}

/// The metadata regions' blocks and every block the kept inodes own.
pub(super) fn inode_blocks<D: PmDevice>(cx: &Ctx<'_, D>, scan: &Scan) -> BitSet {
    let l = cx.layout;
    let mut used = BitSet::new(l.total_blocks);
    for b in 0..l.data_start {
        used.set(b);
    }
    for &b in kept(cx, scan).flat_map(|r| &r.blocks) {
        used.set(b);
    }
    used
}

/// The first few block numbers of a list, for a message of bounded length.
fn sample(blocks: &[u64]) -> String {
    let mut s: Vec<String> = blocks.iter().take(5).map(u64::to_string).collect();
    if blocks.len() > 5 {
        s.push("...".into());
    }
    format!("block {}", s.join(", "))
}
