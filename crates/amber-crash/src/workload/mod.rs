//! Workloads: named, deterministic operation sequences that together touch
//! every namespace, attribute and data operation the core offers, plus a
//! seeded random mix. Ops name files by path so a workload reads like a
//! shell script and needs no inode numbers, which differ per run only if
//! the allocator changes.

mod atomic;
mod mapped;

pub use atomic::{atomic_random, ATOMIC_RANDOM_OPS};

use amber_core::RenameMode;
use amber_format::inode::flags;
use amber_format::Timespec;
use amber_sim::SplitMix64;
use std::collections::BTreeMap;
use std::fmt;

/// Where a write lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAt {
    Offset(u64),
    /// At the end of the file, decided under the inode lock (O_APPEND).
    Append,
}

/// One file-system operation. Paths are relative to the root, `/`-separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Mkdir {
        path: String,
    },
    /// A regular file (mknod with S_IFREG).
    Create {
        path: String,
    },
    Symlink {
        path: String,
        target: String,
    },
    Link {
        from: String,
        to: String,
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
        mode: RenameMode,
    },
    /// rename with RENAME_WHITEOUT: a whiteout (character device 0/0)
    /// takes the source name.
    RenameWhiteout {
        from: String,
        to: String,
    },
    Truncate {
        path: String,
        size: u64,
    },
    /// Writes `len` bytes derived from `seed`.
    Write {
        path: String,
        at: WriteAt,
        len: u64,
        seed: u64,
    },
    Chmod {
        path: String,
        perm: u32,
    },
    Chown {
        path: String,
        uid: u32,
        gid: u32,
    },
    Utimens {
        path: String,
        atime: Timespec,
        mtime: Timespec,
    },
    Fsync {
        path: String,
    },
    /// Opens `path` as handle number `handle` (an index the workload picks),
    /// so the file outlives an unlink until [`Op::Release`].
    Open {
        path: String,
        handle: usize,
    },
    /// Writes through an open handle, which reaches a file even after its
    /// last name is gone.
    WriteHandle {
        handle: usize,
        off: u64,
        len: u64,
        seed: u64,
    },
    Release {
        handle: usize,
    },
    /// Sets the inode flags (chattr): format::inode::flags bits.
    SetFlags {
        path: String,
        flags: u32,
    },
    /// Sets extended attribute `name` to `len` bytes derived from `seed`.
    SetXattr {
        path: String,
        name: String,
        len: usize,
        seed: u64,
    },
    /// Sets extended attribute `name` to the text `value` (Amber's own
    /// `user.amberfs.` attributes, whose values are words).
    SetXattrTo {
        path: String,
        name: String,
        value: String,
    },
    RemoveXattr {
        path: String,
        name: String,
    },
    /// setfacl: the access ACL (or the default one) of `path` set to
    /// `acl` in getfacl's short text form (empty: removed).
    SetAcl {
        path: String,
        default: bool,
        acl: String,
    },
    /// fallocate: zeroed blocks over the range, growing the size unless
    /// `keep_size`.
    Fallocate {
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
    },
    /// fallocate(PUNCH_HOLE | KEEP_SIZE).
    Punch {
        path: String,
        off: u64,
        len: u64,
    },
    /// fallocate(ZERO_RANGE): the range zeroed and allocated, growing the
    /// size unless `keep_size`.
    ZeroRange {
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
    },
    /// A write with O_SYNC: durable on return under every policy.
    WriteSync {
        path: String,
        off: u64,
        len: u64,
        seed: u64,
    },
    /// Another process takes a write lease on `path` (design.md §17.4):
    /// until `LeaseReturn`, no op of the workload may change the file but
    /// `LeaseWrite`s.
    LeaseGrant {
        path: String,
    },
    /// Writes `len` bytes derived from `seed` at `off` under the lease on
    /// `path`, as its holder does: an own commit into a granted block. An
    /// overwrite inside one block below the size; durable and atomic on
    /// return, before the daemon knows of it.
    LeaseWrite {
        path: String,
        off: u64,
        len: u64,
        seed: u64,
    },
    /// Sets `path`'s size under the lease on it, as its holder's
    /// `ftruncate` does (design.md §17.11): durable and atomic on return;
    /// a shrink gives the lease back at once, as the holder does.
    LeaseTruncate {
        path: String,
        size: u64,
    },
    /// Allocates `[off, off + len)` of `path` under the lease on it, as
    /// its holder's `fallocate` (mode 0, or `FALLOC_FL_KEEP_SIZE`) does
    /// (design.md §17.11): holes filled with zeros, durable on return.
    LeaseAllocate {
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
    },
    /// The lease on `path` comes back: the daemon adopts its writes.
    LeaseReturn {
        path: String,
    },
    /// Writes back up to `blocks` blocks the policy buffers in DRAM, as
    /// its background threads would (nothing under `direct`).
    WriteBack {
        blocks: u64,
    },
    /// syncfs: every file's data and metadata durable.
    SyncAll,
    /// Maps `len` bytes of `path` from `off`, shared and writable, as
    /// mapping number `map` (a library mapping: the crash simulator sees
    /// its stores, design.md §16.1).
    Map {
        path: String,
        map: usize,
        off: u64,
        len: u64,
    },
    /// Stores `len` bytes derived from `seed` at byte `off` of mapping
    /// `map`, as a program's stores through it land: not durable until
    /// msync or fsync.
    MapStore {
        map: usize,
        off: u64,
        len: u64,
        seed: u64,
    },
    /// msync(MS_SYNC) of mapping `map`.
    Msync {
        map: usize,
    },
    /// munmap of mapping `map`.
    Unmap {
        map: usize,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Mkdir { path } => write!(f, "mkdir {path}"),
            Op::Create { path } => write!(f, "create {path}"),
            Op::Symlink { path, target } => {
                write!(f, "symlink {path} -> ({} bytes) {target:.40}", target.len())
            }
            Op::Link { from, to } => write!(f, "link {from} {to}"),
            Op::Unlink { path } => write!(f, "unlink {path}"),
            Op::Rmdir { path } => write!(f, "rmdir {path}"),
            Op::Rename { from, to, mode } => write!(f, "rename({mode:?}) {from} {to}"),
            Op::RenameWhiteout { from, to } => write!(f, "rename(Whiteout) {from} {to}"),
            Op::Truncate { path, size } => write!(f, "truncate {path} {size}"),
            Op::Write {
                path,
                at,
                len,
                seed,
            } => match at {
                WriteAt::Offset(o) => write!(f, "write {path} @{o} len {len} seed {seed}"),
                WriteAt::Append => write!(f, "append {path} len {len} seed {seed}"),
            },
            Op::Chmod { path, perm } => write!(f, "chmod {perm:o} {path}"),
            Op::Chown { path, uid, gid } => write!(f, "chown {uid}:{gid} {path}"),
            Op::Utimens { path, atime, mtime } => write!(
                f,
                "utimens {path} atime {}.{:09} mtime {}.{:09}",
                atime.secs, atime.nsecs, mtime.secs, mtime.nsecs
            ),
            Op::Fsync { path } => write!(f, "fsync {path}"),
            Op::SetFlags { path, flags } => write!(f, "set flags {path} {flags:#x}"),
            Op::Open { path, handle } => write!(f, "open {path} as #{handle}"),
            Op::WriteHandle {
                handle,
                off,
                len,
                seed,
            } => write!(f, "write #{handle} @{off} len {len} seed {seed}"),
            Op::Release { handle } => write!(f, "release #{handle}"),
            Op::SetXattr {
                path,
                name,
                len,
                seed,
            } => write!(f, "setxattr {path} {name} len {len} seed {seed}"),
            Op::SetXattrTo { path, name, value } => write!(f, "setxattr {path} {name}={value}"),
            Op::RemoveXattr { path, name } => write!(f, "removexattr {path} {name}"),
            Op::SetAcl { path, default, acl } => {
                let which = if *default { "-d " } else { "" };
                write!(f, "setfacl {which}{path} {acl:?}")
            }
            Op::Fallocate { .. } | Op::Punch { .. } | Op::ZeroRange { .. } => self.fmt_space_op(f),
            Op::WriteSync {
                path,
                off,
                len,
                seed,
            } => write!(f, "write O_SYNC {path} @{off} len {len} seed {seed}"),
            Op::LeaseGrant { .. }
            | Op::LeaseWrite { .. }
            | Op::LeaseTruncate { .. }
            | Op::LeaseAllocate { .. }
            | Op::LeaseReturn { .. } => self.fmt_lease_op(f),
            Op::WriteBack { blocks } => write!(f, "write back {blocks} block(s)"),
            Op::SyncAll => write!(f, "syncfs"),
            Op::Map { .. } | Op::MapStore { .. } | Op::Msync { .. } | Op::Unmap { .. } => {
                self.fmt_map_op(f)
            }
        }
    }
}

impl Op {
    /// How an op allocating or freeing a file's space reads.
    fn fmt_space_op(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Fallocate {
                path,
                off,
                len,
                keep_size,
            } => write!(f, "fallocate {path} @{off} len {len} keep_size {keep_size}"),
            Op::Punch { path, off, len } => write!(f, "punch {path} @{off} len {len}"),
            Op::ZeroRange {
                path,
                off,
                len,
                keep_size,
            } => write!(
                f,
                "zero range {path} @{off} len {len} keep_size {keep_size}"
            ),
            _ => unreachable!("Display sends only space ops here"),
        }
    }

    /// How an op of another process's write lease reads.
    fn fmt_lease_op(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::LeaseGrant { path } => write!(f, "write lease on {path}"),
            Op::LeaseWrite {
                path,
                off,
                len,
                seed,
            } => write!(f, "leased write {path} @{off} len {len} seed {seed}"),
            Op::LeaseTruncate { path, size } => write!(f, "leased truncate {path} {size}"),
            Op::LeaseAllocate {
                path,
                off,
                len,
                keep_size,
            } => {
                let keep = if *keep_size { " keep-size" } else { "" };
                write!(f, "leased fallocate{keep} {path} @{off} len {len}")
            }
            Op::LeaseReturn { path } => write!(f, "return the lease on {path}"),
            _ => unreachable!("Display sends only lease ops here"),
        }
    }

    /// How an op on a mapping reads.
    fn fmt_map_op(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Map {
                path,
                map,
                off,
                len,
            } => write!(f, "map {path} @{off} len {len} as #{map}"),
            Op::MapStore {
                map,
                off,
                len,
                seed,
            } => write!(f, "store through #{map} @{off} len {len} seed {seed}"),
            Op::Msync { map } => write!(f, "msync #{map}"),
            Op::Unmap { map } => write!(f, "munmap #{map}"),
            _ => unreachable!("Display sends only ops on mappings here"),
        }
    }
}

/// A workload and whether its ops may fail: a named workload is written to
/// succeed step by step, so a failing op there means the harness is no
/// longer testing what it claims to; random ops are expected to fail often
/// (and a failed op must leave the pool unchanged, which the oracle checks).
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub ops: Vec<Op>,
    pub tolerate_errors: bool,
}

impl Workload {
    /// Whether it maps a file: stores through a mapping are durable only
    /// at msync or fsync and writes over mapped blocks go in place, so
    /// such a run is judged as buffering, byte-wise and unordered under
    /// every policy (design.md §16.5).
    pub fn maps_files(&self) -> bool {
        self.ops.iter().any(|o| matches!(o, Op::Map { .. }))
    }
}

/// Every named workload, in the order `all` runs them.
pub const NAMES: &[&str] = &[
    "files",
    "dirs",
    "rename",
    "links",
    "truncate",
    "writes",
    "appends",
    "attrs",
    "orphan",
    "xattrs",
    "acls",
    "fallocate",
    "buffered",
    "durability",
    "writeback",
    "atomic",
    "atomic-random",
    "zone-pressure",
    "log-gc",
    "mapped",
    "random",
];

/// Ops of the `random` workload; enough to reach renames over non-empty
/// trees and hard links to renamed files, small enough for CI.
pub const RANDOM_OPS: usize = 40;

fn s(p: &str) -> String {
    p.to_string()
}

fn mkdir(p: &str) -> Op {
    Op::Mkdir { path: s(p) }
}

fn create(p: &str) -> Op {
    Op::Create { path: s(p) }
}

fn write(p: &str, off: u64, len: u64, seed: u64) -> Op {
    Op::Write {
        path: s(p),
        at: WriteAt::Offset(off),
        len,
        seed,
    }
}

fn append(p: &str, len: u64, seed: u64) -> Op {
    Op::Write {
        path: s(p),
        at: WriteAt::Append,
        len,
        seed,
    }
}

fn rename(from: &str, to: &str, mode: RenameMode) -> Op {
    Op::Rename {
        from: s(from),
        to: s(to),
        mode,
    }
}

fn truncate(p: &str, size: u64) -> Op {
    Op::Truncate { path: s(p), size }
}

fn unlink(p: &str) -> Op {
    Op::Unlink { path: s(p) }
}

fn rmdir(p: &str) -> Op {
    Op::Rmdir { path: s(p) }
}

fn files() -> Vec<Op> {
    vec![
        create("a"),
        mkdir("d"),
        create("d/b"),
        write("d/b", 0, 100, 1),
        unlink("a"),
        // The slot "a" freed is reused by a new entry.
        create("c"),
        unlink("d/b"),
        Op::Fsync { path: s("c") },
    ]
}

/// A 240-byte name takes 4 of a block's 64 dirent slots, so 17 of them
/// force the directory onto a second block.
fn long_name(i: usize) -> String {
    format!("{i:03}{}", "n".repeat(237))
}

fn dirs() -> Vec<Op> {
    let mut ops = vec![mkdir("a"), mkdir("a/b"), mkdir("a/b/c"), create("a/b/f")];
    for i in 0..17 {
        ops.push(create(&format!("a/{}", long_name(i))));
    }
    ops.push(unlink(&format!("a/{}", long_name(3))));
    ops.push(create("a/short"));
    ops.push(rmdir("a/b/c"));
    ops.push(unlink("a/b/f"));
    ops.push(rmdir("a/b"));
    ops
}

fn renames() -> Vec<Op> {
    use RenameMode::{Exchange, NoReplace, Replace};
    vec![
        mkdir("x"),
        mkdir("y"),
        create("x/f"),
        write("x/f", 0, 300, 2),
        create("x/g"),
        rename("x/f", "x/f2", Replace),
        rename("x/f2", "y/f", Replace),
        // Replacing an existing file frees the old target.
        rename("x/g", "y/f", Replace),
        mkdir("x/sub"),
        create("x/sub/inner"),
        // A directory moves across parents: its ".." changes too.
        rename("x/sub", "y/sub", Replace),
        mkdir("x/empty"),
        mkdir("y/victim"),
        rename("x/empty", "y/victim", Replace),
        rename("y/f", "x/nr", NoReplace),
        mkdir("y/dd"),
        rename("x/nr", "y/dd", Exchange),
        mkdir("x/e1"),
        create("x/e1/in1"),
        rename("x/e1", "y/sub", Exchange),
        // Whiteouts (overlayfs): to a new name in another directory, over
        // an existing file in the same directory, a directory.
        create("x/w"),
        write("x/w", 0, 100, 5),
        whiteout("x/w", "y/w"),
        create("y/t"),
        whiteout("y/w", "y/t"),
        mkdir("x/wd"),
        create("x/wd/in"),
        whiteout("x/wd", "y/wd"),
    ]
}

fn whiteout(from: &str, to: &str) -> Op {
    Op::RenameWhiteout {
        from: s(from),
        to: s(to),
    }
}

fn links() -> Vec<Op> {
    vec![
        mkdir("d"),
        create("f"),
        write("f", 0, 500, 3),
        Op::Link {
            from: s("f"),
            to: s("g"),
        },
        Op::Link {
            from: s("f"),
            to: s("d/h"),
        },
        unlink("f"),
        // Renaming one name of an inode over another name of it does
        // nothing (POSIX).
        rename("g", "d/h", RenameMode::Replace),
        Op::Symlink {
            path: s("s"),
            target: s("d/h"),
        },
        Op::Symlink {
            path: s("d/long"),
            target: format!("{}/end", "segment".repeat(20)),
        },
        rename("d/long", "l2", RenameMode::Replace),
        unlink("s"),
        unlink("l2"),
        unlink("g"),
        unlink("d/h"),
    ]
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

fn truncates() -> Vec<Op> {
    vec![
        create("t"),
        write("t", 0, 100, 4),
        truncate("t", 3000),
        // Past 4 KiB: the map grows from a bare block to a node.
        truncate("t", 10 * KIB),
        write("t", 5000, 100, 5),
        // Past 2 MiB: a second level of map nodes.
        truncate("t", 2 * MIB + 100),
        write("t", 2 * MIB + 10, 50, 6),
        truncate("t", 5000),
        truncate("t", 100),
        truncate("t", 0),
    ]
}

fn writes() -> Vec<Op> {
    vec![
        create("w"),
        append("w", 100, 7),
        append("w", 9000, 8),
        // Past EOF: the gap must read as zeros.
        write("w", 20 * KIB, 100, 9),
        // Into the hole the gap left, inside EOF.
        write("w", 13 * KIB, 2000, 10),
        write("w", 50, 20, 11),
        write("w", 1000, 10 * KIB, 12),
        write("w", 4090, 12, 13),
        Op::Fsync { path: s("w") },
    ]
}

/// Sequential appends, whole blocks and partial ones, in two files
/// interleaved: under hunter and amber each run that continues its
/// queue's last update extends it (design §12.2 step 5), so crashes land
/// in persists of merged runs, and appends that start inside a partial
/// last block and run past it write that block's part in place.
fn appends() -> Vec<Op> {
    vec![
        create("s"),
        append("s", 4 * KIB, 1),
        append("s", 8 * KIB, 2),
        fsync("s"),
        append("s", 1000, 3),
        // From inside the partial last block past it, as a WAL frame.
        append("s", 4120, 8),
        append("s", 3096, 4),
        create("t"),
        append("t", 4 * KIB, 5),
        append("s", 4 * KIB, 6),
        append("t", 4 * KIB, 7),
        Op::SyncAll,
    ]
}

fn fsync(p: &str) -> Op {
    Op::Fsync { path: s(p) }
}

fn write_sync(p: &str, off: u64, len: u64, seed: u64) -> Op {
    Op::WriteSync {
        path: s(p),
        off,
        len,
        seed,
    }
}

/// Buffered writes (under a buffering policy): partial lines and blocks,
/// appends, a gap past EOF, then fsyncs that write them back (crashes in
/// the middle of fsync), O_SYNC writes over buffered blocks, truncates
/// over buffered data, and namespace ops on files with unsynced data.
fn buffered() -> Vec<Op> {
    vec![
        create("a"),
        create("b"),
        write("a", 0, 6000, 1),
        write("a", 100, 10, 2),
        append("a", 300, 3),
        fsync("a"),
        write("a", 10, 70, 4),
        write("a", 9 * KIB, 5000, 5),
        write("b", 0, 3000, 6),
        Op::Chmod {
            path: s("a"),
            perm: 0o600,
        },
        write_sync("a", 2000, 200, 7),
        fsync("a"),
        append("b", 5000, 8),
        Op::Truncate {
            path: s("b"),
            size: 4000,
        },
        Op::Rename {
            from: s("b"),
            to: s("c"),
            mode: RenameMode::Replace,
        },
        write("c", 6 * KIB, 100, 9),
        Op::Unlink { path: s("c") },
        write("a", 0, 64, 10),
        Op::SyncAll,
    ]
}

fn set_durability(p: &str, value: &str) -> Op {
    Op::SetXattrTo {
        path: s(p),
        name: s("user.amberfs.durability"),
        value: s(value),
    }
}

/// Per-file durability: a `sync` directory passes it to a file and a
/// nested directory in their creating transactions, and their writes
/// (overwrites, appends, a gap) are durable when they return even under a
/// buffering policy; a `lazy` file's fsync makes nothing durable (the
/// oracle then expects nothing of it) until syncfs; a file set back to
/// posix buffers again.
fn durability() -> Vec<Op> {
    vec![
        mkdir("d"),
        set_durability("d", "sync"),
        create("d/s"),
        write("d/s", 0, 6000, 1),
        write("d/s", 100, 10, 2),
        append("d/s", 300, 3),
        write("d/s", 12 * KIB, 100, 4),
        mkdir("d/e"),
        create("d/e/n"),
        write("d/e/n", 0, 5000, 5),
        create("l"),
        set_durability("l", "lazy"),
        write("l", 0, 5000, 6),
        fsync("l"),
        write("l", 100, 10, 7),
        fsync("l"),
        Op::RemoveXattr {
            path: s("d/s"),
            name: s("user.amberfs.durability"),
        },
        write("d/s", 50, 70, 8),
        fsync("d/s"),
        Op::SetXattrTo {
            path: s("d"),
            name: s("user.amberfs.atomicity"),
            value: s("none"),
        },
        Op::SyncAll,
    ]
}

/// Background write-back: blocks of two files written back oldest
/// first, one at a time and in bulk, with later writes racing ahead of
/// the durable size (crashes in the middle of write-back).
fn writeback() -> Vec<Op> {
    vec![
        create("x"),
        create("y"),
        write("x", 0, 3 * KIB, 1),
        write("y", 0, 2 * KIB, 2),
        write("x", 8 * KIB, 5 * KIB, 3),
        Op::WriteBack { blocks: 1 },
        write("x", 4 * KIB, 100, 4),
        Op::WriteBack { blocks: 2 },
        append("y", 7000, 5),
        fsync("x"),
        write("x", 1000, 10, 6),
        Op::WriteBack { blocks: 16 },
        write("y", 100, 10, 7),
        Op::SyncAll,
    ]
}

fn setx(p: &str, name: &str, len: usize, seed: u64) -> Op {
    Op::SetXattr {
        path: s(p),
        name: s(name),
        len,
        seed,
    }
}

/// Extended attributes: the first one allocates the block, later ones
/// rewrite it in place through the journal, one that outgrows the block
/// moves the list to a run (the pool's first: its feature bit is set) and
/// another run, a removal brings it back to one block, the last removal
/// frees it; on a file, a directory and a symlink.
fn xattrs() -> Vec<Op> {
    vec![
        mkdir("d"),
        create("d/f"),
        setx("d/f", "user.a", 10, 1),
        setx("d/f", "user.b", 1000, 2),
        setx("d/f", "user.big", 5000, 7),
        setx("d/f", "user.big", 9000, 8),
        Op::RemoveXattr {
            path: s("d/f"),
            name: s("user.big"),
        },
        setx("d/f", "user.a", 3000, 3),
        setx("d", "trusted.t", 5, 4),
        Op::RemoveXattr {
            path: s("d/f"),
            name: s("user.b"),
        },
        Op::RemoveXattr {
            path: s("d/f"),
            name: s("user.a"),
        },
        Op::Symlink {
            path: s("l"),
            target: s("d/f"),
        },
        setx("l", "security.s", 64, 5),
        Op::Unlink { path: s("d/f") },
    ]
}

fn setfacl(p: &str, default: bool, acl: &str) -> Op {
    Op::SetAcl {
        path: s(p),
        default,
        acl: s(acl),
    }
}

/// POSIX ACLs: a default ACL on a directory (its first attribute: the
/// block is allocated), files and a directory created under it take their
/// ACLs and modes in their creating transactions, an access ACL sets the
/// mode with it, chmod rewrites the ACL with the mode, an ACL the mode
/// says alone is removed, and the default is removed.
fn acls() -> Vec<Op> {
    vec![
        mkdir("d"),
        setfacl("d", true, "u::rwx,u:7:rwx,g::r-x,m::rwx,o::r-x"),
        create("d/f"),
        mkdir("d/sub"),
        create("d/sub/g"),
        setfacl("d/f", false, "u::rw-,u:7:r--,g::r--,g:9:rw-,m::rw-,o::---"),
        Op::Chmod {
            path: s("d/f"),
            perm: 0o640,
        },
        setx("d/f", "user.x", 2000, 6),
        setfacl("d/sub/g", false, "u::rwx,g::r--,o::---"),
        setfacl("d", true, ""),
        create("d/h"),
        Op::Unlink { path: s("d/f") },
    ]
}

/// fallocate: allocation with and without keep-size, filling holes inside
/// the size, punching whole and partial blocks, zeroing ranges over data,
/// holes and the end of the file.
fn fallocates() -> Vec<Op> {
    let fa = |off, len, keep_size| Op::Fallocate {
        path: s("f"),
        off,
        len,
        keep_size,
    };
    let zero = |off, len, keep_size| Op::ZeroRange {
        path: s("f"),
        off,
        len,
        keep_size,
    };
    vec![
        create("f"),
        write("f", 0, 100, 1),
        fa(0, 3 * KIB, false),
        fa(8 * KIB, 8 * KIB, false),
        fa(64 * KIB, 4 * KIB, true),
        write("f", 16 * KIB, 5000, 2),
        Op::Punch {
            path: s("f"),
            off: 50,
            len: 9000,
        },
        Op::Punch {
            path: s("f"),
            off: 0,
            len: 4 * KIB,
        },
        write("f", 4 * KIB, 12 * KIB, 3),
        // Partial blocks at both ends and whole ones inside, some of them
        // holes the punches left.
        zero(3000, 10 * KIB, false),
        // Across the end: the size grows over zeros.
        zero(20 * KIB, 8 * KIB, false),
        // Past the end, keeping the size: blocks only.
        zero(40 * KIB, 8 * KIB, true),
        truncate("f", 100 * KIB),
    ]
}

fn attrs() -> Vec<Op> {
    let t = |secs| Timespec { secs, nsecs: 5 };
    vec![
        mkdir("d"),
        create("d/f"),
        Op::Symlink {
            path: s("l"),
            target: s("d/f"),
        },
        Op::Chmod {
            path: s("d/f"),
            perm: 0o600,
        },
        Op::Chmod {
            path: s("d"),
            perm: 0o700,
        },
        Op::Chown {
            path: s("d/f"),
            uid: 1234,
            gid: 5678,
        },
        Op::Chown {
            path: s("l"),
            uid: 7,
            gid: 8,
        },
        Op::Utimens {
            path: s("d/f"),
            atime: t(1_000_000),
            mtime: t(2_000_000),
        },
        Op::Utimens {
            path: s("d"),
            atime: t(3),
            mtime: t(4),
        },
        // chattr: append-only, an append, immutable on a directory, and
        // both cleared.
        set_flags("d/f", flags::APPEND),
        Op::Write {
            path: s("d/f"),
            at: WriteAt::Append,
            len: 300,
            seed: 9,
        },
        set_flags("d", flags::IMMUTABLE),
        set_flags("d/f", flags::APPEND | flags::IMMUTABLE),
        set_flags("d/f", 0),
        set_flags("d", 0),
    ]
}

fn set_flags(path: &str, flags: u32) -> Op {
    Op::SetFlags {
        path: s(path),
        flags,
    }
}

fn orphan() -> Vec<Op> {
    vec![
        create("o"),
        write("o", 0, 6000, 14),
        Op::Open {
            path: s("o"),
            handle: 0,
        },
        // The last name goes while the file is open: an orphan.
        unlink("o"),
        Op::WriteHandle {
            handle: 0,
            off: 6000,
            len: 5000,
            seed: 15,
        },
        Op::Release { handle: 0 },
        create("p"),
        Op::Open {
            path: s("p"),
            handle: 1,
        },
        unlink("p"),
    ]
}

/// What the generator believes exists, to aim most random ops at real
/// paths; wrong guesses just make an op fail, which is also tested.
struct Model {
    nodes: BTreeMap<String, Kind>,
}

/// What the generator believes a path is. Data ops go to regular files
/// only, as a front end's file handles do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
}

impl Model {
    fn pick(&self, r: &mut SplitMix64, want: impl Fn(Kind) -> bool) -> Option<String> {
        let v: Vec<&String> = self
            .nodes
            .iter()
            .filter(|(_, k)| want(**k))
            .map(|(p, _)| p)
            .collect();
        (!v.is_empty()).then(|| v[r.below(v.len() as u64) as usize].clone())
    }

    fn parent(&self, r: &mut SplitMix64) -> String {
        let n = self.nodes.values().filter(|k| **k == Kind::Dir).count() as u64;
        match r.below(n + 1) {
            0 => String::new(),
            _ => self
                .pick(r, |k| k == Kind::Dir)
                .expect("a directory exists"),
        }
    }

    fn fresh(&self, r: &mut SplitMix64, prefix: &str) -> String {
        let parent = self.parent(r);
        let name = format!("{prefix}{}", r.below(1000));
        if parent.is_empty() {
            name
        } else {
            format!("{parent}/{name}")
        }
    }

    /// A fresh path under a random directory, now a `kind` in the model.
    fn add(&mut self, r: &mut SplitMix64, prefix: &str, kind: Kind) -> String {
        let p = self.fresh(r, prefix);
        self.nodes.insert(p.clone(), kind);
        p
    }

    /// A rename of the file `f` or the directory `d` (whichever a coin
    /// picks among those that exist), replacing, no-replace or exchange;
    /// None when the model has nothing to rename or to exchange with.
    fn random_rename(
        &mut self,
        r: &mut SplitMix64,
        f: Option<String>,
        d: Option<String>,
    ) -> Option<Op> {
        let from = match (r.below(2), f, d) {
            (0, Some(f), _) | (1, Some(f), None) => f,
            (_, _, Some(d)) => d,
            _ => return None,
        };
        let mode = match r.below(4) {
            0 => RenameMode::NoReplace,
            1 => RenameMode::Exchange,
            _ => RenameMode::Replace,
        };
        let to = if mode == RenameMode::Exchange {
            let dirs = r.below(2) == 0;
            self.pick(r, |k| (k == Kind::Dir) == dirs)?
        } else {
            self.fresh(r, "r")
        };
        if mode != RenameMode::Exchange {
            self.rename(&from, &to);
        }
        Some(Op::Rename { from, to, mode })
    }

    fn remove(&mut self, p: &str) {
        let under = format!("{p}/");
        self.nodes
            .retain(|k, _| k.as_str() != p && !k.starts_with(&under));
    }

    fn rename(&mut self, from: &str, to: &str) {
        if to == from || to.starts_with(&format!("{from}/")) {
            return;
        }
        let under = format!("{from}/");
        let moved: Vec<(String, Kind)> = self
            .nodes
            .iter()
            .filter(|(k, _)| k.as_str() == from || k.starts_with(&under))
            .map(|(k, d)| (format!("{to}{}", &k[from.len()..]), *d))
            .collect();
        self.remove(from);
        self.remove(to);
        self.nodes.extend(moved);
    }
}

/// The `random` workload for `seed`: a reproducible mix over a small tree.
pub fn random(seed: u64, ops: usize) -> Vec<Op> {
    let mut r = SplitMix64::new(seed ^ 0x5EED_0F0F_A11C_E5ED);
    let mut m = Model {
        nodes: BTreeMap::new(),
    };
    let mut out = Vec::with_capacity(ops);
    for _ in 0..ops {
        let file = m.pick(&mut r, |k| k == Kind::File);
        let dir = m.pick(&mut r, |k| k == Kind::Dir);
        let op = match (r.below(12), file, dir) {
            (0 | 1, _, _) => Op::Create {
                path: m.add(&mut r, "f", Kind::File),
            },
            (2, _, _) => Op::Mkdir {
                path: m.add(&mut r, "d", Kind::Dir),
            },
            (3, Some(f), _) => Op::Write {
                path: f,
                at: if r.below(2) == 0 {
                    WriteAt::Append
                } else {
                    WriteAt::Offset(r.below(12 * KIB))
                },
                len: 1 + r.below(6 * KIB),
                seed: r.next_u64(),
            },
            (4, Some(f), _) => Op::Truncate {
                path: f,
                size: r.below(16 * KIB),
            },
            (5, Some(f), _) => {
                let to = m.add(&mut r, "h", Kind::File);
                Op::Link { from: f, to }
            }
            (6, Some(f), _) => {
                m.remove(&f);
                Op::Unlink { path: f }
            }
            (7, _, Some(d)) => {
                let empty = !m.nodes.keys().any(|k| k.starts_with(&format!("{d}/")));
                if empty {
                    m.remove(&d);
                }
                Op::Rmdir { path: d }
            }
            (8 | 9, f, d) => match m.random_rename(&mut r, f, d) {
                Some(op) => op,
                None => continue,
            },
            (10, _, _) => {
                let p = m.add(&mut r, "s", Kind::Symlink);
                let len = if r.below(2) == 0 { 8 } else { 150 };
                Op::Symlink {
                    path: p,
                    target: "t".repeat(len),
                }
            }
            (11, Some(f), _) => Op::Chmod {
                path: f,
                perm: 0o600 + r.below(0o100) as u32,
            },
            _ => Op::Create {
                path: m.add(&mut r, "f", Kind::File),
            },
        };
        out.push(op);
    }
    out
}

/// The workload called `name`, or None if there is none.
pub fn named(name: &str, seed: u64) -> Option<Workload> {
    let ops = match name {
        "files" => files(),
        "dirs" => dirs(),
        "rename" => renames(),
        "links" => links(),
        "truncate" => truncates(),
        "writes" => writes(),
        "appends" => appends(),
        "attrs" => attrs(),
        "orphan" => orphan(),
        "xattrs" => xattrs(),
        "acls" => acls(),
        "fallocate" => fallocates(),
        "buffered" => buffered(),
        "durability" => durability(),
        "writeback" => writeback(),
        "atomic" => atomic::atomic(),
        "atomic-random" => atomic_random(seed, ATOMIC_RANDOM_OPS),
        "zone-pressure" => atomic::zone_pressure(),
        "log-gc" => atomic::log_gc(),
        "mapped" => mapped::mapped(),
        "random" => random(seed, RANDOM_OPS),
        _ => return None,
    };
    Some(Workload {
        name: name.to_string(),
        ops,
        tolerate_errors: name == "random",
    })
}
