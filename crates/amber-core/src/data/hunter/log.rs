//! Per-CPU data logs (hunter.txt §III-B): a write takes its blocks at the
//! tail of its CPU's log, which is one add in DRAM. A log is a run of
//! free blocks taken from the block allocator; when it is used up the
//! next run is the lowest free extent — fresh space while the pool has
//! any, and afterwards the gaps that invalid blocks left once their
//! logical information was cleared (gap-write). Nothing is ever copied to
//! make room, so there is no cleaner.

use crate::alloc::{BlockAllocator, Homes, Padded};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Blocks a log takes from the allocator at a time (2 MiB).
const RUN_BLOCKS: u64 = 512;

/// The free run a log appends into.
#[derive(Debug, Default, Clone, Copy)]
struct Tail {
    next: u64,
    end: u64,
}

pub(super) struct DataLogs {
    logs: Vec<Padded<Mutex<Tail>>>,
    /// Runs taken, and of those the ones shorter than asked (gaps).
    pub runs: AtomicU64,
    pub gap_runs: AtomicU64,
}

impl DataLogs {
    pub fn new(count: usize) -> DataLogs {
        assert!(count > 0, "at least one data log");
        DataLogs {
            logs: (0..count)
                .map(|_| Padded(Mutex::new(Tail::default())))
                .collect(),
            runs: AtomicU64::new(0),
            gap_runs: AtomicU64::new(0),
        }
    }

    /// Up to `n` blocks at the tail of this thread's log (its home among
    /// `homes`), appended to `out`; fewer only when the pool has no free
    /// block left. `fresh` sees each run the log takes, `(first, len)`,
    /// before any block of it is handed out.
    pub fn take(
        &self,
        blocks: &BlockAllocator,
        homes: &Homes,
        n: usize,
        out: &mut Vec<u64>,
        fresh: &dyn Fn(u64, u64),
    ) {
        let mut t = self.logs[homes.slot(self.logs.len())].lock();
        let want = out.len() + n;
        while out.len() < want {
            if t.next == t.end {
                let Some((start, len)) = blocks.alloc_run(RUN_BLOCKS) else {
                    return;
                };
                self.runs.fetch_add(1, Relaxed);
                if len < RUN_BLOCKS {
                    self.gap_runs.fetch_add(1, Relaxed);
                }
                fresh(start, len);
                *t = Tail {
                    next: start,
                    end: start + len,
                };
            }
            let k = (t.end - t.next).min((want - out.len()) as u64);
            out.extend(t.next..t.next + k);
            t.next += k;
        }
    }

    /// Blocks taken for the logs and not yet written.
    pub fn reserved(&self) -> u64 {
        self.logs
            .iter()
            .map(|l| {
                let t = l.lock();
                t.end - t.next
            })
            .sum()
    }

    /// Gives every log's unused tail back to the allocator: at unmount,
    /// so the saved bitmap holds only blocks in use, and for a writer
    /// short of space (a log then starts a new run at its next take).
    pub fn release(&self, blocks: &BlockAllocator) {
        for log in &self.logs {
            let mut t = log.lock();
            for b in t.next..t.end {
                blocks.free(b);
            }
            *t = Tail::default();
        }
    }
}
