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
use amber_pmem::PmDevice;
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// No slot: the end of a list.
const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    /// Owner; 0 when free.
    ino: u64,
    slice: u32,
    prev: u32,
    next: u32,
}

/// One sub-zone's DRAM state. Slot numbers count within the sub-zone.
pub struct SubZone {
    chunks: Vec<u64>,
    slots: Vec<Slot>,
    /// Free slots; the last is handed out next.
    free: Vec<u32>,
    /// Least recently written valid slot (the write-back end).
    lru_head: u32,
    lru_tail: u32,
    /// The hash table: per file, its slices in the zone, ordered so a read
    /// finds the slices of its range in one walk.
    files: FxHashMap<u64, BTreeMap<u32, u32>>,
}

impl SubZone {
    fn new(chunks: Vec<u64>, per_chunk: u32) -> SubZone {
        let mut z = SubZone {
            chunks: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            lru_head: NIL,
            lru_tail: NIL,
            files: FxHashMap::default(),
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
        // Hand out low slot numbers first.
        self.free.extend((first..first + per_chunk).rev());
    }

    pub fn chunks(&self) -> &[u64] {
        &self.chunks
    }

    pub fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn free_count(&self) -> u32 {
        self.free.len() as u32
    }

    /// The slot holding `slice` of `ino`.
    pub fn lookup(&self, ino: u64, slice: u32) -> Option<u32> {
        self.files.get(&ino)?.get(&slice).copied()
    }

    /// `ino`'s slices in `[first, last]` with their slots.
    pub fn range(&self, ino: u64, first: u32, last: u32) -> Vec<(u32, u32)> {
        self.files.get(&ino).map_or_else(Vec::new, |m| {
            m.range(first..=last).map(|(&s, &z)| (s, z)).collect()
        })
    }

    /// Every slice of `ino` in the zone.
    pub fn all_of(&self, ino: u64) -> Vec<(u32, u32)> {
        self.range(ino, 0, u32::MAX)
    }

    /// A free slot, taken.
    pub fn take_free(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a slot taken by `take_free` but never bound.
    pub fn give_back(&mut self, slot: u32) {
        assert_eq!(self.slots[slot as usize].ino, 0, "slot {slot} is bound");
        self.free.push(slot);
    }

    /// Records that `slot` holds the newest copy of `slice` of `ino`, as
    /// the most recently written.
    pub fn bind(&mut self, slot: u32, ino: u64, slice: u32) {
        assert!(ino != 0);
        let s = &mut self.slots[slot as usize];
        assert_eq!(s.ino, 0, "slot {slot} bound twice");
        s.ino = ino;
        s.slice = slice;
        let old = self.files.entry(ino).or_default().insert(slice, slot);
        assert!(old.is_none(), "slice {slice} of inode {ino} in two slots");
        self.push_tail(slot);
    }

    /// Frees `slot`: its slice's newest copy is in the file again (or the
    /// file is gone).
    pub fn unbind(&mut self, slot: u32) {
        let Slot { ino, slice, .. } = self.slots[slot as usize];
        assert!(ino != 0, "slot {slot} is not bound");
        self.unlink(slot);
        let m = self.files.get_mut(&ino).expect("bound file");
        m.remove(&slice);
        if m.is_empty() {
            self.files.remove(&ino);
        }
        self.slots[slot as usize].ino = 0;
        self.free.push(slot);
    }

    /// Up to `n` valid slots, least recently written first, with owners.
    pub fn oldest(&self, n: usize) -> Vec<(u32, u64, u32)> {
        let mut out = Vec::with_capacity(n.min(self.slots.len() - self.free.len()));
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
        let mut subs: Vec<SubZone> = media
            .chunks
            .into_iter()
            .map(|row| SubZone::new(row, per))
            .collect();
        for &(sub, slot, ino, slice) in valid {
            subs[sub as usize].bind(slot, ino, slice);
        }
        for z in &mut subs {
            let slots = &z.slots;
            z.free.retain(|&s| slots[s as usize].ino == 0);
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
