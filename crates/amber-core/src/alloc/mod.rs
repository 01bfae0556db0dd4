//! Space allocation. Neither allocator is journaled: their state is derived
//! from the inodes and block maps, rebuilt by recovery after a crash and
//! saved as a bitmap only at clean unmount (NOVA's approach), so allocation
//! costs no PM writes and no ordering points.

mod bitset;
mod blocks;
mod inodes;
mod intervals;

pub use bitset::BitSet;
pub use blocks::BlockAllocator;
pub use inodes::InodeAllocator;

use std::sync::atomic::{AtomicUsize, Ordering};

/// The thread's home among `count` per-CPU structures (journals, block
/// groups, data logs): threads are numbered as they first ask, so
/// concurrent threads spread over different ones.
pub(crate) fn home_slot(count: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i) % count
}
