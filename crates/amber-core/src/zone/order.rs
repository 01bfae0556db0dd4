//! A one-fence zone's per-file state (design.md §11.7): each file's
//! highest head write number, and the order files were last written in.
//! A file's write-back frees all its slots at once, so the zone evicts
//! whole files, least recently written first, and keeps no per-slot
//! order: a write touches one entry here instead of a list node per
//! slice (each a cache miss in a large zone).

use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Files by last write. `queue` holds (file, stamp) in stamp order; an
/// entry is live when its stamp is the file's latest, stale otherwise (the
/// file was written again or released), and stale entries are dropped
/// when they outnumber live ones, so the queue stays under twice the
/// files plus `SLACK`.
#[derive(Default)]
pub(super) struct FileOrder {
    /// Per file with slots here: (highest head write number, stamp of
    /// its last write).
    files: FxHashMap<u64, (u64, u64)>,
    queue: VecDeque<(u64, u64)>,
    clock: u64,
}

/// Stale entries tolerated beyond the live ones before a compaction.
const SLACK: usize = 64;

impl FileOrder {
    /// The file's highest head write number, if it has slots here.
    pub fn top(&self, ino: u64) -> Option<u64> {
        self.files.get(&ino).map(|f| f.0)
    }

    /// Records a write of the file with head write number `seq`: its top
    /// rises to `seq` if lower, and it becomes the most recently written.
    pub fn written(&mut self, ino: u64, seq: u64) {
        self.clock += 1;
        let stamp = self.clock;
        let f = self.files.entry(ino).or_insert((seq, stamp));
        *f = (f.0.max(seq), stamp);
        self.queue.push_back((ino, stamp));
        if self.queue.len() > 2 * self.files.len() + SLACK {
            let files = &self.files;
            self.queue
                .retain(|&(ino, stamp)| files.get(&ino).is_some_and(|f| f.1 == stamp));
        }
        debug_assert!(self.queue.len() <= 2 * self.files.len() + SLACK);
    }

    /// The file has no slots here any more.
    pub fn remove(&mut self, ino: u64) {
        self.files.remove(&ino);
    }

    /// Up to `n` files, least recently written first.
    pub fn oldest(&mut self, n: usize) -> Vec<u64> {
        let live = |files: &FxHashMap<u64, (u64, u64)>, &(ino, stamp): &(u64, u64)| {
            files.get(&ino).is_some_and(|f| f.1 == stamp)
        };
        while let Some(front) = self.queue.front() {
            if live(&self.files, front) {
                break;
            }
            self.queue.pop_front();
        }
        let files = &self.files;
        self.queue
            .iter()
            .filter(|e| live(files, e))
            .take(n)
            .map(|&(ino, _)| ino)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_out_least_recently_written_first_and_the_queue_stays_bounded() {
        let mut o = FileOrder::default();
        o.written(7, 3);
        o.written(9, 1);
        o.written(7, 2);
        assert_eq!(o.top(7), Some(3), "a top never falls");
        assert_eq!(o.oldest(5), vec![9, 7]);
        o.remove(9);
        assert_eq!(o.oldest(5), vec![7]);
        assert_eq!(o.top(9), None);
        for i in 0..10_000 {
            o.written(7, i);
        }
        assert!(o.queue.len() <= 2 + SLACK);
        assert_eq!(o.oldest(5), vec![7]);
    }
}
