//! What each file operation appends to the log: write entries for
//! copied-on-write pages, attribute entries for truncate and utimens,
//! write and punch entries for fallocate. Every operation is one append,
//! so one tail store commits it whole.

use super::append::{append, stage_only};
use super::{gc, with_log, Stats};
use crate::data::direct::{block_range, note_write, partial_edges};
use crate::data::{write_in_blocks, Context, FALLOC_CHUNK};
use crate::error::{FsError, Result};
use crate::inode::InodeState;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::nova::{set_log, Entry, EntryKind, FLAG_TRUNCATE};
use amber_format::{Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// An entry of `kind` carrying the file's attributes in `d`.
fn entry(kind: EntryKind, d: &Inode) -> Entry {
    Entry {
        kind,
        flags: 0,
        pages: 0,
        pgoff: 0,
        block: 0,
        size: d.size,
        mtime: d.mtime,
        ctime: d.ctime,
        generation: d.generation,
    }
}

/// An attribute entry carrying `d`'s size and times.
pub(super) fn attr_entry(d: &Inode) -> Entry {
    entry(EntryKind::Attr, d)
}

/// Write entries for `(file page, block)` pairs in ascending page order:
/// one per run that is contiguous in both.
pub(super) fn write_entries(pairs: &[(u64, u64)], d: &Inode) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for &(fb, b) in pairs {
        match out.last_mut() {
            Some(e)
                if e.pgoff + u64::from(e.pages) == fb
                    && e.block + u64::from(e.pages) == b
                    && e.pages < u32::MAX =>
            {
                e.pages += 1;
            }
            _ => out.push(Entry {
                pages: 1,
                pgoff: fb,
                block: b,
                ..entry(EntryKind::Write, d)
            }),
        }
    }
    out
}

/// Copies file pages `fbs` to `fresh` blocks: each new block holds the
/// old page (zeros for a hole, and past `old_size`) with `fill` applied.
/// Non-temporal stores; the append's fence makes them durable.
fn copy_pages<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    old_size: u64,
    pages: &[(u64, u64)],
    fill: &mut dyn FnMut(u64, &mut [u8]),
) {
    let dev = &**fs.device();
    let l = fs.layout();
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    for &(fb, b) in pages {
        let bstart = fb * BLOCK_SIZE;
        match st.map.get(fb) {
            Some(old) => {
                dev.read(l.block_offset(old), &mut buf);
                let keep = old_size.saturating_sub(bstart).min(BLOCK_SIZE) as usize;
                buf[keep..].fill(0);
            }
            None => buf.fill(0),
        }
        fill(fb, &mut buf);
        dev.write_nt(l.block_offset(b), &buf);
    }
}

/// Appends `entries` under the file's log, then collects garbage. If
/// the append fails before its commit, `undo` restores the DRAM inode and
/// the new blocks `fresh` go back: nothing changed.
fn commit<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    entries: &[Entry],
    fresh: &[u64],
    (mode_changed, stats): (bool, &Stats),
    undo: impl FnOnce(&mut InodeState),
) -> Result<()> {
    with_log(fs, st, |log, st| {
        if let Err(e) = append(fs, st, log, entries, mode_changed, stats) {
            undo(st);
            fs.blocks().free_all(fresh);
            return Err(e);
        }
        gc::collect(fs, st, log, stats)
    })
}

/// A write: every page it touches copied to a new block (whole pages
/// straight from the caller, partial ones merged with the old page), one
/// write entry per run, one commit.
pub(super) fn write<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    data: &[u8],
    stats: &Stats,
) -> Result<()> {
    let end = off + data.len() as u64;
    let old_size = st.disk.size;
    if off >= (old_size / BLOCK_SIZE + 1) * BLOCK_SIZE {
        // The old last page is not copied: its tail is zeroed in place.
        zero_past_size(fs, st, old_size, end)?;
    }
    let range = block_range(off, end);
    let n = usize::try_from(range.end() - range.start() + 1).map_err(|_| FsError::FileTooLarge)?;
    let fresh = fs
        .blocks()
        .alloc_many(n, st.map.get(*range.start()))
        .ok_or(FsError::NoSpace)?;
    let pages: Vec<(u64, u64)> = range.zip(fresh.iter().copied()).collect();
    let piece = |fb: u64| {
        let bstart = fb * BLOCK_SIZE;
        let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
        (s - bstart, &data[(s - off) as usize..(e - off) as usize])
    };
    let mut partial = Vec::new();
    for &(fb, b) in &pages {
        match piece(fb) {
            (0, src) if src.len() as u64 == BLOCK_SIZE => {
                fs.device().write_nt(fs.layout().block_offset(b), src);
            }
            _ => partial.push((fb, b)),
        }
    }
    copy_pages(fs, st, old_size, &partial, &mut |fb, buf| {
        let (at, src) = piece(fb);
        buf[at as usize..at as usize + src.len()].copy_from_slice(src);
    });
    let saved = (st.disk.mode, st.disk.mtime, st.disk.ctime, st.disk.size);
    let mode_changed = note_write(fs, st);
    st.disk.size = old_size.max(end);
    let entries = write_entries(&pages, &st.disk);
    commit(fs, st, &entries, &fresh, (mode_changed, stats), |st| {
        (st.disk.mode, st.disk.mtime, st.disk.ctime, st.disk.size) = saved;
    })
}

/// A write into pages a mapping pins (design.md §16): no copy — the
/// bytes go into the file's own pages, after those a growth exposes past
/// the old size are zeroed; one fence makes them durable, then an
/// attribute entry commits the new size and times (a dropped set-id bit
/// with them). After a crash each byte is old or new.
pub(super) fn write_in_place<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    data: &[u8],
    stats: &Stats,
) -> Result<()> {
    let end = off + data.len() as u64;
    let old_size = st.disk.size;
    zero_past_size(fs, st, old_size, off)?;
    write_in_blocks(fs, st.ino, (off, data), |fb| st.map.get(fb))?;
    fs.drain()?;
    let saved = (st.disk.mode, st.disk.mtime, st.disk.ctime, st.disk.size);
    let mode_changed = note_write(fs, st);
    st.disk.size = old_size.max(end);
    let e = attr_entry(&st.disk);
    commit(fs, st, &[e], &[], (mode_changed, stats), |st| {
        (st.disk.mode, st.disk.mtime, st.disk.ctime, st.disk.size) = saved;
    })
}

/// mtime and ctime moved to `now` without a write (stores through a
/// mapping): an attribute entry carrying them.
pub(super) fn touch<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    now: amber_format::Timespec,
    stats: &Stats,
) -> Result<()> {
    let mut d = st.disk.clone();
    (d.mtime, d.ctime) = (now, now);
    let e = attr_entry(&d);
    let saved = std::mem::replace(&mut st.disk, d);
    commit(fs, st, &[e], &[], (false, stats), |st| st.disk = saved)
}

/// Before the size grows from `old` to `to` without a copy of the old
/// last page (truncate up, fallocate, a write that starts past that page
/// or goes in place): zeroes that page's bytes past `old`, in place, and
/// fences. A shrink of a pinned page cannot copy it to zero them, and a
/// program may store past the end through a mapping; they lie past the
/// durable size, so no crash shows the zeroing.
fn zero_past_size<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    old: u64,
    to: u64,
) -> Result<()> {
    let fb = old / BLOCK_SIZE;
    let to = to.min((fb + 1) * BLOCK_SIZE);
    match st.map.get(fb) {
        Some(b) if to > old && !old.is_multiple_of(BLOCK_SIZE) => {
            let at = fs.layout().block_offset(b) + old % BLOCK_SIZE;
            fs.device().zero_nt(at, to - old);
            fs.drain()
        }
        _ => Ok(()),
    }
}

/// Sets the size: an attribute entry, or, when the new last page is
/// partial and mapped (and no mapping pins it), a copy of it with the
/// bytes past the size zeroed (every byte past a file's size reads as
/// zero once it grows again; a pinned page is zeroed in place by the
/// core after the entry, and growth zeroes it again). A shrink unmaps
/// the pages past the size when it is replayed.
pub(super) fn truncate<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    size: u64,
    stats: &Stats,
) -> Result<()> {
    if size > MAX_FILE_SIZE {
        return Err(FsError::FileTooLarge);
    }
    let old = st.disk.size;
    zero_past_size(fs, st, old, size)?;
    let now = fs.now();
    let mut d = st.disk.clone();
    (d.size, d.mtime, d.ctime) = (size, now, now);
    let mut e = entry(EntryKind::Attr, &d);
    let mut fresh = None;
    if size < old {
        e.flags = FLAG_TRUNCATE;
        let fb = size / BLOCK_SIZE;
        if !size.is_multiple_of(BLOCK_SIZE) && st.map.get(fb).is_some() && !st.pinned(fb) {
            let b = fs.blocks().alloc(st.map.get(fb)).ok_or(FsError::NoSpace)?;
            copy_pages(fs, st, size, &[(fb, b)], &mut |_, _| {});
            (e.kind, e.pages, e.pgoff, e.block) = (EntryKind::Write, 1, fb, b);
            fresh = Some(b);
        }
    }
    let saved = std::mem::replace(&mut st.disk, d);
    commit(fs, st, &[e], fresh.as_slice(), (false, stats), |st| {
        st.disk = saved;
    })
}

/// utimens on a file: its mtime lives in the log, so an attribute entry
/// carrying the new one is staged and its tail goes into the setattr's
/// transaction (`new`'s log fields), committed with the inode.
pub(super) fn set_mtime<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    new: &mut Inode,
    stats: &Stats,
) -> Result<()> {
    let e = Entry {
        size: st.disk.size,
        ..entry(EntryKind::Attr, new)
    };
    let (head, tail) = with_log(fs, st, |log, st| stage_only(fs, st, log, &[e], stats))?;
    set_log(&mut new.inline, head, tail);
    Ok(())
}

/// fallocate's allocation: zeroed blocks for the holes of `[off, end)`,
/// `FALLOC_CHUNK` pages per append; then the size grows over the range
/// unless `keep_size`. A range with more holes than the pool has free
/// blocks fails with ENOSPC before anything changes.
pub(super) fn allocate<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    end: u64,
    keep_size: bool,
    stats: &Stats,
) -> Result<()> {
    let (first, stop) = (off / BLOCK_SIZE, end.div_ceil(BLOCK_SIZE));
    let mapped = st.map.mapped_in(first, stop).count() as u64;
    if stop - first - mapped > fs.blocks().free_count() {
        return Err(FsError::NoSpace);
    }
    st.disk.ctime = fs.now();
    let mut at = first;
    while at < stop {
        let to = (at + FALLOC_CHUNK as u64).min(stop);
        let holes: Vec<u64> = (at..to).filter(|&f| st.map.get(f).is_none()).collect();
        at = to;
        if holes.is_empty() {
            continue;
        }
        let fresh = fs
            .blocks()
            .alloc_many(holes.len(), None)
            .ok_or(FsError::NoSpace)?;
        for &b in &fresh {
            fs.device().zero_nt(fs.layout().block_offset(b), BLOCK_SIZE);
        }
        let pages: Vec<(u64, u64)> = holes.into_iter().zip(fresh.iter().copied()).collect();
        let entries = write_entries(&pages, &st.disk);
        commit(fs, st, &entries, &fresh, (false, stats), |_| {})?;
    }
    if !keep_size && end > st.disk.size {
        zero_past_size(fs, st, st.disk.size, end)?;
        let now = fs.now();
        let mut d = st.disk.clone();
        (d.size, d.mtime, d.ctime) = (end, now, now);
        let e = entry(EntryKind::Attr, &d);
        let saved = std::mem::replace(&mut st.disk, d);
        commit(fs, st, &[e], &[], (false, stats), |st| st.disk = saved)?;
    }
    Ok(())
}

/// Punching a hole inside the size: the partial pages at its edges copied
/// with their bytes in the range zeroed, the whole pages between unmapped
/// by punch entries; all in one append.
pub(super) fn punch<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    end: u64,
    stats: &Stats,
) -> Result<()> {
    let end = end.min(st.disk.size);
    if off >= end {
        return Ok(());
    }
    let edges: Vec<(u64, u64, u64)> = partial_edges(off, end)
        .filter(|&(fb, _, _)| st.map.get(fb).is_some())
        .collect();
    let fresh = fs
        .blocks()
        .alloc_many(edges.len(), None)
        .ok_or(FsError::NoSpace)?;
    let pages: Vec<(u64, u64)> = edges
        .iter()
        .map(|e| e.0)
        .zip(fresh.iter().copied())
        .collect();
    let old_size = st.disk.size;
    copy_pages(fs, st, old_size, &pages, &mut |fb, buf| {
        let &(_, s, e) = edges.iter().find(|x| x.0 == fb).expect("an edge");
        let bstart = fb * BLOCK_SIZE;
        buf[(s - bstart) as usize..(e - bstart) as usize].fill(0);
    });
    let now = fs.now();
    let mut d = st.disk.clone();
    (d.mtime, d.ctime) = (now, now);
    let mut entries = write_entries(&pages, &d);
    let (lo, hi) = (off.div_ceil(BLOCK_SIZE), end / BLOCK_SIZE);
    let mapped = st.map.next_mapped(lo, hi.max(lo));
    if let Some(first) = mapped {
        let mut at = first;
        while at < hi {
            let n = (hi - at).min(u64::from(u32::MAX));
            entries.push(Entry {
                pages: n as u32,
                pgoff: at,
                ..entry(EntryKind::Punch, &d)
            });
            at += n;
        }
    }
    if entries.is_empty() {
        return Ok(());
    }
    let saved = std::mem::replace(&mut st.disk, d);
    commit(fs, st, &entries, &fresh, (false, stats), |st| {
        st.disk = saved;
    })
}
