//! Write-back: the durable-prefix rule, and the background threads.
//!
//! Lock order is always inode → pool. A thread picks a victim under the
//! pool lock (taking it off the LRW list and marking it busy, so nobody
//! reuses it), drops the pool lock, then looks up and write-locks the
//! victim's inode through the core, re-checks that the file still owns
//! the block, and writes back under the inode lock like fsync does.
//! Readers hold the same inode lock, so a read concurrent with write-back
//! sees either the DRAM copy or the PM copy written from it: the newest
//! data either way.

use super::direct::{allocate, link, record_links, store_first_line};
use super::index::{self, FileBuf};
use super::{bump, runs, Shared, Variant};
use crate::data::control::spawn as spawn_thread;
use crate::data::Context;
use crate::error::Result;
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Writes back, in ascending file-block order, every dirty buffered
/// block of the file below `upto_fb`, then grows the durable size to
/// `durable` (if larger) exactly as the direct path commits a growing
/// write: data and pointer stores, fence, the inode's first line, fence.
/// `durable` must not pass `upto_fb`'s start nor the logical size, so the
/// durable size only ever covers durable data. Blocks stay buffered,
/// clean.
pub(super) fn persist_prefix<D: PmDevice>(
    sh: &Shared,
    fs: Context<'_, D>,
    st: &mut InodeState,
    file: &mut FileBuf,
    upto_fb: u64,
    durable: u64,
) -> Result<()> {
    let old = st.disk.size;
    let new = durable.max(old);
    assert!(new <= st.size(), "durable size past the logical size");
    assert!(
        new <= old || new <= upto_fb.saturating_mul(BLOCK_SIZE),
        "durable size {new} past the written-back prefix (block {upto_fb})"
    );
    zero_uncovered(sh, fs, st, file, upto_fb, old, new);
    let todo: Vec<u64> = file.dirty.range(..upto_fb).copied().collect();
    write_blocks(sh, fs, st, file, &todo, old)?;
    if new > old {
        fs.drain()?;
        st.disk.size = new;
        store_first_line(fs, st)?;
        st.times_dirty = false;
    } else if !todo.is_empty() {
        fs.drain()?;
    }
    st.buffered_size = st.buffered_size.filter(|&s| s > st.disk.size);
    Ok(())
}

/// Writes back block `fb` (dirty, buffered) alone when it lies wholly
/// below the durable size: an overwrite needs no prefix (the size does
/// not move). Otherwise the durable-prefix rule applies: everything dirty
/// below it first, and the durable size grows over it.
pub(super) fn persist_block<D: PmDevice>(
    sh: &Shared,
    fs: Context<'_, D>,
    st: &mut InodeState,
    file: &mut FileBuf,
    fb: u64,
) -> Result<()> {
    let end = (fb + 1) * BLOCK_SIZE;
    if end <= st.disk.size {
        if file.dirty.contains(&fb) {
            write_blocks(sh, fs, st, file, &[fb], st.disk.size)?;
            fs.drain()?;
        }
        return Ok(());
    }
    let target = st.size().min(end);
    persist_prefix(sh, fs, st, file, fb + 1, target)
}

/// Writes back the dirty lines of buffered blocks `todo` (ascending),
/// mapping new blocks as the direct path does; `old` is the durable size
/// (a new block filling a hole below it is fenced before its pointer).
/// The caller fences.
fn write_blocks<D: PmDevice>(
    sh: &Shared,
    fs: Context<'_, D>,
    st: &mut InodeState,
    file: &mut FileBuf,
    todo: &[u64],
    old: u64,
) -> Result<()> {
    let dev = &**fs.device();
    let l = fs.layout();
    let mut img = vec![0u8; BLOCK_SIZE as usize];
    for &fb in todo {
        let slot = *file.blocks.get(&fb).expect("dirty blocks are buffered");
        let (dirty, valid) = {
            let p = sh.pool.lock();
            let d = p.dirty(slot);
            assert!(d != 0, "block {fb} listed dirty has no dirty line");
            img.copy_from_slice(p.block(slot));
            (d, p.valid(slot))
        };
        let bstart = fb * BLOCK_SIZE;
        let lines = match st.map.get(fb) {
            Some(b) => {
                // Only the dirty lines (CLFW); the whole valid block
                // without it.
                let lines = if sh.variant == Variant::NoClfw {
                    valid
                } else {
                    dirty
                };
                let at = l.block_offset(b);
                for (s, e) in runs(lines) {
                    dev.write_nt(at + s, &img[s as usize..e as usize]);
                }
                lines
            }
            None => {
                // A new block: whole, with zeros where DRAM holds nothing
                // (a hole or past the end reads as zeros), fenced by
                // `link` before the pointer if it fills a hole.
                let (plan, fresh) = allocate(fs, st, bstart, bstart + BLOCK_SIZE)?;
                assert_eq!(fresh.len(), 1, "one unmapped block, one new block");
                for (s, e) in runs(!valid) {
                    img[s as usize..e as usize].fill(0);
                }
                dev.write_nt(l.block_offset(fresh[0].1), &img);
                let root = link(fs, st, &plan, &fresh, old)?;
                record_links(st, &plan, &fresh, root);
                u64::MAX
            }
        };
        sh.pool.lock().clean(slot);
        file.dirty.remove(&fb);
        bump(&sh.stats.lines_written_back, lines.count_ones() as u64);
        bump(&sh.stats.blocks_written_back, 1);
    }
    Ok(())
}

/// Zeroes the mapped bytes of `[from, to)` (between the old and new
/// durable end: about to become visible, and PM there may hold anything),
/// except whole lines the write-back below rewrites anyway. Writing a
/// line twice costs PM bandwidth (a partly filled last block would have
/// its tail zeroed, then its new lines written over the zeros).
/// Non-temporal stores; the caller fences.
fn zero_uncovered<D: PmDevice>(
    sh: &Shared,
    fs: Context<'_, D>,
    st: &InodeState,
    file: &FileBuf,
    upto_fb: u64,
    from: u64,
    to: u64,
) {
    if from >= to {
        return;
    }
    for (f, b) in st.map.mapped_in(from / BLOCK_SIZE, to.div_ceil(BLOCK_SIZE)) {
        let at = fs.layout().block_offset(b);
        let bstart = f * BLOCK_SIZE;
        let (s, e) = (
            from.max(bstart) - bstart,
            to.min(bstart + BLOCK_SIZE) - bstart,
        );
        let rewritten = match file.blocks.get(&f).filter(|_| f < upto_fb) {
            Some(&slot) => {
                let p = sh.pool.lock();
                match sh.variant {
                    Variant::NoClfw if p.dirty(slot) != 0 => p.valid(slot),
                    _ => p.dirty(slot),
                }
            }
            None => 0,
        };
        for (rs, re) in runs(!rewritten) {
            let (zs, ze) = (rs.max(s), re.min(e));
            if zs < ze {
                fs.device().zero_nt(at + zs, ze - zs);
            }
        }
    }
}

/// Writes back and frees one victim: the least recently written block,
/// or (with `older_than`) only one last written before that. Returns
/// whether there was one.
fn evict_one<D: PmDevice>(
    fs: Context<'_, D>,
    sh: &Shared,
    older_than: Option<Instant>,
) -> Result<bool> {
    let Some((slot, (ino, fb))) = sh.pool.lock().take_victim(older_than) else {
        return Ok(false);
    };
    let r = match fs.inode(ino) {
        Ok(r) => r,
        Err(e) => {
            // Still owned means the file still has it: leave it be.
            sh.pool.lock().finish_victim(slot, false);
            return Err(e);
        }
    };
    let mut st = r.write();
    let owned = index::get(&st).and_then(|f| f.blocks.get(&fb)) == Some(&slot);
    if !owned {
        // The owner let go (truncate, unlink, eviction) while we waited.
        let mut p = sh.pool.lock();
        assert_eq!(p.owner(slot), None, "a disowned block keeps no owner");
        p.finish_victim(slot, true);
        return Ok(true);
    }
    let res = index::with(&mut st, |st, file| {
        persist_block(sh, fs, st, file, fb)?;
        file.blocks.remove(&fb);
        Ok(())
    });
    sh.pool.lock().finish_victim(slot, res.is_ok());
    res.map(|()| true)
}

/// Below the low mark: evicts until the high mark. Then evicts blocks
/// last written longer ago than the age. At most `max_blocks` in all.
pub(super) fn evict_some<D: PmDevice>(
    fs: Context<'_, D>,
    sh: &Shared,
    max_blocks: u64,
) -> Result<u64> {
    let mut done = 0;
    let refill = sh.pool.lock().free_count() < sh.low;
    while refill && done < max_blocks && sh.pool.lock().free_count() < sh.high {
        if !evict_one(fs, sh, None)? {
            break;
        }
        done += 1;
    }
    let cutoff = Instant::now().checked_sub(sh.age);
    while done < max_blocks {
        let Some(t) = cutoff else { break };
        if !evict_one(fs, sh, Some(t))? {
            break;
        }
        done += 1;
    }
    Ok(done)
}

/// Writes back and frees up to `max_blocks` blocks, least recently
/// written first, whatever the marks say.
pub(super) fn evict_oldest<D: PmDevice>(
    fs: Context<'_, D>,
    sh: &Shared,
    max_blocks: u64,
) -> Result<u64> {
    let mut done = 0;
    while done < max_blocks && evict_one(fs, sh, None)? {
        done += 1;
    }
    Ok(done)
}

/// Whether a thread has anything to do: free blocks under the low mark,
/// or a block older than the age. Checked without the core, so an idle
/// thread never holds the file system alive.
fn has_work(sh: &Shared, free: u32, oldest_before_cutoff: bool) -> bool {
    free < sh.low || oldest_before_cutoff
}

/// Starts the configured number of write-back threads.
pub(super) fn spawn<D: PmDevice>(sh: &Arc<Shared>, core: Weak<Core<D>>) {
    for i in 0..sh.threads {
        let (sh, core) = (Arc::clone(sh), core.clone());
        // Without a thread the policy stays correct: writers write
        // through when the pool is full, fsync and unmount write back.
        spawn_thread(format!("amber-wb{i}"), move || run(&sh, &core));
    }
}

fn run<D: PmDevice>(sh: &Shared, core: &Weak<Core<D>>) {
    // After a pass that found nothing to write back (every victim busy
    // with another thread), wait out an interval instead of spinning.
    let mut idle = false;
    loop {
        let work = {
            let mut p = sh.pool.lock();
            let check = |p: &super::buffer::Pool| {
                let old = Instant::now()
                    .checked_sub(sh.age)
                    .is_some_and(|t| p.oldest_before(t));
                has_work(sh, p.free_count(), old)
            };
            if !sh.stop.load(Relaxed) && (idle || !check(&p)) {
                sh.wake.wait_for(&mut p, sh.interval);
            }
            if sh.stop.load(Relaxed) {
                return;
            }
            check(&p)
        };
        if !work {
            continue;
        }
        let Some(fs) = core.upgrade() else { return };
        if fs.check_writable().is_err() {
            return;
        }
        let cap = sh.pool.lock().capacity() as u64;
        // A failed persist poisons the core; the next pass stops above.
        let res = evict_some(fs.context(), sh, cap);
        idle = matches!(res, Ok(0));
        let _ = fs.guard(res);
    }
}
