//! LAWN's small-write zone at run time (lawn.txt §4.1): per sub-zone, the
//! slots' owners, a hash table from (inode, slice) to slot, the list of
//! valid slots from least to most recently written (its head is the
//! paper's valid pointer) and the free slots (the free pointer). All of it
//! is DRAM, rebuilt from the descriptor table at mount ([`recover`]).
//!
//! A file's slices all live in one sub-zone (inode number modulo the
//! count), so writers of different files mostly use different sub-zones;
//! the sub-zone's mutex guards only this bookkeeping, never a PM write or
//! flush (§4.3: only slot allocation is serialized).

mod judge;
mod lifecycle;
mod media;

pub use judge::{judge, Verdict};
pub use lifecycle::attach;
pub use media::{slot_place, ZoneMedia};

use amber_format::zone::{Descriptor, ZoneGeometry, MAX_CHUNKS};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::{FxHashMap, FxHashSet};

/// No slot: the end of a list, or a slice not in the zone.
const NIL: u32 = u32::MAX;
/// Most slices per block (64-byte slots).
const MAX_PER_BLOCK: usize = (BLOCK_SIZE / 64) as usize;

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

/// One sub-zone's DRAM state. Slot numbers count within the sub-zone.
pub struct SubZone {
    chunks: Vec<u64>,
    slots: Vec<Slot>,
    /// Free slots, one bit each (set: free).
    free: Vec<u64>,
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
    blocks: FxHashMap<(u64, u64), Box<BlockSlots>>,
    /// Per file, its blocks with slices in the zone, for the long range
    /// walks (truncate, a file's write-back, unlink).
    files: FxHashMap<u64, FxHashSet<u64>>,
    per_block: u32,
}

impl SubZone {
    fn new(chunks: Vec<u64>, per_chunk: u32, per_block: u32) -> SubZone {
        assert!(per_block as usize <= MAX_PER_BLOCK);
        let mut z = SubZone {
            chunks: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            free_count: 0,
            cursor: 0,
            lru_head: NIL,
            lru_tail: NIL,
            blocks: FxHashMap::default(),
            files: FxHashMap::default(),
            per_block,
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
        let first = self.slots.len() as u32;
        let free = Slot {
            ino: 0,
            slice: 0,
            prev: NIL,
            next: NIL,
        };
        self.slots
            .resize(self.slots.len() + per_chunk as usize, free);
        self.free.resize(self.slots.len().div_ceil(64), 0);
        for s in first..first + per_chunk {
            self.set_free(s);
        }
    }

    fn set_free(&mut self, s: u32) {
        let w = &mut self.free[(s / 64) as usize];
        assert!(*w & 1 << (s % 64) == 0, "slot {s} freed twice");
        *w |= 1 << (s % 64);
        self.free_count += 1;
    }

    pub fn chunks(&self) -> &[u64] {
        &self.chunks
    }

    pub fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn free_count(&self) -> u32 {
        self.free_count
    }

    fn split(&self, slice: u32) -> (u64, usize) {
        (
            (slice / self.per_block) as u64,
            (slice % self.per_block) as usize,
        )
    }

    /// The slot holding `slice` of `ino`.
    pub fn lookup(&self, ino: u64, slice: u32) -> Option<u32> {
        let (fb, i) = self.split(slice);
        let b = self.blocks.get(&(ino, fb))?;
        (b.mask & 1 << i != 0).then_some(b.slot[i])
    }

    /// `ino`'s slices in `[first, last]` with their slots, in order.
    pub fn range(&self, ino: u64, first: u32, last: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let Some(blocks) = self.files.get(&ino) else {
            return out;
        };
        let (fb0, fb1) = (self.split(first).0, self.split(last).0);
        // A read's few blocks are probed directly; a long range (truncate,
        // a file's write-back) takes the file's blocks, in order.
        let walk: Vec<u64> = if fb1 - fb0 < 16 {
            (fb0..=fb1).collect()
        } else {
            let mut v: Vec<u64> = blocks
                .iter()
                .copied()
                .filter(|fb| (fb0..=fb1).contains(fb))
                .collect();
            v.sort_unstable();
            v
        };
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
    pub fn all_of(&self, ino: u64) -> Vec<(u32, u32)> {
        self.range(ino, 0, u32::MAX)
    }

    /// A free slot, taken: the first free one at or after the free
    /// pointer, which then moves past it.
    pub fn take_free(&mut self) -> Option<u32> {
        if self.free_count == 0 {
            return None;
        }
        let words = self.free.len();
        let start = (self.cursor / 64) as usize;
        // The cursor's own word first from the cursor's bit, then the
        // others in turn, ending with the bits before the cursor.
        for k in 0..=words {
            let wi = (start + k) % words;
            let mut w = self.free[wi];
            if k == 0 {
                w &= u64::MAX << (self.cursor % 64);
            }
            if w != 0 {
                let s = wi as u32 * 64 + w.trailing_zeros();
                self.free[wi] &= !(1 << (s % 64));
                self.free_count -= 1;
                self.cursor = (s + 1) % self.slot_count();
                return Some(s);
            }
        }
        unreachable!("free_count says a slot is free")
    }

    /// Returns a slot taken by `take_free` but never bound.
    pub fn give_back(&mut self, slot: u32) {
        assert_eq!(self.slots[slot as usize].ino, 0, "slot {slot} is bound");
        self.set_free(slot);
    }

    /// Records that `slot` holds the newest copy of `slice` of `ino`, as
    /// the most recently written. The slot must not be free.
    pub fn bind(&mut self, slot: u32, ino: u64, slice: u32) {
        assert!(ino != 0);
        assert!(
            self.free[(slot / 64) as usize] & 1 << (slot % 64) == 0,
            "binding free slot {slot}"
        );
        let s = &mut self.slots[slot as usize];
        assert_eq!(s.ino, 0, "slot {slot} bound twice");
        s.ino = ino;
        s.slice = slice;
        let (fb, i) = self.split(slice);
        let b = self.blocks.entry((ino, fb)).or_insert_with(|| {
            Box::new(BlockSlots {
                mask: 0,
                slot: [NIL; MAX_PER_BLOCK],
            })
        });
        assert!(
            b.mask & 1 << i == 0,
            "slice {slice} of inode {ino} in two slots"
        );
        b.mask |= 1 << i;
        b.slot[i] = slot;
        self.files.entry(ino).or_default().insert(fb);
        self.push_tail(slot);
    }

    /// Frees `slot`: its slice's newest copy is in the file again (or the
    /// file is gone).
    pub fn unbind(&mut self, slot: u32) {
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
        self.set_free(slot);
    }

    /// Up to `n` valid slots, least recently written first, with owners.
    pub fn oldest(&self, n: usize) -> Vec<(u32, u64, u32)> {
        let mut out = Vec::with_capacity(n.min((self.slot_count() - self.free_count) as usize));
        let mut at = self.lru_head;
        while at != NIL && out.len() < n {
            let s = &self.slots[at as usize];
            out.push((at, s.ino, s.slice));
            at = s.next;
        }
        out
    }

    /// Whether `slot` still holds `slice` of `ino`.
    pub fn holds(&self, slot: u32, ino: u64, slice: u32) -> bool {
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

/// The mounted zone.
pub struct Zone {
    pub geo: ZoneGeometry,
    /// The header's first block (the chunk table follows).
    pub header: u64,
    subs: Vec<Mutex<SubZone>>,
}

impl Zone {
    /// The zone of `media` with the slices recovery found valid, each
    /// (sub-zone, slot, inode, slice), bound; every other slot is free.
    fn new(media: ZoneMedia, valid: &[(u32, u32, u64, u32)]) -> Zone {
        let per = media.geo.slots_per_chunk;
        let per_block = media.geo.slices_per_block() as u32;
        let mut subs: Vec<SubZone> = media
            .chunks
            .into_iter()
            .map(|row| SubZone::new(row, per, per_block))
            .collect();
        for &(sub, slot, ino, slice) in valid {
            let z = &mut subs[sub as usize];
            z.free[(slot / 64) as usize] &= !(1 << (slot % 64));
            z.free_count -= 1;
            z.bind(slot, ino, slice);
        }
        Zone {
            geo: media.geo,
            header: media.header,
            subs: subs.into_iter().map(Mutex::new).collect(),
        }
    }

    /// The sub-zone serving `ino`.
    pub fn sub_of(&self, ino: u64) -> usize {
        (ino % self.subs.len() as u64) as usize
    }

    /// Locks sub-zone `i`.
    pub fn lock(&self, i: usize) -> MutexGuard<'_, SubZone> {
        self.subs[i].lock()
    }

    /// Number of sub-zones.
    pub fn count(&self) -> usize {
        self.subs.len()
    }

    /// Byte offsets of `slot`'s descriptor and data in sub-zone `z`.
    pub fn place(&self, z: &SubZone, slot: u32) -> (u64, u64) {
        slot_place(&self.geo, &z.chunks, slot)
    }

    /// Stores `d` into a descriptor and flushes it (the caller fences).
    pub fn set_desc<D: PmDevice>(dev: &D, at: u64, d: &Descriptor) {
        dev.store_u128(at, d.encode());
        dev.flush(at, 16);
    }

    /// Stores several descriptors, then flushes each cache line they
    /// touch once (neighbouring slots share lines). The caller fences.
    pub fn set_descs<D: PmDevice>(dev: &D, descs: &[(u64, Descriptor)]) {
        for (at, d) in descs {
            dev.store_u128(*at, d.encode());
        }
        let mut lines: Vec<u64> = descs.iter().map(|(at, _)| at / 64).collect();
        lines.sort_unstable();
        lines.dedup();
        for l in lines {
            dev.flush(l * 64, 64);
        }
    }

    /// Clears a descriptor and flushes it (the caller fences).
    pub fn clear_desc<D: PmDevice>(dev: &D, at: u64) {
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
