//! The direct-access policy (PMFS / ext2-XIP): reads copy straight from PM
//! into the caller's buffer; writes go in place, each durable on return.
//!
//! Crash argument (docs/design.md, "Data path"):
//! * Bytes past a file's size are never shown, so they need no care until
//!   the size grows over them: every size increase first zeroes whatever
//!   mapped bytes the new range exposes.
//! * A new block inside the old size (a hole being filled) must hold its
//!   data before the pointer to it is durable; new map nodes must be whole
//!   before anything links to them. Both get their own fence, only when
//!   they occur.
//! * Pointers into existing nodes are 8-byte stores, a new root is one
//!   16-byte store of (root, height); they are durable before the inode's
//!   first line (size, block count, times), which is the commit point of a
//!   size-growing write.
//! * A pure overwrite costs one fence, for the data. Its new mtime/ctime
//!   stay in DRAM until fsync, unmount or the inode's next transaction
//!   (flushing the inode line on every write cost ~190 ns here: clwb evicts
//!   the line). An overwrite is not atomic: after a crash each byte is old
//!   or new.

use super::{DataPolicy, FallocStep, FALLOC_CHUNK};
use crate::data::Context;
use crate::error::{FsError, Result};
use crate::inode::{plan_insert, plan_punch, plan_truncate, InodeState, MapPlan};
use crate::journal::Tx;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::inode::{mode, OFF_MAP_ROOT};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// Writes at least this long use non-temporal stores (measured ~2x faster
/// than store + clwb for 4 KiB on this machine; short writes would pay for
/// partial-line handling).
const NT_MIN: usize = 256;
/// A file fsync'd within this many writes is treated as fsync-heavy: its
/// overwrites persist their times in the data's fence.
pub(super) const FSYNC_HEAVY_WRITES: u32 = 4;

/// The direct-access policy.
pub struct Direct;

pub(super) fn block_range(off: u64, end: u64) -> std::ops::RangeInclusive<u64> {
    off / BLOCK_SIZE..=(end - 1) / BLOCK_SIZE
}

/// The partial blocks of `[off, end)` as (file block, start, end) of the
/// bytes inside the range: at most two, its first and last, since every
/// block between is whole. A punch zeroes these and unmaps the rest, so it
/// never visits the blocks of a range, which may be 2^36 long.
pub(super) fn partial_edges(off: u64, end: u64) -> impl Iterator<Item = (u64, u64, u64)> {
    let (head, tail) = (off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE);
    let edges = [Some(head), (tail != head).then_some(tail)];
    edges.into_iter().flatten().filter_map(move |fb| {
        let bstart = fb * BLOCK_SIZE;
        let (s, e) = (off.max(bstart), end.min(bstart + BLOCK_SIZE));
        (e - s < BLOCK_SIZE).then_some((fb, s, e))
    })
}

/// Allocates a block for every unmapped file block of `[off, end)` and
/// plans linking it; all or nothing (on ENOSPC nothing stays allocated).
pub(super) fn allocate<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    off: u64,
    end: u64,
) -> Result<(MapPlan, Vec<(u64, u64)>)> {
    let dev = &**fs.device();
    let l = fs.layout();
    let mut plan = MapPlan::new(st.disk.map_root, st.disk.map_height);
    let mut new_blocks: Vec<(u64, u64)> = Vec::new();
    let mut nodes: Vec<u64> = Vec::new();
    let first = off / BLOCK_SIZE;
    let mut hint = first
        .checked_sub(1)
        .and_then(|f| st.map.get(f))
        .map(|b| b + 1);
    let mut failed = None;
    for fb in block_range(off, end) {
        if let Some(b) = st.map.get(fb) {
            hint = Some(b + 1);
            continue;
        }
        let Some(b) = fs.blocks().alloc(hint) else {
            failed = Some(FsError::NoSpace);
            break;
        };
        new_blocks.push((fb, b));
        hint = Some(b + 1);
        let r = plan_insert(dev, l, &mut plan, fb, b, &mut || {
            let n = fs.blocks().alloc(None)?;
            nodes.push(n);
            Some(n)
        });
        if let Err(e) = r {
            failed = Some(e);
            break;
        }
    }
    if let Some(e) = failed {
        fs.blocks().free_all(&nodes);
        new_blocks.iter().for_each(|(_, b)| fs.blocks().free(*b));
        return Err(e);
    }
    Ok((plan, new_blocks))
}

/// Links planned blocks: new map nodes, and a new block filling a hole
/// inside the old size, are fenced before anything points at them; then
/// the pointer stores and the (root, height) store. The caller fences
/// before the inode line. Returns the new root, if any.
pub(super) fn link<D: PmDevice>(
    fs: Context<'_, D>,
    st: &InodeState,
    plan: &MapPlan,
    new_blocks: &[(u64, u64)],
    old_size: u64,
) -> Result<Option<(u64, u8)>> {
    let dev = &**fs.device();
    let l = fs.layout();
    let hole_inside = new_blocks.iter().any(|(fb, _)| fb * BLOCK_SIZE < old_size);
    plan.write_nodes(dev, l);
    if !plan.new_nodes.is_empty() || hole_inside {
        fs.drain()?;
    }
    for &(o, v) in &plan.stores {
        dev.store_u64(o, v);
        dev.flush(o, 8);
    }
    let new_root = plan.new_root();
    if let Some((root, height)) = new_root {
        let o = l.inode_offset(st.ino) + OFF_MAP_ROOT as u64;
        dev.store_u128(o, root as u128 | (height as u128) << 64);
        dev.flush(o, 16);
    }
    Ok(new_root)
}

/// Records linked blocks in the DRAM inode.
pub(super) fn record_links(
    st: &mut InodeState,
    plan: &MapPlan,
    new_blocks: &[(u64, u64)],
    root: Option<(u64, u8)>,
) {
    st.disk.blocks += (new_blocks.len() + plan.new_nodes.len()) as u64;
    if let Some((r, h)) = root {
        st.disk.map_root = r;
        st.disk.map_height = h;
    }
    for &(fb, b) in new_blocks {
        st.map.set(fb, b);
    }
}

/// Zeroes the mapped bytes of `[from, to)` so a size increase over them
/// exposes zeros (they may hold an interrupted write's data or a freed
/// file's). Non-temporal stores; the caller drains.
fn zero_exposed<D: PmDevice>(fs: Context<'_, D>, st: &InodeState, from: u64, to: u64) {
    if from >= to {
        return;
    }
    let dev = &**fs.device();
    for (f, b) in st.map.mapped_in(from / BLOCK_SIZE, to.div_ceil(BLOCK_SIZE)) {
        let bstart = f * BLOCK_SIZE;
        let s = from.max(bstart);
        let e = to.min(bstart + BLOCK_SIZE);
        dev.zero_nt(fs.layout().block_offset(b) + (s - bstart), e - s);
    }
}

/// What every data write does to the DRAM inode: new mtime/ctime, one
/// more write since the last fsync, and the POSIX kill-privileges rule (a
/// write by anyone drops set-user-id, and set-group-id when group-execute
/// is set). Returns whether the mode changed (then it must be persisted).
pub(super) fn note_write<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState) -> bool {
    let now = fs.now();
    let d = &mut st.disk;
    let old_mode = d.mode;
    d.mode &= !mode::S_ISUID_BIT;
    if d.mode & 0o010 != 0 {
        d.mode &= !mode::S_ISGID_BIT;
    }
    d.mtime = now;
    d.ctime = now;
    st.writes_since_fsync = st.writes_since_fsync.saturating_add(1);
    old_mode != st.disk.mode
}

/// Stores the inode's first line and fences: the commit point of a
/// size-growing write.
pub(super) fn store_first_line<D: PmDevice>(fs: Context<'_, D>, st: &InodeState) -> Result<()> {
    write_first_line(fs, st);
    fs.drain()
}

/// Writes the inode's first line (mode, links, owner, size, blocks,
/// times) from the DRAM inode as one non-temporal store: no read of the
/// line that clwb evicted last time, and no flush. Every field in it is
/// changed only under the inode lock, in DRAM and on PM alike, so the DRAM
/// copy is the line's true value. The caller fences.
pub(super) fn write_first_line<D: PmDevice>(fs: Context<'_, D>, st: &InodeState) {
    let base = fs.layout().inode_offset(st.ino);
    let full = st.disk.encode();
    fs.device().write_nt(base, &full[..64]);
}

/// Persists times an overwrite left in DRAM.
fn persist_times<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
    if st.times_dirty {
        // Lines 0 and 1: mtime/ctime live in the first, atime (moved by
        // reads) in the second; both are the DRAM inode's values, as every
        // field there changes only under the inode lock.
        let base = fs.layout().inode_offset(st.ino);
        fs.device().write_nt(base, &st.disk.encode()[..128]);
        fs.drain()?;
        st.times_dirty = false;
    }
    Ok(())
}

impl<D: PmDevice> DataPolicy<D> for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn read(&self, fs: Context<'_, D>, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        let size = st.disk.size;
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        let end = off + n as u64;
        let dev = &**fs.device();
        for fb in block_range(off, end) {
            let bstart = fb * BLOCK_SIZE;
            let s = off.max(bstart);
            let e = end.min(bstart + BLOCK_SIZE);
            let dst = &mut buf[(s - off) as usize..(e - off) as usize];
            match st.map.get(fb) {
                Some(b) => dev.read(fs.layout().block_offset(b) + (s - bstart), dst),
                None => dst.fill(0),
            }
        }
        Ok(n)
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        let end = off + data.len() as u64;
        assert!(
            !data.is_empty() && end <= MAX_FILE_SIZE,
            "write outside the trait's contract"
        );
        let dev = &**fs.device();
        let l = fs.layout();
        let old_size = st.disk.size;

        // 1. Allocate every block the write needs, or nothing.
        let (plan, new_blocks) = allocate(fs, st, off, end)?;

        // 2. Bytes between the old end and the write become visible: zero.
        zero_exposed(fs, st, old_size, off);

        // 3. The data.
        let mut fresh = new_blocks.iter().peekable();
        for fb in block_range(off, end) {
            let bstart = fb * BLOCK_SIZE;
            let s = off.max(bstart);
            let e = end.min(bstart + BLOCK_SIZE);
            let src = &data[(s - off) as usize..(e - off) as usize];
            if let Some(&&(_, b)) = fresh.peek().filter(|(f, _)| *f == fb) {
                fresh.next();
                let at = l.block_offset(b);
                dev.zero_nt(at, s - bstart);
                dev.write_nt(at + (s - bstart), src);
                dev.zero_nt(at + (e - bstart), bstart + BLOCK_SIZE - e);
            } else {
                let at = l.block_offset(st.map.get(fb).expect("mapped")) + (s - bstart);
                if src.len() >= NT_MIN {
                    dev.write_nt(at, src);
                } else {
                    dev.write(at, src);
                    dev.flush(at, src.len() as u64);
                }
            }
        }

        // 4. Link new blocks, in the order the crash argument needs.
        let new_root = link(fs, st, &plan, &new_blocks, old_size)?;
        let grows = end > old_size;
        let mode_changed = note_write(fs, st);
        if !grows && new_blocks.is_empty() && !mode_changed {
            // A pure overwrite: the data's fence is the only one. Its times
            // ride along when a sync is coming anyway (O_SYNC, or a file
            // fsync'd after nearly every write); otherwise they wait.
            if sync || st.writes_since_fsync <= FSYNC_HEAVY_WRITES {
                write_first_line(fs, st);
                st.times_dirty = false;
            } else {
                st.times_dirty = true;
            }
            return fs.drain().map(|()| data.len());
        }
        fs.drain()?;

        // 5. The inode's first line commits the write.
        st.disk.size = st.disk.size.max(end);
        record_links(st, &plan, &new_blocks, new_root);
        store_first_line(fs, st)?;
        st.times_dirty = false;
        Ok(data.len())
    }

    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        if size > MAX_FILE_SIZE {
            return Err(FsError::FileTooLarge);
        }
        let old = st.disk.size;
        let now = fs.now();
        if size >= old {
            zero_exposed(fs, st, old, size);
            fs.drain()?;
            st.disk.size = size;
            st.disk.mtime = now;
            st.disk.ctime = now;
            store_first_line(fs, st)?;
            st.times_dirty = false;
            return Ok(());
        }
        let keep = size.div_ceil(BLOCK_SIZE);
        let l = fs.layout();
        let plan = plan_truncate(
            &**fs.device(),
            l,
            st.disk.map_root,
            st.disk.map_height,
            keep,
        )?;
        let mut d = st.disk.clone();
        d.size = size;
        d.blocks = d.blocks.saturating_sub(plan.freed.len() as u64);
        d.mtime = now;
        d.ctime = now;
        if let Some((root, height)) = plan.root {
            d.map_root = root;
            d.map_height = height;
        }
        let mut tx = Tx::new();
        for &(off, len) in &plan.clears {
            tx.write(off, &vec![0u8; len as usize]);
        }
        tx.inode(l, st.ino, &d);
        fs.commit(tx)?;
        fs.blocks().free_all(&plan.freed);
        st.map.truncate(keep);
        st.disk = d;
        st.times_dirty = false;
        Ok(())
    }

    fn fallocate(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<()> {
        let end = off + len;
        match mode {
            FallocStep::Allocate { keep_size } => allocate_zeroed(fs, st, off, end, keep_size),
            FallocStep::PunchHole => punch(fs, st, off, end),
        }
    }

    /// A sync write stores its times with its data, and every other change
    /// is durable on return.
    fn sync_writes_are_complete(&self) -> bool {
        true
    }

    fn fsync(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        // Data was durable on return; only times may be left in DRAM.
        // Otherwise a fence keeps the promise even for stores other
        // handles issued.
        st.writes_since_fsync = 0;
        if st.times_dirty {
            persist_times(fs, st)
        } else {
            fs.drain()
        }
    }
}

/// fallocate's allocation: zeroed blocks for the holes of `[off, end)`,
/// `FALLOC_CHUNK` at a time so a huge range never holds a list of all its
/// blocks, each piece fenced before it is linked (some may lie inside the
/// size) and committed by the inode's first line; then the size grows
/// over the range unless `keep_size`. A range with more holes than the
/// pool has free blocks fails with ENOSPC before anything changes; one
/// that runs out midway (other writers took the space) keeps the pieces
/// already linked, past the size as with `keep_size`.
pub(super) fn allocate_zeroed<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    end: u64,
    keep_size: bool,
) -> Result<()> {
    let (first, stop) = (off / BLOCK_SIZE, end.div_ceil(BLOCK_SIZE));
    let mapped = st.map.mapped_in(first, stop).count() as u64;
    if stop - first - mapped > fs.blocks().free_count() {
        return Err(FsError::NoSpace);
    }
    let old_size = st.disk.size;
    let grows = !keep_size && end > old_size;
    if grows {
        // Before the pieces: their blocks are zeroed already.
        zero_exposed(fs, st, old_size, end);
        fs.drain()?;
    }
    let mut at = off;
    while at < end {
        let to = ((at / BLOCK_SIZE + FALLOC_CHUNK as u64) * BLOCK_SIZE).min(end);
        allocate_piece(fs, st, at, to)?;
        at = to;
    }
    if grows {
        let now = fs.now();
        st.disk.size = end;
        st.disk.mtime = now;
        st.disk.ctime = now;
        store_first_line(fs, st)?;
        st.times_dirty = false;
    }
    Ok(())
}

/// One piece of `allocate_zeroed`: its holes get zeroed blocks, linked
/// after a fence and committed with the inode's block count.
fn allocate_piece<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    end: u64,
) -> Result<()> {
    let dev = &**fs.device();
    let (plan, new_blocks) = allocate(fs, st, off, end)?;
    if new_blocks.is_empty() {
        return Ok(());
    }
    for &(_, b) in &new_blocks {
        dev.zero_nt(fs.layout().block_offset(b), BLOCK_SIZE);
    }
    fs.drain()?;
    let root = link(fs, st, &plan, &new_blocks, u64::MAX)?;
    fs.drain()?;
    st.disk.ctime = fs.now();
    record_links(st, &plan, &new_blocks, root);
    store_first_line(fs, st)?;
    st.times_dirty = false;
    Ok(())
}

/// Punching a hole: partial blocks at the edges are zeroed in place; whole
/// blocks are unmapped leaf by leaf, each step one transaction (a crash
/// between steps leaves part of the range punched, which reads as zeros
/// like the rest: the contents are the same either way).
fn punch<D: PmDevice>(fs: Context<'_, D>, st: &mut InodeState, off: u64, end: u64) -> Result<()> {
    let size = st.disk.size;
    let end = end.min(size);
    if off >= end {
        return Ok(());
    }
    let l = fs.layout();
    let dev = &**fs.device();
    let first_whole = off.div_ceil(BLOCK_SIZE);
    let end_whole = end / BLOCK_SIZE;
    for (fb, s, e) in partial_edges(off, end) {
        if let Some(b) = st.map.get(fb) {
            let bstart = fb * BLOCK_SIZE;
            dev.zero_nt(l.block_offset(b) + (s - bstart), e - s);
        }
    }
    fs.drain()?;
    let steps = plan_punch(
        dev,
        l,
        st.disk.map_root,
        st.disk.map_height,
        first_whole,
        end_whole,
    )?;
    let now = fs.now();
    for step in steps {
        let mut d = st.disk.clone();
        let mut tx = Tx::new();
        match step.clear {
            Some((o, len)) => tx.write(o, &vec![0u8; len as usize]),
            None => {
                d.map_root = 0;
                d.map_height = 0;
            }
        }
        d.blocks = d.blocks.saturating_sub(step.freed.len() as u64);
        d.mtime = now;
        d.ctime = now;
        tx.inode(l, st.ino, &d);
        fs.commit(tx)?;
        for &(fb, b) in &step.freed {
            st.map.remove(fb);
            fs.blocks().free(b);
        }
        st.disk = d;
    }
    st.times_dirty = false;
    Ok(())
}
