//! The gate every call passes while it uses a pool, so closing the pool
//! (amberfs_unmount, or the interposer at process exit while other threads
//! still run) waits for calls in flight and refuses later ones: a write
//! after the pool was marked clean would corrupt it. Each thread counts
//! itself in one of several padded counters, so threads on different
//! cores do not share a cache line on every call.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const SHARDS: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct Shard(AtomicU64);

#[derive(Default)]
pub struct Gate {
    closed: AtomicBool,
    inside: [Shard; SHARDS],
}

/// A call inside the gate; leaving is dropping it.
pub struct Pass<'a>(&'a AtomicU64);

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's shard, handed out round-robin on first use.
fn shard() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    SHARD.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) as usize % SHARDS);
        }
        s.get()
    })
}

impl Gate {
    /// Enters, unless the pool is closing or closed.
    pub fn enter(&self) -> Option<Pass<'_>> {
        let count = &self.inside[shard()].0;
        // SeqCst on both sides (here and in `close`): either `close` sees
        // this count, or this call sees `closed`.
        count.fetch_add(1, Ordering::SeqCst);
        let pass = Pass(count);
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        Some(pass)
    }

    /// Refuses new calls and waits until the calls inside have left.
    /// Returns false if it was already closed.
    pub fn close(&self) -> bool {
        if self.closed.swap(true, Ordering::SeqCst) {
            return false;
        }
        for s in &self.inside {
            while s.0.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_refuses_later_calls_and_counts_down() {
        let g = Gate::default();
        drop(g.enter().expect("open gate"));
        assert!(g.close());
        assert!(g.enter().is_none());
        assert!(!g.close());
    }
}
