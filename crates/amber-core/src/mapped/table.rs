//! The mount's table of mappings: which file each one maps and, for one
//! shown in a window, its address range, so a front end's munmap,
//! mprotect, msync or mremap of an address finds the mappings under it.
//!
//! Lock order: a file's inode lock, then this table's; nothing here
//! takes an inode lock while holding the table's.

use super::{MapId, MAX_MAPS};
use crate::error::{FsError, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[derive(Debug, Clone, Copy)]
struct Entry {
    ino: u64,
    /// Start and length of its window.
    window: Option<(usize, usize)>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    maps: BTreeMap<MapId, Entry>,
    by_addr: BTreeMap<usize, MapId>,
}

/// A mapping under an address range, and its window's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub id: MapId,
    pub ino: u64,
    pub start: usize,
    pub len: usize,
}

/// Every mapping of the mount (module docs).
#[derive(Debug, Default)]
pub(crate) struct MapTable {
    inner: Mutex<Inner>,
    /// How many mappings there are, read without the lock: a front end
    /// asks it on every munmap a program makes (malloc's too).
    count: AtomicUsize,
}

impl MapTable {
    /// Registers a mapping of `ino` shown at `window` (start, length),
    /// if any; fails with ENOMEM-like `OutOfMemory` past [`MAX_MAPS`].
    pub fn add(&self, ino: u64, window: Option<(usize, usize)>) -> Result<MapId> {
        let mut t = self.inner.lock();
        if t.maps.len() >= MAX_MAPS {
            return Err(FsError::OutOfMemory);
        }
        t.next += 1;
        let id = MapId(t.next);
        t.maps.insert(id, Entry { ino, window });
        self.count.store(t.maps.len(), Relaxed);
        if let Some((start, _)) = window {
            let clash = t.by_addr.insert(start, id);
            assert!(clash.is_none(), "two windows start at {start:#x}");
        }
        Ok(id)
    }

    /// Forgets mapping `id`.
    pub fn remove(&self, id: MapId) {
        let mut t = self.inner.lock();
        if let Some(Entry {
            window: Some((start, _)),
            ..
        }) = t.maps.remove(&id)
        {
            t.by_addr.remove(&start);
        }
        self.count.store(t.maps.len(), Relaxed);
    }

    /// Mapping `id` is now shown at `window` (cut by a munmap).
    pub fn moved(&self, id: MapId, window: Option<(usize, usize)>) {
        let mut t = self.inner.lock();
        let Some(e) = t.maps.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(&mut e.window, window);
        if let Some((start, _)) = old {
            t.by_addr.remove(&start);
        }
        if let Some((start, _)) = window {
            t.by_addr.insert(start, id);
        }
    }

    /// Whether there is no mapping at all.
    pub fn is_empty(&self) -> bool {
        self.count.load(Relaxed) == 0
    }

    /// The file mapping `id` maps.
    pub fn ino_of(&self, id: MapId) -> Option<u64> {
        self.inner.lock().maps.get(&id).map(|e| e.ino)
    }

    /// The windowed mappings overlapping `[addr, addr + len)`, by address.
    pub fn overlapping(&self, addr: usize, len: usize) -> Vec<Found> {
        let end = addr.saturating_add(len);
        let t = self.inner.lock();
        // The one starting at or before `addr` may reach into the range.
        let before = t.by_addr.range(..=addr).next_back();
        let inside = t.by_addr.range(addr.saturating_add(1)..end);
        before
            .into_iter()
            .chain(inside)
            .filter_map(|(&start, &id)| {
                let e = t.maps.get(&id)?;
                let (_, n) = e.window?;
                (start < end && start + n > addr).then_some(Found {
                    id,
                    ino: e.ino,
                    start,
                    len: n,
                })
            })
            .collect()
    }

    /// Every mapping, as (id, file).
    pub fn all(&self) -> Vec<(MapId, u64)> {
        let t = self.inner.lock();
        t.maps.iter().map(|(&id, e)| (id, e.ino)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_windows_under_a_range() {
        let t = MapTable::default();
        let a = t.add(2, Some((0x10000, 0x3000))).unwrap();
        let b = t.add(3, Some((0x20000, 0x1000))).unwrap();
        let _lib = t.add(4, None).unwrap();
        let ids =
            |addr, len| -> Vec<MapId> { t.overlapping(addr, len).iter().map(|f| f.id).collect() };
        assert_eq!(ids(0x11000, 0x1000), vec![a]);
        assert_eq!(ids(0x0, 0x10000), vec![]);
        assert_eq!(ids(0x12fff, 0x20000), vec![a, b]);
        assert_eq!(ids(0x13000, 0xd000), vec![]);
        t.moved(a, Some((0x12000, 0x1000)));
        assert_eq!(ids(0x10000, 0x2000), vec![]);
        assert_eq!(ids(0x12000, 1), vec![a]);
        t.remove(b);
        assert_eq!(ids(0, usize::MAX), vec![a]);
        assert_eq!(t.all().len(), 2);
    }
}
