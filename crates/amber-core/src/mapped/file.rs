//! One file's mappings and the blocks they pin, kept with its DRAM inode
//! (`InodeState::maps`) and changed only under its lock.
//!
//! Invariant (design.md §16): every pinned file block lies below the end
//! of file and has a block on PM; while pinned it is written only in
//! place. A mapping pins the blocks it shows (`shown` of them from its
//! first); blocks a forked child may still map after this process
//! unmapped them stay pinned in `kept` until the pool closes.

use super::MapId;
use amber_format::BLOCK_SIZE;
use amber_pmem::Window;

/// One mapping of the file.
#[derive(Debug)]
pub(crate) struct FileMap {
    pub id: MapId,
    /// The first file block it shows.
    pub first: u64,
    /// Blocks it spans.
    pub blocks: u64,
    /// Of those, how many from `first` show the file's blocks (below the
    /// end of file); the rest lie past it.
    pub shown: u64,
    pub prot: i32,
    pub may_write: bool,
    pub sync: bool,
    /// It was writable since its blocks were last flushed: stores may
    /// wait in the CPU cache.
    pub dirty: bool,
    /// A forked child may map these blocks too (it existed at a fork).
    pub inherited: bool,
    /// Where a front end shows it; none for a library mapping on a device
    /// that cannot map its pages (the crash simulator).
    pub window: Option<Window>,
}

impl FileMap {
    /// Its bytes in the file.
    pub fn off(&self) -> u64 {
        self.first * BLOCK_SIZE
    }

    /// The address of its first byte, if it has a window.
    pub fn addr(&self) -> Option<usize> {
        self.window.as_ref().map(Window::addr)
    }

    /// The file blocks it pins, as (first, count).
    pub fn pinned(&self) -> (u64, u64) {
        (self.first, self.shown)
    }
}

/// Every mapping of one file (module docs).
#[derive(Debug, Default)]
pub(crate) struct FileMaps {
    pub maps: Vec<FileMap>,
    /// File blocks pinned for a forked child after this process unmapped
    /// them, as (first, count).
    pub kept: Vec<(u64, u64)>,
}

impl FileMaps {
    /// Every pinned range, as (first, count), unsorted.
    fn pins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.maps
            .iter()
            .map(FileMap::pinned)
            .chain(self.kept.iter().copied())
            .filter(|&(_, n)| n > 0)
    }

    /// Whether any block of `[first, last]` is pinned.
    pub fn any_pinned(&self, first: u64, last: u64) -> bool {
        self.pins().any(|(s, n)| s <= last && s + n > first)
    }

    /// `[first, last]` cut into runs of blocks all pinned or all not, as
    /// (first, last, pinned), in order.
    pub fn runs(&self, first: u64, last: u64) -> Vec<(u64, u64, bool)> {
        let mut cuts: Vec<(u64, u64)> = self
            .pins()
            .filter(|&(s, n)| s <= last && s + n > first)
            .map(|(s, n)| (s.max(first), (s + n - 1).min(last)))
            .collect();
        cuts.sort_unstable();
        let mut out = Vec::with_capacity(2 * cuts.len() + 1);
        let mut at = first;
        for (s, e) in cuts {
            if e < at {
                continue;
            }
            if s > at {
                out.push((at, s - 1, false));
            }
            let from = s.max(at);
            match out.last_mut() {
                Some((_, last_e, true)) if *last_e + 1 == from => *last_e = e,
                _ => out.push((from, e, true)),
            }
            at = e + 1;
            if at > last {
                break;
            }
        }
        if at <= last {
            out.push((at, last, false));
        }
        out
    }

    /// Pinned ranges a forked child may map, as (first, count).
    pub fn shared_with_child(&self) -> Vec<(u64, u64)> {
        self.maps
            .iter()
            .filter(|m| m.inherited)
            .map(FileMap::pinned)
            .chain(self.kept.iter().copied())
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// The index of mapping `id` in `maps`.
    pub fn position(&self, id: MapId) -> Option<usize> {
        self.maps.iter().position(|m| m.id == id)
    }

    /// Whether nothing is mapped or kept.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty() && self.kept.is_empty()
    }

    /// Drops pinned ranges at and past file block `end` from `kept`.
    pub fn clip_kept(&mut self, end: u64) {
        for k in &mut self.kept {
            k.1 = k.1.min(end.saturating_sub(k.0));
        }
        self.kept.retain(|&(_, n)| n > 0);
    }
}

/// How many blocks from `first` of a mapping `blocks` long show the file
/// when it is `size` bytes long.
pub(crate) fn shown_for(first: u64, blocks: u64, size: u64) -> u64 {
    size.div_ceil(BLOCK_SIZE).saturating_sub(first).min(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(first: u64, shown: u64) -> FileMap {
        FileMap {
            id: MapId(first),
            first,
            blocks: shown + 2,
            shown,
            prot: libc::PROT_READ,
            may_write: false,
            sync: false,
            dirty: false,
            inherited: false,
            window: None,
        }
    }

    #[test]
    fn runs_cut_a_range_at_every_pin_edge() {
        let maps = FileMaps {
            maps: vec![map(4, 3), map(6, 4), map(20, 1)],
            kept: vec![(30, 2)],
        };
        assert_eq!(maps.runs(0, 3), vec![(0, 3, false)]);
        assert_eq!(
            maps.runs(0, 25),
            vec![
                (0, 3, false),
                (4, 9, true),
                (10, 19, false),
                (20, 20, true),
                (21, 25, false)
            ]
        );
        assert_eq!(maps.runs(5, 5), vec![(5, 5, true)]);
        assert_eq!(maps.runs(31, 40), vec![(31, 31, true), (32, 40, false)]);
        assert!(maps.any_pinned(9, 12));
        assert!(!maps.any_pinned(10, 19));
    }

    #[test]
    fn shown_blocks_follow_the_end_of_file() {
        assert_eq!(shown_for(0, 4, 0), 0);
        assert_eq!(shown_for(0, 4, 1), 1);
        assert_eq!(shown_for(0, 4, 4096 * 9), 4);
        assert_eq!(shown_for(2, 4, 4096 * 3 + 1), 2);
        assert_eq!(shown_for(5, 4, 4096 * 3), 0);
    }
}
