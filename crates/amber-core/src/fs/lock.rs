//! Taking several inode locks without deadlock: always in ascending inode
//! number, each inode once.

use crate::inode::{InodeRef, InodeState};
use parking_lot::lock_api::ArcRwLockWriteGuard;
use parking_lot::RawRwLock;

/// A write-locked inode that owns its reference.
pub type Locked = ArcRwLockWriteGuard<RawRwLock, InodeState>;

/// Write-locks `refs` (given with their inode numbers) in ascending inode
/// order, skipping repeats. Returns the guards in that order.
pub fn lock_sorted(mut refs: Vec<(u64, InodeRef)>) -> Vec<Locked> {
    refs.sort_by_key(|(ino, _)| *ino);
    refs.dedup_by_key(|(ino, _)| *ino);
    refs.into_iter().map(|(_, r)| r.write_arc()).collect()
}

/// Finds the guard of `ino` among `guards`.
pub fn find(guards: &mut [Locked], ino: u64) -> usize {
    guards
        .iter()
        .position(|g| g.ino == ino)
        .expect("inode was locked")
}
