//! A `bare` file: its extents of the pool (a DRAM map, never stored), its
//! size, and the copies in and out.
//!
//! Growth: a write past the reserved bytes reserves at least what it needs
//! and as much again as the file already has (from one block, doubling, at
//! most [`MAX_STEP`] per step), first right after the file's last extent so
//! the extent grows in place. A file written front to back by one thread
//! is one extent; files written side by side get a few extents each, the
//! number growing with the log of their size (plus one per 64 MiB). Space a
//! file reserved but has not written stays its own until it is truncated
//! or freed, at most as much again as its size (and at most 64 MiB).

use super::space::{Run, Space, BLOCK};
use crate::target::BenchDevice;
use amber_pmem::PmDevice;
use std::io;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// Largest reservation a growing file makes beyond what a write needs.
pub const MAX_STEP: u64 = 64 << 20;

/// What every file of a target shares: the pool and its free space.
pub struct Shared {
    pub dev: BenchDevice,
    pub space: Mutex<Space>,
}

/// A piece of a file: `len` bytes at file offset `file`, device offset
/// `dev`.
#[derive(Debug, Clone, Copy)]
struct Extent {
    file: u64,
    dev: u64,
    len: u64,
}

/// A file's map: extents in file order, covering `[0, reserved)`.
#[derive(Debug, Default)]
struct Map {
    extents: Vec<Extent>,
    reserved: u64,
    size: u64,
}

impl Map {
    fn push(&mut self, r: Run) {
        match self.extents.last_mut() {
            Some(e) if e.dev + e.len == r.dev => e.len += r.len,
            _ => self.extents.push(Extent {
                file: self.reserved,
                dev: r.dev,
                len: r.len,
            }),
        }
        self.reserved += r.len;
    }

    /// Calls `f(dev, at, n)` for each device range covering file bytes
    /// `[off, off + len)` (inside `reserved`): `n` bytes at `dev`, which are
    /// bytes `at..at + n` of the range.
    fn each_run(&self, off: u64, len: u64, mut f: impl FnMut(u64, usize, usize)) {
        assert!(
            off + len <= self.reserved,
            "each_run: past the reserved bytes"
        );
        let mut i = self.extents.partition_point(|e| e.file + e.len <= off);
        let mut done = 0;
        while done < len {
            let e = self.extents[i];
            let inside = off + done - e.file;
            let n = (e.len - inside).min(len - done);
            f(e.dev + inside, done as usize, n as usize);
            done += n;
            i += 1;
        }
    }

    fn runs(&self) -> impl Iterator<Item = Run> + '_ {
        self.extents.iter().map(|e| Run {
            dev: e.dev,
            len: e.len,
        })
    }
}

/// A file's bytes in the pool. Its extents go back to the free space when
/// the last handle and the namespace entry are gone (unlink semantics).
pub struct Node {
    shared: Arc<Shared>,
    map: RwLock<Map>,
}

impl Node {
    pub fn new(shared: Arc<Shared>) -> Node {
        Node {
            shared,
            map: RwLock::new(Map::default()),
        }
    }

    pub fn size(&self) -> u64 {
        self.map.read().expect("bare: file lock").size
    }

    /// Empties the file and returns its extents to the free space.
    pub fn truncate(&self) {
        let mut m = self.map.write().expect("bare: file lock");
        let old = std::mem::take(&mut *m);
        let mut space = self.shared.space.lock().expect("bare: space lock");
        for r in old.runs() {
            space.give(r);
        }
    }

    /// Writes `buf` at `off` (at the end of the file when `off` is None),
    /// durable on return: the bytes go out as one non-temporal copy per
    /// extent they cross, then one drain. Bytes a write leaves between the
    /// old end and `off` are zeroed the same way, in the same drain.
    pub fn write(&self, buf: &[u8], off: Option<u64>) -> io::Result<()> {
        let mut m = self.map.write().expect("bare: file lock");
        let off = off.unwrap_or(m.size);
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let end = off
            .checked_add(len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bare: offset overflow"))?;
        if end > m.reserved {
            self.grow(&mut m, end)?;
        }
        let dev = &self.shared.dev;
        if off > m.size {
            m.each_run(m.size, off - m.size, |d, _, n| dev.zero_nt(d, n as u64));
        }
        m.each_run(off, len, |d, at, n| dev.write_nt(d, &buf[at..at + n]));
        dev.drain()
            .map_err(|e| io::Error::other(format!("bare: {e}")))?;
        m.size = m.size.max(end);
        Ok(())
    }

    /// Reserves bytes up to at least `end`.
    fn grow(&self, m: &mut Map, end: u64) -> io::Result<()> {
        let need = (end - m.reserved).next_multiple_of(BLOCK);
        let want = need.max(m.reserved.clamp(BLOCK, MAX_STEP));
        let hint = m.extents.last().map(|e| e.dev + e.len);
        let mut space = self.shared.space.lock().expect("bare: space lock");
        let Some(runs) = space.take(need, want, hint) else {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "bare: no space left in the pool (ENOSPC): {need} more bytes wanted, {} free \
                     of {}",
                    space.free_bytes(),
                    self.shared.dev.size()
                ),
            ));
        };
        for r in runs {
            m.push(r);
        }
        Ok(())
    }

    /// Reads up to `buf.len()` bytes at `off`; fewer where the file ends.
    pub fn read(&self, buf: &mut [u8], off: u64) -> usize {
        let m = self.map.read().expect("bare: file lock");
        if off >= m.size {
            return 0;
        }
        let n = (buf.len() as u64).min(m.size - off);
        let dev = &self.shared.dev;
        m.each_run(off, n, |d, at, k| dev.read(d, &mut buf[at..at + k]));
        n as usize
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let m = self.map.get_mut().unwrap_or_else(PoisonError::into_inner);
        // Never panic in drop: a poisoned space lock still holds a
        // consistent map (every change to it completes before unlocking).
        let mut space = self
            .shared
            .space
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for r in m.runs() {
            space.give(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::open_pool;

    fn shared(dir: &std::path::Path, size: u64) -> Arc<Shared> {
        Arc::new(Shared {
            dev: open_pool(&dir.join("p"), size, "dram").unwrap(),
            space: Mutex::new(Space::new(size)),
        })
    }

    fn extents(n: &Node) -> usize {
        n.map.read().unwrap().extents.len()
    }

    #[test]
    fn files_grow_in_few_extents_and_give_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path(), 8 << 20);
        let block = [5u8; 4096];
        // Alone, front to back: one extent, grown in place.
        let a = Node::new(s.clone());
        for _ in 0..256 {
            a.write(&block, None).unwrap();
        }
        assert_eq!((a.size(), extents(&a)), (1 << 20, 1));
        // Side by side: doubling reservations, a few extents each.
        let (b, c) = (Node::new(s.clone()), Node::new(s.clone()));
        for _ in 0..256 {
            b.write(&block, None).unwrap();
            c.write(&block, None).unwrap();
        }
        assert!(extents(&b) <= 10 && extents(&c) <= 10);
        assert!(extents(&b) > 1, "they did interleave");
        // Reserved but unwritten space is at most as much again.
        let free = s.space.lock().unwrap().free_bytes();
        assert!(free >= (8 << 20) - 6 * (1 << 20), "{free}");
        a.truncate();
        assert_eq!((a.size(), extents(&a)), (0, 0));
        drop((a, b, c));
        assert_eq!(s.space.lock().unwrap().free_bytes(), 8 << 20);
    }
}
