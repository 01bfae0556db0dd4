//! Mapped files: a program's `MAP_SHARED` mapping of a file shows the
//! file's own blocks on PM (design.md §16).
//!
//! A mapping *pins* the file blocks it shows below the end of file: from
//! the moment it is made until it is unmapped, those blocks stay where
//! they are. Every write to a pinned block goes in place
//! (`DataPolicy::write_in_place`), whatever the policy does with other
//! blocks, so `write()` and the mapping always meet on one PM page; a
//! policy's DRAM buffer and zone slices of those blocks, and a record
//! whose validity hangs on their bytes, are settled when they are pinned
//! (`DataPolicy::pin`). Holes under a mapping get zeroed blocks when it is
//! made, or when the file grows under it, since nothing runs when the
//! program first touches a page. Pages past the end of file raise SIGBUS,
//! as Linux's do; a shrink turns the pages it cuts off into such pages
//! before their blocks are freed. A mapping counts as an open handle, so
//! an unlinked file's blocks live until its last mapping goes.
//!
//! The table of every mapping (`table`), each file's mappings and the pins
//! they make (`file`), placing blocks into a window and following the
//! file's size (`place`), the write path over pinned blocks (`write`) and
//! the calls front ends make (`ops`).

mod file;
mod lease;
mod ops;
mod place;
mod sync;
mod table;
mod write;

pub(crate) use file::FileMaps;
pub use lease::{LeaseView, Run, WriteLease};
pub(crate) use table::MapTable;

/// A mapping's number, unique in the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MapId(pub u64);

/// What a front end asks to map (mmap's arguments, checked by it against
/// the open file: a writable shared mapping needs a descriptor open for
/// writing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapRequest {
    /// Byte offset in the file: a multiple of the block size.
    pub off: u64,
    /// Bytes mapped (rounded up to whole blocks).
    pub len: u64,
    /// `PROT_READ`, `PROT_WRITE`, `PROT_EXEC` as mmap takes them.
    pub prot: i32,
    /// Whether the handle allows writing, so `mprotect` may add
    /// `PROT_WRITE` later (Linux's VM_MAYWRITE).
    pub may_write: bool,
    /// `MAP_SYNC`: the file's metadata is durable before a page shows its
    /// block, so a store and a flush are durable without msync.
    pub sync: bool,
}

/// One mapping as the table knows it: its file, what of the file it
/// shows, and where, for a front end that placed it in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapInfo {
    /// Its number.
    pub id: MapId,
    /// The file it maps.
    pub ino: u64,
    /// The file offset of its first byte.
    pub off: u64,
    /// Its length in bytes (whole blocks).
    pub len: u64,
    /// The window's address, for a mapping shown in one.
    pub addr: Option<usize>,
    /// Its protection now.
    pub prot: i32,
    /// Whether the handle that made it allowed writing.
    pub may_write: bool,
    /// Whether it was made with `MAP_SYNC`.
    pub sync: bool,
}

/// Most mappings one mount keeps (Linux's default `vm.max_map_count` is
/// 65,530 for a whole process): a bound on the table and on every file's
/// list, whatever a program asks.
pub const MAX_MAPS: usize = 65_536;
