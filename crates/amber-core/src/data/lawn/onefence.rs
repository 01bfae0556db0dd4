//! The one-fence zone commit (zone version 2, `FEATURE_ZONE_EXTENTS`;
//! amber's default, `amber_zone=extents`; docs/design.md §11.7). A small
//! overwrite's consecutive slices go into consecutive free slots, always
//! new ones, with one checksummed extent head in the entry of the first:
//! data and head are written together and one fence makes the write
//! durable and atomic. A crash before the fence leaves a head whose
//! checksum fails, and every slice's older copy (an older extent's slot,
//! or the file) untouched.
//!
//! Copies superseded by a newer extent keep their slots until their
//! file's write-back: it copies the file's newest slices into its blocks,
//! fences, then raises the file's floor (the inode's zone commit number)
//! past all of the file's heads with one 8-byte store and a fence, so
//! every head of the file dies at once and no older head can outlive a
//! newer one. A freed file's floor is raised the same way.

use super::{
    file_place, slice_image, BlockLookup, Lawn, Olds, TimesAt, INLINE_SLICES, SLOT_ROUNDS,
};
use crate::data::Context;
use crate::error::Result;
use crate::inode::InodeState;
use crate::zone::Zone;
use amber_format::inode::OFF_ZONE_SEQ;
use amber_format::zone_extent::{Extent, EXTENT_SIZE, MAX_EXTENT_SLOTS};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use smallvec::{smallvec, SmallVec};
use std::sync::atomic::Ordering::Relaxed;

/// Bytes of an extent's image held without a heap allocation.
const INLINE_IMAGE: usize = 1024;

/// Where a one-fence write goes and what it supersedes (`Lawn::locate`).
struct Located {
    /// The extent head's place on PM.
    head_at: u64,
    /// Its first slot's data.
    data_at: u64,
    /// Per slice, the slot of its older copy (None: the file's block).
    olds: Olds,
    /// Per slice, where that older copy's data lies (empty when the
    /// write covers whole slices and patches nothing).
    sources: SmallVec<[Option<u64>; INLINE_SLICES]>,
    /// The extent's write number.
    seq: u64,
}

impl Lawn {
    /// Writes the consecutive zone slices `numbers` of `st` as one extent
    /// and commits it with one fence. None when no run of free slots could
    /// be had: the caller writes it another way.
    pub(super) fn write_extent<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        numbers: &[u32],
        off: u64,
        data: &[u8],
        times: TimesAt,
    ) -> Result<Option<usize>> {
        let zone = Self::zone(fs);
        let n = numbers.len();
        assert!(n > 0 && numbers.windows(2).all(|w| w[1] == w[0] + 1));
        // An extent stays in one chunk: a longer write would find no run
        // however many files were written back to make room.
        if n > MAX_EXTENT_SLOTS as usize || n > zone.geo.slots_per_chunk as usize {
            return Ok(None);
        }
        let Some(first) = self.take_run(fs, zone, st, n as u32)? else {
            return Ok(None);
        };
        let idx = zone.sub_of(st.ino);
        // A write of whole slices is its own image: no older copy to patch
        // from, and no copy of the data before the one to PM.
        let slot = zone.geo.slot_size as u64;
        let whole = off.is_multiple_of(slot) && data.len() as u64 == n as u64 * slot;
        let Located {
            head_at,
            data_at,
            olds,
            sources,
            seq,
        } = Self::locate(zone, st, first, numbers, !whole);
        let patched;
        let image: &[u8] = if whole {
            data
        } else {
            patched = self.extent_image(fs, zone, st, numbers, &sources, off, data);
            &patched
        };
        let head = Extent {
            seq,
            slice: numbers[0],
            ino: st.ino as u32,
            slots: n as u16,
        }
        .encode(image);
        let dev = &**fs.device();
        dev.write_nt(data_at, image);
        // Two 16-byte stores: a crash may keep the first alone (no
        // checksum yet), which recovery refuses like any torn head.
        for (i, half) in head.chunks_exact(16).enumerate() {
            let w = u128::from_le_bytes(half.try_into().expect("16 bytes"));
            dev.store_u128(head_at + 16 * i as u64, w);
        }
        dev.flush(head_at, EXTENT_SIZE);
        let dirty = self.note_times(fs, st, times);
        // The one fence: data, head (and the times, when they ride) durable.
        fs.drain()?;
        st.times_dirty = dirty;
        let mut sub = zone.lock(idx);
        sub.bind_extent(st.ino, first, numbers, &olds);
        sub.set_top(st.ino, seq);
        let stats = &self.shared.stats;
        stats.to_zone.fetch_add(n as u64, Relaxed);
        Ok(Some(data.len()))
    }

    /// Under the sub-zone's lock, where the extent at slot `first` goes
    /// and what it supersedes (`sources` only when the write must be
    /// patched from older copies). The file's slots cannot change until
    /// this write rebinds them: every other writer or write-back of the
    /// file needs its inode lock.
    fn locate(zone: &Zone, st: &InodeState, first: u32, numbers: &[u32], sources: bool) -> Located {
        let sub = zone.lock(zone.sub_of(st.ino));
        let (head_at, data_at) = zone.place(&sub, first);
        let mut olds: Olds = smallvec![None; numbers.len()];
        sub.lookup_run(st.ino, numbers[0], &mut olds);
        let places = olds.iter().map(|o| o.map(|z| zone.place(&sub, z).1));
        let sources = if sources {
            places.collect()
        } else {
            SmallVec::new()
        };
        let seq = sub.top(st.ino).unwrap_or(0).max(st.disk.zone_seq) + 1;
        Located {
            head_at,
            data_at,
            olds,
            sources,
            seq,
        }
    }

    /// The extent's new bytes: each slice patched from its newest copy
    /// (`sources`: its slot's data, or None for the file's block).
    #[allow(clippy::too_many_arguments)]
    fn extent_image<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        zone: &Zone,
        st: &InodeState,
        numbers: &[u32],
        sources: &[Option<u64>],
        off: u64,
        data: &[u8],
    ) -> SmallVec<[u8; INLINE_IMAGE]> {
        let size = zone.geo.slot_size as u64;
        let mut image = smallvec![0u8; numbers.len() * size as usize];
        let chunks = image.chunks_exact_mut(size as usize);
        for ((&slice, src), img) in numbers.iter().zip(sources).zip(chunks) {
            let start = slice as u64 * size;
            let src = src.unwrap_or_else(|| file_place(fs, self.lookup(), st, start));
            slice_image(fs, st, start, src, off, data, img);
        }
        image
    }

    /// A run of `n` free slots in `st`'s sub-zone, growing it when its
    /// free slots fall under the threshold and writing back the files of
    /// its least recently written slices (`st`'s own included) when no
    /// run is free. None when none could be had.
    pub(super) fn take_run<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        zone: &Zone,
        st: &mut InodeState,
        n: u32,
    ) -> Result<Option<u32>> {
        let idx = zone.sub_of(st.ino);
        let grow_pct = fs.options().zone.grow_pct as u64;
        for _ in 0..SLOT_ROUNDS {
            {
                let mut sub = zone.lock(idx);
                let low = (sub.free_count() as u64) * 100 < sub.slot_count() as u64 * grow_pct;
                if low && zone.grow(fs, idx, &mut sub)? {
                    self.shared.stats.growths.fetch_add(1, Relaxed);
                }
                if let Some(s) = sub.take_run(n) {
                    return Ok(Some(s));
                }
            }
            let freed = evict(fs, zone, self.lookup(), idx, n as usize, Some(st))?;
            self.shared.stats.evicted.fetch_add(freed as u64, Relaxed);
            if freed == 0 {
                break;
            }
        }
        Ok(None)
    }
}

/// Writes back the files of up to `n` of sub-zone `idx`'s least recently
/// written slices, each file whole, locking each in turn (never while
/// holding the sub-zone). `held`: the file a writer holds locked; other
/// files are then only try-locked, so two writers cannot deadlock.
/// Returns the slots freed.
pub(super) fn evict<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    idx: usize,
    n: usize,
    mut held: Option<&mut InodeState>,
) -> Result<usize> {
    let inos = zone.lock(idx).oldest_files(n);
    let mut freed = 0;
    for ino in inos {
        match held.as_deref_mut() {
            Some(st) if st.ino == ino => freed += write_back_file(fs, zone, lookup, st)?,
            Some(_) => {
                let r = fs.inode(ino)?;
                let locked = r.try_write();
                if let Some(mut st) = locked {
                    freed += write_back_file(fs, zone, lookup, &mut st)?;
                }
            }
            None => {
                let r = fs.inode(ino)?;
                let mut st = r.write();
                freed += write_back_file(fs, zone, lookup, &mut st)?;
            }
        }
        if freed >= n {
            break;
        }
    }
    Ok(freed)
}

/// Writes every slice of `st` (write-locked by the caller) the zone holds
/// back into its blocks, fence, then raises the file's floor past all its
/// heads, fence; frees every slot the file had. Returns how many.
pub(super) fn write_back_file<D: PmDevice>(
    fs: Context<'_, D>,
    zone: &Zone,
    lookup: BlockLookup,
    st: &mut InodeState,
) -> Result<usize> {
    let idx = zone.sub_of(st.ino);
    let size = zone.geo.slot_size as u64;
    let (runs, top) = {
        let sub = zone.lock(idx);
        let Some(top) = sub.top(st.ino) else {
            return Ok(0);
        };
        // Neighbouring slices in neighbouring slots of one block (an
        // extent's) go back as one copy.
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        let mut prev = None;
        for (slice, slot) in sub.all_of(st.ino) {
            let off = slice as u64 * size;
            let from = zone.place(&sub, slot).1;
            let follows = prev == Some(slice.wrapping_sub(1)) && !off.is_multiple_of(BLOCK_SIZE);
            prev = Some(slice);
            match runs.last_mut() {
                Some((f, _, len)) if follows && *f + *len == from => *len += size,
                _ => runs.push((from, file_place(fs, lookup, st, off), size)),
            }
        }
        (runs, top)
    };
    let dev = &**fs.device();
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    for &(from, to, len) in &runs {
        let buf = &mut buf[..len as usize];
        dev.read(from, buf);
        dev.write_nt(to, buf);
    }
    fs.drain()?;
    raise_floor(fs, st, top)?;
    Ok(zone.lock(idx).release(st.ino))
}

/// Stores the file's floor `top` (durably): every head of the file with a
/// write number up to it is dead from here on.
fn raise_floor<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState, top: u64) -> Result<()> {
    let floor = top.max(st.disk.zone_seq);
    let at = fs.layout().inode_offset(st.ino) + OFF_ZONE_SEQ as u64;
    let dev = &**fs.device();
    dev.store_u64(at, floor);
    dev.flush(at, 8);
    fs.drain()?;
    st.disk.zone_seq = floor;
    Ok(())
}

/// The file is gone: its floor rises past its heads before its number can
/// be reused, and its slots are free.
pub(super) fn forget<D: PmDevice>(fs: Context<'_, D>, zone: &Zone, st: &mut InodeState) {
    let idx = zone.sub_of(st.ino);
    let Some(top) = zone.lock(idx).top(st.ino) else {
        return;
    };
    // A failed fence poisons the core; mount then finds the freed file's
    // heads stale and clears them.
    let _ = raise_floor(fs, st, top);
    zone.lock(idx).release(st.ino);
}
