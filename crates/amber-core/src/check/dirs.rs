//! Directory blocks: sizes and holes, then every slot — entries decode,
//! name something that exists with the right type, once per name; free
//! slots are zero.

use super::inodes::{Rec, Scan};
use super::Ctx;
use crate::escape::Escaped;
use amber_format::dirent::{self, SLOTS_PER_BLOCK, SLOT_SIZE};
use amber_format::{FileKind, BLOCK_SIZE};
use amber_pmem::PmDevice;
use rustc_hash::{FxHashMap, FxHashSet};

/// An entry that survived the slot checks.
pub(super) struct Ent {
    /// The directory holding it.
    pub dir: u64,
    pub name: Vec<u8>,
    pub ino: u64,
    /// Byte offset of its first slot and its slot count, to remove it.
    pub off: u64,
    pub nslots: usize,
}

impl Ent {
    pub fn show(&self) -> String {
        format!(
            "entry \"{}\" in directory inode {}",
            Escaped(&self.name),
            self.dir
        )
    }
}

/// Scans every live directory; returns the entries worth keeping.
pub(super) fn scan<D: PmDevice>(cx: &mut Ctx<'_, D>, scan: &mut Scan) -> Vec<Ent> {
    let dirs: Vec<u64> = scan
        .recs
        .iter()
        .filter(|(_, r)| r.live_kind() == Some(FileKind::Directory))
        .map(|(&ino, _)| ino)
        .collect();
    let mut out = Vec::new();
    for d in dirs {
        let nblocks = dir_blocks(cx, scan, d);
        let map: FxHashMap<u64, u64> = scan.recs[&d].data.iter().copied().collect();
        let mut names = FxHashSet::default();
        for fb in 0..nblocks {
            let Some(&pb) = map.get(&fb) else { break };
            scan_block(cx, scan, d, fb, pb, &mut names, &mut out);
        }
    }
    out
}

/// The directory blocks to read: whole blocks, no holes. A size that
/// breaks either rule is cut back to the blocks that are there.
fn dir_blocks<D: PmDevice>(cx: &mut Ctx<'_, D>, scan: &mut Scan, d: u64) -> u64 {
    let rec = scan.recs.get_mut(&d).expect("live directory");
    let size = rec.disk.size;
    let mapped: FxHashSet<u64> = rec.data.iter().map(|&(f, _)| f).collect();
    let mut first_hole = 0;
    while mapped.contains(&first_hole) {
        first_hole += 1;
    }
    let want = size.div_ceil(BLOCK_SIZE);
    let have = want.min(first_hole);
    if have * BLOCK_SIZE == size {
        return have;
    }
    let what = if !size.is_multiple_of(BLOCK_SIZE) && want <= first_hole {
        format!("directory inode {d} has size {size}, not whole blocks")
    } else {
        format!(
            "directory inode {d} has size {size} but no block at index {first_hole}, \
             so entries past it cannot be read"
        )
    };
    let new = have * BLOCK_SIZE;
    let off = super::repair::inode_off(&cx.layout, d) + amber_format::inode::OFF_SIZE as u64;
    cx.fixable(what, &format!("the size is set to {new}"), |f| {
        f.write(off, &new.to_le_bytes())
    });
    rec.disk.size = new;
    have
}

/// Why the entry `ent` must go (a name that cannot be, a target that is
/// not a live inode, a repeated name), or None to keep it; a kept name is
/// added to `names`.
fn entry_fault<D: PmDevice>(
    cx: &Ctx<'_, D>,
    target: Option<&Rec>,
    names: &mut FxHashSet<Vec<u8>>,
    ent: &Ent,
) -> Option<String> {
    let bad_name = ent.name == b"." || ent.name == b".." || ent.name.contains(&b'/');
    if bad_name || ent.name.contains(&0) {
        Some("has a name that cannot be".to_string())
    } else if !cx.layout.is_valid_ino(ent.ino) {
        Some(format!("names inode {}, outside the inode table", ent.ino))
    } else if ent.ino == amber_format::ROOT_INO {
        Some("names the root directory, which has no entry".to_string())
    } else if target.is_none() {
        Some(format!("names inode {}, which is free", ent.ino))
    } else if target.and_then(|r| r.live_kind()).is_none() {
        Some(format!("names inode {}, which repair frees", ent.ino))
    } else if !names.insert(ent.name.clone()) {
        Some("repeats a name already in the directory".to_string())
    } else {
        None
    }
}

fn scan_block<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    scan: &Scan,
    d: u64,
    fb: u64,
    pb: u64,
    names: &mut FxHashSet<Vec<u8>>,
    out: &mut Vec<Ent>,
) {
    let block = cx.media.block(pb);
    let base = pb * BLOCK_SIZE;
    let mut slot = 0;
    while slot < SLOTS_PER_BLOCK {
        let off = base + (slot * SLOT_SIZE) as u64;
        // Named only for a fault: formatting it for every slot was 5% of a
        // crash test's fsck.
        let at = || format!("directory inode {d} block {fb} slot {slot}");
        let e = match dirent::decode(&block, slot) {
            Err(err) => {
                cx.fixable(
                    format!("{}: bad entry ({err})", at()),
                    "the slot is zeroed",
                    |f| f.zero(off, SLOT_SIZE),
                );
                slot += 1;
                continue;
            }
            Ok(None) => {
                let s = &block[slot * SLOT_SIZE..(slot + 1) * SLOT_SIZE];
                if s.iter().any(|&b| b != 0) {
                    cx.fixable(
                        format!("{}: free slot holds non-zero bytes", at()),
                        "the slot is zeroed",
                        |f| f.zero(off, SLOT_SIZE),
                    );
                }
                slot += 1;
                continue;
            }
            Ok(Some(e)) => e,
        };
        let first = slot;
        slot += e.nslots;
        let ent = Ent {
            dir: d,
            name: e.name,
            ino: e.ino,
            off,
            nslots: e.nslots,
        };
        let len = ent.nslots * SLOT_SIZE;
        let target = scan.recs.get(&ent.ino);
        let why = entry_fault(cx, target, names, &ent);
        if let (None, Some(kind)) = (&why, target.and_then(|r| r.live_kind())) {
            if kind.dtype() != e.dtype {
                let what = format!(
                    "{} (block {fb} slot {first}) has type {} but inode {} is a {kind:?}",
                    ent.show(),
                    e.dtype,
                    ent.ino
                );
                let fixed = dirent::encode(ent.ino, kind.dtype(), &ent.name);
                cx.fixable(what, "the type is corrected", |f| f.write(off, &fixed));
            }
        }
        match why {
            Some(why) => cx.fixable(
                format!("{} (block {fb} slot {first}) {why}", ent.show()),
                "the entry is removed",
                |f| f.zero(off, len),
            ),
            None => out.push(ent),
        }
    }
}
