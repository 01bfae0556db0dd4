//! Which entries of a nova log are live, and how many live entries each
//! log page holds: what NOVA's garbage collection decides by (FAST'16
//! §4.3). An entry is live while
//!
//! * it is a write entry and some file page still maps to it;
//! * it unmaps pages (truncates or punches): it must stay while an older
//!   write entry that mapped those pages may be replayed, so it is pinned
//!   until thorough GC rewrites the log without either;
//! * it is the newest entry: it carries the file's size and times.
//!
//! A dead entry can be dropped without changing what a replay gives:
//! every page it mapped is mapped or unmapped again by a later entry that
//! is itself live or pinned.

use super::page_of;
use crate::inode::BlockIndex;
use rustc_hash::{FxHashMap, FxHashSet};

/// Liveness of one log's entries (module docs).
#[derive(Default)]
pub(crate) struct Liveness {
    /// File page -> the write entry (its pool offset) mapping it.
    owner: BlockIndex,
    /// Write entry -> how many file pages still map to it (only nonzero).
    mapped: FxHashMap<u64, u32>,
    /// Entries that unmapped pages.
    pinned: FxHashSet<u64>,
    /// The newest entry.
    newest: u64,
    /// Log page -> live entries in it (only nonzero).
    per_page: FxHashMap<u64, u32>,
    /// Pages whose last live entry died since the last `take_dead`.
    dead: Vec<u64>,
    /// Live entries in the whole log.
    count: u64,
}

impl Liveness {
    /// Entry `off` is appended: it is the newest now, and the one before
    /// it may have been live only for being the newest.
    pub fn begin(&mut self, off: u64) {
        let old = std::mem::replace(&mut self.newest, off);
        *self.per_page.entry(page_of(off)).or_default() += 1;
        self.count += 1;
        if old != 0 && !self.held(old) {
            self.died(old);
        }
    }

    /// Write entry `off` maps `pages` file pages from `pgoff`.
    pub fn mapped(&mut self, off: u64, pgoff: u64, pages: u32) {
        assert!(pages > 0, "a write entry maps pages");
        for i in 0..u64::from(pages) {
            self.owner.set(pgoff + i, off);
        }
        self.mapped.insert(off, pages);
    }

    /// Entry `off` unmapped pages: it stays until thorough GC.
    pub fn pin(&mut self, off: u64) {
        self.pinned.insert(off);
    }

    /// File page `fb` no longer maps to the entry that wrote it.
    pub fn unmapped(&mut self, fb: u64) {
        let Some(e) = self.owner.get(fb) else {
            return;
        };
        self.owner.remove(fb);
        let n = self.mapped.get_mut(&e).expect("an owner maps pages");
        *n -= 1;
        if *n == 0 {
            self.mapped.remove(&e);
            if e != self.newest && !self.pinned.contains(&e) {
                self.died(e);
            }
        }
    }

    fn held(&self, off: u64) -> bool {
        self.mapped.contains_key(&off) || self.pinned.contains(&off)
    }

    fn died(&mut self, off: u64) {
        let p = page_of(off);
        let n = self
            .per_page
            .get_mut(&p)
            .expect("a live entry's page counts it");
        *n -= 1;
        self.count -= 1;
        if *n == 0 {
            self.per_page.remove(&p);
            self.dead.push(p);
        }
    }

    /// The pages whose every entry died since the last call.
    pub fn take_dead(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.dead)
    }

    /// Live entries in the log.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Write entries some page still maps to: what a rewritten log keeps
    /// (pinned entries are live only until then).
    pub fn mapping(&self) -> u64 {
        self.mapped.len() as u64
    }

    /// Whether page `p` holds no live entry.
    pub fn page_is_dead(&self, p: u64) -> bool {
        !self.per_page.contains_key(&p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 10 * 4096;

    /// A page dies when its last entry is superseded; the newest entry
    /// and a pinned one never die.
    #[test]
    fn pages_die_with_their_last_entry() {
        let mut l = Liveness::default();
        l.begin(P);
        l.mapped(P, 0, 2);
        l.begin(P + 64);
        l.unmapped(0);
        l.mapped(P + 64, 0, 1);
        assert_eq!(l.count(), 2);
        // A later page supersedes both.
        let q = 11 * 4096;
        l.begin(q);
        l.unmapped(0);
        l.unmapped(1);
        l.mapped(q, 0, 2);
        assert_eq!(l.take_dead(), vec![10]);
        assert_eq!(l.count(), 1);
        l.begin(q + 64);
        l.pin(q + 64);
        l.begin(q + 128);
        assert_eq!(
            l.count(),
            3,
            "pinned and mapped entries stay, the attr one too"
        );
        assert!(!l.page_is_dead(11));
    }
}
