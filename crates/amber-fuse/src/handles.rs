//! Open handles: fh → inode. The core counts opens per inode (an unlinked
//! file lives until its last release); this table is what lets every
//! handle the kernel never released — a lazy unmount, an aborted
//! connection — be released before the pool is marked clean.
//!
//! O_APPEND and O_SYNC are not kept here: the kernel sends the file's
//! current flags with every write, and fcntl can change O_APPEND after
//! the open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The table of open handles, shared by the session's threads.
#[derive(Default)]
pub struct Handles {
    next: AtomicU64,
    open: Mutex<HashMap<u64, u64>>,
}

impl Handles {
    /// Registers an open of `ino`; returns its handle (never 0, which
    /// some callers read as "no handle").
    pub fn insert(&self, ino: u64) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.lock().insert(fh, ino);
        fh
    }

    /// Forgets handle `fh`; returns its inode.
    pub fn remove(&self, fh: u64) -> Option<u64> {
        self.open.lock().remove(&fh)
    }

    /// Empties the table, returning the inode of every handle left.
    pub fn drain(&self) -> Vec<u64> {
        self.open.lock().drain().map(|(_, ino)| ino).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_distinct_and_released_once() {
        let t = Handles::default();
        let a = t.insert(5);
        let b = t.insert(5);
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(t.remove(a), Some(5));
        assert_eq!(t.remove(a), None);
        assert_eq!(t.drain(), vec![5]);
        assert_eq!(t.remove(b), None);
    }
}
