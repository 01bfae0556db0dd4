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

/// A value alone on its cache lines (128 bytes: adjacent-line prefetch
/// pairs lines), so per-CPU structures side by side in a `Vec` — locks,
/// log tails, queues — do not bounce one line between the CPUs using
/// neighbouring ones.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
