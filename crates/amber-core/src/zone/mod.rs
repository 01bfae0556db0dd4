//! LAWN's small-write zone at run time (lawn.txt §4.1): per sub-zone, the
//! slots' owners, a hash table from (inode, slice) to slot, the list of
//! valid slots from least to most recently written (its head is the
//! paper's valid pointer) and the free slots (the free pointer); a
//! one-fence zone keeps no owners or list by slot but orders files. All of it
//! is DRAM, rebuilt from the descriptor table at mount ([`recover`]).
//!
//! A file's slices all live in one sub-zone (inode number modulo the
//! count), so writers of different files mostly use different sub-zones;
//! the sub-zone's mutex guards only this bookkeeping, never a PM write or
//! flush (§4.3: only slot allocation is serialized).

mod extents;
mod judge;
mod lifecycle;
mod media;
mod order;

pub(crate) use extents::{judge_heads, JudgedHeads};
pub(crate) use judge::{judge, judge_head, HeadVerdict, Verdict};
pub(crate) use lifecycle::{attach, attach_lenient};
pub(crate) use media::{
    entry_fault, geometry, header_fault, header_offsets, read_table, slot_place,
};
pub use media::{read_header, HeaderCopy, ZoneMedia};

use crate::ordered::keys_in;
use amber_format::zone::{Descriptor, ZoneGeometry, MAX_CHUNKS};
use amber_format::zone_extent::EXTENT_SIZE;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use order::FileOrder;
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// No slot: the end of a list, or a slice not in the zone.
const NIL: u32 = u32::MAX;
/// Most slices per block (64-byte slots).
const MAX_PER_BLOCK: usize = (BLOCK_SIZE / 64) as usize;
/// Words of the free bitmap `take_near` looks through for room for a
/// whole write before it settles for scattered slots.
const NEAR_WORDS: usize = 64;

#[derive(Clone, Copy)]
struct Slot {
    /// Owner; 0 when free.
    ino: u64,
    slice: u32,
    prev: u32,
    next: u32,
}

/// The slots holding a file block's slices.
struct BlockSlots {
    /// Bit i: slice i of the block is in the zone.
    mask: u64,
    slot: [u32; MAX_PER_BLOCK],
}

impl BlockSlots {
    fn empty() -> BlockSlots {
        BlockSlots {
            mask: 0,
            slot: [NIL; MAX_PER_BLOCK],
        }
    }
}

/// One sub-zone's DRAM state. Slot numbers count within the sub-zone.
pub struct SubZone {
    chunks: Vec<u64>,
    /// Slots in the sub-zone.
    count: u32,
    /// Each slot's owner and place in the write order: a LAWN zone's
    /// only. A one-fence zone reads no owner by slot (a file goes back
    /// whole, found through `files`), and keeping them missed the cache
    /// once per older copy a write superseded: 16 misses for a 1 KiB
    /// write, 12% of its time in `perf`.
    slots: Vec<Slot>,
    /// Free slots, one bit each (set: free).
    free: Vec<u64>,
    /// One bit per word of `free`: set when the word has a free slot, so
    /// the search skips full stretches 4096 slots at a time.
    nonempty: Vec<u64>,
    free_count: u32,
    /// The free pointer: where the search for a free slot starts, so
    /// consecutive allocations get neighbouring slots (whose descriptors
    /// share a cache line, one flush for several).
    cursor: u32,
    /// Least recently written valid slot (the write-back end).
    lru_head: u32,
    lru_tail: u32,
    /// The hash table: (inode, file block) to the slot of each slice of
    /// the block in the zone — one probe per block a read or write touches.
    /// The slots sit in the table itself, not behind a box: a random
    /// write's probe then misses the cache for the table alone (the box
    /// was a second miss, half of a probe's time in `perf`).
    blocks: FxHashMap<(u64, u64), BlockSlots>,
    /// Per file, its blocks with slices in the zone, for the long range
    /// walks (truncate, a file's write-back, unlink).
    files: FxHashMap<u64, FxHashSet<u64>>,
    per_block: u32,
    /// Slots per chunk: an extent (one-fence zone) never crosses a chunk.
    per_chunk: u32,
    /// Valid slots, kept under the lock and published to `valid` with a
    /// plain store (no read-modify-write: one per slice was a locked
    /// instruction per slice bound or unbound).
    valid_count: u32,
    /// Valid slots, also readable without the lock (`Zone::is_empty`).
    valid: Arc<AtomicU32>,
    /// One-fence zone only (`extents`): per file, slots whose copies a
    /// newer extent superseded. Their heads still check, so they stay
    /// taken until the file's write-back raises its floor past them.
    held: FxHashMap<u64, Vec<u32>>,
    /// One-fence zone only: per file with slots here, the highest write
    /// number of its heads (its next write takes one more), and the order
    /// files were last written in, which is the zone's write-back order.
    /// A LAWN zone orders slots instead (`lru_head`).
    files_order: Option<FileOrder>,
}

impl SubZone {
    /// A sub-zone of `chunks`; `extents` for a one-fence zone.
    fn new(
        chunks: Vec<u64>,
        per_chunk: u32,
        per_block: u32,
        valid: Arc<AtomicU32>,
        extents: bool,
    ) -> SubZone {
        assert!(per_block as usize <= MAX_PER_BLOCK);
        let mut z = SubZone {
            chunks: Vec::new(),
            count: 0,
            slots: Vec::new(),
            free: Vec::new(),
            nonempty: Vec::new(),
            free_count: 0,
            cursor: 0,
            lru_head: NIL,
            lru_tail: NIL,
            blocks: FxHashMap::default(),
            files: FxHashMap::default(),
            per_block,
            per_chunk,
            valid_count: 0,
            valid,
            held: FxHashMap::default(),
            files_order: extents.then(FileOrder::default),
        };
        for c in chunks {
            z.add_chunk(c, per_chunk);
        }
        z
    }

    /// Adds a chunk's slots, all free.
    fn add_chunk(&mut self, block: u64, per_chunk: u32) {
        assert!(self.chunks.len() < MAX_CHUNKS as usize);
        self.chunks.push(block);
        let first = self.count;
        self.count = first.checked_add(per_chunk).expect("slots fit in u32");
        if self.files_order.is_none() {
            let free = Slot {
                ino: 0,
                slice: 0,
                prev: NIL,
                next: NIL,
            };
            self.slots.resize(self.count as usize, free);
        }
        self.free.resize((self.count as usize).div_ceil(64), 0);
        self.nonempty.resize(self.free.len().div_ceil(64), 0);
        for s in first..first + per_chunk {
            self.set_free(s);
        }
    }

    /// Drops the last chunk if every slot of it is free (`Zone::shrink`):
    /// its first block, or None.
    fn drop_last_chunk(&mut self) -> Option<u64> {
        let &block = self.chunks.last()?;
        let first = self.count - self.per_chunk;
        if !(first..self.count).all(|s| self.free[(s / 64) as usize] & 1 << (s % 64) != 0) {
            return None;
        }
        self.chunks.pop();
        self.count = first;
        self.free_count -= self.per_chunk;
        if self.files_order.is_none() {
            self.slots.truncate(first as usize);
        }
        self.free.truncate((first as usize).div_ceil(64));
        if let Some(w) = self.free.last_mut().filter(|_| !first.is_multiple_of(64)) {
            *w &= (1 << (first % 64)) - 1;
        }
        self.nonempty = vec![0; self.free.len().div_ceil(64)];
        for wi in (0..self.free.len()).filter(|&wi| self.free[wi] != 0) {
            self.nonempty[wi / 64] |= 1 << (wi % 64);
        }
        if self.cursor >= self.count {
            self.cursor = 0;
        }
        Some(block)
    }

    fn set_free(&mut self, s: u32) {
        let wi = (s / 64) as usize;
        let w = &mut self.free[wi];
        assert!(*w & 1 << (s % 64) == 0, "slot {s} freed twice");
        *w |= 1 << (s % 64);
        self.nonempty[wi / 64] |= 1 << (wi % 64);
        self.free_count += 1;
    }

    /// Marks free slot `s` taken.
    fn set_taken(&mut self, s: u32) {
        let wi = (s / 64) as usize;
        assert!(self.free[wi] & 1 << (s % 64) != 0, "slot {s} is not free");
        self.free[wi] &= !(1 << (s % 64));
        if self.free[wi] == 0 {
            self.nonempty[wi / 64] &= !(1 << (wi % 64));
        }
        self.free_count -= 1;
    }

    /// The first word of `free` at or after word `from` (wrapping round)
    /// with a free slot.
    fn next_nonempty(&self, from: usize) -> Option<usize> {
        let n = self.nonempty.len();
        for k in 0..=n {
            let si = (from / 64 + k) % n;
            let mut m = self.nonempty[si];
            if k == 0 {
                m &= u64::MAX << (from % 64);
            }
            if m != 0 {
                return Some(si * 64 + m.trailing_zeros() as usize);
            }
        }
        None
    }

    /// The first block of each of the sub-zone's chunks, in chunk-table
    /// order.
    pub fn chunks(&self) -> &[u64] {
        &self.chunks
    }

    pub(crate) fn slot_count(&self) -> u32 {
        self.count
    }

    pub(crate) fn free_count(&self) -> u32 {
        self.free_count
    }

    fn split(&self, slice: u32) -> (u64, usize) {
        (
            (slice / self.per_block) as u64,
            (slice % self.per_block) as usize,
        )
    }

    /// The slot holding `slice` of `ino`.
    pub(crate) fn lookup(&self, ino: u64, slice: u32) -> Option<u32> {
        let (fb, i) = self.split(slice);
        let b = self.blocks.get(&(ino, fb))?;
        (b.mask & 1 << i != 0).then_some(b.slot[i])
    }

    /// The slots holding `ino`'s slices `first..first + out.len()` (None
    /// where the file holds it): one probe per block, not per slice.
    pub(crate) fn lookup_run(&self, ino: u64, first: u32, out: &mut [Option<u32>]) {
        let mut k = 0;
        while k < out.len() {
            let (fb, i) = self.split(first + k as u32);
            let n = (self.per_block as usize - i).min(out.len() - k);
            let b = self.blocks.get(&(ino, fb));
            for (j, o) in out[k..k + n].iter_mut().enumerate() {
                *o = b
                    .filter(|b| b.mask & 1 << (i + j) != 0)
                    .map(|b| b.slot[i + j]);
            }
            k += n;
        }
    }

    /// `ino`'s slices in `[first, last]` with their slots, in order.
    pub(crate) fn range(&self, ino: u64, first: u32, last: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let Some(blocks) = self.files.get(&ino) else {
            return out;
        };
        let (fb0, fb1) = (self.split(first).0, self.split(last).0);
        // A read's few blocks are probed directly; a long range (truncate,
        // a file's write-back) takes the file's blocks, in order.
        let walk = keys_in(
            blocks.len(),
            || blocks.iter().copied(),
            |fb| blocks.contains(&fb),
            fb0,
            fb1,
        );
        for fb in walk {
            let Some(b) = self.blocks.get(&(ino, fb)) else {
                continue;
            };
            let mut m = b.mask;
            while m != 0 {
                let i = m.trailing_zeros();
                m &= m - 1;
                let slice = fb as u32 * self.per_block + i;
                if (first..=last).contains(&slice) {
                    out.push((slice, b.slot[i as usize]));
                }
            }
        }
        out
    }

    /// Every slice of `ino` in the zone.
    pub(crate) fn all_of(&self, ino: u64) -> Vec<(u32, u32)> {
        self.range(ino, 0, u32::MAX)
    }

    /// A free slot, taken: the first free one at or after the free
    /// pointer (wrapping round), which then moves past it.
    pub(crate) fn take_free(&mut self) -> Option<u32> {
        if self.free_count == 0 {
            return None;
        }
        let cw = (self.cursor / 64) as usize;
        let here = self.free[cw] & u64::MAX << (self.cursor % 64);
        let (wi, bits) = if here != 0 {
            (cw, here)
        } else {
            let wi = self
                .next_nonempty((cw + 1) % self.free.len())
                .expect("free_count says a slot is free");
            (wi, self.free[wi])
        };
        let s = wi as u32 * 64 + bits.trailing_zeros();
        self.set_taken(s);
        self.cursor = (s + 1) % self.slot_count();
        Some(s)
    }

    /// Up to `n` free slots for one write, taken together: from the first
    /// word (of 64 slots, at or after the free pointer, among the next
    /// `NEAR_WORDS`) with `n` free, so the write's slots, and their
    /// descriptors, sit in a few neighbouring lines; otherwise one by one
    /// from the free pointer.
    pub(crate) fn take_near(&mut self, n: usize, out: &mut impl Extend<u32>) {
        if (1..=64).contains(&n) && self.free_count as usize >= n {
            let words = self.free.len();
            let mut wi = (self.cursor / 64) as usize;
            for _ in 0..NEAR_WORDS.min(words) {
                let Some(w) = self.next_nonempty(wi) else {
                    break;
                };
                if self.free[w].count_ones() as usize >= n {
                    let mut last = 0;
                    for _ in 0..n {
                        last = w as u32 * 64 + self.free[w].trailing_zeros();
                        self.set_taken(last);
                        out.extend([last]);
                    }
                    self.cursor = (last + 1) % self.slot_count();
                    return;
                }
                wi = (w + 1) % words;
            }
        }
        for _ in 0..n {
            match self.take_free() {
                Some(s) => out.extend([s]),
                None => return,
            }
        }
    }

    /// `n` consecutive free slots inside one chunk, taken, from the free
    /// pointer on (wrapping round): the first of them, or None when no
    /// such run is free. Full words of the bitmap are skipped whole, so
    /// the walk is bounded by the sub-zone's slots plus one run.
    pub(crate) fn take_run(&mut self, n: u32) -> Option<u32> {
        let total = self.slot_count();
        if n == 0 || n > self.per_chunk || self.free_count < n {
            return None;
        }
        let mut s = self.cursor % total;
        let (mut start, mut len, mut walked) = (s, 0u32, 0u32);
        while walked < total + n {
            if s == total {
                (s, len) = (0, 0);
            }
            let w = self.free[(s / 64) as usize] >> (s % 64);
            if w == 0 {
                let next = ((s / 64 + 1) * 64).min(total);
                (walked, s, len) = (walked + (next - s), next, 0);
                continue;
            }
            if s.is_multiple_of(self.per_chunk) {
                len = 0;
            }
            if w & 1 != 0 {
                if len == 0 {
                    start = s;
                }
                len += 1;
                if len == n {
                    (start..start + n).for_each(|t| self.set_taken(t));
                    self.cursor = (start + n) % total;
                    return Some(start);
                }
            } else {
                len = 0;
            }
            (s, walked) = (s + 1, walked + 1);
        }
        None
    }

    /// One-fence zone: slots `first..` now hold `ino`'s slices `numbers`
    /// (one extent), most recently written; `olds` are the slots of their
    /// older copies (None: the file's block). An older slot leaves its
    /// slice and the write-back order but stays taken, held for its file,
    /// until `release`: its head still checks.
    pub(crate) fn bind_extent(
        &mut self,
        ino: u64,
        first: u32,
        numbers: &[u32],
        olds: &[Option<u32>],
    ) {
        assert!(
            ino != 0 && self.files_order.is_some(),
            "a one-fence zone's file"
        );
        assert_eq!(numbers.len(), olds.len());
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "one run");
        let mut held = self.held.remove(&ino).unwrap_or_default();
        let mut added = 0;
        let mut k = 0;
        // Block by block: one probe per block; a slice with an older copy
        // keeps its bit and only changes slot.
        while k < numbers.len() {
            let (fb, i0) = self.split(numbers[k]);
            let n = (self.per_block as usize - i0).min(numbers.len() - k);
            let b = self
                .blocks
                .entry((ino, fb))
                .or_insert_with(BlockSlots::empty);
            if b.mask == 0 {
                self.files.entry(ino).or_default().insert(fb);
            }
            for j in 0..n {
                let (i, slot) = (i0 + j, first + (k + j) as u32);
                assert!(self.free[(slot / 64) as usize] & 1 << (slot % 64) == 0);
                match olds[k + j] {
                    Some(old) => {
                        assert!(
                            b.mask & 1 << i != 0 && b.slot[i] == old,
                            "slot {old} held slice"
                        );
                        held.push(old);
                    }
                    None => {
                        assert!(b.mask & 1 << i == 0, "slice in two slots");
                        b.mask |= 1 << i;
                        added += 1;
                    }
                }
                b.slot[i] = slot;
            }
            k += n;
        }
        if !held.is_empty() {
            self.held.insert(ino, held);
        }
        self.valid_count += added;
        self.valid.store(self.valid_count, Ordering::Relaxed);
    }

    /// One-fence zone: the file's floor now covers all of its heads (or
    /// the file is gone): every slot it had, valid or held, is free.
    pub(crate) fn release(&mut self, ino: u64) -> usize {
        assert!(
            self.files_order.is_some(),
            "a one-fence zone releases files"
        );
        let mut freed = 0;
        // Block by block: one probe per block, not one per slot.
        for fb in self.files.remove(&ino).unwrap_or_default() {
            let b = self
                .blocks
                .remove(&(ino, fb))
                .expect("a file's block is bound");
            let mut m = b.mask;
            while m != 0 {
                let slot = b.slot[m.trailing_zeros() as usize];
                m &= m - 1;
                self.set_free(slot);
                freed += 1;
            }
        }
        self.valid_count -= freed as u32;
        self.valid.store(self.valid_count, Ordering::Relaxed);
        let held = self.held.remove(&ino).unwrap_or_default();
        for &slot in &held {
            self.set_free(slot);
        }
        if let Some(o) = &mut self.files_order {
            o.remove(ino);
        }
        freed + held.len()
    }

    /// One-fence zone: the highest write number of the file's heads here.
    pub(crate) fn top(&self, ino: u64) -> Option<u64> {
        self.files_order.as_ref()?.top(ino)
    }

    /// One-fence zone: records a write of the file whose head has write
    /// number `seq`; the file becomes the most recently written.
    pub(crate) fn set_top(&mut self, ino: u64, seq: u64) {
        self.extent_order().written(ino, seq);
    }

    /// One-fence zone: up to `n` files with slots here, least recently
    /// written first (each goes back whole).
    pub(crate) fn oldest_files(&mut self, n: usize) -> Vec<u64> {
        self.extent_order().oldest(n)
    }

    fn extent_order(&mut self) -> &mut FileOrder {
        self.files_order
            .as_mut()
            .expect("only a one-fence zone orders files")
    }

    /// Returns a slot taken by `take_free` but never bound.
    pub(crate) fn give_back(&mut self, slot: u32) {
        if let Some(s) = self.slots.get(slot as usize) {
            assert_eq!(s.ino, 0, "slot {slot} is bound");
        }
        self.set_free(slot);
    }

    /// Records that `slot` holds the newest copy of `slice` of `ino`, as
    /// the most recently written. The slot must not be free.
    pub(crate) fn bind(&mut self, slot: u32, ino: u64, slice: u32) {
        assert!(ino != 0);
        assert!(
            self.free[(slot / 64) as usize] & 1 << (slot % 64) == 0,
            "binding free slot {slot}"
        );
        if let Some(s) = self.slots.get_mut(slot as usize) {
            assert_eq!(s.ino, 0, "slot {slot} bound twice");
            (s.ino, s.slice) = (ino, slice);
        }
        let (fb, i) = self.split(slice);
        let b = self
            .blocks
            .entry((ino, fb))
            .or_insert_with(BlockSlots::empty);
        assert!(
            b.mask & 1 << i == 0,
            "slice {slice} of inode {ino} in two slots"
        );
        if b.mask == 0 {
            // A block enters the file's set when its first slice does.
            self.files.entry(ino).or_default().insert(fb);
        }
        b.mask |= 1 << i;
        b.slot[i] = slot;
        if self.files_order.is_none() {
            self.push_tail(slot);
        }
        self.valid_count += 1;
        self.valid.store(self.valid_count, Ordering::Relaxed);
    }

    /// Frees `slot`: its slice's newest copy is in the file again (or the
    /// file is gone).
    pub(crate) fn unbind(&mut self, slot: u32) {
        assert!(
            self.files_order.is_none(),
            "a one-fence zone frees a file whole (`release`)"
        );
        let Slot { ino, slice, .. } = self.slots[slot as usize];
        assert!(ino != 0, "slot {slot} is not bound");
        self.unlink(slot);
        let (fb, i) = self.split(slice);
        let b = self.blocks.get_mut(&(ino, fb)).expect("bound block");
        b.mask &= !(1 << i);
        b.slot[i] = NIL;
        if b.mask == 0 {
            self.blocks.remove(&(ino, fb));
            let f = self.files.get_mut(&ino).expect("bound file");
            f.remove(&fb);
            if f.is_empty() {
                self.files.remove(&ino);
            }
        }
        self.slots[slot as usize].ino = 0;
        self.valid_count -= 1;
        self.valid.store(self.valid_count, Ordering::Relaxed);
        self.set_free(slot);
    }

    /// Up to `n` valid slots, least recently written first, with owners
    /// (a LAWN zone: a one-fence zone keeps no slot order).
    pub(crate) fn oldest(&self, n: usize) -> Vec<(u32, u64, u32)> {
        let mut out = Vec::with_capacity(n.min((self.slot_count() - self.free_count) as usize));
        let mut at = self.lru_head;
        while at != NIL && out.len() < n {
            let s = &self.slots[at as usize];
            out.push((at, s.ino, s.slice));
            at = s.next;
        }
        out
    }

    /// Whether `slot` still holds `slice` of `ino` (a LAWN zone: a
    /// one-fence zone keeps no owners by slot).
    pub(crate) fn holds(&self, slot: u32, ino: u64, slice: u32) -> bool {
        let s = &self.slots[slot as usize];
        s.ino == ino && s.slice == slice
    }

    fn push_tail(&mut self, slot: u32) {
        self.slots[slot as usize].prev = self.lru_tail;
        self.slots[slot as usize].next = NIL;
        match self.lru_tail {
            NIL => self.lru_head = slot,
            t => self.slots[t as usize].next = slot,
        }
        self.lru_tail = slot;
    }

    fn unlink(&mut self, slot: u32) {
        let Slot { prev, next, .. } = self.slots[slot as usize];
        match prev {
            NIL => self.lru_head = next,
            p => self.slots[p as usize].next = next,
        }
        match next {
            NIL => self.lru_tail = prev,
            n => self.slots[n as usize].prev = prev,
        }
    }
}

/// What recovery found on a zone's media, each slot as (sub-zone, slot,
/// ...): the valid slots with the slice each holds the newest copy of,
/// and for a one-fence zone the slots a newer extent superseded (with
/// their file) and each file's highest write number.
#[derive(Default)]
pub(crate) struct Recovered {
    pub valid: Vec<(u32, u32, u64, u32)>,
    pub held: Vec<(u32, u32, u64)>,
    pub tops: Vec<(u64, u64)>,
}

/// The mounted zone.
pub struct Zone {
    /// The zone's fixed shape, from its header.
    pub geo: ZoneGeometry,
    /// The header's first block (the chunk table follows).
    pub header: u64,
    subs: Vec<Mutex<SubZone>>,
    /// Each sub-zone's valid slots (the same counters the sub-zones keep).
    valid: Vec<Arc<AtomicU32>>,
}

impl Zone {
    /// The zone of `media` with the slices recovery found valid, each
    /// (sub-zone, slot, inode, slice), bound; every other slot is free.
    fn new(media: ZoneMedia, rec: &Recovered) -> Zone {
        let per = media.geo.slots_per_chunk;
        let per_block = media.geo.slices_per_block() as u32;
        let counts: Vec<Arc<AtomicU32>> = media.chunks.iter().map(|_| Arc::default()).collect();
        let mut subs: Vec<SubZone> = media
            .chunks
            .into_iter()
            .zip(&counts)
            .map(|(row, v)| SubZone::new(row, per, per_block, Arc::clone(v), media.geo.extents))
            .collect();
        for &(sub, slot, ino, slice) in &rec.valid {
            let z = &mut subs[sub as usize];
            z.set_taken(slot);
            z.bind(slot, ino, slice);
        }
        for &(sub, slot, ino) in &rec.held {
            let z = &mut subs[sub as usize];
            z.set_taken(slot);
            z.held.entry(ino).or_default().push(slot);
        }
        let n = subs.len() as u64;
        for &(ino, seq) in &rec.tops {
            subs[(ino % n) as usize].set_top(ino, seq);
        }
        Zone {
            geo: media.geo,
            header: media.header,
            subs: subs.into_iter().map(Mutex::new).collect(),
            valid: counts,
        }
    }

    /// The sub-zone serving `ino`.
    pub(crate) fn sub_of(&self, ino: u64) -> usize {
        (ino % self.subs.len() as u64) as usize
    }

    /// Locks sub-zone `i`.
    pub fn lock(&self, i: usize) -> MutexGuard<'_, SubZone> {
        self.subs[i].lock()
    }

    /// Whether sub-zone `i` holds no slice, without its lock. A reader
    /// holding a file's inode lock may trust a true: only that file's
    /// writers, who need the lock, could add its slices.
    pub(crate) fn is_empty(&self, i: usize) -> bool {
        self.valid[i].load(Ordering::Relaxed) == 0
    }

    /// Number of sub-zones.
    pub(crate) fn count(&self) -> usize {
        self.subs.len()
    }

    /// Byte offsets of `slot`'s descriptor and data in sub-zone `z`.
    pub(crate) fn place(&self, z: &SubZone, slot: u32) -> (u64, u64) {
        slot_place(&self.geo, &z.chunks, slot)
    }

    /// Stores `d` into a descriptor and flushes it (the caller fences).
    pub(crate) fn set_desc<D: PmDevice>(dev: &D, at: u64, d: &Descriptor) {
        dev.store_u128(at, d.encode());
        dev.flush(at, 16);
    }

    /// Stores several descriptors, then flushes each cache line they
    /// touch once (neighbouring slots share lines). The caller fences.
    pub(crate) fn set_descs<D: PmDevice>(dev: &D, descs: &[(u64, Descriptor)]) {
        for (at, d) in descs {
            dev.store_u128(*at, d.encode());
        }
        let mut lines: SmallVec<[u64; 16]> = descs.iter().map(|(at, _)| at / 64).collect();
        lines.sort_unstable();
        lines.dedup();
        for l in lines {
            dev.flush(l * 64, 64);
        }
    }

    /// Clears a slot's entry (a LAWN descriptor or a one-fence zone's
    /// head) and flushes it (the caller fences).
    pub(crate) fn clear_entry<D: PmDevice>(dev: &D, geo: &ZoneGeometry, at: u64) {
        if geo.extents {
            dev.write(at, &[0; EXTENT_SIZE as usize]);
            dev.flush(at, EXTENT_SIZE);
        } else {
            Zone::clear_desc(dev, at);
        }
    }

    /// Clears a descriptor and flushes it (the caller fences).
    pub(crate) fn clear_desc<D: PmDevice>(dev: &D, at: u64) {
        dev.store_u128(at, 0);
        dev.flush(at, 16);
    }

    /// Slots and valid slots over all sub-zones.
    pub fn occupancy(&self) -> (u64, u64) {
        self.subs.iter().fold((0, 0), |(t, v), s| {
            let s = s.lock();
            (
                t + s.slot_count() as u64,
                v + (s.slot_count() - s.free_count()) as u64,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The free pointer finds the few free slots among thousands of taken
    /// ones, in order from the pointer round to it, and every slot once.
    #[test]
    fn runs_stay_inside_a_chunk_and_wrap_round() {
        let mut z = SubZone::new(vec![100, 200], 100, 64, Arc::default(), false);
        assert_eq!(z.take_run(60), Some(0));
        // 40 left in the first chunk: a run of 50 starts in the second.
        assert_eq!(z.take_run(50), Some(100));
        assert_eq!(z.take_run(40), Some(150));
        assert_eq!(z.take_run(41), None, "40 free in chunk 0, 10 in chunk 1");
        assert_eq!(z.take_run(40), Some(60), "wrapped round");
        assert_eq!(z.take_run(101), None, "longer than a chunk");
        z.give_back(7);
        z.give_back(8);
        assert_eq!(z.take_run(10), Some(190), "from the free pointer on");
        assert_eq!(z.take_run(2), Some(7));
        assert_eq!(z.free_count(), 0);
    }

    #[test]
    fn free_pointer_finds_scattered_slots() {
        let mut z = SubZone::new(vec![100, 200], 5000, 64, Arc::default(), false);
        let all: Vec<u32> = std::iter::from_fn(|| z.take_free()).collect();
        assert_eq!(all, (0..10_000).collect::<Vec<_>>());
        assert_eq!(z.take_free(), None);
        for s in [9_999, 17, 4_500, 4_501, 8_000] {
            z.give_back(s);
        }
        // The pointer wrapped to 0 after slot 9,999.
        let got: Vec<u32> = std::iter::from_fn(|| z.take_free()).collect();
        assert_eq!(got, vec![17, 4_500, 4_501, 8_000, 9_999]);
        assert_eq!(z.free_count(), 0);
        z.give_back(3);
        assert_eq!(z.take_free(), Some(3));
    }

    /// Binding and unbinding keep the hash table, the per-file blocks and
    /// the least-recently-written list in step.
    #[test]
    fn bind_lookup_range_and_oldest() {
        let mut z = SubZone::new(vec![100], 256, 64, Arc::default(), false);
        let a = z.take_free().unwrap();
        let b = z.take_free().unwrap();
        let c = z.take_free().unwrap();
        z.bind(a, 7, 130);
        z.bind(b, 7, 3);
        z.bind(c, 9, 3);
        assert_eq!(z.lookup(7, 130), Some(a));
        assert_eq!(z.lookup(7, 4), None);
        assert_eq!(z.range(7, 0, 200), vec![(3, b), (130, a)]);
        assert_eq!(z.all_of(9), vec![(3, c)]);
        assert_eq!(z.oldest(2), vec![(a, 7, 130), (b, 7, 3)]);
        z.unbind(a);
        assert_eq!(z.oldest(5), vec![(b, 7, 3), (c, 9, 3)]);
        assert_eq!(z.range(7, 0, u32::MAX), vec![(3, b)]);
        assert!(z.holds(c, 9, 3) && !z.holds(a, 7, 130));
        assert_eq!(z.free_count(), 254);
    }

    /// An extent across a block boundary rebinds its slices, holds the
    /// slots of their older copies for the file (taken, off the write-back
    /// order) until `release` frees them all; `lookup_run` answers per
    /// slice with one probe per block.
    #[test]
    fn an_extent_supersedes_and_release_frees_held_slots() {
        let valid = Arc::new(AtomicU32::new(0));
        let mut z = SubZone::new(vec![100], 256, 64, Arc::clone(&valid), true);
        let old = z.take_run(2).unwrap();
        z.bind_extent(7, old, &[63, 64], &[None, None]);
        let mut olds = [Some(0); 4];
        z.lookup_run(7, 62, &mut olds);
        assert_eq!(olds, [None, Some(old), Some(old + 1), None]);
        let new = z.take_run(3).unwrap();
        z.bind_extent(7, new, &[62, 63, 64], &olds[..3]);
        assert_eq!(z.all_of(7), vec![(62, new), (63, new + 1), (64, new + 2)]);
        assert_eq!(valid.load(Ordering::Relaxed), 3, "held slots are not valid");
        z.set_top(7, 2);
        assert_eq!(z.oldest_files(9), vec![7]);
        assert!(z.oldest(9).is_empty(), "no slot order in a one-fence zone");
        assert_eq!(z.free_count(), 256 - 5, "the older copies stay taken");
        assert_eq!(z.release(7), 5);
        assert_eq!(z.free_count(), 256);
        assert_eq!(valid.load(Ordering::Relaxed), 0);
    }
}
