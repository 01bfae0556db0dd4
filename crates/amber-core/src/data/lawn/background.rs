//! The idle-time write-back thread (lawn.txt §4.1): when no small write
//! has arrived for a while, it writes the least recently written slices
//! back to their files until each sub-zone has the configured share of
//! its slots free (all, by default), so bursts find free slots instead of
//! evicting in the critical path, and reads of an idle file copy it in one
//! piece instead of slice by slice from scattered slots. The extra PM
//! writes happen off the critical path, when nothing else is running.

use super::ZoneOptions;
use super::{slices, BlockLookup, Stats};
use crate::fs::Core;
use amber_pmem::PmDevice;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
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
    stop: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// Held by the thread for a whole pass, so `stop` can wait one out.
    pass: Mutex<()>,
}

impl Shared {
    pub fn new(opts: ZoneOptions, lookup: BlockLookup) -> Shared {
        Shared {
            stats: Stats::default(),
            lookup,
            opts,
            activity: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            pass: Mutex::new(()),
        }
    }

    pub fn note_activity(&self) {
        self.activity.fetch_add(1, Relaxed);
    }

    /// Stops the thread (unmount) and waits out a pass in progress, so
    /// nothing is written after this returns. The caller holds no inode
    /// lock (a pass takes them).
    pub fn stop(&self) {
        {
            let _g = self.lock.lock();
            self.stop.store(true, Relaxed);
            self.wake.notify_all();
        }
        drop(self.pass.lock());
    }
}

/// Starts the thread. Without it the policy stays correct: writers write
/// back or fall back to copy-on-write when the zone is full.
pub(super) fn spawn<D: PmDevice>(sh: &Arc<Shared>, core: Weak<Core<D>>) {
    let sh = Arc::clone(sh);
    let _ = std::thread::Builder::new()
        .name("amber-lawn".into())
        .spawn(move || run(&sh, &core));
}

fn run<D: PmDevice>(sh: &Shared, core: &Weak<Core<D>>) {
    let mut seen = sh.activity.load(Relaxed);
    loop {
        {
            let mut g = sh.lock.lock();
            if !sh.stop.load(Relaxed) {
                sh.wake.wait_for(&mut g, sh.opts.idle);
            }
            if sh.stop.load(Relaxed) {
                return;
            }
        }
        let now = sh.activity.load(Relaxed);
        if now != seen {
            seen = now;
            continue;
        }
        let Some(fs) = core.upgrade() else { return };
        let _pass = sh.pass.lock();
        if sh.stop.load(Relaxed) || fs.check_writable().is_err() {
            return;
        }
        let Some(zone) = fs.zone() else { return };
        for idx in 0..zone.count() {
            loop {
                let (total, free) = {
                    let sub = zone.lock(idx);
                    (sub.slot_count() as u64, sub.free_count() as u64)
                };
                let want = total * sh.opts.idle_free_pct as u64 / 100;
                if free >= want || sh.activity.load(Relaxed) != seen || sh.stop.load(Relaxed) {
                    break;
                }
                let n = BATCH.min((want - free) as usize);
                match slices::write_back_oldest(fs.context(), zone, sh.lookup, idx, n, None) {
                    Ok(0) => break,
                    Ok(k) => {
                        sh.stats.idle_written_back.fetch_add(k as u64, Relaxed);
                    }
                    Err(e) => {
                        // A failed persist poisoned the core; stop.
                        let _ = fs.guard::<()>(Err(e));
                        return;
                    }
                }
            }
        }
    }
}
