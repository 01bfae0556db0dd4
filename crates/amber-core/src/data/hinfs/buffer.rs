//! The DRAM buffer pool: a fixed number of 4 KiB blocks in one arena,
//! each with valid and dirty cache-line bitmaps, an owner (inode, file
//! block), its last-write time, and a place on the LRW (least recently
//! written) list or the free list. Everything is sized at mount; nothing
//! here grows afterwards.
//!
//! The pool is behind one mutex, always taken after an inode lock, never
//! before (see `writeback.rs`).

use amber_format::BLOCK_SIZE;
use std::time::Instant;

/// End of the LRW list.
const NIL: u32 = u32::MAX;

/// Who owns a buffer block: (inode, file block).
pub type Owner = (u64, u64);

#[derive(Debug, Clone)]
struct Meta {
    owner: Option<Owner>,
    valid: u64,
    dirty: u64,
    last_write: Instant,
    /// Taken by a write-back thread: off the LRW list, not reusable until
    /// that thread finishes with it.
    busy: bool,
    on_list: bool,
    prev: u32,
    next: u32,
}

/// The pool.
pub struct Pool {
    data: Vec<u8>,
    meta: Vec<Meta>,
    free: Vec<u32>,
    /// Least recently written end of the LRW list.
    head: u32,
    /// Most recently written end.
    tail: u32,
}

impl Pool {
    /// A pool of `blocks` free blocks.
    pub fn new(blocks: u32) -> Pool {
        assert!(blocks > 0 && blocks < NIL, "pool of {blocks} blocks");
        let now = Instant::now();
        Pool {
            data: vec![0; blocks as usize * BLOCK_SIZE as usize],
            meta: vec![
                Meta {
                    owner: None,
                    valid: 0,
                    dirty: 0,
                    last_write: now,
                    busy: false,
                    on_list: false,
                    prev: NIL,
                    next: NIL,
                };
                blocks as usize
            ],
            // Popped from the end: hand out low blocks first.
            free: (0..blocks).rev().collect(),
            head: NIL,
            tail: NIL,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.meta.len() as u32
    }

    pub fn free_count(&self) -> u32 {
        self.free.len() as u32
    }

    /// A free block for `owner`, empty (no valid line), at the newest end
    /// of the LRW list; None when the pool is full.
    pub fn alloc(&mut self, owner: Owner) -> Option<u32> {
        let b = self.free.pop()?;
        let m = &mut self.meta[b as usize];
        assert!(
            m.owner.is_none() && !m.busy && !m.on_list,
            "free block in use"
        );
        m.owner = Some(owner);
        m.valid = 0;
        m.dirty = 0;
        self.touch(b);
        Some(b)
    }

    pub fn owner(&self, b: u32) -> Option<Owner> {
        self.meta[b as usize].owner
    }

    pub fn valid(&self, b: u32) -> u64 {
        self.meta[b as usize].valid
    }

    pub fn dirty(&self, b: u32) -> u64 {
        self.meta[b as usize].dirty
    }

    /// Marks lines valid, and dirty too if `dirty`.
    pub fn mark(&mut self, b: u32, lines: u64, dirty: bool) {
        let m = &mut self.meta[b as usize];
        m.valid |= lines;
        if dirty {
            m.dirty |= lines;
        }
    }

    /// The dirty lines were written back.
    pub fn clean(&mut self, b: u32) {
        self.meta[b as usize].dirty = 0;
    }

    /// Records a write: newest end of the LRW list (unless a write-back
    /// thread holds it), last-write time now.
    pub fn touch(&mut self, b: u32) {
        self.meta[b as usize].last_write = Instant::now();
        if self.meta[b as usize].busy {
            return;
        }
        if self.meta[b as usize].on_list {
            self.unlink(b);
        }
        let m = &mut self.meta[b as usize];
        m.prev = self.tail;
        m.next = NIL;
        m.on_list = true;
        match self.tail {
            NIL => self.head = b,
            t => self.meta[t as usize].next = b,
        }
        self.tail = b;
    }

    fn unlink(&mut self, b: u32) {
        let (prev, next) = {
            let m = &self.meta[b as usize];
            assert!(m.on_list, "unlinking block {b} not on the LRW list");
            (m.prev, m.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.meta[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.meta[n as usize].prev = prev,
        }
        let m = &mut self.meta[b as usize];
        m.on_list = false;
        m.prev = NIL;
        m.next = NIL;
    }

    fn put_free(&mut self, b: u32) {
        let m = &mut self.meta[b as usize];
        m.owner = None;
        m.valid = 0;
        m.dirty = 0;
        m.busy = false;
        assert!(!m.on_list, "freeing block {b} still on the LRW list");
        assert!(self.free.len() < self.meta.len(), "free list overflow");
        self.free.push(b);
    }

    /// The owner drops block `b` (evicted, truncated, or its file freed).
    /// A block a write-back thread holds is only disowned; the thread
    /// frees it when it finds it so.
    pub fn release(&mut self, b: u32) {
        if self.meta[b as usize].busy {
            self.meta[b as usize].owner = None;
            return;
        }
        self.unlink(b);
        self.put_free(b);
    }

    /// Takes the least recently written block for write-back, if there
    /// is one and (with `older_than`) it was last written before that.
    pub fn take_victim(&mut self, older_than: Option<Instant>) -> Option<(u32, Owner)> {
        let b = self.head;
        if b == NIL {
            return None;
        }
        if older_than.is_some_and(|t| self.meta[b as usize].last_write >= t) {
            return None;
        }
        self.unlink(b);
        let m = &mut self.meta[b as usize];
        m.busy = true;
        let owner = m.owner.expect("blocks on the LRW list have an owner");
        Some((b, owner))
    }

    /// A write-back thread is done with `b`: free it if its owner let go
    /// (or `evict`), else put it back on the LRW list.
    pub fn finish_victim(&mut self, b: u32, evict: bool) {
        let m = &mut self.meta[b as usize];
        assert!(m.busy, "block {b} was not taken for write-back");
        if evict || m.owner.is_none() {
            self.put_free(b);
        } else {
            m.busy = false;
            self.touch(b);
        }
    }

    /// Whether the oldest block was last written before `t`.
    pub fn oldest_before(&self, t: Instant) -> bool {
        self.head != NIL && self.meta[self.head as usize].last_write < t
    }

    pub fn block(&self, b: u32) -> &[u8] {
        let s = b as usize * BLOCK_SIZE as usize;
        &self.data[s..s + BLOCK_SIZE as usize]
    }

    pub fn block_mut(&mut self, b: u32) -> &mut [u8] {
        let s = b as usize * BLOCK_SIZE as usize;
        &mut self.data[s..s + BLOCK_SIZE as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_bounded_and_free_list_returns_blocks() {
        let mut p = Pool::new(3);
        let a = p.alloc((1, 0)).unwrap();
        let b = p.alloc((1, 1)).unwrap();
        let c = p.alloc((2, 0)).unwrap();
        assert_eq!(p.alloc((2, 1)), None);
        assert_eq!(p.free_count(), 0);
        p.release(b);
        assert_eq!(p.free_count(), 1);
        assert_eq!(p.alloc((3, 0)), Some(b));
        assert_eq!(p.owner(a), Some((1, 0)));
        assert_eq!(p.owner(c), Some((2, 0)));
    }

    #[test]
    fn lrw_order_follows_writes_and_skips_busy_blocks() {
        let mut p = Pool::new(4);
        let a = p.alloc((1, 0)).unwrap();
        let b = p.alloc((1, 1)).unwrap();
        let c = p.alloc((1, 2)).unwrap();
        p.touch(a);
        assert_eq!(p.take_victim(None), Some((b, (1, 1))));
        // A write to a busy block does not put it back on the list.
        p.touch(b);
        assert_eq!(p.take_victim(None), Some((c, (1, 2))));
        p.finish_victim(c, false);
        assert_eq!(p.take_victim(None), Some((a, (1, 0))));
        assert_eq!(p.take_victim(None), Some((c, (1, 2))));
        assert_eq!(p.take_victim(None), None);
        // The owner drops a busy block: the thread frees it.
        p.release(b);
        assert_eq!(p.owner(b), None);
        p.finish_victim(b, false);
        p.finish_victim(a, true);
        p.finish_victim(c, true);
        assert_eq!(p.free_count(), 4);
    }

    #[test]
    fn bitmaps_track_valid_and_dirty_lines() {
        let mut p = Pool::new(1);
        let a = p.alloc((1, 0)).unwrap();
        p.mark(a, 0b11, false);
        p.mark(a, 0b110, true);
        assert_eq!((p.valid(a), p.dirty(a)), (0b111, 0b110));
        p.clean(a);
        assert_eq!((p.valid(a), p.dirty(a)), (0b111, 0));
        p.release(a);
        let a = p.alloc((2, 0)).unwrap();
        assert_eq!((p.valid(a), p.dirty(a)), (0, 0));
    }

    #[test]
    fn aged_victims_only_when_old_enough() {
        let mut p = Pool::new(2);
        p.alloc((1, 0)).unwrap();
        let past = Instant::now() - std::time::Duration::from_secs(1);
        assert!(!p.oldest_before(past));
        assert_eq!(p.take_victim(Some(past)), None);
        assert!(p
            .take_victim(Some(Instant::now() + std::time::Duration::from_secs(1)))
            .is_some());
    }
}
