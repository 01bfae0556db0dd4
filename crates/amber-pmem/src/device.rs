//! The one interface through which every byte reaches persistent memory.
//!
//! All file-system code is generic over [`PmDevice`]; the real mapping, the
//! emulator and the crash simulator's recording device all implement it, so
//! the same code runs on each (redb's `StorageBackend`, TigerBeetle's
//! `Storage`). Offsets are byte offsets from the start of the pool.
//!
//! Persistence model (libpmem2's): a store becomes durable only after it has
//! been *flushed* (written back from the CPU cache) and a *drain* (store
//! fence) has ordered it. Non-temporal stores bypass the cache and need only
//! the drain. Callers batch many flushes before one drain.

use crate::stats::WriteStats;
use crate::window::PoolPages;

/// Size of a CPU cache line, the unit of flushing and of crash atomicity
/// (stores to one line persist in program order, as a prefix).
pub const CACHE_LINE: u64 = 64;

/// A persist could not be completed; the device is poisoned and every later
/// drain fails too (redb's `PreviousIo`): the caller must stop writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistError {
    /// What failed, in words a user can act on.
    pub reason: String,
    /// Whether the medium failed or the device refused the stores.
    pub kind: PersistErrorKind,
}

/// Why a persist failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PersistErrorKind {
    /// The medium or the kernel failed to make stores durable (msync
    /// EIO, an injected failure): written data may be lost.
    Media,
    /// The device takes no stores (a pool mapped read-only, a DRAM
    /// overlay at its limit): the stores were dropped, the pool is as it
    /// was.
    Refused,
}

impl PersistError {
    /// A failure of the medium.
    pub fn media(reason: impl Into<String>) -> PersistError {
        PersistError {
            reason: reason.into(),
            kind: PersistErrorKind::Media,
        }
    }

    /// Stores the device refused.
    pub fn refused(reason: impl Into<String>) -> PersistError {
        PersistError {
            reason: reason.into(),
            kind: PersistErrorKind::Refused,
        }
    }
}

impl std::fmt::Display for PersistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "persist failed: {}", self.reason)
    }
}

impl std::error::Error for PersistError {}

/// Byte-addressable persistent memory.
///
/// Contract for callers (the core upholds it with its locks): two threads
/// never store to overlapping bytes at the same time, and a thread never
/// reads bytes another thread is storing to, except through
/// [`PmDevice::load_u64`] / [`PmDevice::store_u64`], which are atomic.
/// Out-of-range offsets are bugs in the caller and panic; the core validates
/// every offset it reads from media before using it. `'static` because a
/// data policy's background threads keep a (weak) handle on the mounted
/// file system, and with it the device.
pub trait PmDevice: Send + Sync + 'static {
    /// Length of the pool in bytes.
    fn size(&self) -> u64;

    /// Whether the device refuses stores (a pool mapped read-only): each
    /// store is then dropped and the next [`PmDevice::drain`] fails with
    /// [`PersistErrorKind::Refused`]. The core checks this before it
    /// writes anything, so only a bug reaches the refusal, never a fault.
    fn read_only(&self) -> bool {
        false
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    fn read(&self, off: u64, buf: &mut [u8]);

    /// Stores `data` at `off` through the CPU cache. Not durable until
    /// flushed and drained.
    fn write(&self, off: u64, data: &[u8]);

    /// Stores `data` at `off` with non-temporal stores (bypassing the cache).
    /// Durable after the next [`PmDevice::drain`]; no flush is needed.
    fn write_nt(&self, off: u64, data: &[u8]);

    /// Stores zeros over `len` bytes at `off` with non-temporal stores.
    fn zero_nt(&self, off: u64, len: u64);

    /// Atomic 8-byte load. `off` must be 8-byte aligned.
    fn load_u64(&self, off: u64) -> u64;

    /// Atomic 8-byte store (never torn by a crash). `off` must be 8-byte
    /// aligned. Not durable until flushed and drained.
    fn store_u64(&self, off: u64, value: u64);

    /// Atomic 16-byte store (never torn by a crash). `off` must be 16-byte
    /// aligned. Not durable until flushed and drained.
    fn store_u128(&self, off: u64, value: u128);

    /// Starts writing back the cache lines covering `[off, off + len)`.
    fn flush(&self, off: u64, len: u64);

    /// Waits until every flush and non-temporal store issued before it is
    /// durable. Fails if any earlier persist failed.
    fn drain(&self) -> Result<(), PersistError>;

    /// Flush then drain: `[off, off + len)` is durable on return.
    fn persist(&self, off: u64, len: u64) -> Result<(), PersistError> {
        self.flush(off, len);
        self.drain()
    }

    /// Writes `data` through the cache and makes it durable.
    fn write_persist(&self, off: u64, data: &[u8]) -> Result<(), PersistError> {
        self.write(off, data);
        self.persist(off, data.len() as u64)
    }

    /// Write accounting since the device was opened.
    fn stats(&self) -> WriteStats;

    /// Maps the pages under `[off, off + len)` now, ahead of writing
    /// them: a pool file's pages (tmpfs, a DAX file) are otherwise mapped
    /// one page fault at a time on first touch, which cost a data log's
    /// fresh blocks ~20% of a synced 4 KiB write under `dram`. A hint
    /// only: it changes no byte and no durability, and a device with
    /// nothing to map ignores it.
    fn populate(&self, off: u64, len: u64) {
        check_range(self.size(), off, len);
    }

    /// Starts loading `[off, off + len)` into the CPU cache, ahead of a
    /// read expected soon: a line about to be read back cold (evicted by
    /// the non-temporal stores that wrote it) otherwise stalls the read
    /// for a memory access. A hint only, like `populate`.
    fn prefetch(&self, off: u64, len: u64) {
        check_range(self.size(), off, len);
    }

    /// The pool's pages, for showing a file's blocks to a program that
    /// maps the file (a [`crate::Window`]): `None` where the pool is not
    /// something the kernel can map again — anonymous memory, a DRAM
    /// overlay (whose stores must stay in DRAM), the crash simulator.
    fn pages(&self) -> Option<&PoolPages> {
        None
    }
}

/// Checks that `[off, off + len)` lies inside a pool of `size` bytes.
///
/// # Panics
/// On an out-of-range access: the caller broke the device contract.
#[inline]
pub fn check_range(size: u64, off: u64, len: u64) {
    let end = off.checked_add(len);
    assert!(
        matches!(end, Some(e) if e <= size),
        "PM access out of range: off={off} len={len} pool={size}"
    );
}
