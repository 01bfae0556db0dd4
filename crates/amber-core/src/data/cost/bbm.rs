//! The Buffer Benefit Model (HiNFS §3.2): per block, whether buffering
//! its writes in DRAM pays off. Between two fsyncs a block takes Ncw
//! cache-line writes; at the fsync, Ncf distinct lines must be flushed to
//! PM if it was buffered. Buffering costs Ncw*L_dram + Ncf*L_pm, writing
//! directly Ncw*L_pm, so the block is predicted Lazy (buffer) when
//! `Ncw*L_dram + Ncf*L_pm < Ncw*L_pm`, else Eager (direct). For blocks
//! written directly a ghost dirty bitmap records which lines buffering
//! would have dirtied, so Ncf is known at the next fsync either way.
//!
//! A file not fsync'd for `lazy_after` is treated as Lazy everywhere
//! (nothing forces its data out soon, so buffering can only help).

use rustc_hash::FxHashMap;
use std::time::Duration;

/// Whether `then` (by `now`) lies less than `age` before `now`.
pub fn within(now: u64, then: u64, age: Duration) -> bool {
    u128::from(now.saturating_sub(then)) < age.as_nanos()
}

/// Blocks whose history one file keeps; past it new blocks are simply
/// Lazy (the default) and unrecorded, so a huge file cannot grow it.
pub const MAX_TRACKED_BLOCKS: usize = 1 << 16;

/// Per-line write latencies, from the calibration at mount.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    pub l_dram_ns: f64,
    pub l_pm_ns: f64,
}

/// Whether buffering a block with `ncw` line writes and `ncf` lines to
/// flush at the sync is cheaper than writing it directly.
pub fn lazy_wins(ncw: u64, ncf: u64, c: Costs) -> bool {
    let (w, f) = (ncw as f64, ncf as f64);
    w * c.l_dram_ns + f * c.l_pm_ns < w * c.l_pm_ns
}

#[derive(Debug, Clone, Default)]
struct BlockModel {
    eager: bool,
    ncw: u64,
    /// Lines a write-through of this block would have left dirty.
    ghost: u64,
    /// The decision at the previous sync, for the accuracy count.
    last: Option<bool>,
}

/// One sync's verdicts: how many blocks were decided, how many of those
/// had a decision before (a prediction to check), and how many of those
/// equal it (the prediction held).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdicts {
    pub decisions: u64,
    /// Decisions for Eager.
    pub eager: u64,
    pub predicted: u64,
    pub accurate: u64,
}

/// The model of one file.
#[derive(Debug, Default)]
pub struct FileModel {
    /// Hashed, not ordered: a write looks its block up and records into
    /// it, the hot path of every write under a buffering policy.
    blocks: FxHashMap<u64, BlockModel>,
    /// Blocks written since the last sync, each once (added when its Ncw
    /// leaves 0, which only a sync resets): what the next sync decides,
    /// without visiting every block the file ever had. At most
    /// `MAX_TRACKED_BLOCKS` long.
    written: Vec<u64>,
    /// When the file was last synced, by `now`.
    last_sync: Option<u64>,
    /// What a block without history is predicted: the majority of the
    /// last sync's decisions. A file appended and fsync'd (a mail spool,
    /// a log) writes each block about once between syncs, so its blocks
    /// come out Eager, and its next appends land in blocks never seen.
    prior_eager: bool,
}

impl FileModel {
    /// Whether the file was ever synced (else it has no history at all).
    pub fn has_synced(&self) -> bool {
        self.last_sync.is_some()
    }

    /// Whether a write to `fb` now should go directly to PM.
    pub fn eager(&self, fb: u64, now: u64, lazy_after: Duration) -> bool {
        let recent = self.last_sync.is_some_and(|t| within(now, t, lazy_after));
        recent && self.blocks.get(&fb).map_or(self.prior_eager, |b| b.eager)
    }

    /// Records a write of `lines` to `fb`; `direct` if it went to PM (the
    /// ghost bitmap then remembers the lines).
    pub fn record_write(&mut self, fb: u64, lines: u64, direct: bool) {
        // One lookup for a block with history, the common case.
        let full = self.blocks.len() >= MAX_TRACKED_BLOCKS;
        let b = match self.blocks.get_mut(&fb) {
            Some(b) => b,
            None if full => return,
            None => self.blocks.entry(fb).or_default(),
        };
        if b.ncw == 0 {
            self.written.push(fb);
        }
        b.ncw = b.ncw.saturating_add(lines.count_ones() as u64);
        if direct {
            b.ghost |= lines;
        }
    }

    /// At an fsync: decides every block written since the last one.
    /// `dirty(fb)` gives the buffered dirty lines of `fb` (0 if not
    /// buffered).
    pub fn sync(&mut self, now: u64, costs: Costs, dirty: impl Fn(u64) -> u64) -> Verdicts {
        let mut v = Verdicts::default();
        let mut eager = 0;
        let mut written = std::mem::take(&mut self.written);
        assert!(
            written.len() <= MAX_TRACKED_BLOCKS,
            "{} blocks written since the last sync",
            written.len()
        );
        for fb in written.drain(..) {
            let Some(b) = self.blocks.get_mut(&fb).filter(|b| b.ncw > 0) else {
                continue;
            };
            let ncf = (b.ghost | dirty(fb)).count_ones() as u64;
            let lazy = lazy_wins(b.ncw, ncf, costs);
            v.decisions += 1;
            if let Some(last) = b.last {
                v.predicted += 1;
                v.accurate += u64::from(last == lazy);
            }
            b.last = Some(lazy);
            b.eager = !lazy;
            eager += u64::from(!lazy);
            b.ncw = 0;
            b.ghost = 0;
        }
        self.written = written;
        if v.decisions > 0 {
            self.prior_eager = eager * 2 > v.decisions;
        }
        v.eager = eager;
        self.last_sync = Some(now);
        v
    }

    /// Forgets blocks at or past `fb` (truncated away).
    pub fn truncate(&mut self, fb: u64) {
        self.blocks.retain(|&b, _| b < fb);
        self.written.retain(|&b| b < fb);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PCM: Costs = Costs {
        l_dram_ns: 10.0,
        l_pm_ns: 100.0,
    };

    #[test]
    fn inequality_decides() {
        // Rewriting one line ten times: buffering flushes it once.
        assert!(lazy_wins(10, 1, PCM));
        // Each line written once: buffering only adds the DRAM copy.
        assert!(!lazy_wins(64, 64, PCM));
        // Equal cost is not a win.
        assert!(!lazy_wins(10, 9, PCM));
    }

    #[test]
    fn ghost_bitmap_gives_ncf_for_direct_blocks_and_accuracy_counts() {
        let now = amber_pmem::clock::coarse_monotonic_ns();
        let lazy_after = Duration::from_secs(5);
        let mut m = FileModel::default();
        // Never synced: lazy everywhere, and no history of its own.
        assert!(!m.eager(0, now, lazy_after));
        assert!(!m.has_synced());
        m.record_write(0, u64::MAX, true);
        m.record_write(1, 1, false);
        m.record_write(1, 1, false);
        m.record_write(1, 1, false);
        let v = m.sync(now, PCM, |fb| if fb == 1 { 1 } else { 0 });
        assert_eq!(
            v,
            Verdicts {
                decisions: 2,
                eager: 1,
                predicted: 0,
                accurate: 0
            }
        );
        assert!(m.eager(0, now, lazy_after), "64 lines once each: eager");
        assert!(!m.eager(1, now, lazy_after), "one line thrice: lazy");
        // One eager, one lazy: no majority, new blocks stay lazy.
        assert!(!m.eager(7, now, lazy_after));
        // Same pattern again: both predictions held.
        m.record_write(0, u64::MAX, true);
        m.record_write(1, 1, false);
        m.record_write(1, 1, false);
        let v = m.sync(now, PCM, |fb| if fb == 1 { 1 } else { 0 });
        assert_eq!(
            v,
            Verdicts {
                decisions: 2,
                eager: 1,
                predicted: 2,
                accurate: 2
            }
        );
        // Long without a sync: lazy again.
        assert!(!m.eager(0, now + 6_000_000_000, lazy_after));
        m.truncate(1);
        m.record_write(1, 1, false);
        let v = m.sync(now, PCM, |_| 1);
        assert_eq!(
            v,
            Verdicts {
                decisions: 1,
                eager: 1,
                predicted: 0,
                accurate: 0
            }
        );
    }
}
