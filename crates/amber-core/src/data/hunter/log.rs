//! Per-CPU data logs (hunter.txt §III-B): a write takes its blocks at the
//! tail of its CPU's log, which is one add in DRAM. A log is a run of
//! free blocks taken from the block allocator; when it is used up the
//! next run is the lowest free extent — fresh space while the pool has
//! any, and afterwards the gaps that invalid blocks left once their
//! logical information was cleared (gap-write). Nothing is ever copied to
//! make room, so there is no cleaner.
//!
//! A write that follows on from its file's previous block takes its
//! blocks from the log whose tail is right after that block, whichever
//! thread's log it is: a FUSE daemon's threads take turns serving one
//! writer's appends, and from their own logs alone a file written in
//! 8 KiB writes lay in a run per write (two threads, 1,024 writes, 1,032
//! runs), which costs a map lease a mapping per run and reads a request
//! per run.

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

/// A log: its tail, and the tail's next block readable without the lock
/// so a write can find the log it follows on from without taking every
/// log's lock.
#[derive(Debug, Default)]
struct Log {
    tail: Mutex<Tail>,
    next: AtomicU64,
}

pub(super) struct DataLogs {
    logs: Vec<Padded<Log>>,
    /// Runs taken, and of those the ones shorter than asked (gaps).
    pub runs: AtomicU64,
    pub gap_runs: AtomicU64,
}

impl DataLogs {
    pub fn new(count: usize) -> DataLogs {
        assert!(count > 0, "at least one data log");
        DataLogs {
            logs: (0..count).map(|_| Padded(Log::default())).collect(),
            runs: AtomicU64::new(0),
            gap_runs: AtomicU64::new(0),
        }
    }

    /// Up to `n` blocks at the tail of the log whose next block is
    /// `after` (the block after the file's previous one), else of this
    /// thread's log (its home among `homes`), appended to `out`; fewer
    /// only when the pool has no free block left. `fresh` sees each run
    /// the log takes, `(first, len)`, before any block of it is handed
    /// out.
    pub fn take(
        &self,
        blocks: &BlockAllocator,
        homes: &Homes,
        (n, after): (usize, Option<u64>),
        out: &mut Vec<u64>,
        fresh: &dyn Fn(u64, u64),
    ) {
        let home = &self.logs[homes.slot(self.logs.len())];
        // A peek that went stale only costs locality: the log is used
        // under its lock whatever its tail is by then. Another CPU's log
        // is peeked at only when this one's tail does not follow: its
        // line is written at each of that CPU's takes, so each peek is a
        // cache miss.
        let follows = |l: &Padded<Log>| after.is_some_and(|a| l.next.load(Relaxed) == a);
        let log = if after.is_none() || follows(home) {
            home
        } else {
            self.logs.iter().find(|l| follows(l)).unwrap_or(home)
        };
        let mut t = log.tail.lock();
        let want = out.len() + n;
        while out.len() < want {
            if t.next == t.end {
                // The run right after the used one, where it is still
                // free and whole, keeps a file streaming through this log
                // in one run past the log's 2 MiB.
                let Some((start, len)) = blocks.alloc_run(RUN_BLOCKS, Some(t.end)) else {
                    break;
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
        log.next.store(t.next, Relaxed);
    }

    /// Blocks taken for the logs and not yet written.
    pub fn reserved(&self) -> u64 {
        self.logs
            .iter()
            .map(|l| {
                let t = l.tail.lock();
                t.end - t.next
            })
            .sum()
    }

    /// Gives every log's unused tail back to the allocator: at unmount,
    /// so the saved bitmap holds only blocks in use, and for a writer
    /// short of space (a log then starts a new run at its next take).
    pub fn release(&self, blocks: &BlockAllocator) {
        for log in &self.logs {
            let mut t = log.tail.lock();
            for b in t.next..t.end {
                blocks.free(b);
            }
            *t = Tail::default();
            log.next.store(0, Relaxed);
        }
    }
}
