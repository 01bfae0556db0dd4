//! What a mapping turned out to be, for `amberfs info` and benchmark
//! reports: the same pool behaves very differently on tmpfs, a DAX file
//! system or a device-DAX node, and results are meaningless without it.

use std::fmt;
use std::path::PathBuf;

use crate::{FlushKind, NtWidth};

/// What backs a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// A file in the page cache (tmpfs or a non-DAX file system): stores
    /// reach storage only through the kernel.
    File,
    /// A file on a DAX-mounted file system mapped with `MAP_SYNC`: stores
    /// reach PM directly and file metadata is kept in sync by the kernel.
    DaxFile,
    /// A device-DAX character device (`/dev/daxX.Y`): the raw PM range.
    DevDax,
    /// Anonymous DRAM, for tests and benchmarks.
    Anonymous,
}

impl fmt::Display for MapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MapKind::File => "regular file (page cache, not DAX)",
            MapKind::DaxFile => "file on a DAX file system (MAP_SYNC)",
            MapKind::DevDax => "device-DAX",
            MapKind::Anonymous => "anonymous memory (DRAM)",
        })
    }
}

/// A description of one open device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapInfo {
    /// The pool's path; `None` for anonymous memory.
    pub path: Option<PathBuf>,
    /// What backs the mapping.
    pub kind: MapKind,
    /// Pool size in bytes.
    pub size: u64,
    /// Whether the kernel accepted `MAP_SYNC`.
    pub map_sync: bool,
    /// Whether the mapping starts on a 2 MiB boundary (huge pages possible).
    pub huge_page_aligned: bool,
    /// Whether the pool was opened read-only (every store refused).
    pub read_only: bool,
    /// How flushes reach the persistence domain.
    pub flush: FlushKind,
    /// Width of the streaming stores used by `write_nt`.
    pub nt_store: NtWidth,
    /// CPU model from `/proc/cpuinfo`.
    pub cpu_model: String,
}

/// The mapping's facts, one `key: value` line each. The path is left to
/// the caller, which prints it (escaped) beside the pool's other facts.
impl fmt::Display for MapInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        writeln!(f, "kind:              {}", self.kind)?;
        writeln!(
            f,
            "size:              {} bytes ({:.2} GiB)",
            self.size,
            self.size as f64 / f64::from(1u32 << 30)
        )?;
        writeln!(f, "map_sync:          {}", yes_no(self.map_sync))?;
        writeln!(f, "huge_page_aligned: {}", yes_no(self.huge_page_aligned))?;
        writeln!(f, "read_only:         {}", yes_no(self.read_only))?;
        writeln!(f, "flush:             {}", self.flush)?;
        writeln!(f, "nt_store:          {}", self.nt_store)?;
        write!(f, "cpu:               {}", self.cpu_model)
    }
}
