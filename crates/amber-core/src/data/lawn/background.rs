//! The idle-time write-back thread (lawn.txt §4.1): when no small write
//! has arrived for a while, it writes the least recently written slices
//! back to their files until each sub-zone has the configured share of
//! its slots free (all, by default), so bursts find free slots instead of
//! evicting in the critical path, and reads of an idle file copy it in one
//! piece instead of slice by slice from scattered slots. The extra PM
//! writes happen off the critical path, when nothing else is running.

use super::ZoneOptions;
use super::{slices, BlockLookup, Stats};
use crate::data::control::{spawn as spawn_thread, Control};
use crate::data::Context;
use crate::error::Result;
use crate::fs::Core;
use amber_pmem::PmDevice;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// Slices written back per sub-zone visit; between visits the thread
/// checks again that the file system is still idle.
const BATCH: usize = 256;

/// What the policy and its thread share.
pub(super) struct Shared {
    pub stats: Stats,
    /// Where the files' blocks are (`Lawn::new`).
    pub lookup: BlockLookup,
    opts: ZoneOptions,
    /// Bumped by every write: the thread runs only while it stands still.
    activity: AtomicU64,
    control: Control,
}

impl Shared {
    pub fn new(opts: ZoneOptions, lookup: BlockLookup) -> Shared {
        Shared {
            stats: Stats::default(),
            lookup,
            opts,
            activity: AtomicU64::new(0),
            control: Control::default(),
        }
    }

    pub fn note_activity(&self) {
        self.activity.fetch_add(1, Relaxed);
    }

    /// Stops the thread (unmount) and waits out a pass in progress, so
    /// nothing is written after this returns. The caller holds no inode
    /// lock (a pass takes them).
    pub fn stop(&self) {
        self.control.stop();
    }
}

/// Starts the thread. Without it the policy stays correct: writers write
/// back or fall back to copy-on-write when the zone is full.
pub(super) fn spawn<D: PmDevice>(sh: &Arc<Shared>, core: Weak<Core<D>>) {
    let sh = Arc::clone(sh);
    spawn_thread("amber-lawn".into(), move || run(&sh, &core));
}

/// Every `idle` interval with no write since the last look, one pass.
fn run<D: PmDevice>(sh: &Shared, core: &Weak<Core<D>>) {
    let mut seen = sh.activity.load(Relaxed);
    while sh.control.sleep(Some(sh.opts.idle)) {
        let now = sh.activity.load(Relaxed);
        if now != seen {
            seen = now;
            continue;
        }
        let Some(fs) = core.upgrade() else { return };
        let _turn = sh.control.turn();
        if sh.control.stopped() || fs.check_writable().is_err() {
            return;
        }
        if let Err(e) = pass(sh, fs.context(), seen) {
            // A failed persist poisoned the core; stop.
            let _ = fs.guard::<()>(Err(e));
            return;
        }
    }
}

/// Writes back the oldest slices of each sub-zone until it has its share
/// of free slots, a write arrives or the thread is stopped.
fn pass<D: PmDevice>(sh: &Shared, fs: Context<'_, D>, seen: u64) -> Result<()> {
    let idle = || sh.activity.load(Relaxed) == seen && !sh.control.stopped();
    write_back_until(sh, fs, sh.opts.idle_free_pct, idle)
}

/// Writes the oldest slices back until each sub-zone has its idle share
/// of free slots — by default every slice — at a clean unmount, after
/// `Shared::stop`: the next mount, a single-process start among them,
/// then judges an empty zone instead of building DRAM state for every
/// slice (1.7 s and 1 GB of it after 3 s of 128 B overwrites on a 2 GiB
/// pool).
pub(super) fn write_back_at_unmount<D: PmDevice>(sh: &Shared, fs: Context<'_, D>) -> Result<()> {
    write_back_until(sh, fs, sh.opts.idle_free_pct, || true)
}

/// Writes back the oldest slices of each sub-zone until `pct` percent of
/// its slots are free, none can go back or `go_on` says stop.
fn write_back_until<D: PmDevice>(
    sh: &Shared,
    fs: Context<'_, D>,
    pct: u8,
    go_on: impl Fn() -> bool,
) -> Result<()> {
    let Some(zone) = fs.zone() else {
        return Ok(());
    };
    for idx in 0..zone.count() {
        loop {
            let (total, free) = {
                let sub = zone.lock(idx);
                (sub.slot_count() as u64, sub.free_count() as u64)
            };
            let want = total * u64::from(pct) / 100;
            if free >= want || !go_on() {
                break;
            }
            let n = BATCH.min((want - free) as usize);
            match slices::write_back_oldest(fs, zone, sh.lookup, idx, n, None)? {
                0 => break,
                k => sh.stats.idle_written_back.fetch_add(k as u64, Relaxed),
            };
        }
    }
    Ok(())
}
