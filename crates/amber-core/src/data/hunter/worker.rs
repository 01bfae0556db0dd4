//! The metadata workers (hunter.txt §III-B, §III-E): each wakes every
//! interval and persists up to one batch (2^18 updates by default) from
//! each of its queues, so the flushing never takes the foreground's place
//! for long. A writer whose queue passes half its bound wakes them early,
//! so on a spare core the queue is persisted beside the writer instead of
//! by it when it fills. With no interval ("never", Figure 7's INFTY) they
//! sleep until unmount, and only fsync, full queues and unmount persist.

use super::Shared;
use crate::fs::Core;
use amber_pmem::PmDevice;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Stops the workers and waits out a turn in progress (amber's buffer
/// write-back thread uses it too).
#[derive(Default)]
pub(in crate::data) struct Control {
    stop: AtomicBool,
    /// A wake-up asked for while the workers were busy: the next sleep
    /// returns at once.
    early: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// Held by a worker for a whole turn.
    turn: Mutex<()>,
}

impl Control {
    /// Held for a whole turn, so `stop` returns only once none runs.
    pub fn turn(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.turn.lock()
    }
}

impl Control {
    pub fn stop(&self) {
        {
            let _g = self.lock.lock();
            self.stop.store(true, Relaxed);
            self.wake.notify_all();
        }
        drop(self.turn.lock());
    }

    /// Wakes the workers now (a queue is filling).
    pub fn wake(&self) {
        let _g = self.lock.lock();
        self.early.store(true, Relaxed);
        self.wake.notify_all();
    }

    /// Sleeps for `interval` (forever with None) or until woken; false
    /// once stopped.
    pub fn sleep(&self, interval: Option<Duration>) -> bool {
        let mut g = self.lock.lock();
        if !self.stop.load(Relaxed) && !self.early.swap(false, Relaxed) {
            match interval {
                Some(d) => {
                    self.wake.wait_for(&mut g, d);
                }
                None => self.wake.wait(&mut g),
            }
        }
        !self.stop.load(Relaxed)
    }
}

/// Starts `workers` threads; worker `w` owns the queues `q` with
/// `q mod workers == w`.
pub(super) fn spawn<D: PmDevice>(sh: &Arc<Shared>, core: Weak<Core<D>>) {
    let n = sh.opts.workers;
    for w in 0..n {
        let (sh, core) = (Arc::clone(sh), core.clone());
        let _ = std::thread::Builder::new()
            .name(format!("amber-hunter-{w}"))
            .spawn(move || run(&sh, &core, w, n));
    }
}

fn run<D: PmDevice>(sh: &Shared, core: &Weak<Core<D>>, w: usize, n: usize) {
    while sh.control.sleep(sh.opts.interval) {
        let _turn = sh.control.turn();
        let Some(fs) = core.upgrade() else { return };
        if fs.check_writable().is_err() {
            return;
        }
        let mut budget = sh.opts.batch;
        for q in (w..sh.queues.count()).step_by(n) {
            if budget == 0 {
                break;
            }
            match sh.queues.persist_batch(&fs, &sh.stats, q, budget) {
                Ok(k) => budget = budget.saturating_sub(k),
                // The core is poisoned; writes are refused from now on.
                Err(_) => return,
            }
        }
        sh.stats.worker_turns.fetch_add(1, Relaxed);
    }
}
