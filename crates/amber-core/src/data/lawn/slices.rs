//! Moving slices between the zone and their files outside a write: the
//! write-back of least-recently-used slices (idle time, a full zone, the
//! tools), and the flush of a file's slices before an operation that does
//! not go through the zone (truncate, hole punching, copy-on-write of the
//! blocks they lie in).
//!
//! Each is Algorithm 1's to-file step with the zone's own copy: the slot's
//! bytes go into the file while the descriptor still vouches for the slot,
//! a fence, then the descriptor is cleared and fenced. A crash in between
//! leaves the slot valid and its copy equal to the file's.

use super::{file_place, onefence, BlockLookup};
use crate::data::Context;
use crate::data::FallocStep;
use crate::error::Result;
use crate::inode::InodeState;
use crate::zone::Zone;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// Writes `slices` (slice number, slot) of the file `st` (write-locked by
/// the caller) back into it and frees their slots. Slots that no longer
/// hold their slice are skipped.
pub(super) fn write_back<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &InodeState,
    slices: &[(u32, u32)],
) -> Result<usize> {
    if slices.is_empty() {
        return Ok(0);
    }
    let dev = &**fs.device();
    let size = zone.geo.slot_size as u64;
    let idx = zone.sub_of(st.ino);
    let places: Vec<(u32, u64, u64, u64)> = {
        let sub = zone.lock(idx);
        slices
            .iter()
            .filter(|&&(slice, slot)| sub.holds(slot, st.ino, slice))
            .map(|&(slice, slot)| {
                let (desc, data) = zone.place(&sub, slot);
                let at = file_place(fs, lookup, st, slice as u64 * size);
                (slot, desc, data, at)
            })
            .collect()
    };
    let mut buf = vec![0u8; size as usize];
    for &(_, _, data, at) in &places {
        dev.read(data, &mut buf);
        dev.write(at, &buf);
        dev.flush(at, size);
    }
    fs.drain()?;
    for &(_, desc, _, _) in &places {
        Zone::clear_desc(dev, desc);
    }
    fs.drain()?;
    let mut sub = zone.lock(idx);
    for &(slot, ..) in &places {
        sub.unbind(slot);
    }
    Ok(places.len())
}

/// Writes back every slice of `st` in file blocks `[first, last]`.
pub(super) fn flush_blocks<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &mut InodeState,
    first: u64,
    last: u64,
) -> Result<usize> {
    if zone.is_empty(zone.sub_of(st.ino)) {
        return Ok(0);
    }
    let per = zone.geo.slices_per_block();
    let lo = (first * per).min(u32::MAX as u64) as u32;
    let hi = ((last + 1) * per - 1).min(u32::MAX as u64) as u32;
    let slices = zone.lock(zone.sub_of(st.ino)).range(st.ino, lo, hi);
    write_back_for(fs, zone, lookup, st, &slices)
}

/// Writes back every slice of `st` that ends past byte `from`.
pub(super) fn flush_from<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &mut InodeState,
    from: u64,
) -> Result<usize> {
    if zone.is_empty(zone.sub_of(st.ino)) {
        return Ok(0);
    }
    let first = (from / zone.geo.slot_size as u64).min(u32::MAX as u64) as u32;
    let slices = zone
        .lock(zone.sub_of(st.ino))
        .range(st.ino, first, u32::MAX);
    write_back_for(fs, zone, lookup, st, &slices)
}

/// Writes back `slices` of `st` before an operation that moves or frees
/// their blocks: in a one-fence zone, with every other slice of the file
/// (a write-back raises the file's floor past all its heads).
fn write_back_for<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &mut InodeState,
    slices: &[(u32, u32)],
) -> Result<usize> {
    match zone.geo.extents {
        _ if slices.is_empty() => Ok(0),
        true => onefence::write_back_file(fs, zone, lookup, st),
        false => write_back(fs, zone, lookup, st, slices),
    }
}

/// Before the file's size changes to `size`: writes back the slices at or
/// past the smaller of the two sizes, which would be cut, or hide bytes
/// the new size exposes.
pub(super) fn flush_for_size<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &mut InodeState,
    size: u64,
) -> Result<usize> {
    flush_from(fs, zone, lookup, st, size.min(st.disk.size))
}

/// Before a fallocate: a punch writes back the slices over the blocks it
/// frees or rewrites (invariant 12: a slice lies only over a block its
/// file has), and growth the slice holding the old end.
pub(super) fn flush_for_fallocate<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &mut InodeState,
    off: u64,
    len: u64,
    mode: FallocStep,
) -> Result<usize> {
    match mode {
        FallocStep::PunchHole if len > 0 => {
            let last = off.saturating_add(len - 1) / BLOCK_SIZE;
            flush_blocks(fs, zone, lookup, st, off / BLOCK_SIZE, last)
        }
        FallocStep::Allocate { keep_size: false } => flush_from(fs, zone, lookup, st, st.disk.size),
        _ => Ok(0),
    }
}

/// Writes back up to `n` of sub-zone `idx`'s least recently written
/// slices, locking each owner in turn (never while holding the sub-zone).
/// `held` is the file a writer holds locked, with the slices of it that
/// must stay (its write's own); other owners are then only try-locked, so
/// a writer cannot deadlock with another. Returns how many went back.
pub(super) fn write_back_oldest<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    idx: usize,
    n: usize,
    held: Option<(&InodeState, &dyn Fn(u32) -> bool)>,
) -> Result<usize> {
    if zone.geo.extents {
        assert!(
            held.is_none(),
            "a one-fence zone's writer evicts by `onefence::evict`"
        );
        return onefence::evict(fs, zone, lookup, idx, n, None);
    }
    let victims = zone.lock(idx).oldest(n);
    let mut done = 0;
    let mut i = 0;
    while i < victims.len() {
        let ino = victims[i].1;
        let mine: Vec<(u32, u32)> = victims[i..]
            .iter()
            .take_while(|v| v.1 == ino)
            .map(|&(slot, _, slice)| (slice, slot))
            .collect();
        i += mine.len();
        match held {
            Some((st, keep)) if st.ino == ino => {
                let ok: Vec<(u32, u32)> = mine.into_iter().filter(|(s, _)| !keep(*s)).collect();
                done += write_back(fs, zone, lookup, st, &ok)?;
            }
            Some(_) => {
                let r = fs.inode(ino)?;
                let locked = r.try_write();
                if let Some(st) = locked {
                    done += write_back(fs, zone, lookup, &st, &mine)?;
                }
            }
            None => {
                let r = fs.inode(ino)?;
                let st = r.write();
                done += write_back(fs, zone, lookup, &st, &mine)?;
            }
        }
    }
    Ok(done)
}
