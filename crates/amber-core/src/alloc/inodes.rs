//! Inode-number allocation from a free list rebuilt at mount by scanning
//! the inode table (a slot is free when its mode is 0). The list is an
//! interval list — free runs of numbers, as HUNTER keeps its reusable
//! space and file numbers (hunter.txt §III-B) — so a fresh table of 2^20
//! inodes is one entry, not a million.

use super::intervals::Intervals;
use parking_lot::Mutex;

/// Free inode numbers; the lowest is handed out first so the table stays
/// dense and scans stay short.
pub struct InodeAllocator {
    free: Mutex<Intervals>,
}

impl InodeAllocator {
    /// From the free inode numbers (any order, each once).
    pub fn new(mut free: Vec<u64>) -> InodeAllocator {
        free.sort_unstable();
        let mut r = Intervals::default();
        for ino in free {
            r.give(ino);
        }
        InodeAllocator {
            free: Mutex::new(r),
        }
    }

    pub fn alloc(&self) -> Option<u64> {
        self.free.lock().take(None)
    }

    pub fn free(&self, ino: u64) {
        self.free.lock().give(ino);
    }

    pub fn free_count(&self) -> u64 {
        self.free.lock().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_first_and_runs_merge() {
        let a = InodeAllocator::new(vec![9, 2, 3, 4, 7]);
        assert_eq!(a.free_count(), 5);
        assert_eq!(a.free.lock().runs().count(), 3);
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.alloc(), Some(3));
        a.free(2);
        assert_eq!(a.alloc(), Some(2));
        a.free(8);
        assert_eq!(a.free.lock().runs().count(), 2, "7, 8 and 9 are one run");
        let rest: Vec<u64> = std::iter::from_fn(|| a.alloc()).collect();
        assert_eq!(rest, vec![4, 7, 8, 9]);
        assert_eq!(a.free_count(), 0);
    }
}
