//! The metadata workers (hunter.txt §III-B, §III-E): each wakes every
//! interval and persists up to one batch (2^18 updates by default) from
//! each of its queues, so the flushing never takes the foreground's place
//! for long. A writer whose queue passes half its bound wakes them early,
//! so on a spare core the queue is persisted beside the writer instead of
//! by it when it fills. With no interval ("never", Figure 7's INFTY) they
//! sleep until unmount, and only fsync, full queues and unmount persist.

use super::Shared;
use crate::data::control::spawn as spawn_thread;
use crate::fs::Core;
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};

/// Starts `workers` threads; worker `w` owns the queues `q` with
/// `q mod workers == w`.
pub(super) fn spawn<D: PmDevice>(sh: &Arc<Shared>, core: Weak<Core<D>>) {
    let n = sh.opts.workers;
    for w in 0..n {
        let (sh, core) = (Arc::clone(sh), core.clone());
        spawn_thread(format!("amber-hunter-{w}"), move || run(&sh, &core, w, n));
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
            match sh.queues.persist_batch(fs.context(), &sh.stats, q, budget) {
                Ok(k) => budget = budget.saturating_sub(k),
                // The core is poisoned; writes are refused from now on.
                Err(_) => return,
            }
        }
        sh.stats.worker_turns.fetch_add(1, Relaxed);
    }
}
