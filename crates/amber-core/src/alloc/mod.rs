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

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// A thread's home among per-CPU structures (journals, block groups, data
/// logs), one numbering per mount: threads are numbered in the order they
/// first use the mount, so concurrent threads spread over different
/// structures, and which one a thread gets depends on the mount's own
/// history alone — not on how many threads the process ran before (a test
/// runner's, a FUSE daemon's), so a crash run lays out the same images on
/// every run of its seed.
#[derive(Clone, Default)]
pub(crate) struct Homes(Arc<AtomicUsize>);

impl Homes {
    /// The calling thread's home among `count` structures.
    pub fn slot(&self, count: usize) -> usize {
        self.index() % count
    }

    /// The calling thread's number in this mount, given on first use.
    fn index(&self) -> usize {
        thread_local! {
            /// The mounts this thread has used and its number in each;
            /// those since dropped go when the thread meets a new one.
            static KNOWN: RefCell<Vec<(Weak<AtomicUsize>, usize)>> =
                const { RefCell::new(Vec::new()) };
        }
        // At process exit (an atexit unmount writing back buffered
        // blocks) the thread's locals may be gone: it takes a new number.
        let numbered = KNOWN.try_with(|known| {
            let mut known = known.borrow_mut();
            let me = Arc::as_ptr(&self.0);
            // A Weak keeps its allocation, so no live mount shares an
            // address with one listed here.
            if let Some(&(_, i)) = known.iter().find(|(w, _)| w.as_ptr() == me) {
                return i;
            }
            known.retain(|(w, _)| w.strong_count() > 0);
            let i = self.0.fetch_add(1, Relaxed);
            known.push((Arc::downgrade(&self.0), i));
            i
        });
        numbered.unwrap_or_else(|_| self.0.fetch_add(1, Relaxed))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads spread over per-CPU structures in the order they first
    /// use a mount, each mount numbering its own, whatever threads ran
    /// before.
    #[test]
    fn each_mount_numbers_its_threads_from_zero() {
        let a = Homes::default();
        assert_eq!(a.slot(4), 0);
        let other = std::thread::spawn({
            let a = a.clone();
            move || a.slot(4)
        });
        assert_eq!(other.join().unwrap(), 1, "a second thread, a second home");
        assert_eq!(a.slot(4), 0, "a thread keeps its home");
        let b = Homes::default();
        let fresh = std::thread::spawn(move || b.slot(4));
        assert_eq!(fresh.join().unwrap(), 0, "the first thread of a new mount");
        drop(a);
        assert_eq!(Homes::default().slot(4), 0);
    }
}
