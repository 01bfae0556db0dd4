//! Write accounting: how many bytes were stored to PM, how many cache lines
//! were flushed and how many fences were issued. The workbench divides these
//! by the bytes a benchmark asked to write to report write amplification.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a device's write counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Bytes stored through the cache (including atomic stores).
    pub bytes_stored: u64,
    /// Bytes stored with non-temporal stores.
    pub bytes_nt: u64,
    /// Cache lines flushed.
    pub lines_flushed: u64,
    /// Fences (drains) issued.
    pub fences: u64,
}

impl WriteStats {
    /// All bytes written to PM by either kind of store.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_stored + self.bytes_nt
    }

    /// Counter-wise difference `self - earlier`, for measuring one run.
    pub fn since(&self, earlier: &WriteStats) -> WriteStats {
        WriteStats {
            bytes_stored: self.bytes_stored.saturating_sub(earlier.bytes_stored),
            bytes_nt: self.bytes_nt.saturating_sub(earlier.bytes_nt),
            lines_flushed: self.lines_flushed.saturating_sub(earlier.lines_flushed),
            fences: self.fences.saturating_sub(earlier.fences),
        }
    }
}

/// Number of counter shards. A thread leases one of the first `OWNED` for
/// its lifetime and is then its only writer in every counter, so it
/// counts with a plain load and store. A locked add per device call (and
/// shards that threads hashed onto together) cost `direct` and `lawn` a
/// quarter of their 128-byte fsync'd writes under `dram` (BENCHMARKS.md):
/// the workbench's cost, not the media's, and heaviest on designs that
/// persist a few lines at a time. Threads past the owners share the last
/// shard with locked adds.
const SHARDS: usize = 16;
const OWNED: usize = SHARDS - 1;
const SHARED: usize = SHARDS - 1;

/// Set bits: shards some live thread owns.
static LEASED: AtomicU64 = AtomicU64::new(0);

#[repr(align(64))]
#[derive(Default)]
struct Shard {
    bytes_stored: AtomicU64,
    bytes_nt: AtomicU64,
    lines_flushed: AtomicU64,
    fences: AtomicU64,
}

/// Sharded, lock-free write counters shared by every device implementation.
#[derive(Default)]
pub struct StatsCounter {
    shards: [Shard; SHARDS],
}

/// A thread's shard, given back when the thread exits.
struct Lease(usize);

impl Lease {
    /// The lowest free owned shard, or the shared one when all are taken.
    /// Acquire: the previous owner's counts (stored before its release)
    /// are what this thread adds to.
    fn take() -> Lease {
        let mut cur = LEASED.load(Ordering::Relaxed);
        loop {
            let i = (!cur).trailing_zeros() as usize;
            if i >= OWNED {
                return Lease(SHARED);
            }
            match LEASED.compare_exchange_weak(
                cur,
                cur | 1 << i,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Lease(i),
                Err(now) => cur = now,
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.0 < OWNED {
            LEASED.fetch_and(!(1 << self.0), Ordering::Release);
        }
    }
}

/// This thread's shard and whether it owns it. A call during the thread's
/// exit, after its lease is gone, counts in the shared shard.
fn shard_index() -> (usize, bool) {
    thread_local! {
        static LEASE: Lease = Lease::take();
    }
    LEASE
        .try_with(|l| (l.0, l.0 < OWNED))
        .unwrap_or((SHARED, false))
}

/// Adds `n` to `c`: a plain load and store in an owned shard.
fn add(c: &AtomicU64, n: u64, owned: bool) {
    if owned {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    } else {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl StatsCounter {
    fn shard(&self) -> (&Shard, bool) {
        let (i, owned) = shard_index();
        (&self.shards[i], owned)
    }

    /// Counts bytes stored through the cache.
    pub fn stored(&self, bytes: u64) {
        let (sh, owned) = self.shard();
        add(&sh.bytes_stored, bytes, owned);
    }

    /// Counts bytes stored with non-temporal stores.
    pub fn stored_nt(&self, bytes: u64) {
        let (sh, owned) = self.shard();
        add(&sh.bytes_nt, bytes, owned);
    }

    /// Counts flushed cache lines.
    pub fn flushed(&self, lines: u64) {
        let (sh, owned) = self.shard();
        add(&sh.lines_flushed, lines, owned);
    }

    /// Counts one fence.
    pub fn fenced(&self) {
        let (sh, owned) = self.shard();
        add(&sh.fences, 1, owned);
    }

    /// Sums the shards.
    pub fn snapshot(&self) -> WriteStats {
        let mut s = WriteStats::default();
        for sh in &self.shards {
            s.bytes_stored += sh.bytes_stored.load(Ordering::Relaxed);
            s.bytes_nt += sh.bytes_nt.load(Ordering::Relaxed);
            s.lines_flushed += sh.lines_flushed.load(Ordering::Relaxed);
            s.fences += sh.fences.load(Ordering::Relaxed);
        }
        s
    }
}

/// Number of cache lines touched by `[off, off + len)`.
pub fn lines_covered(off: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = off / crate::CACHE_LINE;
    let last = (off + len - 1) / crate::CACHE_LINE;
    last - first + 1
}
