//! The operations the random tests apply, and how they are drawn. A small
//! name space (4 directory names, 6 file names, 2 symlink names, depth at
//! most 3) makes collisions and error paths common; offsets and lengths
//! cluster around 4 KiB block boundaries, with rare writes past 2 MiB so
//! the block map grows a level.

use super::rng::Rng;
use super::tree::Mode;

pub const DIRS: [&str; 4] = ["d0", "d1", "d2", "d3"];
pub const FILES: [&str; 6] = ["f0", "f1", "f2", "f3", "f4", "f5"];
pub const LINKS: [&str; 2] = ["l0", "l1"];
const BLOCK: u64 = 4096;
/// Open handles the single-threaded driver keeps.
pub const SLOTS: usize = 2;

/// Symlink targets: relative, absolute, dangling, through "..", a loop
/// (l0 -> l0 and l0 <-> l1 once both exist) and "." (the directory itself).
const TARGETS: [&str; 14] = [
    "f0", "f1", "d0", "d1", "d0/f2", "d1/d2", "/d0", "/d0/f1", "../f0", "..", ".", "l0", "l1",
    "nowhere",
];
/// Targets that stay inside the directory a thread owns (no "/", no "..").
const CONFINED_TARGETS: [&str; 9] = [
    "f0", "f1", "d0", "d1", "d0/f2", "d1/d2", "l0", "l1", "nowhere",
];
/// Modes set by set_permissions: plain, read-only, set-id (cleared by
/// writes) with and without group-execute, sticky.
const PERMS: [u32; 10] = [
    0o644, 0o600, 0o755, 0o700, 0o444, 0o4755, 0o2755, 0o2644, 0o6711, 0o1777,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    CreateFile {
        path: String,
        perm: u32,
    },
    Mkdir {
        path: String,
    },
    /// `create`: open with O_CREAT (no O_EXCL).
    Write {
        path: String,
        off: u64,
        len: u64,
        fill: u8,
        create: bool,
    },
    Append {
        path: String,
        len: u64,
        fill: u8,
        create: bool,
    },
    SetLen {
        path: String,
        size: u64,
    },
    Read {
        path: String,
    },
    ReadAt {
        path: String,
        off: u64,
        len: u64,
    },
    Unlink {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
        mode: Mode,
    },
    HardLink {
        orig: String,
        link: String,
    },
    Symlink {
        target: String,
        link: String,
    },
    ReadLink {
        path: String,
    },
    SetPerm {
        path: String,
        perm: u32,
    },
    Stat {
        path: String,
        follow: bool,
    },
    ReadDir {
        path: String,
    },
    /// Open `path` read-write into handle `slot` (closing what was there);
    /// the handle outlives renames and unlinks of the path.
    Open {
        path: String,
        slot: usize,
    },
    /// Write through the handle in `slot` (nothing if empty).
    HWrite {
        slot: usize,
        off: u64,
        len: u64,
        fill: u8,
    },
    /// Read the whole file and its link count through the handle.
    HRead {
        slot: usize,
    },
    Close {
        slot: usize,
    },
    /// Unmount cleanly and mount again.
    Remount,
    /// Drop the file system without unmounting and mount again.
    CrashRemount,
}

/// The bytes a write of `len` with `fill` stores: position-dependent so a
/// misplaced or reordered block shows.
pub fn pattern(len: u64, fill: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ ((i >> 12) as u8).wrapping_mul(7) ^ fill)
        .collect()
}

fn name(rng: &mut Rng, dirs: u64, files: u64, links: u64) -> &'static str {
    let r = rng.below(dirs + files + links);
    let pool: &[&'static str] = if r < dirs {
        &DIRS
    } else if r < dirs + files {
        &FILES
    } else {
        &LINKS
    };
    pool[rng.below(pool.len() as u64) as usize]
}

/// A path of depth 1..=3 whose last component is drawn with the given
/// weights. Intermediate components are mostly directory names, sometimes
/// a symlink (followed) or a file (NotADirectory).
fn path(rng: &mut Rng, dirs: u64, files: u64, links: u64) -> String {
    let depth = match rng.below(100) {
        0..=49 => 1,
        50..=84 => 2,
        _ => 3,
    };
    let mut p = String::new();
    for _ in 1..depth {
        p.push('/');
        p.push_str(name(rng, 90, 5, 5));
    }
    p.push('/');
    p.push_str(name(rng, dirs, files, links));
    p
}

fn any_path(rng: &mut Rng) -> String {
    path(rng, 35, 50, 15)
}

fn file_path(rng: &mut Rng) -> String {
    path(rng, 5, 85, 10)
}

fn offset(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=39 => rng.below(3 * BLOCK + 1),
        40..=64 => (rng.range(1, 6) * BLOCK).saturating_add_signed(rng.range(0, 64) as i64 - 32),
        65..=91 => rng.below(24 * 1024),
        92..=96 => rng.range(2 * 1024 * 1024 - 2 * BLOCK, 2 * 1024 * 1024 + 16 * BLOCK),
        _ => rng.range(0, 4 * 1024 * 1024),
    }
}

fn length(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=49 => rng.range(1, 3 * BLOCK),
        50..=69 => rng.range(1, 64),
        70..=89 => rng.range(1, 3) * BLOCK,
        _ => rng.range(1, 16),
    }
}

fn size(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=29 => rng.below(3 * BLOCK + 1),
        30..=49 => (rng.range(0, 5) * BLOCK).saturating_add_signed(rng.range(0, 8) as i64 - 4),
        50..=64 => 0,
        65..=89 => rng.below(5000),
        _ => rng.range(0, 3 * 1024 * 1024),
    }
}

impl Op {
    /// Draws one operation. `confined`: no absolute or ".." symlink
    /// targets and no remounts (a thread sharing the pool).
    // Tests are exempt from the 80-line limit: one arm per operation.
    #[allow(clippy::too_many_lines)]
    pub fn generate(rng: &mut Rng, confined: bool) -> Op {
        let fill = rng.next_u64() as u8;
        match rng.below(if confined { 1000 } else { 1076 }) {
            0..=89 => Op::CreateFile {
                path: file_path(rng),
                perm: *rng.pick(&[0o644, 0o600, 0o755, 0o4755]),
            },
            90..=159 => Op::Mkdir {
                path: path(rng, 85, 10, 5),
            },
            160..=309 => Op::Write {
                path: file_path(rng),
                off: offset(rng),
                len: length(rng),
                fill,
                create: rng.chance(50),
            },
            310..=369 => Op::Append {
                path: file_path(rng),
                len: length(rng),
                fill,
                create: rng.chance(50),
            },
            370..=429 => Op::SetLen {
                path: file_path(rng),
                size: size(rng),
            },
            430..=499 => Op::Read {
                path: any_path(rng),
            },
            500..=529 => Op::ReadAt {
                path: file_path(rng),
                off: offset(rng),
                len: length(rng),
            },
            530..=589 => Op::Unlink {
                path: any_path(rng),
            },
            590..=629 => Op::Rmdir {
                path: path(rng, 85, 10, 5),
            },
            630..=759 => {
                // Mostly a name of the same sort, so files do not keep
                // landing on directory names (which would make most later
                // paths fail with NotADirectory).
                let (d, f, l) = *rng.pick(&[(5, 90, 5), (90, 5, 5), (10, 20, 70)]);
                let from = path(rng, d, f, l);
                let to = match rng.below(100) {
                    0..=9 => from.clone(),
                    10..=17 => format!("{from}/{}", name(rng, 80, 20, 0)),
                    18..=29 => any_path(rng),
                    _ => path(rng, d, f, l),
                };
                let mode = match rng.below(10) {
                    0..=5 => Mode::Replace,
                    6..=7 => Mode::NoReplace,
                    _ => Mode::Exchange,
                };
                Op::Rename { from, to, mode }
            }
            760..=819 => Op::HardLink {
                orig: path(rng, 10, 75, 15),
                link: file_path(rng),
            },
            820..=859 => {
                let t = if confined {
                    &CONFINED_TARGETS[..]
                } else {
                    &TARGETS[..]
                };
                // Loops (l0, l1) are rarer, or they would break most paths.
                let target = if rng.chance(30) {
                    rng.pick(t)
                } else {
                    rng.pick(&t[..t.len() - 3])
                };
                Op::Symlink {
                    target: target.to_string(),
                    link: path(rng, 5, 15, 80),
                }
            }
            860..=889 => Op::ReadLink {
                path: path(rng, 10, 20, 70),
            },
            890..=919 => Op::SetPerm {
                path: any_path(rng),
                perm: *rng.pick(&PERMS),
            },
            920..=969 => Op::Stat {
                path: any_path(rng),
                follow: rng.chance(50),
            },
            970..=999 => Op::ReadDir {
                path: if rng.chance(20) {
                    "/".into()
                } else {
                    path(rng, 80, 5, 15)
                },
            },
            1000..=1007 => Op::Remount,
            1008..=1015 => Op::CrashRemount,
            1016..=1029 => Op::Open {
                path: file_path(rng),
                slot: rng.below(SLOTS as u64) as usize,
            },
            1030..=1054 => Op::HWrite {
                slot: rng.below(SLOTS as u64) as usize,
                off: offset(rng),
                len: length(rng),
                fill,
            },
            1055..=1067 => Op::HRead {
                slot: rng.below(SLOTS as u64) as usize,
            },
            _ => Op::Close {
                slot: rng.below(SLOTS as u64) as usize,
            },
        }
    }
}
