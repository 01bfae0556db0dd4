//! The inode table and every block map: field sanity, pointers into the
//! data area, single ownership of each block, and block counts.

use super::repair::inode_off;
use super::xattrs::check_xattr;
use super::Ctx;
use amber_format::blockmap::{capacity_blocks, MAX_FILE_SIZE, MAX_HEIGHT};
use amber_format::inode::{flags, INLINE_MAX, OFF_MAP_ROOT};
use amber_format::{FileKind, Inode, BLOCK_SIZE, INODE_SIZE, ROOT_INO};
use amber_pmem::PmDevice;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Longest symlink target (PATH_MAX less the terminating NUL).
const SYMLINK_MAX: u64 = 4095;

/// Reserved inode bytes a v1 pool leaves zero.
const RESERVED: [(usize, usize); 2] = amber_format::inode::RESERVED;
/// Byte offset of the flags field.
const OFF_FLAGS: u64 = amber_format::inode::OFF_FLAGS as u64;

/// One in-use inode.
pub(super) struct Rec {
    pub disk: Inode,
    /// None: the mode names no file kind.
    pub kind: Option<FileKind>,
    /// Beyond repair in place: repair frees it and removes its entries.
    pub condemned: bool,
    /// Blocks it owns (data, map nodes, attribute block), each listed once.
    pub blocks: Vec<u64>,
    /// (file block, block) of directories' and symlinks' data.
    pub data: Vec<(u64, u64)>,
}

impl Rec {
    /// A file kind entries may name: valid and not about to be freed.
    pub fn live_kind(&self) -> Option<FileKind> {
        self.kind.filter(|_| !self.condemned)
    }
}

pub(super) struct Scan {
    pub recs: BTreeMap<u64, Rec>,
}

/// Where each block was first claimed, to name both claimants of a block
/// owned twice.
pub(super) type Owners = FxHashMap<u64, u64>;

/// Reads every inode slot and walks every in-use inode's block map.
pub(super) fn scan<D: PmDevice>(cx: &mut Ctx<'_, D>, was_clean: bool) -> Scan {
    let l = cx.layout;
    let mut recs = BTreeMap::new();
    let mut owners = Owners::default();
    // Small enough to come from the heap's free lists: a 256 KiB buffer
    // was zeroed, faulted in and trimmed again by every fsck (30% of a
    // crash test's time per image).
    const CHUNK: u64 = 32;
    let mut buf = vec![0u8; CHUNK as usize * INODE_SIZE];
    let mut first = 0;
    while first < l.inode_count {
        let n = CHUNK.min(l.inode_count - first);
        let bytes = &mut buf[..n as usize * INODE_SIZE];
        cx.media.read(inode_off(&l, first), bytes);
        for (i, raw) in bytes.chunks_exact(INODE_SIZE).enumerate() {
            let ino = first + i as u64;
            let raw: &[u8; INODE_SIZE] = raw.try_into().expect("chunks_exact yields whole inodes");
            let disk = Inode::decode(raw);
            if ino == 0 || !disk.in_use() {
                continue;
            }
            let rec = check_inode(cx, &mut owners, ino, raw, disk, was_clean);
            recs.insert(ino, rec);
        }
        first += n;
    }
    match recs.get(&ROOT_INO) {
        Some(r) if r.kind == Some(FileKind::Directory) => {}
        Some(_) => cx.unfixable("the root inode (1) is not a directory".into()),
        None => cx.unfixable("the root inode (1) is not in use".into()),
    }
    Scan { recs }
}

fn check_inode<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    owners: &mut Owners,
    ino: u64,
    raw: &[u8; INODE_SIZE],
    disk: Inode,
    was_clean: bool,
) -> Rec {
    let l = cx.layout;
    let mut rec = Rec {
        kind: disk.kind(),
        condemned: false,
        blocks: Vec::new(),
        data: Vec::new(),
        disk,
    };
    let Some(kind) = rec.kind else {
        // Its map cannot be trusted: its blocks are not claimed.
        if ino == ROOT_INO {
            return rec;
        }
        rec.condemned = true;
        let what = format!(
            "inode {ino} is in use but its mode {:o} names no file type",
            rec.disk.mode
        );
        let generation = rec.disk.generation;
        cx.fixable(what, "the inode is freed", |f| {
            f.free_inode(&l, ino, generation)
        });
        return rec;
    };
    check_fields(cx, ino, raw, &rec.disk);
    let walked = walk(cx, owners, ino, &rec.disk, kind);
    rec.blocks = walked.blocks;
    rec.data = walked.data;
    // The attribute block is owned but, by design, not counted in `blocks`.
    let count = rec.blocks.len() as u64;
    let xattr = rec.disk.xattr_block;
    let owned = check_xattr(cx, owners, ino, (kind, rec.disk.mode), xattr);
    rec.blocks.extend(owned);
    // A split pool's regular files count their blocks in their attribute
    // logs (check::split), a nova pool's in their logs (check::nova).
    let counted = !((cx.split.is_some() || cx.nova) && kind == FileKind::Regular);
    if counted && walked.complete && rec.disk.blocks != count {
        check_block_count(cx, ino, &rec.disk, count, was_clean);
        rec.disk.blocks = count;
    }
    match kind {
        FileKind::Regular if rec.disk.size > MAX_FILE_SIZE => cx.unfixable(format!(
            "file inode {ino} has size {} beyond the largest file ({MAX_FILE_SIZE})",
            rec.disk.size
        )),
        FileKind::Symlink if ino != ROOT_INO => check_symlink(cx, ino, &mut rec),
        _ => {}
    }
    rec
}

/// Reserved bytes must be zero and flags must have a meaning; both are
/// mended in place.
fn check_fields<D: PmDevice>(cx: &mut Ctx<'_, D>, ino: u64, raw: &[u8; INODE_SIZE], disk: &Inode) {
    let l = cx.layout;
    let base = inode_off(&l, ino);
    for (s, e) in RESERVED {
        if raw[s..e].iter().any(|&b| b != 0) {
            let what = format!("inode {ino} has non-zero reserved bytes {s}..{e}");
            cx.fixable(what, "the bytes are zeroed", |f| {
                f.zero(base + s as u64, e - s)
            });
        }
    }
    let unknown = disk.flags & !flags::KNOWN;
    if unknown != 0 {
        let what = format!("inode {ino} has flags {unknown:#x}, which have no meaning");
        let kept = disk.flags & flags::KNOWN;
        cx.fixable(what, "they are cleared", |f| {
            f.write(base + OFF_FLAGS, &kept.to_le_bytes())
        });
    }
}

/// An inode whose block count disagrees with its walked map (`count`
/// blocks): a clean pool's count is wrong and is fixed; after a crash it
/// is the expected gap between a map store and the inode line that counts
/// it, which recovery closes.
fn check_block_count<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    ino: u64,
    disk: &Inode,
    count: u64,
    was_clean: bool,
) {
    let base = inode_off(&cx.layout, ino);
    let what = format!(
        "inode {ino} says it has {} block(s) but its block map holds {count}",
        disk.blocks
    );
    let off = base + 32;
    if was_clean {
        cx.fixable(what, &format!("the count is set to {count}"), |f| {
            f.write(off, &count.to_le_bytes())
        });
    } else {
        // A crash between a map store and the inode line that counts
        // it leaves this; recovery corrects it.
        let done = if cx.repair {
            cx.fixes.write(off, &count.to_le_bytes());
            "corrected"
        } else {
            "mount corrects it"
        };
        cx.note(format!("{what} (left by a crash); {done}"));
    }
}

fn check_symlink<D: PmDevice>(cx: &mut Ctx<'_, D>, ino: u64, rec: &mut Rec) {
    let size = rec.disk.size;
    let why = if size == 0 || size > SYMLINK_MAX {
        format!("symlink inode {ino} has an impossible target length {size}")
    } else if size > INLINE_MAX as u64 && !rec.data.iter().any(|&(f, _)| f == 0) {
        format!("symlink inode {ino} has a {size}-byte target but no block holding it")
    } else {
        return;
    };
    rec.condemned = true;
    let (l, generation) = (cx.layout, rec.disk.generation);
    cx.fixable(why, "the symlink is freed and its entries removed", |f| {
        f.free_inode(&l, ino, generation)
    });
}

struct Walked {
    blocks: Vec<u64>,
    data: Vec<(u64, u64)>,
    /// False if a shared node was not descended: the count is unknown.
    complete: bool,
}

/// Whether a block map's root can be walked: a data block at a height the
/// map can have. One that cannot is cleared (its data is lost).
fn root_ok<D: PmDevice>(cx: &mut Ctx<'_, D>, ino: u64, root: u64, height: u8) -> bool {
    let l = cx.layout;
    if height <= MAX_HEIGHT && l.is_data_block(root) {
        return true;
    }
    let what = format!(
        "inode {ino} has block-map root {root} at height {height}, which cannot be \
         (roots are data blocks, heights at most {MAX_HEIGHT})"
    );
    let off = inode_off(&l, ino) + OFF_MAP_ROOT as u64;
    cx.fixable(what, "the block map is cleared (its data is lost)", |f| {
        f.zero(off, 9)
    });
    false
}

/// Walks a block map, claiming each block. A block already claimed (by
/// another inode, or earlier in this tree) is reported and not descended,
/// so a cyclic or cross-linked map costs at most one visit per block.
fn walk<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    owners: &mut Owners,
    ino: u64,
    disk: &Inode,
    kind: FileKind,
) -> Walked {
    let l = cx.layout;
    let mut out = Walked {
        blocks: Vec::new(),
        data: Vec::new(),
        complete: true,
    };
    let (root, height) = (disk.map_root, disk.map_height);
    if root == 0 {
        return out;
    }
    if !root_ok(cx, ino, root, height) {
        return out;
    }
    let keep_data = matches!(kind, FileKind::Directory | FileKind::Symlink);
    let mut stack = vec![(root, height, 0u64)];
    while let Some((b, level, fblock)) = stack.pop() {
        if let Some(&first) = owners.get(&b) {
            let role = if level == 0 { "data" } else { "block-map node" };
            let who = if first == ino {
                format!("twice by inode {ino}")
            } else {
                format!("by inode {first} and inode {ino}")
            };
            cx.unfixable(format!("block {b} ({role}) is owned {who}"));
            if level > 0 {
                out.complete = false;
            }
            continue;
        }
        owners.insert(b, ino);
        out.blocks.push(b);
        if level == 0 {
            if keep_data {
                out.data.push((fblock, b));
            }
            continue;
        }
        let node = cx.media.block(b);
        let span = capacity_blocks(level - 1);
        for (idx, p) in node.chunks_exact(8).enumerate() {
            let p = u64::from_le_bytes(p.try_into().expect("8-byte chunk"));
            if p == 0 {
                continue;
            }
            if !l.is_data_block(p) {
                let what = format!(
                    "inode {ino}: block-map node {b} entry {idx} points at block {p}, \
                     outside the data area"
                );
                let off = b * BLOCK_SIZE + idx as u64 * 8;
                cx.fixable(what, "the pointer is cleared (a hole)", |f| f.zero(off, 8));
                continue;
            }
            stack.push((p, level - 1, fblock + idx as u64 * span));
        }
    }
    out
}
