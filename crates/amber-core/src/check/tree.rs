//! The namespace as a tree: each directory named by exactly one entry,
//! held by the directory its parent field names; everything reachable from
//! the root; link counts that match the entries.

use super::dirs::Ent;
use super::inodes::Scan;
use super::repair::inode_off;
use super::Ctx;
use crate::escape::Escaped;
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;
use rustc_hash::FxHashMap;

const OFF_NLINK: u64 = amber_format::inode::OFF_NLINK as u64;
const OFF_PARENT: u64 = amber_format::inode::OFF_PARENT as u64;

pub(super) fn check<D: PmDevice>(cx: &mut Ctx<'_, D>, scan: &mut Scan, ents: Vec<Ent>) {
    if !check_root(cx, scan) {
        return;
    }
    let mut keep = vec![true; ents.len()];
    let mut naming: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (i, e) in ents.iter().enumerate() {
        naming.entry(e.ino).or_default().push(i);
    }
    let chosen = choose_dir_entries(cx, scan, &ents, &naming, &mut keep);
    let mut by_dir: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (i, e) in ents.iter().enumerate() {
        if keep[i] {
            by_dir.entry(e.dir).or_default().push(i);
        }
    }
    let reach = walk(scan, &ents, &by_dir, &chosen);
    check_links(cx, scan, &ents, &naming, &keep, &reach);
}

/// Whether the root is a directory (without one nothing is reachable, and
/// the walk is skipped); mends the root's parent field, which must be 1.
fn check_root<D: PmDevice>(cx: &mut Ctx<'_, D>, scan: &Scan) -> bool {
    let l = cx.layout;
    let root_ok = scan
        .recs
        .get(&ROOT_INO)
        .is_some_and(|r| r.kind == Some(FileKind::Directory));
    if !root_ok {
        // Without a root nothing is reachable; freeing "unreachable"
        // inodes would empty the pool.
        cx.unfixable(
            "the namespace cannot be checked without a root directory: no inode is \
             reachable"
                .into(),
        );
        return false;
    }
    let root_parent = scan.recs[&ROOT_INO].disk.parent;
    if root_parent != ROOT_INO {
        let off = inode_off(&l, ROOT_INO) + OFF_PARENT;
        cx.fixable(
            format!("the root directory's parent field is {root_parent}, not 1"),
            "the parent is set to 1",
            |f| f.write(off, &ROOT_INO.to_le_bytes()),
        );
    }
    true
}

/// What the walk from the root reached: each inode's path, and the entries
/// that name each non-directory and each directory's subdirectories.
struct Reach {
    paths: FxHashMap<u64, String>,
    links: FxHashMap<u64, u32>,
    subdirs: FxHashMap<u64, u32>,
}

/// Breadth-first from the root; each directory is entered once, through
/// its chosen entry, so cycles end the walk instead of looping it.
fn walk(
    scan: &Scan,
    ents: &[Ent],
    by_dir: &FxHashMap<u64, Vec<usize>>,
    chosen: &FxHashMap<u64, usize>,
) -> Reach {
    let mut paths: FxHashMap<u64, String> = FxHashMap::default();
    paths.insert(ROOT_INO, "/".into());
    let mut links: FxHashMap<u64, u32> = FxHashMap::default();
    let mut subdirs: FxHashMap<u64, u32> = FxHashMap::default();
    let mut queue = vec![ROOT_INO];
    while let Some(d) = queue.pop() {
        let dir_path = paths[&d].clone();
        for &i in by_dir.get(&d).map(Vec::as_slice).unwrap_or_default() {
            let e = &ents[i];
            let path = format!("{dir_path}{}", Escaped(&e.name));
            if scan.recs[&e.ino].kind == Some(FileKind::Directory) {
                if chosen.get(&e.ino) == Some(&i) {
                    *subdirs.entry(d).or_default() += 1;
                    if paths.insert(e.ino, format!("{path}/")).is_none() {
                        queue.push(e.ino);
                    }
                }
            } else {
                *links.entry(e.ino).or_default() += 1;
                paths.entry(e.ino).or_insert(path);
            }
        }
    }

    Reach {
        paths,
        links,
        subdirs,
    }
}

/// Checks each live inode's link count against the entries the walk
/// found; an inode in use that the walk did not reach is freed, with the
/// entries that still name it.
fn check_links<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    scan: &mut Scan,
    ents: &[Ent],
    naming: &FxHashMap<u64, Vec<usize>>,
    keep: &[bool],
    reach: &Reach,
) {
    let l = cx.layout;
    let inos: Vec<u64> = scan.recs.keys().copied().collect();
    for ino in inos {
        let rec = &scan.recs[&ino];
        let Some(kind) = rec.kind.filter(|_| !rec.condemned) else {
            continue;
        };
        let nlink = rec.disk.nlink;
        if let Some(path) = reach.paths.get(&ino) {
            let want = if kind == FileKind::Directory {
                reach
                    .subdirs
                    .get(&ino)
                    .copied()
                    .unwrap_or(0)
                    .saturating_add(2)
            } else {
                reach.links.get(&ino).copied().unwrap_or(0)
            };
            if nlink != want {
                let off = inode_off(&l, ino) + OFF_NLINK;
                cx.fixable(
                    format!("inode {ino} ({path}) has link count {nlink} but should have {want}"),
                    &format!("the link count is set to {want}"),
                    |f| f.write(off, &want.to_le_bytes()),
                );
            }
        } else if nlink == 0 {
            cx.note(format!(
                "orphan inode {ino} (unlinked while open) will be freed at mount"
            ));
        } else {
            let generation = rec.disk.generation;
            let stale: Vec<usize> = naming
                .get(&ino)
                .into_iter()
                .flatten()
                .copied()
                .filter(|&i| keep[i])
                .collect();
            cx.fixable(
                format!(
                    "inode {ino} ({kind:?}, link count {nlink}) is in use but not reachable \
                     from the root"
                ),
                "the inode is freed (not reconnected)",
                |f| {
                    for &i in &stale {
                        f.zero(
                            ents[i].off,
                            ents[i].nslots * amber_format::dirent::SLOT_SIZE,
                        );
                    }
                    f.free_inode(&l, ino, generation);
                },
            );
            scan.recs.get_mut(&ino).expect("listed above").condemned = true;
        }
    }
}

/// Picks for each named directory the one entry that holds it (preferring
/// one in the directory its parent field names); the others are removed
/// and the parent field follows the choice.
fn choose_dir_entries<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    scan: &mut Scan,
    ents: &[Ent],
    naming: &FxHashMap<u64, Vec<usize>>,
    keep: &mut [bool],
) -> FxHashMap<u64, usize> {
    let l = cx.layout;
    let mut chosen = FxHashMap::default();
    let mut dirs: Vec<(&u64, &Vec<usize>)> = naming
        .iter()
        .filter(|(ino, _)| scan.recs[*ino].kind == Some(FileKind::Directory))
        .collect();
    dirs.sort_unstable();
    for (&ino, idxs) in dirs {
        let rec = scan.recs.get_mut(&ino).expect("entries name live inodes");
        let parent = rec.disk.parent;
        let pick = idxs
            .iter()
            .copied()
            .find(|&i| ents[i].dir == parent)
            .unwrap_or(idxs[0]);
        let holder = ents[pick].dir;
        if holder != parent {
            rec.disk.parent = holder;
            let off = inode_off(&l, ino) + OFF_PARENT;
            cx.fixable(
                format!(
                    "directory inode {ino} has parent field {parent} but its {} lives in \
                     directory inode {holder}",
                    ents[pick].show()
                ),
                &format!("the parent is set to {holder}"),
                |f| f.write(off, &holder.to_le_bytes()),
            );
        }
        for &i in idxs.iter().filter(|&&i| i != pick) {
            keep[i] = false;
            let (off, len) = (
                ents[i].off,
                ents[i].nslots * amber_format::dirent::SLOT_SIZE,
            );
            cx.fixable(
                format!(
                    "directory inode {ino} is also named by {} (a directory has one entry, {})",
                    ents[i].show(),
                    ents[pick].show()
                ),
                "the extra entry is removed",
                |f| f.zero(off, len),
            );
        }
        chosen.insert(ino, pick);
    }
    chosen
}
