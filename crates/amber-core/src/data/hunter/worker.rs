//! The metadata workers (hunter.txt §III-B, §III-E): each wakes every
//! interval and persists up to one batch (2^18 updates by default) from
//! each of its queues, so the flushing never takes the foreground's place
//! for long. A writer whose queue passes half its bound wakes them early,
//! so on a spare core the queue is persisted beside the writer instead of
//! by it when it fills. With no interval ("never", Figure 7's INFTY) they
//! sleep until unmount, and only fsync, full queues and unmount persist.

use super::Shared;
use crate::data::control::{spawn as spawn_thread, Nap};
use crate::fs::Core;
use amber_pmem::PmDevice;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The longest a worker sleeps before it looks whether its pool was
/// dropped without an unmount (a crash in a test, a program that never
/// unmounted): it then ends instead of sleeping out its interval, or
/// forever under `hunter_interval=never`.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Starts `workers` threads; worker `w` owns the queues `q` with
/// `q mod workers == w`.
pub(super) fn spawn<D: PmDevice>(sh: &Arc<Shared>, core: Weak<Core<D>>) {
    let n = sh.opts.workers;
    for w in 0..n {
        let (sh, core) = (Arc::clone(sh), core.clone());
        spawn_thread(format!("amber-hunter-{w}"), move || run(&sh, &core, w, n));
    }
}

/// Turns every interval (from the end of the last) or when woken, until
/// stopped or the pool is gone.
fn run<D: PmDevice>(sh: &Shared, core: &Weak<Core<D>>, w: usize, n: usize) {
    let mut due = sh.opts.interval.map(|d| Instant::now() + d);
    loop {
        let left = due.map_or(IDLE_CHECK, |t| {
            t.saturating_duration_since(Instant::now()).min(IDLE_CHECK)
        });
        match sh.control.nap(left) {
            Nap::Stopped => return,
            Nap::Elapsed if due.is_none_or(|t| Instant::now() < t) => {
                if core.strong_count() == 0 {
                    return;
                }
                continue;
            }
            Nap::Woken | Nap::Elapsed => {}
        }
        let _turn = sh.control.turn();
        let Some(fs) = core.upgrade() else { return };
        if fs.check_writable().is_err() || !turn(sh, &fs, w, n) {
            return;
        }
        due = sh.opts.interval.map(|d| Instant::now() + d);
    }
}

/// One batch from each of worker `w`'s queues; false once the core is
/// poisoned (writes are refused from now on).
fn turn<D: PmDevice>(sh: &Shared, fs: &Core<D>, w: usize, n: usize) -> bool {
    let mut budget = sh.opts.batch;
    for q in (w..sh.queues.count()).step_by(n) {
        if budget == 0 {
            break;
        }
        match sh.queues.persist_batch(fs.context(), &sh.stats, q, budget) {
            Ok(k) => budget = budget.saturating_sub(k),
            Err(_) => return false,
        }
    }
    sh.stats.worker_turns.fetch_add(1, Relaxed);
    true
}
