//! The DRAM index of one directory: name -> slot, and which slots are free.

use crate::error::{FsError, Result};
use crate::inode::BlockIndex;
use amber_format::dirent::{self, SLOTS_PER_BLOCK, SLOT_SIZE};
use amber_format::{Layout, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::collections::{BTreeSet, HashMap};

/// Where an entry lives and what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirSlot {
    pub ino: u64,
    pub dtype: u8,
    /// Directory block index (file block of the directory).
    pub block: u32,
    pub slot: u8,
    pub nslots: u8,
}

/// How many blocks with free slots a create examines before it appends a
/// new block: bounds create's cost in a fragmented directory.
const SPARE_PROBES: usize = 8;

/// Index of one directory.
#[derive(Default)]
pub struct DirIndex {
    /// Keyed by SipHash with a per-process random key (std's
    /// `RandomState`), not FxHash: names are chosen by users, and with an
    /// unkeyed hash anyone could create names that all collide and make
    /// every lookup in the directory a scan.
    names: HashMap<Box<[u8]>, DirSlot>,
    /// Per directory block, a bitmap of used slots.
    used: Vec<u64>,
    /// Directory blocks that have at least one free slot.
    spare: BTreeSet<u32>,
}

/// Appends the entries of directory block `fb` (its bytes in `buf`) to
/// `entries` and returns the block's used-slot mask.
fn read_block(
    layout: &Layout,
    ino: u64,
    fb: u64,
    buf: &[u8],
    entries: &mut Vec<(Box<[u8]>, DirSlot)>,
) -> Result<u64> {
    let mut used = 0;
    let mut slot = 0;
    while slot < SLOTS_PER_BLOCK {
        match dirent::decode(buf, slot) {
            Ok(None) => slot += 1,
            Ok(Some(e)) => {
                if !layout.is_valid_ino(e.ino) {
                    return Err(FsError::Corrupted(format!(
                        "directory {ino} entry names inode {} out of range",
                        e.ino
                    )));
                }
                let s = DirSlot {
                    ino: e.ino,
                    dtype: e.dtype,
                    block: fb as u32,
                    slot: slot as u8,
                    nslots: e.nslots as u8,
                };
                entries.push((e.name.into_boxed_slice(), s));
                used |= run_mask(slot, e.nslots);
                slot += e.nslots;
            }
            Err(err) => {
                return Err(FsError::Corrupted(format!(
                    "directory {ino} block {fb} slot {slot}: {err}"
                )))
            }
        }
    }
    Ok(used)
}

fn run_mask(start: usize, n: usize) -> u64 {
    let bits = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    bits << start
}

impl DirIndex {
    /// Reads every entry of a directory of `nblocks` blocks mapped by `map`.
    /// The entries are gathered first and the name table sized once for
    /// them: growing it by doubling moved every entry again at each step,
    /// a third of loading a 1,000,000-entry directory.
    pub fn load<D: PmDevice>(
        dev: &D,
        layout: &Layout,
        ino: u64,
        map: &BlockIndex,
        nblocks: u64,
    ) -> Result<DirIndex> {
        let mut d = DirIndex::default();
        let mut entries = Vec::new();
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        for fb in 0..nblocks {
            let Some(pb) = map.get(fb) else {
                return Err(FsError::Corrupted(format!(
                    "directory {ino} has a hole at block {fb}"
                )));
            };
            dev.read(layout.block_offset(pb), &mut buf);
            let used = read_block(layout, ino, fb, &buf, &mut entries)?;
            d.used.push(used);
            if used != u64::MAX {
                d.spare.insert(fb as u32);
            }
        }
        d.names.reserve(entries.len());
        for (name, s) in entries {
            if d.names.insert(name, s).is_some() {
                return Err(FsError::Corrupted(format!(
                    "directory {ino} holds the same name twice"
                )));
            }
        }
        Ok(d)
    }

    pub fn get(&self, name: &[u8]) -> Option<DirSlot> {
        self.names.get(name).copied()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Number of directory blocks.
    pub fn blocks(&self) -> u64 {
        self.used.len() as u64
    }

    /// A free run of `n` slots in an existing block, if one is found
    /// within a bounded number of probes.
    pub fn find_space(&self, n: usize) -> Option<(u32, u8)> {
        for &b in self.spare.iter().take(SPARE_PROBES) {
            let used = self.used[b as usize];
            for start in 0..=(SLOTS_PER_BLOCK - n) {
                if used & run_mask(start, n) == 0 {
                    return Some((b, start as u8));
                }
            }
        }
        None
    }

    /// Records a block appended to the directory.
    pub fn add_block(&mut self) -> u32 {
        self.used.push(0);
        let b = (self.used.len() - 1) as u32;
        self.spare.insert(b);
        b
    }

    /// Records an entry written at `s`.
    pub fn insert(&mut self, name: &[u8], s: DirSlot) {
        let mask = run_mask(s.slot as usize, s.nslots as usize);
        let used = &mut self.used[s.block as usize];
        assert_eq!(*used & mask, 0, "slots already in use");
        *used |= mask;
        if *used == u64::MAX {
            self.spare.remove(&s.block);
        }
        let old = self.names.insert(name.into(), s);
        assert!(old.is_none(), "name inserted twice");
    }

    /// Forgets an entry; returns its slot.
    pub fn remove(&mut self, name: &[u8]) -> Option<DirSlot> {
        let s = self.names.remove(name)?;
        self.used[s.block as usize] &= !run_mask(s.slot as usize, s.nslots as usize);
        self.spare.insert(s.block);
        Some(s)
    }

    /// Points an existing entry at another inode (rename over a target).
    pub fn retarget(&mut self, name: &[u8], ino: u64, dtype: u8) {
        let s = self
            .names
            .get_mut(name)
            .expect("retarget of a missing name");
        s.ino = ino;
        s.dtype = dtype;
    }

    /// Byte offset of slot `slot` of directory block `block` mapped at `pb`.
    pub fn slot_offset(layout: &Layout, pb: u64, slot: u8) -> u64 {
        layout.block_offset(pb) + slot as u64 * SLOT_SIZE as u64
    }
}
