//! Per-CPU metadata journals: physical redo logging of small metadata
//! updates, so every namespace operation is atomic across a crash.
//!
//! Each journal holds one transaction at a time and is protected by its own
//! mutex; a thread prefers "its" journal (by a thread-local index), so
//! independent operations on different threads do not serialize on one log.
//! Two transactions that touch the same bytes never coexist unretired: the
//! callers hold the inode locks covering those bytes from before the commit
//! until after the retire, so replay order across journals does not matter.

mod tx;

pub use tx::Tx;

use crate::alloc::{Homes, Padded};
use crate::error::{FsError, Result};
use amber_format::journal::{self, JournalState, HEADER_SIZE};
use amber_format::Layout;
use amber_pmem::PmDevice;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries this long or longer are applied with non-temporal stores: a
/// block's worth of file data would otherwise be written into the cache
/// and flushed line by line.
const STREAMED_MIN: usize = 256;

/// The journals of a mounted pool.
pub struct Journals {
    slots: Vec<Padded<Mutex<()>>>,
    seq: AtomicU64,
    /// Which journal a thread prefers (its home in this mount).
    homes: Homes,
}

impl Journals {
    /// Journals for `layout`; `first_seq` continues after recovery; a
    /// thread prefers its home among `homes`.
    pub(crate) fn new(layout: &Layout, first_seq: u64, homes: Homes) -> Journals {
        Journals {
            slots: (0..layout.journal_count)
                .map(|_| Padded(Mutex::new(())))
                .collect(),
            seq: AtomicU64::new(first_seq),
            homes,
        }
    }

    /// Commits `tx`: on return its entries are durable in place and the
    /// journal is empty again. An error means a persist failed; the caller
    /// must poison the file system.
    pub fn commit<D: PmDevice>(&self, dev: &D, layout: &Layout, mut tx: Tx) -> Result<()> {
        if tx.is_empty() {
            return Ok(());
        }
        // Streamed to whole lines: a partial last line would go through
        // the cache and a clwb, which a fence waits twice as long for.
        // The zeros past the payload lie in the journal's free space.
        let len = tx.pad_to(HEADER_SIZE);
        let (padded, spans) = tx.parts();
        let payload = &padded[..len];
        assert!(
            (HEADER_SIZE + padded.len()) as u64 <= layout.journal_bytes(),
            "transaction of {len} bytes exceeds the journal"
        );
        let count = self.slots.len();
        let home = self.homes.slot(count);
        // Take the home journal, or any free one, before waiting.
        let (j, _guard) = (0..count)
            .map(|k| (home + k) % count)
            .find_map(|j| self.slots[j].try_lock().map(|g| (j, g)))
            .unwrap_or_else(|| (home, self.slots[home].lock()));
        let base = layout.journal_offset(j as u32);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let header = journal::encode_header(seq, spans.len() as u32, payload);

        // 1. Commit: header + payload durable; the checksum decides. The
        // header is one whole line, streamed: a cached store and its
        // clwb before the fence cost twice as much (BENCHMARKS.md, "WAL
        // frames written back in place").
        dev.write_nt(base + HEADER_SIZE as u64, padded);
        dev.write_nt(base, &header);
        dev.drain()?;
        // 2. Apply in place: metadata through the cache (it is read again
        // soon), file data (amber's in-place write-back) streamed past it.
        for s in spans {
            let data = &payload[s.start..s.start + s.len];
            if s.len >= STREAMED_MIN {
                dev.write_nt(s.offset, data);
            } else {
                dev.write(s.offset, data);
                dev.flush(s.offset, s.len as u64);
            }
        }
        dev.drain()?;
        // 3. Retire before any lock covering these bytes is released.
        retire(dev, base)
    }
}

/// What recovery found in the journals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Committed transactions replayed.
    pub replayed: u64,
    /// Journals holding a torn, uncommitted transaction (discarded).
    pub discarded: u64,
    /// Highest sequence number seen.
    pub max_seq: u64,
}

/// Reads every journal; with `apply`, replays committed transactions and
/// empties every journal. Entries pointing outside the metadata and data
/// areas mean corruption and are refused before anything is written.
pub fn replay<D: PmDevice>(dev: &D, layout: &Layout, apply: bool) -> Result<ReplayReport> {
    let mut report = ReplayReport::default();
    let mut buf = vec![0u8; layout.journal_bytes() as usize];
    let lo = layout.itable_start * amber_format::BLOCK_SIZE;
    let hi = layout.total_blocks * amber_format::BLOCK_SIZE;
    for j in 0..layout.journal_count {
        let base = layout.journal_offset(j);
        dev.read(base, &mut buf);
        match journal::decode(&buf) {
            JournalState::Empty => continue,
            JournalState::Uncommitted => report.discarded += 1,
            JournalState::Committed(c) => {
                for e in &c.entries {
                    let end = e.offset.checked_add(e.data.len() as u64);
                    if e.offset < lo || !matches!(end, Some(end) if end <= hi) {
                        return Err(FsError::Corrupted(format!(
                            "journal {j} has an entry for bytes {}+{} outside the metadata area",
                            e.offset,
                            e.data.len()
                        )));
                    }
                }
                report.replayed += 1;
                report.max_seq = report.max_seq.max(c.seq);
                if apply {
                    for e in &c.entries {
                        dev.write(e.offset, &e.data);
                        dev.flush(e.offset, e.data.len() as u64);
                    }
                    dev.drain()?;
                }
            }
        }
        if apply {
            retire(dev, base)?;
        }
    }
    Ok(report)
}

/// Empties the journal at `base`: its header line streamed as zeros and
/// fenced. A crash may keep part of the line; a header whose magic
/// survived then fails its checksum, and either way the transaction,
/// applied and fenced before, is not replayed.
fn retire<D: PmDevice>(dev: &D, base: u64) -> Result<()> {
    dev.zero_nt(base, HEADER_SIZE as u64);
    dev.drain()?;
    Ok(())
}
