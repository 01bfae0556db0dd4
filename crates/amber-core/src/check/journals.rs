//! The redo journals. A committed transaction means the pool was not
//! unmounted cleanly: expected after a crash (mount replays it), corrupt in
//! a pool marked clean (clean unmount retires every transaction, so
//! replaying one there could undo later changes: repair discards it).

use super::Ctx;
use crate::error::FsError;
use crate::journal;
use amber_format::journal::{decode, Entry, JournalState};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// Checks every journal; returns the committed transactions found. In
/// repair mode a crashed pool's journals are replayed here, so the later
/// phases see (and fix) the metadata mount would see; otherwise the
/// entries are laid over the reads instead.
pub(super) fn check<D: PmDevice>(cx: &mut Ctx<'_, D>, was_clean: bool) -> Result<u64, FsError> {
    let l = cx.layout;
    let lo = l.itable_start * BLOCK_SIZE;
    let hi = l.total_blocks * BLOCK_SIZE;
    let mut buf = vec![0u8; l.journal_bytes() as usize];
    let mut pending = 0;
    let mut replayable = 0;
    let mut patches = Vec::new();
    for j in 0..l.journal_count {
        let base = l.journal_offset(j);
        cx.media.read(base, &mut buf);
        let c = match decode(&buf) {
            JournalState::Empty => continue,
            JournalState::Uncommitted => {
                cx.note(format!(
                    "journal {j} holds a torn transaction that never committed; it is ignored"
                ));
                continue;
            }
            JournalState::Committed(c) => c,
        };
        pending += 1;
        let outside = c.entries.iter().find(|e| !inside(e, lo, hi));
        if let Some(e) = outside {
            let what = format!(
                "journal {j} holds a committed transaction (sequence {}) with an entry for \
                 bytes {}+{} outside the metadata and data areas, so mount refuses the pool",
                c.seq,
                e.offset,
                e.data.len()
            );
            cx.fixable(what, "the transaction is discarded", |f| f.zero(base, 8));
        } else if was_clean {
            let what = format!(
                "journal {j} holds a committed transaction (sequence {}) but the pool is marked \
                 cleanly unmounted, so mount refuses it",
                c.seq
            );
            cx.fixable(
                what,
                "the transaction is discarded (a clean unmount had applied it)",
                |f| f.zero(base, 8),
            );
        } else {
            replayable += 1;
            patches.extend(c.entries);
        }
    }
    if replayable > 0 {
        recover(cx, replayable, patches)?;
    }
    Ok(pending)
}

/// A crashed pool's `replayable` committed transactions (their entries
/// `patches`): repair replays them on the media; a check lays them over
/// its reads, as mount would see the pool.
fn recover<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    replayable: u64,
    patches: Vec<Entry>,
) -> Result<(), FsError> {
    let l = cx.layout;
    if cx.repair {
        // Discard the refused transactions first: replay would stop at them.
        cx.fixes.apply(cx.media.dev())?;
        let r = journal::replay(cx.media.dev(), &l, true)?;
        cx.note(format!(
            "the pool was not cleanly unmounted: replayed {} journal transaction(s)",
            r.replayed
        ));
    } else {
        cx.note(format!(
            "needs recovery: {replayable} journal transaction(s) will be replayed at mount"
        ));
        cx.media.add_patches(patches);
    }
    Ok(())
}

fn inside(e: &Entry, lo: u64, hi: u64) -> bool {
    let end = e.offset.checked_add(e.data.len() as u64);
    e.offset >= lo && matches!(end, Some(end) if end <= hi)
}
