//! Inode-number allocation from a free list rebuilt at mount by scanning
//! the inode table (a slot is free when its mode is 0).

use parking_lot::Mutex;

/// Free inode numbers; the lowest is handed out first so the table stays
/// dense and scans stay short.
pub struct InodeAllocator {
    free: Mutex<Vec<u64>>,
}

impl InodeAllocator {
    /// From the free inode numbers (any order).
    pub fn new(mut free: Vec<u64>) -> InodeAllocator {
        free.sort_unstable_by(|a, b| b.cmp(a));
        InodeAllocator {
            free: Mutex::new(free),
        }
    }

    pub fn alloc(&self) -> Option<u64> {
        self.free.lock().pop()
    }

    pub fn free(&self, ino: u64) {
        self.free.lock().push(ino);
    }

    pub fn free_count(&self) -> u64 {
        self.free.lock().len() as u64
    }
}
