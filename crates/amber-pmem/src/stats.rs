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

/// Number of counter shards; threads hash onto them so that counting does
/// not make every store contend on one cache line.
const SHARDS: usize = 16;

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

fn shard_index() -> usize {
    thread_local! {
        static INDEX: usize = {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % SHARDS
        };
    }
    INDEX.with(|i| *i)
}

impl StatsCounter {
    fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    /// Counts bytes stored through the cache.
    pub fn stored(&self, bytes: u64) {
        self.shard()
            .bytes_stored
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts bytes stored with non-temporal stores.
    pub fn stored_nt(&self, bytes: u64) {
        self.shard().bytes_nt.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts flushed cache lines.
    pub fn flushed(&self, lines: u64) {
        self.shard()
            .lines_flushed
            .fetch_add(lines, Ordering::Relaxed);
    }

    /// Counts one fence.
    pub fn fenced(&self) {
        self.shard().fences.fetch_add(1, Ordering::Relaxed);
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
