//! Inode generations against the split layout's attribute logs. A file
//! made in a reused inode takes the next generation (`namespace.rs`), and
//! its attribute log still holds the entries of the files before it: they
//! stay dead only while every generation they name is at most the
//! inode's. A damaged inode line (a generation zeroed or changed) breaks
//! that, and the next file of that number would take an older file's
//! entries, chain and size for its own. Repair restores it: a free inode,
//! or one whose file has nothing of its own generation, takes the highest
//! generation its log names (a live file then keeps the data that
//! generation's entries and records describe); a live file with entries
//! of its own loses the entries from the future.

use super::inodes::Scan;
use super::repair::inode_off;
use super::Ctx;
use crate::split::SplitMedia;
use amber_format::split::{AttrEntry, Record, ATTR_LOG_SIZE, ENTRIES, ENTRY_SIZE};
use amber_format::{FileKind, Inode, BLOCK_SIZE, INODE_SIZE};
use amber_pmem::PmDevice;

/// Byte offset of the generation field in an inode.
const OFF_GENERATION: u64 = amber_format::inode::OFF_GENERATION as u64;

/// Checks every inode's generation against its attribute log; returns
/// the generation each live regular file is judged by from here on
/// (changed only where repair adopts its log's).
pub(super) fn check<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    scan: &Scan,
) -> Vec<(u64, u32)> {
    let l = cx.layout;
    let per_block = BLOCK_SIZE / ATTR_LOG_SIZE;
    let mut adopted = Vec::new();
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    for first in (0..l.inode_count).step_by(per_block as usize) {
        cx.media.read(m.regions.entry_offset(first, 0), &mut buf);
        for (i, log) in buf.chunks_exact(ATTR_LOG_SIZE as usize).enumerate() {
            let ino = first + i as u64;
            let entries = decode(log);
            let Some(top) = entries.iter().map(|(_, e)| e.generation).max() else {
                continue;
            };
            if ino == 0 || !l.is_valid_ino(ino) {
                continue;
            }
            let rec = scan.recs.get(&ino).filter(|r| r.live_kind().is_some());
            let inode = rec.map_or_else(|| read_inode(cx, ino), |r| r.disk.clone());
            if top <= inode.generation {
                continue;
            }
            if let Some(g) = mend(cx, m, ino, &inode, rec.is_some(), &entries, top) {
                adopted.push((ino, g));
            }
        }
    }
    adopted
}

/// The valid entries of one log, with their slots.
fn decode(log: &[u8]) -> Vec<(u64, AttrEntry)> {
    (0..ENTRIES)
        .filter_map(|i| {
            let at = (i * ENTRY_SIZE) as usize;
            let raw: &[u8; ENTRY_SIZE as usize] = log[at..at + ENTRY_SIZE as usize]
                .try_into()
                .expect("64 bytes");
            match AttrEntry::decode(raw) {
                Record::Valid(e) => Some((i, e)),
                _ => None,
            }
        })
        .collect()
}

fn read_inode<D: PmDevice>(cx: &Ctx<'_, D>, ino: u64) -> Inode {
    let mut raw = [0u8; INODE_SIZE];
    cx.media.read(inode_off(&cx.layout, ino), &mut raw);
    Inode::decode(&raw)
}

/// Restores the rule for inode `ino` whose log names generation `top`,
/// above its own; returns the generation a live file now has, if it
/// changed.
fn mend<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    m: &SplitMedia,
    ino: u64,
    inode: &Inode,
    live: bool,
    entries: &[(u64, AttrEntry)],
    top: u32,
) -> Option<u32> {
    let own = entries
        .iter()
        .any(|(_, e)| e.generation == inode.generation);
    let regular = inode.kind() == Some(FileKind::Regular);
    let what = format!(
        "inode {ino} has generation {} but its attribute log names generation {top}",
        inode.generation
    );
    if live && regular && own {
        let offs: Vec<u64> = (entries.iter())
            .filter(|(_, e)| e.generation > inode.generation)
            .map(|&(slot, _)| m.regions.entry_offset(ino, slot))
            .collect();
        cx.fixable(what, "the entries of later generations are cleared", |f| {
            offs.iter().for_each(|&o| f.zero(o, ENTRY_SIZE as usize))
        });
        return None;
    }
    let off = inode_off(&cx.layout, ino) + OFF_GENERATION;
    let fix = if live && regular {
        format!("the file takes generation {top}, with the blocks and size it names")
    } else {
        format!("the inode takes generation {top}, so a file made in it is new")
    };
    cx.fixable(what, &fix, |f| f.write(off, &top.to_le_bytes()));
    (live && regular).then_some(top)
}
