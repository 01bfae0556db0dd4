//! Appending entries to a file's log and committing them: NOVA's three
//! ordering points (FAST'16 §4.1). The entries (and any new log page's
//! footer and the link to it) are written past the tail, where no replay
//! reads; one fence makes them and the data they name durable; then one
//! 8-byte store of the tail commits them all, flushed and fenced. A
//! file's first entries set head and tail together with one 16-byte
//! store; a write that also drops set-id bits commits the tail inside a
//! journal transaction with the inode's mode instead.

use super::Stats;
use crate::data::Context;
use crate::error::{FsError, Result};
use crate::filelog::{page_of, slot_of, FileLog};
use crate::inode::InodeState;
use crate::journal::Tx;
use amber_format::nova::{
    log_word, set_log, Entry, Footer, ENTRIES_PER_PAGE, ENTRY_SIZE, FOOTER_OFFSET, OFF_FOOTER_NEXT,
    OFF_LOG_HEAD, OFF_LOG_TAIL,
};
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;

/// Where a batch of entries goes: fresh pages it needs, allocated before
/// anything is written.
pub(super) struct Placement {
    /// New log pages, in chain order.
    pub fresh: Vec<u64>,
    /// Pool offset of each entry.
    pub offsets: Vec<u64>,
    /// The tail once they are committed.
    pub tail: u64,
}

/// Chooses slots for `n` entries after the tail, allocating the pages
/// they need (all or nothing: ENOSPC leaves nothing allocated).
pub(super) fn place<D: PmDevice>(fs: Context<'_, D>, log: &FileLog, n: usize) -> Result<Placement> {
    let l = fs.layout();
    let mut fresh = Vec::new();
    let mut offsets = Vec::with_capacity(n);
    let mut at = (log.tail != 0).then_some(log.tail);
    for _ in 0..n {
        let full = at.is_none_or(|t| slot_of(t) == ENTRIES_PER_PAGE);
        if full {
            let hint = at.map(page_of);
            let Some(p) = fs.blocks().alloc(hint) else {
                fs.blocks().free_all(&fresh);
                return Err(FsError::NoSpace);
            };
            fresh.push(p);
            at = Some(l.block_offset(p));
        }
        let off = at.expect("a slot");
        offsets.push(off);
        at = Some(off + ENTRY_SIZE);
    }
    Ok(Placement {
        fresh,
        offsets,
        tail: at.unwrap_or(log.tail),
    })
}

/// Writes the entries and new pages past the tail, then fences: nothing
/// is reachable yet, and everything is durable once this returns.
pub(super) fn stage<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    log: &FileLog,
    entries: &[Entry],
    p: &Placement,
) -> Result<()> {
    let dev = &**fs.device();
    let l = fs.layout();
    let footer = Footer {
        next: 0,
        ino: st.ino,
        generation: st.disk.generation,
    }
    .encode();
    let mut prev = (log.tail != 0).then(|| page_of(log.tail));
    for &page in &p.fresh {
        dev.write_nt(l.block_offset(page) + FOOTER_OFFSET, &footer);
        if let Some(q) = prev {
            let next = l.block_offset(q) + FOOTER_OFFSET + OFF_FOOTER_NEXT;
            dev.store_u64(next, page);
            dev.flush(next, 8);
        }
        prev = Some(page);
    }
    for (e, &off) in entries.iter().zip(&p.offsets) {
        dev.write_nt(off, &e.encode());
    }
    fs.drain()
}

/// Commits staged entries: the tail store (with the head for a new log,
/// or inside a transaction when the mode changed), flushed and fenced.
pub(super) fn publish<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    head: u64,
    tail: u64,
    mode_changed: bool,
) -> Result<()> {
    let dev = &**fs.device();
    let base = fs.layout().inode_offset(st.ino);
    let (old_head, _) = amber_format::nova::log_of(&st.disk.inline);
    set_log(&mut st.disk.inline, head, tail);
    if mode_changed {
        let mut tx = Tx::new();
        tx.inode(fs.layout(), st.ino, &st.disk);
        return fs.commit(tx);
    }
    if old_head == head {
        dev.store_u64(base + OFF_LOG_TAIL as u64, tail);
        dev.flush(base + OFF_LOG_TAIL as u64, 8);
    } else {
        dev.store_u128(base + OFF_LOG_HEAD as u64, log_word(head, tail));
        dev.flush(base + OFF_LOG_HEAD as u64, 16);
    }
    fs.drain()
}

/// Appends `entries` to `st`'s log and commits them; on return they are
/// durable and applied to the DRAM index, and the blocks they superseded
/// are free. On an error before the tail store nothing changed (ENOSPC);
/// one after it has poisoned the mount. `mode_changed`: the inode's mode
/// in DRAM differs from PM's and commits with them.
pub(super) fn append<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    log: &mut FileLog,
    entries: &[Entry],
    mode_changed: bool,
    stats: &Stats,
) -> Result<()> {
    let p = prepare(fs, st, log, entries)?;
    let head = if log.head == 0 { p.fresh[0] } else { log.head };
    publish(fs, st, head, p.tail, mode_changed)?;
    finish(fs, log, entries, p, head, stats);
    Ok(())
}

/// Stages `entries` after the tail and applies them to the DRAM log, but
/// leaves the commit to the caller: the returned (head, tail) go into the
/// inode a journal transaction writes. Until that commits, a crash leaves
/// the entries past the durable tail, where no replay reads them; if the
/// commit fails the mount is poisoned.
pub(super) fn stage_only<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    log: &mut FileLog,
    entries: &[Entry],
    stats: &Stats,
) -> Result<(u64, u64)> {
    let p = prepare(fs, st, log, entries)?;
    let head = if log.head == 0 { p.fresh[0] } else { log.head };
    let tail = p.tail;
    finish(fs, log, entries, p, head, stats);
    Ok((head, tail))
}

/// Places and stages `entries`: all or nothing.
fn prepare<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    log: &FileLog,
    entries: &[Entry],
) -> Result<Placement> {
    assert!(!entries.is_empty(), "an append has entries");
    let p = place(fs, log, entries.len())?;
    if let Err(e) = stage(fs, st, log, entries, &p) {
        fs.blocks().free_all(&p.fresh);
        return Err(e);
    }
    Ok(p)
}

/// The DRAM side of a commit: the log's ends and pages, the entries
/// applied, and the blocks they superseded freed.
fn finish<D: PmDevice>(
    fs: Context<'_, D>,
    log: &mut FileLog,
    entries: &[Entry],
    p: Placement,
    head: u64,
    stats: &Stats,
) {
    log.head = head;
    log.tail = p.tail;
    log.pages.extend(&p.fresh);
    let mut freed = Vec::new();
    for (e, &off) in entries.iter().zip(&p.offsets) {
        freed.extend(log.apply(off, e));
    }
    fs.blocks().free_all(&freed);
    stats.entries.fetch_add(entries.len() as u64, Relaxed);
    stats.log_pages.fetch_add(p.fresh.len() as u64, Relaxed);
}
