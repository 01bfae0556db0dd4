//! Data policies: how file contents move between the caller and PM. The
//! core calls the mounted policy for every read, write, truncate and fsync
//! with the inode locked; a policy is chosen by name at mount
//! ([`by_name`]). To add one, implement [`DataPolicy`] in a module of its
//! own and add its name to [`by_name`] (ARCHITECTURE.md).

mod direct;

use crate::error::{FsError, Result};
use crate::fs::Core;
use crate::inode::InodeState;
use amber_pmem::PmDevice;

pub use direct::Direct;

/// A data path. Every method is called with the inode's write lock held
/// (read lock for `read`).
pub trait DataPolicy<D: PmDevice>: Send + Sync {
    /// The name it is selected by.
    fn name(&self) -> &'static str;

    /// Reads into `buf` from `off`; returns bytes read (0 at or past EOF).
    fn read(&self, fs: &Core<D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize>;

    /// Writes `data` at `off`, growing the file as needed. `sync` asks for
    /// the data to be durable on return (O_SYNC/O_DSYNC).
    fn write(
        &self,
        fs: &Core<D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize>;

    /// Sets the file's size, freeing blocks past it or exposing zeros.
    fn truncate(&self, fs: &Core<D>, st: &mut InodeState, size: u64) -> Result<()>;

    /// Allocates (zeroed) or punches out the blocks of `[off, off + len)`.
    fn fallocate(
        &self,
        fs: &Core<D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocMode,
    ) -> Result<()>;

    /// Whether a write made with `sync = true` leaves nothing for fsync to
    /// do (data, size and times durable on return). A front end that sends
    /// every write with `sync` may then skip fsync: the FUSE adapter tells
    /// the kernel fsync is not implemented, saving a round trip per call.
    fn sync_writes_are_complete(&self) -> bool;

    /// Makes everything written to this file durable.
    fn fsync(&self, fs: &Core<D>, st: &mut InodeState) -> Result<()>;
}

/// What fallocate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallocMode {
    /// Allocate zeroed blocks; grow the size unless `keep_size`.
    Allocate { keep_size: bool },
    /// Free the blocks of the range; it reads as zeros (size unchanged).
    PunchHole,
}

/// Names of the policies this build offers.
pub const POLICIES: &[&str] = &["direct"];

/// The policy called `name`.
pub fn by_name<D: PmDevice>(name: &str) -> Result<Box<dyn DataPolicy<D>>> {
    match name {
        "direct" => Ok(Box::new(Direct)),
        _ => Err(FsError::InvalidArgument("unknown policy (known: direct)")),
    }
}
