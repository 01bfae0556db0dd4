//! NOVA's log garbage collection (FAST'16 §4.3), run after each commit.
//!
//! **Fast GC.** A log page all of whose entries are dead (and which is not
//! the tail page) is unlinked: one 8-byte store of the previous page's
//! `next`, or of the inode's head when it is the first page. Each store
//! leaves a whole chain; one fence after them, then the pages are freed.
//!
//! **Thorough GC.** When fewer than half of the log's entries still map
//! pages (and the log spans at least two pages; entries kept only because
//! they unmapped pages do not count, since a rewrite drops them), the
//! file's current state is
//! written as a fresh chain — one write entry per run of pages contiguous
//! in the file and on PM, the newest size and times in each — and head and
//! tail switch to it with one 16-byte store; the old chain is freed after.
//! NOVA copies the live entries; writing the index's runs instead gives
//! the same replay with no more entries (a partly superseded entry is
//! rewritten as the runs it still maps), and no entry that only unmapped
//! pages needs to survive. If the fresh chain would not be under half the
//! old one, the attempt waits until the log has doubled, so the work stays
//! proportional to the entries appended.

use super::append::{place, publish, stage};
use super::ops::{attr_entry, write_entries};
use super::Stats;
use crate::data::Context;
use crate::error::Result;
use crate::filelog::{page_of, FileLog};
use crate::inode::InodeState;
use amber_format::nova::{set_log, ENTRIES_PER_PAGE, FOOTER_OFFSET, OFF_FOOTER_NEXT, OFF_LOG_HEAD};
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;

/// Fast GC, then thorough GC if the log is under half live.
pub(super) fn collect<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    log: &mut FileLog,
    stats: &Stats,
) -> Result<()> {
    fast(fs, st, log, stats)?;
    let kept = log.live.mapping() + 1;
    if log.entries >= 2 * ENTRIES_PER_PAGE && kept * 2 < log.entries && log.entries >= log.gc_floor
    {
        thorough(fs, st, log, stats)?;
    }
    Ok(())
}

/// Unlinks and frees the dead pages.
fn fast<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    log: &mut FileLog,
    stats: &Stats,
) -> Result<()> {
    let tail_page = page_of(log.tail);
    let dead: Vec<u64> = log
        .live
        .take_dead()
        .into_iter()
        .filter(|&p| p != tail_page && log.live.page_is_dead(p))
        .collect();
    if dead.is_empty() {
        return Ok(());
    }
    let dev = &**fs.device();
    let l = fs.layout();
    for &p in &dead {
        let i = log
            .pages
            .iter()
            .position(|&x| x == p)
            .expect("a dead page is in the log");
        let next = log.pages[i + 1];
        if i == 0 {
            let at = l.inode_offset(st.ino) + OFF_LOG_HEAD as u64;
            dev.store_u64(at, next);
            dev.flush(at, 8);
            log.head = next;
            set_log(&mut st.disk.inline, next, log.tail);
        } else {
            let at = l.block_offset(log.pages[i - 1]) + FOOTER_OFFSET + OFF_FOOTER_NEXT;
            dev.store_u64(at, next);
            dev.flush(at, 8);
        }
        log.pages.remove(i);
        log.entries -= ENTRIES_PER_PAGE;
    }
    fs.drain()?;
    fs.blocks().free_all(&dead);
    stats.fast_gc_pages.fetch_add(dead.len() as u64, Relaxed);
    Ok(())
}

/// Rewrites the log as the index's runs and switches to it.
fn thorough<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    log: &mut FileLog,
    stats: &Stats,
) -> Result<()> {
    let pairs: Vec<(u64, u64)> = log.map.mapped_in(0, u64::MAX).collect();
    let mut entries = write_entries(&pairs, &st.disk);
    if entries.is_empty() {
        entries.push(attr_entry(&st.disk));
    }
    if entries.len() as u64 * 2 >= log.entries {
        log.gc_floor = log.entries * 2;
        return Ok(());
    }
    let mut fresh = FileLog::default();
    let p = place(fs, &fresh, entries.len())?;
    if let Err(e) = stage(fs, st, &fresh, &entries, &p) {
        fs.blocks().free_all(&p.fresh);
        return Err(e);
    }
    let head = p.fresh[0];
    publish(fs, st, head, p.tail, false)?;
    fresh.head = head;
    fresh.tail = p.tail;
    fresh.pages.clone_from(&p.fresh);
    for (e, &off) in entries.iter().zip(&p.offsets) {
        let dropped = fresh.apply(off, e);
        debug_assert!(dropped.is_empty(), "a fresh log supersedes nothing");
    }
    fresh.live.take_dead();
    let old = std::mem::replace(log, fresh);
    fs.blocks().free_all(&old.pages);
    stats.thorough_gcs.fetch_add(1, Relaxed);
    stats.log_pages.fetch_add(p.fresh.len() as u64, Relaxed);
    stats
        .thorough_gc_pages
        .fetch_add(old.pages.len() as u64, Relaxed);
    Ok(())
}
